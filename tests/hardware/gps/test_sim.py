"""The simulated GPS: the local grid in latitude/longitude, ideal fixes, and losing the differential fix."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pluto.hardware.gps.sim import SimGps, grid_to_geodetic
from pluto.sim.noise import device_rng, noise_profile

ORIGIN = (59.3498, 18.0707, 10.0)

# WGS-84
A = 6_378_137.0
F = 1 / 298.257223563
E2 = F * (2 - F)


def meridian_radius(lat: float) -> float:
    """Radius of curvature of the meridian (north-south), m."""
    s = math.sin(math.radians(lat))
    return A * (1 - E2) / (1 - E2 * s * s) ** 1.5


def prime_vertical_radius(lat: float) -> float:
    """Radius of curvature of the prime vertical (east-west), m."""
    s = math.sin(math.radians(lat))
    return A / math.sqrt(1 - E2 * s * s)


def test_one_kilometre_north_is_about_0_009_degrees_of_latitude() -> None:
    lat, lon = grid_to_geodetic(0.0, 1000.0, ORIGIN)
    assert lat - ORIGIN[0] == pytest.approx(0.008993, abs=2e-5)
    assert lon == ORIGIN[1]


def test_east_is_longitude_shrunk_by_the_cosine_of_the_latitude() -> None:
    lat, lon = grid_to_geodetic(1000.0, 0.0, ORIGIN)
    assert lat == ORIGIN[0]
    assert (lon - ORIGIN[1]) * math.cos(math.radians(ORIGIN[0])) == pytest.approx(0.008993, abs=5e-5)
    at_equator = grid_to_geodetic(1000.0, 0.0, (0.0, 0.0, 0.0))
    assert at_equator[1] == pytest.approx(0.008993, abs=5e-5)


def test_the_origin_maps_to_itself_and_the_grid_is_linear() -> None:
    assert grid_to_geodetic(0.0, 0.0, ORIGIN) == (ORIGIN[0], ORIGIN[1])
    a = np.subtract(grid_to_geodetic(200.0, -300.0, ORIGIN), ORIGIN[:2])
    b = np.subtract(grid_to_geodetic(400.0, -600.0, ORIGIN), ORIGIN[:2])
    assert b == pytest.approx(2 * a)


@pytest.mark.parametrize("lat0", [0.0, 45.0, ORIGIN[0]])
def test_one_kilometre_matches_the_wgs84_ellipsoid_within_a_centimetre(lat0: float) -> None:
    origin = (lat0, 18.0, 0.0)
    lat, _ = grid_to_geodetic(0.0, 1000.0, origin)
    north = math.radians(lat - lat0) * meridian_radius(lat0)
    _, lon = grid_to_geodetic(1000.0, 0.0, origin)
    east = math.radians(lon - 18.0) * prime_vertical_radius(lat0) * math.cos(math.radians(lat0))
    assert north == pytest.approx(1000.0, abs=0.01)
    assert east == pytest.approx(1000.0, abs=0.01)


def test_ideal_fix_is_the_truth() -> None:
    gps = SimGps(ORIGIN)
    for x, y in [(0.0, 0.0), (12.5, -3.0), (250.0, 900.0)]:
        fix = gps.fix(0.5, x, y)
        assert (fix.x, fix.y) == (x, y)
        assert (fix.latitude, fix.longitude) == grid_to_geodetic(x, y, ORIGIN)
        assert fix.altitude == ORIGIN[2]
        assert fix.quality == 2
        assert fix.satellites > 5
        assert fix.hdop < 1.0


def realistic(**overrides: float) -> SimGps:
    return SimGps(ORIGIN, noise_profile("realistic", overrides), device_rng(11, "gps"))


def spread(gps: SimGps, n: int = 2000) -> tuple[np.ndarray, list[int]]:
    fixes = [gps.fix(0.5, 10.0, 20.0) for _ in range(n)]
    return np.array([(f.x, f.y) for f in fixes]), [f.quality for f in fixes]


def test_differential_fix_noise() -> None:
    gps = realistic(gps_degrade_rate=0.0)
    xy, quality = spread(gps)
    assert set(quality) == {2}
    assert xy.mean(axis=0) == pytest.approx([10.0, 20.0], abs=0.05)
    assert xy.std(axis=0) == pytest.approx([0.3, 0.3], rel=0.1)


def test_degraded_fix_has_quality_one_and_more_noise() -> None:
    gps = realistic(gps_recover_rate=0.0)
    gps.differential = False
    xy, quality = spread(gps)
    assert set(quality) == {1}
    assert xy.mean(axis=0) == pytest.approx([10.0, 20.0], abs=0.5)
    assert xy.std(axis=0) == pytest.approx([3.0, 3.0], rel=0.1)
    fix = gps.fix(0.5, 0.0, 0.0)
    assert fix.satellites < SimGps(ORIGIN).fix(0.5, 0.0, 0.0).satellites
    assert fix.hdop > 1.0


def test_losing_and_regaining_the_differential_fix() -> None:
    gps = realistic(gps_degrade_rate=0.2, gps_recover_rate=0.5)
    _, quality = spread(gps, 4000)
    switches = sum(a != b for a, b in itertools.pairwise(quality))
    assert switches > 10
    # in steady state the share of plain fixes is degrade / (degrade + recover) = 2/7
    assert quality.count(1) / len(quality) == pytest.approx(2 / 7, abs=0.1)


def test_same_seed_same_fixes() -> None:
    a, _ = spread(realistic(), 200)
    b, _ = spread(realistic(), 200)
    assert np.array_equal(a, b)
