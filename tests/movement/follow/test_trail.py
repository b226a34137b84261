"""Following another robot along its trail (:mod:`pluto.movement.follow.trail`), closed loop on ideal kinematics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.bus import Bus
from pluto.errors import ConfigError
from pluto.movement.follow.core import (
    FOLLOWING,
    LOST,
    NO_POSE,
    SEARCHING,
    TOO_CLOSE,
    FollowInputs,
    FollowScan,
    SharedFollowParams,
)
from pluto.movement.follow.module import FollowModule, FollowModuleParams
from pluto.movement.follow.trail import TargetPose, TrailController, TrailParams

DT = 0.1


def no_obstacles(stamp: float, pose: tuple[float, float, float]) -> FollowScan:
    return FollowScan(stamp, np.zeros((0, 2)), (0.25, 0.0), pose)


def leader_at(t: float) -> tuple[float, float, float]:
    """The followed robot: east along y = 0 from (0, 0) to (5, 0), then north to (5, 5), at 0.5 m/s; it stays there."""
    s = min(0.5 * t, 10.0)
    if s <= 5.0:
        return s, 0.0, 0.0
    return 5.0, s - 5.0, math.pi / 2


def run(controller: TrailController, start: tuple[float, float, float], seconds: float) -> list[tuple[float, ...]]:
    """Drive an ideal robot with the controller's commands; return (t, x, y, θ, code) at each step."""
    x, y, th = start
    out = []
    for k in range(round(seconds / DT)):
        t = k * DT
        lx, ly, lth = leader_at(t)
        inputs = FollowInputs(pose=(x, y, th), pose_stamp=t, scan=no_obstacles(t, (x, y, th)))
        result = controller.step(inputs, TargetPose(t, lx, ly, lth), t)
        v, w = result.velocity or (0.0, 0.0)
        x, y, th = x + v * DT * math.cos(th), y + v * DT * math.sin(th), th + w * DT
        out.append((t, x, y, th, result.code))
    return out


def test_the_follower_goes_round_the_corner_the_leader_took_and_stops_at_the_distance_behind() -> None:
    controller = TrailController(TrailParams(distance=1.0))
    controller.start(1.0, 0.0)
    path = run(controller, (-1.5, 0.0, 0.0), 40.0)
    codes = [p[4] for p in path]
    assert codes[0] == FOLLOWING and FOLLOWING in codes
    corner = min(math.hypot(x - 5.0, y) for _, x, y, _, _ in path)
    assert corner < 0.45  # through the corner, as the leader went (cutting it from (4, 0) to (5, 1) would miss by 0.7)
    assert all(y > -0.3 for _, _, y, _, _ in path)  # and never wide of the leader's line
    _, x, y, _, code = path[-1]
    assert code == TOO_CLOSE  # the leader stopped at (5, 5): waiting behind it on its trail
    assert x == pytest.approx(5.0, abs=0.25) and y == pytest.approx(4.0, abs=0.3)


def test_searching_until_the_targets_pose_then_lost_when_it_stops_coming() -> None:
    p = TrailParams(search_timeout=3.0, lost_timeout=2.0)
    controller = TrailController(p)
    controller.start(1.0, 0.0)
    pose = (0.0, 0.0, 0.0)
    inputs = FollowInputs(pose=pose, pose_stamp=1.0, scan=no_obstacles(1.0, pose))
    out = controller.step(inputs, None, 1.0)
    assert out.code == SEARCHING and out.velocity == (0.0, 0.0)
    out = controller.step(FollowInputs(pose, 2.0, no_obstacles(2.0, pose)), TargetPose(2.0, 3.0, 0.0, 0.0), 2.0)
    assert out.code == FOLLOWING and controller.trail == [(3.0, 0.0)]
    out = controller.step(FollowInputs(pose, 4.5, no_obstacles(4.5, pose)), TargetPose(2.0, 3.0, 0.0, 0.0), 4.5)
    assert out.code == LOST and out.velocity == (0.0, 0.0) and not controller.active  # its pose is 2.5 s old
    controller.start(1.0, 10.0)
    for t in (11.0, 12.0, 13.5):
        out = controller.step(FollowInputs(pose, t, no_obstacles(t, pose)), None, t)
    assert out.code == LOST  # nobody's pose in the search's 3 s


def test_a_stale_own_pose_halts_at_once_and_points_near_the_target_are_not_obstacles() -> None:
    controller = TrailController(TrailParams())
    controller.start(1.0, 0.0)
    pose = (0.0, 0.0, 0.0)
    # the target's own body in the scan (3 m ahead, its near side at 2.6 m) does not count; nothing else is there
    scan = FollowScan(0.0, np.array([[2.6, 0.0], [2.65, 0.1], [2.65, -0.1]]), (0.25, 0.0), pose)
    for k in range(30):
        t = k * DT
        target = TargetPose(t, 3.0, 0.0, 0.0)  # standing 3 m ahead (the robot here stays where it is)
        out = controller.step(FollowInputs(pose, t, FollowScan(t, scan.points, scan.origin, pose)), target, t)
    assert out.code == FOLLOWING and out.velocity is not None and out.velocity[0] > 0.5
    # a person steps in 0.6 m ahead (0.2 m from the body): it stops for them
    blocked = FollowScan(3.0, np.array([[0.6, 0.05]]), (0.25, 0.0), pose)
    for k in range(30, 45):
        t = k * DT
        target = TargetPose(t, 3.0, 0.0, 0.0)
        out = controller.step(FollowInputs(pose, t, FollowScan(t, blocked.points, blocked.origin, pose)), target, t)
    assert out.velocity is not None and out.velocity[0] == pytest.approx(0.0, abs=1e-9)
    out = controller.step(FollowInputs(pose, 3.0, no_obstacles(5.0, pose)), target, 5.0)  # own pose 2 s old
    assert out.code == NO_POSE and out.halt and out.velocity == (0.0, 0.0)


def test_the_target_robot_must_be_a_robot_name_and_not_this_robot(bus: Bus) -> None:
    with pytest.raises(ConfigError, match="a robot name may not be empty or contain"):
        FollowModuleParams(target_robot="pluto 2")
    module = FollowModule(bus, FollowModuleParams(target_robot=bus.robot))
    with pytest.raises(ConfigError, match="is this robot: a robot cannot follow itself"):
        module.start()
    module.stop()


def test_the_trail_follower_takes_the_tuning_both_followers_share_from_the_module_and_keeps_its_own() -> None:
    params = FollowModuleParams(target_robot="leader", max_speed=0.5, corridor_margin=0.2)
    trail = params.subset(TrailParams, shared=SharedFollowParams)
    assert trail.max_speed == 0.5
    assert trail.corridor_margin == TrailParams().corridor_margin != params.corridor_margin
