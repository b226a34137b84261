"""The follow module's pure logic: find a person in the laser scans, track them, and follow at a set distance; the
commands and status codes of ``follow/command`` and ``follow/status``.

Strategy: each new scan, placed by the pose at its stamp, gives person-shaped blobs
(:mod:`~pluto.movement.follow.detect`) that update the tracks of a Kalman tracker in the ``Localization/Pose`` frame
(:mod:`~pluto.movement.follow.track`). When following starts the controller searches: the target is the nearest
track in front (within ``search_fov`` and ``search_range``) that has moved; a person standing still in front is
taken too, once nobody moving has turned up for ``static_wait`` s, if near and straight ahead. From then on only that
track is followed, predicted from its last scan to the present (a scan is 0.2-0.4 s old when it is used).

The control law, with the target at distance d and bearing b from the robot's centre, and the target moving away
from the robot at u (its velocity along the line between them)::

    v* = clip((u + k_d·(d - D)) · max(0, cos b)², 0, max_speed)      ω* = clip(k_b·b, ±max_turn_rate)

so at a steady walk the robot keeps pace at the set distance D (the feed-forward u carries the speed, the gain
k_d only the error), turns towards the person before it drives, and never backs up. Nearer than D the robot is
always slower than the person walks away, so it never closes in; a person who stands or comes nearer than D keeps
the robot stopped (status 3). v* is then scaled down by the free distance ahead in the strip the robot drives into
(stop below ``stop_distance``, full speed beyond ``slow_distance``): the scan's points near the target do not count,
so the followed person governs the speed only through D, while a wall, a pillar or another person ahead stops the
robot. Finally v and ω change by at most ``max_accel`` (``max_decel`` braking) and ``max_turn_accel`` per second.

The commands go to the avoid module as velocity commands without its avoidance (``avoidance/command`` cmd_flags 0,
velocity = (v, ω)): avoid's laser protection would stop the robot in front of the very person it follows, so the
follow module does its own (above). A velocity command is written every step while following or searching (zero
while searching), since avoid holds the last one.

Never on stale input: a scan older than ``scan_timeout`` or a pose older than ``pose_timeout`` (the module reads
both by the freshness contract, with these as its readers' deadlines) stops the robot at once, by avoid's halt
(:attr:`FollowOutput.halt`: avoid command type 4, the drive stops without its ramp), status -2 or -3, until fresh
ones come; the person's distance and bearing, and so "following" (2) and "too close", with the person (3), are
computed only from a fresh pose. A target not seen for ``lost_timeout`` (or farther than
``max_distance``) is lost: the robot stops and stays stopped, status -1, until following is started again. A search
that finds nobody in ``search_timeout`` s also ends as lost.

Commands (``follow/command``, ActuatorState):

* cmd_flags 1: start following (again): velocity[0] = the distance D to keep, m (optional; 0 or absent for the
  module's default, else within :data:`MIN_DISTANCE`..:data:`MAX_DISTANCE`). A new start searches again.
* cmd_flags 0: stop following: the robot stops, status 0.
* cmd_flags -1: release the robot: passed to avoid (which stops, and its thread with it) and the follow thread
  stops (element[0] = -10).

Status (``follow/status``, FVectorState, every step):

* element[0]: 0 the follow thread runs, -10 it is stopped.
* element[1]: :data:`IDLE` 0 not following; :data:`SEARCHING` 1 looking for a person to follow; :data:`FOLLOWING` 2;
  :data:`TOO_CLOSE` 3 the person is nearer than the set distance and not walking away: the robot waits;
  :data:`LOST` -1 the person was lost (not seen for ``lost_timeout``): the robot stopped until started again;
  :data:`NO_SCAN` -2 no recent scan: stopped; :data:`NO_POSE` -3 no recent pose: stopped.
* data: [target x, target y (m, ``Localization/Pose`` frame), distance (m), bearing (rad, robot frame, left
  positive), v commanded (m/s), ω commanded (rad/s)]; the target values are the last estimate (0 before any).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, Generic, TypeVar

import msgspec
import numpy as np
from numpy.typing import NDArray

from pluto.geometry import relative
from pluto.movement.follow.detect import DetectParams, find_people
from pluto.movement.follow.track import Track, Tracker, TrackParams
from pluto.runtime.params import ModuleParams
from pluto.runtime.ranges import Accel, CommandTimeout, Radius, Speed, Timeout, TurnAccel, TurnRate, between

__all__ = [
    "FOLLOWING",
    "IDLE",
    "LOST",
    "MAX_DISTANCE",
    "MIN_DISTANCE",
    "NO_POSE",
    "NO_SCAN",
    "RELEASE",
    "SEARCHING",
    "START",
    "STOP",
    "THREAD_RUNNING",
    "THREAD_STOPPED",
    "TOO_CLOSE",
    "FollowCommand",
    "FollowController",
    "FollowInputs",
    "FollowOutput",
    "FollowParams",
    "FollowScan",
    "FollowStatus",
    "FollowThread",
    "FollowerBase",
    "SharedFollowParams",
    "parse_distance",
]

FloatArray = NDArray[np.float64]
Pose = tuple[float, float, float]


class FollowCommand(IntEnum):
    """cmd_flags of ``follow/command``."""

    START = 1
    STOP = 0
    RELEASE = -1


class FollowStatus(IntEnum):
    """element[1] of ``follow/status``."""

    IDLE = 0
    SEARCHING = 1
    FOLLOWING = 2
    TOO_CLOSE = 3
    LOST = -1
    NO_SCAN = -2
    NO_POSE = -3


class FollowThread(IntEnum):
    """element[0] of ``follow/status``."""

    RUNNING = 0
    STOPPED = -10


# The codes by their names of before the enums (the same numbers).
START, STOP, RELEASE = FollowCommand.START, FollowCommand.STOP, FollowCommand.RELEASE
IDLE, SEARCHING, FOLLOWING, TOO_CLOSE = (
    FollowStatus.IDLE,
    FollowStatus.SEARCHING,
    FollowStatus.FOLLOWING,
    FollowStatus.TOO_CLOSE,
)
LOST, NO_SCAN, NO_POSE = FollowStatus.LOST, FollowStatus.NO_SCAN, FollowStatus.NO_POSE
THREAD_RUNNING, THREAD_STOPPED = FollowThread.RUNNING, FollowThread.STOPPED

MIN_DISTANCE, MAX_DISTANCE = 0.7, 5.0
"""Range of the distance to keep a start command may ask for, m (centre to centre: a robot of radius 0.4 m touches
a person of radius 0.25 m at 0.65 m)."""


def parse_distance(velocity: list[float] | tuple[float, ...], default: float) -> float:
    """The distance a start command asks for: velocity[0] m, or ``default`` when absent or 0.

    Raises:
        ValueError: it is not finite or outside :data:`MIN_DISTANCE`..:data:`MAX_DISTANCE`.
    """
    if not velocity or velocity[0] == 0.0:
        return default
    d = float(velocity[0])
    if not (math.isfinite(d) and MIN_DISTANCE <= d <= MAX_DISTANCE):
        raise ValueError(f"follow distance must be within {MIN_DISTANCE}..{MAX_DISTANCE} m, got {velocity[0]}")
    return d


class SharedFollowParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """What the person follower (:class:`FollowParams`) and the trail follower
    (:class:`~pluto.movement.follow.trail.TrailParams`) share: the same names, meanings, defaults and ranges.

    Attributes:
        distance: default distance to keep, centre to centre, m.
        max_speed, max_turn_rate: m/s, rad/s.
        max_accel, max_decel: largest change of the commanded speed when speeding up / braking, m/s².
        max_turn_accel: largest change of the commanded turn rate, rad/s².
        distance_gain: k_d, m/s per m of distance error.
        bearing_gain: k_b, rad/s per rad of bearing.
        robot_radius: of the robot's footprint, m.
        stop_distance, slow_distance: free distance ahead of the body at which the robot stops / starts slowing, m.
        search_timeout: a search that finds nobody this long ends as lost, s.
        lost_timeout: a target not seen this long is lost, s.
        scan_timeout, pose_timeout: older scans / poses are stale: the robot stops, s.
    """

    distance: Annotated[float, between(MIN_DISTANCE, MAX_DISTANCE)] = 1.0
    max_speed: Speed = 0.9
    max_turn_rate: TurnRate = 1.2
    max_accel: Accel = 0.5
    max_decel: Accel = 1.0
    max_turn_accel: TurnAccel = 2.0
    distance_gain: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.8
    bearing_gain: Annotated[float, between(0.0, 10.0, open_low=True)] = 1.8
    robot_radius: Radius = 0.4
    stop_distance: Annotated[float, between(0.0, 10.0)] = 0.25
    slow_distance: Annotated[float, between(0.0, 10.0)] = 0.8
    search_timeout: Timeout = 10.0
    lost_timeout: Timeout = 2.0
    scan_timeout: CommandTimeout = 0.7
    pose_timeout: CommandTimeout = 0.6


class FollowParams(SharedFollowParams, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the person follower (the follow module's parameters derive from it: :mod:`pluto.runtime.params`).

    Attributes:
        corridor_margin: the strip ahead checked for obstacles is robot_radius + this wide on each side, m.
        target_radius: scan points this near the target are the target, not obstacles, m.
        search_fov: full width of the sector in front where a target is looked for, rad.
        search_range: farthest a new target may be, m.
        static_wait: s after which a person standing still in front is taken.
        static_fov, static_range: where such a person must stand: within ±static_fov/2 and static_range m.
        max_distance: a target farther than this is not followed (counts as not seen), m.
        detect: what a person looks like in a scan.
        track: the tracker's tuning.
    """

    corridor_margin: Annotated[float, between(0.0, 2.0)] = 0.1
    target_radius: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.5
    search_fov: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(120.0)
    search_range: Annotated[float, between(0.0, 30.0, open_low=True)] = 3.5
    static_wait: Timeout = 2.0
    static_fov: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(60.0)
    static_range: Annotated[float, between(0.0, 30.0, open_low=True)] = 2.0
    max_distance: Annotated[float, between(0.0, 30.0, open_low=True)] = 4.0
    detect: DetectParams = msgspec.field(default_factory=DetectParams)
    track: TrackParams = msgspec.field(default_factory=TrackParams)


@dataclass(frozen=True)
class FollowScan:
    """A laser scan placed where it was taken.

    Attributes:
        stamp: when it was taken, s.
        points: (M, 2) its echoes in beam order, robot frame at ``stamp`` (x forward, y left), m.
        origin: (x, y) of the scanner in the robot frame, m.
        pose: (x m, y m, θ rad) of the robot at ``stamp`` in the ``Localization/Pose`` frame, or None if unknown.
    """

    stamp: float
    points: FloatArray
    origin: tuple[float, float]
    pose: Pose | None


@dataclass(frozen=True)
class FollowInputs:
    """What the controller sees in one step.

    Attributes:
        pose: newest (x m, y m, θ rad) from ``Localization/Pose``, or None.
        pose_stamp: its stamp, s.
        scan: the newest scan, or None.
    """

    pose: Pose | None = None
    pose_stamp: float = -math.inf
    scan: FollowScan | None = None


@dataclass(frozen=True)
class FollowOutput:
    """The result of a step.

    Attributes:
        velocity: (v m/s, ω rad/s) to command to avoid (cmd_flags 0), or None to write nothing.
        code: element[1] of the status.
        data: the status data (see the module docstring).
        halt: stop at once for a stale input (avoid's halt, not a velocity command; ``velocity`` is (0, 0)).
    """

    velocity: tuple[float, float] | None
    code: int
    data: tuple[float, float, float, float, float, float]
    halt: bool = False


P = TypeVar("P", bound=SharedFollowParams)


@dataclass
class FollowerBase(Generic[P]):
    """What the person follower and the trail follower share: the lifecycle (:meth:`start`, :meth:`stop`, idle,
    halted on a stale pose or scan, lost), the control law towards a target at a distance and bearing, the
    slow-down before obstacles in the strip ahead, and the ramps of v and ω.

    A follower derives from it, names its parameters' type and says how it forgets its target
    (:meth:`_forget_target`) and how wide the strip ahead is (:meth:`_corridor_margin`)."""

    params: P
    code: int = IDLE
    distance: float = field(init=False)
    _search_since: float = 0.0
    _scan_stamp: float = -math.inf
    _obstacles: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))
    """World points of the newest scan that are not the target, m."""
    _last: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    _v: float = 0.0
    _w: float = 0.0
    _step_time: float | None = None
    _stop_pending: bool = False

    def __post_init__(self) -> None:
        self.distance = self.params.distance

    @property
    def active(self) -> bool:
        """Searching or following (the robot is under this controller's command)."""
        return self.code not in (IDLE, LOST)

    def start(self, distance: float, now: float) -> None:
        """Start following (again) at ``distance`` m: search for the target."""
        self.distance = distance
        self._forget_target()
        self.code = SEARCHING
        self._search_since = now
        self._v = self._w = 0.0

    def stop(self) -> None:
        """Stop following: the next step commands a stop once, then the controller is idle."""
        if self.active:
            self._stop_pending = True
        self.code = IDLE
        self._forget_target()
        self._v = self._w = 0.0

    # -- what a follower says of itself -------------------------------------------------------------------------

    def _forget_target(self) -> None:
        """Drop what the follower knows of its target (on start, stop and when it is lost)."""
        raise NotImplementedError

    def _corridor_margin(self) -> float:
        """The strip ahead checked for obstacles is ``robot_radius`` + this wide on each side, m."""
        raise NotImplementedError

    # -- shared steps -------------------------------------------------------------------------------------------

    def _tick(self, now: float) -> float:
        """The time since the last step, s (0 on the first, at most 0.5), and ``now`` kept for the next."""
        dt = 0.0 if self._step_time is None else min(max(now - self._step_time, 0.0), 0.5)
        self._step_time = now
        return dt

    def _idle_or_stale(self, inputs: FollowInputs, now: float) -> FollowOutput | None:
        """The output when the controller is idle (a stop once after :meth:`stop`) or its pose or scan is stale
        (halted); None when it is active on fresh input."""
        p = self.params
        if not self.active:
            if self._stop_pending:
                self._stop_pending = False
                return self._output((0.0, 0.0), self.code)
            return self._output(None, self.code)
        if inputs.pose is None or now - inputs.pose_stamp > p.pose_timeout:
            return self._halt(NO_POSE, now)
        if inputs.scan is None or now - inputs.scan.stamp > p.scan_timeout:
            return self._halt(NO_SCAN, now)
        return None

    def _law(self, u: float, d: float, b: float) -> tuple[float, float, int]:
        """The control law (see the module docstring) for a target at distance ``d`` (m) and bearing ``b`` (rad)
        moving away at ``u`` (m/s): (v*, ω*, status), v* before the slow-down for obstacles."""
        p = self.params
        v_goal = (u + p.distance_gain * (d - self.distance)) * max(0.0, math.cos(b)) ** 2
        v_goal = min(max(v_goal, 0.0), p.max_speed)
        code = FOLLOWING
        if d < self.distance and (u < 0.1 or v_goal == 0.0):
            v_goal, code = 0.0, TOO_CLOSE
        w_goal = max(-p.max_turn_rate, min(p.max_turn_rate, p.bearing_gain * b))
        return v_goal, w_goal, code

    def _drive(self, pose: Pose, v_goal: float, w_goal: float, code: int, dt: float) -> FollowOutput:
        """Slow v* down before obstacles, then ramp v and ω towards (v*, ω*) over ``dt`` s; the output."""
        p = self.params
        v_goal *= self._speed_scale(pose)
        self.code = code
        rate = p.max_accel if v_goal > self._v else p.max_decel
        self._v = _toward(self._v, v_goal, rate * dt)
        self._w = _toward(self._w, w_goal, p.max_turn_accel * dt)
        return self._output((self._v, self._w), code)

    def _keep_obstacles(self, points: FloatArray, target: tuple[float, float] | None, radius: float) -> None:
        """Keep ``points`` (world frame) as the obstacles, but those within ``radius`` m of the target."""
        if target is not None and len(points):
            near = np.hypot(points[:, 0] - target[0], points[:, 1] - target[1]) < radius
            points = points[~near]
        self._obstacles = points

    def _speed_scale(self, pose: Pose) -> float:
        """1 when the strip ahead is free beyond ``slow_distance``, 0 below ``stop_distance``, linear between."""
        p = self.params
        points = self._obstacles
        if len(points) == 0:
            return 1.0
        local = _to_robot(pose, points)
        inside = (local[:, 0] > 0.0) & (np.abs(local[:, 1]) < p.robot_radius + self._corridor_margin())
        if not inside.any():
            return 1.0
        clear = float(local[inside, 0].min()) - p.robot_radius
        return min(1.0, max(0.0, (clear - p.stop_distance) / (p.slow_distance - p.stop_distance)))

    def _halt(self, code: int, now: float) -> FollowOutput:
        """Stale input: stop now (no ramp), by avoid's halt."""
        self._v = self._w = 0.0
        self.code = code
        out = self._output((0.0, 0.0), code)
        return FollowOutput(out.velocity, out.code, out.data, halt=True)

    def _lose(self) -> FollowOutput:
        self.code = LOST
        self._forget_target()
        self._v = self._w = 0.0
        return self._output((0.0, 0.0), LOST)

    def _output(self, velocity: tuple[float, float] | None, code: int) -> FollowOutput:
        v, w = velocity if velocity is not None else (0.0, 0.0)
        return FollowOutput(velocity, code, (*self._last, v, w))


@dataclass
class FollowController(FollowerBase[FollowParams]):
    """The follow behaviour: :meth:`start` / :meth:`stop` on commands, :meth:`step` every period."""

    params: FollowParams = field(default_factory=FollowParams)
    tracker: Tracker = field(init=False)
    target: int | None = None
    _target_seen: float = -math.inf

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tracker = Tracker(self.params.track)

    def _forget_target(self) -> None:
        self.target = None

    def _corridor_margin(self) -> float:
        return self.params.corridor_margin

    # -- the step ---------------------------------------------------------------------------------------------------

    def step(self, inputs: FollowInputs, now: float) -> FollowOutput:
        """One control step at ``now`` (s): take a new scan into the tracks, choose or follow the target.

        Returns:
            The velocity to command (or None) and the status.
        """
        dt = self._tick(now)
        scan = inputs.scan
        if scan is not None and scan.stamp > self._scan_stamp and scan.pose is not None:
            self._scan_stamp = scan.stamp
            self._take_scan(scan)
        waiting = self._not_following(inputs, now)
        if waiting is not None:
            return waiting
        track = self.tracker.get(self.target)
        assert inputs.pose is not None and track is not None
        return self._follow_track(inputs.pose, track, now, dt)

    def _not_following(self, inputs: FollowInputs, now: float) -> FollowOutput | None:
        """The output when the robot follows no one this step: idle (a stop once after :meth:`stop`), halted for a
        stale pose or scan, searching for someone to follow, or lost them. None: it follows its target."""
        p = self.params
        waiting = self._idle_or_stale(inputs, now)
        if waiting is not None:
            return waiting
        pose, scan = inputs.pose, inputs.scan
        assert pose is not None and scan is not None
        if self.code == SEARCHING or self.target is None:
            self.target = self._choose(pose, now)
            chosen = self.tracker.get(self.target)
            if chosen is not None:
                self._target_seen = chosen.last_seen
            else:
                if now - self._search_since > p.search_timeout:
                    return self._lose()
                self.code = SEARCHING
                return self._output((0.0, 0.0), SEARCHING)
        track = self.tracker.get(self.target)
        if track is None or scan.stamp - self._target_seen > p.lost_timeout:
            return self._lose()
        return None

    def _follow_track(self, pose: Pose, track: Track, now: float, dt: float) -> FollowOutput:
        """Keep ``distance`` to the person tracked: at their speed away from the robot plus a gain on the distance
        error, turned towards them, slowed before an obstacle; too close and not walking away, wait."""
        x, y, vx, vy = track.at(now, self.params.track.accel_density)
        tx, ty, _ = relative(pose, (x, y, 0.0))
        d, b = math.hypot(tx, ty), math.atan2(ty, tx)
        self._last = (x, y, d, b)
        away = (vx * (x - pose[0]) + vy * (y - pose[1])) / max(d, 1e-6)
        v_goal, w_goal, code = self._law(away, d, b)
        return self._drive(pose, v_goal, w_goal, code, dt)

    # -- parts ------------------------------------------------------------------------------------------------------

    def _take_scan(self, scan: FollowScan) -> None:
        """Update the tracks with the people in ``scan`` and keep its other points (world frame) as obstacles."""
        p = self.params
        assert scan.pose is not None
        people = find_people(scan.points, scan.origin, p.detect)
        keep = frozenset({self.target}) if self.target is not None else frozenset()
        world = _to_world(scan.pose, np.array([[c.x, c.y] for c in people]).reshape(-1, 2))
        ids = self.tracker.update(world, scan.stamp, keep)
        target = self.tracker.get(self.target)
        if target is not None and target.id in ids and math.dist(target.position, scan.pose[:2]) <= p.max_distance:
            self._target_seen = scan.stamp  # seen, and near enough to follow
        centre = (float(target.state[0]), float(target.state[1])) if target is not None else None
        self._keep_obstacles(_to_world(scan.pose, scan.points), centre, p.target_radius)

    def _choose(self, pose: Pose, now: float) -> int | None:
        """The track to follow: the nearest moving one in front, else (after ``static_wait``) a near one straight
        ahead; None if there is none."""
        p = self.params
        moving: list[tuple[float, int]] = []
        standing: list[tuple[float, int]] = []
        waited = now - self._search_since >= p.static_wait
        for track in self.tracker.tracks.values():
            if self._scan_stamp - track.last_seen > 0.5 or track.hits < 3:
                continue
            tx, ty, _ = relative(pose, (track.position[0], track.position[1], 0.0))
            d, b = math.hypot(tx, ty), abs(math.atan2(ty, tx))
            if track.moved and d <= p.search_range and b <= p.search_fov / 2:
                moving.append((d, track.id))
            elif waited and d <= p.static_range and b <= p.static_fov / 2:
                standing.append((d, track.id))
        chosen = min(moving or standing, default=None)
        return chosen[1] if chosen is not None else None

    def _halt(self, code: int, now: float) -> FollowOutput:
        """Stale input: stop now (no ramp), keep the target; a target unseen too long is lost meanwhile."""
        if self.target is not None and now - self._target_seen > self.params.lost_timeout + self.params.scan_timeout:
            return self._lose()
        return super()._halt(code, now)


def _toward(current: float, target: float, step: float) -> float:
    return current + max(-step, min(step, target - current))


def _to_world(pose: Pose, points: FloatArray) -> FloatArray:
    """(N, 2) points from the robot frame at ``pose`` into the pose's frame."""
    c, s = math.cos(pose[2]), math.sin(pose[2])
    rot = np.array([[c, -s], [s, c]])
    result: FloatArray = points @ rot.T + np.array(pose[:2])
    return result


def _to_robot(pose: Pose, points: FloatArray) -> FloatArray:
    """(N, 2) points from the pose's frame into the robot frame at ``pose``."""
    c, s = math.cos(pose[2]), math.sin(pose[2])
    rot = np.array([[c, s], [-s, c]])
    result: FloatArray = (points - np.array(pose[:2])) @ rot.T
    return result
