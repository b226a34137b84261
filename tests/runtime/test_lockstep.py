"""Lock-step on the bus: each step sees exactly the values written before its tick; a hung member is dropped."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import zenoh

from pluto import msgs
from pluto.bus import Bus, Subscription
from pluto.bus.executor import on_zenoh_thread
from pluto.bus.lockstep import ACK_KEY, TICK_KEY, LockstepTick, process_tick_key
from pluto.runtime import clock as clock_module
from pluto.runtime.clock import SimClock, sim_time_source
from pluto.runtime.module import Module, ModuleParams
from pluto.sim.module import SimModule, SimParams
from tests.helpers import wait_until

COUNTER = "Test/Counter"


class Producer(Module):
    """Writes how many steps it has made."""

    def on_configure(self) -> None:
        self.count = 0
        self.out = self.create_publisher(COUNTER, msgs.FVectorState)

    def step(self, now: float) -> None:
        self.count += 1
        self.out.write(msgs.FVectorState(stamp=now, element=[self.count]))


class SparseProducer(Producer):
    """Writes at one step in three, and notes when."""

    def on_configure(self) -> None:
        super().on_configure()
        self.written: list[float] = []

    def step(self, now: float) -> None:
        self.count += 1
        if self.count % 3 == 1:
            self.written.append(now)
            self.out.write(msgs.FVectorState(stamp=now, element=[self.count]))


class Consumer(Module):
    """Records, at each step, the stamp of the counter it sees."""

    def on_configure(self) -> None:
        self.seen: list[tuple[float, float | None]] = []
        self.counter = self.create_reader(COUNTER, msgs.FVectorState)
        self.done = threading.Event()

    def step(self, now: float) -> None:
        value = self.counter.read()
        self.seen.append((now, None if value is None else value.stamp))
        if now >= 2.0:
            self.done.set()


class Hanging(Module):
    """Blocks in its step at 0.5 s until released."""

    def on_configure(self) -> None:
        self.release = threading.Event()

    def step(self, now: float) -> None:
        if now >= 0.5:
            self.release.wait(30)


@pytest.fixture
def sim(bus: Bus) -> Iterator[SimModule]:
    module = SimModule(bus, SimParams(lockstep=True, rate="max", paused=True, lockstep_timeout=1.0))
    module.start()
    yield module
    module.stop()


def sim_time() -> ModuleParams:
    return ModuleParams(use_sim_time=True, rate_hz=50.0)


def resume_when_joined(bus: Bus, *members: str) -> None:
    """Let the time go once exactly ``members`` take part in the lock-step."""
    wait_until(lambda: bus.call("sim/lockstep")["members"] == sorted(members), timeout=10)
    bus.call("sim/resume")


@pytest.mark.parametrize("names", [("a-producer", "b-consumer"), ("b-producer", "a-consumer")])
def test_a_step_sees_the_values_written_before_its_tick_whoever_steps_first(
    bus: Bus, sim: SimModule, names: tuple[str, str]
) -> None:
    # Members of one process step one after the other, in the order of their names: with or without the producer
    # stepping first in each tick, the consumer sees the value of the tick before.
    producer = Producer(bus, sim_time(), name=names[0])
    consumer = Consumer(bus, sim_time(), name=names[1])
    producer.start()
    consumer.start()
    try:
        resume_when_joined(bus, *names)
        assert consumer.done.wait(30)
        moving = [(now, seen) for now, seen in consumer.seen if now > 0.0]
        assert moving, consumer.seen
        for now, seen in moving:
            assert seen is not None and abs(seen - (now - 0.02)) < 1e-9, (now, seen)
    finally:
        consumer.stop()
        producer.stop()


def test_members_on_the_simulators_bus_answer_it_without_zenoh(bus: Bus, sim: SimModule, make_bus: Any) -> None:
    # The simulator and its members in one process: each tick reaches the gate by a call and each answer goes back by
    # one (the next tick leaves from it); the steps see exactly the values of the tick before, as through Zenoh. A
    # process elsewhere without members hears only the ticks while time is held (those go to everyone).
    heard = {TICK_KEY: 0, ACK_KEY: 0}
    running: list[LockstepTick] = []
    watcher = make_bus()

    def count(key: str) -> Any:
        def on_sample(sample: Any) -> None:
            heard[key] += 1
            if key == TICK_KEY:
                tick = msgspec.msgpack.decode(sample.payload.to_bytes(), type=LockstepTick)
                if not tick.paused:
                    running.append(tick)

        return watcher.session.declare_subscriber(watcher.key_raw(key), on_zenoh_thread(on_sample))

    subscribers = [count(TICK_KEY), count(ACK_KEY)]
    producer = Producer(bus, sim_time(), name="producer")
    consumer = Consumer(bus, sim_time(), name="consumer")
    producer.start()
    consumer.start()
    try:
        resume_when_joined(bus, "consumer", "producer")
        assert consumer.done.wait(30)
        moving = [(now, seen) for now, seen in consumer.seen if now > 0.0]
        assert len(moving) >= 99  # a step every 20 ms up to 2 s
        for now, seen in moving:
            assert seen is not None and abs(seen - (now - 0.02)) < 1e-9, (now, seen)
        assert heard[TICK_KEY] >= 1  # while time was held
        assert running == []
        assert heard[ACK_KEY] == 0
    finally:
        consumer.stop()
        producer.stop()
        for subscriber in subscribers:
            subscriber.undeclare()


class Listener(Module):
    """Follows the counter through a subscription: the threads its callback ran on, and the counts it saw."""

    def on_configure(self) -> None:
        self.threads: set[threading.Thread] = set()
        self.counts: list[int] = []
        self.create_subscription(COUNTER, self._on_counter, msgs.FVectorState)

    def _on_counter(self, value: msgs.FVectorState) -> None:
        self.threads.add(threading.current_thread())
        self.counts.append(value.element[0])


def test_a_subscriptions_callbacks_run_on_the_lockstep_thread_however_late_its_values_come(
    bus: Bus, sim: SimModule, make_bus: Any
) -> None:
    # The producer runs on a bus of its own: its values reach the listener's bus through Zenoh, often after the tick
    # that needs them has reached the listener's (directly from the simulator). Early or late, the listener's
    # process takes them on its lock-step thread, which waits for them anyway: no worker thread is woken for them.
    listener = Listener(bus, sim_time(), name="listener")  # first: no value to fetch when it subscribes
    consumer = Consumer(bus, sim_time(), name="consumer")
    producer = Producer(make_bus(), sim_time(), name="producer")
    for module in (listener, consumer, producer):
        module.start()
    try:
        resume_when_joined(bus, "consumer", "listener", "producer")
        assert consumer.done.wait(30)
        gate = bus.gate
        assert gate is not None and gate._executor is not None
        assert listener.counts[:5] == [1, 2, 3, 4, 5] and len(listener.counts) >= 99
        assert listener.threads == {gate._executor}
    finally:
        for module in (consumer, listener, producer):
            module.stop()


def test_a_value_that_comes_while_a_tick_is_delivered_is_taken_by_the_lockstep_thread(bus: Bus) -> None:
    # A value the tick's frontier already covers, coming while the executor delivers that tick (it waits for the
    # frontier's values), is held for the executor to take, not let through on Zenoh's thread to a worker; once the
    # delivery is over, a covered value passes at once.
    gate = bus.lockstep()
    gate.register("member", lambda tick: math.inf)
    listener = Listener(bus, ModuleParams(autostart=False), name="listener")
    listener.start()
    try:
        receiver = next(r for r in bus.receivers_by_key()[bus.key(COUNTER)] if isinstance(r, Subscription))
        value = msgs.FVectorState(element=[7])
        with gate._cond:
            gate._frontier[0x51] = 3
            gate._delivering = True
        assert not gate.admit(receiver, value, 0x51, 3, True)
        with gate._cond:
            assert gate._release() == [(receiver, value)]
            gate._delivering = False
        assert gate.admit(receiver, value, 0x51, 3, True)
        assert not gate.admit(receiver, value, 0x51, 4, True)  # not covered yet: held as ever
    finally:
        listener.stop()
        gate.unregister("member")


def test_a_module_started_before_it_heard_of_the_lockstep_joins_it(bus: Bus) -> None:
    # Started before the simulator's first Clock, the module steps on Clock and waits for the time of its next step;
    # a lock-stepped simulator holds the time until every module has joined, so that wait must end when the module
    # hears of the lock-step (else neither would ever move).
    consumer = Consumer(bus, sim_time(), name="consumer")
    consumer.start()
    sim = None
    try:
        wait_until(lambda: len(consumer.seen) >= 1, timeout=10)  # its first step, at time 0, before any Clock
        sim = SimModule(bus, SimParams(lockstep=True, rate="max", paused=True, lockstep_timeout=1.0))
        sim.start()
        resume_when_joined(bus, "consumer")
        assert consumer.done.wait(30)
    finally:
        consumer.stop()
        if sim is not None:
            sim.stop()


def test_time_is_held_until_resumed(bus: Bus, sim: SimModule) -> None:
    consumer = Consumer(bus, sim_time(), name="consumer")
    consumer.start()
    try:
        wait_until(lambda: len(consumer.seen) >= 1, timeout=10)
        state = bus.call("sim/lockstep")
        assert state["paused"] and state["stamp"] == 0.0
        assert all(now == 0.0 for now, _ in consumer.seen)
        bus.call("sim/resume")
        assert consumer.done.wait(30)
    finally:
        consumer.stop()


def test_a_hung_member_is_dropped_and_shown_then_rejoins(bus: Bus, sim: SimModule) -> None:
    hanging = Hanging(bus, sim_time(), name="hanging")
    consumer = Consumer(bus, sim_time(), name="consumer")
    hanging.start()
    try:
        resume_when_joined(bus, "hanging")
        wait_until(lambda: bus.call("sim/lockstep")["dropped"] == ["hanging"], timeout=20)
        info = msgs.decode(msgs.encode(sim.info()), msgs.ModuleInfo)
        assert any("dropped" in note and "hanging" in note for note in info.notes)
        # time goes on without it: a member in another process would step on (here the executor is the one the
        # hung step blocks, so the proof is the simulator's own time)
        stamp = bus.call("sim/lockstep")["stamp"]
        assert stamp >= 0.5
        hanging.release.set()
        wait_until(lambda: bus.call("sim/lockstep")["dropped"] == [], timeout=20)
    finally:
        hanging.release.set()
        hanging.stop()
        consumer.stop()


def test_closing_the_bus_while_a_member_steps_ends_the_lockstep_thread_quietly(
    bus: Bus, sim: SimModule, make_bus: Any
) -> None:
    # The bus of a process that stops (Ctrl-C in the middle of a step): the step's acknowledgement finds its
    # publisher withdrawn, and the lock-step thread ends without an error of its own.
    failures: list[threading.ExceptHookArgs] = []
    previous = threading.excepthook
    threading.excepthook = failures.append
    member_bus = make_bus()
    hanging = Hanging(member_bus, sim_time(), name="hanging")
    hanging.start()
    try:
        resume_when_joined(bus, "hanging")
        wait_until(lambda: hanging.clock.now() >= 0.5, timeout=10)  # in its step, waiting
        gate = member_bus.gate
        assert gate is not None and gate._executor is not None
        closer = threading.Thread(target=member_bus.close)
        closer.start()

        def withdrawn() -> bool:
            try:
                gate._ack_pub.key_expr  # noqa: B018 - raises once the publisher is undeclared
            except zenoh.ZError:
                return True
            except RuntimeError:  # zenoh-python's "already mutably borrowed": the closing thread undeclares it now
                return False
            return False

        wait_until(withdrawn, timeout=10)
        hanging.release.set()  # the step returns into a closed bus
        closer.join(timeout=10)
        gate._executor.join(timeout=10)
        assert not gate._executor.is_alive()
    finally:
        hanging.release.set()
        hanging.stop()
        threading.excepthook = previous
    assert not failures, [f.exc_value for f in failures]


def test_a_process_that_follows_the_ticks_stops_hearing_clock_and_hears_it_again_when_they_stop(
    bus: Bus, sim: SimModule, make_bus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A member's process gets its time from the ticks: Clock, which the simulator writes at every tick for tools,
    # is no longer sent to it. When the lock-step's simulator goes and one runs on its own clock instead, the
    # member hears of it through Clock, which it listens to again once no tick has come for a while, and steps on
    # that clock.
    monkeypatch.setattr(clock_module, "TICK_SILENCE", 0.5)
    member_bus = make_bus()
    consumer = Consumer(member_bus, sim_time(), name="consumer")
    consumer.start()
    free = None
    try:
        source = sim_time_source(member_bus)
        resume_when_joined(bus, "consumer")
        assert consumer.done.wait(30)
        assert not source.listening
        sim.stop()
        free = SimModule(bus, SimParams(rate=5.0))
        free.start()
        clock = consumer.clock
        assert isinstance(clock, SimClock)
        wait_until(lambda: source.listening and not clock.lockstep and clock.run == free.run_id, timeout=20)
        steps = len(consumer.seen)
        wait_until(lambda: len(consumer.seen) > steps + 5, timeout=20)  # steps on, on the new clock
        assert member_bus.gate is not None and not member_bus.gate.active  # it left the lock-step
    finally:
        consumer.stop()
        if free is not None:
            free.stop()


def test_a_process_whose_last_member_leaves_hears_clock_again(bus: Bus, sim: SimModule, make_bus: Any) -> None:
    member_bus = make_bus()
    consumer = Consumer(member_bus, sim_time(), name="consumer")
    consumer.start()
    try:
        resume_when_joined(bus, "consumer")
        assert consumer.done.wait(30)
        source = sim_time_source(member_bus)
        assert not source.listening
    finally:
        consumer.stop()
    assert source.listening


def test_a_process_hears_only_the_ticks_at_which_its_members_are_due_and_sees_every_write_before_them(
    bus: Bus, sim: SimModule, make_bus: Any
) -> None:
    # A consumer at 10 Hz in a process of its own, a producer at 50 Hz on the simulator's bus that writes at one step
    # in three: the consumer's process is sent one tick in five, and each of its steps sees the newest value written
    # before its tick, also when the tick that made that write visible was not sent to its process.
    member_bus = make_bus()
    watcher = make_bus()
    producer = SparseProducer(bus, sim_time(), name="producer")
    consumer = Consumer(member_bus, ModuleParams(use_sim_time=True, rate_hz=10.0), name="consumer")
    running: list[LockstepTick] = []

    def on_tick(sample: Any) -> None:
        tick = msgspec.msgpack.decode(sample.payload.to_bytes(), type=LockstepTick)
        if not tick.paused:
            running.append(tick)

    producer.start()
    consumer.start()
    subscribers = []
    try:
        wait_until(lambda: bus.call("sim/lockstep")["members"] == ["consumer", "producer"], timeout=10)
        gate = member_bus.gate
        assert gate is not None
        for key in (TICK_KEY, process_tick_key(gate.process)):
            subscribers.append(watcher.session.declare_subscriber(member_bus.key_raw(key), on_zenoh_thread(on_tick)))
        bus.call("sim/resume")
        assert consumer.done.wait(30)
        moving = [(now, seen) for now, seen in consumer.seen if now > 0.0]
        assert len(moving) >= 19
        for now, seen in moving:
            assert seen == max(w for w in producer.written if w < now - 1e-9), (now, seen)
        assert any(abs(seen - (now - 0.02)) > 1e-9 for now, seen in moving if seen is not None)  # not all last tick's
        stamps = [tick.stamp for tick in running]
        assert len(stamps) <= len(consumer.seen) + 1, stamps  # its steps' ticks (and the first after resuming)
        assert bus.call("sim/lockstep")["tick"] >= 5 * len(moving)
    finally:
        consumer.stop()
        producer.stop()
        for subscriber in subscribers:
            subscriber.undeclare()
