"""The front of the Foxglove server: its handshake rules on their own (no I/O), then the front against a stub of
the SDK's server (which answers ``foxglove.sdk.v1`` and echoes): the renaming each way, the bytes relayed unchanged
both ways, and the answers to handshakes it refuses (counted, the front going on)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from pluto.gateways.foxglove.front import (
    MAX_HEAD,
    BadHandshake,
    Head,
    SubprotocolFront,
    negotiate,
    offer_to_sdk,
    offered_subprotocols,
    parse_head,
    rename_answer,
    status_of,
)
from tests.helpers import free_tcp_port

WAIT = 30.0
"""Wall seconds an answer may take (only a hang takes that long)."""


def _request(*protocol_headers: str) -> bytes:
    lines = ["GET / HTTP/1.1", "Host: localhost", "Upgrade: websocket", "Connection: Upgrade"]
    lines += [f"Sec-WebSocket-Protocol: {value}" for value in protocol_headers]
    lines += ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# -- the rules --------------------------------------------------------------------------------------------------


def test_the_offer_is_read_from_every_protocol_header() -> None:
    head = parse_head(_request("chat, foxglove.websocket.v1", "foxglove.sdk.v1.1")[:-4])
    assert head.start == "GET / HTTP/1.1"
    assert offered_subprotocols(head) == ["chat", "foxglove.websocket.v1", "foxglove.sdk.v1.1"]
    assert offered_subprotocols(parse_head(_request()[:-4])) == []
    lower = parse_head(b"GET / HTTP/1.1\r\nsec-websocket-protocol:foxglove.sdk.v1")
    assert offered_subprotocols(lower) == ["foxglove.sdk.v1"]


@pytest.mark.parametrize(
    "head",
    [b"", b"\r\n", b"GET / HTTP/1.1\r\nno colon here", b"GET / HTTP/1.1\r\n folded: header", b"GET /\r\n: empty"],
)
def test_a_malformed_head_is_a_bad_request(head: bytes) -> None:
    with pytest.raises(BadHandshake) as refused:
        parse_head(head)
    assert refused.value.status == 400 and refused.value.reason


def test_the_sdk_name_is_preferred_and_the_old_one_is_renamed() -> None:
    both = negotiate(["foxglove.websocket.v1", "foxglove.sdk.v1"])
    assert both.offer == ("foxglove.websocket.v1", "foxglove.sdk.v1") and not both.renamed
    old = negotiate(["chat", "foxglove.websocket.v1"])
    assert old.offer == ("chat", "foxglove.sdk.v1") and old.renamed
    newer = negotiate(["foxglove.sdk.v1.1"])  # the SDK's own names are the SDK's to judge
    assert newer.offer == ("foxglove.sdk.v1.1",) and not newer.renamed
    newer_and_old = negotiate(["foxglove.sdk.v1.1", "foxglove.websocket.v1"])
    assert newer_and_old.offer == ("foxglove.sdk.v1.1", "foxglove.sdk.v1") and newer_and_old.renamed
    for offer, said in ((["chat"], "offered chat"), ([], "offered no WebSocket subprotocol")):
        with pytest.raises(BadHandshake) as refused:
            negotiate(offer)
        assert refused.value.status == 400
        assert "foxglove.sdk.v1 or foxglove.websocket.v1" in refused.value.reason and said in refused.value.reason


def test_only_the_protocol_header_changes_each_way() -> None:
    request = parse_head(_request("chat", "foxglove.websocket.v1")[:-4])
    negotiation = negotiate(offered_subprotocols(request))
    to_sdk = offer_to_sdk(request, negotiation)
    assert offered_subprotocols(to_sdk) == ["chat", "foxglove.sdk.v1"]
    assert [h for h in to_sdk.headers if h[0] != "Sec-WebSocket-Protocol"] == [
        h for h in request.headers if h[0] != "Sec-WebSocket-Protocol"
    ]
    assert to_sdk.encode().endswith(b"\r\n\r\n") and parse_head(to_sdk.encode()[:-4]) == to_sdk
    answer = Head(
        "HTTP/1.1 101 Switching Protocols",
        (("sec-websocket-accept", "x"), ("sec-websocket-protocol", "foxglove.sdk.v1")),
    )
    assert rename_answer(answer, negotiation).headers == (
        ("sec-websocket-accept", "x"),
        ("sec-websocket-protocol", "foxglove.websocket.v1"),
    )
    untouched = negotiate(["foxglove.sdk.v1"])
    assert offer_to_sdk(request, untouched) is request and rename_answer(answer, untouched) is answer
    assert status_of(answer) == 101 and status_of(Head("garbage", ())) == 0


# -- the front against a stub of the SDK ------------------------------------------------------------------------


class StubSdk:
    """A TCP server that reads a handshake, answers 101 with ``foxglove.sdk.v1`` and a first frame's bytes, then
    echoes what it gets until the client's end of stream, and closes."""

    GREETING = b"\x81\x05hello"

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.requests: list[bytes] = []
        self.threads = [threading.Thread(target=self._serve, daemon=True, name="stub-sdk")]
        self.threads[0].start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            session = threading.Thread(target=self._session, args=(conn,), daemon=True, name="stub-sdk-session")
            self.threads.append(session)
            session.start()

    def _session(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            self.requests.append(head)
            answer = b"HTTP/1.1 101 Switching Protocols\r\nsec-websocket-protocol: foxglove.sdk.v1\r\n\r\n"
            conn.sendall(answer + self.GREETING + rest)
            while chunk := conn.recv(65536):
                conn.sendall(chunk)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() in progress
        self.listener.close()
        for thread in self.threads:
            thread.join(WAIT)


@pytest.fixture
def stub() -> Iterator[StubSdk]:
    sdk = StubSdk()
    yield sdk
    sdk.close()


@pytest.fixture
def front(stub: StubSdk) -> Iterator[SubprotocolFront]:
    server = SubprotocolFront(("127.0.0.1", stub.port), handshake_timeout=1.0)
    server.start()
    yield server
    server.close()


def _exchange(port: int, data: bytes, half_close: bool = True) -> bytes:
    """Send ``data``, then (with ``half_close``) the end of stream; everything answered until the front closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_the_old_name_is_offered_to_the_sdk_renamed_and_the_bytes_pass_unchanged(
    stub: StubSdk, front: SubprotocolFront
) -> None:
    payload = bytes(range(256)) * 1000  # after the handshake: anything, both ways, byte for byte
    answer = _exchange(front.address[1], _request("foxglove.websocket.v1") + payload)
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101") and b"sec-websocket-protocol: foxglove.websocket.v1" in head
    assert rest == StubSdk.GREETING + payload
    (seen,) = stub.requests
    assert b"Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n" in seen + b"\r\n"
    assert b"foxglove.websocket.v1" not in seen
    answer = _exchange(front.address[1], _request("foxglove.sdk.v1"))
    assert b"sec-websocket-protocol: foxglove.sdk.v1\r\n" in answer
    assert stub.requests[1] == _request("foxglove.sdk.v1")[:-4]  # the SDK's own name: the request as it came
    assert front.accepted == {"foxglove.websocket.v1": 1, "foxglove.sdk.v1": 1} and front.refused == 0


def test_refused_handshakes_are_answered_counted_and_the_front_goes_on(stub: StubSdk, front: SubprotocolFront) -> None:
    port = front.address[1]
    answers = {
        "garbage": _exchange(port, b"\x00\x01\x02 not http\r\n\x7f\r\n\r\n"),
        "too long": _exchange(port, b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * (MAX_HEAD + 10), half_close=False),
        "cut short": _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n"),
        "too slow": _exchange(port, b"GET / HTTP/1.1\r\n", half_close=False),
        "plain http": _exchange(port, b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"),
    }
    assert answers["garbage"].startswith(b"HTTP/1.1 400 ") and b"malformed header line" in answers["garbage"]
    assert answers["too long"].startswith(b"HTTP/1.1 431 ") and str(MAX_HEAD).encode() in answers["too long"]
    assert answers["cut short"].startswith(b"HTTP/1.1 400 ") and b"ended" in answers["cut short"]
    assert answers["too slow"].startswith(b"HTTP/1.1 408 ") and b"within 1 s" in answers["too slow"]
    assert answers["plain http"].startswith(b"HTTP/1.1 400 ") and b"no WebSocket subprotocol" in answers["plain http"]
    assert front.refused == len(answers) and not front.accepted and not stub.requests and front.errors == 0
    assert _exchange(port, _request("foxglove.websocket.v1")).startswith(b"HTTP/1.1 101")


def test_an_unreachable_sdk_is_a_503() -> None:
    front = SubprotocolFront(("127.0.0.1", free_tcp_port()))
    front.start()
    try:
        answer = _exchange(front.address[1], _request("foxglove.sdk.v1"))
    finally:
        front.close()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"not reachable" in answer and front.refused == 1
