"""``pluto gps-emulate`` (or by its old name ``pluto gps-sim``): an emulated NMEA 0183 GPS receiver, for testing a GPS
host program without a receiver."""

from __future__ import annotations

import argparse
import contextlib

from pluto.errors import ConfigError
from pluto.hardware.emulate_command import (
    CommandLine,
    EmulatorLink,
    add_link_arguments,
    add_link_noise_argument,
    serve_until_signal,
)

# The emulator, pyproj and the bus are imported by run(): `pluto` imports this module for every command.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8103
"""The TCP port served by default."""

HELP = "serve an emulated NMEA 0183 GPS receiver (for testing GPS hosts and drivers)"

DESCRIPTION = """\
Pretends to be a GPS receiver at the other end of a serial line: it sends RMC, VTG, GGA, GSA and GSV sentences once
a second, on whole seconds, in the order and with the fields of a u-blox receiver (gpsd and pynmeagps read them).
The antenna drives a 20 m circle about the origin; with --sim it follows the simulated robot of a running simulation
(`pluto sim` on the same robot) through the origin's local grid; with --replay it sends a recorded NMEA file again,
one epoch (GGA to GGA) a second, in a loop.

Connect a host to the URL printed at start: socket://127.0.0.1:8103 over TCP, or with --pty a pseudo-terminal path.
Pluto's own driver: `pluto run gps --driver nmea --port socket://127.0.0.1:8103`.

`pluto gps-sim` is the same command under its old name.

examples:
  pluto gps-emulate                                    a receiver on socket://127.0.0.1:8103
  pluto gps-emulate --pty --origin 48.1173,11.5167     on a pseudo-terminal, about another origin
  pluto gps-emulate --replay drive.nmea                a recorded drive again
  pluto gps-emulate --sim --robot me                   following the simulated robot of `pluto sim --robot me`
"""


def _origin(text: str) -> tuple[float, float]:
    try:
        lat, lon = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"an origin is LAT,LON in degrees, got {text!r}") from None
    if not (-90.0 < lat < 90.0 and -180.0 <= lon <= 180.0):
        raise argparse.ArgumentTypeError(f"an origin is a latitude in (-90, 90) and a longitude in [-180, 180]: {text}")
    return lat, lon


def register(cli: CommandLine) -> None:
    """Register the ``gps-emulate`` command, also called ``gps-sim``."""
    p = cli.add_command("gps-emulate", run, HELP, DESCRIPTION, aliases=("gps-sim",))
    p.set_defaults(open_bus=cli.open_bus)
    add_link_arguments(p, DEFAULT_PORT)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--replay", metavar="FILE", help="send the sentences of this NMEA file again")
    what.add_argument("--sim", action="store_true", help="follow the simulated robot of a running simulation")
    p.add_argument(
        "--origin",
        type=_origin,
        default=(59.3498, 18.0707),
        metavar="LAT,LON",
        help="origin of the local grid, degrees (default 59.3498,18.0707, the simulated worlds')",
    )
    add_link_noise_argument(p)


def run(args: argparse.Namespace) -> int:
    """Serve the receiver until SIGINT or SIGTERM.

    Raises:
        ConfigError: a bad port, noise rate or replay file.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    link = EmulatorLink.from_args(args)
    from .emulate import CircleTrack, DeviceEmulator, NmeaReceiver, NmeaReplay, SimTruthTrack
    from .grid import LocalGrid

    grid = LocalGrid(*args.origin)
    with contextlib.ExitStack() as stack:
        device: NmeaReceiver | NmeaReplay
        if args.replay:
            try:
                device = NmeaReplay(args.replay)
            except (OSError, ValueError) as err:
                raise ConfigError(f"--replay: {err}") from err
            what = f"replaying {args.replay} ({len(device.epochs)} epochs)"
        elif args.sim:
            track = SimTruthTrack(stack.enter_context(args.open_bus(args)), grid)
            stack.callback(track.close)
            device, what = NmeaReceiver(track), "following the simulated robot"
        else:
            device, what = NmeaReceiver(CircleTrack(grid)), "driving a 20 m circle"
        emulator = DeviceEmulator(
            device, transport=link.transport, host=link.host, port=link.port, link_noise=link.noise
        )
        origin = f"{args.origin[0]:.6f},{args.origin[1]:.6f}"
        return serve_until_signal(emulator, f"NMEA GPS receiver {what}, origin {origin}{link.noise_note}.")
