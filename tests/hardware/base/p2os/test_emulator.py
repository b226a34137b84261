"""The emulator's transports: a plain TCP client and a pyserial client on a pty, both decoding with the codec;
link noise; one client at a time; a client that goes away ends its session; the ``p2os-emulate`` command (also
``p2os-sim``)."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import serial  # type: ignore[import-untyped]

from pluto.errors import ConfigError, PlutoError
from pluto.hardware.base.p2os import (
    Command,
    ConfigPacket,
    P2osDecoder,
    Sip,
    SyncReply,
    encode_command,
)
from pluto.hardware.base.p2os import emulate as emulator_module
from pluto.hardware.base.p2os.decoder import Event
from pluto.hardware.base.p2os.emulate import EmulatorError, LinkNoise, P2osEmulator, serve_tcp
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.sim.world import MapError
from tests.helpers import wait_until

TICK = 0.005


def _is_echo_of(number: int, event: Event) -> bool:
    return isinstance(event, SyncReply) and event.sync == number


class Client:
    """A minimal P2OS client over any byte pipe: send commands, wait for packets with a timeout."""

    def __init__(self, read: Callable[[float], bytes], write: Callable[[bytes], Any]) -> None:
        self._read = read
        self._write = write
        self.decoder = P2osDecoder("client")
        self.received: list[tuple[float, Event]] = []
        self.dropped_before = 0  # bad packets counted by decoders replaced by reset_decoder()

    def reset_decoder(self) -> None:
        """Start a fresh decoder: a corrupted length byte would otherwise hold back the next echoes until that
        many bytes (up to 200) have arrived, which during the handshake takes many retries."""
        stats = self.decoder.statistics()
        self.dropped_before += stats.bad_checksum + stats.bad_length + stats.malformed
        self.decoder = P2osDecoder("client")

    def bad_packets(self) -> int:
        stats = self.decoder.statistics()
        return self.dropped_before + stats.bad_checksum + stats.bad_length + stats.malformed

    def send(self, command: Command | int, argument: int | None = None) -> None:
        self._write(encode_command(command, argument))

    def poll(self, timeout: float) -> list[Event]:
        """Packets that arrive within ``timeout`` s (returns early once something arrived and the pipe is quiet)."""
        deadline = time.monotonic() + timeout
        events: list[Event] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return events
            data = self._read(min(left, 0.02))
            if data:
                self.decoder.receive_data(data)
                now = time.monotonic()
                for event in self.decoder.events():
                    self.received.append((now, event))
                    events.append(event)

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 2.0) -> Event:
        """The first packet satisfying ``predicate`` within ``timeout`` s; AssertionError otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self._read(0.02)
            if not data:
                continue
            self.decoder.receive_data(data)
            now = time.monotonic()
            for event in self.decoder.events():
                self.received.append((now, event))
                if predicate(event):
                    return event
        raise AssertionError(f"no matching packet within {timeout} s")

    def handshake(self, *, retries: int = 1, timeout: float = 0.5) -> SyncReply:
        """SYNC0, SYNC1, SYNC2 (each retried on silence), then OPEN until a SIP arrives; returns the SYNC2 echo."""
        reply: SyncReply | None = None
        for number in (0, 1, 2):
            for attempt in range(retries):
                if attempt:
                    self.reset_decoder()
                self.send(number)
                try:
                    event = self.wait_for(functools.partial(_is_echo_of, number), timeout)
                except AssertionError:
                    continue
                assert isinstance(event, SyncReply)
                reply = event
                break
            else:
                raise AssertionError(f"no echo of SYNC{number}")
        for _ in range(retries):
            self.send(Command.OPEN, 1)
            try:
                self.wait_for(lambda e: isinstance(e, Sip), timeout)
                break
            except AssertionError:
                continue
        else:
            raise AssertionError("no SIP after OPEN")
        assert reply is not None
        return reply


def socket_client(port: int) -> tuple[Client, socket.socket]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=2.0)

    def read(timeout: float) -> bytes:
        sock.settimeout(timeout)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            return b""
        if not data:
            raise ConnectionError("the emulator closed the connection")
        return data

    return Client(read, sock.sendall), sock


@pytest.fixture
def emulator() -> Iterator[P2osEmulator]:
    with P2osEmulator(P2osRobot(watchdog=1.0), tick=TICK) as emu:
        yield emu


# ------------------------------------------------------------------------------------------------ TCP


def test_tcp_handshake_sips_at_10_hz_and_driving(emulator: P2osEmulator) -> None:
    assert emulator.url == f"socket://127.0.0.1:{emulator.port}"
    client, sock = socket_client(emulator.port)
    with sock:
        reply = client.handshake()
        assert (reply.name, reply.robot_class, reply.subclass) == ("Pluto", "Pioneer", "p3dx")
        sips = [e for e in client.poll(0.55) if isinstance(e, Sip)]
        assert 4 <= len(sips) <= 7  # ~10 Hz
        stamps = [t for t, e in client.received if isinstance(e, Sip)]
        assert 0.06 < float(np.median(np.diff(stamps))) < 0.14
        client.send(Command.ENABLE, 1)
        client.send(Command.SETA, 2000)
        client.send(Command.VEL, 400)
        sip = client.wait_for(lambda e: isinstance(e, Sip) and e.left_velocity == 400, timeout=1.5)
        assert isinstance(sip, Sip) and sip.moving and sip.motors_enabled
        client.send(Command.CONFIG, 1)
        config = client.wait_for(lambda e: isinstance(e, ConfigPacket))
        assert isinstance(config, ConfigPacket) and config.watchdog == 1000
        with emulator.lock:
            assert emulator.robot.truth_velocity[0] == pytest.approx(0.4, abs=0.005)  # the SIP rounds to mm/s
        # The watchdog (1 s here) stops the robot when the client goes silent.
        sip = client.wait_for(lambda e: isinstance(e, Sip) and not e.motors_enabled, timeout=2.0)
        assert isinstance(sip, Sip)
        with emulator.lock:
            assert emulator.robot.counters.watchdog_trips == 1


def test_a_client_that_goes_away_ends_its_session(emulator: P2osEmulator) -> None:
    client, sock = socket_client(emulator.port)
    with sock:
        client.handshake()
        client.send(Command.ENABLE, 1)
        client.send(Command.VEL, 300)
        client.wait_for(lambda e: isinstance(e, Sip) and e.moving)
    # The client vanished without CLOSE (its program died): the robot stops, and the next client synchronises
    # at once.
    deadline = time.monotonic() + 2.0
    while emulator.client_connected and time.monotonic() < deadline:
        time.sleep(0.01)
    with emulator.lock:
        assert emulator.robot.state == "closed" and not emulator.robot.motors_enabled
        assert emulator.robot.counters.sessions_ended == 1
    client, sock = socket_client(emulator.port)
    with sock:
        client.send(Command.SYNC0)
        assert client.wait_for(lambda e: True) == SyncReply(0)
        client.handshake()
        wait_until(lambda: emulator.robot.truth_velocity == (0.0, 0.0), timeout=2.0)  # braking at its top rate
        client.send(Command.CLOSE, 1)
        client.poll(0.05)
    assert emulator.connections == 2
    with emulator.lock:
        assert emulator.robot.state == "closed"


def test_a_second_client_is_refused_while_one_is_connected(emulator: P2osEmulator) -> None:
    first, sock1 = socket_client(emulator.port)
    with sock1:
        first.handshake()
        second = socket.create_connection(("127.0.0.1", emulator.port), timeout=2.0)
        with second:
            second.settimeout(2.0)
            assert second.recv(100) == b""  # closed at once
        assert emulator.refused_connections == 1
        assert [e for e in first.poll(0.25) if isinstance(e, Sip)]  # the first one is undisturbed


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        emu = P2osEmulator(port=port)
        with pytest.raises(EmulatorError, match=rf"cannot listen on 127\.0\.0\.1:{port}: .*in use"):
            emu.start()
        assert isinstance(EmulatorError("x"), PlutoError)
        emu.stop()  # safe even though it never started


def test_emulator_lifecycle_errors() -> None:
    emu = P2osEmulator()
    with pytest.raises(EmulatorError, match="not started"):
        _ = emu.url
    with emu:
        with pytest.raises(EmulatorError, match="already running"):
            emu.start()
        with pytest.raises(EmulatorError, match="no pty"):
            _ = emu.pty_path
        assert emu.running
    assert not emu.running
    emu.stop()
    with pytest.raises(ValueError, match="transport"):
        P2osEmulator(transport="udp")


def test_serve_tcp_in_a_thread_until_stopped() -> None:
    stop = threading.Event()
    urls: list[str] = []
    ready = threading.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    thread = threading.Thread(
        target=serve_tcp, args=(P2osRobot, "127.0.0.1", 0), kwargs={"stop": stop, "on_ready": on_ready, "tick": TICK}
    )
    thread.start()
    try:
        assert ready.wait(5.0)
        port = int(urls[0].rsplit(":", 1)[1])
        client, sock = socket_client(port)
        with sock:
            client.handshake()
    finally:
        stop.set()
        thread.join(5.0)
    assert not thread.is_alive()


# ------------------------------------------------------------------------------------------------ pty


def test_pty_with_pyserial() -> None:
    with P2osEmulator(transport="pty", tick=TICK) as emu:
        assert emu.url == emu.pty_path and emu.pty_path.startswith("/dev/")
        with pytest.raises(EmulatorError, match="no TCP port"):
            _ = emu.port
        port = serial.serial_for_url(emu.pty_path, baudrate=9600, timeout=0.02)
        try:

            def read(timeout: float) -> bytes:
                port.timeout = timeout
                return bytes(port.read(4096))

            client = Client(read, port.write)
            reply = client.handshake()
            assert reply.subclass == "p3dx"
            client.send(Command.ENABLE, 1)
            client.send(Command.RVEL, 30)
            sip = client.wait_for(lambda e: isinstance(e, Sip) and e.right_velocity > e.left_velocity, 2.0)
            assert isinstance(sip, Sip) and sip.motors_enabled
            client.send(Command.RVEL, 0)
            client.send(Command.CLOSE, 1)
            client.poll(0.05)
        finally:
            port.close()
        with emu.lock:
            assert emu.robot.state == "closed"


# ------------------------------------------------------------------------------------------------ time


class FakeClock:
    """A wall clock that moves only when the test says so."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _wait_for_step(emu: P2osEmulator, clock: FakeClock) -> None:
    """Wait until the loop has stepped the robot at the fake clock's current time (and written what it sent)."""
    deadline = time.monotonic() + 2.0
    while emu.stepped_at != clock.t:
        assert time.monotonic() < deadline, "the emulator did not step"
        time.sleep(0.001)


def _advance(emu: P2osEmulator, clock: FakeClock, seconds: float) -> float:
    """Move the fake clock on, wait until the loop has stepped the robot; returns the robot's time advance."""
    with emu.lock:
        before = emu.robot.time
    clock.t += seconds
    _wait_for_step(emu, clock)
    with emu.lock:
        return emu.robot.time - before


def _distance(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    return float(np.hypot(b[0] - a[0], b[1] - a[1]))


def test_a_stalled_process_skips_the_time_instead_of_catching_up(caplog: pytest.LogCaptureFixture) -> None:
    cap = emulator_module.MAX_STEP
    assert 0.0 < cap <= 0.2
    robot = P2osRobot(watchdog=0.0)
    for command, argument in (
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
        (Command.OPEN, 1),
        (Command.ENABLE, 1),
        (Command.SETA, 2000),
        (Command.VEL, 500),
    ):
        robot.receive_data(encode_command(command, argument))
    clock = FakeClock()
    caplog.set_level("WARNING", logger="pluto.p2os")
    with P2osEmulator(robot, tick=TICK, clock=clock) as emu:
        _wait_for_step(emu, clock)  # the first step sets the robot's time base
        # Normal steps (up to the cap) follow the wall clock exactly.
        for _ in range(10):
            assert _advance(emu, clock, 0.05) == pytest.approx(0.05)
        assert _advance(emu, clock, cap) == pytest.approx(cap)
        with emu.lock:
            assert emu.robot.time == pytest.approx(0.5 + cap)
            assert emu.robot.truth_velocity[0] == pytest.approx(0.5)
            pose = emu.robot.truth_pose
        assert (emu.skipped_time, emu.late_steps) == (0.0, 0)
        assert not caplog.records
        # A 5 s stall: one step of at most the cap; the rest is skipped and counted, not caught up.
        assert _advance(emu, clock, 5.0) == pytest.approx(cap)
        with emu.lock:
            moved = _distance(pose, emu.robot.truth_pose)
        assert 0.0 < moved <= 0.5 * cap + 1e-6
        assert emu.skipped_time == pytest.approx(5.0 - cap)
        assert emu.late_steps == 1
        assert len(caplog.records) == 1
        assert "skipped" in caplog.records[0].getMessage()
        # More stalls within the log's rate limit: counted, but no more lines.
        for _ in range(3):
            assert _advance(emu, clock, 1.0) == pytest.approx(cap)
        assert emu.late_steps == 4
        assert emu.skipped_time == pytest.approx(5.0 + 3.0 - 4 * cap)
        assert len(caplog.records) == 1
        # A normal step after the stalls is unchanged; a stall after the rate limit logs again, with the totals.
        assert _advance(emu, clock, 0.05) == pytest.approx(0.05)
        assert emu.late_steps == 4
        assert _advance(emu, clock, emulator_module._LATE_LOG_INTERVAL) == pytest.approx(cap)
        assert len(caplog.records) == 2
        totals = f"{emu.skipped_time:.2f} s in all after 5 late steps"
        assert totals in caplog.records[1].getMessage()
        # A restart resumes the robot's time: the time stopped is neither simulated nor late.
        emu.stop()
        with emu.lock:
            stopped_at = emu.robot.time
        clock.t += 60.0
        emu.start()
        _wait_for_step(emu, clock)
        assert _advance(emu, clock, 0.05) == pytest.approx(0.05)
        with emu.lock:
            assert emu.robot.time == pytest.approx(stopped_at + 0.05)
        assert emu.late_steps == 5


def test_max_step_must_cover_a_tick() -> None:
    with pytest.raises(ValueError, match="max_step"):
        P2osEmulator(tick=0.01, max_step=0.005)
    with pytest.raises(ValueError, match="max_step"):
        serve_tcp(P2osRobot, port=0, max_step=float("nan"))
    assert P2osEmulator(tick=0.01, max_step=0.01).late_steps == 0


# ------------------------------------------------------------------------------------------------ noise


def test_link_noise_is_seeded_and_at_the_given_rates() -> None:
    data = bytes(range(256)) * 200
    a = LinkNoise(0.02, 0.02, np.random.default_rng(5)).apply(data)
    b = LinkNoise(0.02, 0.02, np.random.default_rng(5)).apply(data)
    assert a == b
    noise = LinkNoise(0.02, 0.03, np.random.default_rng(1))
    out = noise.apply(data)
    assert noise.dropped == len(data) - len(out)
    assert noise.dropped / len(data) == pytest.approx(0.02, rel=0.15)
    assert noise.corrupted / len(out) == pytest.approx(0.03, rel=0.15)
    assert LinkNoise(0.0, 0.0).apply(data) == data
    with pytest.raises(ValueError, match="drop_rate"):
        LinkNoise(1.5, 0.0)


@pytest.mark.parametrize(("rate", "least", "most"), [(0.02, 0.03, 0.3), (0.002, 0.6, 1.0)])
def test_a_client_copes_with_a_noisy_link(rate: float, least: float, most: float) -> None:
    # Each byte is dropped with probability `rate` and, if it gets through, corrupted with probability `rate`, in
    # both directions. A 10 ms SIP cycle gives enough SIPs in a second for the fractions to be steady; such SIPs
    # carry about one sonar reading (about 45 bytes), so at 2 % only (0.98 * 0.98) ** 45, about 16 %, arrive whole
    # (at the usual 100 ms cycle, with ~5 readings, about 10 %); at 0.2 % about 84 % do. Measured: 19 % and 86 %.
    # The client retries each handshake step with a fresh decoder, as a real one should.
    noise = LinkNoise(rate, rate, np.random.default_rng(11))
    with P2osEmulator(P2osRobot(sip_cycle=0.01), tick=TICK, link_noise=noise) as emu:
        client, sock = socket_client(emu.port)
        with sock:
            client.handshake(retries=100, timeout=0.05)
            with emu.lock:
                before = emu.robot.counters.sips
            decoded_before = sum(isinstance(e, Sip) for _, e in client.received)
            client.poll(1.0)
            with emu.lock:
                sent = emu.robot.counters.sips - before
    decoded = sum(isinstance(e, Sip) for _, e in client.received) - decoded_before
    assert sent >= 50
    assert least * sent <= decoded <= most * sent
    assert client.bad_packets() > 0
    assert client.decoder.statistics().garbage_bytes > 0
    assert noise.dropped > 0 and noise.corrupted > 0


# ------------------------------------------------------------------------------------------------ command


def _parse(*argv: str) -> argparse.Namespace:
    from pluto.cli.main import build_parser

    return build_parser().parse_args(["p2os-emulate", *argv])


def test_command_options_and_bad_inputs(tmp_path: Path) -> None:
    from pluto.hardware.base.p2os import command as p2os_command

    args = _parse()
    assert (args.port, args.host, args.model, args.world, args.pty, args.link_noise, args.watchdog) == (
        8101,
        "127.0.0.1",
        "p3dx",
        None,
        False,
        0.0,
        2000,
    )
    assert args.func is p2os_command.run
    assert p2os_command.DEFAULT_PORT == emulator_module.DEFAULT_PORT == 8101
    with pytest.raises(ConfigError, match="unknown Pioneer model 'p9'"):
        p2os_command.run(_parse("--model", "p9"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<world name='x' version='1'><walls><wall x1='0'/></walls></world>")
    with pytest.raises(MapError, match=r"bad\.xml:1: <wall> is missing attribute"):
        p2os_command.run(_parse("--world", str(bad)))
    with pytest.raises(ConfigError, match="watchdog"):
        p2os_command.run(_parse("--watchdog", "70000"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(EmulatorError, match="in use"):
            p2os_command.run(_parse("--port", str(busy.getsockname()[1])))
    with pytest.raises(SystemExit):
        _parse("--link-noise", "2")


def test_command_serves_until_interrupted() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import sys\n"
        "from pluto.cli.main import build_parser\n"
        "args = build_parser().parse_args(sys.argv[1:])\n"
        "sys.exit(args.func(args))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, "p2os-sim", "--port", str(port), "--world", "office"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert "in world office" in lines[0]
        assert lines[1].strip() == f"connect a client to: socket://127.0.0.1:{port}"
        client, sock = socket_client(port)
        with sock:
            assert client.handshake().subclass == "p3dx"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped" in out
