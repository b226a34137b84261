"""Walls in a laser scan: lines extracted by split-and-merge, each with its (α, r) covariance.

Strategy: split-and-merge is the fastest established line extractor and works in scan order (Nguyen et al.,
IROS 2005), which is what a laser gives. In four steps, all of them compiled with numba (:func:`_extract` and the
functions it calls, one per step): a scan is processed every 200 ms beside everything else the robot does, and in
numpy the recursion of split-and-merge costs a few dozen array calls per level, each on a handful of points, so the
calls' own overhead, not the arithmetic, would set the price. Compiled, the scan is read point by point at C speed,
and what depends only on the beams' directions (their cosines and sines, the breakpoint factor below) is computed once
per scanner layout, not per scan (:class:`_Beams`):

A range's noise σ grows with the range, as a real scanner's does: σ = ``range_sigma`` + ``range_sigma_per_m``·r
(SICK gives its LMS 5xx's statistical error as 6, 8 and 14 mm at 1-10, 10-20 and 20-30 m). Every test below that
allows for the noise allows for the noise of the points it looks at, and every weight is that point's.

1. **Runs.** Readings of -1 (a scanner error) and at ``max_range`` (no echo; within 3σ of it) are dropped. Consecutive
   valid points stay in one run unless an invalid reading lies between them or they are farther apart than the
   adaptive breakpoint distance ``r·sin Δφ / sin(λ - Δφ) + 3σ`` (Borges and Aldon): a wall at incidence up to
   90° - λ keeps its points together at any range, a step in range (a door, an object in front of a wall) breaks.
2. **Split.** A segment's point farthest from its chord (the line through its first and last point; the first
   such point between equals) beyond ``split_distance`` splits it in two; the halves, without that point (nearest a
   corner, it may lie on either wall), are tested in turn (a stack, not recursion). ``split_distance`` is for the
   noise at zero range: a point at range r is allowed 3·``range_sigma_per_m``·r more (its 3σ's growth), as a fixed
   distance would cut a far wall, whose points scatter more, into pieces too short to keep.
3. **Fit.** A weighted total-least-squares line per segment, from its weighted moments: with
   w_i = 1/σ_i², σ_i the range noise projected on the normal of the segment's chord (a range error moves a point
   along its beam, so only σ·cos(φ_i - α) of it moves the point off the line), centroid (x̄, ȳ) and central scatter
   S_xx, S_yy, S_xy give α = ½·atan2(-2·S_xy, S_yy - S_xx), r = x̄·cos α + ȳ·sin α (r < 0: negate r, add π to α).
   The covariance, with tangential coordinates t_i = -x_i·sin α + y_i·cos α, their weighted mean t_c and spread
   S_t = Σ w_i (t_i - t_c)² = sin²α·S_xx - 2·sinα·cosα·S_xy + cos²α·S_yy: Var α = 1/S_t, Cov(α, r) = t_c/S_t,
   Var r = 1/Σw_i + t_c²/S_t (the inverse of the fit's Fisher information). That covariance holds if the points
   scatter about the line as the range noise says; on a real wall (a scanner noisier than its data sheet, a wall
   that is not flat, clutter along it) they scatter more, and a covariance of the noise alone would make a long
   line look certain to a millimetre. With ``scatter``, the covariance is multiplied by the fit's variance factor
   s² = Σ w_i d_i² / (n - 2) (d_i the points' distances from the line; the scatter matrix's trace less S_t) where
   it is above 1: least squares' a-posteriori variance of unit weight.
4. **Merge.** Neighbouring lines (in scan order, with at most ``merge_gap`` between the end of one and the start of
   the next) whose difference d = (α₁ - α₂, r₁ - r₂) passes dᵀ(C₁ + C₂)⁻¹d < ``merge_chi2`` (chi-square, 2 degrees
   of freedom) are one wall: their moments add (the parallel-axis rule) and the line is fitted again, and tested
   again against its new neighbours, until no two neighbours would merge. This undoes splits made by noise.

Lines shorter than ``min_length`` or with fewer than ``min_points`` points are then dropped, and the survivors merged
once more: the two sides of a wall interrupted by a reading error or a small object become one line.

Everything is in the laser frame: x forward, y left, angles counter-clockwise, metres and radians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np
import numpy.typing as npt

from pluto.navigation.angles import compiled_wrap_angle

__all__ = ["LineFeature", "LineTable", "extract_lines", "line_table"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

_MIN_COS = 0.1
"""Smallest |cos(incidence)| used in a point's weight: beyond about 84° from the normal a point's error is no longer
mostly along its beam (beam width, mixed pixels), so its weight stops growing."""


@dataclass(frozen=True, slots=True)
class LineFeature:
    """A line (a wall) seen in one scan, in the laser frame.

    The line is the set of points p with p·(cos α, sin α) = r.

    Attributes:
        alpha: angle of the line's normal (pointing away from the laser), rad, in (-π, π].
        r: distance from the laser to the line, m, >= 0.
        var_alpha: variance of ``alpha``, rad².
        cov_alpha_r: covariance of ``alpha`` and ``r``, m·rad.
        var_r: variance of ``r``, m².
        start: the first point of the segment (in scan order) projected on the line, (x, y), m.
        end: the last point projected on the line, (x, y), m.
        points: number of scan points fitted.
        first: index of the first beam in the scan.
        last: index of the last beam in the scan.
    """

    alpha: float
    r: float
    var_alpha: float
    cov_alpha_r: float
    var_r: float
    start: tuple[float, float]
    end: tuple[float, float]
    points: int
    first: int
    last: int

    @property
    def covariance(self) -> FloatArray:
        """2x2 covariance of (α, r): rad², m·rad, m²."""
        return np.array([[self.var_alpha, self.cov_alpha_r], [self.cov_alpha_r, self.var_r]])

    @property
    def length(self) -> float:
        """Distance between the end points, m."""
        return math.hypot(self.end[0] - self.start[0], self.end[1] - self.start[1])

    @property
    def midpoint(self) -> tuple[float, float]:
        """Middle of the segment, (x, y), m."""
        return 0.5 * (self.start[0] + self.end[0]), 0.5 * (self.start[1] + self.end[1])


class LineTable(NamedTuple):
    """The lines of a scan as arrays, as the compiled extractor gives them (what :func:`extract_lines` turns into
    :class:`LineFeature` objects; the pose filter reads the arrays directly).

    Attributes:
        values: ``(m, 9)`` per line α, r, Var α, Cov(α, r), Var r, start x, y, end x, y (the fields of
            :class:`LineFeature`).
        counts: ``(m, 3)`` per line its number of points, first beam and last beam.
    """

    values: FloatArray
    counts: IntArray

    def features(self) -> list[LineFeature]:
        """The lines as :class:`LineFeature` objects, in scan order."""
        return [
            LineFeature(alpha, r, va, car, vr, (sx, sy), (ex, ey), n, first, last)
            for (alpha, r, va, car, vr, sx, sy, ex, ey), (n, first, last) in zip(
                self.values.tolist(), self.counts.tolist(), strict=True
            )
        ]


class _Beams:
    """The beam directions of the scan layouts seen last and what the kernel needs of them: per beam cos φ and
    sin φ, and per pair of neighbouring beams the factor sin Δφ / sin(λ - Δφ) of the adaptive breakpoint distance.
    A scanner keeps its layout, so these are computed once, not for every scan (a layout is compared to those kept
    in one compiled pass over the angles). A few layouts are kept: a process may read both interfaces of the
    scanner (361 and 181 beams)."""

    KEPT = 4

    def __init__(self) -> None:
        self._kept: tuple[tuple[FloatArray, float, FloatArray], ...] = ()  # most recent first; replaced, not edited

    def tables(self, angles: FloatArray, breakpoint_angle: float) -> FloatArray:
        """``(3, K)`` cos φ, sin φ and the breakpoint factor (of beam i with beam i - 1; row 2, element 0 unused).

        Raises:
            ValueError: an angle is not finite.
        """
        kept = self._kept
        for known, angle, tables in kept:
            if angle == breakpoint_angle and _same(known, angles):
                return tables
        if not np.all(np.isfinite(angles)):
            raise ValueError("angles must be finite")
        tables = _tables(angles, breakpoint_angle)
        self._kept = ((angles.copy(), breakpoint_angle, tables), *kept[: self.KEPT - 1])
        return tables


_BEAMS = _Beams()


def _as_floats(values: npt.ArrayLike) -> FloatArray:
    if isinstance(values, list):
        return np.fromiter(values, np.float64, len(values))  # the bus's lists: the quickest conversion
    return np.ascontiguousarray(values, dtype=np.float64)  # one layout: one compiled version of the kernel


def line_table(
    ranges: npt.ArrayLike,
    angles: npt.ArrayLike,
    *,
    max_range: float,
    range_sigma: float = 0.01,
    min_range: float = 0.0,
    split_distance: float = 0.05,
    breakpoint_angle: float = math.radians(10.0),
    min_points: int = 6,
    min_length: float = 0.4,
    merge_chi2: float = 9.21,
    merge_gap: float = 0.5,
    scatter: bool = False,
    range_sigma_per_m: float = 0.0,
) -> LineTable:
    """The lines of a laser scan as arrays (:class:`LineTable`); the arguments and errors are those of
    :func:`extract_lines`, which is this and :meth:`LineTable.features`."""
    r = _as_floats(ranges)
    a = _as_floats(angles)
    if r.ndim != 1 or r.shape != a.shape:
        raise ValueError(f"ranges and angles must be 1-D of the same length, got {r.shape} and {a.shape}")
    if not (math.isfinite(max_range) and max_range > 0):
        raise ValueError(f"max_range must be > 0 and finite, got {max_range}")
    if not (math.isfinite(range_sigma_per_m) and range_sigma_per_m >= 0):
        raise ValueError(f"range_sigma_per_m must be >= 0 and finite, got {range_sigma_per_m}")
    tables = _BEAMS.tables(a, float(breakpoint_angle))
    values, counts = _extract(
        r,
        tables,
        float(max_range),
        float(range_sigma),
        float(min_range),
        float(split_distance),
        max(int(min_points), 2),
        float(min_length),
        float(merge_chi2),
        float(merge_gap),
        bool(scatter),
        float(range_sigma_per_m),
    )
    return LineTable(values, counts)


def extract_lines(
    ranges: npt.ArrayLike,
    angles: npt.ArrayLike,
    *,
    max_range: float,
    range_sigma: float = 0.01,
    min_range: float = 0.0,
    split_distance: float = 0.05,
    breakpoint_angle: float = math.radians(10.0),
    min_points: int = 6,
    min_length: float = 0.4,
    merge_chi2: float = 9.21,
    merge_gap: float = 0.5,
    scatter: bool = False,
    range_sigma_per_m: float = 0.0,
) -> list[LineFeature]:
    """The lines of a laser scan, in scan order.

    Args:
        ranges: ``(K,)`` range per beam, m; -1 (an error), non-finite values and readings at ``max_range`` (no
            echo; within 3 ``range_sigma`` of it, as noise may have lowered them) are ignored, as are readings at
            or below ``min_range``.
        angles: ``(K,)`` bearing of each beam in the laser frame, rad, increasing (181 or 361 beams over 180° on
            Pluto's scanner; any number works).
        max_range: the scanner's largest range, m.
        range_sigma: std dev of a range reading at zero range, m...
        range_sigma_per_m: ...and its growth with the range, m/m (std dev ``range_sigma + range_sigma_per_m·r``).
        min_range: readings at or below this are ignored, m.
        split_distance: a segment is split where a point is farther than this from its chord, m.
        breakpoint_angle: λ of the adaptive breakpoint distance, rad (walls seen at more than 90° - λ from their
            normal break into pieces).
        min_points: fewest points of a line.
        min_length: shortest line kept, m.
        merge_chi2: neighbouring lines whose difference has a chi-square (2 dof) below this are merged; 0 never
            merges. 9.21 is the 99 % quantile.
        merge_gap: largest distance between neighbouring lines that may be merged, m.
        scatter: scale a line's covariance by its points' scatter about it where the range noise does not explain
            that scatter (see the module docstring); False: the covariance of ``range_sigma`` alone.

    Returns:
        The lines, ordered by their first beam.

    Raises:
        ValueError: ``ranges`` and ``angles`` differ in shape or are not 1-D, angles are not finite, or
            ``max_range`` is not positive.
    """
    return line_table(
        ranges,
        angles,
        max_range=max_range,
        range_sigma=range_sigma,
        min_range=min_range,
        split_distance=split_distance,
        breakpoint_angle=breakpoint_angle,
        min_points=min_points,
        min_length=min_length,
        merge_chi2=merge_chi2,
        merge_gap=merge_gap,
        scatter=scatter,
        range_sigma_per_m=range_sigma_per_m,
    ).features()


# -- the compiled kernel -------------------------------------------------------------------------------------------
# Plain loops over scalars only: numba compiles these in a few seconds, and its cache (``cache=True``, beside the
# module) spares that to every later process. Lines travel between the steps as rows of moments ``(m, 6)``: Σw, x̄,
# ȳ, S_xx, S_yy, S_xy (central), the state that merging adds up, with their number of points and the positions of
# their first and last point among the valid points; everything a line is follows from those (:func:`_line`).


@numba.njit(cache=True)
def _same(a: FloatArray, b: FloatArray) -> bool:
    """Whether two 1-D arrays hold the same values."""
    same: bool = a.shape[0] == b.shape[0]
    i = 0
    while same and i < a.shape[0]:
        same = bool(a[i] == b[i])
        i += 1
    return same


@numba.njit(cache=True)
def _tables(angles: FloatArray, breakpoint_angle: float) -> FloatArray:
    """``(3, K)`` cos φ, sin φ of each beam and sin Δφ / sin(max(λ - Δφ, 10⁻³)) of each beam with the one before."""
    k = angles.shape[0]
    out = np.zeros((3, k))
    for i in range(k):
        out[0, i] = math.cos(angles[i])
        out[1, i] = math.sin(angles[i])
        if i > 0:
            dphi = abs(angles[i] - angles[i - 1])
            out[2, i] = math.sin(dphi) / math.sin(max(breakpoint_angle - dphi, 1e-3))
    return out


@numba.njit(cache=True)
def _extract(
    ranges: FloatArray,
    tables: FloatArray,
    max_range: float,
    range_sigma: float,
    min_range: float,
    split_distance: float,
    min_points: int,
    min_length: float,
    merge_chi2: float,
    merge_gap: float,
    scatter: bool,
    range_sigma_per_m: float,
) -> tuple[FloatArray, IntArray]:
    """The lines of a scan: ``(m, 9)`` α, r, Var α, Cov(α, r), Var r, start x, y, end x, y and ``(m, 3)`` points,
    first beam, last beam (see :func:`extract_lines` for the arguments; ``tables`` from :func:`_tables`)."""
    index, x, y, cs, sn, sigma, n = _valid_points(ranges, tables, max_range, range_sigma, min_range, range_sigma_per_m)
    stack, depth = _runs(ranges, tables, index, x, y, sigma, n, min_points)
    moments, points, first, last, m = _split_and_fit(
        x, y, cs, sn, sigma, stack, depth, n, split_distance, range_sigma, min_points
    )

    # 4. merge, drop what is too short, merge again across what was dropped
    if merge_chi2 > 0:
        m = _merge(moments, points, first, last, m, x, y, merge_chi2, merge_gap, scatter)
    lines = np.empty((m, 9))
    kept, dropped = _drop_short(moments, points, first, last, m, x, y, scatter, min_points, min_length, lines)
    m = kept
    if dropped and merge_chi2 > 0:
        merged = _merge(moments, points, first, last, m, x, y, merge_chi2, merge_gap, scatter)
        if merged < m:
            m = merged
            for j in range(m):
                _describe(moments[j], points[j], scatter, x[first[j]], y[first[j]], x[last[j]], y[last[j]], lines[j])
    counts = np.empty((m, 3), dtype=np.int64)
    for j in range(m):
        counts[j, 0] = points[j]
        counts[j, 1] = index[first[j]]
        counts[j, 2] = index[last[j]]
    return lines[:m].copy(), counts


@numba.njit(cache=True)
def _valid_points(
    ranges: FloatArray,
    tables: FloatArray,
    max_range: float,
    range_sigma: float,
    min_range: float,
    range_sigma_per_m: float,
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, int]:
    """The valid points of a scan, ``n`` of them first in each array: their beam, x, y, the cos φ and sin φ of their
    beam and their range noise σ; a reading of -1, NaN, below ``min_range`` or within 3σ of ``max_range`` is left
    out."""
    k = ranges.shape[0]
    index = np.empty(k, dtype=np.int64)
    x = np.empty(k)
    y = np.empty(k)
    cs = np.empty(k)  # cos φ and sin φ of each valid point's beam
    sn = np.empty(k)
    n = 0
    sigma = np.empty(k)  # each valid point's range noise
    top = max_range - 3.0 * (range_sigma + range_sigma_per_m * max_range)
    for i in range(k):
        if ranges[i] > min_range and ranges[i] < top:  # NaN compares False
            index[n] = i
            cs[n] = tables[0, i]
            sn[n] = tables[1, i]
            x[n] = ranges[i] * cs[n]
            y[n] = ranges[i] * sn[n]
            sigma[n] = range_sigma + range_sigma_per_m * ranges[i]
            n += 1
    return index, x, y, cs, sn, sigma, n


@numba.njit(cache=True)
def _runs(
    ranges: FloatArray,
    tables: FloatArray,
    index: IntArray,
    x: FloatArray,
    y: FloatArray,
    sigma: FloatArray,
    n: int,
    min_points: int,
) -> tuple[IntArray, int]:
    """1. Runs of valid points, cut at a reading left out or a step beyond the adaptive breakpoint distance: a stack
    of ``(first, stop)`` rows (``depth`` of them), the last run first, so that step 2 gives its segments in scan
    order. Runs of fewer than ``min_points`` points are left out."""
    stack = np.empty((n + 1, 2), dtype=np.int64)  # segments on it never overlap and hold >= 2 points each
    depth = 0
    stop = n
    for i in range(n - 1, -1, -1):
        if i > 0 and index[i] - index[i - 1] <= 1:  # neighbouring beams (any gap between them breaks the run)
            dx = x[i] - x[i - 1]
            dy = y[i] - y[i - 1]
            gap = ranges[index[i - 1]] * tables[2, index[i]] + 3.0 * max(sigma[i], sigma[i - 1])
            if dx * dx + dy * dy <= gap * gap:
                continue
        if stop - i >= min_points:
            stack[depth, 0] = i
            stack[depth, 1] = stop
            depth += 1
        stop = i
    return stack, depth


@numba.njit(cache=True)
def _split_and_fit(
    x: FloatArray,
    y: FloatArray,
    cs: FloatArray,
    sn: FloatArray,
    sigma: FloatArray,
    stack: IntArray,
    depth: int,
    n: int,
    split_distance: float,
    range_sigma: float,
    min_points: int,
) -> tuple[FloatArray, IntArray, IntArray, IntArray, int]:
    """2. Split each segment on the stack at the point farthest from its chord (the first of equals) while that is
    beyond ``split_distance``; 3. fit each segment left. Returns the segments' moments (w, x̄, ȳ, S_xx, S_yy, S_xy),
    point counts, first and last points, and how many (``m``) there are."""
    moments = np.empty((n + 1, 6))
    points = np.empty(n + 1, dtype=np.int64)
    first = np.empty(n + 1, dtype=np.int64)
    last = np.empty(n + 1, dtype=np.int64)
    weight = np.empty(n + 1)
    m = 0
    while depth:
        depth -= 1
        s0 = stack[depth, 0]
        s1 = stack[depth, 1]
        farthest, at, nx, ny = _farthest(x, y, sigma, s0, s1, range_sigma)
        if farthest > split_distance:
            # the split point goes to neither half: it is the one nearest a corner, where it may belong to either
            # wall (or, on a straight wall, an outlier); halves too short to hold a line are dropped
            if s1 - at - 1 >= min_points:
                stack[depth, 0] = at + 1
                stack[depth, 1] = s1
                depth += 1
            if at - s0 >= min_points:
                stack[depth, 0] = s0
                stack[depth, 1] = at
                depth += 1
            continue
        _fit(x, y, cs, sn, sigma, weight, s0, s1, nx, ny, moments[m])
        points[m] = s1 - s0
        first[m] = s0
        last[m] = s1 - 1
        m += 1
    return moments, points, first, last, m


@numba.njit(cache=True)
def _farthest(
    x: FloatArray, y: FloatArray, sigma: FloatArray, s0: int, s1: int, range_sigma: float
) -> tuple[float, int, float, float]:
    """The distance beyond its noise's growth of the point of ``s0:s1`` farthest from the chord, that point (the
    first of equals), and the chord's unit normal (nx, ny)."""
    x0 = x[s0]
    y0 = y[s0]
    ex = x[s1 - 1] - x0
    ey = y[s1 - 1] - y0
    length = math.hypot(ex, ey)
    if length == 0.0:
        length = 1.0
    nx = -ey / length
    ny = ex / length
    farthest = -1.0
    at = s0
    for i in range(s0, s1):
        # split_distance is for the noise at zero range: a farther point is allowed 3x its noise's growth more
        d = abs((x[i] - x0) * nx + (y[i] - y0) * ny) - 3.0 * (sigma[i] - range_sigma)
        if d > farthest:
            farthest = d
            at = i
    return farthest, at, nx, ny


@numba.njit(cache=True)
def _fit(
    x: FloatArray,
    y: FloatArray,
    cs: FloatArray,
    sn: FloatArray,
    sigma: FloatArray,
    weight: FloatArray,
    s0: int,
    s1: int,
    nx: float,
    ny: float,
    out: FloatArray,
) -> None:
    """Into ``out`` (6): the weighted moments w, x̄, ȳ, S_xx, S_yy, S_xy of the points ``s0:s1``, each weighted by
    1/σ² of its range noise across the chord, whose normal is (nx, ny): |cos(φ_i - chord)|."""
    if nx == 0.0 and ny == 0.0:
        nx = 1.0  # a chord of no length (never from a real scan): any direction
    sw = 0.0
    sx = 0.0
    sy = 0.0
    for i in range(s0, s1):
        c = max(abs(cs[i] * nx + sn[i] * ny), _MIN_COS)
        w = 1.0 / (sigma[i] * sigma[i] * c * c)
        weight[i] = w
        sw += w
        sx += w * x[i]
        sy += w * y[i]
    xm = sx / sw
    ym = sy / sw
    sxx = 0.0
    syy = 0.0
    sxy = 0.0
    for i in range(s0, s1):
        w = weight[i]
        cx = x[i] - xm
        cy = y[i] - ym
        sxx += w * cx * cx
        syy += w * cy * cy
        sxy += w * cx * cy
    out[0] = sw
    out[1] = xm
    out[2] = ym
    out[3] = sxx
    out[4] = syy
    out[5] = sxy


@numba.njit(cache=True)
def _drop_short(
    moments: FloatArray,
    points: IntArray,
    first: IntArray,
    last: IntArray,
    m: int,
    x: FloatArray,
    y: FloatArray,
    scatter: bool,
    min_points: int,
    min_length: float,
    lines: FloatArray,
) -> tuple[int, bool]:
    """Describe the first ``m`` lines into ``lines`` and keep, in place and in order, those of at least
    ``min_points`` points and ``min_length`` m. Returns how many are kept and whether any was dropped."""
    kept = 0
    dropped = False
    for j in range(m):
        _describe(moments[j], points[j], scatter, x[first[j]], y[first[j]], x[last[j]], y[last[j]], lines[kept])
        if points[j] < min_points or math.hypot(lines[kept, 7] - lines[kept, 5], lines[kept, 8] - lines[kept, 6]) < (
            min_length
        ):
            dropped = True
            continue
        for q in range(6):
            moments[kept, q] = moments[j, q]
        points[kept] = points[j]
        first[kept] = first[j]
        last[kept] = last[j]
        kept += 1
    return kept, dropped


@numba.njit(cache=True)
def _line(m: FloatArray, count: int, scatter: bool) -> tuple[float, float, float, float, float, float, float]:
    """α, r, Var α, Cov(α, r), Var r, cos α, sin α of the line of one row of moments (of ``count`` points; with
    ``scatter``, the covariance times the variance factor s² when it is above 1)."""
    half = 0.5 * math.atan2(-2.0 * m[5], m[4] - m[3])
    ca = math.cos(half)
    sa = math.sin(half)
    r = m[1] * ca + m[2] * sa
    if r < 0.0:  # the normal points away from the laser
        r, ca, sa = -r, -ca, -sa
    st = max(sa * sa * m[3] - 2.0 * sa * ca * m[5] + ca * ca * m[4], 1e-300)
    tc = m[2] * ca - m[1] * sa
    var_alpha = 1.0 / st
    cov = tc * var_alpha
    var_r = 1.0 / m[0] + tc * cov
    if scatter and count > 2:
        # the weighted residuals across the line: the scatter's trace less its spread along the line
        factor = max(m[3] + m[4] - st, 0.0) / (count - 2)
        if factor > 1.0:
            var_alpha *= factor
            cov *= factor
            var_r *= factor
    return math.atan2(sa, ca), r, var_alpha, cov, var_r, ca, sa


@numba.njit(cache=True)
def _describe(
    moments: FloatArray, count: int, scatter: bool, fx: float, fy: float, lx: float, ly: float, out: FloatArray
) -> None:
    """Into ``out`` (9): α, r, Var α, Cov(α, r), Var r (of ``count`` points, see :func:`_line`) and the first and
    last point (fx, fy), (lx, ly) projected on the line."""
    alpha, r, va, car, vr, ca, sa = _line(moments, count, scatter)
    o0 = fx * ca + fy * sa - r
    o1 = lx * ca + ly * sa - r
    out[0] = alpha
    out[1] = r
    out[2] = va
    out[3] = car
    out[4] = vr
    out[5] = fx - o0 * ca
    out[6] = fy - o0 * sa
    out[7] = lx - o1 * ca
    out[8] = ly - o1 * sa


@numba.njit(cache=True)
def _merge(
    moments: FloatArray,
    points: IntArray,
    first: IntArray,
    last: IntArray,
    m: int,
    x: FloatArray,
    y: FloatArray,
    merge_chi2: float,
    merge_gap: float,
    scatter: bool,
) -> int:
    """Neighbours among the first ``m`` lines merged in place while their difference d = (α₁ - α₂, r₁ - r₂) passes
    dᵀ(C₁ + C₂)⁻¹d < ``merge_chi2`` and their gap is small, until no two neighbours left would pass: the lines kept
    form a stack, and each next line absorbs its top while they pass (a merged line is so tested again against both
    of its new neighbours). Returns the number of lines left."""
    lines = np.empty((m, 5))  # α, r, Var α, Cov(α, r), Var r of each line on the stack
    depth = 0
    for k in range(m):
        current = moments[k].copy()
        count = points[k]
        start = first[k]
        end = last[k]
        alpha, r, va, car, vr, _, _ = _line(current, count, scatter)
        while depth:
            j = depth - 1
            if math.hypot(x[start] - x[last[j]], y[start] - y[last[j]]) > merge_gap:
                break
            da = compiled_wrap_angle(lines[j, 0] - alpha)
            dr = lines[j, 1] - r
            saa = lines[j, 2] + va
            sar = lines[j, 3] + car
            srr = lines[j, 4] + vr
            det = saa * srr - sar * sar
            if not (det > 0.0 and (srr * da * da - 2.0 * sar * da * dr + saa * dr * dr) / det < merge_chi2):
                break
            # the moments of both lines' points together (the parallel-axis rule)
            a = moments[j]
            wa, wb = a[0], current[0]
            w = wa + wb
            dx, dy = a[1] - current[1], a[2] - current[2]
            f = wa * wb / w
            current[1] = (wa * a[1] + wb * current[1]) / w
            current[2] = (wa * a[2] + wb * current[2]) / w
            current[0] = w
            current[3] += a[3] + f * dx * dx
            current[4] += a[4] + f * dy * dy
            current[5] += a[5] + f * dx * dy
            count += points[j]
            start = first[j]
            alpha, r, va, car, vr, _, _ = _line(current, count, scatter)
            depth = j
        for q in range(6):  # element by element: numba compiles a row assignment slowly
            moments[depth, q] = current[q]
        points[depth] = count
        first[depth] = start
        last[depth] = end
        lines[depth, 0] = alpha
        lines[depth, 1] = r
        lines[depth, 2] = va
        lines[depth, 3] = car
        lines[depth, 4] = vr
        depth += 1
    return depth
