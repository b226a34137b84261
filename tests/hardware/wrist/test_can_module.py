"""The CAN wrist module on the bus against the emulated unit: Wrist/State and wrist/status as the simulated wrist's."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from pluto import msgs, names
from pluto.bus import Bus, StateReader
from pluto.errors import PlutoError
from pluto.hardware.wrist import powercube as pc
from pluto.hardware.wrist.can_module import CanWristModule, CanWristParams
from pluto.hardware.wrist.emulate import PowerCubeEmulator
from pluto.hardware.wrist.sim import WristParams
from pluto.runtime.registry import load_module_class
from tests.helpers import wait_until

GUARD = 10.0  # s: waits are for conditions; this only guards against a hang


def wait_for(reader: StateReader[msgs.Message], predicate: Callable[[msgs.Message], bool]) -> msgs.Message:
    found: list[msgs.Message] = []

    def matches() -> bool:
        value = reader.read()
        if value is not None and predicate(value):
            found.append(value)
            return True
        return False

    wait_until(matches, timeout=GUARD, message="a matching value")
    return found[0]


def test_the_can_driver_is_installed_for_the_wrist() -> None:
    assert load_module_class("wrist", {"driver": "can"}) is CanWristModule
    assert load_module_class("wrist", {"driver": "sim"}).__name__ == "SimWristModule"


def test_the_module_moves_the_unit_and_reports_the_link(bus: Bus) -> None:
    channel = f"wrist-{uuid.uuid4().hex[:8]}"
    unit = PowerCubeEmulator(channel, params=WristParams(pan_limits=(-1.0, 1.0), tilt_limits=(-0.5, 0.8)))
    unit.start()
    module = CanWristModule(bus, CanWristParams(interface="virtual", channel=channel, link_timeout=0.3))
    state = bus.create_reader(names.WRIST_STATE)
    status = bus.create_reader("wrist/status", msgs.FVectorState)
    commands = bus.create_publisher(names.WRIST_COMMAND)
    try:
        module.start()
        up = wait_for(status, lambda s: True)
        assert up.element == [1, 0, 0]  # link up, no reconnects, no malformed frames
        assert 0.0 <= up.data[0] < 0.3
        wait_for(state, lambda s: True)
        commands.write(msgs.ActuatorState(position=[0.6, 2.0], velocity=[2.0, 2.0], force=[6.0, 6.0]))
        # there, at rest (the tilt held at its limit, 0.8)
        wait_for(state, lambda s: s.position == pytest.approx([0.6, 0.8], abs=1e-6) and s.velocity == [0, 0])
        unit.mute()  # the unit stops answering: the link goes down and Wrist/State is no longer written
        down = wait_for(status, lambda s: s.element[0] == 0)
        assert down.data[0] >= 0.3
        last = state.read()
        later = wait_for(status, lambda s: s.stamp > down.stamp + 0.2)
        assert later.element[0] == 0
        assert state.read() == last
        unit.mute(False)
        back = wait_for(status, lambda s: s.element[0] == 1)
        assert back.element[:2] == [1, 1]
        assert module.step_errors == 0
    finally:
        module.stop()
        wait_until(lambda: unit.state_word(0) & unit.state_word(1) & pc.STATE_HALTED, timeout=GUARD)
        unit.stop()


def test_a_unit_that_does_not_answer_fails_the_start(bus: Bus) -> None:
    module = CanWristModule(
        bus, CanWristParams(interface="virtual", channel=f"wrist-{uuid.uuid4().hex[:8]}", connect_timeout=0.2)
    )
    with pytest.raises(PlutoError, match="no PowerCube answered"):
        module.start()
    module.stop()


def test_the_module_can_bring_its_own_emulated_unit(bus: Bus) -> None:
    params = CanWristParams(interface="virtual", channel=f"wrist-{uuid.uuid4().hex[:8]}", emulate=True)
    module = CanWristModule(bus, params)
    state = bus.create_reader(names.WRIST_STATE)
    commands = bus.create_publisher(names.WRIST_COMMAND)
    try:
        module.start()
        wait_for(state, lambda s: True)
        commands.write(msgs.ActuatorState(position=[-0.3, 0.2], velocity=[2.0, 2.0], force=[6.0, 6.0]))
        wait_for(state, lambda s: s.position == pytest.approx([-0.3, 0.2], abs=1e-6))
    finally:
        module.stop()


@pytest.mark.parametrize(
    "bad",
    [{"pan_id": 0}, {"pan_id": 3, "tilt_id": 3}, {"pan_min": 1.0, "pan_max": -1.0}, {"bitrate": -1}, {"channel": ""}],
)
def test_bad_parameters_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CanWristParams(**bad)  # type: ignore[arg-type]
