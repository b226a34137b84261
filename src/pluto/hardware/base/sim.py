"""The simulated robot body: differential-drive motion, contact with the world, sonar ring, battery.

Strategy: the body is a disc (a skid-steer or differential base seen from above) moved by the unicycle model with
the commanded velocities ramped by acceleration limits. A move is split into sub-steps no longer than a quarter of
the radius and each sub-step is checked against the world, so the robot can never tunnel through a wall; a blocked
sub-step is bisected so the robot stops touching the obstacle, which then presses the bumper on that side and
stalls the motors. Turning in place is always possible for a disc.

Odometry is the ideal one of the original's dummies (docs/design.md) unless the noise profile says otherwise: then the
wheels have a scale error (and, if set, an exact error of the distances alone) and slip, and keep turning (so odometry
keeps counting) while the body is stalled. A heading bias (``odometry_heading_bias``, drawn once, as the scale error is)
turns the odometry by so many radians per metre driven, as wheels of unequal size do. Short slips
(``odometry_slip_rate``, a Poisson process over the time the robot drives) last 0.1-0.3 s: meanwhile the wheels
count 10-40 % more distance than the body moves and turn the odometry by up to ±0.2 rad per metre, as a wheel
spinning on a smooth patch of floor does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import unicycle_step, wrap_angle
from pluto.hardware.base import body_kernels
from pluto.sim.noise import IDEAL, NoiseProfile

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class BodyParams:
    """Geometry and limits of the simulated base (defaults: an ATRV-sized outdoor robot).

    Attributes:
        radius: radius of the disc footprint, m.
        max_speed: |v| limit, m/s.  max_turn_rate: |ω| limit, rad/s.
        max_accel: linear acceleration limit, m/s².  max_turn_accel: angular acceleration limit, rad/s².
        sonar_count: transducers, evenly spaced around the body, the first facing forward.
        sonar_max_range: m (the original's dummies reported 8 m).  sonar_cone: half-angle of a transducer's cone, rad.
        battery_wh: capacity, Wh.  voltage_full, voltage_empty: V.
        idle_power: W.  drive_power: W per m/s.  turn_power: W per rad/s.
    """

    radius: float = 0.4
    max_speed: float = 1.5
    max_turn_rate: float = 2.0
    max_accel: float = 1.0
    max_turn_accel: float = 3.0
    sonar_count: int = 16
    sonar_max_range: float = 8.0
    sonar_cone: float = 0.13
    battery_wh: float = 400.0
    voltage_full: float = 13.2
    voltage_empty: float = 11.0
    idle_power: float = 30.0
    drive_power: float = 120.0
    turn_power: float = 40.0


@dataclass(frozen=True)
class BodyState:
    """What the body reports after a step. Truth is in the world frame; odometry starts at (0, 0, 0)."""

    t: float
    x: float
    y: float
    theta: float
    v: float
    omega: float
    odom_x: float
    odom_y: float
    odom_theta: float
    odom_v: float
    odom_omega: float
    front_bumper: bool
    rear_bumper: bool
    stalled: bool
    charge: float
    voltage: float


def ramp(current: float, target: float, max_rate: float, dt: float) -> float:
    """Move ``current`` toward ``target`` by at most ``max_rate * dt``."""
    step = max_rate * dt
    return current + max(-step, min(step, target - current))


def _rows(movers: FloatArray | None) -> FloatArray:
    """Moving circles (P, 3) as the kernels take them: float64 in C order, empty for None."""
    if movers is None or not len(movers):
        return body_kernels.NOTHING
    return np.require(movers, dtype=np.float64, requirements=("C", "W")).reshape(-1, 3)


class SimBody:
    """The robot body in a world.

    Args:
        segments: static walls and obstacle edges (N, 4) [x1, y1, x2, y2], m.
        circles: static round obstacles (M, 3) [x, y, r], m.
        start: true start pose (x, y, θ) in the world.
        params: geometry and limits.
        noise: error model (ideal by default).
        rng: random generator (only used with noise).
    """

    def __init__(
        self,
        segments: FloatArray,
        circles: FloatArray,
        start: tuple[float, float, float] = (0.0, 0.0, 0.0),
        params: BodyParams | None = None,
        noise: NoiseProfile = IDEAL,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.params = params or BodyParams()
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        # copies of the world's (writable, C order): the arrays the compiled kernels are made for
        self.segments = np.array(segments, dtype=np.float64).reshape(-1, 4)
        self.circles = np.array(circles, dtype=np.float64).reshape(-1, 3)
        self.x, self.y, self.theta = (float(s) for s in start)
        self.v = self.omega = 0.0
        self.wheel_v = 0.0
        self.odom = [0.0, 0.0, 0.0]
        self.odom_v = self.odom_omega = 0.0
        self.front = self.rear = self.stalled = False
        self.energy_wh = 0.0
        self.t = 0.0
        self._scale = 1.0 + (self.rng.normal(0.0, noise.odometry_scale_error) if noise.odometry_scale_error else 0.0)
        self.heading_bias = (
            float(self.rng.normal(0.0, noise.odometry_heading_bias)) if noise.odometry_heading_bias else 0.0
        )
        """rad per metre the odometry turns that the body does not."""
        self.slips = 0
        """Slips begun so far."""
        self._slip_left = 0.0  # s of the slip under way
        self._slip_gain = 0.0  # extra share of the distance the wheels count meanwhile
        self._slip_turn = 0.0  # rad per metre they turn the odometry meanwhile
        n = self.params.sonar_count
        bearings = np.arange(n, dtype=np.float64) * (2 * math.pi / n)
        self.sonar_angles: FloatArray = wrap_angle(bearings)
        body_kernels.warm_up()  # numba loads the cached machine code now (a fraction of a second), not at a step
        offsets = np.array([-self.params.sonar_cone, 0.0, self.params.sonar_cone])
        self._sonar_rays = (self.sonar_angles[:, None] + offsets[None, :]).ravel()  # three across each cone

    # -- collision ----------------------------------------------------------------------------------------------

    def clearance(self, x: float, y: float, movers: FloatArray | None = None) -> float:
        """Distance from (x, y) to the nearest obstacle surface, m (negative inside a round obstacle)."""
        return float(body_kernels.clearance(float(x), float(y), self.segments, self.circles, _rows(movers)))

    def _free(self, x: float, y: float, movers: FloatArray | None) -> bool:
        return self.clearance(x, y, movers) > self.params.radius

    def _contact_sides(self, movers: FloatArray | None, margin: float = 0.02) -> tuple[bool, bool]:
        """Which bumpers touch something: (front, rear)."""
        reach = self.params.radius + margin
        return body_kernels.contacts(self.x, self.y, self.theta, reach, self.segments, self.circles, _rows(movers))

    # -- motion -------------------------------------------------------------------------------------------------

    def step(self, v_cmd: float, omega_cmd: float, dt: float, movers: FloatArray | None = None) -> BodyState:
        """Advance the body by ``dt`` seconds under the velocity command (v m/s, ω rad/s).

        Args:
            movers: moving round obstacles at this time (P, 3) [x, y, r], m.
        """
        p = self.params
        if dt <= 0:
            return self.state()
        v_target = max(-p.max_speed, min(p.max_speed, v_cmd))
        w_target = max(-p.max_turn_rate, min(p.max_turn_rate, omega_cmd))
        # The wheels keep their speed against an obstacle when they spin there; otherwise they stop with the body.
        v = ramp(self.wheel_v if self.noise.wheel_spin_when_stalled else self.v, v_target, p.max_accel, dt)
        self.wheel_v = v
        w = ramp(self.omega, w_target, p.max_turn_accel, dt)
        # Sub-steps short enough that no wall thinner than the body can be jumped.
        n = max(1, math.ceil(abs(v) * dt / (p.radius * 0.25)))
        h = dt / n
        blocked = False
        x0, y0, th0 = self.x, self.y, self.theta
        for k in range(n):
            nx, ny, nth = unicycle_step(self.x, self.y, self.theta, v, w, h)
            if self._free(nx, ny, movers) or (not self._free(self.x, self.y, movers) and self._escapes(nx, ny, movers)):
                self.x, self.y, self.theta = nx, ny, nth
                continue
            # Blocked: go as far as is free (bisection), keep turning (a disc can always turn), stop.
            lo, hi = 0.0, 1.0
            for _ in range(12):
                mid = (lo + hi) / 2
                mx, my, _ = unicycle_step(self.x, self.y, self.theta, v, w, h * mid)
                if self._free(mx, my, movers):
                    lo = mid
                else:
                    hi = mid
            self.x, self.y, _ = unicycle_step(self.x, self.y, self.theta, v, w, h * lo)
            self.theta = nth + w * h * (n - k - 1)
            blocked = True
            break
        v_true = 0.0 if blocked else v
        self.v = v_true
        self.omega = w
        self.stalled = blocked and abs(v_cmd) > 1e-6
        self.front, self.rear = self._contact_sides(movers)
        spin = v * dt if blocked and self.noise.wheel_spin_when_stalled else 0.0
        self._integrate_odometry(x0, y0, th0, spin, dt)
        self._drain(v, w, dt)
        self.t += dt
        return self.state()

    def _escapes(self, nx: float, ny: float, movers: FloatArray | None) -> bool:
        """Already touching (e.g. a person walked into the robot): allow moves that increase the clearance."""
        return self.clearance(nx, ny, movers) > self.clearance(self.x, self.y, movers)

    def _integrate_odometry(self, x0: float, y0: float, th0: float, spin: float, dt: float) -> None:
        """Add the body's true motion since (x0, y0, θ0), as the wheels measured it, to the odometry.

        Args:
            spin: extra forward distance of wheels turning against an obstacle, m.
        """
        c, s = math.cos(th0), math.sin(th0)
        dx, dy = self.x - x0, self.y - y0
        forward, left = c * dx + s * dy + spin, -s * dx + c * dy
        turn = self.theta - th0
        scale = self._scale
        if self.noise.odometry_slip:
            scale *= 1.0 + float(self.rng.normal(0.0, self.noise.odometry_slip))
        distance_scale = scale * (1.0 + self.noise.odometry_distance_error)
        driven = abs(forward)
        forward, left, turn = forward * distance_scale, left * distance_scale, turn * scale
        turn += self.heading_bias * driven
        if self.noise.odometry_slip_rate and driven > 0.0:
            if self._slip_left <= 0.0 and self.rng.random() < -math.expm1(-self.noise.odometry_slip_rate * dt):
                self.slips += 1
                self._slip_left = float(self.rng.uniform(0.1, 0.3))
                self._slip_gain = float(self.rng.uniform(0.1, 0.4))
                self._slip_turn = float(self.rng.uniform(-0.2, 0.2))
            if self._slip_left > 0.0:
                self._slip_left -= dt
                forward *= 1.0 + self._slip_gain
                turn += self._slip_turn * driven
        ox, oy, oth = self.odom
        co, so = math.cos(oth), math.sin(oth)
        self.odom = [ox + co * forward - so * left, oy + so * forward + co * left, oth + turn]
        self.odom_v, self.odom_omega = forward / dt, turn / dt

    def _drain(self, v: float, w: float, dt: float) -> None:
        p = self.params
        power = p.idle_power + p.drive_power * abs(v) + p.turn_power * abs(w)
        self.energy_wh = min(p.battery_wh, self.energy_wh + power * dt / 3600.0)

    def state(self) -> BodyState:
        """The body's current state."""
        p = self.params
        charge = 1.0 - self.energy_wh / p.battery_wh
        return BodyState(
            t=self.t,
            x=self.x,
            y=self.y,
            theta=self.theta,
            v=self.v,
            omega=self.omega,
            odom_x=self.odom[0],
            odom_y=self.odom[1],
            odom_theta=self.odom[2],
            odom_v=self.odom_v,
            odom_omega=self.odom_omega,
            front_bumper=self.front,
            rear_bumper=self.rear,
            stalled=self.stalled,
            charge=charge,
            voltage=p.voltage_empty + (p.voltage_full - p.voltage_empty) * charge,
        )

    # -- sonar --------------------------------------------------------------------------------------------------

    def sonar(self, movers: FloatArray | None = None) -> FloatArray:
        """Ranges of the sonar ring (sonar_count,), m, measured from the body's surface, max range if nothing.

        Each transducer sees the nearest echo over three rays across its cone.
        """
        p = self.params
        reach = p.sonar_max_range + p.radius
        ranges = body_kernels.cast(
            self.x, self.y, self.theta, self._sonar_rays, reach, self.segments, self.circles, _rows(movers)
        )
        per_sonar = ranges.reshape(p.sonar_count, 3).min(axis=1) - p.radius
        per_sonar = np.clip(per_sonar, 0.0, p.sonar_max_range)
        if self.noise.sonar_range_std:
            per_sonar = per_sonar + self.rng.normal(0.0, self.noise.sonar_range_std, per_sonar.shape)
        if self.noise.sonar_dropout:
            per_sonar = np.where(
                self.rng.random(per_sonar.shape) < self.noise.sonar_dropout, p.sonar_max_range, per_sonar
            )
        result: FloatArray = np.clip(per_sonar, 0.0, p.sonar_max_range)
        return result
