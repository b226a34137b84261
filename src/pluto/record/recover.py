"""Repairing a log whose recorder was killed, or that was damaged: a new MCAP file, with index and summary, from its
readable chunks.

Strategy: a recorder killed with SIGKILL leaves every complete chunk on disk but no summary, so indexed readers (the
Python ``mcap`` reader's ``iter_messages``, ``@mcap/core``'s indexed reader) refuse the file or find nothing in it,
while streaming readers and :class:`~pluto.record.logfile.LogFile` read it. A damaged file (bytes changed inside a
chunk, in its header or in a record's length) stops the ``mcap`` library's readers at the damaged chunk with a
decompression or CRC error. The file is read front to back as :mod:`pluto.record.logfile` reads it: the chunk being
written when the recorder died is skipped; a damaged chunk, or a stretch whose record framing is broken, is skipped
and its byte range reported; every other chunk is read whole. Everything found is written again in its order in the
file: the schemas and channels (Pluto's and foreign ones, with their metadata), the metadata records, and every
message with its log time, publish time and sequence number. The MCAP writer then adds the chunk indexes and the
summary. The output is written to a temporary file beside it and renamed into place only when complete, so a failed
repair leaves nothing half-written; the input is never changed.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from mcap.writer import CompressionType, Writer

from pluto import __version__
from pluto.record.format import LogError
from pluto.record.logfile import DamagedRange, _read_records, _Scan
from pluto.record.writer import CHUNK_SIZE

__all__ = ["RecoverReport", "recover_log"]


@dataclass
class RecoverReport:
    """What :func:`recover_log` found and wrote.

    Attributes:
        source, output: the broken file and the repaired one.
        was_closed: the source had its summary already (it was not broken; it is written again all the same).
        chunks: complete chunks read; bad_chunks: damaged ones skipped.
        damaged: the byte ranges of the source left out (damaged chunks, broken records), in file order.
        truncated_bytes: bytes at the end of the source that were skipped (the chunk in progress at the kill).
        messages: messages written; orphans: messages on channels never declared, left out.
        channels: channels written.
        notes: what reading the source said.
    """

    source: Path
    output: Path
    was_closed: bool = False
    chunks: int = 0
    bad_chunks: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    truncated_bytes: int = 0
    messages: int = 0
    orphans: int = 0
    channels: int = 0
    notes: list[str] = field(default_factory=list)


def _scan(path: Path) -> _Scan:
    scan = _Scan()
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                raise LogError(f"{path} is empty (the recorder wrote nothing): there is nothing to recover")
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _read_records(data, scan, path)
    except OSError as err:
        raise LogError(f"cannot read {path}: {err.strerror or err}") from None
    return scan


def recover_log(
    source: str | os.PathLike[str], output: str | os.PathLike[str], *, force: bool = False
) -> RecoverReport:
    """Write ``output``: the readable part of ``source`` as a complete MCAP file, with its index and summary.

    Args:
        force: replace ``output`` if it exists.

    Raises:
        LogError: ``source`` cannot be read or is not an MCAP file; ``output`` exists (without ``force``), is the
            source itself, or cannot be written.
    """
    source, output = Path(source), Path(output)
    if output.exists() and source.exists() and output.resolve() == source.resolve():
        raise LogError(f"{output} is the broken file itself: write the repaired log to another file")
    if output.exists() and not force:
        raise LogError(f"{output} exists; give --force to replace it")
    scan = _scan(source)
    report = RecoverReport(
        source,
        output,
        was_closed=scan.footer,
        chunks=scan.chunks,
        bad_chunks=scan.bad_chunks,
        damaged=list(scan.damaged),
        truncated_bytes=scan.truncated,
        notes=list(scan.notes),
    )
    partial = output.with_name(f".{output.name}.recovering")
    try:
        with open(partial, "wb") as stream:
            writer = Writer(stream, chunk_size=CHUNK_SIZE, compression=CompressionType.ZSTD)
            writer.start(profile="", library=f"pluto {__version__} (recovered)")
            schema_ids: dict[int, int] = {}
            for sid, schema in scan.schemas.items():
                schema_ids[sid] = writer.register_schema(schema.name, schema.encoding, schema.data)
            channel_ids: dict[int, int] = {}
            for cid, channel in scan.channels.items():
                channel_ids[cid] = writer.register_channel(
                    channel.topic,
                    channel.message_encoding,
                    schema_ids.get(channel.schema_id, 0),  # 0: no schema (or one that was lost)
                    dict(channel.metadata),
                )
            report.channels = len(channel_ids)
            for name, values in scan.metadata.items():
                writer.add_metadata(name, values)
            for entry in scan.entries:
                channel_id = channel_ids.get(entry.channel)
                if channel_id is None:
                    report.orphans += 1
                    continue
                writer.add_message(
                    channel_id,
                    log_time=entry.log_ns,
                    data=entry.data,
                    publish_time=entry.publish_ns,
                    sequence=entry.sequence,
                )
                report.messages += 1
            writer.finish()  # type: ignore[no-untyped-call]
        partial.replace(output)
    except OSError as err:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise LogError(f"cannot write {output}: {err.strerror or err}") from None
    return report
