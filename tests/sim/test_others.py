"""The other robots of a simulation of several, as one robot's devices meet them: where they are, what the laser and
the sonar see of them, and collisions between robot bodies."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pluto import msgs
from pluto.hardware.base.sim import SimBody
from pluto.hardware.sick.sim import SimLaser
from pluto.sim.module import FleetMember
from pluto.sim.others import Contacts, OtherRobots
from pluto.sim.raycast import RayCaster

# A 20 m x 10 m hall.
WALLS = np.array([[0, 0, 20, 0], [20, 0, 20, 10], [20, 10, 0, 10], [0, 10, 0, 0]], dtype=float)


class FakeModule:
    """What :class:`OtherRobots` needs of a module: subscriptions, here fed by the test."""

    def __init__(self) -> None:
        self.feeds: dict[str, Callable[[msgs.Odometry], None]] = {}

    def create_subscription(self, name: str, callback: Any, cls: Any, *, depth: int = 1, robot: str = "") -> None:
        assert name == "Sim/Truth" and cls is msgs.Odometry and depth > 1
        self.feeds[robot] = callback


def others(*members: FleetMember) -> tuple[OtherRobots, FakeModule]:
    module = FakeModule()
    return OtherRobots(module, members), module


def test_a_robot_stands_at_its_start_until_its_first_pose_then_where_its_poses_say() -> None:
    robots, module = others(FleetMember(name="b", start=(8.0, 5.0, math.pi), radius=0.4))
    assert robots.poses(0.0) == [(8.0, 5.0, math.pi)]
    module.feeds["b"](msgs.Odometry(stamp=1.0, x=8.0, y=5.0, theta=0.0))
    module.feeds["b"](msgs.Odometry(stamp=2.0, x=9.0, y=5.0, theta=0.0, v=1.0))
    assert robots.poses(1.5) == [(8.5, 5.0, 0.0)]  # between two poses: interpolated (a scan's centre)
    x, y, _ = robots.poses(2.05)[0]  # after the newest: carried forward at its velocity (a base's step)
    assert math.isclose(x, 9.05) and math.isclose(y, 5.0)
    x, _, _ = robots.poses(10.0)[0]
    assert math.isclose(x, 9.5)  # at most REACH = 0.5 s forward
    assert robots.discs(2.0).tolist() == [[9.0, 5.0, 0.4]]


def test_the_laser_and_the_sonar_see_another_robots_body() -> None:
    """Robot a at (5, 5) facing +x; robot b (radius 0.4) at (8, 5): the laser, 0.25 m ahead of a's centre, sees b's
    near side 2.35 m away straight ahead; a's front sonar (from a's surface) sees it at 3 - 0.4 - 0.4 = 2.2 m."""
    robots, _ = others(FleetMember(name="b", start=(8.0, 5.0, 0.0), radius=0.4))
    discs = robots.discs(0.0)
    laser = SimLaser(RayCaster(WALLS))
    alone = laser.scan(0.0, (5.0, 5.0, 0.0))
    seen = laser.scan(0.0, (5.0, 5.0, 0.0), movers=discs)
    ahead = len(seen) // 2
    assert alone[ahead] == pytest.approx(14.75)  # the far wall
    assert seen[ahead] == pytest.approx(2.35, abs=0.01)
    assert np.all(seen <= alone + 1e-9)
    body = SimBody(WALLS, np.zeros((0, 3)), start=(5.0, 5.0, 0.0))
    sonar = body.sonar(discs)
    assert sonar[0] == pytest.approx(2.2, abs=0.02)
    assert body.sonar()[0] == pytest.approx(8.0)  # nothing within its 8 m range without b


def test_a_robot_driving_into_another_stops_touching_it_and_the_collision_is_counted_once() -> None:
    robots, _ = others(FleetMember(name="b", start=(8.0, 5.0, 0.0), radius=0.4))
    body = SimBody(WALLS, np.zeros((0, 3)), start=(5.0, 5.0, 0.0))
    contacts = Contacts(radius=0.4)
    counted: list[str] = []
    t = 0.0
    state = body.state()
    for _ in range(100):  # 5 s at 1 m/s: far enough to go through b if nothing stopped it
        t += 0.05
        discs = robots.discs(t)
        state = body.step(1.0, 0.0, 0.05, discs)
        counted += contacts.update(t, state.x, state.y, ["b"], discs)
    assert state.x == pytest.approx(8.0 - 0.8, abs=0.01)  # stopped against b, as against a wall
    assert state.stalled and state.front_bumper and not state.rear_bumper
    assert counted == ["b"] and contacts.count == 1 and contacts.last is not None and contacts.last[0] == "b"
    for _ in range(20):  # backs off: no longer touching
        t += 0.05
        discs = robots.discs(t)
        state = body.step(-0.5, 0.0, 0.05, discs)
        counted += contacts.update(t, state.x, state.y, ["b"], discs)
    for _ in range(60):  # and drives in again: a second collision
        t += 0.05
        discs = robots.discs(t)
        state = body.step(1.0, 0.0, 0.05, discs)
        counted += contacts.update(t, state.x, state.y, ["b"], discs)
    assert counted == ["b", "b"] and contacts.count == 2


def test_two_robots_passing_side_by_side_do_not_collide() -> None:
    robots, _ = others(FleetMember(name="b", start=(8.0, 6.0, math.pi), radius=0.4))
    body = SimBody(WALLS, np.zeros((0, 3)), start=(5.0, 5.0, 0.0))
    contacts = Contacts(radius=0.4)
    for k in range(80):
        discs = robots.discs(k * 0.05)
        state = body.step(1.0, 0.0, 0.05, discs)
        contacts.update(k * 0.05, state.x, state.y, ["b"], discs)
    assert state.x > 8.5 and not state.stalled and contacts.count == 0  # 1 m apart: 0.2 m to spare
