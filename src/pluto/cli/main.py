"""The ``pluto`` command."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from pluto import __version__, msgs, names
from pluto.bus import Bus
from pluto.cli.command import add_parser
from pluto.errors import LaunchError, PlutoError
from pluto.runtime import launcher, mom
from pluto.runtime.config import Config, build_params, load_config, parse_override
from pluto.runtime.profiles import available_profiles, load_profile
from pluto.runtime.registry import available_modules, load_module_class, module_name_of, without_driver
from pluto.runtime.runner import ModuleSpec, run_in_process, stop_on_signals
from pluto.runtime.supervisor import Supervisor, profile_pid_file

DESCRIPTION = """\
Pluto runs a robot as a set of modules that find each other by name on a bus and talk through typed interfaces
(Base/Drive/State, Sick/Scan_mm, Localization/Pose, drive/command, ...).

Getting started:
  pluto demo                   run the demonstration mission, then stop
  pluto sim                    run the simulated robot (Ctrl-C stops it)
  pluto up sim                 start the modules of a profile and keep them running (Ctrl-C stops them)
  pluto mom                    which modules are running, what they write, how fast
  pluto list                   interfaces that have a value now; `pluto echo NAME` prints them as they change
  pluto up mission             the simulated robot with localization, drive and avoid; then `pluto avoid goto X Y`
  pluto record -o run.mcap     record every interface; `pluto replay run.mcap`, `pluto log info run.mcap`
  pluto player, pluto xmlserver, pluto netmotion    gateways for Player clients, XML over TCP, the arm over UDP

Every command works on one robot: the one named by --robot, PLUTO_ROBOT or the configuration file ("pluto" by
default). Several machines: run `pluto router --listen tcp/0.0.0.0:7447` on one and set PLUTO_CONNECT to
tcp/<its address>:7447 on all.
"""


def _params(pairs: Sequence[str]) -> dict[str, Any]:
    return dict(parse_override(pair) for pair in pairs)


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING - 10 * verbosity
    logging.basicConfig(
        level=max(level, logging.DEBUG), format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr
    )


def _config(args: argparse.Namespace) -> Config:
    if getattr(args, "robot", None):
        os.environ["PLUTO_ROBOT"] = args.robot
    return load_config(getattr(args, "config", None))


@contextlib.contextmanager
def _bus(args: argparse.Namespace) -> Iterator[Bus]:
    with Bus(_config(args).bus) as bus:
        yield bus


# -- commands ---------------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    config = _config(args)
    params = _params(args.param)
    load_module_class(args.module, params)  # fail early, before opening the bus
    spec = ModuleSpec(args.module, args.name, params)
    with stop_on_signals() as stop:
        run_in_process([spec], config, stop)
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    if args.param and len(args.module) > 1:
        raise LaunchError("-p applies to one module; start modules with parameters one at a time")
    config = _config(args)
    for module in args.module:  # bad parameters fail here, in one line, rather than in the daemon's log
        name = args.name or module_name_of(module)
        merged = {**config.module_table(name), **_params(args.param)}
        cls = load_module_class(module, merged)
        build_params(cls.Params, without_driver(merged), where=f"parameters of {name}")
    with Bus(config.bus) as bus:
        for module in args.module:
            pid = launcher.start_daemon(
                bus,
                module,
                name=args.name,
                params=_params(args.param),
                config=str(config.path) if config.path else None,
                timeout=args.timeout,
            )
            name = args.name or module_name_of(module)
            print(f"started {name} (pid {pid}); log: {launcher.runtime_dir(bus.robot) / (name + '.log')}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    robot = _config(args).bus.robot
    for name in args.module:
        pid = launcher.stop_daemon(robot, name, timeout=args.timeout)
        print(f"stopped {name} (pid {pid})")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    config = _config(args)
    profile = load_profile(args.profile)
    robot = config.bus.robot
    if args.detach:
        cmd = [sys.executable, "-m", "pluto", "up", args.profile]
        if config.path:
            cmd += ["--config", str(config.path)]
        if args.one_process:
            cmd.append("--one-process")
        log_path = launcher.runtime_dir(robot) / f"profile-{profile.name}.log"
        process = launcher.spawn(cmd, log_path)
        with Bus(config.bus) as bus:
            for entry in profile.entries:
                try:
                    launcher.wait_publishing(bus, entry.spec.module, args.timeout, name=entry.name, process=process)
                except LaunchError as err:
                    if process.poll() is None:
                        launcher.terminate(process.pid)
                    raise LaunchError(f"{err}; end of {log_path}:\n{launcher.tail(log_path, 8)}") from None
        print(f"profile {profile.name} is up (supervisor pid {process.pid}); `pluto down` stops it")
        return 0
    pid_file = profile_pid_file(robot, profile.name)
    if launcher.read_pid(Path(pid_file)) is not None:
        raise LaunchError(f"profile {profile.name} is already up for robot {robot}; `pluto down {profile.name}`")
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(bus, profile, config, one_process=args.one_process, startup_timeout=args.timeout)
        Path(pid_file).write_text(f"{os.getpid()}\n")
        try:
            supervisor.start()
            print(
                f"profile {profile.name} is up: {', '.join(e.name for e in profile.entries)} "
                f"(Ctrl-C or `pluto down` stops it)",
                flush=True,
            )
            supervisor.run(stop)
        finally:
            supervisor.shutdown()
            Path(pid_file).unlink(missing_ok=True)
    print(f"profile {profile.name} is down")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    robot = _config(args).bus.robot
    daemons = launcher.running_daemons(robot)
    profiles = {n.removeprefix("profile-"): pid for n, pid in daemons.items() if n.startswith("profile-")}
    if args.profile:
        if args.profile not in profiles:
            raise LaunchError(f"profile {args.profile} is not up for robot {robot}")
        profiles = {args.profile: profiles[args.profile]}
    for name, pid in profiles.items():
        launcher.terminate(pid, timeout=args.timeout + 5)
        Path(profile_pid_file(robot, name)).unlink(missing_ok=True)
        print(f"profile {name} is down")
    if not args.profile:  # also the modules started one by one
        for name in launcher.running_daemons(robot):
            launcher.stop_daemon(robot, name, timeout=args.timeout)
            print(f"stopped {name}")
    if not daemons:
        print(f"nothing is running for robot {robot}")
    return 0


def cmd_mom(args: argparse.Namespace) -> int:
    with _bus(args) as bus, stop_on_signals() as stop:
        while True:
            table = mom.render(mom.snapshot(bus), bus.robot)
            if args.watch:
                print("\x1b[2J\x1b[H" + table + f"\n\n(every {args.interval:g} s; Ctrl-C to quit)", flush=True)
                if stop.wait(args.interval):
                    break
            else:
                print(table)
                break
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.all:
        width = max(len(n) for n in names.INTERFACES)
        for iface in names.INTERFACES.values():
            print(f"{iface.name:<{width}}  {iface.type.__name__:<14} {iface.description}")
        return 0
    with _bus(args) as bus:
        found = bus.interface_keys()
        if not found:
            print(f"robot {bus.robot}: no interface has a value (is anything running? `pluto mom`)")
            return 0
        now = time.time()
        width = max(len(n) for n in found)
        for name, written in sorted(found.items()):
            kind = names.message_type_of(name)
            age = f"{now - written:.1f} s ago" if written else ""
            print(f"{name:<{width}}  {kind.__name__ if kind else '?':<14} {age}")
    return 0


def _interface_type(name: str, type_name: str | None) -> type[msgs.Message]:
    if type_name:
        return msgs.message_type(type_name)
    kind = names.message_type_of(name)
    if kind is None:
        raise PlutoError(f"{name} is not a known interface; give its message type with --type")
    return kind


def cmd_echo(args: argparse.Namespace) -> int:
    kind = _interface_type(args.name, args.type)
    count = 0
    done = threading.Event()

    def show(value: msgs.Message) -> None:
        nonlocal count
        if done.is_set():
            return
        count += 1
        print(msgspec.json.encode(value).decode(), flush=True)
        if args.count and count >= args.count:
            done.set()

    with _bus(args) as bus, stop_on_signals() as stop:
        bus.create_subscription(args.name, show, kind, depth=64, current=not args.new)
        while not (done.wait(0.1) or stop.is_set()):
            pass
    return 0


def cmd_hz(args: argparse.Namespace) -> int:
    kind = _interface_type(args.name, args.type)
    arrivals: deque[float] = deque(maxlen=args.window)
    lock = threading.Lock()

    def tick(_value: msgs.Message) -> None:
        with lock:
            arrivals.append(time.monotonic())

    with _bus(args) as bus, stop_on_signals() as stop:
        bus.create_subscription(args.name, tick, kind, depth=1024, current=False)
        reports = 0
        while not stop.wait(1.0):
            with lock:
                times = list(arrivals)
            reports += 1
            if len(times) < 2:
                print(f"{args.name}: no new messages")
            else:
                periods = [b - a for a, b in itertools.pairwise(times)]
                mean = sum(periods) / len(periods)
                std = math.sqrt(sum((p - mean) ** 2 for p in periods) / len(periods))
                print(
                    f"{args.name}: average rate {1 / mean:.2f} Hz  min {min(periods) * 1000:.1f} ms  "
                    f"max {max(periods) * 1000:.1f} ms  std dev {std * 1000:.2f} ms  window {len(times)}",
                    flush=True,
                )
            if args.count and reports >= args.count:
                break
    return 0


def cmd_modules(_args: argparse.Namespace) -> int:
    for name in sorted(available_modules()):
        cls = load_module_class(name)
        print(f"{name:<20} {cls.description}")
    return 0


def cmd_profiles(_args: argparse.Namespace) -> int:
    for name, description in available_profiles().items():
        print(f"{name:<20} {description}")
    return 0


def cmd_router(args: argparse.Namespace) -> int:
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", '"router"')
    conf.insert_json5("listen/endpoints", msgspec.json.encode(args.listen).decode())
    conf.insert_json5("listen/exit_on_failure", "true")
    conf.insert_json5("scouting/multicast/enabled", "false")
    try:
        session = zenoh.open(conf)
    except zenoh.ZError as err:
        raise PlutoError(f"cannot listen on {', '.join(args.listen)} (port in use?): {err}") from None
    with stop_on_signals() as stop:
        endpoint = args.listen[0].replace("0.0.0.0", "<this host>")
        print(
            f"router listening on {', '.join(args.listen)}; set PLUTO_CONNECT={endpoint} on the robot's machines. "
            "Ctrl-C stops it.",
            flush=True,
        )
        stop.wait()
    session.close()  # type: ignore[no-untyped-call]
    return 0


def _sim_rate(text: str) -> float | str:
    """A --rate value: simulated seconds per wall second, or "max"."""
    if text.strip().lower() == "max":
        return "max"
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a number or "max", got {text!r}') from None
    if not 0.0 < rate <= 1000.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1000], got {text}")
    return rate


def cmd_demo(args: argparse.Namespace) -> int:
    from pluto.cli.demo import run_demo

    return run_demo(
        _config(args),
        duration=args.duration,
        rate=args.rate,
        output=args.output,
        seed=args.seed,
        noise=args.noise,
        lockstep=not args.no_lockstep,
        one_process=args.one_process,
    )


def cmd_sim(args: argparse.Namespace) -> int:
    from pluto.runtime.profiles import with_params
    from pluto.sim.noise import noise_profile
    from pluto.sim.world import load_world

    config = _config(args)
    world = load_world(args.world)  # a bad map file fails here, with its line and reason
    noise_profile(args.noise)
    lockstep = args.lockstep or args.rate == "max"
    profile = with_params(
        load_profile("sim"),
        "sim",
        world=str(world.source or args.world),
        rate=args.rate,
        lockstep=lockstep,
        noise=args.noise,
        seed=args.seed,
    )
    pace = "as fast as possible" if args.rate == "max" else f"at {args.rate:g}x real time"
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(bus, profile, config, one_process=not args.processes, startup_timeout=args.timeout)
        try:
            supervisor.start()
            print(
                f"simulated robot '{bus.robot}' up in world {world.name} {pace}{' in lock-step' if lockstep else ''}, "
                f"noise {args.noise}, seed {args.seed}: {', '.join(e.name for e in profile.entries)}. "
                "Ctrl-C stops it.",
                flush=True,
            )
            clock = bus.create_reader(names.CLOCK)
            truth = bus.create_reader(names.SIM_TRUTH)
            end = time.monotonic() + args.duration if args.duration else math.inf
            wall0 = time.monotonic()
            first = clock.read()
            sim0 = first.stamp if first else 0.0
            while not stop.wait(1.0) and time.monotonic() < end:
                tick, pose = clock.read(), truth.read()
                if tick is None or pose is None:
                    continue
                factor = (tick.stamp - sim0) / max(time.monotonic() - wall0, 1e-9)
                print(
                    f"\rsim time {tick.stamp:8.1f} s (real-time factor {factor:5.1f})  robot at ({pose.x:6.2f}, "
                    f"{pose.y:6.2f}) m, heading {math.degrees(pose.theta) % 360:5.1f}°",
                    end="",
                    flush=True,
                )
            print()
        finally:
            supervisor.shutdown()
    return 0


# -- parser -----------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: an option given before the command must not be reset by the command's own default.
    common.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="configuration file (default: PLUTO_CONFIG, ./pluto.toml, ~/.config/pluto/config.toml)",
    )
    common.add_argument(
        "--robot",
        metavar="NAME",
        default=argparse.SUPPRESS,
        help="robot to work on (default: PLUTO_ROBOT or the config)",
    )
    common.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more log output (-vv for debug)"
    )

    parser = argparse.ArgumentParser(
        prog="pluto", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"pluto {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], help_text: str, description: str = "") -> Any:
        return add_parser(sub, name, func, help_text, description, [common])

    p = add(
        "demo",
        cmd_demo,
        "run the demonstration mission on the simulated robot, then stop",
        "Starts the simulated robot in the office world with localization and the movement chain, sends it\n"
        "from waypoint to waypoint with obstacle avoidance, prints its progress, records every interface to an\n"
        "MCAP log and draws the map, the true and localized paths and the last laser scan to a PNG. Ctrl-C\n"
        "stops it early and cleanly.\n\n"
        "By default the simulated time runs in lock-step, as fast as the modules go: it advances one tick only\n"
        "after every module has finished its step, so the same seed gives the same run, to the last digit, on\n"
        "any machine however busy. The summary ends with lines scripts can read:\n"
        "  final true pose: x 3.201 m, y 1.802 m, θ 172.4°\n"
        "  localization error: max 0.046 m, mean 0.012 m\n"
        "and the wall time and real-time factor achieved.\n\n"
        "example: pluto demo\n"
        "example: pluto demo --noise realistic --seed 3           (the same output at every run)\n"
        "example: pluto demo --rate 5                             (lock-step, at most 5x real time)\n"
        "example: pluto demo --no-lockstep --rate 5               (free-running time, as a robot would see it)",
    )
    p.add_argument(
        "--rate",
        type=_sim_rate,
        default="max",
        help='simulated seconds per second, or "max": as fast as the modules go, lock-step only (default max)',
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the simulation's noise (default 1)")
    p.add_argument(
        "--noise",
        choices=("ideal", "realistic"),
        default="ideal",
        help="noise of the simulated devices (default ideal)",
    )
    p.add_argument(
        "--no-lockstep",
        action="store_true",
        help="let the simulated time run freely at --rate (a number) instead of waiting for every module's step",
    )
    p.add_argument("--one-process", action="store_true", help="run the modules in this process (default: one each)")
    p.add_argument("--duration", type=float, default=400.0, help="simulated seconds before giving up (default 400)")
    p.add_argument("--output", type=Path, help="folder for the picture and the log (default ./demo-output)")

    p = add(
        "sim",
        cmd_sim,
        "run the simulated robot (world, clock, base, wrist, laser, inertial unit, GPS)",
        "Runs the simulated robot until Ctrl-C: a world from a map file, simulated time at --rate times real\n"
        "time, and the dummy hardware modules on their usual interfaces. Drive it by writing\n"
        "Base/Drive/Command; watch it with `pluto mom`, `pluto echo Base/Drive/State`. The status line shows\n"
        "the simulated time and the real-time factor achieved.\n\n"
        "With --lockstep the time advances one tick only after every module following it has finished its\n"
        "step: the same seed gives the same run whatever the load. --rate max runs in lock-step as fast as\n"
        "the modules go.\n\n"
        "example: pluto sim --world campus --rate 10 --noise realistic --seed 7\n"
        "example: pluto sim --rate max --seed 3\n"
        "example: pluto sim --lockstep --rate 2",
    )
    p.add_argument("--world", default="office", help="office, campus, clutter or a map file (default office)")
    p.add_argument(
        "--rate",
        type=_sim_rate,
        default=1.0,
        help='simulated seconds per second, or "max": as fast as possible, in lock-step (default 1)',
    )
    p.add_argument(
        "--lockstep", action="store_true", help="advance the time only when every module has finished its step"
    )
    p.add_argument("--noise", default="ideal", help="ideal (default) or realistic")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0)")
    p.add_argument("--processes", action="store_true", help="one process per module instead of one for all")
    p.add_argument("--duration", type=float, default=0.0, help="wall-clock seconds to run (default: until Ctrl-C)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds each module has to start (default 20)")

    param_help = 'set a parameter, NAME=VALUE (TOML value: 2, true, "text"); repeatable'
    p = add(
        "run",
        cmd_run,
        "run one module in the foreground (Ctrl-C stops it)",
        "Runs a module in this terminal, logging to it. MODULE is an installed module (`pluto modules`) or\n"
        "package.module:Class. Its parameters can also be given as options, --name value.\n\n"
        "example: pluto run heartbeat -p rate_hz=5\n"
        "example: pluto run base --driver p2os --port socket://127.0.0.1:8101 --model p3dx",
    )
    p.add_argument("module", metavar="MODULE")
    p.add_argument("--name", help="name on the bus (default: the module's own)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help=param_help)

    p = add(
        "start",
        cmd_start,
        "start modules as daemons (in the background)",
        "Starts each module in the background and returns once it publishes. Its log and pid file are in\n"
        "the runtime directory (PLUTO_RUNTIME_DIR). `pluto stop MODULE` ends it.\n\n"
        "example: pluto start heartbeat",
    )
    p.add_argument("module", metavar="MODULE", nargs="+")
    p.add_argument("--name", help="name on the bus (one module only)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help=param_help)
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for it to publish (default 15)")

    p = add(
        "stop",
        cmd_stop,
        "stop daemons by name",
        "Stops modules started with `pluto start` (SIGTERM, then "
        "SIGKILL after --timeout).\n\nexample: pluto stop heartbeat",
    )
    p.add_argument("module", metavar="MODULE", nargs="+")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait before killing (default 5)")

    p = add(
        "up",
        cmd_up,
        "start a profile (a set of modules) in dependency order and supervise it",
        "Starts every module of PROFILE, each only after the modules it requires are publishing, and\n"
        "restarts crashed ones. Runs in the foreground until Ctrl-C or `pluto down`, unless --detach.\n"
        "`pluto profiles` lists the profiles; a path to a .toml file works too.\n\nexample: pluto up sim",
    )
    p.add_argument("profile", metavar="PROFILE")
    p.add_argument(
        "--one-process",
        action="store_true",
        help="run all modules in one process sharing one bus session (lighter; no crash isolation)",
    )
    p.add_argument("--detach", action="store_true", help="run the supervisor in the background and return")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds each module has to start (default 20)")

    p = add(
        "down",
        cmd_down,
        "stop running profiles and daemons",
        "Stops the profile named (or every profile and daemon of the robot if none is named).",
    )
    p.add_argument("profile", metavar="PROFILE", nargs="?")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each (default 5)")

    p = add(
        "mom",
        cmd_mom,
        "list running modules, their interfaces, rates and ages",
        "The module overview: every live module, the interfaces it writes, their rate, the age of the last\n"
        "message and how many were written. A module that dies disappears at once.",
    )
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")

    p = add(
        "list",
        cmd_list,
        "list interfaces that have a value now",
        "Lists the interfaces with a current value on this robot, with their type and age.",
    )
    p.add_argument("--all", action="store_true", help="list every known interface name and its meaning instead")

    type_help = "message type, for an interface not in the table (`pluto list --all`)"
    p = add(
        "echo",
        cmd_echo,
        "print the values of an interface as they change (JSON, one per line)",
        "example: pluto echo Base/Drive/State -n 5",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--count", type=int, default=0, help="stop after this many values")
    p.add_argument("--new", action="store_true", help="skip the current value, print only new ones")
    p.add_argument("--type", help=type_help)

    p = add("hz", cmd_hz, "measure the rate of an interface", "example: pluto hz Sick/Scan_mm")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--window", type=int, default=100, help="messages to average over (default 100)")
    p.add_argument("-n", "--count", type=int, default=0, help="stop after this many reports")
    p.add_argument("--type", help=type_help)

    add("modules", cmd_modules, "list the installed modules")
    add("profiles", cmd_profiles, "list the profiles")

    p = add(
        "router",
        cmd_router,
        "run a bus router, the meeting point for several machines",
        "Runs a Zenoh router. On every machine of the robot set PLUTO_CONNECT (or bus.connect in the\n"
        "configuration file) to its endpoint. It listens on the loopback only unless told otherwise.\n\n"
        "example: pluto router --listen tcp/0.0.0.0:7447",
    )
    p.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help="endpoint to listen on, repeatable (default tcp/127.0.0.1:7447)",
    )

    from pluto.cli import p2os_sim

    p2os_sim.add_command(sub, [common])
    from pluto.cli import drive_cmd

    drive_cmd.add_command(sub, [common])
    from pluto.cli import avoid_cmd

    avoid_cmd.add_command(sub, [common])
    from pluto.cli import record_cmd

    record_cmd.add_command(sub, [common])
    from pluto.cli import player_cmd

    player_cmd.add_command(sub, [common])
    from pluto.cli import xmlserver_cmd

    xmlserver_cmd.add_command(sub, [common])
    from pluto.cli import netmotion_cmd

    netmotion_cmd.add_command(sub, [common])
    return parser


def _module_options(extra: Sequence[str]) -> list[str]:
    """``--name value`` / ``--name=value`` options after ``pluto run MODULE`` as ``name=value`` parameters."""
    params, i = [], 0
    while i < len(extra):
        option = extra[i]
        if not option.startswith("--") or len(option) < 3:
            raise PlutoError(f"unexpected argument {option!r} (module parameters are --name value or -p name=value)")
        key, sep, value = option[2:].partition("=")
        if not sep:
            if i + 1 >= len(extra) or extra[i + 1].startswith("--"):
                raise PlutoError(f"option {option} needs a value")
            value, i = extra[i + 1], i + 1
        params.append(f"{key.replace('-', '_')}={value}")
        i += 1
    return params


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "start"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "router" and not args.listen:
        args.listen = ["tcp/127.0.0.1:7447"]
    _setup_logging(getattr(args, "verbose", 0) + (1 if args.command in ("run", "player") else 0))
    try:
        if extra:  # pluto run base --driver p2os --port socket://...: parameters of the module
            args.param = _module_options(extra) + list(args.param)
        return int(args.func(args))
    except PlutoError as err:
        print(f"pluto {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
