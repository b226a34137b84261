"""Framing, checksum and client commands of the Pioneer P2OS/ARCOS protocol.

A packet is ``FA FB | N | type-or-command | data... | CKhi CKlo`` where ``N`` counts the bytes after itself,
checksum included. This module knows the frame and the client's command packets (one optional argument: a
signed integer or a length-prefixed string); :mod:`.sip` knows the server's packets.
"""

# Strategy: the frame, the checksum and the argument encoding follow docs/protocols/p2os.md ("Packets",
# "Command numbers") and the byte vectors captured from a real client, which the tests replay. Everything here is
# pure: bytes in, values out. Errors are split as in h11: LocalProtocolError when the caller asks for something the
# protocol cannot say (an argument out of range, a string too long, an unknown command number), RemoteProtocolError
# when bytes from the peer do not parse. Only the strict single-packet parsers raise RemoteProtocolError; the
# streaming decoder (decoder.py) catches it, counts the packet and carries on. Integer arguments accept the whole
# range the wire can carry (a 16-bit magnitude and a sign byte, so -65535..65535) so that any packet decoded from
# the wire re-encodes byte for byte; established clients (ARIA) only ever send -32768..32767.

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum

from pluto.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "ARG_NEGATIVE",
    "ARG_POSITIVE",
    "ARG_STRING",
    "HEADER",
    "MAX_ARGUMENT",
    "MAX_BYTE_COUNT",
    "MAX_PACKET_SIZE",
    "MAX_PAYLOAD_SIZE",
    "MAX_STRING_LENGTH",
    "MIN_BYTE_COUNT",
    "ArgumentKind",
    "Command",
    "CommandPacket",
    "LocalProtocolError",
    "PayloadReader",
    "ProtocolError",
    "RemoteProtocolError",
    "UnknownPacket",
    "checksum",
    "command_argument_kind",
    "encode_command",
    "frame",
    "pack_byte_pair",
    "parse_command",
    "unframe",
    "unpack_byte_pair",
]

HEADER = b"\xfa\xfb"
"""The two bytes that open every packet, in both directions."""
MIN_BYTE_COUNT = 3
"""Smallest valid ``N``: a type/command byte and the two checksum bytes."""
MAX_BYTE_COUNT = 200
"""Largest valid ``N`` (the protocol says N < 201)."""
MAX_PAYLOAD_SIZE = MAX_BYTE_COUNT - 2
"""Largest payload (type/command byte and data, checksum excluded), bytes."""
MAX_PACKET_SIZE = len(HEADER) + 1 + MAX_BYTE_COUNT
"""Largest whole packet on the wire, header to checksum, bytes."""
MAX_STRING_LENGTH = MAX_PAYLOAD_SIZE - 3
"""Longest string argument of a command, bytes: command, 0x2B and the length byte also fit in the payload."""
MAX_ARGUMENT = 0xFFFF
"""Largest magnitude of an integer argument (two bytes and a sign carried by the argument type byte)."""

ARG_POSITIVE = 0x3B
"""Argument type: integer >= 0, two bytes little-endian follow."""
ARG_NEGATIVE = 0x1B
"""Argument type: negative integer, its absolute value follows in two bytes little-endian."""
ARG_STRING = 0x2B
"""Argument type: string, a length byte then the characters, no terminator."""


# --------------------------------------------------------------------------------------------------- frame


def checksum(payload: bytes) -> int:
    """The P2OS checksum of a payload (the bytes from the type/command byte to the last data byte).

    Big-endian byte pairs are summed and kept to 16 bits; a byte left over (odd length) is XORed into the low byte.

    Args:
        payload: the ``N - 2`` bytes between the byte count and the checksum.

    Returns:
        The checksum, 0..0xFFFF; it is sent high byte first.
    """
    even = len(payload) & ~1
    words: tuple[int, ...] = struct.unpack_from(f">{even // 2}H", payload)
    total = sum(words) & 0xFFFF
    if even != len(payload):
        total ^= payload[-1]
    return total


def frame(payload: bytes) -> bytes:
    """Wrap a payload into a whole packet: header, byte count, payload, checksum.

    Args:
        payload: the type/command byte and its data, 1..198 bytes.

    Returns:
        The packet as sent on the wire.

    Raises:
        LocalProtocolError: the payload is empty or longer than 198 bytes (N would exceed 200).
    """
    if not 1 <= len(payload) <= MAX_PAYLOAD_SIZE:
        raise LocalProtocolError(f"payload of {len(payload)} bytes: a P2OS payload has 1..{MAX_PAYLOAD_SIZE} bytes")
    return HEADER + bytes((len(payload) + 2,)) + payload + checksum(payload).to_bytes(2, "big")


def unframe(packet: bytes) -> bytes:
    """Check one whole packet (strict) and return its payload.

    Args:
        packet: exactly one packet, header to checksum.

    Returns:
        The payload: the type/command byte and its data.

    Raises:
        RemoteProtocolError: wrong header, impossible byte count, length mismatch or bad checksum.
    """
    if len(packet) < len(HEADER) + 1 + MIN_BYTE_COUNT or packet[:2] != HEADER:
        raise RemoteProtocolError(f"not a P2OS packet: {bytes(packet[:8]).hex(' ')}...")
    count = packet[2]
    if not MIN_BYTE_COUNT <= count <= MAX_BYTE_COUNT:
        raise RemoteProtocolError(f"impossible byte count N={count} (valid: {MIN_BYTE_COUNT}..{MAX_BYTE_COUNT})")
    if len(packet) != 3 + count:
        raise RemoteProtocolError(f"byte count N={count} but {len(packet) - 3} bytes follow it")
    payload = bytes(packet[3:-2])
    expected = checksum(payload)
    received = int.from_bytes(packet[-2:], "big")
    if expected != received:
        raise RemoteProtocolError(f"bad checksum: received 0x{received:04X}, computed 0x{expected:04X}")
    return payload


class PayloadReader:
    """Reads little-endian fields from a payload, raising RemoteProtocolError when it runs out.

    Args:
        data: the bytes to read.
        what: the name of the packet, for error messages.
    """

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def _take(self, size: int, field: str) -> bytes:
        if self.remaining < size:
            raise RemoteProtocolError(
                f"{self._what}: truncated at {field} (offset {self._pos} of the payload, needs {size} bytes, "
                f"{self.remaining} left)"
            )
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def u8(self, field: str) -> int:
        """An unsigned byte."""
        return self._take(1, field)[0]

    def s8(self, field: str) -> int:
        """A signed byte."""
        return int.from_bytes(self._take(1, field), "little", signed=True)

    def u16(self, field: str) -> int:
        """An unsigned 16-bit little-endian integer."""
        return int.from_bytes(self._take(2, field), "little")

    def s16(self, field: str) -> int:
        """A signed 16-bit little-endian integer."""
        return int.from_bytes(self._take(2, field), "little", signed=True)

    def s32(self, field: str) -> int:
        """A signed 32-bit little-endian integer."""
        return int.from_bytes(self._take(4, field), "little", signed=True)

    def raw(self, size: int, field: str) -> bytes:
        """``size`` bytes as they are."""
        return bytes(self._take(size, field))

    def cstring(self, field: str) -> str:
        """A NUL-terminated string (latin-1, so every byte value survives a round trip)."""
        end = self._data.find(b"\x00", self._pos)
        if end < 0:
            raise RemoteProtocolError(f"{self._what}: string {field} at offset {self._pos} has no NUL terminator")
        text = self._data[self._pos : end].decode("latin-1")
        self._pos = end + 1
        return text

    def rest(self) -> bytes:
        """Every byte not read yet."""
        chunk = bytes(self._data[self._pos :])
        self._pos = len(self._data)
        return chunk

    def finish(self) -> None:
        """Check that the whole payload was read.

        Raises:
            RemoteProtocolError: bytes are left over.
        """
        if self.remaining:
            raise RemoteProtocolError(f"{self._what}: {self.remaining} unexpected bytes after the last field")


def check_range(owner: str, field: str, value: int, low: int, high: int) -> None:
    """Raise LocalProtocolError unless ``low <= value <= high`` and ``value`` is an int (not a bool).

    Args:
        owner: the packet type, for the message.
        field: the field name, for the message.
        value: the value to check.
        low, high: the inclusive bounds.

    Raises:
        LocalProtocolError: the value is not an int or is out of range.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise LocalProtocolError(f"{owner}.{field} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise LocalProtocolError(f"{owner}.{field}={value} is out of range {low}..{high}")


def encode_text(owner: str, field: str, text: str) -> bytes:
    """A string field as NUL-terminated latin-1 bytes.

    Raises:
        LocalProtocolError: the text contains NUL or a character outside latin-1.
    """
    if not isinstance(text, str):
        raise LocalProtocolError(f"{owner}.{field} must be a str, got {type(text).__name__}")
    if "\x00" in text:
        raise LocalProtocolError(f"{owner}.{field} contains NUL, which would end the string early")
    try:
        return text.encode("latin-1") + b"\x00"
    except UnicodeEncodeError as err:
        raise LocalProtocolError(f"{owner}.{field}={text!r} is not latin-1 text") from err


def check_payload_size(owner: str, payload: Callable[[], bytes]) -> None:
    """Raise LocalProtocolError if the payload built by ``payload()`` does not fit one packet."""
    size = len(payload())
    if size > MAX_PAYLOAD_SIZE:
        raise LocalProtocolError(f"{owner} needs a payload of {size} bytes; at most {MAX_PAYLOAD_SIZE} fit a packet")


# --------------------------------------------------------------------------------------------------- commands


class Command(IntEnum):
    """Client command numbers (the byte after N in a client packet).

    SYNC0/PULSE, SYNC1/OPEN and SYNC2/CLOSE share numbers; the aliases are the same members.
    """

    SYNC0 = 0
    PULSE = 0
    SYNC1 = 1
    OPEN = 1
    SYNC2 = 2
    CLOSE = 2
    POLLING = 3
    ENABLE = 4
    SETA = 5
    SETV = 6
    SETO = 7
    MOVE = 8
    ROTATE = 9
    SETRV = 10
    VEL = 11
    HEAD = 12
    DHEAD = 13
    SAY = 15
    JOYINFO = 17
    CONFIG = 18
    ENCODER = 19
    SETRVDIR = 20
    RVEL = 21
    DCHEAD = 22
    SETRA = 23
    SONAR = 28
    STOP = 29
    DIGOUT = 30
    VEL2 = 32
    GRIPPER = 33
    ADSEL = 35
    GRIPPERVAL = 36
    GRIPREQUEST = 37
    IOREQUEST = 40
    PTUPOS = 41
    TTY2 = 42
    GETAUX = 43
    BUMP_STALL = 44
    TCM2 = 45
    JOYDRIVE = 47
    HOSTBAUD = 50
    AUX1BAUD = 51
    AUX2BAUD = 52
    E_STOP = 55
    GYRO = 58
    BATTERYINFO = 62
    TTY3 = 66
    GETAUX2 = 67
    SOUND = 90
    PLAYLIST = 91
    SOUNDTOG = 92
    # Simulator-only (MobileSim/AMRISim) commands with a single argument. SIM_SET_POSE (224) and SIM_CTRL (236)
    # carry several values and are not in this table: they decode as UnknownPacket.
    SIM_RESET = 225
    SIM_LRF_ENABLE = 230
    SIM_LRF_SET_FOV_START = 231
    SIM_LRF_SET_FOV_END = 232
    SIM_LRF_SET_RES = 233
    SIM_STAT = 237
    SIM_MESSAGE = 238
    SIM_EXIT = 239


class ArgumentKind(Enum):
    """What argument a command takes: an integer (or none), or a string (or none)."""

    INT = "int"
    STRING = "string"


_STRING_COMMANDS = frozenset({Command.POLLING, Command.SAY, Command.TTY2, Command.TTY3, Command.SIM_MESSAGE})


def command_argument_kind(command: Command) -> ArgumentKind:
    """The kind of argument ``command`` takes (every command may also be sent without one)."""
    return ArgumentKind.STRING if command in _STRING_COMMANDS else ArgumentKind.INT


def _to_command(value: int) -> Command:
    if isinstance(value, Command):
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise LocalProtocolError(f"a command number must be an int, got {type(value).__name__}")
    try:
        return Command(value)
    except ValueError:
        raise LocalProtocolError(f"unknown P2OS command number {value}") from None


@dataclass(frozen=True, slots=True)
class CommandPacket:
    """A client command: what a client sends, and what a robot (or emulator) decodes.

    Attributes:
        command: the command number.
        argument: None (no argument), an int in -65535..65535 (robot units of the command: mm, mm/s, deg, deg/s,
            a code...) or bytes of at most 195 for the string commands (POLLING, SAY, TTY2, TTY3, SIM_MESSAGE).

    Raises:
        LocalProtocolError: unknown command number, argument of the wrong kind or out of range.
    """

    command: Command
    argument: int | bytes | None = None

    def __post_init__(self) -> None:
        command = _to_command(self.command)
        object.__setattr__(self, "command", command)
        argument = self.argument
        if argument is None:
            return
        kind = command_argument_kind(command)
        if kind is ArgumentKind.STRING:
            if not isinstance(argument, bytes):
                raise LocalProtocolError(f"{command.name} takes a string (bytes), got {type(argument).__name__}")
            if len(argument) > MAX_STRING_LENGTH:
                raise LocalProtocolError(
                    f"{command.name} string of {len(argument)} bytes: at most {MAX_STRING_LENGTH} fit a packet"
                )
        else:
            if isinstance(argument, bool):
                object.__setattr__(self, "argument", int(argument))
                return
            if not isinstance(argument, int):
                raise LocalProtocolError(f"{command.name} takes an int, got {type(argument).__name__}")
            if not -MAX_ARGUMENT <= argument <= MAX_ARGUMENT:
                raise LocalProtocolError(
                    f"{command.name} argument {argument} is out of the 16-bit range -{MAX_ARGUMENT}..{MAX_ARGUMENT}"
                )

    def payload(self) -> bytes:
        """The command byte and the encoded argument (no frame)."""
        argument = self.argument
        if argument is None:
            return bytes((self.command,))
        if isinstance(argument, bytes):
            return bytes((self.command, ARG_STRING, len(argument))) + argument
        kind = ARG_POSITIVE if argument >= 0 else ARG_NEGATIVE
        return bytes((self.command, kind)) + abs(argument).to_bytes(2, "little")

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())


def encode_command(command: Command | int, argument: int | bytes | str | None = None) -> bytes:
    """Encode one client command packet.

    Args:
        command: a :class:`Command` or its number.
        argument: None, an int (-65535..65535; the sign goes into the argument type byte), or for a string command
            bytes or ASCII text of at most 195 bytes.

    Returns:
        The packet, e.g. ``encode_command(Command.VEL, 300) == bytes.fromhex("FAFB060B3B2C01373C")``.

    Raises:
        LocalProtocolError: unknown command number, wrong kind of argument, out of range or too long.
    """
    if isinstance(argument, str):
        try:
            argument = argument.encode("ascii")
        except UnicodeEncodeError as err:
            raise LocalProtocolError(f"string argument {argument!r} is not ASCII") from err
    return CommandPacket(_to_command(command), argument).encode()


@dataclass(frozen=True, slots=True)
class UnknownPacket:
    """A packet with a valid frame and checksum whose type (or command number) this codec does not know.

    Attributes:
        packet_type: the type/command byte, 0..255.
        data: the bytes after it, checksum excluded.
    """

    packet_type: int
    data: bytes = b""

    def __post_init__(self) -> None:
        check_range("UnknownPacket", "packet_type", self.packet_type, 0, 0xFF)
        if not isinstance(self.data, bytes):
            raise LocalProtocolError(f"UnknownPacket.data must be bytes, got {type(self.data).__name__}")
        check_payload_size("UnknownPacket", self.payload)

    def payload(self) -> bytes:
        """The type byte and the data (no frame)."""
        return bytes((self.packet_type,)) + self.data

    def encode(self) -> bytes:
        """The whole packet as sent on the wire."""
        return frame(self.payload())


def parse_command(payload: bytes) -> CommandPacket | UnknownPacket:
    """Decode a client command from a checked payload (what a robot receives).

    Args:
        payload: the command byte and its argument bytes (see :func:`unframe`).

    Returns:
        A :class:`CommandPacket` with its argument typed (int, bytes or None), or an :class:`UnknownPacket` for a
        command number not in :class:`Command` (its bytes preserved).

    Raises:
        RemoteProtocolError: the argument bytes are not one well-formed argument of the command's kind.
    """
    if not payload:
        raise RemoteProtocolError("empty command payload")
    number = payload[0]
    try:
        command = Command(number)
    except ValueError:
        return UnknownPacket(number, bytes(payload[1:]))
    reader = PayloadReader(payload[1:], f"command {command.name}")
    argument: int | bytes | None = None
    if reader.remaining:
        kind = reader.u8("argument type")
        if kind == ARG_POSITIVE:
            argument = reader.u16("argument")
        elif kind == ARG_NEGATIVE:
            argument = -reader.u16("argument")
        elif kind == ARG_STRING:
            argument = reader.raw(reader.u8("string length"), "string")
        else:
            raise RemoteProtocolError(f"command {command.name}: unknown argument type 0x{kind:02X}")
        reader.finish()
        expected = command_argument_kind(command)
        if isinstance(argument, bytes) != (expected is ArgumentKind.STRING):
            wanted = "a string" if expected is ArgumentKind.STRING else "an integer"
            raise RemoteProtocolError(f"command {command.name} takes {wanted} argument, got type 0x{kind:02X}")
    return CommandPacket(command, argument)


# --------------------------------------------------------------------------------------------------- arguments


def pack_byte_pair(high: int, low: int) -> int:
    """Pack two bytes into one integer argument, as VEL2 (left, right) and DIGOUT (mask, values) expect.

    Each byte may be given signed (-128..127) or unsigned (0..255). The result is the 16-bit pattern read as a
    signed integer (-32768..32767), which is what established clients send: the robot rebuilds the same bits.

    Raises:
        LocalProtocolError: a byte is outside -128..255.
    """
    check_range("byte pair", "high", high, -128, 255)
    check_range("byte pair", "low", low, -128, 255)
    bits = ((high & 0xFF) << 8) | (low & 0xFF)
    return bits - 0x10000 if bits & 0x8000 else bits


def unpack_byte_pair(argument: int, *, signed: bool) -> tuple[int, int]:
    """Split an integer argument into its high and low bytes (the inverse of :func:`pack_byte_pair`).

    Args:
        argument: the decoded argument (-65535..65535); its low 16 bits are used.
        signed: read each byte as -128..127 (VEL2) instead of 0..255 (DIGOUT).

    Returns:
        ``(high, low)``.
    """
    bits = argument & 0xFFFF
    high, low = bits >> 8, bits & 0xFF
    if signed:
        high = high - 0x100 if high & 0x80 else high
        low = low - 0x100 if low & 0x80 else low
    return high, low
