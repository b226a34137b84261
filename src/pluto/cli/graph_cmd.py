"""``pluto graph``: the running modules and the interfaces between them, as text or as an SVG picture."""

from __future__ import annotations

import argparse
from pathlib import Path

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

__all__ = ["register", "run"]

DESCRIPTION = """\
Shows which module writes which interface and which modules read it (rqt_graph's picture, from MOM): as text,
and with --svg as a picture any browser opens. An interface written by more than one writer lately is marked
(red in the picture): its writers fight.

examples:
  pluto graph
  pluto graph --svg robot.svg
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``graph`` subcommand."""
    p = add_parser(
        subparsers, "graph", run, "modules and the interfaces between them (text, or --svg FILE)", DESCRIPTION
    )
    p.add_argument("--svg", metavar="FILE", type=Path, help="also write the graph as an SVG picture to FILE")


def run(args: argparse.Namespace) -> int:
    """Print the graph as text; write it as SVG with ``--svg``.

    Returns:
        0.

    Raises:
        ConfigError: the SVG file cannot be written.
        BusError: the bus cannot be opened.
    """
    from pluto.cli.common import open_bus
    from pluto.runtime import graph, mom

    with open_bus(args) as bus:
        found = graph.build_graph(mom.snapshot(bus), labels=bus.writer_labels(timeout=0.5))
        robot = bus.robot
    print(graph.render_text(found, robot))
    if args.svg is not None:
        try:
            args.svg.write_text(graph.render_svg(found, robot), encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"cannot write {args.svg}: {err}") from None
        print(f"wrote {args.svg}")
    return 0
