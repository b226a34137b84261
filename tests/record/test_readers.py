"""Readers: a proxy's read API (get, wait, by interface number and mask) over a log, plus seek and iteration."""

from __future__ import annotations

from pathlib import Path

import pytest

from pluto import msgs, names
from pluto.errors import BusTimeout
from pluto.record.logfile import LogFile
from pluto.record.readers import BaseReader, DmuReader, EndOfLog, GpsReader, LocReader, SickReader
from pluto.record.writer import LogWriter


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Odometry at t = 1.0, 1.1, ... 2.0 s; a scan (written with its timing) at 1.25, 1.45, ...; GPS at 1.5."""
    path = tmp_path / "sensors.mcap"
    with LogWriter(path) as writer:
        for i in range(11):
            t = round(1.0 + i / 10, 3)
            writer.add("Base/Drive/State", msgs.Odometry(stamp=t, x=float(i)), t)
            writer.add("DMU/State", msgs.DmuState(stamp=t - 0.1, theta=i / 100), t)
        for i in range(4):
            t = round(1.25 + i / 5, 3)
            writer.add("Sick/Scan_mm", msgs.LaserScan(stamp=t - 0.2, arrival=t, ranges=[float(i)] * 3), t)
            writer.add("Sick/Timing", msgs.ScanTiming(stamp=t - 0.2, count=3), t)
        writer.add("GPS/State", msgs.GpsFix(stamp=1.5, x=3.0, satellites=6), 1.5)
        writer.add("Localization/Pose", msgs.PoseEstimate(stamp=1.5, pose=[1.0, 2.0, 0, 0.5, 0, 0]), 1.5)
    return path


def test_get_is_the_newest_value_at_the_readers_time(log: Path) -> None:
    base = BaseReader(log)
    assert base.start == 1.0 and base.end == 2.0
    assert base.get_odometry() is None  # before the first value, as a proxy before the module wrote
    base.seek(1.3)
    odometry = base.get_odometry()
    assert odometry is not None and odometry.x == 3.0
    base.seek(1.349)
    assert base.get(0).x == 3.0
    base.seek(5.0)
    assert base.get(0).x == 10.0  # after the end: the last value, as a proxy keeps it
    assert base.get_sonar() is None and base.count(1) == 0  # an interface the log does not have


def test_wait_moves_to_the_next_value_and_ends_with_the_log(log: Path) -> None:
    sick = SickReader(log)
    first = sick.wait_scan()
    assert first.ranges == [0.0, 0.0, 0.0] and sick.time == 1.25
    timing = sick.get_timing()
    assert timing is not None and timing.stamp == pytest.approx(1.05)
    assert [sick.wait_scan().ranges[0] for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(EndOfLog, match="Sick/Scan_mm"):
        sick.wait_scan()
    with pytest.raises(BusTimeout):  # what code written for a proxy catches
        sick.wait_scan()
    sick.seek(1.0)
    with pytest.raises(EndOfLog, match=r"within 0\.1 s"):
        sick.wait_scan(timeout=0.1)  # the first scan is 0.25 s ahead
    assert sick.time == 1.0
    assert sick.wait_scan(timeout=0.3).ranges[0] == 0.0
    sick.rewind()
    assert sick.time < sick.start == 1.25 and sick.get_scan() is None


def test_iteration_in_time_order(log: Path) -> None:
    sick = SickReader(log, mask=0b110)
    assert [s.ranges[0] for s in sick.scans()] == [0.0, 1.0, 2.0, 3.0]
    merged = list(sick)
    assert [m.name for m in merged[:2]] == ["Sick/Scan_mm", "Sick/Timing"]
    assert [m.log_time for m in merged] == sorted(m.log_time for m in merged)
    assert sick.time == sick.start - 1e-9  # iterating does not move the reader


def test_masks_as_for_proxies(log: Path) -> None:
    sick = SickReader(log, mask=2)
    assert sick.selected(1) and not sick.selected(0) and not sick.selected(2)
    with pytest.raises(ValueError, match="add 4"):
        sick.get_timing()
    with pytest.raises(ValueError, match="at most 7"):
        SickReader(log, mask=8)


def test_readers_share_one_opened_log_and_follow_renames(log: Path) -> None:
    opened = LogFile(log)
    dmu, gps, loc = DmuReader(opened), GpsReader(opened), LocReader(opened, 8)
    assert [round(s.theta, 3) for s in dmu.states()][:3] == [0.0, 0.01, 0.02]
    assert dmu.get_raw() is None and dmu.count(1) == 0
    assert gps.wait_fix().x == 3.0
    assert loc.interfaces == names.LOCALIZATION_INTERFACES
    assert loc.wait_pose(3).pose[3] == 0.5
    renamed = SickReader(opened, remap={"Sick/Scan_mm": "Base/Drive/State"}, mask=2)
    assert renamed.count(1) == 11
