"""Noise profiles: the named profiles, overrides and their validation, and reproducible random generators."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest

from pluto.errors import ConfigError
from pluto.hardware.base.sim import SimBody
from pluto.sim.noise import BASIC, IDEAL, PROFILES, REALISTIC, NoiseProfile, device_rng, noise_profile
from pluto.sim.world import parse_world


def test_ideal_is_all_zero() -> None:
    assert noise_profile("ideal") is IDEAL
    for field in msgspec.structs.fields(IDEAL):
        value = getattr(IDEAL, field.name)
        if field.name == "gps_recover_rate":
            continue  # a rate of getting back what is never lost
        assert not value, field.name


def test_basic_profile_fields() -> None:
    """The devices' own errors, in a world exactly as mapped (what ``realistic`` was before the world got rough)."""
    p = noise_profile("basic")
    assert p is BASIC
    assert p.odometry_scale_error == 0.02
    assert p.odometry_slip == 0.03
    assert p.wheel_spin_when_stalled is True
    assert p.laser_range_std == 0.01
    assert p.laser_dropout == 0.005
    assert p.sonar_range_std == 0.05
    assert p.sonar_dropout == 0.02
    assert p.gyro_bias == 0.002
    assert p.gyro_drift == 0.0005
    assert p.gyro_noise_std == 0.005
    assert p.accel_noise_std == 0.05
    assert p.tilt_noise_std == 0.002
    assert p.gps_std == 0.3
    assert p.gps_degraded_std == 3.0
    assert p.gps_degrade_rate == 0.01
    assert p.gps_recover_rate == 0.1
    assert not p.rough_world and p.laser_range_std_per_m == p.laser_spot == p.odometry_slip_rate == 0.0
    assert set(PROFILES) == {"ideal", "basic", "realistic"}


def test_realistic_is_basic_in_a_rough_world() -> None:
    p = noise_profile("realistic")
    assert p is REALISTIC and p.rough_world
    rough = {
        "odometry_heading_bias": 0.01,
        "odometry_slip_rate": 0.05,
        "laser_range_std_per_m": 0.001,
        "laser_spot": math.radians(0.25),
        "laser_mixed_pixels": 0.5,
        "laser_range_at_10": 30.0,
        "laser_dark_surfaces": 0.1,
        "laser_glass": 0.15,
        "laser_glass_angle": math.radians(20.0),
        "map_offset_std": 0.02,
        "clutter_spacing": 12.0,
    }
    for name, value in msgspec.structs.asdict(p).items():
        assert value == pytest.approx(rough.get(name, getattr(BASIC, name))), name


def test_overrides_replace_only_the_settings_named() -> None:
    p = noise_profile("realistic", {"laser_range_std": 0.02, "wheel_spin_when_stalled": False, "gps_std": 1})
    assert p.laser_range_std == 0.02
    assert p.wheel_spin_when_stalled is False
    assert p.gps_std == 1.0
    assert p.odometry_slip == REALISTIC.odometry_slip
    assert REALISTIC.laser_range_std == 0.01  # the shared profile is untouched
    assert noise_profile("ideal", {"gyro_bias": 0.01}) == NoiseProfile(gyro_bias=0.01)
    assert noise_profile("realistic", {}) is REALISTIC


def test_unknown_profile() -> None:
    with pytest.raises(ConfigError, match=r"unknown noise profile 'noisy'; known: ideal, basic, realistic"):
        noise_profile("noisy")


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"laser_noise": 0.1}, "unknown field `laser_noise`"),
        ({"gps_std": -0.5}, r"gps_std = -0.5 is out of range: it must be in \[0, 1000\]"),
        ({"odometry_slip": -1e-9}, r"odometry_slip = -1e-09 is out of range: it must be in \[0, 1\]"),
        ({"laser_dropout": 1.5}, r"laser_dropout = 1.5 is out of range: it must be in \[0, 1\]"),
        ({"sonar_dropout": 2.0}, r"sonar_dropout = 2.0 is out of range: it must be in \[0, 1\]"),
        ({"laser_glass": 1.5}, r"laser_glass = 1.5 is out of range: it must be in \[0, 1\]"),
        ({"laser_mixed_pixels": -0.1}, r"laser_mixed_pixels = -0.1 is out of range: it must be in \[0, 1\]"),
        ({"laser_glass_angle": 2.0}, r"laser_glass_angle = 2.0 is out of range: it must be in \[0, 1.5708\]"),
        ({"clutter_spacing": math.inf}, r"clutter_spacing = inf is out of range: it must be in \[0, 10000\]"),
        ({"gps_std": "high"}, "Expected `float`"),
        ({"wheel_spin_when_stalled": 1.0}, "Expected `bool`"),
    ],
)
def test_bad_settings_are_config_errors(overrides: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        noise_profile("realistic", overrides)


@pytest.mark.parametrize("name", ["gps_std", "laser_dropout"])
def test_nan_settings_are_config_errors(name: str) -> None:
    with pytest.raises(ConfigError):
        noise_profile("ideal", {name: math.nan})


def test_a_bad_profile_built_directly_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"gps_std = -1.0 is out of range: it must be in \[0, 1000\]"):
        NoiseProfile(gps_std=-1.0)
    with pytest.raises(ValueError, match=r"laser_dropout = 1.01 is out of range: it must be in \[0, 1\]"):
        NoiseProfile(laser_dropout=1.01)
    assert NoiseProfile(laser_dropout=1.0).laser_dropout == 1.0


def test_device_rng_is_reproducible_and_independent_per_device() -> None:
    a = device_rng(7, "base").random(8)
    assert np.array_equal(a, device_rng(7, "base").random(8))
    assert not np.array_equal(a, device_rng(7, "sick").random(8))
    assert not np.array_equal(a, device_rng(8, "base").random(8))


BOX = parse_world(
    '<world name="box" version="1"><start x="2" y="2"/><walls>'
    '<wall x1="0" y1="0" x2="6" y2="0"/><wall x1="6" y1="0" x2="6" y2="4"/>'
    '<wall x1="6" y1="4" x2="0" y2="4"/><wall x1="0" y1="4" x2="0" y2="0"/>'
    "</walls></world>"
)
COMMANDS = [(1.0, 0.0)] * 100 + [(0.0, 1.5)] * 30 + [(1.2, 0.4)] * 200


def noisy_run(seed: int) -> tuple[list, list]:
    body = SimBody(BOX.segments(), BOX.circles, BOX.start, noise=REALISTIC, rng=device_rng(seed, "base"))
    states = [body.step(v, w, 0.02) for v, w in COMMANDS]
    return states, [body.sonar().tolist() for _ in range(3)]


def test_the_same_seed_gives_the_same_noisy_run() -> None:
    states_a, sonar_a = noisy_run(42)
    states_b, sonar_b = noisy_run(42)
    assert states_a == states_b
    assert sonar_a == sonar_b
    assert any(s.stalled for s in states_a)  # the run meets the walls


def test_a_different_seed_gives_a_different_run() -> None:
    states_a, sonar_a = noisy_run(42)
    states_c, sonar_c = noisy_run(43)
    assert states_a[-1].odom_x != states_c[-1].odom_x
    assert sonar_a != sonar_c
    # the truth does not depend on the noise of the odometry and the sonar
    assert (states_a[50].x, states_a[50].y) == (states_c[50].x, states_c[50].y)


def test_noise_makes_odometry_differ_from_the_truth() -> None:
    states, _ = noisy_run(1)
    s = states[99]  # still driving straight, before any wall
    travelled = math.hypot(s.x - 2.0, s.y - 2.0)
    assert s.odom_x != pytest.approx(travelled, abs=1e-6)
    assert s.odom_x == pytest.approx(travelled, rel=0.1)
