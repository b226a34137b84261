"""Pose accuracy and CPU on real logs: Pluto's pose module beside a particle filter (AMCL), measured in one run.

The real-log half of ``bench/pose.py`` (which runs it after its simulated worlds; ``--logs`` runs this half alone);
also runnable by itself from the project root:

    .venv/bin/python bench/pose_logs.py                    # the three Radish logs (a few minutes)
    .venv/bin/python bench/pose_logs.py --logs intel       # one of them
    .venv/bin/python bench/pose_logs.py --seed 2           # another draw of the odometry noise
    .venv/bin/python bench/pose_logs.py --scans 300        # the first 300 scans of each

Data: the "corrected" Radish logs in ``/work/shared/datasets/radish`` (``--datasets``): the Intel lab, Freiburg
building 079 and MIT's Infinite Corridor, read by ``pluto slam offline``'s reader. Their odometry is the corrected
trajectory itself, so it is perturbed with ``pluto slam offline``'s seeded noise model (5 % of the travel and of the
turn, 1 cm per radian, 1° per metre: :class:`~pluto.navigation.slam.offline.OdometryNoise`); every method gets the
same noisy odometry and is judged against the log's corrected poses (a SLAM run's trajectory, not ground truth).

Per log, in one run:

1. ``SLAM``: ``pluto slam offline``'s run (:func:`~pluto.navigation.slam.offline.run_offline`) over the log; its map is
   saved as ``pluto slam offline`` saves it and loaded back as the pose module loads a map file. Its own 5 m error is
   the first target.
2. ``Pluto pose``: ``pluto pose offline``'s run (:func:`~pluto.navigation.pose.offline.run_pose_offline`: the pose
   module's per-scan code, its default parameters, the filter told the noise model) on that map, from the log's
   first pose.
3. ``AMCL`` (``bench/amcl.py``, Nav2's algorithm) on the same map's walls, with Nav2's defaults and with its odometry
   alphas set to the noise model's variances (a Nav2 user's tuning to the odometry: α1 = a3², α2 = a4², α3 = a1²,
   α4 = a2²); the same odometry, scans and start, its initial covariance the pose module's. A scan that does not
   pass its update thresholds returns the last estimate moved by the odometry, as a Nav2 user reads it.
4. ``odometry``: the noisy odometry itself.

Figures: the relative pose error over pairs 5 m of travel apart (mean, 95th percentile, maximum; the metric code of
``pluto slam offline``); the share of scans after which the pose module said it was lost; CPU per scan (this
process's CPU time around each method's work on one scan: mean and 99th percentile over all scans) and the log time
per CPU time. Relocalization: each method started 5 m from the log's first pose (ahead, left, behind, right) and
turned by ±90° (8 wrong starts), run over the first :data:`RELOCALIZATION_SCANS` scans; the log time until it is back
within 0.3 m and 10° of the reference and stays there (beside the same method started right, see
:func:`~pluto.navigation.pose.offline.recovery`), as the median and the worst of the 8 and the number back within
10 s. A log whose stamps cannot time it (the Infinite Corridor's) gives scans instead of seconds. The targets are
printed under the table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.offline import PoseOfflineResult, Recovery, recovery, run_pose_offline
from pluto.navigation.pose.tracker import PoseModuleParams
from pluto.navigation.slam.mapfile import save_map
from pluto.navigation.slam.metrics import RelativePoseError, relative_pose_error
from pluto.navigation.slam.offline import OdometryNoise, OfflineLog, perturb_odometry, read_log, run_offline

sys.path.append(str(Path(__file__).resolve().parent))  # bench/amcl.py, the particle filter (bench/ is not a package)

import amcl

FloatArray = npt.NDArray[np.float64]

DATASETS = Path("/work/shared/datasets/radish")
LOGS = {
    "intel": "intel-corrected.log.gz",
    "fr079": "freiburg-079-corrected.log.gz",
    "corridor": "infinite-corridor-corrected.log.gz",
}
"""Short name -> file of each log."""

RPE_DISTANCE = 5.0
"""m of travel between the poses of a pair."""
RELOCALIZATION_SCANS = 300
"""Scans of each wrong-start run."""
WRONG_DISTANCE = 5.0
"""m between a wrong start and the log's first pose."""
RELOCALIZATION_TARGET = 10.0
"""s of log."""
TARGET_CPU_RATIO = 5.0
"""Pluto's CPU per scan should be below the particle filter's divided by this (here and in ``bench/pose.py``)."""
TARGET_LOST = 0.01
"""Largest share of scans lost."""

SLAM = "SLAM (its map)"
PLUTO = "Pluto pose"
"""The pose module's row (here and in ``bench/pose.py``)."""
ODOMETRY = "odometry"


def amcl_configurations(noise: OdometryNoise) -> tuple[tuple[str, dict[str, float]], ...]:
    """The particle filter's rows: Nav2's defaults, and its alphas set to the odometry noise model's variances."""
    matched = {"alpha1": noise.a3**2, "alpha2": noise.a4**2, "alpha3": noise.a1**2, "alpha4": noise.a2**2}
    return (("AMCL, Nav2 defaults", {}), ("AMCL, alphas of the noise", matched))


@dataclass
class MethodRow:
    """One method on one log.

    Attributes:
        name: the method.
        rpe: its relative pose error over 5 m, or None (not an estimate of every scan).
        lost: share of the scans it said it was lost, or None (it has no such notion).
        cpu: ``(n,)`` CPU seconds per scan (empty: not measured per scan).
        cpu_total: CPU seconds of the whole run (the SLAM's back end included).
        recoveries: the wrong starts' recoveries (empty: not run).
    """

    name: str
    rpe: RelativePoseError | None
    lost: float | None = None
    cpu: FloatArray = field(default_factory=lambda: np.zeros(0))
    cpu_total: float = math.nan
    recoveries: list[Recovery] = field(default_factory=list)


@dataclass
class LogResult:
    """Every method on one log."""

    name: str
    log: OfflineLog
    walls: int
    rows: list[MethodRow]

    def row(self, name: str) -> MethodRow:
        return next(r for r in self.rows if r.name == name)


def wrong_starts(first: FloatArray) -> list[tuple[float, float, float]]:
    """The 8 wrong starts: 5 m ahead, left, behind and right of the first pose, turned by +90° and -90°."""
    x, y, theta = (float(v) for v in first)
    out = []
    for side in (0.0, 0.5 * math.pi, math.pi, -0.5 * math.pi):
        for turn in (0.5 * math.pi, -0.5 * math.pi):
            a = theta + side
            out.append((x + WRONG_DISTANCE * math.cos(a), y + WRONG_DISTANCE * math.sin(a), theta + turn))
    return out


def _stamps(log: OfflineLog) -> list[float] | None:
    return None if log.duration is None else [scan.t for scan in log.scans]


def run_amcl(
    log: OfflineLog,
    wall_map: WallMap,
    odometry: FloatArray,
    changes: dict[str, float],
    seed: int,
    start: tuple[float, float, float],
    covariance: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """AMCL over the log's scans: ``(n, 3)`` its laser pose after each scan and ``(n,)`` its CPU seconds per scan."""
    filt = amcl.Amcl(wall_map.segments, seed=seed, params=amcl.AmclParams(**changes))
    filt.init_pose(start[0], start[1], start[2], covariance)
    n = len(log.scans)
    estimate = np.zeros((n, 3))
    cpu = np.zeros(n)
    for k, scan in enumerate(log.scans):
        angles = scan.angles
        begin = time.process_time()
        x, y, theta, _ = filt.update(
            tuple(odometry[k]), scan.ranges, float(angles[0]), float(angles[1] - angles[0]), scan.max_range
        )
        cpu[k] = time.process_time() - begin
        estimate[k] = (x, y, theta)
    estimate[:, 2] = np.unwrap(estimate[:, 2])
    return estimate, cpu


def evaluate(name: str, path: Path, seed: int, scans: int | None = None) -> LogResult:
    """Every method on one log (its first ``scans`` only, if given; see the module docstring)."""
    log = read_log(path)
    if scans is not None:
        log = log.head(scans)
    if log.reference is None:
        raise RuntimeError(f"{path} has no reference trajectory")
    noise = OdometryNoise()
    slam = run_offline(log, noise=noise, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        saved, walls = save_map(slam.slam, Path(folder) / f"{name}.xml", name=name)
        wall_map = WallMap.from_file(saved)
    rows = [MethodRow(SLAM, relative_pose_error(slam.estimate, log.reference, RPE_DISTANCE), cpu=slam.scan_times)]
    rows[0].cpu_total = slam.cpu_time + float(slam.backend_times.sum())
    pose = run_pose_offline(log, wall_map, noise=noise, seed=seed)
    head = log.head(RELOCALIZATION_SCANS)
    tracking = run_pose_offline(head, wall_map, noise=noise, seed=seed, warm=False)
    pluto = MethodRow(
        PLUTO, relative_pose_error(pose.estimate, log.reference, RPE_DISTANCE), pose.lost_share, pose.scan_times
    )
    pluto.cpu_total = pose.cpu_time
    for start in wrong_starts(log.reference[0]):
        wrong: PoseOfflineResult = run_pose_offline(head, wall_map, noise=noise, seed=seed, start=start, warm=False)
        back = wrong.recovery(tracking)
        assert back is not None
        pluto.recoveries.append(back)
    rows.append(pluto)
    odometry = perturb_odometry(log.odometry, noise, np.random.default_rng(seed))
    prm = PoseModuleParams()
    covariance = np.diag([prm.initial_std**2, prm.initial_std**2, prm.initial_heading_std**2])
    first = (float(log.reference[0, 0]), float(log.reference[0, 1]), float(log.reference[0, 2]))
    for label, changes in amcl_configurations(noise):
        estimate, cpu = run_amcl(log, wall_map, odometry, changes, seed, first, covariance)
        row = MethodRow(label, relative_pose_error(estimate, log.reference, RPE_DISTANCE), cpu=cpu)
        row.cpu_total = float(cpu.sum())
        right = estimate[:RELOCALIZATION_SCANS]
        for start in wrong_starts(log.reference[0]):
            lost, _ = run_amcl(head, wall_map, odometry, changes, seed, start, covariance)
            row.recoveries.append(recovery(lost, head.reference, _stamps(head), tracking=right))
        rows.append(row)
    rows.append(MethodRow(ODOMETRY, relative_pose_error(odometry, log.reference, RPE_DISTANCE)))
    return LogResult(name, log, walls, rows)


# -- the table ---------------------------------------------------------------------------------------------------


def _when(back: Recovery, timed: bool) -> float:
    """s of log (or scans, for a log its stamps cannot time) until back; inf: never."""
    if back.index is None:
        return math.inf
    return float(back.time) if timed and back.time is not None else float(back.index)


def relocalization(row: MethodRow, timed: bool) -> str:
    """``4.2 / 9.3 s, 8/8``: the median and worst of the wrong starts, and how many were back within 10 s."""
    if not row.recoveries:
        return "-"
    times = sorted(_when(b, timed) for b in row.recoveries)
    unit = " s" if timed else " scans"
    within = sum(1 for t in times if t <= RELOCALIZATION_TARGET) if timed else None

    def show(value: float) -> str:
        if math.isinf(value):
            return "never"
        return (f"{value:.1f}" if timed else f"{value:.0f}") + unit

    median = times[(len(times) - 1) // 2]
    count = f", {within}/{len(times)} within {RELOCALIZATION_TARGET:g} s" if within is not None else ""
    return f"{show(median)} / {show(times[-1])}{count}"


def _ms(values: FloatArray, q: float | None = None) -> str:
    if values.size == 0:
        return "-"
    return f"{1e3 * float(np.mean(values) if q is None else np.percentile(values, q)):.3f}"


def table(results: list[LogResult]) -> list[str]:
    """The table's lines: a header, then one row per log and method."""
    lines = [
        f"{'log':<9}{'method':<26}{'RPE 5 m':>8}{'p95':>7}{'max':>7}{'lost':>7}{'CPU/scan':>10}{'p99':>8}"
        f"{'log/CPU':>9}  relocalization: median / worst",
        f"{'':<9}{'':<26}{'m':>8}{'m':>7}{'m':>7}{'%':>7}{'ms':>10}{'ms':>8}{'x':>9}",
    ]
    for r in results:
        duration = r.log.duration
        for m in r.rows:
            e = m.rpe
            rpe = (
                f"{e.translation_mean:>8.3f}{e.translation_p95:>7.3f}{e.translation_max:>7.3f}"
                if e
                else f"{'-':>8}{'-':>7}{'-':>7}"
            )
            lost = f"{100.0 * m.lost:>7.2f}" if m.lost is not None else f"{'-':>7}"
            factor = "-"
            if duration is not None and math.isfinite(m.cpu_total) and m.cpu_total > 0:
                factor = f"{duration / m.cpu_total:,.0f}"
            lines.append(
                f"{r.name:<9}{m.name:<26}{rpe}{lost}{_ms(m.cpu):>10}{_ms(m.cpu, 99.0):>8}{factor:>9}  "
                f"{relocalization(m, duration is not None)}"
            )
    return lines


def met(ok: bool) -> str:
    """A target's verdict in a word (this benchmark's and ``bench/pose.py``'s)."""
    return "met" if ok else "NOT met"


def verdicts(results: list[LogResult]) -> list[str]:
    """One line per target and log: the figures compared and whether the target is met."""
    out: list[str] = []
    for r in results:
        pluto, slam = r.row(PLUTO), r.row(SLAM)
        assert pluto.rpe is not None and slam.rpe is not None
        mine, theirs = pluto.rpe.translation_mean, slam.rpe.translation_mean
        out.append(f"{r.name}, 5 m error at or below the SLAM's: {mine:.3f} vs {theirs:.3f} m: {met(mine <= theirs)}")
        assert pluto.lost is not None
        out.append(
            f"{r.name}, lost on under {100 * TARGET_LOST:g} % of scans: {100 * pluto.lost:.2f} %: "
            f"{met(pluto.lost < TARGET_LOST)}"
        )
        cpu = float(np.mean(pluto.cpu))
        for m in r.rows:
            if not m.name.startswith("AMCL") or m.rpe is None:
                continue
            other = m.rpe.translation_mean
            share = float(np.mean(m.cpu)) / TARGET_CPU_RATIO
            ok = mine < other and cpu < share
            out.append(
                f"{r.name}, error below {m.name} ({mine:.3f} vs {other:.3f} m) at under 1/{TARGET_CPU_RATIO:g} of its "
                f"CPU ({1e3 * cpu:.3f} vs {1e3 * share:.3f} ms a scan): {met(ok)}"
            )
        timed = r.log.duration is not None
        if timed:
            within = sum(1 for b in pluto.recoveries if _when(b, True) <= RELOCALIZATION_TARGET)
            out.append(
                f"{r.name}, back from a {WRONG_DISTANCE:g} m / 90° wrong start within {RELOCALIZATION_TARGET:g} s of "
                f"log: {within} of {len(pluto.recoveries)} ({relocalization(pluto, True)}): "
                f"{met(within == len(pluto.recoveries))}"
            )
        else:
            out.append(
                f"{r.name}, back from a {WRONG_DISTANCE:g} m / 90° wrong start: the log's stamps cannot time it "
                f"(median / worst: {relocalization(pluto, False)})"
            )
    return out


def run(names: list[str], datasets: Path, seed: int, scans: int | None = None) -> list[LogResult]:
    """Evaluate the named logs that are there (a missing one is said and left out), each whole or its first
    ``scans``."""
    results = []
    for name in names:
        path = datasets / LOGS[name]
        if not path.exists():
            print(f"  {name}: {path} is not there; left out")
            continue
        results.append(evaluate(name, path, seed, scans))
    return results


def log_names(text: str) -> list[str]:
    """The logs named in ``a,b`` (``none``: none).

    Raises:
        ValueError: a name that is not one of :data:`LOGS`.
    """
    names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in LOGS]
    if unknown:
        raise ValueError(f"unknown logs {unknown}; the logs are {', '.join(LOGS)}")
    return names


def report(results: list[LogResult], seed: int) -> None:
    """Print the table, the notes and the targets."""
    n = OdometryNoise()
    print(
        "Pose on real logs: Pluto's pose module, AMCL (bench/amcl.py) and the SLAM whose map both use; odometry "
        f"noise {n.a1:g},{n.a2:g},{n.a3:g},{n.a4:.4g} (seed {seed})"
    )
    for r in results:
        span = "untimed" if r.log.duration is None else f"{r.log.duration:.0f} s"
        print(f"  {r.name}: {len(r.log.scans)} scans, {span}; map {r.walls} walls")
    print()
    for line in table(results):
        print(line)
    print()
    print(
        "errors against the log's corrected poses (a SLAM run's, not ground truth); CPU of the SLAM: its scan loop "
        "(log/CPU with its back end); relocalization over the first "
        f"{RELOCALIZATION_SCANS} scans from 8 wrong starts {WRONG_DISTANCE:g} m and 90° off"
    )
    print()
    print("targets:")
    for line in verdicts(results):
        print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--logs", default=",".join(LOGS), help=f"logs to run, of {', '.join(LOGS)} (default all)")
    parser.add_argument("--datasets", type=Path, default=DATASETS, help=f"the logs' folder (default {DATASETS})")
    parser.add_argument("--seed", type=int, default=1, help="seed of the odometry noise and of the particle filters")
    parser.add_argument("--scans", type=int, metavar="N", help="the first N scans of each log only")
    args = parser.parse_args()
    try:
        names = log_names(args.logs)
    except ValueError as err:
        parser.error(str(err))
    report(run(names, args.datasets, args.seed, args.scans), args.seed)


if __name__ == "__main__":
    main()
