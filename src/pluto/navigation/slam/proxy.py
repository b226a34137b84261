"""SlamProxy: the client API of the slam module (the original's slam proxy: docs/design.md, "pose and slam").

Interface 0 is ``slam/status`` (see :mod:`pluto.navigation.slam.module` for its elements). The thread is started
and stopped with the module's services (stopping saves the map, so it may take a moment); the map is saved on
request the original's way (docs/design.md), by writing element[1] = 2 on ``slam/status`` and watching the module answer
-1 (saving), then 0 (saved).
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from pluto import msgs, names
from pluto.bus import BusTimeout
from pluto.errors import PlutoError
from pluto.navigation.slam.module import SAVE, SAVE_FAILED, SAVING
from pluto.runtime.proxy import Proxy

__all__ = ["MapInfo", "SaveFailed", "SlamProxy", "SlamStatus"]


class SaveFailed(PlutoError):
    """The slam module could not save its map (its log says why; the old file is intact)."""


@dataclass(frozen=True)
class SlamStatus:
    """``slam/status`` in words."""

    running: bool
    save: int
    walls: int
    matched: int
    saves: int

    @classmethod
    def of(cls, status: msgs.FVectorState) -> SlamStatus:
        e = [*status.element, 0, 0, 0, 0, 0]
        return cls(bool(e[0]), int(e[1]), int(e[2]), int(e[3]), int(e[4]))

    def describe(self) -> str:
        thread = "running" if self.running else "stopped"
        saving = {SAVING: "; saving the map", SAVE: "; save asked", SAVE_FAILED: "; the last save FAILED"}
        return (
            f"thread {thread}, {self.walls} walls in the map, {self.matched} matched in the last scan, "
            f"{self.saves} saves{saving.get(self.save, '')}"
        )


@dataclass(frozen=True)
class MapInfo:
    """Where the map is saved, and what it holds.

    Attributes:
        path: the map file.
        walls: walls in the map now.
        saved_walls: walls in the last saved map file (None before the first save): the seen pieces of the map's
            walls, so a wall seen on both sides of a door counts twice.
        saves: maps saved so far.
    """

    path: str
    walls: int
    saved_walls: int | None
    saves: int


class SlamProxy(Proxy):
    """Client of the slam module.

    Args:
        bus: the process's bus.
        mask: which interfaces to open (1: ``slam/status``); None opens all.
        start: start the module (its process; the thread stays stopped) if it is not running.
        timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "slam"
    interfaces: ClassVar[tuple[str, ...]] = (names.SLAM_STATUS,)

    def status(self) -> SlamStatus | None:
        """The module's status in words, or None before it wrote one."""
        value = self.get(0)
        return SlamStatus.of(value) if isinstance(value, msgs.FVectorState) else None

    def start(self) -> bool:
        """Start the slam thread (the first scan takes the pose from localization; the pose module's thread should
        be stopped)."""
        return self.start_activity()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the slam thread: the module saves the map (wall-clock ``timeout`` s for that), then localization's
        setter goes back to 0."""
        return not self.call("stop_activity", timeout=timeout)

    def map_info(self, timeout: float = 5.0) -> MapInfo:
        """Where the map is saved and how many walls it has."""
        reply: dict[str, Any] = self.call("map", None, dict, timeout=timeout)
        saved = reply.get("saved_walls")
        return MapInfo(
            str(reply["path"]), int(reply["walls"]), None if saved is None else int(saved), int(reply["saves"])
        )

    def save(self, timeout: float = 30.0) -> MapInfo:
        """Save the map and wait until it is saved (wall-clock ``timeout`` s).

        Every status the module writes is seen (a subscription, not the newest value); the request is written
        again when neither the module's -1 nor its answer came within a second (a request lost on the way).

        Raises:
            SaveFailed: the module could not write the file.
            BusTimeout: no answer in time (is the slam module running?).
        """
        seen: queue.SimpleQueue[msgs.FVectorState] = queue.SimpleQueue()
        watch = self.bus.create_subscription(names.SLAM_STATUS, seen.put, depth=256, current=False)
        try:
            saves = self._saves()
            self._request()
            deadline = time.monotonic() + timeout
            asked = time.monotonic()
            started = False
            while (left := deadline - time.monotonic()) > 0:
                try:
                    status = seen.get(timeout=min(left, 0.2))
                except queue.Empty:
                    status = None
                if status is not None and len(status.element) > 1:
                    code = int(status.element[1])
                    if code == SAVING:
                        started = True
                    elif started and code == 0:
                        return self.map_info()
                    elif started and code == SAVE_FAILED:
                        raise SaveFailed("the slam module could not save the map (see its log)")
                    elif code == 0 and len(status.element) > 4 and int(status.element[4]) > saves:
                        return self.map_info()  # its -1 came before the subscription did
                if not started and time.monotonic() - asked > 1.0:
                    self._request()
                    asked = time.monotonic()
            raise BusTimeout(f"the slam module did not save the map within {timeout:g} s (is it running?)")
        finally:
            self.bus.release(watch)

    def _saves(self) -> int:
        status = self.get(0)
        if isinstance(status, msgs.FVectorState) and len(status.element) > 4:
            return int(status.element[4])
        return 0

    def _request(self) -> None:
        status = self.get(0)
        running = int(status.element[0]) if isinstance(status, msgs.FVectorState) and status.element else 0
        self.write(names.SLAM_STATUS, msgs.FVectorState(element=[running, SAVE]))
