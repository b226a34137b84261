"""``pluto up`` and ``pluto down``: profiles (sets of modules) started in dependency order, and stopped."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.progress import say
from pluto.cli.run_cmd import STARTING_LIMIT
from pluto.errors import LaunchError

if TYPE_CHECKING:
    from pluto.runtime.config import Config
    from pluto.runtime.profiles import Profile

__all__ = ["down", "register", "up"]


def register(subparsers: Subparsers) -> None:
    """Register the ``up`` and ``down`` subcommands."""
    p = add_parser(
        subparsers,
        "up",
        up,
        "start a profile (a set of modules) in dependency order and supervise it",
        "Starts every module of PROFILE, each only after the modules it requires are publishing, and\n"
        "restarts crashed ones. Runs in the foreground until Ctrl-C or `pluto down`, unless --detach.\n"
        "`pluto profiles` lists the profiles; a path to a .toml file works too. --set changes a module's\n"
        "parameter for this run (the value is read as TOML, else taken as a string). --noise and --seed set\n"
        "the simulator's (sim.noise, sim.seed) in a profile that has one.\n\n"
        "example: pluto up sim\nexample: pluto up mission --noise realistic --seed 3\n"
        "example: pluto up robot --set base.port=/dev/ttyUSB1 --set sick.baud=500000\n"
        "example: pluto up fleet --robots 4        (the four robots of the office, a process each)",
    )
    p.add_argument("profile", metavar="PROFILE")
    p.add_argument(
        "--one-process",
        action="store_true",
        help="run all modules in one process sharing one bus session (lighter; no crash isolation)",
    )
    p.add_argument("--detach", action="store_true", help="run the supervisor in the background and return")
    p.add_argument(
        "--timeout",
        type=float,
        default=20.0,
        help="seconds each module has to start publishing, or to say it is starting (default 20); one that says "
        f"it is starting is waited for up to {STARTING_LIMIT:g} s (a first run compiles the navigation "
        "kernels)",
    )
    p.add_argument(
        "--robots",
        type=int,
        metavar="N",
        help="run a profile with the simulator for N robots of its world, each under its own name, each in a "
        "process of its own (with --one-process, all in this one) (default: the profile's, 1)",
    )
    p.add_argument(
        "--only",
        metavar="ROBOT[,ROBOT...]",
        help="of a profile for several robots, run only these robots here (in this process), the others running "
        "elsewhere (another machine on the same bus, say); the first robot's leads the lock-step: start it first",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.PARAM=VALUE",
        help="set a parameter of one of the profile's modules for this run (repeatable)",
    )
    p.add_argument(
        "--noise",
        metavar="PROFILE",
        help="the simulator's noise: ideal, basic (the devices' errors) or realistic (a rough world as well: walls "
        "a few cm off the map, glass, clutter, lost echoes, wheel slips); same as --set sim.noise=PROFILE",
    )
    p.add_argument("--seed", type=int, help="seed of the simulator's noise; same as --set sim.seed=N")
    p.add_argument(
        "--paused",
        action="store_true",
        help="a simulator in lock-step holds the time at 0 once everything is up, until `pluto call sim/resume`",
    )

    p = add_parser(
        subparsers,
        "down",
        down,
        "stop running profiles and daemons",
        "Stops the profile named (or every profile and daemon of the robot if none is named).",
    )
    p.add_argument("profile", metavar="PROFILE", nargs="?")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each (default 5)")


def _simulator_settings(args: argparse.Namespace) -> list[str]:
    """``--noise`` and ``--seed`` as ``--set`` settings of the ``sim`` module.

    Raises:
        ConfigError: an unknown noise profile.
        LaunchError: either is given for a profile without a simulator.
    """
    settings: list[str] = []
    if args.noise is not None:
        from pluto.sim.noise import noise_profile

        noise_profile(args.noise)  # an unknown name fails here, with the known ones
        settings.append(f'sim.noise="{args.noise}"')
    if args.seed is not None:
        settings.append(f"sim.seed={args.seed}")
    if settings:
        from pluto.runtime.profiles import load_profile

        if "sim" not in {e.name for e in load_profile(args.profile).entries}:
            raise LaunchError(f"--noise and --seed are the simulator's: profile {args.profile} has no sim module")
    return settings


def up(args: argparse.Namespace) -> int:
    """Start a profile and supervise it until Ctrl-C or ``pluto down``; with ``--detach``, in the background.

    The supervisor and its modules join this command's bus: a supervisor in the background and the modules in
    processes of their own are given its settings (:func:`pluto.runtime.launcher.bus_environment`).

    Returns:
        0 once the profile is down again (or, detached, once every module publishes).

    Raises:
        LaunchError: an unknown profile, a profile already up, or a module that failed to start.
    """
    from pluto.bus import Bus
    from pluto.cli.common import config_from_args
    from pluto.runtime import launcher
    from pluto.runtime.profiles import load_profile, parse_overrides, with_robots
    from pluto.runtime.runner import Interrupted, interruptible, stop_on_signals
    from pluto.runtime.supervisor import Supervisor, profile_pid_file

    config = config_from_args(args)
    args.set = [*args.set, *_simulator_settings(args)]
    profile = load_profile(args.profile, parse_overrides(args.set))
    if args.robots is not None:
        profile = with_robots(profile, args.robots)
    robot = config.bus.robot
    if args.detach:
        cmd = [sys.executable, "-m", "pluto", "up", args.profile]
        if config.path:
            cmd += ["--config", str(config.path)]
        if args.one_process:
            cmd.append("--one-process")
        for setting in args.set:
            cmd += ["--set", setting]
        if args.robots is not None:
            cmd += ["--robots", str(args.robots)]
        if args.only:
            cmd += ["--only", args.only]
        if args.paused:
            cmd.append("--paused")
        log_path = launcher.runtime_dir(robot) / f"profile-{profile.name}.log"
        process = launcher.spawn(cmd, log_path, env=launcher.bus_environment(config.bus))
        if profile.robots > 1:
            _wait_fleet(profile, config, process, log_path, args.timeout)
            return 0
        with Bus(config.bus) as bus:
            total = len(profile.entries)
            for number, entry in enumerate(profile.entries, 1):
                _starting(entry.name, number, total, args.timeout)
                try:
                    launcher.wait_publishing(
                        bus,
                        entry.spec.module,
                        args.timeout,
                        name=entry.name,
                        process=process,
                        notice=say,
                        log_path=launcher.runtime_dir(robot) / f"{entry.name}.log",
                    )
                except LaunchError as err:
                    if process.poll() is None:
                        launcher.terminate(process.pid)
                    raise LaunchError(f"{err}; {launcher.quote_log(log_path, 8)}") from None
        print(f"profile {profile.name} is up (supervisor pid {process.pid}); `pluto down` stops it")
        return 0
    # some robots of a fleet (--only) have a pid file of their own: `pluto down fleet@pluto-2` stops them
    up_name = f"{profile.name}@{args.only.replace(',', '+')}" if args.only else profile.name
    pid_file = profile_pid_file(robot, up_name)
    if launcher.read_pid(Path(pid_file)) is not None:
        raise LaunchError(f"profile {up_name} is already up for robot {robot}; `pluto down {up_name}`")
    if profile.robots > 1:
        if args.one_process or args.only:
            only = [name.strip() for name in args.only.split(",")] if args.only else None
            # a robot's process of a `pluto up` with a process per robot: `pluto down` stops that one, which stops it
            supervised = launcher.ends_with_parent()
            _up_fleet(profile, config, None if supervised else Path(pid_file), args.timeout, args.paused, only=only)
        else:
            overrides = parse_overrides(args.set)
            _up_fleet(profile, config, Path(pid_file), args.timeout, args.paused, overrides=overrides)
        print(f"profile {profile.name} is down")
        return 0
    if args.only:
        raise LaunchError(f"--only names robots of a profile for several: {profile.name} runs one (try --robots N)")
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(
            bus,
            profile,
            config,
            one_process=args.one_process,
            startup_timeout=args.timeout,
            progress=lambda name, number, total: _starting(name, number, total, args.timeout),
            notice=say,
        )
        Path(pid_file).write_text(f"{os.getpid()}\n")
        try:
            with interruptible(stop):  # a Ctrl-C while the modules start stops them there
                supervisor.start(resume=not args.paused)
            print(
                f"profile {profile.name} is up: {', '.join(e.name for e in profile.entries)} "
                f"(Ctrl-C or `pluto down` stops it)",
                flush=True,
            )
            supervisor.run(stop)
        except Interrupted:
            pass
        finally:
            supervisor.shutdown()
            Path(pid_file).unlink(missing_ok=True)
    print(f"profile {profile.name} is down")
    return 0


def _up_fleet(
    profile: Profile,
    config: Config,
    pid_file: Path | None,
    timeout: float,
    paused: bool,
    *,
    only: list[str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Run ``profile`` for its robots in the foreground until Ctrl-C or ``pluto down``: a process each
    (:class:`pluto.sim.robot_processes.RobotProcesses`, given the ``overrides`` of the command line), or all of them
    (or ``only`` these) in this process (:class:`pluto.sim.fleet.Fleet`)."""
    from pluto.runtime.runner import Interrupted, interruptible, stop_on_signals
    from pluto.sim.fleet import Fleet
    from pluto.sim.robot_processes import RobotProcesses

    def progress(name: str, number: int, total: int) -> None:
        _starting(name, number, total, timeout)

    with stop_on_signals() as stop:
        runner: Fleet | RobotProcesses
        if overrides is not None:
            runner = RobotProcesses(
                profile, config, overrides=overrides, startup_timeout=timeout, progress=progress, notice=say
            )
        else:
            runner = Fleet(profile, config, only=only, startup_timeout=timeout, progress=progress, notice=say)
        if pid_file is not None:
            pid_file.write_text(f"{os.getpid()}\n")
        try:
            with interruptible(stop):
                runner.start(resume=not paused)
            how = ", a process each" if overrides is not None else ""
            print(
                f"profile {profile.name} is up for {len(runner.names)} robots in one lock-step{how}: "
                f"{', '.join(runner.names)}, each running {', '.join(e.name for e in profile.entries)} "
                "(`pluto mom --all-robots` lists them; Ctrl-C or `pluto down` stops them)",
                flush=True,
            )
            stop.wait()
        except Interrupted:
            pass
        finally:
            runner.shutdown()
            if pid_file is not None:
                pid_file.unlink(missing_ok=True)


def _wait_fleet(profile: Profile, config: Config, process: Any, log_path: Path, timeout: float) -> None:
    """Wait until a detached ``pluto up`` of several robots has every module of every robot publishing."""
    import msgspec

    from pluto.bus import Bus
    from pluto.runtime import launcher
    from pluto.sim.fleet import fleet_robots

    names = [str(r.name) for r in fleet_robots(profile, profile.robots, config.bus.robot)]
    total, number = len(names) * len(profile.entries), 0
    for robot in names:
        with Bus(msgspec.structs.replace(config.bus, robot=robot)) as bus:
            for entry in profile.entries:
                number += 1
                _starting(f"{robot}/{entry.name}", number, total, timeout)
                try:
                    launcher.wait_publishing(
                        bus, entry.spec.module, timeout, name=entry.name, process=process, notice=say, held=True
                    )
                except LaunchError as err:
                    if process.poll() is None:
                        launcher.terminate(process.pid)
                    raise LaunchError(f"{err}; {launcher.quote_log(log_path, 8)}") from None
    print(f"profile {profile.name} is up for {', '.join(names)} (pid {process.pid}); `pluto down` stops it")


def _starting(name: str, number: int, total: int, timeout: float) -> None:
    """Say which module ``pluto up`` waits for now, and for how long (on stderr)."""
    from pluto.runtime import launcher

    limit = max(timeout, launcher.STARTING_LIMIT)
    say(
        f"[{number}/{total}] starting {name}, waiting until it publishes "
        f"(up to {timeout:g} s, or {limit:g} s while it says it is starting) ..."
    )


def down(args: argparse.Namespace) -> int:
    """Stop the profile named, or every profile and daemon of the robot.

    Returns:
        0 (also when nothing was running).

    Raises:
        LaunchError: the profile named is not up.
    """
    from pluto.cli.common import config_from_args
    from pluto.runtime import launcher
    from pluto.runtime.supervisor import profile_pid_file

    robot = config_from_args(args).bus.robot
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
