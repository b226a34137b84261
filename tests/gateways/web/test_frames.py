"""The web view's pure core: frames built from the newest values, the covariance ellipse, the path and the map."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto import msgs, names
from pluto.gateways.web.frames import Path, ViewState, covariance_ellipse, map_message
from pluto.gateways.web.module import mom_message
from pluto.runtime.mom import MomRow
from pluto.sim.world import load_world


def _pose(
    x: float, y: float, theta: float, *, pan: float | None = None, cov: list[float] | None = None
) -> msgs.PoseEstimate:
    pose = [x, y, 0.0, theta, 0.0, 0.0] + ([pan, 0.0] if pan is not None else [])
    return msgs.PoseEstimate(stamp=1.0, pose=pose, covariance=cov or [0.0] * 9)


def test_ellipse_of_a_diagonal_covariance_has_the_sigmas_on_the_axes() -> None:
    a, b, angle = covariance_ellipse([0.04, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.001], sigmas=2.0) or (0, 0, 0)
    assert (a, b) == pytest.approx((0.4, 0.2))
    assert angle == pytest.approx(0.0)


def test_ellipse_of_a_correlated_covariance_is_turned_along_the_correlation() -> None:
    # x and y strongly correlated: the major axis lies along the diagonal y = x
    a, b, angle = covariance_ellipse([0.05, 0.04, 0.0, 0.04, 0.05, 0.0, 0.0, 0.0, 0.0], sigmas=1.0) or (0, 0, 0)
    assert angle == pytest.approx(math.pi / 4)
    assert (a, b) == pytest.approx((math.sqrt(0.09), math.sqrt(0.01)))


@pytest.mark.parametrize(
    "cov",
    [[], [float("nan")] * 9, [-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0], [0.01, 0.1, 0, 0.1, 0.01, 0, 0, 0, 0]],
)
def test_ellipse_of_a_missing_or_impossible_covariance_is_none(cov: list[float]) -> None:
    assert covariance_ellipse(cov) is None


def test_frame_places_the_scan_with_the_laser_pose_its_pan_and_the_mount() -> None:
    view = ViewState(laser_mount_x=0.25)
    view.feed(names.LOCALIZATION_LASER_POSE, _pose(2.0, 3.0, math.pi / 2, pan=0.5))
    # one beam straight ahead of the laser, 1 m; one beyond the range and one error: not drawn
    view.feed(
        names.SICK_SCAN_MM,
        msgs.LaserScan(stamp=1.0, ranges=[1.0, 80.0, -1.0], angles=[0.0, 0.1, 0.2], count=1, max_range=80.0),
    )
    scan = view.frame()["scan"]
    heading = math.pi / 2 + 0.5
    assert scan["origin"] == pytest.approx([2.0, 3.25, round(heading, 3)], abs=1e-3)
    assert scan["points"] == pytest.approx([2.0 + math.cos(heading), 3.25 + math.sin(heading)], abs=1e-3)


def test_scan_falls_back_on_the_pose_then_the_truth() -> None:
    view = ViewState(laser_mount_x=0.0)
    view.feed(names.SICK_SCAN_MM, msgs.LaserScan(ranges=[2.0], angles=[0.0], count=1))
    assert "scan" not in view.frame()  # no pose: nowhere to put it
    view.feed(names.SIM_TRUTH, msgs.Odometry(x=1.0, y=1.0, theta=0.0))
    assert view.frame()["scan"]["points"] == pytest.approx([3.0, 1.0])
    view.feed(names.LOCALIZATION_POSE, _pose(5.0, 5.0, math.pi))
    assert view.frame()["scan"]["points"] == pytest.approx([3.0, 5.0])


def test_frame_has_truth_pose_ellipse_speed_sonar_goals_and_status() -> None:
    view = ViewState()
    view.feed(names.SIM_TRUTH, msgs.Odometry(x=1.0, y=2.0, theta=0.1))
    view.feed(names.LOCALIZATION_POSE, _pose(1.1, 2.1, 0.2, cov=[0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001]))
    view.feed(names.BASE_DRIVE_STATE, msgs.Odometry(v=0.3, omega=-0.1))
    # the second echo, at max_range, is no echo
    view.feed(names.BASE_SONAR, msgs.SonarScan(ranges=[1.0, 8.0], angles=[0.0, 1.0], max_range=8.0))
    view.feed(names.MOTION_COMMAND, msgs.ActuatorState(cmd_flags=42, position=[4.0, 5.0]))
    view.feed(names.AVOIDANCE_COMMAND, msgs.ActuatorState(cmd_flags=22, position=[3.0, 3.5]))
    view.feed(names.MOTION_STATUS, msgs.FVectorState(data=[0.3, 0.0], element=[0, 0, -2, 2]))
    view.feed(names.CLOCK, msgs.SimTime(stamp=12.5, rate=5.0, run=3))
    f = view.frame()
    assert f["type"] == "frame" and f["seq"] == 1
    assert f["truth"] == [1.0, 2.0, 0.1]
    assert (f["pose"]["x"], f["pose"]["y"], f["pose"]["theta"]) == (1.1, 2.1, 0.2)
    assert f["pose"]["ellipse"][:2] == pytest.approx([0.2, 0.2])
    assert f["speed"] == [0.3, -0.1]
    assert f["sonar"]["points"] == pytest.approx([1.1 + math.cos(0.2), 2.1 + math.sin(0.2)], abs=1e-3)
    assert f["goals"] == {"moveto": [4.0, 5.0], "goto": [3.0, 3.5]}
    assert "nearing" in f["motion"]
    assert (f["time"], f["rate"]) == (12.5, 5.0)
    assert view.frame()["seq"] == 2


def test_goals_are_cleared_by_a_release_and_by_another_avoid_command() -> None:
    view = ViewState()
    view.feed(names.MOTION_COMMAND, msgs.ActuatorState(cmd_flags=42, position=[4.0, 5.0]))
    view.feed(names.AVOIDANCE_COMMAND, msgs.ActuatorState(cmd_flags=22, position=[3.0, 3.5]))
    view.feed(names.MOTION_COMMAND, msgs.ActuatorState(cmd_flags=-1))
    view.feed(names.AVOIDANCE_COMMAND, msgs.ActuatorState(cmd_flags=20, velocity=[0.0, 0.0]))
    assert view.frame()["goals"] == {}


def test_a_new_simulation_run_forgets_the_old_one() -> None:
    view = ViewState()
    view.feed(names.CLOCK, msgs.SimTime(stamp=50.0, run=1))
    view.feed(names.SIM_TRUTH, msgs.Odometry(x=1.0, y=2.0))
    view.feed(names.SIM_TRUTH, msgs.Odometry(x=3.0, y=2.0))
    view.feed(names.MOTION_COMMAND, msgs.ActuatorState(cmd_flags=42, position=[4.0, 5.0]))
    view.feed(names.CLOCK, msgs.SimTime(stamp=0.0, run=2))
    f = view.frame()
    assert "truth" not in f and f["goals"] == {} and f["time"] == 0.0
    assert view.path.points == []


def test_path_keeps_points_apart_and_thins_itself_when_full() -> None:
    path = Path(spacing=0.1, max_points=10)
    for k in range(100):
        path.add(0.01 * k, 0.0)  # 1 cm steps: a point every 10 cm is kept
    assert len(path.points) == 10
    assert all(b[0] - a[0] >= 0.1 - 1e-9 for a, b in zip(path.points, path.points[1:], strict=False))
    for k in range(100, 1000):
        path.add(0.01 * k, 0.0)
    assert len(path.points) <= 10
    assert path.points[0] == (0.0, 0.0) and path.points[-1][0] > 9.0  # the start and the newest stay
    assert path.spacing > 0.1
    version = path.version
    path.add(float("nan"), 0.0)
    assert path.version == version
    msg = path.message()
    assert msg["type"] == "path" and len(msg["points"]) == 2 * len(path.points)


def test_map_message_has_the_walls_of_the_world() -> None:
    world = load_world("office")
    msg = map_message(world, "office")
    assert msg["name"] == world.name and len(msg["walls"]) == len(world.segments())
    assert msg["walls"][0] == pytest.approx(np.round(world.segments()[0], 3).tolist())
    assert map_message(None)["walls"] == []


def test_mom_message_lists_modules_interfaces_rates_and_ages() -> None:
    info = msgs.ModuleInfo(
        name="base",
        pid=42,
        active=True,
        provides=[
            msgs.InterfaceStats(name="Sim/Truth", type="Odometry", count=10, rate_hz=49.96, last_write=99.5),
            msgs.InterfaceStats(name="Base/Power", type="Power", count=0, rate_hz=0.0, last_write=0.0),
        ],
    )
    msg = mom_message([MomRow("base", info), MomRow("ghost", None)], now=100.0)
    assert msg["type"] == "mom"
    base, ghost = msg["modules"]
    assert (base["name"], base["active"], base["pid"]) == ("base", True, 42)
    truth, power = base["interfaces"]
    assert (truth["name"], truth["rate"], truth["age"], truth["count"]) == ("Sim/Truth", 50.0, 0.5, 10)
    assert power["age"] is None  # never written
    assert ghost == {"name": "ghost", "answered": False, "interfaces": []}


def test_a_moveto_is_shown_until_the_motion_module_says_it_is_over() -> None:
    view = ViewState()
    idle = msgs.FVectorState(element=[0, 0, 0, 1])
    view.feed(names.MOTION_COMMAND, msgs.ActuatorState(cmd_flags=42, position=[4.0, 5.0]))
    view.feed(names.MOTION_STATUS, idle)  # a status from before the motion module took the moveto
    assert view.frame()["goals"] == {"moveto": [4.0, 5.0]}
    view.feed(names.MOTION_STATUS, msgs.FVectorState(element=[0, 0, -2, 3]))  # nearing it
    view.feed(names.MOTION_STATUS, msgs.FVectorState(element=[0, 0, 1, 1]))  # at the goal: still shown
    assert view.frame()["goals"] == {"moveto": [4.0, 5.0]}
    view.feed(names.MOTION_STATUS, idle)  # over
    assert view.frame()["goals"] == {}
