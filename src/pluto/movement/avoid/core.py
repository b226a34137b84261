"""The avoid module's pure logic: obstacles from laser and sonar, vector-summation goto, wall following, laser
protection and the status codes of ``avoidance/status`` (IntEnums in :mod:`.codes`; the names here are their members).

Strategy: every step gets the newest pose, scans and drive status and returns the drive command and the status;
no I/O, no clock (``now`` is passed in). Obstacles are points in the robot frame (x forward, y left, m). To make
the vector sum independent of the scanner's beam density, the points are first reduced to the nearest one per
angular sector. The goto adds an attraction (length ``force[0]``) to a repulsion from every sector's nearest point
within ``influence`` (3 m) that lies in or near the robot's way, weighted by how much the point lies ahead of the
robot, and steers along the sum (the original avoid of docs/design.md "reacts to near (<3 m) obstacles ... using a
vector summation rule"). The speed is scaled down by the free distance ahead (laser slow/stop, element[0] = 6).

The attraction does not point at the goal itself but at a look-ahead point on the way to it, shifted across that
way to the middle of the free space beside the robot ("down the middle of the street"): walls beside the way set
where the robot drives, they do not push it from one side to the other. With the heading loop
ω = turn_gain·(heading error) and a look-ahead L, the robot's offset δ from the middle follows
δ'' + turn_gain·δ' + turn_gain·v/L·δ = 0, critically damped for L = 4·v/turn_gain: the look-ahead grows with the
speed (never shorter than ``lookahead``), so the robot settles in the middle without overshoot at any speed. A
repulsion that summed the pushes of both walls point by point was a stiff spring (tens of degrees per centimetre
off the middle) which, through the lag of the heading loop, made the robot weave from wall to wall. On the final
approach (nearer the goal than ``centring_fade``) the shift to the middle fades out, and so does the repulsion
while the robot's way to the goal is free: a goal near a wall, or off the middle of a corridor, is reached.

Commands (``avoidance/command`` cmd_flags = 10·A + T; -1 releases the robot):

* A: 0 no avoidance, 1 sonar only, 2 laser only, 3 both. Sonar avoidance also turns on the drive's sonar
  protection (drive cmd_flags + 10).
* T: 0 velocity (velocity[0..1] = v m/s, ω rad/s; with laser avoidance, force[0] > 0 narrows the strip ahead that
  is checked to that half-width, m, at least :data:`MIN_STRIP` (through a doorway barely wider than the robot the
  jambs are beside the robot, not ahead of it, yet inside the full strip); 1 heading (position[1] rad in the
  ``Localization/Pose`` frame, velocity[0] m/s); 2 goto (position[0..1] m, velocity[0..1] = maximum v m/s,
  ω rad/s, force[0] goal weight);
  3 wall follow (position[0] = distance from the robot centre to the wall on its left, m, 0 for the default;
  velocity[0] = speed, m/s, 0 for the default); 4 halt: stop at once (the drive is told cmd_flags 2), sent by a
  commander whose own input went stale.

Stale inputs stop the robot at once (the drive's halt) and the command in force goes on when they are fresh again;
element[0] says which: 7 the laser (with laser avoidance), 8 the pose or odometry of a goto or heading command, 9 the
commander (a command with a lease, ``ActuatorState.lease``, not renewed in time). A goto's stuck and progress timers
stand still while it is held. A goto is reached (element[1] = 1) only on a fresh pose certain enough to tell: its
position standard deviation at most a third of ``goal_tolerance``. A goto that comes within the tolerance on a pose
too uncertain to tell (dead reckoning alone, far from where the pose was last fixed) ends unverified (element[1] = 3):
the robot stops there, and no one is told it arrived; waiting would not help, since dead reckoning only grows
less certain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import relative, wrap_angle
from pluto.movement.avoid.codes import DRIVE_HALT, RELEASE, Avoidance, AvoidStatus, GotoStatus, Mode
from pluto.runtime.params import ModuleParams
from pluto.runtime.ranges import Angle, CommandTimeout, Offset, Radius, Speed, Timeout, TurnRate, between

__all__ = [
    "AVOID_BOTH",
    "AVOID_LASER",
    "AVOID_NONE",
    "AVOID_SONAR",
    "COMMANDER_SILENT",
    "DRIVE_HALT",
    "GOTO_REACHED",
    "GOTO_RUNNING",
    "GOTO_STUCK",
    "GOTO_UNVERIFIED",
    "HALT",
    "LASER_FAULT",
    "LASER_SLOW",
    "RELEASE",
    "STALE_POSE",
    "THREAD_STOPPED",
    "AvoidCommand",
    "AvoidController",
    "AvoidInputs",
    "AvoidOutput",
    "AvoidParams",
    "AvoidStatus",
    "Avoidance",
    "GotoStatus",
    "Mode",
    "centring",
    "free_space_offset",
    "front_clearance",
    "goal_in_robot_frame",
    "laser_points",
    "lookahead_distance",
    "nearest_per_sector",
    "parse_command",
    "repulsion",
    "sonar_points",
    "turn_side",
    "wall_estimate",
]

FloatArray = NDArray[np.float64]


# The codes by their names of before the enums (the same numbers).
AVOID_NONE, AVOID_SONAR, AVOID_LASER, AVOID_BOTH = Avoidance.NONE, Avoidance.SONAR, Avoidance.LASER, Avoidance.BOTH
LASER_SLOW = AvoidStatus.LASER_SLOW
LASER_FAULT = AvoidStatus.LASER_FAULT
STALE_POSE = AvoidStatus.STALE_POSE
COMMANDER_SILENT = AvoidStatus.COMMANDER_SILENT
HALT = Mode.HALT
GOTO_REACHED = GotoStatus.REACHED
GOTO_STUCK = GotoStatus.STUCK
GOTO_UNVERIFIED = GotoStatus.UNVERIFIED
GOTO_RUNNING = GotoStatus.RUNNING
THREAD_STOPPED = GotoStatus.THREAD_STOPPED


class AvoidParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the avoid controller (the avoid module's parameters derive from it: :mod:`pluto.runtime.params`).

    Attributes:
        robot_radius: radius of the robot's disc footprint, m.
        laser_mount_x: forward offset of the wrist axis (and the laser) from the robot centre, m.
        influence: obstacles nearer than this to the robot centre repel the goto, m.
        repulsion_gain: strength of the repulsion, (unit vector)·m.
        repulsion_band: obstacles farther than this beyond the robot's radius from the line along its way do not
            repel the goto (the walls of a corridor set the middle it drives down instead), m.
        sectors: angular sectors the obstacle points are reduced to (nearest point per sector).
        stop_distance: free distance ahead of the body at which the robot stops, m.
        slow_distance: free distance ahead of the body below which the robot slows down, m.
        corridor_margin: half-width added to the radius of the strip ahead that is checked, m.
        goal_tolerance: distance to the goal at which a goto is reached, m.
        stuck_distance: free distance ahead below which a goto whose goal is ahead is blocked, m.
        stuck_time: how long a goto may stay blocked before it is stuck, s.
        progress_distance, progress_time: a goto that has not come ``progress_distance`` m nearer its goal within
            ``progress_time`` s is stuck.
        turn_gain: angular velocity per heading error, 1/s.
        side_clearance: obstacles beside the robot's way nearer than this to its body move the way to the middle
            of the free space, m (a side free farther than this counts as free this far).
        lookahead: shortest distance ahead at which the goto aims at the middle of the free space, m (at speed v
            it aims 4·v/turn_gain ahead when that is farther).
        centring_fade: distance to the goal below which the shift to the middle fades out (linearly to 0 at the
            goal), and the repulsion too while the way to the goal is free, m.
        direction_smoothing: weight of the previous direction in the goto's low-pass filter of its direction (0..1).
        default_speed, default_turn_rate: goto limits when the command gives none, m/s, rad/s.
        wall_distance: default distance from the robot centre to the wall on its left, m.
        wall_speed: default wall-follow speed, m/s.
        wall_gain: wall-follow turn rate per metre of distance error, rad/(s·m).
        wall_angle_gain: wall-follow turn rate per radian between robot and wall, 1/s.
        wall_pan: wrist pan while following a wall (left positive), rad.
        wall_window: the wall is fitted to left points with |x| below this, m.
        scan_timeout: laser scans older than this are ignored (stop when laser avoidance is on), s.
    """

    robot_radius: Radius = 0.4
    laser_mount_x: Offset = 0.25
    influence: Annotated[float, between(0.0, 20.0, open_low=True)] = 3.0
    repulsion_gain: Annotated[float, between(0.0, 10.0)] = 0.5
    repulsion_band: Annotated[float, between(0.0, 5.0)] = 0.3
    sectors: Annotated[int, between(1, 3600)] = 72
    stop_distance: Annotated[float, between(0.0, 10.0)] = 0.25
    slow_distance: Annotated[float, between(0.0, 10.0)] = 1.2
    corridor_margin: Annotated[float, between(0.0, 2.0)] = 0.1
    goal_tolerance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.3
    stuck_distance: Annotated[float, between(0.0, 10.0)] = 0.5
    stuck_time: Timeout = 3.0
    progress_distance: Annotated[float, between(0.0, 10.0)] = 0.3
    progress_time: Timeout = 15.0
    turn_gain: Annotated[float, between(0.0, 20.0, open_low=True)] = 1.5
    direction_smoothing: Annotated[float, between(0.0, 1.0)] = 0.8
    side_clearance: Annotated[float, between(0.0, 10.0)] = 0.8
    lookahead: Annotated[float, between(0.0, 20.0, open_low=True)] = 1.0
    centring_fade: Annotated[float, between(0.0, 20.0)] = 1.5
    default_speed: Speed = 0.5
    default_turn_rate: TurnRate = 1.0
    wall_distance: Annotated[float, between(0.0, 10.0, open_low=True)] = 1.0
    wall_speed: Speed = 0.4
    wall_gain: Annotated[float, between(0.0, 20.0)] = 1.2
    wall_angle_gain: Annotated[float, between(0.0, 20.0)] = 1.5
    wall_pan: Angle = 1.05
    wall_window: Annotated[float, between(0.0, 10.0, open_low=True)] = 1.5
    scan_timeout: CommandTimeout = 1.0


MIN_STRIP = 0.15
"""Narrowest half-width of the strip ahead a velocity command may ask to be checked, m."""


@dataclass(frozen=True)
class AvoidCommand:
    """A decoded ``avoidance/command``.

    Attributes:
        mode: T (:class:`Mode`), or :data:`RELEASE`.
        avoidance: A (0 none, 1 sonar, 2 laser, 3 both).
        position, velocity, force: the command's vectors (units per mode, see the module docstring).
    """

    mode: int
    avoidance: int
    position: tuple[float, ...] = ()
    velocity: tuple[float, ...] = ()
    force: tuple[float, ...] = ()

    @property
    def sonar(self) -> bool:
        return self.avoidance in (AVOID_SONAR, AVOID_BOTH)

    @property
    def laser(self) -> bool:
        return self.avoidance in (AVOID_LASER, AVOID_BOTH)

    def strip(self, full: float) -> float:
        """Half-width of the strip ahead that the laser protection checks, m: ``full`` unless a velocity command
        narrows it (force[0] > 0), never below :data:`MIN_STRIP`."""
        if self.mode == Mode.VELOCITY and self.force and self.force[0] > 0.0:
            return max(MIN_STRIP, min(full, self.force[0]))
        return full


def parse_command(cmd_flags: int, position: list[float], velocity: list[float], force: list[float]) -> AvoidCommand:
    """Decode cmd_flags = 10·A + T (or -1).

    Raises:
        ValueError: the flags are not -1 or 10·A + T with A in 0..3, T in 0..3.
    """
    if cmd_flags == RELEASE:
        return AvoidCommand(RELEASE, AVOID_NONE)
    a, t = divmod(cmd_flags, 10)
    if cmd_flags < 0 or a > 3 or t > HALT:
        raise ValueError(f"avoidance cmd_flags must be -1 or 10*A+T with A in 0..3, T in 0..4, got {cmd_flags}")
    return AvoidCommand(t, a, tuple(position), tuple(velocity), tuple(force))


# -- obstacles ------------------------------------------------------------------------------------------------------


def laser_points(ranges: FloatArray, angles: FloatArray, pan: float, mount_x: float, max_range: float) -> FloatArray:
    """Laser echoes as points in the robot frame.

    Args:
        ranges: (N,) m; -1 (fault) and values >= max_range (no echo) are dropped.
        angles: (N,) bearings in the laser frame, rad.
        pan: wrist pan, rad (left positive).
        mount_x: forward offset of the laser from the robot centre, m.
        max_range: the scanner's largest range, m.

    Returns:
        (M, 2) points (x forward, y left), m.
    """
    r = np.asarray(ranges, dtype=float)
    a = np.asarray(angles, dtype=float)
    if r.shape != a.shape:
        raise ValueError(f"ranges {r.shape} and angles {a.shape} differ")
    ok = (r > 0.0) & (r < max_range - 1e-6)
    bearing = a[ok] + pan
    return np.column_stack((mount_x + r[ok] * np.cos(bearing), r[ok] * np.sin(bearing)))


def sonar_points(ranges: FloatArray, angles: FloatArray, max_range: float, radius: float) -> FloatArray:
    """Sonar echoes as points in the robot frame.

    Args:
        ranges: (N,) m from the body's surface; max_range (nothing seen) is dropped.
        angles: (N,) bearings of the transducers in the robot frame, rad.
        max_range: the sonar's largest range, m.
        radius: the body radius the ranges are measured from, m.

    Returns:
        (M, 2) points (x forward, y left), m.
    """
    r = np.asarray(ranges, dtype=float)
    a = np.asarray(angles, dtype=float)
    ok = (r >= 0.0) & (r < max_range - 1e-6)
    d = r[ok] + radius
    return np.column_stack((d * np.cos(a[ok]), d * np.sin(a[ok])))


def nearest_per_sector(points: FloatArray, sectors: int) -> FloatArray:
    """The nearest point (to the robot centre) of each of ``sectors`` equal angular sectors; (K, 2), m."""
    if len(points) == 0:
        return points.reshape(0, 2)
    d = np.hypot(points[:, 0], points[:, 1])
    k = ((np.arctan2(points[:, 1], points[:, 0]) + math.pi) / (2 * math.pi) * sectors).astype(int) % sectors
    order = np.lexsort((d, k))
    first = np.ones(len(order), dtype=bool)
    first[1:] = k[order][1:] != k[order][:-1]
    result: FloatArray = points[order[first]]
    return result


def front_clearance(points: FloatArray, radius: float, margin: float, direction: float = 1.0) -> float:
    """Free distance from the body to the nearest point in the strip of half-width radius + margin ahead
    (``direction`` 1) or behind (-1), m; inf if the strip is free."""
    if len(points) == 0:
        return math.inf
    x = points[:, 0] * direction
    inside = (x > 0.0) & (np.abs(points[:, 1]) < radius + margin)
    if not inside.any():
        return math.inf
    return float(np.min(x[inside])) - radius


def repulsion(
    points: FloatArray,
    influence: float,
    radius: float,
    gain: float,
    direction: float = 0.0,
    side_band: float = 1.0,
    side: float = 1.0,
    back: float = 0.3,
) -> FloatArray:
    """The summed repulsion from obstacle points, (2,) in the robot frame.

    Each point p at distance r < influence from the centre, with free distance c = r - radius (at least 5 cm), has
    strength gain·(1/c - 1/(influence - radius)), weighted by max(0, cos(bearing - direction)) (obstacles ahead
    in ``direction``, rad in the robot frame, matter; those beside and behind do not) and by a weight that falls
    linearly from 1 for points within ``radius`` of the line through the robot along ``direction`` to 0 for points
    ``side_band`` m farther aside (the walls of a doorway the robot fits through do not push it back). Weighting by
    the goal's bearing rather than the robot's heading keeps the sum independent of the heading, so steering along
    it does not feed back into it.

    A point pushes sideways, away from its side of the line, with its strength, and back along ``direction`` with
    ``back`` times it: the robot steps around an obstacle instead of stopping in front of it. When the sideways
    pushes nearly cancel (an obstacle square in the way), the robot steps to ``side`` (+1 left, -1 right).
    """
    if len(points) == 0:
        return np.zeros(2)
    r = np.hypot(points[:, 0], points[:, 1])
    near = (r < influence) & (r > 1e-6)
    if not near.any():
        return np.zeros(2)
    p, r = points[near], r[near]
    c = np.maximum(r - radius, 0.05)
    cos_d, sin_d = math.cos(direction), math.sin(direction)
    ahead = (p[:, 0] * cos_d + p[:, 1] * sin_d) / r
    lateral = -p[:, 0] * sin_d + p[:, 1] * cos_d
    in_path = np.clip(1.0 - (np.abs(lateral) - radius) / side_band, 0.0, 1.0)
    strength = gain * np.maximum(1.0 / c - 1.0 / (influence - radius), 0.0) * np.maximum(ahead, 0.0) * in_path
    total = float(strength.sum())
    sideways = float(-(np.sign(lateral) * strength).sum())
    if abs(sideways) < 0.3 * total:
        sideways = side * total
    along = -back * total
    return np.array([along * cos_d - sideways * sin_d, along * sin_d + sideways * cos_d])


def free_space_offset(points: FloatArray, direction: float, radius: float, reach: float, ahead: float) -> float:
    """How far across the line through the robot along ``direction`` the middle of the free space lies, m (left of
    the line positive).

    The free space is bounded on each side by the nearest obstacle point beside the line, among those from
    ``radius`` m behind the robot to ``ahead`` m ahead of it; a side with nothing nearer than ``reach`` m counts as
    free to ``reach`` (a single wall moves the robot to ``reach`` from it, not to the middle of a room). Points
    within ``radius`` of the line are in the robot's way, not beside it: the repulsion steers around them, and
    they are left out here. Points farther behind do not count: what the robot has passed does not steer it.

    Args:
        points: (N, 2) obstacle points in the robot frame, m.
        direction: bearing of the line in the robot frame, rad.
        radius: the robot's radius, m.
        reach: largest free width counted on a side, from the line, m.
        ahead: the stretch ahead that counts, m.
    """
    if len(points) == 0:
        return 0.0
    cos_d, sin_d = math.cos(direction), math.sin(direction)
    along = points[:, 0] * cos_d + points[:, 1] * sin_d
    lateral = -points[:, 0] * sin_d + points[:, 1] * cos_d
    beside = (along > -radius) & (along < ahead) & (np.abs(lateral) >= radius)
    left = lateral[beside & (lateral > 0.0)]
    right = -lateral[beside & (lateral < 0.0)]
    free_left = min(reach, float(left.min())) if len(left) else reach
    free_right = min(reach, float(right.min())) if len(right) else reach
    return 0.5 * (free_left - free_right)


def lookahead_distance(speed: float, turn_gain: float, shortest: float) -> float:
    """How far ahead (m) a goto at ``speed`` m/s with heading gain ``turn_gain`` 1/s aims: 4·speed/turn_gain, the
    look-ahead that makes its approach to a line critically damped, but at least ``shortest`` m."""
    return max(shortest, 4.0 * abs(speed) / turn_gain) if turn_gain > 0 else shortest


def centring(points: FloatArray, radius: float, clearance: float, gain: float) -> float:
    """Sideways push (robot y, left positive) away from obstacles beside the robot, one push per point.

    The goto does not use it: summed point by point over a corridor's walls it is a stiff spring (tens of degrees of
    steering per centimetre off the middle) that makes the robot weave; the goto steers to the middle of the free
    space (:func:`free_space_offset`) instead.

    Points beside the body (|x| < radius + 0.2 m) with a free distance c = |y| - radius below ``clearance`` m push
    away from their side with gain·(clearance - c)/clearance each.
    """
    if len(points) == 0:
        return 0.0
    beside = (np.abs(points[:, 0]) < radius + 0.2) & (np.abs(points[:, 1]) - radius < clearance)
    if not beside.any():
        return 0.0
    y = points[beside, 1]
    c = np.maximum(np.abs(y) - radius, 0.0)
    return float(-(np.sign(y) * gain * (clearance - c) / clearance).sum())


def goal_in_robot_frame(pose: tuple[float, float, float], goal: tuple[float, float]) -> tuple[float, float]:
    """The goal (x, y) in m, given in the pose frame, seen from the robot at pose (x m, y m, θ rad)."""
    x, y, _ = relative(pose, (goal[0], goal[1], 0.0))
    return x, y


def wall_estimate(points: FloatArray, window: float) -> tuple[float, float] | None:
    """Distance to the wall on the robot's left and its angle, from a least-squares line through the left points.

    Args:
        points: (N, 2) obstacle points in the robot frame, m.
        window: only points with |x| < window and 0 < y < 2·window + 1 are used, m.

    Returns:
        (distance from the robot centre to the line, m; angle of the line to the robot's x axis, rad, positive when
        the wall turns away to the left ahead), or None with fewer than 5 points.
    """
    if len(points) == 0:
        return None
    sel = points[(np.abs(points[:, 0]) < window) & (points[:, 1] > 0.0) & (points[:, 1] < 2 * window + 1.0)]
    if len(sel) < 5:
        return None
    # keep the nearest band (the wall, not what is behind a gap in it)
    sel = sel[sel[:, 1] < np.min(sel[:, 1]) + 0.5]
    if len(sel) < 5:
        return None
    slope, intercept = np.polyfit(sel[:, 0], sel[:, 1], 1)
    return float(intercept / math.hypot(1.0, slope)), math.atan(float(slope))


# -- the controller -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AvoidInputs:
    """What the controller sees in one step.

    Attributes:
        pose: (x m, y m, θ rad) from ``Localization/Pose``, or None before the first.
        odometry_theta: heading of the drive's (odometry) frame, rad, for heading commands; None if unknown
            (the pose's θ is then used).
        laser: (N, 2) laser points in the robot frame, m, or None when no recent scan.
        laser_fault: the newest scan has every range -1 (the scanner is rebooting).
        sonar: (M, 2) sonar points in the robot frame, m, or None.
        drive_data: data of ``drive/status`` (velocities actually commanded, m/s, rad/s).
        drive_code: element[0] of ``drive/status``.
        pose_std: the pose's position uncertainty, m (the standard deviation along its worst axis); a goto is
            reached only when it is well under the goal tolerance (a third of it).
    """

    pose: tuple[float, float, float] | None = None
    odometry_theta: float | None = None
    laser: FloatArray | None = None
    laser_fault: bool = False
    sonar: FloatArray | None = None
    drive_data: tuple[float, ...] = (0.0, 0.0)
    drive_code: int = 0
    pose_std: float = 0.0


@dataclass(frozen=True)
class AvoidOutput:
    """The result of a step.

    Attributes:
        drive_flags: cmd_flags for ``drive/command`` (0 or 1, +10 with sonar avoidance); None: write nothing.
        drive_position, drive_velocity: its vectors (position[1] heading rad in the odometry frame; velocity
            v m/s, ω rad/s).
        data: status data (velocities commanded, m/s, rad/s).
        element: status [element 0 (drive code or 6, 7), element 1 (goto state)].
        wrist_pan: pan to command to the wrist, rad, or None to leave it.
    """

    drive_flags: int | None
    drive_position: tuple[float, float] = (0.0, 0.0)
    drive_velocity: tuple[float, float] = (0.0, 0.0)
    data: tuple[float, float] = (0.0, 0.0)
    element: tuple[int, int] = (0, 0)
    wrist_pan: float | None = None


@dataclass
class _GotoState:
    reached: bool = False
    stuck: bool = False
    unverified: bool = False
    blocked_since: float | None = None
    best_distance: float = math.inf
    best_time: float = 0.0
    turn_sign: float = 1.0
    direction: tuple[float, float] | None = None

    @property
    def over(self) -> bool:
        """The goto has ended (reached, stuck, or unverified)."""
        return self.reached or self.stuck or self.unverified


@dataclass
class AvoidController:
    """The avoid module's control law: call :meth:`command` on a new command, :meth:`step` every period."""

    params: AvoidParams = field(default_factory=AvoidParams)
    current: AvoidCommand | None = None
    _goto: _GotoState = field(default_factory=_GotoState)
    lease: float = 0.0
    """s the command in force holds without a renewal (0: until replaced)."""
    renewed: float = 0.0
    _held_since: float | None = None  # the goto has been held (a stale input) since then

    def command(self, cmd: AvoidCommand, now: float, lease: float = 0.0) -> None:
        """Take a new command (a new goto restarts the reached/stuck bookkeeping); ``lease`` (s): it holds only while
        renewed (:meth:`renew`) within this long, 0 until replaced."""
        self.current = None if cmd.mode == RELEASE else cmd
        self._goto = _GotoState(best_time=now)
        self.lease = lease if lease > 0.0 and math.isfinite(lease) else 0.0
        self.renewed = now
        self._held_since = None

    def renew(self, now: float) -> None:
        """The commander wrote the command in force again: it holds on, its goto's progress kept."""
        self.renewed = now

    def _hold(self, cmd: AvoidCommand, code: int, inputs: AvoidInputs, now: float) -> AvoidOutput:
        """Stop at once for a stale input (``code``); a goto's timers do not run meanwhile."""
        if self._held_since is None:
            self._held_since = now
        goto_state = GOTO_RUNNING if cmd.mode == Mode.GOTO and not self._goto.over else GotoStatus.NONE
        if cmd.mode == Mode.GOTO and self._goto.reached:
            goto_state = GOTO_REACHED
        flags = DRIVE_HALT + (10 if cmd.sonar else 0)
        return AvoidOutput(flags, data=(0.0, 0.0), element=(code, goto_state))

    def _unhold(self, now: float) -> None:
        """The inputs are fresh again: a held goto's timers go on from where they stopped."""
        if self._held_since is None:
            return
        held, self._held_since = now - self._held_since, None
        g = self._goto
        g.best_time += held
        if g.blocked_since is not None:
            g.blocked_since += held

    def step(self, inputs: AvoidInputs, now: float) -> AvoidOutput:
        """One control step at time ``now`` (s).

        Returns:
            The drive command to write and the status to publish.
        """
        cmd = self.current
        if cmd is None:
            return AvoidOutput(None, data=_pair(inputs.drive_data), element=(inputs.drive_code, 0))
        stopped = self._stopped(cmd, inputs, now)
        if stopped is not None:
            return stopped
        p = self.params
        if (
            cmd.mode == Mode.GOTO
            and inputs.pose is not None
            and not self._goto.over
            and inputs.pose_std > p.goal_tolerance / 3.0
            and self._goal_distance(cmd, inputs.pose) < p.goal_tolerance
        ):
            self._goto.unverified = True  # at the goal, may be: the pose cannot tell
        self._unhold(now)
        flags_base = 10 if cmd.sonar else 0
        flags, pos, (v, w), goto_state, wrist = self._mode_step(cmd, inputs, now)
        code, scale = self._laser_protection(cmd, inputs, v)
        slowed = scale < 1.0
        if code == LASER_FAULT:
            v, w = 0.0, 0.0
        elif slowed:
            v *= scale
            if cmd.mode == Mode.HEADING and scale == 0.0:
                flags, pos, w = flags_base, (0.0, 0.0), 0.0
        data = (v, w) if slowed or cmd.mode in (Mode.GOTO, Mode.WALL_FOLLOW) else _pair(inputs.drive_data)
        if inputs.drive_code != 0 and not slowed:
            data = _pair(inputs.drive_data)
        return AvoidOutput(flags, pos, (v, w), data, (code, goto_state), wrist)

    def _mode_step(
        self, cmd: AvoidCommand, inputs: AvoidInputs, now: float
    ) -> tuple[int, tuple[float, float], tuple[float, float], int, float | None]:
        """What the command's mode asks of the drive before the laser protection: its cmd_flags and position, (v, ω),
        the goto's status and the wrist's pan (None: leave it)."""
        flags_base = 10 if cmd.sonar else 0
        if cmd.mode == Mode.VELOCITY:
            return flags_base, (0.0, 0.0), (_get(cmd.velocity, 0), _get(cmd.velocity, 1)), 0, None
        if cmd.mode == Mode.HEADING:
            heading = _get(cmd.position, 1)
            if inputs.pose is not None and inputs.odometry_theta is not None:
                heading = heading - inputs.pose[2] + inputs.odometry_theta
            return flags_base + 1, (0.0, heading), (_get(cmd.velocity, 0), 0.0), 0, None
        if cmd.mode == Mode.GOTO:
            v, w, goto_state = self._goto_step(cmd, inputs, self._obstacles(cmd, inputs), now)
            return flags_base, (0.0, 0.0), (v, w), goto_state, None
        return flags_base, (0.0, 0.0), self._wall_step(cmd, inputs), 0, self.params.wall_pan

    def _stopped(self, cmd: AvoidCommand, inputs: AvoidInputs, now: float) -> AvoidOutput | None:
        """The robot stopped at once: a halt, or a stale input the command steers by (held, see :meth:`_hold`).
        None: the command goes on."""
        if self.lease > 0.0 and now - self.renewed > self.lease:
            return self._hold(cmd, COMMANDER_SILENT, inputs, now)
        if cmd.mode == HALT:
            return AvoidOutput(DRIVE_HALT + (10 if cmd.sonar else 0), data=(0.0, 0.0), element=(inputs.drive_code, 0))
        if cmd.mode == Mode.GOTO and inputs.pose is None and not self._goto.over:
            return self._hold(cmd, STALE_POSE, inputs, now)
        if cmd.mode == Mode.HEADING and (inputs.pose is None or inputs.odometry_theta is None):
            return self._hold(cmd, STALE_POSE, inputs, now)
        if cmd.laser and (inputs.laser_fault or inputs.laser is None):
            return self._hold(cmd, LASER_FAULT, inputs, now)
        return None

    def _laser_protection(self, cmd: AvoidCommand, inputs: AvoidInputs, v: float) -> tuple[int, float]:
        """element[0] and the factor (0 to 1) the laser protection scales the speed ``v`` m/s by: 0 with
        LASER_FAULT for no laser, less than 1 with LASER_SLOW for an obstacle ahead, else 1 with the drive's code."""
        p = self.params
        if cmd.laser and (inputs.laser_fault or inputs.laser is None):
            return LASER_FAULT, 0.0
        if cmd.laser and inputs.laser is not None and v != 0.0:
            margin = cmd.strip(p.robot_radius + p.corridor_margin) - p.robot_radius
            clear = front_clearance(inputs.laser, p.robot_radius, margin, 1.0 if v > 0 else -1.0)
            scale = _speed_scale(clear, p.stop_distance, p.slow_distance)
            if scale < 1.0:
                return LASER_SLOW, scale
        return inputs.drive_code, 1.0

    def _goal_distance(self, cmd: AvoidCommand, pose: tuple[float, float, float]) -> float:
        return math.hypot(_get(cmd.position, 0) - pose[0], _get(cmd.position, 1) - pose[1])

    # -- modes ------------------------------------------------------------------------------------------------------

    def _obstacles(self, cmd: AvoidCommand, inputs: AvoidInputs) -> FloatArray:
        parts = []
        if cmd.laser and inputs.laser is not None and not inputs.laser_fault:
            parts.append(inputs.laser)
        if cmd.sonar and inputs.sonar is not None:
            parts.append(inputs.sonar)
        if not parts:
            return np.zeros((0, 2))
        return np.concatenate(parts)

    def _goto_step(
        self, cmd: AvoidCommand, inputs: AvoidInputs, obstacles: FloatArray, now: float
    ) -> tuple[float, float, int]:
        p, g = self.params, self._goto
        if g.reached:
            return 0.0, 0.0, GOTO_REACHED
        if g.stuck:
            return 0.0, 0.0, GOTO_STUCK
        if g.unverified:
            return 0.0, 0.0, GOTO_UNVERIFIED
        if inputs.pose is None:
            return 0.0, 0.0, GOTO_RUNNING
        gx, gy = goal_in_robot_frame(inputs.pose, (_get(cmd.position, 0), _get(cmd.position, 1)))
        distance = math.hypot(gx, gy)
        if distance < p.goal_tolerance:
            g.reached = True
            return 0.0, 0.0, GOTO_REACHED
        clear = front_clearance(obstacles, p.robot_radius, p.corridor_margin)
        if self._goto_stuck(math.atan2(gy, gx), distance, clear, now):
            g.stuck = True
            return 0.0, 0.0, GOTO_STUCK
        v, w = self._steer(cmd, inputs.pose, obstacles, (gx, gy), distance, clear)
        return v, w, GOTO_RUNNING

    def _goto_stuck(self, goal_bearing: float, distance: float, clear: float, now: float) -> bool:
        """The goto is stuck: blocked ahead (the goal ahead, less than ``stuck_distance`` free) for ``stuck_time``
        s, or ``progress_time`` s without coming ``progress_distance`` m nearer the goal."""
        p, g = self.params, self._goto
        if distance < g.best_distance - p.progress_distance or g.best_distance == math.inf:
            g.best_distance, g.best_time = distance, now
        blocked = abs(goal_bearing) < math.pi / 2 and clear < p.stuck_distance
        if blocked:
            if g.blocked_since is None:
                g.blocked_since = now
        else:
            g.blocked_since = None
        return (g.blocked_since is not None and now - g.blocked_since >= p.stuck_time) or (
            now - g.best_time >= p.progress_time
        )

    def _steer(
        self,
        cmd: AvoidCommand,
        pose: tuple[float, float, float],
        obstacles: FloatArray,
        goal: tuple[float, float],
        distance: float,
        clear: float,
    ) -> tuple[float, float]:
        """v (m/s) and ω (rad/s) of the goto: the vector sum of the attraction to a look-ahead point on the way to
        the goal (``goal`` in the robot frame, ``distance`` m away), moved to the middle of the free space, and the
        obstacles' repulsion; slowed by the free distance ahead ``clear`` m."""
        p, g = self.params, self._goto
        vmax = _get(cmd.velocity, 0) or p.default_speed
        wmax = _get(cmd.velocity, 1) or p.default_turn_rate
        weight = _get(cmd.force, 0) or 1.0
        gx, gy = goal
        goal_bearing = math.atan2(gy, gx)
        sectors = nearest_per_sector(obstacles, p.sectors)
        c, s = math.cos(pose[2]), math.sin(pose[2])
        # obstacles count by how much they lie ahead along the way the robot means to go (the smoothed direction of
        # the previous steps; the goal's bearing at first), not along its heading, which swings as it steers
        heading = goal_bearing
        if g.direction is not None:
            dx, dy = g.direction
            heading = math.atan2(-s * dx + c * dy, c * dx + s * dy)
        # the final approach: near the goal it, not the middle of the way, is where the robot heads; and while
        # nothing stands between them the repulsion fades out too (a goal near a wall)
        fade = min(1.0, distance / p.centring_fade) if p.centring_fade > 0 else 1.0
        goal_dir = np.array([gx, gy]) / distance
        way = sectors @ np.array([[goal_dir[0], -goal_dir[1]], [goal_dir[1], goal_dir[0]]])  # goal along x
        way_free = front_clearance(way, p.robot_radius, 0.0) > distance - p.robot_radius
        # aim at a look-ahead point on the way to the goal, moved across it to the middle of the free space
        lookahead = lookahead_distance(vmax, p.turn_gain, p.lookahead)
        reach = p.robot_radius + p.side_clearance
        shift = fade * free_space_offset(sectors, heading, p.robot_radius, reach, lookahead)
        aim = min(lookahead, distance) * goal_dir + shift * np.array([-math.sin(heading), math.cos(heading)])
        # what lies beyond a goal the robot can drive straight to does not repel it (a goal before a wall)
        repelling = sectors[way[:, 0] < distance + p.robot_radius] if way_free else sectors
        push = repulsion(
            repelling, p.influence, p.robot_radius, p.repulsion_gain, heading, p.repulsion_band, side=g.turn_sign
        )
        length = float(np.hypot(aim[0], aim[1]))
        attraction = aim / length if length > 1e-6 else goal_dir
        total = weight * attraction + (fade if way_free else 1.0) * push
        # smooth the direction in the pose frame: sensor noise and beams coming into view as the robot turns must
        # not make it flip-flop
        world = (c * float(total[0]) - s * float(total[1]), s * float(total[0]) + c * float(total[1]))
        if g.direction is None:
            g.direction = world
        else:
            a = p.direction_smoothing
            g.direction = (a * g.direction[0] + (1 - a) * world[0], a * g.direction[1] + (1 - a) * world[1])
        dx, dy = g.direction
        error = math.atan2(-s * dx + c * dy, c * dx + s * dy)
        if abs(error) > 2.0:  # pushed back: keep turning the way it turned (no flip-flop between ±π)
            error = math.copysign(abs(error), g.turn_sign)
        g.turn_sign = turn_side(error, goal_bearing, g.turn_sign)
        w = max(-wmax, min(wmax, p.turn_gain * error))
        v = vmax * max(0.0, math.cos(error)) ** 2 * _speed_scale(clear, p.stop_distance, p.slow_distance)
        v = min(v, 0.6 * distance + 0.1)
        return v, w

    def _wall_step(self, cmd: AvoidCommand, inputs: AvoidInputs) -> tuple[float, float]:
        p = self.params
        d_ref = _get(cmd.position, 0) or p.wall_distance
        speed = _get(cmd.velocity, 0) or p.wall_speed
        if inputs.laser is None or inputs.laser_fault:
            return 0.0, 0.0
        wall = wall_estimate(inputs.laser, p.wall_window)
        if wall is None:  # no wall in view: creep on, bending left to find it
            return 0.5 * speed, 0.2
        distance, angle = wall
        w = p.wall_gain * (distance - d_ref) + p.wall_angle_gain * angle
        w = max(-0.6, min(0.6, w))
        return speed, w


def turn_side(direction: float, goal_bearing: float, previous: float, dead_band: float = 0.2) -> float:
    """The side a goto steps to: +1 left, -1 right of the goal, or ``previous`` while the chosen direction is within
    ``dead_band`` rad of the goal's bearing (an obstacle square ahead keeps the side first chosen).

    Angles (rad, robot frame) are compared modulo 2π: with the goal behind the robot its bearing flips between +π
    and -π as the heading wavers, and a plain comparison would flip the side every step, the robot dithering on the
    spot instead of turning round.
    """
    side = wrap_angle(direction - goal_bearing)
    if abs(side) <= dead_band:
        return previous
    return 1.0 if side > 0 else -1.0


def _speed_scale(clear: float, stop: float, slow: float) -> float:
    """1 when the way ahead is free beyond ``slow`` m, 0 below ``stop`` m, linear between (and 0 below 0.15 of
    the way: a linear slow-down alone would creep towards the obstacle for ever instead of stopping)."""
    if clear >= slow:
        return 1.0
    scale = (clear - stop) / (slow - stop)
    return scale if scale >= 0.15 else 0.0


def _get(values: tuple[float, ...], i: int) -> float:
    return float(values[i]) if len(values) > i else 0.0


def _pair(values: tuple[float, ...]) -> tuple[float, float]:
    return _get(values, 0), _get(values, 1)
