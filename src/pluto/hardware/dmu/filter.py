"""The filtering of ``DMU/State``: low-pass filtered rates and accelerations, and the heading integrated from the
vertical rate as it was one filter delay before the newest sample, stamped with that earlier time.

Pure: no clock, no I/O. The simulated unit (:class:`pluto.hardware.dmu.sim.SimDmu`) and the Crossbow driver
(:mod:`.driver`) both feed it, so ``DMU/State`` means the same whichever unit is behind it.
"""

# Strategy: the original's DMU/State (docs/design.md) low-pass filtered the raw rates and accelerations and delayed its
# stamp "to account for the filter delay". A first-order low-pass with time constant τ delays a ramp by τ, so the
# heading, integrated without filtering, is given as it was τ before the newest sample and stamped with that time: the
# stamp is then exactly true, whatever the time between samples (a unit read late on a busy computer does not give a
# turn's heading the wrong time). The integrated heading is kept over the last τ and interpolated there. The
# filter's α = dt / (τ + dt) is the exact discretisation of the first-order lag for a held input.

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["GRAVITY", "DmuFilter", "FilteredState"]

GRAVITY = 9.81
"""m/s², the specific force an unmoving unit measures upwards."""


@dataclass(frozen=True, slots=True)
class FilteredState:
    """One output of the filter.

    Attributes:
        stamp: the time the heading is of: the sample's time less the time constant, s.
        theta: heading integrated about the vertical since the start, rad (not wrapped).
        rates: low-pass filtered angular rates about x, y, z, rad/s.
        accelerations: low-pass filtered accelerations along x, y, z, m/s².
    """

    stamp: float
    theta: float
    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]


class DmuFilter:
    """Low-pass filter of rates and accelerations with the heading integrated from the vertical rate.

    Args:
        time_constant: τ of the low-pass filter, s (also the delay of the state's stamp); > 0.

    Raises:
        ValueError: a time constant that is not positive and finite.
    """

    def __init__(self, time_constant: float = 0.1) -> None:
        if not (np.isfinite(time_constant) and time_constant > 0.0):
            raise ValueError(f"time_constant must be > 0 s, got {time_constant!r}")
        self.tau = time_constant
        self.rates = np.zeros(3)
        self.accelerations = np.array([0.0, 0.0, GRAVITY])
        self.heading = 0.0
        """The integrated heading at the newest sample (not delayed), rad."""
        self._history: deque[tuple[float, float]] = deque()  # (t, integrated heading) over the last τ

    def restart_timing(self) -> None:
        """Forget the heading's history (a new run, or samples after an outage); the heading itself is kept."""
        self._history.clear()

    def _delayed_heading(self, t: float) -> float:
        history = self._history
        if history and t < history[-1][0]:
            history.clear()  # time went back: a new run
        history.append((t, self.heading))
        target = t - self.tau
        while len(history) > 2 and history[1][0] <= target:
            history.popleft()
        times = [h[0] for h in history]
        i = bisect.bisect_right(times, target)
        if i == 0:
            return history[0][1]
        if i >= len(history):
            return history[-1][1]
        (t0, h0), (t1, h1) = history[i - 1], history[i]
        return h0 + (h1 - h0) * (target - t0) / (t1 - t0) if t1 > t0 else h1

    def update(
        self,
        t: float,
        dt: float,
        rates: tuple[float, float, float] | np.ndarray,
        accelerations: tuple[float, float, float] | np.ndarray,
        turned: float | None = None,
    ) -> FilteredState:
        """Take the sample measured at ``t``, ``dt`` s after the previous one (0 for the first).

        Args:
            t: time of the sample, s.
            dt: s since the previous sample; 0 (or less) sets the filters to this sample.
            rates: angular rates about x, y, z (z up), rad/s.
            accelerations: along x, y, z, m/s².
            turned: the heading change since the previous sample, rad; default the vertical rate times ``dt``.

        Returns:
            The filtered state, stamped ``t - time_constant``.
        """
        r = np.asarray(rates, dtype=float)
        a = np.asarray(accelerations, dtype=float)
        alpha = dt / (self.tau + dt) if dt > 0 else 1.0
        self.rates += alpha * (r - self.rates)
        self.accelerations += alpha * (a - self.accelerations)
        if dt > 0:
            self.heading += float(r[2]) * dt if turned is None else turned
        theta = self._delayed_heading(t)
        rf, af = self.rates, self.accelerations
        return FilteredState(
            stamp=t - self.tau,
            theta=theta,
            rates=(float(rf[0]), float(rf[1]), float(rf[2])),
            accelerations=(float(af[0]), float(af[1]), float(af[2])),
        )
