"""The simulated inertial unit's server: it measures the body at the body's time, whatever its own loop's timing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.dmu.module import SimDmuModule, SimDmuParams
from pluto.sim.module import SimModule, SimParams
from tests.scenarios.stack import ROOM, Collector


def test_states_carry_the_time_of_the_body_they_measured(bus: Bus, tmp_path: Path) -> None:
    room = tmp_path / "room.xml"
    room.write_text(ROOM)
    sim = SimModule(bus, SimParams(world=str(room), rate=1.0))
    sim.start()
    # The body's poses come from a writer far behind the unit's wall clock (a base running late, or a replay).
    truth = bus.create_publisher("Sim/Truth", msgs.Odometry)
    truth.write(msgs.Odometry(stamp=100.0, theta=0.0, omega=0.5))
    dmu = SimDmuModule(bus, SimDmuParams(time_constant=0.1))
    states = Collector(bus, "DMU/State", msgs.DmuState)
    try:
        dmu.start()
        first = states.wait_for(lambda s: True)
        for k in range(1, 81):  # turning at 0.5 rad/s for 4 s of body time, 50 ms apart
            truth.write(msgs.Odometry(stamp=100.0 + 0.05 * k, theta=0.025 * k, omega=0.5))
            states.wait_for(lambda s, k=k: s.stamp >= 100.0 + 0.05 * k - 0.1 - 1e-9)
        last = states.snapshot()[-1]
    finally:
        dmu.stop()
        sim.stop()
    assert first.stamp == pytest.approx(100.0 - 0.1)  # the body's time less the filter's delay
    assert last.stamp == pytest.approx(104.0 - 0.1)
    # each body pose measured once: stamps strictly increase, one per pose written
    stamps = [s.stamp for s in states.snapshot()]
    assert stamps == sorted(set(stamps))
    # the heading follows the body's, a filter delay behind: θ(t - τ) = 0.5·(t - τ - 100) in steady turning
    assert last.theta == pytest.approx(0.5 * (last.stamp - 100.0), abs=0.02)
    assert math.isfinite(last.rates[2]) and last.rates[2] == pytest.approx(0.5, abs=0.05)
