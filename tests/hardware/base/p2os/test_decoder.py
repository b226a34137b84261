"""The streaming decoder: chunking, resynchronisation, drop counting, the buffer cap, both roles."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto.hardware.base.p2os import (
    MAX_PACKET_SIZE,
    NEED_DATA,
    Command,
    CommandPacket,
    ConfigPacket,
    ConnectionClosed,
    DecoderStatistics,
    EncoderPacket,
    Event,
    IoPacket,
    LocalProtocolError,
    P2osDecoder,
    Role,
    Sip,
    SonarReading,
    SyncReply,
    UnknownPacket,
    encode_command,
    frame,
)

SYNC2_REPLY = bytes.fromhex("FA FB 18 02") + b"AMRISim\x00Pioneer\x00p3dx\x00" + bytes.fromhex("EB BD")
REFERENCE_COMMANDS = bytes.fromhex(
    "FA FB 03 00 00 00"
    "FA FB 03 01 00 01"
    "FA FB 03 02 00 02"
    "FA FB 06 01 3B 01 00 02 3B"
    "FA FB 06 12 3B 01 00 13 3B"
    "FA FB 06 04 3B 01 00 05 3B"
    "FA FB 06 0B 3B 2C 01 37 3C"
    "FA FB 06 0B 1B 96 00 A1 1B"
    "FA FB 06 15 1B 14 00 29 1B"
    "FA FB 06 06 3B 98 08 9E 43"
    "FA FB 06 02 3B 01 00 03 3B"
)
REFERENCE_EVENTS = [
    CommandPacket(Command.SYNC0),
    CommandPacket(Command.SYNC1),
    CommandPacket(Command.SYNC2),
    CommandPacket(Command.OPEN, 1),
    CommandPacket(Command.CONFIG, 1),
    CommandPacket(Command.ENABLE, 1),
    CommandPacket(Command.VEL, 300),
    CommandPacket(Command.VEL, -150),
    CommandPacket(Command.RVEL, -20),
    CommandPacket(Command.SETV, 2200),
    CommandPacket(Command.CLOSE, 1),
]


def drain(decoder: P2osDecoder) -> list[Event]:
    return list(decoder.events())


def decode_all(data: bytes, role: Role = "client", *, chunks: Sequence[int] = (), close: bool = False) -> list[Event]:
    """Feed ``data`` cut at the ``chunks`` offsets (or whole), and collect every event."""
    decoder = P2osDecoder(role)
    events: list[Event] = []
    cuts = [0, *sorted(chunks), len(data)]
    for start, end in itertools.pairwise(cuts):
        if end > start:
            decoder.receive_data(data[start:end])
            events += drain(decoder)
    if close:
        decoder.receive_data(b"")
        events += drain(decoder)
    return events


def random_sip(rng: np.random.Generator) -> Sip:
    def integer(low: int, high: int) -> int:
        return int(rng.integers(low, high, endpoint=True))

    arcos = {"battery_x10": integer(0, 300), "charge_state": integer(0, 4)} if rng.random() < 0.5 else {}
    return Sip(
        moving=bool(rng.random() < 0.5),
        x=integer(0, 0x7FFF),
        y=integer(0, 0x7FFF),
        theta=integer(-2048, 2047),
        left_velocity=integer(-2000, 2000),
        right_velocity=integer(-2000, 2000),
        battery=integer(100, 140),
        flags=integer(0, 0x3F),
        sonars=tuple(SonarReading(integer(0, 15), integer(0, 5000)) for _ in range(integer(0, 8))),
        **arcos,  # type: ignore[arg-type]
    )


def random_server_packet(rng: np.random.Generator) -> Event:
    kind = rng.random()
    if kind < 0.7:
        return random_sip(rng)
    if kind < 0.8:
        return EncoderPacket(int(rng.integers(-(2**31), 2**31 - 1)), int(rng.integers(-(2**31), 2**31 - 1)))
    if kind < 0.9:
        return IoPacket(tuple(int(b) for b in rng.integers(0, 256, size=2)), (1,), (int(rng.integers(0, 1024)),))
    if kind < 0.95:
        return ConfigPacket(robot_type="Pioneer", subtype="p3dx", serial=str(rng.integers(1000)), watchdog=2000)
    return SyncReply(2, "AMRISim", "Pioneer", "p3dx")


def random_command(rng: np.random.Generator) -> CommandPacket:
    command = Command([Command.VEL, Command.RVEL, Command.PULSE, Command.SAY, Command.HEAD][int(rng.integers(5))])
    if command is Command.PULSE:
        return CommandPacket(command)
    if command is Command.SAY:
        return CommandPacket(command, bytes(rng.integers(0, 256, size=int(rng.integers(0, 40))).astype(np.uint8)))
    return CommandPacket(command, int(rng.integers(-32768, 32767)))


def encode(event: Event) -> bytes:
    assert not isinstance(event, ConnectionClosed)
    return event.encode()


def assert_accounted(decoder: P2osDecoder, packet_bytes: int) -> None:
    stats = decoder.statistics()
    assert stats.bytes == stats.garbage_bytes + packet_bytes + decoder.buffered_bytes


MIXED_SERVER_STREAM_EVENTS: list[Event] = [
    SyncReply(0),
    SyncReply(1),
    SyncReply(2, "AMRISim", "Pioneer", "p3dx"),
    ConfigPacket(robot_type="Pioneer", subtype="p3dx", serial="42", watchdog=2000, extra=b"\x01"),
    random_sip(np.random.default_rng(1)),
    random_sip(np.random.default_rng(2)),
    EncoderPacket(123456, -654321),
    IoPacket((1, 2), (3,), (512, 1023)),
    UnknownPacket(0x98, b"\x10\x20"),
]
MIXED_SERVER_STREAM = b"".join(encode(event) for event in MIXED_SERVER_STREAM_EVENTS)


# --------------------------------------------------------------------------------------------------- basics


def test_no_data_means_need_data() -> None:
    decoder = P2osDecoder()
    assert decoder.next_event() is NEED_DATA
    assert decoder.statistics() == DecoderStatistics()
    decoder.receive_data(SYNC2_REPLY[:-1])
    assert decoder.next_event() is NEED_DATA
    decoder.receive_data(SYNC2_REPLY[-1:])
    assert decoder.next_event() == SyncReply(2, "AMRISim", "Pioneer", "p3dx")
    assert decoder.next_event() is NEED_DATA


def test_whole_stream_decodes_every_packet() -> None:
    decoder = P2osDecoder("client")
    decoder.receive_data(MIXED_SERVER_STREAM)
    assert drain(decoder) == MIXED_SERVER_STREAM_EVENTS
    stats = decoder.statistics()
    assert stats.packets == len(MIXED_SERVER_STREAM_EVENTS)
    assert stats.bytes == len(MIXED_SERVER_STREAM)
    assert stats.unknown_type == 1
    assert (stats.garbage_bytes, stats.bad_checksum, stats.bad_length, stats.malformed) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("role", "stream", "expected"),
    [
        ("client", MIXED_SERVER_STREAM, MIXED_SERVER_STREAM_EVENTS),
        ("robot", REFERENCE_COMMANDS, REFERENCE_EVENTS),
    ],
)
def test_one_byte_at_a_time_equals_whole(role: Role, stream: bytes, expected: list[Event]) -> None:
    whole = decode_all(stream, role)
    bytewise = decode_all(stream, role, chunks=range(1, len(stream)))
    assert whole == bytewise == expected


@given(st.lists(st.integers(0, len(MIXED_SERVER_STREAM)), max_size=30))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    assert decode_all(MIXED_SERVER_STREAM, chunks=cuts) == MIXED_SERVER_STREAM_EVENTS


def test_header_split_across_chunks() -> None:
    decoder = P2osDecoder()
    decoder.receive_data(b"\x00\x00" + SYNC2_REPLY[:1])
    assert decoder.buffered_bytes == 1  # the FA waits for its FB
    decoder.receive_data(SYNC2_REPLY[1:])
    assert drain(decoder) == [SyncReply(2, "AMRISim", "Pioneer", "p3dx")]
    assert decoder.statistics().garbage_bytes == 2


# --------------------------------------------------------------------------------------------------- garbage


LEADING_GARBAGE = bytes.fromhex("00 FB FA 13 FA FA FB 02 FA FB FF 55 FA FB 05 01 02 03 04 05 66")


def test_leading_garbage_is_skipped_and_counted() -> None:
    decoder = P2osDecoder("robot")
    decoder.receive_data(LEADING_GARBAGE + REFERENCE_COMMANDS)
    assert drain(decoder) == REFERENCE_EVENTS
    stats = decoder.statistics()
    assert stats.garbage_bytes == len(LEADING_GARBAGE)
    assert stats.bad_length == 2  # N=0x02 and N=0xFF
    assert stats.bad_checksum == 1  # the FA FB 05 ... candidate
    assert_accounted(decoder, len(REFERENCE_COMMANDS))


def test_trailing_garbage_and_end_of_stream() -> None:
    decoder = P2osDecoder("client")
    trailing = b"\x11\x22" + bytes.fromhex("FA FB 20 32 01 02")  # ends in an incomplete packet
    decoder.receive_data(MIXED_SERVER_STREAM + trailing)
    assert drain(decoder) == MIXED_SERVER_STREAM_EVENTS
    assert decoder.buffered_bytes == 6
    decoder.receive_data(b"")
    assert decoder.buffered_bytes == 0
    assert decoder.next_event() == ConnectionClosed()
    assert decoder.next_event() == ConnectionClosed()  # again and again
    assert decoder.statistics().garbage_bytes == len(trailing)
    assert_accounted(decoder, len(MIXED_SERVER_STREAM))


def test_bad_checksum_and_bad_length_are_counted_and_dropped() -> None:
    good = encode_command(Command.VEL, 300)
    bad_checksum = good[:-1] + bytes((good[-1] ^ 0x01,))
    too_short = bytes.fromhex("FA FB 02 00 00")
    too_long = bytes.fromhex("FA FB C9") + bytes(201)
    decoder = P2osDecoder("robot")
    decoder.receive_data(bad_checksum + good + too_short + good + too_long + good)
    assert drain(decoder) == [CommandPacket(Command.VEL, 300)] * 3
    stats = decoder.statistics()
    assert (stats.bad_checksum, stats.bad_length, stats.packets) == (1, 2, 3)
    assert stats.garbage_bytes == len(bad_checksum) + len(too_short) + len(too_long)


def test_a_corrupted_length_does_not_swallow_the_packets_behind_it() -> None:
    sip = random_sip(np.random.default_rng(3)).encode()
    corrupted = sip[:2] + b"\xc8" + sip[3:]  # N = 200: claims the next packets too
    tail = encode_command(Command.PULSE) + encode_command(Command.VEL, 100)
    decoder = P2osDecoder("robot")
    decoder.receive_data(corrupted + tail)
    assert drain(decoder) == []  # still waiting for the 200 bytes N claims
    decoder.receive_data(b"")  # the stream ends: look inside the truncated candidate
    assert drain(decoder) == [CommandPacket(Command.PULSE), CommandPacket(Command.VEL, 100), ConnectionClosed()]
    decoder = P2osDecoder("robot")
    decoder.receive_data(corrupted + tail + bytes(250))  # or more bytes arrive: the checksum fails
    assert drain(decoder) == [CommandPacket(Command.PULSE), CommandPacket(Command.VEL, 100)]
    assert decoder.statistics().bad_checksum == 1


def test_malformed_body_is_counted_not_raised() -> None:
    malformed = frame(bytes.fromhex("90 01 02 03"))  # ENCODERpac too short, good checksum
    decoder = P2osDecoder("client")
    decoder.receive_data(malformed + SYNC2_REPLY)
    assert drain(decoder) == [SyncReply(2, "AMRISim", "Pioneer", "p3dx")]
    stats = decoder.statistics()
    assert (stats.malformed, stats.packets, stats.bad_checksum) == (1, 2, 0)
    assert decoder.last_error is not None and "ENCODERpac" in decoder.last_error


def test_robot_role_unknown_and_malformed_commands() -> None:
    decoder = P2osDecoder("robot")
    decoder.receive_data(frame(bytes.fromhex("E0 01 02")) + frame(bytes.fromhex("0B 3B 01")) + REFERENCE_COMMANDS)
    assert drain(decoder) == [UnknownPacket(0xE0, b"\x01\x02"), *REFERENCE_EVENTS]
    stats = decoder.statistics()
    assert (stats.unknown_type, stats.malformed) == (1, 1)


def test_roles_decode_their_own_direction() -> None:
    # SYNC0 is the same six bytes both ways; server packets mean nothing to a robot.
    assert decode_all(bytes.fromhex("FA FB 03 00 00 00"), "client") == [SyncReply(0)]
    assert decode_all(bytes.fromhex("FA FB 03 00 00 00"), "robot") == [CommandPacket(Command.SYNC0)]
    encoder = EncoderPacket(1, 2)
    assert decode_all(encoder.encode(), "client") == [encoder]
    assert decode_all(encoder.encode(), "robot") == [UnknownPacket(0x90, encoder.payload()[1:])]
    decoder = P2osDecoder("robot")
    decoder.receive_data(Sip(x=5).encode())  # 0x32 is HOSTBAUD's number, with a body no argument has
    assert drain(decoder) == [] and decoder.statistics().malformed == 1


# --------------------------------------------------------------------------------------------------- robustness


@pytest.mark.parametrize("role", ["client", "robot"])
def test_one_percent_corruption_loses_only_the_packets_hit(role: Role) -> None:
    rng = np.random.default_rng(20240521)
    originals: list[Event] = [
        random_server_packet(rng) if role == "client" else random_command(rng) for _ in range(1500)
    ]
    wires = [encode(event) for event in originals]
    stream = np.frombuffer(b"".join(wires), dtype=np.uint8).copy()
    hit = rng.random(stream.size) < 0.01
    stream[hit] ^= rng.integers(1, 256, size=int(hit.sum())).astype(np.uint8)
    intact: list[Event] = []
    offset = 0
    for event, wire in zip(originals, wires, strict=True):
        if not hit[offset : offset + len(wire)].any():
            intact.append(event)
        offset += len(wire)
    assert 0 < len(intact) < len(originals)

    decoder = P2osDecoder(role)
    data = stream.tobytes()
    for start in range(0, len(data), 97):  # odd-sized chunks, as a serial port delivers them
        decoder.receive_data(data[start : start + 97])
    decoder.receive_data(b"")
    decoded = [event for event in drain(decoder) if not isinstance(event, ConnectionClosed)]

    missing = Counter(intact) - Counter(decoded)
    assert not missing, f"{sum(missing.values())} intact packets were not decoded"
    stats = decoder.statistics()
    assert stats.bad_checksum + stats.bad_length > 0
    assert stats.bytes == len(data) and decoder.buffered_bytes == 0


def test_huge_garbage_keeps_the_buffer_capped() -> None:
    rng = np.random.default_rng(7)
    decoder = P2osDecoder("client")
    noise = rng.integers(0, 256, size=2_000_000).astype(np.uint8).tobytes()
    headers = b"\xfa\xfb\xc8" * 20_000  # every one claims a full 203-byte packet
    for data in (noise, headers, noise[:50_000] + headers):
        for start in range(0, len(data), 65_536):
            decoder.receive_data(data[start : start + 65_536])
            assert decoder.buffered_bytes < MAX_PACKET_SIZE
    # The last header still claims the next 200 bytes: the reply is found when the stream ends (or goes on).
    decoder.receive_data(SYNC2_REPLY)
    decoder.receive_data(b"")
    assert drain(decoder)[-2:] == [SyncReply(2, "AMRISim", "Pioneer", "p3dx"), ConnectionClosed()]
    stats = decoder.statistics()
    assert stats.bad_length + stats.bad_checksum > 20_000


@settings(max_examples=300)
@given(st.binary(max_size=600), st.sampled_from(["client", "robot"]))
def test_arbitrary_bytes_never_raise(data: bytes, role: Role) -> None:
    decoder = P2osDecoder(role)
    if data:  # b"" would mean the end of the stream
        decoder.receive_data(data)
    events = drain(decoder)
    packet_bytes = sum(len(encode(event)) for event in events)  # re-encoding keeps every length
    stats = decoder.statistics()
    accounted = stats.garbage_bytes + packet_bytes + decoder.buffered_bytes
    assert accounted == stats.bytes if stats.malformed == 0 else accounted < stats.bytes
    assert decoder.buffered_bytes < MAX_PACKET_SIZE
    decoder.receive_data(b"")
    assert drain(decoder)[-1] == ConnectionClosed()
    assert decoder.buffered_bytes == 0


@given(st.lists(st.binary(max_size=40), max_size=10), st.sampled_from(["client", "robot"]))
def test_garbage_between_valid_packets_never_hides_them(noise: list[bytes], role: Role) -> None:
    packet: SyncReply | CommandPacket = (
        SyncReply(2, "AMRISim", "Pioneer", "p3dx") if role == "client" else CommandPacket(Command.VEL, 300)
    )
    packets = [packet] * (len(noise) + 1)
    stream = b"".join(encode(p) + n for p, n in zip(packets, [*noise, b""], strict=True))
    decoded = [event for event in decode_all(stream, role, close=True) if not isinstance(event, ConnectionClosed)]
    assert Counter(decoded)[packet] >= len(packets)


# --------------------------------------------------------------------------------------------------- API misuse


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(LocalProtocolError):
        P2osDecoder("server")  # type: ignore[arg-type]


def test_data_after_end_of_stream_is_misuse() -> None:
    decoder = P2osDecoder()
    decoder.receive_data(b"")
    decoder.receive_data(b"")  # closing twice is harmless
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(SYNC2_REPLY)


def test_events_iterator_stops_after_connection_closed() -> None:
    decoder = P2osDecoder("robot")
    decoder.receive_data(REFERENCE_COMMANDS)
    decoder.receive_data(b"")
    events = drain(decoder)
    assert events == [*REFERENCE_EVENTS, ConnectionClosed()]
    assert decoder.role == "robot"
