"""The open-loop joint ramps, the simulated arm's speed limits, and the arm module on the bus."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.module import ArmModule, ArmParams
from pluto.hardware.arm.servo import JointRamps
from pluto.hardware.arm.sim import SimulatedArm

NAN = math.nan


def test_a_group_move_arrives_together_after_the_slowest_limit() -> None:
    ramps = JointRamps([0.0, 0.0], [1.0, 10.0], [-2.0, -2.0], [2.0, 2.0])
    duration = ramps.command([0.5, 1.0], None, 0.1, now=5.0)
    assert duration == pytest.approx(0.5)  # joint 0: 0.5 rad at 1 rad/s
    assert ramps.position(5.25) == pytest.approx([0.25, 0.5])  # both halfway
    assert ramps.velocity(5.25) == pytest.approx([1.0, 2.0])
    assert ramps.moving(5.4) and not ramps.moving(5.5)
    assert ramps.position(9.0) == pytest.approx([0.5, 1.0])
    # A commanded speed below the servo's limits the move; targets stay within the limits.
    assert ramps.command([NAN, 5.0], [0.0, 0.5], 0.0, now=10.0) == pytest.approx(2.0)
    assert ramps.target == pytest.approx([0.5, 2.0])
    # A new command starts from where the joints are driven now; NaN keeps a joint's target.
    assert ramps.command([NAN, 1.5], None, 0.0, now=10.5) == pytest.approx(0.025)
    assert ramps.position(10.5) == pytest.approx([0.5, 1.25])
    assert ramps.position(11.0) == pytest.approx([0.5, 1.5])


def test_the_simulated_arm_moves_no_faster_than_its_servos() -> None:
    lynx = ArmModel.load("LynxArm6")
    arm = SimulatedArm(lynx)
    arm.command(np.array([math.pi / 2, NAN, NAN, NAN, NAN, 0.03]), None, 0.032, 0.0)
    assert arm.position(0.15)[0] == pytest.approx(math.pi / 4)  # 90° at 300°/s takes 0.3 s
    assert arm.velocity(0.15)[0] == pytest.approx(math.radians(300))
    assert arm.position(0.15)[5] == pytest.approx(0.015)  # the gripper arrives with it (a group move)
    assert arm.position(0.3)[[0, 5]] == pytest.approx([math.pi / 2, 0.03])
    arm.command(np.array([NAN, NAN, NAN, NAN, NAN, 0.1]), None, 0.0, 1.0)
    assert arm.position(1.2)[5] == pytest.approx(0.07)  # 70 mm at the gripper's 200 mm/s: 0.35 s


@pytest.fixture
def arm_module(bus: Bus) -> Iterator[ArmModule]:
    module = ArmModule(bus, ArmParams(rate_hz=100.0))
    module.start()
    yield module
    module.stop()


def test_the_arm_module_follows_commands_and_publishes_its_state(bus: Bus, arm_module: ArmModule) -> None:
    state = bus.create_reader("Arm/State", msgs.ActuatorState)
    first = state.wait_for_value(timeout=5.0)
    assert first.position == pytest.approx(list(arm_module.model.home))
    commands = bus.create_publisher("Arm/Command", msgs.ActuatorState)
    commands.write(msgs.ActuatorState(position=[0.3, NAN, -0.2], force=[0.05]))
    arrived = state.wait_for_value(timeout=5.0)
    for _ in range(200):
        arrived = state.wait_for_update(timeout=5.0)
        if arrived.position[:3] == pytest.approx([0.3, 0.0, -0.2]):
            break
    assert arrived.position == pytest.approx([0.3, 0.0, -0.2, 0.0, 0.0, 0.0])
    assert arrived.velocity == pytest.approx([0.0] * 6)


def test_the_arm_module_drops_malformed_commands(bus: Bus, arm_module: ArmModule) -> None:
    state = bus.create_reader("Arm/State", msgs.ActuatorState)
    state.wait_for_value(timeout=5.0)
    commands = bus.create_publisher("Arm/Command", msgs.ActuatorState)
    commands.write(msgs.ActuatorState(position=[0.1] * 7))
    for _ in range(100):
        if arm_module.rejected:
            break
        state.wait_for_update(timeout=5.0)
    commands.write(msgs.ActuatorState(position=[math.inf]))
    for _ in range(100):
        if arm_module.rejected == 2:
            break
        state.wait_for_update(timeout=5.0)
    assert arm_module.rejected == 2
    assert state.wait_for_update(timeout=5.0).position == pytest.approx([0.0] * 6)
    assert arm_module.step_errors == 0
