"""Framing of the Player 1.5 TCP protocol: the banner, the 32-byte header, and a sans-I/O connection.

    conn = PlayerConnection(role="server")     # a server decodes what a client sends
    conn.receive_data(sock.recv(4096))
    while (event := conn.next_event()) is not NEED_DATA:
        handle(event)                           # Message(header, payload) or ConnectionClosed
    sock.sendall(encode_message(MsgType.RESP_ACK, device, index, payload, time=now))

``role="client"`` first expects the server's 32-byte banner (a :class:`Banner` event).
"""

# Strategy: /work/shared/reference/player-1.5-wire.md. Every message is a 32-byte big-endian header
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
# (clients send garbage there). Parsing is lazy: receive_data only appends and next_event takes one message at a
# time (dropping garbage as it goes), so a transport that stops reading while a request is being served holds at
# most one read's worth of bytes plus one message.

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Literal

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData
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


class PlayerConnection:
    """One side of a Player 1.5 connection, without I/O.

    Args:
        role: ``"server"`` decodes a client's messages; ``"client"`` decodes the banner and then a server's
            messages.

    Attributes:
        messages: whole messages returned.  bytes_received: bytes fed in.
        garbage_bytes: bytes skipped while looking for the next stx ("Xx").
        resyncs: runs of garbage skipped (the times the stream lost its framing).
        oversized: headers dropped because their size is over :data:`MAX_PAYLOAD`.
        last_problem: what was dropped last, for a log line.

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
        self.messages = 0
        self.bytes_received = 0
        self.garbage_bytes = 0
        self.resyncs = 0
        self.oversized = 0
        self.last_problem = ""
        self._in_garbage = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as events."""
        return len(self._buffer)

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

        Garbage and oversized headers are dropped on the way (see the counters); they never end the stream.
        """
        buffer = self._buffer
        if self._need_banner:
            if len(buffer) < BANNER_SIZE:
                return ConnectionClosed(len(buffer)) if self._ended else NEED_DATA
            raw = bytes(buffer[:BANNER_SIZE])
            del buffer[:BANNER_SIZE]
            self._need_banner = False
            return Banner(raw.split(b"\0", 1)[0].decode("latin-1"))
        while self._header is None:
            self._skip_garbage()
            if len(buffer) < HEADER_SIZE:
                if not self._ended:
                    return NEED_DATA
                if buffer == _STX_BYTES[:1]:  # a lone "X" at the very end: garbage, not a message
                    self._drop(1, "a stray byte at the end of the stream")
                return ConnectionClosed(len(buffer))
            fields = HEADER.unpack_from(buffer)
            size = fields[-1]
            if size > MAX_PAYLOAD:
                del buffer[:HEADER_SIZE]
                self.oversized += 1
                self.last_problem = f"dropped a header with a payload size of {size} bytes (the limit is {MAX_PAYLOAD})"
                continue
            del buffer[:HEADER_SIZE]
            self._in_garbage = False
            stx, mtype, device, index, tsec, tusec, ssec, susec, reserved, _ = fields
            self._header = Header(mtype, device, index, tsec, tusec, ssec, susec, reserved, size, stx)
        header = self._header
        if len(buffer) < header.size:
            return ConnectionClosed(HEADER_SIZE + len(buffer)) if self._ended else NEED_DATA
        payload = bytes(buffer[: header.size])
        del buffer[: header.size]
        self._header = None
        self.messages += 1
        return Message(header, payload)

    def _skip_garbage(self) -> None:
        """Drop the bytes before the next stx; keep a final "X" that may be the first half of one."""
        buffer = self._buffer
        if buffer[:2] == _STX_BYTES:
            return
        found = buffer.find(_STX_BYTES)
        if found < 0:
            found = len(buffer) - 1 if buffer.endswith(_STX_BYTES[:1]) else len(buffer)
        if found > 0:
            self._drop(found, "bytes that are not a Player 1.5 message")

    def _drop(self, count: int, what: str) -> None:
        del self._buffer[:count]
        self.garbage_bytes += count
        if not self._in_garbage:
            self._in_garbage = True
            self.resyncs += 1
        self.last_problem = f"skipped {count} {what}"
