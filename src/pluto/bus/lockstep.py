"""Lock-step delivery: what a process needs so that a simulation run gives the same messages whatever the load.

Strategy: the simulator (the coordinator, in ``pluto.sim.lockstep``) advances time one tick at a time. Every module
that follows simulated time is a *member*: for each tick it runs the steps that are due, then acknowledges the tick
with the writes it made since its last acknowledgement (interface, writer id, sequence number). The next tick
carries all those writes as its *frontier*. A process that hosts members does two things with it, here:

1. it holds back every value written by a lock-stepped writer until a tick's frontier covers it, so a member never
   sees a value that another member wrote during the same tick (which would depend on who ran first), and
2. before its members step, it waits until every value the frontier names has arrived and every callback it feeds
   has returned, so a member never misses a value that was written before the tick (which would depend on delivery).

So each step sees exactly the values written before its tick, however the processes are scheduled. A tick goes only
to the processes with a member due at its time (on a key of each process's own, :func:`process_tick_key`), with the
writes of the ticks that process was not sent; ticks while time is held, and ticks sent again, go to all. The
members of one process are stepped by one thread of the gate, one after the other in the order of their names (as
rclpy's single-threaded executor), and acknowledged together. When the coordinator runs on the same bus (the
simulator in the members' process), tick and acknowledgement skip Zenoh: the coordinator hands each tick to the gate
(:meth:`LockstepGate.take_tick`) and the gate hands its acknowledgement to the coordinator
(:attr:`Bus.lockstep_coordinator`), which sends the next tick from that call when every member has answered; so a
tick of a simulation in one process costs no message, no decoding and no hand-over between threads; a tick that the
coordinator hands to the gates of several buses (a robot each) has its frontier sorted by key once for all of them
(:class:`Frontier`), and each gate looks only at the keys its receivers read. Writers say in each sample's
attachment whether they are lock-stepped (their process hosts a member); values of other writers (a real sensor, a
command line tool) pass at once. A value that the frontier never covers (its writer's process lost its members) is
let through after a few ticks; a frontier value that never arrives (dropped by the network) is waited for a bounded
time, then counted and logged. Both break repeatability only in that rare event.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
import zenoh

from pluto.bus.executor import Strand, on_zenoh_thread

log = logging.getLogger("pluto.lockstep")

WriteMark = tuple[str, int, int]
"""A write: the interface's key (``pluto/<robot>/<name>``: the robots of one simulation share one lock-step), writer
id, the writer's sequence number."""

NewestWrites = dict[tuple[str, int], int]
"""(key, writer id) -> the writer's newest sequence number on that key: writes gathered over several answers or
ticks (:func:`keep_newest`, :func:`marks_of`)."""


def keep_newest(newest: NewestWrites, marks: Iterable[WriteMark]) -> None:
    """Add ``marks`` to ``newest``, keeping each writer's highest sequence number on each key."""
    for key, wid, seq in marks:
        if seq > newest.get((key, wid), 0):
            newest[(key, wid)] = seq


def marks_of(newest: NewestWrites) -> list[WriteMark]:
    """The writes of ``newest`` as a frontier's or an acknowledgement's list."""
    return [(key, wid, seq) for (key, wid), seq in newest.items()]


TICK_KEY = "@lockstep/tick"
ACK_KEY = "@lockstep/ack"
MEMBER_KEY = "@lockstep/member"


def process_tick_key(process: str) -> str:
    """The key suffix of the ticks sent to one process only (those at which one of its members is due)."""
    return f"{TICK_KEY}/{process}"


class LockstepTick(msgspec.Struct, array_like=True, frozen=True):
    """One tick of a lock-stepped simulation (coordinator -> members).

    Attributes:
        run: id of the simulation run (a new id: the clock restarted).
        number: tick number, from 0 in each run.
        stamp: simulated time of the tick, s.
        frontier: the writes made during the previous tick, which members must see before they step.
        paused: time is held (ticks keep coming at the same stamp while modules start).
    """

    run: int
    number: int
    stamp: float
    frontier: list[WriteMark] = []
    paused: bool = False


TickHandler = Callable[[LockstepTick], float]
"""A member's part in the lock-step: runs its steps due by the tick, returns when its next step is due (s)."""


class LockstepAck(msgspec.Struct, array_like=True, frozen=True):
    """The members of one process have finished a tick (process -> coordinator).

    Attributes:
        run, number: the tick acknowledged.
        members: each member's name and the simulated time of its next step, s (``inf`` if none is scheduled).
        writes: the writes the process made since its previous acknowledgement.
    """

    run: int
    number: int
    members: list[tuple[str, float]]
    writes: list[WriteMark] = []
    process: str = ""
    """The answering process's id (its Zenoh session's), to which the coordinator sends the ticks at which one of
    its members is due (:func:`process_tick_key`); empty for an answer handed over by a call."""


class GatedReceiver(Protocol):
    """What the gate uses of a reader or subscription (:mod:`pluto.bus.receivers`): the values it saw of each
    writer, and the way to let a held value through."""

    name: str
    closed: bool
    seen: dict[int, int]
    """writer id -> newest sequence number received (the gate updates it as values arrive)."""

    def _take(self, value: Any) -> None: ...

    def wait_idle(self, timeout: float) -> bool: ...


class DropCounter(Protocol):
    """Where the gate counts an undecodable tick (the bus's counter of dropped messages)."""

    def drop(self, name: str, err: Exception) -> None: ...


class LockstepBus(Protocol):
    """What the gate uses of the bus it belongs to (:class:`pluto.bus.session.Bus`): the gate depends on this, not
    on the bus's module, which creates the gate (:meth:`Bus.lockstep`) and hands it its values."""

    @property
    def session(self) -> zenoh.Session: ...

    @property
    def drops(self) -> DropCounter: ...

    @property
    def closed(self) -> bool: ...

    @property
    def lockstep_coordinator(self) -> Callable[[LockstepAck], None] | None: ...

    def key_raw(self, suffix: str) -> str: ...

    def receivers_by_key(self) -> Mapping[str, Sequence[GatedReceiver]]: ...


DUE_SLACK = 1e-6
"""s: a step due this close after a tick's time belongs to that tick (rounding of multiples of periods)."""
HOLD_TICKS = 3
"""Deliveries of this process after which a held value that no frontier covered is let through anyway (counted in
the ticks this process handles, not in tick numbers: a process sleeps through the ticks at which nothing of it is
due, and a value written during the tick it handles now must stay held however many ticks it slept through)."""
FRONTIER_WAIT = 5.0
"""Wall seconds to wait for a frontier value before going on without it (a dropped sample)."""


class Frontier:
    """A tick's frontier as a gate uses it: the newest write of each writer, and of each key by writer.

    Made once per tick in a process (:func:`frontier_of`): the coordinator hands the same tick to the gate of every
    bus of its process (a simulation of several robots has one per robot), and each gate reads only the keys its own
    receivers read, instead of going through every robot's writes.
    """

    __slots__ = ("by_key", "writers")

    def __init__(self, marks: Sequence[WriteMark]) -> None:
        writers: dict[int, int] = {}
        by_key: dict[str, dict[int, int]] = {}
        for key, wid, seq in marks:
            if seq > writers.get(wid, 0):
                writers[wid] = seq
            of_key = by_key.get(key)
            if of_key is None:
                by_key[key] = {wid: seq}
            elif seq > of_key.get(wid, 0):
                of_key[wid] = seq
        self.writers = writers
        """writer id -> newest sequence number."""
        self.by_key = by_key
        """key -> writer id -> newest sequence number."""


def _merged(frontiers: Sequence[Frontier]) -> dict[str, dict[int, int]]:
    """The newest write of each key by writer over several frontiers (of the ticks a process slept through)."""
    merged: dict[str, dict[int, int]] = {}
    for frontier in frontiers:
        for key, of_key in frontier.by_key.items():
            into = merged.setdefault(key, {})
            for wid, seq in of_key.items():
                if seq > into.get(wid, 0):
                    into[wid] = seq
    return merged


_EMPTY_FRONTIER = Frontier(())
_last_frontier: tuple[LockstepTick, Frontier] | None = None


def frontier_of(tick: LockstepTick) -> Frontier:
    """The frontier of ``tick``, digested once for every gate of the process that is handed the same tick."""
    global _last_frontier
    if not tick.frontier:
        return _EMPTY_FRONTIER
    last = _last_frontier  # one read: another gate's thread may replace it meanwhile (then both digest it)
    if last is not None and last[0] is tick:
        return last[1]
    frontier = Frontier(tick.frontier)
    _last_frontier = (tick, frontier)
    return frontier


class LockstepGate:
    """The lock-step state of one process's bus: the frontier, the values held back, the ticks, the members.

    Created by :meth:`Bus.lockstep`; a module's clock uses it through :class:`pluto.runtime.clock.SimClock`.
    """

    def __init__(self, bus: LockstepBus) -> None:
        self._bus = bus
        self._cond = threading.Condition()
        self._frontier: dict[int, int] = {}  # writer id -> highest sequence number released
        self._held: dict[GatedReceiver, list[tuple[int, int, int, Any]]] = {}  # wid, seq, tick, value
        self._writes: NewestWrites = {}
        self._writes_lock = threading.Lock()
        self._latest: LockstepTick | None = None
        self.heard_at = -math.inf
        """Monotonic time the newest tick came (a new one or one repeated), s; -inf before the first."""
        self._ticks = threading.Condition()
        self._ready: tuple[int, int] | None = None  # (run, number) of the tick whose frontier is delivered
        self._round = threading.RLock()  # held while the executor steps the members
        self._handlers: dict[str, tuple[TickHandler, Any]] = {}
        self._executor: threading.Thread | None = None
        self._waiting = False  # the executor waits for frontier values to arrive
        self._delivering = False  # the executor delivers a tick: from its new frontier to the last value waited for
        self._pending: list[Frontier] = []  # frontiers not yet delivered here
        self._deliveries = 0  # ticks handled by this process
        self._dues: dict[str, float] = {}  # each local member's next step, s
        self._work = False  # the executor has a tick to handle
        self._deferred: list[Strand] | None = None  # callbacks of released values, run by the executor itself
        self.late_values = 0
        """Frontier values that did not arrive in time (the run may not repeat exactly)."""
        self.forced_releases = 0
        """Held values that no frontier covered within :data:`HOLD_TICKS` deliveries."""
        self.process = str(bus.session.zid())
        """This process's id in the lock-step (its Zenoh session's)."""
        self._tick_subs: list[Any] = [
            bus.session.declare_subscriber(bus.key_raw(key), on_zenoh_thread(self._on_tick))
            for key in (TICK_KEY, process_tick_key(self.process))
        ]
        self._ack_pub = bus.session.declare_publisher(
            bus.key_raw(ACK_KEY), congestion_control=zenoh.CongestionControl.BLOCK, express=True
        )

    # -- writes ---------------------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Members run on this bus: its writes are lock-stepped and its reads gated."""
        return bool(self._handlers)

    def note_write(self, key: str, writer_id: int, seq: int) -> None:
        """Record a lock-stepped write to ``key`` (called by the writer after it published)."""
        with self._writes_lock:
            self._writes[(key, writer_id)] = seq

    def take_writes(self) -> list[WriteMark]:
        """The writes made since the last call (for an acknowledgement)."""
        with self._writes_lock:
            writes, self._writes = self._writes, {}
        return marks_of(writes)

    # -- reads --------------------------------------------------------------------------------------------------

    def admit(self, receiver: GatedReceiver, value: Any, writer_id: int, seq: int, gated: bool) -> bool:
        """Whether a value that just arrived may be delivered now; if not, it is held until a frontier covers it."""
        with self._cond:
            if writer_id:
                seen = receiver.seen
                if seq > seen.get(writer_id, 0):
                    seen[writer_id] = seq
                if self._waiting:
                    self._cond.notify_all()
            if not gated or not self.active:
                return True
            if seq <= self._frontier.get(writer_id, 0) and not self._delivering:
                return True
            # Not covered yet; or covered while the executor delivers a tick, for which it waits for the frontier's
            # values: it takes the value itself then (a subscription's callback runs on it, instead of on a worker
            # it would wait for).
            tick = self._deliveries
            self._held.setdefault(receiver, []).append((writer_id, seq, tick, value))
            return False

    def defer(self, strand: Strand) -> bool:
        """Whether the executor takes the run of ``strand`` (a callback of a value it is releasing) upon itself."""
        deferred = self._deferred
        if deferred is None or threading.current_thread() is not self._executor:
            return False
        deferred.append(strand)
        return True

    def forget(self, receiver: GatedReceiver) -> None:
        """Drop what is held for a receiver that closes."""
        with self._cond:
            self._held.pop(receiver, None)

    def _release(self, everything: bool = False) -> list[tuple[GatedReceiver, Any]]:
        """Take the held values that the frontier now covers (all of them with ``everything``); lock held."""
        out: list[tuple[GatedReceiver, Any]] = []
        tick = self._deliveries
        for receiver, held in list(self._held.items()):
            keep = []
            for item in held:
                wid, seq, held_at, value = item
                if everything or seq <= self._frontier.get(wid, 0):
                    out.append((receiver, value))
                elif tick - held_at >= HOLD_TICKS:
                    self.forced_releases += 1
                    out.append((receiver, value))
                else:
                    keep.append(item)
            if keep:
                self._held[receiver] = keep
            else:
                del self._held[receiver]
        return out

    # -- ticks --------------------------------------------------------------------------------------------------

    def _on_tick(self, sample: Any) -> None:
        try:
            tick = msgspec.msgpack.decode(sample.payload.to_bytes(), type=LockstepTick)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            self._bus.drops.drop(TICK_KEY, err)
            return
        self.take_tick(tick)

    def take_tick(self, tick: LockstepTick) -> None:
        """A tick of the coordinator: from Zenoh, or handed over by a coordinator on this bus (which sends its ticks
        to other processes only)."""
        with self._ticks:
            self.heard_at = time.monotonic()
            latest = self._latest
            if latest is not None and tick.run == latest.run and tick.number < latest.number:
                return  # an old tick repeated
            if latest is not None and tick.run != latest.run:
                self._pending.clear()  # the old run's writes mean nothing to the new one
                self._dues = dict.fromkeys(self._dues, -math.inf)
            if tick.frontier:
                self._pending.append(frontier_of(tick))  # seen at the next tick this process handles
            self._latest = tick
            # Wake the executor only if a member here has a step due (or the tick came again, or a new run): a
            # process whose members are all waiting for a later time sleeps through the tick.
            repeated = latest is not None and (latest.run, latest.number) == (tick.run, tick.number)
            if repeated or any(due <= tick.stamp + DUE_SLACK for due in self._dues.values()):
                self._work = True
                self._ticks.notify_all()

    def _deliver(self, tick: LockstepTick) -> None:
        """Make visible here the writes of every tick up to this one (on the executor thread, before the members
        step): the frontiers of the ticks this process slept through too."""
        if self._ready == (tick.run, tick.number):
            return
        with self._ticks:
            frontiers, self._pending = self._pending, []
        with self._cond:
            self._deliveries += 1
            run_changed = self._ready is not None and self._ready[0] != tick.run
            if run_changed:
                self._frontier.clear()
            for frontier in frontiers:
                # A writer's sequence numbers only grow from one frontier to the next (each acknowledgement of its
                # process names its newest writes, in order), so the newer frontier's number replaces the older.
                self._frontier.update(frontier.writers)
            released = self._release(everything=run_changed)
            self._delivering = True
        self._take_released(released)
        self._wait_frontier(frontiers)
        self._ready = (tick.run, tick.number)

    def _take_released(self, released: list[tuple[GatedReceiver, Any]]) -> None:
        """Let released values through to their receivers, on the executor: their subscriptions' callbacks run here,
        each once, in the order of release."""
        if not released:
            return
        self._deferred = []
        try:
            for receiver, value in released:
                receiver._take(value)
        finally:
            deferred, self._deferred = self._deferred, None
        for strand in dict.fromkeys(deferred):
            strand.run_here()

    def _wait_frontier(self, frontiers: list[Frontier]) -> None:
        """Wait until the local receivers got the frontiers' values and their callbacks returned."""
        by_key = self._bus.receivers_by_key()
        writes = frontiers[0].by_key if len(frontiers) == 1 else _merged(frontiers)
        wanted = [
            (receiver, wid, seq)
            for key in writes.keys() & by_key.keys()  # the keys read here (a set made of the smaller of the two)
            for wid, seq in writes[key].items()
            for receiver in by_key[key]
        ]
        deadline = time.monotonic() + FRONTIER_WAIT
        with self._cond:
            for receiver, wid, seq in wanted:
                while receiver.seen.get(wid, 0) < seq:
                    left = deadline - time.monotonic()
                    if left <= 0 or receiver.closed:
                        self.late_values += 1
                        log.warning(
                            "lock-step: %s value %d of writer %x did not arrive within %g s; going on without it",
                            receiver.name,
                            seq,
                            wid,
                            FRONTIER_WAIT,
                        )
                        break
                    self._waiting = True
                    self._cond.wait(left)
                    self._waiting = False
            late = self._release()  # those that came since the frontier (see admit)
            self._delivering = False
        self._take_released(late)
        for receivers in by_key.values():
            for receiver in receivers:
                receiver.wait_idle(max(0.0, deadline - time.monotonic()))

    # -- members ------------------------------------------------------------------------------------------------

    def register(self, name: str, handler: TickHandler) -> None:
        """Take part in the lock-step as module ``name``: ``handler(tick)`` runs its steps due by the tick and
        returns the time its next step is due (s, ``inf`` if none). Handlers run on the gate's executor thread."""
        token = self._bus.session.liveliness().declare_token(self._bus.key_raw(f"{MEMBER_KEY}/{name}"))
        with self._cond:
            self._handlers[name] = (handler, token)
            if self._executor is None:
                self._executor = threading.Thread(target=self._execute, name="pluto-lockstep", daemon=True)
                self._executor.start()
        with self._ticks:
            self._dues[name] = -math.inf  # a newcomer steps at the first tick it sees
            self._work = True
            self._ticks.notify_all()

    @property
    def latest(self) -> LockstepTick | None:
        """The newest tick this process has heard of (handled or not), or None."""
        with self._ticks:
            return self._latest

    def reschedule(self, name: str) -> None:
        """Offer member ``name`` the next tick whatever it said was its next step's time (its rate changed: it plans
        its steps again from that tick)."""
        with self._ticks:
            if name in self._dues:
                self._dues[name] = -math.inf

    def on_executor(self) -> bool:
        """The calling thread is this process's lock-step executor (a member's step runs on it)."""
        return threading.current_thread() is self._executor

    def unregister(self, name: str) -> None:
        """Leave the lock-step (the handler is not called again once this returns, unless from within it)."""
        # not in the middle of a round (an RLock: a handler may unregister itself)
        with self._round, self._cond:
            entry = self._handlers.pop(name, None)
            released = self._release(everything=True) if not self._handlers else []
            self._dues.pop(name, None)
        if entry is not None:
            with contextlib.suppress(Exception):
                entry[1].undeclare()
        for receiver, value in released:
            receiver._take(value)

    def _execute(self) -> None:
        """The executor: for each tick at which a member here is due, deliver the writes made before it, step the
        members that are due (in the order of their names), acknowledge them."""
        done: dict[str, float] = {}  # members that finished the current tick -> next due
        current: tuple[int, int] | None = None
        while True:
            tick = self._next_work()
            if tick is None:
                return
            with self._round:
                key = (tick.run, tick.number)
                repeated = key == current
                if not repeated:
                    current, done = key, {}
                due = self._due_members(tick, done)
                if due:
                    self._deliver(tick)
                self._step_members(tick, due, done)
                # a repeated tick is acknowledged again (the first acknowledgement may have been lost)
                if (due or (repeated and done)) and not self._acknowledge(tick, done):
                    return

    def _next_work(self) -> LockstepTick | None:
        """Wait until there is a tick to handle, and return the newest; None once the bus is closed."""
        with self._ticks:
            while True:
                while not self._work:
                    if self._bus.closed:
                        return None
                    self._ticks.wait(0.5)
                self._work = False
                if self._latest is not None:
                    return self._latest

    def _due_members(self, tick: LockstepTick, done: dict[str, float]) -> list[tuple[str, TickHandler]]:
        """The members due at ``tick`` that have not handled it yet, with their handlers, in the order of names."""
        with self._cond:
            handlers = sorted(self._handlers.items())
        return [(n, h) for n, (h, _t) in handlers if n not in done and self._dues.get(n, 0.0) <= tick.stamp + DUE_SLACK]

    def _step_members(self, tick: LockstepTick, due: list[tuple[str, TickHandler]], done: dict[str, float]) -> None:
        """Run the due members' steps, one after the other, and note when each is due next (in ``done`` too)."""
        for name, handler in due:
            try:
                done[name] = handler(tick)
            except Exception:
                log.exception("lock-step member %s failed to handle a tick", name)
                done[name] = math.inf
            with self._ticks:
                if name in self._dues:
                    self._dues[name] = done[name]

    def _acknowledge(self, tick: LockstepTick, done: dict[str, float]) -> bool:
        """Tell the coordinator that the members here finished ``tick``; False if the bus closed meanwhile (nobody
        waits for the answer: the executor stops)."""
        members = [(name, next_due) for name, next_due in done.items() if name in self._handlers]
        coordinator = self._bus.lockstep_coordinator
        process = "" if coordinator is not None else self.process
        message = LockstepAck(tick.run, tick.number, members, self.take_writes(), process)
        if coordinator is not None:
            # on this bus: the coordinator takes it here, and may send the next tick from this call
            try:
                coordinator(message)
            except Exception:
                log.exception("lock-step: the coordinator failed to take tick %d's answer", tick.number)
            return True
        try:
            self._ack_pub.put(msgspec.msgpack.encode(message))
        except zenoh.ZError:
            if self._bus.closed:
                return False  # the bus closed while this tick was handled: nobody waits for the answer
            log.exception("lock-step: acknowledging tick %d failed", tick.number)
        return True

    def close(self) -> None:
        for entity in (*self._tick_subs, self._ack_pub):
            with contextlib.suppress(Exception):
                entity.undeclare()
        with self._ticks:
            self._ticks.notify_all()
        executor = self._executor
        if executor is not None and executor is not threading.current_thread():
            executor.join(timeout=2.0)
