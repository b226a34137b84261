"""``pluto web``: serve the live web view of the robot (map, robot, scans, goals, MOM; teleop and moveto)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pluto.cli.command import Subparsers, add_param_option, add_parser
from pluto.errors import ConfigError

# The bus and the server are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

MODULE = "pluto.gateways.web.module:WebModule"

TOKEN_ON_THE_COMMAND_LINE = (
    "a token on the command line is shown to every user of this computer (ps): put it in a file readable only by "
    "you and give --token-file FILE, or set the environment variable PLUTO_WEB_TOKEN"
)

HELP = "serve the live web view: the robot on its map in a browser, with teleop and click-to-moveto"

DESCRIPTION = """\
Serves a page that shows the robot live in any browser: the map (the walls of the world), the robot at its true
pose (in simulation), the estimated pose (Localization/Pose) with its covariance ellipse, the path travelled, the
latest laser scan and sonar echoes, the goals (moveto, goto) and a MOM table of the modules. Buttons (or the arrow
keys) drive the robot while held and stop it when released; a click on the map sends it there (moveto on
motion/command, which needs the motion module: `pluto up mission`). Several browsers may watch at once; each gets
20 frames a second, and a slow one skips frames rather than falling behind.

It listens on 127.0.0.1 only unless --bind says otherwise. Bound elsewhere, commands need a token: the first line of
the file --token-file names, else the environment variable PLUTO_WEB_TOKEN, else one made at start; the address
printed carries it (?token=...). Watching needs none. The token is never an option of its own: every user of the
computer can read a command line. Wrong tokens make the next attempts from their address wait, longer each time.

It answers only requests that name it as localhost, 127.0.0.1, [::1] or the address it listens on, so a web page
cannot reach it through a name of its own that it points at this computer (DNS rebinding). Opened by another name
(the computer's name on the network, a reverse proxy's), give that name with --allow-host NAME.

The map: --map names a shipped world (office, campus, clutter) or a map file (a SLAM map saved as XML too);
without it, the world of the running simulator, as soon as one answers.

examples:
  pluto up mission & pluto web             then open http://127.0.0.1:8080/
  pluto demo --rate 1 & pluto web          watch the demonstration at real speed
  pluto web --bind 0.0.0.0 --port 8081     from other computers; prints the address with a new token
  pluto web --bind 0.0.0.0 --token-file ~/.config/pluto/web-token       (chmod 600 the file)
  pluto web --bind 0.0.0.0 --allow-host robot.local   opened as http://robot.local:8080/
  pluto web --map office.xml               the walls of a saved map
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``web`` subcommand."""
    p = add_parser(subparsers, "web", run, HELP, DESCRIPTION)
    p.add_argument("--port", type=int, metavar="N", help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--bind", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="file whose first line is the token browsers need to command (default: PLUTO_WEB_TOKEN, else one made "
        "at start when bound beyond 127.0.0.1)",
    )
    p.add_argument("--token", metavar="T", help="refused: use --token-file or PLUTO_WEB_TOKEN (ps shows arguments)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name or address browsers use for this server besides localhost, 127.0.0.1, [::1] and the bound "
        "address (e.g. robot.local); repeatable",
    )
    p.add_argument(
        "--map",
        metavar="FILE|WORLD",
        help="the walls to draw: a map file or a shipped world (default: the running simulator's world)",
    )
    add_param_option(p, "max_speed=0.3")


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C (or SIGTERM).

    Returns:
        0 when stopped.

    Raises:
        ConfigError: a bad parameter or map, a port that cannot be bound, or a token on the command line.
    """
    from pluto.bus import Bus
    from pluto.cli.common import config_from_args
    from pluto.gateways.web.module import WebModule
    from pluto.runtime.config import parse_override
    from pluto.runtime.runner import ModuleSpec, instantiate, running, stop_on_signals

    log = logging.getLogger("pluto.web")
    if log.getEffectiveLevel() > logging.INFO:  # in the foreground, browsers coming and going are shown
        log.setLevel(logging.INFO)
    if args.token is not None or any(parse_override(pair)[0] == "token" for pair in args.param):
        raise ConfigError(TOKEN_ON_THE_COMMAND_LINE)
    config = config_from_args(args)
    params = dict(parse_override(pair) for pair in args.param)
    for option, param in (("port", "port"), ("bind", "host"), ("map", "map")):
        if getattr(args, option) is not None:
            params[param] = getattr(args, option)
    if args.token_file is not None:
        params["token_file"] = str(Path(args.token_file).expanduser().absolute())
    if args.allow_host:
        given = params.get("allow_hosts", [])
        params["allow_hosts"] = [*(given if isinstance(given, list) else [given]), *args.allow_host]
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        module = instantiate(ModuleSpec(MODULE, params=params), bus, config)
        assert isinstance(module, WebModule)
        with running([module]):
            commands = "commands need the token in this address" if module.token else "commands allowed"
            print(f"web view of robot {bus.robot}: open {module.url}  ({commands}; Ctrl-C stops it)", flush=True)
            stop.wait()
    return 0
