"""The pose module's shell, driven by hand: scans and laser poses in, posts and status out."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.navigation.pose.module import FIND_WALL, PoseModule, PoseModuleParams
from pluto.sim.raycast import RayCaster
from tests.helpers import wait_until
from tests.navigation.pose.scenes import L_ROOM_WALLS, MAX_RANGE, angles, laser_of, scan

ROOM = "".join(f'<wall x1="{a}" y1="{b}" x2="{c}" y2="{d}"/>' for a, b, c, d in L_ROOM_WALLS)


@pytest.fixture
def module(bus: Bus, tmp_path: Path) -> Iterator[PoseModule]:
    path = tmp_path / "l-room.xml"
    path.write_text(f'<world name="l-room" version="1"><walls>{ROOM}</walls></world>')
    pose = PoseModule(bus, PoseModuleParams(map=str(path), autostart=False, use_sim_time=False))
    pose.start()
    yield pose
    pose.stop()


def laser_scan(robot: tuple[float, float, float], t: float) -> msgs.LaserScan:
    bearings = angles()
    ranges = scan(RayCaster(np.array(L_ROOM_WALLS)), laser_of(robot), bearings)
    return msgs.LaserScan(
        stamp=t, ranges=ranges.tolist(), angles=bearings.tolist(), count=len(bearings), max_range=MAX_RANGE
    )


def laser_pose(robot: tuple[float, float, float], t: float, tilt: float = 0.0) -> msgs.PoseEstimate:
    x, y, theta = laser_of(robot)
    return msgs.PoseEstimate(stamp=t, pose=[x, y, 0.9, theta, 0.0, 0.0, 0.0, tilt], covariance=[0.0] * 9)


def test_a_scan_is_matched_and_posted_with_setter_1(bus: Bus, module: PoseModule) -> None:
    robot = (3.0, 2.0, 0.2)
    tracker = module.tracker
    post = tracker.process(1.0, laser_scan(robot, 1.0), laser_pose(robot, 1.0), laser_pose(robot, 1.0))
    assert tracker.filter is not None and len(tracker.matched) >= 3
    assert post is not None and post.cmd_flags == 1 and post.stamp == 1.0 and len(post.pose) == 8
    x, y, theta = tracker.filter.pose
    assert math.hypot(x - laser_of(robot)[0], y - laser_of(robot)[1]) < 0.02 and abs(theta - 0.2) < 0.01
    assert post.pose[0] == x and post.pose[1] == y and post.pose[3] == theta


def test_a_tilted_scan_moves_the_filter_but_is_not_matched(module: PoseModule) -> None:
    robot = (3.0, 2.0, 0.0)
    tracker = module.tracker
    assert tracker.process(1.0, laser_scan(robot, 1.0), laser_pose(robot, 1.0), laser_pose(robot, 1.0))
    matched = list(tracker.matched)
    moved = (3.3, 2.0, 0.0)
    post = tracker.process(1.2, laser_scan(moved, 1.2), laser_pose(moved, 1.2, tilt=math.radians(10)), None)
    assert post is None and tracker.tilted == 1  # nothing posted for the tilted scan
    assert tracker.matched == matched  # the last match is the level scan's
    assert tracker.filter is not None and tracker.filter.pose[0] == pytest.approx(laser_of(moved)[0], abs=1e-9)


def test_find_wall_answers_on_the_status(bus: Bus, module: PoseModule) -> None:
    bus.create_publisher(names.POSE_STATUS).write(msgs.FVectorState(element=[1, FIND_WALL]))  # as a client asks
    wait_until(lambda: module.find_wall_pending, timeout=5.0, message="the request did not reach the module")
    robot = (3.0, 2.0, 0.0)  # facing the east wall (x = 12), squarely
    module.inputs.add(laser_scan(robot, 1.0), laser_pose(robot, 1.0), laser_pose(robot, 1.0))
    module.step(1.0)
    status = bus.create_reader(names.POSE_STATUS).wait_for_value(timeout=5.0)
    assert status.element[1] > 50  # scan points on the wall in front
    assert status.data[1] == pytest.approx(12.0 - laser_of(robot)[0], abs=0.02)
    assert abs(status.data[0]) < 0.01


def test_stopping_the_thread_hands_the_setter_back(bus: Bus, module: PoseModule) -> None:
    seen: list[msgs.PoseEstimate] = []
    posts = bus.create_subscription(names.LOCALIZATION_POST_POSE, seen.append, depth=16, current=False)
    module.start_activity()
    module.stop_activity()
    wait_until(lambda: any(p.cmd_flags == 0 and not p.pose for p in seen), timeout=5.0, message="no setter 0 post")
    posts.close()


def test_warm_up_leaves_the_kernels_of_a_scan_compiled() -> None:
    """The module calls it while configuring: its first scan then finds every kernel of the per-scan path ready.
    In a fresh interpreter, where nothing has called them yet."""
    script = (  # the kernels are private (how the module computes); their compiled signatures are what it checks
        "from pluto.navigation.pose import core, features, map as wall_map, tracker\n"
        "kernels = (features._extract, core._update, wall_map._query)\n"
        "before = [len(k.signatures) for k in kernels]\n"
        "tracker.warm_up()\n"
        "print(before, [len(k.signatures) for k in kernels])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["[0,", "0,", "0]", "[1,", "1,", "1]"], out.stdout + out.stderr
