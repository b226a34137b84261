"""``pluto demo``: the most complete mission Pluto can run so far, on the simulated robot, ending by itself.

It brings up the simulated robot with its localization service, the pose module and the movement chain (the
``mission`` profile: world and clock, base, wrist, laser, inertial unit, GPS, localization, pose, drive, avoid and
motion, each in its own process or all in the demo's, started in dependency order), records every interface to an
MCAP log, then gives the motion module one goal after another through the office world: movetos (ray following,
through the rooms' 0.9 m doors) into two rooms and back to the lobby, then an exploration of the lobby that ends
back home (the avoid module's laser protection, the drive module's bumper stop and command timeout underneath). It
prints its progress, and finally draws the map, the true and the localization paths and the last laser scan with the
wall lines the pose module finds in it to a PNG. The log replays through the stack (``pluto replay``) and opens in
standard MCAP viewers.

The route is driven by a module of its own, :class:`pluto.movement.mission.MissionModule`, which follows the simulated
time: by default the simulator runs in lock-step, as fast as the modules go, and the mission takes part in it, so each
goto goes out at an exact simulated time and the same seed gives the same run, to the last digit, on any machine and
however busy it is. The run ends with a summary that scripts can read: the final true pose, the localization error
against the truth (and that of dead reckoning alone, which the pose module corrects), the wall time and the real-time
factor achieved.

With ``devices="emulated"`` the same route runs on the real device drivers instead, each talking its protocol to an
emulator (the ``emulated`` profile: a Pioneer over P2OS, a SICK LMS, a Crossbow DMU, an NMEA receiver, PowerCubes
on a virtual CAN bus) on the wall clock, as on a robot: no lock-step, so no two runs are alike. The true pose the
errors are measured against is then the Pioneer emulator's ``Sim/Truth``, interpolated to the estimates' stamps.

With ``slam=True`` (``pluto demo --slam``) the slam module runs in place of the pose module (:func:`with_slam`): the
robot starts with no map, and the map's frame is where localization starts, the world's start pose, so the map it
builds is directly comparable with the world. When the route is over the mission holds the simulated time and the
demo stops the slam module's thread, which saves the map next to the picture; the summary scores it against the
world's walls (:mod:`pluto.navigation.slam.mapcheck`: how many of the walls the laser saw are mapped within 5 cm and
1°, how many mapped walls lie on none) and the picture draws it over the world's.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from pluto import msgs, names
from pluto.bus import Bus, BusTimeout
from pluto.bus.config import DEFAULT_ROBOT
from pluto.errors import LaunchError, ModuleNotFound, PlutoError
from pluto.geometry import wrap_angle
from pluto.hardware.sick.sim import LaserParams, laser_pose
from pluto.movement.mission import OFFICE_ROUTE, MissionModule, MissionParams
from pluto.navigation.pose.features import extract_lines
from pluto.navigation.slam.mapcheck import MapScore, score_map, walls_seen
from pluto.navigation.slam.module import SlamModule, SlamModuleParams
from pluto.navigation.slam.proxy import SlamProxy
from pluto.record.recorder import Recorder, RecordStatus
from pluto.runtime import launcher, mom
from pluto.runtime.config import Config
from pluto.runtime.profiles import Profile, ProfileEntry, load_profile, start_order, with_params
from pluto.runtime.runner import ModuleSpec, interruptible, stop_on_signals
from pluto.runtime.supervisor import Supervisor
from pluto.sim.plot import plot_run, scan_points
from pluto.sim.world import World, load_world

Rate = float | Literal["max"]
Devices = Literal["simulated", "emulated"]
"""The robot's devices: the simulator's, or the real drivers talking to emulators over the devices' protocols."""

EMULATORS = {"p2os-emulator": "base", "sick-emulator": "sick", "dmu-emulator": "dmu", "gps-emulator": "gps"}
"""Each emulator of the ``emulated`` profile and the module whose driver connects to it."""


@dataclass
class MissionLog:
    """What the mission saw, for the picture and the summary (filled from bus callbacks)."""

    truth: list[tuple[float, float, float, float]] = field(default_factory=list)  # stamp, x, y, θ
    estimate: list[tuple[float, float, float, float]] = field(default_factory=list)  # stamp, x, y, θ
    dead_reckoning: list[tuple[float, float, float, float]] = field(default_factory=list)  # stamp, x, y, θ
    scans: list[msgs.LaserScan] = field(default_factory=list)  # with --slam: which walls the robot saw
    wrist: dict[float, tuple[float, float]] = field(default_factory=dict)  # scan stamp -> the laser's pan, tilt
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_truth(self, pose: msgs.Odometry) -> None:
        with self.lock:
            self.truth.append((pose.stamp, pose.x, pose.y, pose.theta))

    def on_pose(self, pose: msgs.PoseEstimate) -> None:
        with self.lock:
            self.estimate.append((pose.stamp, pose.pose[0], pose.pose[1], pose.pose[3]))

    def on_dead_reckoning(self, pose: msgs.PoseEstimate) -> None:
        with self.lock:
            self.dead_reckoning.append((pose.stamp, pose.pose[0], pose.pose[1], pose.pose[3]))

    def on_scan(self, scan: msgs.LaserScan) -> None:
        with self.lock:
            self.scans.append(scan)

    def on_laser_pose(self, pose: msgs.PoseEstimate) -> None:
        if len(pose.pose) >= 8:
            with self.lock:
                self.wrist[round(pose.stamp, 6)] = (pose.pose[6], pose.pose[7])

    def subscribe(self, bus: Bus, *, slam: bool) -> None:
        """Collect the true pose, the localization's estimate and dead reckoning from ``bus``; with ``slam`` also the
        scans and the wrist's angles (:meth:`scan_points_until`)."""
        bus.create_subscription(names.SIM_TRUTH, self.on_truth, msgs.Odometry, depth=1024)
        bus.create_subscription(names.LOCALIZATION_POSE, self.on_pose, msgs.PoseEstimate, depth=1024)
        bus.create_subscription(names.LOCALIZATION_DEAD_RECKONING, self.on_dead_reckoning, depth=1024)
        if slam:
            bus.create_subscription(names.SICK_SCAN_MM, self.on_scan, msgs.LaserScan, depth=256)
            bus.create_subscription(names.LOCALIZATION_LASER_DEAD_RECKONING, self.on_laser_pose, depth=256)

    def scan_points_until(self, end: float, truth: np.ndarray, max_tilt: float) -> list[np.ndarray]:
        """The points of each level scan stamped up to ``end``, in the world frame: the laser placed where the true
        pose (rows of stamp, x, y, θ) puts it, panned as the wrist was (``Localization/Laser_Dead-Reckoning`` of the
        scan's stamp); scans with the wrist tilted more than ``max_tilt`` (rad), or without a true pose within a
        tick, are left out."""
        with self.lock:
            scans = [s for s in self.scans if s.stamp <= end]
            wrist = dict(self.wrist)
        out: list[np.ndarray] = []
        if not len(truth):
            return out
        mount = LaserParams().mount_x
        for scan in scans:
            angles = wrist.get(round(scan.stamp, 6))
            row = int(np.argmin(np.abs(truth[:, 0] - scan.stamp)))
            if angles is None or abs(angles[1]) > max_tilt or abs(truth[row, 0] - scan.stamp) > 0.03:
                continue
            _, x, y, theta = truth[row]
            laser = laser_pose(x, y, theta, angles[0], mount)
            out.append(scan_points(laser, scan.ranges, scan.angles, max_range=scan.max_range))
        return out

    def dead_reckoning_until(self, end: float) -> np.ndarray:
        """Dead reckoning alone (``Localization/Dead-Reckoning``) up to ``end``, rows (stamp, x, y, θ)."""
        with self.lock:
            rows = sorted(d for d in self.dead_reckoning if d[0] <= end)
        return np.array(rows, dtype=float).reshape(-1, 4)

    def until(self, end: float) -> tuple[np.ndarray, np.ndarray]:
        """(truth, estimate) up to simulated time ``end`` as arrays of rows (stamp, x, y, θ), in stamp order."""
        with self.lock:
            truth = sorted(t for t in self.truth if t[0] <= end)
            estimate = sorted(e for e in self.estimate if e[0] <= end)
        return (
            np.array(truth, dtype=float).reshape(-1, 4),
            np.array(estimate, dtype=float).reshape(-1, 4),
        )


def paired(truth: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The estimates that have a truth of the same stamp, and those truths (rows of stamp, x, y, θ)."""
    by_stamp = {round(float(row[0]), 6): row for row in truth}
    pairs = [(by_stamp[key], row) for row in estimate if (key := round(float(row[0]), 6)) in by_stamp]
    if not pairs:
        return np.zeros((0, 4)), np.zeros((0, 4))
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def interpolated(truth: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The estimates stamped within the truth's span, and the truth interpolated to their stamps (rows of stamp, x,
    y, θ; the heading unwrapped before it is interpolated). For a truth sampled on its own clock (an emulator's), whose
    stamps are not the estimates'."""
    if len(truth) < 2 or not len(estimate):
        return np.zeros((0, 4)), np.zeros((0, 4))
    stamps = truth[:, 0]
    inside = estimate[(estimate[:, 0] >= stamps[0]) & (estimate[:, 0] <= stamps[-1])]
    at = inside[:, 0]
    true = np.column_stack(
        [
            at,
            np.interp(at, stamps, truth[:, 1]),
            np.interp(at, stamps, truth[:, 2]),
            np.interp(at, stamps, np.unwrap(truth[:, 3])),
        ]
    )
    return true, inside


def localization_errors(
    truth: np.ndarray, estimate: np.ndarray, *, interpolate: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Position errors (m) and heading errors (rad, wrapped) of the estimates against the truth of their stamps
    (``interpolate``: against the truth interpolated to their stamps, see :func:`interpolated`)."""
    true, est = interpolated(truth, estimate) if interpolate else paired(truth, estimate)
    position = np.hypot(est[:, 1] - true[:, 1], est[:, 2] - true[:, 2])
    heading = wrap_angle(est[:, 3] - true[:, 3], positive_pi=True)
    return position, np.asarray(heading, dtype=float)


def _spread(errors: np.ndarray, digits: int, unit: str) -> str:
    """``max 0.027 m, mean 0.003 m, 95 % within 0.009 m``: the 95th percentile is what the error stays within but
    for spells (a module starved of CPU, a sharp turn)."""
    return ", ".join(
        f"{what} {value:.{digits}f}{unit}"
        for what, value in (("max", errors.max()), ("mean", errors.mean()), ("95 % within", np.percentile(errors, 95)))
    )


def write_start_pose(world: World, folder: Path) -> Path:
    """A start-pose file for the localization service: the world's start, so its frame is the world's."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "start-pose.toml"
    x, y, theta = world.start
    path.write_text(
        f"# where the simulated robot starts in the {world.name} world\nx = {x}\ny = {y}\ntheta = {theta}\n"
    )
    return path


# -- the run --------------------------------------------------------------------------------------------------------


def watch_live_hint(robot: str, rate: Rate) -> str:
    """How to watch the demo live in a browser (``pluto web``), and how to slow it down to real time."""
    try:
        from pluto.gateways.web.server import DEFAULT_PORT
    except ImportError:  # without the web extra the demo runs as well: say how to get the browser view
        return "watch it live in a browser: pip install 'pluto-robot[web]', then `pluto web` in another terminal"

    option = "" if robot == DEFAULT_ROBOT else f" --robot {robot}"
    speed = (
        "it runs faster than real time: `pluto demo --rate 1` to watch it at real speed"
        if isinstance(rate, str) or rate > 1.0
        else "it runs at real time or slower"
    )
    address = f"http://127.0.0.1:{DEFAULT_PORT}/"
    return f"watch it live: run `pluto web{option}` in another terminal and open {address} ({speed})"


def _check_rate(rate: Rate, lockstep: bool) -> None:
    if rate == "max" and not lockstep:
        raise PlutoError(
            "--rate max runs as fast as the modules go, which needs the lock-step; without it give a pace, "
            "e.g. --no-lockstep --rate 5"
        )


def demo_profile(
    world: World,
    start_file: Path,
    rate: Rate = "max",
    seed: int = 1,
    noise: str = "ideal",
    lockstep: bool = True,
) -> Profile:
    """The ``mission`` profile set up for the demo.

    Raises:
        PlutoError: ``rate`` is "max" without the lock-step (free-running time needs a pace).
    """
    _check_rate(rate, lockstep)
    profile = with_params(
        load_profile("mission"),
        "sim",
        world=world.name,
        rate=rate,
        lockstep=lockstep,
        noise=noise,
        seed=seed,
    )
    return with_params(profile, "localization", start_pose_file=str(start_file))


def with_slam(profile: Profile, map_file: Path) -> Profile:
    """The profile with the slam module in place of the pose module: it starts mapping at once (the map's frame is
    where localization starts) and saves its map to ``map_file`` when its thread stops.

    Raises:
        ModuleNotFound: the profile has no pose module to replace.
    """
    pose = next((e for e in profile.entries if e.name == "pose"), None)
    if pose is None:
        raise ModuleNotFound(f"profile {profile.name} has no pose module for the slam module to replace")
    params = {"use_sim_time": pose.spec.params.get("use_sim_time", False), "autostart": True}
    slam = ProfileEntry(
        ModuleSpec("slam", "slam", {**params, "map_file": str(map_file), "map_name": map_file.stem}),
        SlamModule.requires,
    )
    entries = {e.name: e for e in profile.entries if e.name != "pose"} | {"slam": slam}
    return replace(profile, entries=tuple(start_order(entries, profile.name)))


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 at the moment (for the emulators to listen on)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def emulated_demo_profile(
    world: World,
    start_file: Path,
    seed: int = 1,
    noise: str = "realistic",
    *,
    ports: Sequence[int] | None = None,
    wrist_channel: str = "pluto-wrist",
) -> Profile:
    """The ``emulated`` profile set up for the demo: each emulator in ``world`` with the device errors of ``noise``
    and ``seed``, on its port of ``ports`` (default: free ones, so that the demo never clashes with another stack's
    emulators), its driver connected to it; the wrist's virtual CAN bus on ``wrist_channel``; localization started
    at the world's start, where the Pioneer stands.
    """
    profile = load_profile("emulated")
    chosen = list(ports) if ports is not None else free_ports(len(EMULATORS))
    if len(chosen) != len(EMULATORS):
        raise PlutoError(f"the emulated devices need {len(EMULATORS)} ports, got {len(chosen)}")
    for (emulator, driver), port in zip(EMULATORS.items(), chosen, strict=True):
        profile = with_params(profile, emulator, port=port, noise=noise, seed=seed)
        profile = with_params(profile, driver, port=f"socket://127.0.0.1:{port}")
    for name in ("p2os-emulator", "sick-emulator"):
        profile = with_params(profile, name, world=world.name)
    profile = with_params(profile, "pose", map=world.name)
    profile = with_params(profile, "localization", start_pose_file=str(start_file))
    return with_params(profile, "wrist", channel=wrist_channel)


def _check_devices(devices: Devices, rate: Rate, slam: bool = False) -> None:
    if devices == "emulated" and rate not in ("max", 1.0):
        raise PlutoError(
            "the emulated devices run on the wall clock, at real time: --rate is for the simulated devices"
        )
    if devices == "emulated" and slam:
        raise PlutoError(
            "--slam runs on the simulated devices: on the emulated ones (wall clock) the maps the slam module "
            "builds are not yet good enough (the README's SLAM section says why)"
        )


def run_demo(
    config: Config,
    duration: float = 900.0,
    rate: Rate = "max",
    output: Path | None = None,
    *,
    seed: int = 1,
    noise: str = "ideal",
    lockstep: bool = True,
    one_process: bool = False,
    devices: Devices = "simulated",
    slam: bool = False,
    goals: int | None = None,
) -> int:
    """Run the mission; return the exit status (0 if the robot reached every waypoint, or was interrupted).

    Args:
        duration: simulated seconds after which the mission gives up.
        rate: simulated seconds per wall-clock second, or "max": as fast as the modules go (lock-step only).
        output: folder for the picture and the log (default ``./demo-output``).
        seed: seed of every random generator of the simulation.
        noise: noise profile of the simulated world and devices ("ideal", "basic" or "realistic").
        lockstep: time advances only when every module has finished its step (repeatable runs); else it runs
            freely at ``rate``.
        one_process: run the modules in this process instead of one process each.
        devices: "simulated", or "emulated": the real drivers, each talking to an emulator, on the wall clock
            (``duration`` and the times printed are then wall-clock seconds; ``rate`` and ``lockstep`` do not apply).
        slam: the slam module builds the map instead of the pose module matching the known one (:func:`with_slam`);
            its map is saved next to the picture and scored against the world's walls.
        goals: drive only the route's first ``goals`` goals (None: all of them).

    Raises:
        PlutoError: a bad combination of options, or a module that failed to start.
        Interrupted: SIGINT or SIGTERM while the modules started (they are stopped again).
    """
    emulated = devices == "emulated"
    if goals is not None and not 1 <= goals <= len(OFFICE_ROUTE):
        raise PlutoError(f"--goals must be 1 to {len(OFFICE_ROUTE)} (the route's goals), got {goals}")
    route = OFFICE_ROUTE[:goals]
    _check_devices(devices, rate, slam)
    if not emulated:
        _check_rate(rate, lockstep)
    world = load_world("office")
    out_dir = (output or Path("demo-output")).resolve()
    start_file = write_start_pose(world, out_dir)
    if emulated:
        profile = emulated_demo_profile(world, start_file, seed, noise, wrist_channel=f"pluto-wrist-{config.bus.robot}")
    else:
        profile = demo_profile(world, start_file, rate, seed, noise, lockstep)
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    map_file = out_dir / f"office-{stamp}-map.xml" if slam else None
    profile = with_slam(profile, map_file) if map_file is not None else profile
    log = MissionLog()
    recording: RecordStatus | None = None
    mission: MissionModule | None = None
    built: Path | str | None = None  # the map file the slam module saved, or why there is none
    wall_start = time.monotonic()
    wall_run: float | None = None  # wall time the simulated time was let go
    # With the modules in other processes, the recorder takes their every value on a session of its own: on the
    # mission's, a recorder that falls behind would make the writers drop values to this process (they drop what a
    # link does not take at once), among them values the lock-step then waits for. In one process, values are
    # handed over in memory and none is lost.
    with (
        stop_on_signals() as stop,
        Bus(config.bus) as bus,
        contextlib.nullcontext(bus) if one_process else Bus(config.bus) as record_bus,
    ):
        # the drivers' handshakes (the LMS's baud search, the Pioneer's SYNCs) take a while on a busy machine
        timeout = 40.0 if emulated else 20.0
        supervisor = Supervisor(
            bus,
            profile,
            config,
            one_process=one_process,
            startup_timeout=timeout,
            notice=lambda text: print(text, flush=True),
        )
        _announce(bus.robot, profile, rate, noise, seed, emulated=emulated, lockstep=lockstep, one_process=one_process)
        try:
            with interruptible(stop):  # a Ctrl-C while the modules start ends the demo there
                supervisor.start(resume=False)
            print(f"all publishing after {time.monotonic() - wall_start:.1f} s\n")
            print(mom.render(mom.snapshot(bus), bus.robot, paused=bool(supervisor.held)) + "\n", flush=True)
            log.subscribe(bus, slam=slam)
            with Recorder(
                record_bus,
                out_dir / f"office-{stamp}.mcap",
                metadata={"mission": "demo: office route"},
                translate=foxglove_recording(world),
            ) as rec:
                mission = MissionModule(
                    bus,
                    MissionParams(duration=duration, use_sim_time=not emulated),
                    route=route,
                    # the simulated time stops with the route: the log ends there, and the shutdown does not run
                    # the world on as fast as it goes meanwhile (and the slam module saves the map of that moment)
                    hold=supervisor.held,
                )
                wall_run = _drive_route(bus, supervisor, mission, stop)
                if slam and not stop.is_set():
                    built = _save_map(bus)
            recording = rec.stop()
        finally:
            supervisor.shutdown()
    outcome = "interrupted" if stop.is_set() else mission.outcome if mission else "NOT done"
    if built is None:
        built = _map_saved_on_stop(map_file)
    return _summary(
        log,
        mission,
        world,
        out_dir,
        stamp,
        outcome,
        recording,
        bus.robot,
        wall_start,
        wall_run,
        emulated=emulated,
        built=built,
    )


def _announce(
    robot: str,
    profile: Profile,
    rate: Rate,
    noise: str,
    seed: int,
    *,
    emulated: bool,
    lockstep: bool,
    one_process: bool,
) -> None:
    """Print what the demo runs: the devices, the time's pace, the noise and the seed, the modules it starts and
    how, and how to watch the run live."""
    if emulated:
        print(
            f"Pluto demo on robot '{robot}': the real drivers on emulated devices (P2OS, SICK LMS, Crossbow "
            f"DMU, NMEA GPS, PowerCube CAN) in the office world, on the wall clock, noise {noise}, seed {seed}"
        )
    else:
        pace = "as fast as possible" if rate == "max" else f"{rate:g}x real time"
        how = "in lock-step" if lockstep else "free-running"
        print(
            f"Pluto demo on robot '{robot}': the simulated robot in the office world, {how} {pace}, "
            f"noise {noise}, seed {seed}"
        )
    where = "in one process" if one_process else "each in its own process"
    print(f"starting {len(profile.entries)} modules {where}: {', '.join(e.name for e in profile.entries)}")
    print(watch_live_hint(robot, 1.0 if emulated else rate))
    print("", flush=True)


def _drive_route(bus: Bus, supervisor: Supervisor, mission: MissionModule, stop: threading.Event) -> float:
    """Start the mission, let the simulated time go once it takes part in the lock-step (if the time is held), and
    wait until the route is over or ``stop`` (Ctrl-C); the mission is stopped again either way. Return the wall
    time (``time.monotonic``) the time was let go."""
    try:
        mission.start()
        if supervisor.held:
            _wait_member(bus, supervisor.held, mission, stop)
        wall_run = time.monotonic()
        supervisor.resume()
        while not stop.is_set() and not mission.done.wait(0.1):
            pass
    finally:
        mission.stop()
    return wall_run


def _map_saved_on_stop(map_file: Path | None) -> Path | str | None:
    """With --slam, on an interrupted run (the map was not saved after the route): the map file, which the slam
    module saved when it stopped, or that there is none; None without --slam."""
    if map_file is None:
        return None
    return map_file if map_file.is_file() else "not saved"


def foxglove_recording(world: World) -> Any:
    """What writes Foxglove's schemas beside the bus messages in the demo's log (the walls of ``world``, the scans,
    the frames, the poses), so Foxglove's 3-D panel draws the run as it opens the file; None without the Foxglove
    SDK (the log then holds Pluto's channels only)."""
    try:
        from pluto.gateways.foxglove.recording import FoxgloveRecording
    except ImportError:
        return None
    return FoxgloveRecording(world)


def _save_map(bus: Bus) -> Path | str:
    """Stop the slam module's thread, which saves its map; return the map file, or why it was not saved."""
    try:
        with SlamProxy(bus, start=False) as slam:
            slam.stop()
            info = slam.map_info()
    except PlutoError as err:
        return f"not saved: {err}"
    return Path(info.path) if info.saves else "not saved (see the slam module's log)"


def _wait_member(bus: Bus, simulators: list[str], mission: MissionModule, stop: threading.Event) -> None:
    """Wait until the mission has taken its first step and the held simulators count it as a member, so that it
    takes part in the run from its first tick."""
    from pluto.sim.coordinator import LockstepState

    deadline = time.monotonic() + 20.0
    while not stop.is_set():
        if mission.stepped.is_set():
            states: list[LockstepState]
            try:
                states = [bus.call(f"{name}/lockstep", None, LockstepState, timeout=2.0) for name in simulators]
            except BusTimeout:
                states = []
            if states and all(mission.module_name in state.members for state in states):
                return
        if time.monotonic() > deadline:
            raise LaunchError(f"the {mission.module_name} module did not join the lock-step within 20 s")
        time.sleep(0.01)


def _summary(
    log: MissionLog,
    mission: MissionModule | None,
    world: World,
    out_dir: Path,
    stamp: str,
    outcome: str,
    recording: RecordStatus | None,
    robot: str,
    wall_start: float,
    wall_run: float | None,
    *,
    emulated: bool = False,
    built: Path | str | None = None,
) -> int:
    """Print what the run did (the picture drawn first); return the exit status. ``emulated``: the run was on the
    wall clock, the truth sampled on its own stamps (interpolated to the estimates'). ``built``: the map file the
    slam module saved (or why there is none), with ``pluto demo --slam``."""
    end = mission.end_time if mission is not None and mission.end_time is not None else math.inf
    truth, estimate = log.until(end)
    reached = mission.reached if mission is not None else 0
    built_walls, built, score = _built_map(built, log, world, end, truth)
    picture: Path | str | None
    try:
        picture = _draw(
            world,
            truth,
            estimate,
            mission.final_scan if mission else None,
            out_dir / f"office-{stamp}.png",
            outcome,
            built_walls,
        )
    except PlutoError as err:  # matplotlib is an optional extra
        picture = f"not drawn: {err}"
    travelled = float(np.sum(np.hypot(*np.diff(truth[:, 1:3], axis=0).T))) if len(truth) > 1 else 0.0
    goals = len(mission.route) if mission else len(OFFICE_ROUTE)
    print(f"\nmission {outcome}: {reached}/{goals} goals, travelled {travelled:.1f} m; all modules stopped.")
    if len(truth):
        _, x, y, theta = truth[-1]
        heading = math.degrees(wrap_angle(float(theta), positive_pi=True))
        print(f"final true pose: x {x:.3f} m, y {y:.3f} m, θ {heading:.1f}°")
    _print_errors(log, truth, estimate, end, emulated, slam=built is not None)
    if score is not None:
        print(f"map built: {score.describe()}")
    print(_wall_time_line(mission, truth, wall_start, wall_run, emulated))
    if picture:
        drawn = "map (the world's, and the one built), " if built_walls is not None else "map, "
        print(f"{drawn}true and localization paths and the last scan: {picture}")
    if built is not None:
        print(f"map built by the slam module: {built}")
    if recording is not None and recording.parts:
        print(
            f"log of every interface ({recording.messages} messages, {recording.duration:.0f} s"
            f"{f', {recording.lost} lost on the way' if recording.lost else ''}): "
            f"{recording.parts[0]}\n  (pluto log info FILE, pluto replay FILE, or any MCAP viewer"
            f"{'; Foxglove draws its map, scans and frames' if recording.foreign else ''})"
        )
    print(f"logs of each module: {launcher.runtime_dir(robot)}/", flush=True)
    return 0 if outcome in ("done", "interrupted") else 1


def _built_map(
    built: Path | str | None, log: MissionLog, world: World, end: float, truth: np.ndarray
) -> tuple[np.ndarray | None, Path | str | None, MapScore | None]:
    """The walls of the map the slam module saved and their score against the world's walls the laser saw; ``built``
    becomes why not when the file cannot be read."""
    if not isinstance(built, Path):
        return None, built, None
    try:
        built_walls = load_world(built).walls
    except PlutoError as err:
        return None, f"not readable: {err}", None
    seen = walls_seen(world.segments(), log.scan_points_until(end, truth, SlamModuleParams().max_tilt))
    return built_walls, built, score_map(built_walls, world.segments(), seen)


def _print_errors(
    log: MissionLog, truth: np.ndarray, estimate: np.ndarray, end: float, emulated: bool, *, slam: bool
) -> None:
    """Print the localization's errors against the truth, and dead reckoning's alone."""
    errors, headings = localization_errors(truth, estimate, interpolate=emulated)
    if len(errors):
        print(f"localization error: {_spread(errors, 3, ' m')}")
        print(f"localization heading error: {_spread(np.degrees(np.abs(headings)), 2, '°')}")
    else:
        print("localization error: no pose to compare with the truth")
    dr_errors, dr_headings = localization_errors(truth, log.dead_reckoning_until(end), interpolate=emulated)
    if len(dr_errors):
        print(
            f"dead reckoning alone: max {dr_errors.max():.3f} m, {np.degrees(np.abs(dr_headings)).max():.2f}° "
            f"(without the {'slam' if slam else 'pose'} module's walls)"
        )


def _wall_time_line(
    mission: MissionModule | None, truth: np.ndarray, wall_start: float, wall_run: float | None, emulated: bool
) -> str:
    """The wall time of the run, and of the route with its real-time factor (on a simulated clock)."""
    wall_end = time.monotonic()
    line = f"wall time {wall_end - wall_start:.1f} s"
    if mission is None or mission.start_time is None or wall_run is None:
        return line
    sim_end = mission.end_time if mission.end_time is not None else (float(truth[-1, 0]) if len(truth) else 0.0)
    route_wall = (mission.end_wall if math.isfinite(mission.end_wall) else wall_end) - wall_run
    simulated = sim_end - mission.start_time
    factor = simulated / route_wall if route_wall > 0 else math.nan
    if emulated:  # on the wall clock: the route's time is its wall time
        return line + f"; the route {simulated:.1f} s on the wall clock"
    return (
        line + f"; the route {route_wall:.1f} s for {simulated:.1f} s of simulated time: real-time factor {factor:.2f}"
    )


def _draw(
    world: World,
    truth: np.ndarray,
    estimate: np.ndarray,
    scan: msgs.LaserScan | None,
    path: Path,
    outcome: str,
    built: np.ndarray | None = None,
) -> Path | None:
    if not len(truth):
        return None
    points = lines = None
    if scan is not None:
        # Where the robot was when the scan was taken (the wrist stays straight ahead in this mission).
        _, x, y, theta = truth[int(np.argmin(np.abs(truth[:, 0] - scan.stamp)))]
        lx, ly, heading = laser_pose(x, y, theta, 0.0, LaserParams().mount_x)
        points = scan_points((lx, ly, heading), scan.ranges, scan.angles, max_range=scan.max_range)
        # the wall lines the pose module finds in it, drawn where the laser was
        c, s = math.cos(heading), math.sin(heading)
        lines = np.array(
            [
                [lx + c * px - s * py, ly + s * px + c * py, lx + c * qx - s * qy, ly + s * qx + c * qy]
                for f in extract_lines(scan.ranges, scan.angles, max_range=scan.max_range)
                for (px, py), (qx, qy) in [(f.start, f.end)]
            ]
        ).reshape(-1, 4)
    return plot_run(
        world,
        path,
        truth[:, 1:3],
        estimate[:, 1:3] if len(estimate) else None,
        points,
        title=f"Pluto demo{' with SLAM' if built is not None else ''}: office world, route {outcome}",
        estimate_label="localization",
        lines=lines,
        built=built,
    )
