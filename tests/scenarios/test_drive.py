"""The drive module on the simulated robot (the ``sim`` profile in this process, basic noise, in lock-step):
heading hold, sonar protection, bumpers and the command timeout.

The test's commands come from a script that takes part in the lock-step, written at every step of the drive (20 Hz
of simulated time): none is ever late, so every outcome is exact, and the same on every run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.geometry import wrap_angle
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.runtime.profiles import load_profile
from tests.scenarios.stack import Collector, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 3
DRIVE_PERIOD = 0.05  # s: the drive steps at 20 Hz
TIMEOUT = 4.0  # s: the drive's command timeout (its default)


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    with Lockstep(bus) as stack:
        yield stack


def start_drive(bus: Bus, sim: Lockstep, world: Path) -> DriveModule:
    """The ``sim`` profile (basic noise, no localization) and a drive module, the time held at 0."""
    sim.start(without(load_profile("sim"), "localization"), world=str(world), noise="basic", seed=SEED)
    drive: DriveModule = sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
    return drive


def code(status: msgs.FVectorState) -> int:
    return status.element[0]


def test_heading_regulator_reaches_and_holds_a_heading(bus: Bus, sim: Lockstep, room: Path) -> None:
    start_drive(bus, sim, room)
    odometry = sim.collect("Base/Drive/State", msgs.Odometry)
    found: dict[str, float] = {}

    def error(o: msgs.Odometry) -> float:
        return abs(wrap_angle(o.theta - found["target"]))

    def turn_and_hold(now: float) -> Generator[None, float, None]:
        first = state.read()
        assert first is not None
        found["target"] = target = first.theta + 2.0  # a left turn of about 115°, in the frame of the raw heading
        found["start"] = now

        def send() -> None:
            command.write(msgs.ActuatorState(cmd_flags=1, position=[0.0, target], velocity=[0.3, 0.0]))

        while (o := state.read()) is None or error(o) >= math.radians(2.0):
            send()
            now = yield
        found["reached"] = o.stamp
        while now < found["reached"] + 6.0:  # hold it for 6 s while driving along the line
            send()
            now = yield

    script = Script(bus, run=turn_and_hold, rate_hz=20.0)
    command = script.publisher("drive/command", msgs.ActuatorState)
    state = script.reader("Base/Drive/State", msgs.Odometry)
    sim.add(script)
    sim.resume()
    script.wait()
    assert found["reached"] - found["start"] < 3.0  # 2 rad at up to 1 rad/s, braked
    held = [o for o in odometry.until(script.finished_at or 0.0) if o.stamp >= found["reached"] + 1.0]
    assert held[-1].stamp >= found["reached"] + 5.9
    assert max(error(o) for o in held) < math.radians(1.0)
    assert all(o.v > 0.25 for o in held)  # it drives along the heading, not only turns


def test_sonar_protection_stops_before_a_wall_and_the_bumper_without_it(bus: Bus, sim: Lockstep, room: Path) -> None:
    start_drive(bus, sim, room)
    status = sim.collect("drive/status", msgs.FVectorState)
    contact = sim.collect("Base/Contact", msgs.Contact)
    times: dict[str, float] = {}

    def drive_to_the_wall(now: float) -> Generator[None, float, None]:
        # protected: the sonar stops it short of the wall; it stays stopped while asked to drive on for 5 s
        protected = msgs.ActuatorState(cmd_flags=10, velocity=[0.8, 0.0])
        while (s := drive_status.read()) is None or not (code(s) == 3 and s.data[0] == 0.0):
            command.write(protected)
            now = yield
        times["stopped"] = s.stamp
        while now < times["stopped"] + 5.0:
            command.write(protected)
            now = yield
        pose = truth.read()
        assert pose is not None
        times["x"] = pose.x
        times["unprotected"] = now
        # unprotected: on to the wall, where the bumper stops it
        unprotected = msgs.ActuatorState(cmd_flags=0, velocity=[0.3, 0.0])
        while (s := drive_status.read()) is None or not (code(s) == 1 and s.data == [0.0, 0.0]):
            command.write(unprotected)
            now = yield

    script = Script(bus, run=drive_to_the_wall, rate_hz=20.0)
    command = script.publisher("drive/command", msgs.ActuatorState)
    drive_status = script.reader("drive/status", msgs.FVectorState)
    truth = script.reader("Sim/Truth", msgs.Odometry)
    sim.add(script)
    sim.resume()
    script.wait()
    assert 10.0 - 0.4 - times["x"] > 0.2  # short of the wall (the robot's radius is 0.4 m)
    protected = [c for c in contact.values if c.stamp < times["unprotected"]]
    assert protected and not any(c.front for c in protected)
    # once stopped by the sonar it stays stopped by the sonar, every step (a command every step: never a timeout)
    held = [s for s in status.values if times["stopped"] <= s.stamp < times["unprotected"]]
    assert len(held) == round((times["unprotected"] - times["stopped"]) / DRIVE_PERIOD) >= 100
    assert all(code(s) == 3 and s.data[0] == 0.0 for s in held), [(s.stamp, code(s), s.data) for s in held]
    assert not any(code(s) == -1 for s in status.values)
    # without protection it drove on until the bumper stopped it
    assert any(c.front for c in contact.values if c.stamp >= times["unprotected"])


def test_commands_that_cease_time_out(bus: Bus, sim: Lockstep, room: Path) -> None:
    drive = start_drive(bus, sim, room)
    status = sim.collect("drive/status", msgs.FVectorState)
    times: dict[str, float] = {}

    def drive_then_fall_silent(now: float) -> Generator[None, float, None]:
        while (s := drive_status.read()) is None or s.data[0] <= 0.25:
            command.write(msgs.ActuatorState(cmd_flags=0, velocity=[0.3, 0.2]))
            times["last"] = now
            now = yield
        while (s := drive_status.read()) is None or not (code(s) == -1 and s.data == [0.0, 0.0]):
            now = yield

    script = Script(bus, run=drive_then_fall_silent, rate_hz=20.0)
    command = script.publisher("drive/command", msgs.ActuatorState)
    drive_status = script.reader("drive/status", msgs.FVectorState)
    sim.add(script)
    sim.resume()
    script.wait()
    # the drive took the last command at its step after the one it was written at; it times out at its first step
    # more than TIMEOUT later, and brakes from 0.3 m/s at its acceleration limit
    taken = times["last"] + DRIVE_PERIOD
    statuses = status.until(script.finished_at or 0.0)
    first_out = next(s for s in statuses if code(s) == -1)
    assert TIMEOUT < first_out.stamp - taken + 1e-9 <= TIMEOUT + DRIVE_PERIOD + 1e-9
    assert all(code(s) == 0 for s in statuses if 0.0 < s.stamp < first_out.stamp)
    after = [s for s in statuses if s.stamp >= first_out.stamp]
    assert all(code(s) == -1 for s in after)
    stopped = next(s for s in after if s.data == [0.0, 0.0])
    max_accel = drive.controller.params.max_accel
    assert stopped.stamp - first_out.stamp <= 0.3 / max_accel + DRIVE_PERIOD + 1e-9
    speeds = [s.data[0] for s in after if s.stamp <= stopped.stamp]
    assert all(b < a for a, b in itertools.pairwise(speeds))  # braking all the way

    # stopping the control step stops the base and says so
    drive.stop_activity()
    status.wait_for(lambda s: code(s) == -10 and s.data == [0.0, 0.0])


def test_proxy_and_command_line(bus: Bus, capsys: pytest.CaptureFixture[str]) -> None:
    """The proxy's methods and ``pluto drive`` write the documented commands (no base: the drive still runs)."""
    import argparse

    from pluto.cli import drive_cmd
    from pluto.movement.drive.proxy import DriveProxy

    drive = DriveModule(bus)
    drive.start()
    try:
        commands = Collector(bus, "drive/command", msgs.ActuatorState)
        with DriveProxy(bus, start=False, timeout=5.0) as proxy:
            assert isinstance(proxy, DriveProxy)
            proxy.set_velocity(0.3, 0.1)
            commands.wait_for(lambda c: c.cmd_flags == 10 and c.velocity == [0.3, 0.1])
            proxy.set_velocity(0.2, 0.0, protect=False)
            commands.wait_for(lambda c: c.cmd_flags == 0 and c.velocity == [0.2, 0.0])
            proxy.hold_heading(1.5, 0.4)
            commands.wait_for(lambda c: c.cmd_flags == 11 and c.position[1] == 1.5 and c.velocity[0] == 0.4)
            proxy.hold_heading(-1.0, 0.2, protect=False)
            commands.wait_for(lambda c: c.cmd_flags == 1 and c.position[1] == -1.0)
            proxy.stop()
            commands.wait_for(lambda c: c.cmd_flags == 0 and c.velocity == [0.0, 0.0] and len(commands.values) > 4)
            status = proxy.wait_status(timeout=5.0)
            assert len(status.data) == 2 and len(status.element) == 1
            with pytest.raises(ValueError):
                proxy.set_velocity(math.nan, 0.0)

        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        drive_cmd.register(sub)

        def sent(argv: list[str], status: int = 0) -> msgs.ActuatorState:
            """Run ``pluto drive ...`` and return the command it wrote (``status``: its exit status)."""
            before = len(commands.values)
            args = parser.parse_args(argv)
            assert args.func(args) == status
            commands.wait_for(lambda _c: len(commands.values) > before)
            value: msgs.ActuatorState = commands.values[before]
            return value

        # (no base: the robot cannot move, which the command says, with exit status 1)
        c = sent(["drive", "velocity", "0.3", "-0.2", "--no-protect"], status=1)
        assert c.cmd_flags == 0 and c.velocity == [0.3, -0.2]
        c = sent(["drive", "heading", "0.5", "0.25"], status=1)
        assert c.cmd_flags == 11 and c.position[1] == 0.5 and c.velocity[0] == 0.25
        assert "there is no odometry (Base/Drive/State)" in capsys.readouterr().out
        c = sent(["drive", "stop"])
        assert c.cmd_flags == 0 and c.velocity == [0.0, 0.0]
        args = parser.parse_args(["drive", "status"])
        assert args.func(args) == 0
        assert "status" in capsys.readouterr().out
    finally:
        drive.stop()
