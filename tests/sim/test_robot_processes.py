"""A fleet with a process per robot (:mod:`pluto.sim.robot_processes`): the command each robot's process runs, the
robots a process may run, the simulators of other processes, and a robot process that keeps dying.

The runs themselves (the same poses as in one process, a killed robot coming back) are scenario tests:
``tests/scenarios/test_robot_processes.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pluto.bus import Bus
from pluto.cli.main import build_parser
from pluto.errors import ConfigError, LaunchError
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, parse_overrides, with_params, with_robots
from pluto.sim import robot_processes
from pluto.sim.fleet import Fleet
from pluto.sim.module import SimModule, SimParams
from pluto.sim.robot_processes import MAX_RESTARTS, RobotProcesses
from pluto.sim.world import load_world
from tests.helpers import wait_until


def test_each_robot_process_runs_the_profile_for_its_robot_only_with_the_time_held_and_the_overrides(
    tmp_path: Path,
) -> None:
    world = tmp_path / 'a "world".xml'
    world.write_text(load_world("office").source.read_text())  # type: ignore[union-attr]
    overrides = {"sim": {"seed": 7, "world": str(world), "rate": "max", "noise_overrides": {"laser_range_std": 0.02}}}
    profile = with_robots(load_profile("mission", overrides), 3)
    processes = RobotProcesses(profile, Config(), overrides=overrides, startup_timeout=12.5)
    prefix = Config().bus.robot
    assert processes.names == [f"{prefix}-1", f"{prefix}-2", f"{prefix}-3"]
    cmd = processes.command(f"{prefix}-2")
    assert cmd[:6] == [sys.executable, "-m", "pluto", "up", "mission", "--robots"] and cmd[6] == "3"
    assert cmd[cmd.index("--only") + 1] == f"{prefix}-2"
    assert "--one-process" in cmd and "--paused" in cmd
    assert cmd[cmd.index("--timeout") + 1] == "12.5"
    settings = [cmd[i + 1] for i, word in enumerate(cmd) if word == "--set"]
    assert settings == [
        "sim.seed=7",
        f"sim.world={json.dumps(str(world))}",
        'sim.rate="max"',
        'sim.noise_overrides={"laser_range_std" = 0.02}',
    ]
    # what the process reads back is what this process runs
    args = build_parser().parse_args(cmd[3:])
    assert parse_overrides(args.set) == overrides
    assert processes.log_path(f"{prefix}-2").name == f"robot-{prefix}-2.log"


def test_a_process_runs_only_robots_of_the_simulation(tmp_path: Path) -> None:
    profile = with_params(load_profile("sim"), "sim", world="office")
    with pytest.raises(LaunchError, match="robot nobody is not one of the simulation's"):
        Fleet(profile, Config(), robots=2, only=["nobody"])
    prefix = Config().bus.robot
    fleet = Fleet(profile, Config(), robots=3, only=[f"{prefix}-3", f"{prefix}-2"])
    assert fleet.names == [f"{prefix}-2", f"{prefix}-3"]  # in the simulation's order
    assert not fleet.leads and fleet.leader is None
    assert Fleet(profile, Config(), robots=3, only=[f"{prefix}-1"]).leads


def test_a_simulator_follows_or_ticks_only_robots_of_its_simulation() -> None:
    fleet = load_world("office").fleet(2, "r")
    with Bus(msgspec.structs.replace(Config().bus, robot="r-1")) as bus:
        with pytest.raises(ConfigError, match="robot r-9 is not one of the simulation's"):
            SimModule(bus, SimParams(lockstep=True), fleet=fleet, remote=["r-9"])
        with pytest.raises(ConfigError, match="robot r-9 is not one of the simulation's"):
            SimModule(bus, SimParams(lockstep=True), fleet=fleet, leader="r-9")
        with pytest.raises(ConfigError, match="only the leading simulator ticks the robots of other processes"):
            SimModule(bus, SimParams(lockstep=True), fleet=fleet, leader="r-2", remote=["r-2"])


def test_only_is_for_a_profile_of_several_robots() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pluto", "up", "heartbeat", "--only", "x-2"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "--only names robots of a profile for several: heartbeat runs one (try --robots N)" in out.stderr


def test_a_robot_process_that_keeps_dying_is_given_up_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    started: list[dict[str, str]] = []

    def dying(cmd: Any, log_path: Path, *, with_parent: bool = False, env: Any = None) -> subprocess.Popen[bytes]:
        started.append(dict(env or {}))
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    monkeypatch.setattr(robot_processes, "spawn", dying)
    profile = with_robots(load_profile("sim"), 2)
    processes = RobotProcesses(profile, Config())
    robot = processes.robots[processes.names[1]]
    processes._spawn(robot)
    wait_until(lambda: robot.given_up, timeout=30.0, message="the robot is given up")
    assert len(started) == MAX_RESTARTS + 1
    assert [env[robot_processes.RESUME_ENV] for env in started] == ["0"] + ["1"] * MAX_RESTARTS
    assert len({env[robot_processes.SESSION_ENV] for env in started}) == 1  # one session: the restarts resume it
    assert processes.status()[robot.name] == "given up (crashed too often)"
    assert processes.status()[processes.names[0]] == "not running"
    assert f"the process of {robot.name} exited with status 3; starting it again" in caplog.text
    assert f"it ended {MAX_RESTARTS + 1} times within" in caplog.text
    processes.shutdown()
