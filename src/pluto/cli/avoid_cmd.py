"""``pluto avoid``: send commands to the avoid module by hand and read its status."""

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
    from pluto.cli.motion_check import Asked, MotionCheck
    from pluto.movement.avoid.proxy import AvoidProxy

# The proxy is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["goto_outcome", "register", "run"]

HELP = "command the avoid module: goto, velocity, heading, wall follow, release, status"

DESCRIPTION = """\
Sends one command to the running avoid module (start it with `pluto start avoid`) on avoidance/command, or prints
its status. Avoidance (--avoid) is 0 none, 1 sonar, 2 laser, 3 both (default). Goals and headings are in the
Localization/Pose frame (the simulated office's robot starts at (10, 9.7) facing +x, along its corridor). The
avoid module keeps commanding the drive until the next command or a release. Sonar avoidance (1 or 3) also turns on
the drive's sonar protection, which holds the robot still near a wall beside it (0.3 m from a corridor's wall):
--avoid 2 steers by the laser alone.

A velocity, heading, wall or goto command (without --wait) then says whether the robot started moving, by its
odometry, and if it did not, why (the sonar or the laser, a stale pose, avoid released, no drive), with exit
status 1. After `pluto avoid release` avoid's control step is stopped: `pluto call avoid/start_activity` starts it.

examples:
  pluto avoid goto 14 10 --avoid 2    go to (14, 10) m around obstacles; `pluto avoid status` shows 1 when there
  pluto avoid goto 14 10 --avoid 2 --wait   the same, with the distance to go until there (exit 0: avoid says so
                                      and Localization/Pose, fresh and certain, shows it) or not (exit 1, and why)
  pluto avoid goto 14 10 --speed 0.3 --weight 2   slower, with weaker avoidance
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
    progress.add_wait_options(
        goto, "show the distance to go until the goal is reached (exit 0) or the robot is stuck (exit 1)", "the robot"
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
    progress.add_status_action(actions, "the avoid module's status")


def run(args: argparse.Namespace) -> int:
    """Carry out the avoid action.

    Returns:
        0 on success.

    Raises:
        ConfigError: a value is not valid.
        LaunchError: the avoid module is not running.
        BusTimeout: no status within 5 s (``status``).
    """
    from pluto import names
    from pluto.cli.common import open_bus
    from pluto.cli.motion_check import MotionCheck
    from pluto.movement.avoid.proxy import AvoidProxy, describe_status

    with open_bus(args) as bus, AvoidProxy(bus, start=False) as avoid:
        if args.action == "status":
            status = progress.first_value(avoid.status, avoid.wait_status, "the avoid module's status", args.timeout)
            print(describe_status(status), flush=True)
            return 0
        asked = _asked(args)
        check = None
        if asked is not None and not (args.action == "goto" and args.wait):
            check = MotionCheck(bus, names.AVOIDANCE_COMMAND, "--avoid 2 (the laser alone) leaves it off")
        _send(avoid, args)
        if args.action == "goto" and args.wait:
            return _wait_goto(bus, avoid, (args.x, args.y), args.timeout, _avoidance(args))
        time.sleep(0.1)  # let the command leave before the bus closes
        return _outcome(args.action, check, asked)


def _avoidance(args: argparse.Namespace) -> int:
    """The avoidance an action asks for: its --avoid, else 2 (the laser alone) for a wall follow, 3 (both) for the
    others."""
    if args.avoid is not None:
        return int(args.avoid)
    return 2 if args.action == "wall" else 3


def _send(avoid: AvoidProxy, args: argparse.Namespace) -> None:
    """Send the action's command to the avoid module.

    Raises:
        ConfigError: a value is not valid (the proxy's ValueError).
    """
    try:
        if args.action == "release":
            avoid.release()
        elif args.action == "goto":
            avoid.goto(args.x, args.y, args.speed, args.turn_rate, args.weight, _avoidance(args))
        elif args.action == "velocity":
            avoid.set_velocity(args.v, args.w, _avoidance(args))
        elif args.action == "heading":
            avoid.hold_heading(args.heading, args.v, _avoidance(args))
        else:
            avoid.wall_follow(args.distance, args.speed, _avoidance(args))
    except ValueError as err:
        raise ConfigError(str(err)) from err


def _outcome(action: str, check: MotionCheck | None, asked: Asked | None) -> int:
    """Say what became of a command sent: whether the robot started moving as ``asked`` (exit status 1 if not), or
    that it was sent (a release, or a command that asks no motion)."""
    if check is None or asked is None:
        print(
            "released: the robot is stopped, and avoid's control step too (`pluto call avoid/start_activity` "
            "starts it again)"
            if action == "release"
            else f"sent to avoid: {action} (avoidance/command)",
            flush=True,
        )
        return 0
    check.wait_for_motion(asked)
    verdict = check.verdict(asked)
    print(verdict.words, flush=True)
    return 0 if verdict.moved else 1


def _asked(args: argparse.Namespace) -> Asked | None:
    """The motion an action asks of the robot (None: none, a release)."""
    from pluto.cli.motion_check import Asked

    if args.action == "velocity":
        asked = Asked(args.v, args.w)
    elif args.action == "heading":
        asked = Asked(args.v, 0.0)
    elif args.action == "goto":
        asked = Asked(args.speed, 0.0)
    elif args.action == "wall":
        asked = Asked(args.speed or 0.3, 0.0)
    else:
        return None
    return asked if asked.v or asked.w else None


SETTLE = 1.0
"""s after the goto was sent during which a finished status is the previous goal's, not this one's."""


def goto_outcome(code: int, running_seen: bool, since_sent: float) -> bool | None:
    """Whether a goto is over, from avoid's status element[1]: True avoid says it is reached (to be verified by the
    pose), False stuck, stopped or unverified (at the goal by a pose too uncertain to tell), None not yet.

    A finished code counts only once the goto was seen running, or :data:`SETTLE` s after it was sent (the status
    of the previous goal may still be on its way; a goal already within reach is never seen running). Idle (0) after
    the goto was seen running is a failure: avoid restarted without it, or another command replaced it.
    """
    from pluto.movement.avoid.core import GOTO_REACHED, GOTO_STUCK, GOTO_UNVERIFIED, THREAD_STOPPED

    if code == 0 and running_seen:
        return False
    if code not in (GOTO_REACHED, GOTO_STUCK, GOTO_UNVERIFIED, THREAD_STOPPED):
        return None
    if not running_seen and since_sent < SETTLE:
        return None
    return code == GOTO_REACHED


def _wait_goto(bus: Bus, avoid: AvoidProxy, goal: tuple[float, float], timeout: float | None, avoidance: int) -> int:
    """Show the distance to go and the status in words until the goto is over; stop the robot on a timeout or
    Ctrl-C (the goal is cancelled: velocity 0 with the same protection)."""
    from pluto import names
    from pluto.movement.avoid.core import COMMANDER_SILENT, GOTO_RUNNING, LASER_FAULT, STALE_POSE, AvoidParams
    from pluto.movement.avoid.proxy import describe_status

    pose = bus.create_reader(names.LOCALIZATION_POSE, fetch_timeout=0.5)
    where = f"({goal[0]:g}, {goal[1]:g})"
    progress.say(
        f"waiting for avoid to reach {where}" + (f" (up to {timeout:g} s)" if timeout else "") + "; Ctrl-C stops"
    )
    # avoid's own rule: within goal_tolerance (the robot brakes after), on a pose whose position std is at most a
    # third of it
    tolerance = progress.parameter(bus, "avoid", "goal_tolerance", AvoidParams().goal_tolerance)
    holds: dict[int, str] = {
        LASER_FAULT: "held for the laser (stale scans or a fault)",
        STALE_POSE: "held for a fresh, certain pose",
        COMMANDER_SILENT: "held: its commander's lease ran out",
    }
    running_seen = False
    held = ""  # what avoid holds the robot for (a stale input), if it does
    unverified: float | None = None  # since when avoid says the goal is reached and the pose does not show it

    def judge(status: msgs.FVectorState, since_sent: float) -> progress.Verdict:
        nonlocal running_seen, held, unverified
        e0, code = [*status.element, 0, 0][:2]
        running_seen = running_seen or code == GOTO_RUNNING
        held = holds.get(e0, "")
        to_go = progress.distance_to(pose.read(), goal)
        line = f"goto {where}: {to_go} to go; {describe_status(status)}"
        outcome = goto_outcome(code, running_seen, since_sent)
        if outcome is None:
            return line, None
        if not outcome:
            why = " (avoid restarted without it, or another command replaced it)" if code == 0 else ""
            return line, (False, f"goal not reached {where}, {to_go} to go{why}: {describe_status(status)}")
        reason = progress.goal_check(pose.read(), status.stamp, goal, tolerance + 0.1, tolerance / 3.0)
        if reason is None:
            return line, (True, f"goal reached {where}, {to_go} to go: {describe_status(status)}")
        unverified = since_sent if unverified is None else unverified
        if since_sent - unverified < progress.VERIFY:
            return f"{line}; checking the pose", None
        return line, (False, f"goal not verified {where}: avoid says it is reached, but {reason}")

    def cancel(reason: str) -> str:
        avoid.set_velocity(0.0, 0.0, avoidance)
        time.sleep(0.1)  # let the stop leave before the bus closes
        why = f" ({held})" if held else ""
        return f"{reason}{why}, {progress.distance_to(pose.read(), goal)} to go: goal cancelled, robot stopped"

    return progress.follow_status("avoid", lambda t: avoid.wait_status(timeout=t), judge, cancel, timeout)
