"""``pluto demo``: the demonstration mission on the simulated robot (the mission itself is :mod:`pluto.cli.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.sim_cmd import sim_rate

# The mission is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "run the demonstration mission on the simulated robot, then stop"

DESCRIPTION = (
    "Starts the simulated robot in the office world with localization, the pose module (laser walls matched\n"
    "to the map) and the movement chain, sends the motion module from the corridor to the lobby, has it\n"
    "explore the lobby and come home, then into a room through its door, prints its progress, records\n"
    "every interface to an MCAP log and draws the map, the true and localized paths and the last laser scan\n"
    "with its wall lines to a PNG. Ctrl-C stops it early and cleanly.\n\n"
    "By default the simulated time runs in lock-step, as fast as the modules go: it advances one tick only\n"
    "after every module has finished its step, so the same seed gives the same run, to the last digit, on\n"
    "any machine however busy. The summary ends with lines scripts can read:\n"
    "  final true pose: x 9.865 m, y 6.713 m, θ -60.4°\n"
    "  localization error: max 0.027 m, mean 0.003 m, 95 % within 0.009 m\n"
    "  localization heading error: max 0.29°, mean 0.04°, 95 % within 0.11°\n"
    "  dead reckoning alone: max 1.660 m, 23.14° (without the pose module's walls)\n"
    "and the wall time and real-time factor achieved.\n\n"
    "example: pluto demo\n"
    "example: pluto demo --noise ideal --seed 3               (the same output at every run)\n"
    "example: pluto demo --rate 5                             (lock-step, at most 5x real time)\n"
    "example: pluto demo --no-lockstep --rate 5               (free-running time, as a robot would see it)\n"
    "example: pluto demo --devices emulated                   (the real drivers on emulators, wall clock)\n"
    "example: pluto demo --slam                               (no map: the slam module builds it on the way)\n\n"
    "With --devices emulated the same route runs on the real device drivers, each talking its device's\n"
    "protocol to an emulator (the `emulated` profile: a Pioneer over P2OS, a SICK LMS, a Crossbow DMU, an NMEA\n"
    "GPS, PowerCube wrist modules on a virtual CAN bus; the emulators on free ports of 127.0.0.1). It runs on the\n"
    "wall clock, as on a robot: no lock-step, no --rate, at real time (a few minutes), and no two runs are alike;\n"
    "--duration is then wall-clock seconds. The errors are against the Pioneer emulator's true pose (Sim/Truth).\n\n"
    "With --slam the robot starts with no map: the slam module runs instead of the pose module, building a map of\n"
    "walls from the laser while it corrects the pose, in the frame of the world's start pose. At the end it saves\n"
    "the map next to the picture (office-<time>-map.xml, a world file `pluto sim --world` and the pose module\n"
    "load), the picture draws it over the world's walls, and the summary scores it (seed 1):\n"
    "  localization error: max 0.039 m, mean 0.017 m, 95 % within 0.033 m\n"
    "  map built: 23 of the 24 walls seen mapped within 5 cm and 1° (at worst 4.3 cm, 0.46°); 25 walls in the\n"
    "    map, 0 on no true wall\n"
    "(a wall is seen when three level scans put points along 0.6 m of it; walls include the obstacles' sides)."
)


def register(subparsers: Subparsers) -> None:
    """Register the ``demo`` subcommand."""
    p = add_parser(subparsers, "demo", run, HELP, DESCRIPTION)
    p.add_argument(
        "--rate",
        type=sim_rate,
        default="max",
        help='simulated seconds per second, or "max": as fast as the modules go, lock-step only (default max)',
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the simulation's noise (default 1)")
    p.add_argument(
        "--noise",
        choices=("ideal", "basic", "realistic"),
        default="realistic",
        help="noise of the simulated world and devices (default realistic: range noise growing with the range, "
        "mixed pixels, lost echoes, glass, walls a few cm off the map, unmapped clutter, wheel slips; basic: the "
        "devices' errors in a world exactly as mapped)",
    )
    p.add_argument(
        "--no-lockstep",
        action="store_true",
        help="let the simulated time run freely at --rate (a number) instead of waiting for every module's step",
    )
    p.add_argument(
        "--devices",
        choices=("simulated", "emulated"),
        default="simulated",
        help="the simulator's devices (default), or the real drivers talking to emulators over the devices' "
        "protocols: on the wall clock, without lock-step, at real time",
    )
    p.add_argument(
        "--slam",
        action="store_true",
        help="the slam module builds the map as the robot goes, instead of the pose module matching the known one; "
        "the map is saved next to the picture and scored against the world's walls",
    )
    p.add_argument("--one-process", action="store_true", help="run the modules in this process (default: one each)")
    p.add_argument("--duration", type=float, default=900.0, help="simulated seconds before giving up (default 900)")
    p.add_argument("--goals", type=int, metavar="N", help="drive only the route's first N goals (default: all 3)")
    p.add_argument("--output", type=Path, help="folder for the picture and the log (default ./demo-output)")


def run(args: argparse.Namespace) -> int:
    """Run the mission.

    Returns:
        0 if the robot reached every goal (or was interrupted), else 1.

    Raises:
        PlutoError: a bad combination of options, or a module that failed to start.
    """
    from pluto.cli.common import config_from_args
    from pluto.cli.demo import run_demo
    from pluto.runtime.runner import Interrupted

    try:
        return run_demo(
            config_from_args(args),
            duration=args.duration,
            rate=args.rate,
            output=args.output,
            seed=args.seed,
            noise=args.noise,
            lockstep=not args.no_lockstep,
            one_process=args.one_process,
            devices=args.devices,
            slam=args.slam,
            goals=args.goals,
        )
    except Interrupted:
        print("demo interrupted while the modules started; all modules stopped", flush=True)
        return 0
