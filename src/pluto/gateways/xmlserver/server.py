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

The defences keep time on a monotonic clock (the ``monotonic`` argument; tests pass their own). The settings and
counters are :mod:`.settings`; the connections, :mod:`.sessions`; the requests, :mod:`.requests`; the
subscriptions and their pacing, :mod:`.subscriptions`.
"""

# Strategy: the server is three parts on one loop, each in its own module: the connections (sessions.py: a
# session per connection with its bounded queues and its sender, the caps, eviction, the idle timeout), the
# requests (requests.py: the request rate, the token, the range checks, what each request does) and the
# subscriptions (subscriptions.py: one bus subscription per interface shared by every connection, the newest value
# offered to each at its own rate). This module owns the loop's thread, the thread pool that may block on the bus,
# and their lifecycle; it joins the parts and counts for them. The defences (request rate, idle timeout, auth
# back-off, log limits) use a monotonic clock, not the robot's time: they defend the computer. A housekeeping task
# looks at every connection a few times a second: it closes the idle ones and writes the summaries of the lines
# held back. When the clock goes back (a new simulation run, a replay started again), the owner calls clock_jumped
# from any thread: the loop then restarts every subscription's pacing, so the new run's values go out at once.

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any, Final, Self

from pluto.bus import Bus
from pluto.closing import close_at_exit
from pluto.gateways.serving import ServerRunner, StreamListener
from pluto.runtime.clock import Clock, WallClock

from .events import Hello, ServerReply
from .requests import Requests
from .sessions import READ_CHUNK, ClientLog, Session, Sessions
from .settings import DEFAULT_PORT, ClientStats, ServerSettings, ServerStats, command_interfaces
from .subscriptions import Subscriptions

__all__ = ["DEFAULT_PORT", "ClientStats", "ServerSettings", "ServerStats", "XmlServer", "command_interfaces"]

HOUSEKEEPING_PERIOD: Final = 0.25
"""Seconds between looks for idle connections and log lines held back (wall clock)."""
BACKLOG: Final = 512
"""Connections the kernel may hold before the server accepts them."""


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
        self.log = logger or logging.getLogger("pluto.xmlserver")
        s = self.settings
        self._client_log = ClientLog(self.log, self.monotonic)
        self._sessions = Sessions(
            s,
            self.monotonic,
            self._client_log,
            greeting=self._greeting,
            handle=self._handle,
            end=self._end,
            closed=lambda: self._closed,
            stopping=lambda: self._runner.closing,
        )
        listener = StreamListener(
            self._sessions.on_connect, s.host, s.port, limit=READ_CHUNK, reuse_address=True, backlog=BACKLOG
        )
        # Not a daemon thread: the worker threads it starts inherit that, and so do the threads Zenoh starts for the
        # callbacks of what they declare (readers, subscriptions). The interpreter then waits for those threads at
        # exit, after the bus has closed, instead of tearing them down in the middle of a callback, which aborts
        # the process. A server its owner forgot to close is closed at exit, before those waits.
        self._runner = ServerRunner(listener, name="xmlserver", logger=self.log, on_open=self._opened, daemon=False)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="xmlserver-bus")
        self._subscriptions = Subscriptions(
            bus, self.clock, clock_rate or (lambda: 1.0), self._runner.call_soon, self._executor, self.log
        )
        self._requests = Requests(
            bus, s, self.clock, self.monotonic, self._executor, self._client_log, self._subscriptions
        )
        self._address: tuple[str, int] | None = None
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
        self._subscriptions.start()
        self._requests.start()
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
        runner.spawn(self._subscriptions.pace(), name="xmlserver-pacing")
        runner.spawn(self._housekeep(), name="xmlserver-housekeeping")

    def close(self) -> None:
        """Close every connection and stop serving (idempotent; safe from any thread)."""
        if self._closed:
            return
        self._closed = True
        self._subscriptions.close()
        self._runner.close()
        self._release_all()

    @property
    def errors(self) -> int:
        """Exceptions raised on the server's loop outside a request's handling (counted and logged; it goes on)."""
        return self._runner.errors

    def _release_all(self) -> None:
        things: list[Any] = [*self._subscriptions.release_all(), *self._requests.release_all()]
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
        sessions, requests = self._sessions, self._requests
        return ServerStats(
            address=f"{host}:{port}",
            clients=[client.stats() for client in sessions.clients],
            connections=sessions.connections,
            refused=sessions.refused,
            evicted=sessions.evicted,
            idle_closed=sessions.idle_closed,
            out_of_range=requests.out_of_range,
            auth_failures=requests.auth_failures,
            auth_refused=requests.auth_refused,
            topics=sorted(self._subscriptions.topics),
        )

    # -- the parts joined -----------------------------------------------------------------------------------------

    def _greeting(self) -> ServerReply:
        s = self.settings
        return Hello(self.bus.robot, s.token is not None, s.max_document)

    async def _handle(self, client: Session, event: Any) -> None:
        await self._requests.handle(client, event)

    def _end(self, client: Session) -> None:
        """A connection is ending: its subscriptions end with it."""
        for sub in list(client.subs.values()):
            self._subscriptions.detach(sub)
        client.subs.clear()

    async def _housekeep(self) -> None:
        """Close the idle connections, and log the counts of the lines held back (a few times a second)."""
        while True:
            await asyncio.sleep(HOUSEKEEPING_PERIOD)
            now = self.monotonic()
            self._sessions.housekeep(now)
            self._requests.flush_logs(now)
            self._client_log.flush(now)

    def clock_jumped(self, old: float, new: float) -> None:
        """The clock went back from ``old`` to ``new`` (s): a new simulation run, or a replay that started again.

        Every subscription's pacing restarts, so the new run's values go out at once instead of when the new run
        reaches the old run's due times. Thread-safe (a clock's jump callback); the reset runs on the server's loop.
        """
        if not self._closed:
            self._runner.call_soon(self._restart_pacing, old, new)

    def _restart_pacing(self, old: float, new: float) -> None:
        subs = [sub for client in self._sessions.clients for sub in client.subs.values()]
        self._subscriptions.restart(old, new, subs)
