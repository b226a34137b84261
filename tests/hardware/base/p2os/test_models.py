"""Per-model parameters (the reference's table) and the conversions between robot units and SI."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.hardware.base.p2os import (
    ANGLE_CONV,
    ROBOT_PARAMS,
    RobotParams,
    Sip,
    SonarPose,
    SonarReading,
    UnknownRobotWarning,
    from_deg,
    from_mm,
    robot_params,
    signed_15bit,
    to_deg,
    to_mm,
)

# The reference's "Robot parameters" table: DistConv, RangeConv, DiffConv, sonars, max vel mm/s, radius mm.
REFERENCE_TABLE = {
    "p2dx": (0.840, 0.268, 0.0056, 16, 2200, 250),
    "p2de": (0.969, 0.268, 0.0056, 16, 2200, 250),
    "p2at": (1.32, 0.268, 0.0034, 16, 1200, 500),
    "p2pb": (0.424, 0.268, 0.0056, 24, 2200, 300),
    "p2pp": (0.485, 0.268, 0.006, 24, 2200, 300),
    "p3dx": (0.485, 1.0, 0.0056, 16, 2200, 250),
    "p3at": (0.465, 1.0, 0.0034, 16, 1200, 500),
    "p3dx-sh": (1.0, 1.0, 0.0056, 16, 2200, 250),
    "p3at-sh": (1.0, 1.0, 0.0034, 16, 1200, 500),
    "peoplebot-sh": (1.0, 1.0, 0.006, 32, 2200, 340),
}


def pose(x_mm: float, y_mm: float, heading_deg: float) -> SonarPose:
    return SonarPose(x_mm / 1000, y_mm / 1000, math.radians(heading_deg))


def assert_pose(actual: SonarPose, expected: SonarPose) -> None:
    assert actual.x == pytest.approx(expected.x, abs=1e-9)
    assert actual.y == pytest.approx(expected.y, abs=1e-9)
    assert actual.heading == pytest.approx(expected.heading, abs=1e-9)


def test_every_reference_subclass_is_in_the_table() -> None:
    assert set(ROBOT_PARAMS) == set(REFERENCE_TABLE)


@pytest.mark.parametrize("subclass", sorted(REFERENCE_TABLE))
def test_reference_parameters(subclass: str) -> None:
    dist, rng, diff, sonars, vmax, radius = REFERENCE_TABLE[subclass]
    params = robot_params(subclass)
    assert params.subclass == subclass and params.known
    assert (params.dist_conv, params.range_conv, params.diff_conv) == (dist, rng, diff)
    assert params.angle_conv == pytest.approx(0.001534, abs=5e-7) and params.ticks_per_turn == 4096
    assert (params.vel_conv, params.vel2_divisor) == (1.0, 20.0)
    assert params.sonar_count == len(params.sonar_poses) == sonars
    assert params.max_velocity == pytest.approx(vmax / 1000)
    assert params.radius == pytest.approx(radius / 1000)
    for sonar in params.sonar_poses:  # SI: metres and radians
        assert math.hypot(sonar.x, sonar.y) < 0.5 and abs(sonar.heading) <= math.pi


P3DX_RING = [
    (69, 136, 90), (114, 119, 50), (148, 78, 30), (166, 27, 10), (166, -27, -10), (148, -78, -30),
    (114, -119, -50), (69, -136, -90), (-157, -136, -90), (-203, -119, -130), (-237, -78, -150),
    (-255, -27, -170), (-255, 27, 170), (-237, 78, 150), (-203, 119, 130), (-157, 136, 90),
]  # fmt: skip
P3AT_RING = [
    (147, 136, 90), (193, 119, 50), (227, 79, 30), (245, 27, 10), (245, -27, -10), (227, -79, -30),
    (193, -119, -50), (147, -136, -90), (-144, -136, -90), (-189, -119, -130), (-223, -79, -150),
    (-241, -27, -170), (-241, 27, 170), (-223, 79, 150), (-189, 119, 130), (-144, 136, 90),
]  # fmt: skip
PEOPLEBOT_UPPER = [
    (-20, 136, 90), (24, 119, 50), (58, 78, 30), (77, 27, 10),
    (77, -27, -10), (58, -78, -30), (24, -119, -50), (-20, -136, -90),
]  # fmt: skip
PEOPLEBOT_SH_LOWER_REAR = [
    (-191, -136, -90), (-237, -119, -130), (-271, -78, -150), (-290, -27, -170),
    (-290, 27, 170), (-271, 78, 150), (-237, 119, 130), (-191, 136, 90),
]  # fmt: skip
EXPECTED_RINGS = {
    "p2dx": P3DX_RING,
    "p2de": P3DX_RING,
    "p3dx": P3DX_RING,
    "p3dx-sh": P3DX_RING,
    "p2at": P3AT_RING,
    "p3at": P3AT_RING,
    "p3at-sh": P3AT_RING,
    "peoplebot-sh": P3DX_RING + PEOPLEBOT_UPPER + PEOPLEBOT_SH_LOWER_REAR,
    # not in the reference: ARIA's p2pb.p / p2pp.p (front ring, upper ring, rear ring)
    "p2pb": P3DX_RING[:8] + PEOPLEBOT_UPPER + P3DX_RING[8:],
    "p2pp": P3DX_RING[:8] + PEOPLEBOT_UPPER + P3DX_RING[8:],
}


@pytest.mark.parametrize("subclass", sorted(EXPECTED_RINGS))
def test_sonar_poses_in_si(subclass: str) -> None:
    ring = robot_params(subclass).sonar_poses
    assert len(ring) == len(EXPECTED_RINGS[subclass])
    for actual, (x, y, heading) in zip(ring, EXPECTED_RINGS[subclass], strict=True):
        assert_pose(actual, pose(x, y, heading))


def test_sonar_zero_of_a_p3dx() -> None:
    assert_pose(robot_params("p3dx").sonar_poses[0], SonarPose(0.069, 0.136, math.pi / 2))


def test_subclass_lookup_ignores_case_and_spaces() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert robot_params(" P3AT-SH ") is ROBOT_PARAMS["p3at-sh"]


def test_unknown_subclass_gives_defaults_and_a_warning() -> None:
    with pytest.warns(UnknownRobotWarning, match="amigo"):
        params = robot_params("amigo")
    assert not params.known
    default = ROBOT_PARAMS["p3dx"]
    assert (params.dist_conv, params.range_conv, params.diff_conv) == (
        default.dist_conv,
        default.range_conv,
        default.diff_conv,
    )
    assert params.sonar_poses == default.sonar_poses and params.max_velocity == default.max_velocity


# --------------------------------------------------------------------------------------------------- SIP to SI

SIP = Sip(
    x=1000,
    y=0x7FFF - 199,  # 200 ticks behind the origin
    theta=1024,
    left_velocity=100,
    right_velocity=300,
    battery=125,
    control=-512,
    compass=45,
    sonars=(SonarReading(0, 1000), SonarReading(5, 250)),
)


@pytest.mark.parametrize(
    ("subclass", "dist", "range_conv", "diff"),
    [("p3dx", 0.485, 1.0, 0.0056), ("p2at", 1.32, 0.268, 0.0034), ("p2dx", 0.840, 0.268, 0.0056)],
)
def test_sip_in_si_with_each_models_factors(subclass: str, dist: float, range_conv: float, diff: float) -> None:
    reading = robot_params(subclass).sip_reading(SIP)
    assert reading.x == pytest.approx(1000 * dist / 1000)
    assert reading.y == pytest.approx(-200 * dist / 1000)
    assert reading.theta == pytest.approx(math.pi / 2)
    assert reading.control == pytest.approx(-math.pi / 4)
    assert (reading.left_velocity, reading.right_velocity) == pytest.approx((0.1, 0.3))
    assert reading.v == pytest.approx(0.2)
    assert reading.omega == pytest.approx((300 - 100) / 2 * diff)
    assert [number for number, _ in reading.sonar_ranges] == [0, 5]
    assert [metres for _, metres in reading.sonar_ranges] == pytest.approx([range_conv, 0.25 * range_conv])
    assert reading.battery_voltage == pytest.approx(12.5)
    assert reading.compass == pytest.approx(math.pi / 2)
    assert reading.rot_velocity is None and reading.lat_velocity is None


def test_p3dx_and_p2at_differ_as_their_factors_do() -> None:
    p3dx, p2at = robot_params("p3dx").sip_reading(SIP), robot_params("p2at").sip_reading(SIP)
    assert p2at.x / p3dx.x == pytest.approx(1.32 / 0.485)
    assert p2at.omega / p3dx.omega == pytest.approx(0.0034 / 0.0056)


def test_arcos_extension_in_si() -> None:
    sip = Sip(battery=125, battery_x10=253, charge_state=0, rot_vel=-155, fault_flags=0, lat_vel=40)
    reading = robot_params("p3dx").sip_reading(sip)
    assert reading.battery_voltage == pytest.approx(25.3)
    assert reading.rot_velocity == pytest.approx(math.radians(-15.5))
    assert reading.lat_velocity == pytest.approx(0.04)


@pytest.mark.parametrize(
    ("ticks", "radians"),
    [(0, 0.0), (1024, math.pi / 2), (3072, -math.pi / 2), (-1024, -math.pi / 2), (2048, -math.pi),
     (4095, -ANGLE_CONV), (4096, 0.0), (-2048, -math.pi)],
)  # fmt: skip
def test_heading_from_either_firmware_convention(ticks: int, radians: float) -> None:
    assert robot_params("p3dx").heading_to_rad(ticks) == pytest.approx(radians, abs=1e-12)


def test_signed_15bit() -> None:
    assert signed_15bit(0) == 0
    assert signed_15bit(0x3FFF) == 0x3FFF
    assert signed_15bit(0x4000) == -0x4000
    assert signed_15bit(0x7FFF) == -1
    assert signed_15bit(0xFFFF) == -1  # bit 15 is not part of the counter


# --------------------------------------------------------------------------------------------------- helpers


def test_command_unit_helpers() -> None:
    assert to_mm(0.3) == 300 and to_mm(-0.15) == -150 and to_mm(0.0004) == 0
    assert to_mm(100.0) == 32767 and to_mm(-100.0) == -32768  # saturated to a 16-bit argument
    assert to_deg(math.radians(-20)) == -20 and to_deg(math.pi) == 180
    assert from_mm(2200) == pytest.approx(2.2)
    assert from_deg(90) == pytest.approx(math.pi / 2)


@pytest.mark.parametrize("subclass", ["p3dx", "p2at", "peoplebot-sh"])
@given(v=st.floats(-1.0, 1.0), omega=st.floats(-2.0, 2.0))
def test_wheel_velocities_invert_twist(subclass: str, v: float, omega: float) -> None:
    params = robot_params(subclass)
    left, right = params.wheel_velocities(v, omega)
    v_back, omega_back = params.twist(left, right)
    assert v_back == pytest.approx(v, abs=1e-3)  # rounding to 1 mm/s per wheel
    assert omega_back == pytest.approx(omega, abs=params.diff_conv)


def test_vel2_argument_round_trip() -> None:
    params = robot_params("p3dx")
    argument = params.vel2_argument(0.2, -0.1)  # 10 and -5 units of 20 mm/s
    assert argument == (10 << 8) | 0xFB
    assert params.vel2_wheels(argument) == pytest.approx((0.2, -0.1))
    assert params.vel2_wheels(params.vel2_argument(5.0, -5.0)) == pytest.approx((127 * 0.02, -128 * 0.02))


def test_distance_range_and_velocity_round_trips() -> None:
    params: RobotParams = robot_params("p2at")
    assert params.m_to_position(params.position_to_m(1234)) == 1234
    assert params.m_to_range(params.range_to_m(4321)) == 4321
    assert params.m_s_to_velocity(params.velocity_to_m_s(-777)) == -777
    assert params.rad_to_heading(params.heading_to_rad(3000)) == 3000 - 4096
    assert params.m_to_range(-1.0) == 0 and params.m_to_range(1e9) == 0xFFFF
