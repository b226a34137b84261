"""Avoid on stale inputs: a silent commander (a lease not renewed), a stale pose, a stale scan; each stops the robot
at once (the drive's halt) with its code, and the command goes on by itself when the input is fresh again. A goto is
reached only on a pose certain enough to tell."""

from __future__ import annotations

import numpy as np

from pluto import msgs
from pluto.movement.avoid.core import (
    COMMANDER_SILENT,
    DRIVE_HALT,
    GOTO_REACHED,
    GOTO_RUNNING,
    GOTO_UNVERIFIED,
    HALT,
    LASER_FAULT,
    STALE_POSE,
    AvoidController,
    AvoidInputs,
    parse_command,
)
from pluto.movement.avoid.module import pose_std

FREE = np.zeros((0, 2))


def test_a_goto_with_a_lease_stops_at_once_when_its_commander_goes_silent_and_goes_on_when_renewed() -> None:
    ctrl = AvoidController()
    goto = parse_command(22, [10.0, 0.0], [0.5, 1.0], [1.0])
    ctrl.command(goto, 0.0, lease=0.4)
    inputs = AvoidInputs(pose=(0.0, 0.0, 0.0), laser=FREE)
    out = ctrl.step(inputs, 0.1)
    assert out.drive_flags == 0 and out.drive_velocity[0] > 0.0 and out.element == (0, GOTO_RUNNING)
    assert ctrl.step(inputs, 0.4).drive_velocity[0] > 0.0  # within the lease
    out = ctrl.step(inputs, 0.5)  # 0.5 s without a renewal: the commander is silent
    assert out.drive_flags == DRIVE_HALT and out.drive_velocity == (0.0, 0.0)
    assert out.element == (COMMANDER_SILENT, GOTO_RUNNING)
    for t in (1.0, 10.0, 30.0):  # held for long: the goto's progress timer stands still, it is not stuck
        assert ctrl.step(inputs, t).element == (COMMANDER_SILENT, GOTO_RUNNING)
    ctrl.renew(30.0)
    out = ctrl.step(inputs, 30.1)
    assert out.drive_flags == 0 and out.drive_velocity[0] > 0.0 and out.element == (0, GOTO_RUNNING)


def test_a_command_given_once_holds_without_renewal() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(22, [10.0, 0.0], [0.5, 1.0], [1.0]), 0.0)
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=FREE), 60.0)
    assert out.drive_flags == 0 and out.element == (0, GOTO_RUNNING)


def test_a_stale_pose_stops_a_goto_and_a_heading_command_at_once() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(22, [10.0, 0.0], [0.5, 1.0], [1.0]), 0.0)
    out = ctrl.step(AvoidInputs(pose=None, laser=FREE), 0.1)
    assert out.drive_flags == DRIVE_HALT and out.element == (STALE_POSE, GOTO_RUNNING)
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=FREE), 0.2)
    assert out.drive_flags == 0 and out.drive_velocity[0] > 0.0
    ctrl.command(parse_command(21, [0.0, 1.0], [0.4], []), 0.3)
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), odometry_theta=None, laser=FREE), 0.4)
    assert out.drive_flags == DRIVE_HALT and out.element[0] == STALE_POSE


def test_a_stale_scan_halts_with_laser_avoidance() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(20, [], [0.5, 0.0], []), 0.0)
    out = ctrl.step(AvoidInputs(laser=None), 0.1)
    assert out.drive_flags == DRIVE_HALT and out.element[0] == LASER_FAULT


def test_a_halt_command_stops_at_once() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(20 + HALT, [], [], []), 0.0)
    out = ctrl.step(AvoidInputs(laser=FREE), 0.1)
    assert out.drive_flags == DRIVE_HALT + 0 and out.drive_velocity == (0.0, 0.0)


def test_a_goto_is_reached_only_on_a_pose_certain_enough() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(22, [1.0, 0.0], [0.5, 1.0], [1.0]), 0.0)
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=FREE, pose_std=0.05), 0.1)
    assert out.element[1] == GOTO_RUNNING
    out = ctrl.step(AvoidInputs(pose=(0.95, 0.0, 0.0), laser=FREE, pose_std=0.05), 0.2)
    assert out.element[1] == GOTO_REACHED


def test_a_goto_at_its_goal_by_a_pose_too_uncertain_to_tell_ends_unverified_and_stops() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(22, [1.0, 0.0], [0.5, 1.0], [1.0]), 0.0)
    at_goal = (0.95, 0.0, 0.0)
    out = ctrl.step(AvoidInputs(pose=at_goal, laser=FREE, pose_std=0.3), 0.1)  # 0.3 m: cannot tell
    assert out.element[1] == GOTO_UNVERIFIED and out.drive_velocity == (0.0, 0.0)
    # a more certain pose later does not turn it into a success it did not verify when it stopped
    out = ctrl.step(AvoidInputs(pose=(0.5, 0.0, 0.0), laser=FREE, pose_std=0.05), 0.2)
    assert out.element[1] == GOTO_UNVERIFIED and out.drive_velocity == (0.0, 0.0)


def test_pose_std_is_the_worst_axis_of_the_position_covariance() -> None:
    assert pose_std(msgs.PoseEstimate(covariance=[0.04, 0, 0, 0, 0.01, 0, 0, 0, 0.1])) == 0.2
    assert pose_std(msgs.PoseEstimate(covariance=[])) == float("inf")
    assert pose_std(msgs.PoseEstimate(covariance=[float("nan")] * 9)) == float("inf")
