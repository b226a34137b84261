"""The P2OS base module against the emulator: the link state it publishes on ``base/status``."""

from __future__ import annotations

from collections.abc import Callable

from pluto import msgs
from pluto.bus import Bus, StateReader
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from tests.helpers import free_tcp_port, wait_until

GUARD = 10.0  # s: waits are for conditions; this only guards against a hang


def wait_for_status(
    status: StateReader[msgs.FVectorState], predicate: Callable[[msgs.FVectorState], bool]
) -> msgs.FVectorState:
    """The first status (read afresh) that satisfies ``predicate``."""
    found: list[msgs.FVectorState] = []

    def matches() -> bool:
        value = status.read()
        if value is not None and predicate(value):
            found.append(value)
            return True
        return False

    wait_until(matches, timeout=GUARD, message="a matching base/status")
    return found[0]


def test_base_status_shows_the_link_going_down_and_coming_back(bus: Bus) -> None:
    # data = [s since the robot last answered]; element = [link up 1/0, reconnects]
    emulator = P2osEmulator(P2osRobot("p3dx"), port=free_tcp_port())
    emulator.start()
    base = P2osBase(bus, P2osBaseParams(port=emulator.url))
    status = bus.create_reader("base/status", msgs.FVectorState)
    try:
        base.start()
        up = wait_for_status(status, lambda s: True)
        assert up.element == [1, 0]
        assert 0.0 <= up.data[0] < 1.0  # SIPs every 100 ms
        emulator.stop()  # the robot goes away
        down = wait_for_status(status, lambda s: s.element[0] == 0)
        assert down.element == [0, 0]
        later = wait_for_status(status, lambda s: s.element[0] == 0 and s.stamp > down.stamp)
        assert later.data[0] > down.data[0]  # no answer for longer and longer
        emulator.start()  # back, on the same port: the driver reconnects by itself
        back = wait_for_status(status, lambda s: s.element[0] == 1)
        assert back.element == [1, 1]
        assert 0.0 <= back.data[0] < 1.0
        assert base.step_errors == 0
    finally:
        base.stop()
        emulator.stop()
