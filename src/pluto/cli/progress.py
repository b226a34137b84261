"""What a waiting command tells its user: what it waits for, and a live progress line.

Every ``pluto`` command that waits says so on stderr (stdout stays for results a script reads): once, when the
wait starts to be noticeable, and as a progress line while it lasts. On a terminal the line is rewritten in place;
elsewhere (a log, a pipe) a new line is printed only when its words change or every few seconds, so a log stays
short. The outcome of the wait is a result: it goes to stdout.

The options that say how long such a command waits are added here too, with one wording: the ``status`` action and
its ``--timeout`` (:func:`add_status_action`), and ``--wait`` and ``--timeout`` for a goal (:func:`add_wait_options`).

A goal is reported reached (exit 0) only when it is verified (:func:`goal_check`): a module's word that it is there
is checked against ``Localization/Pose`` (fresh by the freshness contract, certain, at the goal); what is not
verified before the wait ends is a failure, with the reason.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from pluto.errors import BusTimeout, PlutoError

if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus
    from pluto.cli.command import Subparsers

__all__ = [
    "STATUS_SILENCE",
    "ProgressLine",
    "add_status_action",
    "add_wait_options",
    "distance_to",
    "first_value",
    "follow_status",
    "goal_check",
    "parameter",
    "say",
    "seconds",
]

T = TypeVar("T")


def say(text: str, stream: TextIO | None = None) -> None:
    """One line on stderr (what the command is waiting for, what it did on the user's behalf)."""
    print(text, file=stream or sys.stderr, flush=True)


def first_value(current: Callable[[], T | None], wait: Callable[[float], T], what: str, timeout: float) -> T:
    """The value ``current()`` has now, else the first one ``wait(timeout)`` gets, after saying on stderr what the
    command waits for.

    Raises:
        BusTimeout: as ``wait`` does, when nothing came within ``timeout`` s.
    """
    value = current()
    if value is not None:
        return value
    say(f"waiting for {what} (up to {timeout:g} s) ...")
    return wait(timeout)


def seconds(text: str) -> float:
    """A wait of ``--timeout``: a finite number of seconds > 0 (an argparse type).

    Raises:
        argparse.ArgumentTypeError: not a number, or not > 0.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and value > 0.0):
        raise argparse.ArgumentTypeError(f"a wait is > 0 s, got {text}")
    return value


def add_status_action(actions: Subparsers, what: str) -> argparse.ArgumentParser:
    """Add the ``status`` action of a module's command: print ``what`` (``"the drive's status"``), waiting up to
    ``--timeout`` s for it (:func:`first_value`)."""
    status = actions.add_parser("status", help=f"print {what}")
    status.add_argument(
        "--timeout", type=seconds, default=5.0, metavar="S", help="seconds to wait for a status (default 5)"
    )
    return status


def add_wait_options(parser: argparse.ArgumentParser, progress: str, stopped: str) -> None:
    """Add ``--wait`` (show ``progress`` until the goal is over) and ``--timeout`` (give up after S s, when what
    ``stopped`` says is stopped) to an action that sets a goal (:func:`follow_status` waits for it)."""
    parser.add_argument("--wait", action="store_true", help=progress)
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="S",
        help=f"with --wait: give up after S seconds ({stopped} is stopped, exit 1); Ctrl-C stops it too",
    )


class ProgressLine:
    """A progress line on stderr: rewritten in place on a terminal, else printed when its words change.

    Args:
        stream: where to write (default stderr).
        every: s between two lines with the same words when not on a terminal.
    """

    def __init__(self, stream: TextIO | None = None, every: float = 5.0) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._every = every
        self._words = ""
        self._printed = -float("inf")
        self._open = False

    def show(self, text: str) -> None:
        """Show ``text`` as the current progress."""
        if self._tty:
            self._stream.write("\r\x1b[K" + text)
            self._stream.flush()
            self._open = True
            return
        words = re.sub(r"-?\d+(\.\d+)?", "#", text)  # the same words with other numbers are no news
        now = time.monotonic()
        if words != self._words or now - self._printed >= self._every:
            self._words, self._printed = words, now
            print(text, file=self._stream, flush=True)

    def finish(self, text: str = "") -> None:
        """End the progress line; print the outcome ``text``, if given, on stdout (a result a script may read)."""
        if self._tty and self._open:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._open = False
        if text:
            print(text, flush=True)


STATUS_SILENCE = 5.0
"""s without a status from the module waited on after which a wait gives up (the module died or hangs)."""

Verdict = tuple[str, "tuple[bool, str] | None"]
"""What :func:`follow_status` is told of each status: the progress line, and once the wait is over (reached or
not, the outcome's words)."""


def follow_status(
    module: str,
    wait_status: Callable[[float], msgs.FVectorState],
    judge: Callable[[msgs.FVectorState, float], Verdict],
    cancel: Callable[[str], str],
    timeout: float | None,
) -> int:
    """Show a module's progress from its status until ``judge`` says the wait is over; on a timeout or Ctrl-C,
    ``cancel(reason)`` stops what was asked and gives the outcome's words.

    Args:
        module: its name, for the message when it writes no status for :data:`STATUS_SILENCE` s.
        wait_status: the next status, waiting up to the given s (raises BusTimeout).
        judge: from a status and the s since the wait began, the progress line and, once over, (reached, words).
        cancel: called once on a timeout or Ctrl-C with the reason; returns the words to print.
        timeout: s before giving up (None: no limit).

    Returns:
        the exit status: 0 reached, 1 not reached (or timed out, or the module fell silent), 130 after Ctrl-C.
    """
    from pluto.runtime.runner import stop_on_signals

    line = ProgressLine()
    sent = time.monotonic()
    deadline = None if timeout is None else sent + timeout
    heard = sent
    with stop_on_signals() as stop:
        while True:
            now = time.monotonic()
            if stop.is_set() or (deadline is not None and now >= deadline):
                line.finish(cancel("interrupted" if stop.is_set() else f"timed out after {timeout:g} s"))
                return 130 if stop.is_set() else 1
            try:
                status = wait_status(0.25)
            except BusTimeout:
                if now - heard > STATUS_SILENCE:
                    line.finish(f"{module} has written no status for {STATUS_SILENCE:g} s (`pluto mom`): giving up")
                    return 1
                continue
            heard = time.monotonic()
            progress, outcome = judge(status, heard - sent)
            line.show(progress)
            if outcome is not None:
                line.finish(outcome[1])
                return 0 if outcome[0] else 1


def distance_to(pose: msgs.PoseEstimate | None, goal: tuple[float, float]) -> str:
    """The distance from ``Localization/Pose`` to ``goal``, in words."""
    if pose is None or len(pose.pose) < 2:
        return "? m (no Localization/Pose)"
    return f"{math.hypot(goal[0] - pose.pose[0], goal[1] - pose.pose[1]):.2f} m"


VERIFY = 2.0
"""s a wait gives a module that says its goal is reached for a pose that shows it (a pose a step behind the status)
before the goal counts as not reached."""


def goal_check(
    pose: msgs.PoseEstimate | None,
    stamp: float,
    goal: tuple[float, float] | None,
    reach: float,
    certainty: float,
) -> str | None:
    """Why ``pose`` (``Localization/Pose``) does not show a goal reached, in words, or None if it does.

    It does when it is fresh at ``stamp`` (s, the robot's clock: the stamp of the status that says the goal is
    reached): its own stamp at most the interface's deadline (:func:`pluto.names.stale_after`) before; certain: its
    position standard deviation (:func:`pluto.movement.avoid.module.pose_std`) at most ``certainty`` m; and within
    ``reach`` m of ``goal`` (None: anywhere, for a goal the caller does not know).
    """
    from pluto import names
    from pluto.movement.avoid.module import pose_std  # not at import: `pluto` imports this module for every command

    if pose is None or len(pose.pose) < 2:
        return "there is no Localization/Pose"
    deadline = names.stale_after(names.LOCALIZATION_POSE) or 0.0
    age = stamp - pose.stamp
    if age > deadline:
        return f"Localization/Pose is stale ({age:.2f} s old, deadline {deadline:g} s)"
    std = pose_std(pose)
    if std > certainty:
        return f"the pose is too uncertain (position std {std:.2f} m, at most {certainty:.2f} m)"
    if goal is not None:
        distance = math.hypot(goal[0] - pose.pose[0], goal[1] - pose.pose[1])
        if distance > reach:
            return f"the pose is {distance:.2f} m from the goal (more than {reach:.2f} m)"
    return None


def parameter(bus: Bus, module: str, name: str, default: float) -> float:
    """The running ``module``'s parameter ``name`` (a number), or ``default`` if it cannot be read."""
    try:
        values: dict[str, Any] = bus.call(f"{module}/get_parameters", [name], dict[str, Any], timeout=1.0)
        return float(values[name])
    except (PlutoError, KeyError, TypeError, ValueError):
        return default
