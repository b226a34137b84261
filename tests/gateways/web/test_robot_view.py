"""What the web view sends of the other robots of a world: each one's name, pose, scan, goal and motion status."""

from __future__ import annotations

import math

from pluto import msgs, names
from pluto.gateways.web.frames import OTHER_INPUTS, ViewState


def test_another_robots_view_has_its_name_pose_scan_and_goal() -> None:
    view = ViewState()
    assert view.robot_view("scout") == {"name": "scout", "goals": {}}  # nothing known yet
    view.feed(names.SIM_TRUTH.name, msgs.Odometry(stamp=1.0, x=16.0, y=10.0, theta=0.0))
    view.feed(
        names.SICK_SCAN_MM.name,
        msgs.LaserScan(stamp=1.0, ranges=[2.0, 80.0, 1.0], angles=[-math.pi / 2, 0.0, math.pi / 2], max_range=80.0),
    )
    view.feed(names.MOTION_COMMAND.name, msgs.ActuatorState(cmd_flags=42, position=[22.0, 13.5]))
    view.feed(names.MOTION_STATUS.name, msgs.FVectorState(stamp=1.0, element=[0, 0, -1, 1]))
    out = view.robot_view("scout")
    assert out["name"] == "scout" and out["truth"] == [16.0, 10.0, 0.0]
    assert out["goals"] == {"moveto": [22.0, 13.5]}
    # the laser 0.25 m ahead of the robot: an echo 2 m to its right, none ahead (max range), one 1 m to its left
    assert out["scan"]["origin"] == [16.25, 10.0, 0.0]
    assert out["scan"]["points"] == [16.25, 8.0, 16.25, 11.0]
    assert isinstance(out["motion"], str) and out["motion"]
    assert "sonar" not in out and "speed" not in out  # the page draws only its own robot's
    assert names.CLOCK.name not in OTHER_INPUTS and names.SICK_SCAN_MM.name in OTHER_INPUTS
