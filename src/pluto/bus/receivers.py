"""Reading an interface: readers that keep the newest value, subscriptions that call a function with each one, and
the one Zenoh subscriber per interface they share.

Strategy: a process has one Zenoh subscriber per interface and type (:class:`_Tap`), however many readers and
subscriptions it holds: a sample's mark (:mod:`pluto.bus.wire`) is parsed and its payload decoded once, in place on
Zenoh's thread (or on the writer's, for a writer of the same session that delivers locally: :class:`LocalDelivery`),
and handed to each receiver. A receiver counts it, asks the lock-step gate (when one runs,
:mod:`pluto.bus.lockstep`) whether it may pass now or is held until a tick's frontier covers it, and lets it
through: a :class:`StateReader` stores it and wakes its waiting threads as the last thing; a :class:`Subscription`
queues it and hands its strand to the bus's executor, so a slow callback never stalls Zenoh and only skips to the
newest value. A receiver that joins late asks the writers for the current value (every writer answers, the newest
write wins), never for a command; a command reader forgets a command older than its ``max_age`` by its own clock
(docs/design.md, principle 5).
"""

from __future__ import annotations

import abc
import contextlib
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import zenoh

from pluto import msgs, names
from pluto.bus.config import check_robot_name
from pluto.bus.counters import _DropCounter, _Meter
from pluto.bus.executor import ZENOH_THREAD, Executor, Strand, keep_thread_state, on_zenoh_thread
from pluto.bus.lockstep import LockstepGate
from pluto.bus.wire import _ATTACHMENT, _NO_MARK, BATCH, COMMAND, LOCKSTEPPED, write_mark
from pluto.bus.zenoh_setup import matching, zenoh_reason
from pluto.errors import BusError, BusTimeout, DecodeError

log = logging.getLogger("pluto.bus")

M = TypeVar("M", bound=msgs.Message)


class ReaderBus(Protocol):
    """What readers and subscriptions use of the bus they read on (:class:`pluto.bus.session.Bus`)."""

    @property
    def session(self) -> zenoh.Session: ...

    @property
    def robot(self) -> str: ...

    @property
    def drops(self) -> _DropCounter: ...

    @property
    def gate(self) -> LockstepGate | None: ...

    @property
    def executor(self) -> Executor: ...

    def key(self, name: str, robot: str | None = None) -> str: ...

    def settle(self) -> None: ...

    def query(
        self,
        selector: str,
        *,
        timeout: float,
        payload: bytes | None = None,
        consolidation: zenoh.ConsolidationMode | None = None,
    ) -> Iterator[zenoh.Reply]: ...

    def _attach(self, receiver: _Receiver[Any]) -> None: ...

    def _detach(self, receiver: _Receiver[Any]) -> None: ...


class _Receiver(abc.ABC, Generic[M]):
    """Decodes samples of one interface on the Zenoh thread and passes good ones to ``deliver``.

    It reads the interface of the bus's robot, or of another robot named by ``robot`` (``pluto/<robot>/<name>``):
    ``key`` is the one it reads."""

    def __init__(
        self,
        bus: ReaderBus,
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
        self._late: _LateQuery | None = None  # a second query for the current value, waiting for a writer

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

    def take_current(self, timeout: float) -> None:
        """Ask the writers for the current value and take the newest good one (none for a command), unless a live
        one came meanwhile (:meth:`_take_late`).

        When none answers, the receiver asks once more as soon as a writer of its interface becomes known to this
        session (:meth:`_ask_again_when_a_writer_comes`), and takes the value it gets then."""
        if self.max_age is not None:
            return
        found = self._query_current(timeout)
        if found is None:
            self._ask_again_when_a_writer_comes(timeout)
        else:
            self._take_late(*found)

    def _query_current(self, timeout: float) -> tuple[M, tuple[int, int]] | None:
        """The newest value the writers answer a query with, and its writer's id and sequence number; or None."""
        best: tuple[float, M, tuple[int, int]] | None = None
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
                best = (written, value, (wid, seq))
        if best is None:
            return None
        self.last_write_time = best[0]
        return best[1], best[2]

    def _ask_again_when_a_writer_comes(self, timeout: float) -> None:
        """The query for the current value found none: ask again once a writer of this interface is known here.

        A writer in a session that joined just before this receiver's query may not be known to this session yet
        (its declarations are on their way), and a value it wrote before it heard of this receiver's subscriber
        went to nobody here: without a second query, a value written once would never arrive. So a Zenoh querier
        on the key watches for the writers' queryables (its matching status); when one is known (or already is),
        the query goes again, once, from a thread of its own, and the querier goes. Not in a process whose modules
        follow the lock-step, where values go with the ticks (:mod:`pluto.bus.lockstep`)."""
        gate = self._bus.gate
        if self.closed or (gate is not None and gate.active):
            return
        try:
            querier = self._bus.session.declare_querier(self.key)
        except zenoh.ZError:
            return  # the session is closing
        late = _LateQuery(self, querier, timeout)
        self._late = late
        try:
            late.listen(querier.declare_matching_listener(on_zenoh_thread(late.on_matching)))
            if matching(querier.matching_status):
                late.start()
        except zenoh.ZError:
            late.close()

    def _take_late(self, value: M, mark: tuple[int, int]) -> None:
        """The current value a query found (at once, or a second query: :meth:`_ask_again_when_a_writer_comes`), with
        its writer's id and sequence number, unless a live one came meanwhile."""

    def _close_late(self) -> None:
        late, self._late = self._late, None
        if late is not None:
            late.close()


class _LateQuery:
    """A receiver's second query for the current value, once a writer is known (see
    :meth:`_Receiver._ask_again_when_a_writer_comes`)."""

    def __init__(self, receiver: _Receiver[Any], querier: Any, timeout: float) -> None:
        self.receiver = receiver
        self.querier = querier
        self.listener: Any = None
        self.timeout = timeout
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

    def listen(self, listener: Any) -> None:
        """Keep the matching listener (undeclared at once if the query is over already)."""
        with self._lock:
            self.listener = listener
            over = self._closed
        if over:
            with contextlib.suppress(Exception):
                listener.undeclare()

    def on_matching(self, status: Any) -> None:
        if status.matching:
            self.start()

    def start(self) -> None:
        """Query again, once, from a thread of its own (not on Zenoh's, which the replies need)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        threading.Thread(target=self._run, name="pluto-late-query", daemon=True).start()

    def _run(self) -> None:
        receiver = self.receiver
        try:
            found = receiver._query_current(self.timeout)
        except Exception as err:  # the bus closed meanwhile, most likely: nothing to take
            log.debug("the second query for %s failed: %s", receiver.name, err)
            found = None
        finally:
            self.close()
        gate = receiver._bus.gate
        if found is None or receiver.closed or (gate is not None and gate.active):
            return  # in lock-step the values go with the ticks
        receiver._take_late(*found)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listener = self.listener
        for entity in (listener, self.querier):
            if entity is not None:
                with contextlib.suppress(Exception):  # gone with the session
                    entity.undeclare()


class _Tap:
    """The one Zenoh subscriber of an interface in a process: a sample is decoded once and handed to every reader
    and subscription of that interface (and type) on the bus, however many there are.

    On a session that delivers locally (:attr:`LocalDelivery.active`, a fleet's), a
    :class:`~pluto.bus.writer.StateWriter` of the same session puts its values to other sessions only and hands them
    to the taps of its key itself (:class:`LocalDelivery`, :meth:`deliver`), on its own thread, with no trip
    through Zenoh's threads; the subscriber hears the rest (other sessions, and any raw put of this one)."""

    def __init__(self, bus: ReaderBus, key: str, cls: type[Any]) -> None:
        self.key = (key, cls)
        self.type = cls
        self.receivers: tuple[_Receiver[Any], ...] = ()
        self._bus = bus
        self._subscriber = bus.session.declare_subscriber(key, on_zenoh_thread(self._on_sample, keeps_state=True))

    def _on_sample(self, sample: zenoh.Sample) -> None:
        if not hasattr(ZENOH_THREAD, "kept"):
            keep_thread_state()
        if not self.receivers:
            return
        attachment = sample.attachment
        if attachment is None:
            mark = _NO_MARK
        else:
            raw = attachment.to_bytes()
            mark = _ATTACHMENT.unpack(raw) if len(raw) == _ATTACHMENT.size else write_mark(attachment)
        self.deliver(sample.payload.to_bytes(), mark)

    def deliver(self, payload: bytes, mark: tuple[float, int, int, int]) -> None:
        """Decode a sample's payload once and hand it to every receiver (from Zenoh, or from a writer of this
        session)."""
        receivers = self.receivers
        if not receivers:
            return
        try:
            if mark[3] & BATCH:
                values = msgs.decode_many(payload, self.type)
                for receiver in receivers:
                    if not receiver.closed:
                        receiver._admit(values, mark)
                return
            value = msgs.decode(payload, self.type)
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


class LocalSample:
    """A value a writer hands to a listener of its own session (:meth:`LocalDelivery.listen`), shaped as the Zenoh
    sample the listener gets from other sessions: ``key_expr``, ``payload`` and ``attachment`` (with ``to_bytes``),
    ``kind``."""

    __slots__ = ("attachment", "key_expr", "payload")
    kind = zenoh.SampleKind.PUT

    def __init__(self, key: str, payload: bytes, mark: tuple[float, int, int, int]) -> None:
        self.key_expr = key
        self.payload = zenoh.ZBytes(payload)
        self.attachment = zenoh.ZBytes(_ATTACHMENT.pack(*mark))


class _Listener:
    """A callback of :meth:`LocalDelivery.listen` on a key expression."""

    def __init__(self, expr: str, callback: Callable[[Any], Any]) -> None:
        self.expr = zenoh.KeyExpr(expr)
        self.callback = callback

    def matches(self, key: str) -> bool:
        return bool(self.expr.intersects(zenoh.KeyExpr(key)))


class _ListenerOfKey:
    """A listener as a writer of one key calls it."""

    __slots__ = ("callback", "key")

    def __init__(self, key: str, callback: Callable[[Any], Any]) -> None:
        self.key = key
        self.callback = callback

    def deliver(self, payload: bytes, mark: tuple[float, int, int, int]) -> None:
        self.callback(LocalSample(self.key, payload, mark))


class _Target(Protocol):
    def deliver(self, payload: bytes, mark: tuple[float, int, int, int]) -> None: ...


class LocalDelivery:
    """What a writer hands its values to itself: the taps of each key on its session, and the listeners of key
    expressions there (:meth:`listen`).

    Zenoh delivers a value to a subscriber of the writer's own session on one of its threads, which must take the
    interpreter's lock from the thread that wrote: a hand-over per value and reader, costly when a process hosts many
    modules (tens of microseconds of CPU and up to a scheduling slice of waiting each, and the ``put`` itself lets go
    of the lock). So on a session that delivers locally (:attr:`active`: a fleet's, whose robots share it), a writer's
    publisher reaches other sessions only, and the writer calls the taps and listeners of its key here, in the order
    it writes; a writer whose key nobody reads in another session does not call Zenoh at all
    (:class:`~pluto.bus.writer.StateWriter`). :meth:`targets` is read without a lock: a key's entry is a tuple, made
    once until the taps or listeners change.
    """

    def __init__(self, active: bool = False) -> None:
        self.active = active
        """Writers of the session hand their values over here (a fleet's shared session); else Zenoh delivers them
        within the session too, as to any other session."""
        self._lock = threading.Lock()
        self._taps: dict[str, tuple[_Tap, ...]] = {}
        self._listeners: tuple[_Listener, ...] = ()
        self._by_key: dict[str, tuple[_Target, ...]] = {}

    def targets(self, key: str) -> tuple[_Target, ...]:
        """Those a value of ``key`` goes to."""
        found = self._by_key.get(key)
        if found is None:
            with self._lock:
                listeners = [_ListenerOfKey(key, entry.callback) for entry in self._listeners if entry.matches(key)]
                found = self._by_key[key] = (*self._taps.get(key, ()), *listeners)
        return found

    def add(self, key: str, tap: _Tap) -> None:
        with self._lock:
            self._taps[key] = (*self._taps.get(key, ()), tap)
            self._by_key = {}

    def remove(self, key: str, tap: _Tap) -> None:
        with self._lock:
            taps = tuple(t for t in self._taps.get(key, ()) if t is not tap)
            if taps:
                self._taps[key] = taps
            else:
                self._taps.pop(key, None)
            self._by_key = {}

    def listen(self, expr: str, callback: Callable[[Any], Any]) -> _Listener:
        """Call ``callback`` with a :class:`LocalSample` of each value a writer of this session writes on a key of
        ``expr``; stop with :meth:`unlisten`."""
        listener = _Listener(expr, callback)
        with self._lock:
            self._listeners = (*self._listeners, listener)
            self._by_key = {}
        return listener

    def unlisten(self, listener: _Listener) -> None:
        with self._lock:
            self._listeners = tuple(entry for entry in self._listeners if entry is not listener)
            self._by_key = {}


class Listening:
    """A subscriber of a key expression on a session (:meth:`pluto.bus.session.Bus.declare_subscriber`): Zenoh's for
    other sessions, and a listener of the writers of its own (:class:`LocalDelivery`)."""

    def __init__(self, local: LocalDelivery, subscriber: Any, listener: _Listener | None) -> None:
        self._local = local
        self._subscriber = subscriber
        self._listener = listener

    def undeclare(self) -> None:
        if self._listener is not None:
            self._local.unlisten(self._listener)
        with contextlib.suppress(Exception):
            self._subscriber.undeclare()

    close = undeclare


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
        bus: ReaderBus,
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
        self.take_current(fetch_timeout)

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

    def _take_late(self, value: M, mark: tuple[int, int]) -> None:
        with self._lock:
            waiters = self._set(value) if self._value is None else []  # a live sample is newer
        for waiter in waiters:
            waiter.put(True)

    def close(self) -> None:
        """Stop receiving (idempotent)."""
        self.closed = True
        self._close_late()
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
        bus: ReaderBus,
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
        self._fetched: tuple[int, int] | None = None  # writer id and sequence number of the value a query gave
        self.delivered = 0
        self._closed = False
        self._strand = Strand(bus.executor, self._drain)
        bus._attach(self)
        if current and not self.is_command:
            self.take_current(3.0)

    @property
    def overflowed(self) -> int:
        """Values that a slow callback never saw (newer ones replaced them)."""
        return max(0, self.received - self.delivered - len(self._pending))

    def _admit_one(self, value: M, mark: tuple[float, int, int, int]) -> None:
        # The hot path: _Receiver._admit_one and _take in one when no lock-step runs.
        if self._fetched is not None:
            # the value a query gave may come live as well (written once its writer knew the subscriber): once
            fetched, self._fetched = self._fetched, None
            if fetched == (mark[2], mark[1]):
                self._note_one(mark[0], mark[2])
                return
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

    def _take_late(self, value: M, mark: tuple[int, int]) -> None:
        if not self.received:  # a live value is newer
            self._fetched = mark  # it may come live too: once is enough
            self._pending.append((value, 0.0))
            self._strand.schedule()

    def close(self) -> None:
        """Stop receiving (idempotent); waits for a callback in progress, unless called from that callback."""
        self._closed = True
        self.closed = True
        self._close_late()
        self._bus._detach(self)
        if self._bus.gate is not None:
            self._bus.gate.forget(self)
        self._strand.close()
