"""``pluto netmotion``: the arm and its NetworkMotionServer in the foreground."""

from __future__ import annotations

import argparse

from pluto.cli.command import Subparsers, add_parser

# The runtime is imported by run(), not here: `pluto` imports this module for every command.

__all__ = ["register", "run"]

HELP = "run the arm (simulated or SSC-32) and its NetworkMotionServer on UDP (Ctrl-C stops it)"

DESCRIPTION = """\
Starts the arm module and the NetworkMotionServer in this terminal. Clients send text commands over UDP, one per
line (case-sensitive): PING, FK <link>, RUNMS <file>, IKP <link> <X> <Y> <Z> (mm), STOP <id>, LIST, JOINTS.
Motion files come from --motions (the examples shipped with Pluto by default). The server listens on 127.0.0.1
unless --host says otherwise. The same runs as daemons with `pluto up netmotion`; with --arm bus, this command
drives an arm module already running (`pluto start arm`).

Against floods, each client host (IP address, all its ports together) may send 50 datagrams a second, and the
server handles 1,000 a second in all, shared equally by the hosts sending; the rest is dropped before it is parsed
and counted in netmotion/status (set client_rate, budget_rate and the like under [modules.netmotion] in the
configuration file).

examples:
  pluto netmotion                                   simulated arm, UDP port 15000
  pluto netmotion --arm ssc32 --serial-port /dev/ttyUSB0 --motions ~/motions
  echo PING | nc -u -w1 127.0.0.1 15000             -> PONG
  echo "FK 7" | nc -u -w1 127.0.0.1 15000           the gripper frame's pose (mm)
  echo "RUNMS wave.mot" | nc -u -w3 127.0.0.1 15000 -> MOTMANREG 0 ... MOTMANRESP 0 DEACTIVATE
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``netmotion`` subcommand."""
    p = add_parser(subparsers, "netmotion", run, HELP, DESCRIPTION)
    p.add_argument("--port", type=int, default=15000, help="UDP port (default 15000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--arm",
        choices=("sim", "ssc32", "bus"),
        default="sim",
        help="the arm: sim (default), ssc32, or bus (an arm module already running)",
    )
    p.add_argument("--motions", default="", metavar="DIR", help="the motion directory (default: the examples)")
    p.add_argument("--serial-port", default="/dev/ttyUSB0", metavar="URL", help="the SSC-32's port (with --arm ssc32)")
    p.add_argument("--baudrate", type=int, default=115200, help="the SSC-32's baud rate (default 115200)")
    p.add_argument("--model", default="LynxArm6", help="arm model name or file (default LynxArm6; not with --arm bus)")


def run(args: argparse.Namespace) -> int:
    """Run the netmotion module (and, unless --arm bus, the arm module beside it) until Ctrl-C.

    Returns:
        0 after a clean stop.

    Raises:
        ConfigError: bad parameters, an unusable motion directory or model, or a port that cannot be bound.
    """
    import os

    from pluto.cli.common import config_from_args
    from pluto.runtime.runner import ModuleSpec, run_in_process, stop_on_signals

    params: dict[str, object] = {
        "port": args.port,
        "host": args.host,
        "motions": os.path.expanduser(args.motions) if args.motions else "",
    }
    specs = [ModuleSpec("netmotion", None, params)]
    if args.arm != "bus":  # the arm module first, in this process: netmotion requires it
        arm = {"backend": args.arm, "model": args.model, "port": args.serial_port, "baudrate": args.baudrate}
        specs.insert(0, ModuleSpec("arm", None, arm))
    config = config_from_args(args)
    with stop_on_signals() as stop:
        run_in_process(specs, config, stop)
    return 0
