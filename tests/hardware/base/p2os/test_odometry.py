"""Unwrapping the 15-bit counters and the heading, and integrating SIPs into a continuous pose in SI."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.hardware.base.p2os import (
    OdometryIntegrator,
    OdometryUpdate,
    RobotParams,
    Sip,
    heading_delta,
    robot_params,
    unwrap_15bit,
)

# --------------------------------------------------------------------------------------------------- unwrap


@pytest.mark.parametrize(
    ("old", "new", "delta"),
    [
        pytest.param(0x7FF0, 0x0010, 0x20, id="forward across the wrap"),
        pytest.param(0x0010, 0x7FF0, -0x20, id="backward across the wrap"),
        pytest.param(0x7FFF, 0x0000, 1, id="one tick forward over the wrap"),
        pytest.param(0x0000, 0x7FFF, -1, id="one tick backward over the wrap"),
        pytest.param(100, 100, 0, id="no motion"),
        pytest.param(100, 350, 250, id="forward, no wrap"),
        pytest.param(350, 100, -250, id="backward, no wrap"),
        pytest.param(0, 0x3FFF, 0x3FFF, id="largest forward step"),
        pytest.param(0, 0x4000, -0x4000, id="half a range reads as backward"),
    ],
)
def test_unwrap_15bit(old: int, new: int, delta: int) -> None:
    assert unwrap_15bit(old, new) == delta


@given(st.integers(0, 0x7FFF), st.integers(-0x4000, 0x3FFF))
def test_unwrap_15bit_recovers_any_step(old: int, step: int) -> None:
    assert unwrap_15bit(old, (old + step) & 0x7FFF) == step


@given(st.integers(0, 4095), st.integers(-2048, 2047), st.booleans())
def test_heading_delta_recovers_any_step_in_either_convention(old: int, step: int, signed: bool) -> None:
    new = (old + step) % 4096
    if signed:  # the same headings as -2048..2047
        old, new = (old + 2048) % 4096 - 2048, (new + 2048) % 4096 - 2048
    assert heading_delta(old, new) == step


# --------------------------------------------------------------------------------------------------- the square


@dataclass(frozen=True)
class TruePose:
    t: float
    x: float
    y: float
    theta: float
    v: float
    omega: float


def square(side: float = 1.0, speed: float = 0.5, turn_rate: float = math.pi / 2, dt: float = 0.1) -> list[TruePose]:
    """A robot driving a square counter-clockwise: straight at ``speed``, then a quarter turn on the spot."""
    poses = [TruePose(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)]
    x = y = theta = t = 0.0
    for _ in range(4):
        for _ in range(round(side / (speed * dt))):
            x += speed * dt * math.cos(theta)
            y += speed * dt * math.sin(theta)
            t += dt
            poses.append(TruePose(t, x, y, theta, speed, 0.0))
        for _ in range(round(math.pi / 2 / (turn_rate * dt))):
            theta += turn_rate * dt
            t += dt
            poses.append(TruePose(t, x, y, theta, 0.0, turn_rate))
    return poses


def firmware_sip(params: RobotParams, pose: TruePose, offsets: tuple[int, int, int], *, heading_0_4095: bool) -> Sip:
    """The SIP a robot would send: counters in ticks from arbitrary origins, wrapped as the firmware wraps them."""
    x_offset, y_offset, theta_offset = offsets
    theta = round(pose.theta / params.angle_conv) + theta_offset
    theta = theta % 4096 if heading_0_4095 else (theta + 2048) % 4096 - 2048
    spread = pose.omega / params.diff_conv  # mm/s: (R - L) / 2
    return Sip(
        moving=pose.v != 0 or pose.omega != 0,
        x=(round(pose.x * 1000 / params.dist_conv) + x_offset) & 0x7FFF,
        y=(round(pose.y * 1000 / params.dist_conv) + y_offset) & 0x7FFF,
        theta=theta,
        left_velocity=round(pose.v * 1000 - spread),
        right_velocity=round(pose.v * 1000 + spread),
    )


def integrate(
    params: RobotParams, poses: list[TruePose], offsets: tuple[int, int, int], *, heading_0_4095: bool
) -> tuple[OdometryIntegrator, list[OdometryUpdate]]:
    integrator = OdometryIntegrator(params)
    updates = [
        integrator.update(firmware_sip(params, pose, offsets, heading_0_4095=heading_0_4095), pose.t) for pose in poses
    ]
    return integrator, updates


@pytest.mark.parametrize("subclass", ["p3dx", "p2at"])
@pytest.mark.parametrize("heading_0_4095", [True, False], ids=["heading 0..4095", "heading -2048..2047"])
def test_a_one_metre_square_is_reproduced_in_si(subclass: str, heading_0_4095: bool) -> None:
    params = robot_params(subclass)
    # Origins chosen so that x, y and the heading all wrap on the way round.
    offsets = (0x7FFF - 300, 0x7FFF - 500, 4000)
    poses = square()
    integrator, updates = integrate(params, poses, offsets, heading_0_4095=heading_0_4095)
    first = updates[0]
    for pose, update in zip(poses, updates, strict=True):
        assert update.x - first.x == pytest.approx(pose.x, abs=1e-3)
        assert update.y - first.y == pytest.approx(pose.y, abs=1e-3)
        assert update.theta - first.theta == pytest.approx(pose.theta, abs=math.radians(0.1))
        assert update.v == pytest.approx(pose.v, abs=1e-3)
        assert update.omega == pytest.approx(pose.omega, abs=params.diff_conv)
        assert not update.large_delta
    last = updates[-1]
    assert (last.x - first.x, last.y - first.y) == pytest.approx((0.0, 0.0), abs=1e-3)
    assert last.theta - first.theta == pytest.approx(2 * math.pi, abs=math.radians(0.1))  # continuous, not 0
    assert integrator.updates == len(poses) and integrator.large_deltas == 0
    # The counters did wrap, so this was not a trivial run.
    raw_x = [firmware_sip(params, p, offsets, heading_0_4095=True).x for p in poses]
    assert min(raw_x) < 1000 < 0x7000 < max(raw_x)


def test_heading_conventions_integrate_the_same() -> None:
    params = robot_params("p3dx")
    offsets = (0, 0, 2040)
    _, unsigned = integrate(params, square(), offsets, heading_0_4095=True)
    _, signed = integrate(params, square(), offsets, heading_0_4095=False)
    assert [u.theta for u in unsigned] == pytest.approx([s.theta for s in signed], abs=1e-12)


def test_first_sip_sets_the_pose_from_signed_counters() -> None:
    params = robot_params("p3dx")
    integrator = OdometryIntegrator(params)
    assert integrator.pose is None
    update = integrator.update(Sip(x=0x7FFF - 99, y=200, theta=3072), 0.0)  # 100 ticks behind the origin
    assert (update.x, update.y) == pytest.approx((-100 * 0.485 / 1000, 200 * 0.485 / 1000))
    assert update.theta == pytest.approx(-math.pi / 2)
    assert integrator.pose == (update.x, update.y, update.theta)
    assert update.distance == 0.0 and not update.large_delta


# --------------------------------------------------------------------------------------------------- large deltas


def test_a_large_step_is_held_and_applied_when_the_next_sip_goes_on_from_it() -> None:
    params = robot_params("p3dx")  # 2.2 m/s top speed: at most 0.33 m in 0.1 s with the default margin
    integrator = OdometryIntegrator(params)
    integrator.update(Sip(x=0), 0.0)
    normal = integrator.update(Sip(x=100), 0.1)  # 48.5 mm in 0.1 s
    assert not normal.large_delta and not normal.held
    jump = integrator.update(Sip(x=100 + 2062), 0.2)  # 1 m in 0.1 s: impossible
    assert jump.large_delta and jump.held and jump.distance == pytest.approx(2062 * 0.485 / 1000)
    assert jump.x == normal.x  # not applied yet
    after = integrator.update(Sip(x=100 + 2062 + 100), 0.3)  # goes on from it: the counters did jump
    assert after.large_delta and not after.held and integrator.large_deltas == 1 and integrator.dropped == 0
    assert after.x == pytest.approx((100 + 2062 + 100) * 0.485 / 1000)  # applied, not dropped
    assert not integrator.update(Sip(x=100 + 2062 + 200), 0.4).large_delta


def test_a_lone_impossible_sip_is_dropped_when_the_next_goes_on_from_the_pose_before_it() -> None:
    # A damaged SIP whose checksum happened to match: one bad packet must not move the odometry for good.
    integrator = OdometryIntegrator(robot_params("p3dx"))
    integrator.update(Sip(x=0), 0.0)
    integrator.update(Sip(x=100), 0.1)
    bad = integrator.update(Sip(x=100 + 1536, y=0x8000 - 900, theta=700), 0.2)
    assert bad.held and (bad.x, bad.y, bad.theta) == pytest.approx((100 * 0.485 / 1000, 0.0, 0.0))
    good = integrator.update(Sip(x=300), 0.3)  # 97 mm in the 0.2 s since the last good SIP
    assert not good.large_delta and not good.held
    assert (good.x, good.y, good.theta) == pytest.approx((300 * 0.485 / 1000, 0.0, 0.0))
    assert integrator.dropped == 1 and integrator.large_deltas == 0 and integrator.updates == 3
    # two damaged SIPs in a row that do not agree: both dropped
    integrator.update(Sip(x=9000), 0.4)
    integrator.update(Sip(x=20000), 0.5)
    assert integrator.update(Sip(x=400), 0.6).x == pytest.approx(400 * 0.485 / 1000)
    assert integrator.dropped == 3 and integrator.large_deltas == 0


def test_a_long_gap_allows_a_long_step() -> None:
    integrator = OdometryIntegrator(robot_params("p3dx"))
    integrator.update(Sip(x=0), 0.0)
    assert not integrator.update(Sip(x=4000), 1.0).large_delta  # 1.94 m in 1 s: possible at 2.2 m/s
    assert integrator.update(Sip(x=8000), 1.0).held  # the same step with no time elapsed is not
    # time going back counts as one SIP period: 5 ticks on from the held SIP confirm its jump
    confirmed = integrator.update(Sip(x=8000 + 5), 0.5)
    assert confirmed.large_delta and confirmed.distance == pytest.approx(4005 * 0.485 / 1000)
    assert integrator.large_deltas == 1


def test_sips_read_together_are_not_large() -> None:
    # A reader late on a busy computer reads several SIPs at once: each still stands for a SIP period of motion.
    integrator = OdometryIntegrator(robot_params("p3dx"))
    integrator.update(Sip(x=0), 0.0)
    for i in range(1, 6):
        assert not integrator.update(Sip(x=300 * i), 0.5).large_delta  # 0.15 m per SIP, 1.5 m/s
    assert integrator.large_deltas == 0
    assert integrator.update(Sip(x=1500 + 1000), 0.5).held  # 0.49 m in one SIP is still impossible


def test_a_large_delta_across_the_wrap_and_a_seto() -> None:
    params = robot_params("p2at")
    integrator = OdometryIntegrator(params)
    integrator.update(Sip(x=0x7FF0), 0.0)
    assert integrator.update(Sip(x=0x0100), 0.1).held  # +0x110 ticks = 0.36 m in 0.1 s at 1.2 m/s
    across = integrator.update(Sip(x=0x0110, y=50), 0.2)  # on from it: applied across the wrap
    assert across.large_delta and not across.held and integrator.large_deltas == 1
    assert across.x == pytest.approx(params.position_to_m(0x0110))  # -16 ticks, then 0x120 on
    seto = integrator.update(Sip(x=0, y=0, theta=0), 0.3)  # the robot's odometry was reset: held
    assert seto.held and seto.x == across.x
    integrator.reset()  # the driver knows it sent SETO: start again
    fresh = integrator.update(Sip(x=0, y=0, theta=0), 0.4)
    assert (fresh.x, fresh.y, fresh.theta) == (0.0, 0.0, 0.0) and not fresh.large_delta


def test_invalid_tolerances_are_rejected() -> None:
    with pytest.raises(ValueError):
        OdometryIntegrator(robot_params("p3dx"), slack=-1.0)
