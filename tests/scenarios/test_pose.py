"""The pose module on the simulated robot (realistic noise, in lock-step, one process): it keeps the localization
pose on the map where dead reckoning drifts, finds a robot carried elsewhere, answers "find wall", and hands the
setter over the original's way when the pose is set by hand."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.geometry import wrap_angle
from pluto.navigation.pose.module import PoseModule, PoseModuleParams
from pluto.navigation.pose.proxy import PoseProxy
from pluto.runtime.profiles import load_profile, with_params
from tests.scenarios.stack import INNER_START, Collector, DriveCommand, Lockstep, Script, write_inner_room

pytestmark = pytest.mark.scenario

SEED = 5
START = INNER_START


@pytest.fixture
def world(tmp_path: Path) -> Path:
    return write_inner_room(tmp_path)


@pytest.fixture
def sim(bus: Bus, world: Path) -> Iterator[Lockstep]:
    """The sim profile (realistic noise, localization starting at the world's start) in lock-step, and the pose
    module in this process (``sim.modules[0]``), the time held at 0."""
    profile = with_params(load_profile("sim"), "localization", start_pose_file=str(world.parent / "start.toml"))
    with Lockstep(bus) as stack:
        stack.start(profile, world=str(world), noise="realistic", seed=SEED)
        stack.add(PoseModule(bus, PoseModuleParams(map=str(world))))
        yield stack


def errors(truth: Collector, estimates: Collector, until: float) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and heading (rad) errors of the estimates (robot poses, 6-D) against the truth of their stamps."""
    by_stamp = {round(t.stamp, 6): t for t in truth.snapshot()}
    pos, head = [], []
    for e in estimates.snapshot():
        t = by_stamp.get(round(e.stamp, 6))
        if t is None or e.stamp > until or not e.pose:
            continue
        pos.append(math.hypot(e.pose[0] - t.x, e.pose[1] - t.y))
        head.append(abs(wrap_angle(e.pose[3] - t.theta)))
    return np.array(pos), np.array(head)


def test_the_pose_stays_on_the_map_where_dead_reckoning_drifts(bus: Bus, sim: Lockstep) -> None:
    truth = sim.collect(names.SIM_TRUTH, msgs.Odometry)
    pose = sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    dead = sim.collect(names.LOCALIZATION_DEAD_RECKONING, msgs.PoseEstimate)
    drive = sim.add(DriveCommand(bus, 0.4, 0.2, until=45.0))
    sim.resume()
    drive.wait()
    end = drive.finished_at
    assert end is not None
    pos, head = errors(truth, pose, end)
    dr_pos, dr_head = errors(truth, dead, end)
    assert len(pos) > 200 and len(dr_pos) > 200
    module = sim.modules[0]
    assert isinstance(module, PoseModule)
    assert module.tracker.posts > 150  # a post per scan (5 Hz)
    assert pose.snapshot()[-1].cmd_flags == 1  # the pose module sets the pose
    print(
        f"pose error max {pos.max():.3f} m {math.degrees(head.max()):.2f}°; dead reckoning max {dr_pos.max():.3f} m "
        f"{math.degrees(dr_head.max()):.2f}°"
    )
    assert pos.max() <= 0.10 and math.degrees(head.max()) <= 2.0
    assert dr_pos.max() > 2 * pos.max()  # dead reckoning alone drifts further


def test_a_kidnapped_robot_is_found_again_within_10_s(bus: Bus, sim: Lockstep) -> None:
    truth = sim.collect(names.SIM_TRUTH, msgs.Odometry)
    pose = sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    status = sim.collect(names.POSE_STATUS, msgs.FVectorState)
    drive = sim.add(DriveCommand(bus, 0.3, 0.15, until=60.0))
    kidnapped: list[float] = []

    def kidnap(now: float) -> None:
        if now >= 10.0 and not kidnapped:
            # carried 2.5 m to the east and turned by 60°: the odometry does not see it
            last = truth.snapshot()[-1]
            assert bus.call("base/place", [last.x + 2.5, last.y - 0.5, last.theta + math.radians(60)], bool)
            kidnapped.append(now)
        if kidnapped and now >= kidnapped[0] + 15.0:
            script.finish()

    script = sim.add(Script(bus, kidnap))
    sim.resume()
    script.wait()
    drive.finish()
    t0 = kidnapped[0]
    relocalized = [s.stamp for s in status.snapshot() if len(s.element) > 4 and s.element[4] >= 1]
    assert relocalized, "the pose module never relocalized"
    assert relocalized[0] - t0 <= 10.0
    after = [e for e in pose.snapshot() if t0 + 12.0 <= e.stamp <= t0 + 15.0]
    assert after
    by_stamp = {round(t.stamp, 6): t for t in truth.snapshot()}
    late = [
        math.hypot(e.pose[0] - by_stamp[round(e.stamp, 6)].x, e.pose[1] - by_stamp[round(e.stamp, 6)].y)
        for e in after
        if round(e.stamp, 6) in by_stamp
    ]
    print(f"kidnapped at {t0:.1f} s, relocalized at {relocalized[0]:.1f} s; error afterwards max {max(late):.3f} m")
    assert max(late) < 0.15


def test_find_wall_and_the_setter_when_the_pose_is_set_by_hand(bus: Bus, sim: Lockstep) -> None:
    pose = sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    drive = sim.add(DriveCommand(bus, 0.0, 0.0, until=3600.0))  # keeps the time running, the robot still
    sim.resume()
    pose.wait_for(lambda p: p.cmd_flags == 1, timeout=60.0)
    with PoseProxy(bus, start=False) as proxy:
        wall = proxy.find_wall(timeout=60.0)
        # facing +x from (4.5, 4): the east wall, 10 - 4.5 - 0.25 (laser mount) ahead, squarely
        assert wall.points > 50
        assert wall.rho == pytest.approx(10.0 - START[0] - 0.25, abs=0.05)
        assert abs(wall.gamma) < math.radians(2)
        # the original's way, to about where the robot is (a hand measurement): the module goes on from there
        proxy.set_pose(START[0] + 0.1, START[1] - 0.05, START[2] + 0.03, timeout=60.0)
        running = proxy.wait(0, timeout=60.0)
        while not running.element[0]:
            running = proxy.wait(0, timeout=60.0)
        assert proxy.status() is not None
    # the setter went 1 -> 0 (stopped) -> -1 (set by hand) -> 1 (running again), and the pose is the new one
    flags = [p.cmd_flags for p in pose.snapshot()]
    assert -1 in flags and flags.index(-1) > flags.index(1)
    assert 0 in flags[flags.index(1) : flags.index(-1)]
    set_at = next(p.stamp for p in pose.snapshot() if p.cmd_flags == -1)
    last = pose.wait_for(lambda p: p.cmd_flags == 1 and p.stamp > set_at + 2.0, timeout=60.0)
    # the walls pull the pose back from the hand measurement onto the truth
    assert last.pose[0] == pytest.approx(START[0], abs=0.03) and last.pose[1] == pytest.approx(START[1], abs=0.03)
    drive.finish()
