"""``pluto demo``: the most complete mission Pluto can run so far, on the simulated robot, ending by itself.

It brings up the simulated robot with its localization service and movement chain (the ``mission`` profile: world
and clock, base, wrist, laser, inertial unit, GPS, localization, drive and avoid, each in its own process, started in
dependency order), records every interface to an MCAP log, then sends the avoid module one goto after another
through the office world (laser obstacle avoidance, the drive module's bumper stop and command timeout underneath),
prints its progress, and finally draws the map, the true and the localization paths and the last laser scan to a PNG.
The log replays through the stack (``pluto replay``) and opens in standard MCAP viewers.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.movement.avoid.core import AVOID_LASER, GOTO_REACHED, GOTO_STUCK
from pluto.movement.avoid.proxy import AvoidProxy, describe_status
from pluto.record.recorder import Recorder, RecordStatus
from pluto.runtime import launcher, mom
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.runner import stop_on_signals
from pluto.runtime.supervisor import Supervisor
from pluto.sim.laser import LaserParams, laser_pose
from pluto.sim.plot import plot_run, scan_points
from pluto.sim.world import World, load_world

# Through the office, in the world frame (m): east down the corridor, back west, into the lobby, past the reception.
OFFICE_ROUTE = [(34.0, 10.0), (10.0, 10.0), (6.0, 10.0), (6.0, 2.5), (3.0, 2.0)]
SPEED = 0.6
"""Top speed of the gotos, m/s."""
TURN_RATE = 1.0
"""Top turn rate of the gotos, rad/s."""


@dataclass
class MissionLog:
    """What the mission saw, for the picture and the summary (filled from bus callbacks)."""

    truth: list[tuple[float, float, float, float]] = field(default_factory=list)  # stamp, x, y, θ
    estimate: list[tuple[float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_truth(self, pose: msgs.Odometry) -> None:
        with self.lock:
            self.truth.append((pose.stamp, pose.x, pose.y, pose.theta))

    def on_pose(self, pose: msgs.PoseEstimate) -> None:
        with self.lock:
            self.estimate.append((pose.pose[0], pose.pose[1]))


def write_start_pose(world: World, folder: Path) -> Path:
    """A start-pose file for the localization service: the world's start, so its frame is the world's."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "start-pose.toml"
    x, y, theta = world.start
    path.write_text(
        f"# where the simulated robot starts in the {world.name} world\nx = {x}\ny = {y}\ntheta = {theta}\n"
    )
    return path


def run_demo(config: Config, duration: float = 400.0, rate: float = 5.0, output: Path | None = None) -> int:
    """Run the mission; return the exit status (0 if the robot reached every waypoint, or was interrupted).

    Args:
        duration: simulated seconds after which the mission gives up.
        rate: simulated seconds per wall-clock second.
        output: folder for the picture (default ``./demo-output``).
    """
    world = load_world("office")
    out_dir = (output or Path("demo-output")).resolve()
    start_file = write_start_pose(world, out_dir)
    profile = with_params(load_profile("mission"), "sim", world="office", rate=rate)
    profile = with_params(profile, "localization", start_pose_file=str(start_file))
    log = MissionLog()
    reached = 0
    outcome = "NOT done"
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    recording: RecordStatus | None = None
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(bus, profile, config)
        print(f"Pluto demo on robot '{bus.robot}': the simulated robot in the office world, {rate:g}x real time")
        print(f"starting {len(profile.entries)} modules: {', '.join(e.name for e in profile.entries)}", flush=True)
        t0 = time.monotonic()
        last_scan: msgs.LaserScan | None = None
        try:
            supervisor.start()
            print(f"all publishing after {time.monotonic() - t0:.1f} s\n")
            print(mom.render(mom.snapshot(bus), bus.robot) + "\n", flush=True)
            bus.create_subscription("Sim/Truth", log.on_truth, msgs.Odometry, depth=1024)
            bus.create_subscription("Localization/Pose", log.on_pose, msgs.PoseEstimate, depth=1024)
            with Recorder(bus, out_dir / f"office-{stamp}.mcap", metadata={"mission": "demo: office route"}) as rec:
                reached, outcome = _drive_route(bus, stop, duration)
            recording = rec.stop()
            last_scan = bus.create_reader("Sick/Scan_mm", msgs.LaserScan).read()
        finally:
            supervisor.shutdown()
    if stop.is_set():
        outcome = "interrupted"
    picture = _draw(world, log, last_scan, out_dir / f"office-{stamp}.png", outcome)
    with log.lock:
        true_xy = np.array([t[1:3] for t in log.truth]) if log.truth else np.zeros((0, 2))
    travelled = float(np.sum(np.hypot(*np.diff(true_xy, axis=0).T))) if len(true_xy) > 1 else 0.0
    print(
        f"\nmission {outcome}: {reached}/{len(OFFICE_ROUTE)} waypoints, travelled {travelled:.1f} m; "
        "all modules stopped."
    )
    if picture:
        print(f"map, true and localization paths and the last scan: {picture}")
    if recording is not None and recording.parts:
        print(
            f"log of every interface ({recording.messages} messages, {recording.duration:.0f} s): "
            f"{recording.parts[0]}\n  (pluto log info FILE, pluto replay FILE, or any MCAP viewer)"
        )
    print(f"logs of each module: {launcher.runtime_dir(bus.robot)}/")
    return 0 if outcome in ("done", "interrupted") else 1


def _drive_route(bus: Bus, stop: threading.Event, duration: float) -> tuple[int, str]:
    """Send the gotos one after the other; return (waypoints reached, outcome)."""
    avoid = AvoidProxy(bus, start=False)
    pose = bus.create_reader("Localization/Pose", msgs.PoseEstimate)
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    scans = bus.create_reader("Sick/Scan_mm", msgs.LaserScan)
    power = bus.create_reader("Base/Power", msgs.Power)
    start_time: float | None = None
    next_report = 0.0
    try:
        for number, (x, y) in enumerate(OFFICE_ROUTE, start=1):
            avoid.goto(x, y, max_speed=SPEED, max_turn_rate=TURN_RATE, avoidance=AVOID_LASER)
            print(f"  goto waypoint {number}/{len(OFFICE_ROUTE)}: ({x:.1f}, {y:.1f}) m", flush=True)
            sent: float | None = None
            while True:
                if stop.is_set():
                    return number - 1, "interrupted"
                try:
                    status = avoid.wait_status(timeout=2.0)
                except BusTimeout:
                    print("  no status from the avoid module for 2 s; stopping the mission")
                    return number - 1, "NOT done"
                start_time = status.stamp if start_time is None else start_time
                sent = status.stamp if sent is None else sent
                elapsed = status.stamp - start_time
                state = status.element[1] if len(status.element) > 1 else 0
                # The first statuses after a goto may still describe the previous one.
                fresh = status.stamp > sent + 0.5
                if elapsed >= next_report or (fresh and state in (GOTO_REACHED, GOTO_STUCK)):
                    next_report = elapsed + 5.0
                    _report(elapsed, pose.read(), truth.read(), scans.read(), power.read(), status)
                if fresh and state == GOTO_REACHED:
                    print(f"  reached waypoint {number} after {elapsed:.1f} s", flush=True)
                    break
                if fresh and state == GOTO_STUCK:
                    print(f"  stuck on the way to waypoint {number}; stopping the mission")
                    return number - 1, "NOT done"
                if elapsed > duration:
                    print(f"  the route took longer than {duration:g} s; giving up")
                    return number - 1, "NOT done"
        return len(OFFICE_ROUTE), "done"
    finally:
        avoid.set_velocity(0.0, 0.0)
        avoid.close()


def _report(
    elapsed: float,
    pose: msgs.PoseEstimate | None,
    true: msgs.Odometry | None,
    scan: msgs.LaserScan | None,
    battery: msgs.Power | None,
    status: msgs.FVectorState,
) -> None:
    x, y, theta = (pose.pose[0], pose.pose[1], pose.pose[3]) if pose else (math.nan,) * 3
    error = math.hypot(true.x - x, true.y - y) if true else math.nan
    nearest = min((r for r in scan.ranges if r > 0), default=math.nan) if scan else math.nan
    print(
        f"  t={elapsed:6.1f} s  at ({x:5.1f}, {y:5.1f}) m  heading {math.degrees(theta) % 360:5.1f}°  "
        f"pose error {error:.3f} m  nearest echo {nearest:4.2f} m  "
        f"battery {battery.charge * 100 if battery else 0:5.1f} %  [{describe_status(status)}]",
        flush=True,
    )


def _draw(world: World, log: MissionLog, scan: msgs.LaserScan | None, path: Path, outcome: str) -> Path | None:
    with log.lock:
        history = np.array(log.truth) if log.truth else np.zeros((0, 4))
        estimate = np.array(log.estimate) if log.estimate else None
    if not len(history):
        return None
    points = None
    if scan is not None:
        # Where the robot was when the scan was taken (the wrist stays straight ahead in this mission).
        _, x, y, theta = history[int(np.argmin(np.abs(history[:, 0] - scan.stamp)))]
        lx, ly, heading = laser_pose(x, y, theta, 0.0, LaserParams().mount_x)
        points = scan_points((lx, ly, heading), scan.ranges, scan.angles, max_range=scan.max_range)
    return plot_run(
        world,
        path,
        history[:, 1:3],
        estimate,
        points,
        title=f"Pluto demo: office world, route {outcome}",
        estimate_label="localization",
    )
