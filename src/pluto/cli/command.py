"""The shape every ``pluto`` subcommand shares: its parser, with the common options and verbatim help text."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace], int],
    help_text: str,
    description: str,
    parents: Sequence[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` that runs ``func``; return its parser for the command's own options.

    Args:
        sub: the subparsers of the ``pluto`` parser (or of a command with actions).
        help_text: one line for the list of commands.  description: the command's help, printed as written.
        parents: parsers whose options the command shares (the common ``--config``, ``--robot``, ``-v``).
    """
    parser = sub.add_parser(
        name,
        help=help_text,
        description=description or help_text,
        parents=list(parents),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=func)
    return parser
