"""Moveto by ray following (docs/design.md, "motion"): the behaviour that takes the robot to a goal, used by a
moveto, by an exploration for each place it goes to, and by the way home.

    follower = RayFollower(params, rect=lambda: rect)
    nav = Nav(goal, report=True, phase_since=now, best_time=now)
    order, wrist, code = follower.step(nav, inputs, scan, now)   # every step, until nav.phase is done or failed

Strategy: the robot stops and scans (element[3] = 1): it looks straight ahead, then pans the wrist to the side it
is about to turn to and tilts it to look at the ground there. From the scans it chooses the best way (:mod:`.ways`)
and follows it (element[3] = 3): a ray by an avoid goto to its best point (avoid drives down the middle of the
street; a short one is driven straight at), a narrow doorway by lining up in front of it and driving through it along
the line the laser measures between its jambs. While following it checks both sides for new openings; one that
promises a shorter way stops the robot to scan and decide again. Once the goal is near and nothing stands in
between, the simple avoid goto takes over until the goal is reached. A robot that touched something backs off, then
looks for a way again. The phases of a :class:`Nav`: scan, follow, door-approach, door-align, door-pass, door-back,
near, done, failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import wrap_angle

from .codes import FRONT_BUMPER, LASER_GOTO, LASER_SLOW, LASER_VELOCITY, PLAIN_VELOCITY, MotionStatus
from .geometry import (
    Gap,
    Rectangle,
    beam_ends,
    echo_points,
    find_gaps,
    free_area,
    points_before,
    remember_points,
    segment_blocked,
)
from .params import MotionParams
from .values import AvoidOrder, MotionInputs, Scan, WorldScan, stop
from .ways import Candidate, choose_way, way_cost

__all__ = ["BACK_OFF_TIME", "Nav", "RayFollower", "refine_gap"]

FloatArray = NDArray[np.float64]
Step = tuple[AvoidOrder | None, tuple[float, float] | None, int]
"""What a step gives: the command for avoid (None: none), the wrist target (None: leave it), element[3]."""

BACK_OFF_TIME = 2.0
"""s a robot that touched something backs off (before lining up again, in a doorway)."""
_DOOR_PHASES = ("door-align", "door-pass", "door-back")


@dataclass
class Nav:
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


class RayFollower:
    """The steps of ray following towards a :class:`Nav`'s goal.

    Args:
        params: tuning.
        rect: gives the rectangle in force (ways end inside it).
    """

    def __init__(self, params: MotionParams, rect: Callable[[], Rectangle]) -> None:
        self.params = params
        self._rect = rect

    def step(self, nav: Nav, inputs: MotionInputs, scan: Scan | None, now: float) -> Step:
        """One step towards ``nav``'s goal at time ``now`` (s), with the newest pose (fresh: not None) and the scan
        new since the last step (or None)."""
        p = self.params
        pose = inputs.pose
        assert pose is not None
        distance = math.hypot(nav.goal[0] - pose[0], nav.goal[1] - pose[1])
        if distance < p.goal_tolerance or nav.phase in ("done", "failed"):
            # over (the way home stays here while the robot turns to the home heading; the simple goto may have
            # ended it a little farther than the tolerance)
            nav.phase = "done" if nav.phase != "failed" else "failed"
            return stop(), (0.0, 0.0), MotionStatus.SCANNING
        level = scan is not None and abs(scan.tilt) < 0.05
        world = scan.world(pose) if scan is not None else None
        bumped = inputs.avoid_element[0] == FRONT_BUMPER
        if nav.phase not in _DOOR_PHASES:
            backing = self._back_off(nav, pose, bumped, now)
            if backing is not None:
                return backing
        if nav.phase == "scan":
            return self._scan_step(nav, inputs, scan, world, now)
        if nav.phase not in ("near", *_DOOR_PHASES) and scan is not None and level and world is not None:
            handed = self._look_ahead(nav, pose, scan, world, distance, now)
            if handed is not None:
                return handed
        return self._drive(nav, inputs, world if level else None, now, bumped)

    def _back_off(self, nav: Nav, pose: tuple[float, float, float], bumped: bool, now: float) -> Step | None:
        """Touched something (late commands on a busy computer, something the laser does not see): the drive allows
        only backing straight away from the pressed bumper, so back off, then look for a way again. None: not
        touched."""
        if bumped and nav.backing_since is None:
            nav.backing_since = now
        if nav.backing_since is None:
            return None
        if now - nav.backing_since < BACK_OFF_TIME:
            return AvoidOrder(LASER_VELOCITY, (), (-self.params.door_speed, 0.0)), (0.0, 0.0), MotionStatus.FOLLOWING
        nav.backing_since = None
        nav.visited.append((pose[0], pose[1]))
        return self.enter(nav, "scan", now, None)

    def _look_ahead(
        self, nav: Nav, pose: tuple[float, float, float], scan: Scan, world: WorldScan, distance: float, now: float
    ) -> Step | None:
        """Following a way, in a level scan: the goal in plain view and near hands over to the simple goto; a new
        opening that promises a shorter way stops the robot to decide again. None: neither."""
        p = self.params
        x, y, th = pose
        origin, bearings, ranges, ok = world
        pts = echo_points(origin, bearings, ranges, ok)
        rel = wrap_angle(math.atan2(nav.goal[1] - origin[1], nav.goal[0] - origin[0]) - th - scan.pan)
        failed_here = nav.near_failed is not None and math.hypot(x - nav.near_failed[0], y - nav.near_failed[1]) < 1.0
        known = points_before(np.concatenate((nav.memory, pts)), (x, y), nav.goal)
        if (
            distance < p.handover
            and not failed_here
            and abs(rel) < math.radians(80)
            and not segment_blocked(known, (x, y), nav.goal, p.robot_radius + 0.15)
        ):
            return self.enter(nav, "near", now, nav.goal)
        if nav.phase == "follow" and self._new_opening(nav, world, pose, now):
            return stop(), None, MotionStatus.SCANNING
        return None

    def _drive(self, nav: Nav, inputs: MotionInputs, world: WorldScan | None, now: float, bumped: bool) -> Step:
        """Drive along the way chosen: turn to face it, drive straight at a near end, the avoid goto, or a doorway's
        approach and passage (``world``: the newest level scan, or None)."""
        pose = inputs.pose
        assert pose is not None
        following = MotionStatus.FOLLOWING
        if nav.turning and nav.phase in ("follow", "near", "door-approach"):
            return self._turn_step(nav, pose, now), (0.0, 0.0), following
        if nav.straight and nav.phase in ("follow", "near"):
            target = nav.goal if nav.phase == "near" else nav.target
            assert target is not None
            return self._straight_step(nav, inputs, now, target), (0.0, 0.0), following
        if nav.phase == "near":
            return self.goto_step(nav, inputs, now, nav.goal, on_stuck="scan"), (0.0, 0.0), following
        if nav.phase == "follow":
            assert nav.target is not None
            return self.goto_step(nav, inputs, now, nav.target, on_stuck="scan"), (0.0, 0.0), following
        if nav.phase == "door-approach":
            assert nav.choice is not None and nav.choice.gap is not None
            before = nav.choice.gap.point(-1.1)
            order = self.goto_step(nav, inputs, now, before, on_stuck="scan", reached_phase="door-align")
            return order, (0.0, 0.0), following
        return self._door_step(nav, pose, world, now, bumped), (0.0, 0.0), following

    def enter(self, nav: Nav, phase: str, now: float, target: tuple[float, float] | None) -> Step:
        """Go into ``phase`` at ``now`` (s): a way to follow turns to face ``target`` first; a scan starts afresh."""
        nav.phase, nav.phase_since = phase, now
        nav.best_distance, nav.best_time = math.inf, now
        if phase in ("follow", "near", "door-approach") and target is not None:
            nav.target = target
            nav.turning = True
            return None, (0.0, 0.0), MotionStatus.FOLLOWING
        if phase == "scan":
            nav.view, nav.view_since = 0, None
            nav.points, nav.scans = [], []
            nav.seen = np.zeros(72, dtype=bool)
            return stop(), (0.0, 0.0), MotionStatus.SCANNING
        return None, (0.0, 0.0), MotionStatus.FOLLOWING

    def _turn_step(self, nav: Nav, pose: tuple[float, float, float], now: float) -> AvoidOrder:
        """Turn on the spot to face the target (heading changes while driving are what makes a path weave), then send
        the avoid goto to it."""
        p = self.params
        assert nav.target is not None
        x, y, th = pose
        error = wrap_angle(math.atan2(nav.target[1] - y, nav.target[0] - x) - th)
        if abs(error) > p.turn_first and now - nav.phase_since < p.turn_time:
            w = math.copysign(min(p.turn_rate, max(0.15, 1.5 * abs(error))), error)
            return AvoidOrder(PLAIN_VELOCITY, (), (0.0, w))
        nav.turning = False
        nav.sent = now
        nav.best_distance, nav.best_time = math.inf, now
        nav.straight = nav.phase in ("follow", "near") and math.hypot(nav.target[0] - x, nav.target[1] - y) < (
            p.straight_reach
        )
        nav.blocked_since = None
        if nav.straight:
            return stop()
        return AvoidOrder(LASER_GOTO, nav.target, (p.speed, p.turn_rate), (1.0,))

    def _straight_step(
        self, nav: Nav, inputs: MotionInputs, now: float, target: tuple[float, float]
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
                return stop()
            nav.visited.append(target)
            self.enter(nav, "scan", now, None)
            return stop()
        error = wrap_angle(math.atan2(target[1] - y, target[0] - x) - th)
        if abs(error) > 0.3:
            w = math.copysign(min(p.turn_rate, max(0.15, 1.5 * abs(error))), error)
            return AvoidOrder(PLAIN_VELOCITY, (), (0.0, w))
        held = inputs.avoid_element[0] == LASER_SLOW and abs(inputs.avoid_data[0]) < 0.02 and now - nav.sent > 1.0
        if not held:
            nav.blocked_since = None
        elif nav.blocked_since is None:
            nav.blocked_since = now
        elif now - nav.blocked_since > p.straight_blocked:
            if nav.phase == "near" and d < p.near_enough:
                nav.phase = "done"
                return stop()
            nav.visited.append((x, y))
            if nav.phase == "near":
                nav.near_failed = (x, y)
            self.enter(nav, "scan", now, None)
            return stop()
        v = min(p.speed, 0.5 * d + 0.1) * math.cos(error)
        w = max(-0.5, min(0.5, 1.5 * error))
        return AvoidOrder(LASER_VELOCITY, (), (v, w), (p.robot_radius + p.ray_margin_tight,))

    def goto_step(
        self,
        nav: Nav,
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
                return stop()
            nav.visited.append(target)
            self.enter(nav, reached_phase, now, None)
            return stop()
        if d < nav.best_distance - 0.3:
            nav.best_distance, nav.best_time = d, now
        if (settled and inputs.avoid_element[1] == 2) or now - nav.best_time > p.progress_time:
            if nav.phase == "near" and d < p.near_enough:
                # obstacles keep the robot from the goal, yet it is near enough: as near as it gets
                nav.phase = "done"
                return stop()
            nav.visited.append((pose[0], pose[1]))
            if nav.phase == "near":
                nav.near_failed = (pose[0], pose[1])
            self.enter(nav, on_stuck, now, None)
            return stop()
        return None

    def _new_opening(
        self,
        nav: Nav,
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
        pts = echo_points(origin, bearings, ranges, ok)
        gaps = find_gaps(*beam_ends(origin, bearings, ranges), origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump)
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
            if cost < current - 0.5 and self._rect().contains(*target, margin=p.robot_radius):
                found = True
        if found:
            self.enter(nav, "scan", now, None)
        return found

    def _scan_step(
        self,
        nav: Nav,
        inputs: MotionInputs,
        scan: Scan | None,
        world: WorldScan | None,
        now: float,
    ) -> Step:
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
        taken = scan is not None and at and nav.view_since is not None and scan.stamp >= nav.view_since
        if taken and scan is not None and world is not None:
            self._take_view(nav, scan, world)
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
        return order, (pan, tilt), MotionStatus.SCANNING

    def _take_view(self, nav: Nav, scan: Scan, world: WorldScan) -> None:
        """A scan taken from the view: a level one adds its echoes, openings and bearings seen to the decision; one
        looking down checks the ground along the way chosen."""
        origin, bearings, ranges, ok = world
        if abs(scan.tilt) < 0.05:
            nav.points.append(echo_points(origin, bearings, ranges, ok))
            nav.scans.append((origin, *beam_ends(origin, bearings, ranges)))
            k = len(nav.seen)
            idx = ((bearings + math.pi) % (2 * math.pi) / (2 * math.pi) * k).astype(int) % k
            nav.seen[idx] = True
        elif nav.choice is not None:
            self._check_ground(nav, scan, ranges)

    def _goal_in_reach(self, nav: Nav, pose: tuple[float, float, float]) -> bool:
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
        return not segment_blocked(points_before(nav.memory, (x, y), nav.goal), (x, y), nav.goal, p.robot_radius + 0.15)

    def _shut_in(self, nav: Nav, pose: tuple[float, float, float]) -> bool:
        """Whether the robot is in a room (its scans show little free area) with the goal outside: farther than
        ``room_reach`` and a remembered echo between them."""
        p = self.params
        x, y, _ = pose
        return (
            math.hypot(nav.goal[0] - x, nav.goal[1] - y) > p.room_reach
            and free_area(nav.scans, (x, y)) < p.room_area
            and segment_blocked(nav.memory, (x, y), nav.goal, p.robot_radius)
        )

    def _views(self, nav: Nav, pose: tuple[float, float, float]) -> list[tuple[float, float]]:
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

    def _check_ground(self, nav: Nav, scan: Scan, ranges: FloatArray) -> None:
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

    def _decide(self, nav: Nav, pose: tuple[float, float, float]) -> Candidate | None:
        points = np.concatenate(nav.points) if nav.points else np.zeros((0, 2))
        nav.memory = remember_points(nav.memory, points)
        rect = self._rect()
        return choose_way(points, nav.scans, pose, nav.goal, nav.seen, rect, self.params, nav.visited, nav.memory)

    def _decided(self, nav: Nav, pose: tuple[float, float, float], now: float) -> Step:
        nav.decisions += 1
        choice = self._decide(nav, pose) if nav.choice is None or len(nav.points) > 1 else nav.choice
        if self._goal_in_reach(nav, pose):  # the goal is near and was seen free: the simple goto takes over
            return self.enter(nav, "near", now, nav.goal)
        if choice is None:
            if nav.decisions >= self.params.max_decisions:
                nav.phase = "failed"
                return stop(), (0.0, 0.0), MotionStatus.SCANNING
            # look again, around (the views of a failed choice cover both sides)
            self.enter(nav, "scan", now, None)
            nav.choice = None
            nav.view = 1
            return stop(), (self.params.look_pan, 0.0), MotionStatus.SCANNING
        if nav.decisions > self.params.max_decisions:
            nav.phase = "failed"
            return stop(), (0.0, 0.0), MotionStatus.SCANNING
        nav.choice = choice
        p = self.params
        for origin, pts, ranges in nav.scans:  # the openings seen now are weighed already
            nav.known_gaps.extend(
                g.middle for g in find_gaps(pts, ranges, origin, 2 * p.robot_radius + 0.04, 2.5, p.gap_jump)
            )
        if choice.kind == "door" and choice.gap is not None and choice.gap.width < self.params.door_max:
            return self.enter(nav, "door-approach", now, choice.gap.point(-1.1))
        return self.enter(nav, "follow", now, choice.target)

    def _door_step(
        self,
        nav: Nav,
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
            gap = refine_gap(gap, world, pose)
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
            if now - nav.phase_since < BACK_OFF_TIME:
                return AvoidOrder(LASER_VELOCITY, (), (-p.door_speed, 0.0))
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
                    return AvoidOrder(PLAIN_VELOCITY, (), (0.0, max(-0.6, min(0.6, 1.5 * error))))
                return AvoidOrder(LASER_VELOCITY, (), (p.door_speed, 1.5 * error), (p.door_strip,))
            elif abs(heading_error) < 0.05:
                nav.phase, nav.phase_since = "door-pass", now
            else:
                return AvoidOrder(PLAIN_VELOCITY, (), (0.0, max(-0.6, min(0.6, 1.5 * heading_error))))
        if along > p.robot_radius + 0.4:
            nav.visited.append((mx, my))
            nav.visited.append(gap.point(1.0))
            self.enter(nav, "scan", now, None)
            return stop()
        if now - nav.phase_since > 30.0:
            nav.visited.append((mx, my))
            self.enter(nav, "scan", now, None)
            return stop()
        w = 2.0 * heading_error - 3.0 * offset
        w = max(-0.5, min(0.5, w))
        v = p.door_speed if abs(heading_error) < 0.3 else 0.0
        return AvoidOrder(LASER_VELOCITY, (), (v, w), (p.door_strip,))


def refine_gap(gap: Gap, world: WorldScan, pose: tuple[float, float, float]) -> Gap:
    """The doorway's jambs measured again in a new scan: each the echo nearest the door's middle among those within
    0.3 m of the jamb as known."""
    origin, bearings, ranges, ok = world
    pts = echo_points(origin, bearings, ranges, ok)
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
