"""The simulated base's services: the P2OS base's requests and replies, on the simulated body."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import RemoteError
from pluto.hardware.base.module import SimBase
from tests.hardware.base.simbase import sim_base_in_room
from tests.scenarios.stack import Collector, Commander


@pytest.fixture
def sim_base(bus: Bus, tmp_path: Path) -> Iterator[SimBase]:
    with sim_base_in_room(bus, tmp_path) as base:
        yield base


def test_geometry(bus: Bus, sim_base: SimBase) -> None:
    geometry = bus.call("base/geometry", None, dict, timeout=5)
    assert geometry["model"] == "sim" and geometry["radius"] == pytest.approx(0.4)
    poses = geometry["sonar_poses"]
    assert len(poses) == 16 and poses[0] == pytest.approx([0.4, 0.0, 0.0])
    assert poses[4] == pytest.approx([0.0, 0.4, math.pi / 2])


def test_set_and_reset_odometry_move_the_odometry_frame(bus: Bus, sim_base: SimBase) -> None:
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    assert bus.call("base/set_odometry", [1.0, 2.0, 0.5], bool, timeout=5) is True
    placed = odometry.wait_for(lambda o: (o.x, o.y, o.theta) == pytest.approx((1.0, 2.0, 0.5)))
    with Commander(bus, 0.3, 0.0):
        moved = odometry.wait_for(lambda o: o.stamp > placed.stamp and math.hypot(o.x - 1.0, o.y - 2.0) > 0.3)
    # it drives along its heading of the new frame; the true pose is not touched
    assert (moved.x - 1.0) * math.sin(0.5) - (moved.y - 2.0) * math.cos(0.5) == pytest.approx(0.0, abs=1e-6)
    real = truth.read()
    assert real is not None and real.y == pytest.approx(5.0) and real.theta == pytest.approx(0.0)
    assert bus.call("base/reset_odometry", None, bool, timeout=5) is True
    odometry.wait_for(lambda o: o.stamp > moved.stamp and abs(o.x) < 0.05 and abs(o.theta) < 1e-9)
    with pytest.raises(RemoteError, match="set_odometry"):
        bus.call("base/set_odometry", [1.0, 2.0], bool, timeout=5)


def test_motor_power_and_speed_profile(bus: Bus, sim_base: SimBase) -> None:
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    assert bus.call("base/motor_power", False, bool, timeout=5) is True
    start = odometry.wait_for(lambda o: True)
    with Commander(bus, 0.5, 0.0):
        later = odometry.wait_for(lambda o: o.stamp > start.stamp + 1.0)
    assert later.x == start.x and later.v == 0.0  # motors off: commands are zero speed
    assert bus.call("base/motor_power", True, bool, timeout=5) is True
    assert bus.call("base/speed_profile", {"max_speed": 0.2, "max_decel": 2.0}, bool, timeout=5) is True
    assert sim_base.body.params.max_speed == 0.2 and sim_base.body.params.max_accel == 2.0
    with Commander(bus, 0.5, 0.0):
        fast = odometry.wait_for(lambda o: o.v > 0.19)
        steady = odometry.wait_for(lambda o: o.stamp > fast.stamp + 0.5)
    assert steady.v == pytest.approx(0.2)
    with pytest.raises(RemoteError, match="unknown field"):
        bus.call("base/speed_profile", {"top_speed": 1.0}, bool, timeout=5)
    with pytest.raises(RemoteError, match="> 0"):
        bus.call("base/speed_profile", {"max_speed": -1.0}, bool, timeout=5)


def test_modes_and_gains_are_accepted(bus: Bus, sim_base: SimBase) -> None:
    assert bus.call("base/velocity_mode", "direct", str, timeout=5) == "direct"
    with pytest.raises(RemoteError, match="velocity_mode"):
        bus.call("base/velocity_mode", "diagonal", str, timeout=5)
    assert bus.call("base/speed_pid", {"kp": 1.0, "ki": 0.0, "kv": 0.5}, bool, timeout=5) is True
    assert bus.call("base/position_pid", {"kp": 2.0}, bool, timeout=5) is True
    assert sim_base.pid_gains == {"speed": {"kp": 1.0, "ki": 0.0, "kv": 0.5}, "position": {"kp": 2.0}}
    with pytest.raises(RemoteError, match="kp, ki, kv"):
        bus.call("base/speed_pid", {"kd": 1.0}, bool, timeout=5)
