"""The scan-matching front end: synthetic scans with a known motion, a bare corridor, a scan that fits nothing, the
covariance's lever, and the start of the Intel lab's log with and without odometry noise."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pluto.navigation.slam.metrics import relative_pose_error
from pluto.navigation.slam.offline import OdometryNoise, OfflineParams, read_carmen, run_offline
from pluto.navigation.slam.scanmatch import (
    DEGENERATE,
    FALLBACK,
    MATCHED,
    LocalPointMap,
    ScanMatcher,
    ScanMatchParams,
    laser_increment_covariance,
    point_normals,
    register,
    robot_increment_covariance,
    scan_points,
    thin,
)
from pluto.sim.raycast import RayCaster

RADISH = Path("/work/shared/datasets/radish")
INTEL = RADISH / "intel-corrected.log.gz"
needs_intel = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")

BEARINGS = np.radians(np.arange(-90.0, 90.5, 0.5))
MAX_RANGE = 30.0

# a room of 10 x 6 m with a pillar, a cupboard and a short wall in it: clutter that the lines alone would not use
ROOM = RayCaster(
    np.array(
        [
            (0.0, 0.0, 10.0, 0.0),
            (10.0, 0.0, 10.0, 6.0),
            (10.0, 6.0, 0.0, 6.0),
            (0.0, 6.0, 0.0, 0.0),
            (6.0, 2.0, 6.6, 2.0),
            (6.6, 2.0, 6.6, 2.5),
            (6.6, 2.5, 6.0, 2.5),
            (3.0, 4.5, 4.2, 5.2),
        ]
    ),
    np.array([(7.5, 4.2, 0.25), (2.0, 1.2, 0.15)]),
)

# a corridor 2 m wide and 100 m long: nothing tells where along it the laser is
CORRIDOR = RayCaster(np.array([(-50.0, -1.0, 50.0, -1.0), (-50.0, 1.0, 50.0, 1.0)]))


def scan_at(caster: RayCaster, pose: tuple[float, float, float], rng: np.random.Generator | None = None) -> np.ndarray:
    """The laser-frame points of a scan from ``pose`` (range noise 1 cm with ``rng``)."""
    ranges = caster.cast(np.array(pose[:2]), BEARINGS + pose[2], MAX_RANGE)
    if rng is not None:
        ranges = np.where(ranges < MAX_RANGE, ranges + rng.normal(0.0, 0.01, ranges.shape), ranges)
    return scan_points(ranges, BEARINGS, MAX_RANGE, ScanMatchParams())


def odometry_covariance(sigma_xy: float, sigma_theta: float) -> np.ndarray:
    return np.diag([sigma_xy**2, sigma_xy**2, sigma_theta**2])


def test_a_known_motion_is_recovered_from_a_wrong_odometry() -> None:
    rng = np.random.default_rng(3)
    first, second = (2.0, 3.0, 0.1), (2.6, 3.2, 0.35)
    matcher = ScanMatcher()
    start = matcher.step(first, np.zeros((3, 3)), scan_at(ROOM, first, rng))
    assert start.registration is None and start.pose == first
    # the odometry says 8 cm and 3 degrees off the truth
    wrong = (second[0] + 0.06, second[1] - 0.05, second[2] + math.radians(3.0))
    step = matcher.step(wrong, odometry_covariance(0.08, math.radians(4.0)), scan_at(ROOM, second, rng))
    assert step.registration is not None and step.registration.status == MATCHED
    assert math.hypot(step.pose[0] - second[0], step.pose[1] - second[1]) < 0.01
    assert abs(step.pose[2] - second[2]) < math.radians(0.2)
    # far more certain than the odometry, and a proper covariance
    assert np.all(np.linalg.eigvalsh(step.covariance) > 0.0)
    assert step.covariance[0, 0] < 0.02**2 and step.covariance[2, 2] < math.radians(0.5) ** 2


def test_a_bare_corridor_leaves_the_travel_to_the_odometry() -> None:
    rng = np.random.default_rng(4)
    first, second = (0.0, 0.0, 0.0), (0.5, 0.1, 0.05)
    matcher = ScanMatcher()
    matcher.step(first, np.zeros((3, 3)), scan_at(CORRIDOR, first, rng))
    # the odometry is 10 cm long, 4 cm across and 2 degrees off
    wrong = (0.6, 0.14, 0.05 + math.radians(2.0))
    step = matcher.step(wrong, odometry_covariance(0.1, math.radians(4.0)), scan_at(CORRIDOR, second, rng))
    assert step.registration is not None and step.registration.status == DEGENERATE
    assert abs(step.pose[0] - wrong[0]) < 0.03  # along the corridor: as the odometry said, not the truth
    assert abs(step.pose[0] - second[0]) > 0.07
    assert abs(step.pose[1] - second[1]) < 0.01  # across it and the heading: from the walls
    assert abs(step.pose[2] - second[2]) < math.radians(0.3)
    # and the covariance says so: the travel far less certain than the offset across
    assert step.covariance[0, 0] > 0.03**2
    assert step.covariance[1, 1] < 0.01**2


def test_a_scan_that_fits_nothing_falls_back_to_the_odometry() -> None:
    rng = np.random.default_rng(5)
    matcher = ScanMatcher()
    matcher.step((2.0, 3.0, 0.0), np.zeros((3, 3)), scan_at(ROOM, (2.0, 3.0, 0.0), rng))
    odometry = (2.3, 3.0, 0.0)
    q = odometry_covariance(0.05, math.radians(2.0))
    elsewhere = rng.uniform(-8.0, 8.0, (150, 2))  # points of nothing in that room
    step = matcher.step(odometry, q, elsewhere)
    assert step.registration is not None and step.registration.status == FALLBACK
    assert step.pose == odometry
    np.testing.assert_allclose(step.covariance, q, atol=1e-7)
    assert matcher.counts[FALLBACK] == 1


def test_a_robot_standing_still_does_not_drift() -> None:
    rng = np.random.default_rng(6)
    pose = (4.0, 2.5, -0.4)
    matcher = ScanMatcher()
    q = odometry_covariance(0.002, math.radians(0.1))
    steps = [matcher.step(pose, q, scan_at(ROOM, pose, rng)) for _ in range(40)]
    last = steps[-1].pose
    assert math.hypot(last[0] - pose[0], last[1] - pose[1]) < 0.003
    assert abs(last[2] - pose[2]) < math.radians(0.05)
    assert steps[0].registration is None
    assert all(s.registration is not None and s.registration.status == MATCHED for s in steps[1:])
    # one key scan: the later ones were not far enough from it to be added
    assert 0 < matcher.map.size <= scan_at(ROOM, pose).shape[0]


def test_normals_are_across_a_wall_and_towards_the_laser() -> None:
    ranges = 2.0 / np.cos(np.radians(np.arange(-40.0, 41.0, 1.0)))  # a wall 2 m ahead, x = 2
    points = scan_points(ranges, np.radians(np.arange(-40.0, 41.0, 1.0)), 80.0, ScanMatchParams())
    normals, ok = point_normals(points, ScanMatchParams())
    assert ok[2:-2].all()
    np.testing.assert_allclose(normals[ok], np.tile([-1.0, 0.0], (int(ok.sum()), 1)), atol=1e-9)
    # a corner: the points around it are not flat
    corner = np.array([(1.0, y) for y in np.linspace(-1.0, 0.0, 11)] + [(x, 0.0) for x in np.linspace(1.1, 2.0, 10)])
    _, ok = point_normals(corner, ScanMatchParams())
    assert not ok[10] and ok[3] and ok[17]


def test_scan_points_leave_out_no_echo_and_thin_keeps_one_per_stretch() -> None:
    ranges = np.array([1.0, -1.0, 0.0, 80.0, np.nan, 2.0, 25.0])
    angles = np.zeros(7)
    points = scan_points(ranges, angles, 80.0, ScanMatchParams(usable_range=20.0))
    np.testing.assert_allclose(points, [(1.0, 0.0), (2.0, 0.0)])
    with pytest.raises(ValueError):
        scan_points(ranges, angles[:3], 80.0, ScanMatchParams())
    line = np.column_stack((np.arange(0.0, 1.0, 0.01), np.zeros(100)))
    kept = thin(line, 0.05)
    assert 19 <= kept.shape[0] <= 21 and np.all(np.diff(kept[:, 0]) > 0.04)


def test_the_lever_carries_a_covariance_to_the_laser_and_back() -> None:
    robot = np.array([[4e-4, 1e-5, 2e-6], [1e-5, 3e-4, -1e-6], [2e-6, -1e-6, 1e-4]])
    laser = laser_increment_covariance(robot, (0.3, 0.05), 0.7)
    # a turn moves a laser ahead of the centre sideways: more variance than the robot's centre has
    assert laser[0, 0] + laser[1, 1] > robot[0, 0] + robot[1, 1]
    assert laser[2, 2] == pytest.approx(robot[2, 2])
    np.testing.assert_allclose(robot_increment_covariance(laser, (0.3, 0.05), 0.7), robot, atol=1e-15)
    np.testing.assert_allclose(laser_increment_covariance(robot, (0.0, 0.0), 1.0), robot)


def test_register_checks_its_inputs_and_a_map_needs_points() -> None:
    params = ScanMatchParams()
    empty = LocalPointMap(params)
    points = scan_at(ROOM, (2.0, 3.0, 0.0))
    with pytest.raises(ValueError):
        register(points, empty, (0.0, 0.0), np.eye(3), params)
    with pytest.raises(ValueError):
        register(points, empty, (0.0, 0.0, math.nan), np.eye(3), params)
    assert register(points, empty, (0.0, 0.0, 0.0), np.eye(3), params).status == FALLBACK
    for bad in (dict(pair_distance=0.0), dict(keyframes=0), dict(information_scale=math.inf), dict(min_range=-1.0)):
        with pytest.raises(ValueError):
            ScanMatchParams(**bad)  # type: ignore[arg-type]


@needs_intel
def test_on_the_intel_log_the_matched_odometry_is_far_better_than_the_noisy_one() -> None:
    log = read_carmen(INTEL).head(150)
    only_matching = OfflineParams()
    result = run_offline(log, noise=OdometryNoise(), seed=1, params=only_matching, features=lambda scan: [])
    assert log.reference is not None
    matched = relative_pose_error(result.estimate, log.reference)
    odometry = relative_pose_error(result.odometry, log.reference)
    assert matched.rotation_mean_deg < 0.5 * odometry.rotation_mean_deg
    assert matched.translation_mean < 0.8 * odometry.translation_mean


@needs_intel
def test_on_a_noise_free_chunk_of_the_intel_log_the_slam_stays_on_the_reference() -> None:
    log = read_carmen(INTEL).head(120)
    result = run_offline(log, noise=None)
    assert log.reference is not None
    error = relative_pose_error(result.estimate, log.reference)
    assert error.translation_mean < 0.01
    assert error.rotation_mean_deg < 0.2
