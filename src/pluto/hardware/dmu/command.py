"""``pluto dmu-emulate`` (or by its old name ``pluto dmu-sim``): an emulated Crossbow DMU/VG inertial unit, for testing
a host program without the unit."""

from __future__ import annotations

import argparse
import contextlib
import math

from pluto.errors import ConfigError
from pluto.hardware.emulate_command import (
    CommandLine,
    EmulatorLink,
    add_link_arguments,
    add_link_noise_argument,
    serve_until_signal,
)

# The emulator and the bus are imported by run(): `pluto` imports this module for every command.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8102
"""The TCP port served by default."""

HELP = "serve an emulated Crossbow DMU/VG inertial unit (for testing DMU hosts and drivers)"

DESCRIPTION = """\
Pretends to be a Crossbow DMU/VG inertial unit at the other end of a serial line: it answers R (ping) with H,
switches to angle (a), scaled (c) or voltage (r) mode, sends one packet per G (a G also ends the continuous mode),
streams packets (100 a second by default) after C, and answers S (serial number), v (version), B (built-in test),
b (baud change), z (zero the rate sensors) and takes T (erection rate) as the manuals say. What it measures is a
robot driving a circle on a gentle swell, or, with --sim, the simulated robot of a running simulation (`pluto sim` on
the same robot), through the simulator's inertial model.

Connect a host to the URL printed at start: socket://127.0.0.1:8102 over TCP, or with --pty a pseudo-terminal path
such as /dev/pts/5 that any serial-port program can open. Pluto's own driver: `pluto run dmu --driver crossbow
--port socket://127.0.0.1:8102`.

`pluto dmu-sim` is the same command under its old name.

examples:
  pluto dmu-emulate                         a unit on socket://127.0.0.1:8102
  pluto dmu-emulate --pty                   on a pseudo-terminal
  pluto dmu-emulate --sim --robot me        measuring the simulated robot of `pluto sim --robot me`
  pluto dmu-emulate --link-noise 0.001      drop and corrupt 0.1 % of the bytes
"""


def register(cli: CommandLine) -> None:
    """Register the ``dmu-emulate`` command, also called ``dmu-sim``."""
    p = cli.add_command("dmu-emulate", run, HELP, DESCRIPTION, aliases=("dmu-sim",))
    p.set_defaults(open_bus=cli.open_bus)
    add_link_arguments(p, DEFAULT_PORT)
    p.add_argument("--rate", type=float, default=100.0, metavar="HZ", help="packets per second when streaming")
    p.add_argument("--sim", action="store_true", help="measure the simulated robot of a running simulation")
    add_link_noise_argument(p)


def run(args: argparse.Namespace) -> int:
    """Serve the unit until SIGINT or SIGTERM.

    Raises:
        ConfigError: a bad port, rate or noise rate.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    link = EmulatorLink.from_args(args)
    if not (math.isfinite(args.rate) and 0.0 < args.rate <= 1000.0):
        raise ConfigError(f"--rate must be in (0, 1000] Hz, got {args.rate}")
    from .emulate import (
        CrossbowDevice,
        DeviceEmulator,
        InertialSource,
        SimTruthSource,
        SyntheticMotion,
    )

    with contextlib.ExitStack() as stack:
        source: InertialSource = SyntheticMotion()
        if args.sim:
            truth = SimTruthSource(stack.enter_context(args.open_bus(args)))
            stack.callback(truth.close)
            source = truth
        device = CrossbowDevice(source, rate_hz=args.rate)
        emulator = DeviceEmulator(
            device, transport=link.transport, host=link.host, port=link.port, link_noise=link.noise
        )
        what = "the simulated robot" if args.sim else "a robot driving a circle"
        banner = f"Crossbow DMU/VG unit measuring {what}, {args.rate:g} packets/s when streaming{link.noise_note}."
        return serve_until_signal(emulator, banner)
