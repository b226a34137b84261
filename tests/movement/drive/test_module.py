"""The drive module on the bus, stepped by the test on a clock it sets: what a jump of the simulated time back (a
new run, a replay started again) does to the command in force."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus, StateWriter
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from tests.gateways.clock import ManualClock
from tests.helpers import wait_until


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(30.0)


@pytest.fixture
def drive(bus: Bus, clock: ManualClock) -> Iterator[DriveModule]:
    """A drive whose control step does not run by itself: the test calls :meth:`DriveModule.step`."""
    module = DriveModule(bus, DriveModuleParams(autostart=False), clock=clock)
    module.start()
    yield module
    module.stop()


def command(bus: Bus, drive: DriveModule, stamp: float, v: float) -> None:
    """Write a velocity command and wait until the drive has received it."""
    writer: StateWriter[msgs.ActuatorState] = bus.create_publisher("drive/command", msgs.ActuatorState)
    before = drive.commands.received
    writer.write(msgs.ActuatorState(stamp=stamp, cmd_flags=0, velocity=[v, 0.0]))
    wait_until(lambda: drive.commands.received > before, message="the drive received the command")
    bus.release(writer)


def speeds(drive: DriveModule, times: list[float]) -> list[float]:
    out = []
    for t in times:
        drive.step(t)
        out.append(drive.last_output.v)
    return out


def test_after_a_jump_the_old_runs_command_is_never_obeyed(bus: Bus, clock: ManualClock, drive: DriveModule) -> None:
    command(bus, drive, 30.0, 0.5)
    assert speeds(drive, [30.0, 30.1, 30.2])[-1] > 0.1  # accelerating
    clock.jump(0.0)  # a new run
    assert speeds(drive, [0.0, 0.1, 0.2, 4.0]) == [0.0, 0.0, 0.0, 0.0]  # the new robot stands still
    # The old run's commander, late: its command is stamped in the old run's future.
    command(bus, drive, 30.3, 0.5)
    assert speeds(drive, [4.1, 4.2]) == [0.0, 0.0] and drive.stale_commands == 1
    command(bus, drive, 4.25, 0.5)  # a command of the new run is obeyed
    assert speeds(drive, [4.3, 4.4])[-1] > 0.0
    assert drive.stale_commands == 1


def test_the_step_notices_the_time_going_back_by_itself(bus: Bus, drive: DriveModule) -> None:
    """The jump's callback may come after the first step of the new run (it runs on a bus thread): that step must
    not carry the old run's command and speeds on."""
    command(bus, drive, 30.0, 0.5)
    assert speeds(drive, [30.0, 30.1, 30.2])[-1] > 0.1
    assert speeds(drive, [0.0, 0.1, 0.2]) == [0.0, 0.0, 0.0]
    command(bus, drive, 0.25, 0.5)
    assert speeds(drive, [0.3, 0.4])[-1] > 0.0  # the time moves on: speeds ramp up again


def test_a_new_run_whose_time_rises_is_a_restart_too(bus: Bus, clock: ManualClock, drive: DriveModule) -> None:
    """A replay that loops moves its times on: only the run id changes, and the clock calls the jump callbacks."""
    command(bus, drive, 30.0, 0.5)
    assert speeds(drive, [30.0, 30.1, 30.2])[-1] > 0.1
    clock.jump(30.5)
    assert speeds(drive, [30.5, 30.6]) == [0.0, 0.0]
    command(bus, drive, 30.6, 0.5)  # not in any old run's future: obeyed
    assert speeds(drive, [30.7, 30.8])[-1] > 0.0
