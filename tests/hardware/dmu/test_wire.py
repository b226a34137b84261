"""The emulated Crossbow unit on the wire: the bytes a host sends and the bytes the unit answers, as the DMU/VG700
and AHRS400 manuals give them (and as the xbow4x host reads them)."""

from __future__ import annotations

import pytest

from pluto.hardware.dmu.codec import ANGLE_PACKET_SIZE, checksum
from pluto.hardware.dmu.emulate import CrossbowDevice


def answer(unit: CrossbowDevice, sent: bytes, now: float = 0.0) -> bytes:
    unit.step(now)
    unit.receive_data(sent)
    return unit.data_to_send()


def test_g_while_streaming_sends_one_packet_and_returns_to_polled_mode() -> None:
    unit = CrossbowDevice(rate_hz=100.0)
    answer(unit, b"C")
    unit.step(0.0)
    unit.step(0.1)
    assert len(unit.data_to_send()) >= 5 * ANGLE_PACKET_SIZE  # streaming
    assert len(answer(unit, b"G", 0.1)) == ANGLE_PACKET_SIZE
    unit.step(1.0)
    assert unit.data_to_send() == b""  # polled: nothing until the next G
    assert len(answer(unit, b"G", 1.0)) == ANGLE_PACKET_SIZE


def test_the_serial_number_packet() -> None:
    # the manual's example: serial number 9911750 is sent as 00 97 3D C6, after the header, before the checksum
    assert answer(CrossbowDevice(), b"S").hex(" ") == "ff 00 97 3d c6 9a"


def test_the_version_packet_is_24_ascii_characters_between_header_and_checksum() -> None:
    sent = answer(CrossbowDevice(), b"v")
    assert len(sent) == 26 and sent[0] == 0xFF
    assert sent[1:25] == b"DMU-VG400CA-100 Ver 3.1 " and sent[25] == checksum(sent[1:25])


def test_built_in_test_and_autobaud_answers() -> None:
    unit = CrossbowDevice()
    assert answer(unit, b"B") == b"b"  # built-in test
    assert answer(unit, b"b") == b"B"  # baud change: the host switches its port, then "a" at the new rate
    assert answer(unit, b"a") == b"A"


@pytest.mark.parametrize(("argument", "zeroings", "erased"), [(b"\x05", 1, 0), (b"\x00", 0, 1)])
def test_zeroing_the_rate_sensors_is_answered_z(argument: bytes, zeroings: int, erased: int) -> None:
    unit = CrossbowDevice()
    assert answer(unit, b"z" + argument) == b"Z"
    assert (unit.bias_zeroings, unit.biases_erased) == (zeroings, erased)


def test_the_erection_rate_takes_its_argument_byte_and_is_not_answered() -> None:
    unit = CrossbowDevice()
    assert answer(unit, bytes.fromhex("54 32")) == b""  # T<50>: 50 °/min
    assert unit.erection_rate == 50
    # the argument is binary: 0x52 ("R") after T is a rate of 82 °/min, not a ping
    assert answer(unit, b"TR") == b"" and unit.erection_rate == 82
    assert answer(unit, b"R") == b"H"
