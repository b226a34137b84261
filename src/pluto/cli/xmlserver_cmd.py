"""``pluto xmlserver``: run the XML gateway in the foreground, or print its XSD."""

from __future__ import annotations

import argparse
import logging
import sys

from pluto.cli.command import Subparsers, add_param_option, add_parser

# The bus and the server are imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

MODULE = "pluto.gateways.xmlserver.module:XmlServerModule"

HELP = "run the XML gateway: programs in any language use the bus over TCP"

DESCRIPTION = """\
Serves the robot's bus to programs in any language: one small XML document per line over TCP. A client lists the
modules and interfaces, reads and subscribes to interfaces (at a rate it chooses), writes command interfaces and
calls services. It listens on 127.0.0.1 only unless --host says otherwise. The same server runs as the module
`xmlserver` (`pluto start xmlserver --port 7650`).

The secret: with --token-file, the secret in that file; else the environment variable PLUTO_XML_TOKEN, if set. A
client must then send <auth token="..."/> with it before any other request: until then it gets no data at all.
After a wrong token, the attempts from the same address are refused for a back-off that doubles up to a cap
(-p auth_backoff=0.5 -p auth_backoff_max=30). There is no option for the secret itself: a command line can be
read by every user of the computer.

Limits (-p NAME=VALUE): max_clients=100 connections, max_clients_per_address=64, idle_timeout=60 s (a client that
sends nothing and takes nothing for that long is closed, told why), request_rate=50 a second; written values are
range-checked (a speed beyond the robot's is refused, naming the field).

examples:
  pluto xmlserver                              serve on 127.0.0.1:7650
  pluto xmlserver --port 7700 --token-file ~/.config/pluto/xml-token
  PLUTO_XML_TOKEN=... pluto xmlserver -p idle_timeout=300
  pluto xmlserver --xsd > pluto-xml.xsd         the schema of every document
  printf '<read name="Base/Drive/State"/>\\n' | nc -q1 127.0.0.1 7650
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``xmlserver`` subcommand."""
    p = add_parser(subparsers, "xmlserver", run, HELP, DESCRIPTION)
    p.allow_abbrev = False  # `--token SECRET` must not be taken for `--token-file SECRET`
    p.add_argument("--port", type=int, metavar="N", help="TCP port (default 7650; 0 picks a free one)")
    p.add_argument("--host", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--token-file", metavar="FILE", help="file holding the secret clients must send first (else $PLUTO_XML_TOKEN)"
    )
    p.add_argument("--use-sim-time", action="store_true", help="pace subscriptions on the simulated clock")
    p.add_argument("--xsd", action="store_true", help="print the XSD of the protocol and exit")
    add_param_option(p, "max_clients=20")


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C (or SIGTERM), or print the XSD.

    Returns:
        0 when stopped.

    Raises:
        ConfigError: a bad parameter, an unreadable token file, or a port that cannot be bound.
    """
    from pluto.cli.common import config_from_args

    if args.xsd:
        from pluto.gateways.xmlserver.schema import xsd_text

        sys.stdout.write(xsd_text())
        return 0

    from pluto.bus import Bus
    from pluto.gateways.xmlserver.module import XmlServerModule
    from pluto.runtime.config import parse_override
    from pluto.runtime.runner import ModuleSpec, instantiate, running, stop_on_signals

    log = logging.getLogger("pluto.xmlserver")
    if log.getEffectiveLevel() > logging.INFO:  # in the foreground, every connection is shown
        log.setLevel(logging.INFO)
    config = config_from_args(args)
    params = dict(parse_override(pair) for pair in args.param)
    for option in ("port", "host", "token_file"):
        if getattr(args, option) is not None:
            params[option] = getattr(args, option)
    if args.use_sim_time:
        params["use_sim_time"] = True
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        module = instantiate(ModuleSpec(MODULE, params=params), bus, config)
        assert isinstance(module, XmlServerModule)
        with running([module]):
            host, port = module.server.address
            print(f"xmlserver listening on {host}:{port} for robot {bus.robot} (Ctrl-C stops it)", flush=True)
            stop.wait()
    return 0
