"""``pluto foxglove``: serve the live robot to Foxglove over its WebSocket protocol, or print the shipped layout."""

from __future__ import annotations

import argparse
import logging
import sys

from pluto.cli.command import Subparsers, add_param_option, add_parser

# The bus, the SDK and the server are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

MODULE = "pluto.gateways.foxglove.module:FoxgloveModule"

HELP = "serve the live robot to Foxglove (WebSocket): scans, poses, frames, walls, logs"

DESCRIPTION = """\
Serves the live robot to Foxglove over the Foxglove WebSocket protocol, in Foxglove's well-known schemas:
/scan (LaserScan of Sick/Scan_mm, frame laser), /tf (FrameTransform: map -> odom -> base_link -> laser),
/pose and /truth (PoseInFrame of Localization/Pose and Sim/Truth), /path (PosesInFrame), /map (SceneUpdate: the
walls of the world) and /log (Log). Pluto's own interfaces are served as JSON too (Base/Drive/State, ...), so any
field can be plotted. Every message carries the stamp of the Pluto message it comes from.

In Foxglove: Open connection -> Foxglove WebSocket -> ws://127.0.0.1:8765, then import the layout that
`pluto foxglove --layout` prints (a 3-D panel with the map, the scan and the robot; a plot of speed; the log).
Lichtblick, PlotJuggler and other clients of the protocol's first name (subprotocol foxglove.websocket.v1) connect
the same way as Foxglove (foxglove.sdk.v1); a WebSocket that offers neither name is refused, saying why.
It listens on 127.0.0.1 only unless --bind says otherwise. The same server runs as the module `foxglove`.

examples:
  pluto foxglove                               serve on 127.0.0.1:8765, walls of the running simulator's world
  pluto foxglove --map campus --port 8766
  pluto foxglove --layout > pluto-layout.json  the layout to import in Foxglove
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``foxglove`` subcommand."""
    p = add_parser(subparsers, "foxglove", run, HELP, DESCRIPTION)
    p.add_argument("--port", type=int, metavar="N", help="TCP port (default 8765; 0 picks a free one)")
    p.add_argument("--bind", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--map",
        metavar="FILE|WORLD",
        help="the walls to draw: a map file or a shipped world (default: the running simulator's world, if any)",
    )
    p.add_argument(
        "--map-pose",
        choices=("localization", "truth"),
        help="what places the robot among the walls: Localization/Pose (default; Sim/Truth until one comes) or "
        "Sim/Truth (a simulation whose localization was not given the world's start pose, as in `pluto up sim`)",
    )
    p.add_argument("--layout", action="store_true", help="print the Foxglove layout shipped with Pluto and exit")
    add_param_option(p, "map_period=5")


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C (or SIGTERM), or print the layout.

    Returns:
        0 when stopped.

    Raises:
        ConfigError: a bad parameter or map, or a port that cannot be bound.
    """
    from pluto.cli.common import config_from_args

    if args.layout:
        from pluto.gateways.foxglove.module import layout_text

        sys.stdout.write(layout_text())
        return 0

    from pluto.bus import Bus
    from pluto.gateways.foxglove.module import LAYOUT_PATH, FoxgloveModule
    from pluto.runtime.config import parse_override
    from pluto.runtime.runner import ModuleSpec, instantiate, running, stop_on_signals

    log = logging.getLogger("pluto.foxglove")
    if log.getEffectiveLevel() > logging.INFO:  # in the foreground, what it serves is shown
        log.setLevel(logging.INFO)
    config = config_from_args(args)
    params = dict(parse_override(pair) for pair in args.param)
    if args.port is not None:
        params["port"] = args.port
    if args.bind is not None:
        params["host"] = args.bind
    if args.map is not None:
        params["map"] = args.map
    if args.map_pose is not None:
        params["map_pose"] = args.map_pose
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        module = instantiate(ModuleSpec(MODULE, params=params), bus, config)
        assert isinstance(module, FoxgloveModule)
        with running([module]):
            host = module.params.host
            print(
                f"foxglove listening on ws://{host}:{module.port} for robot {bus.robot} (Ctrl-C stops it); "
                f"layout: {LAYOUT_PATH}",
                flush=True,
            )
            stop.wait()
    return 0
