"""ArmProxy against a running arm module: joints, moves by number and by name, waiting for a posture."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from pluto.bus import Bus, BusTimeout
from pluto.hardware.arm.module import ArmModule, ArmParams
from pluto.hardware.arm.proxy import ArmProxy


@pytest.fixture
def arm(bus: Bus) -> Iterator[ArmProxy]:
    module = ArmModule(bus, ArmParams(rate_hz=100.0))
    module.start()
    proxy = ArmProxy(bus, start=False)
    yield proxy
    proxy.close()
    module.stop()


def test_moves_by_number_and_by_name_and_waits_for_the_posture(arm: ArmProxy) -> None:
    home = arm.wait_until([])
    assert len(home) == len(arm.model.output_names)
    target = [0.3, math.nan, math.nan, math.nan, math.nan, math.nan]
    arm.move(target)
    reached = arm.wait_until(target, timeout=5.0)
    assert reached[0] == pytest.approx(0.3, abs=1e-3) and reached[1:] == pytest.approx(home[1:])
    name = arm.model.output_names[1]
    arm.move({name: -0.2}, duration=0.2)
    reached = arm.wait_until([0.3, -0.2], timeout=5.0)
    assert reached[1] == pytest.approx(-0.2, abs=1e-3)
    assert arm.joints() == pytest.approx(reached, abs=1e-3)


def test_refuses_what_it_cannot_send(arm: ArmProxy) -> None:
    with pytest.raises(ValueError, match="no joint 'elbow2'"):
        arm.move({"elbow2": 0.1})
    with pytest.raises(ValueError, match="speeds"):
        arm.move([0.1], speeds=[-1.0])
    with pytest.raises(ValueError, match="duration"):
        arm.move([0.1], duration=math.inf)


def test_waiting_for_an_unreachable_posture_times_out(arm: ArmProxy) -> None:
    with pytest.raises(BusTimeout, match="did not reach"):
        arm.wait_until([100.0], timeout=0.5)  # beyond the joint's limit: the arm stops at the limit
