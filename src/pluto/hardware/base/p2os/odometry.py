"""Odometry from successive SIPs: a continuous pose in SI from the robot's wrapping counters.

The robot integrates its own position, but reports it in 15-bit counters (x, y) that wrap every 32768 ticks
(15.9 m on a p3dx) and a heading that wraps every turn. :class:`OdometryIntegrator` unwraps both into a pose that
never jumps: x, y in m, theta in rad, continuous (two left turns give 4*pi, not 0).
"""

# Strategy: docs/protocols/p2os.md ("The standard SIP") gives the unwrap d = ((new - old + 0x4000) & 0x7FFF)
# - 0x4000 and says not to drop large deltas silently. A delta longer than the robot could have travelled since the
# last SIP (top speed x margin x elapsed time, plus a slack for quantisation and jitter) is held for one SIP: if the
# next SIP goes on from it, the counters really jumped (a SETO, a stale session, a lost stretch of packets) and the
# whole step is applied, flagged and counted; if the next SIP goes on from the pose before it, the held SIP was a
# damaged packet whose checksum happened to match (a 16-bit sum does so once in 65,536 damaged packets: on a noisy
# link, every few minutes) and it is dropped and counted. Either way it shows instead of vanishing, and one bad
# packet can no longer move the odometry for good. The heading delta is taken modulo one turn, so the firmware's two
# conventions (-2048..2047 or 0..4095) integrate the same. Time comes in with each SIP (the caller's clock).

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
        large_delta: the step was longer than the robot could travel since the previous SIP.
        held: that step is held, not applied (the pose is the previous one): the next SIP tells whether the counters
            really jumped (then the step is applied with it) or this SIP was damaged (then it is dropped). The
            SIP's other fields are as doubtful as its counters.
    """

    stamp: float
    x: float
    y: float
    theta: float
    v: float
    omega: float
    distance: float
    large_delta: bool
    held: bool = False


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
        self._dropped = 0
        self._held: tuple[Sip, float] | None = None  # a SIP whose step was impossible, with its stamp

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
        """Steps longer than the robot could travel that the next SIP confirmed (applied)."""
        return self._large_deltas

    @property
    def dropped(self) -> int:
        """SIPs dropped: their step was impossible and the next SIP went on from the pose before them."""
        return self._dropped

    def reset(self) -> None:
        """Forget the last SIP: the next one sets the pose again (e.g. after SETO or a reconnection)."""
        self._last = None
        self._held = None

    def _step(self, old: Sip, new: Sip) -> tuple[float, float, float]:
        """The position (m) and heading (rad) change from SIP ``old`` to SIP ``new``."""
        params = self._params
        return (
            params.position_to_m(unwrap_15bit(old.x, new.x)),
            params.position_to_m(unwrap_15bit(old.y, new.y)),
            heading_delta(old.theta, new.theta, params.ticks_per_turn) * params.angle_conv,
        )

    def _possible(self, distance: float, elapsed: float) -> bool:
        """Whether the robot could travel ``distance`` m in ``elapsed`` s (at least one SIP period)."""
        elapsed = max(self._min_interval, elapsed)
        return distance <= self._params.max_velocity * self._speed_margin * elapsed + self._slack

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
            dx, dy, dtheta = self._step(last, sip)
            distance = math.hypot(dx, dy)
            held = self._held
            self._held = None
            if not self._possible(distance, stamp - self._stamp):
                large = True
                confirmed = held is not None and self._possible(
                    math.hypot(*self._step(held[0], sip)[:2]), stamp - held[1]
                )
                if not confirmed:
                    if held is not None:
                        self._dropped += 1  # the one before this: nothing went on from it either
                    self._held = (sip, stamp)
                    return OdometryUpdate(stamp, self._x, self._y, self._theta, v, omega, distance, True, held=True)
                self._large_deltas += 1  # two SIPs agree: the counters did jump
            elif held is not None:
                self._dropped += 1  # this SIP goes on from the pose before the held one: that one was damaged
            self._x += dx
            self._y += dy
            self._theta += dtheta
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
