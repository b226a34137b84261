"""Reading logs: cut short (a killed recorder), damaged, foreign, or written out of time order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from mcap.writer import Writer

from pluto import msgs
from pluto.record.format import LogError
from pluto.record.logfile import LogFile, match_names
from pluto.record.writer import LogWriter


def heartbeat_log(path: Path, n: int = 1000, flush_every: int = 100) -> list[int]:
    """Heartbeats 1..n at 100 Hz, a chunk every ``flush_every``; returns the chunk boundaries (file sizes)."""
    sizes = []
    with LogWriter(path) as writer:
        for i in range(1, n + 1):
            writer.add("Heartbeat", msgs.Heartbeat(stamp=i / 100, seq=i), i / 100)
            if i % flush_every == 0:
                writer.flush()
                sizes.append(writer.size)
    return sizes


def seqs(log: LogFile) -> list[int]:
    return [m.message.seq for m in log.messages() if isinstance(m.message, msgs.Heartbeat)]


@pytest.mark.parametrize("cut", [0.05, 0.33, 0.5, 0.77, 0.999])
def test_a_file_cut_anywhere_gives_every_message_of_its_complete_chunks(tmp_path: Path, cut: float) -> None:
    path = tmp_path / "run.mcap"
    boundaries = heartbeat_log(path)
    data = path.read_bytes()
    at = int(len(data) * cut)
    (tmp_path / "cut.mcap").write_bytes(data[:at])
    log = LogFile(tmp_path / "cut.mcap")
    complete = sum(1 for b in boundaries if b <= at)  # chunks wholly before the cut
    assert not log.closed
    assert seqs(log) == list(range(1, 100 * complete + 1))
    assert log.chunks == complete
    assert "not closed" in log.notes[0]


def test_a_damaged_chunk_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    boundaries = heartbeat_log(path)
    data = bytearray(path.read_bytes())
    middle = boundaries[3] + 80  # inside the fifth chunk's compressed data (its header is 53 bytes)
    data[middle : middle + 16] = b"\x00" * 16
    path.write_bytes(bytes(data))
    log = LogFile(path)
    assert log.closed
    got = seqs(log)
    assert got == list(range(1, 401)) + list(range(501, 1001))
    assert any("damaged" in note for note in log.notes)


def test_not_an_mcap_file(tmp_path: Path) -> None:
    (tmp_path / "x.mcap").write_text("hello")
    with pytest.raises(LogError, match="not an MCAP file"):
        LogFile(tmp_path / "x.mcap")
    (tmp_path / "empty.mcap").write_bytes(b"")
    with pytest.raises(LogError, match="empty"):
        LogFile(tmp_path / "empty.mcap")
    with pytest.raises(LogError, match="cannot read"):
        LogFile(tmp_path / "missing.mcap")


def test_messages_come_in_log_time_order_whatever_the_write_order(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with LogWriter(path) as writer:
        for t in (3.0, 1.0, 2.0, 1.0):
            writer.add("Heartbeat", msgs.Heartbeat(stamp=t, seq=int(t * 10) + int(writer.message_count)), t)
    log = LogFile(path)
    assert [m.log_time for m in log.messages()] == [1.0, 1.0, 2.0, 3.0]
    assert [m.message.seq for m in log.messages() if isinstance(m.message, msgs.Heartbeat)] == [11, 13, 22, 30]
    assert [m.log_time for m in log.messages(start=1.5, end=2.5)] == [2.0]


def test_a_foreign_channel_is_listed_but_not_decoded(tmp_path: Path) -> None:
    path = tmp_path / "foreign.mcap"
    with open(path, "wb") as file:
        writer = Writer(file)
        writer.start()
        schema = writer.register_schema("std_msgs/String", "ros2msg", b"string data")
        foreign = writer.register_channel("/chatter", "cdr", schema)
        writer.add_message(foreign, 5, b"\x00\x01", 5)
        writer.finish()
    log = LogFile(path)
    assert log.channels["/chatter"].type is None and log.channels["/chatter"].count == 1
    assert list(log.messages()) == []
    assert any("/chatter" in note for note in log.notes)


def test_a_message_that_does_not_decode_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "bad.mcap"
    with LogWriter(path) as writer:
        writer.add("Heartbeat", msgs.Heartbeat(seq=1), 1.0)
        writer.add_encoded("Heartbeat", msgs.Heartbeat, b'{"type":"Heartbeat","seq":"two"}', 2.0, 2.0)
        writer.add("Heartbeat", msgs.Heartbeat(seq=3), 3.0)
    log = LogFile(path)
    assert seqs(log) == [1, 3]
    assert log.undecodable == 1


def test_globs() -> None:
    assert match_names("Sick/Scan_mm", ["Sick/*"])
    assert match_names("Localization/Laser_Pose", ["*Pose"])
    assert not match_names("Base/Drive/State", ["Sick/*", "DMU/*"])


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_damage_anywhere_costs_at_most_the_chunks_it_touches(tmp_path: Path, compression: str) -> None:
    # 1, 4 or 16 random bytes written anywhere after the magic, 150 times: the log opens, every message read is one
    # that was written, and a chunk is either read whole or listed as damaged (or cut off at the end).
    path = tmp_path / "run.mcap"
    with LogWriter(path, compression=compression) as writer:
        for i in range(1, 301):
            writer.add("Heartbeat", msgs.Heartbeat(stamp=i / 100, seq=i), i / 100)
            if i % 50 == 0:
                writer.flush()
    original = path.read_bytes()
    rng = random.Random(7)
    for _ in range(150):
        data = bytearray(original)
        count = rng.choice([1, 4, 16])
        at = rng.randrange(8, len(data) - count)
        data[at : at + count] = bytes(rng.randrange(256) for _ in range(count))
        (tmp_path / "damaged.mcap").write_bytes(bytes(data))
        log = LogFile(tmp_path / "damaged.mcap")
        got = seqs(log)
        chunks = {(s - 1) // 50 for s in got}
        assert got == [s for s in range(1, 301) if (s - 1) // 50 in chunks], f"{count} bytes at {at}"
        if len(chunks) < 6:
            assert log.damaged or log.truncated_bytes, f"{count} bytes at {at}: a chunk lost without a word"
