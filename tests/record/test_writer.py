"""Writing logs: what goes in comes out, standard readers open it, existing files are safe, disk full is clear,
long runs split into complete parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcap.reader import make_reader

from pluto import msgs
from pluto.record.format import LogError, schema_bytes
from pluto.record.logfile import LogFile
from pluto.record.writer import LogWriter, SplitLogWriter, part_path


def odometry(i: int) -> msgs.Odometry:
    return msgs.Odometry(stamp=i * 0.02, x=i * 0.01, y=-i * 0.001, theta=i * 0.003, v=0.5, omega=0.15)


def scan(i: int) -> msgs.LaserScan:
    return msgs.LaserScan(stamp=i * 0.02, arrival=i * 0.02 + 0.2, ranges=[1.0 + i % 7] * 361, angles=[0.0] * 361)


def write_run(writer: LogWriter | SplitLogWriter, n: int = 500, flush_every: int = 0) -> list[tuple[str, msgs.Message]]:
    """n odometry messages at 50 Hz and a scan every tenth; returns what was written, in order."""
    written: list[tuple[str, msgs.Message]] = []
    for i in range(n):
        writer.add("Base/Drive/State", odometry(i), i * 0.02, 1.7e9 + i * 0.02)
        written.append(("Base/Drive/State", odometry(i)))
        if i % 10 == 0:
            writer.add("Sick/Scan_mm", scan(i), i * 0.02 + 0.001)
            written.append(("Sick/Scan_mm", scan(i)))
        if flush_every and i % flush_every == flush_every - 1:
            writer.flush()
    return written


def test_round_trip_with_metadata_times_and_sequences(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with LogWriter(path, metadata={"robot": "pluto-1", "start_time": "2026-01-01T00:00:00"}) as writer:
        written = write_run(writer)
    log = LogFile(path)
    assert log.closed and not log.notes
    assert log.info["robot"] == "pluto-1" and log.info["pluto_version"] and log.info["start_time"]
    read = list(log.messages())
    assert [(m.name, m.message) for m in read] == written
    odo = log.series("Base/Drive/State")
    assert [m.sequence for m in odo] == list(range(1, 501))
    assert odo[7].log_time == pytest.approx(0.14) and odo[7].publish_time == pytest.approx(1.7e9 + 0.14)
    assert log.channels["Base/Drive/State"].count == 500 and log.channels["Sick/Scan_mm"].count == 50
    assert log.channels["Base/Drive/State"].rate == pytest.approx(50.0)
    assert log.start == 0.0 and log.end == pytest.approx(499 * 0.02)


def test_the_standard_mcap_reader_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with LogWriter(path, metadata={"robot": "r"}) as writer:
        write_run(writer, 200)
    with open(path, "rb") as file:
        reader = make_reader(file)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics is not None
        assert summary.statistics.message_count == 220
        topics = {c.topic: c for c in summary.channels.values()}
        assert set(topics) == {"Base/Drive/State", "Sick/Scan_mm"}
        channel = topics["Base/Drive/State"]
        assert channel.message_encoding == "json"
        schema = summary.schemas[channel.schema_id]
        assert (schema.name, schema.encoding) == ("pluto.msgs.Odometry", "jsonschema")
        assert schema.data == schema_bytes(msgs.Odometry)
        assert all(chunk.compression == "zstd" for chunk in summary.chunk_indexes)
        first = next(iter(reader.iter_messages(topics=["Base/Drive/State"])))
        assert json.loads(first[2].data)["type"] == "Odometry"
        assert {m.name: m.metadata for m in reader.iter_metadata()}["pluto"]["robot"] == "r"


def test_an_existing_file_is_never_replaced_without_force(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    path.write_bytes(b"precious")
    with pytest.raises(LogError, match=r"exists.*--force"):
        LogWriter(path)
    assert path.read_bytes() == b"precious"
    with LogWriter(path, force=True) as writer:
        writer.add("Base/Drive/State", odometry(1), 1.0)
    assert LogFile(path).message_count == 1


@pytest.mark.parametrize(
    ("where", "reason"),
    [("missing/run.mcap", "does not exist"), ("file/run.mcap", "not a folder"), (".", "is a directory")],
)
def test_an_unwritable_path_is_a_clear_error(tmp_path: Path, where: str, reason: str) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(LogError, match=reason):
        LogWriter(tmp_path / where)


def test_a_full_disk_is_a_clear_error() -> None:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("no /dev/full here")
    with pytest.raises(LogError, match="disk is full"):
        writer = LogWriter(full, force=True)
        write_run(writer, 2000, flush_every=100)
        writer.close()


def test_times_before_zero_are_refused(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "run.mcap") as writer, pytest.raises(LogError, match=">= 0"):
        writer.add("Base/Drive/State", odometry(1), -0.5)


def test_split_by_size_gives_complete_parts_that_hold_everything(tmp_path: Path) -> None:
    pattern = tmp_path / "long.mcap"
    with SplitLogWriter(pattern, split_size=20_000, chunk_size=8_000, metadata={"robot": "r"}) as writer:
        written = write_run(writer, 1500, flush_every=50)
    assert len(writer.parts) >= 3
    assert writer.parts[0] == part_path(pattern, 0) == tmp_path / "long_000.mcap"
    assert not pattern.exists()
    read: list[tuple[str, msgs.Message]] = []
    for i, part in enumerate(writer.parts):
        log = LogFile(part)
        assert log.closed and log.info["part"] == str(i) and log.info["robot"] == "r"
        assert log.size < 20_000 + 40_000  # the limit plus at most one chunk
        read += [(m.name, m.message) for m in log.messages()]
    assert read == written


def test_split_by_duration(tmp_path: Path) -> None:
    with SplitLogWriter(tmp_path / "long.mcap", split_duration=3.0) as writer:
        write_run(writer, 500)  # 10 s of log
    spans = [LogFile(p).duration for p in writer.parts]
    assert len(spans) == 4 and all(span <= 3.0 for span in spans)
    assert sum(LogFile(p).message_count for p in writer.parts) == 550


def test_split_refuses_when_a_part_name_is_taken(tmp_path: Path) -> None:
    (tmp_path / "long_000.mcap").write_bytes(b"old")
    with pytest.raises(LogError, match=r"long_000\.mcap exists"):
        SplitLogWriter(tmp_path / "long.mcap", split_size=1000)
