"""``pluto demo``: the most complete mission Pluto can run so far, on the simulated robot, ending by itself.

It brings up the simulated robot (the ``sim`` profile: world and clock, base, wrist, laser, inertial unit, GPS and
the localization service, each in its own process, started in dependency order), drives a scripted route through
the office world on the robot's own odometry, slowing down for what the sonar sees ahead, prints its progress, and
finally draws the map, the true and the odometry paths and the last laser scan to a PNG.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.geometry import compose
from pluto.runtime import launcher, mom
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.runner import stop_on_signals
from pluto.runtime.supervisor import Supervisor
from pluto.sim.laser import LaserParams, laser_pose
from pluto.sim.plot import plot_run, scan_points
from pluto.sim.route import RouteFollower
from pluto.sim.world import load_world

# Through the office: east down the corridor, back west, into the lobby and past the reception.
OFFICE_ROUTE = [(34.0, 9.7), (10.0, 9.7), (6.0, 10.0), (6.0, 2.0), (3.0, 1.5)]


def clearance_ahead(sonar: msgs.SonarScan | None, cone: float = 0.5) -> float:
    """The shortest sonar range within ``cone`` rad of straight ahead, m (inf without sonar)."""
    if sonar is None:
        return math.inf
    ahead = [r for r, a in zip(sonar.ranges, sonar.angles, strict=False) if abs(a) <= cone]
    return min(ahead, default=math.inf)


def run_demo(config: Config, duration: float = 240.0, rate: float = 5.0, output: Path | None = None) -> int:
    """Run the mission; return the exit status (0 if the robot completed its route).

    Args:
        duration: simulated seconds after which the mission gives up.
        rate: simulated seconds per wall-clock second.
        output: folder for the picture (default ``./demo-output``).
    """
    world = load_world("office")
    profile = with_params(load_profile("sim"), "sim", world="office", rate=rate)
    out_dir = (output or Path("demo-output")).resolve()
    truth_path: list[tuple[float, float, float, float]] = []  # stamp, x, y, θ
    odom_path: list[tuple[float, float]] = []
    lock = threading.Lock()
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(bus, profile, config)
        print(f"Pluto demo on robot '{bus.robot}': the simulated robot in the office world, {rate:g}x real time")
        print(f"starting {len(profile.entries)} modules: {', '.join(e.name for e in profile.entries)}", flush=True)
        t0 = time.monotonic()
        done = False
        last_scan: msgs.LaserScan | None = None
        try:
            supervisor.start()
            print(f"all publishing after {time.monotonic() - t0:.1f} s\n")
            print(mom.render(mom.snapshot(bus), bus.robot) + "\n", flush=True)

            def on_truth(pose: msgs.Odometry) -> None:
                with lock:
                    truth_path.append((pose.stamp, pose.x, pose.y, pose.theta))

            bus.create_subscription("Sim/Truth", on_truth, msgs.Odometry, depth=1024)
            odometry = bus.create_reader("Base/Drive/State", msgs.Odometry)
            sonar = bus.create_reader("Base/Sonar", msgs.SonarScan)
            scans = bus.create_reader("Sick/Scan_mm", msgs.LaserScan)
            truth = bus.create_reader("Sim/Truth", msgs.Odometry)
            power = bus.create_reader("Base/Power", msgs.Power)
            command = bus.create_publisher("Base/Drive/Command", msgs.ActuatorState)
            follower = RouteFollower(OFFICE_ROUTE)
            start_time: float | None = None
            next_report = 0.0
            while not stop.is_set():
                try:
                    odo = odometry.wait_for_update(timeout=2.0)
                except BusTimeout:
                    print("  no odometry for 2 s; stopping the mission")
                    break
                start_time = odo.stamp if start_time is None else start_time
                elapsed = odo.stamp - start_time
                pose = compose(world.start, (odo.x, odo.y, odo.theta))
                odom_path.append((pose[0], pose[1]))
                step = follower.step(pose, clearance_ahead(sonar.read()))
                command.write(msgs.ActuatorState(stamp=odo.stamp, velocity=[step.v, step.omega]))
                if elapsed >= next_report or step.done:
                    next_report = elapsed + 5.0
                    true = truth.read()
                    scan = scans.read()
                    battery = power.read()
                    nearest = min((r for r in scan.ranges if r > 0), default=math.nan) if scan else math.nan
                    error = math.hypot(true.x - pose[0], true.y - pose[1]) if true else math.nan
                    print(
                        f"  t={elapsed:6.1f} s  waypoint {min(step.waypoint + 1, len(OFFICE_ROUTE))}/"
                        f"{len(OFFICE_ROUTE)}  at ({pose[0]:5.1f}, {pose[1]:5.1f}) m  "
                        f"heading {math.degrees(pose[2]) % 360:5.1f}°  odometry error {error:.3f} m  "
                        f"nearest echo {nearest:4.2f} m  battery {battery.charge * 100 if battery else 0:5.1f} %",
                        flush=True,
                    )
                if step.done:
                    done = True
                    break
                if elapsed > duration:
                    print(f"  the route took longer than {duration:g} s; giving up")
                    break
            command.write(msgs.ActuatorState(velocity=[0.0, 0.0]))
            last_scan = scans.read()
        finally:
            supervisor.shutdown()
    logs = launcher.runtime_dir(bus.robot)
    picture = None
    with lock:
        history = np.array(truth_path) if truth_path else np.zeros((0, 4))
    true_xy = history[:, 1:3]
    if len(true_xy):
        points = None
        if last_scan is not None:
            # Where the robot was when the scan was taken (the wrist stays straight ahead in this mission).
            _, x, y, theta = history[int(np.argmin(np.abs(history[:, 0] - last_scan.stamp)))]
            lx, ly, heading = laser_pose(x, y, theta, 0.0, LaserParams().mount_x)
            points = scan_points((lx, ly, heading), last_scan.ranges, last_scan.angles, max_range=last_scan.max_range)
        name = f"office-{datetime.now():%Y%m%d-%H%M%S}.png"
        picture = plot_run(
            world,
            out_dir / name,
            true_xy,
            np.array(odom_path) if odom_path else None,
            points,
            title=f"Pluto demo: office world, {'route done' if done else 'route not finished'}",
        )
    travelled = float(np.sum(np.hypot(*np.diff(true_xy, axis=0).T))) if len(true_xy) > 1 else 0.0
    outcome = "done" if done else "interrupted" if stop.is_set() else "NOT done"
    print(f"\nmission {outcome}: travelled {travelled:.1f} m; all modules stopped.")
    if picture:
        print(f"map, true and odometry paths and the last scan: {picture}")
    print(f"logs of each module: {logs}/")
    return 0 if done or stop.is_set() else 1
