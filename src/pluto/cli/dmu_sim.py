"""``pluto dmu-sim``: an emulated Crossbow DMU/VG inertial unit, for testing a host program without the unit."""

from __future__ import annotations

import argparse
import contextlib
import math
import threading

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

# The emulator and the bus are imported by run(): `pluto` imports this module for every command.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8102
"""The TCP port served by default."""

HELP = "serve an emulated Crossbow DMU/VG inertial unit (for testing DMU hosts and drivers)"

DESCRIPTION = """\
Pretends to be a Crossbow DMU/VG inertial unit at the other end of a serial line: it answers R (ping) with H,
switches to angle (a), scaled (c) or voltage (r) mode, sends one packet per G in polled mode, and streams packets
(100 a second by default) after C. What it measures is a robot driving a circle on a gentle swell, or, with --sim,
the simulated robot of a running simulation (`pluto sim` on the same robot), through the simulator's inertial model.

Connect a host to the URL printed at start: socket://127.0.0.1:8102 over TCP, or with --pty a pseudo-terminal path
such as /dev/pts/5 that any serial-port program can open. Pluto's own driver: `pluto run dmu --driver crossbow
--port socket://127.0.0.1:8102`.

examples:
  pluto dmu-sim                         a unit on socket://127.0.0.1:8102
  pluto dmu-sim --pty                   on a pseudo-terminal
  pluto dmu-sim --sim --robot me        measuring the simulated robot of `pluto sim --robot me`
  pluto dmu-sim --link-noise 0.001      drop and corrupt 0.1 % of the bytes
"""


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a per-byte rate is in [0, 1), got {text}")
    return value


def register(subparsers: Subparsers) -> None:
    """Register the ``dmu-sim`` subcommand."""
    p = add_parser(subparsers, "dmu-sim", run, HELP, DESCRIPTION)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    where.add_argument("--pty", action="store_true", help="serve on a new pseudo-terminal instead of TCP")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--rate", type=float, default=100.0, metavar="HZ", help="packets per second when streaming")
    p.add_argument("--sim", action="store_true", help="measure the simulated robot of a running simulation")
    p.add_argument(
        "--link-noise",
        type=_rate,
        default=0.0,
        metavar="RATE",
        help="drop and corrupt bytes in both directions, each at this per-byte rate (default 0)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve the unit until SIGINT or SIGTERM.

    Raises:
        ConfigError: a bad port, rate or noise rate.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0 to 65535, got {args.port}")
    if not (math.isfinite(args.rate) and 0.0 < args.rate <= 1000.0):
        raise ConfigError(f"--rate must be in (0, 1000] Hz, got {args.rate}")
    rate = float(args.link_noise)
    import numpy as np

    from pluto.cli.common import open_bus
    from pluto.hardware.dmu.emulator import (
        CrossbowDevice,
        DeviceEmulator,
        InertialSource,
        LinkNoise,
        SimTruthSource,
        SyntheticMotion,
    )
    from pluto.runtime.runner import stop_on_signals

    noise = LinkNoise(rate, rate, np.random.default_rng(0)) if rate > 0.0 else None
    with contextlib.ExitStack() as stack:
        source: InertialSource = SyntheticMotion()
        if args.sim:
            bus = stack.enter_context(open_bus(args))
            truth = SimTruthSource(bus)
            stack.callback(truth.close)
            source = truth
        emulator = DeviceEmulator(
            CrossbowDevice(source, rate_hz=args.rate),
            transport="pty" if args.pty else "tcp",
            host=args.host,
            port=args.port,
            link_noise=noise,
        )
        url = emulator.open_link()
        stack.callback(emulator.close_link)
        what = "the simulated robot" if args.sim else "a robot driving a circle"
        extra = f", link noise {rate:g} per byte" if noise is not None else ""
        print(f"Crossbow DMU/VG unit measuring {what}, {args.rate:g} packets/s when streaming{extra}.", flush=True)
        print(f"connect a host to: {url}", flush=True)
        print("Ctrl-C stops it.", flush=True)
        stop: threading.Event
        with stop_on_signals() as stop:
            emulator.serve(stop)
    print("stopped", flush=True)
    return 0
