"""``pluto.cli.common``: the bus of a command from its arguments, the environment and the file, without touching
``os.environ``; and the processes a command starts join the same bus."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pluto.bus import Bus, BusConfig, bus_config
from pluto.cli.common import (
    CommandConfig,
    add_bus_arguments,
    bus_config_from_args,
    config_from_args,
    open_bus,
)
from pluto.cli.main import build_parser, main
from pluto.errors import ConfigError
from pluto.runtime import launcher
from tests.helpers import wait_until


@pytest.fixture(autouse=True)
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty working directory (no ./pluto.toml) for the commands."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "pluto.toml"
    path.write_text('[bus]\nrobot = "from-file"\nconnect = ["tcp/10.0.0.1:7447"]\nlisten = ["tcp/127.0.0.1:0"]\n')
    return path


def other_robot() -> str:
    return f"other-{uuid.uuid4().hex[:8]}"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bus_arguments(parser)
    return parser.parse_args(argv)


# -- precedence ---------------------------------------------------------------------------------------------------


def test_arguments_override_the_environment_which_overrides_the_file(config_file: Path) -> None:
    file_only = bus_config_from_args(parse("--config", str(config_file)), env={})
    assert (file_only.robot, file_only.connect) == ("from-file", ["tcp/10.0.0.1:7447"])

    env = {"PLUTO_ROBOT": "from-env", "PLUTO_CONNECT": "tcp/10.0.0.2:7447"}
    from_env = bus_config_from_args(parse("--config", str(config_file)), env=env)
    assert (from_env.robot, from_env.connect) == ("from-env", ["tcp/10.0.0.2:7447"])

    from_args = bus_config_from_args(parse("--config", str(config_file), "--robot", "from-args"), env=env)
    assert (from_args.robot, from_args.connect) == ("from-args", ["tcp/10.0.0.2:7447"])


def test_the_file_comes_from_the_option_or_pluto_config(config_file: Path, tmp_path: Path) -> None:
    assert bus_config_from_args(parse(), env={"PLUTO_CONFIG": str(config_file)}).robot == "from-file"
    other = tmp_path / "other.toml"
    other.write_text('[bus]\nrobot = "from-option"\n')
    assert bus_config_from_args(parse("--config", str(other)), env={"PLUTO_CONFIG": str(config_file)}).robot == (
        "from-option"
    )
    assert bus_config_from_args(parse(), env={}).robot == "pluto"  # no file at all: the defaults


def test_without_an_environment_given_os_environ_is_read(
    monkeypatch: pytest.MonkeyPatch, config_file: Path, bus_env: dict[str, str]
) -> None:
    assert bus_config_from_args(parse()).robot == bus_env["PLUTO_ROBOT"]
    monkeypatch.setenv("PLUTO_CONFIG", str(config_file))
    monkeypatch.delenv("PLUTO_ROBOT")
    assert bus_config_from_args(parse()).connect == ["tcp/10.0.0.1:7447"]
    assert bus_config_from_args(parse()).robot == "from-file"


def test_options_missing_from_the_namespace_count_as_not_given(config_file: Path) -> None:
    assert bus_config_from_args(argparse.Namespace(), env={"PLUTO_CONFIG": str(config_file)}).robot == "from-file"
    empty = argparse.Namespace(robot="", config=None)
    assert bus_config_from_args(empty, env={"PLUTO_ROBOT": "from-env"}).robot == "from-env"


def test_the_config_goes_where_a_config_goes(config_file: Path) -> None:
    """Modules run in the process, and a supervisor's, read the bus settings from the Config they are given."""
    config_file.write_text(config_file.read_text() + "\n[modules.heartbeat]\nrate_hz = 5.0\n")
    config = config_from_args(parse("--config", str(config_file), "--robot", "from-args"), env={})
    assert isinstance(config, CommandConfig)
    assert config.path == config_file
    assert config.bus.robot == "from-args"
    assert config.module_table("heartbeat") == {"rate_hz": 5.0}


def test_a_bad_robot_name_says_where_it_came_from(config_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"^configuration: bus\.robot 'a b'"):
        bus_config_from_args(parse("--robot", "a b"), env={})
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(config_file))}: bus\.robot 'x/y'"):
        bus_config_from_args(parse("--config", str(config_file), "--robot", "x/y"), env={})
    config_file.write_text('bus = "not a table"\n')
    with pytest.raises(ConfigError, match=r"\[bus\] must be a table"):
        bus_config_from_args(parse("--config", str(config_file)), env={})


# -- the environment is left alone ----------------------------------------------------------------------------


def environment() -> dict[str, str]:
    """``os.environ`` but ``ZENOH_RUNTIME``, which the first bus of a process sets if the user has not (the sizes of
    Zenoh's thread pools, see :meth:`pluto.bus.Bus._open`): a setting of the process, not of a command."""
    return {name: value for name, value in os.environ.items() if name != "ZENOH_RUNTIME"}


def test_building_the_config_and_opening_the_bus_leave_the_environment_alone(config_file: Path) -> None:
    before = dict(os.environ)
    robot = other_robot()
    args = parse("--config", str(config_file), "--robot", robot)
    assert config_from_args(args).bus.robot == robot
    assert bus_config_from_args(args, env={"PLUTO_ROBOT": "from-env"}).robot == robot
    assert dict(os.environ) == before
    before = environment()
    with open_bus(parse("--robot", robot)) as bus:
        assert bus.robot == robot
    assert environment() == before


def test_a_command_works_on_the_robot_of_its_arguments_and_leaves_the_environment_alone(
    capsys: pytest.CaptureFixture[str], bus_env: dict[str, str]
) -> None:
    before = environment()
    robot = other_robot()
    assert main(["--robot", robot, "list"]) == 0
    assert f"robot {robot}: no interface has a value" in capsys.readouterr().out
    assert main(["mom", "--robot", robot]) == 0
    assert f"robot {robot}" in capsys.readouterr().out
    assert environment() == before
    assert main(["list"]) == 0  # and the next command is back on the environment's robot
    assert f"robot {bus_env['PLUTO_ROBOT']}: no interface" in capsys.readouterr().out


def test_every_command_takes_the_bus_options() -> None:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in commands.choices.items():
        options = {o for action in command._actions for o in action.option_strings}
        assert {"--config", "--robot", "-v"} <= options, name


# -- processes started by a command join its bus --------------------------------------------------------------


def test_the_bus_environment_gives_a_child_the_same_bus() -> None:
    for cfg in (
        BusConfig(robot="r1", rendezvous="tcp/127.0.0.1:7999"),
        BusConfig(robot="r2", connect=["tcp/10.0.0.1:7447", "tcp/10.0.0.2:7447"], multicast=True),
        BusConfig(robot="r3", rendezvous=""),
        BusConfig(robot="r4", connect=["tcp/10.0.0.1:7447"], mode="peer"),
    ):
        child = bus_config({}, launcher.bus_environment(cfg))
        assert (child.robot, child.connect, child.rendezvous, child.multicast, child.zenoh_mode) == (
            cfg.robot,
            cfg.connect,
            cfg.rendezvous,
            cfg.multicast,
            cfg.zenoh_mode,
        )
    assert bus_config({}, launcher.bus_environment(BusConfig(mode="router"))).zenoh_mode == "peer"


def test_spawn_sets_the_variables_given_over_its_own(tmp_path: Path, bus_env: dict[str, str]) -> None:
    log = tmp_path / "child.log"
    code = "import os; print(os.environ['PLUTO_ROBOT'], os.environ['PLUTO_RUNTIME_DIR'])"
    process = launcher.spawn([sys.executable, "-c", code], log, env={"PLUTO_ROBOT": "given"})
    assert process.wait(timeout=30) == 0
    marker, *output = log.read_text().splitlines()  # the run's marker line, then the command's own output
    assert marker.startswith(launcher.SECTION_MARK)
    assert " ".join(output).split() == ["given", bus_env["PLUTO_RUNTIME_DIR"]]
    assert os.environ["PLUTO_ROBOT"] == bus_env["PLUTO_ROBOT"]


def test_pluto_start_with_robot_starts_the_daemon_on_that_robot(bus_env: dict[str, str]) -> None:
    robot = other_robot()
    result = run_pluto("start", "heartbeat", "--robot", robot)
    assert result.returncode == 0, result.stderr
    try:
        with Bus(BusConfig(robot=robot, rendezvous=bus_env["PLUTO_RENDEZVOUS"])) as bus:
            bus.wait_for_module("heartbeat", timeout=15.0)
        with Bus() as own:  # the environment's robot has none
            assert "heartbeat" not in own.live_modules(timeout=0.5)
    finally:
        stopped = run_pluto("stop", "heartbeat", "--robot", robot)
    assert stopped.returncode == 0, stopped.stderr


def test_pluto_up_with_robot_starts_its_module_processes_on_that_robot(bus_env: dict[str, str]) -> None:
    """The supervisor in the foreground, its modules in processes of their own: they learn the robot from it."""
    robot = other_robot()
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "--robot", robot, "up", "heartbeat"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("profile heartbeat is up: heartbeat, heartbeat-monitor"), first + (
            process.stderr.read() if process.poll() is not None and process.stderr else ""
        )
        with Bus(BusConfig(robot=robot, rendezvous=bus_env["PLUTO_RENDEZVOUS"])) as bus:
            wait_until(lambda: set(bus.live_modules()) == {"heartbeat", "heartbeat-monitor"}, timeout=5.0)
            pids = {name: launcher.read_pid(launcher.runtime_dir(robot) / f"{name}.pid") for name in bus.live_modules()}
        assert all(pid not in (None, process.pid) for pid in pids.values()), pids  # processes of their own
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "profile heartbeat is down" in out


def run_pluto(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pluto", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
