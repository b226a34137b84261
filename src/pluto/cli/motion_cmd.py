"""``pluto motion``: send commands to the motion module by hand and read its status."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pluto import msgs, names
from pluto.bus import Bus
from pluto.cli import progress
from pluto.cli.command import Subparsers, add_parser
from pluto.cli.common import open_bus
from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto.movement.motion.proxy import MotionProxy

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["motion_outcome", "register", "run"]

HELP = "command the motion module: moveto, explore, investigate, stop, resume, status"

DESCRIPTION = """\
Sends one command to the running motion module (start it with `pluto start motion`) on motion/command, or prints
its status. Goals are in the Localization/Pose frame. With --wait, moveto and explore show a live progress line
(the distance to a moveto's goal, the status in words) until the motion is over: exit status 0 at the goal, 1 if
it ended elsewhere or --timeout passed; a timeout or Ctrl-C stops the motion.

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
        progress.add_wait_options(q, "print progress until the motion is over", "the motion")
    actions.add_parser("investigate", help="go to the closest object and circle it (43)")
    actions.add_parser("stop", help="stop the motion (pass-through velocity 0); resume goes on")
    actions.add_parser("resume", help="resume the stopped motion, or explore the rectangle set (45)")
    progress.add_status_action(actions, "the motion module's status")


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
            status = progress.first_value(motion.status, motion.wait_status, "the motion module's status", args.timeout)
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
        goal = (args.x, args.y) if args.action == "moveto" else None
        return _wait(bus, motion, args.timeout, goal)


SETTLE = 1.0
"""s after the command was sent during which a status at the goal is the previous command's, not this one's."""


def motion_outcome(element: list[int], started: bool, since_sent: float) -> bool | None:
    """Whether a waited-for motion is over, from its status elements: True at the goal, False ended elsewhere,
    None not yet. It is over once it was in motion (element[3] > 0) and no longer is, or when element[2] says it is
    at the goal :data:`SETTLE` s after the command (a goal already reached is never seen in motion)."""
    from pluto.movement.motion.core import AT_GOAL

    e = [*element, 0, 0, 0, 0][:4]
    if e[3] > 0 or not (started or (e[2] == AT_GOAL and since_sent >= SETTLE)):
        return None
    return e[2] == AT_GOAL


def _wait(bus: Bus, motion: MotionProxy, timeout: float | None, goal: tuple[float, float] | None) -> int:
    """Show the status (and the distance to a moveto's goal) until the motion is over; stop the motion on a
    timeout or Ctrl-C."""
    from pluto.movement.motion.proxy import describe_status

    pose = bus.create_reader(names.LOCALIZATION_POSE, fetch_timeout=0.5) if goal is not None else None
    target = f"to ({goal[0]:g}, {goal[1]:g})" if goal is not None else ""
    progress.say(
        f"waiting for the motion {target} to end".replace("  ", " ") + (f" (up to {timeout:g} s)" if timeout else "")
    )
    started = False

    def judge(status: msgs.FVectorState, since_sent: float) -> progress.Verdict:
        nonlocal started
        started = started or [*status.element, 0, 0, 0, 0][3] > 0
        distance = progress.distance_to(pose.read(), goal) + " to go; " if pose is not None and goal is not None else ""
        line = f"motion {target}: {distance}{describe_status(status)}".replace("  ", " ")
        outcome = motion_outcome(list(status.element), started, since_sent)
        if outcome is None:
            return line, None
        words = "done: " if outcome else "ended without reaching its goal: "
        return line, (outcome, words + describe_status(status))

    def cancel(reason: str) -> str:
        motion.stop()
        time.sleep(0.1)  # let the stop leave before the bus closes
        return f"{reason}: motion stopped (`pluto motion resume` goes on)"

    return progress.follow_status("motion", lambda t: motion.wait_status(timeout=t), judge, cancel, timeout)
