"""Odometry from successive SIPs: a continuous pose in SI from the robot's wrapping counters.

The robot integrates its own position, but reports it in 15-bit counters (x, y) that wrap every 32768 ticks
(15.9 m on a p3dx) and a heading that wraps every turn. :class:`OdometryIntegrator` unwraps both into a pose that
never jumps: x, y in m, theta in rad, continuous (two left turns give 4*pi, not 0).
"""

# Strategy: /work/shared/reference/p2os.md ("Standard SIP") gives the unwrap d = ((new - old + 0x4000) & 0x7FFF)
# - 0x4000 and says not to drop large deltas silently. So every delta is applied, but one longer than the robot
# could have travelled since the last SIP (top speed x margin x elapsed time, plus a slack for quantisation and
# jitter) is flagged in the returned update and counted: a lost stretch of packets, a SETO or a stale session shows
# up instead of vanishing. The heading delta is taken modulo one turn, so the firmware's two conventions
# (-2048..2047 or 0..4095) integrate the same. Time comes in with each SIP (the caller's clock): no clock here.

from __future__ import annotations

import math
from dataclasses import dataclass

from .models import RobotParams, signed_15bit
from .sip import Sip

__all__ = ["OdometryIntegrator", "OdometryUpdate", "heading_delta", "unwrap_15bit"]


def unwrap_15bit(old: int, new: int) -> int:
    """The signed change of a 15-bit counter from ``old`` to ``new``, across the 0x7FFF -> 0 wrap.

    Args:
        old, new: successive counter values, 0..0x7FFF (higher bits are ignored).

    Returns:
        The change in ticks, -0x4000..0x3FFF.
    """
    return ((new - old + 0x4000) & 0x7FFF) - 0x4000


def heading_delta(old: int, new: int, ticks_per_turn: int = 4096) -> int:
    """The signed change of a heading in ticks, across the wrap, from either firmware convention.

    Args:
        old, new: successive headings in ticks (-2048..2047 or 0..4095).
        ticks_per_turn: ticks in one turn.

    Returns:
        The change in ticks, -ticks_per_turn/2 .. ticks_per_turn/2 - 1.
    """
    half = ticks_per_turn // 2
    return (new - old + half) % ticks_per_turn - half


@dataclass(frozen=True, slots=True)
class OdometryUpdate:
    """The integrated pose after one SIP.

    Attributes:
        stamp: time of the SIP, s (the caller's clock).
        x, y: position, m, continuous across the counters' wrap.
        theta: heading, rad, continuous (not wrapped).
        v: forward velocity from the wheels, m/s.
        omega: rotational velocity from the wheels and DiffConvFactor, rad/s.
        distance: length of this SIP's position step, m.
        large_delta: the step was longer than the robot could travel since the previous SIP; it was applied.
    """

    stamp: float
    x: float
    y: float
    theta: float
    v: float
    omega: float
    distance: float
    large_delta: bool


class OdometryIntegrator:
    """Turns successive SIPs into a continuous pose in SI.

    The first SIP sets the pose: its counters read as signed 15-bit values and its heading wrapped to [-pi, pi).
    Each later SIP adds its unwrapped deltas.

    Args:
        params: the robot model (DistConvFactor, AngleConvFactor, DiffConvFactor, max velocity).
        speed_margin: a step is large when longer than ``max_velocity * speed_margin * dt + slack``.
        slack: allowance for quantisation and jitter in that test, m.
        min_interval: ``dt`` is at least this (s): the robot sends a SIP every 50 or 100 ms, so SIPs read together
            (a reader that was late on a busy computer) still stand for that much time each.

    Raises:
        ValueError: speed_margin or slack is negative.
    """

    def __init__(
        self, params: RobotParams, *, speed_margin: float = 1.5, slack: float = 0.01, min_interval: float = 0.05
    ) -> None:
        if speed_margin < 0 or slack < 0 or min_interval < 0:
            raise ValueError("speed_margin, slack and min_interval must be >= 0")
        self._min_interval = min_interval
        self._params = params
        self._speed_margin = speed_margin
        self._slack = slack
        self._last: Sip | None = None
        self._stamp = 0.0
        self._x = 0.0
        self._y = 0.0
        self._theta = 0.0
        self._updates = 0
        self._large_deltas = 0

    @property
    def params(self) -> RobotParams:
        """The robot model."""
        return self._params

    @property
    def pose(self) -> tuple[float, float, float] | None:
        """``(x, y, theta)`` in m, m, rad; None before the first SIP."""
        return None if self._last is None else (self._x, self._y, self._theta)

    @property
    def updates(self) -> int:
        """SIPs integrated since creation."""
        return self._updates

    @property
    def large_deltas(self) -> int:
        """Steps flagged as longer than the robot could travel (each one applied all the same)."""
        return self._large_deltas

    def reset(self) -> None:
        """Forget the last SIP: the next one sets the pose again (e.g. after SETO or a reconnection)."""
        self._last = None

    def update(self, sip: Sip, stamp: float) -> OdometryUpdate:
        """Integrate one SIP.

        Args:
            sip: the robot's SIP.
            stamp: when it arrived, s (monotonic; a step back in time is taken as no time elapsed).

        Returns:
            The pose, velocities and whether this step was suspiciously large.
        """
        params = self._params
        v, omega = params.twist(sip.left_velocity, sip.right_velocity)
        distance = 0.0
        large = False
        last = self._last
        if last is None:
            self._x = params.position_to_m(signed_15bit(sip.x))
            self._y = params.position_to_m(signed_15bit(sip.y))
            self._theta = params.heading_to_rad(sip.theta)
        else:
            dx = params.position_to_m(unwrap_15bit(last.x, sip.x))
            dy = params.position_to_m(unwrap_15bit(last.y, sip.y))
            dtheta = heading_delta(last.theta, sip.theta, params.ticks_per_turn) * params.angle_conv
            self._x += dx
            self._y += dy
            self._theta += dtheta
            distance = math.hypot(dx, dy)
            elapsed = max(self._min_interval, stamp - self._stamp)
            if distance > params.max_velocity * self._speed_margin * elapsed + self._slack:
                large = True
                self._large_deltas += 1
        self._last = sip
        self._stamp = stamp
        self._updates += 1
        return OdometryUpdate(
            stamp=stamp,
            x=self._x,
            y=self._y,
            theta=self._theta,
            v=v,
            omega=omega,
            distance=distance,
            large_delta=large,
        )
