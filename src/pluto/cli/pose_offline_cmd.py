"""``pluto pose offline``: the pose module over a recorded log against a map ``pluto slam offline`` saved, without
the bus; its accuracy against the log's corrected poses, how often it is lost, and its CPU time per scan."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError, PlutoError

if TYPE_CHECKING:
    from pluto.navigation.pose.offline import PoseOfflineResult
    from pluto.navigation.slam.metrics import RelativePoseError

__all__ = ["EXIT_BAD_INPUT", "RPE_DISTANCE", "add_offline", "run_offline_command"]

HELP = "the pose module over a recorded log against a saved map, without the bus"

DESCRIPTION = """\
Runs the pose module's own per-scan code (the lines of each scan matched to the map's walls in its Kalman filter,
its lost rule and its searches of the map) over a recorded log, as fast as the processor allows, without the bus:
a CARMEN log (.log or .log.gz, such as the Radish data sets) or a Pluto recording (MCAP), read as `pluto slam
offline` reads it, against a map that `pluto slam offline` saved (a world file: walls with their uncertainty).

The odometry's increments are perturbed with the same seeded noise as `pluto slam offline`'s (so the same log, seed
and model give both the same odometry; default 0.05,0.01,0.05,0.01745: 5 % of the travel and of the turn, 1 cm per
radian, 1° per metre), and the filter is told that model's covariance for each increment. It starts at the log's
first reference pose, or at --start (a wrong start: the filter has to find out it is lost and search the map).

Printed: the relative pose error over pairs of scans 5 m of travel apart (the measure and the code of `pluto slam
offline`: E = (δ*)⁻¹·δ, |t - t*| and the turn's difference; mean, 95th percentile and maximum) against the log's
reference trajectory, which in the "corrected" Radish logs is a SLAM run's, not ground truth, beside the
odometry's; the share of the scans after which the filter said it was lost; the processing time per scan (mean and
99th percentile, the process's CPU time) and the real-time factor; with --start, the log time until the estimate is
back within 0.3 m and 10° of the reference and stays there, except where the same filter started at the log's first
pose is off the reference too (a map's own distortion) and the estimate is within those limits of it; a log whose
stamps cannot time it gives scans and metres instead. --out DIR writes the trajectory (trajectory.csv) and the
figures (summary.json).

Bad input (no log or map, a map that is not a world file, a log with no scans) is told in one line, exit status 2.

examples:
  pluto slam offline intel-corrected.log.gz -o intel.xml
  pluto pose offline intel-corrected.log.gz --map intel.xml
  pluto pose offline intel-corrected.log.gz --map intel.xml --start 5.3 -1.8 1.2 --out intel-kidnapped
  pluto pose offline fr079.log.gz --map fr079.xml --noise 0.1,0.02,0.1,0.035 --seed 7
"""

RPE_DISTANCE = 5.0
"""m of travel between the poses of a pair of the relative pose error."""

EXIT_BAD_INPUT = 2
"""Exit status for input that cannot be used (a missing or unreadable log or map, bad options)."""


def add_offline(actions: Subparsers) -> None:
    """Register ``offline`` among the ``pluto pose`` actions."""
    p = add_parser(actions, "offline", run_offline_command, HELP, DESCRIPTION)
    p.add_argument("log", type=Path, metavar="LOG", help="a CARMEN log (.log, .log.gz) or a recording (.mcap)")
    p.add_argument("--map", type=Path, required=True, metavar="MAP", help="a map file saved by pluto slam offline")
    p.add_argument("--seed", type=int, default=1, help="seed of the odometry noise (default 1)")
    p.add_argument(
        "--start",
        type=float,
        nargs=3,
        metavar=("X", "Y", "THETA"),
        help="start the filter here (m, m, rad) instead of at the log's first pose",
    )
    p.add_argument("--noise", default="default", metavar="MODEL", help="odometry noise: default, none, or a1,a2,a3,a4")
    p.add_argument("--max-scans", type=int, metavar="N", help="use the first N scans only")
    p.add_argument("--out", type=Path, metavar="DIR", help="write trajectory.csv and summary.json here")


def run_offline_command(args: argparse.Namespace) -> int:
    """``pluto pose offline``: prints the figures; writes the trajectory with --out.

    Returns:
        0 on success, :data:`EXIT_BAD_INPUT` for input that cannot be used (told in one line on stderr).
    """
    try:
        return _run(args)
    except (PlutoError, OSError) as err:
        print(f"pluto pose offline: {err}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


def _run(args: argparse.Namespace) -> int:
    from pluto.navigation.pose.map import WallMap
    from pluto.navigation.pose.offline import run_pose_offline
    from pluto.navigation.slam.offline import OdometryNoise, read_log
    from pluto.record.format import LogError

    try:
        noise = OdometryNoise.parse(args.noise)
    except ValueError as err:
        raise ConfigError(f"--noise: {err}") from None
    if args.max_scans is not None and args.max_scans < 2:
        raise ConfigError(f"--max-scans must be >= 2, got {args.max_scans}")
    start = None if args.start is None else (float(args.start[0]), float(args.start[1]), float(args.start[2]))
    if start is not None and not all(math.isfinite(v) for v in start):
        raise ConfigError(f"--start must be three finite numbers (x m, y m, theta rad), got {list(start)}")
    wall_map = WallMap.from_file(args.map)  # MapError (a ConfigError): unreadable, or not a world file
    if len(wall_map) == 0:
        raise ConfigError(f"{args.map}: the map has no walls")
    log = read_log(args.log)
    if args.max_scans is not None:
        log = log.head(args.max_scans)
    if not log.scans:
        raise LogError(f"{args.log} holds no usable scan")
    if log.skipped:
        print(f"{len(log.skipped)} lines or messages left out of {args.log}, the first: {log.skipped[0]}")
    for note in log.notes:
        print(f"{args.log.name}: {note}")
    result = run_pose_offline(log, wall_map, noise=noise, seed=args.seed, start=start)
    # a wrong start is judged beside the same filter started right (see recovery): both runs see the same odometry
    tracking = None if start is None else run_pose_offline(log, wall_map, noise=noise, seed=args.seed, warm=False)
    summary = _report(args, result, len(wall_map), tracking)
    if args.out is not None:
        _write(args.out, result, summary)
        print(f"trajectory written to {args.out / 'trajectory.csv'}, figures to {args.out / 'summary.json'}")
    sys.stdout.flush()
    return 0


def _rpe_figures(error: RelativePoseError) -> dict[str, float | int]:
    return {
        "pairs": error.pairs,
        "mean_m": error.translation_mean,
        "p95_m": error.translation_p95,
        "max_m": error.translation_max,
        "rotation_mean_deg": error.rotation_mean_deg,
        "rotation_p95_deg": error.rotation_p95_deg,
        "rotation_max_deg": error.rotation_max_deg,
    }


def _report(
    args: argparse.Namespace, result: PoseOfflineResult, walls: int, tracking: PoseOfflineResult | None
) -> dict[str, Any]:
    """Print the figures; return them for summary.json."""
    import numpy as np

    from pluto.navigation.slam.metrics import relative_pose_error

    log = result.log
    n = len(log.scans)
    noise = result.noise
    model = "none" if noise is None else f"{noise.a1:g},{noise.a2:g},{noise.a3:g},{noise.a4:g} (seed {result.seed})"
    x, y, theta = result.start
    where = "--start" if args.start is not None else "the log's first pose"
    span = "no duration: its stamps cannot time it" if log.duration is None else f"{log.duration:.1f} s of log"
    print(
        f"{n} scans ({span}); map {args.map.name}: {walls} walls; odometry noise {model}; start ({x:.3f} m, "
        f"{y:.3f} m, {math.degrees(theta):.1f}°): {where}"
    )
    summary: dict[str, Any] = {
        "log": str(args.log),
        "map": str(args.map),
        "scans": n,
        "walls": walls,
        "seed": result.seed,
        "noise": None if noise is None else [noise.a1, noise.a2, noise.a3, noise.a4],
        "start": list(result.start),
    }
    if log.reference is None:
        print("the log has no reference trajectory: no error against it")
    else:
        pose = relative_pose_error(result.estimate, log.reference, RPE_DISTANCE)
        odometry = relative_pose_error(result.odometry, log.reference, RPE_DISTANCE)
        print(
            f"relative pose error over pairs {RPE_DISTANCE:g} m apart ({pose.pairs} pairs), as mean (95th percentile, "
            "maximum), against the log's corrected poses (a SLAM run's trajectory, not ground truth): "
            f"pose {pose.describe()}; odometry {odometry.describe()}"
        )
        summary["rpe_5m"] = _rpe_figures(pose)
        summary["odometry_rpe_5m"] = _rpe_figures(odometry)
    lost = int(result.lost.sum())
    print(
        f"lost after {lost} of {n} scans ({100.0 * result.lost_share:.1f} %); {result.relocalizations} "
        "relocalizations (searches of the map that reset the filter)"
    )
    times = result.scan_times
    mean_ms = 1e3 * float(times.mean()) if n else 0.0
    p99_ms = 1e3 * float(np.percentile(times, 99.0)) if n else 0.0
    factor = result.real_time_factor
    rate = "no real-time factor" if factor is None else f"{factor:,.0f}x real time"
    print(
        f"CPU time per scan: mean {mean_ms:.3f} ms, 99th percentile {p99_ms:.3f} ms ({result.cpu_time:.2f} s in all; "
        f"{rate})"
    )
    summary.update(
        lost_scans=lost,
        lost_share=result.lost_share,
        relocalizations=result.relocalizations,
        cpu_ms_mean=mean_ms,
        cpu_ms_p99=p99_ms,
        cpu_s=result.cpu_time,
        real_time_factor=factor,
    )
    recovered = None if tracking is None else result.recovery(tracking)
    if recovered is not None:
        print(f"relocalization from the start given: {recovered.describe()}")
        summary["recovery"] = {
            "scans": recovered.index,
            "log_s": recovered.time,
            "travel_m": recovered.distance,
            "distance_limit_m": recovered.distance_limit,
            "angle_limit_deg": math.degrees(recovered.angle_limit),
        }
    return summary


def _write(folder: Path, result: PoseOfflineResult, summary: dict[str, Any]) -> None:
    """trajectory.csv (one row per scan) and summary.json in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    log = result.log
    with open(folder / "trajectory.csv", "w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        header = ["scan", "stamp", "x", "y", "theta", "odometry_x", "odometry_y", "odometry_theta", "lost", "matches"]
        if log.reference is not None:
            header += ["reference_x", "reference_y", "reference_theta"]
        out.writerow(header)
        for k, scan in enumerate(log.scans):
            row: list[Any] = [k, f"{scan.t:.6f}"]
            row += [f"{v:.5f}" for v in result.estimate[k]]
            row += [f"{v:.5f}" for v in result.odometry[k]]
            row += [int(result.lost[k]), int(result.matches[k])]
            if log.reference is not None:
                row += [f"{v:.5f}" for v in log.reference[k]]
            out.writerow(row)
    (folder / "summary.json").write_text(json.dumps(_plain(summary), indent=2, allow_nan=False) + "\n")


def _plain(value: Any) -> Any:
    """``value`` for json: numpy numbers as Python's, nan and infinities (a figure without pairs) as null."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
