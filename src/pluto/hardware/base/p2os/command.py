"""``pluto p2os-emulate`` (or by its old name ``pluto p2os-sim``): an emulated Pioneer robot that speaks P2OS/ARCOS,
for testing a P2OS client without a robot."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pluto.errors import ConfigError
from pluto.hardware.emulate_command import (
    CommandLine,
    EmulatorLink,
    add_link_arguments,
    add_link_noise_argument,
    announce,
    serve_until_signal,
)

if TYPE_CHECKING:
    from .emulate import P2osEmulator

# The emulator, numpy and the simulator are imported by run(), not here: `pluto` imports this module for every
# command and should start fast.
#
# Ctrl-C stops the command at once, whatever the world: the serving loop looks at its stop event between the
# robot's 10 ms physics steps, but one such step of a big or crowded world can take seconds. So the first SIGINT
# or SIGTERM also interrupts the main thread, which serves (serve_until_signal(stop_at_once=True)): the step in
# progress is abandoned (the robot is thrown away with the process), and the link is still closed on the way out.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8101
"""The TCP port served by default (as MobileSim's; the same as :data:`.emulate.DEFAULT_PORT`)."""

MODELS = ("p2dx", "p2de", "p2at", "p2pb", "p2pp", "p3dx", "p3at", "p3dx-sh", "p3at-sh", "peoplebot-sh")
"""The models of :data:`pluto.hardware.base.p2os.models.ROBOT_PARAMS`, for the help, which is built without importing
the codec (a test checks that they agree)."""

HELP = "serve an emulated Pioneer robot over the P2OS protocol (for testing P2OS clients and drivers)"

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
stays open: the next client's SYNC0 is answered with SIPs only (never echoed while SIPs flow), which say stopped
(0x32) as soon as the motors are disabled (the 2 s watchdog stops a robot its dead client left moving), so it
sends CLOSE, as ARIA does on a stopped SIP, and synchronises again.

`pluto p2os-sim` is the same command under its old name.

examples:
  pluto p2os-emulate                                  a p3dx in an empty world on socket://127.0.0.1:8101
  pluto p2os-emulate --model p3dx --world office      in the office world
  pluto p2os-emulate --pty --model p3at               on a pseudo-terminal instead of TCP
  pluto p2os-emulate --link-noise 0.001               drop and corrupt 0.1 % of the bytes, like a radio modem
  pluto p2os-emulate --world office --publish-truth   its true pose on Sim/Truth, for sick-emulate --follow-sim,
                                                      dmu-emulate --sim and gps-emulate --sim to measure
"""


def register(cli: CommandLine) -> None:
    """Register the ``p2os-emulate`` command, also called ``p2os-sim``."""
    p = cli.add_command("p2os-emulate", run, HELP, DESCRIPTION, aliases=("p2os-sim",))
    p.set_defaults(open_bus=cli.open_bus)
    add_link_arguments(p, DEFAULT_PORT)
    p.add_argument("--model", default="p3dx", help=f"robot model, one of {', '.join(MODELS)} (default p3dx)")
    p.add_argument(
        "--world",
        default=None,
        help="world to drive in: office, campus, clutter or a map file (default: an empty world)",
    )
    add_link_noise_argument(p)
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


def run(args: argparse.Namespace) -> int:
    """Serve the robot until SIGINT or SIGTERM (Ctrl-C), which stop it at once (well within a second).

    Returns:
        0 after a clean stop.

    Raises:
        ConfigError: unknown model, bad world or map file, bad port, watchdog or noise rate.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    if not 0 <= args.watchdog <= 65535:
        raise ConfigError(f"--watchdog must be 0 to 65535 ms, got {args.watchdog}")
    link = EmulatorLink.from_args(args)
    from pluto.hardware.base.p2os.robot import P2osRobot
    from pluto.sim.world import load_world

    from .emulate import P2osEmulator

    world = None if args.world is None else load_world(args.world)
    robot = P2osRobot(args.model, world=world, watchdog=args.watchdog / 1000.0)
    where = f"in world {world.name}" if world is not None else "in an empty world"
    watchdog = f"watchdog {args.watchdog} ms" if args.watchdog else "no watchdog"
    banner = f"P2OS robot '{robot.name}' ({robot.params.subclass}) {where}, {watchdog}{link.noise_note}."
    emulator = P2osEmulator(robot, transport=link.transport, host=link.host, port=link.port, link_noise=link.noise)
    if args.publish_truth:
        _serve_publishing_truth(args, emulator, banner)
        print("stopped", flush=True)
        return 0
    return serve_until_signal(emulator, banner, peer="client", stop_at_once=True)


def _serve_publishing_truth(args: argparse.Namespace, emulator: P2osEmulator, banner: str) -> None:
    """Serve in a background thread and publish the robot's true pose on Sim/Truth from this one until a signal."""
    from pluto import names
    from pluto.runtime.runner import stop_on_signals

    from .emulate import true_pose

    with args.open_bus(args) as bus, stop_on_signals() as stop, emulator:
        announce(banner, emulator.url, peer="client")
        print(f"its true pose on Sim/Truth of robot {bus.robot}", flush=True)
        truth = bus.create_publisher(names.SIM_TRUTH)
        while not stop.is_set() and emulator.running:
            truth.write(true_pose(emulator, time.time()))
            stop.wait(0.02)
