"""``pluto mom``: the module overview (live modules, what they write, how fast, how recently)."""

from __future__ import annotations

import argparse

from pluto.cli.command import Subparsers, add_parser

__all__ = ["register", "run"]


def register(subparsers: Subparsers) -> None:
    """Register the ``mom`` subcommand."""
    p = add_parser(
        subparsers,
        "mom",
        run,
        "list running modules, their interfaces, rates and ages",
        "The module overview: every live module, the interfaces it writes, their rate, the age of the last\n"
        "message and how many were written. A module that dies disappears at once.",
    )
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument(
        "--all-robots",
        action="store_true",
        help="every robot on the bus, each with its modules (robots share a network under their own names)",
    )
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")


def run(args: argparse.Namespace) -> int:
    """Print the overview once, or every ``--interval`` seconds until Ctrl-C with ``--watch``.

    Returns:
        0.

    Raises:
        PlutoError: a bad configuration, or a bus that cannot be opened.
    """
    from pluto.cli.common import open_bus
    from pluto.runtime import mom
    from pluto.runtime.runner import stop_on_signals

    with open_bus(args) as bus, stop_on_signals() as stop:
        while True:
            if args.all_robots:
                table = mom.render_fleet(mom.fleet_snapshot(bus), labels={bus.robot: bus.writer_labels(timeout=0.5)})
            else:
                table = mom.render(mom.snapshot(bus), bus.robot, labels=bus.writer_labels(timeout=0.5))
            if args.watch:
                print("\x1b[2J\x1b[H" + table + f"\n\n(every {args.interval:g} s; Ctrl-C to quit)", flush=True)
                if stop.wait(args.interval):
                    break
            else:
                print(table)
                break
    return 0
