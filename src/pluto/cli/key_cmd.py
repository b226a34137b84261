"""``pluto key PAGE``: keyboard interfaces to the modules, one page per module (the original's ``xxx_i`` programs)."""

from __future__ import annotations

import argparse

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

# Textual and the proxies are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["PAGE_NAMES", "register", "run"]

HELP = "keyboard interfaces: drive, avoid, motion, wrist, pose, slam, loc, arm"

PAGE_NAMES = ("drive", "avoid", "motion", "wrist", "pose", "slam", "loc", "arm")

DESCRIPTION = """\
A terminal program with a page per module: its commands on keys (shown at the bottom), its status in words, live.
F1..F8 switch pages, q quits. Works in any terminal, over ssh too; no mouse. The module must be running
(`pluto start drive`, or a profile); the page says so while it waits.

Movement keys (arrows or WASD on the drive and avoid pages) move the robot only while held: the command is sent
again while the terminal repeats the key, and a zero command follows when the repeats stop for --release seconds
(--first-repeat before the first repeat: a tap moves the robot that long).
Space and Esc stop at once. The drive's own timeout (4 s) still stops the robot if this program dies.

pages:
  drive   ↑↓←→/WASD drive (hold), +/- speed, [/] turn rate, h heading mode, t type a heading, p sonar protection
  avoid   ↑↓←→/WASD drive (hold) with avoidance, g goto x y, v avoidance 0..3, r release
  motion  m moveto x y, e explore b h, i investigate, Space stop, r resume, b rectangle, x release
  wrist   ←→ pan, ↑↓ tilt, +/- step, c centre, Space hold where it is
  pose    s start thread, x stop thread, f find wall, p set pose x y θ
  slam    s start thread, x stop thread (saves the map), m save map
  loc     the five pose interfaces; p set pose x y θ, r reset to 0 0 0, z setter back to 0
  arm     ←→ joint, ↑↓ move it, +/- step, h home, Space hold where it is

examples:
  pluto key drive
  pluto key motion --robot atrv2
  pluto key drive --speed 0.3 --release 0.5
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``key`` subcommand."""
    p = add_parser(subparsers, "key", run, HELP, DESCRIPTION)
    p.add_argument("page", choices=PAGE_NAMES, metavar="PAGE", help=f"the page to open: {', '.join(PAGE_NAMES)}")
    p.add_argument("--speed", type=float, default=0.2, help="speed of the movement keys, m/s (default 0.2)")
    p.add_argument("--turn-rate", type=float, default=0.5, help="turn rate of the movement keys, rad/s (default 0.5)")
    p.add_argument(
        "--release",
        type=float,
        default=0.4,
        metavar="SECONDS",
        help="a held key counts as released when its repeats stop for this long (default 0.4)",
    )
    p.add_argument(
        "--first-repeat",
        type=float,
        default=0.7,
        metavar="SECONDS",
        help="the same before a key's first repeat: the terminal's repeat delay (default 0.7)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the keyboard interface until the user quits.

    Returns:
        0.

    Raises:
        ConfigError: a speed, turn rate or release time that is not valid.
    """
    from pluto.cli.common import open_bus
    from pluto.cli.key.app import KeyApp
    from pluto.cli.key.teleop import TeleopParams

    try:
        params = TeleopParams(
            speed=args.speed,
            turn_rate=args.turn_rate,
            release_after=args.release,
            first_repeat=args.first_repeat,
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    with open_bus(args) as bus:
        KeyApp(bus, args.page, params).run()
    return 0
