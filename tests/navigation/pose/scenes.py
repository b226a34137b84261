"""Worlds, scans and simulated drives shared by the pose module's tests.

A drive integrates a true path at 50 Hz, makes the base's odometry from it with errors drawn from the same model
the localization service assumes (so its covariances are honest), feeds that odometry to the localization service's
dead reckoning, and takes a scan of the true laser pose every 200 ms.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pluto.geometry import wrap_angle
from pluto.navigation.localization.core import DeadReckoning, LaserPose, LocalizationParams
from pluto.navigation.pose.features import LineFeature, extract_lines
from pluto.sim.raycast import RayCaster
from pluto.sim.world import World, parse_world

MOUNT = LocalizationParams().laser_mount[0]
MAX_RANGE = 80.0
SIGMA = 0.01


def angles(beams: int = 361) -> np.ndarray:
    """Bearings of a scan of ``beams`` over 180°, rad."""
    return np.linspace(-math.pi / 2, math.pi / 2, beams)


def world_of(walls: list[tuple[float, float, float, float]], name: str = "test") -> World:
    body = "".join(f'<wall x1="{a}" y1="{b}" x2="{c}" y2="{d}"/>' for a, b, c, d in walls)
    return parse_world(f'<world name="{name}" version="1"><walls>{body}</walls></world>')


L_ROOM_WALLS = [
    (0.0, 0.0, 12.0, 0.0),
    (12.0, 0.0, 12.0, 5.0),
    (12.0, 5.0, 9.0, 5.0),
    (9.0, 5.0, 9.0, 8.0),
    (9.0, 8.0, 0.0, 8.0),
    (0.0, 8.0, 0.0, 0.0),
    (4.5, 3.5, 4.5, 5.0),  # a free-standing partition
]
"""An L-shaped room, 12 m x 8 m less a 3 m x 3 m corner, with a partition: no symmetry maps it onto itself."""

L_ROOM = world_of(L_ROOM_WALLS, "l-room")

LOOP = [(10.5, 1.5), (10.5, 3.5), (7.5, 3.5), (7.5, 6.5), (1.5, 6.5), (1.5, 1.5)]
"""A loop in the L-room, driven from (1.5, 1.5) facing east."""


def scan(
    caster: RayCaster,
    laser: tuple[float, float, float],
    bearings: np.ndarray,
    rng: np.random.Generator | None = None,
    sigma: float = SIGMA,
) -> np.ndarray:
    """Ranges of a scan from a laser at (x, y, θ), with Gaussian range noise if ``rng`` is given."""
    ranges = caster.cast(np.array(laser[:2]), bearings + laser[2], MAX_RANGE)
    if rng is not None:
        ranges = np.where(ranges < MAX_RANGE, ranges + rng.normal(0.0, sigma, ranges.shape), MAX_RANGE)
    return np.minimum(ranges, MAX_RANGE)


def laser_of(robot: tuple[float, float, float]) -> tuple[float, float, float]:
    x, y, theta = robot
    return x + MOUNT * math.cos(theta), y + MOUNT * math.sin(theta), theta


@dataclass(frozen=True)
class Frame:
    """One scan of a drive: the truth, the dead reckoning and the scan's lines."""

    t: float
    robot: tuple[float, float, float]
    laser: tuple[float, float, float]
    odometry: tuple[float, float, float]
    dead_reckoning: LaserPose
    features: list[LineFeature]


def drive(
    seed: int,
    world: World = L_ROOM,
    waypoints: list[tuple[float, float]] = LOOP,
    start: tuple[float, float, float] = (1.5, 1.5, 0.0),
    seconds: float = 40.0,
    speed: float = 0.5,
    beams: int = 361,
    params: LocalizationParams | None = None,
    scale_error: float = 0.0,
    heading_gain_error: float = 0.0,
) -> Iterator[Frame]:
    """A seeded drive along ``waypoints`` (looping), one :class:`Frame` per scan (every 0.2 s).

    ``scale_error`` and ``heading_gain_error`` make the odometry systematically wrong: it reports distances divided
    by (1 + scale_error) and turns divided by (1 + heading_gain_error).
    """
    rng = np.random.default_rng(seed)
    p = params or LocalizationParams(dmu_wait=0.0, wrist_wait=0.0)
    dr = DeadReckoning(p, start)
    caster = RayCaster(world.segments(), world.circles)
    bearings = angles(beams)
    dt = 0.02  # 50 Hz odometry; a scan every 10 steps
    steps = round(seconds / dt)
    noise = rng.standard_normal((steps + 1, 3))
    x, y, theta = start
    ox, oy, otheta = start
    target = 0
    dr.add_odometry(0.0, ox, oy, otheta)
    for k in range(1, steps + 1):
        t = k * dt
        wx, wy = waypoints[target]
        if math.hypot(wx - x, wy - y) < 0.3:
            target = (target + 1) % len(waypoints)
            wx, wy = waypoints[target]
        error = wrap_angle(math.atan2(wy - y, wx - x) - theta)
        omega = max(-0.8, min(0.8, 2.0 * error))
        v = speed * max(0.0, math.cos(error)) ** 4
        ds, dtheta = v * dt, omega * dt
        mid = theta + 0.5 * dtheta
        x, y, theta = x + ds * math.cos(mid), y + ds * math.sin(mid), theta + dtheta
        # the odometry's step: the true one, systematically and randomly wrong, as the dead reckoning models it
        n_along, n_across, n_turn = noise[k]
        along = ds / (1.0 + scale_error) + n_along * p.distance_noise * math.sqrt(ds)
        across = n_across * p.lateral_noise * math.sqrt(ds)
        turn_var = p.odometry_heading_noise**2 * abs(dtheta) + p.odometry_heading_per_distance**2 * ds
        turn = dtheta / (1.0 + heading_gain_error) + n_turn * math.sqrt(turn_var)
        omid = otheta + 0.5 * turn
        ox += along * math.cos(omid) - across * math.sin(omid)
        oy += along * math.sin(omid) + across * math.cos(omid)
        otheta += turn
        dr.add_odometry(t, ox, oy, otheta)
        if k % 10 == 0:
            laser = laser_of((x, y, theta))
            pose = dr.scan(t)
            assert pose is not None
            ranges = scan(caster, laser, bearings, rng)
            features = extract_lines(ranges, bearings, max_range=MAX_RANGE, range_sigma=SIGMA)
            yield Frame(t, (x, y, theta), laser, (ox, oy, otheta), pose, features)
