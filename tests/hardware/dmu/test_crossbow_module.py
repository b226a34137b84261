"""The Crossbow inertial unit server on the bus against the emulated unit."""

from __future__ import annotations

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import PlutoError
from pluto.hardware.dmu.crossbow_module import CrossbowDmu, CrossbowDmuParams
from pluto.hardware.dmu.emulate import CrossbowDevice, DeviceEmulator, SyntheticMotion
from pluto.hardware.dmu.module import SimDmuModule
from pluto.runtime.registry import load_driver_class
from tests.helpers import free_tcp_port
from tests.scenarios.stack import Collector

GUARD = 10.0


def test_drivers_are_installed() -> None:
    assert load_driver_class("dmu", "crossbow") is CrossbowDmu
    assert load_driver_class("dmu", "sim") is SimDmuModule
    assert set(CrossbowDmu.provides) >= set(SimDmuModule.provides)


def test_raw_state_and_status_through_an_outage(bus: Bus) -> None:
    port = free_tcp_port()
    unit = DeviceEmulator(CrossbowDevice(SyntheticMotion(omega=0.3, tilt=0.0)), port=port).start()
    dmu = CrossbowDmu(bus, CrossbowDmuParams(port=unit.url, link_timeout=0.2))
    raw = Collector(bus, "DMU/Raw", msgs.DmuRaw)
    states = Collector(bus, "DMU/State", msgs.DmuState)
    status = Collector(bus, "dmu/status", msgs.FVectorState)
    try:
        dmu.start()
        start = states.wait_for(lambda s: True)
        first = states.wait_for(lambda s: s.stamp > start.stamp + 0.1)  # a filter delay of heading history
        r = raw.wait_for(lambda s: True)
        assert r.rates[2] == pytest.approx(0.3, abs=0.005) and r.accelerations[2] == pytest.approx(9.81, abs=0.01)
        up = status.wait_for(lambda s: s.element[0] == 1)
        assert up.element[:2] == [1, 0] and 0.0 <= up.data[0] < 0.2
        later = states.wait_for(lambda s: s.stamp > first.stamp + 0.5)
        assert later.theta - first.theta == pytest.approx(0.3 * (later.stamp - first.stamp), rel=0.1)
        unit.stop()
        down = status.wait_for(lambda s: s.element[0] == 0 and s.stamp > up.stamp)
        n = len(states.snapshot())
        status.wait_for(lambda s: s.stamp > down.stamp + 0.2)
        assert len(states.snapshot()) == n  # nothing stale published while the link is down
        unit.start()
        back = status.wait_for(lambda s: s.element[0] == 1 and s.stamp > down.stamp)
        assert back.element[1] == 1
        states.wait_for(lambda s: s.stamp > back.stamp - 0.2)
        assert dmu.step_errors == 0
    finally:
        dmu.stop()
        unit.stop()
        for c in (raw, states, status):
            c.close()


def test_no_unit_fails_the_start(bus: Bus) -> None:
    dmu = CrossbowDmu(bus, CrossbowDmuParams(port=f"socket://127.0.0.1:{free_tcp_port()}"))
    with pytest.raises(PlutoError, match="cannot open"):
        dmu.start()
    dmu.stop()
