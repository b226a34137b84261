"""The simulated robot as a whole: the ``sim`` profile on the bus (in one process), and the commands that run it.

Every wait is on an event (``wait_for_update``, a subscription, ``wait_until`` on what a subscription collected),
never a fixed sleep: the stack runs on simulated time, ``rate`` times faster than the wall clock.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.geometry import compose
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.helpers import wait_until
from tests.scenarios.stack import ROOM, Collector, Commander

RATE = 10.0
OFFICE_START = (10.0, 9.7, 0.0)

# Line 4 holds a wall without x2.
BAD_MAP = """<?xml version="1.0" encoding="UTF-8"?>
<world name="broken" version="1">
  <walls>
    <wall x1="0" y1="0" y2="5"/>
  </walls>
</world>
"""


@pytest.fixture
def room(tmp_path: Path) -> Path:
    path = tmp_path / "room.xml"
    path.write_text(ROOM)
    return path


@pytest.fixture
def sim_stack(bus: Bus) -> Iterator[Callable[..., Supervisor]]:
    """Start the ``sim`` profile in this process on the test's bus; shut it down after the test."""
    started: list[Supervisor] = []

    def start(world: str, rate: float = RATE) -> Supervisor:
        profile = with_params(load_profile("sim"), "sim", world=world, rate=rate)
        supervisor = Supervisor(bus, profile, Config(), one_process=True)
        started.append(supervisor)
        supervisor.start()
        return supervisor

    yield start
    for supervisor in started:
        supervisor.shutdown()


# -- driving --------------------------------------------------------------------------------------------------------


def test_driving_down_the_office_corridor(bus: Bus, sim_stack: Callable[..., Supervisor]) -> None:
    sim_stack("office")
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    state = bus.create_reader("Base/Drive/State", msgs.Odometry)
    first = state.wait_for_update(timeout=10)
    assert (first.x, first.y, first.theta) == (0.0, 0.0, 0.0)  # not moving before the first command
    with Commander(bus, 0.5, 0.0):
        moving = odometry.wait_for(lambda o: o.x > 0.0)  # the first step that carried out the command
        history = odometry.snapshot()
        t0 = history[history.index(moving) - 1].stamp  # that step began at the previous state
        end = odometry.wait_for(lambda o: o.stamp >= t0 + 2.0)
    elapsed = end.stamp - t0
    ramp_loss = 0.5**2 / (2 * 1.0)  # reaching 0.5 m/s at 1 m/s² costs v²/2a of distance
    assert end.x == pytest.approx(0.5 * elapsed - ramp_loss, abs=0.1)
    assert end.v == pytest.approx(0.5, abs=1e-6)
    assert end.y == pytest.approx(0.0, abs=1e-9) and end.theta == pytest.approx(0.0, abs=1e-9)
    # Sim/Truth is the odometry composed with the start pose (ideal profile), stamp by stamp
    truth.wait_for(lambda t: t.stamp >= end.stamp)  # its own subscription may lag behind the odometry's
    truths = {t.stamp: t for t in truth.snapshot()}
    matched = 0
    for o in odometry.snapshot():
        t = truths.get(o.stamp)
        if t is None:
            continue
        matched += 1
        assert compose(OFFICE_START, (o.x, o.y, o.theta)) == pytest.approx((t.x, t.y, t.theta), abs=1e-9)
        assert (o.v, o.omega) == pytest.approx((t.v, t.omega), abs=1e-9)
    assert matched > 10
    final = truths.get(end.stamp)
    assert final is not None and final.x == pytest.approx(OFFICE_START[0] + end.x)


# -- laser and wrist ------------------------------------------------------------------------------------------------


def test_laser_and_wrist_in_a_room(bus: Bus, sim_stack: Callable[..., Supervisor], room: Path) -> None:
    sim_stack(str(room))
    scans = bus.create_reader("Sick/Scan_mm", msgs.LaserScan)
    old_scans = bus.create_reader("Sick/Scan", msgs.LaserScan)
    timing = bus.create_reader("Sick/Timing", msgs.ScanTiming)

    scan = scans.wait_for_update(timeout=10)
    assert len(scan.ranges) == 361 and len(scan.angles) == 361
    assert scan.count == 361
    assert scan.max_range == 80.0
    # the laser sits 0.25 m ahead of the robot at (5, 5): the wall x = 10 is 4.75 m ahead
    assert scan.ranges[180] == pytest.approx(4.75, abs=0.01)
    assert scan.ranges[0] == pytest.approx(5.0, abs=0.01)  # right: the wall y = 0
    assert scan.ranges[360] == pytest.approx(5.0, abs=0.01)  # left: the wall y = 10
    # stamped at the centre of the sweep, about 200 ms before it arrived
    assert scan.arrival - scan.stamp == pytest.approx(0.2, abs=1e-6)

    old = old_scans.wait_for_update(timeout=10)
    assert len(old.ranges) == 181 and old.count == 181
    assert old.stamp == old.arrival
    assert old.angles[0] == pytest.approx(-math.pi / 2) and old.angles[90] == pytest.approx(0.0)
    assert old.ranges[90] == pytest.approx(4.75, abs=0.01)

    tick = timing.wait_for_update(timeout=10)
    assert tick.count == 361

    # Pan the laser a quarter turn to the left and wait until the wrist is there.
    command = bus.create_publisher("Wrist/Command", msgs.ActuatorState)
    wrist = bus.create_reader("Wrist/State", msgs.ActuatorState)
    command.write(msgs.ActuatorState(position=[math.pi / 2, 0.0], velocity=[2.0, 2.0], force=[6.0, 6.0]))
    deadline = time.monotonic() + 15
    while True:
        state = wrist.wait_for_update(timeout=5)
        if state.position == pytest.approx([math.pi / 2, 0.0], abs=1e-9) and state.velocity == [0.0, 0.0]:
            break
        assert time.monotonic() < deadline, f"the wrist did not reach the target: {state}"
    arrived = state.stamp
    # a scan taken after the wrist arrived looks at the wall y = 10 from (5.25, 5)
    while True:
        scan = scans.wait_for_update(timeout=5)
        if scan.stamp > arrived:
            break
    assert scan.ranges[180] == pytest.approx(5.0, abs=0.01)
    assert scan.ranges[0] == pytest.approx(4.75, abs=0.01)  # right is now the wall x = 10
    assert scan.ranges[360] == pytest.approx(5.25, abs=0.01)  # left is the wall x = 0


def test_fault_injection_on_the_bus(bus: Bus, sim_stack: Callable[..., Supervisor], room: Path) -> None:
    sim_stack(str(room))
    scans = Collector(bus, "Sick/Scan_mm", msgs.LaserScan)
    timings = Collector(bus, "Sick/Timing", msgs.ScanTiming)
    scans.wait_for(lambda s: s.count == 361, timeout=10)
    failed_until = bus.call("sick/fault", {"duration": 1.0}, float, timeout=5)
    broken = scans.wait_for(lambda s: s.count == 0)
    assert broken.stamp < failed_until
    assert len(broken.ranges) == 361 and set(broken.ranges) == {-1.0}
    timings.wait_for(lambda t: t.count == 0)
    # once the scanner has rebooted (1 simulated second later) the scans are good again
    good = scans.wait_for(lambda s: s.stamp >= failed_until)
    assert good.count == 361
    assert good.ranges[180] == pytest.approx(4.75, abs=0.01)
    for scan in scans.snapshot():
        if scan.stamp >= failed_until:
            assert scan.count == 361
        elif scan.stamp >= broken.stamp:
            assert scan.count == 0 and set(scan.ranges) == {-1.0}
    bad = [s for s in scans.snapshot() if s.count == 0]
    assert bad[-1].stamp - bad[0].stamp == pytest.approx(1.0, abs=0.5)


def test_simulated_time_runs_rate_times_faster(bus: Bus, sim_stack: Callable[..., Supervisor], room: Path) -> None:
    sim_stack(str(room), rate=RATE)
    clock = bus.create_reader("Clock", msgs.SimTime)
    first = clock.wait_for_update(timeout=10)
    wall0 = time.monotonic()
    assert first.rate == RATE
    while True:
        tick = clock.wait_for_update(timeout=5)
        wall = time.monotonic()
        if wall - wall0 >= 1.0:
            break
    factor = (tick.stamp - first.stamp) / (wall - wall0)
    assert 6.0 < factor < 14.0, factor
    # the devices follow the simulated time
    odometry = bus.create_reader("Base/Drive/State", msgs.Odometry)
    wait_until(
        lambda: (o := odometry.read()) is not None and o.stamp > first.stamp + 5.0,
        timeout=5,
        message="the base follows the simulated clock",
    )


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


# The slowest test of the suite (about 10-20 s): the whole demo mission, each module in its own process.
def test_demo_runs_the_mission_and_draws_it(tmp_path: Path) -> None:
    out = tmp_path / "pictures"
    result = run_pluto(["demo", "--rate", "3", "--output", str(out)], tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mission done" in result.stdout
    picture_lines = [line for line in result.stdout.splitlines() if line.strip().endswith(".png")]
    assert picture_lines, result.stdout
    picture = Path(picture_lines[-1].rsplit(": ", 1)[-1].strip())
    assert picture.is_file()
    assert picture.parent == out.resolve()
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
