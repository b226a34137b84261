"""The avoid module (the original's avoidModule + avoid_control, docs/design.md): goto with obstacle avoidance, wall
following and laser protection on top of the drive module.

Reads ``avoidance/command`` (every command, in order), ``drive/status``, ``Localization/Pose``, ``Base/Drive/State``
(the drive's odometry frame, for heading commands), ``Sick/Scan_mm``, ``Base/Sonar`` and ``Wrist/State``; writes
``drive/command`` every step while it has a command, ``avoidance/status`` every step, and ``Wrist/Command`` to pan
the laser left for wall following (and back to 0 afterwards). cmd_flags -1 releases the robot: the drive is told to
stop and the avoid thread stops (status element[1] = -10) until ``start_activity``. The control law is in
:mod:`pluto.movement.avoid.core`.

Every input is read by the freshness contract (:meth:`pluto.bus.StateReader.fresh`, the interface table's deadlines):
a stale one is absent. With laser avoidance on, a missing or stale scan (or a wrist gone silent, so that the scan
points nowhere known) stops the robot at once like a scanner fault (element[0] = 7); a goto or heading command stops
at once on a stale pose or odometry (8), and a command with a lease on its commander's silence (9): motion and
follow renew theirs every step, so a commander killed mid-goto stops the robot; a command given once (the command
line) holds until replaced. The drive's commands carry a lease of four of this module's periods, so the drive stops
at once if this module dies. Sonar avoidance (A = 1 or 3) also turns on the drive's sonar protection, which caps
the speed towards any return within ±90° of the heading: in a 2 m doorway it can hold the robot still, so a goto
through doorways goes best with laser avoidance alone (A = 2).

When the simulated time jumps back (a new run, a replay started again) the module releases what it was doing: the
command in force and the commands not yet taken are dropped, the drive is told to stop and the wrist goes back to 0
if the module panned it; its control step keeps running, idle. Until the new run reaches the old run's time, scans,
sonar scans and commands stamped in the old run's future are not used.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from pluto import msgs, names
from pluto.movement.avoid.core import (
    RELEASE,
    THREAD_STOPPED,
    AvoidCommand,
    AvoidController,
    AvoidInputs,
    AvoidParams,
    laser_points,
    parse_command,
    sonar_points,
)
from pluto.movement.commands import CommandQueue
from pluto.runtime.clock import OldRun
from pluto.runtime.module import Module
from pluto.runtime.ranges import TurnAccel, TurnRate

__all__ = ["AvoidModule", "AvoidModuleParams", "pose_std"]


def pose_std(pose: msgs.PoseEstimate) -> float:
    """The position uncertainty of ``pose``, m: the standard deviation along the worst axis of its (x, y) covariance
    (inf for a covariance that is not one)."""
    c = pose.covariance
    if len(c) < 5:
        return math.inf
    xx, xy, yy = c[0], 0.5 * (c[1] + c[3]), c[4]
    if not all(math.isfinite(v) for v in (xx, xy, yy)):
        return math.inf
    worst = 0.5 * (xx + yy) + math.sqrt(max(0.0, 0.25 * (xx - yy) ** 2 + xy * xy))
    return math.sqrt(max(0.0, worst))


class AvoidModuleParams(AvoidParams, kw_only=True, forbid_unknown_fields=True):
    """The controller's tuning (:class:`~.core.AvoidParams`), and what the module adds.

    Attributes:
        wrist_speed, wrist_accel: of the wrist moves the module commands, rad/s, rad/s².
    """

    wrist_speed: TurnRate = 1.0
    wrist_accel: TurnAccel = 2.0


class AvoidModule(Module[AvoidModuleParams]):
    """Goto with vector-summation avoidance, wall following and laser protection (``avoidance/...``)."""

    name: ClassVar[str] = "avoid"
    description: ClassVar[str] = "goto with obstacle avoidance, wall following, laser protection"
    provides: ClassVar[tuple[str, ...]] = (names.AVOIDANCE_STATUS,)
    # The controller reads its tuning at each step, the wrist moves read theirs when sent: `pluto param set avoid
    # goal_tolerance 0.5` applies to the goto in progress.
    dynamic_params: ClassVar[tuple[str, ...]] = (
        "rate_hz",
        "robot_radius",
        "laser_mount_x",
        "influence",
        "stop_distance",
        "slow_distance",
        "goal_tolerance",
        "stuck_time",
        "progress_time",
        "wall_distance",
        "wall_speed",
        "wall_pan",
        "wrist_speed",
        "wrist_accel",
    )

    def on_parameters_changed(self, old: AvoidModuleParams, new: AvoidModuleParams) -> None:
        self.core.params = new

    requires: ClassVar[tuple[str, ...]] = ("drive", "localization")
    Params = AvoidModuleParams

    def on_configure(self) -> None:
        p = self.params
        self.core = AvoidController(p)
        self.bad_commands = 0
        self.commands = CommandQueue()
        self._pan_written: float | None = None
        self._old_run = OldRun()
        self.status_out = self.create_publisher(names.AVOIDANCE_STATUS)
        self.drive_out = self.create_publisher(names.DRIVE_COMMAND)
        self.wrist_out = self.create_publisher(names.WRIST_COMMAND)
        self.pose_in = self.create_reader(names.LOCALIZATION_POSE)
        self.odometry_in = self.create_reader(names.BASE_DRIVE_STATE)
        self.drive_in = self.create_reader(names.DRIVE_STATUS)
        self.scan_in = self.create_reader(names.SICK_SCAN_MM)
        self.sonar_in = self.create_reader(names.BASE_SONAR)
        self.wrist_in = self.create_reader(names.WRIST_STATE)
        self.create_subscription(names.AVOIDANCE_COMMAND, self.commands.put, msgs.ActuatorState, depth=64)

    def on_activate(self) -> None:
        self.commands.clear()
        self.core.current = None

    def on_clock_jump(self, old: float, new: float) -> None:
        # On a bus thread, or another module's: the commands not taken yet go now, the rest at the next step.
        self.commands.clear()

    def _restart(self, now: float, old: float) -> None:
        """The clock went back to ``now`` from ``old`` (s): release the command in force, stay idle."""
        released = self.core.current is not None
        self.core = AvoidController(self.core.params)
        self._old_run.jumped(old, now)
        if released:
            self.drive_out.write(msgs.ActuatorState(stamp=now, cmd_flags=0, velocity=[0.0, 0.0]))
            self._command_wrist(None)
        self.get_logger().info(
            "simulated time restarted (%.3f s -> %.3f s): %s",
            old,
            now,
            "the command in force is released" if released else "no command was in force",
        )

    def _from_old_run(self, stamp: float, now: float) -> bool:
        """``stamp`` is in the old run's future: the clock went back, and the new run has not reached it yet."""
        return self._old_run.holds(stamp, now)

    def on_deactivate(self) -> None:
        if self.core.current is not None:  # a stop given once: the drive does not wait for a renewal
            self.drive_out.write(msgs.ActuatorState(stamp=self.clock.now(), cmd_flags=0, velocity=[0.0, 0.0]))
        drive = self.drive_in.read()
        data = list(drive.data[:2]) if drive is not None else [0.0, 0.0]
        code = drive.element[0] if drive is not None and drive.element else 0
        self.status_out.write(
            msgs.FVectorState(stamp=self.clock.now(), data=data, element=[int(code), int(THREAD_STOPPED)])
        )

    def step(self, now: float) -> None:
        jumped_from = self.clock_jumped_back(now)
        pending = self.commands.take()
        if jumped_from is not None:
            self._restart(now, jumped_from)
        for command in pending:
            if self._from_old_run(command.stamp, now):
                continue
            try:
                cmd = parse_command(command.cmd_flags, command.position, command.velocity, command.force)
            except ValueError as err:
                self.bad_commands += 1
                self.get_logger().warning("ignored command: %s", err)
                continue
            if command.lease > 0.0 and cmd == self.core.current:
                self.core.renew(now)  # the commander renews the command in force: it goes on as it was
                continue
            self.core.command(cmd, now, command.lease)
            if cmd.mode == RELEASE:
                self._release(now)
                return
        out = self.core.step(self._inputs(now), now)
        if out.drive_flags is not None:
            # renewed every step: the drive stops at once if this module goes silent
            self.drive_out.write(
                msgs.ActuatorState(
                    stamp=now,
                    cmd_flags=out.drive_flags,
                    position=list(out.drive_position),
                    velocity=list(out.drive_velocity),
                    lease=names.STALE_PERIODS / self.params.rate_hz,
                )
            )
        self._command_wrist(out.wrist_pan)
        self.status_out.write(msgs.FVectorState(stamp=now, data=list(out.data), element=[int(e) for e in out.element]))

    def _release(self, now: float) -> None:
        """Stop the robot and the avoid thread (cmd_flags -1)."""
        self.drive_out.write(msgs.ActuatorState(stamp=now, cmd_flags=0, velocity=[0.0, 0.0]))
        self._command_wrist(None)
        self.stop_activity()

    def _command_wrist(self, pan: float | None) -> None:
        """Pan the wrist to ``pan`` rad, or back to 0 if this module panned it before (None)."""
        p = self.params
        target = pan if pan is not None else (0.0 if self._pan_written not in (None, 0.0) else None)
        if target is None or target == self._pan_written:
            return
        self.wrist_out.write(
            msgs.ActuatorState(
                position=[target, 0.0], velocity=[p.wrist_speed, p.wrist_speed], force=[p.wrist_accel, p.wrist_accel]
            )
        )
        self._pan_written = target

    def _inputs(self, now: float) -> AvoidInputs:
        p = self.core.params
        # every input by the freshness contract: a stale one is absent
        pose_msg = self.pose_in.fresh(now)
        pose = (pose_msg.pose[0], pose_msg.pose[1], pose_msg.pose[3]) if pose_msg is not None else None
        odometry = self.odometry_in.fresh(now)
        wrist = self.wrist_in.fresh(now)
        pan = wrist.position[0] if wrist is not None and wrist.position else 0.0
        laser = None
        # the wrist went silent: the laser points nowhere known
        fault = wrist is None and self.wrist_in.read() is not None
        scan = self.scan_in.fresh(now)
        if scan is not None and not fault and not self._from_old_run(scan.stamp, now):
            ranges = np.asarray(scan.ranges, dtype=float)
            fault = bool(len(ranges)) and bool(np.all(ranges < 0.0))
            laser = laser_points(ranges, np.asarray(scan.angles, dtype=float), pan, p.laser_mount_x, scan.max_range)
        sonar = None
        sonar_msg = self.sonar_in.fresh(now)
        if sonar_msg is not None and not self._from_old_run(sonar_msg.stamp, now):
            sonar = sonar_points(
                np.asarray(sonar_msg.ranges, dtype=float),
                np.asarray(sonar_msg.angles, dtype=float),
                sonar_msg.max_range,
                p.robot_radius,
            )
        drive = self.drive_in.fresh(now)
        data = tuple(drive.data[:2]) if drive is not None else (0.0, 0.0)
        code = drive.element[0] if drive is not None and drive.element else 0
        return AvoidInputs(
            pose_std=pose_std(pose_msg) if pose_msg is not None else 0.0,
            pose=pose,
            odometry_theta=odometry.theta if odometry is not None else None,
            laser=laser,
            laser_fault=fault,
            sonar=sonar,
            drive_data=data,
            drive_code=code,
        )

    @property
    def command_in_force(self) -> AvoidCommand | None:
        """The command being carried out (None when idle or released)."""
        return self.core.current
