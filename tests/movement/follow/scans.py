"""Synthetic laser scans for the follow module's tests: beams cast from a scanner against discs and wall segments."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

ANGLES = np.linspace(-math.pi / 2, math.pi / 2, 361)
MAX_RANGE = 80.0


def cast(
    origin: tuple[float, float, float],
    discs: Sequence[tuple[float, float, float]] = (),
    walls: Sequence[tuple[float, float, float, float]] = (),
    angles: FloatArray = ANGLES,
) -> FloatArray:
    """Ranges (m) from a scanner at ``origin`` (x, y, heading) to discs (x, y, r) and walls (x1, y1, x2, y2);
    ``MAX_RANGE`` where a beam hits nothing."""
    ox, oy, heading = origin
    ranges = np.full(len(angles), MAX_RANGE)
    for i, a in enumerate(angles):
        ux, uy = math.cos(heading + a), math.sin(heading + a)
        best = MAX_RANGE
        for cx, cy, r in discs:
            b = ux * (cx - ox) + uy * (cy - oy)
            disc = b * b - ((cx - ox) ** 2 + (cy - oy) ** 2 - r * r)
            if disc >= 0.0 and b - math.sqrt(disc) > 0.0:
                best = min(best, b - math.sqrt(disc))
        for x1, y1, x2, y2 in walls:
            dx, dy = x2 - x1, y2 - y1
            den = ux * dy - uy * dx
            if abs(den) < 1e-12:
                continue
            t = ((x1 - ox) * dy - (y1 - oy) * dx) / den
            s = ((x1 - ox) * uy - (y1 - oy) * ux) / den
            if t > 0.0 and 0.0 <= s <= 1.0:
                best = min(best, t)
        ranges[i] = best
    return ranges


def noisy(ranges: FloatArray, rng: np.random.Generator, std: float = 0.01) -> FloatArray:
    """Ranges with Gaussian noise and rounded to the centimetre, like the scanner's (echoes only)."""
    out = ranges.copy()
    hit = out < MAX_RANGE
    out[hit] = np.round(out[hit] + rng.normal(0.0, std, int(hit.sum())), 2)
    return out
