"""The shape the devices' emulate commands share (``pluto p2os-emulate``, ``sick-emulate``, ``dmu-emulate``,
``gps-emulate``; each also answers to its old name, ``p2os-sim`` and so on).

Each one serves an emulated device at the end of a link, a TCP port or a new pseudo-terminal, through a
:class:`pluto.hardware.link.LinkServer`: here are their link options (``--port``, ``--pty``, ``--host`` and
``--link-noise``), the link they ask for (:class:`EmulatorLink`), and the loop that serves until Ctrl-C and says
where to connect (:func:`serve_until_signal`).

A device's command lives in its folder (``pluto.hardware.sick.command``) and offers ``register(cli)``: it adds its
parser through :class:`CommandLine`, which the ``pluto`` command implements (:mod:`pluto.cli.device_cmd`), so the
hardware never imports the command line's package, which sits above it. A command that follows a running simulation
keeps the bus opener in its namespace (``parser.set_defaults(open_bus=cli.open_bus)``), so its ``run(args)`` opens
the robot's bus as every ``pluto`` command does: ``with args.open_bus(args) as bus:``.
"""

# The emulators, numpy, the bus and the signal handling are imported when a command runs, not here: `pluto` imports
# this module for every command and should start fast.

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from pluto.errors import ConfigError

if TYPE_CHECKING:
    from pluto.bus import Bus
    from pluto.hardware.link import LinkNoise, LinkServer

__all__ = [
    "CommandLine",
    "EmulatorLink",
    "add_link_arguments",
    "add_link_noise_argument",
    "announce",
    "noise_rate",
    "serve_until_signal",
]


class CommandLine(Protocol):
    """What the ``pluto`` command lends a device's commands: a parser with its common options, and the bus."""

    def add_command(
        self,
        name: str,
        run: Callable[[argparse.Namespace], int],
        help_text: str,
        description: str,
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser:
        """Add the command ``name`` (also called by each of ``aliases``) that runs ``run``; its parser.

        Args:
            help_text: one line for the list of commands.  description: the command's help, printed as written.
        """
        ...

    def open_bus(self, args: argparse.Namespace) -> Bus:
        """The bus of the robot the command line, the environment or the configuration file names (not opened
        before the command runs; the caller closes it).

        Raises:
            ConfigError: a bad configuration file or bus setting.
        """
        ...


def noise_rate(text: str) -> float:
    """A per-byte rate of ``--link-noise``, in [0, 1) (an argparse type).

    Raises:
        argparse.ArgumentTypeError: not a number, or out of range.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a per-byte rate is in [0, 1), got {text}")
    return value


def add_link_arguments(parser: argparse.ArgumentParser, default_port: int) -> None:
    """Add where the device is served: ``--port`` (TCP, ``default_port``) or ``--pty``, and ``--host``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", type=int, default=default_port, help=f"TCP port to listen on (default {default_port})")
    where.add_argument("--pty", action="store_true", help="serve on a new pseudo-terminal instead of TCP")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for the network)",
    )


def add_link_noise_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--link-noise RATE``: bytes dropped and corrupted in both directions."""
    parser.add_argument(
        "--link-noise",
        type=noise_rate,
        default=0.0,
        metavar="RATE",
        help="drop and corrupt bytes in both directions, each at this per-byte rate (default 0)",
    )


@dataclass(frozen=True)
class EmulatorLink:
    """The link a command's options ask for.

    Attributes:
        transport: ``"tcp"`` or ``"pty"``.
        host, port: where to listen for TCP (0: any free port).
        noise: the noise of ``--link-noise`` (seeded, so a run can be repeated), or None for a clean link.
    """

    transport: Literal["tcp", "pty"]
    host: str
    port: int
    noise: LinkNoise | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EmulatorLink:
        """The link of the options added by :func:`add_link_arguments` and :func:`add_link_noise_argument`.

        Raises:
            ConfigError: a port out of 0..65535 or a noise rate out of [0, 1).
        """
        if not 0 <= args.port <= 65535:
            raise ConfigError(f"--port must be 0 to 65535, got {args.port}")
        rate = float(args.link_noise)
        if not (math.isfinite(rate) and 0.0 <= rate < 1.0):
            raise ConfigError(f"--link-noise must be in [0, 1), got {rate}")
        noise = None
        if rate > 0.0:
            import numpy as np

            from pluto.hardware.link import LinkNoise

            noise = LinkNoise(rate, rate, np.random.default_rng(0))
        return cls("pty" if args.pty else "tcp", args.host, args.port, noise)

    @property
    def noise_note(self) -> str:
        """``", link noise 0.001 per byte"`` for a noisy link, "" for a clean one (for the line a command prints)."""
        return f", link noise {self.noise.drop_rate:g} per byte" if self.noise is not None else ""


class _Interrupted(BaseException):
    """SIGINT or SIGTERM: stop serving now (a BaseException, as KeyboardInterrupt, so no handler swallows it)."""


def announce(banner: str, url: str, peer: str = "host") -> None:
    """Print what is served, where a ``peer`` connects to it, and how to stop it.

    Args:
        banner: one line saying what is served.
        url: what the peer opens (``socket://127.0.0.1:PORT`` or a pty's path).
        peer: what connects: "host", "client".
    """
    print(banner, flush=True)
    print(f"connect a {peer} to: {url}", flush=True)
    print("Ctrl-C stops it.", flush=True)


def serve_until_signal(server: LinkServer, banner: str, *, peer: str = "host", stop_at_once: bool = False) -> int:
    """Open the server's link, announce it (:func:`announce`) and serve in this thread until SIGINT or SIGTERM.

    Args:
        server: the emulator, not started.
        banner: one line saying what is served.
        peer: what connects: "host", "client".
        stop_at_once: the first signal also interrupts the serving loop where it is, for a device whose steps may
            take long (a robot in a big world); the link is closed all the same.

    Returns:
        0, once stopped.

    Raises:
        EmulatorError: the port is in use, or no pseudo-terminal could be made.
    """
    from pluto.runtime.runner import stop_on_signals

    try:
        with stop_on_signals(interrupt=_Interrupted if stop_at_once else None) as stop:
            server.run(stop, on_ready=lambda url: announce(banner, url, peer))
    except _Interrupted:
        pass
    print("stopped", flush=True)
    return 0
