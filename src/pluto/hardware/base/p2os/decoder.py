"""The streaming P2OS decoder: bytes in, packets out, in either direction.

    decoder = P2osDecoder(role="client")        # a client decodes what the robot sends
    decoder.receive_data(port.read(256))
    while (event := decoder.next_event()) is not NEED_DATA:
        handle(event)

``role="robot"`` decodes what a client sends (for a robot emulator): :class:`.packets.CommandPacket` events.
``receive_data(b"")`` means end of stream: what is left is flushed and :class:`ConnectionClosed` follows.
"""

# Strategy: docs/protocols/p2os.md says the link is unacknowledged and noisy ("a client must tolerate lost
# and corrupted packets"; "floods of bad checksums on noisy links: resync on FA FB, drop, count, never block"). So
# the decoder hunts for FA FB, reads N, and drops a packet whose N is impossible (N < 3 or N > 200) or whose
# checksum is wrong. After a drop it skips only the FA byte, not the N bytes the packet claimed: a corrupted N must
# not swallow the intact packets behind it. Complete packets are decoded eagerly in receive_data, so the byte
# buffer never holds more than one incomplete packet (< 203 bytes) however much garbage arrives; the events wait in
# a queue for next_event. A packet with a good checksum whose body does not parse (RemoteProtocolError from the
# strict parsers in packets.py and sip.py) is counted as malformed and dropped; nothing raises out of the decoder
# because of what the peer sent. Every byte received is accounted for: bytes = garbage_bytes + the bytes of the
# checked packets + buffered_bytes.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData, StreamDecoder

from .packets import (
    HEADER,
    MAX_BYTE_COUNT,
    MIN_BYTE_COUNT,
    CommandPacket,
    LocalProtocolError,
    RemoteProtocolError,
    UnknownPacket,
    checksum,
    parse_command,
)
from .sip import ServerPacket, parse_server_packet

__all__ = [
    "NEED_DATA",
    "ConnectionClosed",
    "DecoderStatistics",
    "Event",
    "NeedData",
    "P2osDecoder",
    "Role",
]

Role = Literal["client", "robot"]
"""Which side the decoder is on: 'client' decodes server packets, 'robot' decodes client commands."""


Event = ServerPacket | CommandPacket | UnknownPacket | ConnectionClosed
"""What :meth:`P2osDecoder.next_event` returns besides NEED_DATA."""


@dataclass(frozen=True, slots=True)
class DecoderStatistics:
    """What the decoder has seen so far.

    Attributes:
        packets: packets with a valid frame and checksum (delivered, unknown and malformed ones alike).
        bytes: bytes received.
        bad_checksum: packets dropped for a wrong checksum.
        bad_length: headers dropped for an impossible byte count (N < 3 or N > 200).
        garbage_bytes: bytes skipped while hunting for a header, the remains of dropped packets included.
        unknown_type: packets of a type (or command number) the codec does not know, delivered as UnknownPacket.
        malformed: packets with a good checksum whose body does not parse; dropped.
    """

    packets: int = 0
    bytes: int = 0
    bad_checksum: int = 0
    bad_length: int = 0
    garbage_bytes: int = 0
    unknown_type: int = 0
    malformed: int = 0


class P2osDecoder(StreamDecoder[Event]):
    """Streaming decoder of P2OS packets (sans-I/O: it never reads a port or a clock).

    Args:
        role: 'client' to decode what a robot sends (SIP, CONFIGpac, SYNC replies, ...), 'robot' to decode what a
            client sends (:class:`.packets.CommandPacket` with a typed argument).

    Raises:
        LocalProtocolError: an unknown role.
    """

    def __init__(self, role: Role = "client") -> None:
        parsers: dict[str, Callable[[bytes], Event]] = {"client": parse_server_packet, "robot": parse_command}
        if role not in parsers:
            raise LocalProtocolError(f"role must be 'client' or 'robot', not {role!r}")
        super().__init__()
        self._role: Role = role
        self._parse = parsers[role]
        self._last_error: str | None = None
        self._packets = 0
        self._bad_checksum = 0
        self._bad_length = 0
        self._unknown = 0
        self._malformed = 0

    @property
    def role(self) -> Role:
        """The side this decoder is on."""
        return self._role

    @property
    def last_error(self) -> str | None:
        """Why the last malformed packet was dropped (for a log line), or None."""
        return self._last_error

    def statistics(self) -> DecoderStatistics:
        """A snapshot of the counters."""
        return DecoderStatistics(
            packets=self._packets,
            bytes=self._bytes,
            bad_checksum=self._bad_checksum,
            bad_length=self._bad_length,
            garbage_bytes=self._garbage,
            unknown_type=self._unknown,
            malformed=self._malformed,
        )

    def _end_of_stream(self) -> None:
        self._process(final=True)

    def _process(self, *, final: bool = False) -> None:
        """Decode every complete packet in the buffer; keep at most one incomplete packet's bytes."""
        buffer = self._buffer
        size = len(buffer)
        pos = 0
        while pos < size:
            start = buffer.find(HEADER, pos)
            if start < 0:
                # A lone FA at the very end may be the first half of a header.
                keep = 1 if not final and buffer[-1] == HEADER[0] else 0
                self._garbage += size - keep - pos
                pos = size - keep
                break
            self._garbage += start - pos
            pos = start
            if size - pos < 3:
                if final:
                    self._garbage += 1
                    pos += 1
                    continue
                break
            count = buffer[pos + 2]
            if not MIN_BYTE_COUNT <= count <= MAX_BYTE_COUNT:
                self._bad_length += 1
                self._garbage += 1
                pos += 1
                continue
            end = pos + 3 + count
            if end > size:
                if final:
                    # Truncated by the end of the stream; its N may be corrupt, so look inside it.
                    self._garbage += 1
                    pos += 1
                    continue
                break
            payload = bytes(buffer[pos + 3 : end - 2])
            if checksum(payload) != (buffer[end - 2] << 8 | buffer[end - 1]):
                self._bad_checksum += 1
                self._garbage += 1
                pos += 1
                continue
            pos = end
            self._packets += 1
            try:
                event = self._parse(payload)
            except RemoteProtocolError as err:
                self._malformed += 1
                self._last_error = str(err)
                continue
            except LocalProtocolError as err:  # pragma: no cover - a codec bug; counted rather than raised
                self._malformed += 1
                self._last_error = f"decoded values rejected: {err}"
                continue
            if isinstance(event, UnknownPacket):
                self._unknown += 1
            self._events.append(event)
        del buffer[:pos]
