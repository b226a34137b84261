"""Reading Pluto logs (MCAP files), including ones whose recorder never closed them.

Strategy: the file is read front to back, record by record (MCAP's record framing: a one-byte opcode, an 8-byte
length, the body), rather than through the summary at its end, because a recorder killed with SIGKILL leaves no
summary. A record that runs past the end of the file is the chunk that was being written when the recorder died:
it and everything after it are skipped, and :attr:`LogFile.notes` says so; every complete chunk before it is read.
A chunk that does not decompress or fails its CRC is skipped with a note, and reading goes on.

Messages are kept in memory as their JSON bytes and decoded when asked for: an hour of the simulated robot's full
sensor suite takes about 500 MB.
"""

from __future__ import annotations

import fnmatch
import io
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Channel, Chunk, Footer, Message, Metadata, Schema
from mcap.stream_reader import CRCValidationError, breakup_chunk

from pluto import msgs
from pluto.record.format import (
    MESSAGE_ENCODING,
    METADATA_NAME,
    LogError,
    decode_message,
    from_ns,
    type_of_schema,
    wall_log_time,
)

__all__ = ["ChannelInfo", "LogFile", "LoggedMessage", "match_names"]

MAGIC = b"\x89MCAP0\r\n"
_RECORD_HEAD = struct.Struct("<BQ")


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
class _Scan:
    """What one pass over the file found."""

    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    entries: list[_Entry] = field(default_factory=list)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    chunks: int = 0
    bad_chunks: int = 0
    footer: bool = False
    truncated: int = 0
    notes: list[str] = field(default_factory=list)


def match_names(name: str, patterns: Iterable[str]) -> bool:
    """True if interface ``name`` matches one of the glob ``patterns`` (``Sick/*``, ``*Pose``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _read_records(data: bytes | mmap.mmap, scan: _Scan, path: Path) -> None:
    size = len(data)
    if size < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        raise LogError(f"{path} is not an MCAP file (it does not start with the MCAP magic bytes)")
    pos = len(MAGIC)
    while pos < size:
        if pos + _RECORD_HEAD.size > size:
            scan.truncated = size - pos
            return
        opcode, length = _RECORD_HEAD.unpack_from(data, pos)
        body_start = pos + _RECORD_HEAD.size
        end = body_start + length
        if end > size:
            scan.truncated = size - pos
            return
        body = bytes(data[body_start:end])
        try:
            if _take_record(opcode, body, scan, pos):
                return
        except (McapError, struct.error, UnicodeDecodeError, ValueError) as err:
            scan.notes.append(f"record at byte {pos} (opcode {opcode}) is not valid, skipped: {err}")
        pos = end


def _take_record(opcode: int, body: bytes, scan: _Scan, pos: int) -> bool:
    """Take one top-level record; True at the footer."""
    if opcode == Opcode.CHUNK:
        chunk = Chunk.read(ReadDataStream(io.BytesIO(body)))
        try:
            records = breakup_chunk(chunk, validate_crc=True)
        except (McapError, CRCValidationError, struct.error, ValueError, RuntimeError) as err:
            scan.bad_chunks += 1
            scan.notes.append(f"chunk at byte {pos} is damaged, its messages are skipped: {err}")
            return False
        scan.chunks += 1
        for record in records:
            _take_inner(record, scan)
    elif opcode in (Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE):
        stream = ReadDataStream(io.BytesIO(body))
        if opcode == Opcode.SCHEMA:
            _take_inner(Schema.read(stream), scan)
        elif opcode == Opcode.CHANNEL:
            _take_inner(Channel.read(stream), scan)
        else:
            _take_inner(Message.read(stream, len(body)), scan)
    elif opcode == Opcode.METADATA:
        record = Metadata.read(ReadDataStream(io.BytesIO(body)))
        scan.metadata[record.name] = dict(record.metadata)
    elif opcode == Opcode.FOOTER:
        Footer.read(ReadDataStream(io.BytesIO(body)))
        scan.footer = True
        return True
    return False


def _take_inner(record: object, scan: _Scan) -> None:
    if isinstance(record, Message):
        scan.entries.append(
            _Entry(record.log_time, record.publish_time, record.sequence, record.channel_id, record.data)
        )
    elif isinstance(record, Channel):
        scan.channels[record.id] = record
    elif isinstance(record, Schema):
        scan.schemas[record.id] = record


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
        self.closed = scan.footer
        """True if the writer finished the file (it has its summary); False after a crash or a kill."""
        self.chunks = scan.chunks
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
        if wall_log_time(self.info):  # MCAP's log_time is the wall clock here: the robot's time is publish_time
            for entry in scan.entries:
                entry.log_ns, entry.publish_ns = entry.publish_ns, entry.log_ns
        orphans = 0
        entries = []
        for entry in scan.entries:
            declared = scan.channels.get(entry.channel)
            if declared is None:
                orphans += 1
                continue
            entries.append(entry)
            info = self.channels[declared.topic]
            t = from_ns(entry.log_ns)
            if info.count == 0 or t < info.first:
                info.first = t
            if info.count == 0 or t > info.last:
                info.last = t
            info.count += 1
        if orphans:
            self.notes.append(f"{orphans} messages on undeclared channels were skipped")
        entries.sort(key=lambda e: e.log_ns)  # stable: equal times keep the order they were written in
        self._entries = entries
        self.undecodable = 0
        """Messages whose JSON did not decode as their type (counted as they are read)."""

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
