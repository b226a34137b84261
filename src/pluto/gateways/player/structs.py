"""The payloads of Player 1.5: every request, reply, data and command struct the server speaks, byte-exact.

Each struct is a frozen value with ``pack() -> bytes`` and ``unpack(bytes)``; ``SIZE`` is its size on the wire.
Fields are in protocol units (mm, degrees, arc-seconds, 0.01 degrees): the conversions to SI are in
:mod:`pluto.gateways.player.devices`. :func:`parse_player_request`, :func:`parse_config` and :func:`parse_command`
turn a payload from a client into the right struct or say why they cannot.
"""

# Strategy: docs/protocols/player.md gives each struct's format and size; the tests pack every
# struct with those format strings as an independent check. Config structs keep their subtype as the first field,
# because several subtypes share a layout (speed and position PID, the seven RMP requests, the laser's SET and
# GET_CONFIG, motor power of position and position3d). Player 1.5 has no geometry struct of its own for
# position3d; its drivers of the time answered GET_GEOM with the position struct (``>B3H2H``), and so does this
# server. GET_GEOM and the laser's GET_CONFIG may be sent as the subtype byte alone (libplayerc does) or as the
# whole struct; a DEVLIST request is read by its subtype alone, the rest of its payload ignored whatever its size
# (the 1.5 server never reads it; libplayerc 1.5 sends the whole 388-byte struct with only the subtype filled in,
# the count and the entries left as its stack had them); every other request must have exactly its struct's
# size. Packing checks ranges and raises LocalProtocolError (the caller's mistake); unpacking checks sizes and raises
# RemoteProtocolError (the peer's).

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Final, Self

from pluto.errors import LocalProtocolError, RemoteProtocolError
from pluto.gateways.player.protocol import MAX_DEVICES, DeviceCode, PlayerRequest

__all__ = [
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

NAME_SIZE: Final = 64
"""Bytes of a driver or robot name (NUL-padded)."""
LASER_MAX_SAMPLES: Final = 401
"""Range slots of a laser data struct."""
SONAR_MAX_SAMPLES: Final = 64
"""Range slots of a sonar data struct, and pose slots of a sonar geometry struct."""
AUTH_KEY_SIZE: Final = 32
"""Bytes of an AUTH request's key."""


def _pack(fmt: struct.Struct, name: str, *values: int | bytes) -> bytes:
    try:
        return fmt.pack(*values)
    except struct.error as err:
        raise LocalProtocolError(f"{name}: a field is out of range ({err})") from err


def _check_size(name: str, data: bytes | bytearray | memoryview, *sizes: int) -> None:
    if len(data) not in sizes:
        expected = " or ".join(str(s) for s in sizes)
        raise RemoteProtocolError(f"{name} is {expected} bytes, got {len(data)}")


def _name_bytes(text: str, what: str) -> bytes:
    raw = text.encode("latin-1", errors="replace")
    if len(raw) > NAME_SIZE:
        raise LocalProtocolError(f"{what} {text!r} is longer than {NAME_SIZE} bytes")
    return raw.ljust(NAME_SIZE, b"\0")


def _name_text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


class _Fixed:
    """A struct of fixed size whose fields map one to one, in order, to ``FORMAT``."""

    FORMAT: ClassVar[struct.Struct]
    SIZE: ClassVar[int]
    __slots__ = ()

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))  # type: ignore[arg-type]

    def pack(self) -> bytes:
        """The struct's bytes.

        Raises:
            LocalProtocolError: a field does not fit its type.
        """
        return _pack(self.FORMAT, type(self).__name__, *self._values())

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> Self:
        """Parse the struct.

        Raises:
            RemoteProtocolError: ``data`` is not ``SIZE`` bytes.
        """
        _check_size(cls.__name__, data, cls.SIZE)
        return cls(*cls.FORMAT.unpack(data))


def _fixed(fmt: str) -> struct.Struct:
    return struct.Struct(fmt)


# ------------------------------------------------------------------------------------------ player device (1)


@dataclass(frozen=True, slots=True)
class DeviceAddress:
    """A device as the device list names it: code, index and the server port."""

    code: int
    index: int
    port: int


@dataclass(frozen=True, slots=True)
class DeviceList:
    """DEVLIST request (its subtype; whatever follows is ignored) and reply (388 bytes): the devices the server
    offers."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HH")
    ENTRY: ClassVar[struct.Struct] = _fixed(">HHH")
    SIZE: ClassVar[int] = 4 + MAX_DEVICES * 6
    devices: tuple[DeviceAddress, ...] = ()
    subtype: int = PlayerRequest.DEVLIST

    def pack(self) -> bytes:
        """The 388-byte reply.

        Raises:
            LocalProtocolError: more than 64 devices or a field out of range.
        """
        if len(self.devices) > MAX_DEVICES:
            raise LocalProtocolError(f"DeviceList: {len(self.devices)} devices, at most {MAX_DEVICES}")
        parts = [_pack(self.FORMAT, "DeviceList", self.subtype, len(self.devices))]
        parts += [_pack(self.ENTRY, "DeviceList", d.code, d.index, d.port) for d in self.devices]
        parts.append(bytes(6 * (MAX_DEVICES - len(self.devices))))
        return b"".join(parts)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceList:
        """Parse a reply.

        Raises:
            RemoteProtocolError: not 388 bytes, or a count over 64.
        """
        _check_size("DeviceList", data, cls.SIZE)
        subtype, count = cls.FORMAT.unpack_from(data)
        if count > MAX_DEVICES:
            raise RemoteProtocolError(f"DeviceList: count {count} is over {MAX_DEVICES}")
        devices = tuple(DeviceAddress(*cls.ENTRY.unpack_from(data, 4 + 6 * i)) for i in range(count))
        return cls(devices, subtype)


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """DRIVERINFO request and reply (72 bytes): a device and the name of the driver behind it."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HHHH")
    SIZE: ClassVar[int] = 8 + NAME_SIZE
    code: int
    index: int
    port: int = 0
    name: str = ""
    subtype: int = PlayerRequest.DRIVERINFO

    def pack(self) -> bytes:
        """The 72 bytes.

        Raises:
            LocalProtocolError: a field out of range or a name over 64 bytes.
        """
        head = _pack(self.FORMAT, "DriverInfo", self.subtype, self.code, self.index, self.port)
        return head + _name_bytes(self.name, "driver name")

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DriverInfo:
        """Parse the 72 bytes.

        Raises:
            RemoteProtocolError: not 72 bytes.
        """
        _check_size("DriverInfo", data, cls.SIZE)
        subtype, code, index, port = cls.FORMAT.unpack_from(data)
        return cls(code, index, port, _name_text(bytes(data[8:])), subtype)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """DEV request (7 bytes): open a device with an access mode (``r``, ``w``, ``a``, ``c``)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HHHc")
    SIZE: ClassVar[int] = 7
    code: int
    index: int
    access: bytes
    subtype: int = PlayerRequest.DEV

    def pack(self) -> bytes:
        """The 7 bytes.

        Raises:
            LocalProtocolError: a field out of range or an access that is not one byte.
        """
        return _pack(self.FORMAT, "DeviceRequest", self.subtype, self.code, self.index, self.access)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceRequest:
        """Parse the 7 bytes.

        Raises:
            RemoteProtocolError: not 7 bytes.
        """
        _check_size("DeviceRequest", data, cls.SIZE)
        subtype, code, index, access = cls.FORMAT.unpack(data)
        return cls(code, index, access, subtype)


@dataclass(frozen=True, slots=True)
class DeviceReply:
    """DEV reply (71 bytes): the request with the access granted, then the driver's name."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HHHc")
    SIZE: ClassVar[int] = 7 + NAME_SIZE
    code: int
    index: int
    access: bytes
    driver_name: str = ""
    subtype: int = PlayerRequest.DEV

    def pack(self) -> bytes:
        """The 71 bytes.

        Raises:
            LocalProtocolError: a field out of range or a name over 64 bytes.
        """
        head = _pack(self.FORMAT, "DeviceReply", self.subtype, self.code, self.index, self.access)
        return head + _name_bytes(self.driver_name, "driver name")

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> DeviceReply:
        """Parse the 71 bytes.

        Raises:
            RemoteProtocolError: not 71 bytes.
        """
        _check_size("DeviceReply", data, cls.SIZE)
        subtype, code, index, access = cls.FORMAT.unpack_from(data)
        return cls(code, index, access, _name_text(bytes(data[7:])), subtype)


@dataclass(frozen=True, slots=True)
class DataRequest(_Fixed):
    """DATA request (2 bytes): send one round of data now (PULL modes)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">H")
    SIZE: ClassVar[int] = 2
    subtype: int = PlayerRequest.DATA


@dataclass(frozen=True, slots=True)
class DataModeRequest(_Fixed):
    """DATAMODE request (3 bytes): the data mode, 0..3 (:class:`~.protocol.DataMode`)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HB")
    SIZE: ClassVar[int] = 3
    subtype: int = PlayerRequest.DATAMODE
    mode: int = 2


@dataclass(frozen=True, slots=True)
class DataFreqRequest(_Fixed):
    """DATAFREQ request (4 bytes): rounds per second in the PUSH modes, Hz."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">HH")
    SIZE: ClassVar[int] = 4
    subtype: int = PlayerRequest.DATAFREQ
    frequency: int = 10


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """AUTH request (34 bytes): the key, NUL-padded to 32 bytes."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">H32s")
    SIZE: ClassVar[int] = 2 + AUTH_KEY_SIZE
    key: bytes = b""
    subtype: int = PlayerRequest.AUTH

    def pack(self) -> bytes:
        """The 34 bytes.

        Raises:
            LocalProtocolError: a key over 32 bytes.
        """
        if len(self.key) > AUTH_KEY_SIZE:
            raise LocalProtocolError(f"AuthRequest: the key is {len(self.key)} bytes, at most {AUTH_KEY_SIZE}")
        return _pack(self.FORMAT, "AuthRequest", self.subtype, self.key)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> AuthRequest:
        """Parse the 34 bytes (the key without its padding).

        Raises:
            RemoteProtocolError: not 34 bytes.
        """
        _check_size("AuthRequest", data, cls.SIZE)
        subtype, key = cls.FORMAT.unpack(data)
        return cls(key.split(b"\0", 1)[0], subtype)


@dataclass(frozen=True, slots=True)
class NameService:
    """NAMESERVICE request and reply (68 bytes): a robot name and the port it is served on."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">H64sH")
    SIZE: ClassVar[int] = 4 + NAME_SIZE
    name: str = ""
    port: int = 0
    subtype: int = PlayerRequest.NAMESERVICE

    def pack(self) -> bytes:
        """The 68 bytes.

        Raises:
            LocalProtocolError: a name over 64 bytes or a port out of range.
        """
        return _pack(self.FORMAT, "NameService", self.subtype, _name_bytes(self.name, "robot name"), self.port)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> NameService:
        """Parse the 68 bytes.

        Raises:
            RemoteProtocolError: not 68 bytes.
        """
        _check_size("NameService", data, cls.SIZE)
        subtype, name, port = cls.FORMAT.unpack(data)
        return cls(_name_text(name), port, subtype)


PlayerRequestStruct = (
    DeviceList
    | DriverInfo
    | DeviceRequest
    | DataRequest
    | DataModeRequest
    | DataFreqRequest
    | AuthRequest
    | NameService
)


def parse_player_request(payload: bytes) -> PlayerRequestStruct:
    """A request to the player device (a DEVLIST request is its subtype alone: what follows is not read).

    Raises:
        RemoteProtocolError: shorter than its subtype, an unknown subtype, or the wrong size for it.
    """
    if len(payload) < 2:
        raise RemoteProtocolError(f"a player request starts with a u16 subtype; got {len(payload)} bytes")
    (subtype,) = struct.unpack_from(">H", payload)
    if subtype == PlayerRequest.DEVLIST:
        return DeviceList()  # the rest of the payload, whatever its size, is not read (as the 1.5 server)
    parsers: dict[int, type[DriverInfo | DeviceRequest | DataRequest | DataModeRequest | DataFreqRequest]] = {
        PlayerRequest.DRIVERINFO: DriverInfo,
        PlayerRequest.DEV: DeviceRequest,
        PlayerRequest.DATA: DataRequest,
        PlayerRequest.DATAMODE: DataModeRequest,
        PlayerRequest.DATAFREQ: DataFreqRequest,
    }
    if subtype in parsers:
        return parsers[subtype].unpack(payload)
    if subtype == PlayerRequest.AUTH:
        return AuthRequest.unpack(payload)
    if subtype == PlayerRequest.NAMESERVICE:
        return NameService.unpack(payload)
    raise RemoteProtocolError(f"unknown player request subtype {subtype}")


# ------------------------------------------------------------------------------------------ position (4)


@dataclass(frozen=True, slots=True)
class PositionData(_Fixed):
    """position data (25 bytes): pose mm, mm, deg; speeds mm/s, mm/s, deg/s; stall."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">6iB")
    SIZE: ClassVar[int] = 25
    xpos: int = 0
    ypos: int = 0
    yaw: int = 0
    xspeed: int = 0
    yspeed: int = 0
    yawspeed: int = 0
    stall: int = 0


@dataclass(frozen=True, slots=True)
class PositionCommand(_Fixed):
    """position command (26 bytes): the data's six values, motor state, type (0 velocity, 1 position)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">6iBB")
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
class PositionGeometry(_Fixed):
    """GET_GEOM (11 bytes) of position and position3d: pose of the base (mm, mm, deg; unsigned), size (mm, mm)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">B3H2H")
    SIZE: ClassVar[int] = 11
    subtype: int = 1
    pose_x: int = 0
    pose_y: int = 0
    pose_yaw: int = 0
    width: int = 0
    length: int = 0


@dataclass(frozen=True, slots=True)
class MotorPower(_Fixed):
    """MOTOR_POWER (2 bytes): 0 off, else on."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 2
    value: int = 1


@dataclass(frozen=True, slots=True)
class VelocityMode(_Fixed):
    """VELOCITY_MODE (2 bytes): driver-specific; for P2OS 0 direct (wheel velocities), else separate."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 3
    value: int = 0


@dataclass(frozen=True, slots=True)
class ResetOdometry(_Fixed):
    """RESET_ODOM (1 byte): odometry back to (0, 0, 0)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">B")
    SIZE: ClassVar[int] = 1
    subtype: int = 4


@dataclass(frozen=True, slots=True)
class PositionMode(_Fixed):
    """POSITION_MODE (2 bytes): 0 velocity control, 1 position control."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BB")
    SIZE: ClassVar[int] = 2
    subtype: int = 5
    state: int = 0


@dataclass(frozen=True, slots=True)
class PidRequest(_Fixed):
    """SPEED_PID (6) and POSITION_PID (7), 13 bytes: kp, ki, kd (driver units)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">B3i")
    SIZE: ClassVar[int] = 13
    subtype: int = 6
    kp: int = 0
    ki: int = 0
    kd: int = 0


@dataclass(frozen=True, slots=True)
class SpeedProfile(_Fixed):
    """SPEED_PROF (5 bytes): largest speed mm/s and acceleration mm/s²."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">Bhh")
    SIZE: ClassVar[int] = 5
    subtype: int = 8
    speed: int = 0
    acc: int = 0


@dataclass(frozen=True, slots=True)
class SetOdometry(_Fixed):
    """SET_ODOM (13 bytes): the odometry pose to declare, mm, mm, deg."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">B3i")
    SIZE: ClassVar[int] = 13
    subtype: int = 9
    x: int = 0
    y: int = 0
    theta: int = 0


@dataclass(frozen=True, slots=True)
class RmpConfig(_Fixed):
    """RMP_* (51..57), 3 bytes: a Segway RMP setting."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BH")
    SIZE: ClassVar[int] = 3
    subtype: int = 51
    value: int = 0


# ------------------------------------------------------------------------------------------ position3d (30)


@dataclass(frozen=True, slots=True)
class Position3dData(_Fixed):
    """position3d data (49 bytes): x, y, z mm; roll, pitch, yaw arc-sec; speeds mm/s and arc-sec/s; stall."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">12iB")
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
class Position3dCommand(_Fixed):
    """position3d command (48 bytes): x, y, z mm; roll, pitch, yaw arc-sec (unsigned); six speeds."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">3i3I6i")
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

    HEAD: ClassVar[struct.Struct] = _fixed(">hhHHH")
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
        head = _pack(self.HEAD, "LaserData", self.min_angle, self.max_angle, self.resolution, self.range_res, n)
        pad = LASER_MAX_SAMPLES - n
        ranges = _pack(struct.Struct(f">{n}H"), "LaserData ranges", *self.ranges)
        intensity = _pack(struct.Struct(f">{n}B"), "LaserData intensity", *(self.intensity or (0,) * n))
        return head + ranges + bytes(2 * pad) + intensity + bytes(pad)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> LaserData:
        """Parse the struct (the first range_count ranges and intensities).

        Raises:
            RemoteProtocolError: not 1,213 bytes, or a count over 401.
        """
        _check_size("LaserData", data, cls.SIZE)
        min_angle, max_angle, resolution, range_res, n = cls.HEAD.unpack_from(data)
        if n > LASER_MAX_SAMPLES:
            raise RemoteProtocolError(f"LaserData: range_count {n} is over {LASER_MAX_SAMPLES}")
        ranges = struct.unpack_from(f">{n}H", data, 10)
        intensity = struct.unpack_from(f">{n}B", data, 10 + 2 * LASER_MAX_SAMPLES)
        return cls(min_angle, max_angle, resolution, range_res, ranges, intensity)


@dataclass(frozen=True, slots=True)
class LaserGeometry(_Fixed):
    """GET_GEOM (11 bytes): pose of the laser on the robot (mm, mm, deg), its size (mm, mm)."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">B3h2h")
    SIZE: ClassVar[int] = 11
    subtype: int = 1
    pose_x: int = 0
    pose_y: int = 0
    pose_yaw: int = 0
    width: int = 0
    length: int = 0


@dataclass(frozen=True, slots=True)
class LaserConfig(_Fixed):
    """SET_CONFIG (2) and GET_CONFIG (3), 10 bytes: angles 0.01°, resolution 0.01°, range unit mm, intensity."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BhhHHB")
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

    HEAD: ClassVar[struct.Struct] = _fixed(">H")
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
        body = _pack(struct.Struct(f">H{n}H"), "SonarData", n, *self.ranges)
        return body + bytes(2 * (SONAR_MAX_SAMPLES - n))

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> SonarData:
        """Parse the 130 bytes.

        Raises:
            RemoteProtocolError: not 130 bytes, or a count over 64.
        """
        _check_size("SonarData", data, cls.SIZE)
        (n,) = cls.HEAD.unpack_from(data)
        if n > SONAR_MAX_SAMPLES:
            raise RemoteProtocolError(f"SonarData: range_count {n} is over {SONAR_MAX_SAMPLES}")
        return cls(struct.unpack_from(f">{n}H", data, 2))


@dataclass(frozen=True, slots=True)
class SonarGeometry:
    """GET_GEOM (387 bytes): the number of sonars and each one's pose on the robot (mm, mm, deg)."""

    HEAD: ClassVar[struct.Struct] = _fixed(">BH")
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
        body = _pack(struct.Struct(f">BH{3 * n}h"), "SonarGeometry", self.subtype, n, *flat)
        return body + bytes(6 * (SONAR_MAX_SAMPLES - n))

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> SonarGeometry:
        """Parse the 387 bytes.

        Raises:
            RemoteProtocolError: not 387 bytes, or a count over 64.
        """
        _check_size("SonarGeometry", data, cls.SIZE)
        subtype, n = cls.HEAD.unpack_from(data)
        if n > SONAR_MAX_SAMPLES:
            raise RemoteProtocolError(f"SonarGeometry: pose_count {n} is over {SONAR_MAX_SAMPLES}")
        flat = struct.unpack_from(f">{3 * n}h", data, 3)
        return cls(tuple((flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]) for i in range(n)), subtype)


@dataclass(frozen=True, slots=True)
class SonarPower(_Fixed):
    """Sonar power (2 bytes): 0 off, else on."""

    FORMAT: ClassVar[struct.Struct] = _fixed(">BB")
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

_POSITION_CONFIG: dict[int, type[_Fixed]] = {
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
_POSITION3D_CONFIG: dict[int, type[_Fixed]] = {
    PositionRequest.MOTOR_POWER: MotorPower,
    PositionRequest.VELOCITY_MODE: VelocityMode,
    PositionRequest.POSITION_MODE: PositionMode,
}
_DEVICE_NAMES = {DeviceCode.POSITION: "position", DeviceCode.POSITION3D: "position3d"}


def _geometry_request(cls: type[PositionGeometry | LaserGeometry | SonarGeometry], payload: bytes) -> ConfigStruct:
    _check_size(f"{cls.__name__} request", payload, 1, cls.SIZE)
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
            _check_size("LaserConfig request", payload, 1, LaserConfig.SIZE)
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
