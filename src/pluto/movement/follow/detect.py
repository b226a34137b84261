"""People in a laser scan: the scan cut into blobs where the range jumps, and the blobs shaped like a person kept.

Strategy: the echoes of one scan, in beam order, are split wherever two neighbouring echoes lie farther apart than
``jump`` (beams without an echo are skipped, so a single dropout does not cut a person in two). A person at the height
of a scan plane shows as either two small round blobs (legs, each ``leg_width`` wide, their centres within
``leg_pair_distance`` of each other) or one round blob ``body_width`` wide (a torso, a coat, or a disc in the
simulator). Walls are too wide; short pieces of flat wall are told apart from round things by their bulge: the
points of a round thing stand out towards the scanner from the chord between its first and last point (a disc
seen whole by half its width), those of a flat piece lie on it. A concave piece (a corner seen from inside) bulges
away and is dropped too.

A blob's centre is that of the circle fitted to its points (least squares), so the estimate does not move with the
side from which the robot looks at the person nor with its distance. When the fit is implausible (few points, a
noisy blob) the centroid is pushed back along the line of sight by width/π instead (the centroid of the visible
half of a disc of radius r lies 2r/π in front of its centre).

Nothing here knows whether a blob moves: that is the tracker's job, in the world frame
(:mod:`pluto.movement.follow.track`). Points are (x forward, y left) in the robot frame, m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from numpy.typing import NDArray

from pluto.runtime.params import Params
from pluto.runtime.ranges import between

__all__ = [
    "Blob",
    "DetectParams",
    "PersonCandidate",
    "blobs",
    "find_people",
    "fit_circle_centre",
    "scan_points",
    "segment",
]

FloatArray = NDArray[np.float64]

_Width = Annotated[float, between(0.0, 5.0)]
"""The width of a leg or a body, m."""


class DetectParams(Params, kw_only=True, forbid_unknown_fields=True):
    """What a person looks like in a scan.

    Attributes:
        jump: neighbouring echoes farther apart than this belong to different blobs, m.
        min_points: blobs of fewer echoes are noise.
        leg_width: (smallest, largest) width of a leg, m.
        leg_pair_distance: two legs of one person have their centres at most this far apart, m.
        body_width: (smallest, largest) width of a person seen as one blob, m.
        min_bulge: a blob's points must stand out towards the scanner from its chord by at least this fraction of
            its width (a disc seen whole: 0.5; a flat wall: 0).
        max_range: echoes farther than this from the scanner are not looked at, m.
    """

    jump: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.15
    min_points: Annotated[int, between(1, 1000)] = 3
    leg_width: tuple[_Width, _Width] = (0.05, 0.2)
    leg_pair_distance: Annotated[float, between(0.0, 5.0)] = 0.5
    body_width: tuple[_Width, _Width] = (0.2, 0.65)
    min_bulge: Annotated[float, between(0.0, 1.0)] = 0.12
    max_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 8.0


@dataclass(frozen=True)
class Blob:
    """Neighbouring echoes of one scan.

    Attributes:
        first, last: indices of its first and last point in the scan's points (inclusive).
        centre: (x, y) estimated centre of the round thing that gave the echoes, m.
        width: distance between its first and last point, m.
        bulge: how far its points stand out towards the scanner from its chord, as a fraction of ``width``
            (negative: it bulges away).
    """

    first: int
    last: int
    centre: tuple[float, float]
    width: float
    bulge: float

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class PersonCandidate:
    """A blob, or a pair of leg blobs, shaped like a person.

    Attributes:
        x, y: the person's centre, m (frame of the points given).
        width: the blob's width, or the distance between the outer edges of the two legs, m.
        legs: found as a pair of legs (else as one blob).
    """

    x: float
    y: float
    width: float
    legs: bool = False


def scan_points(
    ranges: FloatArray, angles: FloatArray, pan: float, mount_x: float, max_range: float
) -> tuple[FloatArray, FloatArray]:
    """The echoes of a scan in the robot frame, in beam order.

    Args:
        ranges: (N,) m; -1 (an error) and ranges at ``max_range`` or beyond (no echo) are dropped.
        angles: (N,) bearings in the scanner frame, rad.
        pan: wrist pan, rad (left positive).
        mount_x: forward offset of the scanner from the robot centre, m.
        max_range: the scanner's largest range, m.

    Returns:
        (M, 2) points (x forward, y left) and (M,) their ranges, m.

    Raises:
        ValueError: ``ranges`` and ``angles`` differ in shape.
    """
    r = np.asarray(ranges, dtype=float)
    a = np.asarray(angles, dtype=float)
    if r.shape != a.shape:
        raise ValueError(f"ranges {r.shape} and angles {a.shape} differ")
    ok = np.isfinite(r) & np.isfinite(a) & (r > 0.0) & (r < max_range - 1e-6)
    bearing = a[ok] + pan
    points = np.column_stack((mount_x + r[ok] * np.cos(bearing), r[ok] * np.sin(bearing)))
    return points, r[ok]


def segment(points: FloatArray, jump: float) -> list[tuple[int, int]]:
    """Split points in beam order where neighbours are more than ``jump`` m apart.

    Returns:
        (first, last) index pairs (inclusive), in order; none for no points.
    """
    n = len(points)
    if n == 0:
        return []
    gaps = np.hypot(*np.diff(points, axis=0).T) > jump if n > 1 else np.zeros(0, dtype=bool)
    cuts = np.flatnonzero(gaps)
    starts = np.concatenate(([0], cuts + 1))
    ends = np.concatenate((cuts, [n - 1]))
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def blobs(points: FloatArray, origin: tuple[float, float], params: DetectParams) -> list[Blob]:
    """The blobs of a scan with their shape.

    Args:
        points: (M, 2) echoes in beam order, m.
        origin: (x, y) of the scanner in the frame of ``points``, m.
        params: the segmentation's ``jump``, ``min_points`` and ``max_range``.

    Returns:
        The blobs of at least ``min_points`` echoes within ``max_range`` of the scanner, in beam order.
    """
    o = np.asarray(origin, dtype=float)
    found: list[Blob] = []
    for first, last in segment(points, params.jump):
        if last - first + 1 < params.min_points:
            continue
        p = points[first : last + 1]
        centroid = p.mean(axis=0)
        sight = centroid - o
        distance = float(np.hypot(sight[0], sight[1]))
        if distance > params.max_range or distance < 1e-6:
            continue
        a, b = p[0], p[-1]
        chord = b - a
        width = float(np.hypot(chord[0], chord[1]))
        if width < 1e-6:
            continue
        normal = np.array([-chord[1], chord[0]]) / width
        if float(np.dot(normal, o - a)) < 0.0:
            normal = -normal  # towards the scanner
        offsets = (p - a) @ normal
        # the most outstanding point, or the most receding one if none stands out
        bulge = float(offsets.max()) if offsets.max() > -offsets.min() else float(offsets.min())
        centre = fit_circle_centre(p, o, width)
        if centre is None:
            centre = centroid + sight / distance * (width / math.pi)
        found.append(Blob(first, last, (float(centre[0]), float(centre[1])), width, bulge / width))
    return found


def fit_circle_centre(points: FloatArray, origin: FloatArray, width: float) -> FloatArray | None:
    """The centre of the circle through a blob's points (least squares on x² + y² + D·x + E·y + F = 0), if the fit
    is plausible: a radius between half the blob's width and its width, and the centre farther from the scanner
    than the points. None otherwise (too few points, a flat or noisy blob)."""
    if len(points) < 5:
        return None
    mean = points.mean(axis=0)
    q = points - mean  # centred, for a well-conditioned system
    a = np.column_stack((q, np.ones(len(q))))
    rhs = -(q[:, 0] ** 2 + q[:, 1] ** 2)
    (d, e, f), *_ = np.linalg.lstsq(a, rhs, rcond=None)
    centre = np.array([-d / 2, -e / 2])
    r2 = float(centre @ centre - f)
    if r2 <= 0.0:
        return None
    radius = math.sqrt(r2)
    centre = centre + mean
    if not width / 2 <= radius <= width:
        return None
    if np.hypot(*(centre - origin)) <= np.hypot(*(mean - origin)):
        return None
    result: FloatArray = centre
    return result


def find_people(points: FloatArray, origin: tuple[float, float], params: DetectParams) -> list[PersonCandidate]:
    """Person-shaped blobs and pairs of legs in one scan.

    Args:
        points: (M, 2) echoes in beam order (see :func:`scan_points`), m.
        origin: (x, y) of the scanner in the frame of ``points``, m.
        params: what a person looks like.

    Returns:
        The candidates (bodies first, then leg pairs), in the frame of ``points``.
    """
    people: list[PersonCandidate] = []
    legs: list[Blob] = []
    for blob in blobs(points, origin, params):
        if blob.bulge < params.min_bulge:
            continue
        if params.leg_width[0] <= blob.width < params.leg_width[1]:
            legs.append(blob)
        elif params.body_width[0] <= blob.width <= params.body_width[1]:
            people.append(PersonCandidate(blob.centre[0], blob.centre[1], blob.width))
    # pair the legs, nearest pairs first; each leg belongs to one person at most
    pairs = sorted(
        (math.dist(a.centre, b.centre), i, j)
        for i, a in enumerate(legs)
        for j, b in enumerate(legs)
        if i < j and math.dist(a.centre, b.centre) <= params.leg_pair_distance
    )
    used: set[int] = set()
    for gap, i, j in pairs:
        if i in used or j in used:
            continue
        used |= {i, j}
        a, b = legs[i], legs[j]
        x, y = (a.centre[0] + b.centre[0]) / 2, (a.centre[1] + b.centre[1]) / 2
        people.append(PersonCandidate(x, y, gap + (a.width + b.width) / 2, legs=True))
    return people
