"""``pluto pub``: write a value to an interface by hand (ROS 2's ``topic pub``).

Strategy: the value is JSON decoded straight into the interface's message type, so msgspec checks every field and
its type, and then the robot's limits check the numbers (:func:`pluto.limits.check`), as for any value entering the
robot. What happens next follows the two kinds of interface (docs/design.md, principle 5):

- a *command* (``drive/command``, ``Base/Drive/Command``, ...) is good only for a few seconds at its receiver, so it
  is repeated at ``--rate`` until Ctrl-C (or ``--count`` values), else the receiver would stop by its own timeout;
- a *state* keeps its value for readers that join later only while its writer lives, so it is written once (or at
  ``--rate``) and served until Ctrl-C.

Nothing is sent that the user did not write, with one exception a user expects: Ctrl-C on a repeated velocity
command (see :func:`stops`) sends one stop command of the same interface, so the robot does not roll on until its
receiver's timeout. ``--once`` and ``--count`` never send a stop: the receiver's timeout ends their command.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import threading
import time
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus

__all__ = ["decode_value", "register", "run", "stop_command", "stops"]

DESCRIPTION = """\
Writes JSON, an object of the fields of the interface's message type (`pluto list --all` lists the interfaces and
their types), to the interface NAME. A command interface (drive/command, Base/Drive/Command, avoidance/command,
motion/command, Wrist/Command, Arm/Command) is repeated at --rate (default 10 Hz) until Ctrl-C, since its receiver
forgets a command after a few seconds; any other interface is written once (or at --rate) and served to readers
that join later until Ctrl-C. --once writes one value and exits.

Ctrl-C on a velocity command (Base/Drive/Command, drive/command, avoidance/command, motion/command) sends one stop
command on the same interface (zero velocities; for motion/command its stop, cmd_flags 20), unless --no-stop.
Nothing else is ever sent for you; --once and --count end without a stop (the receiver's timeout stops the robot).
A velocity command on drive/command, Base/Drive/Command or avoidance/command then says whether the robot moved, by
its odometry, and if it did not, why (the drive's sonar protection, a bumper, the laser, no module reading it),
with exit status 1.

examples:
  pluto pub drive/command '{"cmd_flags": 10, "velocity": [0.2, 0.0]}'      drive at 0.2 m/s until Ctrl-C, then stop
  pluto pub Wrist/Command '{"position": [0.5, 0.0]}' --once                  pan the wrist to 0.5 rad
  pluto pub Localization/Post_Pose '{"pose": [1, 2, 0, 0.5, 0, 0], "cmd_flags": 1}' --once
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``pub`` subcommand."""
    p = add_parser(subparsers, "pub", run, "write a value (JSON) to an interface", DESCRIPTION)
    p.add_argument("name", metavar="NAME", help="interface name (`pluto list --all`)")
    p.add_argument("value", metavar="JSON", help="the value: a JSON object of the message type's fields")
    p.add_argument("--rate", type=float, default=None, metavar="HZ", help="write this often (commands: default 10)")
    p.add_argument("--once", action="store_true", help="write one value and exit")
    p.add_argument("-n", "--count", type=int, default=0, help="write this many values at --rate, then exit")
    p.add_argument("--no-stop", dest="stop", action="store_false", help="no stop command on Ctrl-C")
    p.add_argument("--type", help="message type, for an interface not in the table")


def _velocity_stop(value: msgs.ActuatorState) -> msgs.ActuatorState:
    from pluto import msgs

    return msgs.ActuatorState(cmd_flags=0, position=[0.0, 0.0], velocity=[0.0, 0.0])


def _avoid_stop(value: msgs.ActuatorState) -> msgs.ActuatorState:
    from pluto import msgs

    # velocity mode (T = 0) at zero speed, with the protection the user chose (A of cmd_flags = 10 A + T)
    avoidance = value.cmd_flags // 10 if 0 <= value.cmd_flags < 40 else 3
    return msgs.ActuatorState(cmd_flags=10 * avoidance, velocity=[0.0, 0.0])


def _motion_stop(value: msgs.ActuatorState) -> msgs.ActuatorState:
    from pluto import msgs

    return msgs.ActuatorState(cmd_flags=20, velocity=[0.0, 0.0])  # the motion's own stop (MotionProxy.stop)


@functools.cache
def stops() -> dict[str, Callable[[msgs.ActuatorState], msgs.ActuatorState]]:
    """The velocity command interfaces, and the stop command Ctrl-C sends on each (made from the value written)."""
    from pluto import msgs, names

    return {
        names.BASE_DRIVE_COMMAND: lambda _value: msgs.ActuatorState(cmd_flags=0, velocity=[0.0, 0.0]),
        names.DRIVE_COMMAND: _velocity_stop,
        names.AVOIDANCE_COMMAND: _avoid_stop,
        names.MOTION_COMMAND: _motion_stop,
    }


def stop_command(name: str, value: msgs.Message) -> msgs.Message | None:
    """The stop command to send on ``name`` after repeating ``value`` there, or None if it is not a velocity
    command (a wrist or arm position is left where it was sent)."""
    from pluto import msgs

    make = stops().get(name)
    if make is None or not isinstance(value, msgs.ActuatorState):
        return None
    return make(value)


def decode_value(name: str, text: str, kind: type[msgs.Message]) -> msgs.Message:
    """The JSON ``text`` as a ``kind`` for interface ``name``, checked against the robot's limits.

    Raises:
        ConfigError: not JSON, not an object of ``kind``'s fields (unknown field, wrong type), or out of range; the
            message says which and lists the fields.
    """
    import msgspec

    from pluto import limits

    fields = [f.name for f in msgspec.structs.fields(kind)]
    typed = ", ".join(f"{f.name}: {_type_name(f.type)}" for f in msgspec.structs.fields(kind))
    shape = f"{name} carries {kind.__name__} ({typed})"
    try:
        raw = msgspec.json.decode(text.encode())
    except msgspec.DecodeError as err:
        raise ConfigError(f"{name}: the value is not JSON ({err}): {text!r}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{shape}: the value must be a JSON object of those fields, got {text!r}")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{shape}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    try:
        value = msgspec.convert(raw, type=kind)
    except msgspec.ValidationError as err:
        raise ConfigError(f"{shape}: {err}") from None
    try:
        limits.check(name, value)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return value


def _type_name(kind: Any) -> str:
    """``float``, ``list[float]``: a field's type as a user writes it (without its documentation)."""
    if typing.get_origin(kind) is typing.Annotated:
        kind = typing.get_args(kind)[0]
    if isinstance(kind, type) and not typing.get_args(kind):
        return kind.__name__
    return str(kind).replace("typing.", "")


def _interface_type(name: str, type_name: str | None) -> type[msgs.Message]:
    import msgspec

    from pluto import msgs, names

    if type_name:
        try:
            return msgs.message_type(type_name)
        except (KeyError, ValueError, msgspec.DecodeError) as err:
            raise ConfigError(f"unknown message type {type_name!r}: {err}") from None
    kind = names.message_type_of(name)
    if kind is None:
        raise ConfigError(f"{name} is not a known interface (`pluto list --all`); give its message type with --type")
    return kind


def run(args: argparse.Namespace) -> int:
    """Write the value: once, at ``--rate``, or (a command) repeated until Ctrl-C.

    A velocity command (drive/command, Base/Drive/Command, avoidance/command: :func:`~pluto.cli.motion_check.asked_by`)
    then says on stdout whether the robot moved, by its odometry, and if it did not, why
    (:mod:`pluto.cli.motion_check`).

    Returns:
        0; 1 when a velocity command did not move the robot.

    Raises:
        ConfigError: a bad name, JSON, field or value, or a bad rate or count.
        BusError: the bus cannot be opened.
    """
    from pluto import names
    from pluto.cli.common import open_bus
    from pluto.cli.motion_check import MotionCheck, asked_by
    from pluto.runtime.runner import stop_on_signals

    names.check_name(args.name)
    kind = _interface_type(args.name, args.type)
    value = decode_value(args.name, args.value, kind)
    command = names.command_max_age(args.name) is not None
    rate = _rate(args.rate, args.count, command)
    asked = asked_by(args.name, value) if command else None
    with open_bus(args) as bus, stop_on_signals() as stop:
        writer = bus.create_publisher(args.name, kind)
        bus.settle()  # readers that are already there learn of the new writer before its first value
        check = MotionCheck(bus, args.name, SONAR_HINTS.get(args.name, "")) if asked is not None else None

        def outcome(repeated: bool = True) -> int:
            """Whether the robot moved as the command asked (on stdout); the exit status."""
            if check is None or asked is None:
                return 0
            verdict = check.verdict(asked, time.monotonic() - first if repeated else None)
            print(verdict.words, flush=True)
            return 0 if verdict.moved else 1

        first = time.monotonic()
        writer.write(value)
        _warn_if_unread(bus, args.name)
        if args.once or args.count == 1:
            if check is not None and asked is not None:
                check.wait_for_motion(asked)
            time.sleep(0.1)  # let the value leave before the bus closes
            return outcome(repeated=False)
        what = f"at {rate:g} Hz" if rate else "once, served to late readers"
        print(f"writing {args.name} {what} (Ctrl-C stops)", file=sys.stderr, flush=True)
        if _repeat(functools.partial(writer.write, value), rate, args.count, stop):
            time.sleep(0.1)
            return outcome()
        stopping = stop_command(args.name, value) if args.stop and command else None
        if stopping is not None:
            writer.write(stopping)
            print(f"sent one stop command on {args.name}", file=sys.stderr, flush=True)
            time.sleep(0.1)
        return outcome()


def _rate(asked: float | None, count: int, command: bool) -> float:
    """The rate to write at, Hz: ``--rate`` (``asked``), else 10 for a command and 0 (once) for a state, and 1 for
    a state with a ``--count``.

    Raises:
        ConfigError: a rate outside (0, 1000] Hz, or a negative count.
    """
    rate = asked if asked is not None else (10.0 if command else 0.0)
    if not (math.isfinite(rate) and 0.0 <= rate <= 1000.0) or (asked is not None and rate == 0.0):
        raise ConfigError(f"--rate must be in (0, 1000] Hz, got {asked}")
    if count < 0:
        raise ConfigError(f"--count must be >= 0, got {count}")
    if count and rate == 0.0:
        rate = 1.0
    return rate


def _repeat(write: Callable[[], object], rate: float, count: int, stop: threading.Event) -> bool:
    """After the first value: write it again at ``rate`` Hz until ``stop`` (Ctrl-C) or ``count`` values in all
    (0: no end); at rate 0 only wait for ``stop``. True when the count was reached.

    The writes keep to the period's grid, without a burst to catch up after a stall.
    """
    if not rate:
        while not stop.wait(0.5):
            pass
        return False
    written = 1
    period = 1.0 / rate
    next_time = time.monotonic() + period
    while not stop.wait(max(0.0, next_time - time.monotonic())):
        write()
        written += 1
        if count and written >= count:
            return True
        next_time = max(next_time + period, time.monotonic() - period)  # no burst after a stall
    return False


SONAR_HINTS = {
    "drive/command": "cmd_flags 0 (rather than 10) drives without it",
    "avoidance/command": "avoidance 2, the laser alone (cmd_flags 20 + T), leaves it off",
}
"""What to do without the drive's sonar protection, for a command that it held (see :mod:`pluto.cli.motion_check`)."""


def _warn_if_unread(bus: Bus, name: str) -> None:
    """Say on stderr when no live module reads ``name`` (a value that goes nowhere: is the module running?), and
    when a module writes it too (the two fight: each new value replaces the other's)."""
    from pluto.runtime import mom

    rows = mom.snapshot(bus, timeout=0.5)
    use = mom.interface_uses(rows).get(name)
    if use is None or not use.readers:
        print(f"note: no running module reads {name} (`pluto mom`)", file=sys.stderr, flush=True)
    rivals = [w.module for w in use.recent_writers() if w.module is not None] if use is not None else []
    if rivals:
        print(
            f"warning: {', '.join(rivals)} also {'writes' if len(rivals) == 1 else 'write'} {name}: "
            "each new value replaces the other's",
            file=sys.stderr,
            flush=True,
        )
