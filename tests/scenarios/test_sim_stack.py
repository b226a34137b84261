"""The simulated robot as a whole: the ``sim`` profile on the bus (in one process, in lock-step), and the commands
that run it.

The stack runs in lock-step, as fast as the modules go: the test acts at simulated times through scripts (modules
that take part in the lock-step), so every outcome is exact and the same on every run, whatever the machine's load.
The main thread only waits for what a script signals. One test measures the free-running simulator's rate instead.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.geometry import compose
from pluto.hardware.base.module import SimBaseParams
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.scenarios.stack import DriveCommand, Lockstep, Script, without

pytestmark = pytest.mark.scenario

RATE = 10.0
OFFICE_START = (10.0, 9.7, 0.0)
BASE_PERIOD = 1.0 / SimBaseParams().rate_hz  # s: the simulated base's period (20 Hz)
BASE_STEPS = round(10.0 / BASE_PERIOD) + 1  # the base's steps from 0 to 10 s, both included

# Line 4 holds a wall without x2.
BAD_MAP = """<?xml version="1.0" encoding="UTF-8"?>
<world name="broken" version="1">
  <walls>
    <wall x1="0" y1="0" y2="5"/>
  </walls>
</world>
"""


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    """The test's stack in lock-step on the test's bus (started by the test); stopped after the test."""
    with Lockstep(bus) as stack:
        yield stack


# -- driving --------------------------------------------------------------------------------------------------------


def test_driving_down_the_office_corridor(bus: Bus, sim: Lockstep) -> None:
    sim.start(world="office")
    odometry = sim.collect("Base/Drive/State", msgs.Odometry)
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    drive = sim.add(DriveCommand(bus, 0.5, 0.0, start=1.0, until=3.5))
    sim.resume()
    drive.wait()
    states = odometry.until(drive.finished_at)
    # not moving before the first command (written at 1.0 s); moving from the base's next step on
    assert states[0].stamp == 0.0
    assert all((o.x, o.y, o.theta, o.v) == (0.0, 0.0, 0.0, 0.0) for o in states if o.stamp <= 1.0)
    moving = next(o for o in states if o.x > 0.0)
    assert moving.stamp == pytest.approx(1.0 + BASE_PERIOD, abs=1e-9)
    # every step of the base is there, in order
    stamps = [o.stamp for o in states]
    assert stamps == pytest.approx([k * BASE_PERIOD for k in range(len(states))], abs=1e-9)
    t0 = 1.0  # the step that carried out the command began at the state of 1.0 s
    end = next(o for o in states if o.stamp >= t0 + 2.0 - 1e-9)
    ramp_loss = 0.5**2 / (2 * 1.0)  # reaching 0.5 m/s at 1 m/s² costs v²/2a of distance (a step's worth more)
    assert end.x == pytest.approx(0.5 * 2.0 - ramp_loss, abs=0.5 * BASE_PERIOD)
    assert end.v == pytest.approx(0.5, abs=1e-9)
    assert end.y == pytest.approx(0.0, abs=1e-9) and end.theta == pytest.approx(0.0, abs=1e-9)
    # Sim/Truth is the odometry composed with the start pose (ideal profile), stamp by stamp, at every step
    truths = {t.stamp: t for t in truth.until(drive.finished_at)}
    assert sorted(truths) == stamps
    for o in states:
        t = truths[o.stamp]
        assert compose(OFFICE_START, (o.x, o.y, o.theta)) == pytest.approx((t.x, t.y, t.theta), abs=1e-9)
        assert (o.v, o.omega) == pytest.approx((t.v, t.omega), abs=1e-9)
    assert truths[end.stamp].x == pytest.approx(OFFICE_START[0] + end.x)
    assert drive.commands == 25  # one at every step of the script from 1.0 s to 3.4 s: none late, none lost


# -- laser and wrist ------------------------------------------------------------------------------------------------


def test_laser_and_wrist_in_a_room(bus: Bus, sim: Lockstep, room: Path) -> None:
    sim.start(world=str(room))
    scans = sim.collect("Sick/Scan_mm", msgs.LaserScan)
    old_scans = sim.collect("Sick/Scan", msgs.LaserScan)
    timings = sim.collect("Sick/Timing", msgs.ScanTiming)
    wrist_states = sim.collect("Wrist/State", msgs.ActuatorState)
    command = bus.create_publisher("Wrist/Command", msgs.ActuatorState)
    wrist = bus.create_reader("Wrist/State", msgs.ActuatorState)
    scan = bus.create_reader("Sick/Scan_mm", msgs.LaserScan)
    target = [math.pi / 2, 0.0]
    times: dict[str, float] = {}

    def at_target(state: msgs.ActuatorState | None) -> bool:
        return state is not None and state.position == pytest.approx(target, abs=1e-9) and state.velocity == [0, 0]

    def pan_the_laser(now: float) -> Generator[None, float, None]:
        while now < 1.0:  # a few scans looking ahead
            now = yield
        # pan the laser a quarter turn to the left, wait until the wrist is there and a scan taken after that
        command.write(msgs.ActuatorState(position=target, velocity=[2.0, 2.0], force=[6.0, 6.0]))
        times["command"] = now
        while not at_target(state := wrist.read()):
            now = yield
        assert state is not None
        times["arrived"] = state.stamp
        while (last := scan.read()) is None or last.stamp <= state.stamp:
            now = yield

    script = sim.add(Script(bus, run=pan_the_laser, rate_hz=50.0))
    sim.resume()
    script.wait()
    end = script.finished_at
    assert end is not None

    first = scans.values[0]
    assert len(first.ranges) == 361 and len(first.angles) == 361
    assert first.count == 361
    assert first.max_range == 80.0
    # the laser sits 0.25 m ahead of the robot at (5, 5): the wall x = 10 is 4.75 m ahead
    assert first.ranges[180] == pytest.approx(4.75, abs=0.01)
    assert first.ranges[0] == pytest.approx(5.0, abs=0.01)  # right: the wall y = 0
    assert first.ranges[360] == pytest.approx(5.0, abs=0.01)  # left: the wall y = 10
    # stamped at the centre of the sweep, 200 ms before it arrived; a scan every 200 ms (give or take the scanner's
    # step: its schedule adds up periods, and a sum an ulp late waits for the next step)
    assert all(s.arrival - s.stamp == pytest.approx(0.2, abs=1e-9) for s in scans.until(end))
    gaps = [b.arrival - a.arrival for a, b in itertools.pairwise(scans.until(end))]
    assert gaps and all(0.2 - 0.02 - 1e-9 <= gap <= 0.2 + 0.02 + 1e-9 for gap in gaps), gaps

    old = old_scans.values[0]
    assert len(old.ranges) == 181 and old.count == 181
    assert old.stamp == old.arrival == first.arrival  # the same sweep, stamped when it arrived
    assert old.angles[0] == pytest.approx(-math.pi / 2) and old.angles[90] == pytest.approx(0.0)
    assert old.ranges == first.ranges[::2]
    assert timings.values[0].count == 361 and timings.values[0].stamp == first.stamp

    # the wrist turned from the command on, and the scans looked ahead until it did
    moved = [w for w in wrist_states.until(end) if w.position[0] > 0.0]
    assert moved and moved[0].stamp > times["command"]
    assert times["arrived"] - times["command"] < 1.5  # π/2 at 2 rad/s, accelerating at 6 rad/s²
    for s in scans.until(end):
        if s.stamp <= times["command"]:
            assert s.ranges[180] == pytest.approx(4.75, abs=0.01)
    # a scan taken after the wrist arrived looks at the wall y = 10 from (5.25, 5)
    after = next(s for s in scans.values if s.stamp > times["arrived"])
    assert after.ranges[180] == pytest.approx(5.0, abs=0.01)
    assert after.ranges[0] == pytest.approx(4.75, abs=0.01)  # right is now the wall x = 10
    assert after.ranges[360] == pytest.approx(5.25, abs=0.01)  # left is the wall x = 0


def test_fault_injection_on_the_bus(bus: Bus, sim: Lockstep, room: Path) -> None:
    sim.start(world=str(room))
    scans = sim.collect("Sick/Scan_mm", msgs.LaserScan)
    timings = sim.collect("Sick/Timing", msgs.ScanTiming)
    fault: dict[str, float] = {}

    def break_the_scanner(now: float) -> Generator[None, float, None]:
        while now <= 1.0:
            now = yield
        # at 1.025 s, a tick at which no device steps (they step every 20 ms): the fault is in place for the next
        fault["at"] = now
        fault["until"] = bus.call("sick/fault", {"duration": 1.0}, float, timeout=5)
        while now < fault["until"] + 0.5:
            now = yield

    script = sim.add(Script(bus, run=break_the_scanner, rate_hz=40.0))
    sim.resume()
    script.wait()
    assert fault["at"] == pytest.approx(1.025, abs=1e-9)
    assert fault["until"] == pytest.approx(fault["at"] + 1.0, abs=1e-9)
    all_scans = scans.until(script.finished_at or 0.0)
    assert all_scans[-1].stamp >= fault["until"]
    # Every scan that arrived after the fault and was taken before the scanner rebooted is broken (all ranges -1,
    # no valid point, in Sick/Timing too); every other one is good.
    broken = []
    for scan in all_scans:
        if scan.arrival > fault["at"] and scan.stamp < fault["until"]:
            assert scan.count == 0 and len(scan.ranges) == 361 and set(scan.ranges) == {-1.0}, scan.stamp
            broken.append(scan.stamp)
        else:
            assert scan.count == 361 and scan.ranges[180] == pytest.approx(4.75, abs=0.01), scan.stamp
    assert len(broken) == 6  # the scans taken in the second after the fault, and the one in its sweep then
    assert [t.stamp for t in timings.values if t.count == 0] == broken


# -- time -------------------------------------------------------------------------------------------------------------


def test_the_free_running_simulator_runs_at_its_rate_and_the_devices_follow_its_time(bus: Bus, room: Path) -> None:
    """The free-running simulator (not in lock-step) says its rate on its Clock, and its time goes on; how closely
    it follows the wall clock ``rate`` times faster is measured by bench/sim_rtf.py (the free-running row)."""
    profile = with_params(load_profile("sim"), "sim", world=str(room), rate=RATE)
    supervisor = Supervisor(bus, profile, Config(), one_process=True)
    try:
        supervisor.start()
        clock = bus.create_reader("Clock", msgs.SimTime)
        first = clock.wait_for_update(timeout=10)
        assert first.rate == RATE and not first.lockstep
        assert clock.wait_for_update(timeout=5).stamp > first.stamp
        # the devices follow the simulated time
        odometry = bus.create_reader("Base/Drive/State", msgs.Odometry)
        while odometry.wait_for_update(timeout=10).stamp <= first.stamp + 5.0:
            pass
    finally:
        supervisor.shutdown()


def test_lockstep_runs_as_fast_as_the_modules_go(bus: Bus, sim: Lockstep, room: Path) -> None:
    sim.start(world=str(room))
    clock = sim.collect("Clock", msgs.SimTime)
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    drive = sim.add(DriveCommand(bus, 0.3, 0.2, until=10.0))
    sim.resume()
    drive.wait()  # as fast as the modules go: how fast is bench/sim_rtf.py's (the lock-step rows)
    # time moves in the steps the modules need: every period of the devices, none skipped
    truths = truth.until(10.0)
    assert [t.stamp for t in truths] == pytest.approx([BASE_PERIOD * k for k in range(BASE_STEPS)], abs=1e-9)
    # Clock (for the modules that do not take part) says so, at least every 50 ms of simulated time
    ticks = [c for c in clock.snapshot() if 0.0 < c.stamp <= 10.0]
    assert ticks and all(c.lockstep and c.rate == 0.0 for c in ticks)
    assert all(0.0 < b.stamp - a.stamp <= 0.05 + BASE_PERIOD + 1e-9 for a, b in itertools.pairwise(ticks))
    assert drive.commands == 99  # 0.1 s to 9.9 s


# -- repeatability --------------------------------------------------------------------------------------------------


def arc_run(bus: Bus, world: Path, seed: int, seconds: float, one_process: bool = True) -> dict[str, list[Any]]:
    """The ``sim`` profile (realistic noise) in lock-step, a script driving an arc for ``seconds`` (steering on the
    odometry's heading, so what it reads matters too); returns the values of Sim/Truth and Base/Drive/State."""
    with Lockstep(bus) as sim:
        sim.start(
            without(load_profile("sim"), "localization"),
            world=str(world),
            seed=seed,
            noise="realistic",
            one_process=one_process,
        )
        truth = sim.collect("Sim/Truth", msgs.Odometry)
        odometry = sim.collect("Base/Drive/State", msgs.Odometry)

        def steer(now: float) -> None:
            if now >= seconds:
                script.finish()
                return
            heading = state.read()
            error = 0.3 * now - (heading.theta if heading is not None else 0.0)
            command.write(msgs.ActuatorState(velocity=[0.5, 0.3 + error]))

        script = Script(bus, steer, rate_hz=10.0)
        command = script.publisher("Base/Drive/Command", msgs.ActuatorState)  # gone with the script
        state = script.reader("Base/Drive/State", msgs.Odometry)
        sim.add(script)
        sim.resume()
        script.wait()
        assert script.finished_at == pytest.approx(seconds)
        return {"truth": truth.until(seconds), "odometry": odometry.until(seconds)}


def test_a_seed_gives_the_same_run_every_time(bus: Bus, room: Path) -> None:
    first = arc_run(bus, room, seed=7, seconds=10.0)
    again = arc_run(bus, room, seed=7, seconds=10.0)
    other = arc_run(bus, room, seed=8, seconds=10.0)
    assert len(first["truth"]) == len(first["odometry"]) == BASE_STEPS  # every step of the base
    assert first["truth"][-1].stamp == pytest.approx(10.0)
    assert math.hypot(first["truth"][-1].x - 5.0, first["truth"][-1].y - 5.0) > 2.0  # it drove
    assert again == first  # the same values, exactly
    assert other["odometry"] != first["odometry"]  # other noise
    assert other["truth"] != first["truth"]  # steered on other odometry


def test_the_same_run_in_separate_processes(bus: Bus, room: Path) -> None:
    """Each module in a process of its own (the script in the test's process) gives the one-process run."""
    seconds = 5.0
    together = arc_run(bus, room, seed=7, seconds=seconds)
    apart = arc_run(bus, room, seed=7, seconds=seconds, one_process=False)

    def every_half_second(values: list[msgs.Odometry]) -> list[msgs.Odometry]:
        return [v for v in values if abs(v.stamp * 2.0 - round(v.stamp * 2.0)) < 1e-6]

    samples = every_half_second(together["truth"])
    assert len(samples) == 2 * int(seconds) + 1
    assert every_half_second(apart["truth"]) == samples  # stamps and values
    assert apart == together  # and every other value too


# -- the commands ---------------------------------------------------------------------------------------------------


def run_pluto(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pluto", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
    )


def test_sim_with_a_bad_map_fails_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.xml"
    bad.write_text(BAD_MAP)
    result = run_pluto(["sim", "--world", str(bad)], tmp_path, timeout=60)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert str(bad) in line
    assert f"{bad}:4:" in line
    assert "missing attribute 'x2'" in line
