"""What a scan matcher (the pose and SLAM modules) works on: each laser scan with the localization service's laser
poses of its time, paired by stamp."""

from __future__ import annotations

import math
import threading
from typing import Any

from pluto import msgs, names
from pluto.runtime.module import Module

KEEP = 64
"""Values of each interface kept while they wait for their pair (about 13 s of scans)."""

ScanWithPoses = tuple[float, msgs.LaserScan, msgs.PoseEstimate, msgs.PoseEstimate | None]
"""A scan's stamp, the scan, ``Localization/Laser_Dead-Reckoning`` and ``Localization/Laser_Pose`` of its time."""


class ScanInputs:
    """The scans and the laser poses of their times, kept by stamp until a scan and its dead-reckoned laser pose are
    both in; :meth:`take` hands each such pair over once, in time order (the corrected laser pose with it if it came).

    The subscriptions fill it on the bus's executor; the module's step takes from it.

    Args:
        module: the module whose subscriptions these are.
        scan: the laser interface (``Sick/Scan_mm`` or ``Sick/Scan``).
    """

    def __init__(self, module: Module[Any], scan: str) -> None:
        self._lock = threading.Lock()
        self._scans: dict[float, msgs.LaserScan] = {}
        self._dr: dict[float, msgs.PoseEstimate] = {}
        self._corrected: dict[float, msgs.PoseEstimate] = {}
        self._done_until = -math.inf  # values up to this stamp are used or too late
        module.create_subscription(scan, self._keeper(self._scans), msgs.LaserScan, depth=KEEP)
        module.create_subscription(names.LOCALIZATION_LASER_DEAD_RECKONING, self._keeper(self._dr), depth=KEEP)
        module.create_subscription(names.LOCALIZATION_LASER_POSE, self._keeper(self._corrected), depth=KEEP)

    def _keeper(self, store: dict[float, Any]) -> Any:
        def keep(message: Any) -> None:
            with self._lock:
                if message.stamp > self._done_until:
                    store[message.stamp] = message
                    while len(store) > KEEP:
                        del store[min(store)]

        return keep

    def add(self, scan: msgs.LaserScan, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None = None) -> None:
        """Put a scan and its laser poses in by hand (tests, tools), as if they had come on the bus."""
        self._keeper(self._scans)(scan)
        self._keeper(self._dr)(dr)
        if corrected is not None:
            self._keeper(self._corrected)(corrected)

    def take(self) -> list[ScanWithPoses]:
        """The scans whose dead-reckoned laser pose has come, oldest first; anything older is dropped."""
        with self._lock:
            ready = sorted(t for t in self._scans if t in self._dr)
            pairs = [(t, self._scans.pop(t), self._dr.pop(t), self._corrected.get(t)) for t in ready]
            if ready:
                self._done_until = ready[-1]
                for store in (self._scans, self._dr, self._corrected):
                    for t in [t for t in store if t <= self._done_until]:
                        del store[t]
        return pairs

    def clear(self, *, new_run: bool = False) -> None:
        """Forget what is waiting (``new_run``: the time went back, so older stamps are welcome again)."""
        with self._lock:
            self._scans.clear()
            self._dr.clear()
            self._corrected.clear()
            if new_run:
                self._done_until = -math.inf
