"""Framing of the Player 1.5 TCP protocol: the banner, the 32-byte header, and a sans-I/O connection.

    conn = PlayerConnection(role="server")     # a server decodes what a client sends
    conn.receive_data(sock.recv(4096))
    while (event := conn.next_event()) is not NEED_DATA:
        handle(event)                           # Message(header, payload) or ConnectionClosed
    sock.sendall(encode_message(MsgType.RESP_ACK, device, index, payload, time=now))

``role="client"`` first expects the server's 32-byte banner (a :class:`Banner` event).
"""

# Strategy: docs/protocols/player.md. Every message is a 32-byte big-endian header
# (``>HHHHIIIIII``: stx, type, device, index, time, timestamp, reserved, size) and ``size`` payload bytes. The
# largest message Player 1.5 sends or receives is PLAYER_MAX_MESSAGE_SIZE = 8192 bytes, header included, so the
# largest payload is 8192 - 32 = 8160 bytes (PLAYER_MAX_PAYLOAD_SIZE; the 1.5 server's reader drops a header whose
# size is over it). The stream has no checksum; the only marker is the two stx bytes ("Xx"). Like the 1.5 server
# (server/clientdata.cc, ClientData::Read), a connection resynchronises instead of giving up: bytes that do not
# start with "Xx" are skipped up to the next "Xx" (counted in ``garbage_bytes``), and a header with an oversized
# size is dropped and the hunt for "Xx" goes on after it (counted in ``oversized``). A message found this way may
# be a false start inside garbage; it is an ordinary message to the layer above, which answers or ignores it as
# it would any other. Unlike the 1.5 server, a second "X" after an "X" is kept as a possible first stx byte, so
# "XXx..." still finds its message. The time and reserved fields of what a client sends are never checked
# (clients send garbage there). The stream side (the buffer, the event queue, the end of the stream, the counts of
# bytes received and skipped) is pluto.codec.StreamDecoder's; this decoder fills its _process. Whole messages are
# decoded as they arrive, so the buffer never holds more than the start of one message (< 8192 bytes) however much
# garbage comes, and a transport that stops reading while a request is being served holds at most one read's worth
# of decoded messages. Unlike the other decoders, the bytes of a message cut short by the end of the stream are
# not garbage (the server counts a truncated stream as a protocol error of its own).

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Literal

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData, StreamDecoder
from pluto.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "BANNER",
    "BANNER_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "MAX_DEVICES",
    "MAX_MESSAGE",
    "MAX_PAYLOAD",
    "NEED_DATA",
    "STX",
    "Access",
    "Banner",
    "ConnectionClosed",
    "DataMode",
    "DeviceCode",
    "Event",
    "Header",
    "Message",
    "MsgType",
    "NeedData",
    "PlayerConnection",
    "PlayerRequest",
    "encode_message",
    "split_time",
]

STX: Final = 0x5878
"""The first two bytes of every header ("Xx")."""
HEADER: Final = struct.Struct(">HHHHIIIIII")
"""The header: stx, type, device, device_index, time_sec, time_usec, timestamp_sec, timestamp_usec, reserved, size."""
HEADER_SIZE: Final = HEADER.size
"""32 bytes."""
MAX_MESSAGE: Final = 8192
"""Largest message, header included, bytes (PLAYER_MAX_MESSAGE_SIZE of Player 1.5)."""
MAX_PAYLOAD: Final = MAX_MESSAGE - HEADER_SIZE
"""Largest payload of a message: 8160 bytes (PLAYER_MAX_PAYLOAD_SIZE; the 1.5 server drops larger ones)."""
BANNER_SIZE: Final = 32
"""Bytes of the banner the server sends on accept."""
BANNER: Final = b"Player v.1.5".ljust(BANNER_SIZE, b"\0")
"""The banner of a Player 1.5 server."""
MAX_DEVICES: Final = 64
"""Entries of a device list."""

_U32 = 0xFFFFFFFF
_STX_BYTES = STX.to_bytes(2, "big")


class MsgType(IntEnum):
    """Message types (the header's ``type``)."""

    DATA = 1
    CMD = 2
    REQ = 3
    RESP_ACK = 4
    SYNCH = 5
    RESP_NACK = 6
    RESP_ERR = 7


class DeviceCode(IntEnum):
    """Device (interface) codes."""

    PLAYER = 1
    POWER = 2
    GRIPPER = 3
    POSITION = 4
    SONAR = 5
    LASER = 6
    BLOBFINDER = 7
    PTZ = 8
    AUDIO = 9
    FIDUCIAL = 10
    COMMS = 11
    SPEECH = 12
    GPS = 13
    BUMPER = 14
    TRUTH = 15
    DIO = 20
    AIO = 21
    IR = 22
    WIFI = 23
    LOCALIZE = 25
    POSITION3D = 30
    SIMULATION = 31
    CAMERA = 40
    NULL = 256


class PlayerRequest(IntEnum):
    """Subtypes (u16) of the requests to the player device (code 1, index 0)."""

    DEVLIST = 1
    DRIVERINFO = 2
    DEV = 3
    DATA = 4
    DATAMODE = 5
    DATAFREQ = 6
    AUTH = 7
    NAMESERVICE = 8


class DataMode(IntEnum):
    """How a client gets its data: pushed at the data frequency or pulled with DATA requests; all or only new."""

    PUSH_ALL = 0
    PULL_ALL = 1
    PUSH_NEW = 2
    PULL_NEW = 3

    @property
    def pushed(self) -> bool:
        """Rounds are sent at the data frequency without being asked for."""
        return self in (DataMode.PUSH_ALL, DataMode.PUSH_NEW)

    @property
    def only_new(self) -> bool:
        """Data whose timestamp has not changed since it was last sent is skipped."""
        return self in (DataMode.PUSH_NEW, DataMode.PULL_NEW)


class Access(bytes, Enum):
    """Access modes of a device request (one ASCII byte)."""

    READ = b"r"
    WRITE = b"w"
    ALL = b"a"
    CLOSE = b"c"
    ERROR = b"e"

    @property
    def reads(self) -> bool:
        """The client gets the device's data."""
        return self in (Access.READ, Access.ALL)

    @property
    def writes(self) -> bool:
        """The client may command the device."""
        return self in (Access.WRITE, Access.ALL)


def split_time(t: float) -> tuple[int, int]:
    """A time in s as the header's (sec, usec), each a u32; negative or not finite gives (0, 0)."""
    if not math.isfinite(t) or t <= 0.0:
        return 0, 0
    sec = int(t)
    usec = min(999_999, round((t - sec) * 1e6))
    return min(sec, _U32), usec


@dataclass(frozen=True, slots=True)
class Header:
    """A message header.

    Attributes:
        type: the message type (:class:`MsgType`, kept as an int: a peer may send an unknown one).
        device, index: the device code and index the message is about.
        time_sec, time_usec: when the message was sent (server time).
        timestamp_sec, timestamp_usec: when its data was produced.
        reserved: 0 from a server.
        size: payload bytes.
        stx: the first field (always :data:`STX` in a valid header).
    """

    type: int
    device: int
    index: int = 0
    time_sec: int = 0
    time_usec: int = 0
    timestamp_sec: int = 0
    timestamp_usec: int = 0
    reserved: int = 0
    size: int = 0
    stx: int = STX

    @property
    def time(self) -> float:
        """When the message was sent, s."""
        return self.time_sec + self.time_usec * 1e-6

    @property
    def timestamp(self) -> float:
        """When the message's data was produced, s."""
        return self.timestamp_sec + self.timestamp_usec * 1e-6

    def pack(self) -> bytes:
        """The 32 header bytes.

        Raises:
            LocalProtocolError: a field out of its range, or a size over :data:`MAX_PAYLOAD`.
        """
        if self.size > MAX_PAYLOAD:
            raise LocalProtocolError(f"payload of {self.size} bytes; the largest is {MAX_PAYLOAD}")
        try:
            return HEADER.pack(
                self.stx,
                self.type,
                self.device,
                self.index,
                self.time_sec,
                self.time_usec,
                self.timestamp_sec,
                self.timestamp_usec,
                self.reserved,
                self.size,
            )
        except struct.error as err:
            raise LocalProtocolError(f"header field out of range: {err}") from err

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> Header:
        """Parse 32 header bytes.

        Raises:
            RemoteProtocolError: not 32 bytes, a wrong stx, or a size over :data:`MAX_PAYLOAD`.
        """
        if len(data) != HEADER_SIZE:
            raise RemoteProtocolError(f"a header is {HEADER_SIZE} bytes, got {len(data)}")
        stx, mtype, device, index, tsec, tusec, ssec, susec, reserved, size = HEADER.unpack(data)
        if stx != STX:
            raise RemoteProtocolError(f"bad stx 0x{stx:04x} (expected 0x{STX:04x}): not a Player 1.5 message")
        if size > MAX_PAYLOAD:
            raise RemoteProtocolError(f"payload size {size} is over the limit of {MAX_PAYLOAD} bytes")
        return cls(mtype, device, index, tsec, tusec, ssec, susec, reserved, size, stx)


def encode_message(
    mtype: int,
    device: int,
    index: int,
    payload: bytes = b"",
    *,
    time: float = 0.0,
    timestamp: float | None = None,
) -> bytes:
    """A whole message: header and payload.

    Args:
        mtype: the message type.
        device, index: the device it is about.
        payload: at most :data:`MAX_PAYLOAD` bytes.
        time: when it is sent, s.
        timestamp: when its data was produced, s (``time`` if None).

    Raises:
        LocalProtocolError: the payload is too long or a field is out of range.
    """
    tsec, tusec = split_time(time)
    ssec, susec = split_time(time if timestamp is None else timestamp)
    header = Header(mtype, device, index, tsec, tusec, ssec, susec, 0, len(payload))
    return header.pack() + payload


@dataclass(frozen=True, slots=True)
class Message:
    """A whole message: its header and its payload (``len(payload) == header.size``)."""

    header: Header
    payload: bytes

    @property
    def type(self) -> int:
        return self.header.type

    @property
    def device(self) -> int:
        return self.header.device

    @property
    def index(self) -> int:
        return self.header.index


@dataclass(frozen=True, slots=True)
class Banner:
    """The server's banner (a client's first event): the text before the padding, e.g. ``Player v.1.5``."""

    text: str


Event = Banner | Message | ConnectionClosed
"""What :meth:`PlayerConnection.next_event` returns besides NEED_DATA."""

Role = Literal["client", "server"]


class PlayerConnection(StreamDecoder[Banner | Message]):
    """One side of a Player 1.5 connection, without I/O (a :class:`~pluto.codec.StreamDecoder`).

    Args:
        role: ``"server"`` decodes a client's messages; ``"client"`` decodes the banner and then a server's
            messages.

    Attributes:
        messages: whole messages decoded.
        resyncs: runs of garbage skipped (the times the stream lost its framing).
        oversized: headers dropped because their size is over :data:`MAX_PAYLOAD`.
        last_problem: what was dropped last, for a log line.

    Raises:
        LocalProtocolError: an unknown role.
    """

    def __init__(self, role: Role = "server") -> None:
        if role not in ("client", "server"):
            raise LocalProtocolError(f"role must be 'client' or 'server', not {role!r}")
        super().__init__()
        self.role: Role = role
        self._need_banner = role == "client"
        self._header: Header | None = None  # of the message at the start of the buffer, waiting for its payload
        self._in_garbage = False
        self._tail = 0  # bytes of an incomplete message left at the end of the stream
        self.messages = 0
        self.resyncs = 0
        self.oversized = 0
        self.last_problem = ""

    @property
    def garbage_bytes(self) -> int:
        """Bytes skipped while looking for the next stx ("Xx"); the bytes of an incomplete message left at the end
        are not garbage but :attr:`ConnectionClosed.truncated`."""
        return self._garbage - self._tail

    def _process(self) -> None:
        """Decode the banner (client role, first) and every whole message; keep at most one message's start."""
        buffer = self._buffer
        size = len(buffer)
        pos = 0
        if self._need_banner:
            if size < BANNER_SIZE:
                return
            self._events.append(Banner(bytes(buffer[:BANNER_SIZE]).split(b"\0", 1)[0].decode("latin-1")))
            self._need_banner = False
            pos = BANNER_SIZE
        while True:
            header = self._header
            if header is None:
                pos = self._skip_garbage(pos)
                if size - pos < HEADER_SIZE:
                    break
                stx, mtype, device, index, tsec, tusec, ssec, susec, reserved, length = HEADER.unpack_from(buffer, pos)
                if length > MAX_PAYLOAD:
                    pos += HEADER_SIZE
                    self.oversized += 1
                    self.last_problem = (
                        f"dropped a header with a payload size of {length} bytes (the limit is {MAX_PAYLOAD})"
                    )
                    continue
                self._in_garbage = False
                header = self._header = Header(mtype, device, index, tsec, tusec, ssec, susec, reserved, length, stx)
            end = pos + HEADER_SIZE + header.size
            if end > size:
                break
            self._events.append(Message(header, bytes(buffer[pos + HEADER_SIZE : end])))
            self._header = None
            self.messages += 1
            pos = end
        del buffer[:pos]

    def _end_of_stream(self) -> None:
        """A lone "X" at the very end is garbage, not the start of a message; what else is left is truncated."""
        if not self._need_banner and self._buffer == _STX_BYTES[:1]:
            self._skip(1, "a stray byte at the end of the stream")
            self._buffer.clear()
        self._tail = len(self._buffer)

    def _skip_garbage(self, pos: int) -> int:
        """Where the next stx starts, from ``pos`` on; skips what is before it but a final "X" that may be the first
        half of one."""
        buffer = self._buffer
        if buffer.startswith(_STX_BYTES, pos):
            return pos
        found = buffer.find(_STX_BYTES, pos)
        if found < 0:
            found = len(buffer) - 1 if buffer.endswith(_STX_BYTES[:1], pos) else len(buffer)
        if found > pos:
            self._skip(found - pos, "bytes that are not a Player 1.5 message")
        return found

    def _skip(self, count: int, what: str) -> None:
        """Count ``count`` skipped bytes (a new resync if the stream was in sync)."""
        self._garbage += count
        if not self._in_garbage:
            self._in_garbage = True
            self.resyncs += 1
        self.last_problem = f"skipped {count} {what}"
