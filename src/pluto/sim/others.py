"""The other robots of a simulation of several, as one robot's simulated devices meet them.

Strategy: each robot's base writes its true pose on its own ``Sim/Truth`` (``pluto/<robot>/Sim/Truth``); the devices
of every other robot read it (a reader of another robot's interface, :meth:`pluto.bus.Bus.create_subscription`) and
see that robot as a solid disc of its radius (the world file's, :class:`~pluto.sim.world.RobotPlacement`), the same
way they see a walking person (:meth:`pluto.sim.world.World.mover_circles`). So the laser and the sonar hit the other
robots' bodies, and a base's body is blocked by them as by a wall (the bumper on that side, the stall), wherever the
devices run: one process, or one per robot.

Times: the laser asks where the others were at the centre of its scan, which lies in the past (their poses are
interpolated); the base asks where they are at its step, when their newest pose is from their previous step (in
lock-step a value written during a tick is seen at the next one): it is carried forward along the robot's arc at
its velocity, at most :data:`REACH` s. Before a robot's first pose it stands where it starts.

A collision between two robots is counted by each of them (:class:`Contacts`): the base stops, as at a wall, and its
MOM entry and log say with whom and when.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pluto import msgs, names
from pluto.geometry import unicycle_step
from pluto.sim.device import TruthHistory
from pluto.sim.module import FleetMember

__all__ = ["REACH", "TOUCH", "Contacts", "OtherRobots"]

FloatArray = NDArray[np.float64]

REACH = 0.5
"""s: a robot's newest pose is carried forward at its velocity by at most this long."""

TOUCH = 0.02
"""m: bodies this close (or overlapping) touch."""


class OtherRobots:
    """The other robots' bodies, from their ``Sim/Truth``.

    Args:
        module: the device module whose subscriptions read the other robots' true poses (made now: before the time
            runs, in lock-step).
        members: the other robots (from the ``sim`` module's settings, :meth:`pluto.sim.module.SimSettings.others`).
    """

    def __init__(self, module: Any, members: Sequence[FleetMember]) -> None:
        self.members = list(members)
        self._lock = threading.Lock()  # the subscriptions add poses on the bus's threads
        self._histories = {m.name: TruthHistory() for m in self.members}
        for member in self.members:
            module.create_subscription(
                names.SIM_TRUTH, self._adder(member.name), msgs.Odometry, depth=256, robot=member.name
            )

    def _adder(self, name: str) -> Any:
        history = self._histories[name]

        def add(pose: msgs.Odometry) -> None:
            with self._lock:
                history.add(pose)

        return add

    def __len__(self) -> int:
        return len(self.members)

    def poses(self, t: float) -> list[tuple[float, float, float]]:
        """Where each robot is at time ``t`` (s): (x m, y m, θ rad), in the order of :attr:`members`."""
        out = []
        with self._lock:
            for member in self.members:
                history = self._histories[member.name]
                pose = history.at(t)
                if pose is None:
                    out.append(member.start)
                    continue
                ahead = min(t - pose.stamp, REACH)
                if ahead > 0.0:
                    out.append(unicycle_step(pose.x, pose.y, pose.theta, pose.v, pose.omega, ahead))
                else:
                    out.append((pose.x, pose.y, pose.theta))
        return out

    def discs(self, t: float) -> FloatArray:
        """``(P, 3)`` the robots at time ``t`` (s) as discs ``[x, y, radius]``, m, ready for ray casting and the
        body's collision checks."""
        if not self.members:
            return np.zeros((0, 3))
        poses = self.poses(t)
        return np.array([[x, y, m.radius] for (x, y, _), m in zip(poses, self.members, strict=True)])


class Contacts:
    """Counts a robot's collisions with the others: a new one each time its body comes to touch another robot's.

    Args:
        radius: the robot's own radius, m.
    """

    def __init__(self, radius: float) -> None:
        self.radius = radius
        self.count = 0
        """Collisions so far."""
        self.last: tuple[str, float, float, float] | None = None
        """(robot, time s, x m, y m) of the newest collision."""
        self._touching: set[str] = set()

    def update(self, t: float, x: float, y: float, names_: Sequence[str], discs: FloatArray) -> list[str]:
        """The robots the body at (x, y) (m) touches at time ``t`` (s) that it did not touch before (each one
        counted); ``discs`` are theirs, in the order of ``names_``."""
        touching = {
            name
            for name, (ox, oy, r) in zip(names_, discs.tolist(), strict=True)
            if math.hypot(ox - x, oy - y) - r <= self.radius + TOUCH
        }
        new = sorted(touching - self._touching)
        self._touching = touching
        for name in new:
            self.count += 1
            self.last = (name, t, x, y)
        return new
