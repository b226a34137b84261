"""The offline runner: the odometry noise model, reading CARMEN logs and recordings, and a short run over the start
of the Intel lab's log."""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.slam.metrics import relative_pose_error
from pluto.navigation.slam.offline import (
    OdometryNoise,
    OfflineParams,
    perturb_odometry,
    read_carmen,
    read_log,
    read_recording,
    read_relations,
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
FLASER 4 1.0 1.1 1.2 1.3 0.5 0.0 0.0 0.5 0.0 0.0 3.5 host 3.5
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
    assert [s.t for s in log.scans] == [1.0, 2.0, 3.0, 3.5]
    assert len(log.skipped) == 1 and "line 5" in log.skipped[0]  # the malformed range
    assert log.scans[0].max_range == 50.0 and log.scans[0].angles[0] == pytest.approx(-math.pi / 2)
    assert log.reference is not None
    assert np.allclose(log.odometry[:, 0], [0.0, 0.2, 0.4, 0.5])
    # the heading is continuous across ±π
    assert log.odometry[2, 2] == pytest.approx(2 * math.pi - 3.1)
    assert log.duration == 2.5 and not log.notes and not log.untimed
    assert len(log.head(2).scans) == 2 and log.head(2).duration == 1.0


def test_a_file_without_scans_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_text("ODOM 0 0 0 0 0 0 1.0 host 1.0\n")
    with pytest.raises(LogError, match="no front laser scan"):
        read_carmen(path)
    with pytest.raises(LogError, match="cannot read"):
        read_log(tmp_path / "missing.log")


def flaser_at(t: float, x: float, theta: float = 0.0) -> str:
    """An FLASER line of 4 beams stamped ``t``, the laser and the odometry at (x, 0, θ)."""
    return f"FLASER 4 1.0 1.1 1.2 1.3 {x} 0 {theta} {x} 0 {theta} {t} host {t}\n"


def test_a_log_stamped_all_zero_is_read_in_the_files_order_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "unstamped.log"
    path.write_text("".join(flaser_at(0.0, 0.1 * k) for k in range(30)))
    log = read_carmen(path)
    assert len(log.scans) == 30 and not log.skipped
    assert np.allclose(log.odometry[:, 0], 0.1 * np.arange(30))  # the file's order: each line its own odometry
    assert "30 of its 30 scans are stamped 0 or less" in log.untimed
    assert len(log.notes) == 1 and "cannot time the log" in log.notes[0] and "file's order" in log.notes[0]
    assert log.duration is None and log.head(5).duration is None


@pytest.mark.parametrize(
    "stamps",
    [
        [4.29497e09] * 30,  # constant
        [-0.4, -0.9, -1.3] + [4.29497e09] * 27,  # a few negative, the rest cut to six digits (the Infinite Corridor)
        [1.23457e09 + 10.0 * (k // 8) for k in range(30)],  # cut to six digits: 8 scans share each stamp
    ],
)
def test_a_log_whose_stamps_cannot_time_it_has_no_duration_nor_real_time_factor(
    tmp_path: Path, stamps: list[float]
) -> None:
    path = tmp_path / "cut.log"
    path.write_text("".join(flaser_at(t, 0.1 * k) for k, t in enumerate(stamps)))
    log = read_carmen(path)
    assert len(log.scans) == 30 and np.allclose(log.odometry[:, 0], 0.1 * np.arange(30))
    assert "do not go forward" in log.untimed and len(log.notes) == 1
    assert log.duration is None
    result = run_offline(log, noise=None, features=lambda scan: [], params=OfflineParams(scan_match=None))
    assert result.real_time_factor is None


def test_scans_stamped_a_little_before_the_one_before_keep_the_files_order(tmp_path: Path) -> None:
    # as in the Intel log: a scan stamped 0.1 s before the one before it, whose pose follows on in the file
    stamps = [1.0 + 0.5 * k for k in range(20)]
    stamps[10] = stamps[9] - 0.1
    path = tmp_path / "jitter.log"
    path.write_text("".join(flaser_at(t, 0.1 * k) for k, t in enumerate(stamps)))
    log = read_carmen(path)
    assert len(log.scans) == 20 and not log.skipped and not log.untimed
    assert np.allclose(log.odometry[:, 0], 0.1 * np.arange(20))
    assert (
        len(log.notes) == 1
        and "1 FLASER scans are stamped before the scan before them (by up to 0.1 s)" in (log.notes[0])
    )
    assert log.duration == pytest.approx(9.5)


def robotlaser_at(t: float, x: float, kind: str = "ROBOTLASER1") -> str:
    """A ROBOTLASER line: 3 beams from -1 rad every 0.5 rad, 30 m; the laser 0.2 m ahead of the robot at (x, 0, 0)."""
    return f"{kind} 0 -1.0 1.0 0.5 30.0 0.01 0 3 1 2 3 0 {x + 0.2} 0 0 {x} 0 0 0.3 0 0.5 0.2 0 {t} host {t}\n"


def test_a_log_of_robotlaser_lines(tmp_path: Path) -> None:
    path = tmp_path / "robot.log"
    text = "".join(robotlaser_at(1.0 + k, 0.5 * k) for k in range(5)) + robotlaser_at(9.0, 7.0, "ROBOTLASER2")
    path.write_text(text)
    log = read_log(path)
    assert len(log.scans) == 5 and log.duration == 4.0  # the rear laser is not the front one
    assert log.scans[0].angles == pytest.approx([-1.0, -0.5, 0.0]) and log.scans[0].max_range == 30.0
    assert np.allclose(log.odometry[:, 0], 0.5 * np.arange(5))
    assert log.reference is not None and np.allclose(log.reference[:, 0], 0.5 * np.arange(5) + 0.2)
    # beside FLASER lines, the FLASER lines are the front laser and the others are counted
    path.write_text(text + flaser_at(10.0, 1.0) + flaser_at(11.0, 1.1))
    both = read_log(path)
    assert len(both.scans) == 2 and both.notes == [
        "5 ROBOTLASER1 lines left out: the FLASER lines are the front laser's scans"
    ]


def rawlaser_at(t: float) -> str:
    return f"RAWLASER1 2 -1.0 1.0 0.5 5.6 0.01 0 3 1 2 3 0 {t} host {t}\n"


def odom_at(t: float, x: float, theta: float = 0.0) -> str:
    return f"ODOM {x} 0 {theta} 0 0 0 {t} host {t}\n"


def test_a_log_of_rawlaser_lines_takes_the_odometry_of_the_odom_lines(tmp_path: Path) -> None:
    path = tmp_path / "raw.log"
    lines = [rawlaser_at(0.5)]  # before any odometry
    for k in range(10):
        lines.append(odom_at(1.0 + k, 1.0 * k, 0.1 * k))
        lines.append(rawlaser_at(1.25 + k))
    lines.append("RAWLASER2 2 -1.0 1.0 0.5 5.6 0.01 0 2 1 2 0 3.0 host 3.0\n")  # another laser
    path.write_text("".join(lines))
    log = read_log(path)
    # timed: the odometry at each scan's stamp, between the ODOM lines around it (the last has none after it)
    assert len(log.scans) == 9 and len(log.skipped) == 2 and "no odometry" in log.skipped[0]
    assert log.scans[0].t == 1.25 and log.scans[0].max_range == 5.6
    assert log.odometry[0] == pytest.approx([0.25, 0.0, 0.025]) and log.reference is None
    # untimed: the last ODOM line before each scan in the file
    stamped_zero = "".join(odom_at(0.0, 1.0 * k) + rawlaser_at(0.0) for k in range(10))
    path.write_text(rawlaser_at(0.0) + stamped_zero)
    untimed = read_log(path)
    assert untimed.untimed and len(untimed.scans) == 10 and len(untimed.skipped) == 1
    assert np.allclose(untimed.odometry[:, 0], np.arange(10.0))
    path.write_text(rawlaser_at(1.0))
    with pytest.raises(LogError, match="no ODOM line"):
        read_log(path)


def test_a_relations_file_is_read_and_a_bad_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.relations"
    path.write_text("1.0 2.0 0.5 0 0 0 0 0.1\n2.0 3.0 0.5 0 0 0 0 0.1\nbad line\n")
    relations = read_relations(path)
    assert len(relations) == 2 and relations.skipped == ["line 3: 2 values, expected 8 (t1 t2 x y z roll pitch yaw)"]
    path.write_text("bad line\n")
    with pytest.raises(LogError, match=r"holds no relation.*line 1: 2 values"):
        read_relations(path)
    with pytest.raises(LogError, match="cannot read"):
        read_relations(tmp_path / "none.relations")


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


KERNELS_IN_THE_LOOP = """
import sys
import numba
from pluto.navigation.pose.features import extract_lines
from pluto.navigation.slam.offline import OdometryNoise, read_log, run_offline

def signatures():
    return {
        f"{v.__module__}.{v.py_func.__name__}": len(v.signatures)
        for name, module in list(sys.modules.items()) if name.startswith("pluto.") and module is not None
        for v in vars(module).values() if isinstance(v, numba.core.dispatcher.Dispatcher)
    }

before = []
def features(scan):
    lines = extract_lines(scan.ranges, scan.angles, max_range=scan.max_range, range_sigma=0.02)
    if not before:  # the run's call before its timed loop
        before.append(signatures())
    return lines

log = read_log(sys.argv[1]).head(40)
run_offline(log, noise=OdometryNoise(), seed=1, features=features)
after = signatures()
print("loaded in the timed loop:", ", ".join(sorted(k for k, v in after.items() if v != before[0].get(k, 0))) or "none")
"""


@needs_intel
@pytest.mark.timeout(600)
def test_every_kernel_is_loaded_before_the_timed_loop() -> None:
    """In a fresh interpreter, where nothing has loaded the compiled kernels yet: the run loads (or compiles) every
    kernel its scans call before it starts the clock, so no scan's processing time holds numba's loading (half a
    second) or compiling (seconds, after a fresh install). The features callback delegates to the line extractor and
    notes the kernels the process holds when the run calls it before the loop."""
    done = subprocess.run(
        [sys.executable, "-c", KERNELS_IN_THE_LOOP, str(INTEL)], capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "loaded in the timed loop: none", done.stdout
