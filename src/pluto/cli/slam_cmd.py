"""``pluto slam``: the slam module by hand: start and stop its thread, save the map, print its status."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from pluto.navigation.slam.metrics import Relations
    from pluto.navigation.slam.offline import OfflineResult
    from pluto.sim.world import World

__all__ = ["add_command", "register", "run"]

HELP = "the slam module: start, stop, save the map, status; SLAM over a recorded log (offline)"

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
  pluto slam offline intel.log.gz -o intel.xml --plot intel.png
                                    the same SLAM over a log, as fast as the processor allows (no bus)
  pluto slam export-grid intel.xml intel.yaml
                                    a map as a ROS map_server occupancy grid (YAML + PGM)
"""

OFFLINE_DESCRIPTION = """\
Runs the slam module's estimator (scan matching in front of the compressed filter over walls) over a recorded log,
as fast as the processor allows, without the bus: a CARMEN log (.log or .log.gz, such as the Radish data sets), a
Pluto recording (MCAP with Sick/Scan_mm or Sick/Scan and Base/Drive/State or Localization/Dead-Reckoning), or a ROS
bag (a ROS 2 bag's folder or .mcap file, a ROS 1 .bag: its sensor_msgs/LaserScan and nav_msgs/Odometry topics,
chosen by type or named with --scan-topic and --odom-topic, the laser's mount from its transforms). Each scan
is paired with the odometry at its stamp, whose increment since the previous scan is refined by registering the
scan on the last ones before it moves the filter. The map is written as a world file.

The odometry's increments can be perturbed with seeded noise, so that logs whose odometry is already corrected (the
"corrected" Radish logs) test the estimator: per increment of travel Δd and turn Δθ, the travel gets noise of std dev
a1·|Δd| + a2·|Δθ| (m) and the turn a3·|Δθ| + a4·|Δd| (rad); the default is 0.05,0.01,0.05,0.01745 (5 % of the travel
and of the turn, 1 cm per radian, 1° per metre). Where the log has a reference trajectory (a CARMEN log's laser
poses; a simulated recording's Sim/Truth), the errors of the SLAM trajectory and of the odometry are printed, each
as its mean, 95th percentile and maximum:

- the relative pose error (Kümmerle et al. 2009; the TUM and KITTI benchmarks' RPE): for a pair of scans, the
  estimated motion between them seen from the reference's, E = (δ*)⁻¹·δ, whose translation is |t - t*| (m) and
  rotation the difference of the turns (deg); over consecutive scans and over pairs 5 m of travel apart;
- the absolute trajectory error: the distance of each pose from the reference's after the rigid motion that moves
  the whole trajectory onto the reference best (least squares, no scale), with its root mean square.

--relations FILE adds the relative error over a Kümmerle .relations file's pairs (lines t1 t2 x y z roll pitch yaw:
two scans' stamps and the reference motion between them), the pairs their published figures are over; it needs no
reference in the log, but a log whose stamps are those the file names. A figure compares with a published one only
when it is the same measure over the same data.

The scans of a CARMEN log are taken in the file's order (each FLASER, ROBOTLASER1 line holds its own odometry;
RAWLASER1 lines take the ODOM lines'); a log whose stamps cannot time it (all 0, constant, cut to too few digits) is
read all the same, with one warning and no real-time factor.

examples:
  pluto slam offline intel-corrected.log.gz -o intel.xml
  pluto slam offline run.mcap -o map.xml --odometry-noise none --plot map.png
  pluto slam offline fr079.log.gz -o fr079.xml --odometry-noise 0.1,0.02,0.1,0.035 --seed 7 --max-scans 500
  pluto slam offline intel.log -o intel.xml --relations intel.relations
  pluto slam offline ros2-bag/ -o map.xml --scan-topic /base_scan --grid map.yaml
"""

EXPORT_GRID_DESCRIPTION = """\
Writes a map (a world file: a saved SLAM map, or any map the simulator reads) as a ROS map_server occupancy grid: a
YAML file (image, resolution, origin, negate, occupied_thresh, free_thresh, mode) and a PGM image beside it, with
map_saver's values (walls occupied, 0; the rest unknown, 205; with slam offline --grid, the cells its scans' beams
crossed on its trajectory free, 254). Nav2's and ROS 1's map_server load it as it is. The
other way, a map_server grid's YAML file is a map wherever Pluto takes one (pluto sim --world grid.yaml, the pose
module's map): walls are found in its occupied cells.

examples:
  pluto slam export-grid slam-map.xml office.yaml
  pluto slam export-grid office office.yaml --resolution 0.1
"""

RPE_DISTANCE = 5.0
"""m of travel between the poses of the longer pairs of the relative pose error."""

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
    offline = add_parser(
        actions, "offline", run_offline_command, "SLAM over a recorded log, without the bus", OFFLINE_DESCRIPTION
    )
    offline.add_argument("log", type=Path, metavar="LOG", help="a CARMEN log (.log, .log.gz) or a recording (.mcap)")
    offline.add_argument("-o", "--output", type=Path, required=True, metavar="MAP.xml", help="the map file to write")
    offline.add_argument(
        "--odometry-noise",
        default="default",
        metavar="MODEL",
        help="default, none, or a1,a2,a3,a4 (see above; default: default)",
    )
    offline.add_argument("--seed", type=int, default=1, help="seed of the odometry noise (default 1)")
    offline.add_argument("--plot", type=Path, metavar="PNG", help="draw the map and the trajectories (matplotlib)")
    offline.add_argument("--max-scans", type=int, metavar="N", help="use the first N scans only")
    offline.add_argument(
        "--relations",
        type=Path,
        metavar="FILE",
        help="a Kümmerle .relations file: also the relative pose error over its pairs of scans",
    )
    offline.add_argument("--scan-topic", metavar="TOPIC", help="a ROS bag's LaserScan topic (default: by type)")
    offline.add_argument("--odom-topic", metavar="TOPIC", help="a ROS bag's Odometry topic (default: by type)")
    offline.add_argument(
        "--grid",
        type=Path,
        metavar="GRID.yaml",
        help="also write the map as a ROS map_server occupancy grid (free where the beams crossed)",
    )
    offline.add_argument(
        "--resolution", type=float, default=0.05, metavar="M", help="the grid's cell size, m (default 0.05)"
    )
    grid = add_parser(
        actions,
        "export-grid",
        run_export_grid,
        "a map as a ROS map_server occupancy grid (YAML + PGM)",
        EXPORT_GRID_DESCRIPTION,
    )
    grid.add_argument("map", metavar="MAP", help="a map file (world XML), or a shipped world's name")
    grid.add_argument("output", type=Path, metavar="OUT.yaml", help="the grid's YAML file (the PGM goes beside it)")
    grid.add_argument(
        "--resolution", type=float, default=0.05, metavar="M", help="the grid's cell size, m (default 0.05)"
    )
    grid.add_argument(
        "--margin", type=float, default=1.0, metavar="M", help="unknown border around the walls, m (default 1)"
    )


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
    from pluto.cli.common import open_bus

    if args.action == "offline":
        return run_offline_command(args)
    if args.action == "export-grid":
        return run_export_grid(args)
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


def _beams(result: OfflineResult) -> tuple[np.ndarray, np.ndarray]:
    """Every beam of an offline run that hit something, from the laser's estimated pose to the hit: (origins, ends)."""
    import numpy as np

    origins, ends = [], []
    for pose, scan in zip(result.estimate, result.log.scans, strict=True):
        hit = (scan.ranges >= 0.0) & (scan.ranges < scan.max_range)
        bearing = pose[2] + scan.angles[hit]
        reach = scan.ranges[hit]
        ends.append(np.column_stack((pose[0] + reach * np.cos(bearing), pose[1] + reach * np.sin(bearing))))
        origins.append(np.repeat(pose[None, :2], reach.size, axis=0))
    if not ends:
        return np.zeros((0, 2)), np.zeros((0, 2))
    return np.vstack(origins), np.vstack(ends)


def _save_grid(
    world: World,
    output: Path,
    resolution: float,
    margin: float,
    rays: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Write a world's walls (and obstacles) as an occupancy grid, the cells the beams crossed free, and say where."""
    from pluto.sim.gridmap import GridError, grid_of_walls, write_grid

    try:
        grid = grid_of_walls(world.segments(), resolution=resolution, margin=margin, circles=world.circles, rays=rays)
    except ValueError as err:
        raise GridError(str(err), output) from None
    yaml_path, image = write_grid(grid, output)
    rows, columns = grid.shape
    free = "" if rays is None else f", {int((grid.cells == 0).sum()):,} free: the beams crossed them"
    print(f"occupancy grid saved to {yaml_path} and {image} ({columns} x {rows} cells of {resolution:g} m{free})")


def run_export_grid(args: argparse.Namespace) -> int:
    """``pluto slam export-grid MAP OUT.yaml``: a map as a ``map_server`` occupancy grid.

    Raises:
        ConfigError: bad options; MapError: the map cannot be read; GridError: the grid cannot be written.
    """
    from pluto.sim.world import load_world

    if not (math.isfinite(args.resolution) and args.resolution > 0):
        raise ConfigError(f"--resolution must be > 0 m, got {args.resolution}")
    if not (math.isfinite(args.margin) and args.margin >= 0):
        raise ConfigError(f"--margin must be >= 0 m, got {args.margin}")
    world = load_world(args.map)
    _save_grid(world, args.output, args.resolution, args.margin)
    sys.stdout.flush()
    return 0


def _saved(path: str, walls: int | None) -> str:
    if walls is None:
        return f"no map yet (no scan used), nothing saved to {path}"
    return f"map saved to {path} ({walls} walls)"


def run_offline_command(args: argparse.Namespace) -> int:
    """``pluto slam offline``: the estimator over a log; prints the figures, writes the map (and the picture).

    Returns:
        0 on success.

    Raises:
        ConfigError: bad options.
        LogError: the log (or the relations file) cannot be read or has no usable scans.
        OSError, MapError: the map cannot be written.
    """
    from pluto.navigation.slam.offline import OdometryNoise, read_log, read_relations, run_offline

    try:
        noise = OdometryNoise.parse(args.odometry_noise)
    except ValueError as err:
        raise ConfigError(f"--odometry-noise: {err}") from None
    if args.max_scans is not None and args.max_scans < 2:
        raise ConfigError(f"--max-scans must be >= 2, got {args.max_scans}")
    if not (math.isfinite(args.resolution) and args.resolution > 0):
        raise ConfigError(f"--resolution must be > 0 m, got {args.resolution}")
    relations = None if args.relations is None else read_relations(args.relations)
    log = read_log(args.log, scan_topic=args.scan_topic, odom_topic=args.odom_topic)
    if args.max_scans is not None:
        log = log.head(args.max_scans)
    if log.skipped:
        print(f"{len(log.skipped)} lines or messages left out of {args.log}, the first: {log.skipped[0]}")
    for note in log.notes:
        print(f"{args.log.name}: {note}")
    if relations is not None and relations.skipped:
        print(f"{len(relations.skipped)} lines left out of {args.relations}, the first: {relations.skipped[0]}")
    result = run_offline(log, noise=noise, seed=args.seed)
    _print_cost(result)
    _print_reference_errors(result)
    if relations is not None:
        _print_relations_errors(result, relations, args.relations.name)
    _write_outputs(args, result)
    sys.stdout.flush()
    return 0


def _print_cost(result: OfflineResult) -> None:
    """The processing time (and the real-time factor where the log's stamps time it), the odometry's noise, and
    the loop-closing back end's work and the walls mapped twice."""
    log, noise = result.log, result.noise
    n = len(log.scans)
    model = "none" if noise is None else f"{noise.a1:g},{noise.a2:g},{noise.a3:g},{noise.a4:g} (seed {result.seed})"
    per_scan = f"{1000.0 * result.cpu_time / max(n, 1):.1f} ms a scan"
    factor = result.real_time_factor
    if factor is None or log.duration is None:
        timing = f"{n} scans in {result.cpu_time:.2f} s of processing ({per_scan}; no real-time factor: the log's "
        timing += "stamps cannot time it)"
    else:
        timing = f"{n} scans over {log.duration:.1f} s of log in {result.cpu_time:.2f} s of processing "
        timing += f"({per_scan}, {factor:.1f}x real time)"
    print(f"{timing}; odometry noise {model}")
    if result.search is not None and result.backend is not None:
        print(
            f"loop closing: {result.backend.keyframes} keyframes, {result.search.accepted} closures of "
            f"{result.search.checked} places checked, {result.backend.corrections} corrections applied, "
            f"{result.backend.merged} walls merged ({float(result.backend_times.sum()):.2f} s of the processing)"
        )
        print(
            f"walls mapped twice (parallel copies within 10 cm): {len(result.wall_copies())} where loops closed, "
            f"{len(result.wall_copies(where_loops_closed=False))} in the whole map"
        )


def _print_reference_errors(result: OfflineResult) -> None:
    """The estimate's and the odometry's errors against the log's reference trajectory (or that it has none)."""
    from pluto.navigation.slam.metrics import absolute_trajectory_error, relative_pose_error

    reference = result.log.reference
    if reference is None:
        print("the log has no reference trajectory: no error against it")
        return
    print("errors as mean (95th percentile, maximum):")
    for label, distance in (("consecutive scans", None), (f"pairs {RPE_DISTANCE:g} m apart", RPE_DISTANCE)):
        slam_error = relative_pose_error(result.estimate, reference, distance)
        odometry_error = relative_pose_error(result.odometry, reference, distance)
        print(
            f"relative pose error over {label} ({slam_error.pairs} pairs): SLAM {slam_error.describe()}; "
            f"odometry {odometry_error.describe()}"
        )
    slam_ate = absolute_trajectory_error(result.estimate, reference)
    odometry_ate = absolute_trajectory_error(result.odometry, reference)
    print(
        f"absolute trajectory error after a rigid alignment ({slam_ate.poses} poses): SLAM {slam_ate.describe()}; "
        f"odometry {odometry_ate.describe()}"
    )


def _print_relations_errors(result: OfflineResult, relations: Relations, name: str) -> None:
    """The estimate's and the odometry's errors over the pairs of a relations file (named ``name``)."""
    from pluto.navigation.slam.metrics import relations_error

    stamps = [scan.t for scan in result.log.scans]
    slam_error = relations_error(result.estimate, stamps, relations)
    odometry_error = relations_error(result.odometry, stamps, relations)
    unmatched = f", {slam_error.unmatched} of {len(relations)} name no scan of the log" if slam_error.unmatched else ""
    if slam_error.pairs:
        print(
            f"relative pose error over the relations of {name} ({slam_error.pairs} pairs"
            f"{unmatched}): SLAM {slam_error.describe()}; odometry {odometry_error.describe()}"
        )
    else:
        print(
            f"no relative pose error over the relations of {name}: none of its {len(relations)} "
            "pairs names two scans of the log by their stamps"
        )


def _write_outputs(args: argparse.Namespace, result: OfflineResult) -> None:
    """The map file, and the grid and the picture when asked for."""
    from pluto.navigation.slam.mapfile import save_map

    path, walls = save_map(
        result.slam, args.output, name=args.log.name, description=f"Made by pluto slam offline from {args.log.name}."
    )
    print(f"map saved to {path} ({walls} walls)")
    if args.grid is not None:
        from pluto.sim.world import load_world

        _save_grid(load_world(path), args.grid, args.resolution, 1.0, _beams(result))
    if args.plot is not None:
        try:
            from pluto.navigation.slam.offline_plot import plot_offline
        except ImportError:
            print("no picture: matplotlib is not installed (pip install 'pluto[plot]')", file=sys.stderr)
        else:
            print(f"picture saved to {plot_offline(result, args.plot)}")
