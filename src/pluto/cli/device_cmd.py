"""The devices' own commands on the ``pluto`` parser: each device folder of :mod:`pluto.hardware` registers its
command (``pluto sick-emulate``, ...) through :class:`ParserCommandLine`, the ``pluto`` command's side of
:class:`pluto.hardware.emulate_command.CommandLine`.

    COMMANDS = (..., device_command(sick_command.register), ...)      # in pluto.cli.main
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, common_options

if TYPE_CHECKING:
    from pluto.bus import Bus
    from pluto.hardware.emulate_command import CommandLine

__all__ = ["ParserCommandLine", "device_command"]


class ParserCommandLine:
    """A :class:`~pluto.hardware.emulate_command.CommandLine` that adds commands to the ``pluto`` parser.

    Args:
        sub: the subparsers of the ``pluto`` parser.
    """

    def __init__(self, sub: Subparsers) -> None:
        self.sub = sub

    def add_command(
        self,
        name: str,
        run: Callable[[argparse.Namespace], int],
        help_text: str,
        description: str,
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser:
        """Add the command ``name`` (and its ``aliases``) with the common options, as every ``pluto`` command."""
        parser = self.sub.add_parser(
            name,
            aliases=list(aliases),
            help=help_text,
            description=description or help_text,
            parents=[common_options()],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(func=run)
        return parser

    def open_bus(self, args: argparse.Namespace) -> Bus:
        """The robot's bus, as every ``pluto`` command finds it (:func:`pluto.cli.common.open_bus`)."""
        from pluto.cli.common import open_bus

        return open_bus(args)


def device_command(register: Callable[[CommandLine], None]) -> Callable[[Subparsers], None]:
    """A device's ``register(cli)`` as the ``pluto`` parser calls a command module's ``register(subparsers)``."""

    def register_on(sub: Subparsers) -> None:
        register(ParserCommandLine(sub))

    return register_on
