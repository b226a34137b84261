"""A module clock the test sets, and takes back as a simulated clock does when a new run starts."""

from __future__ import annotations

import threading
from collections.abc import Callable


class ManualClock:
    """Time stands still but for :meth:`set` (on) and :meth:`jump` (back, with the jump callbacks, as a simulated
    clock does when a new run starts or a replay starts again)."""

    def __init__(self, t: float = 0.0) -> None:
        self._t = t
        self._jumps = 0
        self._cond = threading.Condition()
        self._callbacks: list[Callable[[float, float], object]] = []

    def now(self) -> float:
        with self._cond:
            return self._t

    def set(self, t: float) -> None:
        with self._cond:
            self._t = t
            self._cond.notify_all()

    def jump(self, t: float) -> None:
        """Go back to ``t`` (s) and call the jump callbacks with (old, new), on this thread."""
        with self._cond:
            old, self._t = self._t, t
            self._jumps += 1
            self._cond.notify_all()
        for callback in list(self._callbacks):
            callback(old, t)

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        with self._cond:
            jumps = self._jumps
            while self._t < t and self._jumps == jumps and not stop.is_set():
                self._cond.wait(0.01)  # set() and jump() wake it; the timeout only notices `stop`
        return stop.is_set()

    def create_jump_callback(self, callback: Callable[[float, float], object]) -> None:
        self._callbacks.append(callback)
