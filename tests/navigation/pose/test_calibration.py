"""Odometry calibration from one wall: distance scale, heading gain and heading drift recovered from simulated scans
with seeded odometry errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.calibration import WallCalibration, WallSighting, fit_distance_scale, fit_heading
from pluto.navigation.pose.features import extract_lines
from pluto.navigation.pose.findwall import find_wall
from pluto.sim.raycast import RayCaster
from tests.navigation.pose.scenes import MAX_RANGE, MOUNT, angles, scan

WALL = np.array([[8.0, -6.0, 8.0, 6.0]])


def sight(
    calibration: WallCalibration,
    caster: RayCaster,
    robot: tuple[float, float, float],
    odometry: tuple[float, float, float],
    rng: np.random.Generator,
) -> None:
    """Scan the wall from the true robot pose; record it at the odometry's laser pose."""
    bearings = angles(361)
    x, y, theta = robot
    laser = (x + MOUNT * math.cos(theta), y + MOUNT * math.sin(theta), theta)
    features = extract_lines(scan(caster, laser, bearings, rng), bearings, max_range=MAX_RANGE)
    wall = find_wall(features, sector=math.radians(45))
    assert wall is not None
    ox, oy, otheta = odometry
    calibration.add_found((ox + MOUNT * math.cos(otheta), oy + MOUNT * math.sin(otheta), otheta), wall)


@pytest.mark.parametrize("scale_error", [0.03, -0.05])
def test_distance_scale_is_recovered_within_one_percent(scale_error: float) -> None:
    """The odometry reports distances divided by 1 + scale_error (and some noise) while driving to the wall."""
    rng = np.random.default_rng(4)
    caster = RayCaster(WALL)
    calibration = WallCalibration()
    odometry_x = 0.0
    for k in range(51):  # 5 m toward the wall, a sighting every 0.1 m
        true_x = 0.1 * k
        if k:
            odometry_x += 0.1 / (1.0 + scale_error) + rng.normal(0.0, 0.001)
        sight(calibration, caster, (true_x, 0.2, 0.0), (odometry_x, 0.0, 0.0), rng)
    result = calibration.result()
    assert result.samples == 51
    assert result.distance_scale == pytest.approx(1.0 + scale_error, rel=0.01)
    assert 0 < result.distance_scale_std < 0.005
    assert result.rho_rms < 0.01
    assert math.isnan(result.heading_gain)  # it never turned


@pytest.mark.parametrize("gain_error", [0.05, -0.08])
def test_heading_gain_is_recovered_from_turning_in_place(gain_error: float) -> None:
    """The odometry reports turns divided by 1 + gain_error while the robot turns in front of the wall."""
    rng = np.random.default_rng(5)
    caster = RayCaster(WALL)
    calibration = WallCalibration()
    for k in range(41):  # from -0.6 rad to +0.6 rad
        theta = -0.6 + 0.03 * k
        sight(calibration, caster, (1.0, 0.5, theta), (1.0, 0.5, theta / (1.0 + gain_error)), rng)
    result = calibration.result()
    assert result.heading_gain == pytest.approx(1.0 + gain_error, abs=0.005)
    assert 0 < result.heading_gain_std < 0.005
    assert math.isnan(result.heading_bias)  # it never travelled
    assert result.gamma_rms < 0.005


def test_heading_drift_per_metre_is_recovered_while_driving_straight() -> None:
    """The robot drives straight; its odometry thinks it turns 0.02 rad per metre to the left."""
    rng = np.random.default_rng(6)
    caster = RayCaster(WALL)
    calibration = WallCalibration()
    drift = -0.02  # rad/m the true heading changes beyond what the odometry reports
    for k in range(51):
        travelled = 0.1 * k
        odometry = (travelled, 0.0, -drift * travelled)
        sight(calibration, caster, (travelled, 0.0, 0.0), odometry, rng)
    result = calibration.result()
    assert math.isnan(result.heading_gain)  # 0.1 rad of turning: too little to tell a gain
    assert result.heading_bias == pytest.approx(drift, abs=0.002)
    assert result.distance_scale == pytest.approx(1.0, abs=0.01)


def test_too_little_data_gives_nans() -> None:
    one = [WallSighting((0.0, 0.0, 0.0), 0.0, 3.0, 1e-6, 1e-6)] * 2
    assert all(math.isnan(v) for v in fit_distance_scale(one))
    assert all(math.isnan(v) for v in fit_heading(one))
    standing = [WallSighting((0.0, 0.0, 0.0), 0.001 * k, 3.0, 1e-6, 1e-6) for k in range(10)]
    assert math.isnan(fit_distance_scale(standing)[0])
    calibration = WallCalibration()
    with pytest.raises(ValueError, match="finite"):
        calibration.add((0.0, 0.0, 0.0), math.nan, 1.0, np.eye(2))
    with pytest.raises(ValueError, match="2x2"):
        calibration.add((0.0, 0.0, 0.0), 0.0, 1.0, np.eye(3))
