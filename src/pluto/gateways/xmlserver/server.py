"""The XML server: TCP connections speaking the protocol of :mod:`.codec`, in front of the bus.

One asyncio loop on a thread of its own (:class:`pluto.gateways.serving.ServerRunner`) serves every connection.
Each connection has a codec, a bounded queue of replies and, per subscription, one slot holding the newest update
not yet sent; a sender task per connection writes them out and waits for the socket, so a client that reads slowly
(or not at all) only ever delays itself.

Defences (each limit is a :class:`ServerSettings` field):

- Authentication first: with a token, a connection gets its ``<hello>`` (which says a token is needed) and nothing
  else until it sends the right ``<auth>``: every other request, reads, listings and subscriptions included, is
  answered UNAUTHORIZED without being looked at. After a wrong token, the attempts from the same address are
  refused unchecked (RATE_LIMITED, saying when to try again) for a back-off that starts at ``auth_backoff`` and
  doubles with each wrong token up to ``auth_backoff_max``; a right token ends it
  (:class:`pluto.gateways.guard.AuthLimiter`).
- Values in range: every message written, and every number and message of a call's request, passes
  :func:`pluto.limits.check` before it reaches the bus; a value out of range is refused BAD_VALUE naming the field,
  counted (``out_of_range``), and the connection carries on. Vectors longer than the limits are refused while the
  request is read, before their numbers are.
- Connections: at most ``max_clients`` in all and ``max_clients_per_address`` from one address. A newcomer over a cap
  first makes room: the connection in the way (of its address, for the per-address cap) that has not authenticated or
  holds no subscription and has been silent longest is sent an ``<error code="too-many-clients">`` saying which limit
  and why it was chosen, closed and counted (``evicted``), and the newcomer is served; so idle sockets, even from the
  client's own address, never lock a client out. Only when every connection in the way is authenticated and subscribed
  is the newcomer refused: it gets the ``<error code="too-many-clients">`` and is closed. A connection idle for
  ``idle_timeout`` is sent an ``<error code="idle">`` and closed. Idle means: no complete document came from the client,
  and nothing it was sent was taken, for that long. A client that is handling a request, or that is subscribed and keeps
  up with what it is sent (nothing waits in the socket for it, however quiet its interfaces are), is never idle; one
  subscribed that stopped reading is, once the socket's buffers are full. Bytes that never make a document (a line that
  never ends) do not count as activity.
- Requests: at most ``request_rate`` a second on average per connection, documents capped in size and depth
  (:mod:`.codec`), connections closed after ``max_bad_documents`` bad documents or ``max_auth_failures`` failed
  token attempts.
- The log: at most one line about wrong tokens per address per 10 s, and a few lines about connections per
  address per 10 s; the rest are counted and the counts logged with the next line
  (:class:`pluto.gateways.guard.LogLimiter`).

The defences keep time on a monotonic clock (the ``monotonic`` argument; tests pass their own).
"""

# Strategy: the bus delivers values on its own threads; each subscribed interface (a "topic", shared by every
# connection subscribed to it) keeps only its newest value and wakes the loop with at most one pending call, so a
# stalled loop cannot pile up work. Each new value is encoded once per topic and the same bytes are offered to
# every subscriber whose pacer (pacing.Pacer, on the server's clock, simulated or not) says it is due; one that is
# not due gets a timer. Offering an update to a connection replaces the update of the same interface it has not
# sent yet (the newest value wins, and the replacement is counted as skipped), and the sender task writes one
# document at a time and waits for the transport to drain below its high-water mark before the next, so what a
# connection holds is bounded: the transport's buffer (write_buffer plus one document), one update per subscription
# and at most MAX_REPLIES replies; the reader stops reading requests while the reply queue is full, which pushes
# back on a client that sends without reading. Anything that blocks on the bus (creating a reader, a subscription,
# a service call, listing) runs on a small thread pool; a connection handles its requests one at a time, in order.
# The defences (request rate, idle timeout, auth back-off, log limits) use a monotonic clock, not the robot's time:
# they defend the computer. A housekeeping task looks at every connection a few times a second: it closes the idle
# ones (cancelling their task, which then says why) and writes the summaries of the lines held back. A connection
# evicted to make room is closed the same way, and stops counting against the caps at once (its goodbye may take a
# second to go out), so the newcomer is admitted in the same turn of the loop: the caps bound what is served, and
# an evicted connection lingers for at most the two seconds its goodbye is given. When
# the clock goes back (a new simulation run, a replay started again), the owner calls clock_jumped from any thread:
# the loop then empties the timers and restarts every pacer, so the new run's values go out at once.

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import heapq
import hmac
import itertools
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any, Final, Self, TypeVar

import msgspec

from pluto import limits, msgs, names
from pluto.bus import Bus, StateReader, StateWriter, Subscription
from pluto.closing import close_at_exit
from pluto.errors import BusError, BusTimeout, DecodeError, RemoteError
from pluto.gateways.guard import AuthLimiter, LogLimiter
from pluto.gateways.serving import ServerRunner, StreamListener
from pluto.runtime.clock import Clock, WallClock
from pluto.runtime.ranges import Port, Timeout, between, check_ranges

from . import events
from .codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENT, XmlCodec, encode_event
from .events import (
    NEED_DATA,
    Authorized,
    BadDocument,
    ConnectionClosed,
    ErrorCode,
    ErrorReply,
    Hello,
    InterfaceEntry,
    Listing,
    Reply,
    ServerReply,
    Subscribed,
    Unsubscribed,
    Update,
    Value,
    Written,
)
from .pacing import Pacer, TokenBucket

__all__ = ["ClientStats", "ServerSettings", "ServerStats", "XmlServer", "command_interfaces"]

T = TypeVar("T")

DEFAULT_PORT: Final = 7650
MAX_REPLIES: Final = 16
"""Replies a connection may have waiting to be sent; past that it is not read until they go out."""
READ_CHUNK: Final = 64 * 1024
MAX_PACING_SLEEP: Final = 0.05
"""Longest wait of the pacing task between looks at the clock, s of wall time (a simulated clock may jump)."""
MAX_READERS: Final = 256
"""Interfaces the server keeps a reader of for ``<read>``; past that a reader is made for each read."""
LISTING_MAX_AGE: Final = 1.0
"""Seconds a ``<listing>`` found on the bus is reused for other ``<list/>`` requests."""
LOGGED_BAD_DOCUMENTS: Final = 3
"""Bad documents logged one by one per connection; the rest are counted and summed up when it closes."""
LOG_INTERVAL: Final = 10.0
"""Seconds over which the lines about one address are limited."""
CLIENT_LOG_BURST: Final = 10
"""Lines about the connections of one address (connected, refused, disconnected, ...) per LOG_INTERVAL."""
HOUSEKEEPING_PERIOD: Final = 0.25
"""Seconds between looks for idle connections and log lines held back (wall clock)."""
BACKLOG: Final = 512
"""Connections the kernel may hold before the server accepts them."""


def command_interfaces() -> frozenset[str]:
    """The command interfaces of the interface table (the last part of the name is ``command`` or ``Command``)."""
    return frozenset(name for name in names.INTERFACES if name.rsplit("/", 1)[-1].lower() == "command")


class ServerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a server listens on and what it allows: the one declaration of these settings, their defaults and their
    meaning (the ``xmlserver`` module has a parameter for each but the secret, :mod:`.module`).

    Attributes:
        host: address to listen on (127.0.0.1: this computer only; 0.0.0.0: every network).
        port: TCP port (0: any free one, logged; see :attr:`XmlServer.address`).
        max_clients: connections served at once; past it a newcomer evicts the connection silent longest that has
            not authenticated or holds no subscription, and is refused with TOO_MANY_CLIENTS if there is none.
        max_clients_per_address: connections served at once from one address; past it likewise, among that
            address's connections.
        idle_timeout: s after which a connection that sent nothing and took nothing is closed.
        auth_backoff: s during which the token attempts from an address are refused after its first wrong token; it
            doubles with each further wrong token.
        auth_backoff_max: the longest back-off, s.
        max_subscriptions: subscriptions per connection.
        max_rate_hz: largest subscription rate, Hz.
        request_rate: requests a second a connection may make on average.
        request_burst: requests a connection may make at once.
        max_document: largest document accepted, bytes.
        max_depth: deepest element nesting accepted.
        max_bad_documents: bad documents after which a connection is closed.
        max_auth_failures: failed token attempts (wrong, or refused during a back-off) after which a connection is
            closed.
        write_buffer: bytes buffered for a connection before the server waits for the client (high-water mark)
            and skips its updates.
        send_buffer: kernel send buffer of each connection (SO_SNDBUF), bytes (0: the system's).
        call_timeout: default wait for a service's reply, s.
        max_call_timeout: longest wait for a service's reply a client may ask for, s.
        writable: interfaces clients may write (default: every command interface of the table).
        token: shared secret a connection must present (``<auth>``) before any other request; None: no secret (never
            a parameter of the module: it comes from a file or the environment).

    Raises:
        ValueError: a limit out of range.
    """

    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    token: str | None = None
    max_clients: Annotated[int, between(1, 100000)] = 100
    max_clients_per_address: Annotated[int, between(1, 100000)] = 64
    idle_timeout: Timeout = 60.0
    auth_backoff: Timeout = 0.5
    auth_backoff_max: Timeout = 30.0
    max_subscriptions: Annotated[int, between(1, 10000)] = 16
    max_rate_hz: Annotated[float, between(0.0, 10000.0, open_low=True)] = 1000.0
    request_rate: Annotated[float, between(0.0, 100000.0, open_low=True)] = 50.0
    request_burst: Annotated[int, between(1, 1000000)] = 100
    max_document: Annotated[int, between(1024, 1073741824)] = DEFAULT_MAX_DOCUMENT
    max_depth: Annotated[int, between(8, 10000)] = DEFAULT_MAX_DEPTH
    max_bad_documents: Annotated[int, between(1, 1000000)] = 32
    max_auth_failures: Annotated[int, between(1, 1000000)] = 3
    write_buffer: Annotated[int, between(1024, 1073741824)] = 64 * 1024
    send_buffer: Annotated[int, between(0, 1073741824)] = 0
    call_timeout: Timeout = 2.0
    max_call_timeout: Timeout = 10.0
    writable: frozenset[str] = msgspec.field(default_factory=command_interfaces)

    def __post_init__(self) -> None:
        check_ranges(type(self), {name: getattr(self, name) for name in self.__struct_fields__})
        if self.auth_backoff_max < self.auth_backoff:
            raise ValueError(f"auth_backoff_max ({self.auth_backoff_max}) is below auth_backoff ({self.auth_backoff})")
        if self.token is not None and not self.token:
            raise ValueError("an empty token")
        for name in self.writable:
            names.check_name(name)


class ClientStats(msgspec.Struct, frozen=True, kw_only=True):
    """One connection as the server sees it.

    Attributes:
        peer: the client's address and port.
        connected: s since it connected.
        requests: documents received (good and bad).
        bad_documents: documents refused as malformed, too large, forbidden or invalid.
        out_of_range: requests refused for a value out of range (:func:`pluto.limits.check`).
        rate_limited: requests refused for the request-rate limit.
        auth_failures: its failed token attempts: wrong, or refused during a back-off.
        updates_sent: subscription updates written.
        updates_skipped: updates replaced by a newer value before they could be written (a slow client).
        bytes_sent: bytes written.
        queued_bytes: bytes waiting to be sent now: transport buffer, pending updates and replies.
        max_queued_bytes: the largest ``queued_bytes`` seen.
        subscriptions: the interfaces it is subscribed to.
        authorized: it presented the token (or none is needed).
        idle: s since it was last active (a document received, or something it was sent taken).
    """

    peer: str
    connected: float
    requests: int
    bad_documents: int
    out_of_range: int
    rate_limited: int
    auth_failures: int
    updates_sent: int
    updates_skipped: int
    bytes_sent: int
    queued_bytes: int
    max_queued_bytes: int
    subscriptions: list[str]
    authorized: bool
    idle: float


class ServerStats(msgspec.Struct, frozen=True, kw_only=True):
    """The server as a whole (the reply of the module's ``xmlserver/clients`` service).

    Attributes:
        address: host and port it listens on.
        clients: the open connections.
        connections: connections accepted since it started.
        refused: connections refused because there were ``max_clients`` already, or ``max_clients_per_address``
            from the same address, every one of them authenticated and subscribed.
        evicted: connections closed to make room for a newcomer (past a cap, the one silent longest that had not
            authenticated or held no subscription).
        idle_closed: connections closed for being idle.
        out_of_range: requests refused for a value out of range, on every connection since it started.
        auth_failures: wrong tokens checked since it started.
        auth_refused: token attempts refused unchecked during a back-off.
        topics: interfaces it is subscribed to on the bus.
    """

    address: str
    clients: list[ClientStats]
    connections: int
    refused: int
    evicted: int
    idle_closed: int
    out_of_range: int
    auth_failures: int
    auth_refused: int
    topics: list[str]


class _Refused(Exception):
    """A request the server will not carry out; becomes an ``<error>`` reply."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Sub:
    """One connection's subscription to one topic."""

    __slots__ = ("client", "closed", "pacer", "scheduled", "seq", "topic")

    def __init__(self, client: _Client, topic: _Topic, rate_hz: float) -> None:
        self.client = client
        self.topic = topic
        self.pacer = Pacer(rate_hz)
        self.seq = 0  # the topic's seq of the last value offered
        self.scheduled = False
        self.closed = False


class _Topic:
    """The newest value of one interface, shared by every connection subscribed to it."""

    def __init__(self, server: XmlServer, name: str, cls: type[msgs.Message]) -> None:
        self.server = server
        self.name = name
        self.cls = cls
        self.subs: set[_Sub] = set()
        self.seq = 0
        self.value: msgs.Message | None = None
        self.subscription: Subscription[Any] | None = None
        self._doc: bytes | None = None
        self._lock = threading.Lock()
        self._incoming: msgs.Message | None = None
        self._scheduled = False

    def on_bus_value(self, value: msgs.Message) -> None:
        """Called on a bus thread with each new value: keep it, and wake the loop once."""
        with self._lock:
            self._incoming = value
            if self._scheduled:
                return
            self._scheduled = True
        self.server._runner.call_soon(self._take)  # dropped if the server has stopped

    def _take(self) -> None:
        with self._lock:
            value, self._incoming, self._scheduled = self._incoming, None, False
        if value is None:
            return
        self.seq += 1
        self.value = value
        self._doc = None
        self.server._updated(self)

    @property
    def doc(self) -> bytes:
        """The ``<update>`` document of the newest value (encoded once, for every subscriber)."""
        if self._doc is None:
            assert self.value is not None
            self._doc = encode_event(Update(self.name, self.seq, self.value))
        return self._doc


class _Client:
    """One connection: its codec, its queues and its counters."""

    def __init__(self, server: XmlServer, writer: asyncio.StreamWriter, peer: str, host: str) -> None:
        s = server.settings
        self.server = server
        self.writer = writer
        self.peer = peer
        self.host = host
        self.codec = XmlCodec("server", max_document=s.max_document, max_depth=s.max_depth)
        self.bucket = TokenBucket(s.request_rate, s.request_burst)
        self.subs: dict[str, _Sub] = {}
        self.replies: deque[bytes] = deque()
        self.reply_bytes = 0
        self.pending: dict[str, bytes] = {}
        self.pending_bytes = 0
        self.wake = asyncio.Event()
        self.space = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self.closing = False
        self.dead = False
        self.ending = False  # it is being disconnected
        self.counted = True  # it counts against the caps (until it is evicted or gone)
        self.busy = False  # a request is being handled
        self.close_reason: str | None = None  # why the server closes it from outside its task (idle, evicted)
        self.authorized = s.token is None
        self.started = time.monotonic()
        self.last_active = server.monotonic()
        self.requests = 0
        self.bad_documents = 0
        self.out_of_range = 0
        self.rate_limited = 0
        self.auth_failures = 0
        self.updates_sent = 0
        self.updates_skipped = 0
        self.bytes_sent = 0
        self.max_queued = 0

    def queued_bytes(self) -> int:
        """Bytes waiting to be sent: the transport's buffer, the pending updates and the replies."""
        return self.writer.transport.get_write_buffer_size() + self.pending_bytes + self.reply_bytes

    async def reply(self, event: ServerReply) -> None:
        """Queue a reply, waiting while the reply queue is full (so a client that does not read is not read)."""
        while len(self.replies) >= MAX_REPLIES and not self.dead:
            self.space.clear()
            await self.space.wait()
        if self.dead:
            return
        self.reply_now(event)

    def reply_now(self, event: ServerReply) -> None:
        """Queue a reply even if the reply queue is full (the last one, saying why the connection is closed)."""
        if self.dead:
            return
        doc = encode_event(event)
        self.replies.append(doc)
        self.reply_bytes += len(doc)
        self._queued()
        self.idle.clear()
        self.wake.set()

    def offer(self, name: str, doc: bytes) -> None:
        """Make ``doc`` the next update of ``name`` to send (replacing one not sent yet)."""
        if self.dead:
            return
        old = self.pending.pop(name, None)
        if old is not None:
            self.updates_skipped += 1
            self.pending_bytes -= len(old)
        self.pending[name] = doc
        self.pending_bytes += len(doc)
        self._queued()
        self.idle.clear()
        self.wake.set()

    def _queued(self) -> None:
        self.max_queued = max(self.max_queued, self.queued_bytes())

    def withdraw(self, name: str) -> None:
        """Forget the pending update of ``name`` (after unsubscribing)."""
        old = self.pending.pop(name, None)
        if old is not None:
            self.pending_bytes -= len(old)

    async def send_loop(self) -> None:
        """Write replies (first) and updates, one document at a time, waiting for the socket between them."""
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                while self.replies or self.pending:
                    if self.replies:
                        doc = self.replies.popleft()
                        self.reply_bytes -= len(doc)
                        self.space.set()
                    else:
                        name = next(iter(self.pending))
                        doc = self.pending.pop(name)
                        self.pending_bytes -= len(doc)
                        self.updates_sent += 1
                    self.writer.write(doc)
                    self.bytes_sent += len(doc)
                    self._queued()
                    await self.writer.drain()
                    self.last_active = self.server.monotonic()  # the socket took it: the client reads
                self.idle.set()
        except (ConnectionError, OSError, RuntimeError):
            self._die()
        except asyncio.CancelledError:
            self._die()
            raise

    def _die(self) -> None:
        self.dead = True
        self.closing = True
        self.replies.clear()
        self.pending.clear()
        self.reply_bytes = self.pending_bytes = 0
        self.space.set()
        self.idle.set()

    def evictable(self) -> bool:
        """Not authenticated, or holding no subscription, and not being closed already: room for a newcomer."""
        return self.counted and self.close_reason is None and not self.ending and not (self.authorized and self.subs)

    def keeps_up(self) -> bool:
        """Subscribed, and nothing waits in the transport for the socket to take it."""
        return bool(self.subs) and self.writer.transport.get_write_buffer_size() == 0

    def stats(self) -> ClientStats:
        return ClientStats(
            peer=self.peer,
            connected=round(time.monotonic() - self.started, 3),
            requests=self.requests,
            bad_documents=self.bad_documents,
            out_of_range=self.out_of_range,
            rate_limited=self.rate_limited,
            auth_failures=self.auth_failures,
            updates_sent=self.updates_sent,
            updates_skipped=self.updates_skipped,
            bytes_sent=self.bytes_sent,
            queued_bytes=self.queued_bytes(),
            max_queued_bytes=self.max_queued,
            subscriptions=sorted(self.subs),
            authorized=self.authorized,
            idle=round(max(0.0, self.server.monotonic() - self.last_active), 3),
        )


class XmlServer:
    """The XML gateway to the bus.

    Args:
        bus: the bus it reads, writes and calls on.
        settings: address and limits.
        clock: the clock that paces subscriptions (the module's; the wall clock by default).
        clock_rate: returns the clock's seconds per wall-clock second (a fast simulated clock's rate), to know how
            long to sleep until an update is due; 1 by default.
        logger: where connections and refused documents are logged.
        monotonic: the clock of the defences (request rate, idle timeout, token back-off, log limits), s;
            ``time.monotonic`` by default.

    Use :meth:`start` and :meth:`close`, or as a context manager.
    """

    def __init__(
        self,
        bus: Bus,
        settings: ServerSettings | None = None,
        clock: Clock | None = None,
        *,
        clock_rate: Callable[[], float] | None = None,
        logger: logging.Logger | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.bus = bus
        self.settings = settings or ServerSettings()
        self.clock: Clock = clock or WallClock()
        self.monotonic: Callable[[], float] = monotonic or time.monotonic
        self._clock_rate = clock_rate or (lambda: 1.0)
        self.log = logger or logging.getLogger("pluto.xmlserver")
        self._auth_limiter = AuthLimiter(self.settings.auth_backoff, self.settings.auth_backoff_max)
        self._auth_log: LogLimiter[str] = LogLimiter(LOG_INTERVAL, 1)
        self._client_log: LogLimiter[str] = LogLimiter(LOG_INTERVAL, CLIENT_LOG_BURST)
        self._by_address: dict[str, dict[_Client, None]] = {}  # the connections counted against the caps
        self._counted = 0
        s = self.settings
        listener = StreamListener(
            self._on_connect, s.host, s.port, limit=READ_CHUNK, reuse_address=True, backlog=BACKLOG
        )
        # Not a daemon thread: the worker threads it starts inherit that, and so do the threads Zenoh starts for the
        # callbacks of what they declare (readers, subscriptions). The interpreter then waits for those threads at
        # exit, after the bus has closed, instead of tearing them down in the middle of a callback, which aborts
        # the process. A server its owner forgot to close is closed at exit, before those waits.
        self._runner = ServerRunner(listener, name="xmlserver", logger=self.log, on_open=self._opened, daemon=False)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="xmlserver-bus")
        self._clients: dict[_Client, asyncio.Task[Any]] = {}
        self._topics: dict[str, _Topic] = {}
        self._readers: dict[str, StateReader[Any]] = {}
        self._writers: dict[str, StateWriter[Any]] = {}
        self._orphans: list[Subscription[Any]] = []
        self._listing: tuple[float, list[str], dict[str, float]] | None = None
        self._heap: list[tuple[float, int, _Sub]] = []
        self._counter = itertools.count()
        self._create_lock: asyncio.Lock | None = None
        self._pace_wake: asyncio.Event | None = None
        self._address: tuple[str, int] | None = None
        self._connections = 0
        self._refused = 0
        self._evicted = 0
        self._idle_closed = 0
        self._out_of_range = 0
        self._auth_failures = 0
        self._auth_refused = 0
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The host and port the server listens on.

        Raises:
            RuntimeError: it is not started.
        """
        if self._address is None:
            raise RuntimeError("the server is not started")
        return self._address

    def start(self) -> None:
        """Bind the port and start serving on a thread of the server's own (starting twice does nothing).

        Raises:
            OSError: the address cannot be bound (a port in use, say).
            RuntimeError: the server was closed.
        """
        if self._address is not None:
            return
        if self._closed:
            raise RuntimeError("the XML server is closed")
        close_at_exit(self)
        try:
            self._runner.start()
        except BaseException:
            self._release_all()
            raise
        self._address = self._runner.address

    def _opened(self, runner: ServerRunner) -> None:
        self._create_lock = asyncio.Lock()
        self._pace_wake = asyncio.Event()
        s = self.settings
        host, port = runner.address
        self.log.info(
            "XML server listening on %s:%d (token %s; at most %d clients, %d from one address; idle timeout %g s)",
            host,
            port,
            "required" if s.token else "not needed",
            s.max_clients,
            s.max_clients_per_address,
            s.idle_timeout,
        )
        runner.spawn(self._pace(), name="xmlserver-pacing")
        runner.spawn(self._housekeep(), name="xmlserver-housekeeping")

    def close(self) -> None:
        """Close every connection and stop serving (idempotent; safe from any thread)."""
        if self._closed:
            return
        self._closed = True
        self._runner.close()
        self._release_all()

    @property
    def errors(self) -> int:
        """Exceptions raised on the server's loop outside a request's handling (counted and logged; it goes on)."""
        return self._runner.errors

    def _release_all(self) -> None:
        things: list[Any] = [t.subscription for t in self._topics.values() if t.subscription is not None]
        things += [*self._orphans, *self._readers.values(), *self._writers.values()]
        self._orphans.clear()
        self._topics.clear()
        self._readers.clear()
        self._writers.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)  # a call in progress ends within its timeout
        for thing in things:
            self.bus.release(thing)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self, timeout: float = 2.0) -> ServerStats:
        """A snapshot of the connections (safe to call from any thread but the server's).

        Raises:
            RuntimeError: the server is not running.
        """
        return self._runner.run(self._stats(), timeout)

    async def _stats(self) -> ServerStats:
        host, port = self.address
        return ServerStats(
            address=f"{host}:{port}",
            clients=[client.stats() for client in self._clients],
            connections=self._connections,
            refused=self._refused,
            evicted=self._evicted,
            idle_closed=self._idle_closed,
            out_of_range=self._out_of_range,
            auth_failures=self._auth_failures,
            auth_refused=self._auth_refused,
            topics=sorted(self._topics),
        )

    # -- connections ----------------------------------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        s = self.settings
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        host = str(peername[0]) if isinstance(peername, tuple) else str(peername)
        sock = writer.get_extra_info("socket")
        if s.send_buffer and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, s.send_buffer)
        writer.transport.set_write_buffer_limits(high=s.write_buffer)
        refusal = "the server is stopping" if self._closed else self._make_room(host, peer)
        if refusal is not None:
            self._refused += 1
            writer.write(encode_event(ErrorReply(ErrorCode.TOO_MANY_CLIENTS, f"{refusal}; closing the connection")))
            await self._close_writer(writer, 1.0)
            return
        client = _Client(self, writer, peer, host)
        task = asyncio.current_task()
        assert task is not None
        self._clients[client] = task
        self._by_address.setdefault(host, {})[client] = None
        self._counted += 1
        self._connections += 1
        self._client_line(logging.INFO, host, "client %s connected (%d open)", peer, len(self._clients))
        sender = asyncio.create_task(client.send_loop())
        reason = "closed by the client"
        try:
            await client.reply(Hello(self.bus.robot, s.token is not None, s.max_document))
            reason = await self._read_loop(client, reader)
        except (ConnectionError, OSError) as err:
            reason = f"connection error: {err}"
        except asyncio.CancelledError:
            if client.close_reason is None:
                reason = "server stopping"
            else:  # closed by the housekeeping: carry on here with the goodbye
                reason = client.close_reason
                task.uncancel()
        finally:
            await self._disconnect(client, sender, reason)

    async def _read_loop(self, client: _Client, reader: asyncio.StreamReader) -> str:
        while True:
            data = await reader.read(READ_CHUNK)
            client.codec.receive_data(data)
            while (event := client.codec.next_event()) is not NEED_DATA:
                if isinstance(event, ConnectionClosed):
                    return "closed by the client"
                client.busy = True
                try:
                    await self._handle(client, event)
                finally:
                    client.busy = False
                    client.last_active = self.monotonic()
                if client.closing:
                    return "closed by the server" if not client.dead else "connection lost"
            if not data:
                return "closed by the client"

    async def _disconnect(self, client: _Client, sender: asyncio.Task[None], reason: str) -> None:
        client.ending = True
        for sub in list(client.subs.values()):
            self._detach(sub)
        client.subs.clear()
        stopping = self._runner.closing
        try:
            if not stopping and not client.dead:
                with contextlib.suppress(TimeoutError):  # let the last replies (an error saying why) go out
                    await asyncio.wait_for(client.idle.wait(), 1.0)
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            await self._close_writer(client.writer, 0.0 if stopping else 1.0)
        except asyncio.CancelledError:  # the server stops meanwhile: cut the connection off, and still account for it
            sender.cancel()
            client.writer.transport.abort()
            self._forget(client, reason)
            raise
        self._forget(client, reason)

    def _forget(self, client: _Client, reason: str) -> None:
        """Count a connection that has closed as gone, and log its summary."""
        self._clients.pop(client, None)
        self._uncount(client)
        stats = client.codec.statistics
        self._client_line(
            logging.INFO,
            client.host,
            "client %s disconnected (%s) after %.1f s: %d requests, %d bad documents, %d out of range, "
            "%d rate-limited, %d updates sent, %d skipped, %d bytes sent, %d bytes received",
            client.peer,
            reason,
            time.monotonic() - client.started,
            client.requests,
            client.bad_documents,
            client.out_of_range,
            client.rate_limited,
            client.updates_sent,
            client.updates_skipped,
            client.bytes_sent,
            stats.bytes,
        )

    def _uncount(self, client: _Client) -> None:
        """Stop counting a connection against the caps (evicted, or gone)."""
        if not client.counted:
            return
        client.counted = False
        self._counted -= 1
        same = self._by_address.get(client.host)
        if same is not None:
            same.pop(client, None)
            if not same:
                del self._by_address[client.host]

    def _make_room(self, host: str, peer: str) -> str | None:
        """Make room for a newcomer from ``host`` under both caps, evicting if need be: None when it may be served,
        else why it is refused (every connection in the way is authenticated and subscribed)."""
        s = self.settings
        same = self._by_address.get(host, {})
        if len(same) >= s.max_clients_per_address:
            cap = f"at most {s.max_clients_per_address} connections from {host}"
            if not self._evict(list(same), cap):
                line = "client %s refused: %d connections from %s already, all authenticated and subscribed"
                self._client_line(logging.WARNING, host, line, peer, len(same), host)
                return f"{cap}, and every one is authenticated and subscribed"
        if self._counted >= s.max_clients:
            cap = f"at most {s.max_clients} clients"
            if not self._evict(list(self._clients), cap):
                line = "client %s refused: %d connections already, all authenticated and subscribed"
                self._client_line(logging.WARNING, host, line, peer, self._counted)
                return f"{cap}, and every one is authenticated and subscribed"
        return None

    def _evict(self, candidates: list[_Client], cap: str) -> bool:
        """Close the candidate that has not authenticated or holds no subscription and has been silent longest
        (one handling a request last of all); False if there is none."""
        open_to = [client for client in candidates if client.evictable()]
        if not open_to:
            return False
        victim = min(open_to, key=lambda client: (client.busy, client.last_active))
        quiet = max(0.0, self.monotonic() - victim.last_active)
        why = "not authenticated" if not victim.authorized else "with no subscription"
        self._evicted += 1
        self._uncount(victim)
        victim.close_reason = f"evicted to make room ({cap})"
        reason = f"{cap}: this connection, {why} and silent for {quiet:.1f} s, makes room for a new one; closing it"
        victim.reply_now(ErrorReply(ErrorCode.TOO_MANY_CLIENTS, reason))
        line = "client %s: closing it to make room (%s), %s and silent for %.1f s"
        self._client_line(logging.INFO, victim.host, line, victim.peer, cap, why, quiet)
        self._clients[victim].cancel()
        return True

    # -- defences -------------------------------------------------------------------------------------------------

    def _client_line(self, level: int, host: str, message: str, *args: Any, exc_info: bool = False) -> None:
        """Log a line about a connection from ``host``, unless that address has had its share of lines lately."""
        held = self._client_log.note(host, self.monotonic())
        if held is None:
            return
        if held:
            message += " (%d more lines about %s held back)"
            args = (*args, held, host)
        self.log.log(level, message, *args, exc_info=exc_info)

    async def _housekeep(self) -> None:
        """Close the idle connections, and log the counts of the lines held back (a few times a second)."""
        while True:
            await asyncio.sleep(HOUSEKEEPING_PERIOD)
            now = self.monotonic()
            limit = self.settings.idle_timeout
            for client, task in list(self._clients.items()):
                if client.ending or client.close_reason is not None:
                    continue
                if client.busy or client.keeps_up():
                    client.last_active = now
                elif now - client.last_active >= limit:
                    self._close_idle(client, task)
            for host, count in self._auth_log.flush(now):
                self.log.warning("%s: %d more wrong tokens or attempts refused during the back-off", host, count)
            for host, count in self._client_log.flush(now):
                self.log.info("%s: %d more lines about its connections held back", host, count)

    def _close_idle(self, client: _Client, task: asyncio.Task[Any]) -> None:
        limit = self.settings.idle_timeout
        client.close_reason = f"idle for {limit:g} s"
        self._idle_closed += 1
        reason = f"nothing received from the client and nothing taken by it for {limit:g} s; closing the connection"
        client.reply_now(ErrorReply(ErrorCode.IDLE, reason))
        self._client_line(logging.INFO, client.host, "client %s: closing it, idle for %g s", client.peer, limit)
        task.cancel()

    def _refuse_value(self, client: _Client, reason: str) -> None:
        """Count (and log, sparingly) a request refused for a value out of range."""
        client.out_of_range += 1
        self._out_of_range += 1
        line = "client %s: refused a value out of range: %s"
        self._client_line(logging.WARNING, client.host, line, client.peer, reason)

    @staticmethod
    async def _close_writer(writer: asyncio.StreamWriter, grace: float) -> None:
        """Close a connection, giving what is buffered ``grace`` seconds to go out (a client that does not read
        is cut off then)."""
        writer.close()
        if grace > 0:
            try:
                await asyncio.wait_for(writer.wait_closed(), grace)
                return
            except (TimeoutError, ConnectionError, OSError):
                pass
        writer.transport.abort()

    # -- requests -------------------------------------------------------------------------------------------------

    async def _handle(self, client: _Client, event: events.Request | BadDocument | Any) -> None:
        client.requests += 1
        request_id = getattr(event, "id", None)
        if not client.bucket.take(self.monotonic()):
            client.rate_limited += 1
            limit = f"more than {self.settings.request_rate:g} requests a second"
            await client.reply(ErrorReply(ErrorCode.RATE_LIMITED, f"{limit}; this one was not carried out", request_id))
            return
        if isinstance(event, BadDocument):
            await self._bad_document(client, event)
            return
        if not client.authorized and not isinstance(event, events.AuthRequest):
            # Nothing before the token: not a value, not a listing, not even whether an interface exists.
            tag = events.REQUEST_TAGS.get(type(event), "a request")
            reason = f'<{tag}> needs <auth token="..."/> first: this server requires a token'
            await client.reply(ErrorReply(ErrorCode.UNAUTHORIZED, reason, request_id))
            return
        handlers: dict[type[Any], Callable[[_Client, Any], Any]] = {
            events.ListRequest: self._list,
            events.ReadRequest: self._read,
            events.SubscribeRequest: self._subscribe,
            events.UnsubscribeRequest: self._unsubscribe,
            events.WriteRequest: self._write,
            events.CallRequest: self._call,
            events.AuthRequest: self._auth,
        }
        handler = handlers.get(type(event))
        try:
            if handler is None:
                raise _Refused(ErrorCode.UNKNOWN_OPERATION, f"{type(event).__name__} is not a request")
            reply: ServerReply | None = await handler(client, event)
        except _Refused as refused:
            reply = ErrorReply(refused.code, refused.reason, request_id)
        except Exception as err:
            name = type(event).__name__
            self._client_line(logging.ERROR, client.host, "client %s: %s failed", client.peer, name, exc_info=True)
            reply = ErrorReply(ErrorCode.INTERNAL, f"{type(err).__name__}: {err}", request_id)
        if reply is not None:
            await client.reply(reply)

    async def _bad_document(self, client: _Client, bad: BadDocument) -> None:
        if bad.out_of_range:  # a well-formed request with a value too large (a vector too long): not malformed
            self._refuse_value(client, bad.reason)
            await client.reply(ErrorReply(bad.code, bad.reason, bad.id))
            return
        client.bad_documents += 1
        if client.bad_documents <= LOGGED_BAD_DOCUMENTS:
            more = " (further ones are counted, not logged)" if client.bad_documents == LOGGED_BAD_DOCUMENTS else ""
            self._client_line(
                logging.WARNING,
                client.host,
                "client %s: refused a document (%s): %s%s",
                client.peer,
                bad.code.value,
                bad.reason,
                more,
            )
        await client.reply(ErrorReply(bad.code, bad.reason, bad.id))
        if client.bad_documents >= self.settings.max_bad_documents:
            self._client_line(
                logging.WARNING,
                client.host,
                "client %s: closing after %d bad documents",
                client.peer,
                client.bad_documents,
            )
            reason = f"{client.bad_documents} bad documents; closing the connection"
            await client.reply(ErrorReply(ErrorCode.TOO_MANY_ERRORS, reason))
            client.closing = True

    def _type_of(self, name: str, type_name: str | None) -> type[msgs.Message]:
        known = names.message_type_of(name)
        if type_name is not None:
            cls = msgs.message_type(type_name)
            if known is not None and known is not cls:
                raise _Refused(ErrorCode.BAD_REQUEST, f"{name} carries {known.__name__}, not {type_name}")
            return cls
        if known is None:
            raise _Refused(
                ErrorCode.UNKNOWN_INTERFACE,
                f"unknown interface {name!r} (<list/> shows them; for one outside the table give its type)",
            )
        return known

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def _list(self, _client: _Client, request: events.ListRequest) -> ServerReply:
        # Asking the bus takes up to a second of a worker thread: clients that list at once share one answer.
        cached = self._listing
        now = asyncio.get_running_loop().time()
        if cached is None or now - cached[0] > LISTING_MAX_AGE:
            found = await asyncio.gather(
                self._blocking(self.bus.live_modules, 0.5), self._blocking(self.bus.interface_keys, 0.5)
            )
            cached = self._listing = (now, found[0], found[1])
        _, modules, live = cached
        entries = []
        for name in sorted(set(names.INTERFACES) | set(live) | set(self.settings.writable)):
            row = names.INTERFACES.get(name)
            entries.append(
                InterfaceEntry(
                    name,
                    row.type.__name__ if row else "",
                    name in live,
                    name in self.settings.writable,
                    row.description if row else "",
                )
            )
        return Listing(tuple(modules), tuple(entries), id=request.id)

    async def _read(self, _client: _Client, request: events.ReadRequest) -> ServerReply:
        cls = self._type_of(request.name, request.type)
        topic = self._topics.get(request.name)
        value = topic.value if topic is not None and topic.cls is cls else None
        if value is None:
            reader, kept = await self._reader(request.name, cls)
            value = reader.read()
            if not kept:
                await self._blocking(self.bus.release, reader)
        if value is None:
            raise _Refused(ErrorCode.NO_VALUE, f"nobody has written {request.name} yet")
        return Value(request.name, value, id=request.id)

    async def _reader(self, name: str, cls: type[msgs.Message]) -> tuple[StateReader[Any], bool]:
        """A reader of ``name``, and whether the server keeps it (else the caller releases it after reading)."""
        assert self._create_lock is not None
        async with self._create_lock:
            reader = self._readers.get(name)
            if reader is not None and reader.type is cls:
                return reader, True
            reader = await self._blocking(self.bus.create_reader, name, cls, fetch_timeout=0.5)
            if name in self._readers or len(self._readers) >= MAX_READERS:
                return reader, False
            self._readers[name] = reader
            return reader, True

    async def _subscribe(self, client: _Client, request: events.SubscribeRequest) -> ServerReply | None:
        s = self.settings
        cls = self._type_of(request.name, request.type)
        if request.rate > s.max_rate_hz:
            raise _Refused(ErrorCode.BAD_REQUEST, f"rate {request.rate:g} Hz is above the limit of {s.max_rate_hz:g}")
        sub = client.subs.get(request.name)
        if sub is not None:
            if sub.topic.cls is not cls:
                raise _Refused(ErrorCode.BAD_REQUEST, f"already subscribed to {request.name} as {sub.topic.cls}")
            sub.pacer = Pacer(request.rate)
        else:
            if len(client.subs) >= s.max_subscriptions:
                raise _Refused(ErrorCode.TOO_MANY_SUBSCRIPTIONS, f"at most {s.max_subscriptions} subscriptions")
            topic = await self._topic(request.name, cls)
            if client.closing:
                return None
            sub = _Sub(client, topic, request.rate)
            client.subs[request.name] = sub
            topic.subs.add(sub)
        await client.reply(Subscribed(request.name, request.rate, id=request.id))
        self._consider(sub, self.clock.now())  # the current value goes out at once, after the reply
        return None

    async def _topic(self, name: str, cls: type[msgs.Message]) -> _Topic:
        assert self._create_lock is not None
        async with self._create_lock:
            topic = self._topics.get(name)
            if topic is not None:
                if topic.cls is not cls:
                    raise _Refused(ErrorCode.BAD_REQUEST, f"{name} is subscribed to as {topic.cls.__name__}")
                return topic
            topic = _Topic(self, name, cls)
            topic.subscription = await self._blocking(self.bus.create_subscription, name, topic.on_bus_value, cls)
            self._topics[name] = topic
            return topic

    async def _unsubscribe(self, client: _Client, request: events.UnsubscribeRequest) -> ServerReply:
        sub = client.subs.pop(request.name, None)
        if sub is None:
            raise _Refused(ErrorCode.NOT_SUBSCRIBED, f"not subscribed to {request.name}")
        self._detach(sub)
        return Unsubscribed(request.name, id=request.id)

    def _detach(self, sub: _Sub) -> None:
        sub.closed = True
        sub.client.withdraw(sub.topic.name)
        topic = sub.topic
        topic.subs.discard(sub)
        if not topic.subs and self._topics.get(topic.name) is topic:
            del self._topics[topic.name]
            if topic.subscription is not None:
                if self._closed:  # the executor is going away: release it with the rest
                    self._orphans.append(topic.subscription)
                else:
                    self._executor.submit(self.bus.release, topic.subscription)

    async def _write(self, client: _Client, request: events.WriteRequest) -> ServerReply:
        name, value = request.name, request.value
        known = names.message_type_of(name)
        if name not in self.settings.writable:
            if known is None:
                raise _Refused(ErrorCode.UNKNOWN_INTERFACE, f"unknown interface {name!r}")
            raise _Refused(ErrorCode.NOT_WRITABLE, f"{name} is not writable here (writable: command interfaces)")
        cls = known or type(value)
        if type(value) is not cls:
            raise _Refused(ErrorCode.BAD_VALUE, f"{name} carries {cls.__name__}, not {type(value).__name__}")
        if getattr(value, "stamp", None) == 0.0:  # a client that does not know the robot's time: stamp it now
            value = msgspec.structs.replace(value, stamp=self.clock.now())
        try:
            limits.check(name, value)
        except limits.LimitError as err:
            self._refuse_value(client, str(err))
            raise _Refused(ErrorCode.BAD_VALUE, str(err)) from None
        writer = self._writers.get(name)
        if writer is None:
            writer = await self._blocking(self.bus.create_publisher, name, cls)
            self._writers[name] = writer
        writer.write(value)
        return Written(name, id=request.id)

    async def _call(self, client: _Client, request: events.CallRequest) -> ServerReply:
        try:
            _check_call_value(request.service, request.request, f"{request.service} request")
        except limits.LimitError as err:
            self._refuse_value(client, str(err))
            raise _Refused(ErrorCode.BAD_VALUE, str(err)) from None
        s = self.settings
        timeout = min(request.timeout or s.call_timeout, s.max_call_timeout)
        try:
            value = await self._blocking(self.bus.call, request.service, request.request, Any, timeout=timeout)
        except BusTimeout as err:
            raise _Refused(ErrorCode.TIMEOUT, str(err)) from None
        except (RemoteError, DecodeError) as err:
            raise _Refused(ErrorCode.REMOTE_ERROR, str(err)) from None
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as err:
            raise _Refused(ErrorCode.BAD_VALUE, f"cannot send the request: {err}") from None
        except BusError as err:
            raise _Refused(ErrorCode.INTERNAL, str(err)) from None
        return Reply(request.service, value, id=request.id)

    async def _auth(self, client: _Client, request: events.AuthRequest) -> ServerReply:
        token = self.settings.token
        if token is None:
            client.authorized = True
            return Authorized(id=request.id)
        host, now = client.host, self.monotonic()
        wait = self._auth_limiter.wait(host, now)
        if wait > 0.0:
            client.auth_failures += 1
            self._auth_refused += 1
            self._auth_line(client, now, "token attempt refused unchecked, %.1f s before the back-off ends", wait)
            reason = f"wrong tokens from {host}: the next attempt is checked in {wait:.1f} s, not before"
            if self._close_after_auth_failures(client):
                reason += "; too many attempts, closing the connection"
            raise _Refused(ErrorCode.RATE_LIMITED, reason)
        if hmac.compare_digest(token.encode(), request.token.encode()):
            self._auth_limiter.succeeded(host)
            client.authorized = True
            self._client_line(logging.INFO, host, "client %s authorized", client.peer)
            return Authorized(id=request.id)
        client.auth_failures += 1
        self._auth_failures += 1
        delay = self._auth_limiter.failed(host, now)
        self._auth_line(client, now, "wrong token; the next attempt from this address is checked after %g s", delay)
        if self._close_after_auth_failures(client):
            raise _Refused(ErrorCode.UNAUTHORIZED, "wrong token; too many attempts, closing the connection")
        raise _Refused(ErrorCode.UNAUTHORIZED, f"wrong token; the next attempt is checked after {delay:g} s")

    def _close_after_auth_failures(self, client: _Client) -> bool:
        """Close the connection after ``max_auth_failures`` failed attempts (wrong, or refused in a back-off)."""
        if client.auth_failures >= self.settings.max_auth_failures:
            client.closing = True
        return client.closing

    def _auth_line(self, client: _Client, now: float, message: str, *args: Any) -> None:
        """Log a token attempt that failed, at most one line per address per LOG_INTERVAL."""
        held = self._auth_log.note(client.host, now)
        if held is None:
            return
        more = f" ({held} more wrong tokens or attempts refused in the back-off since the last line)" if held else ""
        self.log.warning("client %s: " + message + "%s", client.peer, *args, more)

    # -- pacing ---------------------------------------------------------------------------------------------------

    def clock_jumped(self, old: float, new: float) -> None:
        """The clock went back from ``old`` to ``new`` (s): a new simulation run, or a replay that started again.

        Every subscription's pacing restarts, so the new run's values go out at once instead of when the new run
        reaches the old run's due times. Thread-safe (a clock's jump callback); the reset runs on the server's loop.
        """
        if not self._closed:
            self._runner.call_soon(self._restart_pacing, old, new)

    def _restart_pacing(self, old: float, new: float) -> None:
        for _, _, sub in self._heap:
            sub.scheduled = False
        self._heap.clear()
        subs = [sub for client in self._clients for sub in client.subs.values()]
        for sub in subs:
            sub.pacer.restart()
        self.log.info(
            "simulated time restarted (%.3f s -> %.3f s): pacing of %d subscriptions restarted", old, new, len(subs)
        )
        now = self.clock.now()
        for sub in subs:
            self._consider(sub, now)
        if self._pace_wake is not None:
            self._pace_wake.set()

    def _updated(self, topic: _Topic) -> None:
        now = self.clock.now()
        for sub in list(topic.subs):
            self._consider(sub, now)

    def _consider(self, sub: _Sub, now: float) -> None:
        """Offer the topic's newest value to a subscriber if it has not had it and is due; else set its timer."""
        topic = sub.topic
        if sub.closed or topic.value is None or sub.seq == topic.seq:
            return
        if sub.pacer.ready(now):
            sub.seq = topic.seq
            sub.pacer.sent(now)
            sub.client.offer(topic.name, topic.doc)
        elif not sub.scheduled:
            assert sub.pacer.due is not None and self._pace_wake is not None
            sub.scheduled = True
            heapq.heappush(self._heap, (sub.pacer.due, next(self._counter), sub))
            self._pace_wake.set()

    async def _pace(self) -> None:
        """Offer the updates that have come due (one task for every subscription)."""
        assert self._pace_wake is not None
        while True:
            now = self.clock.now()
            while self._heap and self._heap[0][0] <= now:
                _, _, sub = heapq.heappop(self._heap)
                sub.scheduled = False
                self._consider(sub, now)
            wait: float | None = None
            if self._heap:
                rate = self._clock_rate()
                wall = (self._heap[0][0] - now) / rate if rate > 0 else MAX_PACING_SLEEP
                wait = min(max(wall, 0.0005), MAX_PACING_SLEEP)
            self._pace_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pace_wake.wait(), wait)


def _check_call_value(service: str, value: Any, where: str) -> None:
    """Check what a call sends to a service: every message by :func:`pluto.limits.check`, every other number
    finite within ±1e9, arrays at most 4,096 long.

    Raises:
        limits.LimitError: the first value out of range, named by where it is (``service request[0][key]``).
    """
    if isinstance(value, msgs.Message):
        limits.check(service, value)
    elif isinstance(value, bool) or value is None or isinstance(value, str | bytes):
        return
    elif isinstance(value, int | float):
        limits.check_number(where, value)
    elif isinstance(value, list):
        if len(value) > limits.MAX_VECTOR:
            raise limits.LimitError(f"{where} has {len(value)} values; at most {limits.MAX_VECTOR}")
        for i, item in enumerate(value):
            _check_call_value(service, item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_call_value(service, item, f"{where}[{key}]")
