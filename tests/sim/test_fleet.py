"""Several robots in one simulated world (:mod:`pluto.sim.fleet`): one process, one lock-step, each robot under its own
name, their bodies meeting: a robot that drives into another stops against it, and the collision is counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import bus_config
from pluto.errors import ConfigError, LaunchError
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, parse_profile, with_params, with_robots
from pluto.sim.fleet import Fleet
from pluto.sim.world import MapError
from tests.scenarios.fleet_stack import FleetLockstep
from tests.scenarios.stack import DriveCommand, without

pytestmark = pytest.mark.scenario

HALL = """<?xml version="1.0" encoding="UTF-8"?>
<world name="hall" version="1">
  <robots>
    <robot name="{a}" x="5" y="5" theta="0"/>
    <robot x="9" y="5" theta="3.1416"/>
  </robots>
  <walls>
    <wall x1="0" y1="0" x2="20" y2="0"/>
    <wall x1="20" y1="0" x2="20" y2="10"/>
    <wall x1="20" y1="10" x2="0" y2="10"/>
    <wall x1="0" y1="10" x2="0" y2="0"/>
  </walls>
</world>
"""


@pytest.fixture
def stack() -> Iterator[FleetLockstep]:
    with FleetLockstep() as running:
        yield running


def test_a_robot_driving_into_another_stops_against_it_and_both_count_the_collision(
    tmp_path: Path, stack: FleetLockstep
) -> None:
    """Robot b, 4 m from robot a and facing it, drives at 0.5 m/s for 10 s: it stops with its body touching a's (its
    centre 0.8 m from a's), its front bumper pressed; each base counts one collision and says so in its MOM notes,
    and a's laser sees b in front of it. One process, one clock: the time is each robot's."""
    prefix = bus_config().robot
    a, b = f"{prefix}-a", f"{prefix}-2"
    world = tmp_path / "hall.xml"
    world.write_text(HALL.format(a=a))
    fleet = stack.start(without(load_profile("sim"), "dmu", "gps", "localization"), 2, world=str(world))
    assert fleet.names == [a, b]
    drive = stack.add(DriveCommand(stack.bus(b), 0.5, 0.0, until=10.0))
    truth = stack.collect(b, "Sim/Truth", msgs.Odometry)
    contact = stack.collect(b, "Base/Contact", msgs.Contact)
    scans = stack.collect(a, "Sick/Scan_mm", msgs.LaserScan)
    assert stack.members() >= {f"{a}/base", f"{a}/sick", f"{b}/base", f"{b}/sick"}
    stack.resume()
    drive.wait()
    assert drive.finished_at is not None
    end = truth.until(drive.finished_at)[-1]
    assert end.x == pytest.approx(5.8, abs=0.02) and end.y == pytest.approx(5.0, abs=1e-3)
    last_contact = contact.until(drive.finished_at)[-1]
    assert last_contact.front and last_contact.stall and not last_contact.rear
    bases = {robot: next(m for m in fleet.modules[robot] if m.module_name == "base") for robot in (a, b)}
    for robot, other in ((a, b), (b, a)):
        base = bases[robot]
        assert base.contacts.count == 1, robot  # type: ignore[attr-defined]
        assert any(note.startswith(f"collisions with other robots: 1 (last with {other} at") for note in base.notes())
    scan = scans.until(drive.finished_at)[-1]
    ahead = scan.ranges[len(scan.ranges) // 2]
    assert ahead == pytest.approx(5.8 - 0.4 - 5.25, abs=0.06)  # b's near side, from a's laser 0.25 m ahead of it


def test_a_fleet_needs_a_simulated_world_with_enough_robots(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="has no sim module"):
        Fleet(load_profile("heartbeat"), Config(), robots=2)
    with pytest.raises(ConfigError, match="has no sim module: several robots need a simulated world"):
        with_robots(load_profile("heartbeat"), 2)
    with pytest.raises(MapError, match="places 4 in its <robots>, and 6 robots were asked for"):
        Fleet(with_params(load_profile("sim"), "sim", world="office"), Config(), robots=6)
    assert load_profile("fleet").robots == 3 and with_robots(load_profile("sim"), 2).robots == 2
    for bad in (0, 101, "3", True):
        with pytest.raises(ConfigError, match="robots must be a whole number from 1 to 100"):
            parse_profile("p", {"robots": bad, "modules": {"sim": {}}}, "p.toml")
    with pytest.raises(ConfigError, match="robots = 2 needs the sim module"):
        parse_profile("p", {"robots": 2, "modules": {"heartbeat": {}}}, "p.toml")
