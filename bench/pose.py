"""Pose accuracy and CPU: Pluto's pose module against a particle filter (AMCL) and dead reckoning.

Every method sees the same seeded runs: the office and the campus worlds, the robot driven along a route with the
simulator's ``realistic`` noise profile (or another: ``--noise``). Run from the project root:

    .venv/bin/python bench/pose.py                 # both routes to their end (about twenty seconds)
    .venv/bin/python bench/pose.py --quick         # the first 30 s of each route
    .venv/bin/python bench/pose.py --seed 2        # another run of the same routes
    .venv/bin/python bench/pose.py --noise basic   # the devices' errors in a world exactly as mapped

Data: an offline simulation with the simulator's own pieces, not a recording of the stack. ``pluto demo`` drives
only the office; one generator for both worlds keeps the two runs alike, costs seconds instead of a lock-stepped
stack per world, and gives each method exactly what the bus would. Each 50 ms tick (the base's 20 Hz) does what the
modules of the ``mission`` profile do in a tick:

* the site: the world as built (:func:`~pluto.sim.site.build_site`), which with realistic noise is a few cm off the
  map, holds glass panes and has unmapped clutter along its walls; the devices below live in it, the estimators get
  the map. It is drawn from the run's seed as in the simulator.
* ``base``: :class:`~pluto.hardware.base.sim.SimBody` steps under the route's command (collisions with the walls,
  obstacles, clutter and the walking person; with realistic noise the odometry has its 2 % scale error, 3 % slip per
  step, a heading bias per metre and short slips, and keeps counting when the wheels spin against something). Every
  device has its own generator, as in the simulator (:func:`~pluto.sim.noise.device_rng`), from a seed drawn from
  ``--seed`` and the world's name, so the two worlds do not share their noise.
* ``dmu``: :class:`~pluto.hardware.dmu.sim.SimDmu` measures the body's true motion (gyro bias, drift and noise) and
  gives its filtered state stamped back by its filter delay, as ``DMU/State``.
* ``localization``: the service's own core, :class:`~pluto.navigation.localization.core.DeadReckoning` with the
  service's default model, started at the world's start pose (as the demo's start-pose file does), takes the
  inertial state, the wrist (pan = tilt = 0) and the odometry by their stamps. For each scan its
  :meth:`~pluto.navigation.localization.core.DeadReckoning.scan` gives ``Localization/Laser_Dead-Reckoning`` (the
  8-D laser pose and the robot's increment covariance since the previous scan); ``Localization/Laser_Pose`` is that
  pose through a :class:`~pluto.navigation.localization.core.PoseAdjustment` with no post yet (the pose module
  reads it only at its first scan, before it has posted anything).
* ``sick``: every 200 ms a :class:`~pluto.hardware.sick.sim.SimLaser` scan (361 beams over 180°, 80 m, 1 cm resolution;
  with realistic noise 1 cm + 0.1 % of the range of noise, mixed pixels, echoes lost on dark surfaces and at grazing
  incidence, glass, 0.5 % dropouts) from the true pose at the scan's centre time, the person included; that time is
  the stamp of ``Sick/Scan_mm`` and of the laser poses above.

The route is driven on the true pose by a pure-pursuit follower (1 m look-ahead, 0.6 m/s and 1 rad/s as the demo's
gotos, turning on the spot at corners, slowing near a waypoint); the estimators only watch, so the path is the same
for all of them. Office: the demo's route (``pluto.cli.demo.OFFICE_ROUTE``), east down the corridor, back west, into
the lobby and past the reception, with the corridor legs 0.4 m south of the corridor's centre, as there is no
obstacle avoidance to take the robot past the person walking up and down it. Campus: from the start on the western
street north to the first cross street, east along it, north up the middle street (135 m; the person walking round
the administration block passes along the same streets, 1.5 m to the side).

Methods, each fed every scan of the run in order:

1. ``Pluto pose``: the pose module's own per-scan code (its
   :class:`~pluto.navigation.pose.tracker.PoseTracker`, without a bus) with its default parameters and the map it
   loads (:meth:`~pluto.navigation.pose.map.WallMap.from_file` of the world: its walls and obstacle outlines), given
   each scan with its ``Localization/Laser_Dead-Reckoning`` and ``Localization/Laser_Pose`` messages: the lines of
   the scan (:func:`~pluto.navigation.pose.features.line_table`, the arrays behind ``extract_lines``); at the first
   scan a :class:`~pluto.navigation.pose.core.PoseFilter` at the corrected laser pose, then a predict with the
   dead-reckoned one; the update on the map's walls within the scanner's range (80 m, as AMCL's beams); while
   lost, its searches of the map and resets; the posted laser pose, which is the estimate.
2. ``AMCL`` (``bench/amcl.py``, Nav2's algorithm) with Nav2's defaults, and with the odometry alphas lowered to
   0.05, each seeded, on the world's static map (walls, obstacle outlines and round obstacles, as a Nav2 map of the
   place would hold them), the laser 0.25 m ahead of the centre. Its odometry is the robot pose of
   ``Localization/Laser_Dead-Reckoning`` at each scan (the same dead reckoning the pose module gets, the wheels
   fused with the gyro), its scans the same 361 beams. It starts at the same pose with the same covariance as
   Pluto's filter. A scan that does not pass its update thresholds costs it almost nothing and returns the last
   estimate carried along by the odometry, as a Nav2 user reads it.
3. ``dead reckoning``: the robot pose of ``Localization/Laser_Dead-Reckoning`` itself.

Errors are of the robot pose (a laser pose is turned into it through the mount offset,
:func:`~pluto.navigation.localization.core.robot_of_laser`) against the true pose at the scan's stamp, over every
scan. CPU is this process's (``time.process_time``) around each method's work on one scan only; for AMCL the mean
over all scans (skipped ones included) and over the scans that ran its filter. The pose module's kernels are
compiled by numba at their first call in a process (or loaded from numba's cache beside the sources): that one-off
cost is measured on a throwaway tracker before the timed run and printed in the notes, not in the CPU per scan.
``lines/s``: scans per second of ``extract_lines`` alone on the run's scans (361 beams), in CPU time as above, best of
a few passes. The
targets are printed under the table; nothing is asserted.

Real logs: after the worlds, the same methods on the three Radish logs with the SLAM whose map they use
(``bench/pose_logs.py``, which says how; ``--logs intel,fr079,corridor`` picks them, ``--logs none`` skips them,
``--quick`` takes their first 300 scans), in the same run, in a table of their own.
"""

from __future__ import annotations

import argparse
import logging
import math
import platform
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pluto import msgs
from pluto.geometry import wrap_angle
from pluto.hardware.base.sim import BodyParams, SimBody
from pluto.hardware.dmu.sim import SimDmu
from pluto.hardware.sick.sim import LaserParams, SimLaser
from pluto.navigation.localization.core import DeadReckoning, PoseAdjustment, flat, robot_of_laser
from pluto.navigation.localization.module import LocalizationModuleParams
from pluto.navigation.pose.features import extract_lines
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.tracker import PoseModuleParams, PoseTracker
from pluto.sim.noise import PROFILES, device_rng, noise_profile
from pluto.sim.site import build_site
from pluto.sim.world import World, load_world

sys.path.append(str(Path(__file__).resolve().parent))  # bench/amcl.py and bench/pose_logs.py (bench/ is not a package)

import amcl
import pose_logs
from pose_logs import PLUTO, TARGET_CPU_RATIO, met

FloatArray = npt.NDArray[np.float64]
Pose3 = tuple[float, float, float]

QUICK_SCANS = 300
"""Scans of each real log with ``--quick``."""

TICK = 0.05
"""s: the base's step (20 Hz, the simulated base's rate)."""
SCAN_EVERY = 4
"""Ticks between two scans (200 ms, the SICK's period)."""
DMU_TIME_CONSTANT = 0.1
"""s: the inertial unit's filter (the dmu module's default)."""

ROUTES: dict[str, list[tuple[float, float]]] = {
    "office": [(34.0, 9.6), (10.0, 9.6), (6.0, 10.0), (6.0, 2.5), (3.0, 2.0)],
    "campus": [(50.0, 60.0), (110.0, 60.0), (110.0, 105.0)],
}
"""Waypoints (m, world frame) from each world's start pose."""

SPEED = 0.6
"""m/s: top speed of the route (the demo's gotos)."""
TURN_RATE = 1.0
"""rad/s: top turn rate of the route."""
LOOKAHEAD = 1.0
"""m: pure pursuit's look-ahead along the current leg."""
REACHED = 0.3
"""m: a waypoint closer than this is reached."""
TURN_ON_THE_SPOT = 0.5
"""rad: with the look-ahead point farther off the heading than this the robot stops and turns."""

QUICK_SECONDS = 30.0
"""Simulated seconds of each route with ``--quick``."""

AMCL_CONFIGURATIONS: tuple[tuple[str, dict[str, float]], ...] = (
    ("AMCL, Nav2 defaults", {}),
    ("AMCL, alphas 0.05", {f"alpha{i}": 0.05 for i in range(1, 5)}),
)
"""The particle filter's rows: a name and the parameters that differ from Nav2's defaults."""

DEAD_RECKONING = "dead reckoning"

TARGET_LINES = 2000.0
"""Line extraction target, scans/s of 361 beams."""


# -- the route ---------------------------------------------------------------------------------------------------


class RouteFollower:
    """Pure pursuit along a polyline of waypoints, turning on the spot where the next leg turns sharply.

    Args:
        start: (x, y) where the route begins, m.
        waypoints: the points to pass, m.
    """

    def __init__(self, start: tuple[float, float], waypoints: list[tuple[float, float]]) -> None:
        self.points = [start, *waypoints]
        self.leg = 1  # index of the waypoint being driven to

    def command(self, pose: Pose3) -> tuple[float, float] | None:
        """(v m/s, ω rad/s) at the true ``pose``; None once the last waypoint is reached."""
        x, y, theta = pose
        while self.leg < len(self.points) and math.dist(self.points[self.leg], (x, y)) < REACHED:
            self.leg += 1
        if self.leg >= len(self.points):
            return None
        (ax, ay), (bx, by) = self.points[self.leg - 1], self.points[self.leg]
        length = max(math.hypot(bx - ax, by - ay), 1e-9)
        ux, uy = (bx - ax) / length, (by - ay) / length
        along = min(max((x - ax) * ux + (y - ay) * uy, 0.0), length)
        ahead = min(length, along + LOOKAHEAD)
        tx, ty = ax + ux * ahead, ay + uy * ahead
        error = wrap_angle(math.atan2(ty - y, tx - x) - theta)
        if abs(error) > TURN_ON_THE_SPOT:
            return 0.0, max(-TURN_RATE, min(TURN_RATE, 2.0 * error))
        v = min(SPEED, max(0.15, 0.8 * math.hypot(bx - x, by - y)))
        reach = max(math.hypot(tx - x, ty - y), 0.1)
        omega = 2.0 * v * math.sin(error) / reach
        return v, max(-TURN_RATE, min(TURN_RATE, omega))


# -- the data ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanRecord:
    """One scan and what the bus carries for it.

    Attributes:
        truth: the robot's true (x, y, θ) at the scan's stamp (``Sim/Truth``).
        ranges: ``(361,)`` the scan's ranges, m.
        scan: ``Sick/Scan_mm``.
        dr: ``Localization/Laser_Dead-Reckoning`` of the scan (its stamp): the 8-D laser pose, and the covariance
            of the robot's (x, y, θ) increment since the previous scan.
        corrected: ``Localization/Laser_Pose`` of the scan.
    """

    truth: Pose3
    ranges: FloatArray
    scan: msgs.LaserScan
    dr: msgs.PoseEstimate
    corrected: msgs.PoseEstimate

    @property
    def stamp(self) -> float:
        return self.scan.stamp


@dataclass
class Run:
    """A simulated drive: the world, the laser and the scans with their poses."""

    world: World
    laser: LaserParams
    mount: tuple[float, float, float]
    records: list[ScanRecord] = field(default_factory=list)
    seconds: float = 0.0
    distance: float = 0.0

    @property
    def angles(self) -> FloatArray:
        return self.laser.angles()


def world_seed(seed: int, world_name: str) -> int:
    """The simulation seed of one world's run: from ``seed`` and the world's name, so the worlds' runs do not share
    their noise (the devices' generators then come from it as in the simulator, :func:`device_rng`)."""
    return int(np.random.SeedSequence([seed, zlib.crc32(world_name.encode())]).generate_state(1)[0])


def simulate(world_name: str, seconds: float | None, seed: int, noise_name: str = "realistic") -> Run:
    """Drive the world's route (stopping after ``seconds`` of simulated time if given) and record every scan.

    Raises:
        KeyError: no route for this world.
        ConfigError: an unknown noise profile.
    """
    world = load_world(world_name)
    route = ROUTES[world_name]
    seed = world_seed(seed, world_name)
    noise = noise_profile(noise_name)
    site = build_site(world, noise, seed)
    built = site.world
    laser_params = LaserParams()
    model = LocalizationModuleParams().model
    body = SimBody(built.segments(), built.circles, world.start, BodyParams(), noise, device_rng(seed, "base"))
    dmu = SimDmu(noise, device_rng(seed, "dmu"), DMU_TIME_CONSTANT)
    laser = SimLaser(site.caster(), laser_params, noise, device_rng(seed, "sick"), surfaces=site.surfaces)
    dead_reckoning = DeadReckoning(model, world.start)
    adjustment = PoseAdjustment()  # no post reaches it before the pose module's first scan
    follower = RouteFollower((world.start[0], world.start[1]), route)
    run = Run(world, laser_params, model.laser_mount)
    pending: list[tuple[float, FloatArray, Pose3]] = []
    angles = laser_params.angles()

    def feed(t: float, dt: float, turned: float | None) -> None:
        s = body.state()
        m = dmu.step(t, dt, s.v, s.omega, turned)
        dead_reckoning.add_dmu(m.state_stamp, m.theta, m.phi, m.psi, m.filtered_rates[2])
        dead_reckoning.add_wrist(t, 0.0, 0.0)
        dead_reckoning.add_odometry(t, s.odom_x, s.odom_y, s.odom_theta)

    def place_scans() -> None:
        while pending:
            t, ranges, truth = pending[0]
            laser_pose = dead_reckoning.scan(t)
            if laser_pose is None:
                return
            pending.pop(0)
            scan = msgs.LaserScan(
                stamp=t,
                arrival=t + laser_params.latency,
                ranges=ranges.tolist(),
                angles=angles.tolist(),
                count=len(ranges),
                max_range=laser_params.max_range,
            )
            dr = msgs.PoseEstimate(stamp=t, pose=list(laser_pose.pose), covariance=flat(laser_pose.increment))
            corrected = msgs.PoseEstimate(
                stamp=t,
                pose=adjustment.apply(laser_pose.pose),
                covariance=adjustment.covariance(laser_pose.absolute),
                cmd_flags=adjustment.setter,
            )
            run.records.append(ScanRecord(truth, ranges, scan, dr, corrected))

    feed(0.0, 0.0, None)
    tick = 0
    limit = math.inf if seconds is None else seconds
    while True:
        previous = body.state()
        command = follower.command((previous.x, previous.y, previous.theta))
        t = (tick + 1) * TICK
        if command is None or t > limit + 1e-9:
            break
        tick += 1
        movers = world.mover_circles(t)
        state = body.step(command[0], command[1], TICK, movers)
        run.distance += math.hypot(state.x - previous.x, state.y - previous.y)
        feed(t, TICK, state.theta - previous.theta)
        if tick % SCAN_EVERY == 0:
            truth = (state.x, state.y, state.theta)
            pending.append((t, laser.scan(t, truth, 0.0, 0.0, movers), truth))
        place_scans()
    dead_reckoning.flush()
    place_scans()
    run.seconds = tick * TICK
    return run


# -- the methods -------------------------------------------------------------------------------------------------


@dataclass
class MethodResult:
    """One method on one run.

    Attributes:
        name: the method.
        position: ``(S,)`` position error per scan, m.
        heading: ``(S,)`` heading error per scan, rad (wrapped).
        cpu: ``(S,)`` CPU seconds per scan (empty: not measured).
        updated: ``(S,)`` whether the scan ran the filter (all for Pluto).
        lines_per_s: line extraction rate, scans/s (Pluto only).
        notes: what else the method said.
    """

    name: str
    position: FloatArray
    heading: FloatArray
    cpu: FloatArray = field(default_factory=lambda: np.zeros(0))
    updated: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    lines_per_s: float = math.nan
    notes: str = ""


def _errors(estimates: list[Pose3], records: list[ScanRecord]) -> tuple[FloatArray, FloatArray]:
    est = np.array(estimates, dtype=np.float64).reshape(-1, 3)
    true = np.array([r.truth for r in records], dtype=np.float64).reshape(-1, 3)
    position = np.hypot(est[:, 0] - true[:, 0], est[:, 1] - true[:, 1])
    heading = wrap_angle(est[:, 2] - true[:, 2])
    return position, heading


def _robot(laser: list[float], mount: tuple[float, float, float]) -> Pose3:
    """The robot's (x, y, θ) under an 8-D laser pose."""
    pose = robot_of_laser(laser, 0.0, 0.0, mount)
    return pose[0], pose[1], pose[3]


def initial_covariance(record: ScanRecord, params: PoseModuleParams) -> FloatArray:
    """The pose module's covariance at its first scan: the corrected pose's own plus its initial floor."""
    floor = np.diag([params.initial_std**2, params.initial_std**2, params.initial_heading_std**2])
    cov: FloatArray = np.array(record.corrected.covariance, dtype=np.float64).reshape(3, 3) + floor
    return cov


def run_pluto(run: Run) -> MethodResult:
    """The pose module on every scan, as its shell feeds it (its :class:`PoseTracker`, with the map it loads)."""
    params = PoseModuleParams()
    quiet = logging.getLogger("bench.pose")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    wall_map = WallMap.from_file(run.world.name, include_obstacles=params.obstacles)
    # numba compiles the module's kernels (or loads them from its cache) at their first call in a process: a
    # one-off cost, measured here on a throwaway tracker and reported apart from the per-scan figures
    start = time.process_time()
    warm = PoseTracker(wall_map, params, quiet)
    for record in run.records[:2]:
        warm.process(record.stamp, record.scan, record.dr, record.corrected)
    first = time.process_time() - start
    module = PoseTracker(wall_map, params, quiet)
    estimates: list[Pose3] = []
    cpu: list[float] = []
    lost = 0
    post: msgs.PoseEstimate | None = None
    for record in run.records:
        start = time.process_time()
        post = module.process(record.stamp, record.scan, record.dr, record.corrected) or post
        cpu.append(time.process_time() - start)
        assert post is not None and module.filter is not None
        estimates.append(_robot(post.pose, run.mount))
        lost += int(module.filter.lost)
    position, heading = _errors(estimates, run.records)
    notes = (
        f"{lost} scans lost, {module.relocalizations} relocalizations; its first two scans in this process took "
        f"{first:.2f} s of CPU (compiled kernels loaded or compiled; not in CPU/scan)"
    )
    return MethodResult(PLUTO, position, heading, np.array(cpu), np.ones(len(cpu), dtype=bool), notes=notes)


def run_amcl(run: Run, name: str, changes: dict[str, float], seed: int) -> MethodResult:
    """The particle filter on every scan, started where Pluto's filter starts."""
    mount = run.mount
    params = amcl.AmclParams(laser_pose=(mount[0], mount[1], 0.0), **changes)
    filt = amcl.Amcl(run.world.segments(), seed=seed, params=params, circles=run.world.circles)
    first = run.records[0]
    x0, y0, theta0 = _robot(first.corrected.pose, mount)
    filt.init_pose(x0, y0, theta0, initial_covariance(first, PoseModuleParams()))
    angles = run.angles
    angle_min, increment = float(angles[0]), float(angles[1] - angles[0])
    estimates: list[Pose3] = []
    cpu: list[float] = []
    updated: list[bool] = []
    particles: list[int] = []
    for record in run.records:
        odom = _robot(record.dr.pose, mount)
        runs = filt.filter_runs
        start = time.process_time()
        x, y, theta, _ = filt.update(odom, record.ranges, angle_min, increment, run.laser.max_range)
        cpu.append(time.process_time() - start)
        updated.append(filt.filter_runs > runs)
        particles.append(filt.particle_count)
        estimates.append((x, y, theta))
    position, heading = _errors(estimates, run.records)
    notes = f"{int(np.mean(particles))} particles on average"
    return MethodResult(name, position, heading, np.array(cpu), np.array(updated), notes=notes)


def run_dead_reckoning(run: Run) -> MethodResult:
    """The robot pose of ``Localization/Laser_Dead-Reckoning``."""
    estimates = [_robot(r.dr.pose, run.mount) for r in run.records]
    position, heading = _errors(estimates, run.records)
    return MethodResult(DEAD_RECKONING, position, heading)


def line_rate(run: Run, passes: int) -> float:
    """Scans per second of ``extract_lines`` on the run's scans (CPU time), best of ``passes`` timed passes after a
    warm-up."""
    angles = run.angles
    scans = [r.ranges for r in run.records]
    for ranges in scans[:20]:
        extract_lines(ranges, angles, max_range=run.laser.max_range)
    best = math.inf
    for _ in range(passes):
        start = time.process_time()
        for ranges in scans:
            extract_lines(ranges, angles, max_range=run.laser.max_range)
        best = min(best, time.process_time() - start)
    return len(scans) / best if best > 0 else math.inf


@dataclass
class WorldResult:
    """Every method on one world's run."""

    world: str
    run: Run
    methods: list[MethodResult]

    def method(self, name: str) -> MethodResult:
        return next(m for m in self.methods if m.name == name)


def evaluate(
    world_name: str, seconds: float | None, seed: int, passes: int = 3, noise: str = "realistic"
) -> WorldResult:
    """Simulate one world's run and give it to every method."""
    run = simulate(world_name, seconds, seed, noise)
    if not run.records:
        raise RuntimeError(f"{world_name}: the run produced no scan")
    pluto = run_pluto(run)
    pluto.lines_per_s = line_rate(run, passes)
    methods = [pluto]
    methods += [run_amcl(run, name, changes, seed) for name, changes in AMCL_CONFIGURATIONS]
    methods.append(run_dead_reckoning(run))
    return WorldResult(world_name, run, methods)


# -- the table ---------------------------------------------------------------------------------------------------


def _ms(values: FloatArray) -> str:
    return f"{1e3 * float(np.mean(values)):.2f}" if values.size else "-"


def table(results: list[WorldResult]) -> list[str]:
    """The table's lines: a header, then one row per world and method."""
    lines = [
        f"{'world':<8}{'method':<22}{'pos mean':>9}{'pos max':>9}{'hdg mean':>9}{'hdg max':>9}"
        f"{'CPU/scan':>10}{'CPU/upd':>9}{'updates':>11}{'lines/s':>9}",
        f"{'':<8}{'':<22}{'m':>9}{'m':>9}{'deg':>9}{'deg':>9}{'ms':>10}{'ms':>9}{'':>11}{'361 b':>9}",
    ]
    for w in results:
        for m in w.methods:
            heading = np.degrees(np.abs(m.heading))
            updates = f"{int(m.updated.sum())}/{m.updated.size}" if m.updated.size else "-"
            rate = f"{m.lines_per_s:,.0f}" if math.isfinite(m.lines_per_s) else "-"
            lines.append(
                f"{w.world:<8}{m.name:<22}{float(np.mean(m.position)):>9.3f}{float(np.max(m.position)):>9.3f}"
                f"{float(np.mean(heading)):>9.2f}{float(np.max(heading)):>9.2f}"
                f"{_ms(m.cpu):>10}{_ms(m.cpu[m.updated]) if m.cpu.size else '-':>9}{updates:>11}{rate:>9}"
            )
    return lines


def verdicts(results: list[WorldResult]) -> list[str]:
    """One line per target, world and particle filter: the figures compared and whether the target is met."""

    def cmp(a: float, b: float) -> str:
        return "<" if a < b else ">="

    out: list[str] = []
    for w in results:
        pluto = w.method(PLUTO)
        pm, px = float(np.mean(pluto.position)), float(np.max(pluto.position))
        hm, hx = (float(np.degrees(f(np.abs(pluto.heading)))) for f in (np.mean, np.max))
        for name, _ in AMCL_CONFIGURATIONS:
            pf = w.method(name)
            am, ax = float(np.mean(pf.position)), float(np.max(pf.position))
            bm, bx = (float(np.degrees(f(np.abs(pf.heading)))) for f in (np.mean, np.max))
            ok = pm < am and px < ax and hm < bm and hx < bx
            out.append(
                f"{w.world}, error below {name}: position mean {pm:.3f} {cmp(pm, am)} {am:.3f} m, max {px:.3f} "
                f"{cmp(px, ax)} {ax:.3f} m; heading mean {hm:.2f} {cmp(hm, bm)} {bm:.2f}°, max {hx:.2f} "
                f"{cmp(hx, bx)} {bx:.2f}°: {met(ok)}"
            )
        mine = 1e3 * float(np.mean(pluto.cpu))
        for name, _ in AMCL_CONFIGURATIONS:
            pf = w.method(name)
            share = 1e3 * float(np.mean(pf.cpu)) / TARGET_CPU_RATIO
            per_run = 1e3 * float(np.mean(pf.cpu[pf.updated])) / TARGET_CPU_RATIO if pf.updated.any() else math.nan
            out.append(
                f"{w.world}, CPU per scan below 1/{TARGET_CPU_RATIO:g} of {name}: {mine:.2f} {cmp(mine, share)} "
                f"{share:.2f} ms over all its scans: {met(mine < share)} ({cmp(mine, per_run)} {per_run:.2f} ms "
                "over its filter runs)"
            )
        rate = pluto.lines_per_s
        out.append(
            f"{w.world}, line extraction: {rate:,.0f} scans/s of 361 beams {'>=' if rate >= TARGET_LINES else '<'} "
            f"{TARGET_LINES:,.0f}: {met(rate >= TARGET_LINES)}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"only the first {QUICK_SECONDS:.0f} s of each route")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulation and of the particle filters")
    parser.add_argument("--passes", type=int, default=3, help="timed passes of the line extraction (default 3)")
    parser.add_argument(
        "--logs",
        default=",".join(pose_logs.LOGS),
        help=f"real logs to run after the worlds, of {', '.join(pose_logs.LOGS)}, or none (default all)",
    )
    parser.add_argument(
        "--datasets", type=Path, default=pose_logs.DATASETS, help=f"the logs' folder (default {pose_logs.DATASETS})"
    )
    parser.add_argument(
        "--noise", choices=sorted(PROFILES), default="realistic", help="noise profile of the runs (default realistic)"
    )
    args = parser.parse_args()
    try:
        logs = pose_logs.log_names(args.logs)
    except ValueError as err:
        parser.error(str(err))
    seconds = QUICK_SECONDS if args.quick else None
    wall = time.perf_counter()
    results = [evaluate(name, seconds, args.seed, args.passes, args.noise) for name in ROUTES]
    print(
        "Pose accuracy and CPU per scan: Pluto's pose module, AMCL (bench/amcl.py) and dead reckoning; "
        f"{args.noise} noise, seed {args.seed}"
    )
    for w in results:
        r = w.run
        print(f"  {w.world}: {r.seconds:.0f} s, {r.distance:.0f} m, {len(r.records)} scans")
    print()
    for line in table(results):
        print(line)
    print()
    print("errors of the robot pose against the truth at each scan's stamp; CPU/upd: per scan that ran the filter")
    for w in results:
        for m in w.methods:
            if m.notes:
                print(f"  {w.world} {m.name}: {m.notes}")
    print()
    print("targets:")
    for line in verdicts(results):
        print(f"  {line}")
    if logs:
        print()
        pose_logs.report(pose_logs.run(logs, args.datasets, args.seed, QUICK_SCANS if args.quick else None), args.seed)
    print()
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"({python}, numpy {np.__version__}; {time.perf_counter() - wall:.0f} s wall for the whole run)")


if __name__ == "__main__":
    main()
