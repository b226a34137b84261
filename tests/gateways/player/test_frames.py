"""The declared odometry frame (SET_ODOM) and the clock of the header times, without a bus."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto import msgs
from pluto.gateways.player.devices import position_data
from pluto.gateways.player.frames import OdometryFrame, stamp_clock_offset
from pluto.geometry import wrap_angle

mm = st.integers(-1_000_000, 1_000_000)  # ±1 km in mm
degrees = st.integers(-179, 180)
base_pose = st.tuples(
    st.floats(-1e4, 1e4, allow_nan=False), st.floats(-1e4, 1e4, allow_nan=False), st.floats(-50.0, 50.0)
)


@given(mm, mm, degrees, base_pose)
def test_the_declared_pose_reads_back_exactly(x: int, y: int, yaw: int, base: tuple[float, float, float]) -> None:
    wanted = (x / 1000.0, y / 1000.0, math.radians(yaw))
    frame = OdometryFrame.declaring(wanted, base)
    odometry = msgs.Odometry(stamp=1.0, x=base[0], y=base[1], theta=base[2], v=0.3, omega=-0.1)
    data = position_data(frame.to_client(odometry), stall=False)
    assert (data.xpos, data.ypos, data.yaw) == (x, y, yaw)  # whole mm and degrees, as they were sent
    assert (data.xspeed, data.yawspeed) == (300, round(math.degrees(-0.1)))  # velocities are the robot's own


def test_the_frame_follows_the_robot_and_takes_goals_back_to_the_base() -> None:
    frame = OdometryFrame.declaring((10.0, 0.0, math.pi / 2), (1.0, 1.0, 0.0))
    # the robot drives 1 m forward on the base's odometry: 1 m along the declared heading (+y)
    moved = frame.to_client(msgs.Odometry(x=2.0, y=1.0, theta=0.0))
    assert (moved.x, moved.y, wrap_angle(moved.theta)) == pytest.approx((10.0, 1.0, math.pi / 2))
    goal = (10.0, 3.0, math.pi / 2)  # 3 m ahead in the declared frame
    assert frame.to_base(goal) == pytest.approx((4.0, 1.0, 0.0))
    assert OdometryFrame().to_client(msgs.Odometry(x=1.5)) == msgs.Odometry(x=1.5)


def test_header_times_follow_the_clock_of_the_stamps() -> None:
    wall = 1_700_000_000.0
    assert stamp_clock_offset(wall, None, 12.0) == 0.0  # no simulator: the data is on the module's clock
    assert stamp_clock_offset(wall, 12.5, 12.4) == pytest.approx(12.5 - wall)  # stamped on the simulated time
    assert stamp_clock_offset(wall, 12.5, wall - 0.02) == 0.0  # a simulator runs, but this data is on the wall
    assert stamp_clock_offset(wall, 12.5, None) == 0.0
    assert stamp_clock_offset(30.0, 30.0, 29.98) == 0.0  # use_sim_time: one clock
