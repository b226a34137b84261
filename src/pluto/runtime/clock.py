"""Time for modules: the wall clock, or the simulated time published on the ``Clock`` interface.

Every timestamp and timeout inside a module comes from its Clock, so a simulator or a log replay that publishes a
faster-than-real-time ``Clock`` makes every module follow it.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from pluto import msgs
from pluto.bus import Bus


class Clock(Protocol):
    """What a module needs of time."""

    def now(self) -> float:
        """Current time, s."""
        ...

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        """Wait until time ``t`` or until ``stop`` is set; return True if stopped."""
        ...


class WallClock:
    """The computer's clock (seconds since 1970)."""

    def now(self) -> float:
        return time.time()

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, t - time.time()))


class SimClock:
    """Follows the simulated time published on ``Clock`` (rclpy's ``use_sim_time``).

    Before the first tick, time is 0 and sleepers wait for it.
    """

    def __init__(self, bus: Bus) -> None:
        self._cond = threading.Condition()
        self._now = 0.0
        self._sub = bus.create_subscription("Clock", self._on_tick, msgs.SimTime)

    def _on_tick(self, tick: msgs.SimTime) -> None:
        with self._cond:
            self._now = max(self._now, tick.stamp)
            self._cond.notify_all()

    def now(self) -> float:
        with self._cond:
            return self._now

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        with self._cond:
            while self._now < t:
                if stop.is_set():
                    return True
                self._cond.wait(0.05)  # ticks wake us; the timeout only notices `stop`
        return stop.is_set()
