"""The modules' statuses in words, as the pages show them."""

from __future__ import annotations

import math

from pluto import msgs
from pluto.cli.key.status import (
    NO_STATUS,
    describe_arm,
    describe_avoid,
    describe_drive,
    describe_loc,
    describe_motion,
    describe_pose,
    describe_setter,
    describe_slam,
    describe_wrist,
)


def status(element: list[int], data: list[float] | None = None) -> msgs.FVectorState:
    return msgs.FVectorState(data=data or [0.0, 0.0], element=element)


def test_movement_statuses() -> None:
    assert "timeout" in describe_drive(status([-1]))
    assert "v 0.300 m/s" in describe_drive(status([0], [0.3, 0.0]))
    text = describe_avoid(status([3, 2]))
    assert "sonar front" in text and "stuck" in text
    for code, words in (
        (-10, "motion thread stopped"),
        (-1, "not in motion, rectangle set"),
        (0, "not in motion"),
        (1, "scanning for new paths"),
        (3, "following a path"),
        (11, "moving towards the object"),
        (12, "circling the object"),
        (99, "unknown"),
    ):
        assert f"motion {code} {words}" in describe_motion(status([0, 0, 0, code]))
    assert "at the goal" in describe_motion(status([0, 0, 1, 0]))


def test_thread_statuses() -> None:
    assert describe_pose(None) == NO_STATUS
    assert describe_pose(status([1, 0, 1, 3, 2])) == (
        "thread running, LOST, 3 walls matched in the last scan, 2 relocalizations"
    )
    assert describe_slam(status([0, -1, 40, 5, 1])) == (
        "thread stopped, 40 walls in the map, 5 matched in the last scan, 1 saves; saving the map"
    )


def test_wrist_in_degrees() -> None:
    state = msgs.ActuatorState(position=[math.radians(30), math.radians(-10)], velocity=[0.0, 0.0])
    assert describe_wrist(state) == "pan +30.0°, tilt -10.0° (down +), still"
    moving = msgs.ActuatorState(position=[0.0, 0.0], velocity=[0.2, 0.0])
    assert describe_wrist(moving, [math.radians(45), 0.0]).endswith("moving; target pan +45.0°, tilt +0.0°")
    assert describe_wrist(None) == NO_STATUS


def test_five_localization_lines() -> None:
    poses: list[msgs.PoseEstimate | None] = [None] * 5
    poses[3] = msgs.PoseEstimate(
        pose=[1.0, -2.0, 0.0, math.pi, 0.0, 0.0], covariance=[0.04, 0, 0, 0, 0.09, 0, 0, 0, 0.0], cmd_flags=-1
    )
    lines = describe_loc(poses)
    assert len(lines) == 5
    assert lines[0] == f"(0) Dead-Reckoning: {NO_STATUS}"
    assert lines[3] == ("(3) Pose: x +1.000 m, y -2.000 m, θ +180.0°, σ 0.200 m 0.300 m 0.0°; setter -1 (set by hand)")
    assert describe_setter(2) == "setter 2 (slam)" and describe_setter(7) == "setter 7 (unknown)"


def test_arm_joints() -> None:
    state = msgs.ActuatorState(position=[0.0, math.pi / 2])
    assert describe_arm(state, ("waist", "shoulder"), 1) == [
        "  0 waist: +0.0° (+0.0000)",
        "▶ 1 shoulder: +90.0° (+1.5708)",
    ]
    assert describe_arm(None) == [NO_STATUS]
