"""The drive's control law: unit tests, and safety properties over arbitrary command streams and sensor readings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto import msgs
from pluto.movement.drive.core import (
    DriveController,
    DriveOutput,
    DriveParams,
    DriveStatus,
    OdometryCalibration,
    calibrate_odometry,
    sonar_sector,
    wrap_angle,
)

P = DriveParams()
RING = [wrap_angle(i * 2 * math.pi / 16) for i in range(16)]
DT = 0.05


def scan(ranges: dict[int, float] | None = None, default: float = 8.0) -> msgs.SonarScan:
    """A 16-transducer ring (the first facing forward) reading ``default`` but where ``ranges`` says."""
    values = [default] * 16
    for i, r in (ranges or {}).items():
        values[i] = r
    return msgs.SonarScan(ranges=values, angles=RING)


def cmd(v: float = 0.0, w: float = 0.0, flags: int = 0, heading: float = 0.0) -> msgs.ActuatorState:
    return msgs.ActuatorState(cmd_flags=flags, position=[0.0, heading], velocity=[v, w])


def run(
    controller: DriveController,
    command: msgs.ActuatorState | None,
    seconds: float,
    start: float = 0.0,
    sonar: msgs.SonarScan | None = None,
    contact: msgs.Contact | None = None,
) -> list[DriveOutput]:
    """Step for ``seconds`` at 20 Hz, the command given at the first step only."""
    outputs = []
    n = round(seconds / DT)
    for i in range(n):
        outputs.append(
            controller.step(
                command if i == 0 else None, msgs.Odometry(), sonar or scan(), contact or msgs.Contact(), start + i * DT
            )
        )
    return outputs


# -- unit tests -------------------------------------------------------------------------------------------------


def test_velocity_command_is_passed_after_an_acceleration_ramp() -> None:
    out = run(DriveController(), cmd(0.5, 0.3), 2.0)
    assert out[0].v == 0.0  # the first step has no elapsed time to accelerate in
    assert out[1].v == pytest.approx(P.max_accel * DT)
    assert out[-1].v == pytest.approx(0.5) and out[-1].w == pytest.approx(0.3)
    assert out[-1].status_code == DriveStatus.NORMAL and out[-1].data == (out[-1].v, out[-1].w)


def test_speeds_are_capped() -> None:
    out = run(DriveController(), cmd(5.0, -5.0), 3.5)
    assert out[-1].v == pytest.approx(P.max_speed) and out[-1].w == pytest.approx(-P.max_turn_rate)


def test_timeout_stops_and_reports_minus_one() -> None:
    controller = DriveController()
    out = run(controller, cmd(0.5, 0.0), 10.0)
    times = [i * DT for i in range(len(out))]
    assert all(o.status_code == 0 for o, t in zip(out, times, strict=True) if t <= P.timeout)
    late = [o for o, t in zip(out, times, strict=True) if t > P.timeout + 0.5 / P.max_accel + DT]
    assert late and all(o.v == 0.0 and o.status_code == DriveStatus.TIMEOUT for o in late)


def test_a_new_command_resets_the_timeout() -> None:
    controller = DriveController()
    run(controller, cmd(0.5), 3.0)
    out = run(controller, cmd(0.5), 3.0, start=3.0)
    assert all(o.status_code == 0 for o in out) and out[-1].v == pytest.approx(0.5)


@pytest.mark.parametrize(("front", "rear", "code"), [(True, False, 1), (False, True, 2), (True, True, 1)])
def test_bumper_stops_and_cancels_the_command(front: bool, rear: bool, code: int) -> None:
    controller = DriveController()
    run(controller, cmd(0.6 if not rear or front else -0.6, 0.5), 2.0)
    out = run(controller, None, 0.5, start=2.0, contact=msgs.Contact(front=front, rear=rear))
    assert all(o.v == 0.0 and o.w == 0.0 and o.status_code == code for o in out)
    # released: still stopped until a new command comes
    out = run(controller, None, 0.5, start=2.5)
    assert all(o.v == 0.0 and o.status_code == code for o in out)
    out = run(controller, cmd(0.3), 1.0, start=3.0)
    assert out[-1].v == pytest.approx(0.3) and out[-1].status_code == 0


def test_backing_away_from_a_pressed_front_bumper_is_allowed() -> None:
    controller = DriveController()
    pressed = msgs.Contact(front=True)
    out = [controller.step(cmd(-0.3, 0.5), msgs.Odometry(), scan(), pressed, i * DT) for i in range(40)]
    assert out[-1].v == pytest.approx(-0.3) and out[-1].w == 0.0 and out[-1].status_code == 1


def test_sonar_slows_then_stops_when_protection_is_on() -> None:
    controller = DriveController()
    run(controller, cmd(1.0, flags=10), 3.0)
    slow = run(controller, None, 0.5, start=3.0, sonar=scan({0: 0.7}))
    assert 0.0 < slow[-1].v < 1.0 and slow[-1].status_code == DriveStatus.SONAR_FRONT
    stop = run(controller, None, 0.2, start=3.5, sonar=scan({1: 0.3}))
    assert stop[0].v == 0.0 and stop[0].status_code == DriveStatus.SONAR_FRONT
    assert stop[0].data == (0.0, stop[0].w)


def test_sonar_is_ignored_without_protection() -> None:
    out = run(DriveController(), cmd(1.0, flags=0), 3.0, sonar=scan({0: 0.1}))
    assert out[-1].v == pytest.approx(1.0) and out[-1].status_code == 0


def test_sonar_back_and_sides_codes() -> None:
    back = run(DriveController(), cmd(-0.5, flags=10), 1.0, sonar=scan({8: 0.2}))
    assert back[-1].v == 0.0 and back[-1].status_code == DriveStatus.SONAR_BACK
    side = run(DriveController(), cmd(0.5, flags=10), 1.0, sonar=scan({3: 0.2}))  # 67.5°
    assert side[-1].v == 0.0 and side[-1].status_code == DriveStatus.SONAR_SIDES
    # an obstacle behind does not stop forward motion, and turning in place is always allowed
    ahead = run(DriveController(), cmd(0.5, 1.0, flags=10), 2.0, sonar=scan({8: 0.1, 0: 0.1}))
    assert ahead[-1].v == 0.0 and ahead[-1].w == pytest.approx(1.0)
    free = run(DriveController(), cmd(0.5, flags=10), 2.0, sonar=scan({8: 0.1}))
    assert free[-1].v == pytest.approx(0.5) and free[-1].status_code == 0


def test_protection_without_a_sonar_scan_does_not_drive() -> None:
    controller = DriveController()
    out = [controller.step(cmd(0.5, flags=10), msgs.Odometry(), None, None, i * DT) for i in range(20)]
    assert out[-1].v == 0.0


def test_sectors() -> None:
    assert sonar_sector(0.0) == DriveStatus.SONAR_FRONT
    assert sonar_sector(math.radians(59)) == DriveStatus.SONAR_FRONT
    assert sonar_sector(math.radians(-90)) == DriveStatus.SONAR_SIDES
    assert sonar_sector(math.radians(121)) == DriveStatus.SONAR_BACK
    assert sonar_sector(math.pi) == DriveStatus.SONAR_BACK


def simulate_heading(
    controller: DriveController, heading: float, seconds: float, theta: float = 0.0, scale: float = 1.0
) -> tuple[list[float], list[DriveOutput]]:
    """Ideal kinematics: the raw heading integrates ω / scale (so the calibrated heading integrates ω)."""
    thetas, outs = [], []
    for i in range(round(seconds / DT)):
        out = controller.step(cmd(0.4, flags=1, heading=heading), msgs.Odometry(theta=theta), scan(), None, i * DT)
        theta += out.w * DT / scale
        thetas.append(theta)
        outs.append(out)
    return thetas, outs


@pytest.mark.parametrize("heading", [math.pi / 2, -2.5, 3.0, 0.2])
def test_heading_regulator_turns_then_holds(heading: float) -> None:
    thetas, outs = simulate_heading(DriveController(), heading, 10.0)
    assert abs(wrap_angle(thetas[-1] - heading)) < math.radians(0.5)
    assert outs[-1].v == pytest.approx(0.4, abs=1e-3) and abs(outs[-1].w) < 0.01
    overshoot = max(math.copysign(1, heading) * wrap_angle(t - heading) for t in thetas)
    assert overshoot < math.radians(2)
    assert outs[1].v < 0.05 or abs(heading) < 0.5  # a large turn starts before the robot drives


def test_heading_regulator_wraps_the_short_way() -> None:
    thetas, _ = simulate_heading(DriveController(), -3.0, 6.0, theta=2 * math.pi + 3.0)
    assert thetas[-1] > 2 * math.pi + 3.0  # turned left across ±π, not 6 rad to the right
    assert abs(wrap_angle(thetas[-1] + 3.0)) < 0.01


def test_calibration_is_applied_to_the_regulator() -> None:
    calibration = OdometryCalibration(distance_scale=1.1, heading_scale=1.05)
    thetas, _ = simulate_heading(DriveController(calibration=calibration), 1.0, 10.0, scale=1.05)
    assert thetas[-1] * 1.05 == pytest.approx(1.0, abs=0.01)
    odo = calibrate_odometry(msgs.Odometry(x=1.0, y=2.0, theta=1.0, v=0.5, omega=0.2), calibration)
    assert (odo.x, odo.y, odo.theta, odo.v, odo.omega) == pytest.approx((1.1, 2.2, 1.05, 0.55, 0.21))


def test_heading_without_odometry_and_unknown_flags_stand_still() -> None:
    controller = DriveController()
    out = [controller.step(cmd(0.5, flags=1, heading=1.0), None, scan(), None, i * DT) for i in range(20)]
    assert out[-1].v == 0.0 and out[-1].w == 0.0
    out = run(DriveController(), cmd(0.5, 0.5, flags=7), 1.0)
    assert out[-1].v == 0.0 and out[-1].w == 0.0


def test_non_finite_commands_are_zero() -> None:
    out = run(DriveController(), cmd(math.nan, math.inf), 1.0)
    assert out[-1].v == 0.0 and out[-1].w == 0.0


def test_stopped_output_and_reset() -> None:
    controller = DriveController()
    run(controller, cmd(0.5), 2.0)
    assert controller.stopped_output() == DriveOutput(0.0, 0.0, -10, (0.0, 0.0))
    controller.reset()
    assert controller.velocity == (0.0, 0.0)


@pytest.mark.parametrize(
    "bad", [{"max_speed": 0.0}, {"max_accel": math.nan}, {"slow_distance": 0.1}, {"stop_distance": -1.0}]
)
def test_bad_params(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        DriveParams(**bad)


def test_bad_calibration() -> None:
    with pytest.raises(ValueError):
        OdometryCalibration(heading_scale=0.0)


# -- safety properties ------------------------------------------------------------------------------------------

velocities = st.floats(-3.0, 3.0) | st.sampled_from([0.0, math.nan, math.inf, -math.inf, 1e9])
commands = st.builds(
    lambda flags, v, w, heading: msgs.ActuatorState(cmd_flags=flags, position=[0.0, heading], velocity=[v, w]),
    st.sampled_from([0, 1, 10, 11, 2, -1]),
    velocities,
    velocities,
    st.floats(-10.0, 10.0),
)
sonars = st.lists(st.floats(0.0, 8.0), min_size=16, max_size=16).map(
    lambda ranges: msgs.SonarScan(ranges=ranges, angles=RING)
)
steps = st.tuples(
    st.floats(0.005, 0.2),  # dt, s
    st.none() | commands,
    st.none() | sonars,
    st.sampled_from(
        [msgs.Contact()] * 6 + [msgs.Contact(front=True), msgs.Contact(rear=True), msgs.Contact(front=True, rear=True)]
    ),
    st.floats(-20.0, 20.0),  # odometry heading, rad
)


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, min_size=1, max_size=120), st.integers(0, 200))
def test_safety_properties(
    stream: list[tuple[float, msgs.ActuatorState | None, msgs.SonarScan | None, msgs.Contact, float]], silence: int
) -> None:
    """Over any command stream and sensor readings (then ``silence`` steps without commands):

    - speeds never exceed the limits, and accelerate only within the acceleration limits;
    - a pressed bumper stops the robot (no turning, nothing towards the bumper);
    - the robot is stopped once the timeout and the time to brake have passed after the last command;
    - with protection on, the robot never drives towards a return closer than the stop distance.
    """
    controller = DriveController()
    eps = 1e-9
    now, last_command_time, last_command = 0.0, None, None
    previous = (0.0, 0.0)
    quiet = [(0.05, None, sonar, contact, theta) for (_, _, sonar, contact, theta) in stream[-1:]] * silence
    brake = max(P.max_speed / P.max_accel, P.max_turn_rate / P.max_turn_accel)
    for dt, command, sonar, contact, theta in [*stream, *quiet]:
        now += dt
        out = controller.step(command, msgs.Odometry(theta=theta), sonar, contact, now)
        if command is not None:
            last_command_time, last_command = now, command
        v, w = out.v, out.w
        assert math.isfinite(v) and math.isfinite(w)
        assert abs(v) <= P.max_speed + eps and abs(w) <= P.max_turn_rate + eps
        assert out.data == (v, w)
        # Speeding up is always limited; slowing down only faster than the limit in a safety stop.
        if abs(v) > abs(previous[0]) or out.status_code in (0, -1):
            assert abs(v - previous[0]) <= P.max_accel * dt + eps
        if abs(w) > abs(previous[1]) or out.status_code in (0, -1):
            assert abs(w - previous[1]) <= P.max_turn_accel * dt + eps
        if contact.front or contact.rear:
            assert w == 0.0 and out.status_code in (1, 2)
            assert not (contact.front and v > 0.0) and not (contact.rear and v < 0.0)
        if last_command_time is None or now - last_command_time > P.timeout + brake + P.max_dt:
            assert v == 0.0 and w == 0.0
        if last_command is not None and last_command.cmd_flags >= 10:
            for r, b in zip(sonar.ranges if sonar else [], RING, strict=False):
                if r < P.stop_distance and math.cos(b) > 0:
                    assert v <= 0.0
                if r < P.stop_distance and math.cos(b) < 0:
                    assert v >= 0.0
        previous = (v, w)


def test_noisy_ranges_at_the_stop_distance_do_not_make_the_robot_creep() -> None:
    controller = DriveController()
    run(controller, cmd(0.5, flags=10), 2.0, sonar=scan({0: 0.38}))
    out = run(controller, None, 1.0, start=2.0, sonar=scan({0: 0.5}))  # within the hysteresis: stay stopped
    assert all(o.v == 0.0 and o.status_code == DriveStatus.SONAR_FRONT for o in out)
    out = run(controller, cmd(0.5, flags=10), 2.0, start=3.0, sonar=scan({0: 0.9}))
    assert out[-1].v == pytest.approx(0.5) and out[-1].status_code == 0  # clear again: drives on
