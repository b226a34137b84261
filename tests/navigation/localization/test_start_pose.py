"""The starting pose file of the localization service."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pluto.errors import ConfigError
from pluto.navigation.localization.module import LocalizationModuleParams, read_start_pose


def test_no_file_is_the_origin() -> None:
    assert read_start_pose("") == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_toml_and_json_files(tmp_path: Path) -> None:
    toml = tmp_path / "start.toml"
    toml.write_text("x = 10.0\ny = 9.7\ntheta = 1.5\n")
    assert read_start_pose(str(toml)) == (10.0, 9.7, 0.0, 1.5, 0.0, 0.0)
    json = tmp_path / "start.json"
    json.write_text('{"x": 1, "y": 2, "z": 0.5, "theta": -0.5, "phi": 0.1, "psi": 0.2}')
    assert read_start_pose(str(json)) == (1.0, 2.0, 0.5, -0.5, 0.1, 0.2)


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("missing.toml", None, "missing.toml"),
        ("bad.toml", "x = \n", "bad.toml"),
        ("nan.toml", "x = nan\n", "x = nan is out of range"),
        ("huge.toml", "y = 1e308\n", "y = 1e\\+308 is out of range"),
        ("word.toml", 'theta = "north"\n', "theta must be a number"),
        ("list.json", "[1, 2, 3]", "expected a table"),
    ],
)
def test_bad_files_are_config_errors(tmp_path: Path, name: str, text: str | None, reason: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=reason):
        read_start_pose(str(path))


def test_a_start_pose_in_the_parameters(tmp_path: Path) -> None:
    assert LocalizationModuleParams(start_pose=[10.0, 9.7, 0.5]).initial_pose() == (10.0, 9.7, 0.0, 0.5, 0.0, 0.0)
    assert LocalizationModuleParams().initial_pose() == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    toml = tmp_path / "start.toml"
    toml.write_text("x = 1.0\ny = 2.0\ntheta = 0.25\n")
    params = LocalizationModuleParams(start_pose=[10.0, 9.7, 0.5], start_pose_file=str(toml))
    assert params.initial_pose() == (1.0, 2.0, 0.0, 0.25, 0.0, 0.0)  # the file wins


@pytest.mark.parametrize("pose", [[1.0, 2.0], [1.0, 2.0, 3.0, 4.0], [1.0, math.nan, 0.0]])
def test_a_bad_start_pose_parameter_is_refused(pose: list[float]) -> None:
    with pytest.raises(ValueError, match="start_pose"):
        LocalizationModuleParams(start_pose=pose)
