"""``pluto demo --devices emulated``: the demo's route on the real drivers, each talking to an emulator.

The run itself takes minutes of wall clock (it cannot go faster than real time), so it is not part of the suite;
these tests check what it is made of: the modules it starts and how they are wired, the comparison with the
emulator's truth, and the options it refuses before starting anything. The scenario test
``tests/scenarios/test_emulated_robot.py`` drives the same profile for one moveto.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pluto.cli.demo import EMULATORS, emulated_demo_profile, interpolated, localization_errors, run_demo
from pluto.errors import PlutoError
from pluto.geometry import wrap_angle
from pluto.runtime.config import Config, build_params
from pluto.runtime.registry import load_module_class, without_driver
from pluto.sim.world import load_world

DRIVERS = {"base": "p2os", "sick": "lms", "dmu": "crossbow", "gps": "nmea", "wrist": "can"}
"""Each device module of the robot and its real driver."""


def effective_params(module: str, params: dict[str, Any]) -> Any:
    """The parameters a module of a profile gets (its class's defaults under the profile's values)."""
    cls = load_module_class(module, params)
    return build_params(cls.Params, without_driver(params), where=module)


def test_the_emulated_demo_puts_every_device_behind_its_protocol_on_the_wall_clock(tmp_path: Path) -> None:
    world = load_world("office")
    start = tmp_path / "start-pose.toml"
    profile = emulated_demo_profile(world, start, seed=7, noise="realistic", ports=[9101, 9102, 9103, 9104])
    entries = {e.name: e for e in profile.entries}
    assert set(entries) == {*EMULATORS, *DRIVERS, "localization", "drive", "avoid", "motion", "pose"}
    assert "sim" not in entries  # no simulator: the emulators stand in for the devices
    for name, driver in DRIVERS.items():
        assert entries[name].spec.params["driver"] == driver, name
    # each driver on its own emulator's port, the emulators in the demo's world with its noise and seed
    for (emulator, device), port in zip(EMULATORS.items(), [9101, 9102, 9103, 9104], strict=True):
        params = entries[emulator].spec.params
        assert (params["port"], params["noise"], params["seed"]) == (port, "realistic", 7), emulator
        assert entries[device].spec.params["port"] == f"socket://127.0.0.1:{port}", device
    assert entries["p2os-emulator"].spec.params["world"] == entries["sick-emulator"].spec.params["world"] == "office"
    assert entries["pose"].spec.params["map"] == "office"
    assert entries["localization"].spec.params["start_pose_file"] == str(start)
    # everything on the wall clock: a module waiting for a simulated time nobody publishes would never step
    for name, entry in entries.items():
        assert not effective_params(entry.spec.module, dict(entry.spec.params)).use_sim_time, name
    # the scanner turns with the wrist it sits on
    assert effective_params("sick-emulator", dict(entries["sick-emulator"].spec.params)).on_wrist


def test_the_emulators_get_free_ports_of_their_own_by_default(tmp_path: Path) -> None:
    profile = emulated_demo_profile(load_world("office"), tmp_path / "start.toml")
    ports = [e.spec.params["port"] for e in profile.entries if e.name in EMULATORS]
    assert len(set(ports)) == len(EMULATORS)
    assert all(0 < port < 65536 and port not in (8101, 8102, 8103, 8104) for port in ports), ports


def test_errors_against_a_truth_on_its_own_clock_are_measured_at_the_estimates_stamps() -> None:
    # the truth turns at 1 rad/s through ±π and moves along x at 0.5 m/s, sampled every 20 ms
    stamps = np.arange(0.0, 10.0, 0.02)
    theta = wrap_angle(stamps)
    truth = np.column_stack([stamps, 0.5 * stamps, np.zeros_like(stamps), theta])
    # estimates between the truth's samples: 0.1 m to the left, 2° off, one before and one after the truth
    at = np.array([-1.0, 0.013, 3.137, 3.151, 6.509, 9.97, 12.0])
    estimate = np.column_stack([at, 0.5 * at, np.full_like(at, 0.1), at + math.radians(2.0)])
    true, kept = interpolated(truth, estimate)
    assert kept[:, 0].tolist() == [0.013, 3.137, 3.151, 6.509, 9.97]
    assert np.array_equal(true[:, 0], kept[:, 0]) and np.allclose(true[:, 1], 0.5 * kept[:, 0])
    position, heading = localization_errors(truth, estimate, interpolate=True)
    assert np.allclose(position, 0.1)
    assert np.allclose(np.degrees(heading), 2.0)  # also across the wrap at ±π (3.137 s, 3.151 s)
    # the simulator's way, by equal stamps, finds no pairs here
    assert len(localization_errors(truth, estimate)[0]) == 0


@pytest.mark.parametrize("rate", ["5", "0.5"])
def test_a_rate_with_the_emulated_devices_is_refused_before_anything_starts(tmp_path: Path, rate: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pluto", "demo", "--devices", "emulated", "--rate", rate, "--output", "out"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pluto demo:"), result.stderr
    assert "wall clock" in lines[0] and "--rate" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("goals", [0, -1, 4])
def test_a_number_of_goals_outside_the_route_is_refused_before_anything_starts(goals: int) -> None:
    with pytest.raises(PlutoError, match="--goals must be 1 to 3"):
        run_demo(Config(), goals=goals)
