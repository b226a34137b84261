"""Server packets of the Pioneer P2OS/ARCOS protocol: decoding and encoding.

The robot sends SIPs (server information packets, type 0x32 stopped / 0x33 moving) about every 100 ms, and on
request CONFIGpac (0x20), ENCODERpac (0x90), IOpac (0xF0), GRIPPERpac (0xE0) and SERAUX (0xB0/0xB8); during the
handshake it echoes SYNC0, SYNC1 and SYNC2, the last one carrying the robot's name, class and subclass. Every packet
type here is a frozen value with ``payload()`` and ``encode()``, so a robot emulator writes exactly what a client
reads. Values stay in robot units; :mod:`.models` converts them to SI.
"""

# Strategy: field order, sizes and signedness follow docs/protocols/p2os.md ("The standard SIP") and
# the Pioneer 2 / PeopleBot Operations Manual (Table 4). Parsers are strict about what the reference fixes and
# lenient where firmware grew: the SIP's ARCOS extension fields are read one by one while bytes remain (as ARIA
# does) and whatever follows them is kept in ``extra``; CONFIGpac keeps the fields later firmware appends in
# ``extra`` too. Keeping them makes decode -> encode byte-identical, which the emulator and replay rely on. A body
# that does not parse raises RemoteProtocolError; the streaming decoder counts it as malformed. Strings are
# NUL-terminated latin-1 so every byte value survives a round trip.

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from .packets import (
    LocalProtocolError,
    PayloadReader,
    RemoteProtocolError,
    UnknownPacket,
    check_payload_size,
    check_range,
    encode_text,
    frame,
)

__all__ = [
    "CONFIG_PACKET",
    "ENCODER_PACKET",
    "GRIPPER_PACKET",
    "IO_PACKET",
    "SERAUX_PACKETS",
    "SIP_MOVING",
    "SIP_STOPPED",
    "ConfigPacket",
    "EncoderPacket",
    "GripperPacket",
    "IoPacket",
    "SerauxPacket",
    "ServerPacket",
    "Sip",
    "SonarReading",
    "SyncReply",
    "parse_server_packet",
]

SIP_STOPPED = 0x32
"""SIP type: motors stopped (some simulators send it while moving too)."""
SIP_MOVING = 0x33
"""SIP type: robot moving."""
CONFIG_PACKET = 0x20
ENCODER_PACKET = 0x90
GRIPPER_PACKET = 0xE0
IO_PACKET = 0xF0
SERAUX_PACKETS = {0xB0: 1, 0xB8: 2}
"""SERAUX packet type -> auxiliary serial port number."""
_SERAUX_TYPES = {port: packet_type for packet_type, port in SERAUX_PACKETS.items()}


class _Field(Enum):
    """The wire type of a packet field: (struct format, low, high), or a NUL-terminated string."""

    U8 = ("<B", 0, 0xFF)
    S8 = ("<b", -0x80, 0x7F)
    U16 = ("<H", 0, 0xFFFF)
    S16 = ("<h", -0x8000, 0x7FFF)
    STRING = ("", 0, 0)

    @property
    def format(self) -> str:
        return self.value[0]

    @property
    def low(self) -> int:
        return self.value[1]

    @property
    def high(self) -> int:
        return self.value[2]

    @property
    def size(self) -> int:
        return struct.calcsize(self.format)


_U8, _S8, _U16, _S16 = _Field.U8, _Field.S8, _Field.U16, _Field.S16


# --------------------------------------------------------------------------------------------------- SYNC


@dataclass(frozen=True, slots=True)
class SyncReply:
    """The robot's echo of SYNC0, SYNC1 or SYNC2 during the handshake.

    The SYNC2 echo carries three NUL-terminated strings: the robot's name, class and subclass (the subclass
    selects the parameter table, see :func:`.models.robot_params`).

    Attributes:
        sync: 0, 1 or 2.
        name, robot_class, subclass: the SYNC2 strings, all three or none (always none for SYNC0/SYNC1).
        extra: bytes after the three strings (ignored by established clients; kept so re-encoding is exact).
    """

    sync: int
    name: str | None = None
    robot_class: str | None = None
    subclass: str | None = None
    extra: bytes = b""

    def __post_init__(self) -> None:
        check_range("SyncReply", "sync", self.sync, 0, 2)
        strings = (self.name, self.robot_class, self.subclass)
        present = [s is not None for s in strings]
        if any(present) and not all(present):
            raise LocalProtocolError("SyncReply: name, robot_class and subclass go together (all or none)")
        if any(present) and self.sync != 2:
            raise LocalProtocolError(f"SyncReply: only the SYNC2 echo carries strings, not SYNC{self.sync}")
        if not isinstance(self.extra, bytes):
            raise LocalProtocolError(f"SyncReply.extra must be bytes, got {type(self.extra).__name__}")
        if self.extra and not all(present):
            raise LocalProtocolError("SyncReply.extra needs the three SYNC2 strings before it")
        check_payload_size("SyncReply", self.payload)

    def payload(self) -> bytes:
        """The type byte and the strings (no frame)."""
        body = b""
        if self.name is not None and self.robot_class is not None and self.subclass is not None:
            body = b"".join(
                encode_text("SyncReply", name, text)
                for name, text in (("name", self.name), ("robot_class", self.robot_class), ("subclass", self.subclass))
            )
        return bytes((self.sync,)) + body + self.extra

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> SyncReply:
        """Decode from a checked payload.

        Raises:
            RemoteProtocolError: a SYNC0/1 echo with data, or a SYNC2 echo without three NUL-terminated strings.
        """
        sync = payload[0]
        reader = PayloadReader(payload[1:], f"SYNC{sync} reply")
        if sync != 2 or not reader.remaining:
            reader.finish()
            return cls(sync)
        name = reader.cstring("name")
        robot_class = reader.cstring("class")
        subclass = reader.cstring("subclass")
        return cls(sync, name, robot_class, subclass, reader.rest())


# --------------------------------------------------------------------------------------------------- SIP


@dataclass(frozen=True, slots=True)
class SonarReading:
    """One sonar reading of a SIP.

    Attributes:
        number: the sonar (transducer) number, 0..255.
        range: the range in sonar units (multiply by RangeConvFactor for mm), 0..65535.
    """

    number: int
    range: int

    def __post_init__(self) -> None:
        check_range("SonarReading", "number", self.number, _U8.low, _U8.high)
        check_range("SonarReading", "range", self.range, _U16.low, _U16.high)


_SIP_FIXED: tuple[tuple[str, _Field], ...] = (
    ("x", _U16),
    ("y", _U16),
    ("theta", _S16),
    ("left_velocity", _S16),
    ("right_velocity", _S16),
    ("battery", _U8),
    ("stall_bumpers", _U16),
    ("control", _S16),
    ("flags", _U16),
    ("compass", _U8),
)
_SIP_TAIL: tuple[tuple[str, _Field], ...] = (
    ("timer", _U16),
    ("analog", _U8),
    ("digin", _U8),
    ("digout", _U8),
)
_SIP_EXTENSION: tuple[tuple[str, _Field], ...] = (
    ("battery_x10", _U16),
    ("charge_state", _U8),
    ("rot_vel", _S16),
    ("fault_flags", _U16),
    ("lat_vel", _S16),
    ("temperature", _S8),
    ("state_of_charge", _S8),
)
_POSITION_MASK = 0x7FFF


def _read(reader: PayloadReader, name: str, kind: _Field) -> int:
    if kind == _U8:
        return reader.u8(name)
    if kind == _S8:
        return reader.s8(name)
    if kind == _U16:
        return reader.u16(name)
    return reader.s16(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sip:
    """A standard server information packet (0x32/0x33), with the ARCOS extension fields when present.

    Every value is in robot units, as on the wire; :meth:`.models.RobotParams.sip_reading` gives SI.

    Attributes:
        moving: True for type 0x33 (robot moving), False for 0x32 (stopped; some simulators always send 0x32).
        x, y: wheel-encoder integrated position, 15-bit counters 0..0x7FFF (x DistConvFactor -> mm). The wire's
            bit 15 is not part of the counter and is dropped on decoding.
        theta: heading, x AngleConvFactor -> rad; -2048..2047, or 0..4095 on some firmware (the same angle).
        left_velocity, right_velocity: wheel velocities, x VelConvFactor -> mm/s.
        battery: battery voltage, 0.1 V.
        stall_bumpers: bit 0 left stall, bits 1-7 rear bumpers; bit 8 right stall, bits 9-15 front bumpers.
        control: heading setpoint of the angular servo, x AngleConvFactor -> rad.
        flags: bit 0 motors enabled, bits 1-4 sonar arrays enabled, bit 5 e-stop engaged.
        compass: compass heading, 2-degree units.
        sonars: the new sonar readings of this cycle.
        timer: the "timer" word (on later firmware: gripper state and selected analog port).
        analog: user analog input, 0..255 = 0..5 V.
        digin, digout: user digital inputs and outputs.
        battery_x10, charge_state, rot_vel, fault_flags, lat_vel, temperature, state_of_charge: the ARCOS
            extension, in this order, each present only if the robot sent it (so a later one implies the earlier
            ones): battery voltage x10 (0.1 V, 16 bits), charge state code, rotational velocity (0.1 deg/s), fault
            flags, lateral velocity (mm/s), temperature (deg C), state of charge (%).
        extra: bytes after the known fields (fields of later firmware), kept so that re-encoding is exact.

    Raises:
        LocalProtocolError: a field out of its wire range, extension fields not a prefix of the list, or more
            sonar readings than fit a packet.
    """

    moving: bool = False
    x: int = 0
    y: int = 0
    theta: int = 0
    left_velocity: int = 0
    right_velocity: int = 0
    battery: int = 0
    stall_bumpers: int = 0
    control: int = 0
    flags: int = 0
    compass: int = 0
    sonars: tuple[SonarReading, ...] = ()
    timer: int = 0
    analog: int = 0
    digin: int = 0
    digout: int = 0
    battery_x10: int | None = None
    charge_state: int | None = None
    rot_vel: int | None = None
    fault_flags: int | None = None
    lat_vel: int | None = None
    temperature: int | None = None
    state_of_charge: int | None = None
    extra: bytes = b""

    MOTORS_ENABLED: ClassVar[int] = 0x01
    SONAR_ARRAYS: ClassVar[int] = 0x1E
    ESTOP: ClassVar[int] = 0x20

    def __post_init__(self) -> None:
        if not isinstance(self.moving, bool):
            raise LocalProtocolError(f"Sip.moving must be a bool, got {type(self.moving).__name__}")
        for name, kind in _SIP_FIXED + _SIP_TAIL:
            check_range("Sip", name, getattr(self, name), kind.low, kind.high)
        check_range("Sip", "x", self.x, 0, _POSITION_MASK)
        check_range("Sip", "y", self.y, 0, _POSITION_MASK)
        if not isinstance(self.sonars, tuple):
            object.__setattr__(self, "sonars", tuple(self.sonars))
        for reading in self.sonars:
            if not isinstance(reading, SonarReading):
                raise LocalProtocolError(f"Sip.sonars holds {type(reading).__name__}, not SonarReading")
        missing: str | None = None
        for name, kind in _SIP_EXTENSION:
            value = getattr(self, name)
            if value is None:
                missing = missing or name
            elif missing is not None:
                raise LocalProtocolError(f"Sip.{name} is set but the earlier extension field {missing} is not")
            else:
                check_range("Sip", name, value, kind.low, kind.high)
        if not isinstance(self.extra, bytes):
            raise LocalProtocolError(f"Sip.extra must be bytes, got {type(self.extra).__name__}")
        if self.extra and missing is not None:
            # Decoding reads the next extension field while enough bytes remain, so extra bytes are only possible
            # after all of them, or when fewer remain than the next field needs.
            size = dict(_SIP_EXTENSION)[missing].size
            if len(self.extra) >= size:
                raise LocalProtocolError(f"Sip.extra would be read as {missing}: set {missing} instead")
        check_payload_size("Sip", self.payload)

    @property
    def has_extension(self) -> bool:
        """True if the robot sent at least the first ARCOS extension field."""
        return self.battery_x10 is not None

    @property
    def motors_enabled(self) -> bool:
        """Flags bit 0: the motors are enabled."""
        return bool(self.flags & self.MOTORS_ENABLED)

    @property
    def estop(self) -> bool:
        """Flags bit 5: the emergency stop is engaged (motors will not enable)."""
        return bool(self.flags & self.ESTOP)

    @property
    def sonar_arrays(self) -> int:
        """Flags bits 1-4 as a 4-bit mask of the enabled sonar arrays."""
        return (self.flags & self.SONAR_ARRAYS) >> 1

    @property
    def left_stall(self) -> bool:
        """The left wheel is stalled."""
        return bool(self.stall_bumpers & 0x0001)

    @property
    def right_stall(self) -> bool:
        """The right wheel is stalled."""
        return bool(self.stall_bumpers & 0x0100)

    @property
    def rear_bumpers(self) -> int:
        """The rear bumper switches, bit 0 = the first switch (7 bits)."""
        return (self.stall_bumpers >> 1) & 0x7F

    @property
    def front_bumpers(self) -> int:
        """The front bumper switches, bit 0 = the first switch (7 bits)."""
        return (self.stall_bumpers >> 9) & 0x7F

    def payload(self) -> bytes:
        """The type byte and the fields (no frame)."""
        parts = [bytes((SIP_MOVING if self.moving else SIP_STOPPED,))]
        parts += [struct.pack(kind.format, getattr(self, name)) for name, kind in _SIP_FIXED]
        parts.append(bytes((len(self.sonars),)))
        parts += [struct.pack("<BH", reading.number, reading.range) for reading in self.sonars]
        parts += [struct.pack(kind.format, getattr(self, name)) for name, kind in _SIP_TAIL]
        for name, kind in _SIP_EXTENSION:
            value = getattr(self, name)
            if value is None:
                break
            parts.append(struct.pack(kind.format, value))
        parts.append(self.extra)
        return b"".join(parts)

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> Sip:
        """Decode from a checked payload (type byte 0x32 or 0x33 first).

        Raises:
            RemoteProtocolError: the packet ends before the digout byte (sonar readings included).
        """
        reader = PayloadReader(payload[1:], "SIP")
        numbers = {name: _read(reader, name, kind) for name, kind in _SIP_FIXED}
        numbers["x"] &= _POSITION_MASK
        numbers["y"] &= _POSITION_MASK
        values: dict[str, object] = {"moving": payload[0] == SIP_MOVING, **numbers}
        count = reader.u8("sonar count")
        if reader.remaining < 3 * count:
            raise RemoteProtocolError(f"SIP: {count} sonar readings announced, only {reader.remaining} bytes left")
        values["sonars"] = tuple(
            SonarReading(reader.u8("sonar number"), reader.u16("sonar range")) for _ in range(count)
        )
        for name, kind in _SIP_TAIL:
            values[name] = _read(reader, name, kind)
        for name, kind in _SIP_EXTENSION:
            if reader.remaining < kind.size:
                break
            values[name] = _read(reader, name, kind)
        values["extra"] = reader.rest()
        return cls(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------- CONFIGpac

_STRING = _Field.STRING

_CONFIG_LAYOUT: tuple[tuple[str, _Field], ...] = (
    ("robot_type", _STRING),
    ("subtype", _STRING),
    ("serial", _STRING),
    ("four_mots", _U8),
    ("rot_vel_top", _U16),
    ("trans_vel_top", _U16),
    ("rot_acc_top", _U16),
    ("trans_acc_top", _U16),
    ("pwm_max", _U16),
    ("name", _STRING),
    ("sip_cycle", _U8),
    ("host_baud", _U8),
    ("aux1_baud", _U8),
    ("has_gripper", _U16),
    ("front_sonar", _U16),
    ("rear_sonar", _U8),
    ("low_battery", _U16),
    ("rev_count", _U16),
    ("watchdog", _U16),
    ("normal_mpacs", _U8),
    ("stall_val", _U16),
    ("stall_count", _U16),
    ("joy_vel", _U16),
    ("joy_rvel", _U16),
    ("rot_vel_max", _U16),
    ("trans_vel_max", _U16),
    ("rot_acc", _U16),
    ("rot_decel", _U16),
    ("rot_kp", _U16),
    ("rot_kv", _U16),
    ("rot_ki", _U16),
    ("trans_acc", _U16),
    ("trans_decel", _U16),
    ("trans_kp", _U16),
    ("trans_kv", _U16),
    ("trans_ki", _U16),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigPacket:
    """CONFIGpac (0x20): the robot's identity and its flash configuration, sent on a CONFIG request.

    Attributes are the reference's fields in order, robot units: velocities mm/s and deg/s, accelerations
    mm/s² and deg/s², ``watchdog`` ms, ``sip_cycle`` ms, ``low_battery`` 0.1 V, baud rates as codes
    (0=9600 .. 4=115200); strings are latin-1 text. ``extra`` holds the fields later firmware appends.

    Raises:
        LocalProtocolError: a field out of its wire range, a string with NUL, or too big for one packet.
    """

    robot_type: str = ""
    subtype: str = ""
    serial: str = ""
    four_mots: int = 0
    rot_vel_top: int = 0
    trans_vel_top: int = 0
    rot_acc_top: int = 0
    trans_acc_top: int = 0
    pwm_max: int = 0
    name: str = ""
    sip_cycle: int = 0
    host_baud: int = 0
    aux1_baud: int = 0
    has_gripper: int = 0
    front_sonar: int = 0
    rear_sonar: int = 0
    low_battery: int = 0
    rev_count: int = 0
    watchdog: int = 0
    normal_mpacs: int = 0
    stall_val: int = 0
    stall_count: int = 0
    joy_vel: int = 0
    joy_rvel: int = 0
    rot_vel_max: int = 0
    trans_vel_max: int = 0
    rot_acc: int = 0
    rot_decel: int = 0
    rot_kp: int = 0
    rot_kv: int = 0
    rot_ki: int = 0
    trans_acc: int = 0
    trans_decel: int = 0
    trans_kp: int = 0
    trans_kv: int = 0
    trans_ki: int = 0
    extra: bytes = b""

    def __post_init__(self) -> None:
        for name, kind in _CONFIG_LAYOUT:
            if kind == _STRING:
                encode_text("ConfigPacket", name, getattr(self, name))
            else:
                check_range("ConfigPacket", name, getattr(self, name), kind.low, kind.high)
        if not isinstance(self.extra, bytes):
            raise LocalProtocolError(f"ConfigPacket.extra must be bytes, got {type(self.extra).__name__}")
        check_payload_size("ConfigPacket", self.payload)

    def payload(self) -> bytes:
        """The type byte and the fields (no frame)."""
        parts = [bytes((CONFIG_PACKET,))]
        for name, kind in _CONFIG_LAYOUT:
            value = getattr(self, name)
            if kind == _STRING:
                parts.append(encode_text("ConfigPacket", name, value))
            else:
                parts.append(struct.pack(kind.format, value))
        parts.append(self.extra)
        return b"".join(parts)

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> ConfigPacket:
        """Decode from a checked payload.

        Raises:
            RemoteProtocolError: the packet ends before TransKI, or a string has no terminator.
        """
        reader = PayloadReader(payload[1:], "CONFIGpac")
        values: dict[str, object] = {}
        for name, kind in _CONFIG_LAYOUT:
            values[name] = reader.cstring(name) if kind == _STRING else _read(reader, name, kind)
        values["extra"] = reader.rest()
        return cls(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------- others


@dataclass(frozen=True, slots=True)
class EncoderPacket:
    """ENCODERpac (0x90): the raw wheel encoder counters.

    Attributes:
        left, right: encoder ticks, signed 32-bit.
    """

    left: int
    right: int

    def __post_init__(self) -> None:
        check_range("EncoderPacket", "left", self.left, -(2**31), 2**31 - 1)
        check_range("EncoderPacket", "right", self.right, -(2**31), 2**31 - 1)

    def payload(self) -> bytes:
        """The type byte and the fields (no frame)."""
        return struct.pack("<Bii", ENCODER_PACKET, self.left, self.right)

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> EncoderPacket:
        """Decode from a checked payload.

        Raises:
            RemoteProtocolError: the body is not exactly two 32-bit integers.
        """
        reader = PayloadReader(payload[1:], "ENCODERpac")
        left, right = reader.s32("left"), reader.s32("right")
        reader.finish()
        return cls(left, right)


@dataclass(frozen=True, slots=True)
class IoPacket:
    """IOpac (0xF0): the robot's digital and analog I/O.

    Attributes:
        digital_inputs: one byte per input bank (8 lines each), 0..255.
        digital_outputs: one byte per output bank, 0..255.
        analog_inputs: analog readings, 0..65535 (raw ADC counts).
    """

    digital_inputs: tuple[int, ...] = ()
    digital_outputs: tuple[int, ...] = ()
    analog_inputs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name, kind in (("digital_inputs", _U8), ("digital_outputs", _U8), ("analog_inputs", _U16)):
            values = tuple(getattr(self, name))
            object.__setattr__(self, name, values)
            check_range("IoPacket", f"{name} count", len(values), 0, 0xFF)
            for value in values:
                check_range("IoPacket", name, value, kind.low, kind.high)
        check_payload_size("IoPacket", self.payload)

    def payload(self) -> bytes:
        """The type byte and the fields (no frame)."""
        return b"".join(
            (
                bytes((IO_PACKET, len(self.digital_inputs))),
                bytes(self.digital_inputs),
                bytes((len(self.digital_outputs),)),
                bytes(self.digital_outputs),
                bytes((len(self.analog_inputs),)),
                struct.pack(f"<{len(self.analog_inputs)}H", *self.analog_inputs),
            )
        )

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> IoPacket:
        """Decode from a checked payload.

        Raises:
            RemoteProtocolError: a count announces more values than the packet holds, or bytes are left over.
        """
        reader = PayloadReader(payload[1:], "IOpac")
        digital_inputs = tuple(reader.raw(reader.u8("digital input count"), "digital inputs"))
        digital_outputs = tuple(reader.raw(reader.u8("digital output count"), "digital outputs"))
        count = reader.u8("analog count")
        analog_inputs = tuple(reader.u16("analog input") for _ in range(count))
        reader.finish()
        return cls(digital_inputs, digital_outputs, analog_inputs)


@dataclass(frozen=True, slots=True)
class GripperPacket:
    """GRIPPERpac (0xE0): the gripper's state.

    Attributes:
        gripper_type: gripper type code, 0..255.
        switches: the gripper's switch bits (paddles, beams, lift limits), 0..255.
        grasp_time: the grasp time setting, 20 ms units, 0..255.
    """

    gripper_type: int
    switches: int
    grasp_time: int

    def __post_init__(self) -> None:
        for name in ("gripper_type", "switches", "grasp_time"):
            check_range("GripperPacket", name, getattr(self, name), _U8.low, _U8.high)

    def payload(self) -> bytes:
        """The type byte and the fields (no frame)."""
        return bytes((GRIPPER_PACKET, self.gripper_type, self.switches, self.grasp_time))

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> GripperPacket:
        """Decode from a checked payload.

        Raises:
            RemoteProtocolError: the body is not exactly three bytes.
        """
        reader = PayloadReader(payload[1:], "GRIPPERpac")
        values = reader.u8("type"), reader.u8("switches"), reader.u8("grasp time")
        reader.finish()
        return cls(*values)


@dataclass(frozen=True, slots=True)
class SerauxPacket:
    """SERAUX (0xB0 for AUX1, 0xB8 for AUX2): raw bytes read from an auxiliary serial port.

    Attributes:
        data: the bytes, at most 197.
        port: 1 (packet 0xB0) or 2 (packet 0xB8).
    """

    data: bytes
    port: int = 1

    def __post_init__(self) -> None:
        if self.port not in _SERAUX_TYPES:
            raise LocalProtocolError(f"SerauxPacket.port={self.port!r}: 1 or 2")
        if not isinstance(self.data, bytes):
            raise LocalProtocolError(f"SerauxPacket.data must be bytes, got {type(self.data).__name__}")
        check_payload_size("SerauxPacket", self.payload)

    def payload(self) -> bytes:
        """The type byte and the data (no frame)."""
        return bytes((_SERAUX_TYPES[self.port],)) + self.data

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())

    @classmethod
    def parse(cls, payload: bytes) -> SerauxPacket:
        """Decode from a checked payload (never fails: any bytes are valid data)."""
        return cls(bytes(payload[1:]), SERAUX_PACKETS[payload[0]])


ServerPacket = SyncReply | Sip | ConfigPacket | EncoderPacket | IoPacket | GripperPacket | SerauxPacket
"""Every packet a robot sends that this codec understands."""


def parse_server_packet(payload: bytes) -> ServerPacket | UnknownPacket:
    """Decode a server packet from a checked payload (what a client receives).

    Args:
        payload: the type byte and its data (see :func:`.packets.unframe`).

    Returns:
        The packet as a value, or :class:`.packets.UnknownPacket` for a type this codec does not know (bytes kept).

    Raises:
        RemoteProtocolError: the body does not parse as its type says.
    """
    if not payload:
        raise RemoteProtocolError("empty server payload")
    packet_type = payload[0]
    if packet_type in (SIP_STOPPED, SIP_MOVING):
        return Sip.parse(payload)
    if packet_type <= 2:
        return SyncReply.parse(payload)
    if packet_type == CONFIG_PACKET:
        return ConfigPacket.parse(payload)
    if packet_type == ENCODER_PACKET:
        return EncoderPacket.parse(payload)
    if packet_type == IO_PACKET:
        return IoPacket.parse(payload)
    if packet_type == GRIPPER_PACKET:
        return GripperPacket.parse(payload)
    if packet_type in SERAUX_PACKETS:
        return SerauxPacket.parse(payload)
    return UnknownPacket(packet_type, bytes(payload[1:]))
