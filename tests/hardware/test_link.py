"""pluto.hardware.link: the emulators' links, their noise, and the serving loop's lifecycle."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
import serial  # type: ignore[import-untyped]

from pluto.hardware.link import DeviceEmulator, EmulatorError, LinkNoise, LinkServer, PtyLink, TcpLink, open_link
from tests.helpers import wait_until


class Echo:
    """A device core that answers every byte with the same byte, upper-cased."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.steps = 0

    def receive_data(self, data: bytes) -> None:
        self.out += data.upper()

    def step(self, now: float) -> None:
        self.steps += 1

    def data_to_send(self) -> bytes:
        data = bytes(self.out)
        self.out.clear()
        return data


def _read(port: serial.Serial, size: int) -> bytes:
    got = bytearray()

    def enough() -> bool:
        got.extend(port.read(port.in_waiting or 1))
        return len(got) >= size

    wait_until(enough, timeout=5.0)
    return bytes(got)


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_a_device_core_is_served_and_stepped(transport: str) -> None:
    device = Echo()
    with DeviceEmulator(device, transport=transport) as emulator:  # type: ignore[arg-type]
        port = serial.serial_for_url(emulator.url, timeout=0.05)
        try:
            port.write(b"hello")
            assert _read(port, 5) == b"HELLO"
        finally:
            port.close()
        assert wait_until(lambda: device.steps > 3)
        assert emulator.running
    assert not emulator.running
    emulator.close()  # a second close does nothing


def test_a_second_tcp_client_is_refused_and_counted() -> None:
    with DeviceEmulator(Echo()) as emulator:
        first = socket.create_connection(("127.0.0.1", emulator.port))
        try:
            assert wait_until(lambda: emulator.connections == 1 and emulator.client_connected)
            second = socket.create_connection(("127.0.0.1", emulator.port))
            assert wait_until(lambda: emulator.refused_connections == 1)
            second.settimeout(5.0)
            assert second.recv(10) == b""  # closed at once
            second.close()
        finally:
            first.close()
        assert wait_until(lambda: not emulator.client_connected)


def test_where_to_connect_and_misuse() -> None:
    emulator = DeviceEmulator(Echo())
    with pytest.raises(EmulatorError, match="not started"):
        _ = emulator.url
    with emulator:
        assert emulator.url == f"socket://127.0.0.1:{emulator.port}"
        with pytest.raises(EmulatorError, match="no pty"):
            _ = emulator.pty_path
        with pytest.raises(EmulatorError, match="already running"):
            emulator.start()
    with DeviceEmulator(Echo(), transport="pty") as pty:
        assert pty.url == pty.pty_path and pty.connections == 0
        with pytest.raises(EmulatorError, match="no TCP port"):
            _ = pty.port
    with pytest.raises(ValueError, match="transport"):
        DeviceEmulator(Echo(), transport="udp")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tick"):
        DeviceEmulator(Echo(), tick=0.0)
    with pytest.raises(ValueError, match="transport"):
        open_link("udp")  # type: ignore[arg-type]


def test_a_busy_port_is_a_clear_error() -> None:
    link = TcpLink("127.0.0.1", 0)
    try:
        with pytest.raises(EmulatorError, match=f"cannot listen on 127.0.0.1:{link.port}"):
            TcpLink("127.0.0.1", link.port)
    finally:
        link.close()


def test_a_failed_loop_is_reported_by_close_and_the_old_verb_still_works() -> None:
    class Broken(LinkServer):
        def _serve(self, link: TcpLink | PtyLink, stop: threading.Event) -> None:
            raise RuntimeError("the device core broke")

    server = Broken().start()
    assert wait_until(lambda: not server.running)
    with pytest.raises(EmulatorError, match="the device core broke"):
        server.stop()  # the older name of close()
    server.close()  # the failure was reported once


def test_serving_in_the_callers_thread_until_stopped() -> None:
    emulator = DeviceEmulator(Echo())
    stop = threading.Event()
    urls: list[str] = []
    thread = threading.Thread(target=emulator.run, args=(stop, urls.append))
    thread.start()
    try:
        assert wait_until(lambda: bool(urls))
        port = serial.serial_for_url(urls[0], timeout=0.05)
        port.write(b"ab")
        assert _read(port, 2) == b"AB"
        port.close()
    finally:
        stop.set()
        thread.join(5.0)
    assert not thread.is_alive()
    with pytest.raises(EmulatorError):
        _ = emulator.url  # the link was closed


def test_link_noise_drops_and_corrupts_at_its_rates() -> None:
    data = bytes(range(256)) * 40
    clean = LinkNoise(0.0, 0.0)
    assert clean.apply(data) == data
    noise = LinkNoise(0.1, 0.05, np.random.default_rng(1))
    out = noise.apply(data)
    assert len(out) == len(data) - noise.dropped
    assert noise.dropped == pytest.approx(0.1 * len(data), rel=0.15)
    assert noise.corrupted == pytest.approx(0.05 * len(out), rel=0.2)
    again = LinkNoise(0.1, 0.05, np.random.default_rng(1))
    assert again.apply(data) == out  # the same seed, the same noise
    with pytest.raises(ValueError, match="drop_rate"):
        LinkNoise(1.5, 0.0)
