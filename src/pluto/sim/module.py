"""The ``sim`` module: simulated time and the world every simulated device lives in.

It publishes ``Clock`` (the simulated time, advancing ``rate`` times faster than the wall clock) and serves
``sim/world``: which world, noise profile and seed the simulated devices use, so they are set in one place. The
devices (``base``, ``sick``, ``wrist``, ``dmu``, ``gps``) run on the simulated time and ask for these settings when
they start.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import msgspec

from pluto import msgs
from pluto.bus import Bus, StateWriter
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams
from pluto.sim.noise import NoiseProfile, device_rng, noise_profile
from pluto.sim.world import World, load_world


class SimSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the simulated devices share (the reply of ``sim/world``)."""

    world: str
    noise: str = "ideal"
    noise_overrides: dict[str, float | bool] = msgspec.field(default_factory=dict)
    seed: int = 0
    rate: float = 1.0

    def load_world(self) -> World:
        """The world (loaded from its file)."""
        return load_world(self.world)

    def noise_profile(self) -> NoiseProfile:
        return noise_profile(self.noise, dict(self.noise_overrides))

    def rng(self, device: str) -> Any:
        """The random generator of one device."""
        return device_rng(self.seed, device)


def fetch_settings(bus: Bus, timeout: float = 5.0) -> SimSettings:
    """Ask the ``sim`` module for the simulation settings.

    Raises:
        BusTimeout: no ``sim`` module answers (start it first, or use the ``sim`` profile).
    """
    settings: SimSettings = bus.call("sim/world", None, SimSettings, timeout=timeout)
    return settings


class SimParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    world: a shipped world (office, campus, clutter) or a map file.
    rate: simulated seconds per wall-clock second (10 runs the stack ten times faster than real time).
    noise: "ideal" (the default, like the original dummies) or "realistic".
    noise_overrides: settings of the noise profile to replace, e.g. {laser_range_std = 0.02}.
    seed: seed of every random generator of the simulation.
    """

    rate_hz: float = 200.0
    world: str = "office"
    rate: float = 1.0
    noise: str = "ideal"
    noise_overrides: dict[str, float | bool] = msgspec.field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.rate <= 1000.0:
            raise ValueError(f"rate must be in (0, 1000], got {self.rate}")


class SimModule(Module):
    """Publishes the simulated time on ``Clock`` and serves the simulation settings."""

    name = "sim"
    description = "simulated time (Clock) and the world of the simulated devices"
    provides = ("Clock",)
    Params: ClassVar[type[ModuleParams]] = SimParams

    def on_configure(self) -> None:
        p = self.params
        assert isinstance(p, SimParams)
        try:
            self.world = load_world(p.world)
            noise_profile(p.noise, dict(p.noise_overrides))
        except ConfigError:
            raise
        self.settings = SimSettings(
            world=str(self.world.source or p.world),
            noise=p.noise,
            noise_overrides=dict(p.noise_overrides),
            seed=p.seed,
            rate=p.rate,
        )
        self.sim_time = 0.0
        self._wall_start: float | None = None
        self.clock_out: StateWriter[msgs.SimTime] = self.create_publisher("Clock", msgs.SimTime)
        self.create_service("world", lambda _req: self.settings)

    def step(self, now: float) -> None:
        p = self.params
        assert isinstance(p, SimParams)
        # Simulated time follows the wall clock times the rate, measured from the first step, so a late step
        # does not slow the simulation down.
        wall = time.monotonic()
        if self._wall_start is None:
            self._wall_start = wall
        self.sim_time = (wall - self._wall_start) * p.rate
        self.clock_out.write(msgs.SimTime(stamp=self.sim_time, rate=p.rate))
