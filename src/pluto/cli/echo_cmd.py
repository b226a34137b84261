"""``pluto echo`` and ``pluto hz``: the values of one interface as they come, and how often they come."""

from __future__ import annotations

import argparse
import itertools
import math
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.progress import say
from pluto.errors import PlutoError

if TYPE_CHECKING:
    from pluto import msgs

__all__ = ["echo", "hz", "register"]

TYPE_HELP = "message type, for an interface not in the table (`pluto list --all`)"


def register(subparsers: Subparsers) -> None:
    """Register the ``echo`` and ``hz`` subcommands."""
    p = add_parser(
        subparsers,
        "echo",
        echo,
        "print the values of an interface as they change (JSON, one per line)",
        "example: pluto echo Base/Drive/State -n 5",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--count", type=int, default=0, help="stop after this many values")
    p.add_argument("--new", action="store_true", help="skip the current value, print only new ones")
    p.add_argument("--type", help=TYPE_HELP)
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="give up after S seconds without a value (exit 1)"
    )

    p = add_parser(subparsers, "hz", hz, "measure the rate of an interface", "example: pluto hz Sick/Scan_mm")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--window", type=int, default=100, help="messages to average over (default 100)")
    p.add_argument("-n", "--count", type=int, default=0, help="stop after this many reports")
    p.add_argument("--type", help=TYPE_HELP)
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="give up after S seconds without a value (exit 1)"
    )


def _interface_type(name: str, type_name: str | None) -> type[msgs.Message]:
    from pluto import msgs, names

    if type_name:
        return msgs.message_type(type_name)
    kind = names.message_type_of(name)
    if kind is None:
        raise PlutoError(f"{name} is not a known interface; give its message type with --type")
    return kind


def echo(args: argparse.Namespace) -> int:
    """Print the interface's values as JSON, one per line, until ``--count`` values or Ctrl-C.

    While no value comes (nobody writes the interface yet), says so on stderr.

    Returns:
        0; 1 if ``--timeout`` seconds passed without a value.

    Raises:
        PlutoError: an interface of unknown type without ``--type``, a bad configuration or bus.
    """
    import msgspec

    from pluto.cli.common import open_bus
    from pluto.runtime.runner import stop_on_signals

    kind = _interface_type(args.name, args.type)
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise PlutoError(f"--timeout must be > 0 s, got {args.timeout}")
    count = 0
    done = threading.Event()
    last = time.monotonic()

    def show(value: msgs.Message) -> None:
        nonlocal count, last
        if done.is_set():
            return
        count += 1
        last = time.monotonic()
        print(msgspec.json.encode(value).decode(), flush=True)
        if args.count and count >= args.count:
            done.set()

    with open_bus(args) as bus, stop_on_signals() as stop:
        bus.create_subscription(args.name, show, kind, depth=64, current=not args.new)
        last = time.monotonic()
        told = False
        while not (done.wait(0.1) or stop.is_set()):
            quiet = time.monotonic() - last
            if not told and count == 0 and quiet >= 0.5:
                told = True
                what = "a new value" if args.new else "the first value"
                limit = f" (up to {args.timeout:g} s)" if args.timeout else " (Ctrl-C stops)"
                say(f"waiting for {what} of {args.name}{limit} ...")
            if args.timeout is not None and quiet >= args.timeout:
                say(f"no value of {args.name} for {args.timeout:g} s: is its writer running? (`pluto mom`)")
                return 1
    return 0


def hz(args: argparse.Namespace) -> int:
    """Print the interface's rate over the last ``--window`` values every second, until ``--count`` or Ctrl-C.

    Returns:
        0; 1 if ``--timeout`` seconds passed without a value.

    Raises:
        PlutoError: an interface of unknown type without ``--type``, a bad configuration or bus.
    """
    from pluto.cli.common import open_bus
    from pluto.runtime.runner import stop_on_signals

    kind = _interface_type(args.name, args.type)
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise PlutoError(f"--timeout must be > 0 s, got {args.timeout}")
    arrivals: deque[float] = deque(maxlen=args.window)
    lock = threading.Lock()

    def tick(_value: msgs.Message) -> None:
        with lock:
            arrivals.append(time.monotonic())

    with open_bus(args) as bus, stop_on_signals() as stop:
        bus.create_subscription(args.name, tick, kind, depth=1024, current=False)
        reports = 0
        began = time.monotonic()
        while not stop.wait(1.0):
            with lock:
                times = list(arrivals)
            reports += 1
            quiet = time.monotonic() - (times[-1] if times else began)
            if args.timeout is not None and quiet >= args.timeout:
                say(f"no value of {args.name} for {args.timeout:g} s: is its writer running? (`pluto mom`)")
                return 1
            if len(times) < 2:
                print(f"{args.name}: no new messages", flush=True)
            else:
                periods = [b - a for a, b in itertools.pairwise(times)]
                mean = sum(periods) / len(periods)
                std = math.sqrt(sum((p - mean) ** 2 for p in periods) / len(periods))
                print(
                    f"{args.name}: average rate {1 / mean:.2f} Hz  min {min(periods) * 1000:.1f} ms  "
                    f"max {max(periods) * 1000:.1f} ms  std dev {std * 1000:.2f} ms  window {len(times)}",
                    flush=True,
                )
            if args.count and reports >= args.count:
                break
    return 0
