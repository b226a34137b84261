"""Framing of the Player 1.5 TCP protocol: the banner, the 32-byte header, and a sans-I/O connection.

    conn = PlayerConnection(role="server")     # a server decodes what a client sends
    conn.receive_data(sock.recv(4096))
    while (event := conn.next_event()) is not NEED_DATA:
        handle(event)                           # Message(header, payload) or ConnectionClosed
    sock.sendall(encode_message(MsgType.RESP_ACK, device, index, payload, time=now))

``role="client"`` first expects the server's 32-byte banner (a :class:`Banner` event).
"""

# Strategy: /work/shared/reference/player-1.5-wire.md. Every message is a 32-byte big-endian header
# (``>HHHHIIIIII``: stx, type, device, index, time, timestamp, reserved, size) and ``size`` payload bytes; the
# largest payload is 8192 bytes. The stream has no checksum and no resynchronisation marker beyond the two stx
# bytes, which also occur inside payloads, so after a header that is not valid (wrong stx, oversized) there is
# no safe place to resume: the connection is broken, as in h11. next_event raises RemoteProtocolError with the
# reason, and keeps raising it; the transport closes that connection. The time and reserved fields of what a
# client sends are never checked (clients send garbage there). Parsing is lazy: receive_data only appends and
# next_event takes one message at a time, so a transport that stops reading while a request is being served
# holds at most one read's worth of bytes.

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Literal

from pluto.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "BANNER",
    "BANNER_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "MAX_DEVICES",
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
MAX_PAYLOAD: Final = 8192
"""Largest payload of a message, bytes."""
BANNER_SIZE: Final = 32
"""Bytes of the banner the server sends on accept."""
BANNER: Final = b"Player v.1.5".ljust(BANNER_SIZE, b"\0")
"""The banner of a Player 1.5 server."""
MAX_DEVICES: Final = 64
"""Entries of a device list."""

_U32 = 0xFFFFFFFF


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


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The end of the stream.

    Attributes:
        truncated: bytes of an incomplete message (or banner) that were left when the stream ended; 0 for a clean
            end between messages.
    """

    truncated: int = 0


class NeedData(Enum):
    """The type of :data:`NEED_DATA`."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA
"""Returned by :meth:`PlayerConnection.next_event` when no complete message is waiting: feed more bytes."""

Event = Banner | Message | ConnectionClosed
"""What :meth:`PlayerConnection.next_event` returns besides NEED_DATA."""

Role = Literal["client", "server"]


class PlayerConnection:
    """One side of a Player 1.5 connection, without I/O.

    Args:
        role: ``"server"`` decodes a client's messages; ``"client"`` decodes the banner and then a server's
            messages.

    Raises:
        LocalProtocolError: an unknown role.
    """

    def __init__(self, role: Role = "server") -> None:
        if role not in ("client", "server"):
            raise LocalProtocolError(f"role must be 'client' or 'server', not {role!r}")
        self.role: Role = role
        self._buffer = bytearray()
        self._need_banner = role == "client"
        self._header: Header | None = None
        self._ended = False
        self._error: RemoteProtocolError | None = None
        self.messages = 0
        self.bytes_received = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as events."""
        return len(self._buffer)

    @property
    def error(self) -> RemoteProtocolError | None:
        """Why the stream is broken, or None."""
        return self._error

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the transport; ``b""`` means the peer closed the stream.

        Raises:
            LocalProtocolError: data after the end of the stream.
        """
        if self._ended:
            if data:
                raise LocalProtocolError("receive_data after the end of the stream")
            return
        if not data:
            self._ended = True
            return
        self.bytes_received += len(data)
        self._buffer += data

    def next_event(self) -> Event | Literal[NeedData.NEED_DATA]:
        """The next event: a :class:`Banner` (client role, first), a :class:`Message`, :class:`ConnectionClosed`
        (again and again after the end), or NEED_DATA.

        Raises:
            RemoteProtocolError: the peer sent something that is not Player 1.5 (a bad stx, an oversized message);
                the stream is broken and every later call raises the same error.
        """
        if self._error is not None:
            raise self._error
        buffer = self._buffer
        if self._need_banner:
            if len(buffer) < BANNER_SIZE:
                return ConnectionClosed(len(buffer)) if self._ended else NEED_DATA
            raw = bytes(buffer[:BANNER_SIZE])
            del buffer[:BANNER_SIZE]
            self._need_banner = False
            return Banner(raw.split(b"\0", 1)[0].decode("latin-1"))
        if self._header is None:
            if len(buffer) < HEADER_SIZE:
                return ConnectionClosed(len(buffer)) if self._ended else NEED_DATA
            try:
                self._header = Header.unpack(buffer[:HEADER_SIZE])
            except RemoteProtocolError as err:
                self._error = err
                raise
            del buffer[:HEADER_SIZE]
        header = self._header
        if len(buffer) < header.size:
            return ConnectionClosed(HEADER_SIZE + len(buffer)) if self._ended else NEED_DATA
        payload = bytes(buffer[: header.size])
        del buffer[: header.size]
        self._header = None
        self.messages += 1
        return Message(header, payload)
