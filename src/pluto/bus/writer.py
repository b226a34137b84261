"""Writing an interface: the newest value published and kept for readers that join later, alone or in batches.

Strategy: a writer publishes each value on the interface's key and keeps the newest one in a queryable on the same
key, which a reader that joins late asks (:mod:`pluto.bus.receivers`); every sample carries the writer's mark
(:mod:`pluto.bus.wire`). A state writer drops under congestion (the next value replaces a lost one) unless it is
reliable; in lock-step every value goes out on a publisher that blocks instead, since the next tick waits for it. A
batching writer (high-rate streams) queues encoded values and sends them as one MessagePack array once the batch is
full or its oldest value has waited ``batch_delay``; one thread per bus (:class:`_Batcher`) keeps those delays.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import zenoh

from pluto import msgs, names
from pluto.bus.counters import _Meter
from pluto.bus.executor import on_zenoh_thread
from pluto.bus.lockstep import LockstepGate
from pluto.bus.receivers import LocalDelivery
from pluto.bus.wire import _ARRAY16, _ATTACHMENT, BATCH, COMMAND, LOCKSTEPPED
from pluto.bus.zenoh_setup import matching
from pluto.errors import BusError

log = logging.getLogger("pluto.bus")

M = TypeVar("M", bound=msgs.Message)


class WriterBus(Protocol):
    """What a writer uses of the bus it writes on (:class:`pluto.bus.session.Bus`)."""

    @property
    def session(self) -> zenoh.Session: ...

    @property
    def role(self) -> str: ...

    @property
    def machine(self) -> str: ...

    @property
    def writer_label(self) -> str: ...

    @property
    def gate(self) -> LockstepGate | None: ...

    @property
    def routes(self) -> bool: ...

    @property
    def local(self) -> LocalDelivery: ...

    def key(self, name: str, robot: str | None = None) -> str: ...

    def key_raw(self, suffix: str) -> str: ...

    def batcher(self) -> _Batcher: ...

    def _defer(self, fn: Callable[..., None], *args: Any) -> None: ...


class StateWriter(Generic[M]):
    """Writes the newest value of an interface, and serves it to readers that join later.

    Create with :meth:`Bus.create_publisher`.
    """

    def __init__(
        self,
        bus: WriterBus,
        name: str,
        cls: type[M],
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> None:
        self.name = str(name)
        self.type = cls
        self.command = names.command_max_age(name) is not None if command is None else command
        if not 0 <= batch <= 65_535:
            raise ValueError(f"batch of {name} must be in [0, 65535] values, got {batch}")
        if batch and not (math.isfinite(batch_delay) and 0.0 < batch_delay <= 1.0):
            raise ValueError(f"batch_delay of {name} must be in (0, 1] s, got {batch_delay}")
        if batch and self.command:
            raise ValueError(f"{name} carries commands, which are never batched")
        self.batch = batch
        self.batch_delay = batch_delay
        self._pending: list[bytes] = []  # encoded values waiting for a batch (batching writers only)
        self._pending_since = 0.0  # monotonic time of the oldest of them
        self._flags = COMMAND if self.command else 0
        self._bus = bus
        self._refused = ""  # why the router drops what this writer writes (a viewer's machine), "" if it does not
        if bus.role == "viewer":
            self._refused = (
                f"{name}: this machine is enrolled as a viewer ({bus.machine}), and the router drops what a viewer "
                "writes"
            )
            if not self.command:
                log.warning("%s", self._refused)
        self._key = bus.key(name)
        # A fleet's session: this session's readers, which a write hands its value to itself (None elsewhere)
        self._local = bus.local if bus.local.active else None
        self._lock = threading.Lock()
        self._latest: tuple[bytes, float, int, int] | None = None  # (payload, write time, seq, flags)
        self._seq = 0
        self.writer_id = secrets.randbits(63) | 1  # never 0, which means "unknown writer"
        self.meter = _Meter()
        # A state's newest value is what matters, and a writer must never stall its control loop: under congestion
        # (a burst faster than the link) values are dropped (DROP), possibly the last of the burst, which the
        # next periodic write replaces. Where every value must arrive: reliable, BLOCK, the writer waits.
        # On a session that delivers locally (a fleet's), Zenoh carries the values to other sessions only: this
        # session's readers get them from the writer itself.
        congestion = zenoh.CongestionControl.BLOCK if reliable else zenoh.CongestionControl.DROP
        self._destination = zenoh.Locality.REMOTE if self._local is not None else zenoh.Locality.ANY
        self._publisher = bus.session.declare_publisher(
            self._key, congestion_control=congestion, express=True, allowed_destination=self._destination
        )
        self._reliable = reliable
        # A plain state's value goes to Zenoh only while another session reads the key: a put lets go of the
        # interpreter's lock, which costs a hand-over in a busy process. Zenoh's matching status says so, followed
        # by a listener, and checked again when a query comes: a reader that joins asks for the current value
        # after declaring its subscriber (the same link, in order), so from the reply on every value reaches it.
        # Only a router's status is trusted: a peer linked to a router is not told of the subscribers behind it.
        # Commands, reliable and batching writers always put: every value of theirs counts.
        self._skips = self._local is not None and bus.routes and not (reliable or self.command or batch)
        self.remote_puts = 0
        """Values (or batches) put to other sessions through Zenoh."""
        self._matching_listener: Any = None
        if self._skips:
            self._matching_listener = self._publisher.declare_matching_listener(on_zenoh_thread(self._on_matching))
        self._remote = not self._skips or matching(self._publisher.matching_status)
        self._stepped_publisher: Any = None  # declared at the first write in lock-step (see write)
        self._queryable = bus.session.declare_queryable(self._key, on_zenoh_thread(self._on_query))
        # A program that is not a module names its writers, so MOM can tell who writes (see Bus.writer_label).
        label = bus.writer_label
        self._label_token: Any = None
        if label:
            self._label_token = bus.session.liveliness().declare_token(
                bus.key_raw(f"@writer/{self.writer_id:x}/{label}")
            )

    def write(self, msg: M) -> None:
        """Publish ``msg`` as the new value of the interface.

        Raises:
            TypeError: ``msg`` is not of the interface's type.
            BusError: a command written on a viewer's machine (the router would drop it).
        """
        if type(msg) is not self.type:
            raise TypeError(f"{self.name} carries {self.type.__name__}, not {type(msg).__name__}")
        if self._refused and self.command:
            raise BusError(f"cannot command {self._refused}")
        data = msgs.encode(msg)
        now = time.time()
        gate = self._bus.gate
        if gate is None:
            # The common case, kept short: no lock-step.
            with self._lock:
                seq = self._seq = self._seq + 1
                flags = self._flags
                self._latest = (data, now, seq, flags)
                self.meter.tick(now)
                if self.batch:
                    self._add_to_batch(data)
                    return
                self._send(self._publisher, data, (now, seq, self.writer_id, flags))
            return
        stepped = gate.active
        with self._lock:
            self._seq += 1
            seq = self._seq
            flags = self._flags | (LOCKSTEPPED if stepped else 0)
            self._latest = (data, now, seq, flags)
            self.meter.tick(now)
            if self.batch and not stepped:
                self._add_to_batch(data)
                return
            if self._pending:
                self._flush_locked()  # values of a batch go out before a value written in lock-step
            publisher = self._publisher
            if stepped and not self._reliable:
                # In lock-step every value written must arrive (the next tick waits for it), and a simulation may
                # wait: the values go out on a publisher that blocks rather than drops under congestion. Not
                # express: the values a step writes to one process may leave together, in one message, while
                # Zenoh's sending thread wakes (nothing waits for them before the step's acknowledgement).
                if self._stepped_publisher is None:
                    self._stepped_publisher = self._bus.session.declare_publisher(
                        self._key,
                        congestion_control=zenoh.CongestionControl.BLOCK,
                        express=False,
                        allowed_destination=self._destination,
                    )
                publisher = self._stepped_publisher
            self._send(publisher, data, (now, seq, self.writer_id, flags))
        if stepped:
            gate.note_write(self._key, self.writer_id, seq)

    def _send(self, publisher: Any, payload: bytes, mark: tuple[float, int, int, int]) -> None:
        """Put a value to other sessions if any reads it, and hand it to this session's readers (lock held)."""
        if self._remote:
            publisher.put(payload, attachment=_ATTACHMENT.pack(*mark))
            self.remote_puts += 1
        if self._local is not None:
            for target in self._local.targets(self._key):
                target.deliver(payload, mark)

    def _on_matching(self, _status: Any) -> None:
        # On a Zenoh thread, and the news may be late (another may have come since): look again on the bus's thread.
        self._bus._defer(self._look_for_readers)

    def _look_for_readers(self) -> None:
        """Whether another session reads the key now (Zenoh's matching status; under the lock, so an older look never
        overwrites a newer one)."""
        with self._lock, contextlib.suppress(zenoh.ZError):  # the writer closed meanwhile
            self._look_locked()

    def _look_locked(self) -> None:
        self._remote = matching(self._publisher.matching_status)

    # rclpy's name for the same thing
    publish = write

    def _add_to_batch(self, data: bytes) -> None:
        """Queue an encoded value for the next batch (lock held); send the batch once it is full."""
        pending = self._pending
        pending.append(data)
        if len(pending) == 1:
            self._pending_since = time.monotonic()
            if self.batch > 1:
                self._bus.batcher().due(self, self._pending_since + self.batch_delay)
        if len(pending) >= self.batch:
            self._flush_locked()

    def _flush_locked(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        if len(pending) == 1:
            payload, flags = pending[0], self._flags
        else:
            payload, flags = b"".join([_ARRAY16.pack(0xDC, len(pending)), *pending]), self._flags | BATCH
        assert self._latest is not None
        self._send(self._publisher, payload, (time.time(), self._seq, self.writer_id, flags))

    def flush(self) -> None:
        """Send the values a batching writer holds now, without waiting for the batch to fill or its delay."""
        with self._lock:
            self._flush_locked()

    def flush_due(self, now: float) -> float | None:
        """Send the pending batch if its oldest value has waited ``batch_delay`` by ``now`` (monotonic s); return
        when the pending values (if any) will be due."""
        with self._lock:
            if not self._pending:
                return None
            due = self._pending_since + self.batch_delay
            if now + 1e-4 < due:
                return due
            self._flush_locked()
            return None

    @property
    def count(self) -> int:
        """Number of values written."""
        return self.meter.count

    def _on_query(self, query: zenoh.Query) -> None:
        # On a Zenoh thread: hand the reply to the bus's own thread.
        self._bus._defer(self._reply, query)

    def _reply(self, query: zenoh.Query) -> None:
        # The querier's subscriber, declared before it asked, is known by now: values written after this reply
        # reach it (see __init__).
        with self._lock:
            if self._skips:
                self._look_locked()
            latest = self._latest
        with query:
            if latest is not None:
                data, written, seq, flags = latest
                query.reply(self._key, data, attachment=_ATTACHMENT.pack(written, seq, self.writer_id, flags))

    def close(self) -> None:
        """Send what a batching writer holds, then stop publishing (idempotent)."""
        with contextlib.suppress(Exception):
            self.flush()
        entities = (self._matching_listener, self._queryable, self._publisher, self._stepped_publisher)
        for entity in (*entities, self._label_token):
            if entity is None:
                continue
            with contextlib.suppress(Exception):
                entity.undeclare()


class _Batcher:
    """Sends batching writers' pending values once the oldest has waited its writer's ``batch_delay``: one thread
    per bus, started by the first batching writer."""

    def __init__(self, name: str) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, StateWriter[Any]]] = []
        self._order = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-batch", daemon=True)
        self._thread.start()

    def due(self, writer: StateWriter[Any], when: float) -> None:
        """``writer`` has values to send by ``when`` (monotonic s)."""
        with self._cv:
            self._order += 1
            heapq.heappush(self._heap, (when, self._order, writer))
            if self._heap[0][2] is writer:
                self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._cv.wait(self._heap[0][0] - now if self._heap else None)
                if self._closed:
                    return
                _when, _order, writer = heapq.heappop(self._heap)
            try:
                later = writer.flush_due(time.monotonic())
            except Exception:
                log.exception("sending a batch of %s failed", writer.name)
                later = None
            if later is not None:
                self.due(writer, later)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._heap.clear()
            self._cv.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
