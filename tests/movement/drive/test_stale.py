"""The drive on stale inputs: a command's lease running out, a halt, a heading command without fresh odometry; each
stops the robot at once (status -2), and the robot drives on by itself once the input is fresh again."""

from __future__ import annotations

import pytest

from pluto import msgs
from pluto.movement.drive.core import HALT_FLAGS, DriveController, DriveParams, DriveStatus

P = DriveParams()
DT = 0.05


def test_a_command_whose_lease_runs_out_stops_the_robot_at_once_and_the_next_one_drives_on() -> None:
    drive = DriveController()
    command = msgs.ActuatorState(cmd_flags=0, velocity=[0.8, 0.2], lease=0.4)
    t = 0.0
    out = drive.step(command, msgs.Odometry(), None, None, t)
    for _ in range(40):  # renewed every 0.1 s: up to speed
        t += DT
        out = drive.step(command if round(t / DT) % 2 == 0 else None, msgs.Odometry(), None, None, t)
    assert out.v == pytest.approx(0.8) and out.status_code == DriveStatus.NORMAL
    renewed = t
    while t < renewed + 0.4 - 1e-9:  # within the lease: on at full speed
        t += DT
        out = drive.step(None, msgs.Odometry(), None, None, t)
        if t <= renewed + 0.4 + 1e-9:
            assert out.v == pytest.approx(0.8)
    t += DT
    out = drive.step(None, msgs.Odometry(), None, None, t)  # the commander went silent: stop at once, not ramped
    assert (out.v, out.w, out.status_code) == (0.0, 0.0, DriveStatus.STALE)
    t += DT
    out = drive.step(command, msgs.Odometry(), None, None, t)  # renewed: drives on, up the ramp
    assert out.status_code == DriveStatus.NORMAL and 0.0 < out.v <= P.max_accel * DT + 1e-9


def test_a_command_without_a_lease_holds_until_the_timeout() -> None:
    drive = DriveController()
    out = drive.step(msgs.ActuatorState(velocity=[0.3, 0.0]), msgs.Odometry(), None, None, 0.0)
    t = 0.0
    while t < P.timeout - DT:
        t += DT
        out = drive.step(None, msgs.Odometry(), None, None, t)
    assert out.v == pytest.approx(0.3) and out.status_code == DriveStatus.NORMAL


@pytest.mark.parametrize("flags", HALT_FLAGS)
def test_a_halt_stops_at_once(flags: int) -> None:
    drive = DriveController()
    t = 0.0
    for _ in range(40):
        t += DT
        drive.step(msgs.ActuatorState(velocity=[0.5, 0.0], lease=0.4), msgs.Odometry(), None, None, t)
    out = drive.step(msgs.ActuatorState(cmd_flags=flags, lease=0.4), msgs.Odometry(), None, None, t + DT)
    assert (out.v, out.w, out.status_code) == (0.0, 0.0, DriveStatus.STALE)


def test_a_heading_command_stops_at_once_on_stale_odometry_and_turns_on_when_it_is_fresh() -> None:
    drive = DriveController()
    heading = msgs.ActuatorState(cmd_flags=1, position=[0.0, 1.0], velocity=[0.0, 0.0])
    t = 0.0
    out = drive.step(heading, msgs.Odometry(), None, None, t)
    for _ in range(10):
        t += DT
        out = drive.step(None, msgs.Odometry(), None, None, t)
    assert out.w > 0.0
    t += DT
    out = drive.step(None, None, None, None, t)  # the module found the odometry stale
    assert (out.v, out.w, out.status_code) == (0.0, 0.0, DriveStatus.STALE)
    t += DT
    out = drive.step(None, msgs.Odometry(), None, None, t)
    assert out.status_code == DriveStatus.NORMAL and out.w > 0.0


def test_a_base_gone_silent_holds_the_command_at_zero_and_it_drives_on_when_the_base_is_back() -> None:
    drive = DriveController()
    command = msgs.ActuatorState(velocity=[0.5, 0.1])
    t = 0.0
    out = drive.step(command, msgs.Odometry(), None, None, t)
    for _ in range(40):
        t += DT
        out = drive.step(None, msgs.Odometry(), None, None, t)
    assert out.v == pytest.approx(0.5) and out.status_code == DriveStatus.NORMAL
    t += DT
    out = drive.step(None, None, None, None, t, base_silent=True)  # a velocity command: stopped all the same
    assert (out.v, out.w, out.status_code) == (0.0, 0.0, DriveStatus.STALE)
    t += DT
    out = drive.step(None, msgs.Odometry(), None, None, t)  # the base is back: the command goes on, up the ramp
    assert out.status_code == DriveStatus.NORMAL and 0.0 < out.v <= P.max_accel * DT + 1e-9
