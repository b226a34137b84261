"""The translation of Pluto's interfaces into Foxglove's messages, without a server: frames, poses, the path, scans,
walls, log levels, and the values it refuses. The SDK's messages are write-only: each is read back through its
encoding and the protobuf schema it carries."""

from __future__ import annotations

import functools
import logging
import math
from typing import Any

import pytest
from foxglove.messages import FrameTransform, LaserScan, LogLevel, PoseInFrame, PosesInFrame, SceneUpdate

from pluto import msgs
from pluto.gateways.foxglove.translate import (
    FoxgloveTranslator,
    Output,
    log_message,
    quaternion,
    timestamp,
    walls_scene,
)
from pluto.sim.world import World
from tests.gateways.foxglove.client import message_class


@functools.cache
def _class_of(cls: type) -> Any:
    schema = cls.get_schema()  # type: ignore[attr-defined]
    return message_class(schema.name, schema.data)


def decode(message: Any) -> Any:
    """A Foxglove SDK message as the protobuf message a client reads."""
    return _class_of(type(message)).FromString(message.encode())


def _yaw(q: object) -> float:
    x, y, z, w = (getattr(q, k) for k in "xyzw")
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _frames(outs: list[Output]) -> dict[tuple[str, str], Any]:
    decoded = [decode(o.message) for o in outs if isinstance(o.message, FrameTransform)]
    return {(m.parent_frame_id, m.child_frame_id): m for m in decoded}


def _odom(stamp: float, x: float, y: float, theta: float) -> msgs.Odometry:
    return msgs.Odometry(stamp=stamp, x=x, y=y, theta=theta)


def _pose(stamp: float, x: float, y: float, theta: float) -> msgs.PoseEstimate:
    return msgs.PoseEstimate(stamp=stamp, pose=[x, y, 0.0, theta, 0.0, 0.0])


def test_timestamp_and_quaternion() -> None:
    t = timestamp(12.25)
    assert (t.sec, t.nsec) == (12, 250_000_000)
    assert (timestamp(-3.0).sec, timestamp(math.nan).sec) == (0, 0)
    assert timestamp(0.999_999_999_9).sec == 1
    q = decode(quaternion(1.0))
    assert (q.x, q.y, q.z, q.w) == pytest.approx((0.0, 0.0, math.sin(0.5), math.cos(0.5)))
    q = decode(quaternion(0.3, 0.2, 0.1))
    assert q.x**2 + q.y**2 + q.z**2 + q.w**2 == pytest.approx(1.0)
    assert _yaw(q) == pytest.approx(0.3)


def test_the_pose_before_any_odometry_places_odom_where_the_robot_is() -> None:
    tr = FoxgloveTranslator()
    outs = tr.feed("Localization/Pose", _pose(1.0, 2.0, 3.0, 0.5))
    frames = _frames(outs)
    assert set(frames) == {("map", "odom"), ("odom", "base_link")}  # base_link's parent is odom from the start
    assert (frames["map", "odom"].translation.x, frames["map", "odom"].translation.y) == (2.0, 3.0)
    assert _yaw(frames["map", "odom"].rotation) == pytest.approx(0.5)
    assert (frames["odom", "base_link"].translation.x, _yaw(frames["odom", "base_link"].rotation)) == (0.0, 0.0)
    pose = next(o for o in outs if o.topic == "/pose")
    assert isinstance(pose.message, PoseInFrame) and pose.log_time == 1.0
    read = decode(pose.message)
    assert (read.frame_id, read.timestamp.seconds, read.pose.position.x, _yaw(read.pose.orientation)) == (
        "map",
        1,
        2.0,
        pytest.approx(0.5),
    )


def test_the_first_odometry_after_a_pose_moves_odom_so_the_pose_stays_right() -> None:
    """A pose before any odometry puts ``odom`` where the robot is; the odometry that comes next (not at the origin)
    brings a ``map -> odom`` for it at once, before its own transform, so the tree puts the robot at the pose
    whatever comes next (a viewer should not wait for the next pose to see it right)."""
    tr = FoxgloveTranslator()
    tr.feed("Localization/Pose", _pose(1.0, 3.0, 4.0, 1.2))
    outs = tr.feed("Base/Drive/State", _odom(1.0, 1.0, 2.0, 0.5))
    frames = [decode(o.message) for o in outs if isinstance(o.message, FrameTransform)]
    assert [(m.parent_frame_id, m.child_frame_id) for m in frames] == [("map", "odom"), ("odom", "base_link")]
    map_odom = frames[0]
    a = _yaw(map_odom.rotation)
    x = map_odom.translation.x + math.cos(a) * 1.0 - math.sin(a) * 2.0
    y = map_odom.translation.y + math.sin(a) * 1.0 + math.cos(a) * 2.0
    assert (x, y, a + 0.5) == pytest.approx((3.0, 4.0, 1.2))
    later = tr.feed("Base/Drive/State", _odom(1.1, 1.1, 2.0, 0.5))
    assert set(_frames(later)) == {("odom", "base_link")}  # only once


def test_map_to_odom_uses_the_odometry_of_the_poses_time() -> None:
    tr = FoxgloveTranslator()
    tr.feed("Base/Drive/State", _odom(1.0, 0.0, 0.0, 0.0))
    tr.feed("Base/Drive/State", _odom(2.0, 1.0, 0.0, math.pi / 2))
    tr.feed("Base/Drive/State", _odom(3.0, 5.0, 5.0, 0.0))  # newer than the pose: not the one of its time
    map_odom = _frames(tr.feed("Localization/Pose", _pose(2.5, 4.0, 1.0, math.pi)))["map", "odom"]
    # map -> odom is rotated by π/2 and puts odometry (1, 0, π/2) at (4, 1, π)
    a = _yaw(map_odom.rotation)
    assert a == pytest.approx(math.pi / 2)
    x = map_odom.translation.x + math.cos(a) * 1.0
    y = map_odom.translation.y + math.sin(a) * 1.0
    assert (x, y) == pytest.approx((4.0, 1.0))


def test_each_scan_gives_the_laser_mount_until_a_wrist_turns_it() -> None:
    tr = FoxgloveTranslator(laser_mount=(0.3, 0.1, 0.5))
    scan = msgs.LaserScan(stamp=1.0, ranges=[1.0, 2.0], angles=[-0.1, 0.1])
    assert set(_frames(tr.feed("Base/Drive/State", _odom(1.0, 1.0, 2.0, 0.3)))) == {("odom", "base_link")}
    for _ in range(2):  # with every scan: a viewer that joins later gets it too
        laser = _frames(tr.feed("Sick/Scan_mm", scan))["base_link", "laser"]
        assert (laser.translation.x, laser.translation.y, laser.translation.z) == pytest.approx((0.3, 0.1, 0.5))
        assert _yaw(laser.rotation) == 0.0
    wrist = msgs.ActuatorState(stamp=1.2, position=[0.4, -0.1])
    turned = _frames(tr.feed("Wrist/State", wrist))["base_link", "laser"]
    assert _yaw(turned.rotation) == pytest.approx(0.4)
    assert _frames(tr.feed("Sick/Scan_mm", scan)) == {}  # the wrist's transforms place the laser now


def test_truth_places_the_robot_until_a_localization_does_or_always_when_asked() -> None:
    tr = FoxgloveTranslator()
    tr.feed("Base/Drive/State", _odom(1.0, 0.0, 0.0, 0.0))
    outs = tr.feed("Sim/Truth", _odom(1.0, 10.0, 9.0, 0.0))
    assert {o.topic for o in outs} >= {"/truth", "/tf"}
    assert _frames(outs)["map", "odom"].translation.x == pytest.approx(10.0)
    tr.feed("Localization/Pose", _pose(1.0, 0.0, 0.0, 0.0))
    assert _frames(tr.feed("Sim/Truth", _odom(1.1, 10.0, 9.0, 0.0))) == {}  # the localization places it now

    truth = FoxgloveTranslator(map_pose="truth")
    truth.feed("Base/Drive/State", _odom(1.0, 0.0, 0.0, 0.0))
    assert _frames(truth.feed("Localization/Pose", _pose(1.0, 0.0, 0.0, 0.0))) == {}
    assert _frames(truth.feed("Sim/Truth", _odom(1.1, 10.0, 9.0, 0.0)))["map", "odom"].translation.x == 10.0
    with pytest.raises(ValueError, match="map_pose"):
        FoxgloveTranslator(map_pose="gps")


def test_the_path_grows_by_steps_and_halves_when_full() -> None:
    tr = FoxgloveTranslator(path_step=0.5, max_path=4)
    paths = []
    for i in range(20):
        outs = tr.feed("Localization/Pose", _pose(i * 0.1, i * 0.25, 0.0, 0.0))
        paths += [decode(o.message) for o in outs if isinstance(o.message, PosesInFrame)]
    assert len(paths) == 10  # every other pose moved 0.5 m
    assert tr.path_length <= 4 and len(paths[-1].poses) == tr.path_length
    assert paths[-1].poses[-1].position.x == pytest.approx(4.5)
    tr.reset()
    assert tr.path_length == 0


def test_a_scan_with_errors_and_no_echo() -> None:
    tr = FoxgloveTranslator()
    scan = msgs.LaserScan(stamp=2.0, ranges=[1.0, -1.0, 80.0, 2.5], angles=[-0.3, -0.1, 0.1, 0.3], max_range=80.0)
    outs = tr.feed("Sick/Scan_mm", scan)
    fox = decode(next(o.message for o in outs if isinstance(o.message, LaserScan)))
    assert fox.frame_id == "laser" and (fox.timestamp.seconds, fox.timestamp.nanos) == (2, 0)
    assert (fox.start_angle, fox.end_angle) == (-0.3, 0.3)
    assert fox.ranges[0] == 1.0 and fox.ranges[3] == 2.5 and math.isinf(fox.ranges[1]) and math.isinf(fox.ranges[2])
    assert ("base_link", "laser") in _frames(outs)  # the mount, before the first scan is drawn


def test_values_it_cannot_use_are_counted() -> None:
    tr = FoxgloveTranslator()
    assert tr.feed("Sick/Scan_mm", msgs.LaserScan(ranges=[1.0, 2.0], angles=[0.0])) == []
    assert tr.feed("Sick/Scan_mm", msgs.LaserScan()) == []
    assert tr.feed("Localization/Pose", msgs.PoseEstimate(pose=[1.0, 2.0])) == []
    assert tr.feed("Localization/Pose", _pose(1.0, math.nan, 0.0, 0.0)) == []
    assert tr.feed("Base/Drive/State", _odom(1.0, math.inf, 0.0, 0.0)) == []
    assert tr.rejected == 5
    assert tr.feed("GPS/State", msgs.GpsFix()) == []  # not translated, not an error
    assert tr.rejected == 5


def test_odometry_going_back_in_time_starts_a_new_run() -> None:
    tr = FoxgloveTranslator()
    tr.feed("Base/Drive/State", _odom(5.0, 1.0, 0.0, 0.0))
    tr.feed("Localization/Pose", _pose(5.0, 1.0, 0.0, 0.0))
    assert tr.path_length == 1
    tr.feed("Base/Drive/State", _odom(0.1, 0.0, 0.0, 0.0))
    assert tr.path_length == 0


def test_walls_scene_and_log_levels() -> None:
    world = World(name="box", walls=[[0, 0, 4, 0], [4, 0, 4, 3]], circles=[[1, 1, 0.2]])
    scene = walls_scene(world, 7.0)
    assert isinstance(scene, SceneUpdate)
    (entity,) = decode(scene).entities
    assert entity.frame_id == "map" and len(entity.cubes) == 3
    east = entity.cubes[1]
    assert (east.pose.position.x, east.pose.position.y, east.size.x) == pytest.approx((4.0, 1.5, 3.0))
    assert _yaw(east.pose.orientation) == pytest.approx(math.pi / 2)
    line = decode(log_message(1.5, logging.WARNING, "drive", "stalled"))
    assert (line.level, line.name, line.message, line.timestamp.nanos) == (
        LogLevel.Warning.value,
        "drive",
        "stalled",
        500_000_000,
    )
    assert decode(log_message(1.0, logging.CRITICAL, "x", "m")).level == LogLevel.Fatal.value
    assert decode(log_message(1.0, logging.DEBUG, "x", "m")).level == LogLevel.Debug.value
    assert decode(log_message(1.0, 0, "x", "m")).level == LogLevel.Unknown.value


def test_every_frame_has_one_parent_whatever_comes_first() -> None:
    tr = FoxgloveTranslator()
    outs = tr.feed("Sim/Truth", _odom(0.9, 10.0, 9.7, 0.0))  # the true pose before any odometry
    outs += tr.feed("Localization/Pose", _pose(1.0, 10.0, 9.7, 0.0))
    outs += tr.feed("Sick/Scan_mm", msgs.LaserScan(stamp=1.0, ranges=[1.0, 2.0], angles=[-0.1, 0.1]))
    outs += tr.feed("Base/Drive/State", _odom(1.0, 0.0, 0.0, 0.0))
    outs += tr.feed("Localization/Pose", _pose(1.1, 10.1, 9.7, 0.0))
    parents: dict[str, set[str]] = {}
    for o in outs:
        if isinstance(o.message, FrameTransform):
            m = decode(o.message)
            parents.setdefault(m.child_frame_id, set()).add(m.parent_frame_id)
    assert parents == {"odom": {"map"}, "base_link": {"odom"}, "laser": {"base_link"}}
