"""Reading Pluto logs (MCAP files), including ones whose recorder never closed them and ones with damaged bytes.

Strategy: the file is read front to back, record by record (MCAP's record framing: a one-byte opcode, an 8-byte
length, the body), rather than through the summary at its end, because a recorder killed with SIGKILL leaves no
summary. A record that runs past the end of the file is the chunk that was being written when the recorder died:
it and everything after it are skipped, and :attr:`LogFile.notes` says so; every complete chunk before it is read.

Damage (a bad disk block, a copy cut and patched, bytes overwritten) costs only the chunks it touches. A chunk's
header is checked against its record's length before anything else; its data is decompressed into at most the size
the header gives (:data:`MAX_CHUNK_BYTES` at most, so a damaged size cannot ask for gigabytes) and checked against
the header's CRC; then its records are read, all or none. A chunk that fails any of this is skipped and its byte
range is listed in :attr:`LogFile.damaged`, with the number of messages lost when the message index that the writer
puts after each chunk still says it. A record whose length itself is wrong (its header does not add up, or it runs
past the end of a file that goes on) leaves no way to know where the next record starts: reading resumes at the next
chunk whose header is whole and consistent (or the data end record or the footer), and the bytes between are listed
as damaged. A chunk whose opcode was changed into another record type shows by the message indexes after it (they
follow chunks only), and is listed the same way. The summary section repeats the schemas and channels: a copy there
that differs from the one read in a chunk is damage, and the chunk's is kept. A wrong byte inside a chunk whose
writer left out the CRC can go unnoticed; everything else is caught. Nothing but
:class:`~pluto.record.format.LogError` (for a file that is not a log at all) comes out.

Messages are kept in memory as their JSON bytes and decoded when asked for: an hour of the simulated robot's full
sensor suite takes about 500 MB.
"""

from __future__ import annotations

import fnmatch
import io
import mmap
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import lz4.frame  # type: ignore[import-untyped]  # (a dependency of mcap)
import zstandard
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Channel, Footer, Message, Metadata, Schema

from pluto import msgs
from pluto.record.format import (
    MESSAGE_ENCODING,
    METADATA_NAME,
    SCHEMA_ENCODING,
    LogError,
    decode_message,
    encode_message,
    from_ns,
    schema_bytes,
    schema_name,
    to_ns,
    type_of_schema,
    wall_log_time,
)

__all__ = ["MAX_CHUNK_BYTES", "ChannelInfo", "DamagedRange", "LogFile", "LoggedMessage", "match_names"]

MAGIC = b"\x89MCAP0\r\n"
MAX_CHUNK_BYTES = 256 * 1024 * 1024
"""Largest uncompressed chunk read, bytes: Pluto writes chunks of 1 MB, other MCAP writers a few MB; a chunk header
that claims more is damaged."""

_RECORD_HEAD = struct.Struct("<BQ")
_CHUNK_HEAD = struct.Struct("<QQQII")  # message start and end times, uncompressed size and CRC, compression's length
_U64 = struct.Struct("<Q")
_MESSAGE_FIELDS = struct.Struct("<HIQQ")  # a message record's channel id, sequence, log time and publish time
_FOOTER_RECORD = _RECORD_HEAD.size + 20
_DATA_END = bytes([Opcode.DATA_END]) + _U64.pack(4)
_CHUNK_OPCODE = bytes([Opcode.CHUNK])


def _valid_opcode(opcode: int) -> bool:
    """True for MCAP's record types (0x01-0x0f) and the private ones (0x80-0xff)."""
    return 0x01 <= opcode <= 0x0F or opcode >= 0x80


@dataclass(frozen=True)
class LoggedMessage:
    """One message of a log.

    Attributes:
        name: the interface it was written to.
        log_time: the robot's time of the write, s.
        publish_time: the wall-clock time of the write, s since 1970 (the log time for imported logs).
        sequence: its number on its channel, from 1.
        message: the value.
    """

    name: str
    log_time: float
    publish_time: float
    sequence: int
    message: msgs.Message


@dataclass
class ChannelInfo:
    """One channel (interface) of a log.

    Attributes:
        name: the interface.
        type_name: its schema's name (``pluto.msgs.Odometry``).
        type: the Pluto message type, or None if the schema is not one of Pluto's (such a channel is listed but
            its messages are not decoded).
        encoding: the message encoding (``json`` for Pluto logs).
        count: messages on it.
        first, last: log times of its first and last message, s.
    """

    name: str
    type_name: str
    type: type[msgs.Message] | None
    encoding: str
    count: int = 0
    first: float = 0.0
    last: float = 0.0

    @property
    def rate(self) -> float:
        """Mean rate over its time span, Hz (0 with fewer than two messages)."""
        span = self.last - self.first
        return (self.count - 1) / span if self.count > 1 and span > 0 else 0.0


@dataclass
class _Entry:
    log_ns: int
    publish_ns: int
    sequence: int
    channel: int
    data: bytes


@dataclass
class DamagedRange:
    """Bytes of a log that could not be read and were skipped.

    Attributes:
        start, end: the byte range in the file, ``[start, end)``.
        kind: what was there: ``chunk`` (a chunk of messages), ``record (opcode 0x0c)`` (another record), or
            ``bytes`` (the records' framing was broken: from there to the next record found).
        reason: why it could not be read.
        messages: messages lost with it, from the message index after the chunk; None if unknown.
    """

    start: int
    end: int
    kind: str
    reason: str
    messages: int | None = None

    def __str__(self) -> str:
        lost = "" if self.messages is None else f"; {self.messages:,} messages lost"
        return f"{self.kind} at bytes {self.start}-{self.end} ({self.end - self.start:,} bytes): {self.reason}{lost}"


@dataclass
class _Scan:
    """What one pass over the file found."""

    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    entries: list[_Entry] = field(default_factory=list)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    chunks: int = 0
    bad_chunks: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    footer: bool = False
    truncated: int = 0
    notes: list[str] = field(default_factory=list)


def match_names(name: str, patterns: Iterable[str]) -> bool:
    """True if interface ``name`` matches one of the glob ``patterns`` (``Sick/*``, ``*Pose``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


class _Damage(Exception):
    """A record that cannot be read; ``framed``: its length agrees with its contents, so the next record starts
    where it ends (otherwise reading finds the next record by its contents)."""

    def __init__(self, reason: str, *, framed: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.framed = framed


_KNOWN_COMPRESSIONS = ("", "zstd", "lz4")


@dataclass(frozen=True)
class _ChunkLayout:
    uncompressed_size: int
    crc: int
    compression: str
    data_start: int
    data_end: int


def _chunk_layout(data: bytes | mmap.mmap, start: int, length: int) -> _ChunkLayout:
    """The fields of the chunk record whose body is ``data[start:start + length]``, checked against each other.

    Raises:
        _Damage: the lengths in the header do not add up to the record's length (``framed`` False), or the chunk
            claims more than :data:`MAX_CHUNK_BYTES` or a compression this reader does not know (``framed`` True).
    """
    if length < _CHUNK_HEAD.size + 8:
        raise _Damage(f"a chunk record of {length} bytes is shorter than a chunk's header", framed=False)
    _begin, _end, uncompressed_size, crc, name_length = _CHUNK_HEAD.unpack_from(data, start)
    name_end = start + _CHUNK_HEAD.size + name_length
    if name_length > 16 or name_end + 8 > start + length:
        raise _Damage(f"the chunk's compression name has an impossible length ({name_length})", framed=False)
    (data_length,) = _U64.unpack_from(data, name_end)
    if name_end + 8 + data_length != start + length:
        raise _Damage(
            f"the chunk's lengths do not add up (record {length} bytes, compressed data {data_length} bytes)",
            framed=False,
        )
    try:
        compression = bytes(data[start + _CHUNK_HEAD.size : name_end]).decode("ascii")
    except UnicodeDecodeError:
        raise _Damage("the chunk's compression name is not text", framed=False) from None
    if compression not in _KNOWN_COMPRESSIONS:
        raise _Damage(f"the chunk is compressed with {compression!r}, which this reader does not know")
    if uncompressed_size > MAX_CHUNK_BYTES:
        raise _Damage(f"the chunk claims {uncompressed_size:,} bytes uncompressed (at most {MAX_CHUNK_BYTES:,})")
    return _ChunkLayout(uncompressed_size, crc, compression, name_end + 8, start + length)


def _decompress(layout: _ChunkLayout, data: bytes | mmap.mmap) -> bytes:
    """The chunk's records, decompressed into at most the size its header gives, and checked against its CRC.

    Raises:
        _Damage: the data does not decompress, has another size than the header says, or fails the CRC.
    """
    raw = bytes(data[layout.data_start : layout.data_end])
    size = layout.uncompressed_size
    try:
        if layout.compression == "zstd":
            declared = zstandard.frame_content_size(raw)
            if declared >= 0 and declared != size:
                raise _Damage(f"its zstd frame holds {declared:,} bytes, its header says {size:,}")
            if declared == size:  # the usual frame: decompressed in one go into exactly that
                out = zstandard.ZstdDecompressor().decompress(raw, max_output_size=size)
            else:  # a frame without its size: at most one byte more than declared shows a chunk that is longer
                with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
                    out = reader.read(size + 1)
        elif layout.compression == "lz4":
            decompressor = lz4.frame.LZ4FrameDecompressor()
            out = bytes(decompressor.decompress(raw, max_length=size + 1))
            if not decompressor.eof and len(out) <= size:
                raise _Damage("lz4: the compressed data ends before its frame does")
        else:
            out = raw
    except (zstandard.ZstdError, RuntimeError, ValueError, EOFError) as err:
        raise _Damage(f"its {layout.compression} data does not decompress ({err})") from None
    if len(out) != size:
        raise _Damage(f"it holds {len(out):,}{'+' if len(out) > size else ''} bytes, its header says {size:,}")
    if layout.crc != 0:
        crc = zlib.crc32(out)
        if crc != layout.crc:
            raise _Damage(f"CRC mismatch (the header says {layout.crc:#010x}, the data gives {crc:#010x})")
    return out


def _chunk_records(layout: _ChunkLayout, data: bytes | mmap.mmap) -> list[Schema | Channel | _Entry]:
    """The schemas, channels and messages of one chunk, all or none.

    Raises:
        _Damage: the chunk cannot be read (see :func:`_decompress`), or its records are not valid.
    """
    body = _decompress(layout, data)
    records: list[Schema | Channel | _Entry] = []
    pos, size = 0, len(body)
    unpack_head, unpack_message = _RECORD_HEAD.unpack_from, _MESSAGE_FIELDS.unpack_from
    try:
        while pos < size:
            if pos + _RECORD_HEAD.size > size:
                raise _Damage(f"a record inside the chunk is cut short at byte {pos}")
            opcode, length = unpack_head(body, pos)
            start = pos + _RECORD_HEAD.size
            end = start + length
            if end > size:
                raise _Damage(f"a record inside the chunk runs past its end (byte {pos}, {length} bytes)")
            if opcode == Opcode.MESSAGE:  # the bulk of a log: its fields read here, its data kept as bytes
                if length < _MESSAGE_FIELDS.size:
                    raise _Damage(f"a message inside the chunk is {length} bytes, shorter than its header")
                channel, sequence, log_ns, publish_ns = unpack_message(body, start)
                records.append(_Entry(log_ns, publish_ns, sequence, channel, body[start + _MESSAGE_FIELDS.size : end]))
            elif opcode in (Opcode.SCHEMA, Opcode.CHANNEL):
                stream = ReadDataStream(io.BytesIO(body[start:end]))
                records.append(Schema.read(stream) if opcode == Opcode.SCHEMA else Channel.read(stream))
            pos = end
    except (McapError, struct.error, UnicodeDecodeError, ValueError) as err:
        raise _Damage(f"a record inside the chunk is not valid: {err or type(err).__name__}") from None
    return records


def _message_index_count(body: bytes) -> int:
    """Messages a message index record lists.

    Raises:
        _Damage: its lengths do not add up.
    """
    if len(body) < 6:
        raise _Damage("a message index record shorter than its header", framed=False)
    (records_length,) = struct.unpack_from("<I", body, 2)
    if 6 + records_length != len(body) or records_length % 16:
        raise _Damage("a message index record whose lengths do not add up", framed=False)
    return int(records_length) // 16


def _plausible_chunk(data: bytes | mmap.mmap, pos: int, size: int) -> bool:
    """True if a chunk record whose header is whole and consistent starts at ``pos``."""
    if pos + _RECORD_HEAD.size > size:
        return False
    opcode, length = _RECORD_HEAD.unpack_from(data, pos)
    if opcode != Opcode.CHUNK or pos + _RECORD_HEAD.size + length > size:
        return False
    try:
        _chunk_layout(data, pos + _RECORD_HEAD.size, length)
    except _Damage:
        return False
    return True


def _next_record(data: bytes | mmap.mmap, start: int, size: int) -> int | None:
    """Where reading can go on after a stretch whose record framing is broken: the first position at or after
    ``start`` where a chunk with a consistent header begins, or the data end record that closes the data section,
    or the footer; None if there is none."""
    candidates: list[int] = []
    data_end = data.find(_DATA_END, start)
    if data_end >= 0:
        candidates.append(data_end)
    footer = size - len(MAGIC) - _FOOTER_RECORD
    if footer >= start and data[size - len(MAGIC) :] == MAGIC and data[footer] == Opcode.FOOTER:
        candidates.append(footer)
    limit = min(candidates, default=size)
    pos = start
    while pos < limit:
        found = data.find(_CHUNK_OPCODE, pos, limit)
        if found < 0:
            break
        if _plausible_chunk(data, found, size):
            return found
        pos = found + 1
    return min(candidates) if candidates else None


def _read_records(data: bytes | mmap.mmap, scan: _Scan, path: Path) -> None:
    """Read the whole file into ``scan``: every readable record, the damaged ranges, the unfinished end.

    Raises:
        LogError: it is not an MCAP file.
    """
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        raise LogError(f"{path} is not an MCAP file (it does not start with the MCAP magic bytes)")
    _walk(data, scan)
    scan.notes.extend(f"skipped a damaged {damage}" for damage in scan.damaged)


def _walk(data: bytes | mmap.mmap, scan: _Scan) -> None:
    _RecordWalk(data, scan).run()


class _RecordWalk:
    """One pass over the records of a file, front to back, into ``scan``: each record is taken, and a damaged one
    is listed and stepped over (by its length when its framing holds, else to the next record found)."""

    def __init__(self, data: bytes | mmap.mmap, scan: _Scan) -> None:
        self.data = data
        self.scan = scan
        self.size = len(data)
        self.lost_with: DamagedRange | None = None  # the damaged chunk whose message indexes come next
        # The last record taken that was not a chunk: (opcode, start, end, messages before it). Message indexes
        # follow a chunk, so indexes after another record show a chunk whose opcode was damaged into another type.
        self.previous: tuple[int, int, int, int] | None = None

    def run(self) -> None:
        pos = len(MAGIC)
        while pos < self.size:
            if pos + _RECORD_HEAD.size > self.size:
                self.scan.truncated = self.size - pos
                return
            opcode, length = _RECORD_HEAD.unpack_from(self.data, pos)
            end = pos + _RECORD_HEAD.size + length
            try:
                if self._record(pos, opcode, length):
                    return
            except _Damage as damage:
                following = self._damaged(pos, opcode, end, damage)
                if following is None:
                    return
                pos = following
                continue
            pos = end

    def _record(self, pos: int, opcode: int, length: int) -> bool:
        """Take the record at ``pos``; True at the footer.

        Raises:
            _Damage: the record cannot be read.
        """
        body_start = pos + _RECORD_HEAD.size
        end = body_start + length
        if not _valid_opcode(opcode):
            raise _Damage(f"no record starts here (opcode {opcode:#04x})", framed=False)
        if end > self.size:
            raise _Damage(f"a record of {length:,} bytes runs past the end of the file", framed=False)
        if opcode == Opcode.MESSAGE_INDEX:
            self._message_index(_message_index_count(bytes(self.data[body_start:end])))
            return False
        self.lost_with = None
        self.previous = None if opcode == Opcode.CHUNK else (opcode, pos, end, len(self.scan.entries))
        return _take_record(opcode, self.data, body_start, length, self.scan)

    def _message_index(self, count: int) -> None:
        """A message index of ``count`` messages: after a damaged chunk they are its messages lost; after a record
        that is not a chunk, that record was a chunk whose opcode is damaged, and what was taken from it is
        dropped."""
        scan = self.scan
        if self.lost_with is None and self.previous is not None:
            taken_as, start, stop, entries = self.previous
            del scan.entries[entries:]
            reason = f"it is followed by message indexes: a chunk whose opcode is damaged ({taken_as:#04x})"
            self.lost_with = DamagedRange(start, stop, "chunk", reason)
            scan.damaged.append(self.lost_with)
            scan.bad_chunks += 1
        if self.lost_with is not None:
            self.lost_with.messages = (self.lost_with.messages or 0) + count
        self.previous = None

    def _damaged(self, pos: int, opcode: int, end: int, damage: _Damage) -> int | None:
        """List the damage of the record at ``pos``; where reading goes on, or None if nothing more can be read."""
        scan = self.scan
        self.lost_with, self.previous = None, None
        if damage.framed:
            kind = "chunk" if opcode == Opcode.CHUNK else f"record (opcode {opcode:#04x})"
            scan.damaged.append(DamagedRange(pos, end, kind, damage.reason))
            if opcode == Opcode.CHUNK:
                scan.bad_chunks += 1
                self.lost_with = scan.damaged[-1]
            return end
        following = _next_record(self.data, pos + 1, self.size)
        if following is None and _valid_opcode(opcode) and end > self.size:
            scan.truncated = self.size - pos  # the record being written when the writer stopped: not damage
            return None
        stop = self.size if following is None else following
        scan.damaged.append(DamagedRange(pos, stop, "chunk" if opcode == Opcode.CHUNK else "bytes", damage.reason))
        if opcode == Opcode.CHUNK:
            scan.bad_chunks += 1
        return following


def _take_record(opcode: int, data: bytes | mmap.mmap, start: int, length: int, scan: _Scan) -> bool:
    """Take one top-level record; True at the footer.

    Raises:
        _Damage: the record cannot be read.
    """
    if opcode == Opcode.CHUNK:
        records = _chunk_records(_chunk_layout(data, start, length), data)
        scan.chunks += 1
        for record in records:
            _take_inner(record, scan)
        return False
    if opcode not in (Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE, Opcode.METADATA, Opcode.FOOTER):
        return False  # a record this reader does not need (indexes, statistics, attachments)
    body = bytes(data[start : start + length])
    stream = ReadDataStream(io.BytesIO(body))
    try:
        if opcode in (Opcode.SCHEMA, Opcode.CHANNEL):
            declared = Schema.read(stream) if opcode == Opcode.SCHEMA else Channel.read(stream)
            if not _take_inner(declared, scan):
                what = "schema" if opcode == Opcode.SCHEMA else "channel"
                raise _Damage(f"{what} {declared.id} differs from the one read before it, which is kept")
        elif opcode == Opcode.MESSAGE:
            if length < _MESSAGE_FIELDS.size:
                raise _Damage(f"a message record of {length} bytes is shorter than its header")
            _take_inner(Message.read(stream, length), scan)
        elif opcode == Opcode.METADATA:
            record = Metadata.read(stream)
            scan.metadata[record.name] = dict(record.metadata)
        else:
            Footer.read(stream)
            scan.footer = True
            return True
    except (McapError, struct.error, UnicodeDecodeError, ValueError) as err:
        raise _Damage(f"not a valid record: {err or type(err).__name__}") from None
    return False


def _take_inner(record: object, scan: _Scan) -> bool:
    """Take a schema, channel or message; False for a schema or channel that differs from the one of its id read
    before it (the first is kept: the summary section repeats them, and a damaged copy there must not replace a
    chunk's, which passed its CRC)."""
    if isinstance(record, _Entry):
        scan.entries.append(record)
    elif isinstance(record, Message):
        scan.entries.append(
            _Entry(record.log_time, record.publish_time, record.sequence, record.channel_id, record.data)
        )
    elif isinstance(record, Channel):
        known_channel = scan.channels.setdefault(record.id, record)
        return known_channel == record
    elif isinstance(record, Schema):
        known_schema = scan.schemas.setdefault(record.id, record)
        return known_schema == record
    return True


class LogFile:
    """A log read into memory: its channels, metadata and messages in log-time order.

    Args:
        path: the MCAP file.

    Raises:
        LogError: the file cannot be read or is not an MCAP file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as file:
                self.size = os.fstat(file.fileno()).st_size
                scan = _Scan()
                if self.size == 0:
                    raise LogError(f"{self.path} is empty (the recorder wrote nothing)")
                with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    _read_records(data, scan, self.path)
        except OSError as err:
            raise LogError(f"cannot read {self.path}: {err.strerror or err}") from None
        self._take(scan)

    @classmethod
    def from_messages(
        cls,
        path: str | os.PathLike[str],
        messages: Iterable[tuple[str, msgs.Message, float]],
        *,
        metadata: Mapping[str, str] | None = None,
        notes: Iterable[str] = (),
    ) -> LogFile:
        """A log held in memory only, of messages read from another format (a ROS bag), so that everything that
        reads Pluto logs (replay, the offline SLAM, the readers, CSV export) reads it too.

        Args:
            path: the file the messages were read from (for messages and :attr:`path`).
            messages: (interface, message, log time in s) in any order; equal times keep this order.
            metadata: the ``pluto`` metadata record (robot, source, ...).
            notes: what the conversion noticed, for the user.

        Raises:
            LogError: a log time is negative or not finite.
        """
        log = cls.__new__(cls)
        log.path = Path(path)
        scan = _Scan(footer=True)
        channel_ids: dict[str, int] = {}
        schema_ids: dict[type[msgs.Message], int] = {}
        sequences: dict[int, int] = {}
        for name, message, t in messages:
            kind = type(message)
            sid = schema_ids.get(kind)
            if sid is None:
                sid = schema_ids[kind] = len(schema_ids) + 1
                scan.schemas[sid] = Schema(
                    id=sid, name=schema_name(kind), encoding=SCHEMA_ENCODING, data=schema_bytes(kind)
                )
            cid = channel_ids.get(name)
            if cid is None:
                cid = channel_ids[name] = len(channel_ids) + 1
                scan.channels[cid] = Channel(
                    id=cid, topic=name, message_encoding=MESSAGE_ENCODING, metadata={}, schema_id=sid
                )
            sequences[cid] = sequences.get(cid, 0) + 1
            data = encode_message(message)
            ns = to_ns(t)
            scan.entries.append(_Entry(ns, ns, sequences[cid], cid, data))
        if metadata:
            scan.metadata[METADATA_NAME] = dict(metadata)
        scan.notes.extend(notes)
        log.size = sum(len(e.data) for e in scan.entries)
        log._take(scan)
        return log

    def _take(self, scan: _Scan) -> None:
        """Take what a pass over a file found (or a conversion made): channels, messages, notes."""
        self.closed = scan.footer
        """True if the writer finished the file (it has its summary); False after a crash or a kill."""
        self.chunks = scan.chunks
        """Complete chunks read."""
        self.damaged = list(scan.damaged)
        """Byte ranges that could not be read (damaged chunks, broken records), in file order; their messages are
        not in the log. ``pluto log recover`` writes a copy without them."""
        self.bad_chunks = scan.bad_chunks
        """Chunks among :attr:`damaged`."""
        self.metadata = scan.metadata
        self.notes = list(scan.notes)
        self.truncated_bytes = scan.truncated
        if not self.closed:
            lost = f"; the last {scan.truncated} bytes (an unfinished chunk) were skipped" if scan.truncated else ""
            self.notes.insert(
                0,
                f"the file was not closed (its recorder was killed or crashed): read {scan.chunks} complete "
                f"chunk{'s' if scan.chunks != 1 else ''}{lost}",
            )
        self._channels = scan.channels
        self._declare_channels(scan)
        if wall_log_time(self.info):  # MCAP's log_time is the wall clock here: the robot's time is publish_time
            for entry in scan.entries:
                entry.log_ns, entry.publish_ns = entry.publish_ns, entry.log_ns
        self._entries = self._count_entries(scan.entries, scan.channels)
        self.undecodable = 0
        """Messages whose JSON did not decode as their type (counted as they are read)."""

    def _declare_channels(self, scan: _Scan) -> None:
        """:attr:`channels` and the message type of each channel id, from the channels and schemas ``scan`` read;
        a note names the channels that are not decoded."""
        self._types: dict[int, type[msgs.Message] | None] = {}
        self.channels: dict[str, ChannelInfo] = {}
        unknown: list[str] = []
        foxglove: list[str] = []  # `pluto record --foxglove`: for Foxglove's panels, not for replay
        for cid, channel in scan.channels.items():
            schema = scan.schemas.get(channel.schema_id)
            type_name = schema.name if schema else ""
            cls = type_of_schema(type_name) if channel.message_encoding == MESSAGE_ENCODING else None
            self._types[cid] = cls
            if cls is None and type_name.startswith("foxglove."):
                foxglove.append(channel.topic)
            elif cls is None:
                unknown.append(channel.topic)
            if channel.topic not in self.channels:
                self.channels[channel.topic] = ChannelInfo(channel.topic, type_name, cls, channel.message_encoding)
        if foxglove:
            self.notes.append(f"channels in Foxglove's schemas, for its viewers (not replayed): {', '.join(foxglove)}")
        if unknown:
            self.notes.append(f"channels not in Pluto's JSON form are listed but not decoded: {', '.join(unknown)}")

    def _count_entries(self, entries: list[_Entry], channels: Mapping[int, Channel]) -> list[_Entry]:
        """The entries of declared channels in log time order, each counted in its channel's :attr:`channels` row
        (count, first and last time); a note counts those of undeclared channels, which are left out."""
        orphans = 0
        kept = []
        for entry in entries:
            declared = channels.get(entry.channel)
            if declared is None:
                orphans += 1
                continue
            kept.append(entry)
            info = self.channels[declared.topic]
            t = from_ns(entry.log_ns)
            if info.count == 0 or t < info.first:
                info.first = t
            if info.count == 0 or t > info.last:
                info.last = t
            info.count += 1
        if orphans:
            self.notes.append(f"{orphans} messages on undeclared channels were skipped")
        kept.sort(key=lambda e: e.log_ns)  # stable: equal times keep the order they were written in
        return kept

    def damage_warning(self) -> str:
        """One line on what of the file could not be read and how to get a clean copy ("" if nothing was damaged)."""
        if not self.damaged:
            return ""
        ranges = ", ".join(f"{d.start}-{d.end}" for d in self.damaged[:3])
        if len(self.damaged) > 3:
            ranges += f" and {len(self.damaged) - 3} more"
        known = [d.messages for d in self.damaged if d.messages is not None]
        lost = f", {sum(known):,}{'+' if len(known) < len(self.damaged) else ''} messages lost" if known else ""
        return (
            f"{self.path} is damaged: {len(self.damaged)} byte range{'s' if len(self.damaged) != 1 else ''} "
            f"could not be read (bytes {ranges}){lost}; the rest is read. `pluto log recover {self.path} -o "
            "FIXED.mcap` writes a copy with every readable message and a new index"
        )

    # -- what the log holds -------------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        return len(self._entries)

    @property
    def start(self) -> float:
        """Log time of the first message, s (0 if there is none)."""
        return from_ns(self._entries[0].log_ns) if self._entries else 0.0

    @property
    def end(self) -> float:
        """Log time of the last message, s (0 if there is none)."""
        return from_ns(self._entries[-1].log_ns) if self._entries else 0.0

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def info(self) -> dict[str, str]:
        """The ``pluto`` metadata record (robot, pluto_version, start_time, time_base, ...); empty if absent."""
        return dict(self.metadata.get(METADATA_NAME, {}))

    def names(self, patterns: Iterable[str] | None = None) -> list[str]:
        """The interfaces in the log, sorted; only those matching ``patterns`` (globs) if given."""
        chosen = sorted(self.channels)
        if patterns is None:
            return chosen
        wanted = list(patterns)
        return [n for n in chosen if match_names(n, wanted)]

    # -- messages -----------------------------------------------------------------------------------------------

    def messages(
        self, names: Iterable[str] | None = None, start: float | None = None, end: float | None = None
    ) -> Iterator[LoggedMessage]:
        """The messages in log-time order (the write order among equal times).

        Args:
            names: only these interfaces (exact names); all if None.
            start, end: only log times in [start, end], s.

        Messages whose JSON does not decode are skipped and counted in :attr:`undecodable`; channels of unknown
        types are skipped.
        """
        wanted = None if names is None else set(names)
        lo = None if start is None else round(start * 1e9)
        hi = None if end is None else round(end * 1e9)
        for entry in self._entries:
            if lo is not None and entry.log_ns < lo:
                continue
            if hi is not None and entry.log_ns > hi:
                break
            channel = self._channels[entry.channel]
            if wanted is not None and channel.topic not in wanted:
                continue
            cls = self._types.get(entry.channel)
            if cls is None:
                continue
            try:
                message = decode_message(entry.data, cls)
            except LogError:
                self.undecodable += 1
                continue
            yield LoggedMessage(
                channel.topic, from_ns(entry.log_ns), from_ns(entry.publish_ns), entry.sequence, message
            )

    def series(self, name: str) -> list[LoggedMessage]:
        """Every message of one interface, in log-time order."""
        return list(self.messages([name]))
