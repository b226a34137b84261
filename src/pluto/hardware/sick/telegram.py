"""The SICK LMS 200/291 telegram protocol (RS-232/RS-422), sans-I/O: bytes in, telegrams out, in either direction.

    decoder = LmsDecoder(side="host")          # a host decodes what the scanner sends
    decoder.receive_data(port.read(4096))
    while (event := decoder.next_event()) is not NEED_DATA:
        handle(event)                          # Ack, Nak, MeasuredValues, StatusReply, ModeReply, ...
    port.write(encode(mode_request(Mode.CONTINUOUS)))

A telegram is ``STX (0x02) | address | length (u16 LE: command + data [+ status]) | command | data | [status] |
CRC-16 (u16 LE)``. The host sends to address 0x00 (the scanner's default address); the scanner answers from 0x80
with the command | 0x80 and a status byte before the CRC. The scanner acknowledges each telegram it receives with
one byte, ACK (0x06), or NAK (0x15) when the CRC was wrong. ``side="device"`` decodes what a host sends (for an
emulator of the scanner): :class:`Request` events.
"""

# Strategy: facts from the LMS 2xx telegram listing (as used by the open drivers sicktoolbox and sicklms): the CRC is
# the LMS's own shift-and-xor over every byte from STX to the last data byte, with the generator 0x8005: for each
# byte, the register is shifted left (xor 0x8005 when its top bit falls out), then xored with (byte | previous
# byte << 8). The register is linear in the input, so the CRC of a telegram of n bytes is the xor over i of
# A[n-1-i][byte_i], with A[k][b] the contribution of byte value b found k shifts before the end (the byte's own term
# after k shifts, xor its "previous byte" term in the next position after k-1 shifts). The tables are built once
# (lazily, 820 x 256 words) so a 732-byte scan costs one numpy gather and one xor-reduce instead of 732 Python
# steps; short telegrams (the commands and their replies) take the plain loop.
# The decoder hunts for STX (and, on the host side, the lone ACK/NAK bytes between telegrams), reads the address
# (its top bit says which side sent it: a telegram from the wrong side is garbage), the length (1..MAX_LENGTH) and
# checks the CRC. After a drop it skips only the STX byte, not the length it claimed, so a corrupted length cannot
# swallow the intact telegrams behind it. Complete telegrams are decoded eagerly, so the buffer never holds more than
# one incomplete telegram (< MAX_TELEGRAM bytes) however much garbage arrives. A telegram with a good CRC whose
# data does not parse is counted as malformed and dropped; nothing raises because of what the peer sent.
# The measured values are 16-bit words: the low 13 (8/80 m modes), 14 (16 m) or 15 (32 m) bits are the range in
# the telegram's unit, the top bits flags (fields A, B, C / dazzle). The top 8 codes of the range field are the
# scanner's error codes (no echo, dazzle, ...): decoded here as "no echo" (the largest range). Bits 14-15 of the
# count word give the unit (00 cm, 01 mm).

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData, StreamDecoder
from pluto.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ACK",
    "BAUD_CODES",
    "NAK",
    "NEED_DATA",
    "PASSWORD",
    "RANGE_MODES",
    "STX",
    "Ack",
    "Command",
    "ConfigReply",
    "ConnectionClosed",
    "DecoderStatistics",
    "LmsConfig",
    "LmsDecoder",
    "MeasuredValues",
    "Mode",
    "ModeReply",
    "Nak",
    "NeedData",
    "PowerOn",
    "RangeMode",
    "Reply",
    "ReplyCode",
    "Request",
    "StatusReply",
    "UnknownReply",
    "VariantReply",
    "config_read_request",
    "config_request",
    "crc16",
    "encode",
    "measured_values_reply",
    "mode_request",
    "status_reply",
    "status_request",
    "variant_request",
]

STX: Final = 0x02
ACK: Final = 0x06
NAK: Final = 0x15
DEVICE_ADDRESS: Final = 0x00
"""The address a host sends to (the scanner's default); replies come from it | 0x80."""
REPLY_FLAG: Final = 0x80
MAX_LENGTH: Final = 814
"""Largest length field accepted: command + 812 data bytes (the listing's limit) + status."""
MAX_TELEGRAM: Final = 4 + MAX_LENGTH + 2
PASSWORD: Final = b"SICK_LMS"
"""The password of the installation mode (the factory default)."""
CRC_POLYNOMIAL: Final = 0x8005
STATUS_DATA_LENGTH: Final = 152
"""Data bytes of a status reply (0xB1)."""
CONFIG_LENGTH: Final = 34
"""Bytes of the LMS configuration block (0x77 request, 0xF4/0xF7 replies)."""


class Command(IntEnum):
    """Commands a host sends (the reply's command is the request's | 0x80)."""

    RESET = 0x10
    OPERATING_MODE = 0x20
    MEASURED_VALUES = 0x30
    """Poll one scan: data 0x01 asks for all the values of the current scan."""
    STATUS = 0x31
    ERRORS = 0x32
    """The error and test messages (sicktoolbox's baud-rate detection asks for them at each rate)."""
    TYPE = 0x3A
    """The type string, e.g. ``LMS200;301063;V02.10``."""
    VARIANT = 0x3B
    PERMANENT_BAUD = 0x66
    """Which rate the scanner starts at: data 0x00 the factory 9600 baud, 0x01 the rate in force now."""
    CONFIG_READ = 0x74
    CONFIG = 0x77


class ReplyCode(IntEnum):
    """Commands of the scanner's telegrams."""

    POWER_ON = 0x90
    RESET = 0x91
    NOT_ACKNOWLEDGED = 0x92
    OPERATING_MODE = 0xA0
    MEASURED_VALUES = 0xB0
    STATUS = 0xB1
    ERRORS = 0xB2
    TYPE = 0xBA
    VARIANT = 0xBB
    PERMANENT_BAUD = 0xE6
    CONFIG_READ = 0xF4
    CONFIG = 0xF7


class Mode(IntEnum):
    """Data bytes of the operating-mode command (0x20)."""

    INSTALLATION = 0x00
    CONTINUOUS = 0x24
    REQUEST = 0x25
    BAUD_38400 = 0x40
    BAUD_19200 = 0x41
    BAUD_9600 = 0x42
    BAUD_500K = 0x48


BAUD_CODES: Final[dict[int, Mode]] = {
    9600: Mode.BAUD_9600,
    19200: Mode.BAUD_19200,
    38400: Mode.BAUD_38400,
    500000: Mode.BAUD_500K,
}
"""Operating-mode byte that switches the scanner to each baud rate."""

UNITS_CM: Final = 0
UNITS_MM: Final = 1


@dataclass(frozen=True, slots=True)
class RangeMode:
    """A measuring range: the configuration's measuring-mode byte and units, and the bits of a range word."""

    max_range: float
    measuring_mode: int
    units: int
    range_bits: int

    @property
    def unit(self) -> float:
        """m per count."""
        return 0.01 if self.units == UNITS_CM else 0.001


RANGE_MODES: Final[dict[tuple[str, int], RangeMode]] = {
    ("cm", 80): RangeMode(80.0, 0x00, UNITS_CM, 13),  # 8/80 m, fields A, B, dazzle
    ("mm", 8): RangeMode(8.0, 0x00, UNITS_MM, 13),
    ("mm", 16): RangeMode(16.0, 0x04, UNITS_MM, 14),  # 16 m, fields A, B
    ("mm", 32): RangeMode(32.0, 0x06, UNITS_MM, 15),  # 32 m, field A
}
"""(units, range in m) -> the scanner's settings: cm gives 80 m; mm 8, 16 or 32 m."""

ERROR_CODES: Final = 8
"""The top codes of a range field are error codes (no echo, dazzle, ...), not ranges."""


# ------------------------------------------------------------------------------------------------ CRC


def _shift(register: int) -> int:
    return ((register << 1) & 0xFFFF) ^ (CRC_POLYNOMIAL if register & 0x8000 else 0)


def _crc_loop(data: bytes | bytearray | memoryview) -> int:
    register, previous = 0, 0
    for byte in data:
        register = _shift(register) ^ (byte | previous << 8)
        previous = byte
    return register


_TABLES: NDArray[np.uint16] | None = None


def _tables() -> NDArray[np.uint16]:
    """A[k][b]: what byte value b contributes to the CRC when k bytes follow it."""
    global _TABLES
    if _TABLES is None:
        values = np.arange(256, dtype=np.uint32)
        n = MAX_TELEGRAM
        own = np.empty((n + 1, 256), dtype=np.uint32)  # S^k(b)
        high = np.empty((n + 1, 256), dtype=np.uint32)  # S^k(b << 8)
        own[0], high[0] = values, values << 8
        for k in range(1, n + 1):
            for table in (own, high):
                prev = table[k - 1]
                table[k] = ((prev << 1) & 0xFFFF) ^ np.where(prev & 0x8000, CRC_POLYNOMIAL, 0)
        combined = own.copy()
        combined[1:] ^= high[:-1]
        _TABLES = combined.astype(np.uint16)
    return _TABLES


def crc16(data: bytes | bytearray | memoryview) -> int:
    """The LMS CRC-16 of ``data`` (a telegram from STX to its last data or status byte).

    Raises:
        LocalProtocolError: longer than a telegram (MAX_TELEGRAM bytes).
    """
    n = len(data)
    if n < 64:
        return _crc_loop(data)
    if n > MAX_TELEGRAM:
        raise LocalProtocolError(f"a telegram has at most {MAX_TELEGRAM} bytes, not {n}")
    values = np.frombuffer(data, dtype=np.uint8)
    rows = _tables()[n - 1 :: -1][:n] if n > 0 else _tables()[:0]
    return int(np.bitwise_xor.reduce(rows[np.arange(n), values]))


# ------------------------------------------------------------------------------------------------ messages


@dataclass(frozen=True, slots=True)
class Request:
    """A telegram from the host: ``command`` and its ``data``."""

    command: int
    data: bytes = b""
    address: int = DEVICE_ADDRESS


@dataclass(frozen=True, slots=True)
class Reply:
    """A telegram from the scanner, undecoded: ``command`` (request | 0x80), ``data`` and its status byte."""

    command: int
    data: bytes = b""
    status: int = 0
    address: int = DEVICE_ADDRESS | REPLY_FLAG


@dataclass(frozen=True, slots=True)
class Ack:
    """The scanner received a telegram (0x06)."""


@dataclass(frozen=True, slots=True)
class Nak:
    """The scanner received a telegram with a wrong CRC (0x15)."""


def status_is_fatal(status: int) -> bool:
    """True when a reply's status byte reports a fatal error (bits 0-2 = 4): the scanner must be restarted."""
    return status & 0x07 == 4


@dataclass(frozen=True, slots=True)
class _ReplyBase:
    status: int

    @property
    def fatal(self) -> bool:
        """The status byte reports a fatal error."""
        return status_is_fatal(self.status)


@dataclass(frozen=True, slots=True)
class MeasuredValues(_ReplyBase):
    """A scan (0xB0): the raw 16-bit words of each point, flags included, and the unit of their ranges.

    Attributes:
        words: (count,) uint16, the range in the low bits, flags in the top ones (see :meth:`ranges`).
        units: UNITS_CM or UNITS_MM, from bits 14-15 of the count word.
        partial: the partial-scan index (bits 11-12): 0 for a whole scan.
    """

    words: NDArray[np.uint16] = field(compare=False)
    units: int = UNITS_CM
    partial: int = 0

    @property
    def count(self) -> int:
        return int(self.words.size)

    def ranges(self, range_bits: int = 13) -> NDArray[np.float64]:
        """The ranges in m; an error code (no echo, dazzle) reads as the largest range of the field.

        Args:
            range_bits: bits of a word that hold the range (13 in the 8/80 m modes, 14 at 16 m, 15 at 32 m).
        """
        field_max = (1 << range_bits) - 1
        raw = self.words & field_max
        unit = 0.01 if self.units == UNITS_CM else 0.001
        limit = field_max - ERROR_CODES
        return np.where(raw > limit, limit, raw).astype(np.float64) * unit


@dataclass(frozen=True, slots=True)
class StatusReply(_ReplyBase):
    """The scanner's status (0xB1), the fields a driver needs."""

    version: str
    operating_mode: int
    device_error: bool
    measuring_mode: int
    angle: int
    resolution: int
    units: int
    data: bytes = field(repr=False, compare=False, default=b"")


@dataclass(frozen=True, slots=True)
class ModeReply(_ReplyBase):
    """Answer to an operating-mode change (0xA0): ``accepted`` (data byte 0x00) or not."""

    accepted: bool


@dataclass(frozen=True, slots=True)
class VariantReply(_ReplyBase):
    """Answer to a variant change (0xBB): accepted, and the angle (°) and resolution (1/100 °) now in force."""

    accepted: bool
    angle: int
    resolution: int


@dataclass(frozen=True, slots=True)
class ConfigReply(_ReplyBase):
    """The configuration block: of a read (0xF4, ``accepted`` True) or of a change (0xF7)."""

    accepted: bool
    config: LmsConfig


@dataclass(frozen=True, slots=True)
class PowerOn(_ReplyBase):
    """The telegram a scanner sends after power-on or a restart (0x90), with its software version."""

    version: str


@dataclass(frozen=True, slots=True)
class UnknownReply(_ReplyBase):
    """A telegram with a good CRC of a command this codec does not decode."""

    command: int
    data: bytes


_CONFIG = struct.Struct("<HBBBBB27s")


@dataclass(frozen=True, slots=True)
class LmsConfig:
    """The LMS configuration block (34 bytes), the fields a driver sets; the rest is carried unchanged.

    Attributes:
        blanking: largest object left undetected, cm.  stop_threshold, sensitivity: the LMS 200's stop and peak
        thresholds (sensitivity on an LMS 211/221/291).  availability: level and flags.  measuring_mode: see
        RANGE_MODES.  units: UNITS_CM or UNITS_MM.  rest: bytes 7..33 (fields, contours, restart, evaluation).
    """

    blanking: int = 0
    stop_threshold: int = 0
    sensitivity: int = 0
    availability: int = 0
    measuring_mode: int = 0
    units: int = UNITS_CM
    rest: bytes = bytes(27)

    def pack(self) -> bytes:
        """The 34 bytes of the block.

        Raises:
            LocalProtocolError: a field out of range.
        """
        try:
            return _CONFIG.pack(
                self.blanking,
                self.stop_threshold,
                self.sensitivity,
                self.availability,
                self.measuring_mode,
                self.units,
                self.rest,
            )
        except struct.error as err:
            raise LocalProtocolError(f"configuration field out of range: {err}") from None

    @classmethod
    def unpack(cls, block: bytes) -> LmsConfig:
        """The block's fields.

        Raises:
            RemoteProtocolError: not 34 bytes.
        """
        if len(block) != CONFIG_LENGTH:
            raise RemoteProtocolError(f"a configuration block has {CONFIG_LENGTH} bytes, not {len(block)}")
        b, stop, sens, avail, mode, units, rest = _CONFIG.unpack(block)
        return cls(b, stop, sens, avail, mode, units, rest)


ReplyEvent = MeasuredValues | StatusReply | ModeReply | VariantReply | ConfigReply | PowerOn | UnknownReply
"""The typed telegrams of a scanner."""


def _text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("ascii", "replace").strip()


def _parse_reply(command: int, data: bytes, status: int) -> ReplyEvent:
    """The typed event of a scanner's telegram.

    Raises:
        RemoteProtocolError: the data does not fit its command.
    """
    n = len(data)
    if command == ReplyCode.MEASURED_VALUES:
        if n < 2:
            raise RemoteProtocolError("measured values without a count word")
        word = data[0] | data[1] << 8
        count = word & 0x03FF
        if n < 2 + 2 * count:
            raise RemoteProtocolError(f"measured values: {count} points announced, {(n - 2) // 2} sent")
        words = np.frombuffer(data, dtype="<u2", count=count, offset=2).astype(np.uint16)
        return MeasuredValues(status, words, units=(word >> 14) & 0x03, partial=(word >> 11) & 0x03)
    if command == ReplyCode.STATUS:
        if n < STATUS_DATA_LENGTH:
            raise RemoteProtocolError(f"a status reply has {STATUS_DATA_LENGTH} data bytes, not {n}")
        angle, resolution = struct.unpack_from("<HH", data, 106)
        return StatusReply(
            status,
            version=_text(data[0:7]),
            operating_mode=data[7],
            device_error=data[8] != 0,
            measuring_mode=data[101],
            angle=angle,
            resolution=resolution,
            units=data[121],
            data=data,
        )
    if command == ReplyCode.OPERATING_MODE:
        if n < 1:
            raise RemoteProtocolError("an operating-mode reply without its result byte")
        return ModeReply(status, accepted=data[0] == 0)
    if command == ReplyCode.VARIANT:
        if n < 5:
            raise RemoteProtocolError(f"a variant reply has 5 data bytes, not {n}")
        angle, resolution = struct.unpack_from("<HH", data, 1)
        return VariantReply(status, accepted=data[0] == 1, angle=angle, resolution=resolution)
    if command == ReplyCode.CONFIG:
        if n < 1 + CONFIG_LENGTH:
            raise RemoteProtocolError(f"a configuration reply has {1 + CONFIG_LENGTH} data bytes, not {n}")
        return ConfigReply(status, accepted=data[0] == 1, config=LmsConfig.unpack(data[1 : 1 + CONFIG_LENGTH]))
    if command == ReplyCode.CONFIG_READ:
        if n < CONFIG_LENGTH:
            raise RemoteProtocolError(f"a configuration has {CONFIG_LENGTH} data bytes, not {n}")
        return ConfigReply(status, accepted=True, config=LmsConfig.unpack(data[:CONFIG_LENGTH]))
    if command == ReplyCode.POWER_ON:
        return PowerOn(status, version=_text(data))
    return UnknownReply(status, command, data)


# ------------------------------------------------------------------------------------------------ encoding


def _telegram(address: int, command: int, body: bytes) -> bytes:
    if not 0 <= command <= 0xFF or not 0 <= address <= 0xFF:
        raise LocalProtocolError(f"command and address are bytes, not {command!r}, {address!r}")
    length = 1 + len(body)
    if length > MAX_LENGTH:
        raise LocalProtocolError(f"a telegram carries at most {MAX_LENGTH - 1} bytes, not {len(body)}")
    head = bytes((STX, address, length & 0xFF, length >> 8, command)) + body
    return head + crc16(head).to_bytes(2, "little")


def encode(message: Request | Reply) -> bytes:
    """The bytes of a telegram, CRC included.

    Raises:
        LocalProtocolError: a command, address or status that is not a byte, or too much data.
    """
    if isinstance(message, Reply):
        if not 0 <= message.status <= 0xFF:
            raise LocalProtocolError(f"a status is a byte, not {message.status!r}")
        return _telegram(message.address, message.command, message.data + bytes((message.status,)))
    return _telegram(message.address, message.command, message.data)


def mode_request(mode: Mode | int, password: bytes = PASSWORD) -> Request:
    """Change the operating mode (0x20): installation mode takes the password, the others none."""
    data = bytes((int(mode),)) + (password if mode == Mode.INSTALLATION else b"")
    return Request(Command.OPERATING_MODE, data)


def status_request() -> Request:
    """Ask for the status (0x31; answered with 0xB1)."""
    return Request(Command.STATUS)


def variant_request(angle: int, resolution: int) -> Request:
    """Set the variant (0x3B): ``angle`` 100 or 180 °, ``resolution`` 25, 50 or 100 (1/100 °).

    Raises:
        LocalProtocolError: an angle or resolution the LMS does not have.
    """
    if angle not in (100, 180) or resolution not in (25, 50, 100):
        raise LocalProtocolError(f"no LMS variant {angle}° at {resolution / 100:g}°")
    return Request(Command.VARIANT, struct.pack("<HH", angle, resolution))


def config_read_request() -> Request:
    """Ask for the configuration block (0x74; answered with 0xF4)."""
    return Request(Command.CONFIG_READ)


def config_request(config: LmsConfig) -> Request:
    """Write the configuration block (0x77; answered with 0xF7; needs the installation mode)."""
    return Request(Command.CONFIG, config.pack())


def measured_values_reply(words: NDArray[np.uint16], units: int, status: int = 0) -> Reply:
    """A scan as the scanner sends it (0xB0): ``words`` are the range words (flags included)."""
    if words.size > 0x03FF:
        raise LocalProtocolError(f"a scan has at most 1023 points, not {words.size}")
    head = struct.pack("<H", words.size | (units & 0x03) << 14)
    return Reply(ReplyCode.MEASURED_VALUES, head + words.astype("<u2").tobytes(), status)


def status_reply(
    *,
    version: str,
    operating_mode: int,
    measuring_mode: int,
    angle: int,
    resolution: int,
    units: int,
    baud: int,
    device_error: bool = False,
    status: int = 0,
) -> Reply:
    """A status reply (0xB1) as a scanner sends it (the fields a driver reads; the rest zero)."""
    data = bytearray(STATUS_DATA_LENGTH)
    data[0:7] = version.encode("ascii")[:7].ljust(7, b"\0")
    data[7] = operating_mode
    data[8] = 1 if device_error else 0
    data[101] = measuring_mode
    struct.pack_into("<HH", data, 106, angle, resolution)
    # the baud rate as the LMS reports it: 0x8000 | (1 MHz / baud - 1)
    struct.pack_into("<H", data, 115, 0x8000 | max(0, round(1_000_000 / baud) - 1))
    data[121] = units
    return Reply(ReplyCode.STATUS, bytes(data), status)


# ------------------------------------------------------------------------------------------------ decoding

Side = Literal["host", "device"]
Event = (
    MeasuredValues
    | StatusReply
    | ModeReply
    | VariantReply
    | ConfigReply
    | PowerOn
    | UnknownReply
    | Ack
    | Nak
    | Request
    | ConnectionClosed
)

_HOST_MARKS = re.compile(b"[\x02\x06\x15]")
_ACK, _NAK = Ack(), Nak()


@dataclass(frozen=True, slots=True)
class DecoderStatistics:
    """What the decoder has seen.

    Attributes:
        telegrams: telegrams with a good frame and CRC (malformed ones included).  bytes: bytes received.
        bad_crc: telegrams dropped for a wrong CRC.  bad_header: an address from the wrong side or an impossible
        length.  garbage_bytes: bytes skipped while hunting for STX, the remains of dropped telegrams included.
        malformed: good CRC, data that does not parse.  acks, naks: lone ACK and NAK bytes (host side).
    """

    telegrams: int = 0
    bytes: int = 0
    bad_crc: int = 0
    bad_header: int = 0
    garbage_bytes: int = 0
    malformed: int = 0
    acks: int = 0
    naks: int = 0


class LmsDecoder(StreamDecoder[Event]):
    """Streaming decoder of LMS telegrams (sans-I/O).

    Args:
        side: "host" decodes what a scanner sends (replies, scans, ACK/NAK); "device" decodes what a host sends
            (:class:`Request`).

    Raises:
        LocalProtocolError: an unknown side.
    """

    def __init__(self, side: Side = "host") -> None:
        if side not in ("host", "device"):
            raise LocalProtocolError(f"side must be 'host' or 'device', not {side!r}")
        super().__init__()
        self.side: Side = side
        self.last_error: str | None = None
        """Why the last malformed telegram was dropped, or None."""
        self._counts = dict.fromkeys(DecoderStatistics.__slots__, 0)

    def statistics(self) -> DecoderStatistics:
        """A snapshot of the counters."""
        return DecoderStatistics(**(self._counts | {"bytes": self._bytes, "garbage_bytes": self._garbage}))

    def _process(self) -> None:
        buffer, counts = self._buffer, self._counts
        host = self.side == "host"
        size, pos = len(buffer), 0
        while pos < size:
            if host:
                match = _HOST_MARKS.search(buffer, pos)
                start = match.start() if match is not None else -1
            else:
                start = buffer.find(STX, pos)
            if start < 0:
                self._garbage += size - pos
                pos = size
                break
            self._garbage += start - pos
            pos = start
            mark = buffer[pos]
            if mark != STX:
                counts["acks" if mark == ACK else "naks"] += 1
                self._events.append(_ACK if mark == ACK else _NAK)
                pos += 1
                continue
            if size - pos < 4:
                break
            address = buffer[pos + 1]
            length = buffer[pos + 2] | buffer[pos + 3] << 8
            if bool(address & REPLY_FLAG) != host or not (2 if host else 1) <= length <= MAX_LENGTH:
                counts["bad_header"] += 1
                self._garbage += 1
                pos += 1
                continue
            end = pos + 4 + length + 2
            if end > size:
                break
            if crc16(memoryview(buffer)[pos : end - 2]) != buffer[end - 2] | buffer[end - 1] << 8:
                counts["bad_crc"] += 1
                self._garbage += 1
                pos += 1
                continue
            command = buffer[pos + 4]
            counts["telegrams"] += 1
            if host:
                data, status = bytes(buffer[pos + 5 : end - 3]), buffer[end - 3]
                try:
                    event: Event = _parse_reply(command, data, status)
                except RemoteProtocolError as err:
                    counts["malformed"] += 1
                    self.last_error = str(err)
                    pos = end
                    continue
            else:
                event = Request(command, bytes(buffer[pos + 5 : end - 2]), address)
            self._events.append(event)
            pos = end
        del buffer[:pos]
