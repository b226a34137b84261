"""A recording's MCAP log time is the wall clock (viewers show real dates); the robot's time stays readable.

A recording of a simulated run has MCAP ``log_time`` on the wall clock (s since 1970) and the simulated time in
``publish_time``; Pluto's reader gives both back as before (``log_time`` the robot's time), so replay still runs on
the simulated time. Logs without the metadata entry (imports, older recordings) are read as they were written.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcap.reader import make_reader

from pluto import msgs
from pluto.bus import Bus
from pluto.record.format import WALL_LOG_TIME, from_ns
from pluto.record.logfile import LogFile
from pluto.record.recorder import Recorder
from pluto.record.recover import recover_log
from pluto.record.writer import ForeignMessage, LogWriter, SplitLogWriter
from tests.helpers import wait_until


def _raw(path: Path) -> list[tuple[str, float, float]]:
    """(topic, MCAP log_time s, MCAP publish_time s) of every message, from the indexed MCAP reader."""
    with open(path, "rb") as file:
        return [
            (channel.topic, from_ns(message.log_time), from_ns(message.publish_time))
            for _schema, channel, message in make_reader(file).iter_messages()
        ]


def test_a_simulated_run_is_logged_on_real_dates(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "sim.mcap"
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    clock = bus.create_publisher("Clock", msgs.SimTime)
    before = time.time()
    with Recorder(bus, path, time_base="sim") as recorder:
        clock.write(msgs.SimTime(stamp=50.0, rate=1.0))
        odometry.write(msgs.Odometry(stamp=50.0, x=1.0))
        clock.write(msgs.SimTime(stamp=70.0, rate=1.0))
        odometry.write(msgs.Odometry(stamp=70.0, x=2.0))
        wait_until(lambda: recorder.status().messages == 2, timeout=10)
    after = time.time()

    raw = _raw(path)
    assert [topic for topic, *_ in raw] == ["Base/Drive/State"] * 2
    for _topic, log_time, publish_time in raw:
        assert before - 1.0 <= log_time <= after + 1.0  # a real date, not 1970
        assert publish_time in (pytest.approx(50.0, abs=0.05), pytest.approx(70.0, abs=0.05))  # the simulated time

    log = LogFile(path)
    assert log.info["log_time"] == "wall" and log.info["time_base"] == "sim"
    got = [(m.log_time, m.message.x) for m in log.series("Base/Drive/State")]
    assert got == [(pytest.approx(50.0, abs=0.05), 1.0), (pytest.approx(70.0, abs=0.05), 2.0)]
    assert all(before - 1.0 <= m.publish_time <= after + 1.0 for m in log.series("Base/Drive/State"))
    assert (log.start, log.end) == (pytest.approx(50.0, abs=0.05), pytest.approx(70.0, abs=0.05))


def test_the_writer_lays_times_out_by_its_metadata(tmp_path: Path) -> None:
    foreign = ForeignMessage("/scan", "foxglove.LaserScan", "protobuf", b"", "protobuf", b"\x08\x01", 3.0)
    for name, metadata, expected in (
        ("wall.mcap", WALL_LOG_TIME, (1.7e9, 3.0)),
        ("robot.mcap", {}, (3.0, 1.7e9)),
    ):
        path = tmp_path / name
        with LogWriter(path, metadata=metadata) as writer:
            writer.add("Heartbeat", msgs.Heartbeat(seq=1), 3.0, 1.7e9)
            writer.add_foreign(foreign, publish_time=1.7e9)
        assert [(t, p) for _, t, p in _raw(path)] == [expected, expected]
        (message,) = LogFile(path).messages()
        assert (message.log_time, message.publish_time) == (3.0, 1.7e9)  # read back the same either way


def test_split_parts_and_a_recovered_file_keep_the_layout(tmp_path: Path) -> None:
    with SplitLogWriter(tmp_path / "run.mcap", split_duration=10.0, metadata=WALL_LOG_TIME) as writer:
        for i in range(30):
            writer.add("Heartbeat", msgs.Heartbeat(seq=i), float(i), 1.7e9 + i / 10)
    parts = sorted(tmp_path.glob("run_*.mcap"))
    assert len(parts) >= 3
    for part in parts:
        assert all(t > 1e9 and p < 100 for _, t, p in _raw(part))
        assert all(m.log_time < 100 for m in LogFile(part).messages())
    recover_log(parts[0], tmp_path / "again.mcap")
    assert [m.log_time for m in LogFile(tmp_path / "again.mcap").messages()] == [
        m.log_time for m in LogFile(parts[0]).messages()
    ]
