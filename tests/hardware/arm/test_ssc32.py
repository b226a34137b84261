"""The SSC-32 backend: the exact bytes of its move commands on a fake serial device and on loop://, the joint value
<-> pulse mapping of the model, the open-loop state, and link failures."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import serial  # type: ignore[import-untyped]

from pluto.errors import LocalProtocolError
from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.ssc32 import Ssc32Arm, Ssc32Error, move_command, pulse_of, speed_of, value_of

NAN = math.nan


class FakeSerial:
    """A serial device that records what is written (and can be told to fail)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.opened_with: tuple[str, dict[str, Any]] | None = None
        self.fail = False
        self.closed = 0

    def open(self, url: str, **kwargs: Any) -> FakeSerial:
        self.opened_with = (url, kwargs)
        return self

    def write(self, data: bytes) -> int:
        if self.fail:
            raise serial.SerialException("device reports readiness to read but returned no data")
        self.written.append(bytes(data))
        return len(data)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(scope="module")
def lynx() -> ArmModel:
    return ArmModel.load("LynxArm6")


def test_move_command_bytes() -> None:
    assert move_command([(0, 1500, None)]) == b"#0P1500\r"
    assert move_command([(0, 1500, None), (5, 2400, 750)], 32) == b"#0P1500#5P2400S750T32\r"
    assert move_command([(31, 500, 1)], 0) == b"#31P500S1T0\r"
    for bad in ([], [(32, 1500, None)], [(0, 499, None)], [(0, 2501, None)], [(0, 1500, 0)]):
        with pytest.raises(LocalProtocolError):
            move_command(bad)
    with pytest.raises(LocalProtocolError):
        move_command([(0, 1500, None)], 70000)


def test_joint_values_map_linearly_onto_pulses(lynx: ArmModel) -> None:
    shoulder, gripper = lynx.link("Shldr:rot"), lynx.link("Gripper")
    assert pulse_of(shoulder, 0.0) == 1500
    assert pulse_of(shoulder, -math.pi / 2) == 600 and pulse_of(shoulder, math.pi / 2) == 2400
    assert pulse_of(shoulder, math.radians(45)) == 1950
    assert pulse_of(shoulder, 5.0) == 2400  # held within the limits
    assert pulse_of(gripper, 0.0) == 2400 and pulse_of(gripper, 0.1) == 600  # mounted the other way
    assert value_of(shoulder, 1950) == pytest.approx(math.radians(45))
    assert value_of(gripper, 1500) == pytest.approx(0.05)
    assert speed_of(shoulder, math.radians(90)) == 900  # 1800 µs over 180°: 10 µs per degree
    assert speed_of(gripper, 0.01) == 180
    assert speed_of(shoulder, 0.0) is None and speed_of(shoulder, math.inf) is None


def test_a_command_writes_one_group_move_of_the_joints_it_names(lynx: ArmModel) -> None:
    fake = FakeSerial()
    arm = Ssc32Arm(lynx, "/dev/ttyUSB7", 38400, opener=fake.open)
    assert fake.opened_with is not None and fake.opened_with[0] == "/dev/ttyUSB7"
    assert fake.opened_with[1]["baudrate"] == 38400
    arm.command(np.array([0.0, math.radians(45), NAN, NAN, NAN, 0.05]), None, 0.032, 0.0)
    arm.command(np.array([NAN, NAN, math.radians(-90), NAN, NAN, NAN]), np.array([0, 0, math.pi / 2, 0, 0, 0]), 1.5, 1)
    arm.command(np.array([math.radians(10.04), NAN, NAN, NAN, NAN, NAN]), None, 0.0, 2.0)
    arm.command(np.full(6, NAN), None, 0.032, 3.0)  # nothing to move: nothing written
    assert fake.written == [b"#0P1500#1P1950#5P1500T32\r", b"#2P600S900T1500\r", b"#0P1600\r"]
    assert arm.pulses() == [1600, 1950, 600, None, None, 1500]
    assert arm.writes == 3
    arm.close()
    arm.close()
    assert fake.closed == 1


def test_the_state_is_the_commanded_ramp_of_whole_pulses(lynx: ArmModel) -> None:
    arm = Ssc32Arm(lynx, "x", opener=FakeSerial().open)
    assert np.allclose(arm.position(0.0), lynx.home)
    arm.command(np.array([math.radians(10.04), 0.0, 0.0, 0.0, 0.0, 0.0]), None, 2.0, 10.0)
    assert arm.position(11.0)[0] == pytest.approx(math.radians(5.0))  # halfway, toward the pulse's 10°
    assert arm.velocity(11.0)[0] == pytest.approx(math.radians(5.0))
    assert arm.position(12.5)[0] == pytest.approx(math.radians(10.0)) and arm.velocity(12.5)[0] == 0.0


def test_a_failing_link_raises_and_is_counted(lynx: ArmModel) -> None:
    fake = FakeSerial()
    arm = Ssc32Arm(lynx, "x", opener=fake.open)
    fake.fail = True
    with pytest.raises(Ssc32Error, match="writing to the SSC-32 failed"):
        arm.command(np.full(6, 0.1), None, 0.1, 0.0)
    assert arm.write_errors == 1 and np.allclose(arm.position(1.0), lynx.home)  # not sent: not commanded

    def refuse(url: str, **kwargs: Any) -> None:
        raise serial.SerialException(f"could not open port {url}")

    with pytest.raises(Ssc32Error, match="cannot open the SSC-32 port /dev/nothing"):
        Ssc32Arm(lynx, "/dev/nothing", opener=refuse)


def test_the_bytes_go_through_a_real_serial_url(lynx: ArmModel) -> None:
    arm = Ssc32Arm(lynx, "loop://")
    try:
        arm.command(np.array([0.0, 0.0, 0.0, 0.0, math.radians(-45), NAN]), None, 0.25, 0.0)
        port = arm._port  # private on purpose: the test reads back what went out on the loop:// port itself
        assert port.read(64) == b"#0P1500#1P1500#2P1500#3P1500#4P1050T250\r"
    finally:
        arm.close()


def test_a_model_without_channels_cannot_drive_an_ssc32() -> None:
    model = ArmModel.from_toml("[[joint]]\nname = 'a'\nmin = -1\nmax = 1\n")
    with pytest.raises(LocalProtocolError, match="no SSC-32 channel"):
        Ssc32Arm(model, "loop://", opener=FakeSerial().open)
