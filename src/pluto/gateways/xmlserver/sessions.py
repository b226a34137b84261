"""The XML server's connections: each one a :class:`Session` (its codec, its queues, its counters, its sender), and
:class:`Sessions`, which accepts them under the caps, reads their requests, closes the idle ones and says goodbye.

    sessions = Sessions(settings, monotonic, client_log, greeting, handle, end, closed, stopping)
    listener = StreamListener(sessions.on_connect, host, port)   # one task per connection
    sessions.housekeep(monotonic())                              # a few times a second: close the idle ones

What a request does is not known here: each document read is handed to ``handle`` (:mod:`.requests`), and a
connection that ends hands its subscriptions to ``end`` (:mod:`.subscriptions`).
"""

# Strategy: a connection has a bounded queue of replies and, per subscription, one slot holding the newest update
# not yet sent; a sender task per connection writes them out one document at a time and waits for the transport to
# drain below its high-water mark before the next, so a client that reads slowly (or not at all) only ever delays
# itself, and what a connection holds is bounded: the transport's buffer (write_buffer plus one document), one
# update per subscription and at most MAX_REPLIES replies. The reader stops reading requests while the reply queue
# is full, which pushes back on a client that sends without reading; it handles one request at a time, in order.
# A newcomer over a cap (max_clients, max_clients_per_address) evicts the connection in the way that has not
# authenticated or holds no subscription and has been silent longest; only when there is none is it refused. An
# evicted or idle connection is closed by cancelling its task, which then says why; it stops counting against the
# caps at once (its goodbye may take a second to go out), so the newcomer is admitted in the same turn of the loop.
# Idle means: no complete document came from the client, and nothing it was sent was taken, for idle_timeout s; a
# client handling a request, or subscribed and keeping up with what it is sent, is never idle. The log about the
# connections of one address is limited (guard.LogLimiter), the lines held back counted and summed up later.

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

from pluto.gateways.guard import LogLimiter

from .codec import XmlCodec, encode_event
from .events import NEED_DATA, ConnectionClosed, ErrorCode, ErrorReply, ServerReply
from .pacing import TokenBucket
from .settings import ClientStats, ServerSettings
from .subscriptions import Subscription

__all__ = [
    "CLIENT_LOG_BURST",
    "LOG_INTERVAL",
    "MAX_REPLIES",
    "READ_CHUNK",
    "ClientLog",
    "Session",
    "Sessions",
]

MAX_REPLIES: Final = 16
"""Replies a connection may have waiting to be sent; past that it is not read until they go out."""
READ_CHUNK: Final = 64 * 1024
"""Bytes read from a connection at once."""
LOG_INTERVAL: Final = 10.0
"""Seconds over which the lines about one address are limited."""
CLIENT_LOG_BURST: Final = 10
"""Lines about the connections of one address (connected, refused, disconnected, ...) per LOG_INTERVAL."""


class ClientLog:
    """Lines about the connections of each address, at most CLIENT_LOG_BURST per LOG_INTERVAL per address.

    Args:
        log: where the lines go.
        monotonic: the clock of the limits, s.
    """

    def __init__(self, log: logging.Logger, monotonic: Callable[[], float]) -> None:
        self.log = log
        self._monotonic = monotonic
        self._limiter: LogLimiter[str] = LogLimiter(LOG_INTERVAL, CLIENT_LOG_BURST)

    def line(self, level: int, host: str, message: str, *args: Any, exc_info: bool = False) -> None:
        """Log a line about a connection from ``host``, unless that address has had its share of lines lately."""
        held = self._limiter.note(host, self._monotonic())
        if held is None:
            return
        if held:
            message += " (%d more lines about %s held back)"
            args = (*args, held, host)
        self.log.log(level, message, *args, exc_info=exc_info)

    def flush(self, now: float) -> None:
        """Log the counts of the lines held back whose interval is over."""
        for host, count in self._limiter.flush(now):
            self.log.info("%s: %d more lines about its connections held back", host, count)


class Session:
    """One connection: its codec, its queues and its counters.

    Args:
        settings: the server's limits.
        writer: the connection's stream.
        peer: the client's address and port, for messages.
        host: the client's address (what the per-address cap and log limits count by).
        monotonic: the clock of the defences, s.
    """

    def __init__(
        self,
        settings: ServerSettings,
        writer: asyncio.StreamWriter,
        peer: str,
        host: str,
        monotonic: Callable[[], float],
    ) -> None:
        s = settings
        self.writer = writer
        self.peer = peer
        self.host = host
        self._monotonic = monotonic
        self.codec = XmlCodec("server", max_document=s.max_document, max_depth=s.max_depth)
        self.bucket = TokenBucket(s.request_rate, s.request_burst)
        self.subs: dict[str, Subscription] = {}
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
        self.last_active = monotonic()
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
                    self.last_active = self._monotonic()  # the socket took it: the client reads
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
        """A snapshot of its counters."""
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
            idle=round(max(0.0, self._monotonic() - self.last_active), 3),
        )


class Sessions:
    """The open connections: accepted under the caps, read, closed when idle or evicted, and counted.

    Args:
        settings: the caps, the idle timeout and the socket options.
        monotonic: the clock of the defences, s.
        client_log: the limited log of lines about connections.
        greeting: the ``<hello>`` a new connection gets first.
        handle: handles one document read from a connection (a request, or a :class:`.events.BadDocument`).
        end: a connection is ending: let go of its subscriptions.
        closed: the server is closed (a newcomer is refused).
        stopping: the server's loop is stopping (connections are cut off without waiting for their goodbye).
    """

    def __init__(
        self,
        settings: ServerSettings,
        monotonic: Callable[[], float],
        client_log: ClientLog,
        greeting: Callable[[], ServerReply],
        handle: Callable[[Session, Any], Awaitable[None]],
        end: Callable[[Session], None],
        closed: Callable[[], bool],
        stopping: Callable[[], bool],
    ) -> None:
        self._settings = settings
        self._monotonic = monotonic
        self._log = client_log
        self._greeting = greeting
        self._handle = handle
        self._end = end
        self._closed = closed
        self._stopping = stopping
        self.clients: dict[Session, asyncio.Task[Any]] = {}
        self._by_address: dict[str, dict[Session, None]] = {}  # the connections counted against the caps
        self._counted = 0
        self.connections = 0
        self.refused = 0
        self.evicted = 0
        self.idle_closed = 0

    async def on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection until it ends (the task of the connection)."""
        s = self._settings
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        host = str(peername[0]) if isinstance(peername, tuple) else str(peername)
        sock = writer.get_extra_info("socket")
        if s.send_buffer and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, s.send_buffer)
        writer.transport.set_write_buffer_limits(high=s.write_buffer)
        refusal = "the server is stopping" if self._closed() else self._make_room(host, peer)
        if refusal is not None:
            self.refused += 1
            writer.write(encode_event(ErrorReply(ErrorCode.TOO_MANY_CLIENTS, f"{refusal}; closing the connection")))
            await close_writer(writer, 1.0)
            return
        client = Session(s, writer, peer, host, self._monotonic)
        task = asyncio.current_task()
        assert task is not None
        self.clients[client] = task
        self._by_address.setdefault(host, {})[client] = None
        self._counted += 1
        self.connections += 1
        self._log.line(logging.INFO, host, "client %s connected (%d open)", peer, len(self.clients))
        sender = asyncio.create_task(client.send_loop())
        reason = "closed by the client"
        try:
            await client.reply(self._greeting())
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

    async def _read_loop(self, client: Session, reader: asyncio.StreamReader) -> str:
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
                    client.last_active = self._monotonic()
                if client.closing:
                    return "closed by the server" if not client.dead else "connection lost"
            if not data:
                return "closed by the client"

    async def _disconnect(self, client: Session, sender: asyncio.Task[None], reason: str) -> None:
        client.ending = True
        self._end(client)
        stopping = self._stopping()
        try:
            if not stopping and not client.dead:
                with contextlib.suppress(TimeoutError):  # let the last replies (an error saying why) go out
                    await asyncio.wait_for(client.idle.wait(), 1.0)
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            await close_writer(client.writer, 0.0 if stopping else 1.0)
        except asyncio.CancelledError:  # the server stops meanwhile: cut the connection off, and still account for it
            sender.cancel()
            client.writer.transport.abort()
            self._forget(client, reason)
            raise
        self._forget(client, reason)

    def _forget(self, client: Session, reason: str) -> None:
        """Count a connection that has closed as gone, and log its summary."""
        self.clients.pop(client, None)
        self._uncount(client)
        stats = client.codec.statistics
        self._log.line(
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

    def _uncount(self, client: Session) -> None:
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
        s = self._settings
        same = self._by_address.get(host, {})
        if len(same) >= s.max_clients_per_address:
            cap = f"at most {s.max_clients_per_address} connections from {host}"
            if not self._evict(list(same), cap):
                line = "client %s refused: %d connections from %s already, all authenticated and subscribed"
                self._log.line(logging.WARNING, host, line, peer, len(same), host)
                return f"{cap}, and every one is authenticated and subscribed"
        if self._counted >= s.max_clients:
            cap = f"at most {s.max_clients} clients"
            if not self._evict(list(self.clients), cap):
                line = "client %s refused: %d connections already, all authenticated and subscribed"
                self._log.line(logging.WARNING, host, line, peer, self._counted)
                return f"{cap}, and every one is authenticated and subscribed"
        return None

    def _evict(self, candidates: list[Session], cap: str) -> bool:
        """Close the candidate that has not authenticated or holds no subscription and has been silent longest
        (one handling a request last of all); False if there is none."""
        open_to = [client for client in candidates if client.evictable()]
        if not open_to:
            return False
        victim = min(open_to, key=lambda client: (client.busy, client.last_active))
        quiet = max(0.0, self._monotonic() - victim.last_active)
        why = "not authenticated" if not victim.authorized else "with no subscription"
        self.evicted += 1
        self._uncount(victim)
        victim.close_reason = f"evicted to make room ({cap})"
        reason = f"{cap}: this connection, {why} and silent for {quiet:.1f} s, makes room for a new one; closing it"
        victim.reply_now(ErrorReply(ErrorCode.TOO_MANY_CLIENTS, reason))
        line = "client %s: closing it to make room (%s), %s and silent for %.1f s"
        self._log.line(logging.INFO, victim.host, line, victim.peer, cap, why, quiet)
        self.clients[victim].cancel()
        return True

    def housekeep(self, now: float) -> None:
        """Close the connections idle for ``idle_timeout``; a busy one, or one that keeps up, is active now."""
        limit = self._settings.idle_timeout
        for client, task in list(self.clients.items()):
            if client.ending or client.close_reason is not None:
                continue
            if client.busy or client.keeps_up():
                client.last_active = now
            elif now - client.last_active >= limit:
                self._close_idle(client, task)

    def _close_idle(self, client: Session, task: asyncio.Task[Any]) -> None:
        limit = self._settings.idle_timeout
        client.close_reason = f"idle for {limit:g} s"
        self.idle_closed += 1
        reason = f"nothing received from the client and nothing taken by it for {limit:g} s; closing the connection"
        client.reply_now(ErrorReply(ErrorCode.IDLE, reason))
        self._log.line(logging.INFO, client.host, "client %s: closing it, idle for %g s", client.peer, limit)
        task.cancel()


async def close_writer(writer: asyncio.StreamWriter, grace: float) -> None:
    """Close a connection, giving what is buffered ``grace`` seconds to go out (a client that does not read is cut
    off then)."""
    writer.close()
    if grace > 0:
        try:
            await asyncio.wait_for(writer.wait_closed(), grace)
            return
        except (TimeoutError, ConnectionError, OSError):
            pass
    writer.transport.abort()
