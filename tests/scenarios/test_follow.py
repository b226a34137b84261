"""The follow module on the simulated robot (realistic noise, in lock-step, one process): following a person who
walks laps of a large hall at 0.6 m/s, keeping 1 m, and stopping for good when a person walking at 1.2 m/s (faster
than the robot may drive) gets away.

The stack is the ``sim`` profile plus localization (given the start pose), drive, avoid and follow, all in
lock-step with the simulator; the start command comes from a script in the lock-step, so every run of a test is the
same run. The distance kept is measured on the truth: the simulated base's true pose (``Sim/Truth``) against the
person's true position on the world's path at the same time (:meth:`pluto.sim.world.Mover.position`).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.movement.follow.core import FOLLOWING, LOST, SEARCHING
from pluto.movement.follow.module import FollowModule, FollowModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.runtime.profiles import load_profile
from pluto.sim.world import Mover, parse_world
from tests.scenarios.stack import Collector, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 5

ROBOT_RADIUS = 0.4
PERSON_RADIUS = 0.25


def hall(start: tuple[float, float, float], person: str) -> str:
    """A 24 m x 16 m hall with one person (``<person>`` element) and the robot at ``start``."""
    x, y, theta = start
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<world name="hall" version="1">
  <start x="{x}" y="{y}" theta="{theta}"/>
  <walls>
    <wall x1="0" y1="0" x2="24" y2="0" name="south"/>
    <wall x1="24" y1="0" x2="24" y2="16" name="east"/>
    <wall x1="24" y1="16" x2="0" y2="16" name="north"/>
    <wall x1="0" y1="16" x2="0" y2="0" name="west"/>
  </walls>
  <obstacles>
    <circle name="pillar" x="12" y="8" r="0.3"/>
  </obstacles>
  <movers>
    {person}
  </movers>
</world>
"""


@dataclass
class Stack:
    sim: Lockstep
    follow: FollowModule
    truth: Collector
    status: Collector
    contact: Collector
    script: Script
    command: StateWriter[msgs.ActuatorState]
    now_status: StateReader[msgs.FVectorState]

    def run(self, body: object) -> float:
        self.script.body = body  # type: ignore[assignment]
        self.sim.resume()
        self.script.wait()
        assert self.script.finished_at is not None
        return self.script.finished_at

    def code(self) -> int | None:
        s = self.now_status.read()
        return s.element[1] if s is not None and len(s.element) >= 2 else None


def start_stack(bus: Bus, sim: Lockstep, tmp_path: Path, world_text: str, start: tuple[float, float, float]) -> Stack:
    world = tmp_path / "world.xml"
    world.write_text(world_text)
    start_file = tmp_path / "start.toml"
    start_file.write_text(f"x = {start[0]}\ny = {start[1]}\ntheta = {start[2]}\n")
    sim.start(without(load_profile("sim"), "localization"), world=str(world), noise="realistic", seed=SEED)
    sim.add(LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True, start_pose_file=str(start_file))))
    sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
    sim.add(AvoidModule(bus, AvoidModuleParams(use_sim_time=True)))
    follow = sim.add(FollowModule(bus, FollowModuleParams(use_sim_time=True)))
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    status = sim.collect("follow/status", msgs.FVectorState)
    contact = sim.collect("Base/Contact", msgs.Contact)
    script = Script(bus, rate_hz=10.0)
    command = script.publisher("follow/command", msgs.ActuatorState)
    now_status = script.reader("follow/status", msgs.FVectorState)
    sim.add(script)
    return Stack(sim, follow, truth, status, contact, script, command, now_status)


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    with Lockstep(bus) as stack:
        yield stack


def person_of(world_text: str) -> Mover:
    return parse_world(world_text).movers[0]


def test_follows_a_walking_person_at_one_metre(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    """Laps of a rectangle at 0.6 m/s (the robot's corners cut inside the person's): after 8 s of settling the true
    distance stays within 1.0 ± 0.3 m for 60 s, and the robot never touches anything."""
    person = (
        '<person name="walker" radius="0.25" speed="0.6" loop="true">'
        '<waypoint x="6" y="4"/><waypoint x="18" y="4"/><waypoint x="18" y="12"/><waypoint x="6" y="12"/></person>'
    )
    start = (4.5, 4.0, 0.0)  # 1.5 m behind the person, facing the way they walk
    text = hall(start, person)
    stack = start_stack(bus, sim, tmp_path, text, start)
    walker = person_of(text)
    begin: dict[str, float] = {}

    def go(now: float) -> Generator[None, float, None]:
        stack.command.write(msgs.ActuatorState(cmd_flags=1, velocity=[1.0]))
        begin["t"] = now
        while now - begin["t"] < 60.0:
            now = yield

    end = stack.run(go)
    t0 = begin["t"]
    truths = [t for t in stack.truth.until(end) if t.stamp >= t0]
    distances = [(t.stamp - t0, math.dist((t.x, t.y), walker.position(t.stamp))) for t in truths]
    settled = [d for s, d in distances if s >= 8.0]
    assert len(settled) > 900  # 52 s at 20 Hz
    assert min(settled) >= 0.7 and max(settled) <= 1.3, (min(settled), max(settled))
    assert min(d for _, d in distances) > ROBOT_RADIUS + PERSON_RADIUS + 0.05
    assert not any(c.front or c.rear for c in stack.contact.until(end))
    codes = [s.element[1] for s in stack.status.until(end) if s.stamp >= t0]
    assert SEARCHING in codes and FOLLOWING in codes and codes.index(SEARCHING) < codes.index(FOLLOWING)
    assert LOST not in codes
    # it really went round: three corners of the lap
    assert max(t.y for t in truths) > 10.0 and min(t.x for t in truths[-100:]) < 17.0
    mean = sum(settled) / len(settled)
    print(f"true distance after 8 s: min {min(settled):.2f} m, mean {mean:.2f} m, max {max(settled):.2f} m")


def test_a_person_who_gets_away_is_lost_and_the_robot_stays_stopped(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    """A person at 1.2 m/s walks away from a robot limited to 0.9 m/s: beyond 4 m the person no longer counts as
    seen, 2 s later the status says lost and the robot stops; it stays stopped until started again, even when the
    person comes back and walks past 3 m in front of it."""
    person = (
        '<person name="runner" radius="0.25" speed="1.2" loop="true">'
        '<waypoint x="4" y="8"/><waypoint x="16" y="8"/><waypoint x="16" y="11"/><waypoint x="4" y="11"/></person>'
    )
    start = (2.5, 8.0, 0.0)
    text = hall(start, person).replace('<circle name="pillar" x="12" y="8" r="0.3"/>', "")
    stack = start_stack(bus, sim, tmp_path, text, start)
    marks: dict[str, float] = {}

    def go(now: float) -> Generator[None, float, None]:
        stack.command.write(msgs.ActuatorState(cmd_flags=1))
        marks["start"] = now
        while stack.code() != LOST and now - marks["start"] < 40.0:
            now = yield
        marks["lost"] = now
        while now < 24.0:  # the person walks back past the robot (x 16 -> 4 at y = 11) from 12.5 s to 22.5 s
            now = yield

    end = stack.run(go)
    assert end - marks["start"] < 40.0, "the person was never lost"
    codes = [s.element[1] for s in stack.status.until(end)]
    assert FOLLOWING in codes and LOST in codes
    lost = marks["lost"]
    truths = stack.truth.until(end)
    at_loss = [t for t in truths if t.stamp <= lost][-1]
    runner = person_of(text)
    assert math.dist((at_loss.x, at_loss.y), runner.position(lost)) > 4.0
    assert at_loss.x > 5.0  # it did follow for a while
    # stopped within a second and a half (braking from 0.9 m/s), then still for the rest of the run
    later = [t for t in truths if t.stamp >= lost + 1.5]
    assert later and all(abs(t.v) < 0.02 for t in later), max(abs(t.v) for t in later)
    assert math.dist((later[0].x, later[0].y), (later[-1].x, later[-1].y)) < 0.02
    assert all(s.element[1] == LOST for s in stack.status.until(end) if s.stamp >= lost)
