"""Conversions between the bus's SI values and the Player structs."""

from __future__ import annotations

import math

import pytest

from pluto import msgs
from pluto.gateways.player.devices import (
    default_range_res,
    from_arcsec,
    laser_data,
    laser_geometry,
    laser_native_config,
    laser_settings,
    position3d_data,
    position3d_goal,
    position3d_velocity,
    position_data,
    position_geometry,
    position_goal,
    position_velocity,
    sonar_data,
    sonar_geometry,
    to_arcsec,
)
from pluto.gateways.player.structs import LaserConfig, Position3dCommand, PositionCommand


def sick_scan(ranges: list[float] | None = None, max_range: float = 80.0) -> msgs.LaserScan:
    angles = [math.radians(-90.0 + 0.5 * i) for i in range(361)]
    return msgs.LaserScan(
        stamp=1.0, ranges=ranges or [1.0 + 0.01 * i for i in range(361)], angles=angles, max_range=max_range
    )


def test_position_data_in_mm_and_degrees() -> None:
    odometry = msgs.Odometry(stamp=2.0, x=1.2345, y=-0.5, theta=3 * math.pi + 0.1, v=0.3004, omega=-0.5)
    data = position_data(odometry, stall=True)
    assert (data.xpos, data.ypos, data.xspeed, data.yspeed) == (1234, -500, 300, 0)
    assert data.yaw == round(math.degrees(-math.pi + 0.1))  # continuous heading, wrapped
    assert data.yawspeed == round(math.degrees(-0.5)) and data.stall == 1
    far = position_data(msgs.Odometry(x=1e10, y=-1e10, theta=math.nan), stall=False)
    assert (far.xpos, far.ypos, far.yaw) == (2**31 - 1, -(2**31), 0)  # saturated, not wrapped
    assert position_data(odometry, stall=False).pack()  # always packable


def test_position_commands_to_si() -> None:
    velocity = position_velocity(PositionCommand(xspeed=250, yspeed=100, yawspeed=-30))
    assert velocity.v == pytest.approx(0.25) and velocity.omega == pytest.approx(math.radians(-30))
    goal = position_goal(PositionCommand(xpos=1500, ypos=-2000, yaw=90, xspeed=-400, type=1))
    assert (goal.x, goal.y, goal.theta, goal.max_speed) == pytest.approx((1.5, -2.0, math.pi / 2, 0.4))
    geometry = position_geometry(0.25)
    assert (geometry.width, geometry.length, geometry.pose_x) == (500, 500, 0)


def test_position3d_in_arc_seconds() -> None:
    pose = msgs.PoseEstimate(stamp=5.0, pose=[1.0, 2.0, 0.1, math.radians(90), math.radians(-2), math.radians(1)])
    odometry = msgs.Odometry(v=0.5, omega=0.25)
    data = position3d_data(pose, odometry, stall=False)
    assert (data.xpos, data.ypos, data.zpos) == (1000, 2000, 100)
    assert (data.yaw, data.pitch, data.roll) == (324000, -7200, 3600)
    assert data.xspeed == 500 and data.yawspeed == round(0.25 * 180 / math.pi * 3600)
    assert position3d_data(msgs.PoseEstimate(pose=[1.0]), None, True).stall == 1  # a short pose is padded
    assert from_arcsec(to_arcsec(1.0)) == pytest.approx(1.0, abs=1e-5)


def test_position3d_command_angles_declared_unsigned() -> None:
    minus_90 = (-324000) % 2**32  # what a client that wrote -90° into the unsigned field sent
    goal = position3d_goal(Position3dCommand(xpos=100, ypos=200, yaw=minus_90))
    assert goal.theta == pytest.approx(-math.pi / 2)
    velocity = position3d_velocity(Position3dCommand(xspeed=-100, yawspeed=to_arcsec(0.5)))
    assert velocity.v == pytest.approx(-0.1) and velocity.omega == pytest.approx(0.5, abs=1e-5)


def test_laser_data_of_a_sick_scan() -> None:
    scan = sick_scan([4.75] * 180 + [-1.0] + [100.0] * 180)
    native = laser_native_config(scan)
    assert (native.min_angle, native.max_angle, native.resolution, native.range_res) == (-9000, 9000, 50, 10)
    data = laser_data(scan)
    assert (data.min_angle, data.max_angle, data.resolution, data.range_res) == (-9000, 9000, 50, 10)
    assert len(data.ranges) == 361 and data.ranges[0] == 475 and data.ranges[180] == 0  # an error is 0
    assert data.ranges[360] == 10000  # 100 m in cm
    assert len(data.pack()) == 1213


def test_laser_view_narrows_and_coarsens() -> None:
    scan = sick_scan()
    native = laser_native_config(scan)
    config = laser_settings(LaserConfig(2, -4500, 4500, 100, 1, 0), native)
    data = laser_data(scan, config)
    assert (data.min_angle, data.max_angle, data.resolution, data.range_res) == (-4500, 4500, 100, 1)
    assert len(data.ranges) == 91
    assert data.ranges[0] == round((1.0 + 0.01 * 90) * 1000)  # the beam at -45° is number 90
    assert data.ranges[1] == round((1.0 + 0.01 * 92) * 1000)  # every other beam
    clipped = laser_settings(LaserConfig(2, -12000, 0, 50, 10, 0), native)
    assert (clipped.min_angle, clipped.max_angle, clipped.intensity) == (-9000, 0, 0)
    for bad, reason in [
        (LaserConfig(2, -9000, 9000, 25, 1, 0), "multiple"),
        (LaserConfig(2, -9000, 9000, 75, 1, 0), "not one of"),
        (LaserConfig(2, -9000, 9000, 50, 2, 0), "range_res"),
        (LaserConfig(2, 9500, 9900, 50, 1, 0), "no beam"),
    ]:
        with pytest.raises(ValueError, match=reason):
            laser_settings(bad, native)


def test_a_request_for_intensities_is_carried_out_without_them() -> None:
    # The scanners measure no reflectivity: the rest of the request is in force, and the configuration says so.
    native = laser_native_config(sick_scan())
    config = laser_settings(LaserConfig(2, -4500, 4500, 100, 10, 1), native)
    assert config == LaserConfig(3, -4500, 4500, 100, 10, 0)
    assert laser_data(sick_scan(), config).intensity == ()  # sent as zeros
    assert native.intensity == 0


def test_laser_range_unit_and_geometry() -> None:
    assert default_range_res(8.0) == 1 and default_range_res(80.0) == 10 and default_range_res(1000.0) == 100
    short = laser_data(sick_scan([70.0] * 361, max_range=80.0), LaserConfig(3, -9000, 9000, 50, 1, 0))
    assert short.ranges[0] == 65535  # saturated in mm
    geometry = laser_geometry([0.25, -0.01, math.pi / 2], [0.155, 0.185])
    assert (geometry.pose_x, geometry.pose_y, geometry.pose_yaw, geometry.width, geometry.length) == (
        250,
        -10,
        90,
        155,
        185,
    )


def test_sonar_data_and_geometry() -> None:
    data = sonar_data(msgs.SonarScan(ranges=[0.5, math.inf, 100.0] + [1.0] * 70, max_range=5.0))
    assert data.ranges[:3] == (500, 5000, 65535) and len(data.ranges) == 64
    geometry = sonar_geometry([[0.4, 0.0, 0.0], [0.0, 0.4, math.pi / 2], [-0.4, 0.0, math.pi]])
    assert geometry.poses == ((400, 0, 0), (0, 400, 90), (-400, 0, -180))
