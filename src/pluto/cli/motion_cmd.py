"""``pluto motion``: send commands to the motion module by hand and read its status."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from pluto.cli import progress
from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus
    from pluto.movement.motion.proxy import MotionProxy

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["motion_outcome", "register", "run"]

HELP = "command the motion module: moveto, explore, investigate, stop, resume, status"

DESCRIPTION = """\
Sends one command to the running motion module (start it with `pluto start motion`) on motion/command, or prints
its status. Goals are in the Localization/Pose frame. With --wait, moveto and explore show a live progress line
(the distance to a moveto's goal, the status in words) until the motion is over: exit status 0 only at the goal,
verified (the motion says so and Localization/Pose, fresh and certain, shows it there); 1 if it ended elsewhere,
the module restarted without its job or went silent, the pose stayed stale or too uncertain to verify the goal, or
--timeout passed (the message says what the motion was waiting for); a timeout or Ctrl-C stops the motion.

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
        0 on success; 1 if a waited-for motion ended without reaching its goal (verified by a fresh, certain pose)
        or timed out.

    Raises:
        ConfigError: a value is not valid.
        LaunchError: the motion module is not running.
        BusTimeout: no status within 5 s.
    """
    from pluto.cli.common import open_bus
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

NOT_TAKEN = 6.0
"""s after the command was sent after which a motion never seen under way was not taken (an explore waits up to
4 s for its first pose)."""


def motion_outcome(element: list[int], started: bool, since_sent: float) -> bool | None:
    """Whether a waited-for motion is over, from its status elements: True the motion says it is at the goal (to be
    verified by the pose), False it ended elsewhere, None not yet.

    It is over once it was in motion (element[3] > 0, waiting for a stale input included) and no longer is (idle
    after it was under way is at the goal or a failure, never a success by itself), or when element[2] says it is
    at the goal :data:`SETTLE` s after the command (a goal already reached is never seen in motion). A restart that
    lost the job (element[2] -3, element[4] -1) is a failure; so is a motion never seen under way :data:`NOT_TAKEN`
    s after the command."""
    from pluto.movement.motion.core import AT_GOAL, RESTART_LOST

    e = [*element, 0, 0, 0, 0, 0][:5]
    settled = started or since_sent >= SETTLE
    if settled and (e[2] == RESTART_LOST or e[4] < 0):
        return False
    if e[3] > 0:
        return None
    if started or (e[2] == AT_GOAL and since_sent >= SETTLE):
        return e[2] == AT_GOAL
    return False if since_sent >= NOT_TAKEN else None


def _ended(element: list[int], started: bool) -> str:
    """Why a motion that is over did not reach its goal, in words."""
    from pluto.movement.motion.core import RESTART_LOST, THREAD_STOPPED

    e = [*element, 0, 0, 0, 0, 0][:5]
    if e[2] == RESTART_LOST or e[4] < 0:
        return "the motion module restarted and lost its job"
    if e[3] == THREAD_STOPPED:
        return "the motion thread stopped"
    if not started:
        return "the motion never got under way (the command was not taken)"
    return "ended without reaching its goal"


def _wait(bus: Bus, motion: MotionProxy, timeout: float | None, goal: tuple[float, float] | None) -> int:
    """Show the status (and the distance to a moveto's goal) until the motion is over; stop the motion on a
    timeout or Ctrl-C."""
    from pluto import names
    from pluto.movement.motion.core import WAITING_AVOID, WAITING_POSE, WAITING_SCAN, MotionParams
    from pluto.movement.motion.proxy import describe_status

    pose = bus.create_reader(names.LOCALIZATION_POSE, fetch_timeout=0.5)
    target = f"to ({goal[0]:g}, {goal[1]:g})" if goal is not None else ""
    progress.say(
        f"waiting for the motion {target} to end".replace("  ", " ") + (f" (up to {timeout:g} s)" if timeout else "")
    )
    # the motion's own rule: at the goal within goal_tolerance (near_enough with obstacles beside it), on a pose
    # whose position std is at most a third of goal_tolerance
    tolerance = progress.parameter(bus, "motion", "goal_tolerance", MotionParams().goal_tolerance)
    reach = max(tolerance + 0.1, MotionParams().near_enough)
    waits: dict[int, str] = {
        WAITING_SCAN: "waiting for fresh laser scans",
        WAITING_POSE: "waiting for a fresh, certain pose",
        WAITING_AVOID: "waiting for avoid (its status stale)",
    }
    started = False
    waiting = ""  # what the motion waits for (a stale input), if it does
    unverified: float | None = None  # since when the motion says it is at the goal and the pose does not show it

    def judge(status: msgs.FVectorState, since_sent: float) -> progress.Verdict:
        nonlocal started, waiting, unverified
        element = [*status.element, 0, 0, 0, 0][:4]
        started = started or element[3] > 0
        waiting = waits.get(element[3], "" if element[3] > 0 else waiting)
        distance = progress.distance_to(pose.read(), goal) + " to go; " if goal is not None else ""
        line = f"motion {target}: {distance}{describe_status(status)}".replace("  ", " ")
        outcome = motion_outcome(list(status.element), started, since_sent)
        if outcome is None:
            return line, None
        if not outcome:
            return line, (False, f"{_ended(list(status.element), started)}: {describe_status(status)}")
        reason = progress.goal_check(pose.read(), status.stamp, goal, reach, tolerance / 3.0)
        if reason is None:
            return line, (True, "done: " + describe_status(status))
        unverified = since_sent if unverified is None else unverified
        if since_sent - unverified < progress.VERIFY:
            return f"{line}; checking the pose", None
        return line, (False, f"the motion says it is at the goal, but {reason}: not verified")

    def cancel(reason: str) -> str:
        motion.stop()
        time.sleep(0.1)  # let the stop leave before the bus closes
        why = f" ({waiting})" if waiting else ""
        return f"{reason}{why}: motion stopped (`pluto motion resume` goes on)"

    return progress.follow_status("motion", lambda t: motion.wait_status(timeout=t), judge, cancel, timeout)
