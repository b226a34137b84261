"""``pluto sim``: the simulated robot in the foreground, with its time and pose on a status line."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from pluto.cli.command import Subparsers, add_parser

# The simulator and the supervisor are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run", "sim_rate"]

HELP = "run the simulated robot (world, clock, base, wrist, laser, inertial unit, GPS) and localization"

DESCRIPTION = (
    "Runs the simulated robot until Ctrl-C: a world from a map file, simulated time at --rate times real\n"
    "time, and the dummy hardware modules on their usual interfaces, with the localization module on\n"
    "top of them (the `sim` profile: `pluto profiles`). Drive it by writing\n"
    "Base/Drive/Command; watch it with `pluto mom`, `pluto echo Base/Drive/State`. The status line shows\n"
    "the simulated time and the real-time factor achieved.\n\n"
    "With --lockstep the time advances one tick only after every module following it has finished its\n"
    "step: the same seed gives the same run whatever the load. --rate max runs in lock-step as fast as\n"
    "the modules go.\n\n"
    "example: pluto sim --world campus --rate 10 --noise realistic --seed 7\n"
    "example: pluto sim --rate max --seed 3\n"
    "example: pluto sim --lockstep --rate 2\n\n"
    "With --robots N the first N robots the world places (its <robots>) are simulated at once, each\n"
    "under its own robot name (<robot>-1, ... or the world file's names) with its own modules, in one\n"
    "process and one clock: each robot's laser, sonar and bumpers meet the others. `pluto mom\n"
    "--all-robots` lists them; PLUTO_ROBOT=pluto-2 makes any command talk to the second.\n"
    "example: pluto sim --robots 3 --rate max"
)


def sim_rate(text: str) -> float | str:
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


def register(subparsers: Subparsers) -> None:
    """Register the ``sim`` subcommand."""
    p = add_parser(subparsers, "sim", run, HELP, DESCRIPTION)
    p.add_argument("--world", default="office", help="office, campus, clutter or a map file (default office)")
    p.add_argument(
        "--rate",
        type=sim_rate,
        default=1.0,
        help='simulated seconds per second, or "max": as fast as possible, in lock-step (default 1)',
    )
    p.add_argument(
        "--lockstep", action="store_true", help="advance the time only when every module has finished its step"
    )
    p.add_argument(
        "--noise",
        default="ideal",
        help="ideal (default); basic: the devices' errors in a world as mapped; realistic: a rough world (range "
        "noise growing with the range, mixed pixels, lost echoes, glass, walls a few cm off the map, unmapped "
        "clutter, wheel slips)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0)")
    p.add_argument("--processes", action="store_true", help="one process per module instead of one for all")
    p.add_argument("--duration", type=float, default=0.0, help="wall-clock seconds to run (default: until Ctrl-C)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds each module has to start (default 20)")
    p.add_argument(
        "--robots",
        type=int,
        default=1,
        metavar="N",
        help="simulate the first N robots the world places, each under its own robot name (default 1)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the simulated robot until Ctrl-C or ``--duration``.

    Returns:
        0 after a clean stop.

    Raises:
        PlutoError: a bad world, noise profile or configuration, or a module that failed to start.
    """
    from pluto import names
    from pluto.bus import Bus
    from pluto.cli.common import config_from_args
    from pluto.errors import LaunchError
    from pluto.runtime.profiles import load_profile, with_params, with_robots
    from pluto.runtime.runner import stop_on_signals
    from pluto.runtime.supervisor import Supervisor
    from pluto.sim.noise import noise_profile
    from pluto.sim.world import load_world

    config = config_from_args(args)
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
    if args.robots != 1:
        if args.processes:
            raise LaunchError("--processes: a simulation of several robots runs in one process")
        _run_fleet(args, with_robots(profile, args.robots), config, f"{pace}{' in lock-step' if lockstep else ''}")
        return 0
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


def _run_fleet(args: argparse.Namespace, profile: Any, config: Any, pace: str) -> None:
    """Run the ``sim`` profile for several robots (:class:`pluto.sim.fleet.Fleet`) until Ctrl-C or ``--duration``,
    with every robot's position on the status line."""
    from pluto import msgs, names
    from pluto.runtime.runner import stop_on_signals
    from pluto.sim.fleet import Fleet

    with stop_on_signals() as stop:
        fleet = Fleet(profile, config, startup_timeout=args.timeout)
        try:
            fleet.start()
            print(
                f"{len(fleet.names)} simulated robots up in world {fleet.sim_params.world} {pace}, noise "
                f"{args.noise}, seed {args.seed}: {', '.join(fleet.names)}, each with "
                f"{', '.join(e.name for e in profile.entries)}. `pluto mom --all-robots` lists them; "
                f"PLUTO_ROBOT={fleet.names[-1]} makes a command talk to the last. Ctrl-C stops them.",
                flush=True,
            )
            bus = fleet.buses[fleet.names[0]]
            clock = bus.create_reader(names.CLOCK)
            truths = {r: bus.create_reader(names.SIM_TRUTH, msgs.Odometry, robot=r) for r in fleet.names}
            end = time.monotonic() + args.duration if args.duration else math.inf
            wall0 = time.monotonic()
            first = clock.read()
            sim0 = first.stamp if first else 0.0
            while not stop.wait(1.0) and time.monotonic() < end:
                tick = clock.read()
                if tick is None:
                    continue
                factor = (tick.stamp - sim0) / max(time.monotonic() - wall0, 1e-9)
                where = "  ".join(
                    f"{r} ({pose.x:.1f}, {pose.y:.1f})" for r, reader in truths.items() if (pose := reader.read())
                )
                print(f"\rsim time {tick.stamp:8.1f} s (real-time factor {factor:5.1f})  {where}", end="", flush=True)
            print()
        finally:
            fleet.shutdown()
