"""The route follower: reaching waypoints with the simulated body, pose composition, angle wrapping, slowing down."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pluto.geometry import compose, wrap_angle
from pluto.sim.body import SimBody
from pluto.sim.route import RouteCommand, RouteFollower

NO_SEGMENTS = np.zeros((0, 4))
NO_CIRCLES = np.zeros((0, 3))


def follow(
    waypoints: list[tuple[float, float]],
    start: tuple[float, float, float] = (0.0, 0.0, 0.0),
    dt: float = 0.05,
    limit: float = 120.0,
) -> tuple[RouteFollower, SimBody, list[tuple[float, float, int]]]:
    """Drive the body along the route in an empty world; return the follower, the body and the path."""
    follower = RouteFollower(waypoints)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, start)
    s = body.state()
    path = []
    for _ in range(round(limit / dt)):
        command = follower.step((s.x, s.y, s.theta))
        path.append((s.x, s.y, command.waypoint))
        if command.done:
            break
        s = body.step(command.v, command.omega, dt)
    return follower, body, path


def test_reaches_every_waypoint_in_order() -> None:
    route = [(3.0, 0.0), (3.0, 3.0), (-1.0, 4.0), (0.0, 0.0)]
    follower, body, path = follow(route)
    assert follower.index == len(route)
    assert follower.step((body.x, body.y, body.theta)) == RouteCommand(0.0, 0.0, len(route), True)
    for k, (gx, gy) in enumerate(route):
        # it came within the tolerance of each waypoint while that waypoint was the goal
        closest = min(math.hypot(x - gx, y - gy) for x, y, i in path if i == k)
        assert closest <= follower.tolerance + 0.05
    indices = [i for _, _, i in path]
    assert indices == sorted(indices)


def test_reaches_a_waypoint_behind_it() -> None:
    follower, body, _ = follow([(-4.0, 1.0)], start=(0.0, 0.0, 0.0))
    assert follower.index == 1
    assert math.hypot(body.x + 4.0, body.y - 1.0) <= follower.tolerance


def test_in_the_frame_of_odometry_composed_with_the_start() -> None:
    """A route given in the world frame, followed from odometry composed with the start pose (as the demo does)."""
    start = (10.0, 9.7, 0.5)
    route = [(13.0, 11.0), (12.0, 14.0)]
    follower = RouteFollower(route)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, start)
    s = body.state()
    for _ in range(3000):
        pose = compose(start, (s.odom_x, s.odom_y, s.odom_theta))
        command = follower.step(pose)
        if command.done:
            break
        s = body.step(command.v, command.omega, 0.05)
    assert command.done
    assert math.hypot(s.x - 12.0, s.y - 14.0) <= follower.tolerance


def test_turns_on_the_spot_when_far_off_the_heading() -> None:
    follower = RouteFollower([(0.0, 5.0)], turn_rate=1.0)
    c = follower.step((0.0, 0.0, 0.0))
    assert c.v == 0.0 and c.omega == 1.0 and not c.done
    c = follower.step((0.0, 0.0, math.pi))
    assert c.v == 0.0 and c.omega == -1.0


def test_drives_and_corrects_the_heading_when_roughly_aligned() -> None:
    follower = RouteFollower([(10.0, 0.0)], speed=0.8)
    c = follower.step((0.0, 0.0, 0.2))
    assert c.v == pytest.approx(0.8 * math.cos(0.2))
    assert c.omega == pytest.approx(-0.4)
    # near the waypoint it slows down
    assert follower.step((9.5, 0.0, 0.0)).v == pytest.approx(0.8 * 0.5 + 0.1)


def test_slows_down_and_stops_for_what_is_ahead() -> None:
    follower = RouteFollower([(10.0, 0.0)], speed=0.8, slow_distance=1.0, stop_distance=0.25)
    pose = (0.0, 0.0, 0.0)
    free = follower.step(pose, clearance_ahead=5.0).v
    assert free == pytest.approx(0.8)
    assert follower.step(pose, clearance_ahead=math.inf).v == free
    half = follower.step(pose, clearance_ahead=0.625).v
    assert half == pytest.approx(0.4)
    assert follower.step(pose, clearance_ahead=0.25).v == 0.0
    assert follower.step(pose, clearance_ahead=0.1).v == 0.0
    speeds = [follower.step(pose, clearance_ahead=c).v for c in np.linspace(0.0, 2.0, 41)]
    assert all(b >= a for a, b in itertools.pairwise(speeds))


def test_stops_short_of_a_wall_with_the_sonar() -> None:
    """Fed the front sonar as clearance, the follower stops before the body touches a wall across its route."""
    wall = np.array([[4.0, -5.0, 4.0, 5.0]])
    body = SimBody(wall, NO_CIRCLES, (0.0, 0.0, 0.0))
    follower = RouteFollower([(8.0, 0.0)])
    s = body.state()
    for _ in range(400):
        command = follower.step((s.x, s.y, s.theta), float(body.sonar()[0]))
        s = body.step(command.v, command.omega, 0.05)
    assert not s.front_bumper and not s.stalled
    assert s.v == pytest.approx(0.0, abs=0.01)
    assert 4.0 - s.x - body.params.radius <= follower.stop_distance + 0.05


def test_needs_a_waypoint() -> None:
    with pytest.raises(ValueError, match="at least one waypoint"):
        RouteFollower([])


def test_compose() -> None:
    assert compose((0.0, 0.0, 0.0), (1.0, 2.0, 0.3)) == pytest.approx((1.0, 2.0, 0.3))
    assert compose((1.0, 1.0, math.pi / 2), (2.0, 0.0, 0.0)) == pytest.approx((1.0, 3.0, math.pi / 2))
    assert compose((1.0, 1.0, math.pi / 2), (0.0, 1.0, 0.5)) == pytest.approx((0.0, 1.0, math.pi / 2 + 0.5))
    # associative
    a, b, c = (1.0, -2.0, 0.4), (0.5, 3.0, -1.1), (-2.0, 0.7, 2.0)
    assert compose(compose(a, b), c) == pytest.approx(compose(a, compose(b, c)))


@pytest.mark.parametrize(
    ("angle", "wrapped"),
    [
        (0.0, 0.0),
        (math.pi / 2, math.pi / 2),
        (3 * math.pi / 2, -math.pi / 2),
        (-3 * math.pi / 2, math.pi / 2),
        (math.pi, -math.pi),
        (-math.pi, -math.pi),
        (7.0, 7.0 - 2 * math.pi),
        (-20.0, -20.0 + 6 * math.pi),
    ],
)
def test_wrap_angle(angle: float, wrapped: float) -> None:
    assert wrap_angle(angle) == pytest.approx(wrapped)
    assert -math.pi <= wrap_angle(angle) < math.pi
