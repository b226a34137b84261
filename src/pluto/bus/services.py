"""Request/reply: serving requests on a name, calling a service, and the replies of a query.

Strategy: a service is a Zenoh queryable on ``pluto/<robot>/@srv/<name>``; Zenoh hands each query to a callback on
its own thread, which only queues it (at most :attr:`Service.MAX_QUEUED`, then "busy"), and the handler runs on the
bus's executor, one request at a time. Requests and replies are MessagePack; a handler that raises replies with an
error the caller receives as :class:`~pluto.errors.RemoteError`. A call that finds nobody waits on Zenoh's matching
status of the service key (a server is known), not on a timer, then asks again. The replies of a query come through
a queue (:class:`Replies`), so a caller may stop at the first good one.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import msgspec
import zenoh

from pluto.bus.executor import Executor, Strand, on_zenoh_thread
from pluto.bus.zenoh_setup import matching, zenoh_reason
from pluto.errors import BusError, BusTimeout, DecodeError, RemoteError

if TYPE_CHECKING:
    from pluto.bus.counters import _DropCounter

log = logging.getLogger("pluto.bus")

T = TypeVar("T")


class ServiceBus(Protocol):
    """What a service uses of the bus it serves on (:class:`pluto.bus.session.Bus`)."""

    @property
    def session(self) -> zenoh.Session: ...

    @property
    def executor(self) -> Executor: ...

    def service_key(self, name: str) -> str: ...

    def _defer(self, fn: Callable[..., None], *args: Any) -> None: ...


class Service:
    """Serves requests on a name; the handler runs on the bus's executor, one request at a time.

    Create with :meth:`Bus.create_service`. A handler that raises replies with an error that the caller receives
    as :class:`~pluto.errors.RemoteError`.
    """

    MAX_QUEUED = 64

    def __init__(self, bus: ServiceBus, name: str, handler: Callable[[Any], Any], request_type: Any = Any) -> None:
        self.name = str(name)
        self._bus = bus
        self._handler = handler
        self._decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(request_type)
        self._queue: deque[zenoh.Query] = deque()
        self._queue_lock = threading.Lock()
        self.served = 0
        self.failed = 0
        self._closed = False
        self._key = bus.service_key(name)  # a bad name fails here, before anything is declared
        self._strand = Strand(bus.executor, self._drain)
        self._queryable = bus.session.declare_queryable(self._key, on_zenoh_thread(self._on_query))

    def _on_query(self, query: zenoh.Query) -> None:
        with self._queue_lock:
            full = len(self._queue) >= self.MAX_QUEUED
            if not full:
                self._queue.append(query)
        if full:
            self.failed += 1
            self._bus._defer(_reply_error, query, f"service {self.name} is busy")
        else:
            self._strand.schedule()

    def _drain(self) -> None:
        while not self._closed:
            with self._queue_lock:
                if not self._queue:
                    return
                query = self._queue.popleft()
            self._serve(query)

    def _serve(self, query: zenoh.Query) -> None:
        with query:
            try:
                payload = query.payload
                request = self._decoder.decode(payload.to_bytes()) if payload is not None else None
                reply = self._handler(request)
                # Reply on the service's own key: a query over several services (``mom/*``) gets one per service.
                query.reply(self._key, msgspec.msgpack.encode(reply))
                self.served += 1
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                self.failed += 1
                query.reply_err(f"bad request to {self.name}: {err}".encode())
            except Exception as err:
                self.failed += 1
                log.exception("service %s failed", self.name)
                query.reply_err(f"{type(err).__name__}: {err}".encode())

    def close(self) -> None:
        """Stop serving (idempotent); waits for a request being handled, unless called from its handler."""
        with contextlib.suppress(Exception):
            self._queryable.undeclare()  # type: ignore[no-untyped-call]
        self._closed = True
        self._strand.close()
        with self._queue_lock:
            left, self._queue = list(self._queue), deque()
        for query in left:
            with contextlib.suppress(Exception):
                query.drop()  # type: ignore[no-untyped-call]


def _reply_error(query: zenoh.Query, text: str) -> None:
    with query:
        query.reply_err(text.encode())


class Replies:
    """The replies to one query, in their order of arrival: an iterator that ends when the query does (its final
    reply, or its timeout). Made by :meth:`Bus.query` and :meth:`Bus.query_tokens`.

    Zenoh hands each reply to a callback on its own thread, which queues it here; a caller may stop at any reply
    (the first good one, an exception) and leave the rest to be dropped with this object. With Zenoh's own channel
    a reply that comes after its receiver was dropped is an error that Zenoh writes to the terminal ("sending on a
    closed channel"): a query that times out hands over the replies it held (consolidated, they wait for the end)
    and then its timeout error at once, and a caller that went with the first had dropped the channel in between.
    """

    __slots__ = ("_queue",)

    _END: Any = object()

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def handler(self) -> Any:
        """The Zenoh handler that fills this (a callback, on the Zenoh thread)."""
        put = self._queue.put
        return on_zenoh_thread(put, drop=lambda: put(Replies._END))

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> zenoh.Reply:
        reply = self._queue.get()
        if reply is Replies._END:
            self._queue.put(reply)  # a second loop over it ends too
            raise StopIteration
        return reply  # type: ignore[no-any-return]


class RequestReply:
    """The request/reply methods of :class:`pluto.bus.session.Bus` (queries, services, calls): a part of the bus,
    which provides what is declared here for the type checker."""

    if TYPE_CHECKING:
        session: zenoh.Session
        executor: Executor
        drops: _DropCounter
        robot: str
        role: str
        machine: str

        def service_key(self, name: str, robot: str | None = None) -> str: ...

        def settle(self) -> None: ...

        def _check_open(self) -> None: ...

        def _own(self, thing: T) -> T: ...

        def _defer(self, fn: Callable[..., None], *args: Any) -> None: ...

    def query(
        self,
        selector: str,
        *,
        timeout: float,
        payload: bytes | None = None,
        consolidation: zenoh.ConsolidationMode | None = None,
    ) -> Replies:
        """Ask the queryables of ``selector`` (a Zenoh ``get``); its replies, which the caller may stop reading at
        any one (see :class:`Replies`).

        Raises:
            zenoh.ZError: Zenoh refused the query (the session is closed).
        """
        replies = Replies()
        self.session.get(selector, replies.handler(), payload=payload, timeout=timeout, consolidation=consolidation)
        return replies

    def query_tokens(self, key: str, *, timeout: float) -> Replies:
        """The liveliness tokens matching ``key`` now (a Zenoh liveliness ``get``), as :class:`Replies`."""
        replies = Replies()
        self.session.liveliness().get(key, replies.handler(), timeout=timeout)
        return replies

    def create_service(self, name: str, handler: Callable[[Any], Any], request_type: Any = Any) -> Service:
        """Serve requests on ``name``: ``handler(request)`` returns the reply (any msgspec-encodable value)."""
        self._check_open()
        return self._own(Service(self, name, handler, request_type))

    def call(
        self,
        name: str,
        request: Any = None,
        reply_type: type[T] | Any = Any,
        *,
        timeout: float = 2.0,
        robot: str | None = None,
    ) -> T:
        """Send a request to service ``name`` (of this bus's robot, or of robot ``robot``) and return its reply.

        Raises:
            BusTimeout: no reply within ``timeout`` seconds (no module serves it, or it is too slow).
            RemoteError: the service replied with an error.
            BusError: this machine is a viewer's and the service is not one a viewer may call
                (:data:`pluto.bus.access.VIEWER_SERVICES`).
        """
        with self.executor.blocking():  # a handler or callback may call a service of its own process
            reply: T = self._call(name, request, reply_type, timeout, robot)
        return reply

    def _call(self, name: str, request: Any, reply_type: type[T] | Any, timeout: float, robot: str | None) -> T:
        if self.role == "viewer":
            from pluto.bus.access import viewer_may_call

            if not viewer_may_call(name):
                raise BusError(
                    f"cannot call {name}: this machine is enrolled as a viewer ({self.machine}), and the router "
                    "lets a viewer call only the services that read"
                )
        payload = msgspec.msgpack.encode(request) if request is not None else None
        deadline = time.monotonic() + timeout
        key = self.service_key(name, robot)
        known = False  # whether a server was known when the last request went out
        while True:
            remaining = deadline - time.monotonic()
            try:
                replies = self.query(key, payload=payload, timeout=max(remaining, 0.001))
            except zenoh.ZError as err:
                raise BusError(f"cannot call {name}: {zenoh_reason(err)}") from err
            for reply in replies:
                if reply.ok is not None:
                    try:
                        return msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=reply_type)
                    except (msgspec.DecodeError, msgspec.ValidationError) as err:
                        raise DecodeError(f"bad reply from {name}: {err}") from err
                if reply.err is not None:
                    text = reply.err.payload.to_string()
                    if text == "Timeout":  # Zenoh's own error when the deadline passed
                        raise BusTimeout(f"no reply from {name!r} within {timeout} s (the module is busy or hung)")
                    raise RemoteError(f"{name}: {text}")
            # No reply at all: nobody serves it yet (a module that is starting, or a declaration still on its
            # way), or the server went as the request came. Ask again as soon as a server is known.
            known = self._wait_for_server(key, deadline, known)
            if not known:
                raise BusTimeout(
                    f"no reply from {name!r} on robot {robot or self.robot!r} within {timeout} s "
                    "(is the module running? see `pluto mom`)"
                )

    def _wait_for_server(self, key: str, deadline: float, known: bool) -> bool:
        """Wait until a queryable of ``key`` is known to this session (Zenoh's matching status), at most until
        ``deadline``; return whether one is. If one was ``known`` already when the request went unanswered, wait for
        the next change rather than ask again at once."""
        changed = threading.Event()
        querier = self.session.declare_querier(key)
        listener = querier.declare_matching_listener(on_zenoh_thread(lambda _status: changed.set()))
        try:
            if matching(querier.matching_status) and not known:
                return True
            with self.executor.blocking():
                while changed.wait(max(deadline - time.monotonic(), 0.0)):
                    changed.clear()
                    if matching(querier.matching_status):
                        return True
            return False
        finally:
            with contextlib.suppress(Exception):
                listener.undeclare()  # type: ignore[no-untyped-call]
            with contextlib.suppress(Exception):
                querier.undeclare()  # type: ignore[no-untyped-call]

    def call_all(
        self, prefix: str, reply_type: type[T] | Any = Any, request: Any = None, *, timeout: float = 1.0
    ) -> list[T]:
        """Send a request to every service under ``prefix/`` (e.g. ``mom``) and return the good replies.

        Replies that fail to decode are counted as dropped; errors are skipped.
        """
        self.settle()
        payload = msgspec.msgpack.encode(request) if request is not None else None
        key = f"{self.service_key(prefix)}/*"
        results: list[T] = []
        for reply in self.query(key, payload=payload, timeout=timeout):
            if reply.ok is None:
                continue
            try:
                results.append(msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=reply_type))
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                self.drops.drop(prefix, err)
        return results
