"""The `pluto` command: help, one-line errors without tracebacks, and the daemon/profile/inspection commands.

Commands that start or stop processes run as real subprocesses (`python -m pluto ...`) in the test's environment
(its own robot, rendezvous and runtime directory), from an empty working directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import build_parser, main
from pluto.runtime import launcher
from tests.conftest import free_tcp_port
from tests.helpers import wait_until


@pytest.fixture(autouse=True)
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty working directory (no ./pluto.toml, no ./profiles) for the commands."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def pluto(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `python -m pluto ARGS` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "pluto", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The command failed with one clear line on stderr (no traceback); return that line."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("pluto "), line
    for needle in needles:
        assert needle in line, line
    return line


def runtime_folder(bus_env: dict[str, str]) -> Path:
    return Path(bus_env["PLUTO_RUNTIME_DIR"]) / bus_env["PLUTO_ROBOT"]


# -- help -------------------------------------------------------------------------------------------------------


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of `pluto`, by name."""
    [action] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


# Commands that need arguments: their help shows an example command line.
WITH_EXAMPLE = ("run", "start", "stop", "up", "echo", "hz", "router")


def test_help_describes_pluto_and_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Getting started" in out
    assert "pluto up sim" in out
    commands = subcommands()
    assert set(WITH_EXAMPLE) | {"demo", "down", "mom", "list", "modules", "profiles"} <= set(commands)
    for command in commands:  # an old name is listed after its command's: "sick-emulate (sick-sim)"
        listed = rf"^\s+({command}( \([^)]*\))?|\S+ \(([^)]*, )?{command}(, [^)]*)?\))\s+\w"
        assert re.search(listed, out, re.M), f"{command} is not listed with its help"


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_each_command_has_help_with_an_example_or_description(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {subcommands()[command].prog}")  # an old name shows its command's usage
    assert subcommands()[command].prog.startswith("pluto ")
    description = subcommands()[command].description or ""
    assert len(description) >= 15, f"{command} has no real description"
    assert description.splitlines()[0] in out
    if command in WITH_EXAMPLE:
        assert f"example: pluto {command} " in out


def test_help_runs_as_a_command() -> None:
    result = pluto("--help")
    assert result.returncode == 0
    assert "Getting started" in result.stdout
    result = pluto("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("pluto ")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "usage: pluto" in capsys.readouterr().err


# -- listing commands (no process handling: in this process) --------------------------------------------------


def test_modules_profiles_and_known_interfaces(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["modules"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^heartbeat\s+writes a counter", out, re.M)
    assert re.search(r"^heartbeat-monitor\s+measures", out, re.M)
    assert main(["profiles"]) == 0
    assert re.search(r"^heartbeat\s+A heartbeat and its monitor", capsys.readouterr().out, re.M)
    assert main(["list", "--all"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^Heartbeat\s+Heartbeat\s", out, re.M)
    assert re.search(r"^Base/Drive/State\s+Odometry\s", out, re.M)


def test_down_with_nothing_running(capsys: pytest.CaptureFixture[str], bus_env: dict[str, str]) -> None:
    assert main(["down"]) == 0
    assert f"nothing is running for robot {bus_env['PLUTO_ROBOT']}" in capsys.readouterr().out


# -- errors: one line, no traceback ---------------------------------------------------------------------------


def test_unknown_module() -> None:
    assert_one_line_error(pluto("run", "nope"), "pluto run:", "nope", "pluto modules")


def test_unknown_module_close_to_a_real_one() -> None:
    assert_one_line_error(pluto("start", "heartbaet"), "did you mean heartbeat")


def test_unknown_profile() -> None:
    assert_one_line_error(pluto("up", "nope"), "pluto up:", "no profile named 'nope'")


def test_missing_config_file() -> None:
    assert_one_line_error(
        pluto("--config", "/nonexistent/pluto.toml", "mom"), "/nonexistent/pluto.toml", "does not exist"
    )


def test_missing_config_file_named_after_the_command() -> None:
    assert_one_line_error(pluto("mom", "--config", "/nonexistent/pluto.toml"), "/nonexistent/pluto.toml")


def test_missing_config_file_from_the_environment() -> None:
    assert_one_line_error(pluto("mom", env={"PLUTO_CONFIG": "/nonexistent/env.toml"}), "/nonexistent/env.toml")


def test_invalid_toml_config(workdir: Path) -> None:
    path = workdir / "bad.toml"
    path.write_text('[bus]\nrobot = "x"\nconnect = ]\n')
    line = assert_one_line_error(pluto("--config", str(path), "mom"), str(path), "not valid TOML")
    assert "line" in line


def test_invalid_pluto_toml_in_the_working_directory(workdir: Path) -> None:
    (workdir / "pluto.toml").write_text("[bus\n")
    assert_one_line_error(pluto("list"), "pluto.toml", "not valid TOML")


def test_bad_parameter_value() -> None:
    assert_one_line_error(pluto("run", "heartbeat", "-p", "rate_hz=abc"), "pluto run:", "rate_hz")


def test_unknown_parameter_to_run() -> None:
    assert_one_line_error(pluto("run", "heartbeat", "-p", "rate=2"), "unknown field `rate`", "rate_hz")


def test_unknown_parameter_to_start_fails_before_starting_anything(bus_env: dict[str, str]) -> None:
    assert_one_line_error(pluto("start", "heartbeat", "-p", "rate=2"), "pluto start:", "unknown field `rate`")
    assert list(runtime_folder(bus_env).glob("*.pid")) == []
    assert list(runtime_folder(bus_env).glob("*.log")) == []


def test_parameter_without_a_value() -> None:
    assert_one_line_error(pluto("run", "heartbeat", "-p", "rate_hz"), "name=value")


def test_down_of_a_profile_that_is_not_up() -> None:
    assert_one_line_error(pluto("down", "heartbeat"), "pluto down:", "profile heartbeat is not up")


def test_stop_of_a_module_that_is_not_running() -> None:
    assert_one_line_error(pluto("stop", "heartbeat"), "pluto stop:", "not running")


def test_echo_of_an_unknown_interface() -> None:
    assert_one_line_error(pluto("echo", "No/Such/Thing"), "--type")


def test_router_on_a_port_in_use() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = pluto("router", "--listen", f"tcp/127.0.0.1:{port}")
    assert_one_line_error(result, "pluto router:", f"tcp/127.0.0.1:{port}", "port in use")


def test_missing_router_is_one_clear_line() -> None:
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    result = pluto("mom", env={"PLUTO_CONNECT": endpoint})
    assert_one_line_error(result, "pluto mom:", endpoint, "pluto router")


def test_a_router_connects_the_commands(bus_env: dict[str, str]) -> None:
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    router = subprocess.Popen(
        [sys.executable, "-m", "pluto", "router", "--listen", endpoint],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert router.stdout is not None
        first = router.stdout.readline()  # printed once it listens
        assert first.startswith(f"router listening on {endpoint}"), first + (
            router.stderr.read() if router.poll() is not None else ""
        )
        env = {"PLUTO_CONNECT": endpoint}
        started = pluto("start", "heartbeat", env=env)
        assert started.returncode == 0, started.stderr
        # (`pluto mom` through the router is covered by tests/runtime/test_mom.py: its first query may miss.)
        echoed = pluto("echo", "Heartbeat", "-n", "1", env=env)
        assert echoed.returncode == 0, echoed.stderr
        assert json.loads(echoed.stdout.splitlines()[0])["source"] == "heartbeat"
        assert pluto("stop", "heartbeat", env=env).returncode == 0
    finally:
        router.send_signal(signal.SIGINT)
        try:
            code = router.wait(timeout=10)
        except subprocess.TimeoutExpired:
            router.kill()
            router.wait()
            raise
    assert code == 0
    assert "Traceback" not in (router.stderr.read() if router.stderr else "")


# -- daemons and inspection -----------------------------------------------------------------------------------


def test_start_inspect_and_stop_a_daemon(bus_env: dict[str, str]) -> None:
    robot = bus_env["PLUTO_ROBOT"]
    result = pluto("start", "heartbeat")
    assert result.returncode == 0, result.stderr
    match = re.search(r"started heartbeat \(pid (\d+)\); log: (\S+)", result.stdout)
    assert match, result.stdout
    pid = int(match.group(1))
    assert Path(match.group(2)) == runtime_folder(bus_env) / "heartbeat.log"
    assert (runtime_folder(bus_env) / "heartbeat.pid").read_text().strip() == str(pid)

    shown = pluto("mom")
    assert shown.returncode == 0, shown.stderr
    assert f"robot {robot}: 1 module" in shown.stdout
    assert re.search(rf"^heartbeat\s+{pid}\s+yes\s+Heartbeat\s+Heartbeat\s+\d+\.\d Hz", shown.stdout, re.M), (
        shown.stdout
    )

    listed = pluto("list")
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^Heartbeat\s+Heartbeat\s+\d+\.\d s ago", listed.stdout, re.M), listed.stdout

    echoed = pluto("echo", "Heartbeat", "-n", "2")
    assert echoed.returncode == 0, echoed.stderr
    values = [json.loads(line) for line in echoed.stdout.splitlines()]
    assert len(values) >= 2  # exactly 2: see test_echo_count_prints_exactly_that_many_values
    assert all(v["type"] == "Heartbeat" and v["source"] == "heartbeat" for v in values)
    assert values[1]["seq"] > values[0]["seq"]

    rates = pluto("hz", "Heartbeat", "-n", "2")
    assert rates.returncode == 0, rates.stderr
    lines = rates.stdout.splitlines()
    assert len(lines) == 2, rates.stdout
    found = [float(m.group(1)) for line in lines if (m := re.search(r"average rate (\d+\.\d+) Hz", line))]
    assert found, rates.stdout
    assert all(5.0 < rate < 15.0 for rate in found), found  # heartbeat's default is 10 Hz

    stopped = pluto("stop", "heartbeat")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped heartbeat (pid {pid})" in stopped.stdout
    assert not (runtime_folder(bus_env) / "heartbeat.pid").exists()
    assert "no modules running" in pluto("mom").stdout

    down = pluto("down")
    assert down.returncode == 0, down.stderr
    assert f"nothing is running for robot {robot}" in down.stdout


def test_echo_count_prints_exactly_that_many_values(bus: Bus) -> None:
    launcher.start_daemon(bus, "heartbeat", params={"rate_hz": 100.0}, timeout=15)
    for count in (1, 3):
        echoed = pluto("echo", "Heartbeat", "-n", str(count))
        assert echoed.returncode == 0, echoed.stderr
        seqs = [json.loads(line)["seq"] for line in echoed.stdout.splitlines()]
        assert len(seqs) == count, f"echo -n {count} printed {len(seqs)} values: {seqs}"


def test_echo_new_waits_for_a_new_value_only(bus: Bus) -> None:
    writer = bus.create_publisher("Heartbeat", msgs.Heartbeat)
    writer.write(msgs.Heartbeat(seq=1, source="old"))
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "echo", "Heartbeat", "-n", "1", "--new"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        # Keep writing until the command has seen a new value and exited.
        seq = 1

        def exited() -> bool:
            nonlocal seq
            seq += 1
            writer.write(msgs.Heartbeat(seq=seq, source="new"))
            return process.poll() is not None

        wait_until(exited, timeout=15.0, interval=0.1)
        out, err = process.communicate(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    [line] = out.splitlines()
    assert json.loads(line)["source"] == "new"


def test_run_in_the_foreground_stops_cleanly_on_ctrl_c(bus: Bus) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        bus.wait_for_module("heartbeat", timeout=15.0)

        def rate() -> float:
            info = bus.call("mom/heartbeat", reply_type=msgs.ModuleInfo)
            return info.provides[0].rate_hz if info.provides else 0.0

        wait_until(lambda: rate() > 0, timeout=5.0)
        assert 12.0 < rate() < 30.0  # -p rate_hz=20 applied
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert "heartbeat started" in err  # `run` logs to the terminal
    assert "heartbeat stopped" in err
    wait_until(lambda: "heartbeat" not in bus.live_modules(), timeout=2.0)


def test_up_detach_then_down_stops_everything(bus_env: dict[str, str]) -> None:
    folder = runtime_folder(bus_env)
    up = pluto("up", "heartbeat", "--detach")
    assert up.returncode == 0, up.stderr
    assert "profile heartbeat is up" in up.stdout
    # what it waited for, module by module, on stderr
    assert (
        "[1/2] starting heartbeat, waiting until it publishes (up to 20 s, or 600 s while it says it is starting) ...\n"
        in up.stderr
    )
    assert "[2/2] starting heartbeat-monitor, waiting" in up.stderr
    pid_files = {p.stem: int(p.read_text()) for p in folder.glob("*.pid")}
    assert set(pid_files) == {"profile-heartbeat", "heartbeat", "heartbeat-monitor"}
    shown = pluto("mom")
    assert "heartbeat-monitor" in shown.stdout
    assert "Heartbeat/Monitor" in shown.stdout

    down = pluto("down")
    assert down.returncode == 0, down.stderr
    assert "profile heartbeat is down" in down.stdout
    assert list(folder.glob("*.pid")) == []
    for name, pid in pid_files.items():
        assert not launcher.pid_alive(pid), f"{name} (pid {pid}) still runs after `pluto down`"
    assert "no modules running" in pluto("mom").stdout


def test_up_in_the_foreground_until_ctrl_c(bus: Bus, bus_env: dict[str, str]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "up", "heartbeat", "--one-process"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("profile heartbeat is up: heartbeat, heartbeat-monitor"), first
        assert (runtime_folder(bus_env) / "profile-heartbeat.pid").read_text().strip() == str(process.pid)
        wait_until(lambda: set(bus.live_modules()) == {"heartbeat", "heartbeat-monitor"}, timeout=2.0)
        infos = bus.call_all("mom", msgs.ModuleInfo)
        assert sorted(i.name for i in infos) == ["heartbeat", "heartbeat-monitor"]
        assert {i.pid for i in infos} == {process.pid}  # --one-process
        assert_one_line_error(pluto("up", "heartbeat"), "pluto up:", "already up")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "profile heartbeat is down" in out
    assert "Traceback" not in err
    assert err.index("[1/2] starting heartbeat,") < err.index("[2/2] starting heartbeat-monitor,")
    assert not (runtime_folder(bus_env) / "profile-heartbeat.pid").exists()
    wait_until(lambda: not bus.live_modules(), timeout=2.0)


def test_demo_and_sim_take_a_number_or_max_as_rate() -> None:
    demo = build_parser().parse_args(["demo"])
    assert (demo.rate, demo.seed, demo.noise, demo.no_lockstep, demo.one_process) == (
        "max",
        1,
        "realistic",
        False,
        False,
    )
    assert build_parser().parse_args(["demo", "--rate", "5", "--no-lockstep"]).rate == 5.0
    assert build_parser().parse_args(["sim", "--rate", "MAX"]).rate == "max"
    for command in ("demo", "sim"):
        for bad in ("fast", "0", "-2"):
            result = pluto(command, "--rate", bad)
            assert result.returncode == 2, result
            assert "argument --rate" in result.stderr, result.stderr


def test_demo_at_rate_max_without_lockstep_fails_with_one_line(workdir: Path) -> None:
    assert_one_line_error(pluto("demo", "--no-lockstep", "--rate", "max"), "pluto demo:", "--rate max", "lock-step")
    assert not (workdir / "demo-output").exists()  # it stopped before starting anything


def test_sim_in_lockstep_shows_the_real_time_factor() -> None:
    result = pluto("sim", "--rate", "max", "--seed", "3", "--duration", "3", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "as fast as possible in lock-step" in result.stdout, result.stdout
    assert "seed 3" in result.stdout
    factors = re.findall(r"sim time +\d+\.\d s \(real-time factor +(\d+\.\d)\)", result.stdout)
    assert factors and max(float(f) for f in factors) > 0, result.stdout  # the time runs
