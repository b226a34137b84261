"""``pluto router``: a Zenoh router, the meeting point of the robot's machines."""

from __future__ import annotations

import argparse

import msgspec

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import PlutoError
from pluto.runtime.runner import stop_on_signals

__all__ = ["DEFAULT_LISTEN", "register", "run"]

DEFAULT_LISTEN = "tcp/127.0.0.1:7447"
"""Where the router listens without --listen: this machine only."""


def register(subparsers: Subparsers) -> None:
    """Register the ``router`` subcommand."""
    p = add_parser(
        subparsers,
        "router",
        run,
        "run a bus router, the meeting point for several machines",
        "Runs a Zenoh router. On every machine of the robot set PLUTO_CONNECT (or bus.connect in the\n"
        "configuration file) to its endpoint. It listens on the loopback only unless told otherwise.\n\n"
        "example: pluto router --listen tcp/0.0.0.0:7447",
    )
    p.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"endpoint to listen on, repeatable (default {DEFAULT_LISTEN})",
    )


def run(args: argparse.Namespace) -> int:
    """Route until Ctrl-C or SIGTERM.

    Returns:
        0 after a clean stop.

    Raises:
        PlutoError: an endpoint cannot be listened on.
    """
    import zenoh

    listen: list[str] = args.listen or [DEFAULT_LISTEN]
    conf = zenoh.Config()
    conf.insert_json5("mode", '"router"')
    conf.insert_json5("listen/endpoints", msgspec.json.encode(listen).decode())
    conf.insert_json5("listen/exit_on_failure", "true")
    conf.insert_json5("scouting/multicast/enabled", "false")
    try:
        session = zenoh.open(conf)
    except zenoh.ZError as err:
        raise PlutoError(f"cannot listen on {', '.join(listen)} (port in use?): {err}") from None
    with stop_on_signals() as stop:
        endpoint = listen[0].replace("0.0.0.0", "<this host>")
        print(
            f"router listening on {', '.join(listen)}; set PLUTO_CONNECT={endpoint} on the robot's machines. "
            "Ctrl-C stops it.",
            flush=True,
        )
        stop.wait()
    session.close()  # type: ignore[no-untyped-call]
    return 0
