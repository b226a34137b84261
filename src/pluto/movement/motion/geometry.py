"""Geometry of the motion module's decisions: free rays, openings (gaps) in a scan, blocked segments, rooms (the
free area around a point, a doorway's wall closing in), scans as points, the rectangle and the coverage grid of an
exploration. Pure functions and small value classes; points are (N, 2) arrays in the ``Localization/Pose`` frame,
m.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CoverageGrid",
    "Gap",
    "Rectangle",
    "beam_ends",
    "detour",
    "echo_points",
    "enclosed",
    "find_gaps",
    "free_area",
    "free_length",
    "points_before",
    "remember_points",
    "segment_blocked",
    "squeezed",
]

FloatArray = NDArray[np.float64]


def free_length(
    points: FloatArray, origin: tuple[float, float], direction: float, half_width: float, limit: float
) -> float:
    """How far (m) a strip of half-width ``half_width`` m from ``origin`` along ``direction`` (rad) is free of
    ``points``, at most ``limit`` m."""
    if len(points) == 0:
        return limit
    c, s = math.cos(direction), math.sin(direction)
    dx, dy = points[:, 0] - origin[0], points[:, 1] - origin[1]
    along = c * dx + s * dy
    across = -s * dx + c * dy
    inside = (along > 0.0) & (np.abs(across) < half_width)
    if not inside.any():
        return limit
    return min(limit, float(along[inside].min()))


def segment_blocked(points: FloatArray, a: tuple[float, float], b: tuple[float, float], clearance: float) -> bool:
    """True if a point lies within ``clearance`` m of the segment from ``a`` to ``b`` (both m)."""
    if len(points) == 0:
        return False
    ax, ay = a
    dx, dy = b[0] - ax, b[1] - ay
    length2 = dx * dx + dy * dy
    px, py = points[:, 0] - ax, points[:, 1] - ay
    t = np.clip((px * dx + py * dy) / length2, 0.0, 1.0) if length2 > 1e-12 else np.zeros(len(points))
    d = np.hypot(px - t * dx, py - t * dy)
    return bool((d < clearance).any())


def squeezed(points: FloatArray, a: tuple[float, float], b: tuple[float, float], width: float) -> bool:
    """True if the segment from ``a`` to ``b`` (m) passes through a passage narrower than ``width`` m: points on
    both of its sides, within 0.3 m of each other along it, whose distances from it add up to less than ``width``
    (a wall beside the way is on one side only)."""
    if len(points) == 0:
        return False
    ax, ay = a
    dx, dy = b[0] - ax, b[1] - ay
    length = math.hypot(dx, dy)
    if length < 1e-6:
        return False
    px, py = points[:, 0] - ax, points[:, 1] - ay
    along = (px * dx + py * dy) / length
    side = (dx * py - dy * px) / length
    near = (along > 0.0) & (along < length) & (np.abs(side) < width)
    left, right = near & (side > 0.0), near & (side < 0.0)
    if not (left.any() and right.any()):
        return False
    close = np.abs(along[left][:, None] - along[right][None, :]) < 0.3
    widths = side[left][:, None] - side[right][None, :]
    return bool((close & (widths < width)).any())


def detour(
    points: FloatArray, a: tuple[float, float], b: tuple[float, float], clearance: float, passage: float
) -> float:
    """How much longer than the straight line (m) the way from ``a`` to ``b`` is around the obstacles that block it,
    as far as ``points`` show them; 0 if nothing within ``clearance`` m of the line blocks it.

    The points between ``a`` and ``b`` (along the line) are projected across it; from the blocking ones, the shadow
    they cast on that cross axis is followed to each side up to the first stretch wider than ``passage`` m with no
    point (where the robot gets through: the end of a wall, a doorway). The way passes that end, ``clearance`` m
    clear of it, at the blocking points' distance along the line; the shorter side counts. What the points do not
    show counts as free: a wall seen in part ends where it is no longer seen.
    """
    if len(points) == 0:
        return 0.0
    ax, ay = a
    dx, dy = b[0] - ax, b[1] - ay
    length = math.hypot(dx, dy)
    if length < 1e-6:
        return 0.0
    px, py = points[:, 0] - ax, points[:, 1] - ay
    along = (px * dx + py * dy) / length
    side = (dx * py - dy * px) / length
    window = (along > 0.0) & (along < length)
    blocking = window & (np.abs(side) < clearance)
    if not blocking.any():
        return 0.0
    lateral = np.sort(side[window])
    wide = np.flatnonzero(np.diff(lateral) >= passage)  # a gap after lateral[k] for k in wide
    hi, lo = float(side[blocking].max()), float(side[blocking].min())
    above = wide[lateral[wide] >= hi]
    top = float(lateral[above[0]]) if len(above) else float(lateral[-1])
    below = wide[lateral[wide + 1] <= lo]
    bottom = float(lateral[below[-1] + 1]) if len(below) else float(lateral[0])
    at = float(np.mean(along[blocking]))
    best = math.inf
    for w in (max(top, 0.0) + clearance, max(-bottom, 0.0) + clearance):
        best = min(best, math.hypot(at, w) + math.hypot(length - at, w) - length)
    return best


@dataclass(frozen=True)
class Gap:
    """An opening between two edge points of a scan (a doorway, the end of a wall), m.

    Attributes:
        a, b: the edge points (the jambs).
        normal: unit vector across the opening, pointing away from where it was seen from.
    """

    a: tuple[float, float]
    b: tuple[float, float]
    normal: tuple[float, float]

    @property
    def middle(self) -> tuple[float, float]:
        return 0.5 * (self.a[0] + self.b[0]), 0.5 * (self.a[1] + self.b[1])

    @property
    def width(self) -> float:
        return math.hypot(self.b[0] - self.a[0], self.b[1] - self.a[1])

    def point(self, depth: float) -> tuple[float, float]:
        """The point ``depth`` m beyond the middle of the opening (negative: before it)."""
        mx, my = self.middle
        return mx + depth * self.normal[0], my + depth * self.normal[1]


JAMB_LINE = 0.25
"""How far from the line of the wall an up edge leaves the echo after a down edge may be, for the two to be the jambs
of one doorway (:func:`find_gaps`), m."""
JAMB_BASE = 0.3
"""Length of the wall before an up edge that gives its line (a shorter base is turned by the range noise), m."""


def find_gaps(
    points: FloatArray, ranges: FloatArray, origin: tuple[float, float], min_width: float, max_width: float, jump: float
) -> list[Gap]:
    """Openings in one scan: an edge where the range jumps up by more than ``jump`` m from one beam to the next,
    and an edge where it jumps down again, the two edge points ``min_width`` to ``max_width`` m apart and the beams
    between them reaching beyond the line through them. An up edge is paired with the first down edge after it, and
    with the first down edge that lands back on the line of the wall it left (within ``JAMB_LINE`` m): a doorway
    seen straight on, with more edges through it (the doorway across the corridor behind it, furniture in the room
    beyond), is found by its two jambs. A single beam far beyond both its neighbours (a lost echo in a wall seen at a
    grazing angle) is a dropout, not a door: it is left out first.

    Args:
        points: (N, 2) the scan's echoes in beam order (bearing increasing), m.
        ranges: (N,) their ranges, m.
        origin: where the scan was taken, m.
        min_width, max_width: widths of the openings kept, m.
        jump: range step that marks an edge, m.
    """
    if len(points) >= 3:
        spike = np.zeros(len(ranges), dtype=bool)
        spike[1:-1] = (ranges[1:-1] - ranges[:-2] > jump) & (ranges[1:-1] - ranges[2:] > jump)
        points, ranges = points[~spike], ranges[~spike]
    n = len(points)
    if n < 3:
        return []
    step = np.diff(ranges)
    rising = np.flatnonzero(step > jump)
    falling = np.flatnonzero(step < -jump)
    pairs: set[tuple[int, int]] = set()
    for up in rising:
        later = falling[falling > up]
        if not len(later):
            break
        pairs.add((int(up), int(later[0]) + 1))
        # the wall the up edge leaves: from the echo at least JAMB_BASE m back along it (no edge in between)
        m = int(up)
        while m > 0 and abs(step[m - 1]) <= jump and math.hypot(*(points[up] - points[m - 1])) < JAMB_BASE:
            m -= 1
        if m == 0 or abs(step[m - 1]) > jump:
            continue
        wall = points[up] - points[m - 1]
        length = float(np.hypot(*wall))
        for k in later:
            b = points[k + 1]
            off = abs(float(wall[0] * (b[1] - points[up][1]) - wall[1] * (b[0] - points[up][0]))) / length
            if off <= JAMB_LINE:
                pairs.add((int(up), int(k) + 1))
                break
    gaps: list[Gap] = []
    for i, j in sorted(pairs):
        a, b = points[i], points[j]
        width = float(math.hypot(b[0] - a[0], b[1] - a[1]))
        if not min_width <= width <= max_width:
            continue
        tx, ty = (b[0] - a[0]) / width, (b[1] - a[1]) / width
        nx, ny = -ty, tx
        mx, my = 0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])
        if nx * (mx - origin[0]) + ny * (my - origin[1]) < 0.0:
            nx, ny = -nx, -ny
        between = points[i + 1 : j]
        if len(between):
            depth = (between[:, 0] - mx) * nx + (between[:, 1] - my) * ny
            if float(np.median(depth)) < 0.3:
                continue
        gaps.append(Gap((float(a[0]), float(a[1])), (float(b[0]), float(b[1])), (float(nx), float(ny))))
    return gaps


def enclosed(walls: FloatArray, gap: Gap, side: float) -> bool:
    """Whether the space on the near side of a doorway is a room: from just before the doorway, along the line of its
    wall, the echoes close it in within ``side`` m both ways (a corridor or a hall runs on farther). A room whose
    doorway is in view can show a large free area through it; its width along the wall tells it from a corridor."""
    tx, ty = -gap.normal[1], gap.normal[0]
    reach = 2.0 * side
    before = gap.point(-0.5)
    ends = [free_length(walls, before, math.atan2(sy * ty, sy * tx), 0.05, reach) for sy in (1.0, -1.0)]
    return max(ends) < side


def free_area(
    scans: Sequence[tuple[tuple[float, float], FloatArray, FloatArray]],
    centre: tuple[float, float],
    sectors: int = 72,
    clip: float = 10.0,
) -> float:
    """Area of the free space around ``centre`` that the scans show, m²: per sector of bearing (from ``centre``)
    the mean range of the beam ends in it (clipped at ``clip`` m), summed as circular sectors, and scaled up to the
    whole circle from the sectors seen. A room gives about its floor area; a corridor or a hall much more."""
    total = np.zeros(sectors)
    count = np.zeros(sectors)
    for _, ends, _ in scans:
        if len(ends) == 0:
            continue
        dx, dy = ends[:, 0] - centre[0], ends[:, 1] - centre[1]
        r = np.minimum(np.hypot(dx, dy), clip)
        k = ((np.arctan2(dy, dx) + math.pi) / (2 * math.pi) * sectors).astype(int) % sectors
        np.add.at(total, k, r)
        np.add.at(count, k, 1.0)
    seen = count > 0
    if not seen.any():
        return math.inf
    mean = total[seen] / count[seen]
    return float(np.sum(0.5 * mean**2 * (2 * math.pi / sectors)) * sectors / np.count_nonzero(seen))


# -- scans in the pose frame ------------------------------------------------------------------------------------------


def echo_points(
    origin: tuple[float, float], bearings: FloatArray, ranges: FloatArray, ok: NDArray[np.bool_]
) -> FloatArray:
    """(N, 2) the echoes of a scan (the beams ``ok``), m."""
    b, r = bearings[ok], ranges[ok]
    return np.column_stack((origin[0] + r * np.cos(b), origin[1] + r * np.sin(b)))


def beam_ends(
    origin: tuple[float, float], bearings: FloatArray, ranges: FloatArray, cap: float = 30.0
) -> tuple[FloatArray, FloatArray]:
    """Every beam's end, in beam order, for openings: a beam without an echo ends ``cap`` m away (an opening onto
    open space); failed beams are dropped. Returns (points (N, 2), ranges (N,))."""
    keep = ranges > 0.0
    r = np.minimum(ranges[keep], cap)
    b = bearings[keep]
    return np.column_stack((origin[0] + r * np.cos(b), origin[1] + r * np.sin(b))), r


def points_before(points: FloatArray, origin: tuple[float, float], goal: tuple[float, float]) -> FloatArray:
    """The points no farther from ``origin`` than the goal (what lies beyond it does not block the way)."""
    d = math.hypot(goal[0] - origin[0], goal[1] - origin[1])
    keep = np.hypot(points[:, 0] - origin[0], points[:, 1] - origin[1]) < d + 0.2
    result: FloatArray = points[keep]
    return result


def remember_points(memory: FloatArray, points: FloatArray, cell: float = 0.1, most: int = 20000) -> FloatArray:
    """``memory`` with ``points`` added, one point per ``cell`` m square, the oldest dropped beyond ``most``."""
    if len(points) == 0:
        return memory
    both = np.concatenate((memory, points))
    keys = np.floor(both / cell).astype(np.int64)
    _, first = np.unique(keys, axis=0, return_index=True)
    kept: FloatArray = both[np.sort(first)]
    return kept[-most:]


@dataclass(frozen=True)
class Rectangle:
    """The region that bounds every motion: a home point at the middle of its base, a heading into it, a half-width
    ``b`` and a height ``h`` (m, rad). ``b`` = 0 means no rectangle."""

    x: float
    y: float
    theta: float
    b: float
    h: float

    @property
    def set(self) -> bool:
        return self.b > 0.0 and self.h > 0.0

    def to_local(self, x: float, y: float) -> tuple[float, float]:
        """(u into the rectangle, w to its left) of a point, m."""
        c, s = math.cos(self.theta), math.sin(self.theta)
        dx, dy = x - self.x, y - self.y
        return c * dx + s * dy, -s * dx + c * dy

    def to_world(self, u: float, w: float) -> tuple[float, float]:
        c, s = math.cos(self.theta), math.sin(self.theta)
        return self.x + c * u - s * w, self.y + s * u + c * w

    def contains(self, x: float, y: float, margin: float = 0.0) -> bool:
        """True if the point is inside (by ``margin`` m), or if there is no rectangle."""
        if not self.set:
            return True
        u, w = self.to_local(x, y)
        return margin <= u <= self.h - margin and abs(w) <= self.b - margin

    def clip(self, x: float, y: float, margin: float = 0.0) -> tuple[float, float]:
        """The nearest point inside (by ``margin`` m, as far as the rectangle allows)."""
        if not self.set:
            return x, y
        u, w = self.to_local(x, y)
        mu, mw = min(margin, 0.5 * self.h), min(margin, self.b)
        return self.to_world(min(max(u, mu), self.h - mu), min(max(w, -self.b + mw), self.b - mw))

    def exit_distance(self, x: float, y: float, direction: float) -> float:
        """How far (m) from a point inside along ``direction`` (rad) the rectangle ends (inf without one)."""
        if not self.set:
            return math.inf
        u, w = self.to_local(x, y)
        du, dw = math.cos(direction - self.theta), math.sin(direction - self.theta)
        best = math.inf
        for pos, d, low, high in ((u, du, 0.0, self.h), (w, dw, -self.b, self.b)):
            if d > 1e-9:
                best = min(best, (high - pos) / d)
            elif d < -1e-9:
                best = min(best, (low - pos) / d)
        return max(0.0, best)


UNKNOWN, FREE, OCCUPIED = 0, 1, 2


class CoverageGrid:
    """What an exploration has seen of its rectangle: cells unknown, free (a beam passed) or occupied (a beam
    ended there).

    Args:
        rect: the rectangle (must be set).
        cell: cell size, m.
    """

    def __init__(self, rect: Rectangle, cell: float = 0.25) -> None:
        if not rect.set:
            raise ValueError("a coverage grid needs a rectangle (b > 0, h > 0)")
        self.rect = rect
        self.cell = cell
        self.nu = max(1, math.ceil(rect.h / cell))
        self.nw = max(1, math.ceil(2 * rect.b / cell))
        self.cells = np.zeros((self.nu, self.nw), dtype=np.int8)

    def index(self, x: FloatArray, y: FloatArray) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """Cell indices (iu, iw) of world points and whether each is inside the grid."""
        r = self.rect
        c, s = math.cos(r.theta), math.sin(r.theta)
        dx, dy = x - r.x, y - r.y
        u = c * dx + s * dy
        w = -s * dx + c * dy + r.b
        iu = np.floor(u / self.cell).astype(np.int64)
        iw = np.floor(w / self.cell).astype(np.int64)
        inside = (iu >= 0) & (iu < self.nu) & (iw >= 0) & (iw < self.nw)
        return iu, iw, inside

    def centre(self, iu: int, iw: int) -> tuple[float, float]:
        """World point at the centre of a cell, m."""
        return self.rect.to_world((iu + 0.5) * self.cell, (iw + 0.5) * self.cell - self.rect.b)

    def add_scan(self, origin: tuple[float, float], bearings: FloatArray, ranges: FloatArray, max_range: float) -> None:
        """Mark the cells a scan's beams crossed (free) and ended in (occupied).

        Args:
            origin: the laser's position, m.
            bearings: (N,) world bearings of the beams, rad.
            ranges: (N,) ranges, m; beams without an echo (>= max_range, or < 0) are skipped.
        """
        ok = (ranges > 0.0) & (ranges < max_range - 1e-6)
        if not ok.any():
            return
        b, r = bearings[ok], ranges[ok]
        step = 0.5 * self.cell
        reach = float(r.max())
        t = np.arange(step, reach, step)
        along = t[None, :] < (r[:, None] - step)
        xs = origin[0] + np.cos(b)[:, None] * t[None, :]
        ys = origin[1] + np.sin(b)[:, None] * t[None, :]
        iu, iw, inside = self.index(xs[along], ys[along])
        free = self.cells[iu[inside], iw[inside]]
        self.cells[iu[inside], iw[inside]] = np.where(free == OCCUPIED, OCCUPIED, FREE)
        hu, hw, hit = self.index(origin[0] + r * np.cos(b), origin[1] + r * np.sin(b))
        self.cells[hu[hit], hw[hit]] = OCCUPIED

    def seen_fraction(self, free_mask: NDArray[np.bool_] | None = None) -> float:
        """Fraction of the cells (of ``free_mask``, or of those not occupied) that were seen."""
        mask = free_mask if free_mask is not None else self.cells != OCCUPIED
        total = int(mask.sum())
        return float((self.cells[mask] != UNKNOWN).sum()) / total if total else 1.0

    def frontier_targets(self, robot_radius: float, reach: float, min_cells: int) -> list[tuple[float, float, int]]:
        """Places to go to see more: free cells at least ``robot_radius`` + a cell from anything occupied or unknown
        outside the grid's free part, within ``reach`` m of at least ``min_cells`` frontier cells (free cells next to
        unknown ones). Returns (x, y, frontier cells in reach) per candidate cell."""
        cells = self.cells
        free = cells == FREE
        unknown = cells == UNKNOWN
        near_unknown = np.zeros_like(unknown)
        near_unknown[1:, :] |= unknown[:-1, :]
        near_unknown[:-1, :] |= unknown[1:, :]
        near_unknown[:, 1:] |= unknown[:, :-1]
        near_unknown[:, :-1] |= unknown[:, 1:]
        frontier = free & near_unknown
        if not frontier.any():
            return []
        k = math.ceil((robot_radius + 0.5 * self.cell) / self.cell)
        blocked = _dilate(cells == OCCUPIED, k)
        margin = math.ceil(robot_radius / self.cell)
        safe = free & ~blocked
        safe[:margin, :] = False
        safe[-margin:, :] = False
        safe[:, :margin] = False
        safe[:, -margin:] = False
        r = math.ceil(reach / self.cell)
        counts = _box_count(frontier, r)
        result = []
        for iu, iw in zip(*np.nonzero(safe & (counts >= min_cells)), strict=True):
            x, y = self.centre(int(iu), int(iw))
            result.append((x, y, int(counts[iu, iw])))
        return result


def _dilate(mask: NDArray[np.bool_], k: int) -> NDArray[np.bool_]:
    out = mask.copy()
    nu, nw = mask.shape
    for du in range(-k, k + 1):
        for dw in range(-k, k + 1):
            if du * du + dw * dw > k * k:
                continue
            src = mask[max(0, -du) : nu - max(0, du), max(0, -dw) : nw - max(0, dw)]
            out[max(0, du) : nu - max(0, -du), max(0, dw) : nw - max(0, -dw)] |= src
    return out


def _box_count(mask: NDArray[np.bool_], r: int) -> NDArray[np.int64]:
    """Number of set cells within a (2r+1)² box around each cell."""
    padded = np.pad(mask.astype(np.int64), r)
    integral = padded.cumsum(0).cumsum(1)
    integral = np.pad(integral, ((1, 0), (1, 0)))
    nu, nw = mask.shape
    s = 2 * r + 1
    total: NDArray[np.int64] = (
        integral[s : s + nu, s : s + nw] - integral[:nu, s : s + nw] - integral[s : s + nu, :nw] + integral[:nu, :nw]
    )
    return total
