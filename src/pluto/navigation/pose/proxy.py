"""PoseProxy: the client API of the pose module (the original's pose proxy, spec §7.1).

Interface 0 is ``pose/status`` (see :mod:`pluto.navigation.pose.module` for its elements). The thread is started and
stopped with the module's services; "find wall" is asked on ``pose/status`` itself (element[1] = 2), as the seed
does; the pose is set the seed's way: stop the thread, post the robot pose to localization with setter -1, wait
until the service shows it, start the thread again.
"""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pluto import msgs, names
from pluto.bus import Bus, BusTimeout
from pluto.navigation.localization.proxy import LocProxy
from pluto.navigation.pose.module import FIND_WALL, SEARCHING
from pluto.runtime.proxy import Proxy

__all__ = ["PoseProxy", "PoseStatus", "WallInFront"]


@dataclass(frozen=True)
class WallInFront:
    """The answer of "find wall": the longest wall in front of the laser.

    Attributes:
        points: scan points on it (0: none found).
        gamma: angle of its normal in the laser frame, rad.
        rho: distance from the laser to its line, m.
        covariance: (γ, ρ) covariance, row-major 2x2.
    """

    points: int
    gamma: float
    rho: float
    covariance: tuple[float, float, float, float]


@dataclass(frozen=True)
class PoseStatus:
    """``pose/status`` in words."""

    running: bool
    find_wall: int
    lost: bool
    matched: int
    relocalizations: int

    @classmethod
    def of(cls, status: msgs.FVectorState) -> PoseStatus:
        e = [*status.element, 0, 0, 0, 0, 0]
        return cls(bool(e[0]), int(e[1]), bool(e[2]), int(e[3]), int(e[4]))

    def describe(self) -> str:
        thread = "running" if self.running else "stopped"
        health = "LOST" if self.lost else "tracking"
        return (
            f"thread {thread}, {health}, {self.matched} walls matched in the last scan, "
            f"{self.relocalizations} relocalizations"
        )


class PoseProxy(Proxy):
    """Client of the pose module.

    Args:
        bus: the process's bus.
        mask: which interfaces to open (1: ``pose/status``); None opens all.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "pose"
    interfaces: ClassVar[tuple[str, ...]] = (names.POSE_STATUS,)

    def __init__(self, bus: Bus, mask: int | None = None, *, start: bool = True, timeout: float = 15.0) -> None:
        super().__init__(bus, mask, start=start, timeout=timeout)

    def status(self) -> PoseStatus | None:
        """The module's status in words, or None before it wrote one."""
        value = self.get(0)
        return PoseStatus.of(value) if isinstance(value, msgs.FVectorState) else None

    def start(self) -> bool:
        """Start the pose thread (it takes the pose from localization at its first scan)."""
        return self.start_activity()

    def stop(self) -> bool:
        """Stop the pose thread; localization's setter goes back to 0."""
        return self.stop_activity()

    def find_wall(self, timeout: float = 5.0) -> WallInFront:
        """Ask for the longest wall in front and wait for the answer (wall-clock ``timeout`` s).

        Every status the module writes is seen (a subscription, not the newest value), so its -1 and its answer are
        both seen even when they come in one step.

        Raises:
            BusTimeout: no answer in time (is the pose module running and the laser scanning?).
        """
        seen: queue.SimpleQueue[msgs.FVectorState] = queue.SimpleQueue()
        watch = self.bus.create_subscription(names.POSE_STATUS, seen.put, depth=64, current=False)
        try:
            self.write(names.POSE_STATUS, msgs.FVectorState(element=[1, FIND_WALL]))
            deadline = time.monotonic() + timeout
            searching = False
            while True:
                left = deadline - time.monotonic()
                try:
                    value = seen.get(timeout=max(left, 0.0))
                except queue.Empty:
                    raise BusTimeout(f"the pose module did not answer find wall within {timeout} s") from None
                if len(value.element) < 2:
                    continue
                code = value.element[1]
                if code == SEARCHING:
                    searching = True
                elif searching and code >= 0:
                    d = [*value.data, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan][:6]
                    return WallInFront(int(code), d[0], d[1], (d[2], d[3], d[4], d[5]))
        finally:
            self.bus.release(watch)

    def set_pose(self, x: float, y: float, theta: float, *, timeout: float = 5.0, restart: bool = True) -> None:
        """Set the robot's pose the seed's way: stop the pose thread, post (x, y, θ) to localization with setter -1,
        wait until the service shows setter -1, then start the thread again (it goes on from that pose).

        Raises:
            ValueError: a value is not finite.
            BusTimeout: localization did not take the pose in time.
        """
        values = (float(x), float(y), float(theta))
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"a pose is finite, got {values}")
        self.stop()
        with LocProxy(self.bus, 8 + 4, start=False) as loc:
            loc.post_pose([values[0], values[1], 0.0, values[2], 0.0, 0.0], -1, stamp=0.0)
            loc.wait_for_setter(-1, timeout)
        if restart:
            self.start()


def status_words(status: Sequence[int]) -> str:
    """``pose/status`` elements in words (for the CLI)."""
    return PoseStatus.of(msgs.FVectorState(element=list(status))).describe()
