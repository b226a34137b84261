"""The reference AMCL of the benchmarks (bench/amcl.py): its pieces, and tracking in a small simulated room.

The room is 8 m x 6 m with a wall stub, a shelf and a box, so no two poses see the same scan. Scans come from the
simulator's laser (361 beams over 180°, 1 cm noise, 0.25 m ahead of the robot's centre); odometry overstates every
step by 3% and adds 3% random error to each step's length and turn. Every run is seeded.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pluto.geometry import Pose2D, compose, wrap_angle
from pluto.hardware.sick.sim import LaserParams, SimLaser
from pluto.sim.noise import NoiseProfile
from pluto.sim.raycast import RayCaster
from pluto.sim.world import World, parse_world
from tests.bench.loader import load_bench

amcl: Any = load_bench("amcl")

ROOM: World = parse_world(
    """<world name="room" version="1">
      <walls>
        <wall x1="0" y1="0" x2="8" y2="0"/> <wall x1="8" y1="0" x2="8" y2="6"/>
        <wall x1="8" y1="6" x2="0" y2="6"/> <wall x1="0" y1="6" x2="0" y2="0"/>
        <wall x1="5" y1="0" x2="5" y2="2" name="stub"/>
        <wall x1="0" y1="4.2" x2="1.2" y2="4.2" name="shelf"/>
      </walls>
      <obstacles>
        <polygon name="box">
          <point x="6.5" y="4.2"/> <point x="7.4" y="4.2"/> <point x="7.4" y="5"/> <point x="6.5" y="5"/>
        </polygon>
      </obstacles>
    </world>"""
)
LASER = LaserParams()
ANGLES = LASER.angles()
START: Pose2D = (3.0, 1.8, 0.0)
STEP = 0.1  # m per scan along a circle of 1.2 m about (3, 3)
RADIUS = 1.2
XY_TOLERANCE = 0.15
THETA_TOLERANCE = math.radians(5.0)
ODOM_BIAS = 1.03  # odometry overstates every step by 3%, like a worn wheel
ODOM_NOISE = 0.03  # and each step's length and turn have 3% random error
MATCHED_ODOMETRY = {f"alpha{i}": 0.05 for i in range(1, 5)}
"""Odometry noise parameters nearer this odometry's error than Nav2's (0.2, which keeps the cloud wide)."""
NAV2_INITIAL_COV = np.diag([0.5**2, 0.5**2, (math.pi / 12) ** 2])


def make_amcl(seed: int = 1, **params: Any) -> Any:
    p = amcl.AmclParams(laser_pose=(LASER.mount_x, 0.0, 0.0), **params)
    return amcl.Amcl(ROOM.segments(), seed=seed, params=p)


def drive(filt: Any, scans: int, seed: int) -> tuple[list[float], list[float], list[int]]:
    """Drive the circle from START for ``scans`` scans, updating ``filt``; position and heading errors (m, rad)
    and particle counts after each update."""
    rng = np.random.default_rng(seed)
    laser = SimLaser(RayCaster(ROOM.segments()), LASER, NoiseProfile(laser_range_std=0.01), rng=rng)
    truth = odom = START
    xy_errors: list[float] = []
    theta_errors: list[float] = []
    counts: list[int] = []
    for k in range(scans):
        if k:
            step: Pose2D = (STEP, 0.0, STEP / RADIUS)
            truth = compose(truth, step)
            scale, turn = ODOM_BIAS + ODOM_NOISE * rng.standard_normal(2)
            odom = compose(odom, (step[0] * scale, 0.0, step[2] * turn))
        ranges = laser.scan(0.0, truth)
        x, y, theta, cov = filt.update(odom, ranges, float(ANGLES[0]), float(ANGLES[1] - ANGLES[0]), LASER.max_range)
        assert cov.shape == (3, 3) and np.all(np.isfinite(cov))
        xy_errors.append(math.hypot(x - truth[0], y - truth[1]))
        theta_errors.append(abs(wrap_angle(theta - truth[2])))
        counts.append(filt.particle_count)
    return xy_errors, theta_errors, counts


# -- tracking and convergence ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_tracks_the_robot_from_a_known_start(seed: int) -> None:
    filt = make_amcl(seed)
    filt.init_pose(*START, np.diag([0.05**2, 0.05**2, 0.02**2]))
    xy_errors, theta_errors, _ = drive(filt, 90, seed)  # more than one lap
    assert max(xy_errors) < XY_TOLERANCE
    assert max(theta_errors) < THETA_TOLERANCE
    assert filt.filter_runs > 20


def test_without_scans_odometry_alone_drifts_beyond_the_tolerance() -> None:
    """The tracking test above means something: the same drive with the filter never correcting drifts away."""
    filt = make_amcl(1, update_min_d=1e9, update_min_a=1e9)  # only the first scan runs the filter
    filt.init_pose(*START, np.zeros((3, 3)))
    xy_errors, theta_errors, _ = drive(filt, 90, 1)
    assert max(xy_errors) > XY_TOLERANCE or max(theta_errors) > THETA_TOLERANCE


def test_converges_from_a_pose_one_metre_off() -> None:
    filt = make_amcl(3, **MATCHED_ODOMETRY)
    wrong = (START[0] + 0.8, START[1] + 0.6, START[2])
    filt.init_pose(*wrong, NAV2_INITIAL_COV)
    x, y, _, _ = filt.estimate()
    assert math.hypot(x - START[0], y - START[1]) > 0.8
    xy_errors, theta_errors, _ = drive(filt, 90, 3)
    assert xy_errors[0] > 0.5  # one scan does not settle it
    assert max(xy_errors[-30:]) < XY_TOLERANCE
    assert max(theta_errors[-30:]) < THETA_TOLERANCE


def test_particle_count_shrinks_as_the_filter_converges() -> None:
    filt = make_amcl(4, **MATCHED_ODOMETRY)
    filt.init_pose(START[0] + 0.3, START[1] - 0.2, 0.1, np.diag([1.0, 1.0, 0.3**2]))
    assert filt.particle_count == 2000
    xy_errors, _, counts = drive(filt, 60, 4)
    assert counts[0] > 1500  # after the first resampling the cloud is still spread over many bins
    assert max(counts[-10:]) < 1000
    assert xy_errors[-1] < XY_TOLERANCE


@pytest.mark.parametrize("recovery", [True, False])
def test_recovery_adds_random_particles_when_scans_stop_fitting(recovery: bool) -> None:
    rates = {} if recovery else {"recovery_alpha_slow": 0.0, "recovery_alpha_fast": 0.0}
    filt = make_amcl(6, **MATCHED_ODOMETRY, **rates)
    filt.init_pose(*START, np.diag([0.01, 0.01, 0.001]))
    laser = SimLaser(RayCaster(ROOM.segments()), LASER)
    args = (float(ANGLES[0]), float(ANGLES[1] - ANGLES[0]), LASER.max_range)
    for k in range(6):  # scans that fit, 0.3 m apart along x
        filt.update((0.3 * k, 0.0, 0.0), laser.scan(0.0, (START[0] + 0.3 * k, START[1], 0.0)), *args)
    x, y, _, _ = filt.estimate()
    assert math.hypot(x - START[0] - 1.5, y - START[1]) < XY_TOLERANCE
    # Kidnapped: the next scan is taken elsewhere, facing elsewhere.
    filt.update((1.8, 0.0, 0.0), laser.scan(0.0, (6.5, 2.5, math.pi / 2)), *args)
    far = np.hypot(filt.particles[:, 0] - x, filt.particles[:, 1] - y) > 1.5
    if recovery:
        assert far.sum() > 10
    else:
        assert far.sum() == 0


# -- the pieces ------------------------------------------------------------------------------------------------------


def test_motion_model_without_noise_follows_odometry_forwards_and_backwards() -> None:
    rng = np.random.default_rng(0)
    particles = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, math.pi / 2]])
    for step in [(0.5, 0.1, 0.3), (-0.4, 0.0, -0.2), (0.0, 0.0, 1.0)]:
        odom_from: Pose2D = (2.0, -1.0, 0.7)
        odom_to = compose(odom_from, step)
        moved = amcl.sample_motion_model_odometry(particles, odom_from, odom_to, (0.0, 0.0, 0.0, 0.0), rng)
        for before, after in zip(particles, moved, strict=True):
            expected = compose(tuple(before), step)
            assert after[:2] == pytest.approx(expected[:2], abs=1e-9)
            assert wrap_angle(after[2] - expected[2]) == pytest.approx(0.0, abs=1e-9)


def test_motion_model_noise_grows_with_the_alphas_and_is_unbiased() -> None:
    rng = np.random.default_rng(0)
    particles = np.zeros((20000, 3))
    spreads = []
    for alpha in (0.05, 0.2):
        moved = amcl.sample_motion_model_odometry(particles, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (alpha,) * 4, rng)
        distance = np.hypot(moved[:, 0], moved[:, 1])
        # the step's length has std sqrt(α3 · 1²); the heading, two turns each of std sqrt(α2 · 1²)
        assert distance.mean() == pytest.approx(1.0, abs=0.01)
        assert distance.std() == pytest.approx(math.sqrt(alpha), rel=0.1)
        assert moved[:, 1].mean() == pytest.approx(0.0, abs=0.02)
        assert moved[:, 2].mean() == pytest.approx(0.0, abs=0.02)
        assert moved[:, 2].std() == pytest.approx(math.sqrt(2 * alpha), rel=0.1)
        spreads.append(moved[:, 1].std())
    assert spreads[1] > 1.5 * spreads[0]


def test_kld_bound() -> None:
    # k = 2: (1 / 0.1) (1 - 2/9 + sqrt(2/9) 0.99)³ = 19.27..., so 20 samples before clipping
    assert amcl.kld_sample_count(2, 0.05, 0.99, 1, 100000) == 20
    assert amcl.kld_sample_count(2, 0.05, 0.99, 500, 2000) == 500
    assert amcl.kld_sample_count(1, 0.05, 0.99, 500, 2000) == 500
    counts = amcl.kld_sample_count(np.arange(1, 400), 0.05, 0.99, 1, 100000)
    assert np.all(np.diff(counts) >= 0) and counts[-1] > 3000
    assert amcl.kld_sample_count(400, 0.05, 0.99, 500, 2000) == 2000


def test_low_variance_resampling_copies_in_proportion_to_the_weights() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        indices = amcl.low_variance_resample(np.array([0.5, 0.25, 0.25, 0.0]), 4, rng)
        assert np.bincount(indices, minlength=4).tolist() == [2, 1, 1, 0]
    indices = amcl.low_variance_resample(np.array([1.0, 2.0, 7.0]), 1000, rng)
    assert np.bincount(indices, minlength=3).tolist() == pytest.approx([100, 200, 700], abs=1)


def test_beams_are_subsampled_as_nav2_does() -> None:
    used = amcl.beam_subsample(361, 60)
    assert used[0] == 0 and used[-1] == 360 and len(used) == 61
    assert amcl.beam_subsample(30, 60).tolist() == list(range(30))


def test_distance_field_measures_to_the_nearest_wall_and_caps() -> None:
    field = amcl.LikelihoodField(
        [[0.0, 0.0, 4.0, 0.0]], [[2.0, 3.0, 0.5]], resolution=0.05, max_dist=2.0, z_hit=0.5, sigma_hit=0.2
    )
    x = np.array([2.0, 5.0, 2.0, 2.0, 2.0, -50.0])
    y = np.array([1.0, 0.0, 2.3, 3.0, 1.6, 0.0])
    # cell centres are within half a cell diagonal of the points
    tolerance = 0.05 * math.sqrt(0.5)
    expected = [1.0, 1.0, 0.2, 0.0, min(1.6, 0.9), 2.0]
    assert field.distance_at(x, y) == pytest.approx(expected, abs=tolerance)
    hit = field.hit_term(np.array([2.0, -50.0]), np.array([0.0, 0.0]))
    assert hit[0] == pytest.approx(0.5, rel=0.01) and hit[1] == pytest.approx(0.5 * math.exp(-50.0))


def test_clusters_separate_distant_clouds_and_the_estimate_takes_the_heavier() -> None:
    rng = np.random.default_rng(0)
    a = np.column_stack((rng.normal(1.0, 0.1, 300), rng.normal(1.0, 0.1, 300), rng.normal(0.0, 0.02, 300)))
    b = np.column_stack((rng.normal(5.0, 0.1, 200), rng.normal(3.0, 0.1, 200), rng.normal(3.1, 0.02, 200)))
    labels = amcl.cluster_labels(np.vstack((a, b)), 0.5, math.radians(10))
    assert len(set(labels[:300].tolist())) == 1 and len(set(labels[300:].tolist())) == 1
    assert labels[0] != labels[300]
    mean, cov = amcl.weighted_pose_stats(b, np.ones(200))
    assert mean == pytest.approx([5.0, 3.0, 3.1], abs=0.03)
    assert math.sqrt(cov[0, 0]) == pytest.approx(0.1, rel=0.2)
    assert math.sqrt(cov[2, 2]) == pytest.approx(0.02, rel=0.2)  # across ±π: wrapped, not 6 rad


def test_small_motions_do_not_run_the_filter_and_the_pose_follows_odometry() -> None:
    filt = make_amcl(5)
    filt.init_pose(*START, np.diag([0.01, 0.01, 0.001]))
    laser = SimLaser(RayCaster(ROOM.segments()), LASER)
    args = (float(ANGLES[0]), float(ANGLES[1] - ANGLES[0]), LASER.max_range)
    x0, y0, th0, _ = filt.update((0.0, 0.0, 0.0), laser.scan(0.0, START), *args)
    assert filt.filter_runs == 1
    before = filt.particles
    x, y, th, _ = filt.update((0.2, 0.0, 0.1), laser.scan(0.0, START), *args)
    assert filt.filter_runs == 1
    assert np.array_equal(filt.particles, before)
    assert (x, y, th) == pytest.approx(compose((x0, y0, th0), (0.2, 0.0, 0.1)))
    filt.update((0.3, 0.0, 0.1), laser.scan(0.0, START), *args)
    assert filt.filter_runs == 2


def test_update_before_init_and_bad_parameters_are_refused() -> None:
    filt = make_amcl()
    with pytest.raises(RuntimeError):
        filt.update((0.0, 0.0, 0.0), np.ones(361), -1.0, 0.01, 80.0)
    with pytest.raises(ValueError):
        amcl.AmclParams(min_particles=600, max_particles=500)
    with pytest.raises(ValueError):
        amcl.AmclParams(max_beams=1)
    with pytest.raises(ValueError):
        filt.init_pose(0.0, 0.0, 0.0, -np.eye(3))
