"""PoseProxy: the client API of the pose module (the original's pose proxy: docs/design.md, "pose and slam").

Interface 0 is ``pose/status`` (see :mod:`pluto.navigation.pose.module` for its elements). The thread is started and
stopped with the module's services; "find wall" is asked on ``pose/status`` itself (element[1] = 2), as the
original does (docs/design.md); the pose is set the original's way: stop the thread, post the robot pose to localization
with setter -1, wait until the service shows it, start the thread again.
"""

from __future__ import annotations

import math
import queue
import time
from dataclasses import dataclass
from typing import ClassVar

from pluto import msgs, names
from pluto.bus import BusTimeout
from pluto.navigation.localization.proxy import LocProxy
from pluto.navigation.pose.calibrate import WallQuery
from pluto.navigation.pose.findwall import WallReading
from pluto.runtime.proxy import Proxy

__all__ = ["PoseProxy", "PoseStatus", "WallReading"]


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

    def find_wall(self, timeout: float = 5.0) -> WallReading:
        """Ask for the longest wall in front and wait for the answer (wall-clock ``timeout`` s).

        Every status the module writes is seen (a subscription, not the newest value), and the exchange follows
        :class:`~pluto.navigation.pose.calibrate.WallQuery` (its -1, then the answer; asked again when neither
        comes).

        Raises:
            BusTimeout: no answer in time (is the pose module running and the laser scanning?).
        """
        seen: queue.SimpleQueue[msgs.FVectorState] = queue.SimpleQueue()
        watch = self.bus.create_subscription(names.POSE_STATUS, seen.put, depth=256, current=False)
        try:
            query = WallQuery()
            self.write(names.POSE_STATUS, query.request(self.get(0)))
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                try:
                    status = seen.get(timeout=min(left, 0.2))
                except queue.Empty:
                    status = None
                if status is not None and (wall := query.feed(status)) is not None:
                    return wall
                if query.unanswered:
                    self.write(names.POSE_STATUS, query.request())
            raise BusTimeout(
                f"the pose module did not answer find wall within {timeout:g} s (is the laser scanning, and "
                "localization writing Localization/Laser_Dead-Reckoning?)"
            )
        finally:
            self.bus.release(watch)

    def set_pose(self, x: float, y: float, theta: float, *, timeout: float = 5.0, restart: bool = True) -> None:
        """Set the robot's pose the original's way: stop the pose thread, post (x, y, θ) to localization with setter -1,
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
