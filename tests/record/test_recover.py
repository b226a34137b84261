"""``pluto log recover``: a recording killed with SIGKILL made readable by indexed MCAP readers again."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.reader import make_reader

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.record.recover import recover_log
from pluto.record.writer import ForeignMessage, LogWriter
from tests.helpers import wait_until


def _indexed(path: Path) -> list[tuple[str, int, int, int, bytes]]:
    """(topic, log time, publish time, sequence, data) of every message, as the summary-using reader gives them."""
    with open(path, "rb") as file:
        return [
            (channel.topic, message.log_time, message.publish_time, message.sequence, message.data)
            for _schema, channel, message in make_reader(file).iter_messages(log_time_order=False)
        ]


def _chunks_written(path: Path) -> int:
    """Chunks the recording holds so far (0 before the recorder has written its first bytes)."""
    try:
        return LogFile(path).chunks
    except LogError:  # not there yet, or still empty
        return 0


def _killed_recording(path: Path, bus: Bus) -> None:
    """``pluto record`` of a 100 Hz heartbeat and an odometry, killed with SIGKILL after 3 complete chunks."""
    beat = bus.create_publisher("Heartbeat", msgs.Heartbeat)
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    stop = threading.Event()

    def write() -> None:
        seq = 0
        while not stop.wait(0.01):
            seq += 1
            beat.write(msgs.Heartbeat(seq=seq, source="test"))
            if seq % 5 == 0:
                odometry.write(msgs.Odometry(x=seq / 100))

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "record", "-o", str(path), "--chunk-interval", "0.3", "-q"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _chunks_written(path) >= 3, timeout=30, interval=0.1)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        stop.set()
        thread.join(timeout=5)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL


def test_a_sigkilled_recording_opens_in_the_indexed_reader_after_recover(
    tmp_path: Path, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    broken, fixed = tmp_path / "killed.mcap", tmp_path / "fixed.mcap"
    _killed_recording(broken, bus)
    # The indexed reader needs the summary the killed recorder never wrote: it refuses the file or finds nothing.
    try:
        found = _indexed(broken)
    except (McapError, ValueError, EOFError, OSError):
        found = None
    assert not found

    log = LogFile(broken)  # every message of the complete chunks, read front to back
    assert not log.closed and log.chunks >= 3
    assert main(["log", "recover", str(broken), "-o", str(fixed)]) == 0
    out = capsys.readouterr().out
    assert f"recovered {broken} -> {fixed}: {log.message_count:,} messages" in out

    recovered = _indexed(fixed)
    assert len(recovered) == log.message_count
    topics = {topic for topic, *_ in recovered}
    assert {"Heartbeat", "Base/Drive/State"} <= topics
    again = LogFile(fixed)
    assert again.closed and all(note.startswith("channels in Foxglove's schemas") for note in again.notes)
    assert again.info == log.info  # the pluto metadata record
    by_topic = {name: [(m.log_time, m.sequence, m.message) for m in log.series(name)] for name in log.names()}
    assert by_topic == {name: [(m.log_time, m.sequence, m.message) for m in again.series(name)] for name in by_topic}


def _chunks(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every top-level chunk record of an MCAP file."""
    head = struct.Struct("<BQ")
    pos, found = 8, []
    while pos + head.size <= len(data):
        opcode, length = head.unpack_from(data, pos)
        end = pos + head.size + length
        if opcode == Opcode.CHUNK:
            found.append((pos, end))
        pos = end
    return found


def test_recover_keeps_foreign_channels_and_skips_damaged_and_unfinished_chunks(tmp_path: Path) -> None:
    broken, fixed = tmp_path / "cut.mcap", tmp_path / "fixed.mcap"
    foreign = ForeignMessage("/scan", "foxglove.LaserScan", "protobuf", b"\x01\x02", "protobuf", b"\x08\x01", 0.5)
    with LogWriter(broken, compression="none") as writer:
        for i in range(400):
            writer.add("Heartbeat", msgs.Heartbeat(seq=i), i / 100)
            if i == 50:
                writer.add_foreign(foreign, publish_time=1.0)
            if i % 100 == 99:
                writer.flush()
    data = bytearray(broken.read_bytes())
    chunks = _chunks(bytes(data))
    assert len(chunks) == 4
    damaged = chunks[1]
    data[damaged[1] - 10] ^= 0xFF  # inside the second chunk's records: its CRC no longer matches
    broken.write_bytes(bytes(data[: (chunks[3][0] + chunks[3][1]) // 2]))  # the fourth chunk was being written

    report = recover_log(broken, fixed)
    assert not report.was_closed and report.truncated_bytes > 0
    assert (report.chunks, report.bad_chunks) == (2, 1)
    assert any("damaged" in note for note in report.notes)
    indexed = _indexed(fixed)
    assert len(indexed) == report.messages == 201  # the first and third chunks, and the foreign message
    assert ("/scan", 500_000_000, 1_000_000_000, 1, b"\x08\x01") in indexed
    with open(fixed, "rb") as file:
        summary = make_reader(file).get_summary()
    assert summary is not None
    assert {schema.name for schema in summary.schemas.values()} >= {"foxglove.LaserScan", "pluto.msgs.Heartbeat"}
    seqs = [m.message.seq for m in LogFile(fixed).series("Heartbeat") if isinstance(m.message, msgs.Heartbeat)]
    assert seqs == [*range(100), *range(200, 300)]


def test_recover_refuses_to_overwrite_and_to_write_over_its_input(tmp_path: Path) -> None:
    source = tmp_path / "a.mcap"
    with LogWriter(source) as writer:
        writer.add("Heartbeat", msgs.Heartbeat(seq=1), 1.0)
    (tmp_path / "b.mcap").write_bytes(b"keep")
    with pytest.raises(LogError, match="exists"):
        recover_log(source, tmp_path / "b.mcap")
    assert (tmp_path / "b.mcap").read_bytes() == b"keep"
    with pytest.raises(LogError, match="broken file itself"):
        recover_log(source, source, force=True)
    report = recover_log(source, tmp_path / "b.mcap", force=True)
    assert report.was_closed and report.messages == 1
    assert [d for *_, d in _indexed(tmp_path / "b.mcap")] == [d for *_, d in _indexed(source)]


@pytest.mark.parametrize("content", [b"", b"not an mcap file at all"])
def test_recover_of_something_else_is_one_clear_line(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.mcap"
    path.write_bytes(content)
    assert main(["log", "recover", str(path), "-o", str(tmp_path / "y.mcap")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert not (tmp_path / "y.mcap").exists()
    assert not list(tmp_path.glob(".*recovering"))


def _two_channel_log(path: Path) -> None:
    """A zstd log of six chunks: 100 heartbeats and 20 odometries each."""
    with LogWriter(path) as writer:
        for i in range(1, 601):
            writer.add("Heartbeat", msgs.Heartbeat(seq=i, source="test"), i / 100)
            if i % 5 == 0:
                writer.add("Base/Drive/State", msgs.Odometry(stamp=i / 100, x=i / 100), i / 100)
            if i % 100 == 0:
                writer.flush()


def _damage(data: bytearray, chunk: tuple[int, int], where: str) -> None:
    """Damage one chunk record of an MCAP file in place: ``frame`` (the start of its compressed data: zstd cannot
    decompress it), ``data`` (bytes in the middle of its compressed data), ``size`` (its header's uncompressed size:
    2**62), ``length`` (the record's length: 1 GB, past the end of the file) or ``data length`` (its header's length
    of the compressed data, one byte more)."""
    start, end = chunk
    body = start + 9  # opcode and record length
    name_length = struct.unpack_from("<I", data, body + 28)[0]
    data_length_at = body + 32 + name_length
    if where == "frame":
        data[data_length_at + 8 : data_length_at + 12] = b"\x00" * 4
    elif where == "data":
        middle = (data_length_at + 8 + end) // 2
        data[middle : middle + 8] = bytes(b ^ 0x5A for b in data[middle : middle + 8])
    elif where == "size":
        struct.pack_into("<Q", data, body + 16, 2**62)
    elif where == "length":
        struct.pack_into("<Q", data, start + 1, 10**9)
    else:
        struct.pack_into("<Q", data, data_length_at, struct.unpack_from("<Q", data, data_length_at)[0] + 1)


@pytest.mark.parametrize("where", ["frame", "data", "size", "length", "data length"])
def test_recover_skips_a_damaged_chunk_names_its_bytes_and_keeps_every_message_of_the_others(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    original, broken, fixed = tmp_path / "run.mcap", tmp_path / "damaged.mcap", tmp_path / "fixed.mcap"
    _two_channel_log(original)
    data = bytearray(original.read_bytes())
    chunks = _chunks(bytes(data))
    assert len(chunks) == 6
    _damage(data, chunks[2], where)
    broken.write_bytes(bytes(data))

    assert main(["log", "recover", str(broken), "-o", str(fixed)]) == 0
    out = capsys.readouterr().out
    start, end = chunks[2]
    # the damaged range starts at the chunk and covers it (a wrong length: up to the next chunk found)
    [damage] = LogFile(broken).damaged
    assert damage.start == start and end <= damage.end <= chunks[3][0]
    assert f"bytes {damage.start}-{damage.end}" in out

    # every message of the five intact chunks, with its times, sequence number and bytes; none of the third's
    kept = _indexed(fixed)
    everything = _indexed(original)
    lost = [m for m in everything if 2.0 < m[1] / 1e9 <= 3.0]
    assert len(lost) == 120
    assert kept == [m for m in everything if m not in lost]
    if where in ("frame", "data"):  # the message index after the chunk says what was lost with it
        assert damage.messages == 120 and "120 messages lost" in out
    again = LogFile(fixed)
    assert again.closed and not again.damaged and again.message_count == 600


@pytest.mark.parametrize("where", ["frame", "data", "size", "length", "data length"])
def test_log_info_export_and_readers_of_a_damaged_log_say_what_is_damaged(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.mcap"
    _two_channel_log(path)
    data = bytearray(path.read_bytes())
    chunk = _chunks(bytes(data))[4]
    _damage(data, chunk, where)
    path.write_bytes(bytes(data))

    assert main(["log", "info", str(path)]) == 0  # the log is described: what is there, and what is damaged
    captured = capsys.readouterr()
    assert "DAMAGED" in captured.out and f"bytes {chunk[0]}-" in captured.out
    assert "Traceback" not in captured.err
    [warning] = captured.err.strip().splitlines()
    assert "is damaged" in warning and f"pluto log recover {path}" in warning
    assert "messages   600" in captured.out  # of 720: the fifth chunk held 120

    assert main(["log", "export", str(path), "--csv", str(tmp_path / "csv")]) == 0
    captured = capsys.readouterr()
    assert "is damaged" in captured.err
    rows = (tmp_path / "csv" / "Heartbeat.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 500  # a header and every heartbeat of the five intact chunks

    log = LogFile(path)
    seqs = [m.message.seq for m in log.messages(["Heartbeat"]) if isinstance(m.message, msgs.Heartbeat)]
    assert seqs == [*range(1, 401), *range(501, 601)]


def test_replay_of_a_damaged_log_warns_and_replays_the_rest(
    tmp_path: Path, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.mcap"
    _two_channel_log(path)
    data = bytearray(path.read_bytes())
    _damage(data, _chunks(bytes(data))[1], "frame")
    path.write_bytes(bytes(data))
    assert main(["replay", str(path), "--rate", "100", "--no-announce", "--tail", "0"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert f"pluto replay: warning: {path} is damaged" in captured.err and "pluto log recover" in captured.err
    assert "replayed 600 messages" in captured.out  # of 720: all but the second chunk's
