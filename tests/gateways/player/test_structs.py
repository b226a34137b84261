"""Every Player 1.5 struct against its byte layout and size in docs/protocols/player.md.

The expected bytes are packed here with the reference's format strings, independently of the codec's own, and the
sizes are the reference's numbers.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.errors import LocalProtocolError, RemoteProtocolError
from pluto.gateways.player.structs import (
    AuthRequest,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceAddress,
    DeviceList,
    DeviceReply,
    DeviceRequest,
    DriverInfo,
    LaserConfig,
    LaserData,
    LaserGeometry,
    MotorPower,
    NameService,
    PidRequest,
    Position3dCommand,
    Position3dData,
    PositionCommand,
    PositionData,
    PositionGeometry,
    PositionMode,
    ResetOdometry,
    RmpConfig,
    SetOdometry,
    SonarData,
    SonarGeometry,
    SonarPower,
    SpeedProfile,
    VelocityMode,
    parse_command,
    parse_config,
    parse_player_request,
)

# (struct value, reference format, the values in the reference's order, reference size)
FIXED: list[tuple[Any, str, tuple[Any, ...], int]] = [
    (DataRequest(), ">H", (4,), 2),
    (DataModeRequest(mode=3), ">HB", (5, 3), 3),
    (DataFreqRequest(frequency=25), ">HH", (6, 25), 4),
    (DeviceRequest(6, 1, b"a"), ">HHHc", (3, 6, 1, b"a"), 7),
    (PositionData(-1000, 2000, -90, 300, -4, 15, 1), ">6iB", (-1000, 2000, -90, 300, -4, 15, 1), 25),
    (
        PositionCommand(10, -20, 30, -40, 50, -60, 1, 1),
        ">6iBB",
        (10, -20, 30, -40, 50, -60, 1, 1),
        26,
    ),
    (PositionGeometry(1, 100, 200, 359, 500, 600), ">B3H2H", (1, 100, 200, 359, 500, 600), 11),
    (MotorPower(2, 1), ">BB", (2, 1), 2),
    (VelocityMode(3, 1), ">BB", (3, 1), 2),
    (ResetOdometry(4), ">B", (4,), 1),
    (PositionMode(5, 1), ">BB", (5, 1), 2),
    (PidRequest(6, 100, -2, 30), ">B3i", (6, 100, -2, 30), 13),
    (PidRequest(7, 1, 2, 3), ">B3i", (7, 1, 2, 3), 13),
    (SpeedProfile(8, 500, -300), ">Bhh", (8, 500, -300), 5),
    (SetOdometry(9, -1500, 2500, 45), ">B3i", (9, -1500, 2500, 45), 13),
    (RmpConfig(55, 65535), ">BH", (55, 65535), 3),
    (
        Position3dData(1, -2, 3, 3600, -7200, 648000, 10, 20, 30, -40, 50, -60, 1),
        ">12iB",
        (1, -2, 3, 3600, -7200, 648000, 10, 20, 30, -40, 50, -60, 1),
        49,
    ),
    (
        Position3dCommand(1, 2, 3, 4294967295, 5, 1296000, -7, 8, 9, 10, -11, 12),
        ">3i3I6i",
        (1, 2, 3, 4294967295, 5, 1296000, -7, 8, 9, 10, -11, 12),
        48,
    ),
    (LaserGeometry(1, 250, -10, -90, 155, 185), ">B3h2h", (1, 250, -10, -90, 155, 185), 11),
    (LaserConfig(2, -4500, 4500, 100, 10, 1), ">BhhHHB", (2, -4500, 4500, 100, 10, 1), 10),
    (LaserConfig(3, -9000, 9000, 25, 1, 0), ">BhhHHB", (3, -9000, 9000, 25, 1, 0), 10),
    (SonarPower(2, 0), ">BB", (2, 0), 2),
]


@pytest.mark.parametrize(("value", "fmt", "fields", "size"), FIXED, ids=lambda x: type(x).__name__)
def test_fixed_structs_match_the_reference(value: Any, fmt: str, fields: tuple[Any, ...], size: int) -> None:
    expected = struct.pack(fmt, *fields)
    assert struct.calcsize(fmt) == size == type(value).SIZE
    assert value.pack() == expected
    assert type(value).unpack(expected) == value
    with pytest.raises(RemoteProtocolError, match="bytes"):
        type(value).unpack(expected + b"\0")
    with pytest.raises(RemoteProtocolError, match="bytes"):
        type(value).unpack(expected[:-1])


def _name(text: str) -> bytes:
    return text.encode().ljust(64, b"\0")


def test_device_list_is_388_bytes() -> None:
    devices = (DeviceAddress(4, 0, 6665), DeviceAddress(6, 0, 6665), DeviceAddress(30, 2, 6665))
    expected = struct.pack(">HH", 1, 3) + b"".join(struct.pack(">HHH", d.code, d.index, d.port) for d in devices)
    expected += bytes(6 * 61)
    packed = DeviceList(devices).pack()
    assert len(packed) == 388 == DeviceList.SIZE and packed == expected
    assert DeviceList.unpack(packed) == DeviceList(devices)
    with pytest.raises(LocalProtocolError, match="at most 64"):
        DeviceList(tuple(DeviceAddress(4, i, 1) for i in range(65))).pack()
    with pytest.raises(RemoteProtocolError, match="over 64"):
        DeviceList.unpack(struct.pack(">HH", 1, 65) + bytes(384))


def test_driver_info_device_reply_and_name_service() -> None:
    info = DriverInfo(6, 0, 6665, "pluto-sick")
    assert info.pack() == struct.pack(">HHHH", 2, 6, 0, 6665) + _name("pluto-sick")
    assert len(info.pack()) == 72 and DriverInfo.unpack(info.pack()) == info
    reply = DeviceReply(4, 0, b"e", "pluto-base")
    assert reply.pack() == struct.pack(">HHHc", 3, 4, 0, b"e") + _name("pluto-base")
    assert len(reply.pack()) == 71 and DeviceReply.unpack(reply.pack()) == reply
    names = NameService("robot-7", 6665)
    assert names.pack() == struct.pack(">H64sH", 8, _name("robot-7"), 6665)
    assert len(names.pack()) == 68 and NameService.unpack(names.pack()) == names
    with pytest.raises(LocalProtocolError, match="longer than 64"):
        DriverInfo(6, 0, 0, "x" * 65).pack()


def test_auth_request_pads_its_key() -> None:
    auth = AuthRequest(b"s3cret")
    assert auth.pack() == struct.pack(">H32s", 7, b"s3cret") and len(auth.pack()) == 34
    assert AuthRequest.unpack(auth.pack()) == auth
    with pytest.raises(LocalProtocolError):
        AuthRequest(b"k" * 33).pack()


def test_laser_data_is_1213_bytes_whatever_the_count() -> None:
    ranges = tuple(range(100, 100 + 361))
    data = LaserData(-9000, 9000, 50, 10, ranges, tuple(i % 3 for i in range(361)))
    expected = struct.pack(">hhHHH", -9000, 9000, 50, 10, 361)
    expected += struct.pack(">361H", *ranges) + bytes(2 * 40)
    expected += bytes(i % 3 for i in range(361)) + bytes(40)
    assert len(data.pack()) == 1213 == LaserData.SIZE and data.pack() == expected
    assert LaserData.unpack(expected) == data
    empty = LaserData(0, 0, 100, 1, (), ())
    assert len(empty.pack()) == 1213 and LaserData.unpack(empty.pack()) == empty
    no_intensity = LaserData(-100, 100, 100, 1, (5, 6, 7))
    assert LaserData.unpack(no_intensity.pack()).intensity == (0, 0, 0)
    with pytest.raises(LocalProtocolError, match="401"):
        LaserData(0, 0, 1, 1, (0,) * 402).pack()
    with pytest.raises(LocalProtocolError, match="out of range"):
        LaserData(0, 0, 1, 1, (70000,)).pack()


def test_sonar_data_and_geometry() -> None:
    sonar = SonarData((100, 200, 65535))
    expected = struct.pack(">H3H", 3, 100, 200, 65535) + bytes(2 * 61)
    assert len(sonar.pack()) == 130 and sonar.pack() == expected
    assert SonarData.unpack(expected) == sonar
    poses = ((115, 0, 0), (-100, 60, 150), (0, -200, -90))
    geom = SonarGeometry(poses)
    expected = struct.pack(">BH9h", 1, 3, *(v for p in poses for v in p)) + bytes(6 * 61)
    assert len(geom.pack()) == 387 and geom.pack() == expected
    assert SonarGeometry.unpack(expected) == geom
    with pytest.raises(RemoteProtocolError, match="over 64"):
        SonarData.unpack(struct.pack(">H", 65) + bytes(128))


@given(st.tuples(*(st.integers(-(2**31), 2**31 - 1) for _ in range(6))), st.integers(0, 255))
def test_position_data_round_trips(values: tuple[int, ...], stall: int) -> None:
    data = PositionData(*values, stall)
    assert PositionData.unpack(data.pack()) == data


def test_out_of_range_fields_are_the_callers_mistake() -> None:
    with pytest.raises(LocalProtocolError, match="out of range"):
        PositionData(xpos=2**31).pack()
    with pytest.raises(LocalProtocolError, match="out of range"):
        PositionGeometry(pose_x=-1).pack()


# ------------------------------------------------------------------------------------------ parsing requests


def test_player_requests_parse_by_subtype_and_size() -> None:
    assert parse_player_request(struct.pack(">H", 1)) == DeviceList()
    for garbage in (struct.pack(">HH", 1, 0x1234) + bytes(384), struct.pack(">H", 1) + b"\xff" * 8158):
        assert parse_player_request(garbage) == DeviceList()  # a DEVLIST request is its subtype alone
    assert parse_player_request(DeviceRequest(4, 0, b"r").pack()) == DeviceRequest(4, 0, b"r")
    assert parse_player_request(DataModeRequest(mode=1).pack()) == DataModeRequest(mode=1)
    assert parse_player_request(NameService("x", 0).pack()) == NameService("x", 0)
    for bad, reason in [
        (b"", "u16 subtype"),
        (b"\x00", "u16 subtype"),
        (struct.pack(">H", 99), "unknown player request subtype 99"),
        (struct.pack(">HB", 3, 1), "7 bytes, got 3"),
        (struct.pack(">HBB", 5, 1, 0), "3 bytes, got 4"),
        (struct.pack(">H", 6), "4 bytes, got 2"),
    ]:
        with pytest.raises(RemoteProtocolError, match=reason):
            parse_player_request(bad)


def test_config_requests_parse_by_device_subtype_and_size() -> None:
    assert parse_config(4, b"\x01") == PositionGeometry()
    assert parse_config(4, PositionGeometry(1, 1, 2, 3, 4, 5).pack()) == PositionGeometry(1, 1, 2, 3, 4, 5)
    assert parse_config(30, b"\x01") == PositionGeometry()
    assert parse_config(4, SetOdometry(9, 1, 2, 3).pack()) == SetOdometry(9, 1, 2, 3)
    assert parse_config(4, PidRequest(7, 1, 2, 3).pack()) == PidRequest(7, 1, 2, 3)
    assert parse_config(4, RmpConfig(57, 2).pack()) == RmpConfig(57, 2)
    assert parse_config(6, b"\x03") == LaserConfig(subtype=3)
    assert parse_config(6, LaserConfig(2, -10, 10, 100, 10, 0).pack()) == LaserConfig(2, -10, 10, 100, 10, 0)
    assert parse_config(5, b"\x01") == SonarGeometry()
    for device, payload, reason in [
        (4, b"", "u8 subtype"),
        (4, b"\x01\x00", "1 or 11 bytes"),
        (4, b"\x09" + bytes(11), "13 bytes, got 12"),
        (4, b"\x0a", "unknown position request subtype 10"),
        (30, b"\x09" + bytes(12), "unknown position3d request subtype 9"),
        (6, b"\x02", "10 bytes, got 1"),
        (6, b"\x04\x01", "unknown laser request subtype 4"),
        (5, b"\x03", "unknown sonar request subtype 3"),
        (13, b"\x01", "device 13 takes no configuration"),
    ]:
        with pytest.raises(RemoteProtocolError, match=reason):
            parse_config(device, payload)


def test_commands_parse_by_device_and_size() -> None:
    assert parse_command(4, PositionCommand(xspeed=100).pack()) == PositionCommand(xspeed=100)
    assert parse_command(30, Position3dCommand(yaw=5).pack()) == Position3dCommand(yaw=5)
    with pytest.raises(RemoteProtocolError, match="26 bytes, got 25"):
        parse_command(4, bytes(25))
    with pytest.raises(RemoteProtocolError, match="takes no commands"):
        parse_command(6, bytes(26))
