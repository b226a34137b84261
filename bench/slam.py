"""Offline SLAM on real logs: Pluto's wall SLAM against a pose graph of scan matches optimised by GTSAM.

Both methods see the same data: the Radish "corrected" logs (the Intel lab and Freiburg building 079, CARMEN format,
``/work/shared/datasets/radish`` or ``--data``), whose odometry equals a corrected trajectory, with the odometry's
increments perturbed by the same seeded noise (:class:`pluto.navigation.slam.offline.OdometryNoise`, its defaults,
seed 1), and the MIT Infinite Corridor (long corridors, two large loops; its stamps cannot time it, so it has no real
time factor). Each estimate is compared with the corrected trajectory (:mod:`pluto.navigation.slam.metrics`) by the
relative pose error E = (δ*)⁻¹·δ (Kümmerle et al. 2009; |t - t*| and the turn's difference) over consecutive scans
and over pairs 5 m of travel apart, and by the absolute trajectory error after a rigid alignment; each as its mean,
95th percentile and maximum. Run from the project root (needs the ``bench`` extra: scipy, gtsam):

    .venv/bin/python bench/slam.py                 # the three logs, whole (a few minutes on one core)
    .venv/bin/python bench/slam.py --max-scans 300 # the first 300 scans of each

* ``pluto``: :func:`pluto.navigation.slam.offline.run_offline`, the compressed EKF over walls, one scan at a time,
  moved by the odometry refined by its scan-matching front end (point-to-line ICP on the last key scans,
  :mod:`pluto.navigation.slam.scanmatch`), with its loop-closing back end (keyframes, closures checked by scan
  matching, a pose graph, :mod:`pluto.navigation.slam.loops`); time per scan is the process's CPU time of the scan
  matching, the line extraction, the filter and the back end (which the slam module runs on a thread of its own).
  ``filter`` is the same without the back end. Its cost per scan as the map grows is shown by the mean of each
  fifth of the log and drawn against the scan index (``--plot``).
* ``icp+gtsam``: scan-matching odometry by point-to-point ICP between consecutive scans (scipy's KD-tree, started from
  the noisy odometry's increment, trimmed: the worst 20 % of the pairs are left out), then loop closures: every 5th
  scan is matched with the nearest scan more than 30 scans older within 2 m on the current estimate; a match whose
  inliers lie within 5 cm on average is a constraint. The graph (Pose2 between-factors: scan matches σ = 5 cm, 1°;
  closures the same under a Cauchy kernel) is optimised by GTSAM's Levenberg-Marquardt once at the end. Time per scan
  is the whole of it (matching, closures, optimisation) over the scans.

Then the accuracy targets per log and per seed (``--seeds``, 1, 2 and 3 by default; the table above is the first
seed's): the 5 m relative error's mean and maximum, the absolute trajectory error (RMSE), the walls mapped twice
(:func:`pluto.navigation.slam.mapcheck.parallel_copies`: parallel copies within 10 cm) where loops closed and in the
whole map, the loop closures, and the cost: CPU time per scan (mean, and the worst scan's), the back end's share and
the real-time factor.

Prints its tables; never asserts.
"""

from __future__ import annotations

import os

# one core, as the figures say: a threaded BLAS on a busy machine spends its threads' waiting as CPU time
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from pluto.geometry import wrap_angle  # noqa: E402
from pluto.navigation.slam.metrics import absolute_trajectory_error, relative_pose_error  # noqa: E402
from pluto.navigation.slam.offline import (  # noqa: E402
    OdometryNoise,
    OfflineLog,
    OfflineParams,
    OfflineResult,
    perturb_odometry,
    read_log,
    run_offline,
)

DATA = Path("/work/shared/datasets/radish")
LOGS = ("intel-corrected.log.gz", "freiburg-079-corrected.log.gz", "infinite-corridor-corrected.log.gz")
DISTANCE = 5.0


# -- the baseline ---------------------------------------------------------------------------------------------------


def scan_points(ranges: np.ndarray, angles: np.ndarray, max_range: float, usable: float = 20.0) -> np.ndarray:
    """``(k, 2)`` laser-frame points of the readings below ``usable`` m (and below the no-echo range)."""
    ok = (ranges > 0.05) & (ranges < min(max_range - 0.05, usable))
    r, a = ranges[ok], angles[ok]
    return np.column_stack((r * np.cos(a), r * np.sin(a)))


def transform(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return np.column_stack(
        (c * points[:, 0] - s * points[:, 1] + pose[0], s * points[:, 0] + c * points[:, 1] + pose[1])
    )


def icp(
    tree: object, target: np.ndarray, source: np.ndarray, guess: np.ndarray, iterations: int = 25, keep: float = 0.8
) -> tuple[np.ndarray, float]:
    """The pose of ``source``'s frame in ``target``'s frame (x, y, θ) by trimmed point-to-point ICP, and the mean
    distance of the kept pairs (m)."""
    pose = guess.astype(float).copy()
    error = math.inf
    for _ in range(iterations):
        moved = transform(source, pose)
        dist, idx = tree.query(moved)  # type: ignore[attr-defined]
        cut = np.quantile(dist, keep)
        sel = dist <= cut
        p, q = moved[sel], target[idx[sel]]
        if p.shape[0] < 10:
            return pose, math.inf
        pc, qc = p.mean(axis=0), q.mean(axis=0)
        h = (p - pc).T @ (q - qc)
        turn = math.atan2(h[0, 1] - h[1, 0], h[0, 0] + h[1, 1])
        c, s = math.cos(turn), math.sin(turn)
        shift = qc - np.array([c * pc[0] - s * pc[1], s * pc[0] + c * pc[1]])
        # compose the correction (turn, shift) with the current pose
        x = c * pose[0] - s * pose[1] + shift[0]
        y = s * pose[0] + c * pose[1] + shift[1]
        pose = np.array([x, y, pose[2] + turn])
        error = float(dist[sel].mean())
        if abs(turn) < 1e-5 and math.hypot(*shift) < 1e-4:
            break
    return pose, error


def relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    c, s = math.cos(a[2]), math.sin(a[2])
    dx, dy = b[0] - a[0], b[1] - a[1]
    return np.array([c * dx + s * dy, -s * dx + c * dy, wrap_angle(b[2] - a[2])])


def compose(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    c, s = math.cos(a[2]), math.sin(a[2])
    return np.array([a[0] + c * d[0] - s * d[1], a[1] + s * d[0] + c * d[1], a[2] + d[2]])


def pose_graph(log: OfflineLog, odometry: np.ndarray) -> tuple[np.ndarray, int]:
    """The baseline's trajectory and its number of loop closures."""
    import gtsam
    from scipy.spatial import cKDTree

    points = [scan_points(s.ranges, s.angles, s.max_range) for s in log.scans]
    trees = [cKDTree(p) for p in points]
    n = len(points)
    graph = gtsam.NonlinearFactorGraph()
    values = gtsam.Values()
    sigma = np.array([0.05, 0.05, math.radians(1.0)])
    step_noise = gtsam.noiseModel.Diagonal.Sigmas(sigma)
    loop_noise = gtsam.noiseModel.Robust.Create(
        gtsam.noiseModel.mEstimator.Cauchy.Create(1.0), gtsam.noiseModel.Diagonal.Sigmas(sigma)
    )
    graph.add(gtsam.PriorFactorPose2(0, gtsam.Pose2(*odometry[0]), gtsam.noiseModel.Diagonal.Sigmas(sigma * 0.1)))
    estimate = np.zeros((n, 3))
    estimate[0] = odometry[0]
    values.insert(0, gtsam.Pose2(*odometry[0]))
    for k in range(1, n):
        guess = relative(odometry[k - 1], odometry[k])
        delta, _ = icp(trees[k - 1], points[k - 1], points[k], guess)
        estimate[k] = compose(estimate[k - 1], delta)
        graph.add(gtsam.BetweenFactorPose2(k - 1, k, gtsam.Pose2(*delta), step_noise))
        values.insert(k, gtsam.Pose2(*estimate[k]))
    closures = 0
    for k in range(35, n, 5):
        older = estimate[: k - 30]
        d = np.hypot(older[:, 0] - estimate[k, 0], older[:, 1] - estimate[k, 1])
        j = int(np.argmin(d))
        if d[j] > 2.0:
            continue
        delta, error = icp(trees[j], points[j], points[k], relative(estimate[j], estimate[k]), iterations=40)
        if error < 0.05:
            graph.add(gtsam.BetweenFactorPose2(j, k, gtsam.Pose2(*delta), loop_noise))
            closures += 1
    result = gtsam.LevenbergMarquardtOptimizer(graph, values, gtsam.LevenbergMarquardtParams()).optimize()
    out = np.array([[result.atPose2(k).x(), result.atPose2(k).y(), result.atPose2(k).theta()] for k in range(n)])
    out[:, 2] = np.unwrap(out[:, 2])
    return out, closures


# -- the table ------------------------------------------------------------------------------------------------------


def row(name: str, method: str, estimate: np.ndarray, reference: np.ndarray, per_scan: float, note: str = "") -> str:
    near = relative_pose_error(estimate, reference)
    far = relative_pose_error(estimate, reference, DISTANCE)
    ate = absolute_trajectory_error(estimate, reference)

    def three(values: tuple[float, float, float], digits: int) -> str:
        return "/".join(f"{v:.{digits}f}" for v in values)

    return (
        f"{name:<10} {method:<10} "
        f"{three((near.translation_mean, near.translation_p95, near.translation_max), 3):>17} "
        f"{three((near.rotation_mean_deg, near.rotation_p95_deg, near.rotation_max_deg), 2):>15}  "
        f"{three((far.translation_mean, far.translation_p95, far.translation_max), 3):>17} "
        f"{three((far.rotation_mean_deg, far.rotation_p95_deg, far.rotation_max_deg), 2):>16}  "
        f"{ate.rmse:6.3f} {ate.translation_summary.max:6.3f}  {1000 * per_scan:7.1f}  {note}"
    )


def target_row(name: str, seed: int, result: OfflineResult) -> str:
    """One line of the targets' table (see the module docstring)."""
    reference = result.log.reference
    assert reference is not None
    far = relative_pose_error(result.estimate, reference, DISTANCE)
    ate = absolute_trajectory_error(result.estimate, reference)
    n = max(len(result.log.scans), 1)
    copies = f"{len(result.wall_copies())} ({len(result.wall_copies(where_loops_closed=False))})"
    closures = 0 if result.search is None else result.search.accepted
    factor = result.real_time_factor
    timing = "untimed" if factor is None else f"{factor:.0f}x"
    return (
        f"{name:<10} {seed:>4}  {far.translation_mean:8.4f} {far.translation_max:6.3f}  {ate.rmse:6.3f}  "
        f"{copies:>10}  {closures:>8}  {1000 * result.cpu_time / n:7.2f} {1000 * float(result.scan_times.max()):6.1f} "
        f"{1000 * float(result.backend_times.sum()) / n:6.2f} {1000 * float(result.backend_times.max()):6.1f}  "
        f"{timing:>9}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the Radish logs")
    parser.add_argument("--max-scans", type=int, help="the first N scans of each log")
    parser.add_argument("--seed", type=int, default=1, help="the seed of the comparison table")
    parser.add_argument(
        "--seeds", default="1,2,3", help="the seeds of the targets' table, comma-separated ('' for none)"
    )
    parser.add_argument("--no-baseline", action="store_true", help="leave the icp+gtsam baseline out")
    parser.add_argument("--plot", type=Path, default=Path("bench-slam-cost.png"), help="cost per scan picture")
    args = parser.parse_args()
    seeds = [int(v) for v in args.seeds.split(",") if v.strip()]
    noise = OdometryNoise()
    lines = []
    targets = []
    costs: dict[str, np.ndarray] = {}
    near: dict[str, np.ndarray] = {}
    growth = []
    for file in LOGS:
        log = read_log(args.data / file)
        if args.max_scans:
            log = log.head(args.max_scans)
        assert log.reference is not None
        name = file.split("-")[0]
        result = run_offline(log, noise=noise, seed=args.seed)
        n = len(log.scans)
        for seed in seeds:
            run = result if seed == args.seed else run_offline(log, noise=noise, seed=seed)
            targets.append(target_row(name, seed, run))
        costs[name] = result.scan_times
        near[name] = result.candidates
        fifth = max(n // 5, 1)
        cut = [slice(k * fifth, (k + 1) * fifth if k < 4 else n) for k in range(5)]
        slam_filter = result.slam.filter
        factor = result.real_time_factor
        timing = "no real-time factor: its stamps cannot time it" if factor is None else f"{factor:.0f}x real time"
        growth.append(f"{name} ({timing}), in each fifth of the log:")
        growth.append("  ms a scan    " + " ".join(f"{1000 * result.scan_times[c].mean():6.2f}" for c in cut))
        growth.append("  walls near   " + " ".join(f"{result.candidates[c].mean():6.1f}" for c in cut))
        growth.append("  local area   " + " ".join(f"{result.area_sizes[c].mean():6.0f}" for c in cut))
        growth.append(
            f"  (entries of the local state; the whole state has {3 + 2 * len(slam_filter)} at the end, "
            f"{result.slam.segments.active_count} walls on the map)"
        )
        span = "untimed" if log.duration is None else f"{log.duration:.0f} s"
        lines.append(row(name, "odometry", result.odometry, log.reference, 0.0, f"{n} scans, {span}"))
        closures = 0 if result.search is None else result.search.accepted
        lines.append(
            row(name, "pluto", result.estimate, log.reference, result.cpu_time / n, f"{closures} loop closures")
        )
        alone = run_offline(log, noise=noise, seed=args.seed, params=OfflineParams(loops=None))
        lines.append(row(name, "filter", alone.estimate, log.reference, alone.cpu_time / n, "no loop closing"))
        if not args.no_baseline:
            odometry = perturb_odometry(log.odometry, noise, np.random.default_rng(args.seed))
            begin = time.process_time()
            graph, closures = pose_graph(log, odometry)
            spent = time.process_time() - begin
            lines.append(row(name, "icp+gtsam", graph, log.reference, spent / n, f"{closures} loop closures"))
    print(
        f"relative pose error E = (δ*)⁻¹·δ over consecutive scans and over pairs {DISTANCE:g} m apart, m and deg, "
        "mean/95th percentile/max;"
    )
    print("absolute trajectory error after a rigid alignment (least squares, no scale), m: RMSE and max;")
    model = f"{noise.a1:g},{noise.a2:g},{noise.a3:g},{noise.a4:.4g}"
    print(f"odometry noise a1..a4 = {model}, seed {args.seed}; CPU time per scan on one core")
    print(
        f"{'log':<10} {'method':<10} {'consecutive: m':>17} {'deg':>15}  {f'{DISTANCE:g} m apart: m':>17} "
        f"{'deg':>16}  {'ATE':>6} {'max':>6}  {'ms/scan':>7}"
    )
    for line in lines:
        print(line)
    if targets:
        print(
            f"Pluto per seed: {DISTANCE:g} m relative error (mean, max), ATE (RMSE), walls mapped twice where loops "
            "closed (in the whole map), closures; CPU ms per scan (mean, the worst scan, the back end's share and its "
            "longest search), real time"
        )
        print(
            f"{'log':<10} {'seed':>4}  {'RPE mean':>8} {'max':>6}  {'ATE':>6}  {'copies':>10}  {'closures':>8}  "
            f"{'ms/scan':>7} {'worst':>6} {'back':>6} {'worst':>6}  {'real time':>9}"
        )
        for line in targets:
            print(line)
    print("Pluto's cost per scan as the map grows:")
    for line in growth:
        print("  " + line)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no picture: matplotlib is not installed")
        return
    fig, axes = plt.subplots(len(costs), 1, figsize=(9, 3 * len(costs)), squeeze=False)
    for ax, (name, times) in zip(axes[:, 0], costs.items(), strict=True):
        ax.plot(1000 * times, lw=0.5, color="tab:blue", label="per scan")
        window = min(50, len(times))
        smooth = np.convolve(times, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(times)), 1000 * smooth, color="tab:red", label=f"mean of {window}")
        ax.set_title(f"{name}: Pluto's CPU time per scan")
        ax.set_xlabel("scan")
        ax.set_ylabel("ms")
        walls = ax.twinx()
        mean_near = np.convolve(near[name], np.ones(window) / window, mode="valid")
        walls.plot(np.arange(window - 1, len(times)), mean_near, color="tab:green", lw=0.8)
        walls.set_ylabel("walls near the laser (mean of the same)", color="tab:green", fontsize="small")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    print(f"cost per scan vs scan index saved to {args.plot.absolute()}")


if __name__ == "__main__":
    main()
