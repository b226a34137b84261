"""The avoid module on the simulated robot (basic noise, in lock-step, one process): goto around a box, stuck in
a dead end, wall following, and a person crossing the robot's path.

The stack is the ``sim`` profile (world, base, wrist, laser, inertial unit, GPS) plus localization (given the world's
start pose, so goals are in world coordinates), drive and avoid, all in lock-step with the simulator. The test's
commands come from a script that takes part in the lock-step, so every run of a test is the same run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.runtime.profiles import load_profile
from pluto.sim.world import WORLDS_DIR
from tests.scenarios.stack import Collector, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 3
DONE = (1, 2, 3)
"""element[1] of avoidance/status once a goto is over: reached its goal (1), stuck (2), or stopped at it by a pose too
uncertain to tell (3, dead reckoning alone far from the start)."""


def office_with_box() -> str:
    """The office, the robot in the corridor facing west (into the lobby), a box in the lobby, no visitor."""
    text = (WORLDS_DIR / "office.xml").read_text()
    text = re.sub(r"<start [^>]*/>", '<start x="10" y="10" theta="3.14159"/>', text)
    text = re.sub(r"<movers>.*</movers>", "", text, flags=re.S)
    box = (
        '<polygon name="box"><point x="5.8" y="9.7"/> <point x="6.4" y="9.7"/> <point x="6.4" y="10.3"/>'
        ' <point x="5.8" y="10.3"/></polygon>'
    )
    return text.replace("<obstacles>", "<obstacles>\n    " + box)


DEAD_END = """<?xml version="1.0" encoding="UTF-8"?>
<world name="dead-end" version="1">
  <start x="2" y="3.5" theta="0"/>
  <walls>
    <wall x1="0" y1="2" x2="10" y2="2"/>
    <wall x1="0" y1="5" x2="10" y2="5"/>
    <wall x1="10" y1="2" x2="10" y2="5" name="end"/>
    <wall x1="0" y1="2" x2="0" y2="5"/>
  </walls>
</world>
"""

LONG_WALL = """<?xml version="1.0" encoding="UTF-8"?>
<world name="long-wall" version="1">
  <start x="0" y="9.0" theta="0"/>
  <walls>
    <wall x1="-3" y1="10" x2="30" y2="10" name="wall"/>
  </walls>
</world>
"""

CROSSING = """<?xml version="1.0" encoding="UTF-8"?>
<world name="crossing" version="1">
  <start x="2" y="5" theta="0"/>
  <walls>
    <wall x1="0" y1="0" x2="20" y2="0"/>
    <wall x1="20" y1="0" x2="20" y2="10"/>
    <wall x1="20" y1="10" x2="0" y2="10"/>
    <wall x1="0" y1="10" x2="0" y2="0"/>
  </walls>
  <movers>
    <person name="walker" radius="0.25" speed="0.25" loop="false">
      <waypoint x="8" y="9.5"/> <waypoint x="8" y="0.5"/>
    </person>
  </movers>
</world>
"""


@dataclass
class Stack:
    """The running stack (time held), what the test watches, and the script that commands avoid."""

    sim: Lockstep
    avoid: AvoidModule
    truth: Collector
    status: Collector
    script: Script
    command: StateWriter[msgs.ActuatorState]
    """avoidance/command, for the script's steps."""
    now_status: StateReader[msgs.FVectorState]
    """avoidance/status, for the script's steps."""
    now_truth: StateReader[msgs.Odometry]
    """Sim/Truth, for the script's steps."""

    def run(self, body: Callable[[float], Generator[None, float, None]]) -> float:
        """Let the time run with ``body`` as the script until it returns; return the simulated time it did (s)."""
        self.script.body = body
        self.sim.resume()
        self.script.wait()
        assert self.script.finished_at is not None
        return self.script.finished_at

    def send(self, flags: int, position: list[float], velocity: list[float], force: list[float]) -> None:
        """Write a command to avoid (from a step of the script)."""
        self.command.write(msgs.ActuatorState(cmd_flags=flags, position=position, velocity=velocity, force=force))

    def done(self) -> msgs.FVectorState | None:
        """The newest status if it says the goto is over (reached or stuck), else None."""
        s = self.now_status.read()
        return s if s is not None and len(s.element) > 1 and s.element[1] in DONE else None


def start_stack(
    bus: Bus, sim: Lockstep, tmp_path: Path, world_text: str, start: tuple[float, float, float], **avoid_params: float
) -> Stack:
    """Start sim + localization (at ``start``, world frame) + drive + avoid in this process, and a script (10 Hz)
    to command avoid, the time held at 0."""
    world = tmp_path / "world.xml"
    world.write_text(world_text)
    start_file = tmp_path / "start.toml"
    start_file.write_text(f"x = {start[0]}\ny = {start[1]}\ntheta = {start[2]}\n")
    sim.start(without(load_profile("sim"), "localization"), world=str(world), noise="basic", seed=SEED)
    sim.add(LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True, start_pose_file=str(start_file))))
    sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
    avoid = sim.add(AvoidModule(bus, AvoidModuleParams(use_sim_time=True, **avoid_params)))  # type: ignore[arg-type]
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    status = sim.collect("avoidance/status", msgs.FVectorState)
    script = Script(bus, rate_hz=10.0)
    command = script.publisher("avoidance/command", msgs.ActuatorState)
    now_status = script.reader("avoidance/status", msgs.FVectorState)
    now_truth = script.reader("Sim/Truth", msgs.Odometry)
    sim.add(script)
    return Stack(sim, avoid, truth, status, script, command, now_status, now_truth)


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    with Lockstep(bus) as stack:
        yield stack


def test_goto_around_a_box_in_the_office(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    stack = start_stack(bus, sim, tmp_path, office_with_box(), (10.0, 10.0, math.pi))
    goal = (2.0, 10.0)
    done: list[msgs.FVectorState] = []

    def go(now: float) -> Generator[None, float, None]:
        stack.send(22, list(goal), [0.6, 1.0], [1.0])  # laser avoidance (see the module docstring)
        while (s := stack.done()) is None:
            yield
        done.append(s)

    end_time = stack.run(go)
    assert done[0].element[1] == 1, done
    truths = stack.truth.until(end_time)
    end = truths[-1]
    # the goal is reached in the Localization/Pose frame: dead reckoning only (no pose module), basic noise,
    # so the truth may be off by the drift
    assert math.hypot(end.x - goal[0], end.y - goal[1]) < 1.0
    # it went around the box (never through it) and touched nothing
    for t in truths:
        assert math.hypot(max(5.8 - t.x, 0, t.x - 6.4), max(9.7 - t.y, 0, t.y - 10.3)) > 0.39


def test_goto_into_a_dead_end_with_sonar_is_stuck(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    stack = start_stack(bus, sim, tmp_path, DEAD_END, (2.0, 3.5, 0.0))
    done: list[msgs.FVectorState] = []

    def go(now: float) -> Generator[None, float, None]:
        stack.send(12, [14.0, 3.5], [0.6, 1.0], [1.0])
        while (s := stack.done()) is None:
            yield
        done.append(s)

    end_time = stack.run(go)
    assert done[0].element[1] == 2, done
    truths = stack.truth.until(end_time)
    assert max(t.x for t in truths) > 7.0  # it did drive in
    assert max(t.x for t in truths) < 10.0 - 0.4 - 0.02  # without touching the end wall
    assert all(2.0 + 0.4 < t.y < 5.0 - 0.4 for t in truths)


def test_wall_following_holds_the_distance(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    stack = start_stack(bus, sim, tmp_path, LONG_WALL, (0.0, 9.0, 0.0))
    times: dict[str, float] = {}

    def follow(now: float) -> Generator[None, float, None]:
        stack.send(23, [1.0], [0.5], [])
        while (t := stack.now_truth.read()) is None or t.x <= 14.0:
            now = yield
        times["released"] = now
        stack.send(-1, [], [], [])
        while (s := stack.now_status.read()) is None or s.element[1] != -10:
            now = yield

    end_time = stack.run(follow)
    along = [t for t in stack.truth.until(times["released"]) if 3.0 < t.x < 13.0]
    distances = [10.0 - t.y for t in along]
    assert len(along) > 50
    assert max(abs(d - 1.0) for d in distances) < 0.10, (min(distances), max(distances))
    # released: the robot stops, and avoid's control step with it
    assert end_time - times["released"] < 0.5
    assert not stack.avoid.active
    assert stack.avoid.start_activity() and not stack.avoid.start_activity()  # starting twice is harmless


def test_a_person_crossing_slows_and_stops_the_robot(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    stack = start_stack(bus, sim, tmp_path, CROSSING, (2.0, 5.0, 0.0))
    seen: dict[str, msgs.FVectorState] = {}

    def cross(now: float) -> Generator[None, float, None]:
        while now < 5.0:  # the walker is then 1.25 m along, far from the path
            now = yield
        stack.send(20, [], [0.4, 0.0], [])
        while (s := stack.now_status.read()) is None or not (s.element[0] == 6 and 0.0 < s.data[0] < 0.35):
            now = yield
        seen["slowed"] = s
        while (s := stack.now_status.read()) is None or not (s.element[0] == 6 and s.data[0] == 0.0):
            now = yield
        seen["stopped"] = s
        while (t := stack.now_truth.read()) is None or t.x <= 9.0:
            now = yield
        s = stack.now_status.read()
        assert s is not None
        seen["resumed"] = s

    stack.run(cross)
    assert seen["slowed"].stamp < seen["stopped"].stamp
    resumed = seen["resumed"]
    assert resumed.element[0] == 0 and resumed.data[0] == pytest.approx(0.4)
    stopped_at = next(t for t in stack.truth.values if t.stamp >= seen["stopped"].stamp)
    assert stopped_at.x < 8.0 - 0.25 - 0.4  # it stopped short of the walker


def test_proxy_and_command_line(bus: Bus, capsys: pytest.CaptureFixture[str]) -> None:
    """The proxy and ``pluto avoid`` against an avoid module alone on the bus (no pose: a goto is held, running)."""
    import argparse

    from pluto.cli import avoid_cmd
    from pluto.movement.avoid.proxy import AvoidProxy, describe_status

    module = AvoidModule(bus, AvoidModuleParams(rate_hz=50.0))
    module.start()
    try:
        avoid = AvoidProxy(bus, start=False, timeout=10)
        drive_commands = bus.create_reader("drive/command", msgs.ActuatorState)
        avoid.goto(3.0, 1.0, 0.4, 0.8, 2.0, avoidance=2)
        command = drive_commands.wait_for_update(timeout=10)
        assert command.cmd_flags == 2  # no pose and no scan: the goto is held, the drive told to halt
        assert module.command_in_force is not None and module.command_in_force.force == (2.0,)
        status = avoid.wait_status(timeout=10)
        while status.element[1] != -1:
            status = avoid.wait_status(timeout=10)
        assert "goto running" in describe_status(status)
        with pytest.raises(ValueError):
            avoid.goto(math.nan, 0.0)
        with pytest.raises(ValueError):
            avoid.set_velocity(0.1, 0.0, avoidance=5)
        avoid.release()
        while status.element[1] != -10:
            status = avoid.wait_status(timeout=10)
        assert not module.active and "stopped" in describe_status(status)
        assert avoid.start_activity() and avoid.start_activity()  # twice is harmless
        assert module.active and module.command_in_force is None

        parser = argparse.ArgumentParser()
        avoid_cmd.register(parser.add_subparsers())
        # (no drive: the robot cannot move, which the command says, with exit status 1)
        assert avoid_cmd.run(parser.parse_args(["avoid", "velocity", "0.2", "0.1", "--avoid", "1"])) == 1
        assert "the drive wrote no status" in capsys.readouterr().out
        command = drive_commands.wait_for_update(timeout=10)
        while command.cmd_flags != 10:
            command = drive_commands.wait_for_update(timeout=10)
        assert command.velocity == [0.2, 0.1]
        assert avoid_cmd.run(parser.parse_args(["avoid", "wall"])) == 1
        assert avoid_cmd.run(parser.parse_args(["avoid", "status"])) == 0
        assert "m/s" in capsys.readouterr().out
        avoid.close()
    finally:
        module.stop()
