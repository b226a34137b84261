"""The XML server's subscriptions: one bus subscription per interface (a topic), shared by every connection
subscribed to it, and the pacing that offers each connection the newest value at its own rate.

    subscriptions = Subscriptions(bus, clock, clock_rate, call_soon, executor, log)
    subscriptions.start()                                    # on the server's loop
    topic = await subscriptions.topic("Base/Drive/State", msgs.Odometry)
    sub = subscriptions.attach(session, topic, rate_hz=10.0) # offered at most 10 times a second
    subscriptions.consider(sub, clock.now())                 # the current value goes out at once
    subscriptions.detach(sub)                                # the last one out releases the bus subscription

Everything but :meth:`Topic.on_bus_value` (a bus thread) and :meth:`Subscriptions.release_all` runs on the server's
loop. A subscriber is anything with ``offer(name, doc)`` and ``withdraw(name)`` (:class:`.sessions.Session`).
"""

# Strategy: the bus delivers values on its own threads; each topic keeps only its newest value and wakes the loop
# with at most one pending call, so a stalled loop cannot pile up work. Each new value is encoded once per topic and
# the same bytes are offered to every subscriber whose pacer (pacing.Pacer, on the server's clock, simulated or not)
# says it is due; one that is not due gets a timer, on one heap served by one task. When the clock goes back (a new
# simulation run, a replay started again) the timers are emptied and every pacer restarts, so the new run's values
# go out at once. Anything that blocks on the bus (creating or releasing a subscription) runs on the server's
# thread pool.

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from pluto import msgs
from pluto.bus import Bus
from pluto.bus import Subscription as BusSubscription
from pluto.runtime.clock import Clock

from .codec import encode_event
from .events import Update
from .pacing import Pacer

__all__ = ["MAX_PACING_SLEEP", "Subscriber", "Subscription", "Subscriptions", "Topic", "TopicTypeError"]

MAX_PACING_SLEEP: Final = 0.05
"""Longest wait of the pacing task between looks at the clock, s of wall time (a simulated clock may jump)."""


class TopicTypeError(Exception):
    """An interface is subscribed to already as another message type."""


class Subscriber(Protocol):
    """What a subscription offers its updates to (a connection)."""

    def offer(self, name: str, doc: bytes) -> None:
        """Make ``doc`` the next update of ``name`` to send (replacing one not sent yet)."""

    def withdraw(self, name: str) -> None:
        """Forget the pending update of ``name``."""


class Subscription:
    """One connection's subscription to one topic."""

    __slots__ = ("client", "closed", "pacer", "scheduled", "seq", "topic")

    def __init__(self, client: Subscriber, topic: Topic, rate_hz: float) -> None:
        self.client = client
        self.topic = topic
        self.pacer = Pacer(rate_hz)
        self.seq = 0  # the topic's seq of the last value offered
        self.scheduled = False
        self.closed = False


class Topic:
    """The newest value of one interface, shared by every connection subscribed to it.

    Args:
        name: the interface.
        cls: its message type.
        call_soon: runs a callback on the server's loop (from any thread); dropped if the server has stopped.
        updated: called on the loop with the topic when it holds a new value.
    """

    def __init__(
        self,
        name: str,
        cls: type[msgs.Message],
        call_soon: Callable[[Callable[[], None]], object],
        updated: Callable[[Topic], None],
    ) -> None:
        self.name = name
        self.cls = cls
        self.subs: set[Subscription] = set()
        self.seq = 0
        self.value: msgs.Message | None = None
        self.subscription: BusSubscription[Any] | None = None
        self._call_soon = call_soon
        self._updated = updated
        self._doc: bytes | None = None
        self._lock = threading.Lock()
        self._incoming: msgs.Message | None = None
        self._scheduled = False

    def on_bus_value(self, value: msgs.Message) -> None:
        """Called on a bus thread with each new value: keep it, and wake the loop once."""
        with self._lock:
            self._incoming = value
            if self._scheduled:
                return
            self._scheduled = True
        self._call_soon(self._take)

    def _take(self) -> None:
        with self._lock:
            value, self._incoming, self._scheduled = self._incoming, None, False
        if value is None:
            return
        self.seq += 1
        self.value = value
        self._doc = None
        self._updated(self)

    @property
    def doc(self) -> bytes:
        """The ``<update>`` document of the newest value (encoded once, for every subscriber)."""
        if self._doc is None:
            assert self.value is not None
            self._doc = encode_event(Update(self.name, self.seq, self.value))
        return self._doc


class Subscriptions:
    """The topics and the pacing of every subscription.

    Args:
        bus: where the topics subscribe.
        clock: the clock that paces subscriptions.
        clock_rate: the clock's seconds per wall-clock second, to know how long to sleep until an update is due.
        call_soon: runs a callback on the server's loop (from any thread).
        executor: the threads that may block on the bus.
        log: where pacing restarts are logged.
    """

    def __init__(
        self,
        bus: Bus,
        clock: Clock,
        clock_rate: Callable[[], float],
        call_soon: Callable[[Callable[[], None]], object],
        executor: concurrent.futures.Executor,
        log: logging.Logger,
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._clock_rate = clock_rate
        self._call_soon = call_soon
        self._executor = executor
        self._log = log
        self.topics: dict[str, Topic] = {}
        self._orphans: list[BusSubscription[Any]] = []
        self._heap: list[tuple[float, int, Subscription]] = []
        self._counter = itertools.count()
        self._create_lock: asyncio.Lock | None = None
        self._pace_wake: asyncio.Event | None = None
        self._closed = False

    def start(self) -> None:
        """On the server's loop, before anything else: the loop's lock and event."""
        self._create_lock = asyncio.Lock()
        self._pace_wake = asyncio.Event()

    def close(self) -> None:
        """The server is closing: bus subscriptions let go from now on are released with :meth:`release_all`."""
        self._closed = True

    def release_all(self) -> list[BusSubscription[Any]]:
        """Forget every topic; the bus subscriptions to release (the caller releases them)."""
        things = [t.subscription for t in self.topics.values() if t.subscription is not None]
        things += self._orphans
        self._orphans.clear()
        self.topics.clear()
        return things

    async def topic(self, name: str, cls: type[msgs.Message]) -> Topic:
        """The topic of ``name``, subscribing on the bus if it is new.

        Raises:
            TopicTypeError: ``name`` is subscribed to already as another type (the message says which).
        """
        assert self._create_lock is not None
        async with self._create_lock:
            topic = self.topics.get(name)
            if topic is not None:
                if topic.cls is not cls:
                    raise TopicTypeError(f"{name} is subscribed to as {topic.cls.__name__}")
                return topic
            topic = Topic(name, cls, self._call_soon, self.updated)
            loop = asyncio.get_running_loop()
            topic.subscription = await loop.run_in_executor(
                self._executor, self._bus.create_subscription, name, topic.on_bus_value, cls
            )
            self.topics[name] = topic
            return topic

    def attach(self, client: Subscriber, topic: Topic, rate_hz: float) -> Subscription:
        """A new subscription of ``client`` to ``topic`` at ``rate_hz`` at most."""
        sub = Subscription(client, topic, rate_hz)
        topic.subs.add(sub)
        return sub

    def detach(self, sub: Subscription) -> None:
        """End a subscription; the topic's last one releases the bus subscription (on the thread pool)."""
        sub.closed = True
        sub.client.withdraw(sub.topic.name)
        topic = sub.topic
        topic.subs.discard(sub)
        if not topic.subs and self.topics.get(topic.name) is topic:
            del self.topics[topic.name]
            if topic.subscription is not None:
                if self._closed:  # the executor is going away: release it with the rest
                    self._orphans.append(topic.subscription)
                else:
                    self._executor.submit(self._bus.release, topic.subscription)

    def restart(self, old: float, new: float, subs: Iterable[Subscription]) -> None:
        """The clock went back from ``old`` to ``new`` (s): empty the timers and restart the pacing of ``subs``."""
        for _, _, sub in self._heap:
            sub.scheduled = False
        self._heap.clear()
        subs = list(subs)
        for sub in subs:
            sub.pacer.restart()
        self._log.info(
            "simulated time restarted (%.3f s -> %.3f s): pacing of %d subscriptions restarted", old, new, len(subs)
        )
        now = self._clock.now()
        for sub in subs:
            self.consider(sub, now)
        if self._pace_wake is not None:
            self._pace_wake.set()

    def updated(self, topic: Topic) -> None:
        """``topic`` holds a new value: offer it to its subscribers that are due."""
        now = self._clock.now()
        for sub in list(topic.subs):
            self.consider(sub, now)

    def consider(self, sub: Subscription, now: float) -> None:
        """Offer the topic's newest value to a subscriber if it has not had it and is due; else set its timer."""
        topic = sub.topic
        if sub.closed or topic.value is None or sub.seq == topic.seq:
            return
        if sub.pacer.ready(now):
            sub.seq = topic.seq
            sub.pacer.sent(now)
            sub.client.offer(topic.name, topic.doc)
        elif not sub.scheduled:
            assert sub.pacer.due is not None and self._pace_wake is not None
            sub.scheduled = True
            heapq.heappush(self._heap, (sub.pacer.due, next(self._counter), sub))
            self._pace_wake.set()

    async def pace(self) -> None:
        """Offer the updates that have come due (one task for every subscription)."""
        assert self._pace_wake is not None
        while True:
            now = self._clock.now()
            while self._heap and self._heap[0][0] <= now:
                _, _, sub = heapq.heappop(self._heap)
                sub.scheduled = False
                self.consider(sub, now)
            wait: float | None = None
            if self._heap:
                rate = self._clock_rate()
                wall = (self._heap[0][0] - now) / rate if rate > 0 else MAX_PACING_SLEEP
                wait = min(max(wall, 0.0005), MAX_PACING_SLEEP)
            self._pace_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pace_wake.wait(), wait)
