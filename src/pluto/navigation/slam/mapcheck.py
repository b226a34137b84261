"""How good a built map of walls is: its walls against the true ones of the world it was built in.

Strategy: a built map and a world are both lists of segments in one frame (the slam module's map frame is where
localization started, which in simulation is the world's start pose, so the two are directly comparable). A built
wall *fits* a true wall when it lies along it: the angle between them is at most ``max_angle`` and both of its ends
are within ``max_offset`` of the true wall's line (:func:`wall_match`), over some of the true wall's length. Built
walls that fit no true wall are *strays* (a wall in the wrong place, or a thing that is not in the world, such as a
person). A true wall is *mapped* when some built wall fits it.

Scoring every true wall would blame the map for rooms the robot never looked into, so only the walls the robot
*saw* count (:func:`walls_seen`): those of which ``min_scans`` scans each put ``min_points`` points within
``tolerance``, spread over at least ``min_length`` of the wall (by default what the slam module needs to start a
wall: the sightings of its ``confirm``, lines of at least its ``min_wall_length``, and the fewest points of a line the
line extractor keeps). A wall glimpsed in a scan or two, through a door as the robot turns, does not count. The
scans' points are in the world frame, placed with the true pose of the laser.

A built map can also be checked without the world (:func:`parallel_copies`): a wall mapped twice, once on each pass
of a loop that was not closed (or closed after the filter had mapped the place again), shows as two parallel walls
facing the same way a few centimetres apart where the building has one. No two faces of a building seen from the same
side lie that close along each other, so every such pair is a copy; counted near the places where loops closed, it
says whether the closures put the walls back on each other.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["COPY_ANGLE", "COPY_DISTANCE", "MapScore", "parallel_copies", "score_map", "wall_match", "walls_seen"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

MAX_OFFSET = 0.05
"""m: the farthest a built wall's end may lie from the true wall's line."""
MAX_ANGLE = 1.0
"""Degrees: the largest angle between a built wall and the true one."""
COPY_DISTANCE = 0.1
"""m: two walls facing the same way whose overlap lies within this of each other are one wall mapped twice."""
COPY_ANGLE = 5.0
"""Degrees: the largest angle between the two copies of a wall."""


def _segments(values: npt.ArrayLike, what: str) -> FloatArray:
    out = np.asarray(values, dtype=np.float64).reshape(-1, 4) if np.size(values) else np.zeros((0, 4))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{what} must be finite rows (x1, y1, x2, y2)")
    return out


def wall_match(built: npt.ArrayLike, wall: npt.ArrayLike) -> tuple[float, float, float]:
    """How well a built wall lies along a true one.

    Args:
        built: ``(4,)`` the built wall (x1, y1, x2, y2), m.
        wall: ``(4,)`` the true wall, m (of non-zero length).

    Returns:
        The angle between them (degrees, 0 to 90: a wall has no direction); the farthest end of the built wall from
        the true wall's line (m); the share of the built wall's length that lies along the true wall (0 to 1).
    """
    w = np.asarray(wall, dtype=np.float64).reshape(4)
    a, b = w[:2], w[2:]
    length = float(np.linalg.norm(b - a))
    d = (b - a) / max(length, 1e-12)
    n = np.array([-d[1], d[0]])
    ends = np.asarray(built, dtype=np.float64).reshape(2, 2)
    e = ends[1] - ends[0]
    turn = abs(math.degrees(math.atan2(d[0] * e[1] - d[1] * e[0], float(d @ e))))
    turn = min(turn, 180.0 - turn)
    off = float(np.abs((ends - a) @ n).max())
    t = np.sort((ends - a) @ d)
    overlap = max(0.0, min(float(t[1]), length) - max(float(t[0]), 0.0)) / max(float(t[1] - t[0]), 1e-9)
    return turn, off, overlap


def walls_seen(
    walls: npt.ArrayLike,
    scans: Iterable[npt.ArrayLike],
    *,
    tolerance: float = 0.05,
    min_points: int = 6,
    min_length: float = 0.6,
    min_scans: int = 3,
) -> BoolArray:
    """The walls a laser saw well enough to map them.

    Args:
        walls: ``(N, 4)`` the true walls (x1, y1, x2, y2), m.
        scans: each scan's points in the world frame, ``(K, 2)`` m (the laser placed at its true pose).
        tolerance: a point farther than this from every wall belongs to none, m.
        min_points: points of one scan a wall needs.
        min_length: m along the wall those points must span (shorter walls are never seen).
        min_scans: scans that must see the wall so.

    Returns:
        ``(N,)`` whether each wall was seen.

    Raises:
        ValueError: walls or points that are not finite, or a bad setting.
    """
    segs = _segments(walls, "walls")
    if not (tolerance > 0 and min_length >= 0 and min_points >= 1 and min_scans >= 1):
        raise ValueError(
            "need tolerance > 0, min_length >= 0, min_points >= 1 and min_scans >= 1, got "
            f"{tolerance}, {min_length}, {min_points}, {min_scans}"
        )
    sightings = np.zeros(segs.shape[0], dtype=np.intp)
    if not segs.shape[0]:
        return sightings > 0
    a = segs[:, :2]
    along = segs[:, 2:] - a
    length = np.hypot(along[:, 0], along[:, 1])
    unit = along / np.maximum(length, 1e-12)[:, None]
    for scan in scans:
        points = np.asarray(scan, dtype=np.float64).reshape(-1, 2)
        if not points.shape[0]:
            continue
        if not np.all(np.isfinite(points)):
            raise ValueError("scan points must be finite")
        rel = points[:, None, :] - a[None, :, :]  # (K, N, 2)
        t = np.einsum("knd,nd->kn", rel, unit)
        foot = np.clip(t, 0.0, length[None, :])
        gap = np.hypot(rel[..., 0] - foot * unit[None, :, 0], rel[..., 1] - foot * unit[None, :, 1])
        nearest = np.argmin(gap, axis=1)
        close = gap[np.arange(points.shape[0]), nearest] <= tolerance
        for wall in np.unique(nearest[close]):
            on = t[close & (nearest == wall), wall]
            if on.size >= min_points and float(on.max() - on.min()) >= min_length:
                sightings[wall] += 1
    seen: BoolArray = sightings >= min_scans
    return seen


@dataclass(frozen=True)
class MapScore:
    """A built map against the true walls.

    Attributes:
        built: walls in the built map.
        fitting: built walls that fit a true wall (the others are :attr:`strays`).
        seen: true walls the robot saw (all of them when no scans were given).
        mapped: of those, the ones some built wall fits.
        worst_offset: m, the farthest end of a fitting built wall from its true wall's line (0 without one).
        worst_angle: degrees, the largest angle of a fitting built wall to its true wall (0 without one).
        max_offset, max_angle: the criterion, m and degrees.
    """

    built: int
    fitting: int
    seen: int
    mapped: int
    worst_offset: float
    worst_angle: float
    max_offset: float = MAX_OFFSET
    max_angle: float = MAX_ANGLE

    @property
    def strays(self) -> int:
        """Built walls that fit no true wall."""
        return self.built - self.fitting

    def describe(self) -> str:
        """``38 of the 41 walls seen mapped within 5 cm and 1° (at worst 4.3 cm, 0.46°); 52 walls in the map, 2 on no
        true wall``."""
        return (
            f"{self.mapped} of the {self.seen} walls seen mapped within {self.max_offset * 100:g} cm and "
            f"{self.max_angle:g}° (at worst {self.worst_offset * 100:.1f} cm, {self.worst_angle:.2f}°); "
            f"{self.built} walls in the map, {self.strays} on no true wall"
        )


def score_map(
    built: npt.ArrayLike,
    walls: npt.ArrayLike,
    seen: npt.ArrayLike | None = None,
    *,
    max_offset: float = MAX_OFFSET,
    max_angle: float = MAX_ANGLE,
) -> MapScore:
    """Score a built map against the true walls (see the module docstring).

    Args:
        built: ``(M, 4)`` the built map's walls, m.
        walls: ``(N, 4)`` the true walls, in the same frame, m.
        seen: ``(N,)`` which true walls count (:func:`walls_seen`); None: all of them.
        max_offset: m, the farthest a fitting built wall's end may be from the true wall's line.
        max_angle: degrees, the largest angle between a fitting built wall and its true wall.

    Returns:
        The score.

    Raises:
        ValueError: walls that are not finite, or ``seen`` of another length than ``walls``.
    """
    mapped_walls = _segments(built, "the built walls")
    true_walls = _segments(walls, "the true walls")
    counted = np.ones(true_walls.shape[0], dtype=np.bool_) if seen is None else np.asarray(seen, dtype=np.bool_)
    if counted.shape != (true_walls.shape[0],):
        raise ValueError(f"seen has {counted.size} values for {true_walls.shape[0]} walls")
    hit = np.zeros(true_walls.shape[0], dtype=np.bool_)
    fitting = 0
    worst_offset = worst_angle = 0.0
    for segment in mapped_walls:
        fits = False
        for index, wall in enumerate(true_walls):
            turn, off, overlap = wall_match(segment, wall)
            if overlap > 0.0 and off <= max_offset and turn <= max_angle:
                fits = hit[index] = True
                worst_offset, worst_angle = max(worst_offset, off), max(worst_angle, turn)
        fitting += fits
    return MapScore(
        built=mapped_walls.shape[0],
        fitting=fitting,
        seen=int(counted.sum()),
        mapped=int((hit & counted).sum()),
        worst_offset=worst_offset,
        worst_angle=worst_angle,
        max_offset=max_offset,
        max_angle=max_angle,
    )


def parallel_copies(
    segments: npt.ArrayLike,
    facing: npt.ArrayLike,
    *,
    distance: float = COPY_DISTANCE,
    max_angle: float = COPY_ANGLE,
    near: npt.ArrayLike | None = None,
    radius: float = 5.0,
) -> list[tuple[int, int]]:
    """The pairs of walls of a built map that are one wall mapped twice (see the module docstring).

    Two walls are copies when they face the same way (their ``facing`` normals point to the same side), turn from
    each other by at most ``max_angle``, overlap along their length, and the shorter one's points over the overlap
    lie within ``distance`` of the longer one's line.

    Args:
        segments: ``(N, 4)`` the built walls (x1, y1, x2, y2), m.
        facing: ``(N, 2)`` each wall's normal towards the side it was seen from; (0, 0) where that is not known
            (such a wall is tested against walls on either side).
        distance: m, see above.
        max_angle: degrees, see above.
        near: ``(K, 2)`` points (m) where loops closed: only pairs with a wall within ``radius`` of one of them are
            counted; None: every pair.
        radius: m, see ``near``.

    Returns:
        The pairs (i, j), i < j, indices into ``segments``.

    Raises:
        ValueError: walls, normals or points that are not finite, of other shapes, or a bad setting.
    """
    walls = _segments(segments, "the built walls")
    normals = np.asarray(facing, dtype=np.float64).reshape(-1, 2) if np.size(facing) else np.zeros((0, 2))
    if normals.shape[0] != walls.shape[0] or not np.all(np.isfinite(normals)):
        raise ValueError(f"facing must be {walls.shape[0]} finite rows (nx, ny), got shape {normals.shape}")
    if not (distance > 0 and 0 <= max_angle < 90 and radius > 0):
        raise ValueError(
            f"need distance > 0, 0 <= max_angle < 90 and radius > 0, got {distance}, {max_angle}, {radius}"
        )
    n = walls.shape[0]
    if n < 2:
        return []
    a, b = walls[:, :2], walls[:, 2:]
    length = np.hypot(*(b - a).T)
    usable = length > 1e-9
    direction = (b - a) / np.maximum(length, 1e-12)[:, None]
    counted = usable.copy()
    if near is not None:
        points = np.asarray(near, dtype=np.float64).reshape(-1, 2) if np.size(near) else np.zeros((0, 2))
        if not np.all(np.isfinite(points)):
            raise ValueError("the points where loops closed must be finite")
        if points.shape[0] == 0:
            return []
        counted &= _near_points(a, direction, length, points, radius)
    cos_limit = math.cos(math.radians(max_angle))
    pairs: list[tuple[int, int]] = []
    for i in np.flatnonzero(usable).tolist():
        others = np.flatnonzero(usable & (np.arange(n) > i) & (counted | counted[i]))
        if others.size == 0:
            continue
        parallel = np.abs(direction[others] @ direction[i]) >= cos_limit
        same_side = (normals[others] @ normals[i]) >= 0.0
        for j in others[parallel & same_side].tolist():
            long_, short = (i, j) if length[i] >= length[j] else (j, i)
            offset = _overlap_offset(walls[long_], direction[long_], walls[short])
            if offset is not None and offset <= distance:
                pairs.append((i, j))
    return pairs


def _near_points(
    a: FloatArray, direction: FloatArray, length: FloatArray, points: FloatArray, radius: float
) -> BoolArray:
    """``(N,)`` which walls (from ``a`` along ``direction`` for ``length``) have a point within ``radius`` of them
    (of the segment's nearest point)."""
    rel = points[None, :, :] - a[:, None, :]
    t = np.clip(np.einsum("nkd,nd->nk", rel, direction), 0.0, length[:, None])
    foot = a[:, None, :] + t[..., None] * direction[:, None, :]
    out: BoolArray = (np.hypot(*(points[None, :, :] - foot).transpose(2, 0, 1)) <= radius).any(axis=1)
    return out


def _overlap_offset(long_wall: FloatArray, along: FloatArray, short_wall: FloatArray) -> float | None:
    """The farthest the shorter wall's points at the ends of its overlap with the longer wall (``along`` its unit
    direction) lie from the longer wall's line, m; None when they do not overlap."""
    a_long, b_long, a_short, b_short = long_wall[:2], long_wall[2:], short_wall[:2], short_wall[2:]
    normal = np.array([-along[1], along[0]])
    t_long = np.sort([float(a_long @ along), float(b_long @ along)])
    t_short = np.array([float(a_short @ along), float(b_short @ along)])
    low, high = max(t_long[0], t_short.min()), min(t_long[1], t_short.max())
    if high <= low:
        return None
    # the shorter wall's points at the overlap's ends, against the longer wall's line
    span = t_short[1] - t_short[0]
    if abs(span) < 1e-12:
        return None
    ends = [a_short + (b_short - a_short) * ((t - t_short[0]) / span) for t in (low, high)]
    return max(abs(float((p - a_long) @ normal)) for p in ends)
