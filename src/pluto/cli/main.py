"""The ``pluto`` command: its parser, built from the command modules, and the dispatch to the command asked for.

Each command (or small family of commands) lives in a module of its own offering ``register(subparsers)``;
:data:`COMMANDS` lists them in the order ``pluto --help`` shows them.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from pluto import __version__
from pluto.cli import (
    avoid_cmd,
    call_cmd,
    catalog_cmd,
    certs_cmd,
    demo_cmd,
    drive_cmd,
    echo_cmd,
    follow_cmd,
    foxglove_cmd,
    graph_cmd,
    info_cmd,
    key_cmd,
    list_cmd,
    log_cmd,
    mom_cmd,
    motion_cmd,
    netmotion_cmd,
    param_cmd,
    player_cmd,
    pose_cmd,
    pub_cmd,
    record_cmd,
    replay_cmd,
    router_cmd,
    run_cmd,
    sim_cmd,
    slam_cmd,
    up_cmd,
    warm_cmd,
    web_cmd,
    xmlserver_cmd,
)
from pluto.cli.command import Subparsers, common_options
from pluto.cli.device_cmd import device_command
from pluto.cli.verbosity import setup_logging
from pluto.errors import PlutoError
from pluto.extras import missing_extra
from pluto.hardware.base.p2os import command as p2os_command
from pluto.hardware.dmu import command as dmu_command
from pluto.hardware.gps import command as gps_command
from pluto.hardware.sick import command as sick_command

__all__ = ["COMMANDS", "DESCRIPTION", "build_parser", "main"]

DESCRIPTION = """\
Pluto runs a robot as a set of modules that find each other by name on a bus and talk through typed interfaces
(Base/Drive/State, Sick/Scan_mm, Localization/Pose, drive/command, ...).

Getting started:
  pluto demo                   run the demonstration mission, then stop
  pluto sim                    run the simulated robot, with localization on it (Ctrl-C stops it)
  pluto up sim                 start the modules of a profile and keep them running (Ctrl-C stops them)
  pluto mom                    which modules are running, what they write, how fast
  pluto list                   interfaces that have a value now; `pluto echo NAME` prints them as they change
  pluto pub NAME JSON          write a value to an interface; `pluto info NAME`: its type, writers and readers
  pluto graph --svg g.svg      which module writes and reads what (text, and a picture)
  pluto call, pluto param      call a module's service; list, read and change its parameters while it runs
  pluto up mission             the simulated robot with localization, pose, drive, avoid and motion; then
                               `pluto motion moveto X Y --wait`
  pluto web                    watch the robot live in a browser (map, scans, goals, MOM), drive it, click to moveto
  pluto key drive              steer it from the keyboard; a page per module (drive avoid motion wrist pose slam ...)
  pluto record -o run.mcap     record every interface; `pluto replay run.mcap`, `pluto log info run.mcap`
  pluto player, pluto xmlserver, pluto netmotion    gateways for Player clients, XML over TCP, the arm over UDP
  pluto foxglove               watch it in Foxglove (scans, frames, walls, poses); `pluto record --foxglove` too

Every command works on one robot: the one named by --robot, PLUTO_ROBOT or the configuration file ("pluto" by
default). Several machines: run `pluto router --listen tcp/<its address>:7447` on one, on its address in the
robot's network (`pluto router --help`; --secure across networks you do not trust), and set PLUTO_CONNECT to
tcp/<its address>:7447 on all.
"""


COMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    demo_cmd.register,  # demo
    sim_cmd.register,  # sim
    run_cmd.register,  # run, start, stop
    up_cmd.register,  # up, down
    mom_cmd.register,  # mom
    list_cmd.register,  # list
    echo_cmd.register,  # echo, hz
    pub_cmd.register,  # pub
    info_cmd.register,  # info
    graph_cmd.register,  # graph
    call_cmd.register,  # call
    param_cmd.register,  # param
    catalog_cmd.register,  # modules, profiles
    router_cmd.register,  # router
    certs_cmd.register,  # certs
    device_command(p2os_command.register),  # p2os-emulate (p2os-sim)
    device_command(sick_command.register),  # sick-emulate (sick-sim)
    device_command(dmu_command.register),  # dmu-emulate (dmu-sim)
    device_command(gps_command.register),  # gps-emulate (gps-sim)
    drive_cmd.register,  # drive
    avoid_cmd.register,  # avoid
    motion_cmd.register,  # motion
    follow_cmd.register,  # follow
    pose_cmd.register,  # pose
    slam_cmd.register,  # slam
    key_cmd.register,  # key
    record_cmd.register,  # record
    replay_cmd.register,  # replay
    log_cmd.register,  # log
    player_cmd.register,  # player
    xmlserver_cmd.register,  # xmlserver
    netmotion_cmd.register,  # netmotion
    foxglove_cmd.register,  # foxglove
    web_cmd.register,  # web
    warm_cmd.register,  # warm
)
"""How each command module registers its commands, in the order of ``pluto --help``."""


def build_parser() -> argparse.ArgumentParser:
    """The ``pluto`` parser: the common options, ``--version``, and every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="pluto",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common_options()],
    )
    parser.add_argument("--version", action="version", version=f"pluto {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pluto`` with these arguments (default: the command line's).

    A command that takes arguments of its own beyond its parser's (``pluto run MODULE --name value``) sets
    ``take_extra`` in its namespace; one that logs more by default sets ``base_verbosity``.

    Returns:
        the exit status: the command's, 1 after an error (told in one line on stderr; 2 when an input file is not
        what it claims: a ROS bag, an occupancy grid), 130 after Ctrl-C.
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    take_extra: Callable[[argparse.Namespace, Sequence[str]], None] | None = getattr(args, "take_extra", None)
    if extra and take_extra is None:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    setup_logging(getattr(args, "verbose", 0), getattr(args, "base_verbosity", 0))
    try:
        if extra and take_extra is not None:
            take_extra(args, extra)
        return int(args.func(args))
    except ModuleNotFoundError as err:
        missing = missing_extra(err, f"pluto {args.command}")  # a library of an extra: say which to install
        if missing is None:
            raise
        print(missing, file=sys.stderr)
        return 1
    except PlutoError as err:
        print(f"pluto {args.command}: {err}", file=sys.stderr)
        return int(getattr(err, "exit_status", 1))  # 2: an input file that is not what it claims (a bag, a grid)
    except KeyboardInterrupt:
        return 130


EXIT_JOIN = 0.5
"""s :func:`run` gives the threads that are not daemons to end before the process exits."""


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pluto`` command and ``python -m pluto``: :func:`main`, then a quick exit.

    By the time :func:`main` returns, the command has closed what it opened (its bus, its files, its modules). What
    is left of a normal interpreter exit is tearing down every object and library, which in a module process (Zenoh
    runtimes, numba, numpy) took 0.2 to 1.5 s more on a busy machine, and kept Ctrl-C of ``pluto up`` from ending
    within a second. So the output is flushed, the threads that are not daemons are given :data:`EXIT_JOIN` s to
    end, the exit handlers and logging's shutdown run, and the process ends at once with the command's status.
    """
    code = main(argv)
    deadline = time.monotonic() + EXIT_JOIN
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(deadline - time.monotonic(), 0.0))
    atexit._run_exitfuncs()  # what the interpreter would run at its exit: registered cleanups
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
