"""``pluto record``: the robot's interfaces to an MCAP file, with a live status line and a summary.

``pluto replay`` plays such a file back (:mod:`pluto.cli.replay_cmd`); ``pluto log`` looks into it
(:mod:`pluto.cli.log_cmd`).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError, PlutoError
from pluto.record.units import parse_duration, parse_size

if TYPE_CHECKING:
    from pluto.record.recorder import RecordStatus

# The bus and the record package are imported by the commands, not here: `pluto` imports this module for every
# command.

__all__ = ["human_size", "parse_duration", "parse_size", "register", "run_record", "status_line"]

RECORD_DESCRIPTION = """\
Records interfaces of the robot to an MCAP file as they are written: every interface by default, or the NAMES
given (globs allowed: 'Sick/*'). Each channel carries its JSON Schema and the messages are JSON, so standard MCAP
tools and viewers open the file. Messages are stamped with the robot's time: the simulated Clock when the robot
runs on it, else the wall clock (the Clock itself is the log's time axis, recorded only when named). Ctrl-C ends
the recording; a recorder killed outright loses at most the last second (see `pluto log info`).

Beside them the file carries Foxglove's well-known schemas (protobuf) on channels of their own, so Foxglove's 3-D
panel draws the map, the scans and the robot as it opens the file (`pluto foxglove --layout` prints a layout):
/scan (LaserScan), /tf (FrameTransform: map -> odom -> base_link -> laser, each frame with one parent), /pose and
/truth (PoseInFrame), /path (PosesInFrame) and /map (SceneUpdate: the walls of --map, by default the running
simulator's world). They come from the recorded interfaces (Sick/Scan_mm, Base/Drive/State, Localization/Pose,
Sim/Truth, Wrist/State), when any of those is recorded; `pluto replay` skips them. --raw leaves them out: Pluto's
JSON channels alone.

examples:
  pluto record -o run.mcap                          everything, until Ctrl-C
  pluto record 'Sick/*' Base/Drive/State -o run.mcap --duration 60
  pluto record --start sim -o sim.mcap              start the simulated sensors first, record them, stop them
  pluto record -o long.mcap --split-size 500M       long runs: long_000.mcap, long_001.mcap, ...
  pluto record --raw -o run.mcap                   Pluto's JSON channels only, without Foxglove's schemas
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``record`` subcommand."""
    p = add_parser(
        subparsers, "record", run_record, "record interfaces of the robot to an MCAP file", RECORD_DESCRIPTION
    )
    p.add_argument("names", metavar="NAMES", nargs="*", help="interfaces or globs to record (default: all)")
    p.add_argument("-o", "--output", type=Path, help="the file (default: ROBOT-DATE-TIME.mcap here)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="do not record these; repeatable")
    p.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    p.add_argument("--start", metavar="PROFILE", help="first start the modules of PROFILE that write NAMES")
    p.add_argument("--duration", type=parse_duration, metavar="TIME", help="stop after this long (90, 10m, 1h)")
    p.add_argument("--split-size", metavar="SIZE", help="start a new file every SIZE (500M, 2G)")
    p.add_argument("--split-duration", metavar="TIME", help="start a new file every TIME of log (10m, 1h)")
    p.add_argument(
        "--time",
        choices=("auto", "sim", "wall"),
        default="auto",
        help="time base: the simulated Clock (sim), the wall clock, or sim if a Clock is written (auto)",
    )
    p.add_argument(
        "--compression", choices=("zstd", "lz4", "none"), default="zstd", help="chunk compression (default zstd)"
    )
    p.add_argument(
        "--chunk-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="write the chunk in progress at least this often: the most a crash loses (default 1)",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="Pluto's JSON channels only: no Foxglove schemas (scans, frames, poses, walls on /scan, /tf, ...)",
    )
    # Foxglove's schemas are written by default now; the option that asked for them still works.
    p.add_argument("--foxglove", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--map",
        metavar="FILE|WORLD",
        help="the walls the Foxglove channels draw (default: the running simulator's world, if any)",
    )
    p.add_argument(
        "--map-pose",
        choices=("localization", "truth"),
        default="localization",
        help="what places the robot among the walls in the Foxglove channels (Localization/Pose, or Sim/Truth)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no status line and no summary")


def human_size(size: float) -> str:
    """A size in bytes as people read it: ``812 B``, ``1.2 MB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def status_line(status: RecordStatus, rate: float, width: int) -> str:
    """The live status of a recording in one line of at most ``width`` characters.

    Args:
        status: the recorder's snapshot.
        rate: recent messages per second.
        width: the terminal's width.
    """
    head = (
        f"recording {status.elapsed:6.1f} s  {status.messages:>8,} msgs  {rate:7.1f} msg/s  "
        f"{human_size(status.size):>9}"
    )
    counts = "  ".join(f"{i.name} {i.count:,}" for i in status.interfaces)
    line = f"{head}  | {counts}" if counts else head
    return line if len(line) <= width else line[: max(width - 3, 0)] + "..."


def _summary(status: RecordStatus, out: TextIO) -> None:
    files = ", ".join(str(p) for p in status.parts)
    print(
        f"recorded {status.duration:.1f} s of log time ({status.time_base} time; {status.elapsed:.1f} s of wall "
        f"time) to {files}: {status.messages:,} messages, {human_size(status.size)}",
        file=out,
    )
    if status.interfaces:
        width = max(len(i.name) for i in status.interfaces)
        print(f"  {'INTERFACE':<{width}}  {'TYPE':<14} {'COUNT':>9}  {'RATE':>10}  {'LOST':>6}", file=out)
        for i in status.interfaces:
            print(f"  {i.name:<{width}}  {i.type:<14} {i.count:>9,}  {i.rate:>7.1f} Hz  {i.lost:>6,}", file=out)
    if status.lost:
        print(
            f"  {status.lost} values never reached the recorder: their writers dropped them under congestion",
            file=out,
        )
    if status.undecodable:
        print(f"  {status.undecodable} samples were not valid Pluto messages and were left out", file=out)
    if status.foreign:
        total = sum(n for _, n in status.foreign)
        topics = ", ".join(f"{t} {n:,}" for t, n in status.foreign)
        print(f"  and {total:,} messages in Foxglove's schemas: {topics}", file=out)
    if status.foreign_errors:
        print(f"  {status.foreign_errors} values could not be put in Foxglove's schemas", file=out)
    if status.unstamped:
        print(f"  {status.unstamped} messages came before the first Clock value and could not be stamped", file=out)


def _default_output(robot: str) -> Path:
    return Path(f"{robot}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.mcap")


def run_record(args: argparse.Namespace) -> int:
    """``pluto record``.

    Returns:
        0 when the recording ended normally, 1 if writing failed.

    Raises:
        PlutoError: bad options, a file that exists (without --force), a profile that does not start.
    """
    from pluto.bus import Bus
    from pluto.cli.common import config_from_args
    from pluto.record.recorder import Recorder, profile_for
    from pluto.runtime.profiles import load_profile
    from pluto.runtime.runner import stop_on_signals
    from pluto.runtime.supervisor import Supervisor

    if args.duration is not None and not args.duration > 0:
        raise ConfigError(f"--duration must be > 0 s, got {args.duration}")
    if args.raw and args.foxglove:
        raise ConfigError("--raw leaves Foxglove's schemas out: not with --foxglove")
    config = config_from_args(args)
    out = sys.stderr
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = None
        supervising: threading.Thread | None = None
        supervisor_stop = threading.Event()
        try:
            if args.start:
                profile = profile_for(load_profile(args.start), args.names, bus.live_modules())
                if profile.entries:
                    print(f"starting {', '.join(e.name for e in profile.entries)} ({args.start})", file=out, flush=True)
                    supervisor = Supervisor(bus, profile, config, one_process=False)
                    supervisor.start()
                    supervising = threading.Thread(
                        target=supervisor.run, args=(supervisor_stop,), daemon=True, name="record-supervisor"
                    )
                    supervising.start()
                else:
                    print(f"the modules of {args.start} that write them are running already", file=out)
            translate = None if args.raw else _foxglove(bus, args.names, args.exclude, args.map, args.map_pose, out)
            recorder = Recorder(
                bus,
                args.output or _default_output(bus.robot),
                names=args.names,
                exclude=args.exclude,
                time_base=args.time,
                force=args.force,
                split_size=parse_size(args.split_size) if args.split_size else 0,
                split_duration=parse_duration(args.split_duration) if args.split_duration else 0.0,
                chunk_interval=args.chunk_interval,
                compression=args.compression,
                translate=translate,
            )
            recorder.start()
            status = _watch(recorder, stop, args.duration, args.quiet, out)
        finally:
            supervisor_stop.set()
            if supervising is not None:
                supervising.join(timeout=5)
            if supervisor is not None:
                print(f"stopping the modules it started ({args.start})", file=out, flush=True)
                supervisor.shutdown()
    if not args.quiet:
        _summary(status, sys.stdout)
        missing = recorder.selection.unmatched(i.name for i in status.interfaces)
        if missing:
            print(f"  nothing was written on {', '.join(missing)}", file=sys.stdout)
    if status.error:
        print(f"pluto record: {status.error}", file=sys.stderr)
        return 1
    return 0


def _foxglove(bus: Any, names: list[str], exclude: list[str], source: str | None, map_pose: str, out: TextIO) -> Any:
    """The translation to Foxglove's schemas, with the walls of ``source`` or of the running simulator's world; None
    when the interfaces recorded (``names``, ``exclude``) include none it translates, or without the Foxglove SDK."""
    from pluto.record.recorder import Selection

    try:
        from pluto.gateways.foxglove.recording import FoxgloveRecording
        from pluto.gateways.foxglove.translate import INPUTS
    except ImportError as err:  # an install without the SDK records Pluto's channels all the same
        print(f"Foxglove's schemas left out ({err.name or 'foxglove'} is not installed)", file=out)
        return None
    from pluto.sim.world import load_world

    if not any(Selection(tuple(names), tuple(exclude)).wants(name) for name in INPUTS):
        return None  # nothing to draw: no Foxglove channel
    if source:
        return FoxgloveRecording(load_world(source), map_pose=map_pose)
    from pluto.sim.module import fetch_settings

    world = None
    if "sim" in bus.live_modules(timeout=0.5):
        try:
            world = fetch_settings(bus, timeout=2.0).load_world()
        except PlutoError as err:
            print(f"the simulator's world cannot be read ({err}): the Foxglove channels have no walls", file=out)
    else:
        print("no simulator runs and no --map: the Foxglove channels have no walls", file=out)
    return FoxgloveRecording(world, map_pose=map_pose)


def _watch(recorder: Any, stop: threading.Event, duration: float | None, quiet: bool, out: TextIO) -> RecordStatus:
    """Show the live status until Ctrl-C, the duration, or a failure; then stop the recorder."""
    tty = out.isatty()
    every = 1.0 if tty else 10.0
    started = time.monotonic()
    end = started + duration if duration else math.inf
    last_count, last_time = 0, started
    next_show = started + every
    try:
        while not stop.is_set() and not recorder.failed.is_set():
            now = time.monotonic()
            if now >= end:
                break
            stop.wait(min(0.1, end - now))
            now = time.monotonic()
            if not quiet and now >= next_show:
                status = recorder.status()
                rate = (status.messages - last_count) / max(now - last_time, 1e-9)
                last_count, last_time, next_show = status.messages, now, now + every
                width = shutil.get_terminal_size((120, 20)).columns - 1
                if tty:
                    print("\r" + status_line(status, rate, width) + "\x1b[K", end="", file=out, flush=True)
                else:
                    print(status_line(status, rate, 200), file=out, flush=True)
    finally:
        final: RecordStatus = recorder.stop()
        if tty and not quiet:
            print(file=out)
    return final
