"""The motion module's pure logic: free rays, openings, the rectangle, the coverage grid, the choice of a way in
synthetic scans, and the command handling and status codes of the controller."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pluto.movement.motion.core import (
    AT_GOAL,
    FOLLOWING,
    IDLE,
    IDLE_RECTANGLE,
    MOVETO_IDLE,
    MOVETO_SET,
    SCANNING,
    MotionController,
    MotionInputs,
    MotionParams,
    Scan,
    choose_way,
    closest_object,
    enclosed,
    free_area,
    way_cost,
)
from pluto.movement.motion.geometry import (
    FREE,
    OCCUPIED,
    UNKNOWN,
    CoverageGrid,
    Gap,
    Rectangle,
    detour,
    find_gaps,
    free_length,
    segment_blocked,
    squeezed,
)


def wall(x0: float, y0: float, x1: float, y1: float, step: float = 0.05) -> np.ndarray:
    n = max(2, int(math.hypot(x1 - x0, y1 - y0) / step))
    t = np.linspace(0.0, 1.0, n)
    return np.column_stack((x0 + t * (x1 - x0), y0 + t * (y1 - y0)))


def scan_of(
    segments: list[tuple[float, float, float, float]], origin: tuple[float, float] = (0.0, 0.0)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 720-beam scan over 360° of wall segments from ``origin``: (beam ends in beam order, ranges, bearings); a
    beam without an echo ends 30 m away."""
    bearings = np.linspace(-math.pi, math.pi, 721)[:-1]
    ranges = np.full(len(bearings), 80.0)
    ox, oy = origin
    for x0, y0, x1, y1 in segments:
        dx, dy = x1 - x0, y1 - y0
        for i, b in enumerate(bearings):
            c, s = math.cos(b), math.sin(b)
            den = c * dy - s * dx
            if abs(den) < 1e-12:
                continue
            t = ((x0 - ox) * dy - (y0 - oy) * dx) / den
            u = ((x0 - ox) * s - (y0 - oy) * c) / den
            if t > 0 and 0 <= u <= 1:
                ranges[i] = min(ranges[i], t)
    ranges = np.minimum(ranges, 30.0)
    points = np.column_stack((ox + ranges * np.cos(bearings), oy + ranges * np.sin(bearings)))
    return points, ranges, bearings


# -- geometry ----------------------------------------------------------------------------------------------------


def test_free_length_and_blocked_segment() -> None:
    points = np.array([[3.0, 0.2], [5.0, 2.0]])
    assert free_length(points, (0.0, 0.0), 0.0, 0.5, 10.0) == pytest.approx(3.0)
    assert free_length(points, (0.0, 0.0), math.pi, 0.5, 10.0) == 10.0
    assert segment_blocked(points, (0.0, 0.0), (6.0, 0.0), 0.5)
    assert not segment_blocked(points, (0.0, 0.0), (0.0, 6.0), 0.5)


def test_a_way_through_a_doorway_is_squeezed_a_way_beside_a_wall_is_not() -> None:
    door = np.concatenate((wall(-3.0, 2.0, -0.45, 2.0), wall(0.45, 2.0, 3.0, 2.0)))  # 0.9 m wide at y = 2
    assert squeezed(door, (0.0, 0.0), (0.0, 4.0), 1.4)
    assert not squeezed(door, (0.0, 0.0), (0.0, 4.0), 0.8)  # narrower than asked
    assert not squeezed(door, (0.0, 0.0), (0.0, 1.5), 1.4)  # stops before it
    corridor_side = wall(-3.0, 0.6, 8.0, 0.6)
    assert not squeezed(corridor_side, (0.0, 0.0), (6.0, 0.0), 1.4)  # one side only
    assert squeezed(np.concatenate((corridor_side, wall(-3.0, -0.6, 8.0, -0.6))), (0.0, 0.0), (6.0, 0.0), 1.4)


def test_the_detour_round_a_wall_goes_by_its_nearer_end_or_through_an_opening() -> None:
    a, b = (0.0, 0.0), (6.0, 0.0)
    assert detour(wall(0.0, 2.0, 6.0, 2.0), a, b, 0.5, 0.84) == 0.0  # beside the way, not across it
    # a wall across the way from y = -3 to y = 8: round its south end, 0.5 m clear of it
    long_wall = wall(3.0, -3.0, 3.0, 8.0)
    assert detour(long_wall, a, b, 0.5, 0.84) == pytest.approx(2 * math.hypot(3.0, 3.5) - 6.0, abs=0.05)
    # a 1 m opening in it from y = 1 to y = 2: through the opening
    opened = np.concatenate((wall(3.0, -3.0, 3.0, 1.0), wall(3.0, 2.0, 3.0, 8.0)))
    assert detour(opened, a, b, 0.5, 0.84) == pytest.approx(2 * math.hypot(3.0, 1.5) - 6.0, abs=0.05)
    # an opening narrower than the robot is none
    narrow = np.concatenate((wall(3.0, -3.0, 3.0, 1.0), wall(3.0, 1.5, 3.0, 8.0)))
    assert detour(narrow, a, b, 0.5, 0.84) == pytest.approx(detour(long_wall, a, b, 0.5, 0.84), abs=0.05)


def test_a_doorway_of_a_room_is_enclosed_one_across_a_corridor_is_not() -> None:
    # a 4 m wide room (x -2..2) below a corridor (y 2.5..4.5) running 40 m, doorways at x = 0 in both walls
    walls = np.concatenate(
        (
            wall(-2.0, -2.5, -2.0, 2.5),
            wall(2.0, -2.5, 2.0, 2.5),
            wall(-20.0, 2.5, -0.45, 2.5),
            wall(0.45, 2.5, 20.0, 2.5),
            wall(-20.0, 4.5, -0.45, 4.5),
            wall(0.45, 4.5, 20.0, 4.5),
        )
    )
    out_of_the_room = Gap((-0.45, 2.5), (0.45, 2.5), (0.0, 1.0))  # seen from inside the room
    across = Gap((-0.45, 4.5), (0.45, 4.5), (0.0, 1.0))  # seen from the corridor
    assert enclosed(walls, out_of_the_room, 8.5)
    assert not enclosed(walls, across, 8.5)


def test_a_doorway_in_a_wall_is_an_opening() -> None:
    # a wall 2 m to the right of the robot with a 0.9 m door from x = 1.6 to 2.5, a room behind it
    points, ranges, _ = scan_of([(-5, -2, 1.6, -2), (2.5, -2, 8, -2), (-5, -7, 8, -7)])
    gaps = find_gaps(points, ranges, (0.0, 0.0), 0.84, 2.5, 0.6)
    assert len(gaps) == 1
    gap = gaps[0]
    assert gap.width == pytest.approx(0.9, abs=0.05)
    assert gap.middle[0] == pytest.approx(2.05, abs=0.05) and gap.middle[1] == pytest.approx(-2.0, abs=0.02)
    assert gap.normal[1] == pytest.approx(-1.0, abs=0.05)  # pointing away from the robot, into the room


def test_a_doorway_with_another_seen_through_it_is_found_by_its_jambs() -> None:
    # 0.9 m from a wall (y = -0.9) with a 0.9 m door straight ahead, and across the 2 m corridor behind it (y = -2.9)
    # another door into a room (back wall y = -8): through the near door the scan sees the corridor's far wall, the
    # far door and the room, edges up and down before it comes back to the near wall's other jamb
    near_wall = [(-6.0, -0.9, -0.45, -0.9), (0.45, -0.9, 6.0, -0.9)]
    far_wall = [(-6.0, -2.9, -0.5, -2.9), (0.5, -2.9, 6.0, -2.9)]
    walls = [*near_wall, *far_wall, (-6.0, -8.0, 6.0, -8.0)]
    points, ranges, bearings = scan_of(walls)
    rng = np.random.default_rng(3)
    ranges = ranges + rng.normal(0.0, 0.01, ranges.shape)  # the laser's range noise turns short bases
    points = np.column_stack((ranges * np.cos(bearings), ranges * np.sin(bearings)))
    front = np.flatnonzero(bearings < 0.0)  # the half looking at the doors
    gaps = find_gaps(points[front], ranges[front], (0.0, 0.0), 0.84, 2.5, 0.6)
    near = [g for g in gaps if g.middle[1] == pytest.approx(-0.9, abs=0.05)]
    assert len(near) == 1, gaps
    assert near[0].width == pytest.approx(0.9, abs=0.05) and near[0].middle[0] == pytest.approx(0.0, abs=0.05)


def test_a_beam_without_an_echo_in_a_wall_is_not_an_opening() -> None:
    # 0.9 m beside a long wall, looking along it: consecutive beams hit it metres apart, and one of them is lost
    points, ranges, bearings = scan_of([(-0.9, -30.0, -0.9, 30.0)])
    front = np.flatnonzero(np.abs(bearings - math.pi / 2) < 1.2)
    points, ranges, bearings = points[front], ranges[front].copy(), bearings[front]
    assert find_gaps(points, ranges, (0.0, 0.0), 0.84, 2.5, 0.6) == []
    lost = int(np.argmin(np.abs(ranges - 7.0)))  # a beam that meets the wall about 7 m away
    ranges[lost] = 30.0
    points[lost] = (30.0 * math.cos(bearings[lost]), 30.0 * math.sin(bearings[lost]))
    edges = np.abs(np.diff(ranges)) > 0.6
    assert edges[lost - 1] and edges[lost]  # the dropout makes both edges of an opening ...
    assert find_gaps(points, ranges, (0.0, 0.0), 0.84, 2.5, 0.6) == []  # ... but one beam is not a door


def test_rectangle() -> None:
    rect = Rectangle(1.0, 2.0, math.pi / 2, 2.0, 5.0)  # x -1..3, y 2..7
    assert rect.contains(1.0, 3.0) and not rect.contains(1.0, 1.0) and not rect.contains(3.5, 4.0)
    assert rect.clip(10.0, 10.0, 0.5) == pytest.approx((2.5, 6.5))
    assert rect.exit_distance(1.0, 3.0, math.pi / 2) == pytest.approx(4.0)
    assert rect.exit_distance(1.0, 3.0, 0.0) == pytest.approx(2.0)
    assert not Rectangle(0, 0, 0, 0, 0).set and Rectangle(0, 0, 0, 0, 0).contains(1e3, 1e3)


def test_the_coverage_grid_marks_what_beams_crossed_and_hit() -> None:
    grid = CoverageGrid(Rectangle(0.0, 0.0, 0.0, 2.0, 4.0), cell=0.25)  # x 0..4, y -2..2
    grid.add_scan((0.1, 0.0), np.array([0.0]), np.array([3.0]), 80.0)
    iu, iw, _ = grid.index(np.array([1.5, 3.1, 1.5]), np.array([0.1, 0.1, 1.5]))
    assert grid.cells[iu[0], iw[0]] == FREE
    assert grid.cells[iu[1], iw[1]] == OCCUPIED
    assert grid.cells[iu[2], iw[2]] == UNKNOWN
    assert 0.0 < grid.seen_fraction() < 0.2
    assert grid.frontier_targets(0.4, 1.5, 1)  # places beside the beam show unseen cells


def test_the_closest_object_is_not_a_wall() -> None:
    a = np.linspace(-math.pi / 2, math.pi / 2, 20) + math.pi
    pillar = np.column_stack((3.0 + 0.3 * np.cos(a), 0.3 * np.sin(a)))
    points = np.concatenate((wall(-5, 1.5, 8, 1.5), pillar))
    obj = closest_object(points, (0.0, 0.0), 5.0)
    assert obj is not None
    assert obj[0] == pytest.approx(3.0, abs=0.25) and obj[1] == pytest.approx(0.0, abs=0.1)
    assert closest_object(wall(-5, 1.5, 8, 1.5), (0.0, 0.0), 5.0) is None


# -- the choice of a way -------------------------------------------------------------------------------------------


def test_down_a_corridor_the_ray_along_it_is_chosen() -> None:
    points, ranges, _ = scan_of([(-2, 1, 20, 1), (-2, -1, 20, -1)])
    seen = np.ones(72, dtype=bool)
    way = choose_way(
        points,
        [((0.0, 0.0), points, ranges)],
        (0.0, 0.0, 0.3),
        (10.0, 0.0),
        seen,
        Rectangle(0, 0, 0, 0, 0),
        MotionParams(),
    )
    assert way is not None and way.kind == "ray"
    assert abs(way.bearing) < math.radians(5)
    assert way.target[0] > 5.0


def test_a_goal_behind_a_wall_is_reached_through_the_opening() -> None:
    # a wall ahead across the robot's way with an opening on the left (from y = 2 to y = 4), the goal beyond it
    points, ranges, _ = scan_of([(4, -6, 4, 2), (4, 4, 4, 10), (-3, -6, -3, 10)])
    seen = np.ones(72, dtype=bool)
    way = choose_way(
        points,
        [((0.0, 0.0), points, ranges)],
        (0.0, 0.0, 0.0),
        (8.0, 3.0),
        seen,
        Rectangle(0, 0, 0, 0, 0),
        MotionParams(),
    )
    assert way is not None
    assert 1.5 < way.target[1] < 4.5 if way.kind == "ray" else way.gap is not None and 2.0 < way.gap.middle[1] < 4.0


def test_shut_in_a_room_the_robot_takes_its_doorway_not_the_one_across_the_corridor() -> None:
    # a 4 m x 5 m room (x -2..2, y -2.5..2.5) with a 0.9 m doorway north into a corridor (y 2.5..4.5) and another
    # room's doorway across it; the goal far west beyond the room's west wall (the doorway leads farther from it
    # than the robot is, yet it is the way out); the robot faces south
    segments = [
        (-2, -2.5, 2, -2.5),
        (-2, -2.5, -2, 2.5),
        (2, -2.5, 2, 2.5),
        (-20, 2.5, -0.45, 2.5),
        (0.45, 2.5, 20, 2.5),
        (-20, 4.5, -0.45, 4.5),
        (0.45, 4.5, 20, 4.5),
        (-2, 9.5, 2, 9.5),
    ]
    origin = (0.6, 0.0)
    points, ranges, _ = scan_of(segments, origin)
    way = choose_way(
        points[ranges < 29.0],
        [(origin, points, ranges)],
        (*origin, -math.pi / 2),
        (-9.0, -2.0),
        np.ones(72, dtype=bool),
        Rectangle(0, 0, 0, 0, 0),
        MotionParams(),
    )
    assert way is not None and way.kind == "door" and way.gap is not None
    assert way.gap.middle[1] == pytest.approx(2.5, abs=0.05) and way.gap.width < 1.0


def test_between_obstacles_a_strip_barely_wider_than_the_robot_is_a_way() -> None:
    # a 1.1 m wide slot between boxes, closed behind the robot: no ray 0.6 m wide each side is free, one 0.45 m wide
    # is
    segments = [(-1.0, -0.55, 8.0, -0.55), (-1.0, 0.55, 8.0, 0.55), (-1.0, -0.55, -1.0, 0.55)]
    points, ranges, _ = scan_of(segments)
    way = choose_way(
        points[ranges < 29.0],
        [((0.0, 0.0), points, ranges)],
        (0.0, 0.0, 0.0),
        (4.0, 0.0),
        np.ones(72, dtype=bool),
        Rectangle(0, 0, 0, 0, 0),
        MotionParams(),
    )
    assert way is not None and way.kind == "ray" and way.target[0] > 1.5  # past the box's near side


def test_the_rectangle_bounds_the_rays() -> None:
    points = np.zeros((0, 2))
    seen = np.ones(72, dtype=bool)
    rect = Rectangle(0.0, 0.0, 0.0, 2.0, 3.0)
    way = choose_way(points, [], (0.5, 0.0, 0.0), (10.0, 0.0), seen, rect, MotionParams())
    assert way is not None and way.target[0] <= 3.0 - 0.4


def test_only_seen_directions_are_weighed() -> None:
    seen = np.zeros(72, dtype=bool)
    assert (
        choose_way(np.zeros((0, 2)), [], (0.0, 0.0, 0.0), (5.0, 0.0), seen, Rectangle(0, 0, 0, 0, 0), MotionParams())
        is None
    )


# -- the controller: commands and status codes ---------------------------------------------------------------------


def level_scan(stamp: float, segments: list[tuple[float, float, float, float]]) -> Scan:
    bearings = np.linspace(-math.pi / 2, math.pi / 2, 361)
    ranges = np.full(361, 80.0)
    for x0, y0, x1, y1 in segments:
        dx, dy = x1 - x0, y1 - y0
        for i, b in enumerate(bearings):
            c, s = math.cos(b), math.sin(b)
            den = c * dy - s * dx
            if abs(den) > 1e-12:
                t = ((x0 - 0.25) * dy - y0 * dx) / den
                u = ((x0 - 0.25) * s - y0 * c) / den
                if t > 0 and 0 <= u <= 1:
                    ranges[i] = min(ranges[i], t)
    return Scan(stamp, ranges, bearings, 80.0)


def test_status_codes_of_commands() -> None:
    core = MotionController()
    pose = (0.0, 0.0, 0.0)
    out = core.step(MotionInputs(pose=pose), 0.1)
    assert out.element[2:] == (MOVETO_IDLE, IDLE) and out.avoid == ()
    core.command(46, (0.0, 0.0), (3.0, 6.0), (0.0,), pose, 0.2)
    assert core.step(MotionInputs(pose=pose), 0.2).element[3] == IDLE_RECTANGLE
    # moveto: set, then scanning (the robot stops and looks)
    core.command(42, (4.0, 20.0), (), (), pose, 0.3)
    out = core.step(MotionInputs(pose=pose, wrist=(0.0, 0.0), avoid_element=(0, 0)), 0.3)
    assert out.element[2] == MOVETO_SET and out.element[3] == SCANNING
    assert core.job is not None and core.job.nav is not None
    assert core.job.nav.goal[1] <= 6.0 - 0.4  # the goal is kept inside the rectangle
    # a pass-through command stops the motion; element[3] back to -1 (rectangle set)
    core.command(20, (), (0.0, 0.0), (), pose, 0.4)
    out = core.step(MotionInputs(pose=pose), 0.4)
    assert out.avoid[0].cmd_flags == 20 and out.element[3] == IDLE_RECTANGLE and core.stopped is not None
    # 44 with no rectangle given resumes it
    core.command(44, (), (), (), pose, 0.5)
    assert core.job is not None and core.job.kind == "moveto" and core.stopped is None
    # -1 is passed to avoid
    core.command(-1, (), (), (), pose, 0.6)
    out = core.step(MotionInputs(pose=pose), 0.6)
    assert out.avoid[-1].cmd_flags == -1 and core.job is None
    with pytest.raises(ValueError):
        core.command(41, (), (), (), pose, 0.7)
    with pytest.raises(ValueError):
        core.command(42, (1.0,), (), (), pose, 0.7)
    with pytest.raises(ValueError):
        MotionController().command(44, (), (2.0, 3.0), (), None, 0.7)
    with pytest.raises(ValueError):
        MotionController().command(45, (), (), (), pose, 0.7)


def test_a_moveto_in_the_open_scans_follows_and_arrives() -> None:
    """In an empty field: scanning (1), then the goal in plain view: nearing (-2) with the simple goto, then at the
    goal (1) and idle (0)."""
    core = MotionController(MotionParams(look_time=0.2))
    core.command(42, (4.0, 0.0), (), (), (0.0, 0.0, 0.0), 0.0)
    codes: list[tuple[int, int]] = []
    t = 0.0
    x = 0.0
    while t < 20.0 and (not codes or codes[-1] != (AT_GOAL, IDLE)):
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 5, 20, 5)])
        out = core.step(MotionInputs(pose=(x, 0.0, 0.0), scan=scan, wrist=core.wrist_target, avoid_element=(0, -1)), t)
        codes.append(out.element[2:])
        if out.element[2] == -2 and any(o.cmd_flags == 22 for o in out.avoid):
            assert out.avoid[-1].position == pytest.approx((4.0, 0.0))
        if out.element[3] == FOLLOWING:
            x += 0.05
    assert (MOVETO_SET, SCANNING) in codes and (-2, FOLLOWING) in codes
    assert codes[-1] == (AT_GOAL, IDLE)


def test_the_robot_turns_on_the_spot_before_it_drives_to_a_way_aside() -> None:
    """The goal is to the left: after the scan the robot turns on the spot (avoid velocity 0, v = 0, ω > 0) until it
    faces the way, and only then sends the avoid goto (22)."""
    core = MotionController(MotionParams(look_time=0.2, handover=0.0, near_reach=0.0))
    core.command(42, (0.0, 6.0), (), (), (0.0, 0.0, 0.0), 0.0)
    t, theta = 0.0, 0.0
    turned_before_goto = False
    goto_heading = None
    target: tuple[float, ...] = ()
    while t < 30.0 and goto_heading is None:
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 5, 8)])
        out = core.step(
            MotionInputs(pose=(0.0, 0.0, theta), scan=scan, wrist=core.wrist_target, avoid_element=(0, -1)), t
        )
        for order in out.avoid:
            if order.cmd_flags == 0 and order.velocity[0] == 0.0 and order.velocity[1] > 0.0:
                turned_before_goto = True
                theta += order.velocity[1] * 0.1
            if order.cmd_flags == 22:
                goto_heading = theta
                target = order.position
    assert turned_before_goto and goto_heading is not None
    assert goto_heading > math.radians(45)
    assert abs(math.atan2(target[1], target[0]) - goto_heading) < math.radians(12)  # facing the way


def test_a_short_way_is_driven_straight_with_the_laser_protection() -> None:
    """A way of 2 m: after turning to face it the robot drives straight at its end by avoid velocity commands with
    the laser protection (20), not by the avoid goto; the laser protection holding it ends the way (a new scan)."""
    core = MotionController(MotionParams(look_time=0.2, handover=0.0, near_reach=0.0))
    core.command(42, (2.0, 0.0), (), (), (0.0, 0.0, 0.0), 0.0)
    t, x = 0.0, 0.0
    drives: list[tuple[float, float]] = []
    while t < 20.0 and x < 1.0:
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 10, 8), (6, -5, 6, 8)])
        out = core.step(MotionInputs(pose=(x, 0.0, 0.0), scan=scan, wrist=core.wrist_target, avoid_element=(0, 0)), t)
        assert all(o.cmd_flags != 22 for o in out.avoid)
        for order in out.avoid:
            if order.cmd_flags == 20 and order.velocity[0] > 0.0:
                drives.append((order.velocity[0], order.velocity[1]))
                x += order.velocity[0] * 0.1
    assert drives and x >= 1.0
    assert all(abs(w) < 0.15 for _, w in drives)  # straight at the way's end (rays every 5°)
    # the laser protection holds the robot (element[0] 6, speed 0): after a while the way ends, the robot scans
    held = 0.0
    while t < 40.0 and core.job is not None and core.job.nav is not None and core.job.nav.phase != "scan":
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 10, 8), (6, -5, 6, 8)])
        core.step(MotionInputs(pose=(x, 0.0, 0.0), scan=scan, wrist=core.wrist_target, avoid_element=(6, 0)), t)
        held += 0.1
    assert core.job is not None and core.job.nav is not None and core.job.nav.phase == "scan"
    assert 1.5 < held < 5.0


def _box_scan(cx: float, cy: float, half_x: float, half_y: float) -> tuple[tuple[float, float], np.ndarray, np.ndarray]:
    """A full turn of beams from (cx, cy) ending on the walls of a box of half-sizes half_x, half_y around it."""
    bearings = np.linspace(-math.pi, math.pi, 720, endpoint=False)
    c, s = np.cos(bearings), np.sin(bearings)
    with np.errstate(divide="ignore"):
        r = np.minimum(np.abs(half_x / c), np.abs(half_y / s))
    ends = np.column_stack((cx + r * c, cy + r * s))
    return (cx, cy), ends, r


def test_free_area_tells_a_room_from_a_corridor() -> None:
    room = free_area([_box_scan(2.0, 2.5, 2.0, 2.5)], (2.0, 2.5))
    assert room == pytest.approx(20.0, rel=0.05)  # a 4 m x 5 m room
    corridor = free_area([_box_scan(0.0, 0.0, 40.0, 1.0)], (0.0, 0.0))  # 2 m wide, clipped at 10 m each way
    assert corridor > 30.0 > room
    assert free_area([], (0.0, 0.0)) == math.inf


def test_a_doorway_out_of_a_room_is_not_taken_for_a_room() -> None:
    door = Gap((-0.45, 0.0), (0.45, 0.0), (0.0, -1.0))  # in the room's south wall, leading south
    goal = (-7.0, -4.0)  # far aside of the doorway's axis
    p = MotionParams()
    outside = way_cost(door.point(1.0), 2.0, goal, np.zeros((0, 2)), p, door)
    inside = way_cost(door.point(1.0), 2.0, goal, np.zeros((0, 2)), p, door, in_room=True)
    assert inside < outside


def test_a_pressed_bumper_backs_the_robot_off_and_it_looks_again() -> None:
    """Following a way, the robot touches something (element[0] 1 from the drive: only backing straight away is
    allowed): it backs off for a while, straight, then scans for a way again; the place is remembered."""
    core = MotionController(MotionParams(look_time=0.2, handover=0.0, near_reach=0.0))
    core.command(42, (6.0, 0.0), (), (), (0.0, 0.0, 0.0), 0.0)
    t = 0.0
    while t < 20.0 and (core.job is None or core.job.nav is None or core.job.nav.phase == "scan"):
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 10, 8)])
        core.step(MotionInputs(pose=(0.0, 0.0, 0.0), scan=scan, wrist=core.wrist_target, avoid_element=(0, -1)), t)
    assert core.job is not None and core.job.nav is not None and core.job.nav.phase != "scan"
    backs: list[tuple[float, float]] = []
    start = t
    while t < start + 5.0 and core.job.nav.phase != "scan":
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 10, 8)])
        out = core.step(
            MotionInputs(pose=(1.0, 0.0, 0.0), scan=scan, wrist=core.wrist_target, avoid_element=(1, -1)), t
        )
        backs += [o.velocity[:2] for o in out.avoid if o.cmd_flags == 20]
    assert core.job.nav.phase == "scan"
    moves = [b for b in backs if b != (0.0, 0.0)]  # the last one stops the robot for the scan
    assert len(moves) >= 15 and all(v < 0.0 and w == 0.0 for v, w in moves)  # straight back, away from the bumper
    assert 1.5 < t - start < 3.0
    assert (1.0, 0.0) in core.job.nav.visited


def test_a_wrist_that_is_not_where_it_was_sent_gets_its_command_again() -> None:
    """The scan waits for the wrist to reach each view; a lost wrist command (a busy network) must not leave it
    waiting for ever: while the wrist stays elsewhere, the command is sent again every ``wrist_resend`` s."""
    core = MotionController(MotionParams(look_time=0.2, wrist_resend=3.0))
    core.command(42, (6.0, 0.0), (), (), (0.0, 0.0, 0.0), 0.0)
    sent: list[tuple[float, tuple[float, float]]] = []
    t = 0.0
    while t < 7.0:
        t = round(t + 0.1, 3)
        scan = level_scan(t, [(-5, 8, 10, 8)])
        out = core.step(MotionInputs(pose=(0.0, 0.0, 0.0), scan=scan, wrist=(0.5, 0.3), avoid_element=(0, -1)), t)
        if out.wrist is not None:
            sent.append((t, out.wrist))
    assert [w for _, w in sent] == [(0.0, 0.0)] * 3  # looking ahead: sent at once, then again and again
    times = [t for t, _ in sent]
    assert times[0] == 0.1 and all(3.0 <= b - a <= 3.2 for a, b in itertools.pairwise(times))
    assert core.job is not None and core.job.nav is not None and core.job.nav.view == 0  # still waiting to look
