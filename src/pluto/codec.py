"""What every sans-I/O codec of Pluto shares (P2OS, Player, the XML gateway, NetworkMotionServer).

A codec is fed bytes with ``receive_data(data)`` (``b""`` for the end of the stream) and hands out what it decoded
with ``next_event()``: a protocol's own events, :data:`NEED_DATA` when nothing complete is waiting, and
:class:`ConnectionClosed` once, after every event before the end. Encoding is ``encode(msg) -> bytes``. Codecs never
touch sockets, ports, threads or clocks, so the same code runs over serial, TCP, UDP, a pty or a test's byte string.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = ["NEED_DATA", "ConnectionClosed", "NeedData"]


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
