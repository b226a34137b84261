"""The emulated LMS on the wire: requests a host sends, byte for byte, and the bytes a real LMS 200 answers.

Each exchange is written out in hex as it appears on the line (the host's telegram, then ACK and the scanner's
telegram, CRC included), from the LMS 2xx telegram listing and from recordings of real units as sicktoolbox and
other hosts see them.
"""

from __future__ import annotations

import pytest

from pluto.hardware.sick.device import LmsDevice
from pluto.hardware.sick.emulate import FixedScan


def exchange(request: str, device: LmsDevice | None = None) -> str:
    """The hex of what ``device`` (a fresh LMS 200 at 9600 baud) sends in answer to the hex ``request``."""
    device = device or LmsDevice(FixedScan([2.0] * 181))
    device.receive_data(bytes.fromhex(request), 10.0)
    return device.data_to_send(20.0).hex(" ")


def test_the_type_request_is_answered_with_the_model_and_version() -> None:
    # sicktoolbox's start-up asks for the type and looks for "LMS200;30106" in the answer
    reply = exchange("02 00 01 00 3a 1e 12")
    assert reply == (
        "06 02 80 16 00 ba "
        + b"LMS200;301063;V02.10".hex(" ")  # model, a digit (3 in cm), the software version
        + " 10 ac 23"
    )


def test_a_mode_change_carries_the_status_byte_of_a_real_lms200() -> None:
    # recorded from an LMS 200: the request mode (0x20 0x25) is acknowledged with status 0x10
    assert exchange("02 00 02 00 20 25 35 08") == "06 02 80 03 00 a0 00 10 16 0a"


def test_the_error_request_used_for_baud_detection_lists_no_errors() -> None:
    assert exchange("02 00 01 00 32 16 12") == "06 02 80 02 00 b2 10 3f 13"


def test_a_polled_scan_is_answered_with_the_current_measured_values() -> None:
    reply = bytes.fromhex(exchange("02 00 02 00 30 01 31 18"))
    # ACK, then B0: 181 points (0x00b5, the emulator's 180° at 1°) in cm, each 200 cm (c8 00), status 0x10
    assert reply[:8].hex(" ") == "06 02 80 6e 01 b0 b5 00"
    assert reply[8 : 8 + 362] == bytes.fromhex("c8 00") * 181
    assert reply[8 + 362] == 0x10 and len(reply) == 8 + 362 + 3


def test_the_power_on_rate_request_is_accepted() -> None:
    device = LmsDevice(FixedScan([2.0] * 181))
    exchange("02 00 02 00 20 40 50 08", device)  # 38400 baud
    assert device.baud == 38400
    # 0x66 0x01: keep the rate in force at power-on; answered E6, accepted (01), the setting (01)
    assert exchange("02 00 02 00 66 01 9d 4e", device) == "06 02 80 04 00 e6 01 01 10 cf fd"
    assert device.power_on_baud == 38400


def test_an_unknown_request_is_not_acknowledged_with_its_command() -> None:
    assert exchange("02 00 01 00 42 66 12") == "06 02 80 03 00 92 42 10 5a 2c"


@pytest.mark.parametrize("request_hex", ["02 00 01 00 3a 1e 12", "02 00 01 00 32 16 12"])
def test_the_scanner_answers_at_every_rate_it_is_switched_to(request_hex: str) -> None:
    device = LmsDevice(FixedScan([2.0] * 181))
    exchange("02 00 02 00 20 41 51 08", device)  # 19200 baud
    assert device.baud == 19200
    reply = bytes.fromhex(exchange(request_hex, device))
    assert reply[5] == bytes.fromhex(request_hex)[4] | 0x80  # its answer, not "not acknowledged" (0x92)
