"""``pluto p2os-sim``: a simulated Pioneer robot that speaks P2OS/ARCOS, for testing a P2OS client without a robot."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError
from pluto.hardware.base.p2os.models import ROBOT_PARAMS

if TYPE_CHECKING:
    from pluto.hardware.base.p2os.emulator import LinkNoise
    from pluto.hardware.base.p2os.robot import P2osRobot

# The emulator, numpy and the simulator are imported by run(), not here: `pluto` imports this module for every
# command and should start fast.
#
# Ctrl-C stops the command at once, whatever the world: the serving loop looks at its stop event between the
# robot's 10 ms physics steps, but one such step of a big or crowded world can take seconds. So the first SIGINT
# or SIGTERM also raises _Interrupted in the main thread, which serves: the step in progress is abandoned (the
# robot is thrown away with the process), and the link is still closed on the way out.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8101
"""The TCP port served by default (as MobileSim's; the same as :data:`.emulator.DEFAULT_PORT`)."""

HELP = "serve a simulated Pioneer robot over the P2OS protocol (for testing P2OS clients and drivers)"

DESCRIPTION = """\
Pretends to be a Pioneer robot (P2DX, P3DX, P3AT, PeopleBot, ...) at the other end of a serial line. It speaks the
P2OS/ARCOS protocol that ARIA, Player's p2os driver, ROS p2os_driver and Pluto's own p2os driver speak: the
SYNC0/SYNC1/SYNC2 handshake, a SIP every 100 ms with odometry, sonar, bumpers, battery, and the motion commands
(VEL, RVEL, VEL2, HEAD, MOVE, ...). The robot moves in a simulated world (or an empty one), bumps into its walls,
and stops by itself (the watchdog) if no command comes for the watchdog time: a PULSE keeps an idle robot's
session, never a velocity command, which a live client renews.

Connect a client to the URL printed at start: socket://127.0.0.1:8101 over TCP, or with --pty a pseudo-terminal
path such as /dev/pts/5 that any serial-port program can open. One client at a time, as on a real robot.
As on a real Pioneer the motors start disabled (send ENABLE 1). A TCP client that disconnects without CLOSE ends
its session: the robot stops and the next client synchronises at once. On a pty, as on a serial line, the robot
stays open: the next client's SYNC0 is answered with SIPs (and, once the watchdog has stopped that session, echoed
too), so it sends CLOSE, or goes on to SYNC1, and synchronises again.

examples:
  pluto p2os-sim                                  a p3dx in an empty world on socket://127.0.0.1:8101
  pluto p2os-sim --model p3dx --world office      in the office world
  pluto p2os-sim --pty --model p3at               on a pseudo-terminal instead of TCP
  pluto p2os-sim --link-noise 0.001               drop and corrupt 0.1 % of the bytes, like a radio modem
  pluto p2os-sim --world office --publish-truth   its true pose on Sim/Truth, for sick-sim --follow-sim,
                                                  dmu-sim --sim and gps-sim --sim to measure
"""


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a per-byte rate is in [0, 1), got {text}")
    return value


def register(subparsers: Subparsers) -> None:
    """Register the ``p2os-sim`` subcommand."""
    p = add_parser(subparsers, "p2os-sim", run, HELP, DESCRIPTION)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port to listen on (default {DEFAULT_PORT})")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for the network)",
    )
    p.add_argument("--pty", action="store_true", help="serve on a new pseudo-terminal instead of TCP")
    p.add_argument("--model", default="p3dx", help=f"robot model, one of {', '.join(ROBOT_PARAMS)} (default p3dx)")
    p.add_argument(
        "--world",
        default=None,
        help="world to drive in: office, campus, clutter or a map file (default: an empty world)",
    )
    p.add_argument(
        "--link-noise",
        type=_rate,
        default=0.0,
        metavar="RATE",
        help="drop and corrupt bytes in both directions, each at this per-byte rate (default 0)",
    )
    p.add_argument(
        "--watchdog",
        type=int,
        default=2000,
        metavar="MS",
        help="stop and disable the motors after this many ms without a command; 0 = never (default 2000)",
    )
    p.add_argument(
        "--publish-truth",
        action="store_true",
        help="publish the robot's true pose on Sim/Truth (50 Hz), for the sensor emulators to follow",
    )


class _Interrupted(BaseException):
    """SIGINT or SIGTERM: stop serving now (a BaseException, as KeyboardInterrupt, so no handler swallows it)."""


def run(args: argparse.Namespace) -> int:
    """Serve the robot until SIGINT or SIGTERM (Ctrl-C), which stop it at once (well within a second).

    Returns:
        0 after a clean stop.

    Raises:
        ConfigError: unknown model, bad world or map file, bad watchdog or noise rate.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    if not 0 <= args.watchdog <= 65535:
        raise ConfigError(f"--watchdog must be 0 to 65535 ms, got {args.watchdog}")
    if not (0 <= args.port <= 65535):
        raise ConfigError(f"--port must be 0 to 65535, got {args.port}")
    rate = float(args.link_noise)
    if not (math.isfinite(rate) and 0.0 <= rate < 1.0):
        raise ConfigError(f"--link-noise must be in [0, 1), got {rate}")
    import numpy as np

    from pluto.hardware.base.p2os.emulator import LinkNoise, serve_pty, serve_tcp
    from pluto.hardware.base.p2os.robot import P2osRobot
    from pluto.runtime.runner import stop_on_signals
    from pluto.sim.world import load_world

    world = None if args.world is None else load_world(args.world)
    robot = P2osRobot(args.model, world=world, watchdog=args.watchdog / 1000.0)
    noise = LinkNoise(rate, rate, np.random.default_rng(0)) if rate > 0.0 else None
    where = f"in world {world.name}" if world is not None else "in an empty world"

    def ready(url: str) -> None:
        extra = f", link noise {rate:g} per byte" if noise is not None else ""
        watchdog = f"watchdog {args.watchdog} ms" if args.watchdog else "no watchdog"
        print(f"P2OS robot '{robot.name}' ({robot.params.subclass}) {where}, {watchdog}{extra}.", flush=True)
        print(f"connect a client to: {url}", flush=True)
        print("Ctrl-C stops it.", flush=True)

    if args.publish_truth:
        _serve_publishing_truth(args, robot, noise, ready)
        print("stopped", flush=True)
        return 0
    try:
        with stop_on_signals(interrupt=_Interrupted) as stop:
            if args.pty:
                serve_pty(lambda: robot, link_noise=noise, stop=stop, on_ready=ready)
            else:
                serve_tcp(lambda: robot, args.host, args.port, link_noise=noise, stop=stop, on_ready=ready)
    except _Interrupted:
        pass
    print("stopped", flush=True)
    return 0


def _serve_publishing_truth(
    args: argparse.Namespace, robot: P2osRobot, noise: LinkNoise | None, ready: Callable[[str], None]
) -> None:
    """Serve in a background thread and publish the robot's true pose on Sim/Truth from this one until a signal."""
    from pluto import names
    from pluto.cli.common import open_bus
    from pluto.hardware.base.p2os.emulator import P2osEmulator
    from pluto.hardware.emulated import true_pose
    from pluto.runtime.runner import stop_on_signals

    transport: Literal["tcp", "pty"] = "pty" if args.pty else "tcp"
    with open_bus(args) as bus, stop_on_signals() as stop:
        emulator = P2osEmulator(robot, transport=transport, host=args.host, port=args.port, link_noise=noise)
        with emulator:
            ready(emulator.url)
            print(f"its true pose on Sim/Truth of robot {bus.robot}", flush=True)
            truth = bus.create_publisher(names.SIM_TRUTH)
            while not stop.is_set() and emulator.running:
                truth.write(true_pose(emulator, time.time()))
                stop.wait(0.02)
