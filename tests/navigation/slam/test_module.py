"""The slam module's shell, driven by hand: scans and laser poses in, posts, status and the map file out."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.navigation.pose.map import WallMap
from pluto.navigation.slam.module import SAVE, SAVE_FAILED, SAVING, SlamModule, SlamModuleParams
from pluto.navigation.slam.proxy import SlamProxy, SlamStatus
from pluto.sim.raycast import RayCaster
from pluto.sim.world import load_world
from tests.helpers import wait_until
from tests.navigation.pose.scenes import L_ROOM_WALLS, MAX_RANGE, angles, laser_of, scan


@pytest.fixture
def map_path(tmp_path: Path) -> Path:
    return tmp_path / "maps" / "slam.xml"


@pytest.fixture
def module(bus: Bus, map_path: Path) -> Iterator[SlamModule]:
    slam = SlamModule(bus, SlamModuleParams(map_file=str(map_path), use_sim_time=False))
    slam.start()
    yield slam
    slam.stop()


def laser_scan(robot: tuple[float, float, float], t: float) -> msgs.LaserScan:
    bearings = angles()
    ranges = scan(RayCaster(np.array(L_ROOM_WALLS)), laser_of(robot), bearings)
    return msgs.LaserScan(
        stamp=t, ranges=ranges.tolist(), angles=bearings.tolist(), count=len(bearings), max_range=MAX_RANGE
    )


def laser_pose(robot: tuple[float, float, float], t: float, tilt: float = 0.0) -> msgs.PoseEstimate:
    x, y, theta = laser_of(robot)
    return msgs.PoseEstimate(stamp=t, pose=[x, y, 0.9, theta, 0.0, 0.0, 0.0, tilt], covariance=[0.0] * 9)


def feed(module: SlamModule, robots: list[tuple[float, float, float]], t0: float = 1.0) -> list[msgs.PoseEstimate]:
    """Scans with exact laser poses from each robot pose, 0.2 s apart, one step each; the posts written."""
    posts = []
    for k, robot in enumerate(robots):
        t = t0 + 0.2 * k
        post = module.process_scan(t, laser_scan(robot, t), laser_pose(robot, t), laser_pose(robot, t))
        assert post is not None
        posts.append(post)
    return posts


def test_the_thread_waits_to_be_started(module: SlamModule, bus: Bus) -> None:
    assert not module.active
    status = bus.create_reader(names.SLAM_STATUS).wait_for_value(timeout=5.0)
    assert status.element[0] == 0 and status.element[1] == 0


def test_scans_build_a_map_and_post_the_pose_with_setter_2(module: SlamModule) -> None:
    robots = [(3.0 + 0.1 * k, 2.0, 0.2) for k in range(5)]
    posts = feed(module, robots)
    assert module.slam is not None and int(module.slam.segments.active.sum()) >= 3
    assert all(p.cmd_flags == 2 and len(p.pose) == 8 and len(p.covariance) == 9 for p in posts)
    last = posts[-1]
    x, y, theta = laser_of(robots[-1])
    assert math.hypot(last.pose[0] - x, last.pose[1] - y) < 0.02 and abs(last.pose[3] - theta) < 0.01


def test_scan_matching_corrects_a_dead_reckoning_that_slips(bus: Bus, map_path: Path) -> None:
    """The dead reckoning says 10 % more travel and a drift of 1° per step than the robot made; the scans say
    otherwise. With the front end the posted pose follows the scans; without it, only the walls pull it back."""
    robots = [(2.5 + 0.15 * k, 2.0, 0.1 + 0.01 * k) for k in range(8)]
    finals = {}
    for matching in (True, False):
        slam = SlamModule(bus, SlamModuleParams(map_file=str(map_path), use_sim_time=False, scan_match=matching))
        slam.start()
        try:
            post = None
            for k, robot in enumerate(robots):
                t = 1.0 + 0.2 * k
                slipped = (2.5 + 0.165 * k, 2.0, robot[2] + math.radians(1.0) * k)
                dr = msgs.PoseEstimate(
                    stamp=t,
                    pose=laser_pose(slipped, t).pose,
                    covariance=np.diag([0.02**2, 0.02**2, math.radians(1.5) ** 2]).ravel().tolist(),
                )
                post = slam.process_scan(t, laser_scan(robot, t), dr, laser_pose(robot, t))
            assert post is not None
            x, y, theta = laser_of(robots[-1])
            finals[matching] = (math.hypot(post.pose[0] - x, post.pose[1] - y), abs(post.pose[3] - theta))
            assert (slam.matcher is not None) == matching
            if slam.matcher is not None:
                assert slam.matcher.counts["matched"] + slam.matcher.counts["degenerate"] == len(robots) - 1
        finally:
            slam.stop()
    assert finals[True][0] < 0.02 and finals[True][1] < math.radians(0.3)
    assert finals[True][0] < finals[False][0] and finals[True][1] < finals[False][1]


def test_a_tilted_scan_only_moves_the_filter(module: SlamModule) -> None:
    feed(module, [(3.0, 2.0, 0.0)] * 4)
    assert module.slam is not None
    walls = len(module.slam.filter)
    moved = (3.3, 2.0, 0.0)
    post = module.process_scan(5.0, laser_scan(moved, 5.0), laser_pose(moved, 5.0, tilt=math.radians(10)), None)
    assert post is not None and module.tilted == 1 and module.matched == 0
    assert len(module.slam.filter) == walls
    assert post.pose[0] == pytest.approx(laser_of(moved)[0], abs=1e-6)


def test_save_on_request_goes_minus_1_then_0_with_setter_3_meanwhile(
    module: SlamModule, bus: Bus, map_path: Path
) -> None:
    statuses: list[msgs.FVectorState] = []
    posts: list[msgs.PoseEstimate] = []
    watch = bus.create_subscription(names.SLAM_STATUS, statuses.append, depth=256, current=False)
    post_watch = bus.create_subscription(names.LOCALIZATION_POST_POSE, posts.append, depth=64, current=False)
    request = bus.create_publisher(names.SLAM_STATUS)
    try:
        module.start_activity()
        feed(module, [(3.0 + 0.1 * k, 2.0, 0.0) for k in range(5)])
        request.write(msgs.FVectorState(element=[1, SAVE]))
        wait_until(lambda: any(s.element[4:5] == [1] for s in statuses), timeout=5.0, message="no save")
        codes = [int(s.element[1]) for s in statuses]
        first = codes.index(SAVING)
        # asked, saving, saved: the request is this test's own write, which may reach this subscription after the
        # module's answer to it (the module hears it first and answers at once)
        assert SAVE in codes and next((c for c in codes[first + 1 :] if c != SAVE), None) == 0
        wait_until(lambda: len([p for p in posts if not p.pose]) >= 2, timeout=5.0, message="no setter posts")
        assert [p.cmd_flags for p in posts if not p.pose][:2] == [3, 2]  # 3 while saving, then 2 again
        assert module.active
    finally:
        watch.close()
        post_watch.close()
        bus.release(request)
    world = load_world(map_path)
    assert world.name == "slam" and world.walls.shape[0] == module.saved_walls
    assert module.saved_walls is not None and module.saved_walls >= 3
    assert len(WallMap.from_file(map_path)) == world.walls.shape[0]


def test_stopping_the_thread_saves_the_map_and_hands_the_setter_back(
    module: SlamModule, bus: Bus, map_path: Path
) -> None:
    seen: list[msgs.PoseEstimate] = []
    posts = bus.create_subscription(names.LOCALIZATION_POST_POSE, seen.append, depth=64, current=False)
    try:
        module.start_activity()
        feed(module, [(3.0 + 0.1 * k, 2.0, 0.0) for k in range(5)])
        module.stop_activity()
        wait_until(lambda: any(p.cmd_flags == 0 and not p.pose for p in seen), timeout=5.0, message="no setter 0")
        flags = [p.cmd_flags for p in seen if not p.pose]
        assert flags[-2:] == [3, 0]  # 3 while saving, then 0
    finally:
        posts.close()
    assert map_path.exists() and module.saves == 1
    assert load_world(map_path).walls.shape[0] >= 3


def test_a_failed_save_is_reported_and_the_module_goes_on(bus: Bus, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    slam = SlamModule(bus, SlamModuleParams(map_file=str(blocker / "map.xml"), use_sim_time=False))
    slam.start()
    try:
        feed(slam, [(3.0, 2.0, 0.0)] * 4)
        assert not slam.save(0.0)
        assert slam.save_code == SAVE_FAILED and slam.saves == 0
        assert feed(slam, [(3.1, 2.0, 0.0)], t0=2.0)  # still mapping
    finally:
        slam.stop()


def test_no_map_no_file(module: SlamModule, map_path: Path) -> None:
    assert module.save(0.0)  # nothing to save: not an error, and no empty map replaces a good one
    assert not map_path.exists()


def test_the_default_map_file_is_in_the_runtime_folder(bus: Bus) -> None:
    from pluto.runtime.launcher import runtime_dir

    slam = SlamModule(bus, SlamModuleParams(use_sim_time=False))
    slam.start()
    try:
        assert slam.map_path == runtime_dir(bus.robot) / "slam-map.xml"
    finally:
        slam.stop()


def test_the_proxy_saves_and_tells_where(module: SlamModule, bus: Bus, map_path: Path) -> None:
    feed(module, [(3.0 + 0.1 * k, 2.0, 0.0) for k in range(5)])
    with SlamProxy(bus, start=False, timeout=5.0) as proxy:
        status = proxy.status() or SlamStatus.of(proxy.wait(0, timeout=5.0))
        assert not status.running
        info = proxy.save(timeout=10.0)  # the thread is stopped: the module saves at once
        assert info.path == str(map_path) and info.saves == 1 and info.saved_walls is not None
        assert info.saved_walls >= info.walls >= 3  # a wall seen in pieces is a wall of the file for each
        assert map_path.exists()
        assert "stopped" in status.describe()


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        SlamModuleParams(range_sigma=0.0)
    with pytest.raises(ValueError):
        SlamModuleParams(area_radius=-1.0)
    with pytest.raises(ValueError):
        SlamModuleParams(map_name=" ")
    assert SlamModuleParams().autostart is False


def test_a_restart_goes_on_with_the_map_and_a_new_run_starts_a_new_one(module: SlamModule) -> None:
    module.start_activity()
    feed(module, [(3.0 + 0.1 * k, 2.0, 0.0) for k in range(5)])
    module.stop_activity()
    first = module.slam
    assert first is not None and module.saves == 1
    module.start_activity()
    feed(module, [(3.5 + 0.1 * k, 2.0, 0.0) for k in range(3)], t0=3.0)
    assert module.slam is first  # the same map, grown
    module.on_clock_jump(10.0, 0.0)
    wait_until(lambda: module.slam is None, timeout=5.0, message="the map did not start again")
    module.stop_activity()
