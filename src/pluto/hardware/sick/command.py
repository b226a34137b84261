"""``pluto sick-emulate`` (or by its old name ``pluto sick-sim``): an emulated SICK LMS 200/291 laser that speaks its
telegrams, for testing without a scanner."""

from __future__ import annotations

import argparse
import math

from pluto.errors import ConfigError
from pluto.hardware.emulate_command import (
    CommandLine,
    EmulatorLink,
    add_link_arguments,
    add_link_noise_argument,
    serve_until_signal,
)

# The emulator, numpy, the world and the bus are imported by run(), not here: `pluto` imports this module for every
# command and should start fast.

__all__ = ["DEFAULT_PORT", "register", "run"]

DEFAULT_PORT = 8104
"""The TCP port served by default (the same as :data:`pluto.hardware.sick.emulate.DEFAULT_PORT`)."""

HELP = "serve an emulated SICK LMS laser over its RS-232 telegrams (for testing LMS drivers)"

DESCRIPTION = """\
Pretends to be a SICK LMS 200/291 laser scanner at the other end of a serial line. It speaks the LMS 2xx telegram
protocol (CRC-16, ACK/NAK) that Pluto's lms driver, sicktoolbox and the ROS sicklms drivers speak: status, type
(an LMS200;30106), error messages, installation mode, variant (180° at 0.5° or 1°), configuration (cm or mm), baud
rates 9600 to 500 k and the rate kept at power-on, one scan on request, and the continuous output of measured
values, paced as the configured baud rate allows (a 361-point scan every ~213 ms at 38400 baud; on TCP and a pty the
rate is nominal, the pacing is kept). It starts at 9600 baud, as a scanner does.

The ranges come from a square room around the scanner, or with --world from the simulator's laser in that world:
at --pose, or following the robot's true pose (Sim/Truth) and its wrist (Wrist/State) of a simulation running on the
bus with --follow-sim.

Connect a host to the URL printed at start: socket://127.0.0.1:8104 over TCP, or with --pty a pseudo-terminal.

`pluto sick-sim` is the same command under its old name.

examples:
  pluto sick-emulate                                 a scanner in a 8 m square room on socket://127.0.0.1:8104
  pluto sick-emulate --world office --pose 2,3,0     in the office world
  pluto sick-emulate --follow-sim --robot me         following the robot of a running simulation
  pluto sick-emulate --fault-at 10                   a fatal error after 10 s (the host resets it; 20 s reboot)
  pluto sick-emulate --link-noise 0.001              drop and corrupt 0.1 % of the bytes
"""


def _pose(text: str) -> tuple[float, float, float]:
    try:
        x, y, theta = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a pose is x,y,theta (m, m, rad), not {text!r}") from None
    if not all(math.isfinite(v) for v in (x, y, theta)):
        raise argparse.ArgumentTypeError(f"a pose of finite numbers, not {text!r}")
    return x, y, theta


def register(cli: CommandLine) -> None:
    """Register the ``sick-emulate`` command, also called ``sick-sim``."""
    p = cli.add_command("sick-emulate", run, HELP, DESCRIPTION, aliases=("sick-sim",))
    p.set_defaults(open_bus=cli.open_bus)
    add_link_arguments(p, DEFAULT_PORT)
    p.add_argument("--world", default=None, help="world: office, campus, clutter or a map file (default: a room)")
    p.add_argument("--pose", type=_pose, default=None, help="x,y,theta of the robot in --world (default: its start)")
    p.add_argument(
        "--follow-sim", action="store_true", help="follow Sim/Truth and Wrist/State of a simulation on the bus"
    )
    p.add_argument("--baud", type=int, default=9600, help="the rate it starts at, as set in its flash (default 9600)")
    p.add_argument("--resolution", type=float, default=1.0, help="resolution it starts at, ° (0.5 or 1; default 1)")
    p.add_argument("--units", choices=("cm", "mm"), default="cm", help="units it starts with (default cm)")
    p.add_argument("--fault-at", type=float, default=None, metavar="S", help="a fatal error S s after start")
    p.add_argument("--reboot-time", type=float, default=20.0, metavar="S", help="s to reboot after a fault")
    add_link_noise_argument(p)


def run(args: argparse.Namespace) -> int:
    """Serve the scanner until SIGINT or SIGTERM.

    Raises:
        ConfigError: a bad option, world or map file.
        EmulatorError: the port is in use (or no pseudo-terminal could be made).
    """
    link = EmulatorLink.from_args(args)
    if args.baud not in (9600, 19200, 38400, 500000):
        raise ConfigError(f"--baud must be 9600, 19200, 38400 or 500000, got {args.baud}")
    if args.resolution not in (0.5, 1.0):
        raise ConfigError(f"--resolution must be 0.5 or 1, got {args.resolution}")
    if args.fault_at is not None and not (math.isfinite(args.fault_at) and args.fault_at >= 0):
        raise ConfigError(f"--fault-at must be >= 0 s, got {args.fault_at}")
    if not (math.isfinite(args.reboot_time) and args.reboot_time >= 0):
        raise ConfigError(f"--reboot-time must be >= 0 s, got {args.reboot_time}")
    import contextlib

    from .device import LmsDevice, ScanSource
    from .emulate import LmsEmulator, SyntheticRoom, WorldScan, follow_truth, follow_wrist
    from .telegram import RANGE_MODES, LmsConfig

    with contextlib.ExitStack() as stack:
        source: ScanSource = SyntheticRoom()
        where = "in a square room of 8 m"
        if args.world is not None or args.follow_sim:
            from pluto.sim.world import load_world

            fixed: list[tuple[float, float, float]] = [args.pose] if args.pose is not None else []

            def at_fixed_pose() -> tuple[float, float, float]:
                return fixed[0]

            pose = at_fixed_pose
            world = None
            wrist = None
            if args.follow_sim:
                from pluto import names

                bus = stack.enter_context(args.open_bus(args))
                pose = follow_truth(bus)
                truth = bus.create_reader(names.SIM_TRUTH)

                def simulated_now() -> float:
                    newest = truth.read()
                    return newest.stamp if newest is not None else 0.0

                # the scanner sits on the robot's wrist: it turns and tilts with it (level and ahead without one)
                wrist = follow_wrist(bus, clock=simulated_now)
                if args.world is None:
                    from pluto.sim.module import fetch_settings

                    world = fetch_settings(bus).load_world()
            if world is None:
                world = load_world(args.world)
            if not fixed:
                fixed.append(world.start)
            source = WorldScan(world, pose, wrist=wrist)
            where = f"in world {world.name}" + (" following Sim/Truth" if args.follow_sim else f" at {fixed[0]}")
        device = LmsDevice(source, reboot_time=args.reboot_time, baud=args.baud)
        device.resolution = round(args.resolution * 100)
        mode = RANGE_MODES[("cm", 80)] if args.units == "cm" else RANGE_MODES[("mm", 8)]
        device.config = LmsConfig(measuring_mode=mode.measuring_mode, units=mode.units)
        emulator = LmsEmulator(
            device,
            transport=link.transport,
            host=link.host,
            port=link.port,
            link_noise=link.noise,
            fault_at=args.fault_at,
        )
        banner = f"SICK LMS emulator {where}, starting at {args.baud} baud{link.noise_note}."
        return serve_until_signal(emulator, banner)
