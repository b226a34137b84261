"""The motion module's pure logic: the controller that runs moveto by ray following, explore and investigate, the
rectangle, active scanning with the wrist, and the status codes of ``motion/status``.

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

Where each idea lives: the controller (commands, jobs, waiting for stale inputs, the wrist, continuing after a restart)
here; ray following in :mod:`.moveto`, with the choice of a way in :mod:`.ways` and the geometry in :mod:`.geometry`;
:mod:`.explore` and :mod:`.investigate`; the jobs and what of them survives a restart in :mod:`.jobs`; the step's
inputs and outputs in :mod:`.values`; the tuning in :mod:`.params`; the numbers of the protocol, as IntEnums, in
:mod:`.codes` (the names below, ``MOVETO``, ``AT_GOAL``, ``SCANNING``, ..., are their members).

Continuing after a restart: :meth:`MotionController.snapshot` is the controller's job (the running one and the
stopped one waiting for a resume) and its rectangle; a restarted module's controller :meth:`MotionController.resume`
s from it. A moveto or the way home goes on to its goal, deciding again from a new scan (as a resumed motion does);
an exploration goes on in the same rectangle with the same home, looking around where the robot is (the coverage
seen so far is not kept: it is seen again), the places it gave up on still avoided; an investigation looks for the
closest object again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pluto.geometry import wrap_angle
from pluto.movement.avoid.core import HALT

from .codes import LASER_GOTO, PASS_LIMIT, PLAIN_VELOCITY, MotionCommand, MotionStatus, MovetoStatus
from .explore import explore_step
from .geometry import CoverageGrid, Rectangle, enclosed, free_area
from .investigate import closest_object, investigate_step
from .jobs import Job, JobState, MotionState, job_state
from .moveto import Nav, RayFollower
from .params import MotionParams
from .values import AvoidOrder, MotionInputs, MotionOutput, Scan, stop
from .ways import Candidate, choose_way, way_cost

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
    "MotionCommand",
    "MotionController",
    "MotionInputs",
    "MotionOutput",
    "MotionParams",
    "MotionState",
    "MotionStatus",
    "MovetoStatus",
    "Scan",
    "choose_way",
    "closest_object",
    "enclosed",
    "free_area",
    "way_cost",
]

# -- the codes by their names of before the enums (the same numbers) -------------------------------------------------
# command flags
RELEASE = MotionCommand.RELEASE
MOVETO, INVESTIGATE, EXPLORE = MotionCommand.MOVETO, MotionCommand.INVESTIGATE, MotionCommand.EXPLORE
RESUME, SET_RECTANGLE = MotionCommand.RESUME, MotionCommand.SET_RECTANGLE
# element[2]: moveto status
MOVETO_IDLE = MovetoStatus.IDLE
MOVETO_SET = MovetoStatus.SET
NEARING = MovetoStatus.NEARING
AT_GOAL = MovetoStatus.AT_GOAL
INVESTIGATE_DONE = MovetoStatus.INVESTIGATE_DONE
RESTART_LOST = MovetoStatus.RESTART_LOST
# element[3]: motion status
THREAD_STOPPED = MotionStatus.THREAD_STOPPED
IDLE_RECTANGLE = MotionStatus.IDLE_RECTANGLE
IDLE = MotionStatus.IDLE
SCANNING = MotionStatus.SCANNING
FOLLOWING = MotionStatus.FOLLOWING
TOWARDS_OBJECT = MotionStatus.TOWARDS_OBJECT
CIRCLING = MotionStatus.CIRCLING
WAITING_SCAN = MotionStatus.WAITING_SCAN
WAITING_POSE = MotionStatus.WAITING_POSE
WAITING_AVOID = MotionStatus.WAITING_AVOID

_HALT = HALT  # avoid's halt (T = 4, no avoidance): stop at once, given while a behaviour waits for a stale input
Step = tuple[AvoidOrder | None, tuple[float, float] | None, int, bool]
"""A job's step: the command for avoid (None: none), the wrist target (None: leave it), element[3], unfold the arm."""


@dataclass
class MotionController:
    """The motion module's behaviours: call :meth:`command` on each command, :meth:`step` every period."""

    params: MotionParams = field(default_factory=MotionParams)
    rect: Rectangle = field(default_factory=lambda: Rectangle(0.0, 0.0, 0.0, 0.0, 0.0))
    job: Job | None = None
    stopped: Job | None = None
    moveto_status: int = MOVETO_IDLE
    _pending: list[AvoidOrder] = field(default_factory=list)
    _wrist: tuple[float, float] = (0.0, 0.0)
    _wrist_sent: float = -math.inf
    _last_scan_stamp: float = -math.inf
    _waiting_since: float | None = None  # a behaviour has waited for a stale input since then (s)
    _order: AvoidOrder | None = None  # the behaviour's last command to avoid, given again after a wait
    _follower: RayFollower = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._follower = RayFollower(self.params, lambda: self.rect)

    @property
    def wrist_target(self) -> tuple[float, float]:
        """The wrist's (pan, tilt) in force, rad: the last target sent (home, (0, 0), before any)."""
        return self._wrist

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
        handlers: dict[int, Callable[..., None]] = {
            MOVETO: self._moveto,
            INVESTIGATE: self._investigate,
            EXPLORE: self._explore,
            RESUME: self._resume_command,
            SET_RECTANGLE: self._set_rectangle,
        }
        handler = handlers.get(cmd_flags)
        if handler is None:
            raise ValueError(f"motion cmd_flags must be -1, 0..39 or 42..46, got {cmd_flags}")
        handler(position, velocity, force, pose, now)

    def _moveto(
        self,
        position: tuple[float, ...],
        _velocity: tuple[float, ...],
        _force: tuple[float, ...],
        _pose: tuple[float, float, float] | None,
        now: float,
    ) -> None:
        if len(position) < 2:
            raise ValueError("moveto (42) needs position[0..1] = x, y")
        goal = self.rect.clip(position[0], position[1], self.params.robot_radius)
        self.job = Job("moveto", Nav(goal, True, phase_since=now, best_time=now))
        self.stopped = None
        self.moveto_status = MOVETO_SET

    def _investigate(
        self,
        _position: tuple[float, ...],
        _velocity: tuple[float, ...],
        _force: tuple[float, ...],
        _pose: tuple[float, float, float] | None,
        _now: float,
    ) -> None:
        self.job = Job("investigate", phase="find")
        self.stopped = None
        self.moveto_status = MOVETO_IDLE

    def _explore(
        self,
        _position: tuple[float, ...],
        velocity: tuple[float, ...],
        _force: tuple[float, ...],
        pose: tuple[float, float, float] | None,
        now: float,
    ) -> None:
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

    def _resume_command(
        self,
        _position: tuple[float, ...],
        _velocity: tuple[float, ...],
        _force: tuple[float, ...],
        _pose: tuple[float, float, float] | None,
        now: float,
    ) -> None:
        if self.stopped is not None:
            self._resume(now)
        elif self.rect.set:
            self._start_explore(now)
        else:
            raise ValueError("resume (45): nothing to resume and no rectangle to explore")

    def _set_rectangle(
        self,
        position: tuple[float, ...],
        velocity: tuple[float, ...],
        force: tuple[float, ...],
        _pose: tuple[float, float, float] | None,
        _now: float,
    ) -> None:
        b, h = _get(velocity, 0), _get(velocity, 1)
        if b < 0.0 or h < 0.0:
            raise ValueError("the rectangle's b, h must be >= 0")
        self.rect = Rectangle(_get(position, 0), _get(position, 1), _get(force, 0), b, h if b > 0 else 0.0)

    # -- continuing after a restart ------------------------------------------------------------------------------

    def snapshot(self) -> MotionState:
        """The state to save (see the module docstring)."""
        r = self.rect
        return MotionState(
            rect=(r.x, r.y, r.theta, r.b, r.h),
            moveto_status=self.moveto_status,
            job=job_state(self.job),
            stopped=job_state(self.stopped),
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

    def _job_of(self, state: JobState | None, rect: Rectangle, now: float) -> Job | None:
        if state is None:
            return None
        if state.kind in ("moveto", "home"):
            if state.goal is None or not all(math.isfinite(v) for v in state.goal):
                raise ValueError(f"a {state.kind} needs a finite goal, got {state.goal}")
            goal = (float(state.goal[0]), float(state.goal[1]))
            return Job(state.kind, Nav(goal, True, phase_since=now, best_time=now))
        if state.kind == "explore":
            if not rect.set:
                raise ValueError("an exploration needs its rectangle")
            return Job(
                "explore",
                grid=CoverageGrid(rect, self.params.explore_cell),
                phase="look",
                tried=[(float(x), float(y)) for x, y in state.tried],
                targets=max(0, int(state.targets)),
            )
        if state.kind == "investigate":
            return Job("investigate", phase="find")
        raise ValueError(f"unknown job {state.kind!r}")

    def _start_explore(self, now: float) -> None:
        self.job = Job("explore", grid=CoverageGrid(self.rect, self.params.explore_cell), phase="look")
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
        code = self._idle_code()
        unfold = False
        waiting = self._waiting_for(inputs) if job is not None else None
        if job is not None and waiting is not None:
            # a stale input: stop at once (once: the module renews the halt), the timers stand still
            code = waiting
            if self._waiting_since is None:
                self._waiting_since = now
                orders.append(AvoidOrder(_HALT, (), (0.0, 0.0)))
        elif job is not None:
            order, wrist, code, unfold = self._run(job, inputs, now)
            if order is not None:
                orders.append(order)
        else:
            self._waiting_since = None
        wrist = self._wrist_command(wrist, inputs, now)
        start_avoid = self.job is not None and inputs.avoid_element[1] == THREAD_STOPPED
        element = (inputs.avoid_element[0], inputs.avoid_element[1], self.moveto_status, code)
        return MotionOutput(tuple(orders), wrist, inputs.avoid_data, element, start_avoid, unfold)

    def _run(self, job: Job, inputs: MotionInputs, now: float) -> Step:
        """The job's step on fresh inputs; after a wait, its last command to avoid is given again."""
        resumed = self._end_wait(job, now)
        scan = inputs.scan if inputs.scan is not None and inputs.scan.stamp > self._last_scan_stamp else None
        if scan is not None:
            self._last_scan_stamp = scan.stamp
        order, wrist, code, unfold = self._job_step(job, inputs, scan, now)
        if order is None and resumed and self.job is job and self._order is not None:
            order = self._order  # the halt replaced it at avoid: given again
            if job.nav is not None and order.cmd_flags == LASER_GOTO:
                job.nav.sent = now  # avoid's status is about the halt until it takes the goto again
        if order is not None:
            self._order = order
        return order, wrist, code, unfold

    def _wrist_command(
        self, wrist: tuple[float, float] | None, inputs: MotionInputs, now: float
    ) -> tuple[float, float] | None:
        """The wrist target to send now: a new one, or the one in force again if it was lost; home when no job."""
        if self.job is None and self._wrist != (0.0, 0.0):
            wrist = (0.0, 0.0)
        if wrist is None:
            return None
        if wrist != self._wrist or self._wrist_lost(inputs, now):
            self._wrist, self._wrist_sent = wrist, now
            return wrist
        return None

    def _waiting_for(self, inputs: MotionInputs) -> int | None:
        """The element[3] code of the stale input a behaviour must wait for, or None if it can go on."""
        if inputs.pose is None:
            return WAITING_POSE
        if inputs.avoid_stale:
            return WAITING_AVOID
        if inputs.scan_stale:
            return WAITING_SCAN
        return None

    def _end_wait(self, job: Job, now: float) -> bool:
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

    def _job_step(self, job: Job, inputs: MotionInputs, scan: Scan | None, now: float) -> Step:
        if job.kind in ("moveto", "home"):
            return self._moveto_step(job, inputs, scan, now)
        if job.kind == "explore":
            step = explore_step(self._follower, job, inputs, scan, now)
            if job.phase == "home":  # covered: home, by moveto
                self.job = Job("home", Nav((self.rect.x, self.rect.y), True, phase_since=now, best_time=now))
                self.moveto_status = MOVETO_SET
            return step
        order, wrist, code, unfold = investigate_step(self._follower, job, inputs, scan, now)
        if job.phase in ("lost", "done"):
            self._finish(MOVETO_IDLE if job.phase == "lost" else INVESTIGATE_DONE)
            return order, wrist, self._idle_code(), unfold
        return order, wrist, code, unfold

    def _moveto_step(self, job: Job, inputs: MotionInputs, scan: Scan | None, now: float) -> Step:
        """A moveto or the way home: ray following, then (home) the turn to the home heading; the goal is reached
        only on a pose certain enough to tell."""
        pose = inputs.pose
        assert pose is not None and job.nav is not None
        nav = job.nav
        order, wrist, code = self._follower.step(nav, inputs, scan, now)
        if nav.phase == "failed":
            self._finish(MOVETO_IDLE)
            return stop(), (0.0, 0.0), self._idle_code(), False
        if nav.phase != "done":
            if nav.report:
                self.moveto_status = NEARING if nav.phase == "near" else MOVETO_SET
            return order, wrist, code, False
        if job.kind == "home" and abs(wrap_angle(self.rect.theta - pose[2])) > 0.1:
            err = wrap_angle(self.rect.theta - pose[2])
            w = max(-0.6, min(0.6, 1.5 * err))
            return AvoidOrder(PLAIN_VELOCITY, (), (0.0, w)), (0.0, 0.0), FOLLOWING, False
        p = self.params
        if inputs.pose_std > p.goal_tolerance / 3.0:
            return stop(), (0.0, 0.0), WAITING_POSE, False  # at the goal, may be: the pose cannot tell
        if math.hypot(nav.goal[0] - pose[0], nav.goal[1] - pose[1]) > max(p.near_enough, p.goal_tolerance + 0.1):
            # told done on a pose that was wrong: the certain pose shows the goal elsewhere
            nav.phase = "scan"
            order, wrist, code = self._follower.enter(nav, "scan", now, None)
            self.moveto_status = MOVETO_SET
            return order, wrist, code, False
        self._finish(AT_GOAL)
        return stop(), (0.0, 0.0), self._idle_code(), False

    def _idle_code(self) -> int:
        return IDLE_RECTANGLE if self.rect.set else IDLE


def _get(values: tuple[float, ...], i: int) -> float:
    return float(values[i]) if len(values) > i else 0.0
