"""``pluto slam``: the slam module by hand: start and stop its thread, save the map, print its status."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.common import open_bus

__all__ = ["add_command", "register", "run"]

HELP = "the slam module: start, stop, save the map, status"

DESCRIPTION = """\
Works with the running slam module (start it with `pluto start slam`; its thread waits to be started). The slam
thread builds a map of walls from the laser while it corrects the robot's pose, so stop the pose module's thread
first (`pluto pose stop`): both would set the pose. The map is saved as a world file that the simulator and the pose
module load as they are (`pluto sim --world FILE`, the pose module's map = FILE); where it is saved is the module's
map_file parameter (`pluto run slam -p map_file=FILE`), by default slam-map.xml in the robot's runtime folder.

examples:
  pluto slam start                  start mapping (the map's frame is localization's pose at the first scan)
  pluto slam save                   save the map now; mapping goes on
  pluto slam stop                   stop mapping; the map is saved
  pluto slam status
"""

SAVE_TIMEOUT = 30.0
"""s (wall clock) the slam module gets to save the map."""


def register(subparsers: Subparsers) -> None:
    """Register the ``slam`` subcommand."""
    p = add_parser(subparsers, "slam", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("start", help="start the slam thread (stop the pose module's thread first)")
    actions.add_parser("stop", help="stop the slam thread and save the map (localization's setter goes back to 0)")
    actions.add_parser("save", help="save the map now; the slam thread goes on")
    actions.add_parser("status", help="print the slam module's status and where its map is saved")


def add_command(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """The same as :func:`register`, for callers that build a parser of their own.

    Args:
        parents: not used: every command takes the common options (:func:`pluto.cli.command.common_options`).
    """
    register(subparsers)


def run(args: argparse.Namespace) -> int:
    """Carry out the slam action.

    Returns:
        0 on success.

    Raises:
        LaunchError: the slam module is not running.
        BusTimeout: no status, or the map was not saved, in time.
        SaveFailed: the module could not write the map file.
    """
    from pluto.navigation.slam.proxy import SlamProxy, SlamStatus

    with open_bus(args) as bus, SlamProxy(bus, start=False, timeout=5.0) as slam:
        if args.action == "status":
            status = slam.status() or SlamStatus.of(slam.wait(0, timeout=5.0))
            info = slam.map_info()
            saved = "not saved yet" if info.saved_walls is None else f"last saved with {info.saved_walls} walls"
            print(f"{status.describe()}; map file {info.path} ({saved})", flush=True)
            return 0
        if args.action == "start":
            slam.start()
            print("slam thread running (setter 2)", flush=True)
            return 0
        if args.action == "stop":
            slam.stop(timeout=SAVE_TIMEOUT)
            info = slam.map_info()
            print(f"slam thread stopped (localization's setter is 0); {_saved(info.path, info.saved_walls)}")
            return 0
        info = slam.save(timeout=SAVE_TIMEOUT)
        print(_saved(info.path, info.saved_walls), flush=True)
        return 0


def _saved(path: str, walls: int | None) -> str:
    if walls is None:
        return f"no map yet (no scan used), nothing saved to {path}"
    return f"map saved to {path} ({walls} walls)"
