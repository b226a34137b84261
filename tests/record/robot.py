"""A small stand-in robot for the recording tests: a thread that publishes a simulated Clock and sensor messages
stamped with it, and remembers everything it wrote."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from pluto import msgs
from pluto.bus import Bus


class FakeRobot:
    """Publishes ``Clock`` (every 5 ms of wall time) and, on simulated time advancing ``rate`` times faster than
    the wall clock, odometry and the inertial state at 50 Hz, a laser scan with its timing at 5 Hz, GPS at 2 Hz.

    Args:
        bus: where to publish.
        rate: simulated seconds per wall second.
        start: simulated time at the start, s.
        clock: publish ``Clock`` (else the messages are stamped with the wall clock).
    """

    def __init__(self, bus: Bus, rate: float = 1.0, start: float = 5.0, clock: bool = True) -> None:
        self.rate = rate
        self.start = start
        self.clock = clock
        self.written: dict[str, list[msgs.Message]] = {}
        self._writers: dict[str, Any] = {
            name: bus.create_publisher(name, cls)
            for name, cls in (
                ("Base/Drive/State", msgs.Odometry),
                ("DMU/State", msgs.DmuState),
                ("Sick/Scan_mm", msgs.LaserScan),
                ("Sick/Timing", msgs.ScanTiming),
                ("GPS/State", msgs.GpsFix),
            )
        }
        self._clock = bus.create_publisher("Clock", msgs.SimTime) if clock else None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="fake-robot", daemon=True)

    def _write(self, name: str, message: msgs.Message) -> None:
        self._writers[name].write(message)
        with self._lock:
            self.written.setdefault(name, []).append(message)

    def _run(self) -> None:
        wall0 = time.monotonic()
        next_odometry = next_scan = next_gps = self.start
        while not self._stop.is_set():
            t = self.start + (time.monotonic() - wall0) * self.rate if self.clock else time.time()
            if self._clock is not None:
                self._clock.write(msgs.SimTime(stamp=t, rate=self.rate))
            if not self.clock:
                next_odometry = next_scan = next_gps = min(next_odometry, t)
            if t >= next_odometry:
                next_odometry += 0.02
                self._write("Base/Drive/State", msgs.Odometry(stamp=t, x=0.5 * t, y=0.1 * math.sin(t), theta=0.2 * t))
                self._write("DMU/State", msgs.DmuState(stamp=t - 0.1, theta=0.2 * (t - 0.1), rates=[0.0, 0.0, 0.2]))
            if t >= next_scan:
                next_scan += 0.2
                ranges = [2.0 + math.sin(t + i / 50) for i in range(361)]
                angles = [-math.pi / 2 + i * math.pi / 360 for i in range(361)]
                self._write(
                    "Sick/Scan_mm",
                    msgs.LaserScan(stamp=t - 0.2, arrival=t, ranges=ranges, angles=angles, count=361),
                )
                self._write("Sick/Timing", msgs.ScanTiming(stamp=t - 0.2, count=361))
            if t >= next_gps:
                next_gps += 0.5
                self._write("GPS/State", msgs.GpsFix(stamp=t, x=0.5 * t, y=1.0, satellites=7, quality=2))
            self._stop.wait(0.005)  # the pace of the robot's loop, not a wait for a result

    def snapshot(self) -> dict[str, list[msgs.Message]]:
        with self._lock:
            return {name: list(values) for name, values in self.written.items()}

    def __enter__(self) -> FakeRobot:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def missing_between(recorded: list[Any], written: list[Any]) -> int | None:
    """How many of ``written`` lie between the first and the last of ``recorded`` but are not in it; None if
    ``recorded`` is empty or not a subsequence of ``written`` in the same order."""
    if not recorded:
        return None
    position, start = 0, None
    for value in recorded:
        try:
            position = written.index(value, position) + 1
        except ValueError:
            return None
        if start is None:
            start = position - 1
    assert start is not None
    return (position - start) - len(recorded)
