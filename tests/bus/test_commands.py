"""Commands are not states: never handed to a reader that joins later, forgotten once older than their max age."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from tests.bus.test_state import synced_reader
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]
COMMAND = "Base/Drive/Command"
ODOM = "Base/Drive/State"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def go(v: float = 0.9, w: float = -2.0) -> msgs.ActuatorState:
    return msgs.ActuatorState(velocity=[v, w])


def test_the_command_table_names_known_interfaces_of_actuator_commands() -> None:
    for name, age in names.COMMANDS.items():
        assert names.interface(name).type is msgs.ActuatorState
        assert age > 0
    assert names.command_max_age("Base/Drive/State") is None


def test_a_command_written_before_a_reader_joined_is_never_handed_to_it(bus: Bus, make_bus: MakeBus) -> None:
    command = bus.create_publisher(COMMAND)
    state = bus.create_publisher(ODOM)
    command.write(go())
    state.write(msgs.Odometry(x=1.0))
    other = make_bus()
    late_state = synced_reader(other, ODOM)  # the state is served to the late joiner: the query went through
    late_command = other.create_reader(COMMAND)
    assert late_state.read() == msgs.Odometry(x=1.0)
    assert late_command.read() is None
    # the writer still says the interface is there (MOM lists it), but the value is not taken
    assert COMMAND in other.interface_keys()
    command.write(go(0.1, 0.0))
    assert late_command.wait_for_update(timeout=5.0) == go(0.1, 0.0)


def test_a_writer_flags_its_values_as_commands_for_readers_that_do_not_know(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher("my/arm/command", msgs.ActuatorState, command=True)
    writer.write(go())
    bus.create_publisher(ODOM).write(msgs.Odometry())
    other = make_bus()
    synced_reader(other, ODOM)
    reader = other.create_reader("my/arm/command", msgs.ActuatorState)
    assert reader.max_age is None  # it does not know, yet takes nothing from the query
    assert reader.read() is None


def test_a_command_expires_after_its_max_age_by_the_readers_clock(bus: Bus) -> None:
    clock = FakeClock()
    reader = bus.create_reader(COMMAND, max_age=1.0, clock=clock)
    writer = bus.create_publisher(COMMAND)
    writer.write(go())
    assert reader.wait_for_update(timeout=5.0) == go()
    clock.now += 1.0
    assert reader.read() == go()
    clock.now += 0.01
    assert reader.read() is None
    assert reader.expired == 1
    assert reader.read() is None and reader.expired == 1  # counted once
    writer.write(go(0.2, 0.0))
    assert reader.wait_for_update(timeout=5.0) == go(0.2, 0.0)


def test_a_command_from_before_the_clock_jumped_back_is_dropped(bus: Bus) -> None:
    clock = FakeClock()
    reader = bus.create_reader(COMMAND, clock=clock)
    bus.create_publisher(COMMAND).write(go())
    assert reader.wait_for_update(timeout=5.0) == go()
    clock.now = 5.0  # a new simulation run: the command belongs to the old one
    assert reader.read() is None


def test_the_default_max_age_is_the_tables(bus: Bus) -> None:
    assert bus.create_reader(COMMAND).max_age == names.COMMANDS[COMMAND]
    assert bus.create_reader(ODOM).max_age is None
    with pytest.raises(ValueError, match="max_age"):
        bus.create_reader(COMMAND, max_age=0.0)


def test_a_subscription_to_a_command_gets_no_current_value(bus: Bus, make_bus: MakeBus) -> None:
    writer = bus.create_publisher(COMMAND)
    writer.write(go())
    bus.create_publisher(ODOM).write(msgs.Odometry())
    got: list[msgs.ActuatorState] = []
    arrived = threading.Event()

    def on_command(value: msgs.ActuatorState) -> None:
        got.append(value)
        arrived.set()

    other = make_bus()
    other.create_subscription(COMMAND, on_command, depth=10)  # current=True, yet a command is not handed over
    synced_reader(other, ODOM)
    writer.write(go(0.3, 0.0))
    assert arrived.wait(timeout=5.0)
    assert got == [go(0.3, 0.0)]


def test_a_command_that_waited_too_long_in_a_subscription_queue_is_skipped(bus: Bus) -> None:
    clock = FakeClock()
    release = threading.Event()
    first = threading.Event()
    got: list[float] = []

    def slow(value: msgs.ActuatorState) -> None:
        got.append(value.velocity[0])
        first.set()
        release.wait(5.0)

    sub = bus.create_subscription(COMMAND, slow, depth=10, max_age=1.0, clock=clock)
    writer = bus.create_publisher(COMMAND)
    writer.write(go(0.1))
    assert first.wait(5.0)
    writer.write(go(0.2))  # queued behind the slow callback
    writer.write(go(0.3))
    wait_until(lambda: sub.received == 3, timeout=5.0, message="both queued commands arrived")
    clock.now += 2.0  # they waited 2 s: too old to obey
    release.set()
    assert sub.wait_idle(5.0)
    assert got == [0.1]
    assert sub.expired == 2
