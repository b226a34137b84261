"""Writing bus messages to MCAP files: one file (:class:`LogWriter`) or a series of parts (:class:`SplitLogWriter`).

Strategy: messages go into zstd-compressed chunks. A chunk reaches the disk when it is full (``chunk_size``) or when
the owner calls :meth:`LogWriter.flush` (the recorder does so every second), so a writer killed without warning
loses at most the chunk in progress: every chunk before it is complete on disk, and :class:`~pluto.record.logfile.
LogFile` reads them back even though the file has no summary. An existing file is never replaced unless asked
(``force``); a failed write (disk full, a vanished disk) raises :class:`~pluto.record.format.LogError` saying what
is still readable.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self

from mcap.writer import CompressionType, Writer

from pluto import __version__, msgs
from pluto.record.format import (
    MESSAGE_ENCODING,
    METADATA_NAME,
    SCHEMA_ENCODING,
    LogError,
    encode_message,
    schema_bytes,
    schema_name,
    to_ns,
    wall_log_time,
)

__all__ = ["ChannelStats", "ForeignMessage", "LogWriter", "SplitLogWriter", "part_path"]

CHUNK_SIZE = 1024 * 1024
"""Bytes of (uncompressed) messages after which a chunk is closed even before the next :meth:`LogWriter.flush`."""

_COMPRESSION = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}


@dataclass
class ChannelStats:
    """What was written to one channel: count and the first and last log times (s)."""

    name: str
    type: type[msgs.Message]
    count: int = 0
    first: float = 0.0
    last: float = 0.0


@dataclass(frozen=True)
class ForeignMessage:
    """A message in another schema than Pluto's, written beside the bus messages for other tools (Foxglove's
    well-known schemas, for instance); Pluto's readers list its channel and skip its messages.

    Attributes:
        topic: the channel's topic.
        schema_name, schema_encoding, schema_data: the channel's schema (``foxglove.LaserScan``, ``protobuf``, a
            serialized FileDescriptorSet).
        message_encoding: how ``data`` is encoded (``protobuf``).
        data: the encoded message.
        log_time: the robot's time of the message, s.
    """

    topic: str
    schema_name: str
    schema_encoding: str
    schema_data: bytes
    message_encoding: str
    data: bytes
    log_time: float


def _describe(path: Path, err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return f"cannot write {path}: the disk is full ({err.strerror})"
    if err.errno == errno.EDQUOT:
        return f"cannot write {path}: the disk quota is exceeded ({err.strerror})"
    return f"cannot write {path}: {err.strerror or err}"


def _open_new(path: Path, force: bool) -> IO[bytes]:
    if path.is_dir():
        raise LogError(f"cannot write {path}: it is a directory")
    try:
        return open(path, "wb" if force else "xb")
    except FileExistsError:
        raise LogError(f"{path} exists; choose another name or overwrite it with --force") from None
    except FileNotFoundError:
        raise LogError(f"cannot create {path}: the folder {path.parent} does not exist") from None
    except NotADirectoryError:
        raise LogError(f"cannot create {path}: a part of {path.parent} is not a folder") from None
    except PermissionError:
        raise LogError(f"cannot create {path}: permission denied") from None
    except OSError as err:
        raise LogError(_describe(path, err)) from None


class LogWriter:
    """Writes bus messages to one MCAP file.

    Args:
        path: the file to create.
        metadata: extra entries of the ``pluto`` metadata record (robot, version and start time are always there:
            ``robot`` and ``start_time`` default to empty). With the entries of
            :data:`~pluto.record.format.WALL_LOG_TIME`, MCAP's ``log_time`` is the wall-clock time and
            ``publish_time`` the robot's (a recording, which viewers show on real dates); without, the other way
            round. The times given to the ``add`` methods mean the same either way.
        force: overwrite ``path`` if it exists.
        compression: chunk compression, ``zstd`` (default), ``lz4`` or ``none``.
        chunk_size: bytes of messages after which a chunk is written without waiting for :meth:`flush`.

    Raises:
        LogError: the file exists (and not ``force``), or it cannot be created or written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        metadata: Mapping[str, str] | None = None,
        force: bool = False,
        compression: str = "zstd",
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        if compression not in _COMPRESSION:
            raise LogError(f"unknown compression {compression!r}; use one of {', '.join(_COMPRESSION)}")
        self.path = Path(path)
        self.channels: dict[tuple[str, type[msgs.Message]], ChannelStats] = {}
        self.message_count = 0
        self.closed = False
        self._ids: dict[tuple[str, type[msgs.Message]], int] = {}
        self._schemas: dict[type[msgs.Message], int] = {}
        self._foreign_ids: dict[str, int] = {}
        self._foreign_schemas: dict[tuple[str, str], int] = {}
        self.foreign_count = 0
        """Messages written by :meth:`add_foreign`."""
        self._sequence: dict[int, int] = {}
        self._unflushed = 0
        self._stream = _open_new(self.path, force)
        self._writer = Writer(self._stream, chunk_size=chunk_size, compression=_COMPRESSION[compression])
        info = {"robot": "", "pluto_version": __version__, "start_time": "", **dict(metadata or {})}
        self._wall_axis = wall_log_time(info)
        self._guard(lambda: self._start(info))

    def _start(self, info: dict[str, str]) -> None:
        self._writer.start(profile="", library=f"pluto {__version__}")
        self._writer.add_metadata(METADATA_NAME, info)
        self._stream.flush()

    def _guard(self, action: Any) -> Any:
        """Run a write, turning an OS error into a LogError (and giving up on the file)."""
        try:
            return action()
        except OSError as err:
            raise self._failed(err) from None

    def _failed(self, err: OSError) -> LogError:
        self._abandon()
        written = "nothing readable" if self.message_count == 0 else "the messages of every complete chunk"
        return LogError(f"{_describe(self.path, err)}; the file holds {written}")

    def _abandon(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self._stream.close()

    # -- writing ------------------------------------------------------------------------------------------------

    def _times(self, robot_time: float, wall_time: float) -> tuple[int, int]:
        """MCAP's (log_time, publish_time) in ns of a write at these times (see the ``metadata`` argument)."""
        robot_ns, wall_ns = to_ns(robot_time), to_ns(wall_time)
        return (wall_ns, robot_ns) if self._wall_axis else (robot_ns, wall_ns)

    def _channel(self, name: str, cls: type[msgs.Message]) -> int:
        key = (name, cls)
        channel = self._ids.get(key)
        if channel is None:
            schema = self._schemas.get(cls)
            if schema is None:
                schema = self._schemas[cls] = self._writer.register_schema(
                    schema_name(cls), SCHEMA_ENCODING, schema_bytes(cls)
                )
            channel = self._ids[key] = self._writer.register_channel(name, MESSAGE_ENCODING, schema)
            self.channels[key] = ChannelStats(name, cls)
            self._sequence[channel] = 0
        return channel

    def add_encoded(
        self, name: str, cls: type[msgs.Message], data: bytes, log_time: float, publish_time: float
    ) -> None:
        """Write a message already encoded as JSON (see :func:`~pluto.record.format.encode_message`).

        Args:
            name: the interface.
            cls: its message type.
            data: the JSON of the message.
            log_time: the robot's time of the write, s.
            publish_time: the wall-clock time of the write, s since 1970.

        Raises:
            LogError: the file is closed, a time is negative, or the write failed.
        """
        if self.closed:
            raise LogError(f"{self.path} is closed")
        log_ns, publish_ns = self._times(log_time, publish_time)
        key = (name, cls)
        channel = self._ids.get(key) or self._channel(name, cls)
        sequence = self._sequence[channel] = self._sequence[channel] + 1
        try:
            self._writer.add_message(channel, log_ns, data, publish_ns, sequence)
        except OSError as err:
            raise self._failed(err) from None
        stats = self.channels[key]
        if stats.count == 0:
            stats.first = log_time
        stats.count += 1
        stats.last = log_time
        self.message_count += 1
        self._unflushed += 1

    def add(self, name: str, msg: msgs.Message, log_time: float, publish_time: float | None = None) -> None:
        """Write a message.

        Args:
            name: the interface.
            msg: the value.
            log_time: the robot's time of the write, s.
            publish_time: the wall-clock time of the write, s since 1970; the log time if None.

        Raises:
            LogError: the file is closed, a time is negative, or the write failed.
        """
        self.add_encoded(
            name, type(msg), encode_message(msg), log_time, log_time if publish_time is None else publish_time
        )

    def add_foreign(self, msg: ForeignMessage, publish_time: float) -> None:
        """Write a message in a schema of another tool (see :class:`ForeignMessage`).

        Args:
            msg: the message, its topic, schema and log time.
            publish_time: the wall-clock time of the write, s since 1970.

        Raises:
            LogError: the file is closed, a time is negative, the topic is used by a bus interface already, or the
                write failed.
        """
        if self.closed:
            raise LogError(f"{self.path} is closed")
        log_ns, publish_ns = self._times(msg.log_time, publish_time)
        channel = self._foreign_ids.get(msg.topic)
        if channel is None:
            if any(name == msg.topic for name, _ in self._ids):
                raise LogError(f"topic {msg.topic} is a bus interface's already")
            key = (msg.schema_name, msg.schema_encoding)
            schema = self._foreign_schemas.get(key)
            if schema is None:
                schema = self._foreign_schemas[key] = self._guard(
                    lambda: self._writer.register_schema(msg.schema_name, msg.schema_encoding, msg.schema_data)
                )
            channel = self._foreign_ids[msg.topic] = self._guard(
                lambda: self._writer.register_channel(msg.topic, msg.message_encoding, schema)
            )
            self._sequence[channel] = 0
        sequence = self._sequence[channel] = self._sequence[channel] + 1
        try:
            self._writer.add_message(channel, log_ns, msg.data, publish_ns, sequence)
        except OSError as err:
            raise self._failed(err) from None
        self.foreign_count += 1
        self.message_count += 1
        self._unflushed += 1

    def flush(self) -> None:
        """Close the chunk in progress (if it holds a message) and hand everything to the operating system.

        Raises:
            LogError: the write failed.
        """
        if self.closed or self._unflushed == 0:
            return
        self._guard(self._writer.flush)
        self._unflushed = 0

    @property
    def size(self) -> int:
        """Bytes on disk so far (the chunk in progress not counted)."""
        if self.closed:
            return self.path.stat().st_size if self.path.exists() else 0
        return self._stream.tell()

    def close(self) -> None:
        """Write the summary and close the file (idempotent).

        Raises:
            LogError: the write failed (the file then has no summary but its complete chunks are readable).
        """
        if self.closed:
            return

        def finish() -> None:
            self._writer.finish()  # type: ignore[no-untyped-call]
            self._stream.flush()
            os.fsync(self._stream.fileno())
            self._stream.close()

        self._guard(finish)
        self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def part_path(path: str | os.PathLike[str], index: int) -> Path:
    """The name of part ``index`` of a split log: ``run.mcap`` -> ``run_003.mcap``."""
    base = Path(path)
    suffix = base.suffix or ".mcap"
    return base.with_name(f"{base.stem if base.suffix else base.name}_{index:03d}{suffix}")


class SplitLogWriter:
    """Writes a log as a series of MCAP files, starting a new part when one gets too big or too long.

    With neither limit it writes the one file ``path``; with a limit, parts ``run_000.mcap``, ``run_001.mcap``...
    Each part is a complete log with its own schemas, channels and metadata (``part`` = its index).

    Args:
        path: the file, or the pattern of the parts' names.
        split_size: start a new part when this many bytes are on disk (0: no limit).
        split_duration: start a new part when the log time of a part would span more than this, s (0: no limit).
        metadata, force, compression, chunk_size: as for :class:`LogWriter`.

    Raises:
        LogError: as for :class:`LogWriter`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        split_size: int = 0,
        split_duration: float = 0.0,
        metadata: Mapping[str, str] | None = None,
        force: bool = False,
        compression: str = "zstd",
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        if split_size < 0 or split_duration < 0:
            raise LogError("split size and duration must be >= 0")
        self.path = Path(path)
        self.split_size = split_size
        self.split_duration = split_duration
        self._options: dict[str, Any] = {"force": force, "compression": compression, "chunk_size": chunk_size}
        self._metadata = dict(metadata or {})
        self.split = bool(split_size or split_duration)
        self.parts: list[Path] = []
        self.finished: list[LogWriter] = []
        if self.split:
            # refuse at once if any part name is taken, rather than after the first part filled up
            taken = [p for p in self.path.parent.glob(f"{part_path(self.path, 0).stem[:-3]}[0-9][0-9][0-9]*")]
            if taken and not force:
                raise LogError(f"{taken[0]} exists; choose another name or overwrite it with --force")
        self.current = self._open()

    def _open(self) -> LogWriter:
        index = len(self.parts)
        path = part_path(self.path, index) if self.split else self.path
        metadata = {**self._metadata, "part": str(index)} if self.split else self._metadata
        writer = LogWriter(path, metadata=metadata, **self._options)
        self.parts.append(path)
        self._part_start: float | None = None
        return writer

    def _rotate_if_due(self, log_time: float) -> None:
        writer = self.current
        if writer.message_count == 0:
            return
        too_big = self.split_size and writer.size >= self.split_size
        too_long = (
            self.split_duration and self._part_start is not None and log_time - self._part_start > self.split_duration
        )
        if too_big or too_long:
            writer.close()
            self.finished.append(writer)
            self.current = self._open()

    def add_encoded(
        self, name: str, cls: type[msgs.Message], data: bytes, log_time: float, publish_time: float
    ) -> None:
        """As :meth:`LogWriter.add_encoded`, in the current part (a new one if the current one is full)."""
        if self.split:
            self._rotate_if_due(log_time)
            if self._part_start is None:
                self._part_start = log_time
        self.current.add_encoded(name, cls, data, log_time, publish_time)

    def add_foreign(self, msg: ForeignMessage, publish_time: float) -> None:
        """As :meth:`LogWriter.add_foreign`, in the current part (a new one if the current one is full)."""
        if self.split:
            self._rotate_if_due(msg.log_time)
            if self._part_start is None:
                self._part_start = msg.log_time
        self.current.add_foreign(msg, publish_time)

    def add(self, name: str, msg: msgs.Message, log_time: float, publish_time: float | None = None) -> None:
        """As :meth:`LogWriter.add`, in the current part."""
        self.add_encoded(
            name, type(msg), encode_message(msg), log_time, log_time if publish_time is None else publish_time
        )

    def flush(self) -> None:
        """As :meth:`LogWriter.flush` on the current part."""
        self.current.flush()

    @property
    def size(self) -> int:
        """Bytes on disk in all parts so far."""
        return sum(w.size for w in self.finished) + self.current.size

    @property
    def message_count(self) -> int:
        return sum(w.message_count for w in self.finished) + self.current.message_count

    def close(self) -> None:
        """Close the current part (idempotent)."""
        self.current.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
