"""``pluto avoid``: send commands to the avoid module by hand and read its status."""

from __future__ import annotations

import argparse
import time

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.common import open_bus
from pluto.errors import ConfigError

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "command the avoid module: goto, velocity, heading, wall follow, release, status"

DESCRIPTION = """\
Sends one command to the running avoid module (start it with `pluto start avoid`) on avoidance/command, or prints
its status. Avoidance (--avoid) is 0 none, 1 sonar, 2 laser, 3 both (default). Goals and headings are in the
Localization/Pose frame. The avoid module keeps commanding the drive until the next command or a release.

examples:
  pluto avoid goto 5 2                go to (5, 2) m around obstacles; `pluto avoid status` shows 1 when there
  pluto avoid goto 5 2 --speed 0.3 --weight 2   slower, with weaker avoidance
  pluto avoid velocity 0.3 0          drive at 0.3 m/s, slowed and stopped by sonar and laser
  pluto avoid heading 1.57 0.3        turn to 1.57 rad and drive along it
  pluto avoid wall --distance 1.2     follow the wall on the left, 1.2 m from the robot centre
  pluto avoid release                 stop the robot and the avoid thread
  pluto avoid status
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``avoid`` subcommand."""
    p = add_parser(subparsers, "avoid", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    goto = actions.add_parser("goto", help="go to a point around obstacles (T = 2)")
    goto.add_argument("x", type=float, metavar="X", help="goal x, m (Localization/Pose frame)")
    goto.add_argument("y", type=float, metavar="Y", help="goal y, m")
    goto.add_argument("--speed", type=float, default=0.5, help="maximum speed, m/s (default 0.5)")
    goto.add_argument("--turn-rate", type=float, default=1.0, help="maximum turn rate, rad/s (default 1)")
    goto.add_argument(
        "--weight", type=float, default=1.0, help="goal weight: > 1 weaker avoidance, < 1 stronger (default 1)"
    )
    vel = actions.add_parser("velocity", help="drive at a linear and angular velocity (T = 0)")
    vel.add_argument("v", type=float, metavar="V", help="linear velocity, m/s")
    vel.add_argument("w", type=float, metavar="W", help="angular velocity, rad/s")
    head = actions.add_parser("heading", help="turn to a heading and drive along it (T = 1)")
    head.add_argument("heading", type=float, metavar="RAD", help="heading, rad (Localization/Pose frame)")
    head.add_argument("v", type=float, metavar="V", help="linear velocity, m/s")
    wall = actions.add_parser("wall", help="follow the wall on the robot's left (T = 3)")
    wall.add_argument("--distance", type=float, default=0.0, help="from the robot centre, m (default: module's)")
    wall.add_argument("--speed", type=float, default=0.0, help="m/s (default: the module's)")
    for q in (goto, vel, head, wall):
        q.add_argument(
            "--avoid",
            type=int,
            default=None,
            choices=(0, 1, 2, 3),
            help="0 none, 1 sonar, 2 laser, 3 both (default 3; 2 for wall)",
        )
    actions.add_parser("release", help="stop the robot and the avoid thread (cmd_flags -1)")
    actions.add_parser("status", help="print the avoid module's status")


def run(args: argparse.Namespace) -> int:
    """Carry out the avoid action.

    Returns:
        0 on success.

    Raises:
        ConfigError: a value is not valid.
        LaunchError: the avoid module is not running.
        BusTimeout: no status within 5 s (``status``).
    """
    from pluto.movement.avoid.proxy import AvoidProxy, describe_status

    with open_bus(args) as bus, AvoidProxy(bus, start=False) as avoid:
        if args.action == "status":
            status = avoid.status() or avoid.wait_status(timeout=5.0)
            print(describe_status(status), flush=True)
            return 0
        try:
            if args.action == "release":
                avoid.release()
            elif args.action == "goto":
                avoid.goto(
                    args.x, args.y, args.speed, args.turn_rate, args.weight, 3 if args.avoid is None else args.avoid
                )
            elif args.action == "velocity":
                avoid.set_velocity(args.v, args.w, 3 if args.avoid is None else args.avoid)
            elif args.action == "heading":
                avoid.hold_heading(args.heading, args.v, 3 if args.avoid is None else args.avoid)
            else:
                avoid.wall_follow(args.distance, args.speed, 2 if args.avoid is None else args.avoid)
        except ValueError as err:
            raise ConfigError(str(err)) from err
        time.sleep(0.1)  # let the command leave before the bus closes
        return 0
