"""``pluto list``: the interfaces that have a value now, or every known interface name."""

from __future__ import annotations

import argparse
import time

from pluto.cli.command import Subparsers, add_parser

__all__ = ["register", "run"]


def register(subparsers: Subparsers) -> None:
    """Register the ``list`` subcommand."""
    p = add_parser(
        subparsers,
        "list",
        run,
        "list interfaces that have a value now",
        "Lists the interfaces with a current value on this robot, with their type and age.",
    )
    p.add_argument("--all", action="store_true", help="list every known interface name and its meaning instead")


def run(args: argparse.Namespace) -> int:
    """Print the interfaces with a value (name, type, age), or with ``--all`` the table of known names.

    Returns:
        0 (also when no interface has a value).

    Raises:
        PlutoError: a bad configuration, or a bus that cannot be opened.
    """
    from pluto import names
    from pluto.cli.common import open_bus

    if args.all:
        width = max(len(n) for n in names.INTERFACES)
        for iface in names.INTERFACES.values():
            print(f"{iface.name:<{width}}  {iface.type.__name__:<14} {iface.description}")
        return 0
    with open_bus(args) as bus:
        found = bus.interface_keys()
        if not found:
            print(f"robot {bus.robot}: no interface has a value (is anything running? `pluto mom`)")
            return 0
        now = time.time()
        width = max(len(n) for n in found)
        for name, written in sorted(found.items()):
            kind = names.message_type_of(name)
            age = f"{now - written:.1f} s ago" if written else ""
            print(f"{name:<{width}}  {kind.__name__ if kind else '?':<14} {age}")
    return 0
