"""Ray casting for simulated range sensors, and the distance queries the simulated base uses for collisions.

Everything here is plain geometry on numpy arrays, in metres and radians, in the world frame:

* a **segment** is a row ``[x1, y1, x2, y2]`` of an ``(N, 4)`` array (walls and polygon edges);
* a **circle** is a row ``[x, y, r]`` of an ``(M, 3)`` array (trees, posts, people), a solid disc;
* a **beam** leaves ``origin`` at a world-frame angle and stops at the first segment or circle it meets, or at
  ``max_range``.

Strategy: testing every beam against every segment costs K x N work (361 x 2,000 = 722,000 pairs for one scan),
which numpy cannot do in a millisecond. But seen from the origin a segment covers only a small arc of directions,
and only the beams inside that arc can hit it. So for one origin we compute each segment's arc of bearings
``[lo, lo + width]`` (two ``arctan2`` per segment) and find the run of beams inside each arc: by arithmetic when
the beams are a uniform scan (``a0 + j * step``, what a laser gives), else by ``searchsorted`` in the beams sorted
by bearing (each beam also appears a second time, 2π on, so that an arc across ±π is still one run). Only those
(segment, beam) pairs are evaluated, in one flat vectorised pass, and ``np.minimum.at`` keeps the nearest hit per
beam. In a typical world a segment covers a few beams, so a scan evaluates a few thousand pairs instead of
hundreds of thousands; segments whose closest point is beyond ``max_range`` are dropped before that.

For a beam of direction ``d = (cos a, sin a)`` from ``o`` and a segment ``p1 + u e`` (``e = p2 - p1``), the beam
crosses the segment's line at ``u = ((p1 - o) x d) / (d x e)`` (``x`` is the 2-D cross product), and the hit
distance is the projection ``d . (p1 + u e - o)``. Arcs are widened by ``ARC_PAD`` radians so that a beam through
an end point is never lost to rounding; ``u`` is clipped to [0, 1], so a beam that passes within ``ARC_PAD`` of an
end point reports that end point (a point within ``ARC_PAD x distance`` of the beam). The result is then raised
to at least the distance of the segment's nearest point, which settles the one case the formula leaves open: a
beam along a segment's line through the origin (``0 / 0``) gets the distance of the near end. An origin on a
segment (closer than 1e-12 m) or inside a disc gives 0 for every beam.

Circles are handled the same way: the arc of a disc at distance ``c`` with radius ``r`` is ``±asin(r / c)`` about
its bearing, and ``t = (c² - r²) / (b + sqrt(b² - c² + r²))`` with ``b`` the projection of the centre on the beam
(the cancellation-free form of ``b - sqrt(...)``), kept between ``c - r`` and the tangent distance.

Memory is bounded: when a world holds more than ``MAX_PAIRS / K`` primitives, the beams are cast in chunks small
enough that no chunk can make more than ``MAX_PAIRS`` pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.geometry import wrap_angle

__all__ = [
    "ARC_PAD",
    "MAX_PAIRS",
    "RayCaster",
    "cast_rays",
    "circle_hits_segments",
    "disc_overlaps_circles",
    "segment_distance",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

ARC_PAD = 1e-9
"""Radians added on each side of every segment's and circle's arc of bearings (see the module docstring)."""

MAX_PAIRS = 1_500_000
"""Most (primitive, beam) pairs evaluated at once; a pair takes 5 float64 in the largest temporary."""

_ON_SEGMENT = 1e-12
"""An origin closer than this to a segment (m) is on it: every beam reports 0."""

_TWO_PI = 2.0 * math.pi


# -- argument checks -------------------------------------------------------------------------------------------------


def _as_point(point: ArrayLike, what: str = "origin") -> FloatArray:
    p = np.asarray(point, dtype=np.float64)
    if p.shape != (2,):
        raise ValueError(f"{what} must have shape (2,), got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{what} must be finite, got {p}")
    return p


def _as_rows(values: ArrayLike | None, columns: int, what: str) -> FloatArray:
    if values is None:
        return np.zeros((0, columns))
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return np.zeros((0, columns))
    if a.ndim != 2 or a.shape[1] != columns:
        raise ValueError(f"{what} must have shape (n, {columns}), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} must be finite")
    return a


def _as_radius(radius: float, what: str = "radius") -> float:
    r = float(radius)
    if not (math.isfinite(r) and r >= 0.0):
        raise ValueError(f"{what} must be finite and >= 0, got {radius!r}")
    return r


# -- distance queries ------------------------------------------------------------------------------------------------


def segment_distance(point: ArrayLike, segments: ArrayLike) -> FloatArray:
    """Distance from a point to each segment (to its nearest point, end points included).

    Args:
        point: ``(2,)`` position ``(x, y)``, m.
        segments: ``(N, 4)`` rows ``[x1, y1, x2, y2]``, m. Zero-length segments are points.

    Returns:
        ``(N,)`` distances, m (empty for no segments).

    Raises:
        ValueError: a shape is wrong or a value is not finite.
    """
    p = _as_point(point, "point")
    s = _as_rows(segments, 4, "segments")
    rx = s[:, 0] - p[0]
    ry = s[:, 1] - p[1]
    ex = s[:, 2] - s[:, 0]
    ey = s[:, 3] - s[:, 1]
    with np.errstate(all="ignore"):
        u = -(rx * ex + ry * ey) / (ex * ex + ey * ey)
    u = np.clip(np.where(np.isfinite(u), u, 0.0), 0.0, 1.0)  # a (numerically) zero-length segment is a point
    distance: FloatArray = np.hypot(rx + u * ex, ry + u * ey)
    return distance


def circle_hits_segments(center: ArrayLike, radius: float, segments: ArrayLike) -> bool:
    """Whether a disc touches any segment (distance <= radius): the base's test that it does not enter a wall.

    Args:
        center: ``(2,)`` centre of the disc, m.
        radius: radius of the disc, m, >= 0.
        segments: ``(N, 4)`` rows ``[x1, y1, x2, y2]``, m.

    Returns:
        True if some segment is at most ``radius`` from ``center``; False if there are no segments.

    Raises:
        ValueError: a shape is wrong, a value is not finite or the radius is negative.
    """
    r = _as_radius(radius)
    distances = segment_distance(center, segments)
    return bool(distances.size) and bool(np.min(distances) <= r)


def disc_overlaps_circles(center: ArrayLike, radius: float, circles: ArrayLike | None) -> bool:
    """Whether a disc touches or overlaps any of the circles (centre distance <= sum of the radii).

    Args:
        center: ``(2,)`` centre of the disc, m.
        radius: radius of the disc, m, >= 0.
        circles: ``(M, 3)`` rows ``[x, y, r]``, m, or None.

    Returns:
        True if some circle touches the disc; False if there are none.

    Raises:
        ValueError: a shape is wrong, a value is not finite or the radius is negative.
    """
    p = _as_point(center, "center")
    r = _as_radius(radius)
    c = _as_rows(circles, 3, "circles")
    if c.shape[0] == 0:
        return False
    gap = np.hypot(c[:, 0] - p[0], c[:, 1] - p[1]) - c[:, 2]
    return bool(np.min(gap) <= r)


# -- ray casting -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Beams:
    """Beam directions laid out so that the beams inside an arc of bearings are one run of positions.

    Each beam has a *position* ``p`` in ``0..K-1`` and a twin ``K + p`` whose bearing is 2π more, so that an arc
    crossing the seam of the bearings is still one contiguous run ``i0 <= p < i1``. Two layouts:

    * a uniform scan (``angles[j] = a0 + j * step``, ``step > 0``, ``(K - 1) * step < 2π``, as a laser gives):
      positions are beam indices, starting at the bearing ``first`` of ``a0``, and runs are found by arithmetic;
    * any other angles: positions are the beams in order of bearing in [-π, π) (``order``), and runs are found by
      binary search in ``bearings2``.
    """

    angles: FloatArray  # (K,) as given, rad
    cos2: FloatArray  # (2K,) direction of each position, then of each twin
    sin2: FloatArray  # (2K,)
    order: IntArray | None = None  # (K,) beam index of each position; None: positions are beam indices
    bearings2: FloatArray | None = None  # (2K,) sorted bearings, then + 2π; None for a uniform scan
    first: float = 0.0  # uniform scan: bearing of position 0, in [-π, π)
    step: float = 0.0  # uniform scan: angle between neighbours, > 0

    @property
    def count(self) -> int:
        return int(self.angles.shape[0])

    def locate(self, lo: FloatArray, hi: FloatArray) -> tuple[IntArray, IntArray]:
        """The run ``[i0, i1)`` of positions inside each arc ``[lo, hi]`` (``lo`` in [-π, π), ``hi - lo <= 2π``).

        A beam may come twice only for a full-circle arc, which the minimum does not mind.
        """
        if self.bearings2 is not None:
            i0 = np.searchsorted(self.bearings2, lo, side="left")
            i1 = np.searchsorted(self.bearings2, hi, side="right")
            return i0, i1
        k = self.count
        inv_step = 1.0 / self.step
        start = lo - self.first
        start = np.where(start < 0.0, start + _TWO_PI, start)  # [0, 2π): angle of lo past position 0
        end = start + (hi - lo)
        wraps = end >= _TWO_PI  # reaches the twins
        last = np.where(
            wraps,
            np.minimum(np.floor((end - _TWO_PI) * inv_step), k - 1) + k,
            np.minimum(np.floor(end * inv_step), k - 1),
        )
        i0 = np.minimum(np.ceil(start * inv_step), k)
        return i0.astype(np.intp), (last + 1.0).astype(np.intp)

    def part(self, start: int, stop: int) -> _Beams:
        """The positions ``start:stop`` (with their twins) as a layout of their own, for casting in chunks."""
        k = self.count
        cos2 = np.concatenate((self.cos2[start:stop], self.cos2[k + start : k + stop]))
        sin2 = np.concatenate((self.sin2[start:stop], self.sin2[k + start : k + stop]))
        if self.bearings2 is not None:
            bearings2 = np.concatenate((self.bearings2[start:stop], self.bearings2[k + start : k + stop]))
            return _Beams(self.angles[start:stop], cos2, sin2, bearings2=bearings2)
        first = wrap_angle(float(self.first + start * self.step))
        return _Beams(self.angles[start:stop], cos2, sin2, first=first, step=self.step)


def _prepare_beams(angles: FloatArray) -> _Beams:
    """Lay out beam angles (rad) for :meth:`_Beams.locate`: as a uniform scan if they are one."""
    k = angles.shape[0]
    if k >= 2:
        step = float(angles[-1] - angles[0]) / (k - 1)
        if step > 0.0 and (k - 1) * step < _TWO_PI - 0.5 * step:
            model = angles[0] + step * np.arange(k)
            if float(np.max(np.abs(angles - model))) <= 1e-3 * ARC_PAD:
                c, s = np.cos(angles), np.sin(angles)
                first = float(wrap_angle(angles[:1])[0])
                return _Beams(angles.copy(), np.concatenate((c, c)), np.concatenate((s, s)), first=first, step=step)
    bearing = wrap_angle(angles)
    order = np.argsort(bearing, kind="stable")
    sorted_bearing = bearing[order]
    c = np.cos(angles[order])
    s = np.sin(angles[order])
    return _Beams(
        angles.copy(),
        np.concatenate((c, c)),
        np.concatenate((s, s)),
        order=order,
        bearings2=np.concatenate((sorted_bearing, sorted_bearing + _TWO_PI)),
    )


def _run_pairs(i0: IntArray, i1: IntArray) -> tuple[IntArray, IntArray]:
    """Flatten runs of positions ``[i0, i1)``, one per primitive.

    Returns:
        ``counts`` ``(n,)`` positions per primitive and ``pos`` ``(P,)`` the positions, grouped by primitive.
    """
    counts = np.maximum(i1 - i0, 0)
    total = int(counts.sum())
    first = np.cumsum(counts) - counts
    pos = np.arange(total, dtype=np.intp) + np.repeat(i0 - first, counts)
    return counts, pos


class RayCaster:
    """Casts beams against fixed segments and circles, with the per-segment work done once.

    Args:
        segments: ``(N, 4)`` rows ``[x1, y1, x2, y2]``, m (walls and polygon edges; may be empty).
        circles: ``(M, 3)`` rows ``[x, y, r]``, m, r > 0, or None.

    Raises:
        ValueError: a shape is wrong, a value is not finite or a radius is not positive.

    The caster keeps the last set of beam angles it was given, so casting scan after scan with the same angles
    (a laser scanner) lays them out only once. One caster is meant for one thread.
    """

    def __init__(self, segments: ArrayLike, circles: ArrayLike | None = None) -> None:
        s = _as_rows(segments, 4, "segments").copy()
        c = _as_rows(circles, 3, "circles").copy()
        if np.any(c[:, 2] <= 0.0):
            raise ValueError("circle radii must be > 0")
        s.setflags(write=False)
        c.setflags(write=False)
        self._segments = s
        self._circles = c
        self._x1 = s[:, 0].copy()
        self._y1 = s[:, 1].copy()
        self._x2 = s[:, 2].copy()
        self._y2 = s[:, 3].copy()
        self._ex = self._x2 - self._x1
        self._ey = self._y2 - self._y1
        with np.errstate(all="ignore"):
            inv_length2 = 1.0 / (self._ex * self._ex + self._ey * self._ey)
        self._inv_length2 = np.where(np.isfinite(inv_length2), inv_length2, 0.0)  # zero length: a point
        self._beams: _Beams | None = None

    @property
    def segments(self) -> FloatArray:
        """``(N, 4)`` the segments, read-only."""
        return self._segments

    @property
    def circles(self) -> FloatArray:
        """``(M, 3)`` the static circles, read-only."""
        return self._circles

    def cast(
        self,
        origin: ArrayLike,
        angles: ArrayLike,
        max_range: float,
        extra_circles: ArrayLike | None = None,
    ) -> FloatArray:
        """Distance along each beam to the first segment or circle.

        Args:
            origin: ``(2,)`` position of the sensor ``(x, y)``, m, world frame.
            angles: ``(K,)`` beam directions, rad, world frame (any values; not necessarily sorted).
            max_range: range of the sensor, m, > 0.
            extra_circles: ``(P, 3)`` circles ``[x, y, r]`` present for this cast only (people walking), or None.

        Returns:
            ``(K,)`` float64 distances, m: to the nearest hit, ``max_range`` where nothing is hit within range,
            0 where the origin is on a segment or inside a circle.

        Raises:
            ValueError: a shape is wrong, a value is not finite, ``max_range`` is not positive or a radius is
                not positive.
        """
        o = _as_point(origin)
        a = np.asarray(angles, dtype=np.float64)
        if a.ndim != 1:
            raise ValueError(f"angles must have shape (K,), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("angles must be finite")
        r_max = float(max_range)
        if not (math.isfinite(r_max) and r_max > 0.0):
            raise ValueError(f"max_range must be finite and > 0, got {max_range!r}")
        extra = _as_rows(extra_circles, 3, "extra_circles")
        if np.any(extra[:, 2] <= 0.0):
            raise ValueError("circle radii must be > 0")
        k = a.shape[0]
        if k == 0:
            return np.zeros(0)

        beams = self._beams
        if beams is None or beams.angles.shape != a.shape or not np.array_equal(beams.angles, a):
            beams = _prepare_beams(a)
            self._beams = beams

        nearest = np.full(2 * k, r_max)  # per position and twin; folded onto the beams at the end
        seg_lo, seg_hi, seg_table = self._segment_arcs(o, r_max)
        circles = self._circles if extra.shape[0] == 0 else np.concatenate((self._circles, extra))
        circ_lo, circ_hi, circ_table = _circle_arcs(circles, o, r_max)
        n_prims = seg_lo.shape[0] + circ_lo.shape[0]
        if n_prims:
            chunk = max(1, MAX_PAIRS // n_prims)
            for start in range(0, k, chunk):
                stop = min(k, start + chunk)
                part = beams if stop - start == k else beams.part(start, stop)
                with np.errstate(divide="ignore", invalid="ignore"):
                    if seg_lo.shape[0]:
                        _nearest_segment_hits(part, start, k, nearest, seg_lo, seg_hi, seg_table)
                    if circ_lo.shape[0]:
                        _nearest_circle_hits(part, start, k, nearest, circ_lo, circ_hi, circ_table)

        folded = np.minimum(nearest[:k], nearest[k:]) + 0.0  # + 0.0 turns the -0.0 of 0 / -x into 0.0
        if beams.order is None:
            return folded
        ranges = np.empty(k)
        ranges[beams.order] = folded
        return ranges

    def _segment_arcs(self, o: FloatArray, max_range: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Arcs ``[lo, hi]`` (rad) of the segments within ``max_range`` of ``o``, and their ``(5, n)`` table of
        ``p1 - o``, ``e`` and the distance of the nearest point (m)."""
        ox, oy = float(o[0]), float(o[1])
        rx1 = self._x1 - ox
        ry1 = self._y1 - oy
        ex, ey = self._ex, self._ey
        u = np.clip(-(rx1 * ex + ry1 * ey) * self._inv_length2, 0.0, 1.0)
        cx = rx1 + u * ex
        cy = ry1 + u * ey
        t_min = np.sqrt(cx * cx + cy * cy)
        near = np.flatnonzero(t_min <= max_range)
        if near.shape[0] < t_min.shape[0]:
            rx1, ry1, ex, ey, t_min = rx1[near], ry1[near], ex[near], ey[near], t_min[near]
        rx2 = rx1 + ex
        ry2 = ry1 + ey
        # The arc runs counter-clockwise from the end point on its right to the one on its left; its width is the
        # angle between the two end points, from their cross and dot products (no wrapping needed).
        cross = rx1 * ry2 - ry1 * rx2
        ccw = cross >= 0.0
        lo = np.arctan2(np.where(ccw, ry1, ry2), np.where(ccw, rx1, rx2)) - ARC_PAD
        width = np.arctan2(np.abs(cross), rx1 * rx2 + ry1 * ry2) + 2.0 * ARC_PAD
        table = np.stack((rx1, ry1, ex, ey, t_min))
        on = t_min <= _ON_SEGMENT
        if on.any():  # every beam; zeros make the hit 0 / 0, which becomes t_min
            lo = np.where(on, -math.pi, lo)
            width = np.where(on, _TWO_PI, width)
            table[:4, on] = 0.0
        lo = np.where(lo < -math.pi, lo + _TWO_PI, lo)
        return lo, lo + width, table


def _circle_arcs(circles: FloatArray, o: FloatArray, max_range: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Arcs ``[lo, hi]`` (rad) of the circles within ``max_range`` of ``o``, and their ``(5, m)`` table of centre
    offset ``dx``, ``dy``, ``c² - r²`` (m²), nearest and farthest distance of a hit (m)."""
    if circles.shape[0] == 0:
        return np.zeros(0), np.zeros(0), np.zeros((5, 0))
    dx = circles[:, 0] - o[0]
    dy = circles[:, 1] - o[1]
    r = circles[:, 2]
    distance = np.hypot(dx, dy)
    near = distance - r <= max_range
    if not np.all(near):
        dx, dy, r, distance = dx[near], dy[near], r[near], distance[near]
    inside = distance <= r
    with np.errstate(divide="ignore", invalid="ignore"):
        half = np.arcsin(np.clip(np.where(inside, 1.0, r / distance), 0.0, 1.0))
    lo = np.where(inside, -math.pi, np.arctan2(dy, dx) - half - ARC_PAD)
    width = np.where(inside, _TWO_PI, 2.0 * half + 2.0 * ARC_PAD)
    lo = wrap_angle(lo)
    c2 = distance * distance - r * r
    t_min = np.maximum(distance - r, 0.0)
    t_max = np.sqrt(np.maximum(c2, 0.0))  # the tangent points; 0 when inside
    table = np.stack((dx, dy, c2, t_min, t_max))
    return lo, lo + width, table


def _nearest_segment_hits(
    part: _Beams, start: int, k: int, nearest: FloatArray, lo: FloatArray, hi: FloatArray, table: FloatArray
) -> None:
    """Lower ``nearest`` to the segment hits of the beams of ``part`` (the positions from ``start`` of ``k``)."""
    counts, pos = _run_pairs(*part.locate(lo, hi))
    if pos.shape[0]:
        rx, ry, ex, ey, t_min = np.repeat(table, counts, axis=1)
        c = part.cos2[pos]
        s = part.sin2[pos]
        # In place, as this is the inner loop: u = ((p1 - o) x d) / (d x e) clipped to [0, 1], where the beam
        # crosses the segment; t = d . (p1 + u e - o), at least the nearest distance (which also replaces 0 / 0).
        u = rx * s
        u -= ry * c
        den = c * ey
        den -= s * ex
        u /= den
        np.maximum(u, 0.0, out=u)
        np.minimum(u, 1.0, out=u)
        ex *= u
        ex += rx
        ex *= c
        ey *= u
        ey += ry
        ey *= s
        t = np.fmax(ex + ey, t_min)
        _accumulate(nearest, pos, t, part.count, start, k)


def _nearest_circle_hits(
    part: _Beams, start: int, k: int, nearest: FloatArray, lo: FloatArray, hi: FloatArray, table: FloatArray
) -> None:
    """Lower ``nearest`` to the circle hits of the beams of ``part`` (the positions from ``start`` of ``k``)."""
    counts, pos = _run_pairs(*part.locate(lo, hi))
    if pos.shape[0]:
        dx, dy, c2, t_min, t_max = np.repeat(table, counts, axis=1)
        b = part.cos2[pos] * dx + part.sin2[pos] * dy
        t = c2 / (b + np.sqrt(np.maximum(b * b - c2, 0.0)))
        t = np.fmin(np.fmax(t, t_min), t_max)
        _accumulate(nearest, pos, t, part.count, start, k)


def _accumulate(nearest: FloatArray, pos: IntArray, t: FloatArray, width: int, start: int, k: int) -> None:
    """``nearest = min(nearest, t)`` at the positions ``pos`` of a part of ``width`` beams starting at ``start``."""
    if width != k:
        pos = pos + np.where(pos < width, start, k + start - width)
    np.minimum.at(nearest, pos, t)


def cast_rays(
    origin: ArrayLike,
    angles: ArrayLike,
    segments: ArrayLike,
    circles: ArrayLike | None,
    max_range: float,
) -> FloatArray:
    """Distance along each beam from ``origin`` to the first segment or circle (one-off form of :class:`RayCaster`).

    Args:
        origin: ``(2,)`` position of the sensor ``(x, y)``, m, world frame.
        angles: ``(K,)`` beam directions, rad, world frame.
        segments: ``(N, 4)`` rows ``[x1, y1, x2, y2]``, m (may be empty).
        circles: ``(M, 3)`` rows ``[x, y, r]``, m, r > 0, or None.
        max_range: range of the sensor, m, > 0.

    Returns:
        ``(K,)`` float64 distances, m; ``max_range`` where nothing is hit within range.

    Raises:
        ValueError: a shape is wrong, a value is not finite, or ``max_range`` or a radius is not positive.

    Casting many scans against the same world? Build a :class:`RayCaster` once and call ``cast``.
    """
    return RayCaster(segments, circles).cast(origin, angles, max_range)
