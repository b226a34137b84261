"""``pluto player``: run the Player 1.5 server (the ``player`` module) in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

# The bus and the module are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["module_params", "register", "run"]

HELP = "run the Player 1.5 server (TCP, port 6665) in the foreground"

DESCRIPTION = """\
Serves the robot to Player 1.5 clients (libplayerc, the C++, Java and Tcl clients of the time, or
pluto.player.client.PlayerClient): position (4) from the base's odometry, position3d (30) from the localization
pose, laser (6) and sonar (5). Velocity commands go through the drive module when it runs, else straight to the
base; position commands are gotos of the avoid module. It listens on the loopback only unless --host says
otherwise. Ctrl-C stops it; when its last client with write access to position leaves, the robot is stopped, and
so it is when the clients with write access send no velocity command for 1 s (-p command_timeout=S; 0 holds a
velocity for ever, as Player 1.5 did: unsafe, a client that hangs while connected keeps the robot moving).
The same server runs as a module: `pluto start player`, or [modules.player] in a profile.

The AUTH key clients must send first is never given on the command line (every user of the computer sees command
lines): it is the first line of the file --key-file names, or else the environment variable PLUTO_PLAYER_KEY.

examples:
  pluto player                        port 6665 on 127.0.0.1
  pluto player --port 7000 --key-file ~/.config/pluto/player.key    (chmod 600 the file)
  PLUTO_PLAYER_KEY=... pluto player   the key from the environment
  pluto player --host 0.0.0.0 --use-sim-time    every network; follow the simulated clock (pluto sim)
"""

KEY_ON_THE_COMMAND_LINE = (
    "--key would show the key to every user of this computer (ps): put the key in a file readable only by you and "
    "give --key-file FILE, or set the environment variable PLUTO_PLAYER_KEY"
)


def register(subparsers: Subparsers) -> None:
    """Register the ``player`` subcommand."""
    p = add_parser(subparsers, "player", run, HELP, DESCRIPTION)
    p.set_defaults(base_verbosity=1)  # in the foreground, the server logs its clients
    p.add_argument("--port", type=int, metavar="N", help="TCP port (default 6665)")
    p.add_argument("--host", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--key-file",
        metavar="FILE",
        help="file whose first line is the AUTH key clients must send first (default: PLUTO_PLAYER_KEY, else none)",
    )
    p.add_argument("--key", metavar="KEY", help="refused: use --key-file or PLUTO_PLAYER_KEY (ps shows arguments)")
    p.add_argument(
        "--use-sim-time", action="store_true", help="follow the simulated time on Clock (rounds at simulated rates)"
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set another parameter of the module, NAME=VALUE (TOML value); repeatable",
    )


def module_params(args: argparse.Namespace) -> dict[str, Any]:
    """The ``player`` module's parameters from the command line.

    Raises:
        ConfigError: a port out of 0..65535, a malformed -p, or a key on the command line (--key, -p key=...).
    """
    from pluto.runtime.config import parse_override

    if getattr(args, "key", None) is not None:
        raise ConfigError(KEY_ON_THE_COMMAND_LINE)
    params: dict[str, Any] = {}
    for pair in args.param:
        key, value = parse_override(pair)
        if key == "key":
            raise ConfigError(KEY_ON_THE_COMMAND_LINE.replace("--key would", "-p key=... would"))
        params[key] = value
    if args.port is not None:
        if not 0 <= args.port <= 65535:
            raise ConfigError(f"--port must be in 0..65535, got {args.port}")
        params["port"] = args.port
    if args.host is not None:
        params["host"] = args.host
    if args.key_file is not None:
        params["key_file"] = str(Path(args.key_file).expanduser().absolute())
    if args.use_sim_time:
        params["use_sim_time"] = True
    return params


def run(args: argparse.Namespace) -> int:
    """Run the server until Ctrl-C or SIGTERM.

    Returns:
        0 after a clean stop.

    Raises:
        ConfigError: bad parameters, or the port cannot be bound.
    """
    from pluto.cli.common import config_from_args
    from pluto.runtime.runner import ModuleSpec, run_in_process, stop_on_signals

    params = module_params(args)
    config = config_from_args(args)
    with stop_on_signals() as stop:
        run_in_process([ModuleSpec("player", None, params)], config, stop)
    return 0
