"""A command written to a robot that was not there is not obeyed by the robot that comes later.

The finding: a velocity written once to ``Base/Drive/Command`` by a gateway left running was served 40 minutes later
to a freshly started simulator, which drove into a wall with no live commander. Commands are not states: a base that
joins after a command was written never sees it, while a command written after it joined still drives it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.profiles import load_profile
from tests.bus.test_state import synced_reader
from tests.scenarios.stack import Lockstep, Script, without

pytestmark = pytest.mark.scenario


def test_a_command_left_on_the_bus_does_not_drive_a_base_started_later(
    bus: Bus, make_bus: Callable[..., Bus], room: Path
) -> None:
    gateway = make_bus()  # a client left running, as the XML gateway was
    stale = gateway.create_publisher("Base/Drive/Command", msgs.ActuatorState)
    stale.write(msgs.ActuatorState(velocity=[0.94, -2.0]))
    moved: dict[str, float] = {}

    def watch(now: float) -> Generator[None, float, None]:
        start = truth.read()
        assert start is not None
        while now < 3.0:  # three simulated seconds with the stale command on the bus
            now = yield
        after = truth.read()
        assert after is not None
        moved["stale"] = math.hypot(after.x - start.x, after.y - start.y)
        while now < 5.0:  # a fresh command, written now, is obeyed
            fresh.write(msgs.ActuatorState(velocity=[0.5, 0.0]))
            now = yield
        end = truth.read()
        assert end is not None
        moved["fresh"] = math.hypot(end.x - after.x, end.y - after.y)

    with Lockstep(bus) as sim:
        sim.start(without(load_profile("sim"), "localization"), world=str(room), seed=1)
        # the new base has asked the bus for the current values: the gateway's command was there to be served
        synced_reader(gateway, "Base/Drive/State")
        script = Script(bus, run=watch, rate_hz=10.0)
        truth = script.reader("Sim/Truth", msgs.Odometry)
        fresh = script.publisher("Base/Drive/Command", msgs.ActuatorState)
        sim.add(script)
        sim.resume()
        script.wait()
    assert moved["stale"] == 0.0
    assert moved["fresh"] > 0.5  # ~2 s at up to 0.5 m/s after the acceleration
