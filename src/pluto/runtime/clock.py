"""Time for modules: the wall clock, or the simulated time of a simulator or a log replay.

Every timestamp and timeout inside a module comes from its Clock, so a simulator or a replay that publishes a
faster-than-real-time ``Clock`` makes every module follow it. With a lock-stepped simulator (``pluto sim
--lockstep``) a module's steps are driven by the simulator's ticks instead (see :mod:`pluto.bus.lockstep`): time
then advances only when every module has finished its step.

Simulated time can jump back: a new simulation starts, or a replay starts again. The clock then takes the new time
at once (it never waits for the old run's time to come back), logs one line, and calls the jump callbacks, with which
modules, proxies and gateways reset what depends on time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import BusError

log = logging.getLogger("pluto.clock")

JumpCallback = Callable[[float, float], Any]
"""Called with (old time, new time) when the clock jumps back."""


class Clock(Protocol):
    """What a module needs of time."""

    def now(self) -> float:
        """Current time, s."""
        ...

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        """Wait until time ``t``, until ``stop`` is set, or until the clock jumps back (a simulated clock: or turns
        out to follow a lock-stepped simulator); True if stopped."""
        ...

    def create_jump_callback(self, callback: JumpCallback) -> None:
        """Call ``callback(old, new)`` when the clock jumps back (rclpy's jump callbacks)."""
        ...


class OldRun:
    """After simulated time jumps back, tells the values of the old run (stamped ahead of the new time, which has not
    reached the old run's end yet) from the new run's.

    Args:
        slack: s; a value stamped more than this ahead of the clock is the old run's.
    """

    def __init__(self, slack: float = 0.5) -> None:
        self.slack = slack
        self.end: float | None = None

    def jumped(self, old: float, now: float) -> None:
        """The time went back from ``old`` to ``now`` (s)."""
        self.end = max(old, self.end if self.end is not None else -math.inf) if now < old else None

    def holds(self, stamp: float, now: float) -> bool:
        """``stamp`` (s) belongs to the old run, at time ``now``."""
        if self.end is None:
            return False
        if now >= self.end:
            self.end = None  # the new run has caught up: stamps mean the same again
            return False
        return stamp > now + self.slack


class WallClock:
    """The computer's clock (seconds since 1970)."""

    def now(self) -> float:
        return time.time()

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, t - time.time()))

    def create_jump_callback(self, callback: JumpCallback) -> None:
        """The wall clock is taken as it is: no jumps are reported."""


TICK_SILENCE = 3.0
"""Wall seconds without a lock-step tick after which a process whose modules follow the ticks listens to ``Clock``
again (a lock-step's simulator sends a tick at least every second, also while it waits for a slow module)."""


class SimTimeSource:
    """The simulated time as one process's bus sees it, shared by every :class:`SimClock` on that bus.

    It follows ``Clock`` (free-running simulators and replays); while modules of this process take part in a
    lock-step, it follows the ticks they handle instead (:meth:`advance`), so that time moves exactly with their steps.
    Then it does not even listen to ``Clock``: in lock-step the simulator writes it at every tick, for tools and logs,
    and a process whose members ignore it would be sent each of those values for nothing. It listens again when its
    last member leaves the lock-step, or when no tick has come for :data:`TICK_SILENCE` s (:meth:`watch`): a
    simulator that ended the lock-step, or was started again on its own clock, says so in ``Clock``.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._cond = threading.Condition()
        self._now = 0.0
        self._run = 0
        self._jumps = 0
        self.lockstep = False
        """The simulator last said it runs in lock-step."""
        self._callbacks: list[weakref.ReferenceType[Any] | Callable[[], JumpCallback | None]] = []
        self.gate = bus.lockstep()
        self._sub_lock = threading.Lock()
        self._sub: Any = bus.declare_subscriber(bus.key(names.CLOCK), self._on_clock)
        bus._own(self)
        reader = bus.create_reader(names.CLOCK, fetch_timeout=0.5)
        current = reader.read()
        bus.release(reader)
        if current is not None:
            self._take(current, defer=False)

    def _on_clock(self, sample: Any) -> None:
        try:
            tick = msgs.decode(sample.payload.to_bytes(), msgs.SimTime)
        except Exception as err:
            self.bus.drops.drop(names.CLOCK, err)
            return
        self._take(tick, defer=True)

    def _take(self, tick: msgs.SimTime, defer: bool) -> None:
        self.lockstep = tick.lockstep
        if tick.lockstep and self.gate.active:
            return  # the members of this process follow the ticks themselves
        self._set(tick.stamp, tick.run, defer)

    def advance(self, stamp: float, run: int) -> None:
        """Take the time of a lock-step tick (called by a member before it steps; jump callbacks run at once)."""
        if self._sub is not None and self.gate.active:
            self._listen(False)  # the members here follow the ticks: Clock's values would be ignored
        if stamp == self._now and run == self._run:
            return  # another member of this process already did
        self._set(stamp, run, defer=False)

    @property
    def listening(self) -> bool:
        """It listens to ``Clock`` (not while the members of its process follow a lock-step's ticks)."""
        return self._sub is not None

    def watch(self) -> None:
        """Listen to ``Clock`` again if the members of this process no longer follow ticks: none is left, or no tick
        came for :data:`TICK_SILENCE` s (called by the members' control threads twice a second, and as one leaves)."""
        if self._sub is None and (not self.gate.active or time.monotonic() - self.gate.heard_at > TICK_SILENCE):
            self._listen(True)

    def _listen(self, on: bool) -> None:
        with self._sub_lock:
            if on == (self._sub is not None) or self.bus.closed:
                return
            if on:
                try:
                    self._sub = self.bus.declare_subscriber(self.bus.key(names.CLOCK), self._on_clock)
                except BusError:
                    return  # the bus closed meanwhile: nothing to listen for
                log.debug("listening to Clock again")
            else:
                sub, self._sub = self._sub, None
                sub.undeclare()

    def _set(self, stamp: float, run: int, defer: bool) -> None:
        with self._cond:
            old = self._now
            jumped = (run != 0 and self._run != 0 and run != self._run) or stamp < old - 1e-9
            if jumped:
                self._jumps += 1
                self._now = stamp
            else:
                self._now = max(old, stamp)
            if run:
                self._run = run
            self._cond.notify_all()
        if jumped:
            log.info("simulated time restarted: %.3f s -> %.3f s; resetting what depends on it", old, stamp)
            if defer:
                self.bus._defer(self._jumped, old, stamp)
            else:
                self._jumped(old, stamp)

    def _jumped(self, old: float, new: float) -> None:
        for ref in list(self._callbacks):
            callback = ref()
            if callback is None:
                self._callbacks.remove(ref)
                continue
            try:
                callback(old, new)
            except Exception:
                log.exception("a clock jump callback failed")

    def add_jump_callback(self, callback: JumpCallback) -> None:
        # Bound methods are held weakly (an object's callback must not keep it alive), functions strongly.
        ref: Any
        try:
            ref = weakref.WeakMethod(callback)
        except TypeError:

            def ref() -> JumpCallback:
                return callback

        self._callbacks.append(ref)

    def now(self) -> float:
        with self._cond:
            return self._now

    @property
    def run(self) -> int:
        """The id of the simulated run (``SimTime.run``) the time belongs to; 0 before the first tick."""
        with self._cond:
            return self._run

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        with self._cond:
            jumps, lockstep = self._jumps, self.lockstep
            # Also back when the simulator turns out to run in lock-step: a module that started stepping on
            # ``Clock`` before it knew waits for a time that, held until every module has joined, would never come.
            while self._now < t and self._jumps == jumps and not (self.lockstep and not lockstep):
                if stop.is_set():
                    return True
                self._cond.wait(0.05)  # ticks wake us; the timeout only notices `stop`
        return stop.is_set()

    def close(self) -> None:
        with self._sub_lock:
            sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):  # already closed with the session
                sub.undeclare()


_sources: weakref.WeakKeyDictionary[Bus, SimTimeSource] = weakref.WeakKeyDictionary()
_sources_lock = threading.Lock()


def sim_time_source(bus: Bus) -> SimTimeSource:
    """The simulated time of ``bus`` (one per bus, created at the first call)."""
    with _sources_lock:
        source = _sources.get(bus)
        if source is None:
            source = _sources[bus] = SimTimeSource(bus)
        return source


class SimClock:
    """Follows the simulated time (rclpy's ``use_sim_time``): ``Clock``, or the ticks of a lock-stepped simulator.

    Before the first tick, time is 0 and sleepers wait for it.
    """

    def __init__(self, bus: Bus) -> None:
        self.source = sim_time_source(bus)

    @property
    def lockstep(self) -> bool:
        """The simulator runs in lock-step: a module's steps follow its ticks (see :class:`~pluto.runtime.Module`)."""
        return self.source.lockstep

    def now(self) -> float:
        return self.source.now()

    @property
    def run(self) -> int:
        """The id of the simulated run the time belongs to (0 before the first tick)."""
        return self.source.run

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return self.source.sleep_until(t, stop)

    def create_jump_callback(self, callback: JumpCallback) -> None:
        self.source.add_jump_callback(callback)
