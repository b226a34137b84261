"""``pluto modules`` and ``pluto profiles``: what is installed to run."""

from __future__ import annotations

import argparse

from pluto.cli.command import Subparsers, add_parser

__all__ = ["modules", "profiles", "register"]


def register(subparsers: Subparsers) -> None:
    """Register the ``modules`` and ``profiles`` subcommands."""
    add_parser(subparsers, "modules", modules, "list the installed modules")
    add_parser(subparsers, "profiles", profiles, "list the profiles")


def modules(_args: argparse.Namespace) -> int:
    """Print every installed module and its one-line description; return 0."""
    from pluto.runtime.registry import available_modules, load_module_class

    for name in sorted(available_modules()):
        cls = load_module_class(name)
        print(f"{name:<20} {cls.description}")
    return 0


def profiles(_args: argparse.Namespace) -> int:
    """Print every profile and its description; return 0."""
    from pluto.runtime.profiles import available_profiles

    for name, description in available_profiles().items():
        print(f"{name:<20} {description}")
    return 0
