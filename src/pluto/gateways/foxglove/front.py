"""The Foxglove gateway's front: one port for the clients of both names of the Foxglove WebSocket protocol.

The protocol's clients name it by the WebSocket subprotocol they offer in their handshake (RFC 6455, section 4):
Foxglove's app offers ``foxglove.sdk.v1``; Lichtblick, PlotJuggler and every client built on Foxglove's JavaScript
library ``@foxglove/ws-protocol`` offer ``foxglove.websocket.v1``, the protocol's first name. Both names stand for
the same protocol (the same operations and binary frames; the SDK renamed it). The ``foxglove-sdk`` server (0.30)
accepts its own names only (``foxglove.sdk.v1``, and ``foxglove.sdk.v1.1``) and answers ``400 Missing expected
sec-websocket-protocol header`` to a client that offers ``foxglove.websocket.v1`` alone; none of its options
changes the names it accepts.

:class:`SubprotocolFront` listens where the gateway is asked to listen, reads each client's handshake and:

- forwards it unchanged to the SDK's server (on 127.0.0.1, a free port) when it offers ``foxglove.sdk.v1`` (the
  name preferred when a client offers both) or another ``foxglove.sdk.*`` name: the SDK picks the name and answers;
- forwards it with ``foxglove.websocket.v1`` offered as ``foxglove.sdk.v1`` when it offers the old name but not
  the new one, and turns the name of the SDK's answer back into ``foxglove.websocket.v1``: the client gets the name
  it offered;
- answers ``400 Bad Request`` itself, with the reason, when it offers neither (a plain HTTP request, another
  protocol), and ``431``/``408`` to a handshake longer than :data:`MAX_HEAD` bytes or slower than
  ``handshake_timeout`` s; each is counted in :attr:`SubprotocolFront.refused` and logged (rate-limited).

After the handshake it relays bytes both ways unchanged, so everything past the handshake is the SDK's: its
protocol, its per-client backlog (the front reads from the SDK no faster than the client reads from the front), its
closing of slow clients. The SDK sees every viewer as a connection from 127.0.0.1; the front logs the real address.
"""

# Strategy: the handshake is the only place the two names differ, so the front changes one header line each way and
# nothing else; the key and accept headers do not depend on the subprotocol (RFC 6455 4.2.2), so the SDK's answer
# stays valid for the client. The pure part (finding and reading a head, choosing what to offer the SDK, renaming
# the answer) does no I/O and raises BadHandshake with a reason. The I/O is two asyncio protocols per connection on
# one loop of its own (pluto.gateways.serving.ServerRunner): the viewer's side and the SDK's side hand each chunk
# straight to the other's transport (no task, no copy beyond the socket's), and a side whose transport's buffer is
# full pauses the reading of the other, so backpressure crosses the front. One timer bounds the whole handshake.
# When one side ends its stream, the end is passed on (a half close, the WebSocket's close handshake may still
# cross) and the connection is cut CLOSE_GRACE s later unless both sides closed before.

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pluto.errors import PlutoError
from pluto.gateways.serving import ProtocolListener, ServerRunner

__all__ = [
    "LEGACY_SUBPROTOCOL",
    "MAX_HEAD",
    "SDK_SUBPROTOCOL",
    "SUBPROTOCOLS",
    "BadHandshake",
    "Head",
    "Negotiation",
    "SubprotocolFront",
    "negotiate",
    "offer_to_sdk",
    "offered_subprotocols",
    "parse_head",
    "refusal",
    "rename_answer",
    "status_of",
]

SDK_SUBPROTOCOL: Final = "foxglove.sdk.v1"
"""The protocol's name in Foxglove's SDK and app."""
LEGACY_SUBPROTOCOL: Final = "foxglove.websocket.v1"
"""The protocol's first name (``@foxglove/ws-protocol``, Lichtblick, PlotJuggler)."""
SUBPROTOCOLS: Final = (SDK_SUBPROTOCOL, LEGACY_SUBPROTOCOL)
"""The names a client may offer, the preferred first."""
SDK_FAMILY: Final = "foxglove.sdk."
"""The SDK's names (``foxglove.sdk.v1``, ``foxglove.sdk.v1.1``, ...): handed to the SDK, which decides."""

MAX_HEAD: Final = 16 * 1024
"""Longest handshake head (request line and headers) read, bytes; a longer one is refused (431)."""
HEADER_NAME: Final = "sec-websocket-protocol"
CHUNK: Final = 256 * 1024
"""Bytes relayed per read."""
CLOSE_GRACE: Final = 5.0
"""s the other direction of a connection is given to finish once one direction has ended."""
LOG_INTERVAL: Final = 10.0
"""s between two log lines about refused handshakes (the first is logged at once, the others counted)."""

_REASONS: Final = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class BadHandshake(PlutoError):
    """A handshake the front refuses, with the HTTP status to answer and the reason to give."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Head:
    """The head of an HTTP message: its first line and its header lines (name, value), in their order."""

    start: str
    headers: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        """The values of every header named ``name`` (case-insensitive)."""
        return [value for key, value in self.headers if key.lower() == name]

    def encode(self) -> bytes:
        lines = [self.start, *(f"{key}: {value}" for key, value in self.headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True)
class Negotiation:
    """What the front does with a client's offer.

    Attributes:
        offer: the subprotocols offered to the SDK, in the client's order.
        renamed: ``foxglove.websocket.v1`` was offered to the SDK as ``foxglove.sdk.v1`` (the answer is renamed back).
    """

    offer: tuple[str, ...]
    renamed: bool


def parse_head(data: bytes) -> Head:
    """The head of an HTTP message: ``data`` up to and without the blank line that ends it.

    Raises:
        BadHandshake: not an HTTP head (400).
    """
    lines = data.decode("latin-1").split("\r\n")
    while lines and not lines[-1]:
        lines.pop()
    if not lines or not lines[0].strip():
        raise BadHandshake(400, "an empty request: a Foxglove client opens a WebSocket (HTTP GET with Upgrade)")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise BadHandshake(400, f"a malformed header line in the request: {line[:80]!r}")
        headers.append((name, value.strip(" \t")))
    return Head(lines[0], tuple(headers))


def offered_subprotocols(head: Head) -> list[str]:
    """The subprotocols a request offers, in its order (every ``Sec-WebSocket-Protocol`` header, comma-separated)."""
    return [name.strip() for value in head.values(HEADER_NAME) for name in value.split(",") if name.strip()]


def negotiate(offered: Sequence[str]) -> Negotiation:
    """What to offer the SDK for a client's offer.

    Raises:
        BadHandshake: the client offers no name of the Foxglove WebSocket protocol (400, saying what it offered).
    """
    if SDK_SUBPROTOCOL in offered:
        return Negotiation(tuple(offered), renamed=False)
    if LEGACY_SUBPROTOCOL in offered:
        return Negotiation(tuple(SDK_SUBPROTOCOL if n == LEGACY_SUBPROTOCOL else n for n in offered), renamed=True)
    if any(name.startswith(SDK_FAMILY) for name in offered):
        return Negotiation(tuple(offered), renamed=False)
    said = f"offered {', '.join(offered)}" if offered else "offered no WebSocket subprotocol"
    raise BadHandshake(
        400,
        f"this is a Foxglove WebSocket server: a client must offer the subprotocol {SDK_SUBPROTOCOL} or "
        f"{LEGACY_SUBPROTOCOL} (Sec-WebSocket-Protocol); this one {said}",
    )


def offer_to_sdk(head: Head, negotiation: Negotiation) -> Head:
    """The request with its subprotocol headers replaced by one that offers ``negotiation.offer``."""
    if not negotiation.renamed:
        return head
    headers: list[tuple[str, str]] = []
    for key, value in head.headers:
        if key.lower() != HEADER_NAME:
            headers.append((key, value))
        elif not any(k.lower() == HEADER_NAME for k, _ in headers):
            headers.append((key, ", ".join(negotiation.offer)))
    return Head(head.start, tuple(headers))


def rename_answer(head: Head, negotiation: Negotiation) -> Head:
    """The SDK's answer with ``foxglove.sdk.v1`` named ``foxglove.websocket.v1`` when the client offered only that."""
    if not negotiation.renamed:
        return head
    headers = tuple(
        (key, LEGACY_SUBPROTOCOL if key.lower() == HEADER_NAME and value == SDK_SUBPROTOCOL else value)
        for key, value in head.headers
    )
    return Head(head.start, headers)


def status_of(head: Head) -> int:
    """The status code of a response head (0 if it has none)."""
    parts = head.start.split(" ", 2)
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0


def refusal(status: int, reason: str) -> bytes:
    """An HTTP response refusing the handshake, the reason as its text body."""
    body = (reason + "\n").encode("utf-8")
    return (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Bad Request')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1") + body


def split_head(buffer: bytes | bytearray, status: int = 431) -> tuple[bytes, bytes] | None:
    """The head at the start of ``buffer`` (without its blank line) and the bytes after it; None while the head is
    not complete.

    Raises:
        BadHandshake: the head is longer than :data:`MAX_HEAD` bytes (``status``, 431 for a request).
    """
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        if len(buffer) >= MAX_HEAD + 4:
            raise BadHandshake(status, f"the head is longer than {MAX_HEAD} bytes")
        return None
    return bytes(buffer[:end]), bytes(buffer[end + 4 :])


class SubprotocolFront:
    """A TCP front of the SDK's WebSocket server that accepts both names of the protocol (see the module's text).

    Args:
        backend: the SDK server's address (host, port).
        host, port: where to listen (port 0 picks a free one).
        logger: where connections, refusals and errors go.
        handshake_timeout: s a client has to send its whole handshake, and the SDK to answer it.

    Use :meth:`start` and :meth:`close`.
    """

    def __init__(
        self,
        backend: tuple[str, int],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        logger: logging.Logger | None = None,
        handshake_timeout: float = 10.0,
    ) -> None:
        if not handshake_timeout > 0:
            raise ValueError(f"handshake_timeout must be > 0, got {handshake_timeout}")
        self.backend = backend
        self.log = logger or logging.getLogger("pluto.foxglove")
        self.handshake_timeout = handshake_timeout
        self.accepted: Counter[str] = Counter()
        """WebSockets opened, by the subprotocol the client was answered."""
        self.refused = 0
        """Handshakes that opened no WebSocket: refused by the front (no name of the protocol, a malformed, long
        or slow head) or by the SDK."""
        self.open = 0
        """Connections relayed now."""
        self._held = 0  # refusals not logged since the last line
        self._last_line = -float("inf")
        listener = ProtocolListener(lambda: _ClientSide(self), host, port)
        self._runner = ServerRunner(listener, name="foxglove-front", logger=self.log)

    @property
    def address(self) -> tuple[str, int]:
        """The host and port the front listens on.

        Raises:
            RuntimeError: it is not listening.
        """
        return self._runner.address

    @property
    def errors(self) -> int:
        """Exceptions raised while serving (counted and logged; it goes on)."""
        return self._runner.errors

    def start(self) -> None:
        """Listen; return once it does.

        Raises:
            OSError: the address cannot be bound (a port in use, say).
        """
        self._runner.start()

    def close(self) -> None:
        """Stop listening and close every connection (idempotent; safe from any thread)."""
        self._runner.close()

    def _spawn(self, coroutine: Coroutine[Any, Any, object]) -> None:
        self._runner.spawn(coroutine, name="foxglove-front-connect")

    def _note_refusal(self, peer: str, reason: str) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._last_line < LOG_INTERVAL:
            self._held += 1
            return
        held, self._held, self._last_line = self._held, 0, now
        more = f" ({held} more refused since the last line, {self.refused} in all)" if held else ""
        self.log.warning("handshake from %s refused: %s%s", peer, reason, more)


class _ClientSide(asyncio.Protocol):
    """A viewer's connection: its handshake is read here, then what it sends goes to the SDK as it comes.

    Reading is paused while the SDK is being asked (what comes meanwhile is kept), and while the SDK's side cannot
    take more (its transport's buffer is full); the SDK's side is paused while this side's buffer is full.
    """

    def __init__(self, front: SubprotocolFront) -> None:
        self.front = front
        self.state = "head"  # head -> asking (the SDK connected to and answering) -> relay -> closed
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.buffer = bytearray()  # the head, then what came while the SDK was asked
        self.negotiation: Negotiation | None = None
        self.server: _ServerSide | None = None
        self.subprotocol: str | None = None  # once accepted
        self.server_full = False  # the SDK's side's buffer is full: stop reading
        self.timer: asyncio.TimerHandle | None = None
        self.grace: asyncio.TimerHandle | None = None

    # -- asyncio callbacks ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        self.timer = asyncio.get_running_loop().call_later(self.front.handshake_timeout, self._too_slow)

    def data_received(self, data: bytes) -> None:
        if self.state == "relay":
            assert self.server is not None and self.server.transport is not None
            self.server.transport.write(data)
        elif self.state == "head":
            self.buffer.extend(data)
            try:
                found = split_head(self.buffer)
                if found is None:
                    return
                head, rest = found
                request = parse_head(head)
                self.negotiation = negotiate(offered_subprotocols(request))
            except BadHandshake as err:
                self.refuse(err.status, err.reason)
                return
            self.state = "asking"
            self.buffer = bytearray(rest)
            self._reading()
            self.front._spawn(self._ask(offer_to_sdk(request, self.negotiation).encode()))
        elif self.state == "asking":  # came before the pause took effect
            if self.server is not None and self.server.transport is not None:
                self.server.transport.write(data)
            else:
                self.buffer.extend(data)

    def eof_received(self) -> bool:
        if self.state == "relay":
            assert self.server is not None
            self.server.end_of_stream()
            self._start_grace()
            return True  # half closed: the SDK's answer to the end may still come
        if self.state == "head":
            self.refuse(400, f"the connection ended after {len(self.buffer)} bytes, inside the request")
        return False

    def pause_writing(self) -> None:
        if self.server is not None and self.server.transport is not None:
            self.server.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.server is not None and self.server.transport is not None and self.state == "relay":
            self.server.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        was = self.state
        self.state = "closed"
        for handle in (self.timer, self.grace):
            if handle is not None:
                handle.cancel()
        if self.server is not None and self.server.transport is not None:
            self.server.transport.close()  # what is buffered for the SDK is sent first
        if was == "relay":
            self.front.open -= 1
            if self.subprotocol is not None:
                self.front.log.info("viewer %s disconnected", self.peer)

    # -- the handshake --------------------------------------------------------------------------------------------

    async def _ask(self, request: bytes) -> None:
        """Connect to the SDK and send it the request (and what followed it); its answer comes to the server side."""
        loop = asyncio.get_running_loop()
        try:
            _, server = await loop.create_connection(lambda: _ServerSide(self), *self.front.backend)
        except OSError as err:
            self.refuse(503, f"the Foxglove server is not reachable: {err.strerror or err}")
            return
        if self.state != "asking":  # the viewer went, or timed out, meanwhile
            assert server.transport is not None
            server.transport.close()
            return
        self.server = server
        assert server.transport is not None
        server.transport.write(request + bytes(self.buffer))
        self.buffer = bytearray()

    def answered(self, head: bytes, rest: bytes) -> None:
        """The SDK's answer: pass it on (renamed when the client offered the old name) and start relaying."""
        assert self.negotiation is not None and self.transport is not None
        if self.state != "asking":
            return  # the viewer went meanwhile (its side closes the SDK's)
        try:
            answer = rename_answer(parse_head(head), self.negotiation)
        except BadHandshake as err:
            self.refuse(503, f"the Foxglove server's answer is not HTTP ({err.reason})")
            return
        if self.timer is not None:
            self.timer.cancel()
        self.transport.write(answer.encode() + rest)
        self.state = "relay"
        self.front.open += 1
        if status_of(answer) == 101:
            self.subprotocol = next(iter(answer.values(HEADER_NAME)), "")
            self.front.accepted[self.subprotocol] += 1
            self.front.log.info("viewer %s connected (%s)", self.peer, self.subprotocol or "no subprotocol")
        else:  # the SDK refused, its reason in its body: passed on, and the SDK closes
            self.front._note_refusal(self.peer, f"the Foxglove server answered {answer.start!r}")
        self._reading()

    def refuse(self, status: int, reason: str) -> None:
        """Answer ``status`` with ``reason`` and close (nothing was relayed yet)."""
        if self.state == "closed" or self.transport is None:
            return
        self.state = "closed"
        self.front._note_refusal(self.peer, reason)
        self.transport.write(refusal(status, reason))
        self.transport.close()
        if self.server is not None and self.server.transport is not None:
            self.server.transport.abort()

    def _too_slow(self) -> None:
        if self.state == "head":
            self.refuse(408, f"no whole handshake within {self.front.handshake_timeout:g} s")
        elif self.state == "asking":
            self.refuse(503, f"the Foxglove server did not answer within {self.front.handshake_timeout:g} s")

    # -- the relay ------------------------------------------------------------------------------------------------

    def _reading(self) -> None:
        """Read from the viewer while its bytes can go somewhere: in the head, or relaying to an SDK side that is
        not full."""
        assert self.transport is not None
        if self.state == "head" or (self.state == "relay" and not self.server_full):
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def server_pause(self, full: bool) -> None:
        self.server_full = full
        if self.state != "closed":
            self._reading()

    def end_of_stream(self) -> None:
        """The SDK's side ended its stream: end the viewer's (a half close), and give the rest CLOSE_GRACE s."""
        if self.transport is not None and self.state == "relay" and self.transport.can_write_eof():
            self.transport.write_eof()
        self._start_grace()

    def _start_grace(self) -> None:
        if self.grace is None and self.state != "closed":
            self.grace = asyncio.get_running_loop().call_later(CLOSE_GRACE, self._cut)

    def _cut(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _ServerSide(asyncio.Protocol):
    """The connection to the SDK for one viewer: first its answer to the handshake, then its bytes as they come."""

    def __init__(self, client: _ClientSide) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.answer: bytearray | None = bytearray()  # None once answered

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        client = self.client
        if self.answer is None:
            assert client.transport is not None
            client.transport.write(data)
            return
        self.answer.extend(data)
        try:
            found = split_head(self.answer, status=503)
        except BadHandshake as err:
            client.refuse(503, f"the Foxglove server's answer is too long ({err.reason})")
            return
        if found is not None:
            self.answer = None
            client.answered(*found)

    def eof_received(self) -> bool:
        if self.answer is not None:
            self.client.refuse(503, "the Foxglove server closed without answering the handshake")
            return False
        self.client.end_of_stream()
        return True

    def end_of_stream(self) -> None:
        """The viewer ended its stream: end ours to the SDK."""
        if self.transport is not None and self.transport.can_write_eof():
            self.transport.write_eof()

    def pause_writing(self) -> None:
        self.client.server_pause(True)

    def resume_writing(self) -> None:
        self.client.server_pause(False)

    def connection_lost(self, exc: Exception | None) -> None:
        client = self.client
        if client.state == "asking":
            client.refuse(503, f"the Foxglove server closed the connection ({exc or 'no answer'})")
        elif client.transport is not None:
            client.transport.close()  # what is buffered for the viewer is sent first
