"""The simulated pan/tilt wrist: each axis moves toward its commanded position with the commanded velocity and
acceleration, within the unit's limits.

As on the original's wrist (docs/design.md), an axis moves only when its commanded velocity *and* acceleration are both
> 0. Each axis follows the time-optimal profile: accelerate, cruise, and brake so as to stop on the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pluto.runtime.params import Params
from pluto.runtime.ranges import Angle, TurnAccel, TurnRate

FloatArray = NDArray[np.float64]


class WristParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Limits of the unit (defaults: a pan/tilt unit like the original's): rad, rad/s, rad/s²."""

    pan_limits: tuple[Angle, Angle] = (-math.radians(159), math.radians(159))
    tilt_limits: tuple[Angle, Angle] = (-math.radians(31), math.radians(47))  # positive tilts the laser down
    max_speed: tuple[TurnRate, TurnRate] = (2.0, 2.0)
    max_accel: tuple[TurnAccel, TurnAccel] = (6.0, 6.0)


@dataclass
class SimWrist:
    """State of the wrist; :meth:`command` sets a goal, :meth:`step` moves toward it."""

    params: WristParams = field(default_factory=WristParams)
    position: FloatArray = field(default_factory=lambda: np.zeros(2))
    velocity: FloatArray = field(default_factory=lambda: np.zeros(2))
    acceleration: FloatArray = field(default_factory=lambda: np.zeros(2))
    target: FloatArray = field(default_factory=lambda: np.zeros(2))
    speed: FloatArray = field(default_factory=lambda: np.zeros(2))
    accel: FloatArray = field(default_factory=lambda: np.zeros(2))

    def limits(self) -> tuple[FloatArray, FloatArray]:
        """(lower, upper) position limits, (2,) each."""
        p = self.params
        return np.array([p.pan_limits[0], p.tilt_limits[0]]), np.array([p.pan_limits[1], p.tilt_limits[1]])

    def command(self, position: list[float], velocity: list[float], acceleration: list[float]) -> None:
        """A new goal: target (pan, tilt) rad, speeds rad/s, accelerations rad/s²; missing elements keep the
        axis still. Targets are clamped to the limits, speeds and accelerations to the unit's maxima."""
        lo, hi = self.limits()
        for axis in range(2):
            if axis < len(position):
                self.target[axis] = float(np.clip(position[axis], lo[axis], hi[axis]))
            v = velocity[axis] if axis < len(velocity) else 0.0
            a = acceleration[axis] if axis < len(acceleration) else 0.0
            moving = v > 0 and a > 0 and math.isfinite(v) and math.isfinite(a)
            self.speed[axis] = min(v, self.params.max_speed[axis]) if moving else 0.0
            self.accel[axis] = min(a, self.params.max_accel[axis]) if moving else 0.0

    def step(self, dt: float) -> None:
        """Advance the wrist by ``dt`` seconds."""
        lo, hi = self.limits()
        for axis in range(2):
            v, a_max, v_max = self.velocity[axis], self.accel[axis], self.speed[axis]
            error = self.target[axis] - self.position[axis]
            if a_max <= 0 or v_max <= 0:
                # Not allowed to move: brake with the unit's own deceleration.
                desired, a_max = 0.0, self.params.max_accel[axis]
            else:
                # The largest speed u that still stops on the target after moving (v + u) dt / 2 in this step:
                # u² / 2a + (v + u) dt / 2 <= |error|.
                toward = v if error >= 0 else -v
                half = a_max * dt / 2
                disc = half * half - 2 * a_max * (toward * dt / 2 - abs(error))
                u = -half + math.sqrt(disc) if disc > 0 else 0.0
                desired = math.copysign(min(v_max, max(u, 0.0)), error)
            new_v = v + max(-a_max * dt, min(a_max * dt, desired - v))
            new_p = self.position[axis] + (v + new_v) / 2 * dt
            if a_max > 0 and v_max > 0 and (self.target[axis] - new_p) * error <= 0 and abs(new_v) <= a_max * dt * 2:
                new_p, new_v = self.target[axis], 0.0  # arrived
            if not lo[axis] <= new_p <= hi[axis]:
                new_p, new_v = float(np.clip(new_p, lo[axis], hi[axis])), 0.0
            self.acceleration[axis] = (new_v - v) / dt if dt > 0 else 0.0
            self.position[axis], self.velocity[axis] = new_p, new_v
