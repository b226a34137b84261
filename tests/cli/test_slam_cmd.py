"""``pluto slam``: its arguments, a one-line error without the module, and runs in this process against the slam
module on the wall clock, fed by hand (status, start, save, stop)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto.bus import Bus
from pluto.cli.main import build_parser, main
from pluto.navigation.slam.module import SlamModule, SlamModuleParams
from pluto.sim.world import load_world
from tests.navigation.slam.test_module import feed


@pytest.fixture
def slam(bus: Bus, tmp_path: Path) -> Iterator[SlamModule]:
    module = SlamModule(bus, SlamModuleParams(map_file=str(tmp_path / "map.xml"), use_sim_time=False))
    module.start()
    yield module
    module.stop()


def test_arguments() -> None:
    parser = build_parser()
    for action in ("start", "stop", "save", "status"):
        assert parser.parse_args(["slam", action]).action == action
    for bad in (["slam"], ["slam", "fly"]):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(bad)
        assert exit_info.value.code == 2


def test_without_the_slam_module_it_fails_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slam", "status"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pluto slam: ") and "pluto start slam" in err[0], err


def test_status_start_save_stop(slam: SlamModule, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slam", "status"]) == 0
    out = capsys.readouterr().out
    assert "thread stopped" in out and str(tmp_path / "map.xml") in out and "not saved yet" in out
    assert main(["slam", "start"]) == 0
    assert slam.active and "running" in capsys.readouterr().out
    feed(slam, [(3.0 + 0.1 * k, 2.0, 0.0) for k in range(5)])
    assert main(["slam", "save"]) == 0
    out = capsys.readouterr().out
    assert f"map saved to {tmp_path / 'map.xml'}" in out and slam.active
    assert main(["slam", "stop"]) == 0
    out = capsys.readouterr().out
    assert "stopped" in out and "map saved to" in out and not slam.active
    assert slam.saves == 2
    assert load_world(tmp_path / "map.xml").walls.shape[0] == slam.saved_walls
