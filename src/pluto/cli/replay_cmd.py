"""``pluto replay``: a log's messages published again with their original timing and the log's Clock."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser

if TYPE_CHECKING:
    from pluto.record.replay import ReplayProgress

# The bus and the record package are imported by run_replay(), not here: `pluto` imports this module for every
# command.

__all__ = ["register", "run_replay"]

REPLAY_DESCRIPTION = """\
Publishes a log's messages under their interface names with their original timing (scaled by --rate), and the
log's time on Clock, so modules with use_sim_time follow the log as they would follow the simulator. The replay
announces the modules that wrote the replayed interfaces (base, sick, ...) so that profiles and proxies needing
them find them, and refuses to run while one of them is alive.

examples:
  pluto replay run.mcap
  pluto replay run.mcap --rate 10 --only Base/Drive/State 'Sick/*' 'DMU/*'
  pluto replay run.mcap --start 30 --end 90 --loop
  pluto replay run.mcap --remap Sick/Scan_mm=Rear/Scan_mm
  pluto replay ros2-bag/ --scan-topic /base_scan

A ROS bag (a ROS 2 bag's folder or .mcap file, a ROS 1 .bag) is replayed as a Pluto log: its sensor_msgs/LaserScan
topic as Sick/Scan_mm and Sick/Timing, nav_msgs/Odometry as Base/Drive/State, geometry_msgs/Twist as
Base/Drive/Command, at the bag's times; topics are chosen by type, or named with --scan-topic, --odom-topic and
--cmd-topic. The laser's mount comes from the bag's transforms: localization must be told it (its laser_mount).
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``replay`` subcommand."""
    p = add_parser(
        subparsers,
        "replay",
        run_replay,
        "publish a log's messages with their original timing and the log's Clock",
        REPLAY_DESCRIPTION,
    )
    p.add_argument("file", metavar="FILE", help="the log (.mcap)")
    p.add_argument("--rate", type=float, default=1.0, help="log seconds per second (default 1)")
    p.add_argument("--loop", action="store_true", help="start again at the end, until Ctrl-C")
    p.add_argument("--start", type=float, metavar="T", help="begin T s after the log's first message")
    p.add_argument("--end", type=float, metavar="T", help="end T s after the log's first message")
    p.add_argument(
        "--only", nargs="+", action="extend", default=[], metavar="NAME", help="replay only these (globs allowed)"
    )
    p.add_argument(
        "--remap", action="append", default=[], metavar="OLD=NEW", help="publish OLD under the name NEW; repeatable"
    )
    p.add_argument("--no-clock", action="store_true", help="do not publish the log's time on Clock")
    p.add_argument("--clock-hz", type=float, default=100.0, help="Clock values per second between messages")
    p.add_argument(
        "--tail",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="keep the Clock running this many log seconds after the last message (default 1)",
    )
    p.add_argument(
        "--no-announce", action="store_true", help="do not announce the modules that wrote the replayed interfaces"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line and no summary")
    p.add_argument("--scan-topic", metavar="TOPIC", help="a ROS bag's LaserScan topic (default: by type)")
    p.add_argument("--odom-topic", metavar="TOPIC", help="a ROS bag's Odometry topic (default: by type)")
    p.add_argument("--cmd-topic", metavar="TOPIC", help="a ROS bag's Twist topic (default: by type)")


def run_replay(args: argparse.Namespace) -> int:
    """``pluto replay``.

    Raises:
        PlutoError: bad options, an unreadable log, or live modules writing the replayed interfaces.
    """
    from pluto.cli.common import open_bus
    from pluto.record.replay import Replayer, parse_remap
    from pluto.record.rosbag import open_log
    from pluto.runtime.runner import stop_on_signals

    remap = parse_remap(args.remap)
    out = sys.stderr
    tty = out.isatty()
    log = open_log(args.file, scan_topic=args.scan_topic, odom_topic=args.odom_topic, cmd_topic=args.cmd_topic)
    if log.info.get("source", "").startswith("rosbag") and not args.quiet:
        for note in log.notes:
            print(f"pluto replay: {note}", file=out, flush=True)
        mount = log.info.get("laser_mount", "")
        print(
            f"pluto replay: {args.file} is a ROS bag: {log.info.get('scan_topic')} is replayed as Sick/Scan_mm; its "
            f"laser is at {mount.replace(' ', ', ')} m from the odometry's frame (localization's laser_mount)",
            file=out,
            flush=True,
        )

    def show(progress: ReplayProgress) -> None:
        if args.quiet or not tty:
            return
        line = (
            f"replay {progress.t - progress.start:8.1f} / {progress.end - progress.start:.1f} s "
            f"({100 * progress.fraction:3.0f}%) at {args.rate:g}x  {progress.messages:,} messages"
        )
        if progress.passes:
            line += f"  pass {progress.passes + 1}"
        print("\r" + line + "\x1b[K", end="", file=out, flush=True)

    with stop_on_signals() as stop, open_bus(args) as bus:
        replayer = Replayer(
            bus,
            log,
            rate=args.rate,
            start=args.start,
            end=args.end,
            loop=args.loop,
            only=args.only,
            remap=remap,
            clock=not args.no_clock,
            clock_hz=args.clock_hz,
            tail=args.tail,
            announce=not args.no_announce,
        )
        damage = replayer.log.damage_warning()
        if damage:
            print(f"pluto replay: warning: {damage}", file=out, flush=True)
        if not args.quiet:
            print(
                f"replaying {', '.join(replayer.outputs[n] for n in replayer.names)} from {args.file} at "
                f"{args.rate:g}x{' (loop)' if args.loop else ''}; Ctrl-C stops it",
                file=out,
                flush=True,
            )
        result = replayer.run(stop, show)
    if tty and not args.quiet:
        print(file=out)
    if not args.quiet:
        how = "stopped after" if result.stopped else "replayed"
        print(
            f"{how} {result.messages:,} messages in {result.wall:.1f} s (latest {1000 * result.max_late:.1f} ms "
            "after its time)",
            file=sys.stdout,
        )
    return 0
