"""Seeded synthetic drives past many walls for the slam module's tests.

The world is a set of short walls scattered on both sides of a closed track (an ellipse) or a long corridor. The laser
follows the track; the dead reckoning integrates the true increments with noise drawn from the covariance it reports;
every scan sees the walls whose middle is within range and in front, each as its true (γ, ρ) plus noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from pluto.geometry import Pose2D, compose, relative
from pluto.navigation.pose.map import WallMap
from pluto.navigation.slam.ekf import WallObservation, observe_wall

OBS_COV = np.diag([0.01**2, 0.02**2])
"""Noise of a wall's (γ, ρ) in a scan."""


@dataclass(frozen=True)
class Scan:
    """One step of a drive: the dead-reckoned laser pose, the increment's covariance and the walls seen."""

    true_pose: Pose2D
    dr_pose: Pose2D
    increment: np.ndarray
    seen: tuple[tuple[int, WallObservation], ...]


def track_world(rng: np.random.Generator, walls: int = 80, a: float = 30.0, b: float = 12.0) -> WallMap:
    """Walls of 3 m, 4 to 6 m to either side of the ellipse (a cos t, b sin t), turned up to 0.5 rad off it."""
    segments = []
    for k in range(walls):
        t = 2.0 * math.pi * (k + rng.uniform(0.0, 0.5)) / walls
        px, py = a * math.cos(t), b * math.sin(t)
        tx, ty = -a * math.sin(t), b * math.cos(t)
        norm = math.hypot(tx, ty)
        tx, ty = tx / norm, ty / norm
        side = 1.0 if k % 2 else -1.0
        offset = rng.uniform(4.0, 6.0) * side
        cx, cy = px - ty * offset, py + tx * offset
        turn = rng.uniform(-0.5, 0.5)
        dx, dy = math.cos(turn) * tx - math.sin(turn) * ty, math.sin(turn) * tx + math.cos(turn) * ty
        segments.append((cx - 1.5 * dx, cy - 1.5 * dy, cx + 1.5 * dx, cy + 1.5 * dy))
    return WallMap.from_segments(segments)


def track_path(laps: float = 1.3, step: float = 0.5, a: float = 30.0, b: float = 12.0) -> list[Pose2D]:
    """Laser poses every ``step`` metres (about) along the ellipse, counter-clockwise from (a, 0)."""
    poses = []
    t = 0.0
    while t < 2.0 * math.pi * laps:
        tx, ty = -a * math.sin(t), b * math.cos(t)
        poses.append((a * math.cos(t), b * math.sin(t), math.atan2(ty, tx)))
        t += step / math.hypot(tx, ty)
    return poses


def corridor_world(length: float, spacing: float = 1.5) -> WallMap:
    """Walls of 1.2 m every ``spacing`` metres on both sides of the x axis, 3 m away, along ``length`` metres."""
    segments = []
    x = 0.0
    while x < length:
        segments.append((x, 3.0, x + 1.2, 3.2))
        segments.append((x + 0.4, -3.0, x + 1.6, -2.9))
        x += spacing
    return WallMap.from_segments(segments)


def corridor_path(length: float, step: float = 0.5) -> list[Pose2D]:
    """Laser poses along the x axis, gently weaving."""
    xs = np.arange(0.0, length, step).tolist()
    return [(x, 0.3 * math.sin(0.2 * x), math.atan(0.06 * math.cos(0.2 * x))) for x in xs]


def drive(
    world: WallMap,
    path: list[Pose2D],
    rng: np.random.Generator,
    *,
    max_range: float = 8.0,
    sigma: Callable[[float, float], np.ndarray] | None = None,
) -> Iterator[Scan]:
    """The scans of a drive along ``path`` (laser poses) in ``world``.

    ``sigma(distance, turn)`` gives the 3x3 covariance of an increment (robot frame); by default 2 % of the distance
    and 1 % of the turn plus a little.
    """
    if sigma is None:

        def sigma(distance: float, turn: float) -> np.ndarray:
            return np.diag([(0.02 * distance) ** 2 + 1e-6, (0.01 * distance) ** 2 + 1e-6, (0.01 * turn) ** 2 + 1e-5])

    dr = path[0]
    previous = path[0]
    for k, pose in enumerate(path):
        inc = relative(previous, pose)
        cov = sigma(math.hypot(inc[0], inc[1]), abs(inc[2]))
        if k:
            noisy = np.asarray(inc) + rng.multivariate_normal(np.zeros(3), cov)
            dr = compose(dr, (float(noisy[0]), float(noisy[1]), float(noisy[2])))
        previous = pose
        seen = []
        x, y, th = pose
        c, s = math.cos(th), math.sin(th)
        for w in world.visible((x, y, th), max_range).tolist():
            mid = world.segments[w].reshape(2, 2).mean(axis=0)
            if math.hypot(mid[0] - x, mid[1] - y) > max_range or (mid[0] - x) * c + (mid[1] - y) * s < 0.5:
                continue
            z, _, _ = observe_wall(np.array(pose), np.array([world.alpha[w], world.rho[w]]))
            if z[1] < 0.5:
                continue
            noisy_z = z + rng.multivariate_normal(np.zeros(2), OBS_COV)
            local = (c * (mid[0] - x) + s * (mid[1] - y), -s * (mid[0] - x) + c * (mid[1] - y))
            seen.append((w, WallObservation(float(noisy_z[0]), float(noisy_z[1]), OBS_COV, local)))
        yield Scan(pose, dr, cov, tuple(seen))


class Mapper:
    """Feeds the scans of a drive to a filter with known association: a wall seen for the first time is added
    (after the update with the known ones), later sightings update it."""

    def __init__(self, slam: object) -> None:
        self.slam = slam
        self.index: dict[int, int] = {}

    def step(self, scan: Scan) -> None:
        slam = self.slam
        slam.predict(scan.dr_pose, scan.increment)  # type: ignore[attr-defined]
        known = [(self.index[w], obs) for w, obs in scan.seen if w in self.index]
        slam.update(known)  # type: ignore[attr-defined]
        for w, obs in scan.seen:
            if w not in self.index:
                self.index[w] = slam.add_wall(obs)  # type: ignore[attr-defined]
