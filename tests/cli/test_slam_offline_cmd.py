"""``pluto slam offline`` on a small CARMEN log: the figures it prints, the map and the picture it writes, and bad
options."""

from __future__ import annotations

import gzip
import itertools
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
