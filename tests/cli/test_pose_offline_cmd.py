"""``pluto pose offline`` on the first 200 scans of the Intel lab's log against a map ``pluto slam offline`` made
of the whole log (data/intel-slam-map.xml): its figures, the trajectory it writes, a wrong start found again (there,
and in the corridor at the start of Freiburg building 079's log, data/fr079-slam-map.xml), and bad input told in one
line with exit status 2."""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import math
import re
from pathlib import Path

import pytest

from pluto.cli.main import main

RADISH = Path("/work/shared/datasets/radish")
INTEL = RADISH / "intel-corrected.log.gz"
FR079 = RADISH / "freiburg-079-corrected.log.gz"
MAP = Path(__file__).parent / "data" / "intel-slam-map.xml"
FR079_MAP = Path(__file__).parent / "data" / "fr079-slam-map.xml"
SCANS = 200
pytestmark = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")


def _log_start(log: Path, folder: Path, scans: int) -> Path:
    """The first ``scans`` laser scans of a CARMEN log, as a log of its own."""
    path = folder / f"{log.name.split('.')[0]}-start.log"
    with gzip.open(log, "rt") as source:
        path.write_text("".join(itertools.islice((line for line in source if line.startswith("FLASER")), scans)))
    return path


def _first_pose(log: Path) -> tuple[float, float, float]:
    fields = log.read_text().split("\n", 1)[0].split()
    n = int(fields[1])
    x, y, theta = (float(v) for v in fields[2 + n : 5 + n])
    return x, y, theta


@pytest.fixture(scope="module")
def intel_start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 200 scans of the Intel lab's log."""
    return _log_start(INTEL, tmp_path_factory.mktemp("carmen"), SCANS)


@pytest.fixture(scope="module")
def first_pose(intel_start: Path) -> tuple[float, float, float]:
    return _first_pose(intel_start)


def figures(out: str) -> tuple[float, float]:
    """The pose module's and the odometry's mean relative pose error over 5 m, m."""
    line = next(row for row in out.splitlines() if row.startswith("relative pose error over pairs 5 m apart"))
    pose = re.search(r"pose ([0-9.]+) m", line)
    odometry = re.search(r"odometry ([0-9.]+) m", line)
    assert pose is not None and odometry is not None, line
    return float(pose.group(1)), float(odometry.group(1))


def test_the_module_on_a_real_log_beats_its_odometry_is_seldom_lost_and_writes_its_trajectory(
    intel_start: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "run"
    assert main(["pose", "offline", str(intel_start), "--map", str(MAP), "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert f"{SCANS} scans" in out and "not ground truth" in out and "real time" in out
    pose, odometry = figures(out)
    assert pose < 0.8 * odometry
    lost = re.search(r"lost after (\d+) of (\d+) scans", out)
    assert lost is not None and int(lost.group(2)) == SCANS and int(lost.group(1)) <= SCANS // 100
    assert re.search(r"CPU time per scan: mean [0-9.]+ ms, 99th percentile [0-9.]+ ms", out)
    with open(out_dir / "trajectory.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == SCANS and {"x", "y", "theta", "lost", "reference_x"} <= set(rows[0])
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["scans"] == SCANS and summary["rpe_5m"]["mean_m"] == pytest.approx(pose, abs=5e-4)
    assert summary["lost_share"] <= 0.01 and summary["cpu_ms_mean"] > 0


@pytest.mark.parametrize(
    ("side", "turn"),
    [
        (0.0, math.pi / 2),  # ahead of the robot
        (math.pi / 2, -math.pi / 2),  # to its left: a place whose first scan agrees with the map there by chance
    ],
)
def test_a_start_5_m_and_90_degrees_off_is_found_again_within_10_s_of_log(
    intel_start: Path,
    first_pose: tuple[float, float, float],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    side: float,
    turn: float,
) -> None:
    x, y, theta = first_pose
    start = [x + 5.0 * math.cos(theta + side), y + 5.0 * math.sin(theta + side), theta + turn]
    args = ["pose", "offline", str(intel_start), "--map", str(MAP), "--out", str(tmp_path)]
    assert main([*args, "--start", *(f"{v:.4f}" for v in start)]) == 0
    out = capsys.readouterr().out
    assert "relocalization from the start given: back within 0.3 m / 10° of the reference after" in out
    recovered = json.loads((tmp_path / "summary.json").read_text())["recovery"]
    assert recovered["log_s"] is not None and recovered["log_s"] <= 10.0


@pytest.mark.skipif(not FR079.exists(), reason="the Radish Freiburg 079 log is not here")
@pytest.mark.parametrize(("side", "turn"), [(0.0, math.pi / 2), (math.pi, -math.pi / 2)])
def test_a_wrong_start_in_a_corridor_is_found_again_within_10_s_of_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: float, turn: float
) -> None:
    """Freiburg 079's log starts in a corridor, whose scans hold its two long walls and, across them, only door frames
    and recesses shorter than a metre: a search of the map needs those to place the robot along the corridor (it
    took 16 s of log, 7 m of travel, until a long wall across came into view)."""
    log = _log_start(FR079, tmp_path, 80)
    x, y, theta = _first_pose(log)
    start = [x + 5.0 * math.cos(theta + side), y + 5.0 * math.sin(theta + side), theta + turn]
    args = ["pose", "offline", str(log), "--map", str(FR079_MAP), "--out", str(tmp_path / "run")]
    assert main([*args, "--start", *(f"{v:.4f}" for v in start)]) == 0
    capsys.readouterr()
    recovered = json.loads((tmp_path / "run" / "summary.json").read_text())["recovery"]
    assert recovered["log_s"] is not None and recovered["log_s"] <= 10.0


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing map", "cannot read the map"),
        ("map of another format", "XML syntax error"),
        ("empty log", "holds no front laser scan"),
        ("missing log", "cannot read"),
        ("map without walls", "the map has no walls"),
    ],
)
def test_bad_input_is_told_in_one_line_with_exit_status_2(
    intel_start: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    log, map_file = intel_start, MAP
    if case == "missing map":
        map_file = tmp_path / "none.xml"
    elif case == "map of another format":
        map_file = tmp_path / "map.pgm"
        map_file.write_bytes(b"P5\n4 4\n255\n" + bytes(16))
    elif case == "empty log":
        log = tmp_path / "empty.log"
        log.write_text("")
    elif case == "missing log":
        log = tmp_path / "none.log"
    else:
        map_file = tmp_path / "empty.xml"
        map_file.write_text('<world name="empty" version="1"><walls/></world>')
    assert main(["pose", "offline", str(log), "--map", str(map_file)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("pluto pose offline: "), err
    assert "Traceback" not in captured.err + captured.out
