"""What the devices' emulate commands share: their link options, the link they ask for, and serving until a signal."""

from __future__ import annotations

import argparse
import signal
import socket
import threading
from collections.abc import Callable

import pytest

from pluto.cli.main import build_parser
from pluto.errors import ConfigError
from pluto.hardware.dmu import command as dmu_command
from pluto.hardware.emulate_command import EmulatorLink, serve_until_signal
from pluto.hardware.gps import command as gps_command

COMMANDS = {
    "p2os-emulate": 8101,
    "p2os-sim": 8101,
    "sick-emulate": 8104,
    "sick-sim": 8104,
    "dmu-emulate": 8102,
    "dmu-sim": 8102,
    "gps-emulate": 8103,
    "gps-sim": 8103,
}


@pytest.mark.parametrize(("command", "port"), COMMANDS.items())
def test_every_emulator_command_has_the_same_link_options(command: str, port: int) -> None:
    args = build_parser().parse_args([command])
    assert (args.port, args.pty, args.host, args.link_noise) == (port, False, "127.0.0.1", 0.0)
    link = EmulatorLink.from_args(args)
    assert (link.transport, link.host, link.port, link.noise, link.noise_note) == ("tcp", "127.0.0.1", port, None, "")
    args = build_parser().parse_args([command, "--pty", "--host", "0.0.0.0", "--link-noise", "0.002"])
    link = EmulatorLink.from_args(args)
    assert link.transport == "pty" and link.host == "0.0.0.0" and link.noise is not None
    assert (link.noise.drop_rate, link.noise.corrupt_rate, link.noise_note) == (
        0.002,
        0.002,
        ", link noise 0.002 per byte",
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "options", [["--port", "9000", "--pty"], ["--link-noise", "1"], ["--link-noise", "-0.1"], ["--link-noise", "x"]]
)
def test_bad_link_options_are_refused(command: str, options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, *options])
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_a_link_out_of_range_is_a_config_error() -> None:
    for port, noise, wrong in ((70000, 0.0, "--port"), (-1, 0.0, "--port"), (0, float("nan"), "--link-noise")):
        args = argparse.Namespace(port=port, pty=False, host="127.0.0.1", link_noise=noise)
        with pytest.raises(ConfigError, match=wrong):
            EmulatorLink.from_args(args)


class _FakeServer:
    """A link server that announces a URL and serves until it is stopped; ``on_serve`` runs once it serves."""

    def __init__(self, on_serve: Callable[[], None]) -> None:
        self.on_serve = on_serve
        self.closed = False

    def run(self, stop: threading.Event, on_ready: Callable[[str], None] | None = None) -> None:
        try:
            assert on_ready is not None
            on_ready("socket://127.0.0.1:4321")
            self.on_serve()
            assert stop.wait(5.0), "the signal did not stop serving"
        finally:
            self.closed = True


@pytest.mark.parametrize("stop_at_once", [False, True])
def test_serving_announces_the_link_and_stops_on_a_signal(
    stop_at_once: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    previous = signal.getsignal(signal.SIGINT)
    server = _FakeServer(lambda: signal.raise_signal(signal.SIGINT))
    assert serve_until_signal(server, "A unit.", peer="client", stop_at_once=stop_at_once) == 0  # type: ignore[arg-type]
    assert server.closed
    assert capsys.readouterr().out.splitlines() == [
        "A unit.",
        "connect a client to: socket://127.0.0.1:4321",
        "Ctrl-C stops it.",
        "stopped",
    ]
    assert signal.getsignal(signal.SIGINT) is previous  # the handler is put back


def _serve_in_thread(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[argparse.Namespace], int], argv: list[str]
) -> tuple[str, threading.Event, threading.Thread]:
    """Start a command in a thread (where signals do not reach it) with a stop event of the test's; its URL."""
    from pluto.hardware.link import DeviceEmulator

    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()
    original = DeviceEmulator.run

    def run_until_stopped(self: DeviceEmulator, _stop: threading.Event, on_ready: object = None) -> None:
        def noted(url: str) -> None:
            assert callable(on_ready)
            on_ready(url)
            urls.append(url)
            ready.set()

        original(self, stop, on_ready=noted)

    monkeypatch.setattr(DeviceEmulator, "run", run_until_stopped)
    thread = threading.Thread(target=run, args=(build_parser().parse_args(argv),), daemon=True)
    thread.start()
    assert ready.wait(10.0), "the emulator did not open its link"
    return urls[0], stop, thread


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5.0)


def test_dmu_sim_serves_a_unit_that_answers_a_ping(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, stop, thread = _serve_in_thread(
        monkeypatch, dmu_command.run, ["dmu-sim", "--port", "0", "--link-noise", "0.0001"]
    )
    try:
        with _connect(url) as host:
            host.sendall(b"R")
            assert host.recv(16).startswith(b"H")
    finally:
        stop.set()
        thread.join(5.0)
    out = capsys.readouterr().out
    assert "measuring a robot driving a circle, 100 packets/s when streaming, link noise 0.0001 per byte." in out
    assert f"connect a host to: {url}\n" in out and out.endswith("stopped\n")


def test_gps_sim_serves_nmea_sentences(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    url, stop, thread = _serve_in_thread(monkeypatch, gps_command.run, ["gps-sim", "--port", "0"])
    try:
        with _connect(url) as host:
            received = b""
            while b"\r\n" not in received:
                chunk = host.recv(4096)
                assert chunk, "the receiver closed the connection"
                received += chunk
            assert received.startswith(b"$GP")
    finally:
        stop.set()
        thread.join(5.0)
    out = capsys.readouterr().out
    assert "NMEA GPS receiver driving a 20 m circle, origin 59.349800,18.070700." in out and out.endswith("stopped\n")
