"""The mark every sample of a Pluto writer carries: the layout of its attachment, its flags, and reading it back.

Strategy: a value's payload is the message alone (MessagePack, :mod:`pluto.msgs`); what the bus needs to know of the
write travels beside it in the sample's attachment, packed with :mod:`struct` (fixed size, no parsing cost on the hot
path): the wall-clock time of the write, the writer's sequence number and id, and flags. A sample without an
attachment, or with one of another size, is a foreign writer's: it reads as zeros. Readers (:mod:`pluto.bus.receivers`),
the lock-step (:mod:`pluto.bus.lockstep`), the recorder and ``pluto info`` read the same layout.
"""

from __future__ import annotations

import struct

import zenoh

# Attachment of every sample: wall-clock time of the write (s), the writer's sequence number, the writer's id and
# flags (bit 0: the writer is lock-stepped, see pluto.bus.lockstep; bit 1: the value is a command). Older writers
# sent only the first two.
_ATTACHMENT = struct.Struct("<dQQB")
_ATTACHMENT_V1 = struct.Struct("<dQ")
LOCKSTEPPED = 1
COMMAND = 2
BATCH = 4  # the payload is a MessagePack array of values (a batching writer's), the attachment is its last one's

_NO_MARK = (0.0, 0, 0, 0)  # the mark of a sample without attachment (a foreign writer)

_ARRAY16 = struct.Struct(">BH")  # MessagePack array header of up to 65,535 items


def write_stamp(attachment: zenoh.ZBytes | None) -> tuple[float, int]:
    """The wall-clock time (s) a sample was written and its writer's sequence number, from its attachment;
    (0, 0) if it has none (a foreign writer)."""
    if attachment is None:
        return 0.0, 0
    raw = attachment.to_bytes()
    if len(raw) == _ATTACHMENT.size:
        written, seq, _wid, _flags = _ATTACHMENT.unpack(raw)
    elif len(raw) == _ATTACHMENT_V1.size:
        written, seq = _ATTACHMENT_V1.unpack(raw)
    else:
        return 0.0, 0
    return float(written), int(seq)


def write_mark(attachment: zenoh.ZBytes | None) -> tuple[float, int, int, int]:
    """(write time s, sequence number, writer id, flags) of a sample; zeros for a foreign writer."""
    if attachment is None:
        return 0.0, 0, 0, 0
    raw = attachment.to_bytes()
    if len(raw) == _ATTACHMENT.size:
        return _ATTACHMENT.unpack(raw)
    if len(raw) == _ATTACHMENT_V1.size:
        written, seq = _ATTACHMENT_V1.unpack(raw)
        return float(written), int(seq), 0, 0
    return 0.0, 0, 0, 0


def write_time(attachment: zenoh.ZBytes | None) -> float:
    """The wall-clock time a sample was written, from its attachment; 0 if it has none (a foreign writer)."""
    return write_stamp(attachment)[0]
