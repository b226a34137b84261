"""The emulated Pioneer's physics, in SI: the two ARCOS servos driving the simulated body, and the sonar arrays.

    drive = Drivetrain(params, MotionLimits.for_model(params), body)
    drive.enable()
    drive.set_velocity(0.3)                    # m/s, capped by the maximum SETV set
    drive.step(0.01, movers)                   # one control and physics step, s
    x, y, theta = drive.odometry()             # what the SIP reports, from the SETO origin

    sonar = SonarArrays(params, caster, noise, rng, period=0.04)
    sonar.restart(t)                           # the session opened: fire from now
    sonar.fire(t, body, movers)                # every firing due up to t (movers: a callable)
    sonar.take_new()                           # readings new since the last SIP

:class:`.robot.P2osRobot` is the protocol around them: it turns commands (robot units) into calls here and what
these report into SIPs. Nothing here knows a byte, a command number or a link state.
"""

# Strategy: the servos follow the Pioneer 2 / PeopleBot Operations Manual and docs/protocols/p2os.md ("The standard
# SIP"), with the choices listed in robot.py's strategy comment. Translation (velocity or position) and rotation
# (velocity or heading) are independent: each step the wanted speed is a velocity setpoint or a trapezoidal profile
# (v = min(vmax, sqrt(2 a d))) toward the position or heading left, ramped by the acceleration or deceleration set
# (the top ones under an emergency stop or with the motors off), then applied to the body. The wheels' odometry is
# the body's, seen from the origin SETO put down; the encoders count the same travel in ticks. A sonar array fires
# one transducer at a time, in numbering order; its range is ray cast over three rays across the cone.

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import wrap_angle
from pluto.hardware.base.sim import SimBody
from pluto.sim.noise import NoiseProfile
from pluto.sim.raycast import RayCaster

from .models import RobotParams

__all__ = ["SONAR_ARRAY_SIZE", "SONAR_MAX_RANGE", "Drivetrain", "MotionLimits", "SonarArrays"]

FloatArray = NDArray[np.float64]

SONAR_MAX_RANGE: Final = 5.0
"""Longest sonar range a Pioneer reports, m."""
SONAR_ARRAY_SIZE: Final = 8
"""Transducers per sonar array (array 1 = sonars 0-7, array 2 = 8-15, ...)."""

_SONAR_CONE = 0.13  # half-angle of a transducer's cone covered by the outer rays, rad


def _clamp(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def _ramp(current: float, target: float, accel: float, decel: float, dt: float) -> float:
    """``current`` moved toward ``target`` by at most ``accel * dt`` when speeding up, ``decel * dt`` when slowing
    down; a reversal first stops at zero."""
    speeding_up = (current >= 0.0 and target > current) or (current <= 0.0 and target < current)
    step = (accel if speeding_up else decel) * dt
    new = current + max(-step, min(step, target - current))
    if current * new < 0.0:  # crossing zero: stop there this step, accelerate the other way the next
        return 0.0
    return new


def _profile_speed(error: float, vmax: float, decel: float, dt: float) -> float:
    """Speed toward ``error`` (a distance or angle left) that can still stop at the end with ``decel``."""
    magnitude = min(vmax, math.sqrt(2.0 * decel * abs(error)), abs(error) / dt)
    return math.copysign(magnitude, error)


@dataclass(frozen=True, slots=True, kw_only=True)
class MotionLimits:
    """The robot's speed and acceleration configuration (the CONFIGpac's Top and Max values), SI.

    The *top* values are what the hardware can do (SETV, SETRV, SETA, SETRA are capped by them); the others are
    the power-on values of SETV, SETRV, SETA and SETRA.

    Attributes:
        trans_vel_top, rot_vel_top: m/s, rad/s.
        trans_acc_top, rot_acc_top: m/s², rad/s² (also the E_STOP and watchdog deceleration).
        trans_vel_max, rot_vel_max: m/s, rad/s.
        trans_acc, trans_decel: m/s².  rot_acc, rot_decel: rad/s².

    Raises:
        ValueError: a value is not finite and positive, or a power-on value exceeds its top.
    """

    trans_vel_top: float = 2.2
    rot_vel_top: float = math.radians(300.0)
    trans_acc_top: float = 2.0
    rot_acc_top: float = math.radians(500.0)
    trans_vel_max: float = 0.75
    rot_vel_max: float = math.radians(100.0)
    trans_acc: float = 0.3
    trans_decel: float = 0.3
    rot_acc: float = math.radians(100.0)
    rot_decel: float = math.radians(100.0)

    def __post_init__(self) -> None:
        for field in fields(self):
            name, value = field.name, getattr(self, field.name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"MotionLimits.{name} must be finite and > 0, got {value!r}")
        for name, top in (
            ("trans_vel_max", "trans_vel_top"),
            ("rot_vel_max", "rot_vel_top"),
            ("trans_acc", "trans_acc_top"),
            ("trans_decel", "trans_acc_top"),
            ("rot_acc", "rot_acc_top"),
            ("rot_decel", "rot_acc_top"),
        ):
            if getattr(self, name) > getattr(self, top) + 1e-12:
                raise ValueError(f"MotionLimits.{name}={getattr(self, name)} exceeds {top}={getattr(self, top)}")

    @classmethod
    def for_model(cls, params: RobotParams) -> MotionLimits:
        """The limits of a model: its top speed from the parameter table, ARIA-like power-on values."""
        return cls(trans_vel_top=params.max_velocity, trans_vel_max=min(0.75, params.max_velocity))


class Drivetrain:
    """The translation and rotation servos of a Pioneer driving a simulated body, with its odometry and encoders.

    Args:
        params: the model's parameters (wheel geometry for the encoders).
        top: the speed and acceleration configuration; the maxima and accelerations start at its power-on values.
        body: the simulated body the servos drive.

    Attributes:
        motors_enabled: the motors are enabled; when not, the servos brake to a stop and motion is refused.
        bump_stall: BUMP_STALL's mode: bit 0 stops on a front bumper, bit 1 on a rear one.
        encoders: the left and right wheel travel, ticks (not wrapped).
    """

    def __init__(self, params: RobotParams, top: MotionLimits, body: SimBody) -> None:
        self._params = params
        self._top = top
        self._body = body
        self.motors_enabled = False
        self.bump_stall = 0
        self.encoders = [0.0, 0.0]
        self._bump_stalled = False
        self._emergency = False

        # configuration (SETV, SETRV, SETA, SETRA), SI
        self._trans_vel_max = top.trans_vel_max
        self._rot_vel_max = top.rot_vel_max
        self._trans_acc = top.trans_acc
        self._trans_decel = top.trans_decel
        self._rot_acc = top.rot_acc
        self._rot_decel = top.rot_decel

        # the servos
        self._trans_mode: Literal["velocity", "position"] = "velocity"
        self._rot_mode: Literal["velocity", "heading"] = "velocity"
        self._v_target = 0.0
        self._w_target = 0.0
        self._move_left = 0.0
        self._heading_setpoint = 0.0
        self._v_cmd = 0.0
        self._w_cmd = 0.0

        # the wheels' (body) odometry is seen from the origin set by SETO
        self._odom_origin = (0.0, 0.0, 0.0)

    # -- what it reports ----------------------------------------------------------------------------------------

    @property
    def top(self) -> MotionLimits:
        """What the hardware can do."""
        return self._top

    @property
    def max_speeds(self) -> tuple[float, float]:
        """The maxima set by SETV and SETRV: (m/s, rad/s)."""
        return self._trans_vel_max, self._rot_vel_max

    @property
    def accelerations(self) -> tuple[float, float, float, float]:
        """Set by SETA and SETRA: (trans accel m/s², trans decel m/s², rot accel rad/s², rot decel rad/s²)."""
        return self._trans_acc, self._trans_decel, self._rot_acc, self._rot_decel

    @property
    def bumped(self) -> bool:
        """A bumper the client asked to stall on (BUMP_STALL) is pressed."""
        body = self._body
        return bool((self.bump_stall & 1 and body.front) or (self.bump_stall & 2 and body.rear))

    @property
    def open_ended(self) -> bool:
        """A velocity setpoint (VEL, RVEL, VEL2, ROTATE) would keep the robot moving for ever. A MOVE or a heading
        ends by itself, and so does a stop."""
        if not self.motors_enabled:
            return False
        return (self._trans_mode == "velocity" and self._v_target != 0.0) or (
            self._rot_mode == "velocity" and self._w_target != 0.0
        )

    def odometry(self) -> tuple[float, float, float]:
        """The wheels' odometry seen from the SETO origin: x m, y m, theta rad (not wrapped)."""
        ox, oy, otheta = self._odom_origin
        bx, by, btheta = self._body.odom
        c, s = math.cos(otheta), math.sin(otheta)
        dx, dy = bx - ox, by - oy
        return c * dx + s * dy, -s * dx + c * dy, btheta - otheta

    def control_heading(self) -> float:
        """The heading servo's setpoint in the odometric frame, rad: the heading itself unless steering to one."""
        if self._rot_mode == "heading":
            return self._heading_setpoint
        return wrap_angle(self.odometry()[2])

    # -- what it is told ----------------------------------------------------------------------------------------

    def enable(self) -> None:
        """Enable the motors (the setpoints stay at rest until a command)."""
        self.motors_enabled = True

    def disable(self) -> None:
        """Disable the motors and clear the setpoints: enabling again never resumes an old motion."""
        self.motors_enabled = False
        self.stop()

    def stop(self) -> None:
        """Both servos to velocity zero (STOP), at the deceleration set."""
        self._trans_mode = "velocity"
        self._rot_mode = "velocity"
        self._v_target = self._w_target = 0.0
        self._move_left = 0.0

    def emergency_stop(self) -> None:
        """Stop at the top decelerations (E_STOP); the motors stay enabled."""
        self.stop()
        self._emergency = True

    def set_velocity(self, v: float) -> None:
        """Translate at ``v`` m/s (VEL), capped by the maximum."""
        self._trans_mode = "velocity"
        self._v_target = _clamp(v, self._trans_vel_max)

    def set_rot_velocity(self, omega: float) -> None:
        """Rotate at ``omega`` rad/s (RVEL, ROTATE), capped by the maximum."""
        self._rot_mode = "velocity"
        self._w_target = _clamp(omega, self._rot_vel_max)

    def move(self, distance: float) -> None:
        """Translate by ``distance`` m (MOVE) on a trapezoidal profile."""
        self._trans_mode = "position"
        self._move_left = distance

    def head(self, heading: float) -> None:
        """Turn to ``heading`` rad in the odometric frame (HEAD)."""
        self._rot_mode = "heading"
        self._heading_setpoint = wrap_angle(heading)

    def head_by(self, delta: float) -> None:
        """Turn to the current heading plus ``delta`` rad (DHEAD)."""
        self.head(self.odometry()[2] + delta)

    def head_setpoint_by(self, delta: float) -> None:
        """Turn to the heading setpoint plus ``delta`` rad (DCHEAD)."""
        self.head(self.control_heading() + delta)

    def set_max_velocity(self, v: float) -> None:
        """The translational maximum, m/s (SETV), capped by the top; a faster setpoint slows to it."""
        self._trans_vel_max = min(v, self._top.trans_vel_top)
        self._v_target = _clamp(self._v_target, self._trans_vel_max)

    def set_max_rot_velocity(self, omega: float) -> None:
        """The rotational maximum, rad/s (SETRV), capped by the top; a faster setpoint slows to it."""
        self._rot_vel_max = min(omega, self._top.rot_vel_top)
        self._w_target = _clamp(self._w_target, self._rot_vel_max)

    def set_acceleration(self, accel: float, *, decel: bool) -> None:
        """The translational acceleration or deceleration, m/s² (SETA), capped by the top."""
        value = min(accel, self._top.trans_acc_top)
        if decel:
            self._trans_decel = value
        else:
            self._trans_acc = value

    def set_rot_acceleration(self, accel: float, *, decel: bool) -> None:
        """The rotational acceleration or deceleration, rad/s² (SETRA), capped by the top."""
        value = min(accel, self._top.rot_acc_top)
        if decel:
            self._rot_decel = value
        else:
            self._rot_acc = value

    def reset_odometry(self) -> None:
        """Put the odometric origin at the robot (SETO); a heading setpoint keeps its physical direction."""
        old_heading = self.odometry()[2]
        body = self._body
        self._odom_origin = (body.odom[0], body.odom[1], body.odom[2])
        self._heading_setpoint = wrap_angle(self._heading_setpoint - old_heading)

    # -- time ---------------------------------------------------------------------------------------------------

    def step(self, h: float, movers: FloatArray | None) -> None:
        """One control and physics step: the servos, the body, the bumpers, the encoders.

        Args:
            h: s (short: the robot steps at most 10 ms).
            movers: the world's moving obstacles now (x, y, radius rows), or None.
        """
        x, y, theta = self.odometry()
        v_des, w_des = self._wanted(theta, h)
        top = self._top
        if self._emergency or not self.motors_enabled:
            trans_rates = (top.trans_acc_top, top.trans_acc_top)
            rot_rates = (top.rot_acc_top, top.rot_acc_top)
        else:
            trans_rates = (self._trans_acc, self._trans_decel)
            rot_rates = (self._rot_acc, self._rot_decel)
        self._v_cmd = _ramp(self._v_cmd, v_des, *trans_rates, h)
        self._w_cmd = _ramp(self._w_cmd, w_des, *rot_rates, h)
        if self._emergency and self._v_cmd == 0.0 and self._w_cmd == 0.0:
            self._emergency = False

        state = self._body.step(self._v_cmd, self._w_cmd, h, movers)
        if state.stalled:  # blocked wheels do not turn: the profile goes on from the actual speed
            self._v_cmd = state.v
        bumped = self.bumped
        if bumped and not self._bump_stalled:  # a new press: stop at once, as if stalled; moving away is allowed
            self.emergency_stop()
        self._bump_stalled = bumped
        self._count_travel(x, y, theta)

    def _wanted(self, theta: float, h: float) -> tuple[float, float]:
        """The speeds the servos want before the ramps: m/s, rad/s."""
        if not self.motors_enabled:
            return 0.0, 0.0
        if self._trans_mode == "position":
            if abs(self._move_left) < 5e-4 and abs(self._v_cmd) <= self._trans_decel * h * 2:
                self._trans_mode, self._v_target, self._move_left = "velocity", 0.0, 0.0
                v_des = 0.0
            else:
                v_des = _profile_speed(self._move_left, self._trans_vel_max, self._trans_decel, h)
        else:
            v_des = self._v_target
        if self._rot_mode == "heading":
            error = wrap_angle(self._heading_setpoint - theta)
            w_des = _profile_speed(error, self._rot_vel_max, self._rot_decel, h)
        else:
            w_des = self._w_target
        return v_des, w_des

    def _count_travel(self, x: float, y: float, theta: float) -> None:
        """The travel since the odometric pose (x, y, theta): off a MOVE's distance left, onto the encoders."""
        nx, ny, ntheta = self.odometry()
        c, s = math.cos(theta), math.sin(theta)
        forward = c * (nx - x) + s * (ny - y)
        turn = ntheta - theta
        if self._trans_mode == "position":
            self._move_left -= forward
        params = self._params
        spread = turn / params.diff_conv  # mm of wheel travel, (right - left) / 2
        self.encoders[0] += (forward * 1000.0 - spread) / params.dist_conv
        self.encoders[1] += (forward * 1000.0 + spread) / params.dist_conv


class SonarArrays:
    """A Pioneer's sonar: arrays of eight transducers, each array firing one transducer per period in turn.

    Args:
        params: the model's parameters (transducer count and poses, body radius).
        caster: the world's ray caster.
        noise: the sonar's range error and dropout.
        rng: random generator for the noise.
        period: s between two firings of one array.
    """

    def __init__(
        self, params: RobotParams, caster: RayCaster, noise: NoiseProfile, rng: np.random.Generator, period: float
    ) -> None:
        self._params = params
        self._caster = caster
        self._noise = noise
        self._rng = rng
        self._period = period
        count = params.sonar_count
        self._arrays = [
            list(range(first, min(first + SONAR_ARRAY_SIZE, count))) for first in range(0, count, SONAR_ARRAY_SIZE)
        ]
        self._enabled = [True] * len(self._arrays)
        self._array_next = [0] * len(self._arrays)
        self._next_firing = 0.0
        self._new: dict[int, float] = {}
        self._ranges: list[float] = [math.nan] * count

    @property
    def enabled(self) -> tuple[bool, ...]:
        """Which arrays fire (array 1 first)."""
        return tuple(self._enabled)

    @property
    def ranges(self) -> tuple[float, ...]:
        """The latest range of each transducer, m (nan for one that has not fired yet)."""
        return tuple(self._ranges)

    def enable(self, array: int, on: bool) -> bool:
        """Start or stop array ``array`` (1 for the first; 0 for every array).

        Returns:
            False if the robot has no such array (nothing changed).
        """
        if array == 0:
            self._enabled = [on] * len(self._arrays)
        elif array <= len(self._arrays):
            self._enabled[array - 1] = on
        else:
            return False
        return True

    def restart(self, t: float) -> None:
        """A session opened at ``t`` s: fire from now, and forget readings no SIP carried."""
        self._next_firing = t
        self._new.clear()

    def take_new(self) -> list[tuple[int, float]]:
        """The readings new since the last call, (transducer, m) in numbering order."""
        readings = sorted(self._new.items())
        self._new.clear()
        return readings

    def fire(self, t: float, body: SimBody, movers: Callable[[], FloatArray | None]) -> None:
        """Fire every transducer due up to ``t`` s, from the body's true pose.

        Args:
            t: s.
            body: the simulated body.
            movers: gives the world's moving obstacles now (x, y, radius rows), or None; asked only when a
                transducer fires.
        """
        if not self._arrays:
            return
        while t >= self._next_firing - 1e-9:
            self._next_firing += self._period
            fired: list[int] = []
            for index, array in enumerate(self._arrays):
                if self._enabled[index]:
                    position = self._array_next[index] % len(array)
                    fired.append(array[position])
                    self._array_next[index] = position + 1
            if fired:
                for number, distance in zip(fired, self._cast(fired, body, movers()), strict=True):
                    self._ranges[number] = distance
                    self._new[number] = distance
            if t - self._next_firing > 1.0:  # far behind: do not fire a second's worth at once
                self._next_firing = t

    def _cast(self, numbers: list[int], body: SimBody, movers: FloatArray | None) -> list[float]:
        """Ranges (m) of the given transducers from the body's true pose, clipped to 5 m, with the sonar noise."""
        c, s = math.cos(body.theta), math.sin(body.theta)
        offsets = np.array([-_SONAR_CONE, 0.0, _SONAR_CONE])
        limit = self._params.radius - 0.001
        ranges: list[float] = []
        for number in numbers:
            pose = self._params.sonar_poses[number]
            px, py = pose.x, pose.y
            reach = math.hypot(px, py)
            if reach > limit > 0.0:  # keep the transducer inside the body's disc, so it never pokes through a wall
                px, py = px * limit / reach, py * limit / reach
            origin = np.array([body.x + c * px - s * py, body.y + s * px + c * py])
            distance = float(
                self._caster.cast(origin, body.theta + pose.heading + offsets, SONAR_MAX_RANGE, movers).min()
            )
            noise = self._noise
            if noise.sonar_range_std:
                distance += float(self._rng.normal(0.0, noise.sonar_range_std))
            if noise.sonar_dropout and float(self._rng.random()) < noise.sonar_dropout:
                distance = SONAR_MAX_RANGE
            ranges.append(min(max(distance, 0.0), SONAR_MAX_RANGE))
        return ranges
