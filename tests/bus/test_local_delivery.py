"""Delivery within one session: on a session that delivers locally (a fleet's), a writer hands its values to its own
session's readers and listeners itself and puts to other sessions only while one reads (on a router); the robots of a
fleet share one session; elsewhere Zenoh delivers within the session as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from pluto import msgs
from pluto.bus import Bus, BusError
from pluto.bus.config import bus_config
from pluto.bus.session import write_mark
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]
ODOM = "Base/Drive/State"
POWER = "Base/Power"


@pytest.fixture
def fleet_bus() -> Iterator[Bus]:
    """A bus whose writers deliver to its own readers themselves (a fleet's), the first of the test: the router."""
    with Bus(deliver_locally=True) as opened:
        yield opened


def test_a_reader_of_the_writers_session_has_the_value_when_the_write_returns(fleet_bus: Bus) -> None:
    bus = fleet_bus
    reader = bus.create_reader(ODOM)
    writer = bus.create_publisher(ODOM)
    for x in range(1, 51):
        writer.write(msgs.Odometry(x=float(x)))
        assert reader.read() == msgs.Odometry(x=float(x))  # no hand-over to another thread in between
    assert reader.received == 50 and reader.dropped == 0


def test_a_listener_of_the_session_hears_its_writers_with_their_marks_until_released(fleet_bus: Bus) -> None:
    bus = fleet_bus
    heard: list[tuple[str, Any, tuple[float, int, int, int]]] = []
    listening = bus.declare_subscriber(f"{bus.prefix}/Base/**", lambda s: heard.append(_sample(s)))
    odom, power, other = bus.create_publisher(ODOM), bus.create_publisher(POWER), bus.create_publisher("Sick/Scan")
    odom.write(msgs.Odometry(x=1.0))
    power.write(msgs.Power(voltage=12.5))
    other.write(msgs.LaserScan(ranges=[1.0]))  # not under Base/
    odom.write(msgs.Odometry(x=2.0))
    assert [(key, value) for key, value, _mark in heard] == [
        (bus.key(ODOM), msgs.Odometry(x=1.0)),
        (bus.key(POWER), msgs.Power(voltage=12.5)),
        (bus.key(ODOM), msgs.Odometry(x=2.0)),
    ]
    assert [mark[1:3] for _key, _value, mark in heard] == [
        (1, odom.writer_id),
        (1, power.writer_id),
        (2, odom.writer_id),
    ]
    bus.release(listening)
    odom.write(msgs.Odometry(x=3.0))
    assert len(heard) == 3


def _sample(sample: Any) -> tuple[str, Any, tuple[float, int, int, int]]:
    key = str(sample.key_expr)
    cls = msgs.Odometry if key.endswith(ODOM) else msgs.Power
    return key, msgs.decode(sample.payload.to_bytes(), cls), write_mark(sample.attachment)


def test_a_routers_writer_puts_only_while_another_session_reads(fleet_bus: Bus, make_bus: MakeBus) -> None:
    bus = fleet_bus
    assert bus.routes  # the first bus of the test owns the rendezvous
    writer = bus.create_publisher(ODOM)
    local = bus.create_reader(ODOM)
    for x in range(1, 11):
        writer.write(msgs.Odometry(x=float(x)))
    assert writer.remote_puts == 0 and local.read() == msgs.Odometry(x=10.0)

    # A reader of another session asks for the current value after declaring its subscriber: from the reply on,
    # the writer puts, whenever Zenoh's news of the subscriber reaches it.
    other = make_bus()
    remote = other.create_reader(ODOM)
    assert remote.read() == msgs.Odometry(x=10.0)
    writer.write(msgs.Odometry(x=11.0))
    assert writer.remote_puts == 1
    assert remote.wait_for_update(5.0) == msgs.Odometry(x=11.0)

    # Once it has gone, the writer stops putting again.
    other.close()
    wait_until(lambda: _put_count_of_a_write(writer) == 0, message="the writer kept putting with no reader left")
    assert local.read() == msgs.Odometry(x=-1.0)  # its own session's readers still get every value


def _put_count_of_a_write(writer: Any) -> int:
    before = writer.remote_puts
    writer.write(msgs.Odometry(x=-1.0))
    return int(writer.remote_puts - before)


def test_a_peers_writer_always_puts(fleet_bus: Bus) -> None:
    with Bus(deliver_locally=True) as peer:
        assert not peer.routes  # it joined the rendezvous
        writer = peer.create_publisher(ODOM)
        writer.write(msgs.Odometry(x=1.0))
        assert writer.remote_puts == 1  # a peer is not told of the subscribers behind a router: it cannot skip


def test_elsewhere_zenoh_delivers_within_the_session_once(bus: Bus) -> None:
    assert not bus.local.active
    heard: list[Any] = []
    bus.declare_subscriber(f"{bus.prefix}/**", heard.append)
    reader = bus.create_reader(ODOM)
    writer = bus.create_publisher(ODOM)
    writer.write(msgs.Odometry(x=1.0))
    assert reader.wait_for_value(5.0) == msgs.Odometry(x=1.0)
    wait_until(lambda: len(heard) == 1, message="the listener did not hear the write")
    writer.write(msgs.Odometry(x=2.0))
    assert reader.wait_for_update(5.0) == msgs.Odometry(x=2.0)
    wait_until(lambda: len(heard) == 2, message="the listener did not hear the second write")
    assert writer.remote_puts == 2 and reader.received == 2  # each value once


def test_robots_sharing_a_session_read_each_other_and_leave_it_one_by_one(bus: Bus) -> None:
    outside = bus
    config = bus_config()
    first = Bus(msgspec.structs.replace(config, robot=f"{config.robot}-a"), deliver_locally=True)
    second = Bus(msgspec.structs.replace(config, robot=f"{config.robot}-b"), share=first)
    try:
        assert second.session is first.session and second.zid == first.zid and second.local.active
        odom = second.create_publisher(ODOM)
        seen_from_first = first.create_reader(ODOM, robot=second.robot)
        seen_from_outside = outside.create_reader(ODOM, robot=second.robot)
        odom.write(msgs.Odometry(x=1.0))
        assert seen_from_first.read() == msgs.Odometry(x=1.0)  # handed over by the writer itself
        assert seen_from_outside.wait_for_value(5.0) == msgs.Odometry(x=1.0)  # through Zenoh

        token = second.declare_module("base")
        wait_until(lambda: "base" in _modules(outside, second.robot), message="the second robot's module was not seen")
        second.release(token)
    finally:
        second.close()
    # The session stays for the first robot.
    power = first.create_publisher(POWER)
    seen_power = outside.create_reader(POWER, robot=first.robot)
    power.write(msgs.Power(voltage=12.0))
    assert seen_power.wait_for_value(5.0) == msgs.Power(voltage=12.0)
    first.close()
    with pytest.raises(BusError, match="closed"):
        Bus(config, share=first)


def _modules(bus: Bus, robot: str) -> list[str]:
    with Bus(msgspec.structs.replace(bus.config, robot=robot)) as other:
        return other.live_modules()
