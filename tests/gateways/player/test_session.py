"""One client's protocol state, without sockets: requests to the player device, access, data modes, rounds."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pluto.gateways.player.devices import DEVICES, DeviceSpec
from pluto.gateways.player.protocol import (
    Access,
    DataMode,
    DeviceCode,
    Header,
    Message,
    MsgType,
    PlayerConnection,
    encode_message,
)
from pluto.gateways.player.session import ClientSession, Close, Command, Configure, Opened, Sample, Send
from pluto.gateways.player.structs import (
    AuthRequest,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceList,
    DeviceReply,
    DeviceRequest,
    DriverInfo,
    NameService,
    PositionCommand,
    SetOdometry,
)

POSITION = (4, 0)
LASER = (6, 0)


def everything(_spec: DeviceSpec) -> bool:
    return True


def request(device: int, payload: bytes, index: int = 0, mtype: int = MsgType.REQ) -> Message:
    data = encode_message(mtype, device, index, payload)
    return Message(Header.unpack(data[:32]), data[32:])


def replies(outputs: list[object]) -> list[Message]:
    """The messages in the Send outputs, parsed."""
    conn = PlayerConnection("server")
    for out in outputs:
        if isinstance(out, Send):
            conn.receive_data(out.data)
    found: list[Message] = []
    while isinstance(event := conn.next_event(), Message):
        found.append(event)
    return found


def one_reply(outputs: list[object]) -> Message:
    found = replies(outputs)
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def session() -> ClientSession:
    return ClientSession(DEVICES, port=6665, robot="r2", max_frequency=50.0)


def open_device(
    session: ClientSession, code: int, access: bytes, available: Callable[[DeviceSpec], bool] = everything
) -> DeviceReply:
    outputs = session.handle(request(1, DeviceRequest(code, 0, access).pack()), 1.0, available, {})
    reply = one_reply(outputs)
    assert reply.type == MsgType.RESP_ACK and reply.header.size == 71
    return DeviceReply.unpack(reply.payload)


def test_device_list_and_driver_info(session: ClientSession) -> None:
    reply = one_reply(session.handle(request(1, struct.pack(">H", 1)), 3.5, everything, {}))
    assert (reply.type, reply.device, reply.index, reply.header.size) == (MsgType.RESP_ACK, 1, 0, 388)
    assert reply.header.time == 3.5
    listed = DeviceList.unpack(reply.payload).devices
    assert [(d.code, d.index, d.port) for d in listed] == [(4, 0, 6665), (30, 0, 6665), (6, 0, 6665), (5, 0, 6665)]
    info = one_reply(session.handle(request(1, DriverInfo(6, 0).pack()), 0.0, everything, {}))
    assert info.header.size == 72 and DriverInfo.unpack(info.payload).name == "pluto-sick"
    unknown = one_reply(session.handle(request(1, DriverInfo(13, 0).pack()), 0.0, everything, {}))
    assert unknown.type == MsgType.RESP_NACK


def test_access_is_echoed_or_e(session: ClientSession) -> None:
    assert open_device(session, 4, b"a") == DeviceReply(4, 0, b"a", "pluto-base")
    assert session.opened == {POSITION: Access.ALL} and session.writes(POSITION)
    assert open_device(session, 6, b"r", available=lambda spec: spec.backend != "sick").access == b"e"
    assert open_device(session, 13, b"r").access == b"e"  # not served
    assert open_device(session, 5, b"x").access == b"e"  # not an access mode
    outputs = session.handle(request(1, DeviceRequest(4, 0, b"c").pack()), 0.0, everything, {})
    assert DeviceReply.unpack(one_reply(outputs).payload).access == b"c"
    assert Opened(POSITION, None) in outputs and session.opened == {}


def test_an_unknown_access_letter_leaves_the_device_as_it_is(session: ClientSession) -> None:
    assert open_device(session, 4, b"a").access == b"a"
    for letter in (b"x", b"e", b"\0"):
        outputs = session.handle(request(1, DeviceRequest(4, 0, letter).pack()), 1.0, everything, {})
        assert len(outputs) == 1  # the reply, and no change of access
        assert DeviceReply.unpack(one_reply(outputs).payload) == DeviceReply(4, 0, b"a", "pluto-base")
    assert session.opened == {POSITION: Access.ALL} and session.writes(POSITION)
    assert "stays 'a'" in session.statistics().last_problem
    first = session.tick(0.0, samples(0.0))
    assert first is not None and (MsgType.DATA, 4) in data_devices(first)  # still reading


def test_requests_to_devices(session: ClientSession) -> None:
    unopened = one_reply(session.handle(request(4, b"\x01"), 0.0, everything, {}))
    assert (unopened.type, unopened.device, unopened.header.size) == (MsgType.RESP_ERR, 4, 0)
    unknown = one_reply(session.handle(request(13, b"\x01", index=2), 0.0, everything, {}))
    assert (unknown.type, unknown.device, unknown.index) == (MsgType.RESP_ERR, 13, 2)
    open_device(session, 4, b"r")
    outputs = session.handle(request(4, SetOdometry(9, 1, 2, 3).pack()), 0.0, everything, {})
    assert len(outputs) == 1 and isinstance(outputs[0], Configure)
    assert outputs[0].device == POSITION and outputs[0].request == SetOdometry(9, 1, 2, 3)
    wrong_size = one_reply(session.handle(request(4, b"\x09\x00"), 0.0, everything, {}))
    assert wrong_size.type == MsgType.RESP_NACK and wrong_size.device == 4
    assert "13 bytes" in session.statistics().last_problem
    ack = session.reply(outputs[0].header, True, b"payload", 2.0)
    nack = session.reply(outputs[0].header, False, b"", 2.0, "the base refused")
    assert Header.unpack(ack[:32]).type == MsgType.RESP_ACK and ack[32:] == b"payload"
    assert Header.unpack(nack[:32]).type == MsgType.RESP_NACK and len(nack) == 32
    assert session.statistics().last_problem == "the base refused"


def test_commands_need_write_access(session: ClientSession) -> None:
    command = request(4, PositionCommand(xspeed=100).pack(), mtype=MsgType.CMD)
    assert session.handle(command, 0.0, everything, {}) == []
    open_device(session, 4, b"r")
    assert session.handle(command, 0.0, everything, {}) == []
    assert session.statistics().ignored == 2
    open_device(session, 4, b"w")
    assert session.handle(command, 0.0, everything, {}) == [Command(POSITION, PositionCommand(xspeed=100))]
    assert session.handle(request(4, bytes(25), mtype=MsgType.CMD), 0.0, everything, {}) == []  # wrong size
    assert session.statistics().ignored == 3 and session.statistics().commands == 1


def test_zero_length_and_foreign_types_are_ignored(session: ClientSession) -> None:
    assert session.handle(request(1, b""), 0.0, everything, {}) == []
    assert session.handle(request(1, b"\x00\x01", mtype=MsgType.SYNCH), 0.0, everything, {}) == []
    assert session.handle(request(1, b"\x00\x01", mtype=99), 0.0, everything, {}) == []
    assert session.statistics().ignored == 3


def test_player_request_errors_get_nack(session: ClientSession) -> None:
    for payload in (b"\x00", struct.pack(">H", 42), struct.pack(">HB", 5, 9), struct.pack(">HH", 6, 0)):
        reply = one_reply(session.handle(request(1, payload), 0.0, everything, {}))
        assert (reply.type, reply.device, reply.header.size) == (MsgType.RESP_NACK, 1, 0)
    assert session.mode == DataMode.PUSH_NEW and session.frequency == 10.0


def samples(t: float) -> dict[tuple[int, int], Sample]:
    return {POSITION: Sample(t, b"P" * 25), LASER: Sample(t - 0.1, b"L" * 1213)}


def data_devices(data: bytes) -> list[tuple[int, int]]:
    conn = PlayerConnection("server")
    conn.receive_data(data)
    found: list[tuple[int, int]] = []
    while isinstance(event := conn.next_event(), Message):
        found.append((event.type, event.device))
    return found


def test_push_new_rounds_follow_the_frequency_and_skip_old_data(session: ClientSession) -> None:
    open_device(session, 4, b"r")
    open_device(session, 6, b"w")  # write only: no data
    first = session.tick(0.0, samples(0.0))
    assert first is not None and data_devices(first) == [(MsgType.DATA, 4), (MsgType.SYNCH, 1)]
    assert session.tick(0.05, samples(0.0)) is None  # 10 Hz: not due
    again = session.tick(0.1, samples(0.0))
    assert again is not None and data_devices(again) == [(MsgType.SYNCH, 1)]  # nothing new, still a SYNCH
    fresh = session.tick(0.2, samples(0.2))
    assert fresh is not None and data_devices(fresh) == [(MsgType.DATA, 4), (MsgType.SYNCH, 1)]
    header = Header.unpack(fresh[:32])
    assert header.time == pytest.approx(0.2) and header.timestamp == pytest.approx(0.2)


def test_a_late_tick_is_caught_up_not_lost(session: ClientSession) -> None:
    times = [0.0, 0.1, 0.35, 0.36, 0.37, 0.4, 0.45, 0.5]
    rounds = {t: session.tick(t, {}) for t in times}
    sent = [t for t, data in rounds.items() if data is not None]
    assert sent == [0.0, 0.1, 0.35, 0.36, 0.4, 0.5]  # 0.2 and 0.3 were late: two rounds at the next ticks
    # each round carries the time it was due
    stamped = [Header.unpack(data[:32]).time for data in rounds.values() if data is not None]
    assert stamped == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert session.statistics().rounds == 6 and session.statistics().skipped == 0
    assert session.tick(10.0, {}) is not None and session.tick(10.01, {}) is None  # far behind: restart
    assert session.statistics().skipped in (93, 94, 95)  # the rounds due from 0.7 s to 10 s, counted
    assert [session.tick(t, {}) is not None for t in (14.0, 14.02, 14.04, 14.06)] == [True] * 4  # 4 s: caught up


def test_push_all_resends_and_frequency_is_capped(session: ClientSession) -> None:
    open_device(session, 4, b"r")
    session.handle(request(1, DataModeRequest(mode=DataMode.PUSH_ALL).pack()), 0.0, everything, {})
    session.handle(request(1, DataFreqRequest(frequency=1000).pack()), 0.0, everything, {})
    assert session.frequency == 50.0
    rounds = [session.tick(t * 0.02, samples(0.0)) for t in range(3)]
    assert all(r is not None and data_devices(r)[0] == (MsgType.DATA, 4) for r in rounds)


def test_pull_modes_send_a_round_on_request(session: ClientSession) -> None:
    open_device(session, 4, b"r")
    open_device(session, 6, b"r")
    data_request = request(1, DataRequest().pack())
    refused = one_reply(session.handle(data_request, 0.0, everything, samples(0.0)))
    assert refused.type == MsgType.RESP_NACK  # PUSH_NEW: no DATA requests
    session.handle(request(1, DataModeRequest(mode=DataMode.PULL_NEW).pack()), 0.0, everything, {})
    assert session.tick(1.0, samples(1.0)) is None
    outputs = session.handle(data_request, 1.0, everything, samples(1.0))
    assert [(m.type, m.device) for m in replies(outputs)] == [
        (MsgType.RESP_ACK, 1),
        (MsgType.DATA, 4),
        (MsgType.DATA, 6),
        (MsgType.SYNCH, 1),
    ]
    outputs = session.handle(data_request, 1.1, everything, samples(1.0))
    assert [(m.type, m.device) for m in replies(outputs)] == [(MsgType.RESP_ACK, 1), (MsgType.SYNCH, 1)]
    session.handle(request(1, DataModeRequest(mode=DataMode.PULL_ALL).pack()), 0.0, everything, {})
    outputs = session.handle(data_request, 1.2, everything, samples(1.0))
    assert len(replies(outputs)) == 4


def test_auth_with_a_key() -> None:
    session = ClientSession(DEVICES, port=1, key=b"s3cret")
    outputs = session.handle(request(1, struct.pack(">H", 1)), 0.0, everything, {})
    assert replies(outputs) == [] and len(outputs) == 1  # closed without a reply
    closed = outputs[0]
    assert isinstance(closed, Close) and not closed.auth_failed and "before AUTH" in closed.reason
    session = ClientSession(DEVICES, port=1, key=b"s3cret")
    wrong = session.handle(request(1, AuthRequest(b"guess").pack()), 0.0, everything, {})
    assert wrong == [Close("wrong AUTH key", auth_failed=True)] and not session.authenticated
    session = ClientSession(DEVICES, port=1, key=b"s3cret")
    right = session.handle(request(1, AuthRequest(b"s3cret").pack()), 0.0, everything, {})
    assert one_reply(right).type == MsgType.RESP_ACK and session.authenticated
    listed = session.handle(request(1, struct.pack(">H", 1)), 0.0, everything, {})
    assert one_reply(listed).type == MsgType.RESP_ACK
    keyless = ClientSession(DEVICES, port=1)  # no AUTH pending: NACK, as the 1.5 server
    assert one_reply(keyless.handle(request(1, AuthRequest(b"any").pack()), 0.0, everything, {})).type == 6


def test_nothing_is_sent_before_auth() -> None:
    session = ClientSession(DEVICES, port=1, key=b"s3cret")
    assert [session.tick(t * 0.1, samples(t * 0.1)) for t in range(5)] == [None] * 5  # no SYNCH, no data
    session.handle(request(1, AuthRequest(b"s3cret").pack()), 0.5, everything, {})
    after = session.tick(0.6, samples(0.6))
    assert after is not None and data_devices(after) == [(MsgType.SYNCH, 1)]


def test_name_service(session: ClientSession) -> None:
    reply = one_reply(session.handle(request(1, NameService("r2", 0).pack()), 0.0, everything, {}))
    assert reply.header.size == 68 and NameService.unpack(reply.payload) == NameService("r2", 6665)
    other = one_reply(session.handle(request(1, NameService("c3po", 0).pack()), 0.0, everything, {}))
    assert NameService.unpack(other.payload).port == 0


def test_closing_reports_every_open_device(session: ClientSession) -> None:
    open_device(session, 4, b"a")
    open_device(session, DeviceCode.POSITION3D, b"w")
    assert sorted(o.device for o in session.closed() if isinstance(o, Opened)) == [(4, 0), (30, 0)]
    assert session.opened == {}


def test_a_clock_jump_restarts_the_rounds_and_the_data_counts_as_new(session: ClientSession) -> None:
    open_device(session, 4, b"r")
    assert session.tick(30.0, samples(5.0)) is not None
    assert session.tick(30.05, samples(5.0)) is None  # not due before 30.1
    session.restart()  # the new run, at 30.06 s (a replay pass, say): a round at once, with its data
    fresh = session.tick(30.06, samples(5.0))
    assert fresh is not None and data_devices(fresh) == [(MsgType.DATA, 4), (MsgType.SYNCH, 1)]
    assert session.tick(30.1, samples(5.0)) is None  # then every 0.1 s again


# ------------------------------------------------------------------------------------------ recorded exchanges
# Bytes in (as a client sends them) and bytes out (the session's replies), byte for byte. Header fields a client
# fills with garbage (times, reserved) hold garbage here too; the replies are made at the server time 3.5 s.


def exchange(session: ClientSession, wire: bytes, now: float = 3.5) -> tuple[bytes, list[object]]:
    """Decode ``wire`` as the server does and hand each message to the session: (the bytes it sends, its
    outputs)."""
    conn = PlayerConnection("server")
    conn.receive_data(wire)
    outputs: list[object] = []
    while isinstance(event := conn.next_event(), Message):
        outputs += session.handle(event, now, everything, {})
    return b"".join(out.data for out in outputs if isinstance(out, Send)), outputs


def client_header(mtype: int, device: int, size: int) -> bytes:
    """A request header as a C client fills it: stx, type, device, index 0, then times and reserved left as the
    stack had them."""
    garbage = bytes.fromhex("7ffc1234 00005555 7ffc1234 00000000 deadbeef")
    return struct.pack(">HHHH", 0x5878, mtype, device, 0) + garbage + struct.pack(">I", size)


# libplayerc 1.5 (playerc_client_get_devlist) sends the whole 388-byte device-list struct and fills only its
# subtype: the count and the 64 entries are whatever its stack held (here 0x7ffc1234 over and over).
STACK_GARBAGE = bytes.fromhex("7ffc1234") * 2100
LIBPLAYERC_DEVLIST = client_header(3, 1, 388) + b"\x00\x01" + STACK_GARBAGE[:386]
# The reply of a server with position, position3d, laser and sonar on port 6665 (0x1a09), at 3.5 s.
DEVLIST_REPLY = (
    bytes.fromhex("5878 0004 0001 0000 00000003 0007a120 00000003 0007a120 00000000 00000184")
    + bytes.fromhex("0001 0004 0004 0000 1a09 001e 0000 1a09 0006 0000 1a09 0005 0000 1a09")
    + bytes(6 * 60)
)


def test_a_device_list_request_is_read_by_its_subtype_alone(session: ClientSession) -> None:
    sent, _ = exchange(session, LIBPLAYERC_DEVLIST)
    assert sent == DEVLIST_REPLY
    padded = client_header(3, 1, 8160) + b"\x00\x01" + STACK_GARBAGE[:8158]  # the largest payload there is
    assert exchange(session, padded)[0] == DEVLIST_REPLY
    for count in (0, 64, 65, 0x1234, 0xFFFF):  # whatever the count field holds
        body = struct.pack(">HH", 1, count) + STACK_GARBAGE[:384]
        assert exchange(session, client_header(3, 1, 388) + body)[0] == DEVLIST_REPLY
    assert session.statistics().nacks == 0


# AUTH with the key "s3cret" (the key NUL-padded to 32 bytes).
AUTH_S3CRET = client_header(3, 1, 34) + b"\x00\x07" + b"s3cret".ljust(32, b"\0")
AUTH_GUESS = client_header(3, 1, 34) + b"\x00\x07" + b"guess".ljust(32, b"\0")
ACK_AT_3_5 = bytes.fromhex("5878 0004 0001 0000 00000003 0007a120 00000003 0007a120 00000000 00000000")
NACK_AT_3_5 = bytes.fromhex("5878 0006 0001 0000 00000003 0007a120 00000003 0007a120 00000000 00000000")


def test_an_auth_after_a_successful_one_is_refused_and_the_session_goes_on() -> None:
    # The 1.5 server answers AUTH only while one is pending; later ones get NACK ("unnecessary authentication
    # request"), and the client stays connected and authenticated.
    session = ClientSession(DEVICES, port=6665, key=b"s3cret")
    assert exchange(session, AUTH_S3CRET)[0] == ACK_AT_3_5 and session.authenticated
    for again in (AUTH_S3CRET, AUTH_GUESS):
        sent, outputs = exchange(session, again)
        assert sent == NACK_AT_3_5 and not any(isinstance(out, Close) for out in outputs)
        assert session.authenticated
    assert session.statistics().nacks == 2 and "AUTH" in session.statistics().last_problem
    assert exchange(session, LIBPLAYERC_DEVLIST)[0] == DEVLIST_REPLY  # still served
    keyless = ClientSession(DEVICES, port=6665)  # nothing pending: the same NACK
    assert exchange(keyless, AUTH_S3CRET)[0] == NACK_AT_3_5


def dev_request(code: int, access: bytes) -> bytes:
    return client_header(3, 1, 7) + struct.pack(">HHHc", 3, code, 0, access)


def dev_reply(code: int, access: bytes, driver: str) -> bytes:
    head = bytes.fromhex("5878 0004 0001 0000 00000003 0007a120 00000003 0007a120 00000000 00000047")
    return head + struct.pack(">HHHc", 3, code, 0, access) + driver.encode().ljust(64, b"\0")


def test_an_unknown_access_after_a_close_leaves_c(session: ClientSession) -> None:
    # The 1.5 server keeps the record of a closed device: 'c', which an unknown letter leaves as it is.
    assert exchange(session, dev_request(4, b"a"))[0] == dev_reply(4, b"a", "pluto-base")
    assert exchange(session, dev_request(4, b"c"))[0] == dev_reply(4, b"c", "pluto-base")
    assert exchange(session, dev_request(4, b"x"))[0] == dev_reply(4, b"c", "pluto-base")
    assert exchange(session, dev_request(5, b"c"))[0] == dev_reply(5, b"c", "pluto-sonar")  # closed unopened
    assert exchange(session, dev_request(5, b"x"))[0] == dev_reply(5, b"c", "pluto-sonar")
    assert exchange(session, dev_request(6, b"x"))[0] == dev_reply(6, b"e", "pluto-sick")  # never asked for
    assert exchange(session, dev_request(4, b"r"))[0] == dev_reply(4, b"r", "pluto-base")  # open again
    assert exchange(session, dev_request(4, b"x"))[0] == dev_reply(4, b"r", "pluto-base")
    assert session.opened == {POSITION: Access.READ}
