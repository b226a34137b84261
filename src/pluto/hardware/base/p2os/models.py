"""Per-model parameters of Pioneer robots, and conversions between robot units and SI.

The SYNC2 echo names the robot's subclass (``p3dx``, ``p2at``, ...); :func:`robot_params` returns its conversion
factors, sonar ring and limits. Robot units (position ticks, heading ticks, mm, mm/s, deg, sonar units) stay inside
the codec; everything handed out from here is SI: m, rad, s, m/s, rad/s, V.
"""

# Strategy: the table is docs/protocols/p2os.md ("Robot parameters", with the sonar poses), which agrees with
# ARIA's parameter files. The reference gives no sonar poses for p2pb/p2pp (24 sonars) nor for the -sh models; the
# -sh models take the ring of their base model, and p2pb/p2pp the ring of ARIA's p2pb.p/p2pp.p (front ring 0-7 as
# p3dx, upper ring 8-15, rear ring 16-23 as p3dx's 8-15). AngleConvFactor is exactly 2*pi/4096 (the reference's
# 0.001534 is that value rounded), so 4096 ticks make a turn exactly and heading unwrapping is exact. An unknown
# subclass gets the p3dx-like defaults, ``known=False`` and an UnknownRobotWarning, as established clients do.
# DiffConvFactor gives the rotation from the wheels: omega = (R - L) / 2 * DiffConv (R, L in mm/s), as in ARIA.

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from .packets import pack_byte_pair, unpack_byte_pair
from .sip import Sip

__all__ = [
    "ANGLE_CONV",
    "DEFAULT_SUBCLASS",
    "ROBOT_PARAMS",
    "RobotParams",
    "SipReading",
    "SonarPose",
    "UnknownRobotWarning",
    "from_deg",
    "from_mm",
    "robot_params",
    "signed_15bit",
    "to_deg",
    "to_mm",
]

ANGLE_CONV = 2.0 * math.pi / 4096.0
"""AngleConvFactor of every Pioneer: rad per heading tick (4096 ticks a turn)."""
DEFAULT_SUBCLASS = "p3dx"
"""The parameter table used for an unknown subclass."""

_INT16_MIN, _INT16_MAX = -0x8000, 0x7FFF


class UnknownRobotWarning(UserWarning):
    """The robot's subclass is not in the parameter table; defaults are used."""


def signed_15bit(raw: int) -> int:
    """A 15-bit position counter (0..0x7FFF) read as signed (-0x4000..0x3FFF), so a robot just behind its origin
    is at a small negative position rather than at +32767 ticks."""
    raw &= 0x7FFF
    return raw - 0x8000 if raw >= 0x4000 else raw


def _saturate(value: float) -> int:
    return max(_INT16_MIN, min(_INT16_MAX, round(value)))


def to_mm(metres: float) -> int:
    """A command argument in mm (MOVE) or mm/s (VEL, SETV) or mm/s² (SETA) from SI.

    Args:
        metres: m, m/s or m/s².

    Returns:
        The value in mm (/s, /s²), rounded and saturated to -32768..32767.
    """
    return _saturate(metres * 1000.0)


def from_mm(value: int) -> float:
    """A command argument in mm (/s, /s²) in SI: m (/s, /s²)."""
    return value / 1000.0


def to_deg(radians: float) -> int:
    """A command argument in degrees (HEAD, DHEAD) or deg/s (RVEL, SETRV) or deg/s² (SETRA) from SI.

    Args:
        radians: rad, rad/s or rad/s².

    Returns:
        The value in degrees (/s, /s²), rounded and saturated to -32768..32767.
    """
    return _saturate(math.degrees(radians))


def from_deg(value: int) -> float:
    """A command argument in degrees (/s, /s²) in SI: rad (/s, /s²)."""
    return math.radians(value)


@dataclass(frozen=True, slots=True)
class SonarPose:
    """Where a sonar transducer sits on the robot, in the robot frame (x forward, y left).

    Attributes:
        x, y: position, m.
        heading: direction of the beam, rad (0 = forward, counter-clockwise positive).
    """

    x: float
    y: float
    heading: float


@dataclass(frozen=True, slots=True)
class SipReading:
    """A SIP in SI units (see :meth:`RobotParams.sip_reading`).

    Attributes:
        x, y: position from the 15-bit counters read as signed, m.
        theta: heading, rad in [-pi, pi).
        left_velocity, right_velocity: wheel velocities, m/s.
        v: forward velocity, m/s.
        omega: rotational velocity from the wheel velocities and DiffConvFactor, rad/s.
        control: heading setpoint, rad in [-pi, pi).
        battery_voltage: V (the ARCOS 16-bit value when present, else the 8-bit one).
        compass: compass heading, rad.
        sonar_ranges: (sonar number, range in m) for each new reading.
        rot_velocity: rotational velocity the robot reported (ARCOS), rad/s, or None.
        lat_velocity: lateral velocity the robot reported (ARCOS), m/s, or None.
    """

    x: float
    y: float
    theta: float
    left_velocity: float
    right_velocity: float
    v: float
    omega: float
    control: float
    battery_voltage: float
    compass: float
    sonar_ranges: tuple[tuple[int, float], ...]
    rot_velocity: float | None
    lat_velocity: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotParams:
    """Conversion factors and geometry of one robot model.

    Attributes:
        subclass: the model name, as in the SYNC2 echo (lower case).
        robot_class: the robot class, as in the SYNC2 echo.
        dist_conv: DistConvFactor, mm per position tick.
        range_conv: RangeConvFactor, mm per sonar unit.
        diff_conv: DiffConvFactor: omega (rad/s) = (R - L) / 2 * diff_conv, R and L in mm/s.
        angle_conv: AngleConvFactor, rad per heading tick.
        vel_conv: VelConvFactor, mm/s per velocity unit.
        vel2_divisor: Vel2Divisor, mm/s per VEL2 unit.
        max_velocity: the model's top speed, m/s.
        radius: the robot's radius, m.
        sonar_poses: pose of each sonar, by sonar number.
        known: False if these are defaults standing in for an unknown subclass.
    """

    subclass: str
    robot_class: str = "Pioneer"
    dist_conv: float
    range_conv: float
    diff_conv: float
    angle_conv: float = ANGLE_CONV
    vel_conv: float = 1.0
    vel2_divisor: float = 20.0
    max_velocity: float
    radius: float
    sonar_poses: tuple[SonarPose, ...]
    known: bool = True

    @property
    def sonar_count(self) -> int:
        """Number of sonar transducers."""
        return len(self.sonar_poses)

    @property
    def ticks_per_turn(self) -> int:
        """Heading ticks in one turn (4096 on every Pioneer)."""
        return round(2.0 * math.pi / self.angle_conv)

    # positions -------------------------------------------------------------------------------------------------

    def position_to_m(self, ticks: int) -> float:
        """A position in ticks (signed) in m."""
        return ticks * self.dist_conv / 1000.0

    def m_to_position(self, metres: float) -> int:
        """A position in m in ticks (signed, rounded; mask with 0x7FFF for a SIP)."""
        return round(metres * 1000.0 / self.dist_conv)

    # headings --------------------------------------------------------------------------------------------------

    def normalise_heading(self, ticks: int) -> int:
        """A heading in ticks, from either firmware convention (-2048..2047 or 0..4095), as -2048..2047."""
        half = self.ticks_per_turn // 2
        return (ticks + half) % self.ticks_per_turn - half

    def heading_to_rad(self, ticks: int) -> float:
        """A heading in ticks (either firmware convention) in rad, [-pi, pi)."""
        return self.normalise_heading(ticks) * self.angle_conv

    def rad_to_heading(self, radians: float) -> int:
        """A heading in rad in ticks, -2048..2047."""
        return self.normalise_heading(round(radians / self.angle_conv))

    # velocities ------------------------------------------------------------------------------------------------

    def velocity_to_m_s(self, raw: int) -> float:
        """A wheel (or lateral) velocity in robot units in m/s."""
        return raw * self.vel_conv / 1000.0

    def m_s_to_velocity(self, metres_per_second: float) -> int:
        """A velocity in m/s in robot units (rounded)."""
        return round(metres_per_second * 1000.0 / self.vel_conv)

    def twist(self, left: int, right: int) -> tuple[float, float]:
        """Forward and rotational velocity from the wheel velocities.

        Args:
            left, right: wheel velocities in robot units (as in a SIP).

        Returns:
            ``(v, omega)``: m/s and rad/s.
        """
        left_mm, right_mm = left * self.vel_conv, right * self.vel_conv
        return (left_mm + right_mm) / 2000.0, (right_mm - left_mm) / 2.0 * self.diff_conv

    def wheel_velocities(self, v: float, omega: float) -> tuple[int, int]:
        """The wheel velocities (robot units, rounded) that give ``v`` (m/s) and ``omega`` (rad/s); the inverse
        of :meth:`twist`, for a robot emulator."""
        spread = omega / self.diff_conv  # mm/s, (R - L) / 2
        return (
            round((v * 1000.0 - spread) / self.vel_conv),
            round((v * 1000.0 + spread) / self.vel_conv),
        )

    def vel2_argument(self, left: float, right: float) -> int:
        """The VEL2 argument for wheel velocities in m/s: each wheel in Vel2Divisor units, saturated to a byte.

        Args:
            left, right: wheel velocities, m/s.

        Returns:
            The integer argument (high byte left, low byte right).
        """

        def unit(speed: float) -> int:
            return max(-128, min(127, round(speed * 1000.0 / self.vel2_divisor)))

        return pack_byte_pair(unit(left), unit(right))

    def vel2_wheels(self, argument: int) -> tuple[float, float]:
        """The wheel velocities (m/s) a VEL2 argument asks for: ``(left, right)``; the inverse of vel2_argument."""
        left, right = unpack_byte_pair(argument, signed=True)
        return left * self.vel2_divisor / 1000.0, right * self.vel2_divisor / 1000.0

    # sonar -----------------------------------------------------------------------------------------------------

    def range_to_m(self, raw: int) -> float:
        """A sonar range in sonar units in m."""
        return raw * self.range_conv / 1000.0

    def m_to_range(self, metres: float) -> int:
        """A sonar range in m in sonar units (rounded, saturated to 0..65535)."""
        return max(0, min(0xFFFF, round(metres * 1000.0 / self.range_conv)))

    # whole packets ---------------------------------------------------------------------------------------------

    def sip_reading(self, sip: Sip) -> SipReading:
        """A SIP converted to SI with this model's factors.

        The position is the 15-bit counters read as signed (for a continuous pose across the counters' wrap use
        :class:`.odometry.OdometryIntegrator`).
        """
        v, omega = self.twist(sip.left_velocity, sip.right_velocity)
        battery = sip.battery_x10 if sip.battery_x10 is not None else sip.battery
        return SipReading(
            x=self.position_to_m(signed_15bit(sip.x)),
            y=self.position_to_m(signed_15bit(sip.y)),
            theta=self.heading_to_rad(sip.theta),
            left_velocity=self.velocity_to_m_s(sip.left_velocity),
            right_velocity=self.velocity_to_m_s(sip.right_velocity),
            v=v,
            omega=omega,
            control=self.heading_to_rad(sip.control),
            battery_voltage=battery / 10.0,
            compass=math.radians(2 * sip.compass),
            sonar_ranges=tuple((reading.number, self.range_to_m(reading.range)) for reading in sip.sonars),
            rot_velocity=None if sip.rot_vel is None else math.radians(sip.rot_vel / 10.0),
            lat_velocity=None if sip.lat_vel is None else self.velocity_to_m_s(sip.lat_vel),
        )


# --------------------------------------------------------------------------------------------------- the table

_Row = tuple[float, float, float]  # x mm, y mm, heading deg


def _mirror(rows: Iterable[_Row]) -> tuple[_Row, ...]:
    """The mirror image (y and heading negated) of a half ring, in reverse order, as the numbering goes round."""
    return tuple((x, -y, -heading) for x, y, heading in reversed(tuple(rows)))


def _poses(rows: Iterable[_Row]) -> tuple[SonarPose, ...]:
    return tuple(SonarPose(x / 1000.0, y / 1000.0, math.radians(heading)) for x, y, heading in rows)


_P3DX_FRONT: tuple[_Row, ...] = (
    (69, 136, 90), (114, 119, 50), (148, 78, 30), (166, 27, 10),
    (166, -27, -10), (148, -78, -30), (114, -119, -50), (69, -136, -90),
)  # fmt: skip
_P3DX_REAR: tuple[_Row, ...] = (
    (-157, -136, -90), (-203, -119, -130), (-237, -78, -150), (-255, -27, -170),
    (-255, 27, 170), (-237, 78, 150), (-203, 119, 130), (-157, 136, 90),
)  # fmt: skip
_P3AT_FRONT_LEFT: tuple[_Row, ...] = ((147, 136, 90), (193, 119, 50), (227, 79, 30), (245, 27, 10))
_P3AT_REAR_RIGHT: tuple[_Row, ...] = ((-144, -136, -90), (-189, -119, -130), (-223, -79, -150), (-241, -27, -170))
_PEOPLEBOT_UPPER_LEFT: tuple[_Row, ...] = ((-20, 136, 90), (24, 119, 50), (58, 78, 30), (77, 27, 10))
_PEOPLEBOT_SH_LOWER_REAR: tuple[_Row, ...] = (
    (-191, -136, -90), (-237, -119, -130), (-271, -78, -150), (-290, -27, -170),
    (-290, 27, 170), (-271, 78, 150), (-237, 119, 130), (-191, 136, 90),
)  # fmt: skip

_PIONEER_DX_RING = _poses(_P3DX_FRONT + _P3DX_REAR)
_PIONEER_AT_RING = _poses(_P3AT_FRONT_LEFT + _mirror(_P3AT_FRONT_LEFT) + _P3AT_REAR_RIGHT + _mirror(_P3AT_REAR_RIGHT))
_PEOPLEBOT_UPPER = _PEOPLEBOT_UPPER_LEFT + _mirror(_PEOPLEBOT_UPPER_LEFT)
_P2_PEOPLEBOT_RING = _poses(_P3DX_FRONT + _PEOPLEBOT_UPPER + _P3DX_REAR)
_PEOPLEBOT_SH_RING = _poses(_P3DX_FRONT + _P3DX_REAR + _PEOPLEBOT_UPPER + _PEOPLEBOT_SH_LOWER_REAR)


def _model(
    subclass: str, dist: float, rng: float, diff: float, vmax_mm_s: float, radius_mm: float, ring: tuple[SonarPose, ...]
) -> RobotParams:
    return RobotParams(
        subclass=subclass,
        dist_conv=dist,
        range_conv=rng,
        diff_conv=diff,
        max_velocity=vmax_mm_s / 1000.0,
        radius=radius_mm / 1000.0,
        sonar_poses=ring,
    )


ROBOT_PARAMS: Mapping[str, RobotParams] = MappingProxyType(
    {
        params.subclass: params
        for params in (
            _model("p2dx", 0.840, 0.268, 0.0056, 2200, 250, _PIONEER_DX_RING),
            _model("p2de", 0.969, 0.268, 0.0056, 2200, 250, _PIONEER_DX_RING),
            _model("p2at", 1.32, 0.268, 0.0034, 1200, 500, _PIONEER_AT_RING),
            _model("p2pb", 0.424, 0.268, 0.0056, 2200, 300, _P2_PEOPLEBOT_RING),
            _model("p2pp", 0.485, 0.268, 0.006, 2200, 300, _P2_PEOPLEBOT_RING),
            _model("p3dx", 0.485, 1.0, 0.0056, 2200, 250, _PIONEER_DX_RING),
            _model("p3at", 0.465, 1.0, 0.0034, 1200, 500, _PIONEER_AT_RING),
            _model("p3dx-sh", 1.0, 1.0, 0.0056, 2200, 250, _PIONEER_DX_RING),
            _model("p3at-sh", 1.0, 1.0, 0.0034, 1200, 500, _PIONEER_AT_RING),
            _model("peoplebot-sh", 1.0, 1.0, 0.006, 2200, 340, _PEOPLEBOT_SH_RING),
        )
    }
)
"""Every known model by subclass (lower case)."""


def robot_params(subclass: str) -> RobotParams:
    """The parameters of a robot model, by the subclass its SYNC2 echo names (case-insensitive).

    Args:
        subclass: e.g. ``"p3dx"``, ``"P3AT-SH"``.

    Returns:
        The model's parameters; for an unknown subclass the p3dx defaults with ``known=False``.

    Warns:
        UnknownRobotWarning: the subclass is not in the table.
    """
    params = ROBOT_PARAMS.get(subclass.strip().lower())
    if params is not None:
        return params
    warnings.warn(
        f"unknown robot subclass {subclass!r}: using the {DEFAULT_SUBCLASS} parameters "
        f"(known: {', '.join(ROBOT_PARAMS)})",
        UnknownRobotWarning,
        stacklevel=2,
    )
    return replace(ROBOT_PARAMS[DEFAULT_SUBCLASS], known=False)
