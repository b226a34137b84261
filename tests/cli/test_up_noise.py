"""``pluto up --noise`` and ``--seed``: the simulator's settings of a profile, checked before anything starts."""

from __future__ import annotations

import pytest

from pluto.cli.main import build_parser
from pluto.cli.up_cmd import _simulator_settings
from pluto.errors import ConfigError, LaunchError
from pluto.runtime.profiles import load_profile, parse_overrides


def test_noise_and_seed_set_the_simulator_of_the_profile() -> None:
    args = build_parser().parse_args(["up", "mission", "--noise", "realistic", "--seed", "3"])
    settings = _simulator_settings(args)
    assert parse_overrides(settings) == {"sim": {"noise": "realistic", "seed": 3}}
    profile = load_profile("mission", parse_overrides(settings))
    (sim,) = [e for e in profile.entries if e.name == "sim"]
    assert (sim.spec.params["noise"], sim.spec.params["seed"]) == ("realistic", 3)
    assert _simulator_settings(build_parser().parse_args(["up", "robot"])) == []


def test_noise_for_a_profile_without_a_simulator_or_of_no_known_name_is_refused() -> None:
    with pytest.raises(LaunchError, match="profile robot has no sim module"):
        _simulator_settings(build_parser().parse_args(["up", "robot", "--noise", "basic"]))
    with pytest.raises(ConfigError, match="unknown noise profile 'rough'; known: ideal, basic, realistic"):
        _simulator_settings(build_parser().parse_args(["up", "sim", "--noise", "rough"]))
