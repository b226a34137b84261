"""The simulated body's geometry against the world, compiled by numba: its clearance, its bumpers and its sonar rays.

    d = clearance(x, y, segments, circles, movers)                 # m to the nearest surface
    front, rear = contacts(x, y, theta, reach, segments, circles, movers)
    ranges = cast(x, y, theta, bearings, reach, segments, circles, movers)   # m along each ray
    warm_up()                                      # numba loads them from its cache now (or compiles them into it)

``segments`` are rows ``[x1, y1, x2, y2]``, ``circles`` and ``movers`` rows ``[x, y, r]`` (m; float64, C order;
an empty ``(0, 3)`` array when nothing moves). :class:`~pluto.hardware.base.sim.SimBody` calls them at every step
of the base: each is one call over every wall and obstacle of the world.
"""

# Strategy: a step of the body asks its clearance once or twice and its bumpers once, and a sonar reading casts 48
# rays (16 transducers, three rays across each cone), against a world of about a hundred walls. In numpy those are a
# few dozen array operations each on short arrays, whose calls, not the arithmetic, were the cost (about 0.1 ms a
# step and 0.15 ms a sonar reading, the largest part of a simulated base's time in lock-step). Compiled, each is one
# loop over the walls and obstacles. The clearance and the bumpers are the closest-point arithmetic of numpy's
# version in the same order. A sonar ray hits a wall where it crosses it (the crossing's fraction along the wall
# within [0, 1] give or take :data:`VERTEX_SLACK`, so a ray through the corner of two walls hits one of them), and a
# circle at the nearer root of its quadratic; a ray that starts on a wall or inside a circle reads 0.

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["NOTHING", "VERTEX_SLACK", "cast", "clearance", "contacts", "warm_up"]

FloatArray = NDArray[np.float64]

VERTEX_SLACK = 1e-9
"""A ray crossing a wall's line this far beyond an end (as a fraction of the wall's length) hits the wall at the end:
rounding, where two walls meet at a corner."""
ON_SURFACE = 1e-9
"""m: a ray that starts this close to a wall reads 0."""
NOTHING = np.zeros((0, 3))
"""No circles (``movers`` when nothing moves)."""


@numba.njit(cache=True, inline="always")
def _segment_distance(x: float, y: float, segments: FloatArray, i: int) -> tuple[float, float, float]:
    """The closest point of segment ``i`` to (x, y), and its distance (m)."""
    ax, ay = segments[i, 0], segments[i, 1]
    dx, dy = segments[i, 2] - ax, segments[i, 3] - ay
    length2 = dx * dx + dy * dy
    t = ((x - ax) * dx + (y - ay) * dy) / (length2 if length2 > 0.0 else 1.0)
    t = min(max(t, 0.0), 1.0)
    cx, cy = ax + t * dx, ay + t * dy
    return cx, cy, math.sqrt((cx - x) * (cx - x) + (cy - y) * (cy - y))


@numba.njit(cache=True, inline="always")
def _circle_clearance(x: float, y: float, circles: FloatArray, best: float) -> float:
    for j in range(circles.shape[0]):
        best = min(best, math.hypot(circles[j, 0] - x, circles[j, 1] - y) - circles[j, 2])
    return best


@numba.njit(cache=True)
def clearance(x: float, y: float, segments: FloatArray, circles: FloatArray, movers: FloatArray) -> float:
    """Distance from (x, y) to the nearest surface of the walls, circles and movers, m (negative inside a circle;
    inf if there is nothing)."""
    best = math.inf
    for i in range(segments.shape[0]):
        best = min(best, _segment_distance(x, y, segments, i)[2])
    return _circle_clearance(x, y, movers, _circle_clearance(x, y, circles, best))


@numba.njit(cache=True)
def contacts(
    x: float, y: float, theta: float, reach: float, segments: FloatArray, circles: FloatArray, movers: FloatArray
) -> tuple[bool, bool]:
    """Whether a surface within ``reach`` (m) of (x, y) lies ahead of the heading ``theta`` (or abeam), and whether one
    lies behind: (front, rear)."""
    hx, hy = math.cos(theta), math.sin(theta)
    front = rear = False
    for i in range(segments.shape[0]):
        cx, cy, distance = _segment_distance(x, y, segments, i)
        if distance <= reach:
            if (cx - x) * hx + (cy - y) * hy >= 0.0:
                front = True
            else:
                rear = True
    f1, r1 = _circle_contacts(x, y, hx, hy, reach, circles)
    f2, r2 = _circle_contacts(x, y, hx, hy, reach, movers)
    return front or f1 or f2, rear or r1 or r2


@numba.njit(cache=True, inline="always")
def _circle_contacts(x: float, y: float, hx: float, hy: float, reach: float, circles: FloatArray) -> tuple[bool, bool]:
    front = rear = False
    for j in range(circles.shape[0]):
        dx, dy, r = circles[j, 0] - x, circles[j, 1] - y, circles[j, 2]
        distance = math.sqrt(dx * dx + dy * dy)
        if distance - r <= reach:
            scale = r / max(distance, 1e-9)
            if (dx - dx * scale) * hx + (dy - dy * scale) * hy >= 0.0:  # the circle's nearest point ahead
                front = True
            else:
                rear = True
    return front, rear


@numba.njit(cache=True)
def cast(
    x: float,
    y: float,
    theta: float,
    bearings: FloatArray,
    reach: float,
    segments: FloatArray,
    circles: FloatArray,
    movers: FloatArray,
) -> FloatArray:
    """Distance from (x, y) along each ray ``theta + bearings[k]`` to the first wall, circle or mover, m; ``reach``
    where nothing is hit within it."""
    k = bearings.shape[0]
    cosines, sines = np.empty(k), np.empty(k)
    for b in range(k):
        angle = theta + bearings[b]
        cosines[b], sines[b] = math.cos(angle), math.sin(angle)
    ranges = np.full(k, reach)
    for i in range(segments.shape[0]):
        rx, ry = segments[i, 0] - x, segments[i, 1] - y
        ex, ey = segments[i, 2] - segments[i, 0], segments[i, 3] - segments[i, 1]
        if _segment_distance(x, y, segments, i)[2] <= ON_SURFACE:
            ranges[:] = 0.0
            return ranges
        for b in range(k):
            c, s = cosines[b], sines[b]
            den = c * ey - s * ex
            if den == 0.0:
                continue  # parallel to the wall
            u = (rx * s - ry * c) / den  # where the ray's line crosses the wall, as a fraction of it
            if u < -VERTEX_SLACK or u > 1.0 + VERTEX_SLACK:
                continue
            u = min(max(u, 0.0), 1.0)
            t = c * (rx + u * ex) + s * (ry + u * ey)
            if 0.0 <= t < ranges[b]:
                ranges[b] = t
    _cast_circles(x, y, cosines, sines, reach, circles, ranges)
    _cast_circles(x, y, cosines, sines, reach, movers, ranges)
    return ranges


@numba.njit(cache=True, inline="always")
def _cast_circles(
    x: float, y: float, cosines: FloatArray, sines: FloatArray, reach: float, circles: FloatArray, ranges: FloatArray
) -> None:
    """Lower ``ranges`` to the rays' hits on ``circles``."""
    for j in range(circles.shape[0]):
        dx, dy, r = circles[j, 0] - x, circles[j, 1] - y, circles[j, 2]
        if math.sqrt(dx * dx + dy * dy) - r > reach:
            continue
        c2 = dx * dx + dy * dy - r * r
        for b in range(ranges.shape[0]):
            if c2 <= 0.0:
                ranges[b] = 0.0  # inside the circle
                continue
            along = cosines[b] * dx + sines[b] * dy
            if along <= 0.0:
                continue  # behind
            disc = along * along - c2
            if disc < 0.0:
                continue  # passes by
            t = c2 / (along + math.sqrt(disc))  # the nearer root, without cancellation
            if t < ranges[b]:
                ranges[b] = t


def warm_up() -> None:
    """Have numba load every kernel from its cache now, or compile it into the cache if it lacks it (seconds; a
    loaded kernel takes milliseconds): each is run once on a small made-up world, with the argument types of the
    real calls."""
    segments = np.array([[1.0, -1.0, 1.0, 1.0]])
    circles = np.array([[-1.0, 0.0, 0.2]])
    clearance(0.0, 0.0, segments, circles, NOTHING)
    contacts(0.0, 0.0, 0.0, 0.3, segments, circles, NOTHING)
    cast(0.0, 0.0, 0.0, np.array([0.0, math.pi]), 5.0, segments, circles, NOTHING)
