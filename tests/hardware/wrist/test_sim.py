"""The simulated pan/tilt wrist: converging on the target within the limits, the speed and acceleration bounds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pluto.hardware.wrist.sim import SimWrist, WristParams

DT = 0.02  # the wrist module's step at its 50 Hz

# (target, velocity, acceleration) commands: both axes, various speeds and accelerations, short and long moves.
MOVES = [
    ([math.pi / 2, 0.3], [2.0, 2.0], [6.0, 6.0]),
    ([1.0, -0.2], [0.5, 1.0], [1.0, 10.0]),
    ([0.01, 0.01], [2.0, 2.0], [6.0, 6.0]),
    ([-2.5, 0.6], [3.0, 3.0], [20.0, 20.0]),
    ([-0.4, -0.5], [0.8, 0.3], [3.0, 0.5]),
]


class Run:
    """A wrist stepped for a while after one command, with its history."""

    def __init__(
        self,
        target: list[float],
        velocity: list[float],
        accel: list[float],
        seconds: float = 6.0,
        dt: float = DT,
        wrist: SimWrist | None = None,
    ) -> None:
        self.wrist = wrist or SimWrist()
        self.dt = dt
        self.start = self.wrist.position.copy()
        self.wrist.command(target, velocity, accel)
        p = self.wrist.params
        self.v_max = np.minimum(np.maximum(velocity, 0.0), p.max_speed)
        self.a_max = np.minimum(np.maximum(accel, 0.0), p.max_accel)
        positions, velocities, accelerations = [self.start], [self.wrist.velocity.copy()], []
        for _ in range(round(seconds / dt)):
            self.wrist.step(dt)
            positions.append(self.wrist.position.copy())
            velocities.append(self.wrist.velocity.copy())
            accelerations.append(self.wrist.acceleration.copy())
        self.positions = np.array(positions)
        self.velocities = np.array(velocities)
        self.accelerations = np.array(accelerations)

    def overshoot(self) -> np.ndarray:
        """How far (rad) each axis went past its target, in the direction it was moving."""
        direction = np.sign(self.wrist.target - self.start)
        return np.maximum(((self.positions - self.wrist.target) * direction).max(axis=0), 0.0)

    def arrival_index(self) -> np.ndarray:
        """Per axis, the first step from which the axis sits on its target."""
        result = []
        for axis in range(2):
            at = self.positions[:, axis] == self.wrist.target[axis]
            moving_after = np.nonzero(~at)[0]
            result.append(0 if len(moving_after) == 0 else int(moving_after[-1]) + 1)
        return np.array(result)


@pytest.mark.parametrize(("target", "velocity", "accel"), MOVES)
def test_converges_on_the_target(target: list[float], velocity: list[float], accel: list[float]) -> None:
    run = Run(target, velocity, accel)
    assert run.wrist.position == pytest.approx(target, abs=1e-12)
    assert run.wrist.velocity == pytest.approx([0.0, 0.0], abs=1e-12)
    assert np.all(run.arrival_index() < len(run.positions) - 1)


@pytest.mark.parametrize(("target", "velocity", "accel"), MOVES)
@pytest.mark.parametrize("dt", [0.005, DT, 0.05])
def test_speed_never_exceeds_the_commanded_speed(
    target: list[float], velocity: list[float], accel: list[float], dt: float
) -> None:
    run = Run(target, velocity, accel, dt=dt)
    assert np.all(np.abs(run.velocities) <= run.v_max + 1e-9)
    moved = np.abs(np.diff(run.positions, axis=0)) / dt
    assert np.all(moved <= run.v_max + 1e-9)
    assert np.all(np.abs(run.velocities) <= np.array(WristParams().max_speed) + 1e-9)


def test_speed_and_acceleration_are_clamped_to_the_unit() -> None:
    run = Run([2.5, 0.0], [50.0, 50.0], [500.0, 500.0])
    p = WristParams()
    assert run.v_max == pytest.approx(p.max_speed)
    assert np.abs(run.velocities[:, 0]).max() == pytest.approx(p.max_speed[0])
    # speeding up from rest: the unit's own acceleration limit
    assert run.velocities[1, 0] == pytest.approx(p.max_accel[0] * DT)


@pytest.mark.parametrize(("target", "velocity", "accel"), MOVES)
def test_acceleration_is_bounded_while_speeding_up_and_cruising(
    target: list[float], velocity: list[float], accel: list[float]
) -> None:
    """Until an axis gets within braking distance of its target the change of speed per step is within a·dt."""
    run = Run(target, velocity, accel)
    dv = np.abs(np.diff(run.velocities, axis=0)) / DT
    remaining = np.abs(run.wrist.target - run.positions[:-1])
    braking = run.v_max**2 / (2 * run.a_max) + run.v_max * DT
    before_braking = remaining > braking
    assert np.all(dv[before_braking[:, 0], 0] <= run.a_max[0] + 1e-9)
    assert np.all(dv[before_braking[:, 1], 1] <= run.a_max[1] + 1e-9)
    assert np.all(np.abs(run.accelerations[before_braking[:, 0], 0]) <= run.a_max[0] + 1e-9)


def test_arrives_without_overshoot() -> None:
    worst = {}
    for dt in (DT, 0.05):
        for target, velocity, accel in MOVES:
            run = Run(target, velocity, accel, dt=dt)
            tolerance = run.a_max * dt * dt  # one step of rounding
            excess = run.overshoot() - tolerance
            if np.any(excess > 1e-9):
                worst[(dt, tuple(target))] = run.overshoot().round(4).tolist()
    assert not worst, f"overshoot (rad) per (dt, target): {worst}"


def test_acceleration_never_exceeds_the_commanded_acceleration() -> None:
    worst = {}
    for target, velocity, accel in MOVES:
        run = Run(target, velocity, accel)
        dv = np.abs(np.diff(run.velocities, axis=0)) / DT
        reported = np.abs(run.accelerations)
        ratio = np.maximum(dv.max(axis=0), reported.max(axis=0)) / run.a_max
        if np.any(ratio > 1 + 1e-6):
            worst[tuple(target)] = ratio.round(2).tolist()
    assert not worst, f"largest acceleration / commanded per target: {worst}"


def test_small_overshoot_at_the_module_rate_for_now() -> None:
    """Whatever the braking, an axis ends on its target and never strays far (guards against worse regressions)."""
    for target, velocity, accel in MOVES:
        run = Run(target, velocity, accel)
        assert np.all(run.overshoot() <= 0.05)


def test_a_target_beyond_a_limit_stops_at_the_limit() -> None:
    p = WristParams()
    run = Run([4.0, 1.5], [2.0, 2.0], [6.0, 6.0])
    assert run.wrist.target == pytest.approx([p.pan_limits[1], p.tilt_limits[1]])
    assert run.wrist.position == pytest.approx([p.pan_limits[1], p.tilt_limits[1]])
    lo, hi = run.wrist.limits()
    assert np.all(run.positions >= lo - 1e-12) and np.all(run.positions <= hi + 1e-12)
    run = Run([-4.0, -1.5], [2.0, 2.0], [6.0, 6.0])
    assert run.wrist.position == pytest.approx([p.pan_limits[0], p.tilt_limits[0]])


def test_positions_always_stay_within_the_limits() -> None:
    wrist = SimWrist()
    lo, hi = wrist.limits()
    rng = np.random.default_rng(5)
    for _ in range(40):
        wrist.command(list(rng.uniform(-4, 4, 2)), list(rng.uniform(0, 3, 2)), list(rng.uniform(0, 10, 2)))
        for _ in range(rng.integers(1, 30)):
            wrist.step(DT)
            assert np.all(wrist.position >= lo) and np.all(wrist.position <= hi)


@pytest.mark.parametrize(
    ("velocity", "accel"),
    [([0.0, 2.0], [6.0, 0.0]), ([0.0, 0.0], [6.0, 6.0]), ([2.0, 2.0], [0.0, 0.0]), ([-1.0, 2.0], [6.0, -3.0])],
)
def test_zero_velocity_or_acceleration_keeps_the_axis_still(velocity: list[float], accel: list[float]) -> None:
    run = Run([1.0, 0.5], velocity, accel)
    for axis in range(2):
        if velocity[axis] > 0 and accel[axis] > 0:
            assert run.wrist.position[axis] == pytest.approx([1.0, 0.5][axis])
        else:
            assert np.all(run.positions[:, axis] == 0.0)


def test_missing_elements_keep_the_axis_still() -> None:
    run = Run([1.0], [2.0], [6.0])
    assert run.wrist.position[0] == pytest.approx(1.0)
    assert np.all(run.positions[:, 1] == 0.0)


def test_non_finite_speed_keeps_the_axis_still() -> None:
    run = Run([1.0, 0.5], [math.inf, math.nan], [6.0, 6.0])
    assert np.all(run.positions == 0.0)


def test_a_stop_command_brakes_a_moving_axis() -> None:
    wrist = SimWrist()
    wrist.command([2.5, 0.0], [2.0, 0.0], [6.0, 0.0])
    for _ in range(30):
        wrist.step(DT)
    moving = wrist.velocity[0]
    assert moving > 1.0
    wrist.command([2.5, 0.0], [0.0, 0.0], [0.0, 0.0])
    speeds = []
    for _ in range(50):
        wrist.step(DT)
        speeds.append(wrist.velocity[0])
    assert speeds[-1] == 0.0
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(speeds))
    # braking with the unit's own deceleration
    assert moving - speeds[0] == pytest.approx(WristParams().max_accel[0] * DT)


def test_zero_dt_does_not_move() -> None:
    wrist = SimWrist()
    wrist.command([1.0, 0.0], [2.0, 2.0], [6.0, 6.0])
    wrist.step(0.0)
    assert np.all(wrist.position == 0.0)
