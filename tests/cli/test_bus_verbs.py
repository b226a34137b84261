"""`pluto pub`, `call`, `param`, `info`, `graph` and the waiting of `echo`, against a real bus with small modules
run in this process (the commands run in this process too, through `main`, but for Ctrl-C, which needs a process
of its own)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.runtime.heartbeat import HeartbeatModule, HeartbeatMonitor, HeartbeatMonitorParams
from pluto.runtime.module import Module, ModuleParams
from tests.helpers import wait_until

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def started() -> Iterator[list[Module[Any]]]:
    modules: list[Module[Any]] = []
    yield modules
    for module in reversed(modules):
        module.stop()


def start(started: list[Module[Any]], module: Module[Any]) -> Any:
    module.start()
    started.append(module)
    return module


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


class Doubler(Module[ModuleParams]):
    """A module with a service of its own: ``doubler/double`` returns twice the number it is given."""

    name = "doubler"

    def on_configure(self) -> None:
        self.create_service("double", lambda n: 2 * n, int)


# -- pub -----------------------------------------------------------------------------------------------------------


def test_pub_once_writes_the_value_decoded_into_the_interface_type(bus: Bus, capsys: Capture) -> None:
    got: list[msgs.PoseEstimate] = []
    bus.create_subscription("Localization/Post_Pose", got.append, depth=8, current=False)
    status, _out, err = run(
        capsys, "pub", "Localization/Post_Pose", '{"pose": [1, 2, 0, 0.5, 0, 0], "cmd_flags": 1}', "--once"
    )
    assert status == 0, err
    assert wait_until(lambda: got, timeout=5.0)
    assert got[0].pose[:4] == [1.0, 2.0, 0.0, 0.5]
    assert got[0].cmd_flags == 1
    assert "no running module reads Localization/Post_Pose" in err


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ('{"velocity": [0.2, "fast"]}', "Expected `float`, got `str` - at `$.velocity[1]`"),
        ('{"speed": 1}', "unknown field speed"),
        ('{"velocity": [0.2', "is not JSON"),
        ("[0.2, 0]", "must be a JSON object"),
        ('{"velocity": [5.0, 0]}', "out of range"),  # the robot's limits, as for any value entering it
    ],
)
def test_pub_refuses_a_bad_value_in_one_line(value: str, needle: str, capsys: Capture) -> None:
    status, out, err = run(capsys, "pub", "drive/command", value)
    assert status == 1
    [line] = err.strip().splitlines()
    assert line.startswith("pluto pub: "), line
    assert needle in line
    if "JSON object" in needle or "unknown field" in needle:
        assert "ActuatorState (stamp: float, cmd_flags: int, position: list[float]" in line  # the fields it takes
    assert out == ""


@pytest.mark.parametrize(
    ("covariance", "needle"),
    [
        ("[-1, 0, 0, 0, 1, 0, 0, 0, 1]", "Localization/Post_Pose covariance[0] = -1 is a variance"),
        ("[1, 2, 0, 2, 1, 0, 0, 0, 1]", "Localization/Post_Pose covariance is not positive semi-definite"),
    ],
)
def test_pub_refuses_a_posted_pose_whose_covariance_cannot_be_one(
    covariance: str, needle: str, capsys: Capture
) -> None:
    value = f'{{"pose": [1, 2, 0, 0.5, 0, 0], "covariance": {covariance}, "cmd_flags": -1}}'
    status, out, err = run(capsys, "pub", "Localization/Post_Pose", value, "--once")
    assert status == 1
    [line] = err.strip().splitlines()
    assert line.startswith("pluto pub: ") and needle in line, line
    assert out == ""


def test_pub_of_an_unknown_interface_wants_a_type(capsys: Capture) -> None:
    status, _out, err = run(capsys, "pub", "No/Such", "{}")
    assert status == 1
    assert "not a known interface" in err


def test_pub_count_repeats_a_position_command_without_a_stop(bus: Bus, capsys: Capture) -> None:
    got: list[msgs.ActuatorState] = []
    bus.create_subscription("Wrist/Command", got.append, depth=64)
    status, _out, err = run(capsys, "pub", "Wrist/Command", '{"position": [0.5, 0.1]}', "-n", "3", "--rate", "50")
    assert status == 0, err
    assert wait_until(lambda: len(got) >= 3, timeout=5.0)
    assert [g.position for g in got] == [[0.5, 0.1]] * 3


def test_pub_repeats_a_velocity_command_and_sends_one_stop_on_ctrl_c(bus: Bus, capsys: Capture) -> None:
    got: list[msgs.ActuatorState] = []
    bus.create_subscription("drive/command", got.append, depth=1024)
    command = '{"cmd_flags": 10, "velocity": [0.2, 0.1]}'
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "pub", "drive/command", command, "--rate", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: len(got) >= 5, timeout=20.0), "the command was not repeated"
        # while it runs, its writer goes by the command's name (a newcomer's first query of the names may come before
        # the name has reached it on a busy machine: asked again, it is there)
        label = f"  pluto-pub-{process.pid} (not a module)  ("
        outs: list[str] = []

        def named() -> bool:
            status, out, _err = run(capsys, "info", "drive/command", "--listen", "0.3")
            outs.append(out)
            return status == 0 and label in out

        assert wait_until(named, timeout=15.0, interval=0.2), outs[-1]
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # no base runs: the robot did not move, which it says (status 1) once the stop is sent
    assert process.returncode == 1, err
    assert "sent one stop command on drive/command" in err
    assert "the robot did not move as asked" in _out
    assert wait_until(lambda: got[-1].velocity == [0.0, 0.0], timeout=5.0)
    *driving, stop = got
    assert all(g.velocity == [0.2, 0.1] and g.cmd_flags == 10 for g in driving)
    assert stop.cmd_flags == 0


# -- call ----------------------------------------------------------------------------------------------------------


def test_call_lists_the_services_and_calls_one(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    start(started, Doubler(bus))
    status, out, _err = run(capsys, "call")
    assert status == 0
    assert "doubler:\n" in out
    assert "  doubler/double\n" in out
    assert "  doubler/set_parameters\n" in out

    status, out, err = run(capsys, "call", "doubler/double", "21")
    assert (status, out) == (0, "42\n"), err
    status, out, _err = run(capsys, "call", "doubler/get_parameters", '["rate_hz"]')
    assert json.loads(out) == {"rate_hz": 10.0}


def test_call_of_an_unknown_service_lists_the_known_ones(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    start(started, Doubler(bus))
    status, out, err = run(capsys, "call", "doubler/triple", "1")
    assert status == 1
    assert out == ""
    assert "no running module serves 'doubler/triple'" in err
    assert "  doubler/double" in err


def test_call_with_a_bad_request_or_nothing_running(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    status, _out, err = run(capsys, "call", "doubler/double", "1")
    assert status == 1
    assert "no modules running" in err
    start(started, Doubler(bus))
    status, _out, err = run(capsys, "call", "doubler/double", "{oops")
    assert status == 1
    assert "the request is not JSON" in err
    status, _out, err = run(capsys, "call", "doubler/double", '"two"')  # the service's request type is int
    assert status == 1
    assert "bad request to doubler/double" in err


# -- param ---------------------------------------------------------------------------------------------------------


def test_param_list_get_and_set(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    drive = start(started, DriveModule(bus, DriveModuleParams(autostart=False)))
    status, out, _err = run(capsys, "param", "list", "drive")
    assert status == 0
    lines = {line.split()[0]: line.split() for line in out.splitlines()}
    assert lines["NAME"][:6] == ["NAME", "TYPE", "VALUE", "DEFAULT", "RANGE", "RUN-TIME"]
    assert lines["max_speed"][1] == "float"
    assert lines["rate_hz"][4:6] == ["[0.1,", "1000]"]
    assert lines["max_speed"][4:7] == ["(0,", "3]", "yes"]
    assert lines["calibration_file"][4:6] == ["-", "no"]

    status, out, _err = run(capsys, "param", "set", "drive", "max_speed", "0.3")
    assert (status, out) == (0, "drive: max_speed = 0.3\n")
    assert drive.params.max_speed == 0.3
    status, out, _err = run(capsys, "param", "get", "drive", "max_speed")
    assert (status, out) == (0, "0.3\n")
    status, out, _err = run(capsys, "param", "get", "drive")
    assert "max_speed = 0.3\n" in out
    assert 'calibration_file = ""\n' in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("set", "drive", "calibration_file", "a.toml"), "drive: calibration_file is read-only at run time"),
        (("set", "drive", "max_speed", "-2"), "drive: bad value"),
        (("set", "drive", "rate_hz", "1e-300"), "drive: bad value: rate_hz = 1e-300 is out of range: it must be in"),
        (("set", "drive", "top_speed", "1"), "drive: no parameter top_speed (the parameters are: rate_hz,"),
        (("get", "drive", "top_speed"), "no parameter top_speed"),
        (("list", "nobody"), "nobody is not running on robot"),
    ],
)
def test_param_errors_are_one_line(
    argv: tuple[str, ...], needle: str, bus: Bus, started: list[Module[Any]], capsys: Capture
) -> None:
    start(started, DriveModule(bus, DriveModuleParams(autostart=False)))
    status, _out, err = run(capsys, "param", *argv)
    assert status == 1
    [line] = err.strip().splitlines()
    assert line.startswith("pluto param: ")
    assert needle in line


# -- info, graph, mom ----------------------------------------------------------------------------------------------


def beating_pair(bus: Bus, started: list[Module[Any]]) -> None:
    start(started, HeartbeatModule(bus, ModuleParams(rate_hz=20.0)))
    start(started, HeartbeatMonitor(bus, HeartbeatMonitorParams(rate_hz=20.0)))


def test_info_names_the_writers_and_readers(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    beating_pair(bus, started)
    status, out, _err = run(capsys, "info", "Heartbeat", "--listen", "0.5")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "Heartbeat  (Heartbeat)"
    assert "writers: 1" in lines
    assert any(line.startswith("  heartbeat  (") and "Hz" in line for line in lines), out
    assert "readers (modules): heartbeat-monitor" in lines
    assert "warning" not in out
    rate = next(line for line in lines if line.startswith("rate: "))
    assert float(rate.split()[1]) > 0


def test_a_second_writer_shows_in_info_mom_and_graph(
    bus: Bus, make_bus: Any, started: list[Module[Any]], capsys: Capture, tmp_path: Path
) -> None:
    beating_pair(bus, started)
    other = make_bus().create_publisher("Heartbeat")  # a writer no module owns (a script)
    monitor = started[1]

    def fight() -> bool:
        other.write(msgs.Heartbeat(seq=-1, source="script"))
        return any(other.writer_id in r.writers for r in monitor.info().reads if r.name == "Heartbeat")

    assert wait_until(fight, timeout=5.0, interval=0.05)
    hex_id = f"{other.writer_id:#x}"
    status, out, _err = run(capsys, "info", "Heartbeat", "--listen", "0.2")
    assert status == 0
    assert "writers: 2" in out
    assert f"an unnamed writer (id {hex_id}" in out
    assert "warning: more than one writer" in out

    status, out, _err = run(capsys, "mom")
    assert f"warning: Heartbeat has 2 writers in the last 10 s: heartbeat, an unnamed writer (id {hex_id}" in out

    svg = tmp_path / "graph.svg"
    status, out, _err = run(capsys, "graph", "--svg", str(svg))
    assert status == 0
    assert "heartbeat-monitor\n" in out
    assert f"  reads  Heartbeat <- heartbeat, unnamed writer {hex_id}" in out
    assert f"wrote {svg}" in out
    root = ET.fromstring(svg.read_text())
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"heartbeat", "heartbeat-monitor", "Heartbeat", "Heartbeat/Monitor"} <= set(labels)


def test_graph_of_an_empty_robot(bus: Bus, capsys: Capture) -> None:
    status, out, _err = run(capsys, "graph")
    assert status == 0
    assert out == f"robot {os.environ['PLUTO_ROBOT']}: no modules running\n"


# -- echo waits --------------------------------------------------------------------------------------------------


def test_echo_says_what_it_waits_for_and_gives_up_after_its_timeout(bus: Bus, capsys: Capture) -> None:
    status, out, err = run(capsys, "echo", "Heartbeat", "--timeout", "1")
    assert status == 1
    assert out == ""
    assert "waiting for the first value of Heartbeat (up to 1 s) ..." in err
    assert "no value of Heartbeat for 1 s" in err


def test_echo_with_a_value_does_not_speak_of_waiting(bus: Bus, capsys: Capture) -> None:
    bus.create_publisher("Heartbeat").write(msgs.Heartbeat(seq=7))
    status, out, err = run(capsys, "echo", "Heartbeat", "-n", "1", "--timeout", "5")
    assert status == 0
    assert json.loads(out)["seq"] == 7
    assert "waiting" not in err


def test_hz_gives_up_after_its_timeout_without_a_value(bus: Bus, capsys: Capture) -> None:
    status, out, err = run(capsys, "hz", "Heartbeat", "--timeout", "1.5")
    assert status == 1
    assert out.startswith("Heartbeat: no new messages\n")
    assert "no value of Heartbeat for 1.5 s" in err


class Commander(Module[ModuleParams]):
    """Writes a zero velocity on drive/command at each step, as avoid does while it runs."""

    name = "commander"

    def on_configure(self) -> None:
        self.out = self.create_publisher("drive/command", msgs.ActuatorState)

    def step(self, now: float) -> None:
        self.out.write(msgs.ActuatorState(cmd_flags=10, velocity=[0.0, 0.0]))


def test_commanding_the_drive_beside_another_commander_warns(
    bus: Bus, started: list[Module[Any]], capsys: Capture
) -> None:
    start(started, DriveModule(bus, DriveModuleParams()))
    status, _out, err = run(capsys, "drive", "velocity", "0.1", "0")
    assert status == 1  # no base: the robot does not move
    assert "warning" not in err
    start(started, Commander(bus, ModuleParams(rate_hz=20.0)))
    status, out, err = run(capsys, "drive", "velocity", "0.1", "0")
    assert status == 1
    assert "warning: commander also commands the drive (drive/command): the two fight" in err
    assert "commander also writes drive/command: the commands fight" in out  # the reason it did not move
    status, _out, err = run(capsys, "pub", "drive/command", '{"velocity": [0.1, 0]}', "--once")
    assert status == 1
    assert "warning: commander also writes drive/command" in err
    assert "no running module reads" not in err
