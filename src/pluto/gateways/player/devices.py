"""The devices the Player gateway serves, and their conversions between bus values (SI) and Player structs.

position (4) is the base's odometry (``Base/Drive/State``, stall from ``Base/Contact``), position3d (30) the
localization pose (``Localization/Pose``), laser (6) ``Sick/Scan_mm`` and sonar (5) ``Base/Sonar``. Everything here
is pure: the module shell reads the bus and calls these functions.
"""

# Strategy: SI inside, protocol units only here and in structs.py (docs/design.md, principle 4). Values that do not fit
# their field are saturated, never wrapped: a robot 3000 km from its origin reports the largest i32 mm rather than
# a negative position, and a laser range beyond what 16 bits of range_res mm hold reports the largest range. A
# laser range of -1 (a scanner error on the bus) is sent as 0, which Player clients of the time treat as no
# return. Yaw is wrapped to [-180, 180] degrees (position) or [-648000, 648000] arc-seconds (position3d); odometry
# on the bus is continuous. The position3d command declares its angles unsigned; a client that wrote a negative
# angle into it sent its two's complement, which is read back as the negative angle. The laser configuration is a
# view of the scans the scanner makes: a client may narrow the field of view and halve the resolution (every
# other beam), or pick the range unit; a finer resolution than the scanner's is refused. The scanners measure no
# reflectivity, so the configuration in force never has intensities on, whatever a client asks (see module.py).

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pluto import msgs, names
from pluto.gateways.player.protocol import DeviceCode
from pluto.gateways.player.structs import (
    LASER_MAX_SAMPLES,
    SONAR_MAX_SAMPLES,
    LaserConfig,
    LaserData,
    LaserGeometry,
    Position3dCommand,
    Position3dData,
    PositionCommand,
    PositionData,
    PositionGeometry,
    SonarData,
    SonarGeometry,
)
from pluto.geometry import wrap_angle

__all__ = [
    "ARCSEC_PER_RAD",
    "DEVICES",
    "LASER_RANGE_UNITS",
    "LASER_RESOLUTIONS",
    "DeviceKey",
    "DeviceSpec",
    "Goal",
    "Velocity",
    "default_range_res",
    "from_arcsec",
    "from_centidegrees",
    "from_degrees",
    "from_mm",
    "laser_data",
    "laser_geometry",
    "laser_native_config",
    "laser_settings",
    "position3d_data",
    "position3d_goal",
    "position3d_velocity",
    "position_data",
    "position_geometry",
    "position_goal",
    "position_velocity",
    "sonar_data",
    "sonar_geometry",
    "to_arcsec",
    "to_centidegrees",
    "to_degrees",
    "to_mm",
]

ARCSEC_PER_RAD: Final = 180.0 * 3600.0 / math.pi
"""Arc-seconds in a radian."""
LASER_RESOLUTIONS: Final = (25, 50, 100)
"""Angular resolutions a laser configuration may ask for, 0.01 degrees."""
LASER_RANGE_UNITS: Final = (1, 10, 100)
"""Range units (range_res) a laser configuration may ask for, mm."""

_I32 = (-(2**31), 2**31 - 1)
_I16 = (-(2**15), 2**15 - 1)
_U16 = (0, 2**16 - 1)

DeviceKey = tuple[int, int]
"""A device as (code, index)."""


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """A device the gateway serves.

    Attributes:
        code, index: its address.
        driver: the name DRIVERINFO and DEV replies give.
        backend: the module that must be running for the device to open.
        interface: the bus interface its data comes from.
    """

    code: int
    index: int
    driver: str
    backend: str
    interface: str

    @property
    def key(self) -> DeviceKey:
        return (self.code, self.index)


DEVICES: Final = (
    DeviceSpec(DeviceCode.POSITION, 0, "pluto-base", "base", names.BASE_DRIVE_STATE),
    DeviceSpec(DeviceCode.POSITION3D, 0, "pluto-localization", "localization", names.LOCALIZATION_POSE),
    DeviceSpec(DeviceCode.LASER, 0, "pluto-sick", "sick", names.SICK_SCAN_MM),
    DeviceSpec(DeviceCode.SONAR, 0, "pluto-sonar", "base", names.BASE_SONAR),
)
"""The devices of the gateway, in the order of the device list."""


@dataclass(frozen=True, slots=True)
class Velocity:
    """A velocity command: v m/s forward, omega rad/s counter-clockwise."""

    v: float
    omega: float


@dataclass(frozen=True, slots=True)
class Goal:
    """A position command: go to (x, y) m, finishing at heading ``theta`` rad; speed limits m/s, rad/s (0: the
    gateway's defaults)."""

    x: float
    y: float
    theta: float
    max_speed: float = 0.0
    max_turn_rate: float = 0.0


# ------------------------------------------------------------------------------------------ units


def _saturate(value: float, bounds: tuple[int, int]) -> int:
    if math.isnan(value):
        return 0
    low, high = bounds
    if value >= high:
        return high
    if value <= low:
        return low
    return round(value)


def to_mm(metres: float, bounds: tuple[int, int] = _I32) -> int:
    """m (or m/s) as whole mm (mm/s), rounded and saturated to ``bounds`` (i32 by default; NaN gives 0)."""
    return _saturate(metres * 1000.0, bounds)


def from_mm(mm: int) -> float:
    """mm (or mm/s) in m (m/s)."""
    return mm / 1000.0


def to_degrees(radians: float, bounds: tuple[int, int] = _I32) -> int:
    """rad (or rad/s) as whole degrees, rounded and saturated (NaN gives 0)."""
    return _saturate(math.degrees(radians), bounds)


def from_degrees(degrees: int) -> float:
    """Degrees (or deg/s) in rad (rad/s)."""
    return math.radians(degrees)


def to_arcsec(radians: float) -> int:
    """rad (or rad/s) as whole arc-seconds, rounded and saturated to i32 (NaN gives 0)."""
    return _saturate(radians * ARCSEC_PER_RAD, _I32)


def from_arcsec(arcsec: int) -> float:
    """Arc-seconds (or per s) in rad (rad/s)."""
    return arcsec / ARCSEC_PER_RAD


def to_centidegrees(radians: float) -> int:
    """rad as 0.01 degrees, rounded and saturated to i16."""
    return _saturate(math.degrees(radians) * 100.0, _I16)


def from_centidegrees(value: int) -> float:
    """0.01 degrees in rad."""
    return math.radians(value / 100.0)


def _signed32(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


# ------------------------------------------------------------------------------------------ position


def position_data(odometry: msgs.Odometry, stall: bool) -> PositionData:
    """position data from the base's odometry.

    Args:
        odometry: pose m, m, rad (continuous heading) and velocities m/s, rad/s.
        stall: the motors are stalled.

    Returns:
        Pose in mm and degrees (heading wrapped to (-180, 180]), forward speed mm/s, turn rate deg/s.
    """
    yaw = to_degrees(wrap_angle(odometry.theta))
    return PositionData(
        xpos=to_mm(odometry.x),
        ypos=to_mm(odometry.y),
        yaw=180 if yaw == -180 else yaw,  # (-180, 180]: a heading of 180° declared reads back as 180
        xspeed=to_mm(odometry.v),
        yspeed=0,
        yawspeed=to_degrees(odometry.omega),
        stall=1 if stall else 0,
    )


def position_velocity(command: PositionCommand) -> Velocity:
    """The velocity a position command asks for (its forward speed and turn rate; a sideways speed is ignored:
    the bases are not holonomic)."""
    return Velocity(from_mm(command.xspeed), from_degrees(command.yawspeed))


def position_goal(command: PositionCommand) -> Goal:
    """The goal of a position command in position mode (in the odometry frame of position data)."""
    return Goal(
        from_mm(command.xpos),
        from_mm(command.ypos),
        from_degrees(command.yaw),
        abs(from_mm(command.xspeed)),
        abs(from_degrees(command.yawspeed)),
    )


def position_geometry(radius: float, subtype: int = 1) -> PositionGeometry:
    """GET_GEOM of a round base of ``radius`` m: centred on the robot, a square of its diameter."""
    size = to_mm(2.0 * radius, _U16)
    return PositionGeometry(subtype=subtype, pose_x=0, pose_y=0, pose_yaw=0, width=size, length=size)


# ------------------------------------------------------------------------------------------ position3d


def position3d_data(pose: msgs.PoseEstimate, odometry: msgs.Odometry | None, stall: bool) -> Position3dData:
    """position3d data from a localization pose.

    Args:
        pose: (x, y, z, θ, φ, ψ): m and rad; θ about z (yaw), φ about y (pitch), ψ about x (roll).
        odometry: the base's velocities (forward m/s and turn rate rad/s), if known.
        stall: the motors are stalled.

    Returns:
        Position in mm, angles in arc-seconds (yaw wrapped to ±180°), speeds in mm/s and arc-seconds/s.
    """
    values = [*pose.pose[:6], *(0.0,) * max(0, 6 - len(pose.pose))]
    x, y, z, theta, phi, psi = values
    return Position3dData(
        xpos=to_mm(x),
        ypos=to_mm(y),
        zpos=to_mm(z),
        roll=to_arcsec(wrap_angle(psi)),
        pitch=to_arcsec(wrap_angle(phi)),
        yaw=to_arcsec(wrap_angle(theta)),
        xspeed=to_mm(odometry.v) if odometry is not None else 0,
        yawspeed=to_arcsec(odometry.omega) if odometry is not None else 0,
        stall=1 if stall else 0,
    )


def position3d_velocity(command: Position3dCommand) -> Velocity:
    """The velocity a position3d command asks for (forward speed and yaw rate)."""
    return Velocity(from_mm(command.xspeed), from_arcsec(command.yawspeed))


def position3d_goal(command: Position3dCommand) -> Goal:
    """The goal of a position3d command in position mode (in the frame of position3d data)."""
    return Goal(
        from_mm(command.xpos),
        from_mm(command.ypos),
        from_arcsec(_signed32(command.yaw)),
        abs(from_mm(command.xspeed)),
        abs(from_arcsec(command.yawspeed)),
    )


# ------------------------------------------------------------------------------------------ laser


def default_range_res(max_range: float) -> int:
    """The finest range unit (1, 10 or 100 mm) in which 16 bits hold ``max_range`` m."""
    for unit in LASER_RANGE_UNITS:
        if max_range * 1000.0 / unit <= _U16[1]:
            return unit
    return LASER_RANGE_UNITS[-1]


def _native_resolution(angles: Sequence[float]) -> int:
    if len(angles) < 2:
        return 100
    return max(1, round(math.degrees(abs(angles[1] - angles[0])) * 100.0))


def laser_native_config(scan: msgs.LaserScan | None) -> LaserConfig:
    """The configuration of the scanner itself: its field of view and resolution, the range unit that holds its
    largest range (defaults of a SICK LMS, 180° at 0.5°, without a scan)."""
    if scan is None or not scan.angles:
        return LaserConfig(subtype=3, min_angle=-9000, max_angle=9000, resolution=50, range_res=10, intensity=0)
    return LaserConfig(
        subtype=3,
        min_angle=to_centidegrees(scan.angles[0]),
        max_angle=to_centidegrees(scan.angles[-1]),
        resolution=_native_resolution(scan.angles),
        range_res=default_range_res(scan.max_range),
        intensity=0,
    )


def laser_settings(request: LaserConfig, native: LaserConfig) -> LaserConfig:
    """The configuration in force after a SET_CONFIG request.

    Args:
        request: what the client asked for.
        native: the scanner's own configuration (:func:`laser_native_config`).

    Returns:
        The request, its field of view clipped to the scanner's, intensity off (the scanners measure no
        reflectivity: a request for intensities is carried out without them), subtype GET_CONFIG.

    Raises:
        ValueError: a resolution other than 25, 50, 100 or finer than the scanner's or not a multiple of it, a
            range unit other than 1, 10, 100, or an empty field of view.
    """
    if request.resolution not in LASER_RESOLUTIONS:
        raise ValueError(f"resolution {request.resolution} (0.01°) is not one of {LASER_RESOLUTIONS}")
    if request.resolution % native.resolution:
        raise ValueError(
            f"the scanner measures every {native.resolution / 100:g}°; {request.resolution / 100:g}° is not a multiple"
        )
    if request.range_res not in LASER_RANGE_UNITS:
        raise ValueError(f"range_res {request.range_res} mm is not one of {LASER_RANGE_UNITS}")
    low, high = max(request.min_angle, native.min_angle), min(request.max_angle, native.max_angle)
    if low > high:
        raise ValueError(f"no beam between {request.min_angle / 100:g}° and {request.max_angle / 100:g}°")
    return LaserConfig(3, low, high, request.resolution, request.range_res, 0)


def laser_data(scan: msgs.LaserScan, config: LaserConfig | None = None) -> LaserData:
    """laser data of a scan, seen through a configuration.

    Args:
        scan: ranges m (-1 for an error) at bearings rad, right to left.
        config: field of view, resolution and range unit to report (the scanner's own if None).

    Returns:
        At most 401 beams within the configured field of view, every n-th for a coarser resolution, ranges in
        units of range_res mm (0 for an error, saturated at 65535).
    """
    native = laser_native_config(scan)
    config = config or native
    angles, ranges = scan.angles, scan.ranges
    stride = max(1, config.resolution // native.resolution)
    picked = [
        i
        for i in range(min(len(angles), len(ranges)))
        if config.min_angle - 1 <= math.degrees(angles[i]) * 100.0 <= config.max_angle + 1
    ][::stride][:LASER_MAX_SAMPLES]
    unit = config.range_res / 1000.0  # m
    values = tuple(0 if ranges[i] < 0 else _saturate(ranges[i] / unit, _U16) for i in picked)
    first = to_centidegrees(angles[picked[0]]) if picked else config.min_angle
    last = to_centidegrees(angles[picked[-1]]) if picked else config.max_angle
    return LaserData(first, last, native.resolution * stride, config.range_res, values, ())


def laser_geometry(pose: Sequence[float], size: Sequence[float], subtype: int = 1) -> LaserGeometry:
    """GET_GEOM of the laser.

    Args:
        pose: (x m, y m, yaw rad) of the laser on the robot.
        size: (width m, length m).
    """
    return LaserGeometry(
        subtype=subtype,
        pose_x=to_mm(pose[0], _I16),
        pose_y=to_mm(pose[1], _I16),
        pose_yaw=to_degrees(pose[2], _I16),
        width=to_mm(size[0], _I16),
        length=to_mm(size[1], _I16),
    )


# ------------------------------------------------------------------------------------------ sonar


def sonar_data(scan: msgs.SonarScan) -> SonarData:
    """sonar data: the first 64 ranges in mm (saturated at 65535; a range that is not finite is the maximum)."""
    ranges = [r if math.isfinite(r) else scan.max_range for r in scan.ranges[:SONAR_MAX_SAMPLES]]
    return SonarData(tuple(to_mm(r, _U16) for r in ranges))


def sonar_geometry(poses: Sequence[Sequence[float]], subtype: int = 1) -> SonarGeometry:
    """GET_GEOM of the sonar ring.

    Args:
        poses: (x m, y m, heading rad) of each transducer on the robot; the first 64 are reported.
    """
    return SonarGeometry(
        tuple(
            (to_mm(p[0], _I16), to_mm(p[1], _I16), to_degrees(wrap_angle(p[2]), _I16))
            for p in poses[:SONAR_MAX_SAMPLES]
        ),
        subtype,
    )
