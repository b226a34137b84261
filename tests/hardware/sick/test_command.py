"""``pluto sick-emulate`` (and its old name, ``pluto sick-sim``): its options, bad ones refused with a clear message,
and a run serving a host."""

from __future__ import annotations

import argparse
import threading
from typing import Any

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.cli.main import build_parser
from pluto.errors import ConfigError
from pluto.hardware.sick import command as sick_command
from tests.helpers import wait_until


@pytest.mark.parametrize("command", ["sick-emulate", "sick-sim"])
def test_the_options_under_either_name(command: str) -> None:
    argv = f"{command} --pty --world office --pose 1,2,0.5 --baud 38400 --resolution 0.5 --units mm --fault-at 3"
    args = build_parser().parse_args([*argv.split(), "--link-noise", "0.01"])
    assert args.pty and args.world == "office" and args.pose == (1.0, 2.0, 0.5) and args.baud == 38400
    assert args.resolution == 0.5 and args.units == "mm" and args.fault_at == 3.0 and args.link_noise == 0.01
    assert args.func is sick_command.run and args.command == command


@pytest.mark.parametrize(
    "argv",
    [["sick-emulate", "--link-noise", "1.5"], ["sick-emulate", "--pose", "1,2"], ["sick-emulate", "--units", "inch"]],
)
def test_bad_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--baud", "115200"], ["--resolution", "0.25"], ["--fault-at", "-1"]])
def test_bad_values_are_config_errors(option: list[str]) -> None:
    args = build_parser().parse_args(["sick-emulate", *option])
    with pytest.raises(ConfigError):
        sick_command.run(args)


def test_a_driver_reads_scans_from_the_served_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    from pluto.hardware.sick.driver import LmsDriver, LmsSettings
    from pluto.hardware.sick.emulate import LmsEmulator

    urls: list[str] = []
    ready = threading.Event()
    stop = threading.Event()
    original = LmsEmulator.run

    def run(self: LmsEmulator, _stop: threading.Event, on_ready: object = None) -> None:
        def noted(url: str) -> None:
            urls.append(url)
            ready.set()

        original(self, stop, on_ready=noted)

    monkeypatch.setattr(LmsEmulator, "run", run)
    args: argparse.Namespace = build_parser().parse_args(["sick-emulate", "--port", "0", "--world", "office"])
    server = threading.Thread(target=sick_command.run, args=(args,), daemon=True)
    server.start()
    try:
        assert ready.wait(10.0)
        with LmsDriver(urls[0], LmsSettings(baud=500000, resolution=100, probe_timeout=0.1)) as driver:
            scan = driver.wait_for_scan(5.0)
            assert scan is not None and scan.ranges.size == 181 and 0.0 < scan.ranges.min() < 80.0
    finally:
        stop.set()
        server.join(5.0)


def test_following_a_simulation_the_scanner_turns_with_the_wrist(monkeypatch: pytest.MonkeyPatch, bus: Bus) -> None:
    """With --follow-sim the served scans come from where the robot is (Sim/Truth) and where its wrist points
    (Wrist/State), carried forward to the truth's time by the wrist's velocity."""
    from pluto.hardware.sick import emulate

    sources: list[emulate.WorldScan] = []
    stop = threading.Event()
    built = threading.Event()
    original_init = emulate.WorldScan.__init__

    def init(self: emulate.WorldScan, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        sources.append(self)
        built.set()

    monkeypatch.setattr(emulate.WorldScan, "__init__", init)
    monkeypatch.setattr(emulate.LmsEmulator, "run", lambda self, _stop, on_ready=None: stop.wait(10.0))
    truth = bus.create_publisher(names.SIM_TRUTH, msgs.Odometry)
    wrist = bus.create_publisher(names.WRIST_STATE, msgs.ActuatorState)
    args = build_parser().parse_args(["sick-emulate", "--port", "0", "--world", "office", "--follow-sim"])
    server = threading.Thread(target=sick_command.run, args=(args,), daemon=True)
    server.start()
    try:
        assert built.wait(10.0)
        follow = sources[0].wrist
        assert follow is not None and follow() == (0.0, 0.0)  # no wrist yet: ahead and level
        truth.write(msgs.Odometry(stamp=20.1, x=10.0, y=9.7))
        wrist.write(msgs.ActuatorState(stamp=20.0, position=[0.5, 0.1], velocity=[1.0, 0.0]))
        # 0.1 s on at 1 rad/s, by the simulated time of the truth (not the wall clock's, which is decades ahead)
        wait_until(lambda: abs(follow()[0] - 0.6) < 1e-9, message="the wrist's state and the truth reached the scanner")
        assert follow()[1] == pytest.approx(0.1)
    finally:
        stop.set()
        server.join(5.0)
