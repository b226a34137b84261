"""``pluto warm``: compile the navigation modules' and the arm's kernels into numba's cache, once after an install."""

from __future__ import annotations

import argparse

from pluto.cli.command import Subparsers, add_parser

__all__ = ["register", "run"]


def register(subparsers: Subparsers) -> None:
    """Register the ``warm`` subcommand."""
    add_parser(
        subparsers,
        "warm",
        run,
        "compile the pose, slam and arm kernels into numba's cache (once after an install; make does it)",
        "Compiles the pose and slam modules' and the arm's numba kernels into numba's on-disk cache, so that those\n"
        "modules start in a second rather than spend up to a minute compiling on their first run. Kernels already in\n"
        "the cache are only loaded. `make` runs it after installing; run it after a plain pip install.\n\n"
        "example: pluto warm",
    )


def run(args: argparse.Namespace) -> int:
    """Compile (or load) every kernel set, saying what it does.

    Returns:
        0 when every kernel is in the cache.
    """
    from pluto.kernels import KERNELS, missing, warm_all

    warm_all()
    lacking = [kernel for name in KERNELS for kernel in missing(name)]
    if lacking:
        print(f"not in numba's cache (is its folder writable? NUMBA_CACHE_DIR): {', '.join(lacking)}")
        return 1
    print("every kernel is in numba's cache")
    return 0
