"""The codec: framing (whole, byte by byte, with garbage), limits, hostile documents, requests and replies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto import msgs
from pluto.errors import LocalProtocolError
from pluto.gateways.xmlserver import mapping
from pluto.gateways.xmlserver.codec import XmlCodec
from pluto.gateways.xmlserver.events import (
    NEED_DATA,
    Authorized,
    AuthRequest,
    BadDocument,
    CallRequest,
    ConnectionClosed,
    ErrorCode,
    ErrorReply,
    Event,
    Hello,
    InterfaceEntry,
    Listing,
    ListRequest,
    ReadRequest,
    Reply,
    Subscribed,
    SubscribeRequest,
    Unsubscribed,
    UnsubscribeRequest,
    Update,
    Value,
    WriteRequest,
    Written,
)

REQUESTS = [
    ListRequest(id="1"),
    ReadRequest("Base/Drive/State"),
    ReadRequest("custom/thing", type="Odometry", id="r"),
    SubscribeRequest("Sick/Scan_mm", 5.0, id="s"),
    UnsubscribeRequest("Sick/Scan_mm"),
    WriteRequest("drive/command", msgs.ActuatorState(velocity=[0.3, 0.0]), id="w"),
    CallRequest("sim/world"),
    CallRequest("sick/fault", {"duration": 2.5}, timeout=1.0, id="c"),
    AuthRequest('s3cr"et <&>'),
]

REPLIES = [
    Hello("pluto", True, 262144),
    Listing(("base", "sim"), (InterfaceEntry("Base/Drive/State", "Odometry", True, False, "Odometry."),), id="1"),
    Value("Base/Drive/State", msgs.Odometry(x=1.5), id="2"),
    Subscribed("Sick/Scan_mm", 5.0, id="s"),
    Update("Sick/Scan_mm", 17, msgs.LaserScan(ranges=[1.0, 2.0], count=2)),
    Unsubscribed("Sick/Scan_mm"),
    Written("drive/command", id="w"),
    Reply("mom/base", msgs.ModuleInfo(name="base")),
    Reply("x/y"),
    Authorized(),
    ErrorReply(ErrorCode.UNKNOWN_INTERFACE, "no such interface\nat all", id="9"),
]


def drain(codec: XmlCodec) -> list[Event]:
    events = []
    while (event := codec.next_event()) is not NEED_DATA:
        events.append(event)
    return events


def test_requests_and_replies_round_trip_one_per_line() -> None:
    client, server = XmlCodec("client"), XmlCodec("server")
    for request in REQUESTS:
        data = client.encode(request)
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        server.receive_data(data)
        assert drain(server) == [request]
    for reply in REPLIES:
        data = server.encode(reply)
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        client.receive_data(data)
        assert drain(client) == [reply]


def test_whole_or_byte_by_byte_gives_the_same_events() -> None:
    stream = b"".join(XmlCodec("client").encode(r) for r in REQUESTS)
    whole = XmlCodec("server")
    whole.receive_data(stream)
    by_byte = XmlCodec("server")
    events: list[Event] = []
    for i in range(len(stream)):
        by_byte.receive_data(stream[i : i + 1])
        events += drain(by_byte)
    assert drain(whole) == events == REQUESTS


def test_crlf_empty_lines_and_garbage_between_documents() -> None:
    codec = XmlCodec("server")
    codec.receive_data(b'<list id="a"/>\r\n\n   \n\x00\xff\xfe garbage\n<read name="Base/Sonar"/>\n')
    events = drain(codec)
    assert events[0] == ListRequest(id="a")
    assert isinstance(events[1], BadDocument) and events[1].code is ErrorCode.MALFORMED
    assert events[2] == ReadRequest("Base/Sonar")
    assert codec.statistics.documents == 2 and codec.statistics.bad_documents == 1


def test_a_ten_megabyte_document_is_refused_without_being_buffered() -> None:
    codec = XmlCodec("server", max_document=64 * 1024)
    head = b'<write name="drive/command"><ActuatorState><velocity>'
    chunk = b"1.0 " * 16384  # 64 kB
    codec.receive_data(head)
    events: list[Event] = []
    for _ in range(160):  # 10 MB
        codec.receive_data(chunk)
        assert codec.buffered_bytes < codec.max_document
        events += drain(codec)
    codec.receive_data(b"</velocity></ActuatorState></write>\n<list/>\n")
    events += drain(codec)
    assert [type(e) for e in events] == [BadDocument, ListRequest]
    assert isinstance(events[0], BadDocument) and events[0].code is ErrorCode.TOO_LARGE
    stats = codec.statistics
    assert stats.oversized == 1 and stats.bad_documents == 1
    assert stats.bytes == stats.skipped_bytes + len(b"<list/>\n") + codec.buffered_bytes


def test_a_line_just_over_the_limit_is_refused_and_one_at_the_limit_accepted() -> None:
    codec = XmlCodec("server", max_document=1024)
    at_limit = b"<list/>" + b" " * (1024 - len(b"<list/>\n")) + b"\n"
    assert len(at_limit) == 1024
    codec.receive_data(at_limit + b"<list/>" + b" " * 1024 + b"\n")
    events = drain(codec)
    assert isinstance(events[0], ListRequest)
    assert isinstance(events[1], BadDocument) and events[1].code is ErrorCode.TOO_LARGE


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10) for i in range(1, 10))
    + b']><list id="&lol9;"/>'
)


@pytest.mark.parametrize(
    ("document", "code"),
    [
        (BILLION_LAUGHS, ErrorCode.FORBIDDEN),
        (b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><read name="&x;"/>', ErrorCode.FORBIDDEN),
        (b'<!DOCTYPE r SYSTEM "http://example.com/evil.dtd"><list/>', ErrorCode.FORBIDDEN),
        (b'<!DOCTYPE r [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]><list/>', ErrorCode.FORBIDDEN),
        (b"<!DOCTYPE list><list/>", ErrorCode.FORBIDDEN),
        (b'<read name="&undefined;"/>', ErrorCode.MALFORMED),
        (b"<a>" * 5000 + b"</a>" * 5000, ErrorCode.TOO_DEEP),
        (b'<write name="drive/command"><ActuatorState><velocity>' + b"<x>" * 20, ErrorCode.TOO_DEEP),
        (b'<read name="Base/Drive/State"', ErrorCode.MALFORMED),
        (b"<list>", ErrorCode.MALFORMED),
        (b"\x89PNG\r\x1a\x00\x00\x00\rIHDR\x00\xff\xfe", ErrorCode.MALFORMED),
        (b'<read name="caf\xe9"/>', ErrorCode.MALFORMED),
        (b"<list/><list/>", ErrorCode.MALFORMED),
        (b"plain text", ErrorCode.MALFORMED),
    ],
)
def test_hostile_documents_are_refused_and_the_next_one_is_read(document: bytes, code: ErrorCode) -> None:
    codec = XmlCodec("server")
    codec.receive_data(document + b'\n<list id="next"/>\n')
    events = drain(codec)
    assert len(events) == 2
    assert isinstance(events[0], BadDocument) and events[0].code is code, events[0]
    assert events[1] == ListRequest(id="next")


def test_a_truncated_document_at_the_end_of_the_stream() -> None:
    codec = XmlCodec("server")
    codec.receive_data(b'<list/>\n<read name="Base/Dri')
    codec.receive_data(b"")
    events = drain(codec)
    assert events[0] == ListRequest()
    assert isinstance(events[1], BadDocument) and events[1].code is ErrorCode.TRUNCATED
    assert events[2] == ConnectionClosed()
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"<list/>\n")


@pytest.mark.parametrize(
    ("document", "code", "reason"),
    [
        (b"<read/>", ErrorCode.BAD_REQUEST, "'name' is required"),
        (b'<read name="a*b"/>', ErrorCode.BAD_REQUEST, "bad interface name"),
        (b'<read name="x" nmae="y"/>', ErrorCode.BAD_REQUEST, "unknown attribute 'nmae'"),
        (b'<read name="x" type="Nope"/>', ErrorCode.BAD_REQUEST, "unknown message type"),
        (b'<read name="x"><Odometry/></read>', ErrorCode.BAD_REQUEST, "no child"),
        (b'<subscribe name="x"/>', ErrorCode.BAD_REQUEST, "'rate' is required"),
        (b'<subscribe name="x" rate="0"/>', ErrorCode.BAD_REQUEST, "positive"),
        (b'<subscribe name="x" rate="-5"/>', ErrorCode.BAD_REQUEST, "positive"),
        (b'<subscribe name="x" rate="NaN"/>', ErrorCode.BAD_REQUEST, "not a number"),
        (b'<subscribe name="x" rate="fast"/>', ErrorCode.BAD_REQUEST, "not a number"),
        (b'<write name="drive/command"/>', ErrorCode.BAD_REQUEST, "needs a message"),
        (b'<write name="drive/command"><Odometry/><Odometry/></write>', ErrorCode.BAD_REQUEST, "at most 1"),
        (b'<write name="d"><ActuatorState velocity="1"/></write>', ErrorCode.BAD_VALUE, "unknown attribute"),
        (b'<call service="s" timeout="0"/>', ErrorCode.BAD_REQUEST, "positive"),
        (b"<auth/>", ErrorCode.BAD_REQUEST, "'token' is required"),
        (b"<list>text</list>", ErrorCode.BAD_REQUEST, "unexpected text"),
        (b'<list id="' + b"x" * 65 + b'"/>', ErrorCode.BAD_REQUEST, "id longer"),
        (b"<delete/>", ErrorCode.UNKNOWN_OPERATION, "unknown request <delete>"),
    ],
)
def test_invalid_requests(document: bytes, code: ErrorCode, reason: str) -> None:
    codec = XmlCodec("server")
    codec.receive_data(document + b"\n")
    (event,) = drain(codec)
    assert isinstance(event, BadDocument)
    assert event.code is code and reason in event.reason, event


def test_the_id_of_a_bad_request_is_kept_when_it_can_be_read() -> None:
    codec = XmlCodec("server")
    codec.receive_data(
        b'<write id="7" name="drive/command"><ActuatorState><velocity>x</velocity></ActuatorState></write>\n'
    )
    codec.receive_data(b'<explode id="8"/>\n')
    first, second = drain(codec)
    assert isinstance(first, BadDocument) and first.id == "7" and first.code is ErrorCode.BAD_VALUE
    assert isinstance(second, BadDocument) and second.id == "8"


def test_each_role_sends_only_its_own_documents() -> None:
    with pytest.raises(LocalProtocolError):
        XmlCodec("server").encode(ListRequest())
    with pytest.raises(LocalProtocolError):
        XmlCodec("client").encode(Authorized())
    with pytest.raises(LocalProtocolError):
        XmlCodec("robot")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        SubscribeRequest("x", math.nan)


def test_a_client_reads_what_a_server_may_send_but_a_server_refuses_it() -> None:
    update = XmlCodec("server").encode(Update("Sick/Scan", 1, msgs.LaserScan(ranges=[math.inf])))
    client = XmlCodec("client")
    client.receive_data(update)
    (event,) = drain(client)
    assert isinstance(event, Update) and event.value.ranges == [math.inf]  # type: ignore[attr-defined]
    server = XmlCodec("server")
    server.receive_data(update)
    (bad,) = drain(server)
    assert isinstance(bad, BadDocument) and bad.code is ErrorCode.UNKNOWN_OPERATION


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_fuzz_never_raises_and_accounts_for_every_byte(chunks: list[bytes]) -> None:
    codec = XmlCodec("server", max_document=1024)
    for chunk in [c for c in chunks if c]:
        codec.receive_data(chunk)
        for event in drain(codec):
            assert isinstance(event, BadDocument | ListRequest | ReadRequest | SubscribeRequest | WriteRequest)
        assert codec.buffered_bytes < 1024
    stats = codec.statistics
    data = b"".join(chunks)
    assert stats.bytes == len(data)
    current_line = data[data.rfind(b"\n") + 1 :]  # the start of the line not yet ended
    assert codec.buffered_bytes == (len(current_line) if len(current_line) < 1024 else 0)
    codec.receive_data(b"")
    assert isinstance(drain(codec)[-1], ConnectionClosed)


def test_a_vector_longer_than_the_limits_is_refused_before_its_numbers_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    real = mapping.parse_float

    def counting(text: str, where: str, *, finite: bool = True) -> float:
        parsed.append(text)
        return real(text, where, finite=finite)

    monkeypatch.setattr(mapping, "parse_float", counting)
    codec = XmlCodec("server")
    numbers = " ".join(["1"] * 60_000)  # 120 kB: a document the codec takes
    documents = [
        f'<write id="a" name="drive/command"><ActuatorState><velocity>{numbers}</velocity></ActuatorState></write>',
        '<write name="drive/command"><ActuatorState><velocity>' + "0 " * 33 + "</velocity></ActuatorState></write>",
        '<write name="x/scan"><LaserScan><ranges>' + "1 " * 4097 + "</ranges></LaserScan></write>",
        '<call service="x/y"><ActuatorState><force>' + "0 " * 33 + "</force></ActuatorState></call>",
    ]
    codec.receive_data("\n".join(documents).encode() + b"\n")
    events = drain(codec)
    assert [(e.code, e.out_of_range) for e in events if isinstance(e, BadDocument)] == [
        (ErrorCode.BAD_VALUE, True)
    ] * 4, events
    reasons = [e.reason for e in events if isinstance(e, BadDocument)]
    assert "<ActuatorState/velocity>: more than 32 numbers" in reasons[0] and events[0].id == "a"  # type: ignore[union-attr]
    assert "<LaserScan/ranges>: more than 4096 numbers" in reasons[2]
    assert parsed == []  # not one number of them was read
    # at the limits, they are read (what is in range is for the server to say, with pluto.limits)
    velocity = b"<velocity>" + b"1e308 " * 32 + b"</velocity>"
    codec.receive_data(b'<write name="drive/command"><ActuatorState>' + velocity + b"</ActuatorState></write>\n")
    (write,) = drain(codec)
    assert isinstance(write, WriteRequest) and len(write.value.velocity) == 32  # type: ignore[attr-defined]
    # a client reads what a server sends with the wider limit of the mapping
    client = XmlCodec("client")
    client.receive_data(XmlCodec("server").encode(Value("x/scan", msgs.LaserScan(ranges=[1.0] * 5000))))
    (value,) = drain(client)
    assert isinstance(value, Value) and len(value.value.ranges) == 5000  # type: ignore[attr-defined]
