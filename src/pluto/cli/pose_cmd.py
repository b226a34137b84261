"""``pluto pose``: the pose module by hand (the original's ``pose_i``): its thread, status, the pose, find wall, and the
odometry calibration against a wall."""

from __future__ import annotations

import argparse
import datetime
import math
import queue
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.cli.pose_offline_cmd import add_offline, run_offline_command
from pluto.errors import ConfigError, LaunchError

# The proxies and the procedure are imported by run(), not here: `pluto` imports this module for every command.
if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus, StateReader
    from pluto.movement.drive.proxy import DriveProxy
    from pluto.navigation.pose.calibrate import CalibrationParams, CalibrationResult, CalibrationRun, WallReading
    from pluto.navigation.pose.proxy import PoseProxy

__all__ = ["add_command", "describe_status", "register", "run"]

HELP = (
    "the pose module: start, stop, status, set the pose, find the wall in front, calibrate the odometry; the module "
    "over a recorded log (offline)"
)

DESCRIPTION = """\
Works with the running pose module (start it with `pluto start pose`, or `pluto up mission`): starts and stops its
thread, prints its status, sets the robot's pose the original's way (stop the thread, post the pose to localization with
setter -1, wait until localization shows it, start the thread again), finds the longest wall in front of the laser,
and calibrates the odometry against that wall.

calibrate: with the robot facing a straight wall (within 10°) and DISTANCE + 1.5 m free in front of it, the robot
drives DISTANCE toward the wall and back in legs, then turns 15° to each side, stopping after each leg for a sighting
of the wall (it moves through the drive module: `pluto start drive`; keep clear, Ctrl-C stops it). It fits the
odometry's distance scale, heading gain and heading bias, composes them with the calibration the base applies now,
and writes the calibration file; the base applies the file when it starts with calibration_file set to it
([modules.base] in the configuration file, or `pluto run base -p calibration_file=FILE`). Calibrate again after
changing the tires or their pressure.

examples:
  pluto pose status
  pluto pose stop                   stop the pose thread (localization keeps its last correction)
  pluto pose set 2.5 4 1.57         the robot is at (2.5, 4) m facing 1.57 rad; the thread goes on from there
  pluto pose find-wall              points, angle and distance of the longest wall in front of the laser
  pluto pose calibrate              1 m toward the wall and back; writes ~/.config/pluto/<robot>/calibration.toml
  pluto pose calibrate --distance 2 --speed 0.3 --output calibration.toml
  pluto pose offline intel.log.gz --map intel.xml
                                    the module over a log against a map pluto slam offline saved (no bus)
"""

ANSWER_TIMEOUT = 5.0
"""s (wall clock) the pose module gets to answer find wall."""
POLL = 0.1
"""s between two steps of the calibration (the drive's command timeout is 4 s)."""
ODOMETRY_TIMEOUT = 2.0
"""s (wall clock) without new odometry after which the calibration stops."""


def register(subparsers: Subparsers) -> None:
    """Register the ``pose`` subcommand."""
    p = add_parser(subparsers, "pose", run, HELP, DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("start", help="start the pose thread (it takes the pose from localization)")
    actions.add_parser("stop", help="stop the pose thread (localization's setter goes back to 0)")
    actions.add_parser("status", help="print the pose module's status in words")
    pose = actions.add_parser("set", help="set the robot's pose: x m, y m, theta rad (localization frame)")
    pose.add_argument("x", type=float, metavar="X", help="m")
    pose.add_argument("y", type=float, metavar="Y", help="m")
    pose.add_argument("theta", type=float, metavar="THETA", help="heading, rad, counter-clockwise from x")
    pose.add_argument("--no-start", dest="restart", action="store_false", help="leave the pose thread stopped")
    actions.add_parser("find-wall", help="the longest wall in front of the laser: points, angle, distance")
    cal = actions.add_parser("calibrate", help="drive and turn before a wall; write the odometry calibration")
    cal.add_argument("--distance", type=float, default=1.0, metavar="D", help="m toward the wall and back (1)")
    cal.add_argument("--speed", type=float, default=0.2, metavar="V", help="m/s (0.2)")
    cal.add_argument("--legs", type=int, default=4, metavar="N", help="sightings on the way toward the wall (4)")
    cal.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="the calibration file (default: ~/.config/pluto/<robot>/calibration.toml)",
    )
    add_offline(actions)


def add_command(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """The same as :func:`register`, for callers that build a parser of their own.

    Args:
        parents: not used: every command takes the common options (:func:`pluto.cli.command.common_options`).
    """
    register(subparsers)


def describe_status(status: msgs.FVectorState) -> str:
    """``pose/status`` in words: the thread, tracking or lost, walls matched, relocalizations and find wall."""
    from pluto.navigation.pose.calibrate import wall_of
    from pluto.navigation.pose.module import FIND_WALL, SEARCHING
    from pluto.navigation.pose.proxy import PoseStatus

    text = PoseStatus.of(status).describe()
    code = status.element[1] if len(status.element) > 1 else 0
    if code == SEARCHING:
        return f"{text}; find wall: searching"
    if code == FIND_WALL:
        return f"{text}; find wall: asked"
    if code > 0 and len(status.data) >= 6:
        return f"{text}; find wall: {describe_wall(wall_of(status))}"
    return text


def describe_wall(wall: WallReading) -> str:
    """A wall in words: points, γ in degrees and ρ in m with their standard deviations."""
    return (
        f"{wall.points} points, gamma {math.degrees(wall.gamma):+.2f}° (σ {math.degrees(wall.gamma_std):.2f}°), "
        f"rho {wall.rho:.3f} m (σ {wall.rho_std:.3f} m)"
    )


def run(args: argparse.Namespace) -> int:
    """Carry out the pose action.

    Returns:
        0 on success; 1 when find wall finds no wall in front.

    Raises:
        ConfigError: a value is not valid, or the calibration file cannot be written.
        LaunchError: the pose module, localization (or, to calibrate, the base, drive or laser) is not running, or
            the pose thread is stopped where it must run.
        BusTimeout: no status, no answer to find wall, or localization did not take the pose, in time.
        CalibrationError: the calibration could not go on (no wall, the robot blocked, ...).
    """
    if args.action == "offline":
        return run_offline_command(args)
    from pluto.cli.common import open_bus
    from pluto.navigation.pose.proxy import PoseProxy

    values = [getattr(args, name) for name in ("x", "y", "theta", "distance", "speed") if hasattr(args, name)]
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"pose values must be finite numbers, got {values}")
    params = _calibration_params(args) if args.action == "calibrate" else None
    with open_bus(args) as bus, PoseProxy(bus, start=False, timeout=5.0) as pose:
        if args.action == "status":
            status = pose.get(0) or pose.wait(0, timeout=5.0)
            print(describe_status(status), flush=True)
            return 0
        if args.action == "start":
            pose.start()
            print("pose thread running", flush=True)
            return 0
        if args.action == "stop":
            pose.stop()
            print("pose thread stopped (localization's setter is 0)", flush=True)
            return 0
        if args.action == "set":
            return _set_pose(bus, pose, args)
        if args.action == "find-wall":
            _require(bus, ("localization",), "find wall")
            _require_thread(pose)
            wall = pose.find_wall(ANSWER_TIMEOUT)
            if wall.points <= 0:
                print("no wall in front of the laser (find wall looks within 30° of straight ahead)", flush=True)
                return 1
            print(f"wall in front: {describe_wall(wall)}", flush=True)
            return 0
        assert params is not None
        return _calibrate(bus, pose, params, args.output)


def _calibration_params(args: argparse.Namespace) -> CalibrationParams:
    from pluto.navigation.pose.calibrate import CalibrationParams

    try:
        return CalibrationParams(distance=args.distance, speed=args.speed, legs=args.legs)
    except ValueError as err:
        raise ConfigError(f"pose calibrate: {err}") from err


def _require(bus: Bus, modules: Sequence[str], what: str) -> None:
    """Raise LaunchError naming the ``modules`` that are not running."""
    alive = set(bus.live_modules())
    missing = [m for m in modules if m not in alive]
    if missing:
        raise LaunchError(
            f"{what} needs {', '.join(missing)} running on robot {bus.robot} "
            f"(`pluto start {missing[0]}`, or `pluto up mission`)"
        )


def _require_thread(pose: PoseProxy) -> None:
    from pluto.navigation.pose.proxy import PoseStatus

    status = pose.get(0) or pose.wait(0, timeout=5.0)
    if not PoseStatus.of(status).running:
        raise LaunchError("the pose thread is stopped (`pluto pose start`)")


def _set_pose(bus: Bus, pose: PoseProxy, args: argparse.Namespace) -> int:
    _require(bus, ("localization",), "setting the pose")
    try:
        pose.set_pose(args.x, args.y, args.theta, restart=args.restart)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    after = "the pose thread goes on from it" if args.restart else "the pose thread is stopped"
    print(f"pose set to ({args.x:g} m, {args.y:g} m, {math.degrees(args.theta):.1f}°); {after}", flush=True)
    return 0


class _Statuses:
    """Every ``pose/status`` value from now on, in order (find wall must see the module's -1)."""

    def __init__(self, bus: Bus) -> None:
        from pluto import msgs, names

        self.bus = bus
        self.queue: queue.SimpleQueue[msgs.FVectorState] = queue.SimpleQueue()
        self.sub: Any = bus.create_subscription(
            names.POSE_STATUS, self.queue.put, msgs.FVectorState, depth=256, current=False
        )

    def next(self, timeout: float) -> msgs.FVectorState | None:
        try:
            return self.queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def drain(self) -> list[msgs.FVectorState]:
        values = []
        while True:
            try:
                values.append(self.queue.get_nowait())
            except queue.Empty:
                return values

    def close(self) -> None:
        self.bus.release(self.sub)


def _calibrate(bus: Bus, pose: PoseProxy, params: CalibrationParams, path: str | None) -> int:
    from pluto import names
    from pluto.movement.drive.proxy import DriveProxy
    from pluto.navigation.pose.calibrate import (
        CalibrationError,
        CalibrationRun,
        default_calibration_path,
        fit_calibration,
        write_calibration,
    )

    output = Path(path).expanduser().absolute() if path else default_calibration_path(bus.robot)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot write the calibration to {output}: {err}") from err
    _require(bus, ("base", "drive", "sick", "localization"), "pose calibrate")
    _require_thread(pose)
    previous: dict[str, Any] = bus.call("base/calibration", None, dict, timeout=5.0)
    odometry: StateReader[msgs.Odometry] = bus.create_reader(names.BASE_DRIVE_STATE)
    statuses = _Statuses(bus)
    calibration = CalibrationRun(params)
    try:
        with DriveProxy(bus, start=False, timeout=5.0) as drive:
            first = odometry.wait_for_value(timeout=ODOMETRY_TIMEOUT)
            print(
                f"calibrating: {params.distance:g} m toward the wall and back in {params.legs} legs, then "
                f"{math.degrees(params.turn):.0f}° to each side; {len(calibration.legs) + 1} sightings",
                flush=True,
            )
            try:
                _drive(calibration, first, odometry, statuses, drive, pose)
            finally:
                drive.stop()
                time.sleep(0.1)  # let the stop leave before the bus closes
    except KeyboardInterrupt:
        print("calibration stopped; nothing written", flush=True)
        raise
    finally:
        statuses.close()
        bus.release(odometry)
    result = fit_calibration(calibration.samples, previous)
    try:
        _check(result)
    except ValueError as err:
        raise CalibrationError(f"the fit gives {err}: not written (is the wall straight and fixed?)") from err
    try:
        written = write_calibration(output, result, datetime.datetime.now(datetime.UTC).astimezone())
    except OSError as err:
        raise ConfigError(f"cannot write the calibration to {output}: {err}") from err
    for line in _report(result):
        print(line, flush=True)
    print(
        f"written to {written}; the base applies it when it starts with calibration_file = {str(written)!r}",
        flush=True,
    )
    return 0


def _drive(
    calibration: CalibrationRun,
    first: msgs.Odometry,
    odometry: StateReader[msgs.Odometry],
    statuses: _Statuses,
    drive: DriveProxy,
    pose: PoseProxy,
) -> None:
    """Step the calibration until its sightings are taken, re-sending its velocity to the drive at every step."""
    from pluto import names
    from pluto.navigation.pose.calibrate import FIND_WALL_REQUEST, CalibrationError

    latest, changed = first, time.monotonic()
    taken = 0
    while True:
        value = odometry.read()
        if value is not None and value.stamp != latest.stamp:
            latest, changed = value, time.monotonic()
        elif time.monotonic() - changed > ODOMETRY_TIMEOUT:
            raise CalibrationError(f"no new odometry on {names.BASE_DRIVE_STATE} for {ODOMETRY_TIMEOUT:g} s")
        decision = calibration.step(latest.stamp, latest, statuses.drain())
        for sample in calibration.samples[taken:]:
            x, y, theta = sample.pose
            print(
                f"sighting {taken + 1}: {describe_wall(sample.wall)}; odometry ({x:.3f} m, {y:.3f} m, "
                f"{math.degrees(theta):.1f}°)",
                flush=True,
            )
            taken += 1
        if decision.done:
            return
        drive.set_velocity(decision.v, decision.omega)
        if decision.ask_wall:
            pose.write(names.POSE_STATUS, FIND_WALL_REQUEST)
        time.sleep(POLL)


def _check(result: CalibrationResult) -> None:
    """Raise ValueError if the base would refuse the result."""
    from pluto.hardware.base.server import OdometryCorrection

    OdometryCorrection(result.distance_scale, result.heading_gain, result.heading_bias)


def _report(result: CalibrationResult) -> list[str]:
    def value(x: float, std: float, digits: int) -> str:
        return f"{x:.{digits}f} ± {std:.{digits}f}" if math.isfinite(std) else f"{x:.{digits}f} (not measured)"

    m = result.measured
    lines = [
        f"distance_scale {value(result.distance_scale, result.distance_scale_std, 5)}",
        f"heading_gain   {value(result.heading_gain, result.heading_gain_std, 5)}",
        f"heading_bias   {value(result.heading_bias, result.heading_bias_std, 5)} rad/m",
        f"from {result.samples} sightings; rms residuals {result.rho_rms * 1000:.1f} mm, "
        f"{math.degrees(result.gamma_rms):.2f}°",
    ]
    if result.previous != {"distance_scale": 1.0, "heading_gain": 1.0, "heading_bias": 0.0}:
        lines.append(
            f"(measured on the odometry the base corrected already: scale {m.distance_scale:.5f}, gain "
            f"{m.heading_gain:.5f}, bias {m.heading_bias:.5f} rad/m; composed with the base's calibration)"
        )
    return lines
