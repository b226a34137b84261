"""``pluto motion``: send commands to the motion module by hand and read its status."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.common import open_bus
from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto.movement.motion.proxy import MotionProxy

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "command the motion module: moveto, explore, investigate, stop, resume, status"

DESCRIPTION = """\
Sends one command to the running motion module (start it with `pluto start motion`) on motion/command, or prints
its status. Goals are in the Localization/Pose frame. With --wait, moveto and explore print the status as it
changes until the motion is over.

examples:
  pluto motion moveto 14 6.5 --wait      move to (14, 6.5) m by ray following; print progress until there
  pluto motion explore 3.5 8 --wait      explore 7 m x 8 m ahead of the robot, then come back home
  pluto motion investigate               go to the closest object and circle it
  pluto motion stop                      stop the motion (avoid keeps running); `pluto motion resume` goes on
  pluto motion status
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``motion`` subcommand."""
    p = add_parser(subparsers, "motion", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    moveto = actions.add_parser("moveto", help="move to a point by ray following (42)")
    moveto.add_argument("x", type=float, metavar="X", help="goal x, m (Localization/Pose frame)")
    moveto.add_argument("y", type=float, metavar="Y", help="goal y, m")
    explore = actions.add_parser("explore", help="explore a rectangle ahead of the robot, then come home (44)")
    explore.add_argument("b", type=float, metavar="B", help="half-width of the rectangle, m")
    explore.add_argument("h", type=float, metavar="H", help="height (depth ahead) of the rectangle, m")
    for q in (moveto, explore):
        q.add_argument("--wait", action="store_true", help="print progress until the motion is over")
        q.add_argument("--timeout", type=float, default=None, help="with --wait: give up after S seconds")
    actions.add_parser("investigate", help="go to the closest object and circle it (43)")
    actions.add_parser("stop", help="stop the motion (pass-through velocity 0); resume goes on")
    actions.add_parser("resume", help="resume the stopped motion, or explore the rectangle set (45)")
    actions.add_parser("status", help="print the motion module's status")


def run(args: argparse.Namespace) -> int:
    """Carry out the motion action.

    Returns:
        0 on success; 1 if a waited-for motion ended without reaching its goal or timed out.

    Raises:
        ConfigError: a value is not valid.
        LaunchError: the motion module is not running.
        BusTimeout: no status within 5 s.
    """
    from pluto.movement.motion.proxy import MotionProxy, describe_status

    with open_bus(args) as bus, MotionProxy(bus, start=False) as motion:
        if args.action == "status":
            status = motion.status() or motion.wait_status(timeout=5.0)
            print(describe_status(status), flush=True)
            return 0
        try:
            if args.action == "moveto":
                motion.moveto(args.x, args.y)
            elif args.action == "explore":
                motion.explore(args.b, args.h)
            elif args.action == "investigate":
                motion.investigate()
            elif args.action == "stop":
                motion.stop()
            else:
                motion.resume()
        except ValueError as err:
            raise ConfigError(str(err)) from err
        if not getattr(args, "wait", False):
            time.sleep(0.1)  # let the command leave before the bus closes
            return 0
        return _wait(motion, args.timeout)


def _wait(motion: MotionProxy, timeout: float | None) -> int:
    """Print the status each time it changes until the motion is over (element[3] <= 0 after it started)."""
    from pluto.movement.motion.proxy import describe_status

    deadline = None if timeout is None else time.monotonic() + timeout
    started = False
    last = None
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            print("timed out", flush=True)
            return 1
        status = motion.wait_status(timeout=5.0 if left is None else min(5.0, left))
        e = [*status.element, 0, 0, 0, 0][:4]
        key = (e[2], e[3])
        if key != last:
            print(describe_status(status), flush=True)
            last = key
        if e[3] > 0:
            started = True
        elif started or e[2] == 1:
            return 0 if e[2] == 1 else 1
