"""What every simulated device module shares: simulated time, and the world and noise the ``sim`` module serves.

A device lives in the site (:mod:`pluto.sim.site`): the world as built, which under a rough noise profile differs
from the map the robot localizes against (walls a few cm off, glass, clutter). Every device builds it from the same
settings and seed, so they all meet the same site.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from typing import ClassVar, TypeVar

import numpy as np

from pluto import msgs
from pluto.runtime.module import Module, ModuleParams
from pluto.sim.module import SimSettings, fetch_settings
from pluto.sim.noise import NoiseProfile
from pluto.sim.site import Site, build_site
from pluto.sim.world import World


class SimDeviceParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Simulated devices follow the simulated time by default."""

    use_sim_time: bool = True


SP = TypeVar("SP", bound=SimDeviceParams)


class SimDevice(Module[SP]):
    """Base of the simulated hardware modules: fetches the world, the noise profile and its random generator."""

    requires: ClassVar[tuple[str, ...]] = ("sim",)
    Params = SimDeviceParams

    def load_simulation(self) -> None:
        """Ask ``sim`` for the settings; sets ``settings``, ``noise``, ``site``, ``world`` (the site's: the world as
        built) and ``rng``."""
        self.settings: SimSettings = fetch_settings(self.bus)
        self.noise: NoiseProfile = self.settings.noise_profile()
        self.site: Site = build_site(self.settings.load_world(), self.noise, self.settings.seed)
        self.world: World = self.site.world
        self.rng: np.random.Generator = self.settings.rng(self.module_name)


class TruthHistory:
    """The recent true poses of the robot (from ``Sim/Truth``), to look up where it was at a given time."""

    def __init__(self, seconds: float = 2.0) -> None:
        self.seconds = seconds
        self._poses: deque[msgs.Odometry] = deque()

    def add(self, pose: msgs.Odometry) -> None:
        if self._poses and pose.stamp < self._poses[-1].stamp:
            self._poses.clear()  # the simulation restarted
        self._poses.append(pose)
        while self._poses and self._poses[0].stamp < pose.stamp - self.seconds:
            self._poses.popleft()

    @property
    def newest(self) -> float:
        """Stamp of the newest pose, s (-inf if none)."""
        return self._poses[-1].stamp if self._poses else -math.inf

    def at(self, t: float) -> msgs.Odometry | None:
        """The pose at time ``t``, interpolated; the nearest known one outside the history; None if empty."""
        poses = list(self._poses)
        if not poses:
            return None
        if t <= poses[0].stamp:
            return poses[0]
        for before, after in itertools.pairwise(poses):
            if before.stamp <= t <= after.stamp:
                span = after.stamp - before.stamp
                f = (t - before.stamp) / span if span > 0 else 1.0
                return msgs.Odometry(
                    stamp=t,
                    x=before.x + f * (after.x - before.x),
                    y=before.y + f * (after.y - before.y),
                    theta=before.theta + f * (after.theta - before.theta),
                    v=before.v + f * (after.v - before.v),
                    omega=before.omega + f * (after.omega - before.omega),
                )
        return poses[-1]
