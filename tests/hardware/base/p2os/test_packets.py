"""Framing, checksum and client commands, against the byte vectors captured from a real client."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.errors import PlutoError
from pluto.hardware.base.p2os import (
    MAX_STRING_LENGTH,
    ArgumentKind,
    Command,
    CommandPacket,
    LocalProtocolError,
    RemoteProtocolError,
    UnknownPacket,
    checksum,
    command_argument_kind,
    encode_command,
    frame,
    pack_byte_pair,
    parse_command,
    unframe,
    unpack_byte_pair,
)

# The byte vectors (captured from a real client) of docs/protocols/p2os.md.
REFERENCE_VECTORS: list[tuple[str, Command, int | None, str]] = [
    ("SYNC0/PULSE", Command.SYNC0, None, "FA FB 03 00 00 00"),
    ("SYNC1", Command.SYNC1, None, "FA FB 03 01 00 01"),
    ("SYNC2", Command.SYNC2, None, "FA FB 03 02 00 02"),
    ("OPEN 1", Command.OPEN, 1, "FA FB 06 01 3B 01 00 02 3B"),
    ("CONFIG 1", Command.CONFIG, 1, "FA FB 06 12 3B 01 00 13 3B"),
    ("ENABLE 1", Command.ENABLE, 1, "FA FB 06 04 3B 01 00 05 3B"),
    ("VEL 300", Command.VEL, 300, "FA FB 06 0B 3B 2C 01 37 3C"),
    ("VEL -150", Command.VEL, -150, "FA FB 06 0B 1B 96 00 A1 1B"),
    ("RVEL -20", Command.RVEL, -20, "FA FB 06 15 1B 14 00 29 1B"),
    ("SETV 2200", Command.SETV, 2200, "FA FB 06 06 3B 98 08 9E 43"),
    ("CLOSE 1", Command.CLOSE, 1, "FA FB 06 02 3B 01 00 03 3B"),
]
VECTOR_IDS = [name for name, *_ in REFERENCE_VECTORS]


@pytest.mark.parametrize(("name", "command", "argument", "wire"), REFERENCE_VECTORS, ids=VECTOR_IDS)
def test_reference_vector_encodes_exactly(name: str, command: Command, argument: int | None, wire: str) -> None:
    assert encode_command(command, argument) == bytes.fromhex(wire)
    assert CommandPacket(command, argument).encode() == bytes.fromhex(wire)


@pytest.mark.parametrize(("name", "command", "argument", "wire"), REFERENCE_VECTORS, ids=VECTOR_IDS)
def test_reference_vector_decodes_back(name: str, command: Command, argument: int | None, wire: str) -> None:
    decoded = parse_command(unframe(bytes.fromhex(wire)))
    assert decoded == CommandPacket(command, argument)
    assert isinstance(decoded, CommandPacket)
    assert type(decoded.argument) is type(argument)


def test_command_aliases_share_numbers() -> None:
    assert Command["PULSE"] is Command.SYNC0 and int(Command["PULSE"]) == 0
    assert Command["OPEN"] is Command.SYNC1 and int(Command["OPEN"]) == 1
    assert Command["CLOSE"] is Command.SYNC2 and int(Command["CLOSE"]) == 2
    assert encode_command(Command.PULSE) == encode_command(0)


# --------------------------------------------------------------------------------------------------- checksum


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param("0B", 0x000B, id="one byte: XORed into the low byte"),
        pytest.param("01 02", 0x0102, id="even: one big-endian pair"),
        pytest.param("01 02 03 04", 0x0406, id="even: two pairs"),
        pytest.param("01 02 03", 0x0101, id="odd: last byte XORed, not added"),
        pytest.param("01 02 03 04 F0", 0x04F6, id="odd: 0x0406 ^ 0xF0"),
        pytest.param("FF FF 00 02", 0x0001, id="even: sum kept to 16 bits"),
        pytest.param("FF FF 00 02 AB", 0x00AA, id="odd: overflow then XOR"),
        pytest.param("0B 1B 96 00", 0xA11B, id="VEL -150"),
        pytest.param("", 0x0000, id="empty"),
    ],
)
def test_checksum_edge_cases(payload: str, expected: int) -> None:
    assert checksum(bytes.fromhex(payload)) == expected


def test_checksum_is_sent_high_byte_first() -> None:
    packet = frame(bytes.fromhex("01 02 03"))
    assert packet == bytes.fromhex("FA FB 05 01 02 03 01 01")
    packet = frame(bytes.fromhex("12 34"))
    assert packet[-2:] == bytes.fromhex("12 34")


def test_sync2_reply_checksum_matches_the_capture() -> None:
    payload = b"\x02AMRISim\x00Pioneer\x00p3dx\x00"
    assert checksum(payload) == 0xEBBD


# --------------------------------------------------------------------------------------------------- framing


def test_frame_rejects_empty_and_oversized_payloads() -> None:
    with pytest.raises(LocalProtocolError):
        frame(b"")
    with pytest.raises(LocalProtocolError):
        frame(bytes(199))
    assert len(frame(bytes(198))) == 203


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        ("FA FC 03 00 00 00", "not a P2OS packet"),
        ("FA FB 02 00 00 00", "impossible byte count"),
        ("FA FB 04 00 00 00", "bytes follow it"),
        ("FA FB 03 01 00 02", "bad checksum"),
        ("FA FB", "not a P2OS packet"),
    ],
)
def test_unframe_is_strict(wire: str, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason):
        unframe(bytes.fromhex(wire))


def test_errors_belong_to_the_pluto_tree() -> None:
    assert issubclass(LocalProtocolError, PlutoError)
    assert issubclass(RemoteProtocolError, PlutoError)
    assert not issubclass(LocalProtocolError, RemoteProtocolError)


# --------------------------------------------------------------------------------------------------- arguments


def test_negative_argument_sends_the_absolute_value() -> None:
    assert encode_command(Command.VEL, -1)[3:7] == bytes.fromhex("0B 1B 01 00")
    assert encode_command(Command.VEL, -32768)[3:7] == bytes.fromhex("0B 1B 00 80")


def test_zero_is_positive_and_negative_zero_decodes_to_zero() -> None:
    assert encode_command(Command.VEL, 0)[3:7] == bytes.fromhex("0B 3B 00 00")
    assert parse_command(bytes.fromhex("0B 1B 00 00")) == CommandPacket(Command.VEL, 0)


def test_string_argument_has_a_length_byte_and_no_terminator() -> None:
    packet = encode_command(Command.SAY, b"\x05\x40")
    assert unframe(packet) == bytes.fromhex("0F 2B 02 05 40")
    assert encode_command(Command.POLLING, "abc") == encode_command(Command.POLLING, b"abc")


def test_longest_string_fills_the_largest_packet() -> None:
    packet = encode_command(Command.TTY2, bytes(MAX_STRING_LENGTH))
    assert packet[2] == 200
    assert parse_command(unframe(packet)) == CommandPacket(Command.TTY2, bytes(MAX_STRING_LENGTH))


def test_bool_argument_is_an_int() -> None:
    assert encode_command(Command.ENABLE, True) == encode_command(Command.ENABLE, 1)


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        pytest.param(Command.VEL, 65536, id="above the 16-bit range"),
        pytest.param(Command.VEL, -65536, id="below the 16-bit range"),
        pytest.param(Command.VEL, 10**9, id="far out of range"),
        pytest.param(Command.SAY, bytes(MAX_STRING_LENGTH + 1), id="string too long for a packet"),
        pytest.param(Command.TTY2, bytes(199), id="199 bytes: N would be 204"),
        pytest.param(14, None, id="unknown command number 14"),
        pytest.param(300, None, id="command number above a byte"),
        pytest.param(-1, None, id="negative command number"),
        pytest.param(224, None, id="SIM_SET_POSE: several values, not a single argument"),
        pytest.param(Command.VEL, b"300", id="string to an int command"),
        pytest.param(Command.POLLING, 3, id="int to a string command"),
        pytest.param(Command.VEL, 1.5, id="float argument"),
        pytest.param(Command.POLLING, "é", id="non-ASCII text"),
    ],
)
def test_encoding_misuse_raises_local_protocol_error(command: int, argument: object) -> None:
    with pytest.raises(LocalProtocolError):
        encode_command(command, argument)  # type: ignore[arg-type]


def test_command_packet_is_validated_on_creation() -> None:
    with pytest.raises(LocalProtocolError):
        CommandPacket(Command.VEL, 70000)
    with pytest.raises(LocalProtocolError):
        CommandPacket(99)  # type: ignore[arg-type]
    assert CommandPacket(11, 5).command is Command.VEL  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("0B 3B 2C", "truncated"),
        ("0B 3B 2C 01 00", "unexpected bytes"),
        ("0B 4C 2C 01", "unknown argument type"),
        ("0F 2B 05 01 02", "truncated"),
        ("0F 2B 01 01 02", "unexpected bytes"),
        ("0B 2B 01 41", "takes an integer"),
        ("03 3B 01 00", "takes a string"),
        ("", "empty"),
    ],
)
def test_parse_command_rejects_malformed_arguments(payload: str, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason):
        parse_command(bytes.fromhex(payload))


def test_unknown_command_number_decodes_as_unknown_packet() -> None:
    assert parse_command(bytes.fromhex("E0 01 02")) == UnknownPacket(0xE0, b"\x01\x02")
    assert UnknownPacket(0xE0, b"\x01\x02").encode() == frame(bytes.fromhex("E0 01 02"))


def test_byte_pairs_for_vel2_and_digout() -> None:
    assert pack_byte_pair(1, 2) == 0x0102
    assert pack_byte_pair(-1, 5) == -251  # 0xFF05 as a signed 16-bit value
    assert unpack_byte_pair(pack_byte_pair(-1, 5), signed=True) == (-1, 5)
    assert unpack_byte_pair(pack_byte_pair(0xFF, 0x80), signed=False) == (0xFF, 0x80)
    assert unpack_byte_pair(0xFF05, signed=True) == (-1, 5)  # sent as 0x3B by a non-ARIA client
    with pytest.raises(LocalProtocolError):
        pack_byte_pair(256, 0)


# --------------------------------------------------------------------------------------------------- round trips

UNIQUE_COMMANDS = sorted(set(Command))


@st.composite
def command_packets(draw: st.DrawFn) -> CommandPacket:
    command = draw(st.sampled_from(UNIQUE_COMMANDS))
    if command_argument_kind(command) is ArgumentKind.STRING:
        argument: int | bytes | None = draw(st.none() | st.binary(max_size=MAX_STRING_LENGTH))
    else:
        argument = draw(st.none() | st.integers(-32768, 32767))
    return CommandPacket(command, argument)


@given(command_packets())
def test_every_command_round_trips(packet: CommandPacket) -> None:
    wire = packet.encode()
    assert wire[:2] == b"\xfa\xfb" and wire[2] == len(wire) - 3 <= 200
    assert parse_command(unframe(wire)) == packet


@given(
    st.sampled_from([c for c in UNIQUE_COMMANDS if command_argument_kind(c) is ArgumentKind.INT]),
    st.integers(-65535, 65535),
)
def test_the_whole_wire_range_round_trips(command: Command, argument: int) -> None:
    assert parse_command(unframe(encode_command(command, argument))) == CommandPacket(command, argument)


@given(st.binary(min_size=1, max_size=198))
def test_frame_unframe_round_trip(payload: bytes) -> None:
    assert unframe(frame(payload)) == payload
