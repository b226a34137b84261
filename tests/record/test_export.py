"""CSV export: one file per channel, lists spread over columns, exact numbers, nothing overwritten by surprise."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pluto import msgs
from pluto.record.export import csv_name, export_csv
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.record.writer import LogWriter


@pytest.fixture
def log(tmp_path: Path) -> LogFile:
    path = tmp_path / "run.mcap"
    with LogWriter(path) as writer:
        writer.add("Base/Drive/State", msgs.Odometry(stamp=1.0, x=0.1, theta=1 / 3), 1.0, 1.7e9)
        writer.add("Base/Drive/State", msgs.Odometry(stamp=2.0, x=0.2, v=-0.5), 2.0, 1.7e9 + 1)
        writer.add("Sick/Scan_mm", msgs.LaserScan(stamp=1.5, ranges=[1.0, 2.0, 3.0], angles=[0, 1, 2], count=3), 1.5)
        writer.add("Sick/Scan_mm", msgs.LaserScan(stamp=2.5, ranges=[4.0], count=1), 2.5)
        info = msgs.ModuleInfo(name="m", provides=[msgs.InterfaceStats(name="A", type="Odometry", count=2)])
        writer.add("mom/m", info, 3.0)
    return LogFile(path)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_one_file_per_channel_with_exact_values(log: LogFile, tmp_path: Path) -> None:
    written = export_csv(log, tmp_path / "csv")
    assert {n: p.name for n, p in written.items()} == {
        "Base/Drive/State": "Base_Drive_State.csv",
        "Sick/Scan_mm": "Sick_Scan_mm.csv",
        "mom/m": "mom_m.csv",
    }
    odometry = rows(written["Base/Drive/State"])
    assert list(odometry[0]) == ["log_time", "publish_time", "stamp", "x", "y", "theta", "v", "omega"]
    assert float(odometry[0]["theta"]) == 1 / 3  # every digit kept
    assert [float(r["publish_time"]) for r in odometry] == [1.7e9, 1.7e9 + 1]
    assert float(odometry[1]["v"]) == -0.5


def test_lists_are_spread_over_columns_and_nested_values_are_json(log: LogFile, tmp_path: Path) -> None:
    written = export_csv(log, tmp_path / "csv", ["Sick/*", "mom/*"])
    scans = rows(written["Sick/Scan_mm"])
    assert [k for k in scans[0] if k.startswith("ranges")] == ["ranges_0", "ranges_1", "ranges_2"]
    assert [scans[1][f"ranges_{i}"] for i in range(3)] == ["4.0", "", ""]
    assert scans[0]["angles_2"] == "2.0" and scans[1]["angles_0"] == ""
    info = rows(written["mom/m"])[0]
    assert json.loads(info["provides"])[0]["name"] == "A" and info["name"] == "m"


def test_existing_files_are_kept_without_force(log: LogFile, tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    folder.mkdir()
    (folder / "Sick_Scan_mm.csv").write_text("mine")
    with pytest.raises(LogError, match="exists"):
        export_csv(log, folder)
    assert (folder / "Sick_Scan_mm.csv").read_text() == "mine"
    export_csv(log, folder, force=True)
    assert len(rows(folder / "Sick_Scan_mm.csv")) == 2
    assert csv_name("Localization/Laser_Dead-Reckoning") == "Localization_Laser_Dead-Reckoning.csv"
