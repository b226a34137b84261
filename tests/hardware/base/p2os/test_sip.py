"""The robot's packets: SYNC replies, SIP (with and without the ARCOS extension), CONFIGpac, ENCODERpac, IOpac,
GRIPPERpac and SERAUX, decoded from hand-built bytes and round-tripped through their encoders."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.hardware.base.p2os import (
    ConfigPacket,
    EncoderPacket,
    GripperPacket,
    IoPacket,
    LocalProtocolError,
    RemoteProtocolError,
    SerauxPacket,
    Sip,
    SonarReading,
    SyncReply,
    UnknownPacket,
    frame,
    parse_server_packet,
    unframe,
)

SYNC2_REPLY = bytes.fromhex("FA FB 18 02") + b"AMRISim\x00Pioneer\x00p3dx\x00" + bytes.fromhex("EB BD")


def decode(packet: bytes) -> object:
    return parse_server_packet(unframe(packet))


# --------------------------------------------------------------------------------------------------- SYNC


def test_sync2_reply_from_a_simulator() -> None:
    reply = decode(SYNC2_REPLY)
    assert reply == SyncReply(2, name="AMRISim", robot_class="Pioneer", subclass="p3dx")
    assert isinstance(reply, SyncReply)
    assert reply.encode() == SYNC2_REPLY


@pytest.mark.parametrize(
    ("wire", "sync"), [("FA FB 03 00 00 00", 0), ("FA FB 03 01 00 01", 1), ("FA FB 03 02 00 02", 2)]
)
def test_sync_echoes_without_strings(wire: str, sync: int) -> None:
    reply = decode(bytes.fromhex(wire))
    assert reply == SyncReply(sync)
    assert SyncReply(sync).encode() == bytes.fromhex(wire)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x02AMRISim\x00Pioneer\x00p3dx", "no NUL terminator"),
        (b"\x02AMRISim\x00Pioneer\x00", "no NUL terminator"),
        (b"\x00\x01", "unexpected bytes"),
    ],
)
def test_malformed_sync_replies(payload: bytes, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason):
        parse_server_packet(payload)


def test_sync2_reply_with_bytes_after_the_strings() -> None:
    packet = frame(b"\x02A\x00B\x00C\x00\x01\x02")
    reply = decode(packet)
    assert reply == SyncReply(2, "A", "B", "C", extra=b"\x01\x02")
    assert isinstance(reply, SyncReply) and reply.encode() == packet


def test_sync_reply_validation() -> None:
    with pytest.raises(LocalProtocolError):
        SyncReply(3)
    with pytest.raises(LocalProtocolError):
        SyncReply(1, "a", "b", "c")
    with pytest.raises(LocalProtocolError):
        SyncReply(2, "a", None, "c")
    with pytest.raises(LocalProtocolError):
        SyncReply(2, "a\x00b", "c", "d")
    with pytest.raises(LocalProtocolError):
        SyncReply(2, extra=b"\x01")


# --------------------------------------------------------------------------------------------------- SIP

# A SIP written out byte by byte after the reference's offset table (offsets from the FA byte).
SIP_BODY = bytes.fromhex(
    "33"  # 3  type: moving
    "34 12"  # 4  Xpos 0x1234
    "FF 0F"  # 6  Ypos 0x0FFF
    "00 FC"  # 8  Th -1024
    "64 00"  # 10 L vel 100
    "9C FF"  # 12 R vel -100
    "7D"  # 14 battery 12.5 V
    "03 05"  # 15 stall/bumpers: left stall, rear bumper 0; right stall, front bumper 1
    "00 02"  # 17 control 512
    "23 00"  # 19 flags: motors, sonar array 0, e-stop
    "2D"  # 21 compass 90 deg
    "02"  # 22 two sonar readings
    "03 E8 03"  # 23 sonar 3: 1000
    "0C 88 13"  # 26 sonar 12: 5000
    "02 01"  # timer 0x0102
    "80 0F F0"  # analog, digin, digout
)
SIP_FIELDS = {
    "moving": True,
    "x": 0x1234,
    "y": 0x0FFF,
    "theta": -1024,
    "left_velocity": 100,
    "right_velocity": -100,
    "battery": 125,
    "stall_bumpers": 0x0503,
    "control": 512,
    "flags": 0x23,
    "compass": 45,
    "sonars": (SonarReading(3, 1000), SonarReading(12, 5000)),
    "timer": 0x0102,
    "analog": 0x80,
    "digin": 0x0F,
    "digout": 0xF0,
}
# battery_x10 25.3 V, charge state 2, rot vel -15.5 deg/s, fault flags 1, lat vel 0, temperature -5, SoC 87 %.
ARCOS_EXTENSION = bytes.fromhex("FD 00 02 65 FF 01 00 00 00 FB 57")
ARCOS_FIELDS = {
    "battery_x10": 253,
    "charge_state": 2,
    "rot_vel": -155,
    "fault_flags": 1,
    "lat_vel": 0,
    "temperature": -5,
    "state_of_charge": 87,
}


def test_standard_sip_fields_at_their_offsets() -> None:
    packet = frame(SIP_BODY)
    assert struct.unpack_from("<H", packet, 4) == (0x1234,)  # the reference's offset 4 is Xpos
    assert packet[22] == 2  # offset 22: number of sonar readings
    sip = decode(packet)
    assert sip == Sip(**SIP_FIELDS)  # type: ignore[arg-type]
    assert isinstance(sip, Sip)
    assert not sip.has_extension and sip.extra == b""
    assert sip.encode() == packet


def test_sip_flags_stall_and_bumpers() -> None:
    sip = Sip(**SIP_FIELDS)  # type: ignore[arg-type]
    assert sip.motors_enabled and sip.estop and sip.sonar_arrays == 1
    assert sip.left_stall and sip.right_stall
    assert sip.rear_bumpers == 1 and sip.front_bumpers == 2
    quiet = Sip()
    assert not (quiet.motors_enabled or quiet.estop or quiet.left_stall or quiet.right_stall)
    assert quiet.rear_bumpers == 0 and quiet.front_bumpers == 0


def test_sip_with_the_arcos_extension_and_later_fields() -> None:
    packet = frame(SIP_BODY + ARCOS_EXTENSION + b"\xaa\xbb")
    sip = decode(packet)
    assert sip == Sip(**SIP_FIELDS, **ARCOS_FIELDS, extra=b"\xaa\xbb")  # type: ignore[arg-type]
    assert isinstance(sip, Sip) and sip.has_extension
    assert sip.encode() == packet


def test_sip_with_part_of_the_extension() -> None:
    # battery x10, charge state, then one byte: not enough for the rotational velocity.
    packet = frame(SIP_BODY + bytes.fromhex("FD 00 02 65"))
    sip = decode(packet)
    assert isinstance(sip, Sip)
    assert (sip.battery_x10, sip.charge_state, sip.rot_vel) == (253, 2, None)
    assert sip.extra == b"\x65"
    assert sip.encode() == packet


def test_stopped_sip_type_and_position_bit_15() -> None:
    body = bytearray(SIP_BODY)
    body[0] = 0x32
    body[2] |= 0x80  # bit 15 of Xpos is not part of the 15-bit counter
    sip = decode(frame(bytes(body)))
    assert isinstance(sip, Sip)
    assert not sip.moving and sip.x == 0x1234


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(SIP_BODY[:-1], "truncated at digout", id="no digout"),
        pytest.param(SIP_BODY[:10], "truncated", id="cut in the fixed fields"),
        pytest.param(SIP_BODY[:19] + b"\x05" + SIP_BODY[20:], "5 sonar readings announced", id="sonar count"),
    ],
)
def test_malformed_sips(body: bytes, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason):
        parse_server_packet(body)


@pytest.mark.parametrize(
    "fields",
    [
        {"x": 0x8000},
        {"y": -1},
        {"theta": 40000},
        {"battery": 256},
        {"moving": 1},
        {"rot_vel": 5},  # an extension field without the ones before it
        {"battery_x10": 120, "extra": b"\x01"},  # charge_state would read that byte
        {"sonars": tuple(SonarReading(i, i) for i in range(60))},  # does not fit one packet
        {"sonars": ((1, 2),)},
    ],
)
def test_sip_validation(fields: dict[str, object]) -> None:
    with pytest.raises(LocalProtocolError):
        Sip(**fields)  # type: ignore[arg-type]


EXTENSION_SPEC = [
    ("battery_x10", 0, 0xFFFF, 2),
    ("charge_state", 0, 0xFF, 1),
    ("rot_vel", -0x8000, 0x7FFF, 2),
    ("fault_flags", 0, 0xFFFF, 2),
    ("lat_vel", -0x8000, 0x7FFF, 2),
    ("temperature", -0x80, 0x7F, 1),
    ("state_of_charge", -0x80, 0x7F, 1),
]
U8 = st.integers(0, 0xFF)
U16 = st.integers(0, 0xFFFF)
S16 = st.integers(-0x8000, 0x7FFF)


@st.composite
def sips(draw: st.DrawFn) -> Sip:
    present = draw(st.integers(0, len(EXTENSION_SPEC)))
    extension = {name: draw(st.integers(low, high)) for name, low, high, _ in EXTENSION_SPEC[:present]}
    if present == len(EXTENSION_SPEC):
        extra = draw(st.binary(max_size=12))
    else:
        extra = draw(st.binary(max_size=EXTENSION_SPEC[present][3] - 1))
    return Sip(
        moving=draw(st.booleans()),
        x=draw(st.integers(0, 0x7FFF)),
        y=draw(st.integers(0, 0x7FFF)),
        theta=draw(S16),
        left_velocity=draw(S16),
        right_velocity=draw(S16),
        battery=draw(U8),
        stall_bumpers=draw(U16),
        control=draw(S16),
        flags=draw(U16),
        compass=draw(U8),
        sonars=tuple(draw(st.lists(st.builds(SonarReading, U8, U16), max_size=50))),
        timer=draw(U16),
        analog=draw(U8),
        digin=draw(U8),
        digout=draw(U8),
        extra=extra,
        **extension,
    )


@given(sips())
def test_sip_round_trip(sip: Sip) -> None:
    packet = sip.encode()
    assert len(packet) <= 203
    assert decode(packet) == sip


# --------------------------------------------------------------------------------------------------- CONFIGpac

CONFIG_U8_FIELDS = {"four_mots", "sip_cycle", "host_baud", "aux1_baud", "rear_sonar", "normal_mpacs"}
CONFIG_STRING_FIELDS = ("robot_type", "subtype", "serial", "name")
CONFIG_NUMBER_FIELDS = [
    name for name in ConfigPacket.__dataclass_fields__ if name not in CONFIG_STRING_FIELDS and name != "extra"
]


def test_config_packet_from_hand_built_bytes() -> None:
    body = b"".join(
        (
            b"\x20Pioneer\x00p3dx\x00SN4242\x00",
            struct.pack("<B5H", 1, 360, 2200, 300, 1000, 1000),  # 4mots, RotVelTop .. PwmMax
            b"Robbie\x00",
            struct.pack("<3B", 100, 0, 1),  # SIPcycle, HostBaud, Aux1Baud
            struct.pack("<HHB", 0, 0x00FF, 0xFF),  # HasGripper, FrontSonar, RearSonar
            struct.pack("<3H", 110, 16384, 2000),  # LowBattery, RevCount, Watchdog
            struct.pack("<B", 1),  # NormalMPacs
            struct.pack("<16H", *range(1, 17)),  # StallVal .. TransKI
            b"\x01\x02\x03",  # appended by later firmware
        )
    )
    packet = frame(body)
    config = decode(packet)
    assert isinstance(config, ConfigPacket)
    assert (config.robot_type, config.subtype, config.serial, config.name) == ("Pioneer", "p3dx", "SN4242", "Robbie")
    assert (config.four_mots, config.rot_vel_top, config.trans_vel_top, config.pwm_max) == (1, 360, 2200, 1000)
    assert (config.sip_cycle, config.aux1_baud, config.front_sonar, config.rear_sonar) == (100, 1, 0xFF, 0xFF)
    assert (config.low_battery, config.rev_count, config.watchdog, config.normal_mpacs) == (110, 16384, 2000, 1)
    assert (config.stall_val, config.trans_vel_max, config.trans_ki) == (1, 6, 16)
    assert config.extra == b"\x01\x02\x03"
    assert config.encode() == packet


def test_truncated_config_packet() -> None:
    body = ConfigPacket(robot_type="Pioneer").payload()
    with pytest.raises(RemoteProtocolError, match="trans_ki"):
        parse_server_packet(body[:-1])
    with pytest.raises(RemoteProtocolError, match="NUL"):
        parse_server_packet(b"\x20Pioneer")


TEXT = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=12)


@st.composite
def config_packets(draw: st.DrawFn) -> ConfigPacket:
    values: dict[str, object] = {name: draw(TEXT) for name in CONFIG_STRING_FIELDS}
    for name in CONFIG_NUMBER_FIELDS:
        values[name] = draw(U8 if name in CONFIG_U8_FIELDS else U16)
    values["extra"] = draw(st.binary(max_size=20))
    return ConfigPacket(**values)  # type: ignore[arg-type]


@given(config_packets())
def test_config_packet_round_trip(config: ConfigPacket) -> None:
    assert decode(config.encode()) == config


def test_config_packet_validation() -> None:
    with pytest.raises(LocalProtocolError):
        ConfigPacket(watchdog=70000)
    with pytest.raises(LocalProtocolError):
        ConfigPacket(name="a\x00b")
    with pytest.raises(LocalProtocolError):
        ConfigPacket(name="€")
    with pytest.raises(LocalProtocolError):
        ConfigPacket(name="x" * 150)


# --------------------------------------------------------------------------------------------------- others


def test_encoder_packet_bytes() -> None:
    packet = EncoderPacket(-2, 0x01020304).encode()
    assert unframe(packet) == bytes.fromhex("90 FE FF FF FF 04 03 02 01")
    assert decode(packet) == EncoderPacket(-2, 0x01020304)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))
def test_encoder_packet_round_trip(left: int, right: int) -> None:
    assert decode(EncoderPacket(left, right).encode()) == EncoderPacket(left, right)


def test_io_packet_bytes() -> None:
    packet = IoPacket((0x12,), (0x34, 0x56), (0x0102,)).encode()
    assert unframe(packet) == bytes.fromhex("F0 01 12 02 34 56 01 02 01")
    assert decode(packet) == IoPacket((0x12,), (0x34, 0x56), (0x0102,))


@given(
    st.lists(U8, max_size=30).map(tuple),
    st.lists(U8, max_size=30).map(tuple),
    st.lists(U16, max_size=60).map(tuple),
)
def test_io_packet_round_trip(
    digital_inputs: tuple[int, ...], digital_outputs: tuple[int, ...], analog_inputs: tuple[int, ...]
) -> None:
    packet = IoPacket(digital_inputs, digital_outputs, analog_inputs)
    assert decode(packet.encode()) == packet


def test_gripper_and_seraux_packets() -> None:
    gripper = GripperPacket(gripper_type=2, switches=0x41, grasp_time=10)
    assert unframe(gripper.encode()) == bytes.fromhex("E0 02 41 0A")
    assert decode(gripper.encode()) == gripper
    for port, packet_type in ((1, 0xB0), (2, 0xB8)):
        seraux = SerauxPacket(b"\x00hello\xff", port=port)
        assert unframe(seraux.encode())[0] == packet_type
        assert decode(seraux.encode()) == seraux
    assert decode(SerauxPacket(b"").encode()) == SerauxPacket(b"")
    with pytest.raises(LocalProtocolError):
        SerauxPacket(b"x", port=3)
    with pytest.raises(LocalProtocolError):
        SerauxPacket(bytes(198))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("90 01 02 03 04 05 06 07", "truncated"),
        ("90 01 02 03 04 05 06 07 08 09", "unexpected bytes"),
        ("F0 03 01 02", "truncated"),
        ("F0 00 00 01 05", "truncated"),
        ("F0 00 00 00 00", "unexpected bytes"),
        ("E0 01 02", "truncated"),
        ("", "empty"),
    ],
)
def test_malformed_other_packets(payload: str, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason):
        parse_server_packet(bytes.fromhex(payload))


def test_unknown_server_packet_type_is_kept() -> None:
    packet = frame(bytes.fromhex("98 01 02 03"))  # gyro: not decoded by this codec
    assert decode(packet) == UnknownPacket(0x98, b"\x01\x02\x03")
