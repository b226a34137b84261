"""The XML server's requests: what each document a connection sends does, and what is refused and why.

    requests = Requests(bus, settings, clock, monotonic, executor, client_log, subscriptions)
    requests.start()                          # on the server's loop
    await requests.handle(session, event)     # the reply is queued on the session

Every request gets one reply (an ``<error>`` naming the code and the reason when it is refused), in the order the
requests came; a subscription's updates follow its ``<subscribed>``. Nothing a client sends raises out of
:meth:`Requests.handle`: a request whose handling fails is answered INTERNAL and logged.
"""

# Strategy: the checks come in the order that costs an attacker most and the server least: the request rate
# (pacing.TokenBucket) first, then the token (nothing but <auth> is looked at before it: not a value, not a
# listing, not even whether an interface exists), then the request itself. Values written, and every number and
# message of a call's request, pass pluto.limits.check before they reach the bus; a value out of range is refused
# BAD_VALUE naming the field and counted, and the connection carries on. After a wrong token, the attempts from the
# same address are refused unchecked (RATE_LIMITED, saying when to try again) for a back-off that doubles with each
# wrong token (guard.AuthLimiter), and at most one line per address per LOG_INTERVAL is logged about them. Anything
# that blocks on the bus (a reader, a writer, a call, a listing) runs on the server's thread pool; readers and
# writers are kept for the next request, and one listing serves every <list/> of the next LISTING_MAX_AGE s.

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hmac
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

from pluto import limits, msgs, names
from pluto.bus import Bus, StateReader, StateWriter
from pluto.errors import BusError, BusTimeout, DecodeError, RemoteError
from pluto.gateways.guard import AuthLimiter, LogLimiter
from pluto.runtime.clock import Clock

from . import events
from .events import (
    Authorized,
    BadDocument,
    ErrorCode,
    ErrorReply,
    InterfaceEntry,
    Listing,
    Reply,
    ServerReply,
    Subscribed,
    Unsubscribed,
    Value,
    Written,
)
from .pacing import Pacer
from .sessions import LOG_INTERVAL, ClientLog, Session
from .settings import ServerSettings
from .subscriptions import Subscriptions, TopicTypeError

__all__ = ["LISTING_MAX_AGE", "LOGGED_BAD_DOCUMENTS", "MAX_READERS", "Refused", "Requests", "check_call_value"]

T = TypeVar("T")

MAX_READERS: Final = 256
"""Interfaces the server keeps a reader of for ``<read>``; past that a reader is made for each read."""
LISTING_MAX_AGE: Final = 1.0
"""Seconds a ``<listing>`` found on the bus is reused for other ``<list/>`` requests."""
LOGGED_BAD_DOCUMENTS: Final = 3
"""Bad documents logged one by one per connection; the rest are counted and summed up when it closes."""


class Refused(Exception):
    """A request the server will not carry out; becomes an ``<error>`` reply.

    Args:
        code: the error code of the reply.
        reason: what was refused and why, for the client.
    """

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Requests:
    """The handlers of the requests, and the counters and caches they share.

    Args:
        bus: the bus read, written and called on.
        settings: the limits (request rate, token, writable interfaces, call timeouts, ...).
        clock: the robot's clock (stamps written values, paces a new subscription's first update).
        monotonic: the clock of the defences (request rate, token back-off, log limits), s.
        executor: the threads that may block on the bus.
        client_log: the limited log of lines about connections.
        subscriptions: the topics and their pacing.
    """

    def __init__(
        self,
        bus: Bus,
        settings: ServerSettings,
        clock: Clock,
        monotonic: Callable[[], float],
        executor: concurrent.futures.Executor,
        client_log: ClientLog,
        subscriptions: Subscriptions,
    ) -> None:
        self._bus = bus
        self._settings = settings
        self._clock = clock
        self._monotonic = monotonic
        self._executor = executor
        self._log = client_log
        self._subscriptions = subscriptions
        self._auth_limiter = AuthLimiter(settings.auth_backoff, settings.auth_backoff_max)
        self._auth_log: LogLimiter[str] = LogLimiter(LOG_INTERVAL, 1)
        self._readers: dict[str, StateReader[Any]] = {}
        self._writers: dict[str, StateWriter[Any]] = {}
        self._listing: tuple[float, list[str], dict[str, float]] | None = None
        self._create_lock: asyncio.Lock | None = None
        self.out_of_range = 0
        self.auth_failures = 0
        self.auth_refused = 0

    def start(self) -> None:
        """On the server's loop, before any request."""
        self._create_lock = asyncio.Lock()

    def release_all(self) -> list[Any]:
        """Forget the readers and writers kept; what to release on the bus (the caller releases them)."""
        things: list[Any] = [*self._readers.values(), *self._writers.values()]
        self._readers.clear()
        self._writers.clear()
        return things

    def flush_logs(self, now: float) -> None:
        """Log the counts of the lines about wrong tokens held back whose interval is over."""
        for host, count in self._auth_log.flush(now):
            self._log.log.warning("%s: %d more wrong tokens or attempts refused during the back-off", host, count)

    async def handle(self, client: Session, event: events.Request | BadDocument | Any) -> None:
        """Handle one document from ``client`` and queue its reply."""
        client.requests += 1
        request_id = getattr(event, "id", None)
        if not client.bucket.take(self._monotonic()):
            client.rate_limited += 1
            limit = f"more than {self._settings.request_rate:g} requests a second"
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
        handlers: dict[type[Any], Callable[[Session, Any], Any]] = {
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
                raise Refused(ErrorCode.UNKNOWN_OPERATION, f"{type(event).__name__} is not a request")
            reply: ServerReply | None = await handler(client, event)
        except Refused as refused:
            reply = ErrorReply(refused.code, refused.reason, request_id)
        except Exception as err:
            name = type(event).__name__
            self._log.line(logging.ERROR, client.host, "client %s: %s failed", client.peer, name, exc_info=True)
            reply = ErrorReply(ErrorCode.INTERNAL, f"{type(err).__name__}: {err}", request_id)
        if reply is not None:
            await client.reply(reply)

    def refuse_value(self, client: Session, reason: str) -> None:
        """Count (and log, sparingly) a request refused for a value out of range."""
        client.out_of_range += 1
        self.out_of_range += 1
        line = "client %s: refused a value out of range: %s"
        self._log.line(logging.WARNING, client.host, line, client.peer, reason)

    async def _bad_document(self, client: Session, bad: BadDocument) -> None:
        if bad.out_of_range:  # a well-formed request with a value too large (a vector too long): not malformed
            self.refuse_value(client, bad.reason)
            await client.reply(ErrorReply(bad.code, bad.reason, bad.id))
            return
        client.bad_documents += 1
        if client.bad_documents <= LOGGED_BAD_DOCUMENTS:
            more = " (further ones are counted, not logged)" if client.bad_documents == LOGGED_BAD_DOCUMENTS else ""
            self._log.line(
                logging.WARNING,
                client.host,
                "client %s: refused a document (%s): %s%s",
                client.peer,
                bad.code.value,
                bad.reason,
                more,
            )
        await client.reply(ErrorReply(bad.code, bad.reason, bad.id))
        if client.bad_documents >= self._settings.max_bad_documents:
            self._log.line(
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
                raise Refused(ErrorCode.BAD_REQUEST, f"{name} carries {known.__name__}, not {type_name}")
            return cls
        if known is None:
            raise Refused(
                ErrorCode.UNKNOWN_INTERFACE,
                f"unknown interface {name!r} (<list/> shows them; for one outside the table give its type)",
            )
        return known

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def _list(self, _client: Session, request: events.ListRequest) -> ServerReply:
        # Asking the bus takes up to a second of a worker thread: clients that list at once share one answer.
        cached = self._listing
        now = asyncio.get_running_loop().time()
        if cached is None or now - cached[0] > LISTING_MAX_AGE:
            found = await asyncio.gather(
                self._blocking(self._bus.live_modules, 0.5), self._blocking(self._bus.interface_keys, 0.5)
            )
            cached = self._listing = (now, found[0], found[1])
        _, modules, live = cached
        writable = self._settings.writable
        entries = []
        for name in sorted(set(names.INTERFACES) | set(live) | set(writable)):
            row = names.INTERFACES.get(name)
            entries.append(
                InterfaceEntry(
                    name,
                    row.type.__name__ if row else "",
                    name in live,
                    name in writable,
                    row.description if row else "",
                )
            )
        return Listing(tuple(modules), tuple(entries), id=request.id)

    async def _read(self, _client: Session, request: events.ReadRequest) -> ServerReply:
        cls = self._type_of(request.name, request.type)
        topic = self._subscriptions.topics.get(request.name)
        value = topic.value if topic is not None and topic.cls is cls else None
        if value is None:
            reader, kept = await self._reader(request.name, cls)
            value = reader.read()
            if not kept:
                await self._blocking(self._bus.release, reader)
        if value is None:
            raise Refused(ErrorCode.NO_VALUE, f"nobody has written {request.name} yet")
        return Value(request.name, value, id=request.id)

    async def _reader(self, name: str, cls: type[msgs.Message]) -> tuple[StateReader[Any], bool]:
        """A reader of ``name``, and whether the server keeps it (else the caller releases it after reading)."""
        assert self._create_lock is not None
        async with self._create_lock:
            reader = self._readers.get(name)
            if reader is not None and reader.type is cls:
                return reader, True
            reader = await self._blocking(self._bus.create_reader, name, cls, fetch_timeout=0.5)
            if name in self._readers or len(self._readers) >= MAX_READERS:
                return reader, False
            self._readers[name] = reader
            return reader, True

    async def _subscribe(self, client: Session, request: events.SubscribeRequest) -> ServerReply | None:
        s = self._settings
        cls = self._type_of(request.name, request.type)
        if request.rate > s.max_rate_hz:
            raise Refused(ErrorCode.BAD_REQUEST, f"rate {request.rate:g} Hz is above the limit of {s.max_rate_hz:g}")
        sub = client.subs.get(request.name)
        if sub is not None:
            if sub.topic.cls is not cls:
                raise Refused(ErrorCode.BAD_REQUEST, f"already subscribed to {request.name} as {sub.topic.cls}")
            sub.pacer = Pacer(request.rate)
        else:
            if len(client.subs) >= s.max_subscriptions:
                raise Refused(ErrorCode.TOO_MANY_SUBSCRIPTIONS, f"at most {s.max_subscriptions} subscriptions")
            try:
                topic = await self._subscriptions.topic(request.name, cls)
            except TopicTypeError as err:
                raise Refused(ErrorCode.BAD_REQUEST, str(err)) from None
            if client.closing:
                return None
            sub = self._subscriptions.attach(client, topic, request.rate)
            client.subs[request.name] = sub
        await client.reply(Subscribed(request.name, request.rate, id=request.id))
        self._subscriptions.consider(sub, self._clock.now())  # the current value goes out at once, after the reply
        return None

    async def _unsubscribe(self, client: Session, request: events.UnsubscribeRequest) -> ServerReply:
        sub = client.subs.pop(request.name, None)
        if sub is None:
            raise Refused(ErrorCode.NOT_SUBSCRIBED, f"not subscribed to {request.name}")
        self._subscriptions.detach(sub)
        return Unsubscribed(request.name, id=request.id)

    async def _write(self, client: Session, request: events.WriteRequest) -> ServerReply:
        name, value = request.name, request.value
        known = names.message_type_of(name)
        if name not in self._settings.writable:
            if known is None:
                raise Refused(ErrorCode.UNKNOWN_INTERFACE, f"unknown interface {name!r}")
            raise Refused(ErrorCode.NOT_WRITABLE, f"{name} is not writable here (writable: command interfaces)")
        cls = known or type(value)
        if type(value) is not cls:
            raise Refused(ErrorCode.BAD_VALUE, f"{name} carries {cls.__name__}, not {type(value).__name__}")
        if getattr(value, "stamp", None) == 0.0:  # a client that does not know the robot's time: stamp it now
            value = msgspec.structs.replace(value, stamp=self._clock.now())
        try:
            limits.check(name, value)
        except limits.LimitError as err:
            self.refuse_value(client, str(err))
            raise Refused(ErrorCode.BAD_VALUE, str(err)) from None
        writer = self._writers.get(name)
        if writer is None:
            writer = await self._blocking(self._bus.create_publisher, name, cls)
            self._writers[name] = writer
        writer.write(value)
        return Written(name, id=request.id)

    async def _call(self, client: Session, request: events.CallRequest) -> ServerReply:
        try:
            check_call_value(request.service, request.request, f"{request.service} request")
        except limits.LimitError as err:
            self.refuse_value(client, str(err))
            raise Refused(ErrorCode.BAD_VALUE, str(err)) from None
        s = self._settings
        timeout = min(request.timeout or s.call_timeout, s.max_call_timeout)
        try:
            value = await self._blocking(self._bus.call, request.service, request.request, Any, timeout=timeout)
        except BusTimeout as err:
            raise Refused(ErrorCode.TIMEOUT, str(err)) from None
        except (RemoteError, DecodeError) as err:
            raise Refused(ErrorCode.REMOTE_ERROR, str(err)) from None
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as err:
            raise Refused(ErrorCode.BAD_VALUE, f"cannot send the request: {err}") from None
        except BusError as err:
            raise Refused(ErrorCode.INTERNAL, str(err)) from None
        return Reply(request.service, value, id=request.id)

    async def _auth(self, client: Session, request: events.AuthRequest) -> ServerReply:
        token = self._settings.token
        if token is None:
            client.authorized = True
            return Authorized(id=request.id)
        host, now = client.host, self._monotonic()
        wait = self._auth_limiter.wait(host, now)
        if wait > 0.0:
            client.auth_failures += 1
            self.auth_refused += 1
            self._auth_line(client, now, "token attempt refused unchecked, %.1f s before the back-off ends", wait)
            reason = f"wrong tokens from {host}: the next attempt is checked in {wait:.1f} s, not before"
            if self._close_after_auth_failures(client):
                reason += "; too many attempts, closing the connection"
            raise Refused(ErrorCode.RATE_LIMITED, reason)
        if hmac.compare_digest(token.encode(), request.token.encode()):
            self._auth_limiter.succeeded(host)
            client.authorized = True
            self._log.line(logging.INFO, host, "client %s authorized", client.peer)
            return Authorized(id=request.id)
        client.auth_failures += 1
        self.auth_failures += 1
        delay = self._auth_limiter.failed(host, now)
        self._auth_line(client, now, "wrong token; the next attempt from this address is checked after %g s", delay)
        if self._close_after_auth_failures(client):
            raise Refused(ErrorCode.UNAUTHORIZED, "wrong token; too many attempts, closing the connection")
        raise Refused(ErrorCode.UNAUTHORIZED, f"wrong token; the next attempt is checked after {delay:g} s")

    def _close_after_auth_failures(self, client: Session) -> bool:
        """Close the connection after ``max_auth_failures`` failed attempts (wrong, or refused in a back-off)."""
        if client.auth_failures >= self._settings.max_auth_failures:
            client.closing = True
        return client.closing

    def _auth_line(self, client: Session, now: float, message: str, *args: Any) -> None:
        """Log a token attempt that failed, at most one line per address per LOG_INTERVAL."""
        held = self._auth_log.note(client.host, now)
        if held is None:
            return
        more = f" ({held} more wrong tokens or attempts refused in the back-off since the last line)" if held else ""
        self._log.log.warning("client %s: " + message + "%s", client.peer, *args, more)


def check_call_value(service: str, value: Any, where: str) -> None:
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
            check_call_value(service, item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_call_value(service, item, f"{where}[{key}]")
