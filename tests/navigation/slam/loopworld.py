"""A synthetic loop for the back end's tests: a square corridor around a block, with pillars and recesses along its
walls placed without symmetry, and a laser driven round it more than once with noisy odometry.

Everything is seeded: the same arguments give the same log.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pluto.geometry import Pose2D, compose
from pluto.navigation.slam.offline import OfflineLog, OfflineScan
from pluto.sim.raycast import RayCaster

WIDTH = 3.0
"""The corridor's width, m."""
DEPTH = 1.0
"""How deep each doorway's alcove is, m."""
BEAMS = np.radians(np.arange(-90.0, 90.5, 1.0))
"""A SICK-like 180° scan at 1°."""


def _box(x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float, float, float]]:
    return [(x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)]


def loop_world(size: tuple[float, float] = (48.0, 30.0), seed: int = 7) -> np.ndarray:
    """``(n, 4)`` wall segments: a corridor :data:`WIDTH` wide round a block, the outer walls ``size`` (m) from
    (0, 0). Each face of the corridor is stretches of wall 2 to 6 m long between doorways 1 m wide, each doorway an
    alcove :data:`DEPTH` deep, at seeded places (no two stretches alike)."""
    w, h = size
    rng = np.random.default_rng(seed)
    faces = [
        # (start, direction along, outward normal: into the wall) of each face that lines the corridor, its length
        ((0.0, 0.0), (1.0, 0.0), (0.0, -1.0), w),
        ((w, 0.0), (0.0, 1.0), (1.0, 0.0), h),
        ((w, h), (-1.0, 0.0), (0.0, 1.0), w),
        ((0.0, h), (0.0, -1.0), (-1.0, 0.0), h),
        ((WIDTH, WIDTH), (1.0, 0.0), (0.0, 1.0), w - 2 * WIDTH),
        ((w - WIDTH, WIDTH), (0.0, 1.0), (-1.0, 0.0), h - 2 * WIDTH),
        ((w - WIDTH, h - WIDTH), (-1.0, 0.0), (0.0, -1.0), w - 2 * WIDTH),
        ((WIDTH, h - WIDTH), (0.0, -1.0), (1.0, 0.0), h - 2 * WIDTH),
    ]
    segments: list[tuple[float, float, float, float]] = []
    for (x0, y0), (dx, dy), (nx, ny), length in faces:

        def at(t: float, depth: float = 0.0) -> tuple[float, float]:
            return x0 + t * dx + depth * nx, y0 + t * dy + depth * ny  # noqa: B023 (used at once)

        t = 0.0
        while t < length:
            end = min(t + float(rng.uniform(2.0, 6.0)), length)
            if length - end < 2.0:
                end = length
            segments.append((*at(t), *at(end)))
            if end >= length:
                break
            door = end + 1.0
            # the doorway's recess: its two sides and its back
            back, back_door = at(end, DEPTH), at(door, DEPTH)
            segments += [(*at(end), *back), (*back, *back_door), (*back_door, *at(door))]
            t = door
    return np.array(segments, dtype=np.float64)


def loop_path(
    size: tuple[float, float] = (48.0, 30.0),
    laps: float = 1.25,
    step: float = 0.2,
    turn_step: float = math.radians(15.0),
) -> list[Pose2D]:
    """Laser poses along the middle of the corridor of :func:`loop_world` (``size``), counter-clockwise from its
    south-west corner facing east: ``step`` m between scans along the straights, turning on the spot ``turn_step`` a
    scan at the corners, for ``laps`` times round."""
    w, h, m = size[0], size[1], 0.5 * WIDTH
    corners = [(m, m), (w - m, m), (w - m, h - m), (m, h - m)]
    perimeter = 2 * (w - WIDTH + h - WIDTH)
    poses: list[Pose2D] = [(m, m, 0.0)]
    travelled = 0.0
    leg = 0
    while travelled < laps * perimeter:
        x, y, theta = poses[-1]
        tx, ty = corners[(leg + 1) % 4]
        left = math.hypot(tx - x, ty - y)
        if left < 1e-9:
            target = theta + math.pi / 2
            while theta < target - 1e-9:
                theta = min(theta + turn_step, target)
                poses.append((x, y, theta))
            leg += 1
            continue
        move = min(step, left)
        poses.append(compose((x, y, theta), (move, 0.0, 0.0)))
        travelled += move
    return poses


def loop_log(
    path: list[Pose2D],
    world: np.ndarray,
    rng: np.random.Generator,
    *,
    max_range: float = 8.0,
    range_std: float = 0.01,
) -> OfflineLog:
    """The scans of ``path`` in ``world`` (a laser of ``max_range`` m, ranges with ``range_std`` m of noise), its
    true poses as both the odometry (perturb it with the runner's noise) and the reference."""
    caster = RayCaster(world)
    scans = []
    for k, (x, y, theta) in enumerate(path):
        ranges = caster.cast((x, y), BEAMS + theta, max_range)
        ranges = np.where(ranges < max_range, ranges + rng.normal(0.0, range_std, ranges.shape), max_range)
        scans.append(OfflineScan(0.1 * k, ranges, BEAMS.copy(), max_range))
    poses = np.array(path, dtype=np.float64)
    return OfflineLog(Path("loop-world"), scans, poses.copy(), poses.copy())
