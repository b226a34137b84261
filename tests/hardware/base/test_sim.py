"""The simulated body: unicycle motion, acceleration and speed limits, contact, odometry, sonar and battery."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto.geometry import compose, relative, unicycle_step, wrap_angle
from pluto.hardware.base.sim import BodyParams, SimBody, ramp
from pluto.sim.noise import REALISTIC, device_rng, noise_profile
from pluto.sim.world import World, parse_world
from tests.sim.boxes import ray_to_box

NO_SEGMENTS = np.zeros((0, 4))
NO_CIRCLES = np.zeros((0, 3))
RADIUS = BodyParams().radius
# Limits so high that the ramp never bites: the commanded velocity is the velocity.
INSTANT = BodyParams(max_accel=1e9, max_turn_accel=1e9, max_speed=100.0, max_turn_rate=100.0)


def world_of(walls: str, start: tuple[float, float, float] = (0.0, 0.0, 0.0), obstacles: str = "") -> World:
    """A world from wall elements (and optionally obstacle elements) written inline."""
    x, y, theta = start
    return parse_world(
        f'<world name="test" version="1"><start x="{x}" y="{y}" theta="{theta}"/>'
        f"<walls>{walls}</walls><obstacles>{obstacles}</obstacles></world>"
    )


def box_walls(x0: float, y0: float, x1: float, y1: float) -> str:
    return (
        f'<wall x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}"/><wall x1="{x1}" y1="{y0}" x2="{x1}" y2="{y1}"/>'
        f'<wall x1="{x1}" y1="{y1}" x2="{x0}" y2="{y1}"/><wall x1="{x0}" y1="{y1}" x2="{x0}" y2="{y0}"/>'
    )


# A corridor 2 m wide along x, closed at x = 0 and x = 6.
CORRIDOR = world_of(box_walls(0, 0, 6, 2), start=(2.0, 1.0, 0.0))
# A closed 10 m x 10 m room.
BOX = world_of(box_walls(0, 0, 10, 10), start=(3.0, 4.0, 0.0))


def body_in(world: World, **kwargs: object) -> SimBody:
    return SimBody(world.segments(), world.circles, world.start, **kwargs)  # type: ignore[arg-type]


def drive(body: SimBody, v: float, omega: float, seconds: float, dt: float = 0.02) -> list:
    return [body.step(v, omega, dt) for _ in range(round(seconds / dt))]


# -- motion and odometry --------------------------------------------------------------------------------------------

COMMANDS = [
    (0.5, 0.0, 0.1),
    (1.0, 0.3, 0.05),
    (1.2, -0.8, 0.2),
    (0.0, 1.5, 0.1),
    (-0.4, 0.2, 0.3),
    (0.8, 0.0, 0.02),
    (1.5, 2.0, 0.1),
    (0.3, -1.0, 0.25),
    (0.0, 0.0, 0.1),
    (1.0, 1e-12, 0.5),
]


def test_ideal_odometry_is_the_true_motion_from_the_start_pose() -> None:
    start = (3.0, -2.0, 0.7)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, start)
    for v, w, dt in COMMANDS * 3:
        s = body.step(v, w, dt)
        rx, ry, rth = relative(start, (s.x, s.y, s.theta))
        assert s.odom_x == pytest.approx(rx, abs=1e-9)
        assert s.odom_y == pytest.approx(ry, abs=1e-9)
        assert s.odom_theta == pytest.approx(rth, abs=1e-9)
        # and composing the odometry with the start gives the truth back
        assert compose(start, (s.odom_x, s.odom_y, s.odom_theta)) == pytest.approx((s.x, s.y, s.theta), abs=1e-9)


def test_true_pose_follows_the_ramped_unicycle_arcs() -> None:
    """Reference: ramp the velocities, then one closed-form arc per command (the body's sub-steps compose)."""
    p = BodyParams()
    start = (1.0, 2.0, -0.3)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, start)
    x, y, th = start
    v = w = 0.0
    for vc, wc, dt in COMMANDS * 3:
        v = ramp(v, max(-p.max_speed, min(p.max_speed, vc)), p.max_accel, dt)
        w = ramp(w, max(-p.max_turn_rate, min(p.max_turn_rate, wc)), p.max_turn_accel, dt)
        x, y, th = unicycle_step(x, y, th, v, w, dt)
        s = body.step(vc, wc, dt)
        assert (s.x, s.y, s.theta) == pytest.approx((x, y, th), abs=1e-9)
        assert (s.v, s.omega) == pytest.approx((v, w), abs=1e-12)


@pytest.mark.parametrize(("v", "w", "t"), [(1.0, 0.5, 3.0), (0.7, -1.3, 2.0), (1.0, 0.0, 4.0), (0.0, 1.0, 2.0)])
def test_constant_command_gives_the_closed_form_arc(v: float, w: float, t: float) -> None:
    start = (-1.0, 4.0, 2.5)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, start, INSTANT)
    drive(body, v, w, t, dt=0.01)
    s = body.state()
    assert (s.x, s.y, s.theta) == pytest.approx(unicycle_step(*start, v, w, t), abs=1e-9)
    if w:  # an arc of radius v / ω about its centre
        r = v / w
        cx, cy = start[0] - r * math.sin(start[2]), start[1] + r * math.cos(start[2])
        assert math.hypot(s.x - cx, s.y - cy) == pytest.approx(abs(r), abs=1e-9)


def test_unicycle_step_straight_line_and_quarter_circle() -> None:
    assert unicycle_step(1.0, 1.0, 0.0, 2.0, 0.0, 0.5) == pytest.approx((2.0, 1.0, 0.0))
    # radius 1, a quarter turn to the left from (0, 0) heading +x ends at (1, 1) heading +y
    assert unicycle_step(0.0, 0.0, 0.0, math.pi / 2, math.pi / 2, 1.0) == pytest.approx((1.0, 1.0, math.pi / 2))


def test_acceleration_limits_the_speed_up_from_rest() -> None:
    p = BodyParams()
    body = SimBody(NO_SEGMENTS, NO_CIRCLES)
    dt = 0.01
    reached = None
    for k in range(1, 300):
        s = body.step(1.0, 2.0, dt)
        t = k * dt
        assert s.v <= p.max_accel * t + 1e-12
        assert s.omega <= p.max_turn_accel * t + 1e-12
        if reached is None and s.v >= 1.0 - 1e-12:
            reached = t
    assert reached == pytest.approx(1.0 / p.max_accel, abs=dt + 1e-9)
    assert body.state().v == pytest.approx(1.0)
    assert body.state().omega == pytest.approx(2.0)
    # and it brakes no faster either
    s = body.step(0.0, 0.0, 0.1)
    assert s.v == pytest.approx(1.0 - p.max_accel * 0.1)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_speed_limits_clamp(sign: float) -> None:
    p = BodyParams()
    body = SimBody(NO_SEGMENTS, NO_CIRCLES)
    states = drive(body, sign * 10.0, sign * 50.0, 5.0, dt=0.05)
    assert max(abs(s.v) for s in states) == pytest.approx(p.max_speed)
    assert max(abs(s.omega) for s in states) == pytest.approx(p.max_turn_rate)
    assert states[-1].v == pytest.approx(sign * p.max_speed)


def test_zero_or_negative_dt_changes_nothing() -> None:
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, (1.0, 1.0, 0.0))
    before = body.state()
    assert body.step(1.0, 1.0, 0.0) == before
    assert body.step(1.0, 1.0, -0.1) == before


# -- contact --------------------------------------------------------------------------------------------------------


def test_driving_into_a_wall_stops_touching_it_and_presses_the_front_bumper() -> None:
    body = body_in(CORRIDOR)
    states = drive(body, 1.0, 0.0, 8.0)
    s = states[-1]
    assert max(st_.x for st_ in states) <= 6.0 - RADIUS + 1e-9  # never into the wall
    assert s.x == pytest.approx(6.0 - RADIUS, abs=0.01)
    assert body.clearance(s.x, s.y) == pytest.approx(RADIUS, abs=0.01)
    assert body.clearance(s.x, s.y) > RADIUS
    assert s.front_bumper and not s.rear_bumper
    assert s.stalled
    assert s.v == 0.0
    assert s.y == pytest.approx(1.0) and s.theta == pytest.approx(0.0)


def test_backing_into_a_wall_presses_the_rear_bumper() -> None:
    body = body_in(CORRIDOR)
    s = drive(body, -1.0, 0.0, 5.0)[-1]
    assert s.x == pytest.approx(RADIUS, abs=0.01)
    assert s.rear_bumper and not s.front_bumper
    assert s.stalled


def test_free_robot_touches_nothing() -> None:
    s = drive(body_in(CORRIDOR), 0.5, 0.0, 1.0)[-1]
    assert not (s.front_bumper or s.rear_bumper or s.stalled)


def test_turning_in_place_against_a_wall_is_allowed() -> None:
    body = body_in(CORRIDOR)
    drive(body, 1.0, 0.0, 6.0)
    x0, y0 = body.x, body.y
    s = drive(body, 0.0, 1.0, 1.0)[-1]
    assert s.theta > 0.5
    assert (s.x, s.y) == pytest.approx((x0, y0), abs=1e-9)
    assert not s.stalled  # no forward command: the motors are not stalled
    # turned around, it drives away from the wall
    while math.cos(body.theta) > -0.9:
        body.step(0.0, 1.0, 0.02)
    s = drive(body, 0.5, 0.0, 1.0)[-1]
    assert s.x < x0 - 0.1
    assert not s.stalled


def test_stopping_against_a_round_obstacle() -> None:
    world = world_of(box_walls(0, 0, 10, 10), (2.0, 5.0, 0.0), '<circle name="post" x="6" y="5" r="0.5"/>')
    body = body_in(world)
    s = drive(body, 1.0, 0.0, 6.0)[-1]
    assert s.x == pytest.approx(6.0 - 0.5 - RADIUS, abs=0.01)
    assert s.front_bumper and s.stalled


def test_a_person_walking_into_the_robot_lets_it_escape() -> None:
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, (0.0, 0.0, 0.0))
    person = np.array([[0.5, 0.0, 0.25]])  # overlapping the body in front
    s = body.step(0.0, 0.0, 0.02, movers=person)
    assert s.front_bumper
    forward = drive_with(body, 0.5, person, 0.5)
    assert forward.x == pytest.approx(0.0, abs=1e-9)  # into the person: blocked
    back = drive_with(body, -0.5, person, 0.5)
    assert back.x < -0.01  # away from it: allowed


def drive_with(body: SimBody, v: float, movers: np.ndarray, seconds: float, dt: float = 0.02):  # type: ignore[no-untyped-def]
    s = body.state()
    for _ in range(round(seconds / dt)):
        s = body.step(v, 0.0, dt, movers=movers)
    return s


# A closed 4 m x 3 m room with a pillar and a table: collisions from every side and with corners.
CLUTTERED = world_of(
    box_walls(0, 0, 4, 3),
    (1.0, 1.5, 0.0),
    '<circle name="pillar" x="3" y="2" r="0.3"/>'
    '<polygon name="table"><point x="2" y="0"/><point x="2.6" y="0.4"/><point x="2" y="0.8"/></polygon>',
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-2.0, 2.0, allow_nan=False),
            st.floats(-3.0, 3.0, allow_nan=False),
            st.floats(0.001, 0.5, allow_nan=False),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_never_passes_through_anything(commands: list[tuple[float, float, float]]) -> None:
    body = body_in(CLUTTERED)
    for v, w, dt in commands:
        s = body.step(v, w, dt)
        assert body.clearance(s.x, s.y) >= RADIUS - 1e-6
        assert 0.0 < s.x < 4.0 and 0.0 < s.y < 3.0


def test_ideal_odometry_does_not_advance_while_stalled() -> None:
    body = body_in(CORRIDOR)
    drive(body, 1.0, 0.0, 6.0)
    stalled = body.state()
    assert stalled.stalled
    s = drive(body, 1.0, 0.0, 2.0)[-1]
    assert s.stalled
    assert (s.odom_x, s.odom_y) == pytest.approx((stalled.odom_x, stalled.odom_y), abs=1e-9)
    assert s.odom_v == pytest.approx(0.0, abs=1e-6)


def test_realistic_odometry_advances_while_stalled() -> None:
    body = body_in(CORRIDOR, noise=REALISTIC, rng=device_rng(0, "base"))
    drive(body, 1.0, 0.0, 6.0)
    stalled = body.state()
    assert stalled.stalled
    s = drive(body, 1.0, 0.0, 2.0)[-1]
    assert s.stalled
    assert s.x == pytest.approx(stalled.x, abs=1e-6)  # the body stays put
    assert s.odom_x > stalled.odom_x + 1e-3  # the wheels keep counting


def test_spinning_wheels_count_at_their_speed_whatever_the_step() -> None:
    """Wheels turning against a wall at the commanded 1 m/s count about 1 m/s, however the time is stepped."""
    spin_only = noise_profile("ideal", {"wheel_spin_when_stalled": True})
    advances = []
    for dt in (0.02, 0.1):
        body = body_in(CORRIDOR, noise=spin_only)
        drive(body, 1.0, 0.0, 6.0, dt)
        before = body.state()
        assert before.stalled
        after = drive(body, 1.0, 0.0, 1.0, dt)[-1]
        advances.append(after.odom_x - before.odom_x)
    assert advances[0] == pytest.approx(advances[1], rel=0.2)
    assert min(advances) > 0.5


def open_floor(**settings: float) -> list[SimBody]:
    """Bodies of 20 seeds on an open floor (no walls) with only the odometry errors named."""
    noise = noise_profile("ideal", settings)
    return [SimBody(NO_SEGMENTS, NO_CIRCLES, params=INSTANT, noise=noise, rng=device_rng(s, "base")) for s in range(20)]


def test_wheel_slips_make_the_odometry_count_more_than_the_robot_drove() -> None:
    """Short slips (0.2 /s here) while driving 20 m straight: the wheels count more than the body moved, now and
    then, never less; the heading turns a little with each slip. The truth goes straight on."""
    over, turned, slips = [], [], []
    for body in open_floor(odometry_slip_rate=0.2):
        states = drive(body, 1.0, 0.0, 20.0, dt=0.05)
        s = states[-1]
        assert (s.x, s.y, s.theta) == pytest.approx((20.0, 0.0, 0.0), abs=1e-9)  # the truth
        counted = sum(state.odom_v * 0.05 for state in states)
        over.append(counted - s.x)
        turned.append(abs(s.odom_theta))
        slips.append(body.slips)
        # 0.2 rad per metre slipped at most, and a slip counts at least 10 % more than the robot moved meanwhile
        assert turned[-1] <= 0.2 * over[-1] / 0.1 + 1e-9
    assert min(over) >= -1e-9 and np.mean(over) > 0.05  # 4 slips of 0.2 s at 25 %: about 0.2 m
    assert 2 <= np.mean(slips) <= 6 and np.mean(turned) > 0.005


def test_a_heading_bias_turns_the_odometry_by_the_distance_driven() -> None:
    """Wheels of unequal size (0.01 rad/m, drawn once per run): the odometry turns in proportion to the distance
    driven, the same way all along a run, while the robot drives straight; the runs' biases spread as drawn."""
    biases = []
    for body in open_floor(odometry_heading_bias=0.01):
        half = drive(body, 1.0, 0.0, 10.0, dt=0.05)[-1]
        full = drive(body, 1.0, 0.0, 10.0, dt=0.05)[-1]
        assert full.theta == half.theta == 0.0
        assert full.odom_theta == pytest.approx(2.0 * half.odom_theta, rel=0.01)
        assert half.odom_theta == pytest.approx(body.heading_bias * half.x, rel=1e-6)
        biases.append(body.heading_bias)
    assert 0.005 < float(np.std(biases)) < 0.02


# -- sonar ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pose", [(3.0, 4.0, 0.0), (5.0, 5.0, 0.0), (2.0, 7.5, 0.9), (8.5, 1.5, -2.4)])
def test_sonar_ranges_in_a_box(pose: tuple[float, float, float]) -> None:
    p = BodyParams()
    body = SimBody(BOX.segments(), NO_CIRCLES, pose)
    ranges = body.sonar()
    assert ranges.shape == (p.sonar_count,)
    for k, bearing in enumerate(body.sonar_angles):
        nearest = min(ray_to_box(pose[0], pose[1], pose[2] + bearing + off) for off in (-p.sonar_cone, 0, p.sonar_cone))
        expected = min(max(nearest - p.radius, 0.0), p.sonar_max_range)
        assert ranges[k] == pytest.approx(expected, abs=1e-6), f"sonar {k}"


def test_front_sonar_sees_a_long_wall_ahead() -> None:
    body = SimBody(BOX.segments(), NO_CIRCLES, (3.0, 4.0, 0.0))
    assert body.sonar_angles[0] == 0.0
    assert body.sonar()[0] == pytest.approx(10.0 - 3.0 - RADIUS, abs=1e-6)  # the centre ray is the nearest


def test_sonar_angles_go_round_the_body() -> None:
    angles = SimBody(NO_SEGMENTS, NO_CIRCLES).sonar_angles
    assert len(angles) == 16
    assert np.all(angles >= -math.pi) and np.all(angles < math.pi)
    assert [wrap_angle(a) for a in angles] == pytest.approx(list(angles))
    assert np.diff(np.unwrap(angles)) == pytest.approx(np.full(15, 2 * math.pi / 16))


def test_sonar_reports_max_range_when_nothing_is_in_range() -> None:
    assert np.all(SimBody(NO_SEGMENTS, NO_CIRCLES).sonar() == 8.0)
    far = world_of(box_walls(-50, -50, 50, 50))
    assert np.all(body_in(far).sonar() == 8.0)


def test_sonar_sees_movers() -> None:
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, (0.0, 0.0, 0.0))
    ranges = body.sonar(np.array([[3.0, 0.0, 0.5]]))
    assert ranges[0] == pytest.approx(3.0 - 0.5 - RADIUS, abs=1e-6)
    assert ranges[8] == 8.0  # behind: nothing


# -- battery --------------------------------------------------------------------------------------------------------


def test_battery_drains_faster_when_driving() -> None:
    p = BodyParams()
    idle, driving = SimBody(NO_SEGMENTS, NO_CIRCLES), SimBody(NO_SEGMENTS, NO_CIRCLES)
    assert idle.state().charge == 1.0 and idle.state().voltage == pytest.approx(p.voltage_full)
    a = drive(idle, 0.0, 0.0, 60.0, dt=0.5)[-1]
    b = drive(driving, 1.0, 0.5, 60.0, dt=0.5)[-1]
    assert b.charge < a.charge < 1.0
    assert a.charge == pytest.approx(1.0 - p.idle_power * 60.0 / 3600.0 / p.battery_wh)
    for s in (a, b):
        assert p.voltage_empty < s.voltage < p.voltage_full


def test_battery_voltage_bottoms_out_when_empty() -> None:
    p = BodyParams(battery_wh=1.0)
    body = SimBody(NO_SEGMENTS, NO_CIRCLES, params=p)
    charges = [s.charge for s in drive(body, 1.0, 0.0, 120.0, dt=1.0)]
    assert all(b <= a for a, b in itertools.pairwise(charges))
    s = body.state()
    assert s.charge == pytest.approx(0.0)
    assert s.voltage == pytest.approx(p.voltage_empty)
