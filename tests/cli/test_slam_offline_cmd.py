"""``pluto slam offline`` on a small CARMEN log: the figures it prints, the map and the picture it writes, and bad
options."""

from __future__ import annotations

import gzip
import itertools
import math
from pathlib import Path

import pytest

from pluto.cli.main import build_parser, main
from pluto.sim.world import load_world

INTEL = Path("/work/shared/datasets/radish/intel-corrected.log.gz")
pytestmark = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 40 scans of the Intel lab's log, with one line cut short."""
    path = tmp_path_factory.mktemp("carmen") / "intel-start.log"
    with gzip.open(INTEL, "rt") as source:
        scans = itertools.islice((line for line in source if line.startswith("FLASER")), 40)
        lines = list(scans)
    lines.insert(5, lines[5][:40] + "\n")
    path.write_text("".join(lines))
    return path


def test_arguments() -> None:
    args = build_parser().parse_args(["slam", "offline", "x.log", "-o", "m.xml"])
    assert args.odometry_noise == "default" and args.seed == 1 and args.plot is None and args.max_scans is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["slam", "offline", "x.log"])  # no map file


def test_offline_run_prints_the_figures_and_writes_the_map(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_map, picture = tmp_path / "map.xml", tmp_path / "map.png"
    assert main(["slam", "offline", str(small_log), "-o", str(out_map), "--plot", str(picture), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "1 lines or messages left out" in out
    assert "40 scans" in out and "real time" in out and "(seed 3)" in out
    assert out.count("relative pose error") == 2 and "SLAM" in out and "odometry" in out
    assert "absolute trajectory error after a rigid alignment (40 poses)" in out and "RMSE" in out
    assert "errors as mean (95th percentile, maximum)" in out
    assert f"map saved to {out_map}" in out and f"picture saved to {picture}" in out
    walls = load_world(out_map).walls
    assert walls.shape[0] > 3
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_noise_and_fewer_scans(small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_map = tmp_path / "map.xml"
    assert (
        main(["slam", "offline", str(small_log), "-o", str(out_map), "--odometry-noise", "none", "--max-scans", "10"])
        == 0
    )
    out = capsys.readouterr().out
    assert "10 scans" in out and "odometry noise none" in out
    # the odometry is the reference itself
    assert "odometry 0.000 m (95 % 0.000, max 0.000), 0.00° (95 % 0.00, max 0.00)" in out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--odometry-noise", "loud"], "--odometry-noise"),
        (["--max-scans", "1"], "--max-scans"),
    ],
)
def test_bad_options_fail_in_one_line(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    assert main(["slam", "offline", str(small_log), "-o", str(tmp_path / "m.xml"), *options]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "m.xml").exists()


def test_a_missing_log_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slam", "offline", str(tmp_path / "none.log"), "-o", str(tmp_path / "m.xml")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read" in err[0], err


def restamped(source: Path, target: Path, stamp: str) -> Path:
    """``source``'s lines with every FLASER's two timestamps replaced by ``stamp``."""
    lines = []
    for line in source.read_text().splitlines():
        fields = line.split()
        if len(fields) > 12 and fields[0] == "FLASER":
            fields[-3] = fields[-1] = stamp
        lines.append(" ".join(fields) + "\n")
    target.write_text("".join(lines))
    return target


@pytest.mark.parametrize("stamp", ["0", "4.29497e+09"])
def test_a_log_whose_stamps_cannot_time_it_is_read_with_one_warning_and_no_real_time_factor(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], stamp: str
) -> None:
    log = restamped(small_log, tmp_path / "restamped.log", stamp)
    assert main(["slam", "offline", str(log), "-o", str(tmp_path / "m.xml"), "--max-scans", "30"]) == 0
    out = capsys.readouterr().out
    assert out.count("cannot time the log") == 1 and "taken in the file's order" in out
    assert "30 scans in" in out and "no real-time factor: the log's stamps cannot time it" in out
    assert "x real time" not in out
    assert out.count("relative pose error") == 2


def test_relations_give_the_error_over_their_pairs(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the reference motions between a few scans of the log (their corrected poses), and one pair the log lacks
    scans = [line.split() for line in small_log.read_text().splitlines() if len(line.split()) > 12]
    pose = {float(f[-3]): tuple(float(v) for v in f[-9:-6]) for f in scans}
    stamps = sorted(pose)
    lines = ["# t1 t2 x y z roll pitch yaw"]
    for a, b in ((stamps[0], stamps[5]), (stamps[5], stamps[12]), (stamps[12], stamps[20])):
        (xa, ya, ta), (xb, yb, tb) = pose[a], pose[b]
        dx, dy = xb - xa, yb - ya
        c, s = math.cos(ta), math.sin(ta)
        lines.append(f"{a} {b} {c * dx + s * dy:.6f} {-s * dx + c * dy:.6f} 0 0 0 {tb - ta:.6f}")
    lines.append(f"{stamps[0]} 99999.5 1 0 0 0 0 0")
    relations = tmp_path / "intel.relations"
    relations.write_text("\n".join(lines) + "\n")
    args = ["slam", "offline", str(small_log), "-o", str(tmp_path / "m.xml"), "--relations", str(relations)]
    assert main([*args, "--odometry-noise", "none"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if "over the relations of intel.relations" in row)
    assert "(3 pairs, 1 of 4 name no scan of the log)" in line
    assert "odometry 0.000 m (95 % 0.000, max 0.000), 0.00° (95 % 0.00, max 0.00)" in line  # the reference itself
    # a relations file that names none of the log's scans, and one that is not there
    relations.write_text("1.0 2.0 1 0 0 0 0 0\n")
    assert main(args) == 0
    assert "none of its 1 pairs names two scans of the log" in capsys.readouterr().out
    assert main([*args[:-1], str(tmp_path / "none.relations")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read" in err[0], err
