"""``pluto log``: what log files hold, their data as CSV, a picture of the run, and imports of other formats."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.record_cmd import human_size
from pluto.errors import ConfigError, PlutoError

if TYPE_CHECKING:
    from pluto.record.logfile import LogFile

# The record package is imported by run_log(), not here: `pluto` imports this module for every command.

__all__ = ["describe_log", "register", "run_log"]

LOG_DESCRIPTION = """\
Looks into log files: what they hold, their data as CSV, a picture of the run, and imports of other formats.

examples:
  pluto log info run.mcap
  pluto log export run.mcap --csv run-csv/
  pluto log export --rosbag2 run-bag/ run.mcap   a ROS 2 bag (MCAP, CDR): /scan, /odom, /tf, /tf_static, /cmd_vel
  pluto log info ros2-bag/                       what Pluto reads of a ROS 2 or ROS 1 bag
  pluto log plot run.mcap -o run.png
  pluto log import-carmen intel.log.gz -o intel.mcap
  pluto log recover killed.mcap -o fixed.mcap    index and summary for a recording whose recorder was killed,
                                                or a copy of a damaged log without its damaged chunks

A damaged log (bytes changed on a bad disk or in a bad copy) is read all the same: its damaged chunks are skipped,
and info, export, plot and replay say which byte ranges could not be read (a warning on stderr; info exits 0).

--rosbag2 writes the log as a ROS 2 bag folder (MCAP storage, CDR) with the standard types: the laser scans as
sensor_msgs/LaserScan on /scan (frame laser), the odometry as nav_msgs/Odometry on /odom, the transforms
map -> odom -> base_link -> laser as tf2_msgs/TFMessage on /tf and /tf_static (map -> odom from the pose and the
odometry at its stamp), the velocity commands as geometry_msgs/Twist on /cmd_vel; every message at its log time,
stamped with its Pluto message's stamp. ROS bags (ROS 2 folders or .mcap files, ROS 1 .bag files) are read by
info, replay and slam offline. A file that is not what it claims exits with status 2.
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``log`` subcommand and its actions."""
    p = add_parser(
        subparsers,
        "log",
        run_log,
        "look into logs: info, export to CSV, plot, import CARMEN logs, recover killed recordings",
        LOG_DESCRIPTION,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="channels, counts, rates, duration and time range of logs")
    info.add_argument("files", metavar="FILE", nargs="+")
    export = actions.add_parser("export", help="one CSV file per channel, or a ROS 2 bag")
    export.add_argument("file", metavar="FILE")
    export.add_argument("names", metavar="NAMES", nargs="*", help="only these interfaces (globs allowed; CSV)")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", type=Path, metavar="DIR", help="folder for the CSV files")
    target.add_argument(
        "--rosbag2", type=Path, metavar="DIR", help="a ROS 2 bag (MCAP storage, CDR) in this folder (created)"
    )
    export.add_argument("--force", action="store_true", help="overwrite CSV files (or a bag) that exist")
    export.add_argument(
        "--laser-mount",
        metavar="X,Y,Z",
        help="the laser on the robot for base_link -> laser, m (default: the localization service's, 0.25,0,0.9)",
    )
    plot = actions.add_parser("plot", help="trajectories and laser points in the world frame, as a PNG")
    plot.add_argument("file", metavar="FILE")
    plot.add_argument("-o", "--output", type=Path, help="the picture (default: the log's name with .png)")
    plot.add_argument("--reference", metavar="NAME", help="pose interface whose frame is the world")
    plot.add_argument("--laser", metavar="NAME", help="laser interface (default Sick/Scan_mm)")
    plot.add_argument("--laser-offset", type=float, metavar="M", help="laser mount ahead of the robot centre, m")
    plot.add_argument("--max-points", type=int, default=200_000, help="about how many laser points to draw")
    carmen = actions.add_parser("import-carmen", help="a CARMEN log (.log or .log.gz) as a Pluto log")
    carmen.add_argument("file", metavar="FILE")
    carmen.add_argument("-o", "--output", type=Path, help="the MCAP file (default: FILE's name with .mcap)")
    carmen.add_argument("--force", action="store_true", help="overwrite the output if it exists")
    carmen.add_argument("--robot-name", default="", help="robot name in the log's metadata (default: FILE's name)")
    carmen.add_argument(
        "--max-backstep",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="skip a line whose time is this much before the newest one (default 1)",
    )
    carmen.add_argument("--max-range", type=float, default=80.0, help="the lasers' maximum range, m (default 80)")
    carmen.add_argument("--list-all", action="store_true", help="list every skipped line")
    recover = actions.add_parser(
        "recover",
        help="a killed recording or a damaged log as a complete file (index and summary) from its readable chunks",
    )
    recover.add_argument("file", metavar="BROKEN")
    recover.add_argument("-o", "--output", type=Path, required=True, metavar="FIXED", help="the repaired MCAP file")
    recover.add_argument("--force", action="store_true", help="overwrite the output if it exists")


def _clock_text(t: float, base: str) -> str:
    if base == "wall" and t > 1e8:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
    return f"{t:.3f} s"


def describe_log(log: LogFile) -> str:
    """The text of ``pluto log info`` for one log."""
    info = log.info
    base = info.get("time_base", "?")
    state = "closed" if log.closed else "NOT CLOSED"
    if log.damaged:
        state += f", DAMAGED ({len(log.damaged)} unreadable byte range{'s' if len(log.damaged) != 1 else ''})"
    lines = [f"file       {log.path}  ({human_size(log.size)}, {log.chunks} chunks; {state})"]
    robot = info.get("robot", "?") or "?"
    when = info.get("start_time") or info.get("imported", "")
    origin = f", {info['source']} import of {info.get('source_file', '?')}" if info.get("source") else ""
    lines.append(
        f"robot      {robot}  (pluto {info.get('pluto_version', '?')}{origin}; started {when or '?'}; time base {base})"
    )
    if log.message_count:
        lines.append(
            f"time       {_clock_text(log.start, base)} .. {_clock_text(log.end, base)}  "
            f"(duration {log.duration:.3f} s)"
        )
    lines.append(f"messages   {log.message_count:,}")
    if log.channels:
        width = max(len(n) for n in log.channels)
        kinds = {n: c.type.__name__ if c.type else c.type_name or "?" for n, c in log.channels.items()}
        kw = max(14, *(len(k) for k in kinds.values()))  # other tools' schema names (foxglove.FrameTransform) too
        lines.append(
            f"  {'INTERFACE':<{width}}  {'TYPE':<{kw}} {'COUNT':>9}  {'RATE':>10}  {'FIRST':>12}  {'LAST':>12}"
        )
        t0 = log.start
        for name in log.names():
            c = log.channels[name]
            lines.append(
                f"  {name:<{width}}  {kinds[name]:<{kw}} {c.count:>9,}  {c.rate:>7.2f} Hz  {c.first - t0:>10.3f} s  "
                f"{c.last - t0:>10.3f} s"
            )
    for note in log.notes:
        lines.append(f"note: {note}")
    if log.damaged:
        lines.append(f"repair     pluto log recover {log.path} -o FIXED.mcap   (every readable message, a new index)")
    return "\n".join(lines)


def _warn_damaged(log: LogFile) -> None:
    warning = log.damage_warning()
    if warning:
        print(f"pluto log: warning: {warning}", file=sys.stderr)


def _print_problems(title: str, problems: Sequence[Any], show_all: bool, limit: int = 10) -> None:
    if not problems:
        return
    print(f"{title}: {len(problems):,}")
    shown = problems if show_all else problems[:limit]
    for problem in shown:
        print(f"  {problem}")
    if len(problems) > len(shown):
        print(f"  ... and {len(problems) - len(shown):,} more (--list-all shows them)")


def run_log(args: argparse.Namespace) -> int:
    """``pluto log ACTION``.

    Raises:
        PlutoError: an unreadable log, a file that exists, ...
    """
    from pluto.record.logfile import LogFile

    if args.action == "info":
        from pluto.record.rosbag import open_log

        for i, path in enumerate(args.files):
            if i:
                print()
            log = open_log(path)
            print(describe_log(log))
            _warn_damaged(log)
        return 0
    if args.action == "export" and args.rosbag2 is not None:
        return _export_rosbag2(args)
    if args.action == "export":
        from pluto.record.export import export_csv

        log = LogFile(args.file)
        _warn_damaged(log)
        written = export_csv(log, args.csv, args.names or None, force=args.force)
        for name, path in written.items():
            print(f"{name:<30} -> {path}")
        if not written:
            print(f"{args.file}: no channel to export")
        return 0
    if args.action == "plot":
        from pluto.record.plot import plot_log

        log = LogFile(args.file)
        _warn_damaged(log)
        output = args.output or Path(args.file).with_suffix(".png")
        path = plot_log(
            log,
            output,
            reference=args.reference,
            laser=args.laser,
            laser_offset=args.laser_offset,
            max_points=args.max_points,
        )
        print(f"wrote {path}")
        return 0
    if args.action == "import-carmen":
        from pluto.record.carmen import import_carmen

        source = Path(args.file)
        output = args.output or Path(source.name.removesuffix(".gz").removesuffix(".log") + ".mcap")
        report = import_carmen(
            source,
            output,
            force=args.force,
            robot=args.robot_name,
            max_backstep=args.max_backstep,
            max_range=args.max_range,
        )
        counts = ", ".join(f"{name} {count:,}" for name, count in report.counts.items()) or "no messages"
        print(
            f"imported {source} -> {output}: {counts}; {report.end - report.start:.1f} s of log, {report.lines:,} lines"
        )
        _print_problems("malformed lines, skipped", report.malformed, args.list_all)
        _print_problems("lines with a missing or backward timestamp, skipped", report.out_of_order, args.list_all)
        if report.ignored:
            print("other message types, not imported: " + ", ".join(f"{k} {v:,}" for k, v in report.ignored.items()))
        return 0
    if args.action == "recover":
        return _recover(args)
    raise PlutoError(f"unknown log action {args.action!r}")


def _laser_mount(text: str | None) -> tuple[float, float, float]:
    """``--laser-mount X,Y,Z``, or the localization service's mount.

    Raises:
        ConfigError: not three finite numbers.
    """
    if text is None:
        from pluto.navigation.localization.core import LocalizationParams

        x, y, z = LocalizationParams().laser_mount
        return (float(x), float(y), float(z))
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"--laser-mount takes X,Y,Z in m (three numbers), got {text!r}")
    return (values[0], values[1], values[2])


def _export_rosbag2(args: argparse.Namespace) -> int:
    from pluto.record.logfile import LogFile
    from pluto.record.rosbag import export_rosbag2

    if args.names:
        raise ConfigError("--rosbag2 exports the scans, odometry, transforms and commands: it takes no NAMES")
    mount = _laser_mount(args.laser_mount)
    log = LogFile(args.file)
    _warn_damaged(log)
    report = export_rosbag2(log, args.rosbag2, laser_mount=mount, force=args.force)
    counts = ", ".join(f"{topic} {count:,}" for topic, count in report.counts.items())
    print(f"wrote the ROS 2 bag {report.output} ({report.end - report.start:.1f} s of log): {counts}")
    if report.skipped:
        print(f"{len(report.skipped)} messages left out, the first: {report.skipped[0]}")
    for note in report.notes:
        print(f"note: {note}")
    return 0


def _recover(args: argparse.Namespace) -> int:
    from pluto.record.recover import recover_log

    report = recover_log(args.file, args.output, force=args.force)
    if report.was_closed and not report.damaged:
        print(f"{report.source} was closed properly (it has its summary); written again all the same")
    lost = (
        f"; the last {report.truncated_bytes:,} bytes (an unfinished chunk) were left out"
        if report.truncated_bytes
        else ""
    )
    print(
        f"recovered {report.source} -> {report.output}: {report.messages:,} messages on {report.channels} channels "
        f"from {report.chunks} complete chunk{'s' if report.chunks != 1 else ''}{lost}"
    )
    if report.damaged:
        gone = sum(d.messages or 0 for d in report.damaged)
        print(
            f"  {len(report.damaged)} damaged byte range{'s' if len(report.damaged) != 1 else ''} "
            f"({report.bad_chunks} chunk{'s' if report.bad_chunks != 1 else ''}) left out"
            + (f", {gone:,} messages lost with them" if gone else "")
        )
    if report.orphans:
        print(f"  {report.orphans} messages on undeclared channels were left out")
    for note in report.notes:
        if "was not closed" not in note:
            print(f"  {note}")
    return 0
