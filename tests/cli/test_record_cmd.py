"""``pluto record``, ``pluto replay`` and ``pluto log`` from the command line."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.cli.record_cmd import status_line
from pluto.record.logfile import LogFile
from pluto.record.recorder import InterfaceCount, RecordStatus
from pluto.record.writer import LogWriter
from tests.helpers import wait_until
from tests.record.conftest import EXCERPTS
from tests.record.robot import FakeRobot


def test_the_status_line_fits_the_terminal() -> None:
    status = RecordStatus(
        elapsed=12.34,
        messages=6012,
        size=1_234_567,
        log_start=0.0,
        log_end=12.0,
        interfaces=(
            InterfaceCount("Base/Drive/State", "Odometry", 600, 0.0, 12.0),
            InterfaceCount("Sick/Scan_mm", "LaserScan", 60, 0.0, 12.0),
        ),
        undecodable=0,
        unstamped=0,
        lost=0,
        parts=(Path("run.mcap"),),
        time_base="sim",
    )
    line = status_line(status, 489.0, 200)
    assert "12.3 s" in line and "6,012 msgs" in line and "489.0 msg/s" in line and "1.2 MB" in line
    assert "Base/Drive/State 600" in line and "Sick/Scan_mm 60" in line
    short = status_line(status, 489.0, 60)
    assert len(short) == 60 and short.endswith("...")


def test_record_then_info_export_and_plot(
    tmp_path: Path, make_bus: Callable[..., Bus], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.mcap"
    with FakeRobot(make_bus(), rate=2.0) as robot:
        wait_until(lambda: "Sick/Scan_mm" in robot.snapshot(), timeout=10)
        code = main(["record", "Base/*", "Sick/*", "No/Such", "-o", str(path), "--duration", "1.5"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"to {path}" in out and "Base/Drive/State" in out and "Sick/Timing" in out and "DMU" not in out
    assert "nothing was written on No/Such" in out

    assert main(["log", "info", str(path)]) == 0
    info = capsys.readouterr().out
    assert "closed" in info and "time base sim" in info and "Sick/Scan_mm" in info and "LaserScan" in info

    assert main(["log", "export", str(path), "--csv", str(tmp_path / "csv")]) == 0
    assert (tmp_path / "csv" / "Base_Drive_State.csv").read_text().startswith("log_time,publish_time,stamp,x")

    assert main(["log", "plot", str(path), "-o", str(tmp_path / "run.png")]) == 0
    assert (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"

    # the file is kept, and the error says why
    assert main(["record", "-o", str(path), "--duration", "1"]) == 1
    assert "exists" in capsys.readouterr().err and LogFile(path).closed


def test_record_to_a_full_disk_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    assert main(["record", "-o", "/dev/full", "--force", "--duration", "1"]) == 1
    assert "disk is full" in capsys.readouterr().err


def test_info_on_a_killed_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.mcap"
    with LogWriter(path) as writer:
        for i in range(300):
            writer.add("Heartbeat", msgs.Heartbeat(seq=i), i / 100)
            if i % 100 == 99:
                writer.flush()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 4])
    assert main(["log", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "NOT CLOSED" in out and "was not closed" in out and "Heartbeat" in out


def test_replay_with_only_and_remap(
    tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.mcap"
    with LogWriter(path) as writer:
        for i in range(20):
            writer.add("Base/Drive/State", msgs.Odometry(stamp=i / 10, x=i), i / 10)
            writer.add("GPS/State", msgs.GpsFix(stamp=i / 10, x=i), i / 10)
    seen: list[msgs.Odometry] = []
    done = threading.Event()

    def take(value: msgs.Odometry) -> None:
        seen.append(value)
        if value.x == 19:
            done.set()

    bus.create_subscription("Other/Odometry", take, msgs.Odometry, depth=100)
    gps = bus.create_reader("GPS/State", msgs.GpsFix)
    args = ["replay", str(path), "--rate", "20", "--only", "Base/*", "--remap", "Base/Drive/State=Other/Odometry"]
    assert main(args) == 0
    assert done.wait(10)
    assert [o.x for o in seen] == list(range(20)) and gps.read() is None
    assert "replayed 20 messages" in capsys.readouterr().out


def test_replay_of_a_missing_file_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "none.mcap")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_import_carmen_reports_skipped_lines_by_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "intel.mcap"
    assert main(["log", "import-carmen", str(EXCERPTS["intel"]), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Sick/Scan_mm 18" in text and "Sick/Timing 18" in text
    assert "missing or backward timestamp, skipped: 18" in text and "line 20: no timestamp" in text
    assert "NEFF 18" in text
    bad = tmp_path / "bad.log"
    bad.write_text("ODOM 1 2 3 0 0 0 1.0 h 1.0\nODOM 1 2\nFLASER 2 1\nODOM 1 2 3 0 0 0 2.0 h 2.0\n")
    assert main(["log", "import-carmen", str(bad), "-o", str(tmp_path / "bad.mcap")]) == 0
    text = capsys.readouterr().out
    assert "malformed lines, skipped: 2" in text and "line 2: ODOM has 9 values" in text and "line 3: FLASER" in text
    assert LogFile(tmp_path / "bad.mcap").channels["Base/Drive/State"].count == 2
