"""The shape every ``pluto`` subcommand shares: its parser, with the common options and verbatim help text.

Each command lives in a module of its own (or with the few verbs of its family) that offers ``register(subparsers)``;
:mod:`pluto.cli.main` builds the ``pluto`` parser from the list of them.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import TypeAlias

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``parser.add_subparsers()`` returns: where a command registers itself."""


def add_bus_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE`` and ``--robot NAME`` to a parser (read by :func:`pluto.cli.common.config_from_args`).

    Neither has a default in the namespace (``argparse.SUPPRESS``): an option given before the command's name is not
    reset by the command's own parser, and an option missing from the namespace was not given.
    """
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="configuration file (default: PLUTO_CONFIG, ./pluto.toml, ~/.config/pluto/config.toml)",
    )
    parser.add_argument(
        "--robot",
        metavar="NAME",
        default=argparse.SUPPRESS,
        help="robot to work on (default: PLUTO_ROBOT or the config)",
    )


@functools.cache
def common_options() -> argparse.ArgumentParser:
    """The options every command takes, before or after its name: ``--config``, ``--robot`` and ``-v``."""
    parser = argparse.ArgumentParser(add_help=False)
    add_bus_arguments(parser)
    # SUPPRESS: an option given before the command must not be reset by the command's own default.
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="more log output: -v Pluto's details, -vv also the libraries' (numba, Zenoh)",
    )
    return parser


def add_parser(
    sub: Subparsers,
    name: str,
    func: Callable[[argparse.Namespace], int],
    help_text: str,
    description: str = "",
    parents: Sequence[argparse.ArgumentParser] | None = None,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` that runs ``func``; return its parser for the command's own options.

    Args:
        sub: the subparsers of the ``pluto`` parser (or of a command with actions).
        help_text: one line for the list of commands.  description: the command's help, printed as written
            (default: ``help_text``).
        parents: parsers whose options the command shares (default: :func:`common_options`).
    """
    parser = sub.add_parser(
        name,
        help=help_text,
        description=description or help_text,
        parents=list((common_options(),) if parents is None else parents),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=func)
    return parser


def add_param_option(parser: argparse.ArgumentParser, example: str) -> None:
    """Add ``-p/--param NAME=VALUE`` (repeatable): another parameter of the module a command runs.

    Args:
        example: a parameter of that module for the help, e.g. ``max_clients=20``.
    """
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"another parameter of the module, e.g. -p {example} (repeatable)",
    )
