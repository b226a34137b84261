"""``pluto follow``: start and stop the follow module by hand and read its status."""

from __future__ import annotations

import argparse
import time

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.progress import add_status_action, first_value
from pluto.errors import ConfigError

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "command the follow module: start following a person, stop, status"

DESCRIPTION = """\
Sends one command to the running follow module (start it with `pluto start follow`) on follow/command, or prints
its status. `start` follows the nearest person walking in front of the robot (within about 3.5 m) at the given
distance, centre to centre; the robot stops when the person is nearer, and stops for good when the person is lost
(status -1) until started again.

examples:
  pluto follow start                 follow at the module's default distance (1 m)
  pluto follow start --distance 1.5  follow at 1.5 m
  pluto follow stop                  stop following; the robot stops
  pluto follow status                searching, following, too close, lost ...; where the person is
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``follow`` subcommand."""
    p = add_parser(subparsers, "follow", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start following the nearest moving person in front (1)")
    start.add_argument(
        "--distance", type=float, default=None, metavar="D", help="distance to keep, m (0.7..5; default: the module's)"
    )
    actions.add_parser("stop", help="stop following; the robot stops (0)")
    add_status_action(actions, "the follow module's status")


def run(args: argparse.Namespace) -> int:
    """Carry out the follow action.

    Returns:
        0 on success.

    Raises:
        ConfigError: the distance is not valid.
        LaunchError: the follow module is not running.
        BusTimeout: no status within --timeout s (5 by default).
    """
    from pluto.cli.common import open_bus
    from pluto.movement.follow.proxy import FollowProxy, describe_status

    with open_bus(args) as bus, FollowProxy(bus, start=False) as follow:
        if args.action == "status":
            status = first_value(follow.status, follow.wait_status, "the follow module's status", args.timeout)
            print(describe_status(status), flush=True)
            return 0
        try:
            if args.action == "start":
                follow.follow(args.distance)
            else:
                follow.stop()
        except ValueError as err:
            raise ConfigError(str(err)) from err
        time.sleep(0.1)  # let the command leave before the bus closes
        return 0
