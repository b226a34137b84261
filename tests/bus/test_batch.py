"""Batching writers (many values per Zenoh sample) and the fan-out of one subscriber to many receivers."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.bus.session import _ATTACHMENT, BATCH
from tests.bus.test_state import synced_reader
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]
BEAT = names.HEARTBEAT


def beat(seq: int) -> msgs.Heartbeat:
    return msgs.Heartbeat(stamp=float(seq), seq=seq, source="test")


def collect(bus: Bus, name: str = BEAT, depth: int = 10_000) -> tuple[list[int], threading.Event]:
    """A subscription on ``bus`` that records the seq of every value; the event is set by seq -1."""
    seen: list[int] = []
    end = threading.Event()

    def on_value(msg: msgs.Heartbeat) -> None:
        if msg.seq < 0:
            end.set()
        else:
            seen.append(msg.seq)

    bus.create_subscription(name, on_value, msgs.Heartbeat, depth=depth, current=False)
    return seen, end


def test_a_batching_writer_delivers_every_value_in_order(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(BEAT, msgs.Heartbeat, batch=64, reliable=True)
    other = make_bus()
    seen, end = collect(other)
    writer.write(beat(0))
    writer.flush()
    synced_reader(other, BEAT)  # the writer's bus knows the subscription now
    seen.clear()
    for seq in range(1, 1001):
        writer.write(beat(seq))
    writer.write(beat(-1))
    assert end.wait(10.0), "the last batch never arrived"
    # Value 0 may reach the subscription's callback only after the clear (a busy machine): then it comes first.
    late_zero = seen[:1] == [0]
    assert seen[int(late_zero) :] == list(range(1, 1001))


def test_a_partial_batch_goes_out_after_its_delay_without_more_writes(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(BEAT, msgs.Heartbeat, batch=1000, batch_delay=0.01)
    writer.write(beat(0))
    writer.flush()
    reader = synced_reader(make_bus(), BEAT)
    writer.write(beat(1))
    writer.write(beat(2))
    # far fewer than 1000 values: only the batch delay can send them
    assert reader.wait_for_update(timeout=5.0).seq == 2
    assert bus.batcher() is bus.batcher()


def test_a_reader_keeps_the_newest_value_of_a_batch_and_counts_them_all(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(BEAT, msgs.Heartbeat, batch=10)
    writer.write(beat(0))
    writer.flush()
    reader = synced_reader(make_bus(), BEAT)
    before = reader.received
    for seq in range(1, 11):  # exactly one full batch
        writer.write(beat(seq))
    wait_until(lambda: reader.received - before == 10, timeout=5.0, message="the batch did not arrive")
    value = reader.read()
    assert value is not None and value.seq == 10
    assert reader.meter.count >= 10


def test_closing_a_batching_writer_sends_what_it_holds(bus: Bus, make_bus: MakeBus) -> None:
    other = make_bus()
    writer = bus.create_publisher(BEAT, msgs.Heartbeat, batch=1000, batch_delay=1.0)
    writer.write(beat(0))
    writer.flush()
    seen, end = collect(other)
    synced_reader(other, BEAT)
    writer.write(beat(5))
    writer.write(beat(-1))
    bus.release(writer)
    assert end.wait(5.0)
    assert seen == [5]


def test_late_joiners_get_the_newest_value_of_a_batching_writer(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(BEAT, msgs.Heartbeat, batch=100, batch_delay=1.0)
    for seq in range(7):
        writer.write(beat(seq))
    value = make_bus().create_reader(BEAT, msgs.Heartbeat).read()
    assert value is not None and value.seq == 6


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"batch": -1}, "batch"),
        ({"batch": 70_000}, "batch"),
        ({"batch": 8, "batch_delay": 0.0}, "batch_delay"),
        ({"batch": 8, "batch_delay": float("nan")}, "batch_delay"),
    ],
)
def test_bad_batch_settings_are_refused(bus: Bus, kwargs: dict[str, float], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        bus.create_publisher(BEAT, msgs.Heartbeat, **kwargs)  # type: ignore[arg-type]


def test_commands_are_never_batched(bus: Bus) -> None:
    with pytest.raises(ValueError, match="commands"):
        bus.create_publisher(names.BASE_DRIVE_COMMAND, batch=8)


def test_a_bad_batch_is_dropped_and_counted_by_every_receiver(bus: Bus, make_bus: MakeBus) -> None:
    other = make_bus()
    readers = [other.create_reader(BEAT, msgs.Heartbeat) for _ in range(2)]
    writer = bus.create_publisher(BEAT, msgs.Heartbeat)
    writer.write(beat(0))
    wait_until(lambda: all(r.read() is not None for r in readers), timeout=5.0, message="no value")
    attachment = _ATTACHMENT.pack(time.time(), 99, 12345, BATCH)
    good = msgs.encode(beat(1))
    # an array header that promises two values but holds one and a half; then an array holding another type
    bus.session.put(bus.key(BEAT), struct.pack(">BH", 0xDC, 2) + good + good[:5], attachment=attachment)
    other_type = msgs.encode(msgs.Odometry())
    bus.session.put(bus.key(BEAT), struct.pack(">BH", 0xDC, 2) + good + other_type, attachment=attachment)
    wait_until(lambda: all(r.dropped == 2 for r in readers), timeout=5.0, message="the bad batches were not counted")
    assert other.drops.by_interface == {BEAT: 4}
    assert all(r.read() == beat(0) for r in readers)  # nothing of a bad batch is taken


def test_receivers_of_one_interface_share_one_subscriber(bus: Bus, make_bus: MakeBus) -> None:
    other = make_bus()
    got: list[list[int]] = [[], []]
    subs = [
        other.create_subscription(BEAT, lambda m, i=i: got[i].append(m.seq), msgs.Heartbeat, depth=100)  # type: ignore[misc]
        for i in range(2)
    ]
    reader = other.create_reader(BEAT, msgs.Heartbeat)
    assert reader.read() is None
    assert list(other.subscribers.values()) == [3]  # one subscriber serves the three
    writer = bus.create_publisher(BEAT, msgs.Heartbeat)
    writer.write(beat(1))
    wait_until(lambda: got[0] == [1] and got[1] == [1], timeout=5.0, message="not every subscription got it")
    assert reader.wait_for_value(timeout=5.0).seq == 1
    other.release(subs[0])
    writer.write(beat(2))
    assert reader.wait_for_update(timeout=5.0).seq == 2
    wait_until(lambda: got[1] == [1, 2], timeout=5.0, message="the remaining subscription stopped receiving")
    assert got[0] == [1]  # a closed subscription gets nothing more
    other.release(subs[1])
    other.release(reader)
    assert other.subscribers == {}  # the last receiver gone, the subscriber is gone
