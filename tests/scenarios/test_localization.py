"""The localization service on the simulated robot (realistic noise, in lock-step, one process).

The test acts through scripts that take part in the lock-step (commands to the base, posted poses, the inertial unit
stopped at a given time), so every run is the same run.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.navigation.localization.core import laser_pose
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.proxies import LocProxy
from pluto.runtime.module import Module
from pluto.runtime.profiles import load_profile
from tests.scenarios.stack import ROOM, DriveCommand, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 3
LASER_MOUNT = (0.25, 0.0, 0.9)


@pytest.fixture
def sim(bus: Bus, tmp_path: Path) -> Iterator[Lockstep]:
    """The sim profile (realistic noise) in lock-step, the robot at (3, 3) in the room, plus the localization
    service in this process (``sim.modules[0]``), the time held at 0."""
    world = tmp_path / "room.xml"
    world.write_text(ROOM.replace('x="5" y="5"', 'x="3" y="3"'))
    with Lockstep(bus) as stack:
        stack.start(without(load_profile("sim"), "localization"), world=str(world), noise="realistic", seed=SEED)
        stack.add(LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True)))
        yield stack


def localization(sim: Lockstep) -> LocalizationModule:
    module = sim.modules[0]
    assert isinstance(module, LocalizationModule)
    return module


def open_proxy(bus: Bus, proxies: list[LocProxy], mask: int) -> LocProxy:
    """A localization proxy, opened in a script's step once the service has written every interface (a proxy waits
    for that, and it takes a scan: not while the time is held). Use it from the next step on: its readers start
    with the values current when it opened, which members of this process may have written during this tick."""
    loc = LocProxy(bus, mask, start=False, timeout=5.0)
    proxies.append(loc)
    assert loc.mask == mask
    return loc


def test_driving_posting_and_the_setter(bus: Bus, sim: Lockstep) -> None:
    module = localization(sim)
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    laser_dr = sim.collect("Localization/Laser_Dead-Reckoning", msgs.PoseEstimate)
    proxies: list[LocProxy] = []
    seen: dict[str, Any] = {}

    def interpolation_errors(since: float) -> list[float]:
        """For each laser pose after ``since``: the laser's move from the last odometry step before the scan to the
        scan's centre, dead-reckoned, against the truth's (removes the drift, which is not interpolation)."""
        truths = truth.snapshot()
        times = [t.stamp for t in truths]
        errors = []
        for scan in (p for p in laser_dr.snapshot() if p.stamp > since):
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
            true_laser = laser_pose(true_at, 0.0, 0.0, LASER_MOUNT)
            true_before = laser_pose([before.x, before.y, 0.0, before.theta, 0.0, 0.0], 0.0, 0.0, LASER_MOUNT)
            dr_before = module.core.pose_at(before.stamp)
            assert dr_before is not None, before.stamp
            dr_laser_before = laser_pose(dr_before.pose, 0.0, 0.0, LASER_MOUNT)
            # rotate the truth's move into the dead-reckoning frame
            offset = dr_before.pose[3] - before.theta
            c, s = math.cos(offset), math.sin(offset)
            tdx, tdy = true_laser[0] - true_before[0], true_laser[1] - true_before[1]
            ex = scan.pose[0] - dr_laser_before[0] - (c * tdx - s * tdy)
            ey = scan.pose[1] - dr_laser_before[1] - (s * tdx + c * tdy)
            errors.append(math.hypot(ex, ey))
        return errors

    def drive_then_post(now: float) -> Generator[None, float, None]:
        while now < 0.5:
            now = yield
        loc = open_proxy(bus, proxies, 31)
        now = yield
        first = loc.get_pose(0)
        assert first is not None and len(first.pose) == 6
        # drive an arc for 3 s; the laser poses are interpolated to the scans' times
        while now < first.stamp + 3.0:
            command.write(msgs.ActuatorState(velocity=[1.0, 0.4]))
            now = yield
        seen["scans"] = len([p for p in laser_dr.snapshot() if p.stamp > first.stamp + 1.0])
        seen["errors"] = interpolation_errors(first.stamp + 1.0)  # now, while the service still has that history
        command.write(msgs.ActuatorState(velocity=[0.0, 0.0]))
        while (o := odometry.read()) is None or o.v != 0.0 or o.omega != 0.0:
            now = yield
        # posting a robot pose moves 3 and 4, never 0 and 1
        seen["before0"] = loc.get_pose(0)
        seen["setter"] = loc.setter()
        loc.post_pose([10.0, 20.0, 0.0, 1.0, 0.0, 0.0], -1, [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
        while loc.setter() != -1:
            now = yield
        seen["pose3"], seen["pose0"] = loc.get_pose(3), loc.get_pose(0)
        while (pose4 := loc.get_pose(4)) is None or pose4.cmd_flags != -1:  # a scan placed before the post
            now = yield
        seen["pose4"], seen["laser1"], seen["dr_now"] = pose4, loc.get_pose(1), loc.get_pose(0)
        # the setter protocol: a pose module announces itself (1), then stops (0)
        loc.post_pose([], 1)
        while loc.setter() != 1:
            now = yield
        loc.post_pose([], 0)
        while loc.setter() != 0:
            now = yield

    script = Script(bus, run=drive_then_post, rate_hz=10.0)
    command = script.publisher("Base/Drive/Command", msgs.ActuatorState)
    odometry = script.reader("Base/Drive/State", msgs.Odometry)
    sim.add(script)
    sim.resume()
    try:
        script.wait()
    finally:
        for proxy in proxies:
            proxy.close()
    assert seen["scans"] >= 8
    assert seen["errors"] and max(seen["errors"]) < 0.01, seen["errors"]
    before0, pose0, pose3, pose4 = seen["before0"], seen["pose0"], seen["pose3"], seen["pose4"]
    assert seen["setter"] == 0
    # the robot stands still, and the post did not move interface 0 (only the inertial unit's noise does, a little)
    assert math.hypot(pose0.pose[0] - before0.pose[0], pose0.pose[1] - before0.pose[1]) < 0.01
    assert math.hypot(pose3.pose[0] - 10.0, pose3.pose[1] - 20.0) < 0.5
    assert pose3.covariance[0] >= 0.01 - 1e-12  # the posted variance (up to rounding), plus any growth since
    assert math.hypot(pose4.pose[0] - 10.0, pose4.pose[1] - 20.0) < 1.0
    assert math.hypot(seen["laser1"].pose[0] - 10.0, seen["laser1"].pose[1] - 20.0) > 5.0
    assert math.hypot(seen["dr_now"].pose[0] - 10.0, seen["dr_now"].pose[1] - 20.0) > 5.0


def stop_from_a_step(module: Module) -> None:
    """Stop a module's control step at the current tick, from a script's step: the module takes no step after it.

    ``stop_activity`` waits for the module's thread, which leaves the lock-step only between ticks, so it runs on a
    thread of its own; the step goes on once the module is no longer active (it steps no more from then on). Choose
    a tick at which the module has no step due: the acknowledgement of a step it took at this tick could reach the
    simulator after it left, and the simulator would wait for it again (until it drops it, 10 s later).
    """
    threading.Thread(target=module.stop_activity, name=f"stop-{module.module_name}", daemon=True).start()
    while module.active:
        threading.Event().wait(0.001)


def test_losing_the_inertial_unit(bus: Bus, sim: Lockstep) -> None:
    module = localization(sim)
    assert sim.supervisor is not None
    dmu = next(m for m in sim.supervisor.modules if m.module_name == "dmu")
    status = sim.collect("localization/status", msgs.FVectorState)
    proxies: list[LocProxy] = []
    seen: dict[str, Any] = {}

    def lose_the_unit(now: float) -> Generator[None, float, None]:
        while now < 0.5:
            now = yield
        loc = open_proxy(bus, proxies, 1)
        while now <= 1.0:
            now = yield
        unit = localization_status.read()
        assert unit is not None and unit.element[1] == 1  # the inertial unit is there
        # stopped at 1.025 s, a tick at which it has no step due (it steps every 20 ms): it leaves between its steps
        stop_from_a_step(dmu)
        seen["lost"] = now
        while (s := localization_status.read()) is None or s.element[1] != 0:
            command.write(msgs.ActuatorState(velocity=[0.5, 0.3]))
            now = yield
        seen["noticed"] = s
        seen["theta_var"] = module.core.pose().covariance[2, 2]
        seen["steps"] = module.core.counters.odometry_only_steps
        # drive on until the dead reckoning has gone on without the unit for a second (10 s at most)
        while ((later := loc.get_pose(0)) is None or later.stamp < s.stamp + 1.0) and now < s.stamp + 10.0:
            command.write(msgs.ActuatorState(velocity=[0.5, 0.3]))
            now = yield
        seen["later"] = later

    script = Script(bus, run=lose_the_unit, rate_hz=40.0)
    command = script.publisher("Base/Drive/Command", msgs.ActuatorState)
    localization_status = script.reader("localization/status", msgs.FVectorState)
    sim.add(script)
    sim.resume()
    try:
        script.wait()
    finally:
        for proxy in proxies:
            proxy.close()
    noticed = seen["noticed"]
    assert seen["lost"] == pytest.approx(1.025, abs=1e-9)
    timeout = module.core.params.dmu_timeout
    # noticed as soon as the newest inertial state was older than the timeout
    assert noticed.data[1] > timeout
    assert noticed.stamp - seen["lost"] <= timeout + 0.2
    assert all(s.element[1] == 1 for s in status.values if 0.0 < s.stamp <= seen["lost"])
    assert all(s.element[1] == 0 for s in status.values if noticed.stamp <= s.stamp <= seen["later"].stamp)
    assert seen["later"] is not None and seen["later"].stamp >= noticed.stamp + 1.0, "no dead reckoning without it"
    assert seen["later"].covariance[8] > seen["theta_var"]  # odometry-only heading: growing covariance
    assert module.core.counters.odometry_only_steps > seen["steps"]  # steps it made without the unit, counted


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


def test_dead_reckoning_drifts_smoothly(bus: Bus, sim: Lockstep) -> None:
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    dead_reckoning = sim.collect("Localization/Dead-Reckoning", msgs.PoseEstimate)
    drive = sim.add(DriveCommand(bus, 0.8, 0.4, until=15.0))  # a circle of 2 m radius inside the room
    sim.resume()
    drive.wait()
    truths = truth.until(15.0)
    poses = [p for p in dead_reckoning.until(15.0) if _truth_at(truths, p.stamp) is not None]
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
