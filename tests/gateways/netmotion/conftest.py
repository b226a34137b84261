"""Fixtures of the netmotion tests: the simulated arm module on a clock faster than the wall clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pluto.bus import Bus
from pluto.hardware.arm.module import ArmModule
from tests.gateways.netmotion.udp import ScaledClock

RATE = 4.0
"""Module seconds per wall second."""


@pytest.fixture
def clock() -> ScaledClock:
    return ScaledClock(RATE)


@pytest.fixture
def arm(bus: Bus, clock: ScaledClock) -> Iterator[ArmModule]:
    """The simulated arm module, on the netmotion module's clock."""
    module = ArmModule(bus, clock=clock)
    module.start()
    yield module
    module.stop()
