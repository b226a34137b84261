"""ArmProxy against a running arm module: joints, moves by number and by name, waiting for a posture; the arm's own
model from its ``model`` service, and forward and inverse kinematics with it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from pluto.bus import Bus, BusTimeout
from pluto.errors import ConfigError
from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.module import ArmModelFile, ArmModule, ArmParams, read_model_file
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


def test_the_model_is_the_arm_modules_own(bus: Bus, tmp_path: Path) -> None:
    shipped = (resources.files("pluto.hardware.arm") / "models" / "LynxArm6.toml").read_text(encoding="utf-8")
    path = tmp_path / "long_elbow.toml"
    path.write_text(shipped.replace('name = "LynxArm6"', 'name = "LongElbow"', 1))
    module = ArmModule(bus, ArmParams(model=str(path)))
    module.start()
    try:
        served = bus.call("arm/model", reply_type=ArmModelFile)
        assert served.name == "LongElbow" and served.source == str(path) and served.text == path.read_text()
        with ArmProxy(bus, mask=0, start=False) as proxy:
            assert proxy.model.name == "LongElbow"
            assert proxy.model.output_names == ArmModel.load("LynxArm6").output_names
    finally:
        module.stop()


def test_forward_kinematics_and_point_ik_with_the_arms_model(arm: ArmProxy) -> None:
    lynx = ArmModel.load("LynxArm6")
    home = arm.wait_until([])
    gripper = lynx.links[-1].name
    assert arm.forward_kinematics(gripper) == pytest.approx(lynx.link_transform(home, gripper))
    q = [0.3, -0.2, 0.4, 0.1, 0.0, 0.01]
    assert arm.forward_kinematics(3, q) == pytest.approx(lynx.link_transform(q, 3))
    target = lynx.link_transform(q, gripper)[:3, 3]
    result = arm.point_ik(gripper, target)
    assert result.success and result.error < 1e-4
    assert arm.forward_kinematics(gripper, result.q)[:3, 3] == pytest.approx(target, abs=1e-4)
    moved = arm.ik_joints(gripper)
    unmoved = [j for j in range(len(home)) if j not in moved]
    assert moved and unmoved and np.allclose(result.q[unmoved], np.array(home)[unmoved])  # as they were
    with pytest.raises(KeyError):
        arm.forward_kinematics(99)
    with pytest.raises(ValueError, match="joint values"):
        arm.forward_kinematics(3, [0.0, 0.0])


def test_model_files_are_read_by_name_or_path(tmp_path: Path) -> None:
    assert read_model_file("LynxArm6").model().output_names == ArmModel.load("LynxArm6").output_names
    with pytest.raises(ConfigError, match="no arm model named 'Nope'"):
        read_model_file("Nope")
    with pytest.raises(ConfigError, match="cannot read arm model"):
        read_model_file(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        read_model_file(str(bad))
