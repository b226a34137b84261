"""What the scenario tests share: a known room, a collector of an interface's values, a commander of the base."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pluto import msgs
from pluto.bus import Bus

# A closed 10 m x 10 m room, the robot in its middle facing +x: the east wall is 5 m ahead of its centre.
ROOM = """<?xml version="1.0" encoding="UTF-8"?>
<world name="room" version="1">
  <start x="5" y="5" theta="0"/>
  <walls>
    <wall x1="0" y1="0" x2="10" y2="0" name="south"/>
    <wall x1="10" y1="0" x2="10" y2="10" name="east"/>
    <wall x1="10" y1="10" x2="0" y2="10" name="north"/>
    <wall x1="0" y1="10" x2="0" y2="0" name="west"/>
  </walls>
</world>
"""


class Collector:
    """Every value of an interface, as it arrives (a subscription), with a condition to wait on."""

    POLL = 0.05  # s of wall time between calls of ``while_waiting``

    def __init__(self, bus: Bus, name: str, cls: type[msgs.Message]) -> None:
        self.values: list[Any] = []
        self._cond = threading.Condition()
        self._sub = bus.create_subscription(name, self._add, cls, depth=4096)

    def _add(self, value: msgs.Message) -> None:
        with self._cond:
            self.values.append(value)
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[Any], bool], timeout: float = 20.0, while_waiting: Callable[[], None] | None = None
    ) -> Any:
        """The first value (already received or still to come) for which ``predicate`` holds.

        ``while_waiting``, if given, is called about every ``POLL`` s (to keep writing a command, say).
        """
        deadline = time.monotonic() + timeout
        checked = 0
        while True:
            with self._cond:
                for value in self.values[checked:]:
                    if predicate(value):
                        return value
                checked = len(self.values)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching value on {self._sub.name} within {timeout} s")
                self._cond.wait(left if while_waiting is None else min(left, self.POLL))
            if while_waiting is not None:
                while_waiting()

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.values)


class Commander:
    """Keeps writing a velocity command to the base (it stops on commands older than 1 s of simulated time)."""

    def __init__(self, bus: Bus, v: float, omega: float) -> None:
        self._writer = bus.create_publisher("Base/Drive/Command", msgs.ActuatorState)
        self._command = msgs.ActuatorState(velocity=[v, omega])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commander")

    def _run(self) -> None:
        while True:
            self._writer.write(self._command)
            if self._stop.wait(0.02):  # a pacing interval for the writer, not a wait for a result
                break

    def __enter__(self) -> Commander:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._writer.write(msgs.ActuatorState(velocity=[0.0, 0.0]))
