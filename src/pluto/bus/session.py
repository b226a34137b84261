"""The bus: one Zenoh session per process, and the interfaces, services and liveliness built on it.

Strategy: interfaces are *states* (the CORBA state objects of the robot software Pluto follows, docs/design.md). A
writer publishes each new value and keeps the newest one in a queryable on the interface's key (the shape of Zenoh's
AdvancedPublisher cache, with Pluto's write stamp in the attachment); a reader that joins late asks for it when it is
created, with no consolidation (every writer answers, the newest write wins), and has it at once; from then on it keeps
the newest published value. The query reaches every writer because the session has heard of every other session first
(:meth:`Bus.settle`, no fixed wait): a newcomer is linked to the rendezvous owner when Zenoh's open returns (with
its declarations: ``open/return_conditions``); it then asks the owner which sessions it knows (a process that
took the rendezvous over reads the sessions listed in the rendezvous's folder instead) and waits for each one's
liveliness token ``pluto/@session/<zid>``. Zenoh sends what a session has declared to a new link in a fixed
order, subscribers, queryables, then liveliness tokens, so once the token is in, that session's writers and
services are known. Service calls that find nobody wait on Zenoh's matching status of the service key, not on a
timer. Commands are the exception to late delivery (docs/design.md, principle 5; the table in
:data:`pluto.names.COMMANDS`): a command writer marks its values, readers never take a marked value from a query (a
command is never handed to a reader that joins later), and a command reader forgets a command once it is older
than its ``max_age`` by the reader's own clock. The rule lives here, so no module can forget it.
Zenoh callbacks do as little as possible (decode, store, notify); user callbacks and service handlers run on the
bus's executor, so a slow callback can never stall Zenoh, and a slow subscriber only skips to the newest value.

The per-message path is short, because on a round trip (bench/bus.py) every Python step between a wake-up and the
next one shows: a writer that is neither batching nor lock-stepped stamps and publishes under its lock and does its
bookkeeping while the value travels; the one Zenoh subscriber of an interface (:class:`_Tap`) parses the
attachment and decodes the payload once, in place on Zenoh's thread, which keeps its Python thread state from one
callback to the next (:func:`~pluto.bus.executor.keep_thread_state`); a reader stores the value and wakes its
waiting threads as the last thing; a subscription queues it and hands its strand to an idle worker, woken outside
the executor's lock; :meth:`StateReader.wait_for_update` takes the reader's lock once after its wake-up.
"""

from __future__ import annotations

import abc
import contextlib
import heapq
import logging
import math
import os
import queue
import re
import secrets
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, Self, TypeVar, overload

import msgspec
import zenoh

from pluto import msgs, names
from pluto.bus.config import (
    BusConfig,
    bus_config,
    check_robot_name,
    register_session,
    registered_sessions,
    rendezvous_free,
    rendezvous_used,
    unregister_session,
    zenoh_config_json,
)
from pluto.bus.executor import ZENOH_THREAD, Executor, Strand, keep_thread_state, on_zenoh_thread
from pluto.bus.lockstep import LockstepAck, LockstepGate
from pluto.closing import close_at_exit
from pluto.errors import BusError, BusTimeout, DecodeError, RemoteError
from pluto.names import Topic

log = logging.getLogger("pluto.bus")

M = TypeVar("M", bound=msgs.Message)
T = TypeVar("T")

# Attachment of every sample: wall-clock time of the write (s), the writer's sequence number, the writer's id and
# flags (bit 0: the writer is lock-stepped, see pluto.bus.lockstep; bit 1: the value is a command). Older writers
# sent only the first two.
_ATTACHMENT = struct.Struct("<dQQB")
_ATTACHMENT_V1 = struct.Struct("<dQ")
LOCKSTEPPED = 1
COMMAND = 2
BATCH = 4  # the payload is a MessagePack array of values (a batching writer's), the attachment is its last one's

_NO_MARK = (0.0, 0, 0, 0)  # the mark of a sample without attachment (a foreign writer)

_ARRAY16 = struct.Struct(">BH")  # MessagePack array header of up to 65,535 items

_zenoh_log_started = False

SESSIONS = "pluto/@session"
"""Liveliness key prefix of every bus session, ``pluto/@session/<zid>`` (all robots: they share the rendezvous)."""
ROSTER = "pluto/@roster"
"""Served by the rendezvous owner: the zids of the sessions it knows (a MessagePack list of str)."""

ZENOH_RUNTIME = (
    "(app: (worker_threads: 1, max_blocking_threads: 1), acc: (handover: net),"
    " net: (worker_threads: 1, max_blocking_threads: 1), rx: (worker_threads: 1, max_blocking_threads: 1),"
    " tx: (worker_threads: 1, max_blocking_threads: 1))"
)
"""Zenoh's runtime threads in a Pluto process (its ``ZENOH_RUNTIME`` variable; see :meth:`Bus._open`)."""


def write_stamp(attachment: zenoh.ZBytes | None) -> tuple[float, int]:
    """The wall-clock time (s) a sample was written and its writer's sequence number, from its attachment;
    (0, 0) if it has none (a foreign writer)."""
    if attachment is None:
        return 0.0, 0
    raw = attachment.to_bytes()
    if len(raw) == _ATTACHMENT.size:
        written, seq, _wid, _flags = _ATTACHMENT.unpack(raw)
    elif len(raw) == _ATTACHMENT_V1.size:
        written, seq = _ATTACHMENT_V1.unpack(raw)
    else:
        return 0.0, 0
    return float(written), int(seq)


def write_mark(attachment: zenoh.ZBytes | None) -> tuple[float, int, int, int]:
    """(write time s, sequence number, writer id, flags) of a sample; zeros for a foreign writer."""
    if attachment is None:
        return 0.0, 0, 0, 0
    raw = attachment.to_bytes()
    if len(raw) == _ATTACHMENT.size:
        return _ATTACHMENT.unpack(raw)
    if len(raw) == _ATTACHMENT_V1.size:
        written, seq = _ATTACHMENT_V1.unpack(raw)
        return float(written), int(seq), 0, 0
    return 0.0, 0, 0, 0


def write_time(attachment: zenoh.ZBytes | None) -> float:
    """The wall-clock time a sample was written, from its attachment; 0 if it has none (a foreign writer)."""
    return write_stamp(attachment)[0]


ZENOH_QUIET = "error,zenoh::api::handlers=off"
"""Zenoh's own log unless asked for more: its errors, but not the one a reply handler logs when its receiver was
dropped before a late reply came ("sending on a closed channel": harmless, and printed before a command's output)."""


def zenoh_log_filter(level: int) -> str:
    """What Zenoh's own log (Rust's tracing, on stderr) shows in a process whose ``zenoh`` logger (Python's
    :mod:`logging`) has the effective level ``level``: Zenoh's debug lines at DEBUG (``pluto -vv``), its info at
    INFO, else only its errors (:data:`ZENOH_QUIET`). ``RUST_LOG`` set by the user wins."""
    if level <= logging.DEBUG:
        return "debug"
    if level <= logging.INFO:
        return "info"
    return ZENOH_QUIET


_RUST_SOURCE = re.compile(r"\s+at\s+\S+\.rs:\d+(:\d+)?\.?")
_SINGLE = re.compile(r"Single\(([^()]*)\)")


def zenoh_reason(err: BaseException) -> str:
    """Zenoh's error in words a user reads: without the places in Zenoh's Rust sources it names (``at
    /root/.cargo/.../orchestrator.rs:388``) and with its endpoint lists written plainly."""
    text = _SINGLE.sub(r"\1", _RUST_SOURCE.sub("", str(err))).strip()
    return text.rstrip(".") or type(err).__name__


def _start_zenoh_log() -> None:
    global _zenoh_log_started
    if not _zenoh_log_started:
        _zenoh_log_started = True
        with contextlib.suppress(Exception):
            zenoh.init_log_from_env_or(zenoh_log_filter(logging.getLogger("zenoh").getEffectiveLevel()))


class _Meter:
    """Counts events and measures their recent rate (Hz) over the last two seconds."""

    WINDOW = 2.0

    __slots__ = ("count", "last", "times")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.times: deque[float] = deque(maxlen=256)  # the newest event times

    def tick(self, now: float) -> None:
        self.count += 1
        self.last = now
        self.times.append(now)

    def tick_many(self, now: float, n: int) -> None:
        """``n`` events at once (a batch)."""
        self.count += n
        self.last = now
        self.times.extend([now] * min(n, 256))

    def current_rate(self, now: float) -> float:
        """Events per second over the window ending ``now`` (0 when they stopped)."""
        times = [t for t in list(self.times) if now - t <= self.WINDOW]
        if len(times) < 2:
            return 0.0
        span = max(times[-1] - times[0], now - times[-1])
        return (len(times) - 1) / span if span > 0 else 0.0


class _DropCounter:
    """Counts undecodable messages per interface and logs them at most once a second each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_interface: dict[str, int] = {}
        self._last_log: dict[str, float] = {}

    def drop(self, name: str, err: Exception) -> None:
        with self._lock:
            self.by_interface[name] = self.by_interface.get(name, 0) + 1
            now = time.monotonic()
            if now - self._last_log.get(name, 0.0) < 1.0:
                return
            self._last_log[name] = now
            count = self.by_interface[name]
        log.warning("dropped a message on %s (%d so far): %s", name, count, err)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_interface.values())


class StateWriter(Generic[M]):
    """Writes the newest value of an interface, and serves it to readers that join later.

    Create with :meth:`Bus.create_publisher`.
    """

    def __init__(
        self,
        bus: Bus,
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
        self._lock = threading.Lock()
        self._latest: tuple[bytes, float, int, int] | None = None  # (payload, write time, seq, flags)
        self._seq = 0
        self.writer_id = secrets.randbits(63) | 1  # never 0, which means "unknown writer"
        self.meter = _Meter()
        # A state's newest value is what matters, and a writer must never stall its control loop: under congestion
        # (a burst faster than the link) values are dropped (DROP), possibly the last of the burst, which the
        # next periodic write replaces. Where every value must arrive: reliable, BLOCK, the writer waits.
        congestion = zenoh.CongestionControl.BLOCK if reliable else zenoh.CongestionControl.DROP
        self._publisher = bus.session.declare_publisher(self._key, congestion_control=congestion, express=True)
        self._reliable = reliable
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
                if self.batch:
                    self._latest = (data, now, seq, self._flags)
                    self.meter.tick(now)
                    self._add_to_batch(data)
                    return
                self._publisher.put(data, attachment=_ATTACHMENT.pack(now, seq, self.writer_id, self._flags))
                # The rest while the value travels.
                self._latest = (data, now, seq, self._flags)
                self.meter.tick(now)
            return
        stepped = gate is not None and gate.active
        with self._lock:
            self._seq += 1
            seq = self._seq
            flags = self._flags | (LOCKSTEPPED if stepped else 0)
            attachment = _ATTACHMENT.pack(now, seq, self.writer_id, flags)
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
                # wait: the values go out on a publisher that blocks rather than drops under congestion.
                if self._stepped_publisher is None:
                    self._stepped_publisher = self._bus.session.declare_publisher(
                        self._key, congestion_control=zenoh.CongestionControl.BLOCK, express=True
                    )
                publisher = self._stepped_publisher
            publisher.put(data, attachment=attachment)
        if stepped:
            assert gate is not None
            gate.note_write(self._key, self.writer_id, seq)

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
        attachment = _ATTACHMENT.pack(time.time(), self._seq, self.writer_id, flags)
        self._publisher.put(payload, attachment=attachment)

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
        with self._lock:
            latest = self._latest
        with query:
            if latest is not None:
                data, written, seq, flags = latest
                query.reply(self._key, data, attachment=_ATTACHMENT.pack(written, seq, self.writer_id, flags))

    def close(self) -> None:
        """Send what a batching writer holds, then stop publishing (idempotent)."""
        with contextlib.suppress(Exception):
            self.flush()
        for entity in (self._queryable, self._publisher, self._stepped_publisher, self._label_token):
            if entity is None:
                continue
            with contextlib.suppress(Exception):
                entity.undeclare()


class _Receiver(abc.ABC, Generic[M]):
    """Decodes samples of one interface on the Zenoh thread and passes good ones to ``deliver``.

    It reads the interface of the bus's robot, or of another robot named by ``robot`` (``pluto/<robot>/<name>``):
    ``key`` is the one it reads."""

    def __init__(
        self,
        bus: Bus,
        name: str,
        cls: type[M],
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        robot: str | None = None,
    ) -> None:
        self.name = str(name)
        self.type = cls
        self._bus = bus
        self.robot = bus.robot if robot is None else check_robot_name(robot, "robot ")
        self.key = bus.key(self.name, self.robot)
        # A command reader: values older than max_age (s, by ``clock``) are forgotten, none is taken from a query.
        self.max_age = names.command_max_age(name) if max_age is None else max_age
        if self.max_age is not None and not (math.isfinite(self.max_age) and self.max_age > 0):
            raise ValueError(f"max_age of {name} must be > 0 s, got {self.max_age}")
        self.clock = clock or time.monotonic
        self.arrival = -math.inf  # the clock's time the newest value was let through
        self.expired = 0  # commands forgotten because they grew too old before they were read
        self.received = 0
        self.dropped = 0
        self.last_write_time = 0.0  # wall-clock time the newest value was written
        self.meter = _Meter()
        self.seen: dict[int, int] = {}  # writer id -> newest sequence number received (for lock-step)
        self.heard: dict[int, float] = {}  # writer id -> wall-clock time its newest value arrived
        self.closed = False

    WRITERS_KEPT = 32
    """Writer ids :attr:`heard` remembers at most (the oldest are forgotten first)."""

    def writers_heard(self, within: float, now: float | None = None) -> list[int]:
        """Ids of the writers whose values arrived in the last ``within`` seconds (wall clock), oldest first."""
        now = time.time() if now is None else now
        heard = list(self.heard.items())  # one copy (atomic): the Zenoh thread adds to it meanwhile
        return [wid for wid, when in sorted(heard, key=lambda item: item[1]) if now - when <= within]

    def _hear(self, wid: int, now: float) -> None:
        heard = self.heard
        heard[wid] = now
        if len(heard) > self.WRITERS_KEPT:
            del heard[min(heard, key=heard.__getitem__)]

    def _reject(self, err: DecodeError) -> None:
        self.dropped += 1
        self._bus.drops.drop(self.name, err)

    def _admit(self, values: list[M], mark: tuple[float, int, int, int]) -> None:
        """Values of one sample (one, or a batching writer's, oldest first), already decoded."""
        if len(values) == 1:
            self._admit_one(values[0], mark)
        elif values:
            self._admit_batch(values, mark)

    def _note_one(self, written: float, wid: int) -> None:
        """Count one sample as it arrives: the meter, the last write's time and its writer (the hot path: kept short,
        ``meter.tick`` and :meth:`_hear` inline)."""
        now = time.time()
        self.last_write_time = written or now
        meter = self.meter
        meter.count += 1
        meter.last = now
        meter.times.append(now)
        if wid:
            heard = self.heard
            heard[wid] = now
            if len(heard) > self.WRITERS_KEPT:
                del heard[min(heard, key=heard.__getitem__)]

    def _admit_one(self, value: M, mark: tuple[float, int, int, int]) -> None:
        """The value of one sample, already decoded."""
        written, seq, wid, flags = mark
        self._note_one(written, wid)
        gate = self._bus.gate
        if gate is None or gate.admit(self, value, wid, seq, bool(flags & LOCKSTEPPED)):
            self._take(value)

    def _admit_batch(self, values: list[M], mark: tuple[float, int, int, int]) -> None:
        written, seq, wid, _flags = mark
        now = time.time()
        self.last_write_time = written or now
        if wid:
            self._hear(wid, now)
        gate = self._bus.gate
        # A batching writer sends each value alone while the lock-step runs: a batch is never lock-stepped.
        self.meter.tick_many(now, len(values))
        if gate is None or gate.admit(self, values[-1], wid, seq, False):
            self._take_many(values)

    def _take_many(self, values: list[M]) -> None:
        """Values of one batch are let through, oldest first."""
        for value in values:
            self._take(value)

    @property
    def is_command(self) -> bool:
        """Whether this receiver follows the command rule (no late delivery, values expire after ``max_age``)."""
        return self.max_age is not None

    @abc.abstractmethod
    def _take(self, value: M) -> None:
        """A value is let through to this receiver's user (at once, or when the lock-step releases it): count it
        (``received``), note its arrival for a command (``arrival``) and make it visible."""

    def _stale(self, arrival: float) -> bool:
        """A command that arrived at ``arrival`` (this receiver's clock) is too old now, or from before a jump back."""
        if self.max_age is None:
            return False
        now = self.clock()
        return now - arrival > self.max_age or arrival > now + 1e-6

    def wait_idle(self, timeout: float) -> bool:
        """Wait until what was delivered has been handled (callbacks returned); True if so."""
        return True

    def fetch_current(self, timeout: float) -> M | None:
        """Ask the writers for the current value; return the newest good one, or None (always for a command)."""
        if self.max_age is not None:
            return None
        best: tuple[float, M] | None = None
        self._bus.settle()
        try:
            # No consolidation: every writer's reply is wanted, to pick the newest by its write time.
            replies = self._bus.query(self.key, timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE)
        except zenoh.ZError as err:
            raise BusError(f"cannot query {self.name}: {zenoh_reason(err)}") from err
        for reply in replies:
            if reply.ok is None:
                continue
            sample = reply.ok
            written, seq, wid, flags = write_mark(sample.attachment)
            if flags & COMMAND:
                continue  # a command is never handed to a reader that joins later
            if wid and seq > self.seen.get(wid, 0):
                self.seen[wid] = seq
            try:
                value = msgs.decode(sample.payload.to_bytes(), self.type)
            except DecodeError as err:
                self.dropped += 1
                self._bus.drops.drop(self.name, err)
                continue
            if best is None or written > best[0]:
                best = (written, value)
        if best is None:
            return None
        self.last_write_time = best[0]
        return best[1]


class _Tap:
    """The one Zenoh subscriber of an interface in a process: a sample is decoded once and handed to every reader
    and subscription of that interface (and type) on the bus, however many there are."""

    def __init__(self, bus: Bus, key: str, cls: type[Any]) -> None:
        self.key = (key, cls)
        self.type = cls
        self.receivers: tuple[_Receiver[Any], ...] = ()
        self._bus = bus
        self._subscriber = bus.session.declare_subscriber(key, on_zenoh_thread(self._on_sample, keeps_state=True))

    def _on_sample(self, sample: zenoh.Sample) -> None:
        if not hasattr(ZENOH_THREAD, "kept"):
            keep_thread_state()
        receivers = self.receivers
        if not receivers:
            return
        attachment = sample.attachment
        if attachment is None:
            mark = _NO_MARK
        else:
            raw = attachment.to_bytes()
            mark = _ATTACHMENT.unpack(raw) if len(raw) == _ATTACHMENT.size else write_mark(attachment)
        try:
            if mark[3] & BATCH:
                values = msgs.decode_many(sample.payload.to_bytes(), self.type)
                for receiver in receivers:
                    if not receiver.closed:
                        receiver._admit(values, mark)
                return
            value = msgs.decode(sample.payload.to_bytes(), self.type)
        except DecodeError as err:
            for receiver in receivers:
                receiver._reject(err)
            return
        for receiver in receivers:
            if not receiver.closed:
                receiver._admit_one(value, mark)

    def undeclare(self) -> None:
        with contextlib.suppress(Exception):
            self._subscriber.undeclare()  # type: ignore[no-untyped-call]


class StateReader(_Receiver[M]):
    """Keeps the newest value of an interface; :meth:`read` returns it at once.

    Create with :meth:`Bus.create_reader`. A reader created after the last write still gets that value: it asks
    the writers for it when it is created.

    Freshness (docs/design.md, principle 8): a reader with a ``deadline`` (s) judges a state by its stamp: :meth:`fresh`
    returns the newest value only if its stamp is at most ``deadline`` s before the time the caller gives (its own
    clock's), and None otherwise: a stale value is treated as absent. A module's readers get the deadline of the
    interface table (:func:`pluto.names.stale_after`) unless the module gives another.

    Attributes:
        deadline: s a value's stamp may lag the reader's time before :meth:`fresh` treats it as absent; None: no
            deadline (:meth:`fresh` is :meth:`read`).
        stale_events: times :meth:`fresh` found the value stale after having found it fresh (or after the first
            value, if it was stale from the start): how often the input was lost.
        stale: the last :meth:`fresh` found a value, and it was stale.
    """

    def __init__(
        self,
        bus: Bus,
        name: str,
        cls: type[M],
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> None:
        super().__init__(bus, name, cls, max_age, clock, robot)
        if deadline is not None and not (math.isfinite(deadline) and deadline > 0):
            raise ValueError(f"deadline of {name} must be > 0 s, got {deadline}")
        self.deadline = deadline
        self.stale_events = 0
        self.stale = False
        self.judged: tuple[float, float] | None = None  # (time, age) of the last judgement of fresh()
        # A plain lock and one C-level queue per waiting thread: cheaper than a Condition on the hot path.
        self._lock = threading.Lock()
        self._waiters: list[queue.SimpleQueue[bool]] = []
        self._value: M | None = None
        self._generation = 0
        self._seen = 0
        bus._attach(self)
        current = self.fetch_current(fetch_timeout)
        if current is not None:
            with self._lock:
                waiters = self._set(current) if self._value is None else []  # a live sample is newer
            for waiter in waiters:
                waiter.put(True)

    def _set(self, value: M) -> list[queue.SimpleQueue[bool]]:
        """Store a new value (lock held); return the waiters to wake."""
        self._value = value
        self._generation += 1
        waiters, self._waiters = self._waiters, []
        return waiters

    def _take_many(self, values: list[M]) -> None:
        self.received += len(values) - 1  # a reader keeps the newest value only
        self._take(values[-1])

    def _take(self, value: M) -> None:
        # The hot path: store, then wake the waiting threads as the last thing.
        if self.max_age is not None:
            self.arrival = self.clock()
        with self._lock:
            self.received += 1
            self._value = value
            self._generation += 1
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.put(True)

    @property
    def waiting(self) -> int:
        """Threads waiting now in :meth:`wait_for_update` or :meth:`wait_for_value` for a new value."""
        with self._lock:
            return len(self._waiters)

    def read(self) -> M | None:
        """Return the newest value, or None if nothing was ever written (or, for a command, if it is too old)."""
        with self._lock:
            self._seen = self._generation
            if self._value is not None and self._stale(self.arrival):
                self._value = None
                self.expired += 1
            return self._value

    def fresh(self, now: float) -> M | None:
        """The newest value if it is fresh at ``now`` (s, the caller's clock: a module's step time), else None.

        Fresh: its stamp is at most :attr:`deadline` s before ``now`` (a stamp ahead of ``now`` is fresh: the
        writer's clock runs a little ahead, or the value is of this instant). Without a deadline, any value is.
        A value that is stale counts in :attr:`stale_events` when it becomes so.
        """
        value = self.read()
        if value is None or self.deadline is None:
            return value
        age = now - float(getattr(value, "stamp", 0.0))
        stale = age > self.deadline
        if stale and not self.stale:
            self.stale_events += 1
        self.stale = stale
        self.judged = (now, age)
        return None if stale else value

    def stamp_age(self, now: float) -> float | None:
        """How old (s) the newest value's stamp is at ``now`` (s, the caller's clock), or None if there is none."""
        with self._lock:
            value = self._value
        if value is None:
            return None
        return now - float(getattr(value, "stamp", 0.0))

    def _wait(self, ready: Callable[[], bool], timeout: float | None, failure: str) -> M:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if ready():
                    self._seen = self._generation
                    assert self._value is not None
                    return self._value
                waiter: queue.SimpleQueue[bool] = queue.SimpleQueue()
                self._waiters.append(waiter)
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                with self._bus.executor.blocking():
                    waiter.get(timeout=remaining)
            except queue.Empty:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                    if ready():
                        self._seen = self._generation
                        assert self._value is not None
                        return self._value
                raise BusTimeout(failure) from None

    def wait_for_update(self, timeout: float | None = None) -> M:
        """Wait for a value newer than the last one this reader returned, and return it.

        Raises:
            BusTimeout: nothing new arrived within ``timeout`` seconds.
        """
        # The hot path of a request/reply over two interfaces: one wait, woken by _take, then one lock to return.
        with self._lock:
            if self._generation > self._seen:
                self._seen = self._generation
                assert self._value is not None
                return self._value
            waiter: queue.SimpleQueue[bool] = queue.SimpleQueue()
            self._waiters.append(waiter)
        start = time.monotonic()
        try:
            if self._bus.executor.on_worker():
                with self._bus.executor.blocking():
                    waiter.get(timeout=timeout)
            else:
                waiter.get(timeout=timeout)
        except queue.Empty:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                if self._generation > self._seen:
                    self._seen = self._generation
                    assert self._value is not None
                    return self._value
            raise BusTimeout(f"no update on {self.name} within {timeout} s") from None
        with self._lock:
            if self._generation > self._seen:
                self._seen = self._generation
                assert self._value is not None
                return self._value
        # Another thread waiting on this reader returned that value first: wait on for the rest of the time.
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        return self._wait(
            lambda: self._generation > self._seen, remaining, f"no update on {self.name} within {timeout} s"
        )

    def wait_for_value(self, timeout: float | None = None) -> M:
        """Return the current value, waiting for a first one if there is none yet.

        Raises:
            BusTimeout: nothing was written within ``timeout`` seconds.
        """
        return self._wait(lambda: self._value is not None, timeout, f"nobody wrote {self.name} within {timeout} s")

    @property
    def age(self) -> float | None:
        """Seconds since the newest value was written (wall clock), or None if there is none."""
        with self._lock:
            if self._value is None:
                return None
        return max(0.0, time.time() - self.last_write_time)

    def close(self) -> None:
        """Stop receiving (idempotent)."""
        self.closed = True
        self._bus._detach(self)
        if self._bus.gate is not None:
            self._bus.gate.forget(self)


class Subscription(_Receiver[M]):
    """Calls a function with each new value of an interface, on a thread of its own.

    With ``depth=1`` (the default, right for sensor streams) a slow callback skips to the newest value; a larger
    depth queues that many values for a slow callback and counts the ones its queue had to drop (``overflowed``).
    Values the network dropped under congestion are not seen at all: a writer whose every value must arrive is
    created with ``reliable=True``.
    """

    def __init__(
        self,
        bus: Bus,
        name: str,
        cls: type[M],
        callback: Callable[[M], Any],
        *,
        depth: int = 1,
        current: bool = True,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        robot: str | None = None,
    ) -> None:
        super().__init__(bus, name, cls, max_age, clock, robot)
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._callback = callback
        # Values wait in a bounded deque (the oldest falls out when it is full); the subscription's strand on the
        # bus's executor calls the callback with them, in order, one at a time.
        self._pending: deque[tuple[M, float]] = deque(maxlen=depth)  # (value, arrival for a command)
        self.delivered = 0
        self._closed = False
        self._strand = Strand(bus.executor, self._drain)
        bus._attach(self)
        if current and not self.is_command:
            value = self.fetch_current(3.0)
            if value is not None and not self.received:
                self._pending.append((value, 0.0))
                self._strand.schedule()

    @property
    def overflowed(self) -> int:
        """Values that a slow callback never saw (newer ones replaced them)."""
        return max(0, self.received - self.delivered - len(self._pending))

    def _admit_one(self, value: M, mark: tuple[float, int, int, int]) -> None:
        # The hot path: _Receiver._admit_one and _take in one when no lock-step runs.
        if self._bus.gate is not None:
            super()._admit_one(value, mark)
            return
        self._note_one(mark[0], mark[2])
        if self.max_age is not None:
            self.arrival = self.clock()
        self.received += 1
        self._pending.append((value, self.arrival))
        self._strand.schedule()

    def _take(self, value: M) -> None:
        # The hot path (_run_soon inline).
        if self.max_age is not None:
            self.arrival = self.clock()
        self.received += 1
        self._pending.append((value, self.arrival))
        gate = self._bus.gate
        if gate is None or not gate.defer(self._strand):
            self._strand.schedule()

    def _take_many(self, values: list[M]) -> None:
        if self.max_age is not None:
            self.arrival = self.clock()
        self.received += len(values)
        arrival = self.arrival
        self._pending.extend([(value, arrival) for value in values])
        self._run_soon()

    def _run_soon(self) -> None:
        """Have the callback called with what is pending: by the lock-step executor when it is the one releasing
        values (it waits for the callbacks before the members step anyway), else on the bus's executor."""
        gate = self._bus.gate
        if gate is None or not gate.defer(self._strand):
            self._strand.schedule()

    def wait_idle(self, timeout: float) -> bool:
        if self._closed:
            return True
        return self._strand.wait_idle(timeout)

    def _drain(self) -> None:
        pending = self._pending
        while pending and not self._closed:
            try:
                value, arrival = pending.popleft()
            except IndexError:
                return
            self.delivered += 1
            if self.max_age is not None and self._stale(arrival):
                self.expired += 1  # a command that waited too long in the queue is not obeyed
                continue
            try:
                self._callback(value)
            except Exception:
                log.exception("callback on %s failed", self.name)

    def close(self) -> None:
        """Stop receiving (idempotent); waits for a callback in progress, unless called from that callback."""
        self._closed = True
        self.closed = True
        self._bus._detach(self)
        if self._bus.gate is not None:
            self._bus.gate.forget(self)
        self._strand.close()


class Service:
    """Serves requests on a name; the handler runs on the bus's executor, one request at a time.

    Create with :meth:`Bus.create_service`. A handler that raises replies with an error that the caller receives
    as :class:`~pluto.errors.RemoteError`.
    """

    MAX_QUEUED = 64

    def __init__(self, bus: Bus, name: str, handler: Callable[[Any], Any], request_type: Any = Any) -> None:
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


def _reply_roster(query: zenoh.Query, payload: bytes) -> None:
    with query:
        query.reply(ROSTER, payload)


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


class Bus:
    """A process's connection to the robot's bus (one Zenoh session).

    Use as a context manager, or call :meth:`close`. Interface names are the robot's (``Base/Drive/State``); the
    key on the wire is ``pluto/<robot>/<name>``.

    Args:
        config: bus settings; by default from the environment (``PLUTO_ROBOT``, ``PLUTO_CONNECT``, ...).

    Raises:
        BusError: the session could not be opened (for instance the router in ``connect`` is unreachable, or it
            refused this machine's certificate: the message says why).
        ConfigError: a TLS file of ``config.tls`` is missing, damaged, expired or not from its CA.
    """

    def __init__(self, config: BusConfig | None = None) -> None:
        self.config = config or bus_config()
        self.machine = ""
        """The name in this machine's certificate (``config.tls``), "" without one."""
        self.role = ""
        """The role in this machine's certificate: "robot", "viewer" (the router lets it read only, see
        :mod:`pluto.bus.access`) or "" without one."""
        if self.config.tls is not None:
            from pluto.bus.tls import check_files

            identity = check_files(self.config.tls)
            self.machine, self.role = identity.name, identity.role
        self.robot = self.config.robot
        self.prefix = f"pluto/{self.robot}"
        self.drops = _DropCounter()
        self._closed = False
        self._owned: list[Any] = []
        self._lock = threading.Lock()
        self.gate: LockstepGate | None = None
        self._by_name: dict[str, list[_Receiver[Any]]] | None = None
        """The lock-step state, once a module following simulated time uses this bus (see :meth:`lockstep`)."""
        self.lockstep_coordinator: Callable[[LockstepAck], None] | None = None
        """Set by a lock-step coordinator running on this bus (the simulator): the gate hands it its
        acknowledgements directly instead of through Zenoh (see :mod:`pluto.bus.lockstep`)."""
        self.executor = Executor(self.robot)
        self._batcher: _Batcher | None = None
        self.writer_label = ""
        """Set by a program that is not a module (a command line) before it creates writers: each then announces
        ``<writer id>/<label>`` while it lives, and MOM names it so (see :meth:`writer_labels`). A key chunk: no
        ``/``, ``*``, ``?``, ``#`` or ``$``."""
        self._taps: dict[tuple[str, type[Any]], _Tap] = {}
        self._taps_lock = threading.Lock()
        """Runs every callback, service handler and deferred reply of this bus (see pluto.bus.executor)."""
        _start_zenoh_log()
        self.owner = rendezvous_free(self.config)
        try:
            self.session = self._open(owner=self.owner)
        except zenoh.ZError as err:
            if not self.owner:
                raise self._open_error(err) from None
            try:  # another process took the rendezvous in the meantime: join it instead
                self.owner = False
                self.session = self._open(owner=False)
            except zenoh.ZError as err2:
                raise self._open_error(err2) from None
        self._settled = False
        self._modules: set[str] = set()
        self._gone: dict[str, float] = {}  # module -> when it was last seen to go (monotonic s)
        self._module_watch = self.session.liveliness().declare_subscriber(
            f"{self.prefix}/@module/**", on_zenoh_thread(self._on_module_token), history=True
        )
        # Every session announces itself; the rendezvous owner lists the sessions it knows (see settle()).
        self.zid = str(self.session.info.zid())
        self._sessions: set[str] = set()
        self._sessions_heard: set[str] = set()  # also those that went since (a roster may still list them)
        self._sessions_changed = threading.Condition()
        self._session_watch = self.session.liveliness().declare_subscriber(
            f"{SESSIONS}/*", on_zenoh_thread(self._on_session_token), history=True
        )
        self._session_token = self.session.liveliness().declare_token(f"{SESSIONS}/{self.zid}")
        self._roster: Any = None
        if self.owner:
            self._roster = self.session.declare_queryable(ROSTER, on_zenoh_thread(self._on_roster_query))
        self._registered = register_session(self.config, self.zid)
        close_at_exit(self)

    def _open_error(self, err: Exception) -> BusError:
        where = ", ".join(self.config.connect) or ", ".join(self.config.listen)
        if self.config.tls is not None:
            # Zenoh only says it could not connect: a handshake of our own tells why.
            from pluto.bus.tls import diagnose

            reasons = [reason for reason in (diagnose(e, self.config.tls) for e in self.config.connect) if reason]
            if reasons:
                return BusError(f"cannot open the bus at {where}: {'; '.join(reasons)}")
        hint = " (is `pluto router` running there?)" if self.config.connect else ""
        return BusError(f"cannot open the bus at {where}{hint}: {zenoh_reason(err)}")

    def _open(self, owner: bool) -> zenoh.Session:
        # Zenoh's runtimes start on the first session; Pluto's processes hold one session with little traffic, so
        # each runtime gets one worker instead of a pool per core: about 5 threads rather than 15-25 in a module
        # process. ZENOH_RUNTIME set by the user wins.
        os.environ.setdefault("ZENOH_RUNTIME", ZENOH_RUNTIME)
        conf = zenoh.Config()
        for path, value in zenoh_config_json(self.config, owner).items():
            conf.insert_json5(path, msgspec.json.encode(value).decode())
        return zenoh.open(conf)

    GONE_DOUBT = 1.0
    """s after a module was seen to go during which news of it alive is doubted (see :meth:`_note_module`)."""
    SETTLE_TIMEOUT = 10.0
    """s :meth:`settle` waits at most for the sessions it expects (one may be closing). Generous: it is waited out only
    for a session that goes meanwhile, while on a starved machine the others may take seconds to reconnect to a
    process that took the rendezvous over."""

    def _on_session_token(self, sample: zenoh.Sample) -> None:
        zid = str(sample.key_expr).rpartition("/")[2]
        with self._sessions_changed:
            self._sessions_heard.add(zid)
            if sample.kind == zenoh.SampleKind.PUT:
                self._sessions.add(zid)
            else:
                self._sessions.discard(zid)
            self._sessions_changed.notify_all()

    def _on_roster_query(self, query: zenoh.Query) -> None:
        with self._sessions_changed:
            roster = sorted(self._sessions)
        self._defer(_reply_roster, query, msgspec.msgpack.encode(roster))

    def settle(self) -> None:
        """Before asking who is on the bus, wait until this session has heard of every other session.

        A newcomer is linked to the rendezvous owner when it opens (and has its declarations: Zenoh's
        ``open/return_conditions``), but it learns of the other sessions through links of its own that gossip sets
        up after that; over a new link Zenoh sends the other side's subscribers, then its queryables, then its
        liveliness tokens, ``pluto/@session/<zid>`` among them. So: ask the owner which sessions it knows, and wait
        for each one's token (an event; at most :attr:`SETTLE_TIMEOUT` s for one that closes meanwhile): from then
        on the writers and services of those sessions are known, and a query reaches them. Once per bus. A process
        that took the rendezvous over after its owner died knows nobody until the others reconnect to it (within
        their retry period): it expects the sessions listed in the rendezvous's folder instead
        (:func:`~pluto.bus.config.registered_sessions`). A client of a router does not wait: the router knows."""
        if self._settled:
            return
        self._settled = True
        if not rendezvous_used(self.config):
            return
        expected: set[str] = set()
        if self.owner:
            expected = registered_sessions(self.config) - {self.zid}
        for reply in [] if self.owner else self.query(ROSTER, timeout=self.SETTLE_TIMEOUT):
            if reply.ok is None:
                continue
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                expected.update(msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=list[str]))
        with self._sessions_changed, self.executor.blocking():
            self._sessions_changed.wait_for(lambda: expected <= self._sessions_heard, timeout=self.SETTLE_TIMEOUT)

    # -- keys --------------------------------------------------------------------------------------------------

    def key(self, name: str, robot: str | None = None) -> str:
        """The Zenoh key of interface ``name`` of this bus's robot, or of robot ``robot``."""
        prefix = self.prefix if robot is None or robot == self.robot else f"pluto/{check_robot_name(robot, 'robot ')}"
        return f"{prefix}/{names.check_name(name)}"

    def key_raw(self, suffix: str) -> str:
        """The Zenoh key ``pluto/<robot>/<suffix>``, unchecked (for the bus's own protocols)."""
        return f"{self.prefix}/{suffix}"

    @property
    def subscribers(self) -> dict[str, int]:
        """The Zenoh subscribers this bus holds, by key: how many readers and subscriptions each serves (the
        receivers of one interface share one subscriber, which goes with the last of them)."""
        out: dict[str, int] = {}
        with self._taps_lock:
            for (key, _cls), tap in self._taps.items():
                out[key] = out.get(key, 0) + len(tap.receivers)
        return out

    def _attach(self, receiver: _Receiver[Any]) -> None:
        """Let ``receiver`` see its interface's samples (through the interface's one subscriber in this process)."""
        key = (receiver.key, receiver.type)
        with self._taps_lock:
            tap = self._taps.get(key)
            if tap is None:
                tap = self._taps[key] = _Tap(self, receiver.key, receiver.type)
            tap.receivers = (*tap.receivers, receiver)

    def _detach(self, receiver: _Receiver[Any]) -> None:
        key = (receiver.key, receiver.type)
        with self._taps_lock:
            tap = self._taps.get(key)
            if tap is None or receiver not in tap.receivers:
                return
            tap.receivers = tuple(r for r in tap.receivers if r is not receiver)
            if tap.receivers:
                return
            del self._taps[key]
        tap.undeclare()

    def batcher(self) -> _Batcher:
        """The thread that sends batching writers' values when their delay is up (started at the first call)."""
        with self._lock:
            if self._batcher is None:
                self._batcher = _Batcher(f"pluto-{self.robot}")
            return self._batcher

    def lockstep(self) -> LockstepGate:
        """This bus's lock-step state (created at the first call)."""
        with self._lock:
            if self._closed:
                raise BusError("the bus is closed")
            if self.gate is None:
                self.gate = LockstepGate(self)
            return self.gate

    def receivers_by_key(self) -> dict[str, list[_Receiver[Any]]]:
        """The open readers and subscriptions of this bus, by the key they read (``pluto/<robot>/<interface>``: a
        reader of another robot's interface is apart from one of this robot's)."""
        with self._lock:
            by_key = self._by_name
            if by_key is None:
                by_key = {}
                for thing in self._owned:
                    if isinstance(thing, _Receiver):
                        by_key.setdefault(thing.key, []).append(thing)
                self._by_name = by_key
        if any(r.closed for receivers in by_key.values() for r in receivers):
            with self._lock:
                self._by_name = None
            return {k: [r for r in rs if not r.closed] for k, rs in by_key.items()}
        return by_key

    def service_key(self, name: str) -> str:
        """The Zenoh key of service ``name``."""
        return f"{self.prefix}/@srv/{names.check_name(name)}"

    def module_key(self, name: str) -> str:
        """The Zenoh liveliness key of module ``name``."""
        return f"{self.prefix}/@module/{names.check_name(name)}"

    # -- interfaces --------------------------------------------------------------------------------------------

    def _type_for(self, name: str | Topic[M], cls: type[M] | None) -> type[M]:
        known = names.message_type_of(name)
        if cls is None:
            if known is None:
                raise KeyError(f"interface {name!r} is not in the table; pass its message type")
            return known  # type: ignore[return-value]
        if known is not None and known is not cls:
            raise TypeError(f"{name} carries {known.__name__}, not {cls.__name__}")
        return cls

    def _check_open(self) -> None:
        if self._closed:
            raise BusError("the bus is closed")

    def _own(self, thing: T) -> T:
        with self._lock:
            if self._closed:
                raise BusError("the bus is closed")
            self._owned.append(thing)
            if isinstance(thing, _Receiver):
                self._by_name = None
        return thing

    @overload
    def create_publisher(
        self,
        name: Topic[M],
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[M]: ...
    @overload
    def create_publisher(
        self,
        name: str,
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[Any]: ...
    @overload
    def create_publisher(
        self,
        name: str,
        cls: type[M],
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[M]: ...
    def create_publisher(
        self,
        name: str,
        cls: type[M] | None = None,
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[Any]:
        """Return a writer of interface ``name`` (its type from the interface table unless given).

        Args:
            reliable: under congestion, wait rather than drop values (for streams where every value counts).
            command: the values are commands (never handed to late readers); None: as the interface table says.
            batch: for high-rate streams: send up to this many values in one message, once that many are
                waiting or the oldest has waited ``batch_delay`` s (or at :meth:`StateWriter.flush`). Readers
                get every value, in order (a :class:`StateReader` keeps the newest); 0 sends each value at once.
                Never for commands; in lock-step every value goes out at once.
            batch_delay: the longest a value waits for its batch, s (0 < delay <= 1).
        """
        self._check_open()
        writer = StateWriter(
            self,
            name,
            self._type_for(name, cls),
            reliable=reliable,
            command=command,
            batch=batch,
            batch_delay=batch_delay,
        )
        return self._own(writer)

    @overload
    def create_reader(
        self,
        name: Topic[M],
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    @overload
    def create_reader(
        self,
        name: str,
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[Any]: ...
    @overload
    def create_reader(
        self,
        name: str,
        cls: type[M],
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    def create_reader(
        self,
        name: str,
        cls: type[M] | None = None,
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[Any]:
        """Return a reader of interface ``name`` that already holds its current value, if any.

        A reader of a command interface (:data:`pluto.names.COMMANDS`, or any with ``max_age``) starts empty and
        returns None once the newest command is older than ``max_age`` s by ``clock`` (default: the table's age and
        a monotonic clock). ``deadline`` (s) is how old a state's stamp may be for :meth:`StateReader.fresh`.
        ``robot`` reads another robot's interface (``pluto/<robot>/<name>``; this bus's robot by default): in
        lock-step its values are held back and waited for like this robot's.
        """
        self._check_open()
        cls = self._type_for(name, cls)
        return self._own(
            StateReader(
                self,
                name,
                cls,
                fetch_timeout=fetch_timeout,
                max_age=max_age,
                clock=clock,
                deadline=deadline,
                robot=robot,
            )
        )

    def create_subscription(
        self,
        name: str | Topic[M],
        callback: Callable[[M], Any],
        cls: type[M] | None = None,
        *,
        depth: int = 1,
        current: bool = True,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        robot: str | None = None,
    ) -> Subscription[M]:
        """Call ``callback`` with every new value of ``name`` (on a thread of the subscription's own).

        Args:
            depth: values queued for a slow callback; 1 keeps only the newest.
            current: also deliver the value the interface had when subscribing (never for a command).
            max_age, clock: for a command, a value that waited longer than ``max_age`` s by ``clock`` is skipped.
            robot: the robot whose interface it is (``pluto/<robot>/<name>``); this bus's robot by default.
        """
        self._check_open()
        sub = Subscription(
            self,
            name,
            self._type_for(name, cls),
            callback,
            depth=depth,
            current=current,
            max_age=max_age,
            clock=clock,
            robot=robot,
        )
        return self._own(sub)

    # -- request / reply ---------------------------------------------------------------------------------------

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

    def call(self, name: str, request: Any = None, reply_type: type[T] | Any = Any, *, timeout: float = 2.0) -> T:
        """Send a request to service ``name`` and return its reply.

        Raises:
            BusTimeout: no reply within ``timeout`` seconds (no module serves it, or it is too slow).
            RemoteError: the service replied with an error.
            BusError: this machine is a viewer's and the service is not one a viewer may call
                (:data:`pluto.bus.access.VIEWER_SERVICES`).
        """
        with self.executor.blocking():  # a handler or callback may call a service of its own process
            reply: T = self._call(name, request, reply_type, timeout)
        return reply

    def _call(self, name: str, request: Any, reply_type: type[T] | Any, timeout: float) -> T:
        if self.role == "viewer":
            from pluto.bus.access import viewer_may_call

            if not viewer_may_call(name):
                raise BusError(
                    f"cannot call {name}: this machine is enrolled as a viewer ({self.machine}), and the router "
                    "lets a viewer call only the services that read"
                )
        payload = msgspec.msgpack.encode(request) if request is not None else None
        deadline = time.monotonic() + timeout
        key = self.service_key(name)
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
                    f"no reply from {name!r} on robot {self.robot!r} within {timeout} s "
                    "(is the module running? see `pluto mom`)"
                )

    def _wait_for_server(self, key: str, deadline: float, known: bool) -> bool:
        """Wait until a queryable of ``key`` is known to this session (Zenoh's matching status), at most until
        ``deadline``; return whether one is. If one was ``known`` already when the request went unanswered, wait for
        the next change rather than ask again at once."""
        changed = threading.Event()
        querier = self.session.declare_querier(key)
        listener = querier.declare_matching_listener(on_zenoh_thread(lambda _status: changed.set()))

        def matching() -> bool:
            # a MatchingStatus (zenoh's stubs say bool, and the object is always true): its flag tells
            status: Any = querier.matching_status
            return bool(status.matching)

        try:
            if matching() and not known:
                return True
            with self.executor.blocking():
                while changed.wait(max(deadline - time.monotonic(), 0.0)):
                    changed.clear()
                    if matching():
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

    # -- liveliness --------------------------------------------------------------------------------------------

    def declare_module(self, name: str) -> zenoh.LivelinessToken:
        """Announce that module ``name`` is alive until the returned token is undeclared or the process ends."""
        self._check_open()
        return self._own(self.session.liveliness().declare_token(self.module_key(name)))

    def declare_token(self, suffix: str) -> zenoh.LivelinessToken:
        """Declare the liveliness token ``pluto/<robot>/<suffix>`` until it is released or the process ends."""
        self._check_open()
        return self._own(self.session.liveliness().declare_token(self.key_raw(suffix)))

    def watch_token(self, suffix: str, callback: Callable[[bool], Any]) -> Any:
        """Call ``callback(present)`` on a Zenoh thread (keep it short) when the liveliness token
        ``pluto/<robot>/<suffix>`` is declared (True, also at once if it is already) or goes (False: released, or
        its process ended). Returns the Zenoh subscriber (release it with :meth:`release`)."""
        self._check_open()

        def on_sample(sample: zenoh.Sample) -> None:
            callback(sample.kind == zenoh.SampleKind.PUT)

        return self._own(
            self.session.liveliness().declare_subscriber(self.key_raw(suffix), on_zenoh_thread(on_sample), history=True)
        )

    def _on_module_token(self, sample: zenoh.Sample) -> None:
        self._note_module(
            str(sample.key_expr).removeprefix(f"{self.prefix}/@module/"), sample.kind == zenoh.SampleKind.PUT
        )

    def _note_module(self, name: str, alive: bool) -> None:
        """What :meth:`live_modules` knows of module ``name`` (from any watcher of this bus: whichever hears first).

        An announcement heard within ``GONE_DOUBT`` s after the module was seen to go may be a late answer to a
        watcher's query of the tokens, sent before the module went, rather than a restart: it is not taken as
        news; until then only a query of the tokens that finds the module counts."""
        now = time.monotonic()
        with self._lock:
            if alive:
                if now - self._gone.get(name, -math.inf) >= self.GONE_DOUBT:
                    self._modules.add(name)
            else:
                self._modules.discard(name)
                self._gone[name] = now

    def writer_labels(self, timeout: float = 1.0) -> dict[int, str]:
        """The writers that programs other than modules named (:attr:`writer_label`), alive now: id -> label."""
        self.settle()
        prefix = f"{self.prefix}/@writer/"
        found: dict[int, str] = {}
        for reply in self.query_tokens(f"{prefix}**", timeout=timeout):
            if reply.ok is None:
                continue
            wid, _, label = str(reply.ok.key_expr).removeprefix(prefix).partition("/")
            with contextlib.suppress(ValueError):
                found[int(wid, 16)] = label
        return found

    def live_modules(self, timeout: float = 1.0) -> list[str]:
        """Names of the modules alive now, sorted.

        Both what this bus has watched since it opened and what a query finds count: right after joining, either
        alone can miss a module whose announcement is still on its way.
        """
        self.settle()
        found: set[str] = set()
        for reply in self.query_tokens(f"{self.prefix}/@module/**", timeout=timeout):
            if reply.ok is not None:
                found.add(str(reply.ok.key_expr).removeprefix(f"{self.prefix}/@module/"))
        with self._lock:
            # A module seen to go may still answer the query for a moment (its removal on its way): it is gone.
            now = time.monotonic()
            recent = {name for name, when in self._gone.items() if now - when < self.GONE_DOUBT}
            return sorted((found - recent) | self._modules)

    def watch_modules(self, callback: Callable[[str, bool], Any]) -> Any:
        """Call ``callback(name, alive)`` on this bus's executor (in order) when a module appears or disappears.

        Modules already alive are reported first. Returns the Zenoh subscriber (undeclared on close).
        """
        prefix = f"{self.prefix}/@module/"
        events: deque[tuple[str, bool]] = deque()

        def drain() -> None:  # in order: a module that came and went is reported in that order
            while events:
                callback(*events.popleft())

        strand = Strand(self.executor, drain)

        def on_sample(sample: zenoh.Sample) -> None:
            alive = sample.kind == zenoh.SampleKind.PUT
            if not alive:  # the bus's own list knows it too before anyone hears it (live_modules agrees)
                self._on_module_token(sample)
            events.append((str(sample.key_expr).removeprefix(prefix), alive))
            strand.schedule()

        key = f"{prefix}**"
        return self._own(self.session.liveliness().declare_subscriber(key, on_zenoh_thread(on_sample), history=True))

    def wait_for_token(self, suffix: str, timeout: float) -> None:
        """Wait until the liveliness token ``pluto/<robot>/<suffix>`` is declared.

        Raises:
            BusTimeout: it was not within ``timeout`` seconds.
        """
        event = threading.Event()
        key = self.key_raw(suffix)
        sub = self.session.liveliness().declare_subscriber(
            key,
            on_zenoh_thread(lambda sample: event.set() if sample.kind == zenoh.SampleKind.PUT else None),
            history=True,
        )
        try:
            if not event.wait(timeout):
                raise BusTimeout(f"{suffix} was not declared within {timeout} s")
        finally:
            with contextlib.suppress(Exception):
                sub.undeclare()  # type: ignore[no-untyped-call]

    def wait_for_module(self, name: str, timeout: float, alive: bool = True) -> None:
        """Wait until module ``name`` is alive (or gone, with ``alive=False``).

        Raises:
            BusTimeout: it did not happen within ``timeout`` seconds.
        """
        event = threading.Event()

        def seen(module: str, is_alive: bool) -> None:
            # Once only: a token declared as the watch starts can be reported twice (history and live), and the
            # second report may be drained after the module went; noting it again would bring the module back.
            if module == name and is_alive == alive and not event.is_set():
                self._note_module(module, is_alive)  # so that live_modules() agrees at once
                event.set()

        sub = self.watch_modules(seen)
        try:
            if not alive and name not in self.live_modules():
                return
            if not event.wait(timeout):
                state = "alive" if alive else "gone"
                raise BusTimeout(f"module {name!r} was not {state} within {timeout} s")
        finally:
            event.set()  # reports drained after the wait no longer touch what live_modules() knows
            self.release(sub)

    # -- plumbing ----------------------------------------------------------------------------------------------

    def interface_keys(self, timeout: float = 3.0) -> dict[str, float]:
        """Interfaces that have a current value on this robot, with the wall-clock time of their last write."""
        self.settle()  # then every writer is known: one query reaches them all
        found: dict[str, float] = {}
        replies = self.query(f"{self.prefix}/**", timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE)
        for reply in replies:
            if reply.ok is None:
                continue
            name = str(reply.ok.key_expr).removeprefix(f"{self.prefix}/")
            found[name] = max(found.get(name, 0.0), write_time(reply.ok.attachment))
        return found

    def wait_published(self, name: str, timeout: float) -> None:
        """Wait until interface ``name`` has a value (of any type) on the bus.

        Raises:
            BusTimeout: nobody wrote it within ``timeout`` seconds.
        """
        key = self.key(name)
        written = threading.Event()
        sub = self.session.declare_subscriber(key, on_zenoh_thread(lambda _sample: written.set()))
        deadline = time.monotonic() + timeout
        try:
            # Ask too: the value may have been written before the subscriber existed. A writer that answers the query
            # has had the subscriber's declaration first (the same link, in order), so a later value reaches it.
            self.settle()
            replies = self.query(key, timeout=max(deadline - time.monotonic(), 0.001))
            if written.is_set() or any(reply.ok is not None for reply in replies):
                return
            with self.executor.blocking():
                if not written.wait(max(deadline - time.monotonic(), 0.0)):
                    raise BusTimeout(f"nobody wrote {name} within {timeout:g} s")
        finally:
            with contextlib.suppress(Exception):
                sub.undeclare()  # type: ignore[no-untyped-call]

    def _defer(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` off the Zenoh thread that called (on the executor)."""
        self.executor.submit(fn, *args)

    def release(self, thing: Any) -> None:
        """Close one reader, writer, subscription, service or token created on this bus, before the bus closes."""
        with self._lock:
            if thing in self._owned:
                self._owned.remove(thing)
            if isinstance(thing, _Receiver):
                self._by_name = None
        _close_entity(thing)

    def close(self) -> None:
        """Close everything created on this bus, then the session (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            owned, self._owned = self._owned, []
        for thing in reversed(owned):
            _close_entity(thing)
        if self.gate is not None:
            self.gate.close()
        if self._batcher is not None:
            self._batcher.close()
        self.executor.close()
        with contextlib.suppress(Exception):
            self.session.close()  # type: ignore[no-untyped-call]
        unregister_session(self._registered)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_entity(thing: Any) -> None:
    closer = getattr(thing, "close", None) or getattr(thing, "undeclare", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            closer()


@contextlib.contextmanager
def open_bus(config: BusConfig | None = None) -> Iterator[Bus]:
    """Open a bus for the duration of a ``with`` block."""
    bus = Bus(config)
    try:
        yield bus
    finally:
        bus.close()
