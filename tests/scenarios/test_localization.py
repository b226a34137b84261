"""The localization service on the simulated robot (realistic noise, faster than real time, one process)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.navigation.localization.core import laser_pose
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.proxies import LocProxy
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.scenarios.stack import ROOM, Collector, Commander

RATE = 5.0


@pytest.fixture
def stack(bus: Bus, tmp_path: Path) -> Iterator[Callable[[], tuple[Supervisor, LocalizationModule]]]:
    """The sim profile (realistic noise) plus the localization service in this process."""
    started: list[tuple[Supervisor, LocalizationModule]] = []
    world = tmp_path / "room.xml"
    world.write_text(ROOM.replace('x="5" y="5"', 'x="3" y="3"'))

    def start() -> tuple[Supervisor, LocalizationModule]:
        profile = load_profile("sim")
        profile = type(profile)(
            **{**profile.__dict__, "entries": tuple(e for e in profile.entries if e.name != "localization")}
        )
        profile = with_params(profile, "sim", world=str(world), rate=RATE, noise="realistic", seed=3)
        supervisor = Supervisor(bus, profile, Config(), one_process=True)
        supervisor.start()
        module = LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True))
        started.append((supervisor, module))
        module.start()
        return supervisor, module

    yield start
    for supervisor, module in started:
        module.stop()
        supervisor.shutdown()


def test_driving_posting_and_the_setter(bus: Bus, stack: Callable[[], tuple[Supervisor, LocalizationModule]]) -> None:
    _supervisor, _module = stack()
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    laser_dr = Collector(bus, "Localization/Laser_Dead-Reckoning", msgs.PoseEstimate)
    loc = LocProxy(bus, start=False)
    assert loc.mask == 31
    first = loc.wait_pose(0, timeout=10)
    assert len(first.pose) == 6
    with Commander(bus, 1.0, 0.4):
        laser_dr.wait_for(lambda p: p.stamp > first.stamp + 3.0, timeout=20)
    scans = [p for p in laser_dr.snapshot() if p.stamp > first.stamp + 1.0]
    truths = truth.snapshot()
    assert len(scans) >= 8
    # interpolation error: the laser's move from the last odometry step before the scan to the scan's centre,
    # dead-reckoned against the truth (removes the drift, which is not interpolation)
    times = [t.stamp for t in truths]
    errors = []
    for scan in scans:
        i = max(k for k, s in enumerate(times) if s <= scan.stamp)
        if i + 1 >= len(truths):
            continue
        before, after = truths[i], truths[i + 1]
        f = (scan.stamp - before.stamp) / (after.stamp - before.stamp)
        true_at = [
            before.x + f * (after.x - before.x),
            before.y + f * (after.y - before.y),
            0.0,
            before.theta + f * (after.theta - before.theta),
            0.0,
            0.0,
        ]
        true_laser = laser_pose(true_at, 0.0, 0.0, (0.25, 0.0, 0.9))
        true_before = laser_pose([before.x, before.y, 0.0, before.theta, 0.0, 0.0], 0.0, 0.0, (0.25, 0.0, 0.9))
        dr_before = _module.core.pose_at(before.stamp)
        assert dr_before is not None
        dr_laser_before = laser_pose(dr_before.pose, 0.0, 0.0, (0.25, 0.0, 0.9))
        # rotate the truth's move into the dead-reckoning frame
        offset = dr_before.pose[3] - before.theta
        c, s = math.cos(offset), math.sin(offset)
        tdx, tdy = true_laser[0] - true_before[0], true_laser[1] - true_before[1]
        ex = scan.pose[0] - dr_laser_before[0] - (c * tdx - s * tdy)
        ey = scan.pose[1] - dr_laser_before[1] - (s * tdx + c * tdy)
        errors.append(math.hypot(ex, ey))
    assert errors and max(errors) < 0.01, errors
    # posting a robot pose moves 3 and 4, never 0 and 1
    before0 = loc.get_pose(0)
    assert before0 is not None
    assert loc.setter() == 0
    loc.post_pose([10.0, 20.0, 0.0, 1.0, 0.0, 0.0], -1, [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
    loc.wait_for_setter(-1, timeout=10)
    pose3 = loc.get_pose(3)
    pose0 = loc.get_pose(0)
    assert pose3 is not None and pose0 is not None
    if pose3.stamp == pose0.stamp:
        assert pose0.pose == before0.pose or pose0.stamp > before0.stamp
    assert math.hypot(pose3.pose[0] - 10.0, pose3.pose[1] - 20.0) < 0.5  # the robot is stopped
    assert pose3.covariance[0] >= 0.01 - 1e-12  # the posted variance (up to rounding), plus any growth since
    pose4 = loc.wait_pose(4, timeout=10)
    while pose4.cmd_flags != -1:  # a scan placed before the post was still on its way
        pose4 = loc.wait_pose(4, timeout=10)
    assert math.hypot(pose4.pose[0] - 10.0, pose4.pose[1] - 20.0) < 1.0
    laser1 = loc.get_pose(1)
    assert laser1 is not None and math.hypot(laser1.pose[0] - 10.0, laser1.pose[1] - 20.0) > 5.0
    dr_now = loc.get_pose(0)
    assert dr_now is not None and math.hypot(dr_now.pose[0] - 10.0, dr_now.pose[1] - 20.0) > 5.0
    # the setter protocol: a pose module announces itself (1), then stops (0)
    loc.post_pose([], 1)
    loc.wait_for_setter(1, timeout=10)
    loc.post_pose([], 0)
    loc.wait_for_setter(0, timeout=10)
    loc.close()


def test_losing_the_inertial_unit(bus: Bus, stack: Callable[[], tuple[Supervisor, LocalizationModule]]) -> None:
    supervisor, module = stack()
    status = bus.create_reader("localization/status", msgs.FVectorState)
    status.wait_for_update(timeout=10)
    s = status.wait_for_update(timeout=10)
    assert s.element[1] == 1
    dmu = next(m for m in supervisor.modules if m.module_name == "dmu")
    dmu.stop_activity()
    with Commander(bus, 0.5, 0.3):
        deadline = 0
        while True:
            s = status.wait_for_update(timeout=10)
            deadline += 1
            if s.element[1] == 0 or deadline > 500:
                break
        assert s.element[1] == 0 and s.data[1] > module.core.params.dmu_timeout
        theta_var = module.core.pose().covariance[2, 2]
        loc = LocProxy(bus, 1, start=False)
        p = loc.wait_pose(0, timeout=10)
        p2 = loc.wait_pose(0, timeout=10)
        assert p2.stamp > p.stamp
        later = p2
        for _ in range(20):
            later = loc.wait_pose(0, timeout=10)
        assert later.covariance[8] > theta_var  # odometry-only heading: growing covariance
        loc.close()
    assert module.core.counters.odometry_only_steps > 0


def _truth_at(truths: list[msgs.Odometry], t: float) -> tuple[float, float, float] | None:
    """The true pose at time ``t``, interpolated; None outside the recorded span."""
    for before, after in itertools.pairwise(truths):
        if before.stamp <= t <= after.stamp:
            f = (t - before.stamp) / (after.stamp - before.stamp) if after.stamp > before.stamp else 0.0
            return (
                before.x + f * (after.x - before.x),
                before.y + f * (after.y - before.y),
                before.theta + f * (after.theta - before.theta),
            )
    return None


def test_dead_reckoning_drifts_smoothly(bus: Bus, stack: Callable[[], tuple[Supervisor, LocalizationModule]]) -> None:
    stack()
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    dead_reckoning = Collector(bus, "Localization/Dead-Reckoning", msgs.PoseEstimate)
    first = dead_reckoning.wait_for(lambda p: True, timeout=10)
    with Commander(bus, 0.8, 0.4):  # a circle of 2 m radius inside the room
        dead_reckoning.wait_for(lambda p: p.stamp > first.stamp + 15.0, timeout=30)
    truths = truth.snapshot()
    poses = [p for p in dead_reckoning.snapshot() if _truth_at(truths, p.stamp) is not None]
    assert len(poses) > 100
    # Align the dead-reckoning frame (it starts at the origin) with the world at the first pose.
    x0, y0, th0 = poses[0].pose[0], poses[0].pose[1], poses[0].pose[3]
    tx, ty, tth = _truth_at(truths, poses[0].stamp)  # type: ignore[misc]
    turn = tth - th0
    c, s = math.cos(turn), math.sin(turn)
    errors = []
    for p in poses:
        dx, dy = p.pose[0] - x0, p.pose[1] - y0
        wx, wy = tx + c * dx - s * dy, ty + s * dx + c * dy
        true_x, true_y, _ = _truth_at(truths, p.stamp)  # type: ignore[misc]
        errors.append(math.hypot(wx - true_x, wy - true_y))
    # It never jumps: consecutive poses are no farther apart than the robot can drive (+1 cm).
    for a, b in itertools.pairwise(poses):
        assert math.hypot(b.pose[0] - a.pose[0], b.pose[1] - a.pose[1]) <= 1.5 * (b.stamp - a.stamp) + 0.01
    # Its error against the truth starts near zero, drifts (realistic noise), and grows without steps.
    assert errors[0] < 0.01
    assert max(errors[-20:]) > 0.01
    assert max(abs(b - a) for a, b in itertools.pairwise(errors)) < 0.05
    # Its uncertainty only grows.
    spread = [p.covariance[0] + p.covariance[4] for p in poses]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(spread))
    assert spread[-1] > spread[0]
