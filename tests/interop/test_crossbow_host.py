"""A host in the manner of xbow4x (the ROS driver of the Crossbow AHRS400/DMU) talks to the emulated unit on a pty:
ping, version (26 bytes: header, 24 characters, checksum), serial number (6 bytes), angle mode, continuous mode
stopped by a G, and the baud-rate handshake. The host is written here from the manuals' byte layouts, with nothing
of Pluto's codec; xbow4x itself needs ROS and is not run."""

from __future__ import annotations

import time

import serial  # type: ignore[import-untyped]

from pluto.hardware.dmu.emulate import CrossbowDevice, DeviceEmulator
from tests.helpers import wait_until

GUARD = 5.0  # s: reads end on the bytes expected; this only guards against a hang
ANGLE_PACKET = 22


def read_exactly(port: serial.Serial, n: int) -> bytes:
    data = bytearray()
    deadline = time.monotonic() + GUARD
    while len(data) < n and time.monotonic() < deadline:
        data += port.read(n - len(data))
    return bytes(data)


def quiet(port: serial.Serial, seconds: float) -> bytes:
    """What arrives within ``seconds`` (the unit should send nothing)."""
    port.timeout = seconds
    data = port.read(4096)
    port.timeout = 0.05
    return bytes(data)


def test_an_xbow4x_style_host_queries_streams_and_stops_the_unit() -> None:
    device = CrossbowDevice(rate_hz=50.0)
    with (
        DeviceEmulator(device, transport="pty") as unit,
        serial.serial_for_url(unit.url, baudrate=38400, timeout=0.05) as port,
    ):
        port.write(b"R")
        assert read_exactly(port, 1) == b"H"
        port.write(b"v")
        version = read_exactly(port, 26)
        assert version[0] == 0xFF and len(version[1:25].decode("ascii")) == 24
        assert sum(version[1:25]) & 0xFF == version[25]
        port.write(b"S")
        serial_packet = read_exactly(port, 6)
        assert serial_packet[0] == 0xFF and int.from_bytes(serial_packet[1:5], "big") > 0
        port.write(b"a")
        assert read_exactly(port, 1) == b"A"
        port.write(b"C")
        stream = read_exactly(port, 5 * ANGLE_PACKET)
        assert len(stream) == 5 * ANGLE_PACKET and stream[0] == 0xFF
        port.write(b"G")  # xbow4x stops the continuous mode so
        wait_until(lambda: not device.continuous, timeout=GUARD)
        while quiet(port, 0.3):  # the packets already on the line
            pass
        assert quiet(port, 0.3) == b""  # polled: silent until asked
        port.write(b"G")
        assert len(read_exactly(port, ANGLE_PACKET)) == ANGLE_PACKET
        port.write(b"b")  # the baud-rate handshake: B, then "a" at the new rate, answered A
        assert read_exactly(port, 1) == b"B"
        port.write(b"a")
        assert read_exactly(port, 1) == b"A"
