"""What the bus counts as values pass: the rate of an interface's values, and the messages it had to drop.

Strategy: counting sits on the hot path of every value, so a meter keeps only a bounded deque of recent times and
computes a rate when asked (MOM asks, the hot path does not); a bad message is counted every time but logged at most
once a second per interface, so garbage on the bus cannot flood the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

log = logging.getLogger("pluto.bus")


class _Meter:
    """Counts events and measures their recent rate (Hz) over the last two seconds."""

    WINDOW = 2.0

    __slots__ = ("count", "last", "times")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.times: deque[float] = deque(maxlen=256)  # the newest event times

    def tick(self, now: float) -> None:
        self.count += 1
        self.last = now
        self.times.append(now)

    def tick_many(self, now: float, n: int) -> None:
        """``n`` events at once (a batch)."""
        self.count += n
        self.last = now
        self.times.extend([now] * min(n, 256))

    def current_rate(self, now: float) -> float:
        """Events per second over the window ending ``now`` (0 when they stopped)."""
        times = [t for t in list(self.times) if now - t <= self.WINDOW]
        if len(times) < 2:
            return 0.0
        span = max(times[-1] - times[0], now - times[-1])
        return (len(times) - 1) / span if span > 0 else 0.0


class _DropCounter:
    """Counts undecodable messages per interface and logs them at most once a second each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_interface: dict[str, int] = {}
        self._last_log: dict[str, float] = {}

    def drop(self, name: str, err: Exception) -> None:
        with self._lock:
            self.by_interface[name] = self.by_interface.get(name, 0) + 1
            now = time.monotonic()
            if now - self._last_log.get(name, 0.0) < 1.0:
                return
            self._last_log[name] = now
            count = self.by_interface[name]
        log.warning("dropped a message on %s (%d so far): %s", name, count, err)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_interface.values())
