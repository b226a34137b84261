"""A time-sorted series of sampled values, read at any time by linear interpolation: the inertial unit's states,
the odometry's headings and the wrist's angles as the dead reckoning looks them up by stamp.
"""

from __future__ import annotations

import bisect

__all__ = ["TimeSeries"]


class TimeSeries:
    """A time-sorted series of (t, values) with linear interpolation; stale entries are trimmed."""

    def __init__(self, keep: float) -> None:
        self.keep = keep
        self.times: list[float] = []
        self.values: list[tuple[float, ...]] = []

    def add(self, t: float, values: tuple[float, ...]) -> bool:
        """Insert a sample in time order; False if a sample with that stamp is already there or it is too old."""
        if self.times and t <= self.times[-1]:
            if t < self.times[-1] - self.keep:
                return False
            i = bisect.bisect_left(self.times, t)
            if i < len(self.times) and self.times[i] == t:
                return False
            self.times.insert(i, t)
            self.values.insert(i, values)
            return True
        self.times.append(t)
        self.values.append(values)
        if len(self.times) > 64 and self.times[0] < t - 2 * self.keep:
            cut = bisect.bisect_left(self.times, t - self.keep)
            del self.times[:cut]
            del self.values[:cut]
        return True

    def at(self, t: float) -> tuple[float, ...] | None:
        """Values interpolated at ``t``; the nearest sample outside the series; None if empty."""
        if not self.times:
            return None
        i = bisect.bisect_right(self.times, t)
        if i == 0:
            return self.values[0]
        if i == len(self.times):
            return self.values[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        f = (t - t0) / (t1 - t0)
        return tuple(a + f * (b - a) for a, b in zip(self.values[i - 1], self.values[i], strict=True))
