"""``pluto demo --slam``: the demo's profile with the slam module in place of the pose module, and what it refuses.

The run itself is in ``tests/scenarios/test_demo.py``; the map's score in ``tests/navigation/slam/test_mapcheck.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pluto.cli.demo import demo_profile, run_demo, with_slam
from pluto.errors import ModuleNotFound, PlutoError
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile
from pluto.sim.world import load_world


def test_the_slam_module_takes_the_pose_modules_place_mapping_from_the_start(tmp_path: Path) -> None:
    world = load_world("office")
    plain = demo_profile(world, tmp_path / "start.toml", seed=2, noise="realistic")
    profile = with_slam(plain, tmp_path / "office-1-map.xml")
    names = [e.name for e in profile.entries]
    assert "pose" in [e.name for e in plain.entries] and "pose" not in names
    assert sorted(names) == sorted(n if n != "pose" else "slam" for n in (e.name for e in plain.entries))
    for need in ("localization", "sick"):  # started after what it reads
        assert names.index(need) < names.index("slam")
    slam = profile.entries[names.index("slam")].spec
    assert slam.module == "slam"
    assert slam.params == {
        "use_sim_time": True,
        "autostart": True,  # its thread waits for a start by default: here it maps from the first scan
        "map_file": str(tmp_path / "office-1-map.xml"),
        "map_name": "office-1-map",
    }
    # the other modules keep their settings
    kept = {e.name: e.spec.params for e in plain.entries if e.name != "pose"}
    assert {e.name: e.spec.params for e in profile.entries if e.name != "slam"} == kept


def test_a_profile_without_a_pose_module_is_refused() -> None:
    with pytest.raises(ModuleNotFound, match="no pose module"):
        with_slam(load_profile("sim"), Path("map.xml"))


def test_slam_on_the_emulated_devices_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(PlutoError, match="--slam runs on the simulated devices"):
        run_demo(Config(), output=tmp_path / "out", devices="emulated", slam=True)
    assert not (tmp_path / "out").exists()
