"""The motion module's pure logic: moveto by ray following, explore, investigate, the rectangle, active scanning
with the wrist, and the status codes of ``motion/status``.

Every step gets the newest pose, laser scan, wrist state and ``avoidance/status`` and returns the command for the
avoid module (or nothing), the wrist target and the status; no I/O, no clock (``now`` is passed in).

Moveto (ray following, docs/design.md, "motion"): the robot stops and scans (element[3] = 1): it looks straight
ahead, then pans the wrist to the side it is about to turn to and tilts it to look at the ground there. From the
scans it weighs two kinds of ways: free rays (strips as wide as the robot plus a margin, every 5° of the directions
seen, cut at the rectangle) and openings (doorways: the edges where the range jumps up and down again). Each way is
scored by the length to its best point plus the straight distance from there to the goal, doubled when the scans
show a wall between them. It then follows the best way (element[3] = 3): a ray by an avoid goto to its best point
(avoid drives down the middle of the street), a narrow doorway by lining up in front of it and driving through it
along the line the laser measures between its jambs. While following it checks both sides for new openings; one
that promises a shorter way stops the robot to scan and decide again. Once the goal is near and nothing stands in
between, the simple avoid goto takes over (element[2] = -2) until the goal is reached (element[2] = 1).

Explore: the rectangle is covered by the laser on a grid of 0.25 m cells; the robot goes (by the same ray
following) to the nearest safe place next to unseen cells, scanning at each decision, until none is left, then
returns home by moveto (element[2] = -1, -2, 1) and turns to the home heading.

Investigate: the robot goes to the closest object the laser sees (element[3] = 11), asks for the arm to be
unfolded if there is one, and circles the object once (element[3] = 12); then element[2] = 2.

Commands (``motion/command``):

* cmd_flags < 40 (and >= 0): passed through to avoid unchanged; a motion in progress stops and can be resumed.
* -1: released: passed to avoid (which stops too) and the motion thread stops.
* 42 moveto: position[0..1] = (x, y) in the ``Localization/Pose`` frame (kept inside the rectangle).
* 43 investigate the closest object.
* 44 explore: rectangle (b, h) = velocity[0..1], home = the current pose; then explore. Sent while a stopped motion
  waits (with no rectangle, or the one in force), it resumes that motion instead.
* 45 start/resume: resumes the stopped motion, else starts exploring the rectangle set by 46.
* 46 just set the rectangle: (b, h) = velocity[0..1], home (x, y) = position[0..1], θ = force[0]. b = 0 removes it.

Status (``motion/status``): data and element[0..1] are avoid's status; element[2] is the moveto status
(-1 moveto point set, -2 nearing it with the simple goto, 1 at the goal, 2 investigate done, -3 the module restarted
and could not continue the job it had (see below), 0 otherwise);
element[3] is the motion status (-10 motion thread stopped, -1 not in motion with the rectangle set, 0 not in motion
and no rectangle, 11 investigate moving towards the object, 12 investigate circling it, 1 scanning for new paths,
3 following a path; 7, 8, 9 waiting for a stale input, see below).

Stale inputs (docs/design.md, principle 8): a behaviour goes on only while the inputs it steers by are fresh. The module
gives the controller the pose only when it is fresh (``MotionInputs.pose`` None otherwise) and says when the laser
scans or avoid's status, heard before, went stale. A behaviour then stops the robot at once (avoid's halt, T = 4,
which holds whatever it was doing: turning on the spot, driving straight, backing off, an avoid goto) and waits,
element[3] saying for what: 7 the laser scans, 8 the pose (or a pose too uncertain to tell the goal is reached),
9 avoid's status (the avoid module silent). Its timers for giving up (progress, turning, a blocked way, a
doorway, backing off, looking) stand still while it waits; when the input is fresh again it goes on by itself, its
last command to avoid given again. The goal is reported reached (element[2] = 1) only on a fresh pose whose position
standard deviation is at most a third of ``goal_tolerance`` (:func:`pluto.movement.avoid.module.pose_std`, avoid's
rule); a pose too uncertain at the goal holds the robot there (element[3] 8) until it is certain, and a goal that
then turns out farther than ``near_enough`` is looked for again (a new scan): a goal status is never computed from a
frozen or uncertain pose.

Continuing after a restart: :meth:`MotionController.snapshot` is the controller's job (the running one and the
stopped one waiting for a resume) and its rectangle; a restarted module's controller :meth:`MotionController.resume`
s from it. A moveto or the way home goes on to its goal, deciding again from a new scan (as a resumed motion does);
an exploration goes on in the same rectangle with the same home, looking around where the robot is (the coverage
seen so far is not kept: it is seen again), the places it gave up on still avoided; an investigation looks for the
closest object again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

import msgspec
import numpy as np
from numpy.typing import NDArray

from pluto.geometry import wrap_angle
from pluto.movement.avoid.core import HALT
from pluto.movement.motion.geometry import (
    CoverageGrid,
    Gap,
    Rectangle,
    detour,
    find_gaps,
    free_length,
    segment_blocked,
    squeezed,
)
from pluto.runtime.params import ModuleParams
from pluto.runtime.ranges import Angle, Radius, Speed, Timeout, TurnRate, between

__all__ = [
    "AT_GOAL",
    "CIRCLING",
    "EXPLORE",
    "FOLLOWING",
    "IDLE",
    "IDLE_RECTANGLE",
    "INVESTIGATE",
    "INVESTIGATE_DONE",
    "MOVETO",
    "MOVETO_IDLE",
    "MOVETO_SET",
    "NEARING",
    "PASS_LIMIT",
    "RELEASE",
    "RESTART_LOST",
    "RESUME",
    "SCANNING",
    "SET_RECTANGLE",
    "THREAD_STOPPED",
    "TOWARDS_OBJECT",
    "WAITING_AVOID",
    "WAITING_POSE",
    "WAITING_SCAN",
    "AvoidOrder",
    "Candidate",
    "JobState",
    "MotionController",
    "MotionInputs",
    "MotionOutput",
    "MotionParams",
    "MotionState",
    "Scan",
    "choose_way",
    "closest_object",
    "enclosed",
    "way_cost",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
WorldScan = tuple[tuple[float, float], FloatArray, FloatArray, BoolArray]
"""A scan in the pose frame: (laser origin m, world bearings rad, ranges m, echo mask)."""

# -- command flags ---------------------------------------------------------------------------------------------------
RELEASE = -1
PASS_LIMIT = 40
"""cmd_flags below this (and >= 0) are passed through to avoid."""
MOVETO, INVESTIGATE, EXPLORE, RESUME, SET_RECTANGLE = 42, 43, 44, 45, 46

# -- element[2]: moveto status ---------------------------------------------------------------------------------------
MOVETO_IDLE = 0
MOVETO_SET = -1
NEARING = -2
AT_GOAL = 1
INVESTIGATE_DONE = 2
RESTART_LOST = -3
"""The module restarted and could not continue the job it had (or could not tell whether it had one)."""

# -- element[3]: motion status ---------------------------------------------------------------------------------------
THREAD_STOPPED = -10
IDLE_RECTANGLE = -1
IDLE = 0
SCANNING = 1
FOLLOWING = 3
TOWARDS_OBJECT = 11
CIRCLING = 12
WAITING_SCAN = 7
"""element[3]: a behaviour waits, the robot stopped, for fresh laser scans (they went stale)."""
WAITING_POSE = 8
"""element[3]: a behaviour waits, the robot stopped, for a fresh pose (stale or none), or at the goal for a pose
certain enough to tell it is reached."""
WAITING_AVOID = 9
"""element[3]: a behaviour waits, the robot stopped, for avoid's status (it went stale: the avoid module silent)."""

_LASER_GOTO = 22  # avoid goto with laser avoidance
_LASER_VELOCITY = 20  # avoid velocity with laser protection
_PLAIN_VELOCITY = 0  # avoid velocity, no protection: only for turning on the spot
_FRONT_BUMPER = 1  # element[0] of avoid's status passed on from the drive: the front bumper is pressed
_LASER_SLOW = 6  # element[0] of avoid's status: the laser protection slowed or stopped the robot
_BACK_OFF_TIME = 2.0  # s a robot that touched something backs off (before lining up again, in a doorway)
_HALT = HALT  # avoid's halt (T = 4, no avoidance): stop at once, given while a behaviour waits for a stale input


class MotionParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the motion controller (the motion module's parameters derive from it: :mod:`pluto.runtime.params`).

    Attributes:
        robot_radius: m.
        ray_margin: a ray is free if a strip of half-width robot_radius + ray_margin is, m.
        ray_margin_tight: ... or of half-width robot_radius + ray_margin_tight when no ray is free otherwise, m.
        ray_max: longest ray followed at once, m.
        ray_step: angle between the rays weighed, rad.
        stop_short: a ray's usable length stops this far before what ends it, m.
        door_max: openings narrower than this are passed as doorways (lined up and driven through), m.
        gap_jump: range step that marks the edge of an opening, m.
        handover: the avoid goto takes over when the goal is nearer than this and in plain view, m.
        near_reach: ... and, after a look around, when it is nearer than this and was seen free whichever way the
            robot faces, m.
        goal_tolerance: a moveto or a waypoint is reached within this distance, m.
        near_enough: ... and a moveto whose simple goto is stuck (obstacles beside the goal) within this one, m.
        speed, turn_rate: limits given to the avoid goto, m/s, rad/s.
        door_speed: speed through a doorway, m/s.
        door_offset: the robot lines up on a doorway's axis before driving through when farther than this off it, m.
        door_strip: half-width of the strip ahead the laser protection checks while driving through a doorway, m
            (narrower than the robot: the jambs pass beside it, a person or a box in the doorway stops it).
        look_pan: largest pan when looking to a side, rad.
        ground_tilt: tilt when looking at the ground (positive down), rad.
        laser_height: height of the scan plane, m (the ground is seen at laser_height / sin(tilt)).
        look_time: time spent looking at each view once the wrist is there, s.
        wrist_tolerance: the wrist is there within this, rad.
        wrist_resend: a wrist command is sent again when the wrist is not there this long after it was sent, s.
        blocked_penalty: least extra cost of a way whose end the scans show a wall between it and the goal, m.
        detour_max: most extra cost of a way for the wall between its end and the goal, m (the farther ends of a
            long wall, seen in part as the robot goes along it, would make it turn back and forth).
        unknown_weight: weight of the straight distance from a way's end to the goal in its cost.
        room_reach: a goal farther than this aside from a narrow doorway's axis is taken not to be behind it, m.
        room_area: a robot whose scans show less free area around it than this is in a room, whose doorways lead
            out, m².
        room_side: ... as is the space before a narrow doorway closed in within this distance both ways along its
            wall, m (the doorway leads out of that room).
        turn_first: before the avoid goto to a way is sent, the robot turns on the spot until the way is within this
            of its heading, rad ...
        turn_time: ... or for at most this long, s.
        straight_reach: a way shorter than this is driven straight at its end, not by the avoid goto, m ...
        straight_blocked: ... and ends when the laser protection holds the robot for this long, s.
        max_decisions: a moveto gives up after this many scans without reaching its goal.
        progress_time: a way on which the robot came no nearer its end for this long is given up, s.
        explore_cell: cell of the coverage grid, m.
        explore_reach: a place to go to must be this near the unseen cells it would show, m.
        explore_min_cells: ... and there must be at least this many of them.
        explore_max_targets: an exploration returns home after this many places.
        investigate_range: objects farther than this are not investigated, m.
        circle_clearance: distance between the robot's body and the object while circling, m.
        circle_speed: m/s.
    """

    robot_radius: Radius = 0.4
    ray_margin: Annotated[float, between(0.0, 2.0)] = 0.2
    ray_margin_tight: Annotated[float, between(0.0, 2.0)] = 0.05
    ray_max: Annotated[float, between(0.0, 100.0, open_low=True)] = 8.0
    ray_step: Annotated[float, between(0.0, 1.0, open_low=True)] = math.radians(5.0)
    stop_short: Annotated[float, between(0.0, 10.0)] = 0.6
    door_max: Annotated[float, between(0.0, 10.0)] = 1.4
    gap_jump: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.6
    handover: Annotated[float, between(0.0, 100.0)] = 6.0
    near_reach: Annotated[float, between(0.0, 100.0)] = 2.0
    goal_tolerance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.3
    near_enough: Annotated[float, between(0.0, 10.0)] = 0.5
    speed: Speed = 0.6
    turn_rate: TurnRate = 1.0
    door_speed: Speed = 0.2
    door_offset: Annotated[float, between(0.0, 5.0)] = 0.04
    door_strip: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.3
    look_pan: Angle = 1.4
    ground_tilt: Angle = 0.35
    laser_height: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.9
    look_time: Timeout = 0.4
    wrist_tolerance: Annotated[float, between(0.0, math.pi, open_low=True)] = 0.05
    wrist_resend: Timeout = 3.0
    blocked_penalty: Annotated[float, between(0.0, 1000.0)] = 2.0
    detour_max: Annotated[float, between(0.0, 1000.0)] = 5.0
    room_reach: Annotated[float, between(0.0, 100.0)] = 2.5
    room_area: Annotated[float, between(0.0, 1e6)] = 30.0
    room_side: Annotated[float, between(0.0, 1000.0)] = 8.5
    turn_first: Annotated[float, between(0.0, math.pi)] = math.radians(10.0)
    straight_reach: Annotated[float, between(0.0, 100.0)] = 3.0
    straight_blocked: Timeout = 2.0
    turn_time: Timeout = 10.0
    unknown_weight: Annotated[float, between(0.0, 100.0)] = 1.3
    max_decisions: Annotated[int, between(1, 100_000)] = 40
    progress_time: Timeout = 15.0
    explore_cell: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.25
    explore_reach: Annotated[float, between(0.0, 100.0)] = 1.5
    explore_min_cells: Annotated[int, between(1, 1_000_000)] = 4
    explore_max_targets: Annotated[int, between(1, 100_000)] = 30
    investigate_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 5.0
    circle_clearance: Annotated[float, between(0.0, 10.0)] = 0.5
    circle_speed: Speed = 0.3


@dataclass(frozen=True)
class Scan:
    """A laser scan as the controller needs it.

    Attributes:
        stamp: s.
        ranges: (N,) m (-1 fault, >= max_range no echo).
        angles: (N,) bearings in the laser frame, rad, increasing.
        max_range: m.
        pan, tilt: the wrist when it was taken, rad (tilt positive down).
        mount_x: forward offset of the wrist axis from the robot centre, m.
        pose: the robot's pose when it was taken, (x m, y m, θ rad), if known (else the step's pose is used).
    """

    stamp: float
    ranges: FloatArray
    angles: FloatArray
    max_range: float
    pan: float = 0.0
    tilt: float = 0.0
    mount_x: float = 0.25
    pose: tuple[float, float, float] | None = None

    def world(self, pose: tuple[float, float, float]) -> WorldScan:
        """(laser origin, world bearings (N,), ranges (N,), echo mask (N,)) of the scan, taken at its own pose if it
        has one, else at ``pose``."""
        x, y, th = self.pose if self.pose is not None else pose
        origin = (x + self.mount_x * math.cos(th), y + self.mount_x * math.sin(th))
        bearings = th + self.pan + self.angles
        r = self.ranges
        ok = (r > 0.0) & (r < self.max_range - 1e-6)
        return origin, bearings, r, ok


@dataclass(frozen=True)
class MotionInputs:
    """What the controller sees in one step.

    Attributes:
        pose: (x m, y m, θ rad) from ``Localization/Pose``, or None before the first.
        scan: the newest laser scan, or None.
        wrist: (pan, tilt) of ``Wrist/State``, rad, or None.
        avoid_data: data of ``avoidance/status``.
        avoid_element: element[0..1] of ``avoidance/status`` (element[1] -10 when the avoid thread is stopped).
        has_arm: an arm is present (investigate asks for it to unfold).
        pose_std: the pose's position uncertainty, m (standard deviation along its worst axis); the goal is reached
            only when it is at most a third of ``goal_tolerance``.
        scan_stale: the laser scans, heard before, are stale (``scan`` is then None).
        avoid_stale: avoid's status, heard before (its thread not stopped), is stale.
    """

    pose: tuple[float, float, float] | None = None
    scan: Scan | None = None
    wrist: tuple[float, float] | None = None
    avoid_data: tuple[float, float] = (0.0, 0.0)
    avoid_element: tuple[int, int] = (0, 0)
    has_arm: bool = False
    pose_std: float = 0.0
    scan_stale: bool = False
    avoid_stale: bool = False


@dataclass(frozen=True)
class AvoidOrder:
    """A command for ``avoidance/command``."""

    cmd_flags: int
    position: tuple[float, ...] = ()
    velocity: tuple[float, ...] = ()
    force: tuple[float, ...] = ()


@dataclass(frozen=True)
class MotionOutput:
    """The result of a step.

    Attributes:
        avoid: the commands to write to avoid, in order (none: write nothing).
        wrist: the (pan, tilt) to command, rad, or None to leave the wrist.
        data, element: the status.
        start_avoid: the avoid thread is stopped and a motion needs it: start it.
        unfold_arm: ask the arm to unfold (investigate, once).
    """

    avoid: tuple[AvoidOrder, ...]
    wrist: tuple[float, float] | None
    data: tuple[float, float]
    element: tuple[int, int, int, int]
    start_avoid: bool = False
    unfold_arm: bool = False


@dataclass(frozen=True)
class Candidate:
    """A way the robot may take.

    Attributes:
        kind: "ray" or "door".
        target: where it leads, m (for a door: a point beyond it).
        cost: estimated length of the whole way to the goal, m.
        bearing: its direction from the robot, rad (pose frame).
        gap: the opening, for a door.
    """

    kind: str
    target: tuple[float, float]
    cost: float
    bearing: float
    gap: Gap | None = None


def way_cost(
    target: tuple[float, float],
    travel: float,
    goal: tuple[float, float],
    known: FloatArray,
    params: MotionParams,
    gap: Gap | None = None,
    in_room: bool = False,
) -> float:
    """Estimated length (m) of the way to ``goal`` through ``target``: ``travel`` m to get there, then the straight
    distance to the goal times ``unknown_weight`` (what lies beyond is less sure: of two ways the one that goes
    farther along what is known to be free wins), plus, when the echoes ``known`` show a wall on that straight line,
    the way round the wall as far as it is seen (:func:`detour`), at least ``blocked_penalty`` (a wall seen beside a
    street usually has openings further on) and at most ``detour_max``. Beyond a narrow doorway
    (``gap`` narrower than ``door_max``) lies a room: a goal more than ``room_reach`` m aside from the doorway's axis,
    or on the near side of its wall, is most likely not in it, and the straight distance counts double; unless the
    robot is ``in_room`` itself: then the doorway is the way out."""
    p = params
    rest = math.hypot(goal[0] - target[0], goal[1] - target[1])
    cost = travel + p.unknown_weight * rest
    if rest > 0.3:
        around = detour(known, target, goal, p.robot_radius + 0.1, 2 * p.robot_radius + 0.04)
        if around > 0.0:
            cost += min(max(p.blocked_penalty, around), p.detour_max)
    if gap is not None and not in_room and _not_behind(gap, goal, p):
        cost += rest + p.blocked_penalty
    return cost


def _not_behind(gap: Gap, goal: tuple[float, float], params: MotionParams) -> bool:
    """Whether ``goal`` is most likely not in the room behind a narrow doorway: more than ``room_reach`` m aside from
    its axis, or on the near side of its wall. A wide opening has no room behind it (False)."""
    if gap.width >= params.door_max:
        return False
    mx, my = gap.middle
    aside = abs(-gap.normal[1] * (goal[0] - mx) + gap.normal[0] * (goal[1] - my))
    beyond = gap.normal[0] * (goal[0] - mx) + gap.normal[1] * (goal[1] - my)
    return aside > params.room_reach or beyond < 0.0


def choose_way(
    points: FloatArray,
    scans: list[tuple[tuple[float, float], FloatArray, FloatArray]],
    pose: tuple[float, float, float],
    goal: tuple[float, float],
    seen: NDArray[np.bool_],
    rect: Rectangle,
    params: MotionParams,
    avoid: Sequence[tuple[float, float]] = (),
    known: FloatArray | None = None,
) -> Candidate | None:
    """The best way towards ``goal`` from the scans of one decision.

    Args:
        points: (N, 2) echoes of the scans, m (pose frame).
        scans: per scan (origin, beam ends (M, 2) in beam order, their ranges (M,); beams without an echo end far
            away), for openings.
        pose: the robot, (x m, y m, θ rad).
        goal: m.
        seen: (K,) which of K equal sectors of world bearing (from -π) the scans covered.
        rect: bounds the way ends.
        params: tuning.
        avoid: places already reached or passed: ways ending within 1 m of one cost 3 m more (no going back and
            forth).
        known: every echo remembered (walls seen at earlier decisions too), for :func:`way_cost`; default ``points``.

    Returns:
        The cheapest candidate that ends nearer the goal (by the straight distance round the walls seen on it); if
        none does (a dead end), the cheapest of all; None if there is no way at all.
    """
    p = params
    x, y, th = pose
    here = math.hypot(goal[0] - x, goal[1] - y)
    walls = points if known is None else known
    candidates: list[tuple[bool, Candidate]] = []
    k = len(seen)
    in_room = free_area(scans, (x, y)) < p.room_area
    # in a room, with a wall between the robot and the goal: the goal is outside, and every ray ends in the room
    # (a doorway is the way out; rays only bring another view of the room when no doorway is seen)
    shut_in = in_room and here > p.room_reach and segment_blocked(walls, (x, y), goal, p.robot_radius)

    def remaining(start: tuple[float, float]) -> float:
        """The straight distance to the goal, round the walls seen on it (:func:`detour`)."""
        straight = math.hypot(goal[0] - start[0], goal[1] - start[1])
        return straight + detour(walls, start, goal, p.robot_radius + 0.1, 2 * p.robot_radius + 0.04)

    here_remaining = remaining((x, y))

    def add(
        kind: str, target: tuple[float, float], travel: float, bearing: float, gap: Gap | None, inside: bool = False
    ) -> None:
        c = way_cost(target, travel, goal, walls, p, gap, inside) + 0.3 * abs(wrap_angle(bearing - th))
        if shut_in and kind == "ray":
            # a ray ends in the room: the straight distance from its end is no estimate of the way round the wall
            c += p.blocked_penalty + math.hypot(goal[0] - target[0], goal[1] - target[1])
        if any(math.hypot(target[0] - a, target[1] - b) < 1.0 for a, b in avoid):
            c += 3.0
        # a doorway out of a room the goal is not in is progress wherever it lies; one into a room the goal is not in
        # is none however near it lies
        progress = remaining(target) < here_remaining - 0.3 or (shut_in and kind == "door")
        if gap is not None and not inside and _not_behind(gap, goal, p):
            progress = False
        candidates.append((progress, Candidate(kind, target, c, bearing, gap)))

    def add_rays(margin: float) -> None:
        n_rays = round(2 * math.pi / p.ray_step)
        for i in range(n_rays):
            phi = -math.pi + (i + 0.5) * 2 * math.pi / n_rays
            if not seen[int((phi + math.pi) / (2 * math.pi) * k) % k]:
                continue
            length = free_length(points, (x, y), phi, p.robot_radius + margin, p.ray_max)
            if rect.set:
                length = min(length, rect.exit_distance(x, y, phi) - p.robot_radius)
            usable = length - p.stop_short
            if usable < 0.5:
                continue
            u = (math.cos(phi), math.sin(phi))
            t = min(max((goal[0] - x) * u[0] + (goal[1] - y) * u[1], 0.0), usable)
            if t < 0.5:
                t = min(usable, 1.5)  # leads away from the goal: a way out of a dead end
            add("ray", (x + t * u[0], y + t * u[1]), t, phi, None)

    add_rays(p.ray_margin)
    for origin, echo, ranges in scans:
        for gap in find_gaps(echo, ranges, origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump):
            target = gap.point(1.0)
            if not rect.contains(*target, margin=p.robot_radius):
                continue
            mx, my = gap.middle
            narrow = gap.width < p.door_max
            # an opening seen through a narrow one (the doorway across the corridor, or a jamb of a doorway paired
            # with one across the corridor behind it): the way to it is the narrow one, weighed on its own
            if narrow:
                others = np.hypot(points[:, 0] - mx, points[:, 1] - my) > 1.0  # not the doorway itself
                if squeezed(points[others], (x, y), (mx, my), p.door_max):
                    continue
            elif segment_blocked(points, (x, y), (mx, my), p.robot_radius + 0.1):
                continue
            inside = in_room or (narrow and enclosed(walls, gap, p.room_side))
            add("door", target, math.hypot(mx - x, my - y) + 1.0, math.atan2(my - y, mx - x), gap, inside)
    if not any(c.kind == "ray" for _, c in candidates):
        # no way at all between the obstacles with the usual margin: strips barely wider than the robot
        add_rays(p.ray_margin_tight)
    if not candidates:
        return None
    forward = [c for ok, c in candidates if ok]
    return min(forward or [c for _, c in candidates], key=lambda c: c.cost)


def enclosed(walls: FloatArray, gap: Gap, side: float) -> bool:
    """Whether the space on the near side of a doorway is a room: from just before the doorway, along the line of its
    wall, the echoes close it in within ``side`` m both ways (a corridor or a hall runs on farther). A room whose
    doorway is in view can show a large free area through it; its width along the wall tells it from a corridor."""
    tx, ty = -gap.normal[1], gap.normal[0]
    reach = 2.0 * side
    before = gap.point(-0.5)
    ends = [free_length(walls, before, math.atan2(sy * ty, sy * tx), 0.05, reach) for sy in (1.0, -1.0)]
    return max(ends) < side


def free_area(
    scans: Sequence[tuple[tuple[float, float], FloatArray, FloatArray]],
    centre: tuple[float, float],
    sectors: int = 72,
    clip: float = 10.0,
) -> float:
    """Area of the free space around ``centre`` that the scans show, m²: per sector of bearing (from ``centre``)
    the mean range of the beam ends in it (clipped at ``clip`` m), summed as circular sectors, and scaled up to the
    whole circle from the sectors seen. A room gives about its floor area; a corridor or a hall much more."""
    total = np.zeros(sectors)
    count = np.zeros(sectors)
    for _, ends, _ in scans:
        if len(ends) == 0:
            continue
        dx, dy = ends[:, 0] - centre[0], ends[:, 1] - centre[1]
        r = np.minimum(np.hypot(dx, dy), clip)
        k = ((np.arctan2(dy, dx) + math.pi) / (2 * math.pi) * sectors).astype(int) % sectors
        np.add.at(total, k, r)
        np.add.at(count, k, 1.0)
    seen = count > 0
    if not seen.any():
        return math.inf
    mean = total[seen] / count[seen]
    return float(np.sum(0.5 * mean**2 * (2 * math.pi / sectors)) * sectors / np.count_nonzero(seen))


def closest_object(
    points: FloatArray, origin: tuple[float, float], max_range: float
) -> tuple[float, float, float] | None:
    """The object nearest to ``origin`` among the echoes (m): the points within 0.4 m of one another around the
    nearest echo; a cluster longer than 2 m is a wall and skipped. Returns (centre x, centre y, radius), m."""
    if len(points) == 0:
        return None
    d = np.hypot(points[:, 0] - origin[0], points[:, 1] - origin[1])
    order = np.argsort(d)
    used = np.zeros(len(points), dtype=bool)
    for start in order:
        if d[start] > max_range:
            return None
        if used[start]:
            continue
        member = np.zeros(len(points), dtype=bool)
        member[start] = True
        frontier = [int(start)]
        while frontier:
            i = frontier.pop()
            near = (~member) & (np.hypot(points[:, 0] - points[i, 0], points[:, 1] - points[i, 1]) < 0.4)
            member |= near
            frontier.extend(int(j) for j in np.flatnonzero(near))
        used |= member
        cluster = points[member]
        extent = float(np.max(np.hypot(cluster[:, 0] - cluster[0, 0], cluster[:, 1] - cluster[0, 1])))
        if extent > 2.0 or len(cluster) < 3:
            continue
        cx, cy = float(cluster[:, 0].mean()), float(cluster[:, 1].mean())
        radius = max(0.1, 0.5 * extent)
        dx, dy = cx - origin[0], cy - origin[1]
        dist = math.hypot(dx, dy)
        # the echoes are on the near side: the centre lies farther by about the radius
        return cx + dx / dist * 0.5 * radius, cy + dy / dist * 0.5 * radius, radius
    return None


# -- the controller --------------------------------------------------------------------------------------------------


@dataclass
class _Nav:
    """Ray following towards a goal (a moveto's, or an exploration's next place)."""

    goal: tuple[float, float]
    report: bool  # a moveto: element[2] shows its progress
    phase: str = "scan"  # scan, follow, door-approach, door-align, door-pass, door-back, near, done, failed
    phase_since: float = 0.0
    view: int = 0  # scan: 0 ahead, 1 to the side, 2 at the ground, 3 back
    view_since: float | None = None
    points: list[FloatArray] = field(default_factory=list)
    scans: list[tuple[tuple[float, float], FloatArray, FloatArray]] = field(default_factory=list)
    seen: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(72, dtype=bool))
    choice: Candidate | None = None
    target: tuple[float, float] | None = None
    sent: float = -math.inf  # when the current avoid goto was sent
    best_distance: float = math.inf
    best_time: float = 0.0
    decisions: int = 0
    visited: list[tuple[float, float]] = field(default_factory=list)
    known_gaps: list[tuple[float, float]] = field(default_factory=list)
    memory: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))
    near_failed: tuple[float, float] | None = None  # where the simple goto last got stuck
    turning: bool = False  # turning on the spot towards the target before the avoid goto is sent
    look_around: bool = False  # in a room with no doorway ahead: the scan looks to both sides
    straight: bool = False  # a short way: driven straight at its end, not by the avoid goto
    blocked_since: float | None = None  # driving straight: since when the laser protection holds the robot
    backing_since: float | None = None  # the front bumper was pressed (outside a doorway): backing off since then
    last_scan: float = -math.inf


@dataclass
class _Job:
    """The behaviour in progress (or stopped, waiting to be resumed)."""

    kind: str  # moveto, explore, home, investigate
    nav: _Nav | None = None
    grid: CoverageGrid | None = None
    tried: list[tuple[float, float]] = field(default_factory=list)
    targets: int = 0
    phase: str = ""
    object: tuple[float, float, float] | None = None
    swept: float = 0.0
    last_angle: float | None = None
    arm_asked: bool = False
    view: int = 0
    view_since: float | None = None
    view_seen: bool = False  # a scan was taken from the current view


class JobState(msgspec.Struct, frozen=True, kw_only=True):
    """A behaviour to continue (:class:`MotionState`).

    Attributes:
        kind: moveto, home, explore or investigate.
        goal: a moveto's or the way home's goal, m.
        tried: the places an exploration gave up on or reached, m.
        targets: the places an exploration went for so far.
    """

    kind: str
    goal: tuple[float, float] | None = None
    tried: list[tuple[float, float]] = msgspec.field(default_factory=list)
    targets: int = 0


class MotionState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted motion module continues from (:meth:`MotionController.snapshot`).

    Attributes:
        rect: the rectangle (x, y, θ of its home, half-width b, height h; m, rad).
        moveto_status: element[2].
        job: the behaviour in progress; stopped: the one waiting for a resume.
    """

    rect: tuple[float, float, float, float, float]
    moveto_status: int = MOVETO_IDLE
    job: JobState | None = None
    stopped: JobState | None = None


@dataclass
class MotionController:
    """The motion module's behaviours: call :meth:`command` on each command, :meth:`step` every period."""

    params: MotionParams = field(default_factory=MotionParams)
    rect: Rectangle = field(default_factory=lambda: Rectangle(0.0, 0.0, 0.0, 0.0, 0.0))
    job: _Job | None = None
    stopped: _Job | None = None
    moveto_status: int = MOVETO_IDLE
    _pending: list[AvoidOrder] = field(default_factory=list)
    _wrist: tuple[float, float] = (0.0, 0.0)
    _wrist_sent: float = -math.inf
    _last_scan_stamp: float = -math.inf
    _waiting_since: float | None = None  # a behaviour has waited for a stale input since then (s)
    _order: AvoidOrder | None = None  # the behaviour's last command to avoid, given again after a wait

    # -- commands ------------------------------------------------------------------------------------------------

    def command(
        self,
        cmd_flags: int,
        position: tuple[float, ...],
        velocity: tuple[float, ...],
        force: tuple[float, ...],
        pose: tuple[float, float, float] | None,
        now: float,
    ) -> None:
        """Take a command (see the module docstring).

        Raises:
            ValueError: cmd_flags is not -1, 0..39 or 42..46, or a value it needs is missing.
        """
        self._order = None  # what a behaviour gives again after a wait is its own last command, from now on
        if cmd_flags == RELEASE:
            self.job = self.stopped = None
            self._pending.append(AvoidOrder(RELEASE))
            return
        if 0 <= cmd_flags < PASS_LIMIT:
            if self.job is not None:
                self.stopped = self.job
                self.job = None
            self._pending.append(AvoidOrder(cmd_flags, position, velocity, force))
            return
        if cmd_flags == MOVETO:
            if len(position) < 2:
                raise ValueError("moveto (42) needs position[0..1] = x, y")
            goal = self.rect.clip(position[0], position[1], self.params.robot_radius)
            self.job = _Job("moveto", _Nav(goal, True, phase_since=now, best_time=now))
            self.stopped = None
            self.moveto_status = MOVETO_SET
        elif cmd_flags == INVESTIGATE:
            self.job = _Job("investigate", phase="find")
            self.stopped = None
            self.moveto_status = MOVETO_IDLE
        elif cmd_flags == EXPLORE:
            b, h = _get(velocity, 0), _get(velocity, 1)
            same = (b == 0.0 and h == 0.0) or (b == self.rect.b and h == self.rect.h)
            if self.stopped is not None and same:
                self._resume(now)
                return
            if pose is None:
                raise ValueError("explore (44) needs a pose (none yet)")
            if b <= 0.0 or h <= 0.0:
                raise ValueError("explore (44) needs a rectangle: velocity[0..1] = b, h > 0")
            self.rect = Rectangle(pose[0], pose[1], pose[2], b, h)
            self._start_explore(now)
        elif cmd_flags == RESUME:
            if self.stopped is not None:
                self._resume(now)
            elif self.rect.set:
                self._start_explore(now)
            else:
                raise ValueError("resume (45): nothing to resume and no rectangle to explore")
        elif cmd_flags == SET_RECTANGLE:
            b, h = _get(velocity, 0), _get(velocity, 1)
            if b < 0.0 or h < 0.0:
                raise ValueError("the rectangle's b, h must be >= 0")
            self.rect = Rectangle(_get(position, 0), _get(position, 1), _get(force, 0), b, h if b > 0 else 0.0)
        else:
            raise ValueError(f"motion cmd_flags must be -1, 0..39 or 42..46, got {cmd_flags}")

    # -- continuing after a restart ------------------------------------------------------------------------------

    def snapshot(self) -> MotionState:
        """The state to save (see the module docstring)."""
        r = self.rect
        return MotionState(
            rect=(r.x, r.y, r.theta, r.b, r.h),
            moveto_status=self.moveto_status,
            job=_job_state(self.job),
            stopped=_job_state(self.stopped),
        )

    def resume(self, state: MotionState, now: float) -> None:
        """Continue from a crashed instance's :meth:`snapshot` (see the module docstring).

        Raises:
            ValueError: a job that cannot be continued (an unknown kind, a moveto without a goal, an exploration
                without a rectangle, a value that is not finite); nothing is changed.
        """
        if not all(math.isfinite(v) for v in state.rect):
            raise ValueError(f"the rectangle must be finite, got {state.rect}")
        rect = Rectangle(*state.rect)
        job = self._job_of(state.job, rect, now)
        stopped = self._job_of(state.stopped, rect, now)
        self.rect, self.job, self.stopped = rect, job, stopped
        self.moveto_status = state.moveto_status
        if job is not None and job.kind in ("moveto", "home"):
            self.moveto_status = MOVETO_SET  # it decides its way again from a new scan

    def _job_of(self, state: JobState | None, rect: Rectangle, now: float) -> _Job | None:
        if state is None:
            return None
        if state.kind in ("moveto", "home"):
            if state.goal is None or not all(math.isfinite(v) for v in state.goal):
                raise ValueError(f"a {state.kind} needs a finite goal, got {state.goal}")
            goal = (float(state.goal[0]), float(state.goal[1]))
            return _Job(state.kind, _Nav(goal, True, phase_since=now, best_time=now))
        if state.kind == "explore":
            if not rect.set:
                raise ValueError("an exploration needs its rectangle")
            return _Job(
                "explore",
                grid=CoverageGrid(rect, self.params.explore_cell),
                phase="look",
                tried=[(float(x), float(y)) for x, y in state.tried],
                targets=max(0, int(state.targets)),
            )
        if state.kind == "investigate":
            return _Job("investigate", phase="find")
        raise ValueError(f"unknown job {state.kind!r}")

    def _start_explore(self, now: float) -> None:
        self.job = _Job("explore", grid=CoverageGrid(self.rect, self.params.explore_cell), phase="look")
        self.stopped = None
        self.moveto_status = MOVETO_IDLE

    def _resume(self, now: float) -> None:
        job, self.stopped = self.stopped, None
        assert job is not None
        if job.nav is not None and job.nav.phase not in ("done", "failed"):
            # the situation may have changed: decide again from a new scan
            job.nav.phase, job.nav.phase_since, job.nav.view, job.nav.view_since = "scan", now, 0, None
            job.nav.points, job.nav.scans = [], []
            job.nav.seen = np.zeros(72, dtype=bool)
            job.nav.best_time, job.nav.best_distance = now, math.inf
        if job.kind == "investigate" and job.phase == "circle":
            job.phase = "find"
        self.job = job

    # -- the step ------------------------------------------------------------------------------------------------

    def step(self, inputs: MotionInputs, now: float) -> MotionOutput:
        """One control step at time ``now`` (s)."""
        orders, self._pending = self._pending, []
        job = self.job
        wrist: tuple[float, float] | None = None
        code = IDLE_RECTANGLE if self.rect.set else IDLE
        unfold = False
        waiting = self._waiting_for(inputs) if job is not None else None
        if job is not None and waiting is not None:
            # a stale input: stop at once (once: the module renews the halt), the timers stand still
            code = waiting
            if self._waiting_since is None:
                self._waiting_since = now
                orders.append(AvoidOrder(_HALT, (), (0.0, 0.0)))
        elif job is not None:
            resumed = self._end_wait(job, now)
            scan = inputs.scan if inputs.scan is not None and inputs.scan.stamp > self._last_scan_stamp else None
            if scan is not None:
                self._last_scan_stamp = scan.stamp
            order, wrist_target, code, unfold = self._job_step(job, inputs, scan, now)
            if order is None and resumed and self.job is job and self._order is not None:
                order = self._order  # the halt replaced it at avoid: given again
                if job.nav is not None and order.cmd_flags == _LASER_GOTO:
                    job.nav.sent = now  # avoid's status is about the halt until it takes the goto again
            if order is not None:
                orders.append(order)
                self._order = order
            wrist = wrist_target
        else:
            self._waiting_since = None
        if self.job is None and self._wrist != (0.0, 0.0):
            wrist = (0.0, 0.0)
        if wrist is not None:
            if wrist != self._wrist or self._wrist_lost(inputs, now):
                self._wrist, self._wrist_sent = wrist, now
            else:
                wrist = None
        start_avoid = self.job is not None and inputs.avoid_element[1] == THREAD_STOPPED
        element = (inputs.avoid_element[0], inputs.avoid_element[1], self.moveto_status, code)
        return MotionOutput(tuple(orders), wrist, inputs.avoid_data, element, start_avoid, unfold)

    def _waiting_for(self, inputs: MotionInputs) -> int | None:
        """The element[3] code of the stale input a behaviour must wait for, or None if it can go on."""
        if inputs.pose is None:
            return WAITING_POSE
        if inputs.avoid_stale:
            return WAITING_AVOID
        if inputs.scan_stale:
            return WAITING_SCAN
        return None

    def _end_wait(self, job: _Job, now: float) -> bool:
        """The inputs are fresh (again): after a wait, the job's timers go on from where they stood (True)."""
        if self._waiting_since is None:
            return False
        waited, self._waiting_since = max(0.0, now - self._waiting_since), None
        if job.view_since is not None:
            job.view_since += waited
        nav = job.nav
        if nav is not None:
            nav.phase_since += waited
            nav.best_time += waited
            nav.sent += waited
            for name in ("view_since", "blocked_since", "backing_since"):
                since = getattr(nav, name)
                if since is not None:
                    setattr(nav, name, since + waited)
        return True

    def _wrist_lost(self, inputs: MotionInputs, now: float) -> bool:
        """The wrist is not where it was last sent, ``wrist_resend`` s after it was sent: the command was lost (a busy
        network or computer) or overridden; it is sent again rather than waited for for ever."""
        p = self.params
        if inputs.wrist is None or now - self._wrist_sent < p.wrist_resend:
            return False
        return max(abs(inputs.wrist[0] - self._wrist[0]), abs(inputs.wrist[1] - self._wrist[1])) >= p.wrist_tolerance

    def _finish(self, status: int) -> None:
        self.job = None
        self.moveto_status = status

    def _job_step(
        self, job: _Job, inputs: MotionInputs, scan: Scan | None, now: float
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]:
        pose = inputs.pose
        assert pose is not None
        if job.kind in ("moveto", "home"):
            assert job.nav is not None
            order, wrist, code = self._nav_step(job.nav, inputs, scan, now)
            if job.nav.phase == "done":
                if job.kind == "home" and abs(wrap_angle(self.rect.theta - pose[2])) > 0.1:
                    err = wrap_angle(self.rect.theta - pose[2])
                    w = max(-0.6, min(0.6, 1.5 * err))
                    return AvoidOrder(_PLAIN_VELOCITY, (), (0.0, w)), (0.0, 0.0), FOLLOWING, False
                p = self.params
                if inputs.pose_std > p.goal_tolerance / 3.0:
                    return _stop(), (0.0, 0.0), WAITING_POSE, False  # at the goal, may be: the pose cannot tell
                if math.hypot(job.nav.goal[0] - pose[0], job.nav.goal[1] - pose[1]) > max(
                    p.near_enough, p.goal_tolerance + 0.1
                ):
                    # told done on a pose that was wrong: the certain pose shows the goal elsewhere
                    job.nav.phase = "scan"
                    order, wrist, code = self._enter(job.nav, "scan", now, None)
                    self.moveto_status = MOVETO_SET
                    return order, wrist, code, False
                self._finish(AT_GOAL)
                return _stop(), (0.0, 0.0), self._idle_code(), False
            if job.nav.phase == "failed":
                self._finish(MOVETO_IDLE)
                return _stop(), (0.0, 0.0), self._idle_code(), False
            if job.nav.report:
                self.moveto_status = NEARING if job.nav.phase == "near" else MOVETO_SET
            return order, wrist, code, False
        if job.kind == "explore":
            return self._explore_step(job, inputs, scan, now)
        return self._investigate_step(job, inputs, scan, now)

    def _idle_code(self) -> int:
        return IDLE_RECTANGLE if self.rect.set else IDLE

    # -- ray following -------------------------------------------------------------------------------------------

    def _nav_step(
        self, nav: _Nav, inputs: MotionInputs, scan: Scan | None, now: float
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int]:
        p = self.params
        pose = inputs.pose
        assert pose is not None
        x, y, th = pose
        distance = math.hypot(nav.goal[0] - x, nav.goal[1] - y)
        if distance < p.goal_tolerance or nav.phase in ("done", "failed"):
            # over (the way home stays here while the robot turns to the home heading; the simple goto may have
            # ended it a little farther than the tolerance)
            nav.phase = "done" if nav.phase != "failed" else "failed"
            return _stop(), (0.0, 0.0), SCANNING
        level = scan is not None and abs(scan.tilt) < 0.05
        world = scan.world(pose) if scan is not None else None
        bumped = inputs.avoid_element[0] == _FRONT_BUMPER
        if nav.phase not in ("door-align", "door-pass", "door-back"):
            # touched something (late commands on a busy computer, something the laser does not see): the drive
            # allows only backing straight away from the pressed bumper, so back off, then look for a way again
            if bumped and nav.backing_since is None:
                nav.backing_since = now
            if nav.backing_since is not None:
                if now - nav.backing_since < _BACK_OFF_TIME:
                    return AvoidOrder(_LASER_VELOCITY, (), (-p.door_speed, 0.0)), (0.0, 0.0), FOLLOWING
                nav.backing_since = None
                nav.visited.append((x, y))
                return self._enter(nav, "scan", now, None)
        if nav.phase == "scan":
            return self._scan_step(nav, inputs, scan, world, now)
        # following a way: the goal in plain view and near hands over to the simple goto
        if nav.phase not in ("near", "door-align", "door-pass", "door-back") and level and world is not None:
            origin, bearings, ranges, ok = world
            pts = _points(origin, bearings, ranges, ok)
            rel = wrap_angle(math.atan2(nav.goal[1] - origin[1], nav.goal[0] - origin[0]) - th - scan.pan)  # type: ignore[union-attr]
            failed_here = (
                nav.near_failed is not None and math.hypot(x - nav.near_failed[0], y - nav.near_failed[1]) < 1.0
            )
            known = _before(np.concatenate((nav.memory, pts)), (x, y), nav.goal)
            if (
                distance < p.handover
                and not failed_here
                and abs(rel) < math.radians(80)
                and not segment_blocked(known, (x, y), nav.goal, p.robot_radius + 0.15)
            ):
                return self._enter(nav, "near", now, nav.goal)
            if nav.phase == "follow" and self._new_opening(nav, world, pose, now):
                return _stop(), None, SCANNING
        if nav.turning and nav.phase in ("follow", "near", "door-approach"):
            return self._turn_step(nav, pose, now), (0.0, 0.0), FOLLOWING
        if nav.straight and nav.phase in ("follow", "near"):
            target = nav.goal if nav.phase == "near" else nav.target
            assert target is not None
            return self._straight_step(nav, inputs, now, target), (0.0, 0.0), FOLLOWING
        if nav.phase == "near":
            return self._goto_step(nav, inputs, now, nav.goal, on_stuck="scan"), (0.0, 0.0), FOLLOWING
        if nav.phase == "follow":
            assert nav.target is not None
            return self._goto_step(nav, inputs, now, nav.target, on_stuck="scan"), (0.0, 0.0), FOLLOWING
        if nav.phase == "door-approach":
            assert nav.choice is not None and nav.choice.gap is not None
            before = nav.choice.gap.point(-1.1)
            order = self._goto_step(nav, inputs, now, before, on_stuck="scan", reached_phase="door-align")
            return order, (0.0, 0.0), FOLLOWING
        return self._door_step(nav, pose, world if level else None, now, bumped), (0.0, 0.0), FOLLOWING

    def _enter(
        self, nav: _Nav, phase: str, now: float, target: tuple[float, float] | None
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int]:
        nav.phase, nav.phase_since = phase, now
        nav.best_distance, nav.best_time = math.inf, now
        if phase in ("follow", "near", "door-approach") and target is not None:
            nav.target = target
            nav.turning = True
            return None, (0.0, 0.0), FOLLOWING
        if phase == "scan":
            nav.view, nav.view_since = 0, None
            nav.points, nav.scans = [], []
            nav.seen = np.zeros(72, dtype=bool)
            return _stop(), (0.0, 0.0), SCANNING
        return None, (0.0, 0.0), FOLLOWING

    def _turn_step(self, nav: _Nav, pose: tuple[float, float, float], now: float) -> AvoidOrder:
        """Turn on the spot to face the target (heading changes while driving are what makes a path weave), then send
        the avoid goto to it."""
        p = self.params
        assert nav.target is not None
        x, y, th = pose
        error = wrap_angle(math.atan2(nav.target[1] - y, nav.target[0] - x) - th)
        if abs(error) > p.turn_first and now - nav.phase_since < p.turn_time:
            w = math.copysign(min(p.turn_rate, max(0.15, 1.5 * abs(error))), error)
            return AvoidOrder(_PLAIN_VELOCITY, (), (0.0, w))
        nav.turning = False
        nav.sent = now
        nav.best_distance, nav.best_time = math.inf, now
        nav.straight = nav.phase in ("follow", "near") and math.hypot(nav.target[0] - x, nav.target[1] - y) < (
            p.straight_reach
        )
        nav.blocked_since = None
        if nav.straight:
            return _stop()
        return AvoidOrder(_LASER_GOTO, nav.target, (p.speed, p.turn_rate), (1.0,))

    def _straight_step(
        self, nav: _Nav, inputs: MotionInputs, now: float, target: tuple[float, float]
    ) -> AvoidOrder | None:
        """Drive straight at the end of a short way (its strip was seen free) with the laser protection on: between
        obstacles the avoid goto's pushes would swing the heading. The protection holding the robot for
        ``straight_blocked`` s ends the way as a stuck goto does."""
        p = self.params
        pose = inputs.pose
        assert pose is not None
        x, y, th = pose
        d = math.hypot(target[0] - x, target[1] - y)
        if d < p.goal_tolerance + (0.0 if nav.phase == "near" else 0.1):
            if nav.phase == "near":
                nav.phase = "done"
                return _stop()
            nav.visited.append(target)
            self._enter(nav, "scan", now, None)
            return _stop()
        error = wrap_angle(math.atan2(target[1] - y, target[0] - x) - th)
        if abs(error) > 0.3:
            w = math.copysign(min(p.turn_rate, max(0.15, 1.5 * abs(error))), error)
            return AvoidOrder(_PLAIN_VELOCITY, (), (0.0, w))
        held = inputs.avoid_element[0] == _LASER_SLOW and abs(inputs.avoid_data[0]) < 0.02 and now - nav.sent > 1.0
        if not held:
            nav.blocked_since = None
        elif nav.blocked_since is None:
            nav.blocked_since = now
        elif now - nav.blocked_since > p.straight_blocked:
            if nav.phase == "near" and d < p.near_enough:
                nav.phase = "done"
                return _stop()
            nav.visited.append((x, y))
            if nav.phase == "near":
                nav.near_failed = (x, y)
            self._enter(nav, "scan", now, None)
            return _stop()
        v = min(p.speed, 0.5 * d + 0.1) * math.cos(error)
        w = max(-0.5, min(0.5, 1.5 * error))
        return AvoidOrder(_LASER_VELOCITY, (), (v, w), (p.robot_radius + p.ray_margin_tight,))

    def _goto_step(
        self,
        nav: _Nav,
        inputs: MotionInputs,
        now: float,
        target: tuple[float, float],
        on_stuck: str,
        reached_phase: str = "scan",
    ) -> AvoidOrder | None:
        p = self.params
        pose = inputs.pose
        assert pose is not None
        d = math.hypot(target[0] - pose[0], target[1] - pose[1])
        settled = now - nav.sent > 0.5  # avoid's status may still be about the previous goto
        reached = d < p.goal_tolerance or (settled and inputs.avoid_element[1] == 1)
        if reached:
            if nav.phase == "near":
                nav.phase = "done"
                return _stop()
            nav.visited.append(target)
            self._enter(nav, reached_phase, now, None)
            return _stop()
        if d < nav.best_distance - 0.3:
            nav.best_distance, nav.best_time = d, now
        if (settled and inputs.avoid_element[1] == 2) or now - nav.best_time > p.progress_time:
            if nav.phase == "near" and d < p.near_enough:
                # obstacles keep the robot from the goal, yet it is near enough: as near as it gets
                nav.phase = "done"
                return _stop()
            nav.visited.append((pose[0], pose[1]))
            if nav.phase == "near":
                nav.near_failed = (pose[0], pose[1])
            self._enter(nav, on_stuck, now, None)
            return _stop()
        return None

    def _new_opening(
        self,
        nav: _Nav,
        world: WorldScan,
        pose: tuple[float, float, float],
        now: float,
    ) -> bool:
        """Check both sides for openings: a new one that promises a shorter way than the one followed stops the
        robot to decide again (True)."""
        p = self.params
        if now - nav.phase_since < 1.0 or nav.choice is None:
            return False
        origin, bearings, ranges, ok = world
        pts = _points(origin, bearings, ranges, ok)
        gaps = find_gaps(*_beams(origin, bearings, ranges), origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump)
        found = False
        for gap in gaps:
            m = gap.middle
            if any(math.hypot(m[0] - a, m[1] - b) < 1.0 for a, b in nav.known_gaps):
                continue
            nav.known_gaps.append(m)
            target = gap.point(1.0)
            known = np.concatenate((nav.memory, pts))
            cost = way_cost(target, math.hypot(m[0] - pose[0], m[1] - pose[1]) + 1.0, nav.goal, known, p, gap)
            assert nav.target is not None
            travel = math.hypot(nav.target[0] - pose[0], nav.target[1] - pose[1])
            current = way_cost(nav.target, travel, nav.goal, known, p)
            if cost < current - 0.5 and self.rect.contains(*target, margin=p.robot_radius):
                found = True
        if found:
            self._enter(nav, "scan", now, None)
        return found

    def _scan_step(
        self,
        nav: _Nav,
        inputs: MotionInputs,
        scan: Scan | None,
        world: WorldScan | None,
        now: float,
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int]:
        """Stop, look ahead, to the side of the best way and at the ground there, then decide."""
        p = self.params
        pose = inputs.pose
        assert pose is not None
        order = None
        views = self._views(nav, pose)
        pan, tilt = views[min(nav.view, len(views) - 1)]
        at = inputs.wrist is not None and (
            abs(inputs.wrist[0] - pan) < p.wrist_tolerance and abs(inputs.wrist[1] - tilt) < p.wrist_tolerance
        )
        if inputs.wrist is None:
            at = True
        if at and nav.view_since is None:
            nav.view_since = now
        if (
            scan is not None
            and world is not None
            and at
            and nav.view_since is not None
            and scan.stamp >= nav.view_since
        ):
            origin, bearings, ranges, ok = world
            if abs(scan.tilt) < 0.05:
                pts = _points(origin, bearings, ranges, ok)
                nav.points.append(pts)
                nav.scans.append((origin, *_beams(origin, bearings, ranges)))
                k = len(nav.seen)
                idx = ((bearings + math.pi) % (2 * math.pi) / (2 * math.pi) * k).astype(int) % k
                nav.seen[idx] = True
            elif nav.choice is not None:
                self._check_ground(nav, scan, ranges)
        ready = nav.view_since is not None and now - nav.view_since >= p.look_time and nav.points
        if ready:
            if nav.view == 0:
                nav.choice = self._decide(nav, pose)
                # shut in a room (the goal outside, behind a wall), with no doorway ahead to leave it by: look to
                # both sides for one
                nav.look_around = (nav.choice is None or nav.choice.kind != "door") and self._shut_in(nav, pose)
            nav.view += 1
            nav.view_since = None
            if nav.view >= len(self._views(nav, pose)):
                return self._decided(nav, pose, now)
            pan, tilt = self._views(nav, pose)[nav.view]
        return order, (pan, tilt), SCANNING

    def _goal_in_reach(self, nav: _Nav, pose: tuple[float, float, float]) -> bool:
        """After a look around: the goal is within ``near_reach``, its bearing was seen and no remembered echo
        stands between it and the robot (whichever way the robot faces)."""
        p = self.params
        x, y, _ = pose
        gx, gy = nav.goal
        if math.hypot(gx - x, gy - y) > p.near_reach or len(nav.memory) == 0:
            return False
        if nav.near_failed is not None and math.hypot(x - nav.near_failed[0], y - nav.near_failed[1]) < 1.0:
            return False
        k = len(nav.seen)
        if not nav.seen[int((math.atan2(gy - y, gx - x) + math.pi) / (2 * math.pi) * k) % k]:
            return False
        return not segment_blocked(_before(nav.memory, (x, y), nav.goal), (x, y), nav.goal, p.robot_radius + 0.15)

    def _shut_in(self, nav: _Nav, pose: tuple[float, float, float]) -> bool:
        """Whether the robot is in a room (its scans show little free area) with the goal outside: farther than
        ``room_reach`` and a remembered echo between them."""
        p = self.params
        x, y, _ = pose
        return (
            math.hypot(nav.goal[0] - x, nav.goal[1] - y) > p.room_reach
            and free_area(nav.scans, (x, y)) < p.room_area
            and segment_blocked(nav.memory, (x, y), nav.goal, p.robot_radius)
        )

    def _views(self, nav: _Nav, pose: tuple[float, float, float]) -> list[tuple[float, float]]:
        """The wrist's views of a scan: ahead; to the side of the way chosen (if it lies aside) and at the ground in
        its direction."""
        p = self.params
        if nav.choice is None:
            if nav.view == 0:
                return [(0.0, 0.0)]
            # nothing seen ahead leads anywhere: look to both sides
            return [(0.0, 0.0), (p.look_pan, 0.0), (-p.look_pan, 0.0), (0.0, 0.0)]
        rel = wrap_angle(nav.choice.bearing - pose[2])
        pan = max(-p.look_pan, min(p.look_pan, rel))
        views = [(0.0, 0.0)]
        if nav.look_around:
            views += [(p.look_pan, 0.0), (-p.look_pan, 0.0)]
        elif abs(rel) > 0.6:
            views.append((pan, 0.0))
        views.append((pan, p.ground_tilt))
        return views

    def _check_ground(self, nav: _Nav, scan: Scan, ranges: FloatArray) -> None:
        """Looking down at the ground along the way chosen: where the floor is missing (the middle beams reach much
        farther than the floor would be), the way is cut short before it."""
        p = self.params
        floor = p.laser_height / math.sin(scan.tilt)
        middle = np.abs(scan.angles) < 0.15
        r = ranges[middle]
        r = r[r > 0]
        if len(r) and float(np.median(r)) > floor + 0.5 and nav.choice is not None:
            # a drop-off: forbid the way (its end counts as visited: another is chosen)
            nav.visited.append(nav.choice.target)
            nav.choice = None

    def _decide(self, nav: _Nav, pose: tuple[float, float, float]) -> Candidate | None:
        points = np.concatenate(nav.points) if nav.points else np.zeros((0, 2))
        nav.memory = _remember(nav.memory, points)
        return choose_way(points, nav.scans, pose, nav.goal, nav.seen, self.rect, self.params, nav.visited, nav.memory)

    def _decided(
        self, nav: _Nav, pose: tuple[float, float, float], now: float
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int]:
        nav.decisions += 1
        choice = self._decide(nav, pose) if nav.choice is None or len(nav.points) > 1 else nav.choice
        if self._goal_in_reach(nav, pose):  # the goal is near and was seen free: the simple goto takes over
            return self._enter(nav, "near", now, nav.goal)
        if choice is None:
            if nav.decisions >= self.params.max_decisions:
                nav.phase = "failed"
                return _stop(), (0.0, 0.0), SCANNING
            # look again, around (the views of a failed choice cover both sides)
            self._enter(nav, "scan", now, None)
            nav.choice = None
            nav.view = 1
            return _stop(), (self.params.look_pan, 0.0), SCANNING
        if nav.decisions > self.params.max_decisions:
            nav.phase = "failed"
            return _stop(), (0.0, 0.0), SCANNING
        nav.choice = choice
        p = self.params
        for origin, pts, ranges in nav.scans:  # the openings seen now are weighed already
            nav.known_gaps.extend(
                g.middle for g in find_gaps(pts, ranges, origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump)
            )
        if choice.kind == "door" and choice.gap is not None and choice.gap.width < self.params.door_max:
            return self._enter(nav, "door-approach", now, choice.gap.point(-1.1))
        return self._enter(nav, "follow", now, choice.target)

    def _door_step(
        self,
        nav: _Nav,
        pose: tuple[float, float, float],
        world: WorldScan | None,
        now: float,
        bumped: bool = False,
    ) -> AvoidOrder:
        """Line up in front of a narrow doorway (on its axis, then facing it), then drive through it along the line
        between its jambs; a jamb touched on the way (the front bumper) backs the robot off to line up again."""
        p = self.params
        assert nav.choice is not None and nav.choice.gap is not None
        gap = nav.choice.gap
        if world is not None:
            gap = _refine_gap(gap, world, pose)
            nav.choice = Candidate(nav.choice.kind, gap.point(1.0), nav.choice.cost, nav.choice.bearing, gap)
        mx, my = gap.middle
        nx, ny = gap.normal
        x, y, th = pose
        heading_error = wrap_angle(math.atan2(ny, nx) - th)
        offset = -ny * (x - mx) + nx * (y - my)  # left of the line through the door
        along = nx * (x - mx) + ny * (y - my)
        if nav.phase == "door-pass" and bumped:
            nav.phase, nav.phase_since = "door-back", now
        if nav.phase == "door-back":
            if now - nav.phase_since < _BACK_OFF_TIME:
                return AvoidOrder(_LASER_VELOCITY, (), (-p.door_speed, 0.0))
            nav.phase, nav.phase_since = "door-align", now
        if nav.phase == "door-align":
            if now - nav.phase_since > 20.0:
                nav.phase, nav.phase_since = "door-pass", now
            elif abs(offset) > p.door_offset and along < -p.robot_radius:
                # onto the doorway's axis first: to a point of it half a metre nearer the door than the robot (a
                # slant, not a sidestep square to the axis, which furniture beside the way in can block)
                ahead = min(along + 0.5, -p.robot_radius - 0.1)
                tx, ty = mx + nx * ahead, my + ny * ahead
                error = wrap_angle(math.atan2(ty - y, tx - x) - th)
                if abs(error) > 0.1:
                    return AvoidOrder(_PLAIN_VELOCITY, (), (0.0, max(-0.6, min(0.6, 1.5 * error))))
                return AvoidOrder(_LASER_VELOCITY, (), (p.door_speed, 1.5 * error), (p.door_strip,))
            elif abs(heading_error) < 0.05:
                nav.phase, nav.phase_since = "door-pass", now
            else:
                return AvoidOrder(_PLAIN_VELOCITY, (), (0.0, max(-0.6, min(0.6, 1.5 * heading_error))))
        if along > p.robot_radius + 0.4:
            nav.visited.append((mx, my))
            nav.visited.append(gap.point(1.0))
            self._enter(nav, "scan", now, None)
            return _stop()
        if now - nav.phase_since > 30.0:
            nav.visited.append((mx, my))
            self._enter(nav, "scan", now, None)
            return _stop()
        w = 2.0 * heading_error - 3.0 * offset
        w = max(-0.5, min(0.5, w))
        v = p.door_speed if abs(heading_error) < 0.3 else 0.0
        return AvoidOrder(_LASER_VELOCITY, (), (v, w), (p.door_strip,))

    # -- explore ---------------------------------------------------------------------------------------------------

    def _explore_step(
        self, job: _Job, inputs: MotionInputs, scan: Scan | None, now: float
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]:
        p = self.params
        pose = inputs.pose
        assert pose is not None and job.grid is not None
        if scan is not None and abs(scan.tilt) < 0.05:
            origin, bearings, ranges, _ = scan.world(pose)
            job.grid.add_scan(origin, bearings, ranges, scan.max_range)
            if job.view_since is not None and scan.stamp >= job.view_since:
                job.view_seen = True
        if job.nav is not None:
            order, wrist, code = self._nav_step(job.nav, inputs, scan, now)
            if job.nav.phase not in ("done", "failed"):
                return order, wrist, code, False
            job.tried.append(job.nav.goal)
            job.nav = None
            job.phase, job.view, job.view_since, job.view_seen = "look", 0, None, False
        if job.phase == "look":
            # look around where the robot stands: left, right, ahead
            views = [(p.look_pan, 0.0), (-p.look_pan, 0.0), (0.0, 0.0)]
            pan, tilt = views[job.view]
            at = inputs.wrist is None or (
                abs(inputs.wrist[0] - pan) < p.wrist_tolerance and abs(inputs.wrist[1] - tilt) < p.wrist_tolerance
            )
            if at and job.view_since is None:
                job.view_since = now
            if job.view_since is not None and job.view_seen and now - job.view_since >= p.look_time:
                job.view, job.view_since, job.view_seen = job.view + 1, None, False
                if job.view >= len(views):
                    job.phase = "pick"
                else:
                    pan, tilt = views[job.view]
            if job.phase == "look":
                return None, (pan, tilt), SCANNING, False
        targets = [
            t
            for t in job.grid.frontier_targets(p.robot_radius, p.explore_reach, p.explore_min_cells)
            if all(math.hypot(t[0] - a, t[1] - b) > p.explore_reach for a, b in job.tried)
        ]
        if not targets or job.targets >= p.explore_max_targets:
            home = (self.rect.x, self.rect.y)
            self.job = _Job("home", _Nav(home, True, phase_since=now, best_time=now))
            self.moveto_status = MOVETO_SET
            return _stop(), (0.0, 0.0), SCANNING, False
        best = min(targets, key=lambda t: math.hypot(t[0] - pose[0], t[1] - pose[1]) - 0.05 * t[2])
        job.targets += 1
        job.nav = _Nav((best[0], best[1]), False, phase_since=now, best_time=now)
        return _stop(), (0.0, 0.0), SCANNING, False

    # -- investigate -----------------------------------------------------------------------------------------------

    def _investigate_step(
        self, job: _Job, inputs: MotionInputs, scan: Scan | None, now: float
    ) -> tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]:
        p = self.params
        pose = inputs.pose
        assert pose is not None
        x, y, th = pose
        if job.phase == "find":
            if scan is None or abs(scan.tilt) > 0.05:
                return _stop(), (0.0, 0.0), TOWARDS_OBJECT, False
            origin, bearings, ranges, ok = scan.world(pose)
            obj = closest_object(_points(origin, bearings, ranges, ok), (x, y), p.investigate_range)
            if obj is None:
                self._finish(MOVETO_IDLE)
                return _stop(), (0.0, 0.0), self._idle_code(), False
            job.object = obj
            cx, cy, r = obj
            radius = r + p.robot_radius + p.circle_clearance
            d = math.hypot(x - cx, y - cy)
            stand = (cx + (x - cx) / d * radius, cy + (y - cy) / d * radius)
            job.phase = "approach"
            job.nav = _Nav(stand, False, phase="follow", phase_since=now, best_time=now, target=stand, sent=now)
            return AvoidOrder(_LASER_GOTO, stand, (0.4, p.turn_rate), (1.0,)), (0.0, 0.0), TOWARDS_OBJECT, False
        assert job.object is not None
        cx, cy, r = job.object
        radius = r + p.robot_radius + p.circle_clearance
        if job.phase == "approach":
            assert job.nav is not None and job.nav.target is not None
            order = self._goto_step(job.nav, inputs, now, job.nav.target, on_stuck="scan")
            if job.nav.phase == "follow":
                return order, (0.0, 0.0), TOWARDS_OBJECT, False
            job.phase = "circle"
            job.last_angle = None
            job.swept = 0.0
            unfold = inputs.has_arm and not job.arm_asked
            job.arm_asked = True
            return _stop(), (0.0, 0.0), CIRCLING, unfold
        # circle counter-clockwise, the object on the left
        angle = math.atan2(y - cy, x - cx)
        if job.last_angle is not None:
            job.swept += wrap_angle(angle - job.last_angle)
        job.last_angle = angle
        if job.swept >= 2 * math.pi:
            self._finish(INVESTIGATE_DONE)
            return _stop(), (0.0, 0.0), self._idle_code(), False
        d = math.hypot(x - cx, y - cy)
        heading = angle + math.pi / 2 + max(-0.6, min(0.6, 1.2 * (d - radius)))
        err = wrap_angle(heading - th)
        v = p.circle_speed * max(0.0, math.cos(err))
        w = max(-0.8, min(0.8, 1.5 * err + v / radius))
        return AvoidOrder(_LASER_VELOCITY, (), (v, w)), (0.0, 0.0), CIRCLING, False


def _refine_gap(gap: Gap, world: WorldScan, pose: tuple[float, float, float]) -> Gap:
    """The doorway's jambs measured again in a new scan: each the echo nearest the door's middle among those within
    0.3 m of the jamb as known."""
    origin, bearings, ranges, ok = world
    pts = _points(origin, bearings, ranges, ok)
    if len(pts) == 0:
        return gap
    mx, my = gap.middle
    found = []
    for jamb in (gap.a, gap.b):
        near = pts[np.hypot(pts[:, 0] - jamb[0], pts[:, 1] - jamb[1]) < 0.3]
        if len(near) == 0:
            return gap
        found.append(near[np.argmin(np.hypot(near[:, 0] - mx, near[:, 1] - my))])
    a, b = found
    width = float(np.hypot(*(b - a)))
    if not 0.7 < width < 1.6:
        return gap
    tx, ty = (b[0] - a[0]) / width, (b[1] - a[1]) / width
    nx, ny = -ty, tx
    if nx * gap.normal[0] + ny * gap.normal[1] < 0:
        nx, ny = -nx, -ny
    blend = 0.5
    na = (blend * a[0] + (1 - blend) * gap.a[0], blend * a[1] + (1 - blend) * gap.a[1])
    nb = (blend * b[0] + (1 - blend) * gap.b[0], blend * b[1] + (1 - blend) * gap.b[1])
    nnx, nny = blend * nx + (1 - blend) * gap.normal[0], blend * ny + (1 - blend) * gap.normal[1]
    length = math.hypot(nnx, nny)
    return Gap((float(na[0]), float(na[1])), (float(nb[0]), float(nb[1])), (nnx / length, nny / length))


def _remember(memory: FloatArray, points: FloatArray, cell: float = 0.1, most: int = 20000) -> FloatArray:
    """``memory`` with ``points`` added, one point per ``cell`` m square, the oldest dropped beyond ``most``."""
    if len(points) == 0:
        return memory
    both = np.concatenate((memory, points))
    keys = np.floor(both / cell).astype(np.int64)
    _, first = np.unique(keys, axis=0, return_index=True)
    kept: FloatArray = both[np.sort(first)]
    return kept[-most:]


def _beams(
    origin: tuple[float, float], bearings: FloatArray, ranges: FloatArray, cap: float = 30.0
) -> tuple[FloatArray, FloatArray]:
    """Every beam's end, in beam order, for openings: a beam without an echo ends ``cap`` m away (an opening onto
    open space); failed beams are dropped. Returns (points (N, 2), ranges (N,))."""
    keep = ranges > 0.0
    r = np.minimum(ranges[keep], cap)
    b = bearings[keep]
    return np.column_stack((origin[0] + r * np.cos(b), origin[1] + r * np.sin(b))), r


def _points(origin: tuple[float, float], bearings: FloatArray, ranges: FloatArray, ok: NDArray[np.bool_]) -> FloatArray:
    b, r = bearings[ok], ranges[ok]
    return np.column_stack((origin[0] + r * np.cos(b), origin[1] + r * np.sin(b)))


def _before(points: FloatArray, origin: tuple[float, float], goal: tuple[float, float]) -> FloatArray:
    """The points no farther from ``origin`` than the goal (what lies beyond it does not block the way)."""
    d = math.hypot(goal[0] - origin[0], goal[1] - origin[1])
    keep = np.hypot(points[:, 0] - origin[0], points[:, 1] - origin[1]) < d + 0.2
    result: FloatArray = points[keep]
    return result


def _job_state(job: _Job | None) -> JobState | None:
    if job is None:
        return None
    goal = job.nav.goal if job.nav is not None and job.kind in ("moveto", "home") else None
    return JobState(kind=job.kind, goal=goal, tried=list(job.tried), targets=job.targets)


def _stop() -> AvoidOrder:
    return AvoidOrder(_LASER_VELOCITY, (), (0.0, 0.0))


def _get(values: tuple[float, ...], i: int) -> float:
    return float(values[i]) if len(values) > i else 0.0
