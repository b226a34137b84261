"""The follow module: finds a person in the laser scans and follows them at a set distance, through the avoid
module.

Reads ``follow/command`` (every command, in order), ``Localization/Pose``, ``Base/Drive/State``, ``Sick/Scan_mm``,
``Wrist/State`` and ``avoidance/status``; writes ``avoidance/command`` (velocity commands, cmd_flags 0, every step
while searching or following; one stop when following ends) and ``follow/status`` every step. The commands, the
status codes and the control law are described in :mod:`pluto.movement.follow.core`.

Each scan is placed by the pose at its own stamp and by the wrist's pan, so the people it shows land in the world
frame where they stood when it was taken, even while the robot turns; the robot's pose now, to which the person is
compared, is the newest localized pose brought up to now by the odometry (``Base/Drive/State``): the localized pose
comes a quarter of a second late, 15 cm at a walking pace (see :func:`pose_at`). The pose's age, not that of the
odometry, decides whether it is stale.

Freshness (docs/design.md, principle 8): the pose and the scans are read by the freshness contract
(:meth:`pluto.bus.StateReader.fresh`), with ``pose_timeout`` and ``scan_timeout`` as their readers' deadlines, and
the odometry with the interface table's: a stale pose (or odometry, heard before, gone stale: the pose cannot be
brought up to now) or scan stops the robot at once with avoid's halt (status -3 or -2), and following goes on when
they are fresh again. The commands to avoid while searching or following carry a lease of four of this module's
periods (renewed every step): a follow module killed mid-follow leaves avoid a command that lapses, and avoid stops
the robot (its element[0] 9); the stop that ends following holds until replaced.

Starting to follow also starts the avoid thread if it is stopped. cmd_flags -1 releases the robot: passed to avoid
(which stops) and the follow thread stops (element[0] = -10) until ``start_activity``.

When the simulated time jumps back (a new run) the module stops following, forgets its tracks, poses and the
commands not taken yet, and tells avoid to stop if it was following.

Following another robot: with ``target_robot`` set to a robot's name (``pluto run follow -p target_robot=pluto-2``),
the target is that robot, by its own published pose (``pluto/<target>/Localization/Pose``, in the map frame the two
robots share), not by a shape in the laser: a person or a third robot passing by is never taken for it. The robot
follows it along the trail it left, through the doors it took, keeping the distance along that trail
(:mod:`pluto.movement.follow.trail`); the commands, the statuses and the laser's guard of the strip ahead are the
same, and the status data's distance is the distance along the trail.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from pluto import msgs, names
from pluto.bus.config import check_robot_name
from pluto.errors import ConfigError, PlutoError
from pluto.geometry import compose, relative, wrap_angle
from pluto.movement.avoid.core import HALT, GotoStatus
from pluto.movement.commands import CommandQueue
from pluto.movement.follow.core import (
    RELEASE,
    START,
    STOP,
    THREAD_RUNNING,
    THREAD_STOPPED,
    FollowController,
    FollowInputs,
    FollowParams,
    FollowScan,
    SharedFollowParams,
    parse_distance,
)
from pluto.movement.follow.detect import scan_points
from pluto.movement.follow.trail import TargetPose, TrailController, TrailParams
from pluto.runtime.clock import OldRun
from pluto.runtime.module import Module
from pluto.runtime.ranges import Offset

__all__ = ["FollowModule", "FollowModuleParams"]

_HISTORY = 4.0
"""s of poses kept to place scans."""

_THREAD_STOPPED_AVOID = GotoStatus.THREAD_STOPPED
"""element[1] of ``avoidance/status`` while the avoid thread is stopped."""


class FollowModuleParams(FollowParams, kw_only=True, forbid_unknown_fields=True):
    """The person follower's tuning (:class:`~.core.FollowParams`; with ``target_robot`` the trail follower takes
    what it shares with it, :class:`~.core.SharedFollowParams`), and what the module adds.

    Attributes:
        laser_mount_x: forward offset of the wrist axis (and laser) from the robot centre, m.
        target_robot: "" follows a person found in the laser; a robot's name follows that robot along its trail, by
            its published pose (both robots localized in one map frame).
    """

    laser_mount_x: Offset = 0.25
    target_robot: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.target_robot:
            check_robot_name(self.target_robot, "target_robot ")


class FollowModule(Module[FollowModuleParams]):
    """Follows a person seen by the laser, or another robot along its trail, at a set distance, through avoid
    (``follow/...``)."""

    name: ClassVar[str] = "follow"
    description: ClassVar[str] = "follow a person found with the laser, or another robot along its trail, at a distance"
    provides: ClassVar[tuple[str, ...]] = (names.FOLLOW_STATUS,)
    requires: ClassVar[tuple[str, ...]] = ("avoid", "localization")
    Params = FollowModuleParams

    def on_configure(self) -> None:
        target = self.params.target_robot
        if target == self.bus.robot:
            raise ConfigError(f"target_robot {target!r} is this robot: a robot cannot follow itself")
        self.core: FollowController | TrailController = (
            TrailController(self.params.subset(TrailParams, shared=SharedFollowParams))
            if target
            else FollowController(self.params)
        )
        self.target_in = self.create_reader(names.LOCALIZATION_POSE, robot=target) if target else None
        self.bad_commands = 0
        self.bad_scans = 0
        self._data: list[float] = [0.0] * 6
        self.commands = CommandQueue()
        self._old_run = OldRun()
        self._poses: deque[Stamped] = deque()
        self._odometry: deque[Stamped] = deque()
        self._odometry_velocity = (0.0, 0.0)
        self._avoid_asked = -math.inf
        self._want_avoid = False
        self.status_out = self.create_publisher(names.FOLLOW_STATUS)
        self.avoid_out = self.create_publisher(names.AVOIDANCE_COMMAND)
        self.pose_in = self.create_reader(names.LOCALIZATION_POSE, deadline=self.params.pose_timeout)
        self.odometry_in = self.create_reader(names.BASE_DRIVE_STATE)
        self.scan_in = self.create_reader(names.SICK_SCAN_MM, deadline=self.params.scan_timeout)
        self.wrist_in = self.create_reader(names.WRIST_STATE)
        self.avoid_in = self.create_reader(names.AVOIDANCE_STATUS)
        self.create_subscription(names.FOLLOW_COMMAND, self.commands.put, msgs.ActuatorState, depth=64)

    def on_activate(self) -> None:
        self.commands.clear()

    def on_clock_jump(self, old: float, new: float) -> None:
        self.commands.clear()

    def on_deactivate(self) -> None:
        self.status_out.write(
            msgs.FVectorState(
                stamp=self.clock.now(), data=list(self._data), element=[int(THREAD_STOPPED), int(self.core.code)]
            )
        )

    def step(self, now: float) -> None:
        jumped_from = self.clock_jumped_back(now)
        pending = self.commands.take()
        if jumped_from is not None:
            self._restart(now, jumped_from)
        for command in pending:
            if self._old_run.holds(command.stamp, now):
                continue
            if command.cmd_flags == RELEASE:
                self.core.stop()
                self.avoid_out.write(msgs.ActuatorState(stamp=now, cmd_flags=RELEASE))
                self.stop_activity()
                return
            try:
                self._command(command, now)
            except ValueError as err:
                self.bad_commands += 1
                self.get_logger().warning("ignored command: %s", err)
        self._remember()
        if isinstance(self.core, TrailController):
            out = self.core.step(self._inputs(now), self._target(now), now)
        else:
            out = self.core.step(self._inputs(now), now)
        if out.velocity is not None:
            v, w = out.velocity
            # renewed every step while following: a command that lapses if this module dies; the last stop holds
            lease = names.STALE_PERIODS / self.params.rate_hz if self.core.active else 0.0
            self.avoid_out.write(
                msgs.ActuatorState(
                    stamp=now, cmd_flags=HALT if out.halt else 0, velocity=[float(v), float(w)], lease=lease
                )
            )
        if self._want_avoid:
            self._start_avoid()
        self._data = [float(v) for v in out.data]
        self.status_out.write(
            msgs.FVectorState(stamp=now, data=list(self._data), element=[int(THREAD_RUNNING), int(out.code)])
        )

    def _command(self, command: msgs.ActuatorState, now: float) -> None:
        """Carry out a start or stop command.

        Raises:
            ValueError: unknown cmd_flags, or a distance out of range.
        """
        if command.cmd_flags == START:
            distance = parse_distance(command.velocity, self.params.distance)
            self.core.start(distance, now)
            self._want_avoid = True
            whom = f"robot {self.params.target_robot} along its trail" if self.params.target_robot else "a person"
            self.get_logger().info("following %s at %.2f m", whom, distance)
        elif command.cmd_flags == STOP:
            self.core.stop()
        else:
            raise ValueError(f"follow cmd_flags must be 1 (start), 0 (stop) or -1 (release), got {command.cmd_flags}")

    def _start_avoid(self) -> None:
        """Start the avoid thread if its status says it is stopped (at most every 2 s)."""
        avoid = self.avoid_in.read()
        if avoid is None:
            return
        if len(avoid.element) < 2 or avoid.element[1] != _THREAD_STOPPED_AVOID:
            self._want_avoid = False
            return
        now = self.clock.now()
        if now - self._avoid_asked < 2.0:
            return
        self._avoid_asked = now
        try:
            self.bus.call("avoid/start_activity", None, timeout=1.0)
        except PlutoError as err:
            self.get_logger().warning("could not start the avoid thread: %s", err)

    def _restart(self, now: float, old: float) -> None:
        """The clock went back to ``now`` from ``old`` (s): stop following and forget the tracks and poses."""
        busy = self.core.active
        self.core = (
            TrailController(self.core.params)
            if isinstance(self.core, TrailController)
            else (FollowController(self.core.params))
        )
        self._old_run.jumped(old, now)
        self._poses.clear()
        self._odometry.clear()
        if busy:
            self.avoid_out.write(msgs.ActuatorState(stamp=now, cmd_flags=0, velocity=[0.0, 0.0]))
        self.get_logger().info("simulated time restarted (%.3f s -> %.3f s)", old, now)

    def _remember(self) -> None:
        pose = self.pose_in.read()
        if pose is not None and len(pose.pose) >= 4 and (not self._poses or pose.stamp > self._poses[-1][0]):
            self._poses.append((pose.stamp, pose.pose[0], pose.pose[1], pose.pose[3]))
        odometry = self.odometry_in.read()
        if odometry is not None and (not self._odometry or odometry.stamp > self._odometry[-1][0]):
            self._odometry.append((odometry.stamp, odometry.x, odometry.y, odometry.theta))
            self._odometry_velocity = (odometry.v, odometry.omega)
        for history in (self._poses, self._odometry):
            while len(history) > 2 and history[0][0] < history[-1][0] - _HISTORY:
                history.popleft()

    def _target(self, now: float) -> TargetPose | None:
        """The followed robot's newest pose (None before its first, or one of an old run)."""
        reader = self.target_in
        pose = reader.read() if reader is not None else None
        if pose is None or len(pose.pose) < 4 or self._old_run.holds(pose.stamp, now):
            return None
        return TargetPose(pose.stamp, pose.pose[0], pose.pose[1], pose.pose[3])

    def _inputs(self, now: float) -> FollowInputs:
        pose = None
        pose_stamp = -math.inf
        newest = self._poses[-1] if self._poses else None
        # by the freshness contract: a stale pose is none, and so is one the stale odometry cannot bring up to now
        odometry_stale = self.odometry_in.fresh(now) is None and self.odometry_in.read() is not None
        fresh = self.pose_in.fresh(now) is not None and not odometry_stale
        if fresh and newest is not None and not self._old_run.holds(newest[0], now):
            # the robot now: the newest localized pose, brought up to now by the odometry since
            pose = pose_at(self._poses, self._odometry, now, self._odometry_velocity)
            pose_stamp = newest[0]
        scan = None
        scan_msg = self.scan_in.fresh(now)
        if scan_msg is not None and not self._old_run.holds(scan_msg.stamp, now):
            wrist = self.wrist_in.read()
            pan = wrist.position[0] if wrist is not None and wrist.position else 0.0
            try:
                points, _ = scan_points(
                    np.asarray(scan_msg.ranges, dtype=float),
                    np.asarray(scan_msg.angles, dtype=float),
                    pan,
                    self.params.laser_mount_x,
                    scan_msg.max_range,
                )
            except ValueError as err:
                self.bad_scans += 1
                self.get_logger().warning("ignored scan: %s", err)
            else:
                placed = pose_at(self._poses, self._odometry, scan_msg.stamp, self._odometry_velocity)
                scan = FollowScan(scan_msg.stamp, points, (self.params.laser_mount_x, 0.0), placed)
        return FollowInputs(pose=pose, pose_stamp=pose_stamp, scan=scan)


Stamped = tuple[float, float, float, float]
"""(stamp s, x m, y m, θ rad)."""


def interpolate(history: Sequence[Stamped], stamp: float, reach: float) -> tuple[float, float, float] | None:
    """The pose at ``stamp`` (s), interpolated between the entries of ``history`` around it; beyond either end the
    end's pose if within ``reach`` s of it, else None (also for an empty history)."""
    if not history:
        return None
    stamps = [h[0] for h in history]
    i = bisect.bisect_right(stamps, stamp)
    if i == 0 or i == len(history):
        end = history[0] if i == 0 else history[-1]
        return (end[1], end[2], end[3]) if abs(stamp - end[0]) <= reach else None
    (t0, x0, y0, a0), (t1, x1, y1, a1) = history[i - 1], history[i]
    f = (stamp - t0) / (t1 - t0) if t1 > t0 else 0.0
    return x0 + f * (x1 - x0), y0 + f * (y1 - y0), a0 + f * wrap_angle(a1 - a0)


def pose_at(
    poses: Sequence[Stamped], odometry: Sequence[Stamped], stamp: float, odometry_velocity: tuple[float, float]
) -> tuple[float, float, float] | None:
    """The robot's pose (``Localization/Pose`` frame) at ``stamp`` (s).

    The localized poses come late (the localization waits for the inertial unit: a quarter of a second in the
    simulator), and the odometry sooner: the pose at ``stamp`` is the localized pose at or just before it, moved by
    what the odometry measured from there to ``stamp`` (beyond the newest odometry, at its velocity
    ``odometry_velocity`` = (v m/s, ω rad/s), for at most 0.5 s). Without odometry the localized poses are
    interpolated.

    Returns:
        (x m, y m, θ rad), or None without a localized pose within 0.5 s before ``stamp`` (or 0.25 s after it).
    """
    if not poses:
        return None
    stamps = [h[0] for h in poses]
    i = bisect.bisect_right(stamps, stamp) - 1
    if i < 0:
        return interpolate(poses, stamp, 0.25)
    base = poses[i]
    if stamp - base[0] > 0.5:
        return None
    start = interpolate(odometry, base[0], 0.1)
    end = interpolate(odometry, min(stamp, odometry[-1][0]) if odometry else stamp, 0.1)
    if start is None or end is None:
        return interpolate(poses, stamp, 0.25)
    dx, dy, dth = relative(start, end)
    ahead = stamp - odometry[-1][0]
    if ahead > 0.0:
        v, w = odometry_velocity
        dx, dy, dth = compose((dx, dy, dth), (v * ahead, 0.0, w * ahead))
    return compose((base[1], base[2], base[3]), (dx, dy, dth))
