"""Lock-step delivery: what a process needs so that a simulation run gives the same messages whatever the load.

Strategy: the simulator (the coordinator, in ``pluto.sim.lockstep``) advances time one tick at a time. Every module
that follows simulated time is a *member*: for each tick it runs the steps that are due, then acknowledges the tick
with the writes it made since its last acknowledgement (interface, writer id, sequence number). The next tick
carries all those writes as its *frontier*. A process that hosts members does two things with it, here:

1. it holds back every value written by a lock-stepped writer until a tick's frontier covers it, so a member never
   sees a value that another member wrote during the same tick (which would depend on who ran first), and
2. before its members step, it waits until every value the frontier names has arrived and every callback it feeds
   has returned, so a member never misses a value that was written before the tick (which would depend on delivery).

So each step sees exactly the values written before its tick, however the processes are scheduled. Writers say in
each sample's attachment whether they are lock-stepped (their process hosts a member); values of other writers (a
real sensor, a command line tool) pass at once. A value that the frontier never covers (its writer's process lost
its members) is let through after a few ticks; a frontier value that never arrives (dropped by the network) is
waited for a bounded time, then counted and logged. Both break repeatability only in that rare event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import zenoh

if TYPE_CHECKING:
    from pluto.bus.session import Bus, _Receiver

log = logging.getLogger("pluto.lockstep")

WriteMark = tuple[str, int, int]
"""A write: interface name, writer id, the writer's sequence number."""

TICK_KEY = "@lockstep/tick"
ACK_KEY = "@lockstep/ack"
MEMBER_KEY = "@lockstep/member"


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


class LockstepAck(msgspec.Struct, array_like=True, frozen=True):
    """A member has finished a tick (member -> coordinator).

    Attributes:
        member: the module's name.
        run, number: the tick acknowledged.
        next_due: simulated time of its next step, s (``inf`` if none is scheduled).
        writes: the writes its process made since its previous acknowledgement.
    """

    member: str
    run: int
    number: int
    next_due: float
    writes: list[WriteMark] = []


HOLD_TICKS = 3
"""Ticks after which a held value that no frontier covered is let through anyway."""
FRONTIER_WAIT = 5.0
"""Wall seconds to wait for a frontier value before going on without it (a dropped sample)."""
FRONTIER_WAIT_JOINING = 0.25
"""The same wait during the first second after a member joins: its subscriptions may not be known to every writer
yet, so a value written just then may never come."""


class LockstepGate:
    """The lock-step state of one process's bus: the frontier, the values held back, the ticks, the members.

    Created by :meth:`Bus.lockstep`; a module's clock uses it through :class:`pluto.runtime.clock.SimClock`.
    """

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._cond = threading.Condition()
        self._members = 0
        self._joined_at = 0.0
        self._frontier: dict[int, int] = {}  # writer id -> highest sequence number released
        self._held: dict[_Receiver[Any], list[tuple[int, int, int, Any]]] = {}  # wid, seq, tick, value
        self._writes: dict[tuple[str, int], int] = {}
        self._writes_lock = threading.Lock()
        self._latest: LockstepTick | None = None
        self._serial = 0  # ticks received (a repeated tick counts again: its members acknowledge it again)
        self._ready: tuple[int, int] | None = None  # (run, number) of the tick whose frontier is delivered
        self._process_lock = threading.Lock()
        self.late_values = 0
        """Frontier values that did not arrive in time (the run may not repeat exactly)."""
        self.forced_releases = 0
        """Held values that no frontier covered within :data:`HOLD_TICKS` ticks."""
        self._tick_sub = bus.session.declare_subscriber(bus.key_raw(TICK_KEY), self._on_tick)
        self._ack_pub = bus.session.declare_publisher(
            bus.key_raw(ACK_KEY), congestion_control=zenoh.CongestionControl.BLOCK, express=True
        )

    # -- writes ---------------------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Members run on this bus: its writes are lock-stepped and its reads gated."""
        return self._members > 0

    def note_write(self, name: str, writer_id: int, seq: int) -> None:
        """Record a lock-stepped write (called by the writer after it published)."""
        with self._writes_lock:
            self._writes[(name, writer_id)] = seq

    def take_writes(self) -> list[WriteMark]:
        """The writes made since the last call (for an acknowledgement)."""
        with self._writes_lock:
            writes, self._writes = self._writes, {}
        return [(name, wid, seq) for (name, wid), seq in writes.items()]

    # -- reads --------------------------------------------------------------------------------------------------

    def admit(self, receiver: _Receiver[Any], value: Any, writer_id: int, seq: int, gated: bool) -> bool:
        """Whether a value that just arrived may be delivered now; if not, it is held until a frontier covers it."""
        with self._cond:
            if writer_id:
                seen = receiver.seen
                if seq > seen.get(writer_id, 0):
                    seen[writer_id] = seq
                self._cond.notify_all()
            if not gated or not self.active or seq <= self._frontier.get(writer_id, 0):
                return True
            tick = self._latest.number if self._latest is not None else 0
            self._held.setdefault(receiver, []).append((writer_id, seq, tick, value))
            return False

    def forget(self, receiver: _Receiver[Any]) -> None:
        """Drop what is held for a receiver that closes."""
        with self._cond:
            self._held.pop(receiver, None)

    def _release(self, everything: bool = False) -> list[tuple[_Receiver[Any], Any]]:
        """Take the held values that the frontier now covers (all of them with ``everything``); lock held."""
        out: list[tuple[_Receiver[Any], Any]] = []
        tick = self._latest.number if self._latest is not None else 0
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
        with self._cond:
            latest = self._latest
            if latest is not None and tick.run == latest.run and tick.number < latest.number:
                return  # an old tick repeated
            self._latest = tick
            self._serial += 1
            self._cond.notify_all()

    @property
    def latest(self) -> LockstepTick | None:
        """The newest tick heard of (its frontier may not be delivered yet)."""
        return self._latest

    def wait_tick(self, after: int, stop: threading.Event, timeout: float = 0.5) -> tuple[int, LockstepTick | None]:
        """Wait for a tick message received after the ``after``-th one, make its frontier visible here, and return
        ``(serial, tick)``: pass ``serial`` as ``after`` next time. A tick may come twice (the coordinator repeats
        it when a member joins or an acknowledgement is late): the caller then acknowledges it again.

        Returns ``(after, None)`` if ``stop`` is set or no tick came within ``timeout`` wall seconds.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._serial == after or self._latest is None:
                left = deadline - time.monotonic()
                if stop.is_set() or left <= 0:
                    return after, None
                self._cond.wait(min(left, 0.1))
            serial, tick = self._serial, self._latest
        self._deliver(tick)
        return serial, tick

    def _deliver(self, tick: LockstepTick) -> None:
        """Make the tick's frontier visible here, once per tick for all the members of this bus."""
        with self._process_lock:
            if self._ready == (tick.run, tick.number):
                return
            with self._cond:
                run_changed = self._ready is not None and self._ready[0] != tick.run
                if run_changed:
                    self._frontier.clear()
                for _name, wid, seq in tick.frontier:
                    if seq > self._frontier.get(wid, 0):
                        self._frontier[wid] = seq
                released = self._release(everything=run_changed)
            for receiver, value in released:
                receiver._take(value)
            self._wait_frontier(tick.frontier)
            self._ready = (tick.run, tick.number)

    def _wait_frontier(self, frontier: list[WriteMark]) -> None:
        """Wait until the local receivers got the frontier's values and their callbacks returned."""
        receivers = self._bus.receivers()
        by_name: dict[str, list[_Receiver[Any]]] = {}
        for receiver in receivers:
            by_name.setdefault(receiver.name, []).append(receiver)
        wanted = [(r, wid, seq) for name, wid, seq in frontier for r in by_name.get(name, ())]
        joining = time.monotonic() - self._joined_at < 1.0
        deadline = time.monotonic() + (FRONTIER_WAIT_JOINING if joining else FRONTIER_WAIT)
        with self._cond:
            for receiver, wid, seq in wanted:
                while receiver.seen.get(wid, 0) < seq:
                    left = deadline - time.monotonic()
                    if left <= 0 or receiver.closed:
                        self.late_values += 1
                        if not joining:
                            log.warning(
                                "lock-step: %s value %d of writer %x did not arrive in time; going on without it",
                                receiver.name,
                                seq,
                                wid,
                            )
                        break
                    self._cond.wait(left)
        for receiver in receivers:
            receiver.wait_idle(max(0.0, deadline - time.monotonic()))

    def notify(self) -> None:
        """Wake waiters (a subscription's callback finished)."""
        with self._cond:
            self._cond.notify_all()

    # -- members ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def member(self, name: str) -> Iterator[Member]:
        """Take part in the lock-step as module ``name`` for the duration of the block."""
        with self._cond:
            self._members += 1
            self._joined_at = time.monotonic()
        token = self._bus.session.liveliness().declare_token(self._bus.key_raw(f"{MEMBER_KEY}/{name}"))
        try:
            yield Member(self, name)
        finally:
            with contextlib.suppress(Exception):
                token.undeclare()  # type: ignore[no-untyped-call]
            with self._cond:
                self._members -= 1
                released = self._release(everything=True) if self._members == 0 else []
            for receiver, value in released:
                receiver._take(value)

    def _send_ack(self, payload: bytes) -> None:
        self._ack_pub.put(payload)

    def close(self) -> None:
        for entity in (self._tick_sub, self._ack_pub):
            with contextlib.suppress(Exception):
                entity.undeclare()  # type: ignore[no-untyped-call]


class Member:
    """One module's part in the lock-step: acknowledges the ticks it has finished."""

    def __init__(self, gate: LockstepGate, name: str) -> None:
        self.name = name
        self._gate = gate
        self._last: tuple[int, int] | None = None
        self._payload = b""

    def done(self, tick: LockstepTick) -> bool:
        """Whether this member has already acknowledged ``tick`` (it came again)."""
        return self._last == (tick.run, tick.number)

    def ack(self, tick: LockstepTick, next_due: float) -> None:
        """Acknowledge ``tick``: its steps are done, the next is due at ``next_due`` (s, ``inf`` if none);
        acknowledging the same tick again repeats the first acknowledgement."""
        if not self.done(tick):
            message = LockstepAck(self.name, tick.run, tick.number, next_due, self._gate.take_writes())
            self._payload = msgspec.msgpack.encode(message)
            self._last = (tick.run, tick.number)
        self._gate._send_ack(self._payload)
