"""The payloads of Player 1.5: every request, reply, data and command struct the server speaks, byte-exact.

Each struct is a frozen value with ``pack() -> bytes`` and ``unpack(bytes)``; ``SIZE`` is its size on the wire.
Fields are in protocol units (mm, degrees, arc-seconds, 0.01 degrees): the conversions to SI are in
:mod:`pluto.gateways.player.devices`. :func:`parse_config` and :func:`parse_command` turn a payload from a client
into the right struct or say why they cannot.

The payloads of the player device (the server's own requests, and :func:`parse_player_request`) are in
:mod:`.player_device`, the packing every struct shares in :mod:`.packing`; both are importable from here too.
"""

# Strategy: docs/protocols/player.md gives each struct's format and size; the tests pack every
# struct with those format strings as an independent check. Config structs keep their subtype as the first field,
# because several subtypes share a layout (speed and position PID, the seven RMP requests, the laser's SET and
# GET_CONFIG, motor power of position and position3d). Player 1.5 has no geometry struct of its own for
# position3d; its drivers of the time answered GET_GEOM with the position struct (``>B3H2H``), and so does this
# server. GET_GEOM and the laser's GET_CONFIG may be sent as the subtype byte alone (libplayerc does) or as the
# whole struct; every other request must have exactly its struct's size (the player device's DEVLIST excepted:
# see :mod:`.player_device`). Packing checks ranges and raises LocalProtocolError (the caller's mistake); unpacking
# checks sizes and raises RemoteProtocolError (the peer's).

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Final

from pluto.errors import LocalProtocolError, RemoteProtocolError
from pluto.gateways.player.packing import NAME_SIZE, FixedStruct, check_size, fixed_format, pack_fields
from pluto.gateways.player.player_device import (
    AUTH_KEY_SIZE,
    AuthRequest,
    DataFreqRequest,
    DataModeRequest,
    DataRequest,
    DeviceAddress,
    DeviceList,
    DeviceReply,
    DeviceRequest,
    DriverInfo,
    NameService,
    PlayerRequestStruct,
    parse_player_request,
)
from pluto.gateways.player.protocol import DeviceCode

__all__ = [
    "AUTH_KEY_SIZE",
    "LASER_MAX_SAMPLES",
    "NAME_SIZE",
    "RMP_SUBTYPES",
    "SONAR_MAX_SAMPLES",
    "AuthRequest",
    "CommandStruct",
    "ConfigStruct",
    "DataFreqRequest",
    "DataModeRequest",
    "DataRequest",
    "DeviceAddress",
    "DeviceList",
    "DeviceReply",
    "DeviceRequest",
    "DriverInfo",
    "LaserConfig",
    "LaserData",
    "LaserGeometry",
    "LaserRequest",
    "MotorPower",
    "NameService",
    "PidRequest",
    "PlayerRequestStruct",
    "Position3dCommand",
    "Position3dData",
    "PositionCommand",
    "PositionData",
    "PositionGeometry",
    "PositionMode",
    "PositionRequest",
    "ResetOdometry",
    "RmpConfig",
    "SetOdometry",
    "SonarData",
    "SonarGeometry",
    "SonarPower",
    "SonarRequest",
    "SpeedProfile",
    "VelocityMode",
    "parse_command",
    "parse_config",
    "parse_player_request",
]

LASER_MAX_SAMPLES: Final = 401
"""Range slots of a laser data struct."""
SONAR_MAX_SAMPLES: Final = 64
"""Range slots of a sonar data struct, and pose slots of a sonar geometry struct."""


# ------------------------------------------------------------------------------------------ position (4)


@dataclass(frozen=True, slots=True)
class PositionData(FixedStruct):
    """position data (25 bytes): pose mm, mm, deg; speeds mm/s, mm/s, deg/s; stall."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">6iB")
    SIZE: ClassVar[int] = 25
    xpos: int = 0
    ypos: int = 0
    yaw: int = 0
    xspeed: int = 0
    yspeed: int = 0
    yawspeed: int = 0
    stall: int = 0


@dataclass(frozen=True, slots=True)
class PositionCommand(FixedStruct):
    """position command (26 bytes): the data's six values, motor state, type (0 velocity, 1 position)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">6iBB")
    SIZE: ClassVar[int] = 26
    xpos: int = 0
    ypos: int = 0
    yaw: int = 0
    xspeed: int = 0
    yspeed: int = 0
    yawspeed: int = 0
    state: int = 1
    type: int = 0


@dataclass(frozen=True, slots=True)
class PositionGeometry(FixedStruct):
    """GET_GEOM (11 bytes) of position and position3d: pose of the base (mm, mm, deg; unsigned), size (mm, mm)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">B3H2H")
    SIZE: ClassVar[int] = 11
    subtype: int = 1
    pose_x: int = 0
    pose_y: int = 0
    pose_yaw: int = 0
    width: int = 0
    length: int = 0


@dataclass(frozen=True, slots=True)
class MotorPower(FixedStruct):
    """MOTOR_POWER (2 bytes): 0 off, else on."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 2
    value: int = 1


@dataclass(frozen=True, slots=True)
class VelocityMode(FixedStruct):
    """VELOCITY_MODE (2 bytes): driver-specific; for P2OS 0 direct (wheel velocities), else separate."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 3
    value: int = 0


@dataclass(frozen=True, slots=True)
class ResetOdometry(FixedStruct):
    """RESET_ODOM (1 byte): odometry back to (0, 0, 0)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">B")
    SIZE: ClassVar[int] = 1
    subtype: int = 4


@dataclass(frozen=True, slots=True)
class PositionMode(FixedStruct):
    """POSITION_MODE (2 bytes): 0 velocity control, 1 position control."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 5
    state: int = 0


@dataclass(frozen=True, slots=True)
class PidRequest(FixedStruct):
    """SPEED_PID (6) and POSITION_PID (7), 13 bytes: kp, ki, kd (driver units)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">B3i")
    SIZE: ClassVar[int] = 13
    subtype: int = 6
    kp: int = 0
    ki: int = 0
    kd: int = 0


@dataclass(frozen=True, slots=True)
class SpeedProfile(FixedStruct):
    """SPEED_PROF (5 bytes): largest speed mm/s and acceleration mm/s²."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">Bhh")
    SIZE: ClassVar[int] = 5
    subtype: int = 8
    speed: int = 0
    acc: int = 0


@dataclass(frozen=True, slots=True)
class SetOdometry(FixedStruct):
    """SET_ODOM (13 bytes): the odometry pose to declare, mm, mm, deg."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">B3i")
    SIZE: ClassVar[int] = 13
    subtype: int = 9
    x: int = 0
    y: int = 0
    theta: int = 0


@dataclass(frozen=True, slots=True)
class RmpConfig(FixedStruct):
    """RMP_* (51..57), 3 bytes: a Segway RMP setting."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BH")
    SIZE: ClassVar[int] = 3
    subtype: int = 51
    value: int = 0


# ------------------------------------------------------------------------------------------ position3d (30)


@dataclass(frozen=True, slots=True)
class Position3dData(FixedStruct):
    """position3d data (49 bytes): x, y, z mm; roll, pitch, yaw arc-sec; speeds mm/s and arc-sec/s; stall."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">12iB")
    SIZE: ClassVar[int] = 49
    xpos: int = 0
    ypos: int = 0
    zpos: int = 0
    roll: int = 0
    pitch: int = 0
    yaw: int = 0
    xspeed: int = 0
    yspeed: int = 0
    zspeed: int = 0
    rollspeed: int = 0
    pitchspeed: int = 0
    yawspeed: int = 0
    stall: int = 0


@dataclass(frozen=True, slots=True)
class Position3dCommand(FixedStruct):
    """position3d command (48 bytes): x, y, z mm; roll, pitch, yaw arc-sec (unsigned); six speeds."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">3i3I6i")
    SIZE: ClassVar[int] = 48
    xpos: int = 0
    ypos: int = 0
    zpos: int = 0
    roll: int = 0
    pitch: int = 0
    yaw: int = 0
    xspeed: int = 0
    yspeed: int = 0
    zspeed: int = 0
    rollspeed: int = 0
    pitchspeed: int = 0
    yawspeed: int = 0


# ------------------------------------------------------------------------------------------ laser (6)


@dataclass(frozen=True, slots=True)
class LaserData:
    """laser data (1,213 bytes): angles and resolution in 0.01°, the range unit, up to 401 ranges and intensities.

    Attributes:
        min_angle, max_angle: first and last beam, 0.01 degrees.
        resolution: between beams, 0.01 degrees.
        range_res: ranges are in units of this many mm.
        ranges: at most 401 ranges, in units of range_res mm.
        intensity: as many intensities as ranges, or none (zeros are sent).
    """

    HEAD: ClassVar[struct.Struct] = fixed_format(">hhHHH")
    SIZE: ClassVar[int] = 10 + LASER_MAX_SAMPLES * 3
    min_angle: int = 0
    max_angle: int = 0
    resolution: int = 0
    range_res: int = 1
    ranges: tuple[int, ...] = ()
    intensity: tuple[int, ...] = ()

    def pack(self) -> bytes:
        """The 1,213 bytes (unused slots zero).

        Raises:
            LocalProtocolError: more than 401 ranges, intensities that do not match them, a value out of range.
        """
        n = len(self.ranges)
        if n > LASER_MAX_SAMPLES:
            raise LocalProtocolError(f"LaserData: {n} ranges, at most {LASER_MAX_SAMPLES}")
        if self.intensity and len(self.intensity) != n:
            raise LocalProtocolError(f"LaserData: {len(self.intensity)} intensities for {n} ranges")
        head = pack_fields(self.HEAD, "LaserData", self.min_angle, self.max_angle, self.resolution, self.range_res, n)
        pad = LASER_MAX_SAMPLES - n
        ranges = pack_fields(struct.Struct(f">{n}H"), "LaserData ranges", *self.ranges)
        intensity = pack_fields(struct.Struct(f">{n}B"), "LaserData intensity", *(self.intensity or (0,) * n))
        return head + ranges + bytes(2 * pad) + intensity + bytes(pad)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> LaserData:
        """Parse the struct (the first range_count ranges and intensities).

        Raises:
            RemoteProtocolError: not 1,213 bytes, or a count over 401.
        """
        check_size("LaserData", data, cls.SIZE)
        min_angle, max_angle, resolution, range_res, n = cls.HEAD.unpack_from(data)
        if n > LASER_MAX_SAMPLES:
            raise RemoteProtocolError(f"LaserData: range_count {n} is over {LASER_MAX_SAMPLES}")
        ranges = struct.unpack_from(f">{n}H", data, 10)
        intensity = struct.unpack_from(f">{n}B", data, 10 + 2 * LASER_MAX_SAMPLES)
        return cls(min_angle, max_angle, resolution, range_res, ranges, intensity)


@dataclass(frozen=True, slots=True)
class LaserGeometry(FixedStruct):
    """GET_GEOM (11 bytes): pose of the laser on the robot (mm, mm, deg), its size (mm, mm)."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">B3h2h")
    SIZE: ClassVar[int] = 11
    subtype: int = 1
    pose_x: int = 0
    pose_y: int = 0
    pose_yaw: int = 0
    width: int = 0
    length: int = 0


@dataclass(frozen=True, slots=True)
class LaserConfig(FixedStruct):
    """SET_CONFIG (2) and GET_CONFIG (3), 10 bytes: angles 0.01°, resolution 0.01°, range unit mm, intensity."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BhhHHB")
    SIZE: ClassVar[int] = 10
    subtype: int = 3
    min_angle: int = -9000
    max_angle: int = 9000
    resolution: int = 50
    range_res: int = 1
    intensity: int = 0


# ------------------------------------------------------------------------------------------ sonar (5)


@dataclass(frozen=True, slots=True)
class SonarData:
    """sonar data (130 bytes): the number of ranges, then 64 ranges in mm (unused slots zero)."""

    HEAD: ClassVar[struct.Struct] = fixed_format(">H")
    SIZE: ClassVar[int] = 2 + 2 * SONAR_MAX_SAMPLES
    ranges: tuple[int, ...] = ()

    def pack(self) -> bytes:
        """The 130 bytes.

        Raises:
            LocalProtocolError: more than 64 ranges or a range out of 0..65535.
        """
        n = len(self.ranges)
        if n > SONAR_MAX_SAMPLES:
            raise LocalProtocolError(f"SonarData: {n} ranges, at most {SONAR_MAX_SAMPLES}")
        body = pack_fields(struct.Struct(f">H{n}H"), "SonarData", n, *self.ranges)
        return body + bytes(2 * (SONAR_MAX_SAMPLES - n))

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> SonarData:
        """Parse the 130 bytes.

        Raises:
            RemoteProtocolError: not 130 bytes, or a count over 64.
        """
        check_size("SonarData", data, cls.SIZE)
        (n,) = cls.HEAD.unpack_from(data)
        if n > SONAR_MAX_SAMPLES:
            raise RemoteProtocolError(f"SonarData: range_count {n} is over {SONAR_MAX_SAMPLES}")
        return cls(struct.unpack_from(f">{n}H", data, 2))


@dataclass(frozen=True, slots=True)
class SonarGeometry:
    """GET_GEOM (387 bytes): the number of sonars and each one's pose on the robot (mm, mm, deg)."""

    HEAD: ClassVar[struct.Struct] = fixed_format(">BH")
    SIZE: ClassVar[int] = 3 + 6 * SONAR_MAX_SAMPLES
    poses: tuple[tuple[int, int, int], ...] = ()
    subtype: int = 1

    def pack(self) -> bytes:
        """The 387 bytes.

        Raises:
            LocalProtocolError: more than 64 poses or a value out of the i16 range.
        """
        n = len(self.poses)
        if n > SONAR_MAX_SAMPLES:
            raise LocalProtocolError(f"SonarGeometry: {n} poses, at most {SONAR_MAX_SAMPLES}")
        flat = [v for pose in self.poses for v in pose]
        if len(flat) != 3 * n:
            raise LocalProtocolError("SonarGeometry: each pose is (x mm, y mm, yaw deg)")
        body = pack_fields(struct.Struct(f">BH{3 * n}h"), "SonarGeometry", self.subtype, n, *flat)
        return body + bytes(6 * (SONAR_MAX_SAMPLES - n))

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> SonarGeometry:
        """Parse the 387 bytes.

        Raises:
            RemoteProtocolError: not 387 bytes, or a count over 64.
        """
        check_size("SonarGeometry", data, cls.SIZE)
        subtype, n = cls.HEAD.unpack_from(data)
        if n > SONAR_MAX_SAMPLES:
            raise RemoteProtocolError(f"SonarGeometry: pose_count {n} is over {SONAR_MAX_SAMPLES}")
        flat = struct.unpack_from(f">{3 * n}h", data, 3)
        return cls(tuple((flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]) for i in range(n)), subtype)


@dataclass(frozen=True, slots=True)
class SonarPower(FixedStruct):
    """Sonar power (2 bytes): 0 off, else on."""

    FORMAT: ClassVar[struct.Struct] = fixed_format(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 2
    value: int = 1


# ------------------------------------------------------------------------------------------ dispatch


class PositionRequest(IntEnum):
    """The subtypes of position (and position3d) configuration requests; 51..57 are the RMP requests."""

    GET_GEOM = 1
    MOTOR_POWER = 2
    VELOCITY_MODE = 3
    RESET_ODOM = 4
    POSITION_MODE = 5
    SPEED_PID = 6
    POSITION_PID = 7
    SPEED_PROF = 8
    SET_ODOM = 9


RMP_SUBTYPES: Final = range(51, 58)
"""Subtypes of the Segway RMP requests of position (velocity, accel and turn scales, gain schedule, current
limit, integrator reset, shutdown)."""


class LaserRequest(IntEnum):
    """The subtypes of laser configuration requests."""

    GET_GEOM = 1
    SET_CONFIG = 2
    GET_CONFIG = 3


class SonarRequest(IntEnum):
    """The subtypes of sonar configuration requests."""

    GET_GEOM = 1
    POWER = 2


ConfigStruct = (
    PositionGeometry
    | MotorPower
    | VelocityMode
    | ResetOdometry
    | PositionMode
    | PidRequest
    | SpeedProfile
    | SetOdometry
    | RmpConfig
    | LaserGeometry
    | LaserConfig
    | SonarGeometry
    | SonarPower
)
CommandStruct = PositionCommand | Position3dCommand

_POSITION_CONFIG: dict[int, type[FixedStruct]] = {
    PositionRequest.MOTOR_POWER: MotorPower,
    PositionRequest.VELOCITY_MODE: VelocityMode,
    PositionRequest.RESET_ODOM: ResetOdometry,
    PositionRequest.POSITION_MODE: PositionMode,
    PositionRequest.SPEED_PID: PidRequest,
    PositionRequest.POSITION_PID: PidRequest,
    PositionRequest.SPEED_PROF: SpeedProfile,
    PositionRequest.SET_ODOM: SetOdometry,
    **{subtype: RmpConfig for subtype in RMP_SUBTYPES},
}
_POSITION3D_CONFIG: dict[int, type[FixedStruct]] = {
    PositionRequest.MOTOR_POWER: MotorPower,
    PositionRequest.VELOCITY_MODE: VelocityMode,
    PositionRequest.POSITION_MODE: PositionMode,
}
_DEVICE_NAMES = {DeviceCode.POSITION: "position", DeviceCode.POSITION3D: "position3d"}


def _geometry_request(cls: type[PositionGeometry | LaserGeometry | SonarGeometry], payload: bytes) -> ConfigStruct:
    check_size(f"{cls.__name__} request", payload, 1, cls.SIZE)
    return cls() if len(payload) == 1 else cls.unpack(payload)


def parse_config(device: int, payload: bytes) -> ConfigStruct:
    """A configuration request to a device (the payload starts with a u8 subtype).

    Args:
        device: the device code of the request's header.
        payload: the request's payload.

    Raises:
        RemoteProtocolError: an empty payload, a device that takes no configuration, an unknown subtype, or the
            wrong size for the subtype.
    """
    if not payload:
        raise RemoteProtocolError("a configuration request starts with a u8 subtype; got 0 bytes")
    subtype = payload[0]
    if device in (DeviceCode.POSITION, DeviceCode.POSITION3D):
        if subtype == PositionRequest.GET_GEOM:
            return _geometry_request(PositionGeometry, payload)
        table = _POSITION_CONFIG if device == DeviceCode.POSITION else _POSITION3D_CONFIG
        cls = table.get(subtype)
        if cls is None:
            raise RemoteProtocolError(f"unknown {_DEVICE_NAMES[DeviceCode(device)]} request subtype {subtype}")
        value: ConfigStruct = cls.unpack(payload)  # type: ignore[assignment]
        return value
    if device == DeviceCode.LASER:
        if subtype == LaserRequest.GET_GEOM:
            return _geometry_request(LaserGeometry, payload)
        if subtype == LaserRequest.SET_CONFIG:
            return LaserConfig.unpack(payload)
        if subtype == LaserRequest.GET_CONFIG:
            check_size("LaserConfig request", payload, 1, LaserConfig.SIZE)
            return LaserConfig(subtype=subtype) if len(payload) == 1 else LaserConfig.unpack(payload)
        raise RemoteProtocolError(f"unknown laser request subtype {subtype}")
    if device == DeviceCode.SONAR:
        if subtype == SonarRequest.GET_GEOM:
            return _geometry_request(SonarGeometry, payload)
        if subtype == SonarRequest.POWER:
            return SonarPower.unpack(payload)
        raise RemoteProtocolError(f"unknown sonar request subtype {subtype}")
    raise RemoteProtocolError(f"device {device} takes no configuration requests here")


def parse_command(device: int, payload: bytes) -> CommandStruct:
    """A command to a device.

    Raises:
        RemoteProtocolError: a device that takes no commands, or the wrong size.
    """
    if device == DeviceCode.POSITION:
        return PositionCommand.unpack(payload)
    if device == DeviceCode.POSITION3D:
        return Position3dCommand.unpack(payload)
    raise RemoteProtocolError(f"device {device} takes no commands")
