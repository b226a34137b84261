"""``pluto drive``: send commands to the drive module by hand and read its status."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.progress import add_status_action, first_value, say
from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto.bus import Bus

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "command the drive module: velocity, heading, stop, status"

DESCRIPTION = """\
Sends one command to the running drive module (start it with `pluto start drive`) on drive/command, or prints its
status. The drive stops by itself 4 s after the last command, so a velocity or heading command lasts about 4 s
unless --for keeps re-sending it. Sonar protection (slow down, then stop near obstacles) is on unless
--no-protect; the bumpers, acceleration limits and the timeout always apply. Sonar protection stops the robot
towards any echo nearer than 0.4 m within 90° of its way: in a corridor 0.3 m from a wall it holds the robot
still (`pluto motion moveto X Y --wait`, or `pluto avoid goto X Y --avoid 2 --wait`, steer by the laser).

Once the command is over (after --for, or a second of the robot's time for one sent once) it says whether the
robot moved, by its odometry, and if it did not, why (the sonar, a bumper, a stale input, no drive, no base),
with exit status 1.

examples:
  pluto drive velocity 0.3 0          drive forward at 0.3 m/s with sonar protection
  pluto drive velocity 0 0.5 --for 10 turn left at 0.5 rad/s for 10 s
  pluto drive heading 1.57 0.2        turn to 1.57 rad (odometry heading), then drive along it at 0.2 m/s
  pluto drive stop
  pluto drive status                  the commanded velocities and the status code
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``drive`` subcommand."""
    p = add_parser(subparsers, "drive", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    vel = actions.add_parser("velocity", help="drive at a linear and angular velocity (cmd_flags 10, or 0)")
    vel.add_argument("v", type=float, metavar="V", help="linear velocity, m/s")
    vel.add_argument("w", type=float, metavar="W", help="angular velocity, rad/s")
    head = actions.add_parser("heading", help="turn to a heading and drive along it (cmd_flags 11, or 1)")
    head.add_argument("heading", type=float, metavar="RAD", help="heading, rad, in the odometry frame")
    head.add_argument("v", type=float, metavar="V", help="linear velocity, m/s")
    for q in (vel, head):
        q.add_argument("--no-protect", dest="protect", action="store_false", help="no sonar protection")
        q.add_argument(
            "--for",
            dest="duration",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="keep re-sending the command for this long, then stop (default: send it once)",
        )
    actions.add_parser("stop", help="stop the robot")
    add_status_action(actions, "the drive's status")


def _warn_of_rivals(bus: Bus) -> None:
    """Say on stderr when a module (avoid on a goto, say) also commands the drive: the newest command wins each
    time, so the two fight."""
    from pluto import names
    from pluto.runtime import mom

    rivals = [w.module for w in mom.other_writers(bus, names.DRIVE_COMMAND) if w.module is not None]
    if rivals:
        say(
            f"warning: {', '.join(rivals)} also commands the drive (drive/command): the two fight, the newest "
            f"command winning each time; release it first (`pluto {rivals[0]} release`, or stop it)"
        )


def run(args: argparse.Namespace) -> int:
    """Carry out the drive action.

    A velocity or heading command says on stdout whether the robot moved (by its odometry) and, if it did not, why
    (:mod:`pluto.cli.motion_check`): the sonar protection, a bumper, a stale input, no drive or no base.

    Returns:
        0 on success; 1 when the robot did not move as asked.

    Raises:
        ConfigError: a value is not finite or --for is negative.
        LaunchError: the drive module is not running.
        BusTimeout: no status within 5 s (``status``).
    """
    import math

    from pluto import names
    from pluto.cli.common import open_bus
    from pluto.cli.motion_check import Asked, MotionCheck, Verdict
    from pluto.movement.drive.proxy import DriveProxy, describe_status

    values = [getattr(args, name) for name in ("v", "w", "heading", "duration") if hasattr(args, name)]
    if not all(math.isfinite(x) for x in values):
        raise ConfigError(f"drive values must be finite numbers, got {values}")
    if getattr(args, "duration", 0.0) < 0.0:
        raise ConfigError(f"--for must be >= 0, got {args.duration}")
    with open_bus(args) as bus, DriveProxy(bus, start=False) as drive:
        if args.action == "status":
            status = first_value(drive.status, drive.wait_status, "the drive's status", args.timeout)
            print(describe_status(status), flush=True)
            return 0
        if args.action == "stop":
            drive.stop()
            time.sleep(0.1)  # let the command leave before the bus closes
            print("stop sent to the drive (drive/command)", flush=True)
            return 0

        def send() -> None:
            if args.action == "velocity":
                drive.set_velocity(args.v, args.w, protect=args.protect)
            else:
                drive.hold_heading(args.heading, args.v, protect=args.protect)

        asked = Asked(args.v, args.w if args.action == "velocity" else 0.0)
        hint = "--no-protect drives without it" if args.protect else ""
        check = MotionCheck(bus, names.DRIVE_COMMAND, sonar_hint=hint) if asked.v or asked.w else None
        try:
            send()
        except ValueError as err:  # a value beyond the robot's limits (pluto.limits)
            raise ConfigError(str(err)) from err
        _warn_of_rivals(bus)
        verdict: Verdict | None = None
        if args.duration > 0.0:
            deadline = time.monotonic() + args.duration
            try:
                while time.monotonic() < deadline:
                    time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                    send()
                verdict = check.verdict(asked, args.duration) if check is not None else None
            finally:
                drive.stop()
        elif check is not None:
            check.wait_for_motion(asked)
            verdict = check.verdict(asked)
        time.sleep(0.1)  # let the command leave before the bus closes
        if verdict is None:
            print(f"sent to the drive: {args.action} (drive/command)", flush=True)
            return 0
        print(verdict.words, flush=True)
        return 0 if verdict.moved else 1
