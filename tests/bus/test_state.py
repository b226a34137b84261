"""State interfaces: writers, readers (late joiners included), subscriptions, bad input, closing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, BusError, BusTimeout, StateReader, open_bus
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]
ODOM = "Base/Drive/State"


def synced_reader(on: Bus, name: str) -> StateReader[Any]:
    """A reader on ``on`` that got the current value of ``name`` (create one until it does).

    Its query for the value reached the writer, behind the declarations ``on`` made before, so from then on the
    writer's bus knows every subscriber ``on`` declared: a burst written now cannot outrun them.
    """
    readers: list[StateReader[Any]] = []

    def fetched() -> bool:
        readers.append(on.create_reader(name))
        if readers[-1].read() is None:
            readers[-1].close()  # so that it does not count drops or values beside the one returned
            return False
        return True

    wait_until(fetched, timeout=2.0, message=f"no reader on the new bus got the value of {name}")
    return readers[-1]


def test_write_then_read_in_another_bus(bus: Bus, make_bus: MakeBus) -> None:
    other = make_bus()
    writer = bus.create_publisher(ODOM)
    reader = other.create_reader(ODOM)
    assert reader.read() is None
    assert reader.age is None
    writer.write(msgs.Odometry(x=1.0, v=0.5))
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=1.0, v=0.5)
    assert reader.read() == msgs.Odometry(x=1.0, v=0.5)
    assert reader.received == 1
    assert reader.dropped == 0
    assert writer.count == 1


def test_keys_carry_the_robot_name(bus: Bus) -> None:
    assert bus.key(ODOM) == f"pluto/{bus.robot}/{ODOM}"
    assert bus.service_key("a/b") == f"pluto/{bus.robot}/@srv/a/b"
    assert bus.module_key("base") == f"pluto/{bus.robot}/@module/base"
    with pytest.raises(ValueError):
        bus.key("Base/*")


def test_other_robots_are_not_heard(bus: Bus, make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLUTO_ROBOT", f"{bus.robot}-other")
    other_robot = make_bus()
    reader = other_robot.create_reader(ODOM)
    bus.create_publisher(ODOM).write(msgs.Odometry(x=1.0))
    assert other_robot.create_reader(ODOM).read() is None  # the late joiner of the other robot sees nothing
    with pytest.raises(BusTimeout):
        reader.wait_for_update(timeout=0.2)


def test_late_joiner_reads_the_value_at_once(bus: Bus, make_bus: MakeBus) -> None:
    bus.create_publisher(ODOM).write(msgs.Odometry(x=1.5))
    late = make_bus()
    reader = late.create_reader(ODOM)
    assert reader.read() == msgs.Odometry(x=1.5)  # no wait
    assert reader.age is not None and reader.age < 2.0


def test_late_joiners_read_at_once_a_value_written_by_a_peer_that_is_not_the_owner(bus: Bus, make_bus: MakeBus) -> None:
    peer = make_bus()  # `bus` owns the rendezvous; this one is an ordinary peer
    peer.create_publisher(ODOM).write(msgs.Odometry(x=1.5))
    synced_reader(bus, ODOM)  # the owner has heard of the writer

    def join(_: int) -> msgs.Odometry | None:
        with open_bus() as late:
            return late.create_reader(ODOM).read()

    with ThreadPoolExecutor(10) as pool:
        for _ in range(2):
            values = list(pool.map(join, range(10)))
            misses = sum(value != msgs.Odometry(x=1.5) for value in values)
            assert misses == 0, f"{misses} of 10 late joiners read nothing"


def test_late_joiner_gets_the_time_of_the_write_not_of_the_fetch(bus: Bus, make_bus: MakeBus) -> None:
    before = time.time()
    bus.create_publisher(ODOM).write(msgs.Odometry(x=1.5))
    after = time.time()
    time.sleep(0.3)  # let the value age
    fetched_from = time.time()
    reader = make_bus().create_reader(ODOM)
    assert before <= reader.last_write_time <= after < fetched_from  # the write's time, in order
    assert reader.age is not None and reader.age >= fetched_from - after


def test_age_grows_until_the_next_write(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    reader = make_bus().create_reader(ODOM)
    assert reader.age is None
    writer.write(msgs.Odometry(x=1.0))
    reader.wait_for_update(timeout=2.0)
    first = reader.age
    assert first is not None and 0.0 <= first < 0.5
    time.sleep(0.2)
    aged = reader.age
    assert aged is not None and aged >= first + 0.15
    writer.write(msgs.Odometry(x=2.0))
    reader.wait_for_update(timeout=2.0)
    renewed = reader.age
    assert renewed is not None and renewed < aged


def test_wait_for_update_returns_the_next_value(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    reader = make_bus().create_reader(ODOM)
    assert reader.read() == msgs.Odometry(x=1.0)

    threading.Timer(0.1, writer.write, (msgs.Odometry(x=2.0),)).start()
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=2.0)


def test_wait_for_update_times_out_when_nothing_comes(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    reader = make_bus().create_reader(ODOM)
    reader.read()
    with pytest.raises(BusTimeout) as info:  # (how long it takes: bench/bus.py --timeouts)
        reader.wait_for_update(timeout=0.2)
    assert ODOM in str(info.value)
    assert isinstance(info.value, TimeoutError)


def test_wait_for_update_without_read_returns_the_fetched_value(bus: Bus, make_bus: MakeBus) -> None:
    bus.create_publisher(ODOM).write(msgs.Odometry(x=1.0))
    reader = make_bus().create_reader(ODOM)
    assert reader.wait_for_update(timeout=0.5) == msgs.Odometry(x=1.0)


def test_threads_waiting_on_one_reader_each_get_a_value_none_gets_it_twice(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=0.0))
    reader = make_bus().create_reader(ODOM)
    reader.read()
    results: list[float] = []

    def wait() -> None:
        results.append(reader.wait_for_update(timeout=10.0).x)

    threads = [threading.Thread(target=wait) for _ in range(2)]
    for thread in threads:
        thread.start()
    wait_until(lambda: reader.waiting == 2, message="both threads wait")
    writer.write(msgs.Odometry(x=1.0))  # wakes both: the first to look returns it, the other waits on
    wait_until(lambda: len(results) == 1, message="one thread got the first value")
    writer.write(msgs.Odometry(x=2.0))
    for thread in threads:
        thread.join(timeout=10.0)
    assert sorted(results) == [1.0, 2.0]


def test_wait_for_value(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    reader = make_bus().create_reader(ODOM)
    with pytest.raises(BusTimeout):
        reader.wait_for_value(timeout=0.1)
    threading.Timer(0.05, writer.write, (msgs.Odometry(x=7.0),)).start()
    assert reader.wait_for_value(timeout=2.0) == msgs.Odometry(x=7.0)
    assert reader.wait_for_value(timeout=0.0) == msgs.Odometry(x=7.0)  # already there: no wait


def test_newest_value_wins(bus: Bus, make_bus: MakeBus) -> None:
    # A burst: a default (DROP) writer may lose any value of it under congestion, the last included.
    writer = bus.create_publisher(ODOM, reliable=True)
    writer.write(msgs.Odometry(x=0.0))
    reader = synced_reader(make_bus(), ODOM)
    for i in range(1, 51):
        writer.write(msgs.Odometry(x=float(i)))
    value = reader.wait_for_update(timeout=2.0)
    while value.x != 50.0:
        value = reader.wait_for_update(timeout=2.0)
    assert reader.read() == msgs.Odometry(x=50.0)
    assert make_bus().create_reader(ODOM).read() == msgs.Odometry(x=50.0)  # and a late joiner sees it too


def test_writing_the_wrong_type_raises_type_error_and_sends_nothing(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    reader = make_bus().create_reader(ODOM)
    with pytest.raises(TypeError) as info:
        writer.write(msgs.LaserScan())  # type: ignore[arg-type]
    assert "Odometry" in str(info.value) and "LaserScan" in str(info.value)
    assert writer.count == 0
    writer.write(msgs.Odometry(x=1.0))
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=1.0)
    assert reader.received == 1


def test_type_conflicting_with_the_table_raises_type_error(bus: Bus) -> None:
    with pytest.raises(TypeError) as info:
        bus.create_reader(ODOM, msgs.LaserScan)
    assert "Odometry" in str(info.value)
    with pytest.raises(TypeError):
        bus.create_publisher("Sick/Scan_mm", msgs.Odometry)
    with pytest.raises(TypeError):
        bus.create_subscription(ODOM, print, msgs.ActuatorState)
    # The table's own type may be given explicitly.
    assert bus.create_reader(ODOM, msgs.Odometry).type is msgs.Odometry


def test_interface_outside_the_table_needs_a_type(bus: Bus, make_bus: MakeBus) -> None:
    with pytest.raises(KeyError):
        bus.create_reader("test/custom")
    with pytest.raises(KeyError):
        bus.create_publisher("test/custom")
    writer = bus.create_publisher("test/custom", msgs.Heartbeat)
    writer.write(msgs.Heartbeat(seq=3, source="t"))
    assert make_bus().create_reader("test/custom", msgs.Heartbeat).read() == msgs.Heartbeat(seq=3, source="t")


def test_subscription_with_depth_gets_every_value_in_order(bus: Bus, make_bus: MakeBus) -> None:
    count = 30
    received: list[float] = []
    done = threading.Event()

    def on_value(value: msgs.Odometry) -> None:
        received.append(value.x)
        if value.x == count:
            done.set()

    writer = bus.create_publisher(ODOM, reliable=True)  # a state writer may drop under congestion; this one waits
    writer.write(msgs.Odometry(x=0.0))
    sub_bus = make_bus()
    sub = sub_bus.create_subscription(ODOM, on_value, depth=count, current=False)
    synced_reader(sub_bus, ODOM)
    for i in range(1, count + 1):
        writer.write(msgs.Odometry(x=float(i)))
    assert done.wait(timeout=30.0)
    assert received == [float(i) for i in range(1, count + 1)]
    assert sub.overflowed == 0
    assert sub.received == count


def test_deep_subscription_of_a_reliable_writer_loses_no_value_of_a_burst(bus: Bus, make_bus: MakeBus) -> None:
    name, count = "Sick/Scan_mm", 3000
    delivered: list[int] = []
    done = threading.Event()

    def on_scan(scan: msgs.LaserScan) -> None:
        delivered.append(scan.count)
        if scan.count == count:
            done.set()

    writer = bus.create_publisher(name, reliable=True)  # waits instead of dropping under congestion
    writer.write(msgs.LaserScan(count=0))
    sub_bus = make_bus()
    sub = sub_bus.create_subscription(name, on_scan, depth=2 * count, current=False)
    synced_reader(sub_bus, name)
    for i in range(1, count + 1):
        writer.write(msgs.LaserScan(count=i, ranges=[1.0] * 361))
    assert done.wait(timeout=5.0), "the last scan never arrived"
    assert len(delivered) + sub.overflowed == count, f"{count - len(delivered)} scans lost, uncounted"


def test_slow_subscription_with_depth_one_skips_to_the_newest(bus: Bus, make_bus: MakeBus) -> None:
    count = 20
    received: list[float] = []
    done = threading.Event()

    def slow(value: msgs.Odometry) -> None:
        received.append(value.x)
        if value.x == count:
            done.set()
        time.sleep(0.05)

    writer = bus.create_publisher(ODOM, reliable=True)  # every value reaches the subscriber, which skips some
    writer.write(msgs.Odometry(x=0.0))
    sub_bus = make_bus()
    sub = sub_bus.create_subscription(ODOM, slow, current=False)  # depth=1
    synced_reader(sub_bus, ODOM)
    for i in range(1, count + 1):
        writer.write(msgs.Odometry(x=float(i)))
    assert done.wait(timeout=30.0)
    assert len(received) < count
    assert received[-1] == count
    assert received == sorted(received)  # skips, never goes back
    assert sub.overflowed > 0
    assert sub.received == count


def test_subscription_delivers_the_current_value_first(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    got: list[float] = []
    second = threading.Event()

    def on_value(value: msgs.Odometry) -> None:
        got.append(value.x)
        if len(got) == 2:
            second.set()

    make_bus().create_subscription(ODOM, on_value, depth=10)
    writer.write(msgs.Odometry(x=2.0))
    assert second.wait(timeout=2.0)
    assert got == [1.0, 2.0]


def test_subscription_without_current_value(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    got: list[float] = []
    arrived = threading.Event()

    def on_value(value: msgs.Odometry) -> None:
        got.append(value.x)
        arrived.set()

    sub_bus = make_bus()
    sub_bus.create_subscription(ODOM, on_value, depth=10, current=False)
    # Without the query for the current value nothing tells when the writer has heard of the new subscriber; a
    # reader's query, which travels behind the subscriber's declaration, does.
    assert sub_bus.create_reader(ODOM).read() == msgs.Odometry(x=1.0)
    writer.write(msgs.Odometry(x=2.0))
    assert arrived.wait(timeout=2.0)
    assert got == [2.0]


def test_subscription_depth_must_be_positive(bus: Bus) -> None:
    with pytest.raises(ValueError):
        bus.create_subscription(ODOM, print, depth=0)


def test_a_raising_callback_does_not_end_the_subscription(
    bus: Bus, make_bus: MakeBus, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[float] = []
    second = threading.Event()

    def fragile(value: msgs.Odometry) -> None:
        got.append(value.x)
        if value.x == 2.0:
            second.set()
        if value.x == 1.0:
            raise RuntimeError("callback broke")

    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=0.0))
    sub_bus = make_bus()
    sub_bus.create_subscription(ODOM, fragile, depth=10, current=False)
    synced_reader(sub_bus, ODOM)
    with caplog.at_level(logging.ERROR, logger="pluto.bus"):
        writer.write(msgs.Odometry(x=1.0))
        writer.write(msgs.Odometry(x=2.0))
        assert second.wait(timeout=2.0)
    assert got == [1.0, 2.0]
    assert any("callback on Base/Drive/State failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("garbage_from", ["writer-bus", "reader-bus"])
def test_garbage_is_dropped_and_counted(bus: Bus, make_bus: MakeBus, garbage_from: str) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    reader_bus = make_bus()
    reader = synced_reader(reader_bus, ODOM)
    assert reader.read() == msgs.Odometry(x=1.0)

    source = bus if garbage_from == "writer-bus" else reader_bus
    source.session.put(source.key(ODOM), b"\x00garbage")
    wait_until(lambda: reader.dropped == 1, timeout=2.0, message="the garbage was not counted")
    assert reader.read() == msgs.Odometry(x=1.0)
    assert reader_bus.drops.total == 1
    assert reader_bus.drops.by_interface == {ODOM: 1}
    assert reader.received == 0

    # another message type is garbage too
    source.session.put(source.key(ODOM), msgs.encode(msgs.LaserScan(ranges=[1.0])))
    wait_until(lambda: reader.dropped == 2, timeout=2.0, message="the wrong type was not counted")
    assert reader.read() == msgs.Odometry(x=1.0)

    writer.write(msgs.Odometry(x=2.0))
    assert reader.wait_for_update(timeout=2.0) == msgs.Odometry(x=2.0)  # not woken by the garbage
    assert reader.received == 1
    assert reader.dropped == 2
    assert reader_bus.drops.total == 2
    # the writer's current value is still the good one for late joiners
    assert make_bus().create_reader(ODOM).read() == msgs.Odometry(x=2.0)


def test_garbage_never_reaches_a_subscription_callback(bus: Bus, make_bus: MakeBus) -> None:
    got: list[msgs.Odometry] = []
    arrived = threading.Event()

    def on_value(value: msgs.Odometry) -> None:
        got.append(value)
        arrived.set()

    writer = bus.create_publisher(ODOM)
    sub_bus = make_bus()
    sub = sub_bus.create_subscription(ODOM, on_value, depth=10)
    bus.session.put(bus.key(ODOM), b"\xc1\xc1")
    wait_until(lambda: sub.dropped == 1, timeout=2.0)
    writer.write(msgs.Odometry(x=3.0))
    assert arrived.wait(timeout=2.0)
    assert got == [msgs.Odometry(x=3.0)]
    assert sub_bus.drops.total == 1


def test_drops_are_logged(bus: Bus, make_bus: MakeBus, caplog: pytest.LogCaptureFixture) -> None:
    bus.create_publisher(ODOM)  # first, so the reader's query tells the writer's bus of the reader
    reader_bus = make_bus()
    reader = reader_bus.create_reader(ODOM)
    with caplog.at_level(logging.WARNING, logger="pluto.bus"):
        bus.session.put(bus.key(ODOM), b"\x00garbage")
        wait_until(lambda: reader.dropped == 1, timeout=2.0)
        # counted, then logged, on the bus's delivery thread
        wait_until(
            lambda: any("dropped a message on Base/Drive/State" in r.getMessage() for r in caplog.records),
            timeout=2.0,
            message="the drop was counted but not logged",
        )


def test_multiple_writers_a_live_reader_keeps_the_newest(bus: Bus, make_bus: MakeBus) -> None:
    name = "Localization/Post_Pose"
    other = make_bus()
    first, second = bus.create_publisher(name), other.create_publisher(name)
    first.write(msgs.PoseEstimate(cmd_flags=1))
    second.write(msgs.PoseEstimate(cmd_flags=2))
    # A reader whose first query reached the second writer (it read its value) is known to both writers.
    readers: list[StateReader[msgs.PoseEstimate]] = []
    wait_until(
        lambda: readers.append(bus.create_reader(name)) or readers[-1].read() == msgs.PoseEstimate(cmd_flags=2),
        timeout=2.0,
        message="the owner never got the second writer's value",
    )
    reader = readers[-1]
    for flags, writer in [(3, first), (4, second), (5, first)]:
        writer.write(msgs.PoseEstimate(cmd_flags=flags))
        assert reader.wait_for_update(timeout=2.0).cmd_flags == flags


def test_multiple_writers_late_joiner_gets_the_only_value(bus: Bus, make_bus: MakeBus) -> None:
    name = "Localization/Post_Pose"
    bus.create_publisher(name).write(msgs.PoseEstimate(cmd_flags=1))
    make_bus().create_publisher(name)  # a second writer that has not written yet
    assert make_bus().create_reader(name).read() == msgs.PoseEstimate(cmd_flags=1)


def test_multiple_writers_late_joiner_gets_the_newest(bus: Bus, make_bus: MakeBus) -> None:
    name = "Localization/Post_Pose"
    other = make_bus()
    bus.create_publisher(name).write(msgs.PoseEstimate(cmd_flags=1))  # pose module posts
    other.create_publisher(name).write(msgs.PoseEstimate(cmd_flags=2))  # then slam posts a newer pose
    # Readers that join later, in either process, must see slam's newer pose. Regression: with Zenoh's default
    # query consolidation only one reply per key came back (the last to arrive), whatever its write time.
    assert other.create_reader(name).read() == msgs.PoseEstimate(cmd_flags=2)
    assert bus.create_reader(name).read() == msgs.PoseEstimate(cmd_flags=2)


def test_interface_keys_lists_interfaces_with_a_value(bus: Bus, make_bus: MakeBus) -> None:
    bus.create_publisher(ODOM).write(msgs.Odometry(x=1.0))
    bus.create_publisher("Base/Power")  # never written: no value
    bus.create_service("some/service", lambda request: request)
    bus.declare_module("some-module")
    keys = make_bus().interface_keys()
    assert set(keys) == {ODOM}
    assert abs(keys[ODOM] - time.time()) < 5.0


def test_newcomers_list_the_values_of_every_session_at_once(bus: Bus, make_bus: MakeBus) -> None:
    # Four sessions besides the rendezvous owner, each with a value of its own: a newcomer's first query (with no
    # retry) must reach all of them, however far its links to them have got when it opens.
    names = [f"test/value/{i}" for i in range(4)]
    for name in names:
        make_bus().create_publisher(name, msgs.Heartbeat).write(msgs.Heartbeat())

    def newcomer(_: int) -> set[str]:
        with open_bus() as late:
            return set(late.interface_keys())

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(newcomer, range(4))) == [set(names)] * 4


def test_a_process_that_takes_the_rendezvous_over_reads_the_values_at_once(make_bus: MakeBus) -> None:
    first, peer = make_bus(), make_bus()
    assert first.owner and not peer.owner
    peer.create_publisher(ODOM).write(msgs.Odometry(x=1.5))
    first.close()  # the peer now retries the rendezvous until a new owner takes it
    heir = make_bus()
    assert heir.owner
    assert heir.create_reader(ODOM).read() == msgs.Odometry(x=1.5)  # no wait: it waited for the peer to come


def test_close_is_idempotent_and_closes_readers(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    other = make_bus()
    reader = other.create_reader(ODOM)
    got: list[float] = []
    sub = other.create_subscription(ODOM, lambda value: got.append(value.x), depth=10)
    writer.write(msgs.Odometry(x=1.0))
    assert reader.wait_for_update(timeout=2.0).x == 1.0
    wait_until(lambda: got == [1.0], timeout=2.0)

    other.close()
    assert other.closed
    other.close()  # a second close does nothing
    assert other.closed
    assert sub.name not in {t.name.removeprefix("pluto-sub:") for t in threading.enumerate()}

    writer.write(msgs.Odometry(x=2.0))
    with pytest.raises(BusTimeout):
        reader.wait_for_update(timeout=0.3)  # nothing arrives any more
    assert reader.read() == msgs.Odometry(x=1.0)
    assert reader.received == 1
    assert got == [1.0]


def test_close_leaves_no_thread_behind(make_bus: MakeBus) -> None:
    def pluto_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("pluto-")}

    before = pluto_threads()
    opened = make_bus()
    opened.create_publisher(ODOM).write(msgs.Odometry(x=1.0))
    opened.create_reader(ODOM)
    opened.create_subscription(ODOM, print)
    opened.create_service("a/service", print)
    opened.declare_module("m")
    opened.watch_modules(print)
    assert len(pluto_threads() - before) >= 1  # the executor's worker(s)
    opened.close()
    wait_until(lambda: pluto_threads() <= before, timeout=2.0, message="threads left after close")


def test_threads_do_not_grow_with_the_number_of_interfaces(bus: Bus, make_bus: MakeBus) -> None:
    def pluto_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("pluto-")}

    before = pluto_threads()
    opened = make_bus()
    got: dict[str, int] = {}
    writers = []
    for i in range(40):
        name = f"many/{i}"
        writers.append(bus.create_publisher(name, msgs.Odometry))
        opened.create_subscription(name, lambda _v, n=name: got.__setitem__(n, got.get(n, 0) + 1), msgs.Odometry)
        opened.create_service(f"many/srv{i}", lambda request, i=i: (i, request))

    def all_got() -> bool:  # write again until the writers know every subscriber
        for writer in writers:
            writer.write(msgs.Odometry(x=1.0))
        return len(got) == 40

    wait_until(all_got, timeout=10.0, message="every subscription got a value")
    assert [bus.call(f"many/srv{i}", "x", timeout=5.0) for i in (0, 17, 39)] == [[0, "x"], [17, "x"], [39, "x"]]
    grown = pluto_threads() - before  # the workers of both buses: bounded by the pools, not by 80 entities
    assert len(grown) <= bus.executor.max_workers + opened.executor.max_workers
    assert opened.executor.peak <= opened.executor.max_workers


def test_closed_writer_no_longer_serves_late_joiners(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    writer.close()
    writer.close()
    assert make_bus().create_reader(ODOM).read() is None


def test_open_bus_closes_on_exit() -> None:
    with open_bus() as opened:
        reader: StateReader[msgs.Odometry] = opened.create_reader(ODOM)
        assert not opened.closed
    assert opened.closed
    assert reader.read() is None


@pytest.mark.parametrize("create", ["reader", "publisher", "subscription", "service", "module"])
def test_creating_on_a_closed_bus_raises_bus_error(make_bus: MakeBus, create: str) -> None:
    # Regression: the entity used to be built on the closed Zenoh session first (zenoh.ZError, not a PlutoError).
    closed = make_bus()
    closed.close()
    with pytest.raises(BusError, match="closed"):
        if create == "reader":
            closed.create_reader(ODOM)
        elif create == "publisher":
            closed.create_publisher(ODOM)
        elif create == "subscription":
            closed.create_subscription(ODOM, print)
        elif create == "service":
            closed.create_service("a/service", print)
        else:
            closed.declare_module("m")


def test_a_value_written_once_by_a_session_that_just_joined_reaches_a_reader_made_at_once(
    bus: Bus, make_bus: MakeBus
) -> None:
    """The writer's session is not known yet to the reader's when the reader asks for the current value, and the
    writer wrote before it knew of the reader's subscriber: the reader asks again when the writer becomes known."""
    reader_bus = make_bus()
    reader_bus.settle()
    for i in range(8):
        name = f"Test/Once{i}"
        with open_bus() as joined:
            joined.create_publisher(name, msgs.Odometry).write(msgs.Odometry(x=float(i)))
            reader = reader_bus.create_reader(name, msgs.Odometry, fetch_timeout=0.5)
            got: list[msgs.Odometry] = []
            subscription = reader_bus.create_subscription(name, got.append, msgs.Odometry)
            assert reader.wait_for_value(timeout=5.0) == msgs.Odometry(x=float(i)), i
            wait_until(lambda got=got: bool(got), timeout=5.0, message=f"the subscription gets value {i}")
            assert got == [msgs.Odometry(x=float(i))]
            reader_bus.release(reader)
            reader_bus.release(subscription)


def test_a_reader_whose_writer_comes_later_takes_the_live_value_and_leaves_nothing_behind(
    bus: Bus, make_bus: MakeBus
) -> None:
    other = make_bus()
    reader = other.create_reader(ODOM, fetch_timeout=0.2)
    assert reader.read() is None and reader._late is not None  # waiting for a writer to ask again
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    assert reader.wait_for_value(timeout=5.0) == msgs.Odometry(x=1.0)
    wait_until(lambda: reader._late is None or reader._late._closed, timeout=5.0, message="the second query is over")
    writer.write(msgs.Odometry(x=2.0))
    assert reader.wait_for_update(timeout=5.0) == msgs.Odometry(x=2.0)
    never = other.create_reader("Test/Nobody", msgs.Odometry, fetch_timeout=0.1)
    late = never._late
    assert late is not None and not late._closed
    other.release(never)
    assert late._closed  # its querier and listener went with it


def test_a_subscription_given_a_value_by_a_query_does_not_take_it_again_when_it_comes_live(bus: Bus) -> None:
    """A value written once the writer knew of the subscriber comes live, and a query made at the same time may
    answer with it too: the callback gets it once, and the values after it as they come."""
    got: list[msgs.Odometry] = []
    subscription = bus.create_subscription("Test/Twice", got.append, msgs.Odometry, depth=4, current=False)
    first, second = msgs.Odometry(x=1.0), msgs.Odometry(x=2.0)
    subscription._take_late(first, (77, 1))  # the query's answer: writer 77, its value 1
    subscription._admit_one(first, (time.time(), 1, 77, 0))  # the same value, live
    subscription._admit_one(second, (time.time(), 2, 77, 0))
    wait_until(lambda: len(got) >= 2, timeout=5.0, message="two values")
    assert subscription.wait_idle(5.0)
    assert got == [first, second]
