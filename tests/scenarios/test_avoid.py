"""The avoid module on the simulated robot (realistic noise, faster than real time, one process): goto around a box,
stuck in a dead end, wall following, and a person crossing the robot's path.

The stack is the ``sim`` profile (world, base, wrist, laser, inertial unit, GPS) plus localization (given the world's
start pose, so goals are in world coordinates), drive and avoid, all on the simulated clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.runtime.config import Config
from pluto.runtime.module import Module
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from pluto.sim.world import WORLDS_DIR
from tests.scenarios.stack import Collector

RATE = 8.0


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
    """The running stack and the things a test watches."""

    supervisor: Supervisor
    modules: list[Module]
    truth: Collector
    status: Collector
    command: Callable[[int, list[float], list[float], list[float]], None]

    @property
    def avoid(self) -> AvoidModule:
        module = self.modules[-1]
        assert isinstance(module, AvoidModule)
        return module


def start_stack(
    bus: Bus,
    tmp_path: Path,
    world_text: str,
    start: tuple[float, float, float],
    seed: int = 3,
    rate: float = RATE,
    **avoid_params: float,
) -> Stack:
    """Start sim + localization (at ``start``, world frame) + drive + avoid in this process."""
    world = tmp_path / "world.xml"
    world.write_text(world_text)
    start_file = tmp_path / "start.toml"
    start_file.write_text(f"x = {start[0]}\ny = {start[1]}\ntheta = {start[2]}\n")
    profile = load_profile("sim")
    profile = type(profile)(
        **{**profile.__dict__, "entries": tuple(e for e in profile.entries if e.name != "localization")}
    )
    profile = with_params(profile, "sim", world=str(world), rate=rate, noise="realistic", seed=seed)
    supervisor = Supervisor(bus, profile, Config(), one_process=True)
    supervisor.start()
    modules: list[Module] = [
        LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True, start_pose_file=str(start_file))),
        DriveModule(bus, DriveModuleParams(use_sim_time=True)),
        AvoidModule(bus, AvoidModuleParams(use_sim_time=True, **avoid_params)),  # type: ignore[arg-type]
    ]
    for module in modules:
        module.start()
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    status = Collector(bus, "avoidance/status", msgs.FVectorState)
    writer = bus.create_publisher("avoidance/command", msgs.ActuatorState)

    def command(flags: int, position: list[float], velocity: list[float], force: list[float]) -> None:
        writer.write(msgs.ActuatorState(cmd_flags=flags, position=position, velocity=velocity, force=force))

    bus.create_reader("Localization/Pose", msgs.PoseEstimate).wait_for_update(timeout=20)
    status.wait_for(lambda s: True, timeout=20)
    return Stack(supervisor, modules, truth, status, command)


@pytest.fixture
def stacks() -> Iterator[list[Stack]]:
    started: list[Stack] = []
    yield started
    for stack in started:
        for module in reversed(stack.modules):
            module.stop()
        stack.supervisor.shutdown()


def test_goto_around_a_box_in_the_office(bus: Bus, tmp_path: Path, stacks: list[Stack]) -> None:
    stack = start_stack(bus, tmp_path, office_with_box(), (10.0, 10.0, math.pi))
    stacks.append(stack)
    goal = (2.0, 10.0)
    stack.command(22, list(goal), [0.6, 1.0], [1.0])  # laser avoidance (see the module docstring)
    done = stack.status.wait_for(
        lambda s: isinstance(s, msgs.FVectorState) and len(s.element) > 1 and s.element[1] in (1, 2), timeout=120
    )
    assert isinstance(done, msgs.FVectorState)
    assert done.element[1] == 1, done
    end = stack.truth.snapshot()[-1]
    # the goal is reached in the Localization/Pose frame: dead reckoning only (no pose module), realistic noise,
    # so the truth may be off by the drift
    assert math.hypot(end.x - goal[0], end.y - goal[1]) < 1.0
    # it went around the box (never through it) and touched nothing
    for t in stack.truth.snapshot():
        assert math.hypot(max(5.8 - t.x, 0, t.x - 6.4), max(9.7 - t.y, 0, t.y - 10.3)) > 0.39


def test_goto_into_a_dead_end_with_sonar_is_stuck(bus: Bus, tmp_path: Path, stacks: list[Stack]) -> None:
    stack = start_stack(bus, tmp_path, DEAD_END, (2.0, 3.5, 0.0))
    stacks.append(stack)
    stack.command(12, [14.0, 3.5], [0.6, 1.0], [1.0])
    done = stack.status.wait_for(
        lambda s: isinstance(s, msgs.FVectorState) and len(s.element) > 1 and s.element[1] in (1, 2), timeout=120
    )
    assert isinstance(done, msgs.FVectorState) and done.element[1] == 2, done
    truths = stack.truth.snapshot()
    assert max(t.x for t in truths) > 7.0  # it did drive in
    assert max(t.x for t in truths) < 10.0 - 0.4 - 0.02  # without touching the end wall
    assert all(2.0 + 0.4 < t.y < 5.0 - 0.4 for t in truths)


def test_wall_following_holds_the_distance(bus: Bus, tmp_path: Path, stacks: list[Stack]) -> None:
    stack = start_stack(bus, tmp_path, LONG_WALL, (0.0, 9.0, 0.0))
    stacks.append(stack)
    stack.command(23, [1.0], [0.5], [])
    stack.truth.wait_for(lambda t: isinstance(t, msgs.Odometry) and t.x > 14.0, timeout=120)
    along = [t for t in stack.truth.snapshot() if 3.0 < t.x < 13.0]
    distances = [10.0 - t.y for t in along]
    assert len(along) > 50
    assert max(abs(d - 1.0) for d in distances) < 0.10, (min(distances), max(distances))
    stack.command(-1, [], [], [])
    stack.status.wait_for(lambda s: isinstance(s, msgs.FVectorState) and s.element[1] == -10, timeout=20)
    assert not stack.avoid.active
    assert stack.avoid.start_activity() and not stack.avoid.start_activity()  # starting twice is harmless


def test_a_person_crossing_slows_and_stops_the_robot(bus: Bus, tmp_path: Path, stacks: list[Stack]) -> None:
    stack = start_stack(bus, tmp_path, CROSSING, (2.0, 5.0, 0.0))
    stacks.append(stack)
    clock = bus.create_reader("Clock", msgs.SimTime)
    while clock.wait_for_update(timeout=10).stamp < 5.0:  # the walker is then 1.25 m along, far from the path
        pass
    stack.command(20, [], [0.4, 0.0], [])
    slowed = stack.status.wait_for(
        lambda s: isinstance(s, msgs.FVectorState) and s.element[0] == 6 and 0.0 < s.data[0] < 0.35, timeout=60
    )
    assert isinstance(slowed, msgs.FVectorState)
    stopped = stack.status.wait_for(
        lambda s: (
            isinstance(s, msgs.FVectorState) and s.stamp > slowed.stamp and s.element[0] == 6 and s.data[0] == 0.0
        ),
        timeout=60,
    )
    assert isinstance(stopped, msgs.FVectorState)
    stack.truth.wait_for(lambda t: isinstance(t, msgs.Odometry) and t.x > 9.0, timeout=60)
    resumed = stack.status.snapshot()[-1]
    assert resumed.element[0] == 0 and resumed.data[0] == pytest.approx(0.4)
    truths = stack.truth.snapshot()
    stopped_at = next(t for t in truths if t.stamp >= stopped.stamp)
    assert stopped_at.x < 8.0 - 0.25 - 0.4  # it stopped short of the walker


def test_proxy_and_command_line(bus: Bus, capsys: pytest.CaptureFixture[str]) -> None:
    """The proxy and ``pluto avoid`` against an avoid module alone on the bus (no pose: a goto keeps running)."""
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
        assert command.cmd_flags == 0
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
        avoid_cmd.add_command(parser.add_subparsers(), [])
        assert avoid_cmd.run(parser.parse_args(["avoid", "velocity", "0.2", "0.1", "--avoid", "1"])) == 0
        command = drive_commands.wait_for_update(timeout=10)
        while command.cmd_flags != 10:
            command = drive_commands.wait_for_update(timeout=10)
        assert command.velocity == [0.2, 0.1]
        assert avoid_cmd.run(parser.parse_args(["avoid", "wall"])) == 0
        assert avoid_cmd.run(parser.parse_args(["avoid", "status"])) == 0
        assert "m/s" in capsys.readouterr().out
        avoid.close()
    finally:
        module.stop()
