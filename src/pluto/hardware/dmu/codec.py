"""The Crossbow DMU/VG serial protocol as a pure codec (no I/O, no clock, no threads), for either end of the line.

    decoder = CrossbowDecoder(role="host", mode="angle")    # the host decodes what the unit sends
    decoder.receive_data(port.read(256))
    while (event := decoder.next_event()) is not NEED_DATA:
        handle(event)                                       # AngleData, ScaledData, VoltageData, Reply

``role="device"`` decodes what a host sends (one-byte :class:`Command` events), for an emulator of the unit.

The layout (Crossbow DMU/VG series user's manuals, VG400CA/VG600CA "angle mode" and "scaled sensor mode"; the
header, command letters, checksum and scale factors agree with the AHRS400 host drivers of the xbow4x and xbow400
ROS packages, whose AHRS packets carry a yaw and three magnetometer words more):

=================  =======  ================================================================================
packet             bytes    content, after the header byte 0xFF (big-endian signed 16-bit words)
=================  =======  ================================================================================
angle mode         22       roll, pitch, roll rate, pitch rate, yaw rate, ax, ay, az, temperature, time, sum
scaled mode        18       roll rate, pitch rate, yaw rate, ax, ay, az, temperature, time, sum
voltage mode       18       the same channels as scaled mode, as raw unsigned 12-bit converter counts
=================  =======  ================================================================================

- checksum: the sum of every byte after the header and before the checksum, modulo 256;
- angle = word · 180° / 2^15; rate = word · RATE_RANGE · 1.5 / 2^15 (°/s); acceleration = word · G_RANGE · 1.5 /
  2^15 (g); temperature = (word · 5 / 4096 − 1.375) · 44.4 °C; time: a free-running counter of the unit (wraps);
- frame of the unit: x forward, y right, z down (a clockwise turn seen from above is a positive z rate); angles: roll
  about x (right side down positive), pitch about y (nose up positive); accelerations as the manuals count them:
  gravity is an acceleration directed down, positive along z, so a unit sitting level reads 0 on x and y and +1 g
  on z (the DMU/VG700 user's manual, "DMU coordinate system"): the negative of the specific force an accelerometer
  measures, on every axis;
- commands (one byte each): ``R`` reset to polled mode, answered ``H`` (also the ping); ``P`` polled mode (no
  answer); ``C`` continuous mode; ``G`` get one packet, and back to polled mode if the unit was streaming; ``a``
  angle mode, answered ``A``; ``c`` scaled mode, answered ``C``; ``r`` voltage mode, answered ``R``; ``S`` the
  serial number, answered with a packet of its 4 bytes (a 32-bit unsigned integer, big-endian: 9911750 is
  ``FF 00 97 3D C6 9A``); ``v`` the unit's type and firmware version, a packet of VERSION_LENGTH (24) ASCII
  characters; ``B`` built-in test, answered ``b``; ``b`` baud-rate change (autobaud), answered ``B``: the host then
  switches its port and sends ``a`` at the new rate, answered ``A``;
- commands with a one-byte argument: ``z<x>`` zero the rate sensors (measure their biases, the unit kept still),
  answered ``Z``; ``x`` = 0 erases the stored biases instead; ``T<x>`` the vertical gyro's erection rate, ``x`` in
  °/min (``T<50>`` is ``54 32``), no answer.

Everything the codec hands out is SI in the unit's own frame (rad, rad/s, m/s², °C); turning it into Pluto's frame
(z up, y left) is the driver's job (:func:`.driver.to_body_frame`).
"""

# Strategy: the unit's packets carry no length and no packet type, so the decoder is told which mode the unit is in
# (the host chose it with a/c/r) and hunts for 0xFF with bytes.find, takes the mode's packet size and checks the sum
# (a C-level sum of a bytes slice). A packet whose sum is wrong costs only its header byte: the next 0xFF is tried,
# so a corrupted byte never swallows the intact packets behind it. Bytes between packets are garbage, except the
# unit's one-byte answers (H, A, C, R), handed out as Reply events: they have no checksum, so a host believes them
# only while it waits for one (the handshake). Complete packets are decoded eagerly in receive_data, so the buffer
# never holds more than one incomplete packet; events queue for next_event. Every byte received is accounted for:
# bytes = garbage_bytes + replies + packet bytes + buffered_bytes. The device role decodes commands one byte at a
# time, counting unknown ones; z and T take the byte after them as their argument, whatever it is (it is binary).

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Final, Literal

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData, StreamDecoder
from pluto.errors import LocalProtocolError

__all__ = [
    "ANGLE_PACKET_SIZE",
    "COMMANDS",
    "COMMAND_ARGUMENTS",
    "HEADER",
    "NEED_DATA",
    "REPLIES",
    "SCALED_PACKET_SIZE",
    "VERSION_LENGTH",
    "AngleData",
    "Command",
    "ConnectionClosed",
    "CrossbowDecoder",
    "DecoderStatistics",
    "DmuScale",
    "Event",
    "LocalProtocolError",
    "Mode",
    "NeedData",
    "Reply",
    "ScaledData",
    "VoltageData",
    "checksum",
    "encode",
    "serial_number_packet",
    "version_packet",
]

HEADER: Final = 0xFF
ANGLE_PACKET_SIZE: Final = 22
SCALED_PACKET_SIZE: Final = 18
STANDARD_GRAVITY: Final = 9.80665

Mode = Literal["angle", "scaled", "voltage"]
PACKET_SIZE: Final[dict[str, int]] = {"angle": ANGLE_PACKET_SIZE, "scaled": SCALED_PACKET_SIZE, "voltage": 18}
COMMANDS: Final = frozenset(b"RPCGacrSvBbzT")
"""The command bytes a unit understands."""
COMMAND_ARGUMENTS: Final = frozenset(b"zT")
"""The commands followed by a one-byte argument."""
REPLIES: Final = frozenset(b"HACRZbB")
"""The unit's one-byte answers: H to R (ping), A to a, C to c, R to r, Z to z, b to B, B to b."""
VERSION_LENGTH: Final = 24
"""ASCII characters of the version packet's body (the answer to ``v``)."""
MODE_COMMAND: Final[dict[str, bytes]] = {"angle": b"a", "scaled": b"c", "voltage": b"r"}
MODE_REPLY: Final[dict[str, bytes]] = {"angle": b"A", "scaled": b"C", "voltage": b"R"}

_ANGLE = struct.Struct(">10h")
_SCALED = struct.Struct(">8h")
_VOLTAGE = struct.Struct(">8H")
_WORD = 32768.0


@dataclass(frozen=True, slots=True)
class DmuScale:
    """The ranges of a unit (on its label and in its calibration sheet).

    Attributes:
        rate_range: full-scale angular rate, °/s (100 for a VG400CA-100, 200 for a -200).
        g_range: full-scale acceleration, g (2 on most DMU/VG units, 4 on some).
    """

    rate_range: float = 100.0
    g_range: float = 2.0

    def __post_init__(self) -> None:
        for name, value in (("rate_range", self.rate_range), ("g_range", self.g_range)):
            if not (math.isfinite(value) and value > 0.0):
                raise LocalProtocolError(f"{name} must be > 0, got {value!r}")

    @property
    def angle_per_count(self) -> float:
        """rad per count of an angle word."""
        return math.pi / _WORD

    @property
    def rate_per_count(self) -> float:
        """rad/s per count of a rate word."""
        return math.radians(self.rate_range * 1.5) / _WORD

    @property
    def accel_per_count(self) -> float:
        """m/s² per count of an acceleration word."""
        return self.g_range * 1.5 * STANDARD_GRAVITY / _WORD


def temperature_of(word: int) -> float:
    """°C of the temperature sensor's word."""
    return (word * 5.0 / 4096.0 - 1.375) * 44.4


def temperature_word(celsius: float) -> int:
    """The temperature sensor's word for ``celsius``."""
    return round((celsius / 44.4 + 1.375) * 4096.0 / 5.0)


@dataclass(frozen=True, slots=True)
class AngleData:
    """An angle-mode packet, SI in the unit's frame (x forward, y right, z down).

    Attributes:
        roll: about x, rad.  pitch: about y, rad (nose up positive).
        rates: about x, y, z, rad/s.  accelerations: specific force along x, y, z, m/s².
        temperature: °C.  time: the unit's free-running counter.
    """

    roll: float
    pitch: float
    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]
    temperature: float = 25.0
    time: int = 0


@dataclass(frozen=True, slots=True)
class ScaledData:
    """A scaled-mode packet: rates (rad/s) and accelerations (m/s²) in the unit's frame, °C, time counter."""

    rates: tuple[float, float, float]
    accelerations: tuple[float, float, float]
    temperature: float = 25.0
    time: int = 0


@dataclass(frozen=True, slots=True)
class VoltageData:
    """A voltage-mode packet: the converter counts of the three rate sensors, three accelerometers and the
    temperature sensor (0..4095 for 0..5 V), and the time counter."""

    counts: tuple[int, int, int, int, int, int, int]
    time: int = 0


@dataclass(frozen=True, slots=True)
class Reply:
    """A one-byte answer of the unit: ``H`` (to R), ``A`` (to a), ``C`` (to c), ``R`` (to r)."""

    code: str


@dataclass(frozen=True, slots=True)
class Command:
    """A command of the host (see :data:`COMMANDS`): one byte, and for ``z`` and ``T`` its argument byte."""

    code: str
    argument: int | None = None

    def __post_init__(self) -> None:
        if len(self.code) != 1 or ord(self.code) not in COMMANDS:
            raise LocalProtocolError(f"not a Crossbow command: {self.code!r}")
        takes = ord(self.code) in COMMAND_ARGUMENTS
        if takes and not (self.argument is not None and 0 <= self.argument <= 0xFF):
            raise LocalProtocolError(f"the command {self.code!r} takes a one-byte argument, not {self.argument!r}")
        if not takes and self.argument is not None:
            raise LocalProtocolError(f"the command {self.code!r} takes no argument")


Event = AngleData | ScaledData | VoltageData | Reply | Command | ConnectionClosed
"""What :meth:`CrossbowDecoder.next_event` returns besides NEED_DATA."""


@dataclass(frozen=True, slots=True)
class DecoderStatistics:
    """What the decoder has seen.

    Attributes:
        packets: packets with a good checksum.  bytes: bytes received.  bad_checksum: headers whose packet's sum
        was wrong (each dropped by one byte).  garbage_bytes: bytes skipped.  replies: one-byte answers (host) or
        commands (device) decoded.
    """

    packets: int = 0
    bytes: int = 0
    bad_checksum: int = 0
    garbage_bytes: int = 0
    replies: int = 0


def checksum(body: bytes | bytearray | memoryview) -> int:
    """The packet's checksum: the sum of the bytes between the header and the checksum byte, modulo 256."""
    return sum(body) & 0xFF


def _word(value: float, per_count: float) -> int:
    if not math.isfinite(value):
        raise LocalProtocolError(f"cannot encode {value!r}")
    return max(-32768, min(32767, round(value / per_count)))


def encode(message: AngleData | ScaledData | VoltageData | Command | Reply, scale: DmuScale | None = None) -> bytes:
    """The bytes of a packet (device side), of a reply (device side) or of a command (host side).

    Values beyond a word's range saturate, as the unit's own output does.

    Raises:
        LocalProtocolError: a value that is not finite, or a count outside 0..65535.
    """
    if isinstance(message, Command) and message.argument is not None:
        return message.code.encode("ascii") + bytes((message.argument,))
    if isinstance(message, Command | Reply):
        return message.code.encode("ascii")
    s = scale or DmuScale()
    if isinstance(message, VoltageData):
        if not all(0 <= c <= 0xFFFF for c in message.counts):
            raise LocalProtocolError(f"voltage counts must be 0..65535: {message.counts}")
        body = _VOLTAGE.pack(*message.counts, message.time & 0xFFFF)
    else:
        words = [_word(r, s.rate_per_count) for r in message.rates]
        words += [_word(a, s.accel_per_count) for a in message.accelerations]
        words += [max(-32768, min(32767, temperature_word(message.temperature))), _signed(message.time)]
        if isinstance(message, AngleData):
            angles = [_word(message.roll, s.angle_per_count), _word(message.pitch, s.angle_per_count)]
            body = _ANGLE.pack(*angles, *words)
        else:
            body = _SCALED.pack(*words)
    return bytes((HEADER,)) + body + bytes((checksum(body),))


def serial_number_packet(serial: int) -> bytes:
    """The unit's answer to ``S``: header, the serial number (4 bytes, big-endian), checksum.

    Raises:
        LocalProtocolError: a serial number that is not a 32-bit unsigned integer.
    """
    if not 0 <= serial <= 0xFFFFFFFF:
        raise LocalProtocolError(f"a serial number is a 32-bit unsigned integer, not {serial!r}")
    body = serial.to_bytes(4, "big")
    return bytes((HEADER,)) + body + bytes((checksum(body),))


def version_packet(version: str) -> bytes:
    """The unit's answer to ``v``: header, its type and firmware version (VERSION_LENGTH ASCII characters, padded
    with spaces), checksum.

    Raises:
        LocalProtocolError: a version that is not ASCII or longer than VERSION_LENGTH.
    """
    try:
        body = version.encode("ascii")
    except UnicodeEncodeError:
        raise LocalProtocolError(f"the version is ASCII, not {version!r}") from None
    if len(body) > VERSION_LENGTH:
        raise LocalProtocolError(f"the version has at most {VERSION_LENGTH} characters, not {len(body)}")
    body = body.ljust(VERSION_LENGTH, b" ")
    return bytes((HEADER,)) + body + bytes((checksum(body),))


def _signed(counter: int) -> int:
    counter &= 0xFFFF
    return counter - 0x10000 if counter >= 0x8000 else counter


class CrossbowDecoder(StreamDecoder[Event]):
    """Streaming decoder of the Crossbow DMU/VG protocol (sans-I/O).

    Args:
        role: ``"host"`` decodes what the unit sends (packets and replies); ``"device"`` decodes commands.
        mode: the unit's output mode (host role): which packets to expect; may be changed with :attr:`mode`.
        scale: the unit's ranges.

    Raises:
        LocalProtocolError: an unknown role or mode.
    """

    def __init__(
        self, role: Literal["host", "device"] = "host", mode: Mode = "angle", scale: DmuScale | None = None
    ) -> None:
        if role not in ("host", "device"):
            raise LocalProtocolError(f"role must be 'host' or 'device', not {role!r}")
        super().__init__()
        self.role = role
        self.scale = scale or DmuScale()
        self._mode: Mode = "angle"
        self.mode = mode
        self._packets = 0
        self._bad_checksum = 0
        self._replies = 0
        self._awaiting: str | None = None  # (device role) a command whose argument byte is still to come

    @property
    def mode(self) -> Mode:
        """The output mode of the unit, which sets the packet size expected."""
        return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        if mode not in PACKET_SIZE:
            raise LocalProtocolError(f"mode must be one of {', '.join(PACKET_SIZE)}, not {mode!r}")
        self._mode = mode

    @property
    def packet_size(self) -> int:
        """Bytes of one packet in the current mode."""
        return PACKET_SIZE[self._mode]

    def statistics(self) -> DecoderStatistics:
        """A snapshot of the counters."""
        return DecoderStatistics(self._packets, self._bytes, self._bad_checksum, self._garbage, self._replies)

    def _process(self) -> None:
        if self.role == "device":
            self._commands(self._buffer)
            self._buffer.clear()
        else:
            self._packets_of_buffer()

    def _commands(self, data: bytes | bytearray) -> None:
        for byte in data:
            if self._awaiting is not None:  # any byte: the argument is binary
                self._events.append(Command(self._awaiting, byte))
                self._awaiting = None
            elif byte in COMMAND_ARGUMENTS:
                self._replies += 1
                self._awaiting = chr(byte)
            elif byte in COMMANDS:
                self._replies += 1
                self._events.append(Command(chr(byte)))
            else:
                self._garbage += 1

    def _gap(self, gap: bytes | bytearray) -> None:
        """Bytes between packets: the unit's one-byte replies, or garbage."""
        for byte in gap:
            if byte in REPLIES:
                self._replies += 1
                self._events.append(Reply(chr(byte)))
            else:
                self._garbage += 1

    def _packets_of_buffer(self) -> None:
        buffer = self._buffer
        size = len(buffer)
        length = PACKET_SIZE[self._mode]
        pos = 0
        while pos < size:
            start = buffer.find(HEADER, pos)
            if start < 0:
                self._gap(buffer[pos:size])
                pos = size
                break
            if start > pos:
                self._gap(buffer[pos:start])
            pos = start
            end = pos + length
            if end > size:
                break
            if (sum(buffer[pos + 1 : end - 1]) & 0xFF) != buffer[end - 1]:
                self._bad_checksum += 1
                self._garbage += 1
                pos += 1
                continue
            self._events.append(self._decode(buffer, pos))
            self._packets += 1
            pos = end
        del buffer[:pos]

    def _decode(self, buffer: bytearray, pos: int) -> AngleData | ScaledData | VoltageData:
        s = self.scale
        rate, acc = s.rate_per_count, s.accel_per_count
        if self._mode == "angle":
            w = _ANGLE.unpack_from(buffer, pos + 1)
            return AngleData(
                roll=w[0] * s.angle_per_count,
                pitch=w[1] * s.angle_per_count,
                rates=(w[2] * rate, w[3] * rate, w[4] * rate),
                accelerations=(w[5] * acc, w[6] * acc, w[7] * acc),
                temperature=temperature_of(w[8]),
                time=w[9] & 0xFFFF,
            )
        if self._mode == "scaled":
            w = _SCALED.unpack_from(buffer, pos + 1)
            return ScaledData(
                rates=(w[0] * rate, w[1] * rate, w[2] * rate),
                accelerations=(w[3] * acc, w[4] * acc, w[5] * acc),
                temperature=temperature_of(w[6]),
                time=w[7] & 0xFFFF,
            )
        v = _VOLTAGE.unpack_from(buffer, pos + 1)
        return VoltageData(counts=(v[0], v[1], v[2], v[3], v[4], v[5], v[6]), time=v[7])
