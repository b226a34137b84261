"""The avoid module's pure logic: obstacle points, vector summation, stuck detection, wall following, protection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.movement.avoid.core import (
    GOTO_REACHED,
    GOTO_RUNNING,
    GOTO_STUCK,
    LASER_FAULT,
    LASER_SLOW,
    AvoidController,
    AvoidInputs,
    AvoidParams,
    Mode,
    centring,
    free_space_offset,
    front_clearance,
    goal_in_robot_frame,
    laser_points,
    lookahead_distance,
    nearest_per_sector,
    parse_command,
    repulsion,
    sonar_points,
    turn_side,
    wall_estimate,
)

ANGLES = np.linspace(-math.pi / 2, math.pi / 2, 361)


def wall_scan(distance: float, pan: float = 0.0, mount: float = 0.25) -> np.ndarray:
    """Ranges of a scan of a wall across the robot's path ``distance`` m ahead of its centre (pan 0)."""
    bearing = ANGLES + pan
    with np.errstate(divide="ignore"):
        r = (distance - mount) / np.cos(bearing)
    return np.where((np.cos(bearing) > 1e-3) & (r < 80.0), r, 80.0)


def test_parse_command() -> None:
    cmd = parse_command(32, [1.0, 2.0], [0.5, 1.0], [1.0])
    assert (cmd.mode, cmd.avoidance, cmd.sonar, cmd.laser) == (Mode.GOTO, 3, True, True)
    assert parse_command(12, [], [], []).sonar and not parse_command(12, [], [], []).laser
    assert parse_command(-1, [], [], []).mode == -1
    for bad in (-2, 5, 45, 40):  # T = 4 is the halt
        with pytest.raises(ValueError, match="cmd_flags"):
            parse_command(bad, [], [], [])


def test_laser_points_use_the_pan_and_mount() -> None:
    pts = laser_points(np.array([1.0, -1.0, 80.0]), np.array([0.0, 0.0, 0.0]), math.pi / 2, 0.25, 80.0)
    assert pts.shape == (1, 2)
    assert pts[0] == pytest.approx([0.25, 1.0])
    with pytest.raises(ValueError):
        laser_points(np.ones(3), np.ones(2), 0.0, 0.25, 80.0)


def test_sonar_points_are_measured_from_the_body() -> None:
    pts = sonar_points(np.array([0.5, 8.0]), np.array([math.pi, 0.0]), 8.0, 0.4)
    assert pts.shape == (1, 2) and pts[0] == pytest.approx([-0.9, 0.0])


def test_nearest_per_sector_and_clearance() -> None:
    pts = np.array([[2.0, 0.0], [1.0, 0.01], [0.0, 3.0], [-1.0, 0.0]])
    near = nearest_per_sector(pts, 36)
    assert len(near) == 3 and [1.0, 0.01] in near.tolist()
    assert front_clearance(pts, 0.4, 0.1) == pytest.approx(0.6)
    assert front_clearance(pts, 0.4, 0.1, -1.0) == pytest.approx(0.6)
    assert front_clearance(np.zeros((0, 2)), 0.4, 0.1) == math.inf


def test_repulsion_pushes_away_from_obstacles_ahead_only() -> None:
    ahead_right = repulsion(np.array([[1.0, -0.2]]), 3.0, 0.4, 1.0)
    assert ahead_right[0] < 0 and ahead_right[1] > 0  # back and to the left
    assert repulsion(np.array([[0.0, 1.0], [-1.0, 0.0]]), 3.0, 0.4, 1.0) == pytest.approx([0.0, 0.0])
    assert repulsion(np.array([[3.5, 0.0]]), 3.0, 0.4, 1.0) == pytest.approx([0.0, 0.0])
    near, far = repulsion(np.array([[0.8, 0.0]]), 3.0, 0.4, 1.0), repulsion(np.array([[2.0, 0.0]]), 3.0, 0.4, 1.0)
    assert abs(near[0]) > abs(far[0])


def test_goal_in_robot_frame() -> None:
    assert goal_in_robot_frame((1.0, 1.0, math.pi / 2), (1.0, 3.0)) == pytest.approx((2.0, 0.0))


def test_wall_estimate_fits_the_left_wall() -> None:
    xs = np.linspace(-1.4, 1.4, 40)
    pts = np.column_stack((xs, 1.2 + 0.1 * xs))
    distance, angle = wall_estimate(pts, 1.5)  # type: ignore[misc]
    assert distance == pytest.approx(1.2 / math.hypot(1, 0.1))
    assert angle == pytest.approx(math.atan(0.1))
    assert wall_estimate(pts[:3], 1.5) is None
    assert wall_estimate(np.zeros((0, 2)), 1.5) is None


def _goto(ctrl: AvoidController, flags: int, goal: tuple[float, float], now: float = 0.0) -> None:
    ctrl.command(parse_command(flags, list(goal), [0.5, 1.0], [1.0]), now)


def test_goto_in_free_space_heads_for_the_goal_and_reaches_it() -> None:
    ctrl = AvoidController()
    _goto(ctrl, 32, (5.0, 5.0))
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=np.zeros((0, 2)), sonar=np.zeros((0, 2))), 0.1)
    assert out.drive_flags == 10 and out.element == (0, GOTO_RUNNING)
    assert out.drive_velocity[1] > 0  # turns left towards the goal at 45°
    out = ctrl.step(AvoidInputs(pose=(4.9, 4.9, 0.0), laser=np.zeros((0, 2))), 0.2)
    assert out.element[1] == GOTO_REACHED and out.drive_velocity == (0.0, 0.0)
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=np.zeros((0, 2))), 0.3)
    assert out.element[1] == GOTO_REACHED  # latched until a new command


def test_goto_steers_around_an_obstacle_on_the_way() -> None:
    ctrl = AvoidController()
    _goto(ctrl, 22, (10.0, 0.0))
    box = np.array([[1.8, y] for y in np.linspace(-0.5, 0.2, 15)])  # more of it right of the line
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=box), 0.1)
    assert out.drive_flags == 0
    assert out.drive_velocity[1] > 0.1  # turns left, around it
    fresh = AvoidController()
    _goto(fresh, 22, (10.0, 0.0))
    free = fresh.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=np.zeros((0, 2))), 0.2)
    assert abs(free.drive_velocity[1]) < 1e-9
    # the direction is smoothed: the turn dies away over a few steps once the obstacle is gone
    turns = [
        ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=np.zeros((0, 2))), 0.2 + 0.1 * k).drive_velocity[1]
        for k in range(60)
    ]
    assert turns[0] > turns[5] > 0 and abs(turns[-1]) < 0.01
    assert out.drive_velocity[0] < free.drive_velocity[0]  # slower near it


def test_weaker_avoidance_with_a_heavier_goal() -> None:
    box = np.array([[1.8, y] for y in np.linspace(-0.5, 0.2, 15)])
    turns = []
    for weight in (0.5, 1.0, 3.0):
        ctrl = AvoidController()
        ctrl.command(parse_command(22, [10.0, 0.0], [0.5, 10.0], [weight]), 0.0)  # no turn-rate cap
        turns.append(ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=box), 0.1).drive_velocity[1])
    assert turns[0] > turns[1] > turns[2] > 0


def test_goto_blocked_ahead_becomes_stuck() -> None:
    ctrl = AvoidController(AvoidParams(stuck_time=2.0))
    _goto(ctrl, 12, (10.0, 0.0))
    wall = sonar_points(np.array([0.2, 0.2, 0.2]), np.array([-0.2, 0.0, 0.2]), 8.0, 0.4)
    t = 0.0
    states = []
    while t < 3.0:
        t += 0.1
        out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), sonar=wall), t)
        states.append(out.element[1])
    assert states[0] == GOTO_RUNNING and states[-1] == GOTO_STUCK
    assert out.drive_velocity == (0.0, 0.0) and out.drive_flags == 10
    assert ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0)), t + 1).element[1] == GOTO_STUCK
    _goto(ctrl, 12, (-10.0, 0.0), t + 1)  # a new goal behind: free again
    assert ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), sonar=wall), t + 1.1).element[1] == GOTO_RUNNING


def test_goto_without_progress_becomes_stuck() -> None:
    ctrl = AvoidController(AvoidParams(progress_time=5.0))
    _goto(ctrl, 2, (10.0, 0.0))
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0)), 0.0)
    for k in range(1, 60):
        out = ctrl.step(AvoidInputs(pose=(0.05 * (k % 2), 0.0, 0.0)), 0.1 * k)
    assert out.element[1] == GOTO_STUCK


def test_sonar_only_avoidance_ignores_the_laser() -> None:
    ctrl = AvoidController()
    _goto(ctrl, 12, (10.0, 0.0))
    box = np.array([[0.7, y] for y in np.linspace(-0.5, 0.5, 15)])
    out = ctrl.step(AvoidInputs(pose=(0.0, 0.0, 0.0), laser=box, sonar=np.zeros((0, 2))), 0.1)
    assert out.drive_velocity[0] > 0.4 and out.element[0] == 0


def test_velocity_mode_laser_slows_then_stops() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(20, [], [0.8, 0.1], []), 0.0)
    free = ctrl.step(
        AvoidInputs(laser=laser_points(wall_scan(10.0), ANGLES, 0.0, 0.25, 80.0), drive_data=(0.8, 0.1)), 0.1
    )
    assert free.drive_flags == 0 and free.drive_velocity == (0.8, 0.1)
    assert free.element == (0, 0) and free.data == (0.8, 0.1)
    slow = ctrl.step(AvoidInputs(laser=laser_points(wall_scan(1.4), ANGLES, 0.0, 0.25, 80.0)), 0.2)
    assert 0 < slow.drive_velocity[0] < 0.8 and slow.element[0] == LASER_SLOW
    assert slow.data == slow.drive_velocity
    stop = ctrl.step(AvoidInputs(laser=laser_points(wall_scan(0.6), ANGLES, 0.0, 0.25, 80.0)), 0.3)
    assert stop.drive_velocity[0] == 0.0 and stop.element[0] == LASER_SLOW
    # backing away is allowed
    ctrl.command(parse_command(20, [], [-0.3, 0.0], []), 0.4)
    back = ctrl.step(AvoidInputs(laser=laser_points(wall_scan(0.6), ANGLES, 0.0, 0.25, 80.0)), 0.5)
    assert back.drive_velocity[0] == -0.3


def test_a_velocity_command_can_narrow_the_laser_strip_for_a_doorway() -> None:
    jambs = np.array([[x, y] for x in np.linspace(0.3, 0.9, 7) for y in (-0.45, 0.45)])  # a 0.9 m doorway
    person = np.array([[0.6, 0.05]])  # 0.2 m from the body
    for force, obstacles, moves in (
        ((), jambs, False),  # the full strip (robot radius + margin) holds the jambs: stopped
        ((0.3,), jambs, True),  # narrowed: the jambs pass beside
        ((0.3,), np.vstack((jambs, person)), False),  # but what stands in the doorway still stops it
        ((0.01,), np.array([[0.5, 0.12]]), False),  # never narrower than the minimum strip
    ):
        ctrl = AvoidController()
        ctrl.command(parse_command(20, [], [0.2, 0.0], list(force)), 0.0)
        out = ctrl.step(AvoidInputs(laser=obstacles), 0.1)
        assert (out.drive_velocity[0] > 0.0) == moves, (force, out)
        assert out.drive_velocity[0] <= 0.2


def test_laser_fault_stops_the_robot() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(20, [], [0.5, 0.0], []), 0.0)
    out = ctrl.step(AvoidInputs(laser=np.zeros((0, 2)), laser_fault=True), 0.1)
    assert out.element[0] == LASER_FAULT and out.drive_velocity == (0.0, 0.0)
    # without laser avoidance the fault does not matter
    ctrl.command(parse_command(10, [], [0.5, 0.0], []), 0.2)
    out = ctrl.step(AvoidInputs(laser=np.zeros((0, 2)), laser_fault=True, drive_code=3, drive_data=(0.1, 0.0)), 0.3)
    assert out.element == (3, 0) and out.data == (0.1, 0.0) and out.drive_velocity == (0.5, 0.0)


def test_heading_mode_converts_to_the_odometry_frame() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(1, [0.0, 1.0], [0.4], []), 0.0)
    out = ctrl.step(AvoidInputs(pose=(3.0, 2.0, 0.5), odometry_theta=0.2), 0.1)
    assert out.drive_flags == 1
    assert out.drive_position[1] == pytest.approx(0.7) and out.drive_velocity == (0.4, 0.0)


def test_released_and_idle_controller_writes_nothing() -> None:
    ctrl = AvoidController()
    out = ctrl.step(AvoidInputs(drive_code=-1, drive_data=(0.0, 0.0)), 0.0)
    assert out.drive_flags is None and out.element == (-1, 0)
    ctrl.command(parse_command(0, [], [0.3, 0.0], []), 0.0)
    assert ctrl.step(AvoidInputs(), 0.1).drive_flags == 0
    ctrl.command(parse_command(-1, [], [], []), 0.2)
    assert ctrl.step(AvoidInputs(), 0.3).drive_flags is None


def test_wall_follow_turns_towards_the_wall_when_too_far() -> None:
    ctrl = AvoidController()
    ctrl.command(parse_command(23, [1.0], [0.3], []), 0.0)
    xs = np.linspace(-1.4, 1.4, 40)
    far = ctrl.step(AvoidInputs(laser=np.column_stack((xs, np.full(40, 1.3)))), 0.1)
    near = ctrl.step(AvoidInputs(laser=np.column_stack((xs, np.full(40, 0.8)))), 0.2)
    right = ctrl.step(AvoidInputs(laser=np.column_stack((xs, np.full(40, 1.0)))), 0.3)
    assert far.wrist_pan is not None and far.wrist_pan > 0
    assert far.drive_velocity[1] > 0 > near.drive_velocity[1]
    assert right.drive_velocity == pytest.approx((0.3, 0.0))


def test_centring_pushes_away_from_the_nearer_side() -> None:
    jambs = np.array([[0.0, -0.7], [0.1, 1.2]])  # a doorway, the robot nearer its right side
    assert centring(jambs, 0.4, 0.8, 0.5) > 0
    assert centring(np.array([[0.0, -1.0], [0.0, 1.0]]), 0.4, 0.8, 0.5) == pytest.approx(0.0)
    assert centring(np.array([[2.0, 0.5]]), 0.4, 0.8, 0.5) == 0.0  # ahead, not beside


@pytest.mark.parametrize("direction", [1.5, -1.5, 2.5, -2.5])
def test_the_side_of_a_goal_behind_does_not_flip_as_the_heading_wavers(direction: float) -> None:
    # heading a hair left or right of straight away from the goal: its bearing is +π - ε or -π + ε
    for previous in (1.0, -1.0):
        left_of_it = turn_side(direction, math.pi - 0.05, previous)
        right_of_it = turn_side(direction, -math.pi + 0.05, previous)
        assert left_of_it == right_of_it == math.copysign(1.0, math.sin(direction - math.pi))


def test_the_side_is_kept_while_the_direction_is_the_goal_s() -> None:
    assert turn_side(0.1, 0.0, -1.0) == -1.0 and turn_side(0.1, 0.0, 1.0) == 1.0
    assert turn_side(0.5, 0.0, -1.0) == 1.0 and turn_side(-0.5, 0.0, 1.0) == -1.0


def corridor_points(pose: tuple[float, float, float], half_width: float = 1.0) -> np.ndarray:
    """What the laser (mounted at the centre, 180° ahead) sees of a corridor along x with walls at y = ±half_width."""
    x, y, theta = pose
    xs = np.arange(-30.0, 30.0, 0.05)
    walls = np.concatenate([np.stack([xs, np.full_like(xs, s * half_width)], axis=1) for s in (1, -1)])
    c, s = math.cos(theta), math.sin(theta)
    dx, dy = walls[:, 0] - x, walls[:, 1] - y
    local = np.stack([c * dx + s * dy, -s * dx + c * dy], axis=1)
    return local[(local[:, 0] > 0) & (np.hypot(local[:, 0], local[:, 1]) < 8.0)]


def drive_goto(ctrl: AvoidController, goal: tuple[float, float], seconds: float = 40.0) -> tuple[int, tuple]:
    """Run a laser goto in the corridor with unicycle kinematics; return (final element[1], final pose)."""
    pose, dt = (0.0, 0.0, 0.0), 0.1
    _goto(ctrl, 22, goal)
    out = ctrl.step(AvoidInputs(pose=pose, laser=corridor_points(pose)), 0.0)
    for k in range(int(seconds / dt)):
        v, w = out.drive_velocity
        x, y, theta = pose
        pose = (x + v * math.cos(theta) * dt, y + v * math.sin(theta) * dt, theta + w * dt)
        out = ctrl.step(AvoidInputs(pose=pose, laser=corridor_points(pose)), dt * (k + 1))
        if out.element[1] in (GOTO_REACHED, GOTO_STUCK):
            break
    return out.element[1], pose


def test_a_goal_off_the_middle_of_a_corridor_is_reached() -> None:
    # The shift to the middle of the corridor fades near the goal, and it is gentle: the goal wins near it.
    state, pose = drive_goto(AvoidController(), (6.0, -0.35))
    assert state == GOTO_REACHED, pose
    assert math.hypot(pose[0] - 6.0, pose[1] + 0.35) < 0.3
    # 0.6 m from the wall: 0.2 m between the body and the wall at the goal
    for goal in ((6.0, -0.4), (3.0, 0.4)):
        state, pose = drive_goto(AvoidController(), goal)
        assert state == GOTO_REACHED, (goal, pose)
        assert math.hypot(pose[0] - goal[0], pose[1] - goal[1]) < 0.3


def test_free_space_offset_points_to_the_middle_of_the_way() -> None:
    xs = np.arange(-1.0, 3.0, 0.1)
    walls = np.concatenate([np.column_stack((xs, np.full_like(xs, y))) for y in (1.3, -0.7)])
    assert free_space_offset(walls, 0.0, 0.4, 1.2, 2.0) == pytest.approx(0.25)  # middle 0.3 m left, left capped
    assert free_space_offset(walls[walls[:, 1] > 0], 0.0, 0.4, 1.2, 2.0) == pytest.approx(0.0)  # beyond reach
    assert free_space_offset(walls[walls[:, 1] < 0], 0.0, 0.4, 1.2, 2.0) == pytest.approx(0.25)  # one wall
    # the same corridor seen along the other way: left and right swap
    assert free_space_offset(walls, math.pi, 0.4, 1.2, 2.0) == pytest.approx(-0.25)
    # only what is beside the way from the robot's back to ``ahead`` counts; what is in the way does not
    box = np.array([[1.0, 0.2], [-2.0, 0.5], [3.0, -0.5]])
    assert free_space_offset(box, 0.0, 0.4, 1.2, 2.0) == 0.0
    assert free_space_offset(np.zeros((0, 2)), 0.0, 0.4, 1.2, 2.0) == 0.0


def test_the_look_ahead_grows_with_the_speed() -> None:
    assert lookahead_distance(0.6, 1.5, 1.0) == pytest.approx(1.6)
    assert lookahead_distance(0.2, 1.5, 1.0) == 1.0
    assert lookahead_distance(-0.6, 1.5, 1.0) == pytest.approx(1.6)
    assert lookahead_distance(0.6, 0.0, 1.0) == 1.0


def heading_oscillation(ctrl: AvoidController, start: tuple[float, float, float], goal: tuple[float, float]) -> float:
    """Degrees turned per metre travelled by a laser goto down the corridor (unicycle kinematics), for 4 < x < 16."""
    pose, dt = start, 0.1
    ctrl.command(parse_command(22, list(goal), [0.6, 1.0], [1.0]), 0.0)  # the demo's speed
    out = ctrl.step(AvoidInputs(pose=pose, laser=corridor_points(pose)), 0.0)
    turned = travelled = 0.0
    for k in range(600):
        v, w = out.drive_velocity
        x, y, theta = pose
        pose = (x + v * math.cos(theta) * dt, y + v * math.sin(theta) * dt, theta + w * dt)
        if 4.0 < pose[0] < 16.0:
            turned += abs(w) * dt
            travelled += abs(v) * dt
        out = ctrl.step(AvoidInputs(pose=pose, laser=corridor_points(pose)), dt * (k + 1))
        if out.element[1] in (GOTO_REACHED, GOTO_STUCK):
            break
    assert out.element[1] == GOTO_REACHED and travelled > 11.0, (out, pose)
    return math.degrees(turned) / travelled


def test_a_goto_down_a_corridor_does_not_weave() -> None:
    # Walls on both sides used to push the robot from one to the other, ±20° every 2 m (some 45°/m here).
    assert heading_oscillation(AvoidController(), (0.0, 0.3, 0.0), (20.0, 0.0)) < 5.0
    assert heading_oscillation(AvoidController(), (0.0, -0.3, 0.2), (20.0, 0.0)) < 5.0


def test_a_goal_before_a_wall_is_approached_straight() -> None:
    # what lies beyond a goal the robot can drive straight to does not push it aside
    xs = np.arange(-2.0, 2.0, 0.05)
    wall = np.column_stack((np.full_like(xs, 6.6), xs))
    ctrl = AvoidController()
    _goto(ctrl, 22, (6.0, 0.0))
    pose, dt = (0.0, 0.1, 0.0), 0.1
    out = ctrl.step(AvoidInputs(pose=pose, laser=np.zeros((0, 2))), 0.0)
    for k in range(300):
        v, w = out.drive_velocity
        x, y, theta = pose
        pose = (x + v * math.cos(theta) * dt, y + v * math.sin(theta) * dt, theta + w * dt)
        c, s = math.cos(theta), math.sin(theta)
        local = np.column_stack(
            (c * (wall[:, 0] - x) + s * (wall[:, 1] - y), -s * (wall[:, 0] - x) + c * (wall[:, 1] - y))
        )
        out = ctrl.step(AvoidInputs(pose=pose, laser=local[local[:, 0] > 0]), dt * (k + 1))
        if out.element[1] != GOTO_RUNNING:
            break
    assert out.element[1] == GOTO_REACHED, pose
    assert abs(pose[2]) < 0.2 and abs(pose[1]) < 0.15, pose
