"""The offline runner: the odometry noise model, reading CARMEN logs and recordings, and a short run over the start
of the Intel lab's log."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.slam.metrics import relative_pose_error
from pluto.navigation.slam.offline import (
    OdometryNoise,
    perturb_odometry,
    read_carmen,
    read_log,
    read_recording,
    run_offline,
)
from pluto.record.format import LogError
from pluto.record.writer import LogWriter

RADISH = Path("/work/shared/datasets/radish")
INTEL = RADISH / "intel-corrected.log.gz"
needs_intel = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")


def wander(n: int = 50) -> np.ndarray:
    """A trajectory that drives and turns, θ continuous."""
    k = np.arange(n, dtype=float)
    return np.column_stack((np.cos(0.1 * k) * k * 0.3, np.sin(0.1 * k) * k * 0.3, 0.15 * k))


def test_noise_models_parse() -> None:
    assert OdometryNoise.parse("default") == OdometryNoise()
    assert OdometryNoise.parse(" None ") is None
    assert OdometryNoise.parse("0.1, 0.02,0.1,0.03") == OdometryNoise(0.1, 0.02, 0.1, 0.03)
    for bad in ("", "0.1,0.2", "a,b,c,d", "0.1,0.1,0.1,-1", "0.1,0.1,0.1,nan"):
        with pytest.raises(ValueError):
            OdometryNoise.parse(bad)


def test_the_same_seed_gives_the_same_noise() -> None:
    poses = wander()
    a = perturb_odometry(poses, OdometryNoise(), np.random.default_rng(1))
    b = perturb_odometry(poses, OdometryNoise(), np.random.default_rng(1))
    c = perturb_odometry(poses, OdometryNoise(), np.random.default_rng(2))
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert np.array_equal(a[0], poses[0])  # the same start
    assert np.abs(a - poses).max() > 0.01  # and noise after it


def test_without_noise_the_odometry_is_rebuilt_exactly() -> None:
    poses = wander()
    same = perturb_odometry(poses, OdometryNoise(0.0, 0.0, 0.0, 0.0), np.random.default_rng(1))
    assert np.allclose(same, poses, atol=1e-9)


def test_the_noise_has_the_spread_of_the_model() -> None:
    # a thousand 1 m steps forward with 0.1 rad turns: σ_d = 0.1·1 + 0.2·0.1, σ_θ = 0.05·0.1 + 0.03·1
    n = 1000
    poses = np.column_stack((np.zeros(n), np.zeros(n), 0.1 * np.arange(n)))
    c, s = np.cos(poses[:, 2]), np.sin(poses[:, 2])
    poses[1:, 0] = np.cumsum(c[:-1])
    poses[1:, 1] = np.cumsum(s[:-1])
    noise = OdometryNoise(0.1, 0.2, 0.05, 0.03)
    noisy = perturb_odometry(poses, noise, np.random.default_rng(5))
    d = np.diff(noisy, axis=0)
    travel = np.hypot(d[:, 0], d[:, 1])
    turn = d[:, 2]
    assert np.std(travel) == pytest.approx(0.12, rel=0.1)
    assert np.mean(travel) == pytest.approx(1.0, abs=0.02)
    assert np.std(turn) == pytest.approx(0.035, rel=0.1)
    assert noise.sigmas(1.0, -0.1) == pytest.approx((0.12, 0.035))


def test_the_covariance_told_to_the_filter_is_the_noise_drawn() -> None:
    noise = OdometryNoise(0.1, 0.02, 0.1, 0.05)
    start = np.zeros(3)
    end = np.array([0.8, 0.3, 0.4])
    rng = np.random.default_rng(3)
    samples = np.array([perturb_odometry(np.array([start, end]), noise, rng)[1] for _ in range(4000)])
    empirical = np.cov(samples.T)
    model = noise.covariance(end)
    assert np.allclose(empirical, model, atol=0.1 * np.abs(model).max())


CARMEN_TEXT = """\
# a short CARMEN log
PARAM robot_front_laser_max 50.0 nohost 0
ODOM 0 0 0 0 0 0 1.0 host 1.0
FLASER 4 1.0 1.1 1.2 1.3 0.0 0.0 0.0 0.0 0.0 0.0 1.0 host 1.0
FLASER 4 1.0 1.1 oops 1.3 0.1 0.0 0.0 0.1 0.0 0.0 1.5 host 1.5
FLASER 4 1.0 1.1 1.2 1.3 0.2 0.0 3.1 0.2 0.0 3.1 2.0 host 2.0
FLASER 4 1.0 1.1 1.2 1.3 0.4 0.0 -3.1 0.4 0.0 -3.1 3.0 host 3.0
FLASER 4 1.0 1.1 1.2 1.3 0.5 0.0 0.0 0.5 0.0 0.0 0.5 host 0.5
"""


@pytest.mark.parametrize("packed", [False, True])
def test_a_carmen_log_gives_scans_odometry_and_reference(tmp_path: Path, packed: bool) -> None:
    path = tmp_path / ("small.log.gz" if packed else "small.log")
    if packed:
        with gzip.open(path, "wt") as file:
            file.write(CARMEN_TEXT)
    else:
        path.write_text(CARMEN_TEXT)
    log = read_log(path)
    assert [s.t for s in log.scans] == [1.0, 2.0, 3.0]
    assert len(log.skipped) == 2  # the malformed range and the scan out of time order
    assert "line 5" in log.skipped[0] and "line 8" in log.skipped[1]
    assert log.scans[0].max_range == 50.0 and log.scans[0].angles[0] == pytest.approx(-math.pi / 2)
    assert log.reference is not None
    assert np.allclose(log.odometry[:, 0], [0.0, 0.2, 0.4])
    # the heading is continuous across ±π
    assert log.odometry[2, 2] == pytest.approx(2 * math.pi - 3.1)
    assert log.duration == 2.0
    assert len(log.head(2).scans) == 2


def test_a_file_without_scans_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_text("ODOM 0 0 0 0 0 0 1.0 host 1.0\n")
    with pytest.raises(LogError, match="no front laser scan"):
        read_carmen(path)
    with pytest.raises(LogError, match="cannot read"):
        read_log(tmp_path / "missing.log")


def room_ranges(pose: tuple[float, float, float], angles: np.ndarray) -> np.ndarray:
    """Ranges from ``pose`` to the walls of the box [-5, 5] x [-4, 4]."""
    x, y, theta = pose
    out = np.full(angles.shape, 80.0)
    for k, a in enumerate(angles):
        dx, dy = math.cos(theta + a), math.sin(theta + a)
        hits = []
        for wall, d, p in ((5.0, dx, x), (-5.0, dx, x), (4.0, dy, y), (-4.0, dy, y)):
            if abs(d) > 1e-9 and (wall - p) / d > 0:
                hits.append((wall - p) / d)
        out[k] = min(hits)
    return out


def test_a_recording_gives_laser_poses_from_the_odometry(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    angles = np.radians(np.arange(-90.0, 90.5, 1.0))
    mount = LocalizationParams().laser_mount
    with LogWriter(path) as writer:
        for k in range(21):
            t = 0.1 * k
            robot = (-2.0 + 0.1 * k, 0.5, 0.05 * k)
            writer.add(names.BASE_DRIVE_STATE, msgs.Odometry(stamp=t, x=robot[0], y=robot[1], theta=robot[2]), t)
            writer.add(names.SIM_TRUTH, msgs.Odometry(stamp=t, x=robot[0], y=robot[1], theta=robot[2]), t)
            if 0 < k < 20 and k % 2:
                c, s = math.cos(robot[2]), math.sin(robot[2])
                laser = (robot[0] + c * mount[0], robot[1] + s * mount[0], robot[2])
                ranges = room_ranges(laser, angles)
                scan = msgs.LaserScan(stamp=t, arrival=t, ranges=ranges.tolist(), angles=angles.tolist(), count=181)
                writer.add(names.SICK_SCAN_MM, scan, t)
        writer.add(names.SICK_SCAN_MM, msgs.LaserScan(stamp=2.5, ranges=[1.0], angles=[]), 2.5)
    log = read_recording(path)
    assert len(log.scans) == 10 and len(log.skipped) == 1
    assert log.reference is not None
    k = 3  # the scan at 0.7 s
    theta = 0.05 * 7
    assert log.odometry[k] == pytest.approx(
        [-2.0 + 0.7 + math.cos(theta) * mount[0], 0.5 + math.sin(theta) * mount[0], theta]
    )
    result = run_offline(log, noise=OdometryNoise(), seed=1)
    assert len(result.slam.segments) >= 3  # the room's walls are mapped
    error = relative_pose_error(result.estimate, log.reference)
    assert error.translation_mean < 0.05


@needs_intel
def test_the_start_of_the_intel_log_is_better_with_slam_than_with_odometry() -> None:
    log = read_log(INTEL).head(100)
    assert log.reference is not None
    first = run_offline(log, noise=OdometryNoise(), seed=1)
    again = run_offline(log, noise=OdometryNoise(), seed=1)
    assert np.array_equal(first.odometry, again.odometry) and np.array_equal(first.estimate, again.estimate)
    assert len(first.slam.segments) > 10
    for distance in (None, 5.0):
        slam = relative_pose_error(first.estimate, log.reference, distance)
        odometry = relative_pose_error(first.odometry, log.reference, distance)
        # the walls hold the heading (the translation is not better yet on this part of the log)
        assert slam.rotation_mean_deg < odometry.rotation_mean_deg
    far_slam = relative_pose_error(first.estimate, log.reference, 5.0)
    far_odometry = relative_pose_error(first.odometry, log.reference, 5.0)
    assert far_slam.rotation_mean_deg < 0.5 * far_odometry.rotation_mean_deg
