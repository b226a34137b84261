"""Walls in a laser scan: lines extracted by split-and-merge, each with its (α, r) covariance.

Strategy: split-and-merge is the fastest established line extractor and works in scan order (Nguyen et al.,
reference/estimation.md), which is what a laser gives. In four steps, each one numpy pass over the whole scan rather
than a Python loop over points:

1. **Runs.** Readings of -1 (a scanner error) and at ``max_range`` (no echo; within 3σ of it) are dropped. Consecutive
   valid points stay in one run unless an invalid reading lies between them or they are farther apart than the
   adaptive breakpoint distance ``r·sin Δφ / sin(λ - Δφ) + 3σ`` (Borges and Aldon): a wall at incidence up to
   90° - λ keeps its points together at any range, a step in range (a door, an object in front of a wall) breaks.
2. **Split.** Every segment is tested at once: the point farthest from its chord (the line through its first and
   last point) splits it in two if it is farther than ``split_distance``; the halves, without that point (nearest
   a corner, it may lie on either wall), are tested in the next round.
   The per-segment maximum and its first position come from ``maximum.reduceat`` and ``minimum.reduceat`` over the
   points laid out segment after segment.
3. **Fit.** A weighted total-least-squares line per segment, from its weighted moments (``add.reduceat``): with
   w_i = 1/σ_i², σ_i the range noise projected on the normal of the segment's chord (a range error moves a point
   along its beam, so only σ·cos(φ_i - α) of it moves the point off the line), centroid (x̄, ȳ) and central scatter
   S_xx, S_yy, S_xy give α = ½·atan2(-2·S_xy, S_yy - S_xx), r = x̄·cos α + ȳ·sin α (r < 0: negate r, add π to α).
   The covariance, with tangential coordinates t_i = -x_i·sin α + y_i·cos α, their weighted mean t_c and spread
   S_t = Σ w_i (t_i - t_c)² = sin²α·S_xx - 2·sinα·cosα·S_xy + cos²α·S_yy: Var α = 1/S_t, Cov(α, r) = t_c/S_t,
   Var r = 1/Σw_i + t_c²/S_t (the inverse of the fit's Fisher information).
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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["LineFeature", "extract_lines"]

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


def _check(ranges: npt.ArrayLike, angles: npt.ArrayLike, max_range: float) -> tuple[FloatArray, FloatArray]:
    r = np.asarray(ranges, dtype=np.float64)
    a = np.asarray(angles, dtype=np.float64)
    if r.ndim != 1 or r.shape != a.shape:
        raise ValueError(f"ranges and angles must be 1-D of the same length, got {r.shape} and {a.shape}")
    if not (math.isfinite(max_range) and max_range > 0):
        raise ValueError(f"max_range must be > 0 and finite, got {max_range}")
    if not np.all(np.isfinite(a)):
        raise ValueError("angles must be finite")
    return r, a


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
) -> list[LineFeature]:
    """The lines of a laser scan, in scan order.

    Args:
        ranges: ``(K,)`` range per beam, m; -1 (an error), non-finite values and readings at ``max_range`` (no
            echo; within 3 ``range_sigma`` of it, as noise may have lowered them) are ignored, as are readings at
            or below ``min_range``.
        angles: ``(K,)`` bearing of each beam in the laser frame, rad, increasing (181 or 361 beams over 180° on
            Pluto's scanner; any number works).
        max_range: the scanner's largest range, m.
        range_sigma: std dev of a range reading, m.
        min_range: readings at or below this are ignored, m.
        split_distance: a segment is split where a point is farther than this from its chord, m.
        breakpoint_angle: λ of the adaptive breakpoint distance, rad (walls seen at more than 90° - λ from their
            normal break into pieces).
        min_points: fewest points of a line.
        min_length: shortest line kept, m.
        merge_chi2: neighbouring lines whose difference has a chi-square (2 dof) below this are merged; 0 never
            merges. 9.21 is the 99 % quantile.
        merge_gap: largest distance between neighbouring lines that may be merged, m.

    Returns:
        The lines, ordered by their first beam.

    Raises:
        ValueError: ``ranges`` and ``angles`` differ in shape or are not 1-D, angles are not finite, or
            ``max_range`` is not positive.
    """
    r, a = _check(ranges, angles, max_range)
    sigma2 = range_sigma * range_sigma
    valid = (r > min_range) & (r < max_range - 3.0 * range_sigma)  # NaN compares False
    index = np.flatnonzero(valid)
    n = index.shape[0]
    min_points = max(int(min_points), 2)
    if n < min_points:
        return []
    rv = r[index]
    av = a[index]
    x = rv * np.cos(av)
    y = rv * np.sin(av)

    # 1. runs of valid points
    dx = np.diff(x)
    dy = np.diff(y)
    dphi = np.abs(np.diff(av))
    gap = rv[:-1] * np.sin(dphi) / np.sin(np.maximum(breakpoint_angle - dphi, 1e-3)) + 3.0 * range_sigma
    cut = np.flatnonzero((np.diff(index) > 1) | (dx * dx + dy * dy > gap * gap)) + 1
    starts = np.concatenate(([0], cut))
    stops = np.concatenate((cut, [n]))
    long_enough = stops - starts >= min_points
    starts, stops = starts[long_enough], stops[long_enough]

    # 2. split
    done_starts: list[IntArray] = []
    done_stops: list[IntArray] = []
    while starts.shape[0]:
        counts = stops - starts
        offsets = np.cumsum(counts) - counts
        seg = np.repeat(np.arange(counts.shape[0]), counts)
        pos = np.arange(int(counts.sum())) + np.repeat(starts - offsets, counts)
        x0, y0 = x[starts], y[starts]
        ex = x[stops - 1] - x0
        ey = y[stops - 1] - y0
        length = np.hypot(ex, ey)
        length[length == 0.0] = 1.0
        nx, ny = -ey / length, ex / length
        distance = np.abs((x[pos] - x0[seg]) * nx[seg] + (y[pos] - y0[seg]) * ny[seg])
        farthest = np.maximum.reduceat(distance, offsets)
        split = farthest > split_distance
        if not split.any():
            done_starts.append(starts)
            done_stops.append(stops)
            break
        done_starts.append(starts[~split])
        done_stops.append(stops[~split])
        at = np.minimum.reduceat(np.where(distance == farthest[seg], pos, n), offsets)[split]
        s0, s1 = starts[split], stops[split]
        # the split point goes to neither half: it is the one nearest a corner, where it may belong to either wall
        # (or, on a straight wall, an outlier); halves too short to hold a line are dropped
        starts = np.concatenate((s0, at + 1))
        stops = np.concatenate((at, s1))
        keep = stops - starts >= min_points
        starts, stops = starts[keep], stops[keep]
    if not done_starts:
        return []
    starts = np.concatenate(done_starts)
    stops = np.concatenate(done_stops)
    if starts.shape[0] == 0:
        return []
    order = np.argsort(starts, kind="stable")
    starts, stops = starts[order], stops[order]

    # 3. fit: weights from the chord's normal, then weighted moments per segment
    counts = stops - starts
    offsets = np.cumsum(counts) - counts
    seg = np.repeat(np.arange(counts.shape[0]), counts)
    pos = np.arange(int(counts.sum())) + np.repeat(starts - offsets, counts)
    chord = np.arctan2(x[stops - 1] - x[starts], -(y[stops - 1] - y[starts]))  # normal of the chord
    incidence = np.maximum(np.abs(np.cos(av[pos] - chord[seg])), _MIN_COS)
    w = 1.0 / (sigma2 * incidence * incidence)
    xs, ys = x[pos], y[pos]
    sw = np.add.reduceat(w, offsets)
    xm = np.add.reduceat(w * xs, offsets) / sw
    ym = np.add.reduceat(w * ys, offsets) / sw
    cx = xs - xm[seg]
    cy = ys - ym[seg]
    wcx = w * cx
    moments = np.stack(
        (
            sw,
            xm,
            ym,
            np.add.reduceat(wcx * cx, offsets),
            np.add.reduceat(w * cy * cy, offsets),
            np.add.reduceat(wcx * cy, offsets),
        )
    )
    lines = _Lines(moments, counts, starts, stops - 1, x, y)

    # 4. merge neighbours, drop what is too short, merge again across what was dropped
    if merge_chi2 > 0:
        lines = lines.merged(merge_chi2, merge_gap)
    keep = (lines.n >= min_points) & (lines.length >= min_length)
    if not keep.all():
        lines = lines.select(keep)
        if merge_chi2 > 0:
            lines = lines.merged(merge_chi2, merge_gap)
    return lines.features(index)


class _Lines:
    """Lines as arrays: their weighted moments (the state that merging adds up) and what follows from them.

    ``moments`` is ``(6, m)``: Σw, x̄, ȳ, S_xx, S_yy, S_xy (central); ``n`` the number of points, ``first`` and
    ``last`` the positions of the first and last point among the valid points.
    """

    _DERIVED = ("alpha", "r", "var_alpha", "cov_alpha_r", "var_r", "start_x", "start_y", "end_x", "end_y", "length")

    def __init__(
        self, moments: FloatArray, n: IntArray, first: IntArray, last: IntArray, x: FloatArray, y: FloatArray
    ) -> None:
        self.moments, self.n, self.first, self.last, self.x, self.y = moments, n, first, last, x, y
        if moments.shape[1] == 0:
            for name in self._DERIVED:
                setattr(self, name, np.zeros(0))
            return
        sw, xm, ym, sxx, syy, sxy = moments
        half = 0.5 * np.arctan2(-2.0 * sxy, syy - sxx)
        ca, sa = np.cos(half), np.sin(half)
        r = xm * ca + ym * sa
        sign = np.where(r < 0.0, -1.0, 1.0)  # the normal points away from the laser
        ca *= sign
        sa *= sign
        self.r = r * sign
        self.alpha = np.arctan2(sa, ca)
        st = np.maximum(sa * sa * sxx - 2.0 * sa * ca * sxy + ca * ca * syy, 1e-300)
        tc = ym * ca - xm * sa
        self.var_alpha = 1.0 / st
        self.cov_alpha_r = tc * self.var_alpha
        self.var_r = 1.0 / sw + tc * self.cov_alpha_r
        # end points: the first and last point projected on the line
        fx, fy = x[first], y[first]
        lx, ly = x[last], y[last]
        o0 = fx * ca + fy * sa - self.r
        o1 = lx * ca + ly * sa - self.r
        self.start_x, self.start_y = fx - o0 * ca, fy - o0 * sa
        self.end_x, self.end_y = lx - o1 * ca, ly - o1 * sa
        self.length = np.hypot(self.end_x - self.start_x, self.end_y - self.start_y)

    def select(self, keep: npt.NDArray[np.bool_]) -> _Lines:
        """The lines where ``keep``."""
        out = object.__new__(_Lines)
        out.moments, out.n, out.first, out.last = self.moments[:, keep], self.n[keep], self.first[keep], self.last[keep]
        out.x, out.y = self.x, self.y
        for name in self._DERIVED:
            setattr(out, name, getattr(self, name)[keep])
        return out

    def merged(self, merge_chi2: float, merge_gap: float) -> _Lines:
        """Neighbours merged while their difference passes the chi-square test and their gap is small, until no
        two neighbours left would pass (a merged line is tested again against both of its new neighbours)."""
        m = self.alpha.shape[0]
        if m < 2:
            return self
        x, y = self.x, self.y
        near = np.hypot(x[self.first[1:]] - x[self.last[:-1]], y[self.first[1:]] - y[self.last[:-1]]) <= merge_gap
        if not near.any():
            return self
        da = np.mod(self.alpha[1:] - self.alpha[:-1] + math.pi, 2.0 * math.pi) - math.pi
        dr = self.r[1:] - self.r[:-1]
        saa = self.var_alpha[1:] + self.var_alpha[:-1]
        sar = self.cov_alpha_r[1:] + self.cov_alpha_r[:-1]
        srr = self.var_r[1:] + self.var_r[:-1]
        det = saa * srr - sar * sar
        with np.errstate(divide="ignore", invalid="ignore"):
            chi2 = (srr * da * da - 2.0 * sar * da * dr + saa * dr * dr) / det
        flags = near & (det > 0.0) & (chi2 < merge_chi2)
        if not flags.any():
            return self
        columns = [
            [*values, n, first, last]
            for values, n, first, last in zip(
                self.moments.T.tolist(), self.n.tolist(), self.first.tolist(), self.last.tolist(), strict=True
            )
        ]
        # a stack of merged lines: each new line absorbs the top while they pass, so no two neighbours left on it
        # would pass; flags[k] stands for the test of the original lines k and k + 1 while both are untouched
        out: list[list[float]] = []
        grown: list[bool] = []
        index: list[int] = []
        for k in range(m):
            current, is_grown = columns[k], False
            while out:
                if not (is_grown or grown[-1]) and index[-1] == k - 1:
                    join = bool(flags[k - 1])
                else:
                    top = out[-1]
                    i, j = int(top[8]), int(current[7])
                    join = (
                        math.hypot(float(x[j] - x[i]), float(y[j] - y[i])) <= merge_gap
                        and _chi2(_line_of(top), _line_of(current)) < merge_chi2
                    )
                if not join:
                    break
                current, is_grown = _add(out.pop(), current), True
                grown.pop()
                index.pop()
            out.append(current)
            grown.append(is_grown)
            index.append(k)
        table = np.array(out).T
        ints = table[6:].astype(np.intp)
        return _Lines(table[:6].copy(), ints[0], ints[1], ints[2], x, y)

    def features(self, index: IntArray) -> list[LineFeature]:
        return [
            LineFeature(a, r, va, car, vr, (sx, sy), (ex, ey), n, first, last)
            for a, r, va, car, vr, sx, sy, ex, ey, n, first, last in zip(
                self.alpha.tolist(),
                self.r.tolist(),
                self.var_alpha.tolist(),
                self.cov_alpha_r.tolist(),
                self.var_r.tolist(),
                self.start_x.tolist(),
                self.start_y.tolist(),
                self.end_x.tolist(),
                self.end_y.tolist(),
                self.n.tolist(),
                index[self.first].tolist(),
                index[self.last].tolist(),
                strict=True,
            )
        ]


def _line_of(m: Sequence[float]) -> tuple[float, float, float, float, float]:
    """(α, r, Var α, Cov(α, r), Var r) of one line's moments (the scalar twin of :class:`_Lines`)."""
    w, xm, ym, sxx, syy, sxy = m[:6]
    alpha = 0.5 * math.atan2(-2.0 * sxy, syy - sxx)
    ca, sa = math.cos(alpha), math.sin(alpha)
    r = xm * ca + ym * sa
    if r < 0.0:
        r, alpha, ca, sa = -r, alpha + math.pi, -ca, -sa
    st = max(sa * sa * sxx - 2.0 * sa * ca * sxy + ca * ca * syy, 1e-300)
    tc = -xm * sa + ym * ca
    return alpha, r, 1.0 / st, tc / st, 1.0 / w + tc * tc / st


def _add(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The moments of the points of ``a`` and ``b`` together (``b`` follows ``a`` in the scan)."""
    wa, wb = a[0], b[0]
    w = wa + wb
    dx, dy = a[1] - b[1], a[2] - b[2]
    f = wa * wb / w
    return [
        w,
        (wa * a[1] + wb * b[1]) / w,
        (wa * a[2] + wb * b[2]) / w,
        a[3] + b[3] + f * dx * dx,
        a[4] + b[4] + f * dy * dy,
        a[5] + b[5] + f * dx * dy,
        a[6] + b[6],
        a[7],
        b[8],
    ]


def _chi2(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Chi-square of the difference of two lines (α, r, Var α, Cov, Var r) with independent errors."""
    da = (a[0] - b[0] + math.pi) % (2.0 * math.pi) - math.pi
    dr = a[1] - b[1]
    saa, sar, srr = a[2] + b[2], a[3] + b[3], a[4] + b[4]
    det = saa * srr - sar * sar
    if det <= 0.0:
        return math.inf
    return (srr * da * da - 2.0 * sar * da * dr + saa * dr * dr) / det
