"""The Player 1.5 framing: banner, 32-byte header, and the sans-I/O connection fed whole, byte by byte and with
garbage."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.errors import LocalProtocolError, RemoteProtocolError
from pluto.gateways.player.protocol import (
    BANNER,
    HEADER,
    HEADER_SIZE,
    MAX_PAYLOAD,
    NEED_DATA,
    STX,
    Banner,
    ConnectionClosed,
    Header,
    Message,
    MsgType,
    PlayerConnection,
    encode_message,
    split_time,
)

REFERENCE_HEADER = ">HHHHIIIIII"


def test_banner_is_32_bytes() -> None:
    assert len(BANNER) == 32 and BANNER.startswith(b"Player v.1.5\0") and BANNER.endswith(b"\0")


def test_header_layout_matches_the_reference() -> None:
    header = Header(MsgType.DATA, 4, 2, 100, 250_000, 99, 999_999, 0, 25)
    expected = struct.pack(REFERENCE_HEADER, 0x5878, 1, 4, 2, 100, 250_000, 99, 999_999, 0, 25)
    assert struct.calcsize(REFERENCE_HEADER) == HEADER_SIZE == 32
    assert header.pack() == expected and expected[:2] == b"Xx"
    assert Header.unpack(expected) == header
    assert header.time == pytest.approx(100.25) and header.timestamp == pytest.approx(99.999999)


def test_encode_message_sets_times_and_size() -> None:
    data = encode_message(MsgType.RESP_ACK, 6, 1, b"\x01\x02", time=12.5, timestamp=3.000001)
    header = Header.unpack(data[:32])
    assert (header.type, header.device, header.index, header.size) == (4, 6, 1, 2)
    assert (header.time_sec, header.time_usec, header.timestamp_sec, header.timestamp_usec) == (12, 500_000, 3, 1)
    assert data[32:] == b"\x01\x02"
    assert split_time(-1.0) == (0, 0) and split_time(float("nan")) == (0, 0)
    assert MAX_PAYLOAD == 8160  # PLAYER_MAX_MESSAGE_SIZE (8192) less the header, as the 1.5 server applies it
    with pytest.raises(LocalProtocolError, match="8160"):
        encode_message(MsgType.DATA, 6, 0, bytes(MAX_PAYLOAD + 1))
    with pytest.raises(LocalProtocolError, match="out of range"):
        encode_message(MsgType.DATA, 70000, 0)


def test_header_refuses_bad_stx_and_oversize() -> None:
    good = Header(MsgType.REQ, 1, 0, size=2).pack()
    with pytest.raises(RemoteProtocolError, match="bad stx 0x5879"):
        Header.unpack(b"\x58\x79" + good[2:])
    with pytest.raises(RemoteProtocolError, match="over the limit of 8160"):
        Header.unpack(good[:28] + struct.pack(">I", 8161))
    with pytest.raises(RemoteProtocolError, match="32 bytes"):
        Header.unpack(good[:31])


def messages() -> list[bytes]:
    return [
        encode_message(MsgType.REQ, 1, 0, struct.pack(">H", 1)),
        encode_message(MsgType.CMD, 4, 0, bytes(26)),
        encode_message(MsgType.REQ, 6, 0, b"\x03"),
        encode_message(MsgType.SYNCH, 1, 0),
        encode_message(MsgType.DATA, 6, 0, bytes(MAX_PAYLOAD)),
    ]


def drain(conn: PlayerConnection) -> list[object]:
    events: list[object] = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, ConnectionClosed):
            break
    return events


def test_server_side_whole_and_byte_by_byte() -> None:
    stream = b"".join(messages())
    whole = PlayerConnection("server")
    whole.receive_data(stream)
    got = drain(whole)
    trickle = PlayerConnection("server")
    got_trickled: list[object] = []
    for i in range(len(stream)):
        trickle.receive_data(stream[i : i + 1])
        got_trickled += drain(trickle)
    assert got == got_trickled and len(got) == 5
    assert all(isinstance(m, Message) for m in got)
    assert [m.header.type for m in got if isinstance(m, Message)] == [3, 2, 3, 5, 1]
    assert [len(m.payload) for m in got if isinstance(m, Message)] == [2, 26, 1, 0, MAX_PAYLOAD]
    whole.receive_data(b"")
    assert whole.next_event() == ConnectionClosed(0) and whole.next_event() == ConnectionClosed(0)
    with pytest.raises(LocalProtocolError):
        whole.receive_data(b"more")


def test_client_side_reads_the_banner_first() -> None:
    conn = PlayerConnection("client")
    conn.receive_data(BANNER[:10])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(BANNER[10:] + encode_message(MsgType.SYNCH, 1, 0))
    assert conn.next_event() == Banner("Player v.1.5")
    event = conn.next_event()
    assert isinstance(event, Message) and event.type == MsgType.SYNCH


def test_garbage_is_skipped_up_to_the_next_stx_and_counted() -> None:
    garbage = b"garbage that is long enough for a header"
    stream = messages()[0] + garbage + messages()[1] + b"\x00X" + messages()[2]
    whole = PlayerConnection("server")
    whole.receive_data(stream)
    trickle = PlayerConnection("server")
    trickled: list[object] = []
    for i in range(len(stream)):
        trickle.receive_data(stream[i : i + 1])
        trickled += drain(trickle)
    events = drain(whole)
    assert events == trickled
    assert [m.header.type for m in events if isinstance(m, Message)] == [3, 2, 3]
    for conn in (whole, trickle):
        assert (conn.messages, conn.garbage_bytes, conn.resyncs) == (3, len(garbage) + 2, 2)
        assert "skipped" in conn.last_problem


def test_an_x_before_the_stx_does_not_hide_the_message() -> None:
    conn = PlayerConnection("server")
    conn.receive_data(b"XX" + messages()[0][1:])  # "XXx...": the second X starts the message
    event = conn.next_event()
    assert isinstance(event, Message) and event.type == MsgType.REQ and conn.garbage_bytes == 1


def test_an_oversized_header_is_dropped_and_the_stream_goes_on() -> None:
    oversized = HEADER.pack(STX, MsgType.REQ, 1, 0, 0, 0, 0, 0, 0, MAX_PAYLOAD + 1)
    largest = encode_message(MsgType.CMD, 4, 0, bytes(MAX_PAYLOAD))
    conn = PlayerConnection("server")
    conn.receive_data(oversized + b"\x01\x02" + largest + messages()[0])
    events = drain(conn)
    assert [(m.header.type, m.header.size) for m in events if isinstance(m, Message)] == [(2, 8160), (3, 2)]
    assert (conn.oversized, conn.garbage_bytes) == (1, 2)
    assert conn.last_problem.startswith("skipped 2 bytes")


def test_a_stream_that_ends_inside_a_message_says_so() -> None:
    conn = PlayerConnection("server")
    conn.receive_data(messages()[1][:40])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_event() == ConnectionClosed(40)
    short = PlayerConnection("server")
    short.receive_data(b"Xx\x00")
    short.receive_data(b"")
    assert short.next_event() == ConnectionClosed(3)
    # the bytes of a message cut short are reported once, as truncated, and not counted as garbage too
    assert (conn.garbage_bytes, short.garbage_bytes, short.resyncs) == (0, 0, 0)
    stray = PlayerConnection("server")
    stray.receive_data(messages()[3] + b"X")
    stray.receive_data(b"")
    assert [type(e) for e in drain(stray)] == [Message, ConnectionClosed]
    assert (stray.garbage_bytes, stray.resyncs, stray.buffered_bytes) == (1, 1, 0)
    assert stray.next_event() == ConnectionClosed(0) and "stray byte" in stray.last_problem


def test_roles_are_checked() -> None:
    with pytest.raises(LocalProtocolError, match="role"):
        PlayerConnection("robot")  # type: ignore[arg-type]


@given(st.binary(max_size=300), st.integers(1, 64))
def test_any_bytes_give_messages_and_then_the_end(data: bytes, chunk: int) -> None:
    conn = PlayerConnection("server")
    stream = STX.to_bytes(2, "big") + data + messages()[0]
    events: list[object] = []
    for i in range(0, len(stream), chunk):
        conn.receive_data(stream[i : i + chunk])
        events += drain(conn)
        assert conn.buffered_bytes < HEADER_SIZE + MAX_PAYLOAD + chunk
    conn.receive_data(b"")
    events += drain(conn)
    assert isinstance(events[-1], ConnectionClosed)
    assert all(isinstance(e, Message) for e in events[:-1])
    assert conn.bytes_received == len(stream)
