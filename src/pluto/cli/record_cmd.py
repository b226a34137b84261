"""``pluto record``, ``pluto replay`` and ``pluto log``: data collection and replay on MCAP files."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pluto.cli.command import add_parser
from pluto.errors import ConfigError, PlutoError
from pluto.record.units import parse_duration, parse_size

if TYPE_CHECKING:
    from pluto.record.logfile import LogFile
    from pluto.record.recorder import RecordStatus
    from pluto.record.replay import ReplayProgress

# The bus and the record package are imported by the commands, not here: `pluto` imports this module for every
# command.

__all__ = ["add_command", "parse_duration", "parse_size", "run_log", "run_record", "run_replay", "status_line"]

RECORD_DESCRIPTION = """\
Records interfaces of the robot to an MCAP file as they are written: every interface by default, or the NAMES
given (globs allowed: 'Sick/*'). Each channel carries its JSON Schema and the messages are JSON, so standard MCAP
tools and viewers open the file. Messages are stamped with the robot's time: the simulated Clock when the robot
runs on it, else the wall clock (the Clock itself is the log's time axis, recorded only when named). Ctrl-C ends
the recording; a recorder killed outright loses at most the last second (see `pluto log info`).

examples:
  pluto record -o run.mcap                          everything, until Ctrl-C
  pluto record 'Sick/*' Base/Drive/State -o run.mcap --duration 60
  pluto record --start sim -o sim.mcap              start the simulated sensors first, record them, stop them
  pluto record -o long.mcap --split-size 500M       long runs: long_000.mcap, long_001.mcap, ...
"""

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
"""

LOG_DESCRIPTION = """\
Looks into log files: what they hold, their data as CSV, a picture of the run, and imports of other formats.

examples:
  pluto log info run.mcap
  pluto log export run.mcap --csv run-csv/
  pluto log plot run.mcap -o run.png
  pluto log import-carmen intel.log.gz -o intel.mcap
"""


def _human_size(size: float) -> str:
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
        f"{_human_size(status.size):>9}"
    )
    counts = "  ".join(f"{i.name} {i.count:,}" for i in status.interfaces)
    line = f"{head}  | {counts}" if counts else head
    return line if len(line) <= width else line[: max(width - 3, 0)] + "..."


def _summary(status: RecordStatus, out: TextIO) -> None:
    files = ", ".join(str(p) for p in status.parts)
    print(
        f"recorded {status.duration:.1f} s of log time ({status.time_base} time; {status.elapsed:.1f} s of wall "
        f"time) to {files}: {status.messages:,} messages, {_human_size(status.size)}",
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
    if status.unstamped:
        print(f"  {status.unstamped} messages came before the first Clock value and could not be stamped", file=out)


def _config_for(args: argparse.Namespace) -> Any:
    from pluto.runtime.config import load_config

    if getattr(args, "robot", None):
        os.environ["PLUTO_ROBOT"] = args.robot
    return load_config(getattr(args, "config", None))


def _default_output(robot: str) -> Path:
    return Path(f"{robot}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.mcap")


# -- pluto record -----------------------------------------------------------------------------------------------


def run_record(args: argparse.Namespace) -> int:
    """``pluto record``.

    Returns:
        0 when the recording ended normally, 1 if writing failed.

    Raises:
        PlutoError: bad options, a file that exists (without --force), a profile that does not start.
    """
    from pluto.bus import Bus
    from pluto.record.recorder import Recorder, profile_for
    from pluto.runtime.profiles import load_profile
    from pluto.runtime.runner import stop_on_signals
    from pluto.runtime.supervisor import Supervisor

    if args.duration is not None and not args.duration > 0:
        raise ConfigError(f"--duration must be > 0 s, got {args.duration}")
    config = _config_for(args)
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


# -- pluto replay -----------------------------------------------------------------------------------------------


def run_replay(args: argparse.Namespace) -> int:
    """``pluto replay``.

    Raises:
        PlutoError: bad options, an unreadable log, or live modules writing the replayed interfaces.
    """
    from pluto.bus import Bus
    from pluto.record.replay import Replayer, parse_remap
    from pluto.runtime.runner import stop_on_signals

    remap = parse_remap(args.remap)
    config = _config_for(args)
    out = sys.stderr
    tty = out.isatty()

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

    with stop_on_signals() as stop, Bus(config.bus) as bus:
        replayer = Replayer(
            bus,
            args.file,
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


# -- pluto log ----------------------------------------------------------------------------------------------------


def _clock_text(t: float, base: str) -> str:
    if base == "wall" and t > 1e8:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
    return f"{t:.3f} s"


def describe_log(log: LogFile) -> str:
    """The text of ``pluto log info`` for one log."""
    info = log.info
    base = info.get("time_base", "?")
    state = "closed" if log.closed else "NOT CLOSED"
    lines = [f"file       {log.path}  ({_human_size(log.size)}, {log.chunks} chunks; {state})"]
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
        lines.append(f"  {'INTERFACE':<{width}}  {'TYPE':<14} {'COUNT':>9}  {'RATE':>10}  {'FIRST':>12}  {'LAST':>12}")
        t0 = log.start
        for name in log.names():
            c = log.channels[name]
            kind = c.type.__name__ if c.type else c.type_name or "?"
            lines.append(
                f"  {name:<{width}}  {kind:<14} {c.count:>9,}  {c.rate:>7.2f} Hz  {c.first - t0:>10.3f} s  "
                f"{c.last - t0:>10.3f} s"
            )
    for note in log.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


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
        for i, path in enumerate(args.files):
            if i:
                print()
            print(describe_log(LogFile(path)))
        return 0
    if args.action == "export":
        from pluto.record.export import export_csv

        log = LogFile(args.file)
        written = export_csv(log, args.csv, args.names or None, force=args.force)
        for name, path in written.items():
            print(f"{name:<30} -> {path}")
        if not written:
            print(f"{args.file}: no channel to export")
        return 0
    if args.action == "plot":
        from pluto.record.plot import plot_log

        log = LogFile(args.file)
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
    raise PlutoError(f"unknown log action {args.action!r}")


# -- parser -------------------------------------------------------------------------------------------------------


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Sequence[argparse.ArgumentParser]
) -> None:
    """Register the ``record``, ``replay`` and ``log`` subcommands.

    Args:
        sub: the subparsers of the ``pluto`` parser (``parser.add_subparsers(...)``).
        parents: parsers whose options the commands share (the common ``--config``, ``--robot``, ``-v``).
    """
    p = add_parser(
        sub, "record", run_record, "record interfaces of the robot to an MCAP file", RECORD_DESCRIPTION, parents
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
    p.add_argument("-q", "--quiet", action="store_true", help="no status line and no summary")

    p = add_parser(
        sub,
        "replay",
        run_replay,
        "publish a log's messages with their original timing and the log's Clock",
        REPLAY_DESCRIPTION,
        parents,
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

    p = add_parser(
        sub, "log", run_log, "look into logs: info, export to CSV, plot, import CARMEN logs", LOG_DESCRIPTION, parents
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="channels, counts, rates, duration and time range of logs")
    info.add_argument("files", metavar="FILE", nargs="+")
    export = actions.add_parser("export", help="one CSV file per channel")
    export.add_argument("file", metavar="FILE")
    export.add_argument("names", metavar="NAMES", nargs="*", help="only these interfaces (globs allowed)")
    export.add_argument("--csv", required=True, type=Path, metavar="DIR", help="folder for the CSV files")
    export.add_argument("--force", action="store_true", help="overwrite CSV files that exist")
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
