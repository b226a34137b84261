"""The motion module (the original's motionModule + motion_control, docs/design.md): moveto by ray following, explore,
investigate and the rectangle, on top of the avoid module; active scanning with the wrist.

Reads ``motion/command`` (every command, in order), ``avoidance/status``, ``Localization/Pose``, ``Sick/Scan_mm``
and ``Wrist/State``; writes ``avoidance/command`` (the commands passed through, and those of its behaviours),
``Wrist/Command`` (to look to the side it is about to turn to and at the ground) and ``motion/status`` every step.
The status codes are listed in :mod:`pluto.movement.motion.core`.

Starting the motion thread (``start_activity``) also starts the avoid thread; stopping it does not stop avoid.
cmd_flags -1 releases the robot: passed to avoid (which stops), and the motion thread stops (element[3] = -10).

An explore command (44) that arrives before the first pose (its home) waits for it, up to 4 s.

The pose, the scans and avoid's status are read by the freshness contract (:meth:`pluto.bus.StateReader.fresh`,
the interface table's deadlines): a stale pose is no pose, and a behaviour stops the robot at once and waits for a
stale input (element[3] 7 the scans, 8 the pose, 9 avoid's status), then goes on by itself; the goal is reported
reached only on a fresh pose certain enough (its position standard deviation, :func:`pose_std`, at most a third of
``goal_tolerance``). See :mod:`pluto.movement.motion.core`.

Each scan is placed by the pose and the wrist at its own stamp (kept for the last few seconds), so a scan taken
while the robot turned or the wrist moved lands where it was taken, and scans taken while looking at the ground are
not mistaken for obstacles.

When the simulated time jumps back (a new run) the module drops what it was doing and the commands not taken yet,
and tells avoid to stop if it had a behaviour going.

Restarts: the module saves its job as it goes (:mod:`pluto.runtime.persist`: the behaviour in progress, the one
stopped and waiting for a resume, the rectangle). Started again by the supervisor after a crash, it continues that
job at its first step (see :mod:`pluto.movement.motion.core`): a moveto goes on to its goal. ``motion/status``
element[4] says so: 1 after a restart that continued the job in progress, -1 after a restart that could not (no
usable saved state, or a job that cannot be continued; element[2] is then -3, never a status that looks like the
end of a job), 0 otherwise; a new command sets it back to 0. The log says what was continued or why not.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any, ClassVar, TypeVar

import numpy as np

from pluto import msgs, names
from pluto.errors import PlutoError
from pluto.movement.avoid.module import pose_std
from pluto.movement.commands import CommandQueue
from pluto.movement.motion.core import (
    EXPLORE,
    RELEASE,
    RESTART_LOST,
    THREAD_STOPPED,
    AvoidOrder,
    MotionController,
    MotionInputs,
    MotionOutput,
    MotionParams,
    MotionState,
    Scan,
)
from pluto.runtime.clock import OldRun
from pluto.runtime.module import Module
from pluto.runtime.persist import Continuation, clock_run
from pluto.runtime.ranges import Offset, TurnAccel, TurnRate

__all__ = ["MotionModule", "MotionModuleParams"]

_T = TypeVar("_T", bound=tuple[Any, ...])

_POSE_WAIT = 4.0
"""s an explore command waits for the first pose (its home) before it is refused."""

_HISTORY = 4.0
"""s of poses and wrist states kept to place scans."""


class MotionModuleParams(MotionParams, kw_only=True, forbid_unknown_fields=True):
    """The controller's tuning (:class:`~.core.MotionParams`), and what the module adds.

    Attributes:
        laser_mount_x: forward offset of the wrist axis (and laser) from the robot centre, m.
        has_arm: an arm is mounted (investigate asks it to unfold on ``Arm/Command``).
        wrist_speed, wrist_accel: of the wrist moves the module commands, rad/s, rad/s².
    """

    laser_mount_x: Offset = 0.25
    has_arm: bool = False
    wrist_speed: TurnRate = 1.5
    wrist_accel: TurnAccel = 4.0


class MotionModule(Module[MotionModuleParams]):
    """Moveto, explore and investigate on top of avoid (``motion/...``)."""

    name: ClassVar[str] = "motion"
    description: ClassVar[str] = "moveto by ray following, explore a rectangle, investigate an object"
    provides: ClassVar[tuple[str, ...]] = (names.MOTION_STATUS,)
    requires: ClassVar[tuple[str, ...]] = ("avoid", "localization")
    Params = MotionModuleParams

    def on_configure(self) -> None:
        self.core = MotionController(self.params)
        self.bad_commands = 0
        self.commands = CommandQueue()
        self._old_run = OldRun()
        self._poses: deque[tuple[float, tuple[float, float, float]]] = deque()
        self._wrists: deque[tuple[float, float, float]] = deque()
        self._want_avoid = False
        self._waited = 0
        self._avoid_asked = -float("inf")
        self._held: AvoidOrder | None = None  # the command to avoid renewed at every step while a behaviour runs
        self.status_out = self.create_publisher(names.MOTION_STATUS)
        self.avoid_out = self.create_publisher(names.AVOIDANCE_COMMAND)
        self.wrist_out = self.create_publisher(names.WRIST_COMMAND)
        self.arm_out = self.create_publisher(names.ARM_COMMAND) if self.params.has_arm else None
        self.pose_in = self.create_reader(names.LOCALIZATION_POSE)
        self.avoid_in = self.create_reader(names.AVOIDANCE_STATUS)
        self.scan_in = self.create_reader(names.SICK_SCAN_MM)
        self.wrist_in = self.create_reader(names.WRIST_STATE)
        self.create_subscription(names.MOTION_COMMAND, self.commands.put, msgs.ActuatorState, depth=64)
        self.continuation = Continuation.of(self, MotionState)
        self._resume = self.continuation.resume  # at the first step, when the clock's time and run are known
        self.continued = 0  # element[4]: 1 the job went on after a restart, -1 it could not
        self._saved_at: float | None = None  # the last step's time, s

    def on_activate(self) -> None:
        self.commands.clear()
        self._want_avoid = True  # starting motion starts avoid (at the first step that sees it stopped)

    def on_clock_jump(self, old: float, new: float) -> None:
        self.commands.clear()

    def on_deactivate(self) -> None:
        avoid = self.avoid_in.read()
        data = list(avoid.data[:2]) if avoid is not None else [0.0, 0.0]
        element = [*(avoid.element[:2] if avoid is not None else []), 0, 0][:2]
        self.status_out.write(
            msgs.FVectorState(
                stamp=self.clock.now(), data=data, element=[*element, int(self.core.moveto_status), int(THREAD_STOPPED)]
            )
        )

    def step(self, now: float) -> None:
        jumped_from = self.clock_jumped_back(now)
        pending = self.commands.take()
        if jumped_from is not None:
            self._restart(now, jumped_from)
        if self._resume:
            self._resume = False
            self._continue(now)
        if pending:
            self.continued = 0  # a new command: what the restart did is no longer the news
        self._remember(now)
        inputs = self._inputs(now)
        if self._apply(pending, inputs, now):
            return  # released
        out = self.core.step(inputs, now)
        self._write_avoid(out, now)
        if out.wrist is not None:
            self.wrist_out.write(self._wrist_command(*out.wrist))
        if out.unfold_arm and self.arm_out is not None:
            self.unfold_arm(now)
        if out.start_avoid or (self._want_avoid and inputs.avoid_element[1] == THREAD_STOPPED):
            self._start_avoid(now)
        elif self.avoid_in.read() is not None:
            self._want_avoid = False
        self.status_out.write(
            msgs.FVectorState(
                stamp=now, data=[float(v) for v in out.data], element=[*(int(e) for e in out.element), self.continued]
            )
        )
        self._saved_at = now
        # A command taken is saved at once: restarted before the next periodic save, the module would go back to
        # the job before it (and could tell that job's end, "at the goal" of the goal before, as this one's).
        self.continuation.save_due(self.core.snapshot, now, clock_run(self.clock), now=bool(pending))

    def _apply(self, pending: list[msgs.ActuatorState], inputs: MotionInputs, now: float) -> bool:
        """Give the controller the commands that came (an explore waits a little for the first pose, its home);
        True if one released the robot (avoid told, the wrist home, the module stopped)."""
        waiting: list[msgs.ActuatorState] = []
        for command in pending:
            if self._old_run.holds(command.stamp, now):
                continue
            if inputs.pose is None and command.cmd_flags == EXPLORE and self._waited < _POSE_WAIT * self.params.rate_hz:
                waiting.append(command)  # its home is the pose: wait for the first one
                continue
            try:
                self.core.command(
                    command.cmd_flags,
                    tuple(command.position),
                    tuple(command.velocity),
                    tuple(command.force),
                    inputs.pose,
                    now,
                )
            except ValueError as err:
                self.bad_commands += 1
                self.get_logger().warning("ignored command: %s", err)
                continue
            if command.cmd_flags == RELEASE:
                self.avoid_out.write(msgs.ActuatorState(stamp=now, cmd_flags=RELEASE))
                self.wrist_out.write(self._wrist_command(0.0, 0.0))
                self.stop_activity()
                return True
        self._waited = self._waited + 1 if waiting else 0
        if waiting:
            self.commands.put_back(waiting)
        return False

    def _write_avoid(self, out: MotionOutput, now: float) -> None:
        """Write the step's commands to avoid. While a behaviour runs, its command to avoid is renewed every step with
        a lease: killed mid-moveto, this module leaves avoid a command that lapses, and avoid stops the robot.
        Anything else is given once."""
        lease = names.STALE_PERIODS / self.params.rate_hz if self.core.job is not None else 0.0
        orders = list(out.avoid)
        if not orders and lease > 0.0 and self._held is not None:
            orders = [self._held]
        for order in orders:
            self.avoid_out.write(
                msgs.ActuatorState(
                    stamp=now,
                    cmd_flags=order.cmd_flags,
                    position=[float(v) for v in order.position],
                    velocity=[float(v) for v in order.velocity],
                    force=[float(v) for v in order.force],
                    lease=lease,
                )
            )
        if lease == 0.0:
            self._held = None
        elif orders and orders[-1].cmd_flags != RELEASE:
            self._held = orders[-1]

    # -- continuing after a restart ---------------------------------------------------------------------------

    def _continue(self, now: float) -> None:
        """A restart: continue the job the crashed instance saved, or say in the status that it cannot."""
        log = self.get_logger()
        loaded = self.continuation.load(now, clock_run(self.clock))
        if loaded is None:
            self.core.moveto_status = RESTART_LOST
            self.continued = -1
            log.warning("restarted without a saved job: a job in progress is lost (element[2] = %d)", RESTART_LOST)
            return
        state, stamp = loaded
        try:
            self.core.resume(state, now)
        except ValueError as err:
            self.continuation.corrupt += 1
            self.core.moveto_status = RESTART_LOST
            self.continued = -1
            log.error(
                "restarted, but the saved job cannot be continued (%s): it is lost (element[2] = %d)", err, RESTART_LOST
            )
            return
        job = state.job
        if job is None:
            log.warning(
                "restarted: no job was in progress at t=%.3f s%s",
                stamp,
                f"; the stopped {state.stopped.kind} waits for a resume" if state.stopped is not None else "",
            )
            return
        self.continued = 1
        self._want_avoid = True
        what = f" to ({job.goal[0]:.2f}, {job.goal[1]:.2f})" if job.goal is not None else ""
        if job.kind == "explore":
            r = state.rect
            what = f" of the rectangle {2 * r[3]:.2f} x {r[4]:.2f} m from home ({r[0]:.2f}, {r[1]:.2f})"
        log.warning("restarted: the %s%s saved at t=%.3f s goes on", job.kind, what, stamp)

    def on_shutdown(self) -> None:
        core = getattr(self, "core", None)  # None if the configuration failed
        stamp = getattr(self, "_saved_at", None)  # None before the first step
        if core is not None and stamp is not None:
            self.continuation.save(core.snapshot(), stamp, clock_run(self.clock))

    def unfold_arm(self, now: float) -> None:
        """The investigate's arm step: by default a no-op hook (override to drive a real arm's unfold motion)."""
        self.get_logger().info("investigate: the arm would unfold now")

    def _start_avoid(self, now: float) -> None:
        if now - self._avoid_asked < 2.0:
            return
        self._avoid_asked = now
        try:
            self.bus.call("avoid/start_activity", None, timeout=1.0)
        except PlutoError as err:
            self.get_logger().warning("could not start the avoid thread: %s", err)

    def _wrist_command(self, pan: float, tilt: float) -> msgs.ActuatorState:
        p = self.params
        return msgs.ActuatorState(
            position=[float(pan), float(tilt)],
            velocity=[p.wrist_speed, p.wrist_speed],
            force=[p.wrist_accel, p.wrist_accel],
        )

    def _restart(self, now: float, old: float) -> None:
        """The clock went back to ``now`` from ``old`` (s): drop the behaviour and the histories."""
        busy = self.core.job is not None
        self.core = MotionController(self.core.params)
        self._old_run.jumped(old, now)
        self._poses.clear()
        self._wrists.clear()
        if busy:
            self.avoid_out.write(msgs.ActuatorState(stamp=now, cmd_flags=20, velocity=[0.0, 0.0]))
        self.get_logger().info("simulated time restarted (%.3f s -> %.3f s)", old, now)

    def _remember(self, now: float) -> None:
        pose = self.pose_in.read()
        if pose is not None and (not self._poses or pose.stamp > self._poses[-1][0]):
            self._poses.append((pose.stamp, (pose.pose[0], pose.pose[1], pose.pose[3])))
        wrist = self.wrist_in.read()
        if wrist is not None and len(wrist.position) >= 2 and (not self._wrists or wrist.stamp > self._wrists[-1][0]):
            self._wrists.append((wrist.stamp, wrist.position[0], wrist.position[1]))
        for history in (self._poses, self._wrists):
            while len(history) > 2 and history[0][0] < now - _HISTORY:
                history.popleft()

    def _inputs(self, now: float) -> MotionInputs:
        # by the freshness contract: a stale pose is none; a stale scan or avoid status, heard before, is waited for
        pose_msg = self.pose_in.fresh(now)
        pose = (pose_msg.pose[0], pose_msg.pose[1], pose_msg.pose[3]) if pose_msg is not None else None
        wrist_msg = self.wrist_in.read()
        wrist = (
            (wrist_msg.position[0], wrist_msg.position[1])
            if wrist_msg is not None and len(wrist_msg.position) >= 2
            else None
        )
        scan = None
        scan_msg = self.scan_in.fresh(now)
        scan_stale = scan_msg is None and self.scan_in.read() is not None
        if scan_msg is not None and not self._old_run.holds(scan_msg.stamp, now):
            at = _at(self._wrists, scan_msg.stamp)
            pan, tilt = (at[1], at[2]) if at is not None else (wrist if wrist is not None else (0.0, 0.0))
            scan_pose = _at(self._poses, scan_msg.stamp)
            scan = Scan(
                stamp=scan_msg.stamp,
                ranges=np.asarray(scan_msg.ranges, dtype=float),
                angles=np.asarray(scan_msg.angles, dtype=float),
                max_range=scan_msg.max_range,
                pan=pan,
                tilt=tilt,
                mount_x=self.params.laser_mount_x,
                pose=scan_pose[1] if scan_pose is not None else None,
            )
        avoid = self.avoid_in.fresh(now)
        last = self.avoid_in.read()
        stopped = last is not None and len(last.element) >= 2 and last.element[1] == THREAD_STOPPED
        if avoid is None and stopped:
            avoid = last  # a stopped avoid thread says so once: known, not stale (it is started again)
        avoid_stale = avoid is None and last is not None
        data = (avoid.data[0], avoid.data[1]) if avoid is not None and len(avoid.data) >= 2 else (0.0, 0.0)
        element = (avoid.element[0], avoid.element[1]) if avoid is not None and len(avoid.element) >= 2 else (0, 0)
        return MotionInputs(
            pose=pose,
            scan=scan,
            wrist=wrist,
            avoid_data=data,
            avoid_element=element,
            has_arm=self.params.has_arm,
            pose_std=pose_std(pose_msg) if pose_msg is not None else 0.0,
            scan_stale=scan_stale,
            avoid_stale=avoid_stale,
        )


def _at(history: deque[_T], stamp: float) -> _T | None:
    """The last entry stamped at or before ``stamp`` (the first if all are later), or None if empty."""
    if not history:
        return None
    stamps = [h[0] for h in history]
    i = bisect.bisect_right(stamps, stamp) - 1
    return history[max(i, 0)]
