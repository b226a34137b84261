"""What every sans-I/O codec of Pluto shares (P2OS, Player, the XML gateway, NetworkMotionServer).

A codec is fed bytes with ``receive_data(data)`` (``b""`` for the end of the stream) and hands out what it decoded
with ``next_event()``: a protocol's own events, :data:`NEED_DATA` when nothing complete is waiting, and
:class:`ConnectionClosed` once, after every event before the end. Encoding is ``encode(msg) -> bytes``. Codecs never
touch sockets, ports, threads or clocks, so the same code runs over serial, TCP, UDP, a pty or a test's byte string.

:class:`StreamDecoder` is that stream side, written once: the buffer of an incomplete message, the queue of events,
the end of the stream, and the counts of bytes received and skipped; a decoder fills in :meth:`~StreamDecoder._process`.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Final, Generic, Literal, TypeVar

from pluto.errors import LocalProtocolError

__all__ = ["NEED_DATA", "ConnectionClosed", "NeedData", "StreamDecoder"]

E = TypeVar("E")


class NeedData(Enum):
    """The type of :data:`NEED_DATA`."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA
"""Returned by a codec's ``next_event()`` when no complete event is waiting: feed more bytes."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The end of the stream (after ``receive_data(b"")`` and every event before it).

    Attributes:
        truncated: bytes of an incomplete message that were left when the stream ended; 0 for a clean end between
            messages.
    """

    truncated: int = 0


class StreamDecoder(abc.ABC, Generic[E]):
    """The stream side of a byte decoder: feed bytes, take events, end the stream.

    A subclass decodes :attr:`_buffer` in :meth:`_process` (called after every feed): it appends what it decoded to
    :attr:`_events`, deletes the bytes it consumed (keeping at most the start of one message) and counts the bytes
    it skipped in :attr:`_garbage`. Bytes left when the stream ends are counted as garbage too, and reported as
    :attr:`ConnectionClosed.truncated`.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._events: deque[E | ConnectionClosed] = deque()
        self._closed = False
        self._bytes = 0
        """Bytes received."""
        self._garbage = 0
        """Bytes skipped (between messages, of dropped messages, left at the end)."""

    @property
    def buffered_bytes(self) -> int:
        """Bytes held as the start of an incomplete message."""
        return len(self._buffer)

    @property
    def bytes_received(self) -> int:
        """Bytes fed in."""
        return self._bytes

    @property
    def garbage_bytes(self) -> int:
        """Bytes skipped: between messages, of dropped messages, and those left when the stream ended."""
        return self._garbage

    def receive_data(self, data: bytes) -> None:
        """Feed bytes in any chunking; ``b""`` ends the stream.

        Raises:
            LocalProtocolError: data after the end of the stream.
        """
        if self._closed:
            if data:
                raise LocalProtocolError("receive_data after the end of the stream (receive_data(b''))")
            return
        if not data:
            self._closed = True
            self._end_of_stream()
            truncated = len(self._buffer)
            self._garbage += truncated
            self._buffer.clear()
            self._events.append(ConnectionClosed(truncated))
            return
        self._bytes += len(data)
        self._buffer += data
        self._process()

    def next_event(self) -> E | ConnectionClosed | Literal[NeedData.NEED_DATA]:
        """The next event, :class:`ConnectionClosed` (again and again) after the end, or :data:`NEED_DATA`."""
        if self._events:
            event = self._events.popleft()
            if isinstance(event, ConnectionClosed):
                self._events.append(event)
            return event
        return NEED_DATA

    def events(self) -> Iterator[E | ConnectionClosed]:
        """Every event waiting now (:class:`ConnectionClosed` once); stops at :data:`NEED_DATA`."""
        while (event := self.next_event()) is not NEED_DATA:
            yield event
            if isinstance(event, ConnectionClosed):
                return

    @abc.abstractmethod
    def _process(self) -> None:
        """Decode what :attr:`_buffer` holds (see the class)."""

    def _end_of_stream(self) -> None:
        """The stream ends: decode what the rest of :attr:`_buffer` still holds (by default, nothing)."""
