"""The avoid module on the bus, stepped by the test on a clock it sets: a jump of the simulated time back (a new
run, a replay started again) releases its goto."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.movement.avoid.core import Mode
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from tests.gateways.clock import ManualClock
from tests.helpers import wait_until


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(30.0)


@pytest.fixture
def avoid(bus: Bus, clock: ManualClock) -> Iterator[AvoidModule]:
    """An avoid module whose control step does not run by itself: the test calls :meth:`AvoidModule.step`."""
    module = AvoidModule(bus, AvoidModuleParams(autostart=False), clock=clock)
    module.start()
    yield module
    module.stop()


def goto(bus: Bus, stamp: float) -> None:
    writer = bus.create_publisher("avoidance/command", msgs.ActuatorState)
    writer.write(msgs.ActuatorState(stamp=stamp, cmd_flags=Mode.GOTO, position=[5.0, 0.0], velocity=[0.5, 1.0]))
    bus.release(writer)


def step_until_taken(avoid: AvoidModule, now: float) -> None:
    def taken() -> bool:
        avoid.step(now)
        return avoid.command_in_force is not None

    wait_until(taken, message="the avoid module took the goto")


def test_a_jump_releases_the_goto(bus: Bus, clock: ManualClock, avoid: AvoidModule) -> None:
    lock = threading.Lock()
    drive: list[msgs.ActuatorState] = []

    def on_drive(value: msgs.ActuatorState) -> None:
        with lock:
            drive.append(value)

    bus.create_subscription("drive/command", on_drive, msgs.ActuatorState, depth=256)
    goto(bus, 30.0)
    step_until_taken(avoid, 30.0)
    clock.jump(0.0)  # a new run
    avoid.step(0.0)
    assert avoid.command_in_force is None

    def stopped() -> bool:
        with lock:
            return any(d.stamp == 0.0 and d.velocity == [0.0, 0.0] for d in drive)

    wait_until(stopped, message="the drive was told to stop, at the new run's time")
    goto(bus, 29.0)  # the old run's commander, late: stamped in the old run's future
    for t in (0.1, 0.2, 0.3):
        avoid.step(t)
        assert avoid.command_in_force is None
    goto(bus, 0.35)  # a goto of the new run is carried out
    step_until_taken(avoid, 0.4)
    assert avoid.active is False  # its control step is the test's: the jump did not start or stop it
