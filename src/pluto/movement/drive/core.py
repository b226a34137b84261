"""The drive's control law, with no I/O: from a command and the base's sensors to the velocities sent to the base.

Strategy: the original drive (docs/design.md, "drive") stacks a few simple rules, applied in this order every step:

1. the *target* comes from the newest command: (v, ω) for ``cmd_flags`` 0/10, or the heading regulator for 1/11
   (turn towards ``position[1]`` with ω = gain·error, capped so the turn can still be braked in time, while
   ``velocity[0]`` is scaled by cos(error) so the robot turns before it drives);
2. a commander silent for ``timeout`` s makes the target zero (status -1);
3. a stale input stops the robot at once, without the acceleration ramp (status -2), until it is fresh again:
   the command's lease ran out (a commander that renews its command every step and went silent:
   ``ActuatorState.lease``), the commander halts the robot (``cmd_flags`` 2 or 12: an input it steers by went
   stale), the odometry a heading command needs is stale (the module passes a stale value as None), or the base,
   heard from before, has gone silent (its odometry stale: nothing tells what the base is doing);
4. speeds are capped to ``max_speed`` / ``max_turn_rate`` and changes to ``max_accel`` / ``max_turn_accel``;
5. safety clamps come last and may brake harder than the acceleration limit (they are stops, never speed-ups):
   with sonar protection (+10) the linear speed towards the nearest return is capped to a ramp that reaches zero at
   ``stop_distance`` (status 3, 4 or 5 by sector); a pressed bumper cancels the command and stops the robot
   (status 1 or 2); only motion away from the pressed bumper is allowed, without turning.

Sonar ranges are measured from the body's surface; a return "ahead" has |bearing| < 90° and one "behind"
|bearing| > 90°. The front sector is |bearing| < 60°, the back sector |bearing| > 120°, the sides the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Annotated

from pluto import msgs
from pluto.geometry import wrap_angle
from pluto.runtime.params import ModuleParams, Params
from pluto.runtime.ranges import Accel, CommandTimeout, Speed, TurnAccel, TurnRate, between

__all__ = [
    "HALT_FLAGS",
    "DriveController",
    "DriveOutput",
    "DriveParams",
    "DriveStatus",
    "OdometryCalibration",
    "calibrate_odometry",
    "sonar_sector",
]


HALT_FLAGS = (2, 12)
"""``cmd_flags`` of a halt: stop at once, without the acceleration ramp (status -2); a commander sends it when an input
it steers by went stale, and renews it while the input stays stale."""


class DriveStatus(IntEnum):
    """``element[0]`` of ``drive/status``."""

    NORMAL = 0
    TIMEOUT = -1
    STALE = -2
    """Stopped at once for a stale input: the command's lease ran out, the commander halted the robot (cmd_flags 2),
    or the odometry of a heading command is stale; the robot drives on when the input is fresh again."""
    STOPPED = -10
    FRONT_BUMPER = 1
    BACK_BUMPER = 2
    SONAR_FRONT = 3
    SONAR_BACK = 4
    SONAR_SIDES = 5


class DriveParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Limits and gains of the drive (the drive module's parameters derive from them: :mod:`pluto.runtime.params`).

    Attributes:
        max_speed: largest linear speed commanded, m/s.
        max_turn_rate: largest angular speed commanded, rad/s.
        max_accel: largest linear acceleration, m/s² (safety stops may brake harder).
        max_turn_accel: largest angular acceleration, rad/s² (safety stops may brake harder).
        timeout: s without a new command after which the drive stops (status -1).
        slow_distance: sonar range below which the robot slows down, m from the body's surface.
        stop_distance: sonar range below which the robot does not drive towards the return, m.
        heading_gain: ω per rad of heading error in the heading regulator, 1/s.
        stop_hysteresis: once stopped by the sonar, the robot drives that way again only when the nearest return
            is this much farther than ``stop_distance``, m (noisy ranges around the stop distance must not make it
            creep on).
        max_dt: longest step the acceleration limit integrates over, s (a stalled clock must not let the speed
            jump).

    Raises:
        ValueError: a number out of its range, or ``slow_distance`` < ``stop_distance``.
    """

    max_speed: Speed = 1.0
    max_turn_rate: TurnRate = 1.5
    max_accel: Accel = 0.8
    max_turn_accel: TurnAccel = 2.0
    timeout: CommandTimeout = 4.0
    slow_distance: Annotated[float, between(0.0, 10.0)] = 1.0
    stop_distance: Annotated[float, between(0.0, 10.0)] = 0.4
    heading_gain: Annotated[float, between(0.0, 20.0, open_low=True)] = 2.0
    stop_hysteresis: Annotated[float, between(0.0, 5.0)] = 0.15
    max_dt: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.25

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.slow_distance < self.stop_distance:
            raise ValueError(f"slow_distance ({self.slow_distance}) must be >= stop_distance ({self.stop_distance})")


class OdometryCalibration(Params, kw_only=True, forbid_unknown_fields=True):
    """Scale factors of the base's odometry (true = scale · raw).

    Attributes:
        distance_scale: factor on distances and linear velocity, no unit.
        heading_scale: factor on the heading and the angular velocity, no unit.
    """

    distance_scale: Annotated[float, between(0.5, 2.0)] = 1.0
    heading_scale: Annotated[float, between(0.5, 2.0)] = 1.0


@dataclass(frozen=True)
class DriveOutput:
    """What the drive does in one step.

    Attributes:
        v: linear velocity sent to the base, m/s.
        w: angular velocity sent to the base, rad/s.
        status_code: ``element[0]`` of the status (a :class:`DriveStatus` value).
        data: ``data[0..1]`` of the status: (v, w), m/s and rad/s.
    """

    v: float
    w: float
    status_code: int
    data: tuple[float, float]


def calibrate_odometry(odometry: msgs.Odometry, calibration: OdometryCalibration) -> msgs.Odometry:
    """The odometry with the calibration applied (x, y, v scaled by distance_scale; θ, ω by heading_scale)."""
    d, h = calibration.distance_scale, calibration.heading_scale
    return msgs.Odometry(
        stamp=odometry.stamp,
        x=odometry.x * d,
        y=odometry.y * d,
        theta=odometry.theta * h,
        v=odometry.v * d,
        omega=odometry.omega * h,
    )


def sonar_sector(bearing: float) -> DriveStatus:
    """The status code of a return at ``bearing`` (rad, robot frame): front, back or sides."""
    b = abs(wrap_angle(bearing))
    if b < math.radians(60.0):
        return DriveStatus.SONAR_FRONT
    if b > math.radians(120.0):
        return DriveStatus.SONAR_BACK
    return DriveStatus.SONAR_SIDES


def _finite(value: float, default: float = 0.0) -> float:
    return value if math.isfinite(value) else default


def _toward(current: float, target: float, step: float) -> float:
    """``current`` moved towards ``target`` by at most ``step``."""
    return current + max(-step, min(step, target - current))


class DriveController:
    """The drive's control law.

    Call :meth:`step` at the control rate with the command received since the previous step (None if none came)
    and the newest sensor values.

    Args:
        params: limits and gains.
        calibration: odometry calibration applied to the odometry before the heading regulator uses it.
    """

    def __init__(self, params: DriveParams | None = None, calibration: OdometryCalibration | None = None) -> None:
        self.params = params or DriveParams()
        self.calibration = calibration or OdometryCalibration()
        self._command: msgs.ActuatorState | None = None
        self._command_time: float | None = None
        self._last_time: float | None = None
        self._v = 0.0
        self._w = 0.0
        self._bumped = DriveStatus.NORMAL
        self._sonar_stopped = {1.0: False, -1.0: False}  # stopped by the sonar going forward, backward

    @property
    def velocity(self) -> tuple[float, float]:
        """The velocities commanded at the last step, (m/s, rad/s)."""
        return self._v, self._w

    def reset(self) -> None:
        """Forget the command and the speeds (after the control step was stopped)."""
        self._command = None
        self._command_time = None
        self._last_time = None
        self._v = self._w = 0.0
        self._bumped = DriveStatus.NORMAL
        self._sonar_stopped = {1.0: False, -1.0: False}

    def stopped_output(self) -> DriveOutput:
        """The output while the control step is stopped: zero speeds, status -10."""
        return DriveOutput(0.0, 0.0, int(DriveStatus.STOPPED), (0.0, 0.0))

    def step(
        self,
        command: msgs.ActuatorState | None,
        odometry: msgs.Odometry | None,
        sonar: msgs.SonarScan | None,
        contact: msgs.Contact | None,
        now: float,
        *,
        base_silent: bool = False,
    ) -> DriveOutput:
        """One control step.

        Args:
            command: a command received since the previous step, or None (the previous one stays in force until
                the timeout).
            odometry: newest raw odometry of the base (None if none yet; the heading regulator then stops).
            sonar: newest sonar scan (ranges m from the body's surface, bearings rad in the robot frame).
            contact: newest bumper state.
            now: time of the step, s.
            base_silent: the base's odometry, seen before, has gone stale (the base or its link is gone): the
                command in force is held at zero (status -2) until it is fresh again.

        Returns:
            The velocities to send to the base and the status.
        """
        p = self.params
        dt = 0.0 if self._last_time is None else min(max(now - self._last_time, 0.0), p.max_dt)
        self._last_time = now if self._last_time is None else max(now, self._last_time)
        if command is not None:
            self._command = command
            self._command_time = now
            self._bumped = DriveStatus.NORMAL

        status, v_target, w_target = self._targets(odometry, now, base_silent)
        protect = self._command is not None and self._command.cmd_flags >= 10

        # Limits: speed, then acceleration.
        v_target = max(-p.max_speed, min(p.max_speed, v_target))
        w_target = max(-p.max_turn_rate, min(p.max_turn_rate, w_target))
        v = _toward(self._v, v_target, p.max_accel * dt)
        w = _toward(self._w, w_target, p.max_turn_accel * dt)

        # Safety clamps: they only ever reduce speeds.
        if protect:
            v, sonar_status = self._sonar_clamp(v, sonar)
            if status == DriveStatus.NORMAL:
                status = sonar_status
        v, w = self._bumper_clamp(v, w, v_target, contact)
        if self._bumped != DriveStatus.NORMAL:
            status = self._bumped
        self._v, self._w = v, w
        return DriveOutput(v, w, int(status), (v, w))

    def _targets(
        self, odometry: msgs.Odometry | None, now: float, base_silent: bool
    ) -> tuple[DriveStatus, float, float]:
        """The status and the (v, ω) the command in force asks for, before limits: none after the timeout (status
        -1), none at once for a stale input (status -2, the speeds zeroed without the ramp)."""
        status = DriveStatus.NORMAL
        timed_out = self._command_time is None or now - self._command_time > self.params.timeout
        if self._command is not None and timed_out:
            status = DriveStatus.TIMEOUT
        v_target, w_target = (0.0, 0.0) if timed_out else self._target(odometry)
        if not timed_out and (base_silent or self._stale(odometry, now)):
            # a stop for a stale input is a safety stop: at once, not down the acceleration ramp
            status = DriveStatus.STALE
            v_target = w_target = self._v = self._w = 0.0
        return status, v_target, w_target

    def _bumper_clamp(self, v: float, w: float, v_target: float, contact: msgs.Contact | None) -> tuple[float, float]:
        """A pressed bumper allows only motion straight away from it; a command that asks for anything else is
        cancelled, so the robot stays stopped until the commander sends a new one."""
        front = bool(contact is not None and contact.front)
        rear = bool(contact is not None and contact.rear)
        if not (front or rear):
            return v, w
        self._bumped = DriveStatus.FRONT_BUMPER if front else DriveStatus.BACK_BUMPER
        away = (v_target < 0.0 and not rear) if front else (v_target > 0.0)
        if not away:
            self._command = None
        w = 0.0
        v = min(v, 0.0) if front else v
        v = max(v, 0.0) if rear else v
        if not away:
            v = 0.0
        return v, w

    def _stale(self, odometry: msgs.Odometry | None, now: float) -> bool:
        """The command in force cannot be carried out for a stale input: its lease ran out, it is a halt, or it is a
        heading command without (fresh) odometry."""
        cmd = self._command
        if cmd is None or self._command_time is None:
            return False
        lease = cmd.lease if math.isfinite(cmd.lease) else 0.0
        if lease > 0.0 and now - self._command_time > lease:
            return True
        return cmd.cmd_flags in HALT_FLAGS or (cmd.cmd_flags in (1, 11) and odometry is None)

    def _target(self, odometry: msgs.Odometry | None) -> tuple[float, float]:
        """The (v, ω) the command asks for, before limits (m/s, rad/s)."""
        cmd = self._command
        if cmd is None:
            return 0.0, 0.0
        vel = [_finite(float(x)) for x in cmd.velocity]
        v = vel[0] if len(vel) > 0 else 0.0
        mode = cmd.cmd_flags % 10 if cmd.cmd_flags in (0, 1, 10, 11) else -1
        if mode == 0:
            return v, vel[1] if len(vel) > 1 else 0.0
        if mode == 1 and odometry is not None and len(cmd.position) > 1 and math.isfinite(cmd.position[1]):
            theta = calibrate_odometry(odometry, self.calibration).theta
            if not math.isfinite(theta):
                return 0.0, 0.0
            return self.heading_step(float(cmd.position[1]), theta, v)
        return 0.0, 0.0  # unknown flags, or a heading without odometry: stand still

    def heading_step(self, heading: float, theta: float, v: float) -> tuple[float, float]:
        """The heading regulator: (v, ω) that turn from ``theta`` to ``heading`` (rad) and then hold it.

        ω = gain·error, capped by sqrt(2·max_turn_accel·|error|) so the turn can be braked without overshoot; the
        linear speed ``v`` (m/s) is scaled by max(0, cos(error)) so the robot turns first, then drives straight.
        """
        p = self.params
        error = wrap_angle(heading - theta)
        rate = min(p.heading_gain * abs(error), math.sqrt(2.0 * p.max_turn_accel * abs(error)), p.max_turn_rate)
        return v * max(0.0, math.cos(error)), math.copysign(rate, error)

    def _sonar_clamp(self, v: float, sonar: msgs.SonarScan | None) -> tuple[float, DriveStatus]:
        """Cap the linear speed ``v`` (m/s) towards the nearest return of the side it drives to."""
        p = self.params
        if v == 0.0:
            return v, DriveStatus.NORMAL
        if sonar is None:
            # Protection was asked for but there is nothing to protect with: do not drive blind.
            return 0.0, DriveStatus.SONAR_FRONT if v > 0 else DriveStatus.SONAR_BACK
        nearest = math.inf
        where = DriveStatus.NORMAL
        for r, b in zip(sonar.ranges, sonar.angles, strict=False):
            if not math.isfinite(b):
                continue
            ahead = math.cos(b)
            if (v > 0 and ahead <= 0.0) or (v < 0 and ahead >= 0.0):
                continue
            distance = r if not math.isnan(r) else 0.0
            if distance < nearest:
                nearest, where = distance, sonar_sector(b)
        direction = math.copysign(1.0, v)
        if nearest <= p.stop_distance:
            self._sonar_stopped[direction] = True
        elif nearest >= p.stop_distance + p.stop_hysteresis:
            self._sonar_stopped[direction] = False
        if nearest >= p.slow_distance and not self._sonar_stopped[direction]:
            return v, DriveStatus.NORMAL
        room = nearest - p.stop_distance
        if room <= 0.0 or self._sonar_stopped[direction]:
            cap = 0.0
        else:
            ramp = p.max_speed * room / max(p.slow_distance - p.stop_distance, 1e-9)
            cap = min(ramp, math.sqrt(2.0 * p.max_accel * room))
        if abs(v) <= cap:
            return v, DriveStatus.NORMAL
        return math.copysign(cap, v), where
