"""Real-time factor of the simulated robot: Pluto's simulator against ir-sim, and the whole mission in lock-step.

Real-time factor (RTF) = simulated seconds / wall seconds. Every row is measured in the same run:

* ``ir-sim``: one differential-drive robot (a 0.4 m disc) with a 2-D lidar of 361 beams over 180° and an 80 m
  range (``lidar2d``), in the office world rebuilt as ir-sim obstacles: each wall a ``linestring``, each polygon a
  ``polygon``, each round obstacle a ``circle``, and the walking person an omnidirectional obstacle dashing back and
  forth along the corridor. Built from a YAML file in a temporary folder, headless (no figure, no plotting), and
  stepped with ``env.step([v, ω])``. ir-sim moves every object and takes a scan of every lidar at each step, so
  both sides here run the motion and a scan once per ``--step`` (default 0.1 s, ir-sim's own default: 10 Hz
  motion and 10 Hz scans).
* ``Pluto simulator alone``: the same work with the classes the ``base`` and ``sick`` modules use: a
  :class:`~pluto.hardware.base.sim.SimBody` in the office world (collisions with every wall, obstacle and the person)
  and a :class:`~pluto.hardware.sick.sim.SimLaser` (361 beams, 80 m) over the :class:`~pluto.sim.raycast.RayCaster` of
  the world, stepped in a plain loop at the same rates, without a bus. Noise is off on both sides, the laser sits 0.25 m
  ahead of the robot's centre on both, and both check the robot against collisions at every step (ir-sim with
  ``collision_mode: stop``; it draws round obstacles as 64-sided polygons, Pluto keeps them round).
* ``Pluto mission profile, lock-step``: the ``mission`` profile (the 11 modules of ``pluto demo``: sim, base, wrist,
  sick, dmu, gps, localization, pose, drive, avoid, motion) with the simulated clock in lock-step as fast as it
  goes, once with each module in its own process and once with all of them in this process; the robot follows the
  demo's goto route (laser avoidance). Here the devices run at their own rates (base 20 Hz with a 10 Hz sonar
  ring, laser scans at 5 Hz, and the rest), so this is more work per simulated second than the two rows above.
  Each run has a bus of its own (robot name, rendezvous port and runtime folder).

* ``Pluto sim profile, free-running``: the ``sim`` profile (the simulator and its devices in this process) on its
  own clock, not in lock-step, at rate 5: the simulated seconds its ``Clock`` gives per wall second over 3 s (the
  rate, if the machine keeps up).

* ``Pluto fleet, 10 robots in one world``: ten robots in the office (the shipped office places four, so a copy of it
  in a temporary folder places ten along the corridor), each with the ``mission`` profile's modules under its own
  robot name and one lock-step for all, as fast as it goes; each robot drives gotos back and forth along its stretch
  of corridor. Once with a process per robot (:class:`~pluto.sim.robot_processes.RobotProcesses`, what
  ``pluto up PROFILE --robots N`` runs; the first robot's process leads the lock-step; the gotos go from this
  process), once with every robot's modules in this process (:class:`~pluto.sim.fleet.Fleet`, ``--one-process``: a
  bus per robot, all on one Zenoh session).

Each run of the rows with modules has a runtime folder of its own (logs, and the state files the modules save every
0.2 s to go on after a crash, :mod:`pluto.runtime.persist`) on tmpfs where the machine has one (``/dev/shm``), as
``XDG_RUNTIME_DIR`` is on a robot: on a disk's file system each of those saves renames a file over the last one, which
ext4 follows with a write of the new file's data (``auto_da_alloc``), from 1 ms to tens of ms on a busy disk (on a
saving thread of the module's, not on its step). ``--runtime-dir`` puts them elsewhere (a folder on the disk, to see
that cost).

Both simple rows drive the same open-loop pattern: 0.5 m/s with a gentle left turn (1/3 rad/s), a 1.5 m circle
in the lobby between the two pillars, which touches nothing however long it runs. CPU seconds are those of this
process and of its child processes (the mission's module processes are read from ``/proc`` while they run). The
targets are printed under the table. Times are measured, never asserted.

Run from the project root (ir-sim is optional: ``.venv/bin/pip install 'pluto-robot[bench]'``):

    .venv/bin/python bench/sim_rtf.py
    .venv/bin/python bench/sim_rtf.py --seconds 20 --skip-mission     # quicker
    .venv/bin/python bench/sim_rtf.py --repeat 3                         # median of three runs per row
    .venv/bin/python bench/sim_rtf.py --skip-mission --skip-fleet        # the simulator rows only
    .venv/bin/python bench/sim_rtf.py --runtime-dir ~/.cache              # the modules' state files on the disk
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import itertools
import math
import os
import platform
import resource
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pluto.hardware.base.sim import BodyParams, SimBody
from pluto.hardware.sick.sim import LaserParams, SimLaser
from pluto.runtime.launcher import pid_alive
from pluto.sim.raycast import RayCaster
from pluto.sim.world import World, load_world

WORLD = "office"
SPEED = 0.5  # m/s
TURN = 1.0 / 3.0  # rad/s: a circle of SPEED / TURN = 1.5 m radius
START = (4.5, 8.5, 0.0)  # x, y, θ in the world: the circle's centre is (4.5, 10), midway between the lobby's pillars
TARGET_SEPARATE = 25.0
TARGET_ONE_PROCESS = 60.0
TARGET_FLEET = 2.0
FLEET_ROBOTS = 10
FREE_RATE = 5.0
"""The free-running row's rate: its simulated clock is to run this many times faster than the wall clock."""
FREE_WALL = 3.0
"""Wall seconds the free-running row measures over."""
IRSIM_MISSING = "n/a (pip install 'pluto-robot[bench]')"
MISSION_SIM_PARAMS: dict[str, Any] = {"world": WORLD, "lockstep": True, "rate": "max", "seed": 1}
"""Parameters of the mission's ``sim`` module: the clock in lock-step, as fast as the modules go."""


@dataclass
class Measurement:
    what: str
    simulated: float = math.nan  # s
    wall: float = math.nan  # s
    cpu: float = math.nan  # s
    notes: str = ""
    end_pose: tuple[float, float, float] | None = None  # x m, y m, θ rad of the robot at the end

    @property
    def rtf(self) -> float:
        return self.simulated / self.wall if self.wall > 0 else math.nan

    @property
    def measured(self) -> bool:
        return math.isfinite(self.rtf)


# -- CPU time ---------------------------------------------------------------------------------------------------------


def own_cpu() -> float:
    """CPU seconds of this process and of its children that have exited (user + system)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def descendants_cpu() -> float | None:
    """CPU seconds so far of every running descendant of this process, from ``/proc``; None without ``/proc``."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended meanwhile
        fields = text[text.rfind(")") + 2 :].split()  # after "pid (name) ": state, ppid, ..., utime, stime at 11, 12
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    me = os.getpid()
    total = 0.0
    for pid in cpu:
        ancestor = parent.get(pid)
        while ancestor is not None and ancestor > 1:
            if ancestor == me:
                total += cpu[pid]
                break
            ancestor = parent.get(ancestor)
    return total


# -- ir-sim -----------------------------------------------------------------------------------------------------------


def import_irsim() -> Any:
    """The ``irsim`` package, or None. Its import tries the interactive matplotlib backends and prints each
    failure (on a machine without a display); that output is swallowed."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import irsim
    except ImportError:
        return None
    return irsim


def irsim_config(world: World, step: float, laser: LaserParams, body: BodyParams) -> dict[str, Any]:
    """The ir-sim world (its YAML as a dict): the office's walls, polygons, circles and person, one robot."""
    obstacles: list[dict[str, Any]] = []
    for i, (x1, y1, x2, y2) in enumerate(world.walls.tolist()):
        vertices = [[x1, y1], [x2, y2]]
        obstacles.append(
            {"name": f"wall-{i}", "shape": {"name": "linestring", "vertices": vertices}, "state": [0, 0, 0]}
        )
    for polygon in world.polygons:
        shape = {"name": "polygon", "vertices": polygon.points.tolist()}
        obstacles.append({"name": polygon.name, "shape": shape, "state": [0, 0, 0]})
    for (x, y, r), name in zip(world.circles.tolist(), world.circle_names, strict=True):
        obstacles.append({"name": name, "shape": {"name": "circle", "radius": r}, "state": [x, y, 0]})
    for person in world.movers:  # round its waypoints, or back and forth along them, as in Pluto's world
        first, *others = [[x, y, 0.0] for x, y in person.waypoints.tolist()]
        goals = [*others, first] if person.loop else [*others, *reversed(others[:-1]), first]
        obstacles.append(
            {
                "name": person.name,
                "kinematics": {"name": "omni"},
                "shape": {"name": "circle", "radius": person.radius},
                "state": first,
                "goal": goals,
                "behavior": {"name": "dash", "loop": True},
                "vel_max": [person.speed, person.speed],
            }
        )
    xmin, ymin, xmax, ymax = world.bounds()
    lidar = {
        "name": "lidar2d",
        "number": laser.beams,
        "angle_range": laser.fov,
        "range_max": laser.max_range,
        "offset": [laser.mount_x, 0.0, 0.0],
    }
    robot = {
        "name": "robot",
        "kinematics": {"name": "diff"},
        "shape": {"name": "circle", "radius": body.radius},
        "state": list(START),
        "vel_max": [body.max_speed, body.max_turn_rate],
        "sensors": [lidar],
    }
    return {
        "world": {
            "width": xmax - xmin,
            "height": ymax - ymin,
            "offset": [xmin, ymin],
            "step_time": step,
            "collision_mode": "stop",
        },
        "robot": [robot],
        "obstacle": obstacles,
    }


def run_irsim(irsim: Any, world: World, seconds: float, step: float) -> Measurement:
    m = Measurement("ir-sim: 1 diff robot + 361-beam lidar")
    if irsim is None:
        m.notes = IRSIM_MISSING
        return m
    import yaml  # an ir-sim dependency: there when ir-sim is

    config = irsim_config(world, step, LaserParams(), BodyParams())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{world.name}.yaml"
        path.write_text(yaml.safe_dump(config))
        if "headless" in inspect.signature(irsim.env.EnvBase).parameters:
            env = irsim.make(str(path), headless=True, log_level="WARNING")
        else:  # before ir-sim had ``headless``
            env = irsim.make(str(path), display=False, disable_all_plot=True, log_level="WARNING")
    steps = round(seconds / step)
    action = [SPEED, TURN]
    cpu0, wall0 = own_cpu(), time.perf_counter()
    for _ in range(steps):
        env.step(action)
    m.wall, m.cpu = time.perf_counter() - wall0, own_cpu() - cpu0
    m.simulated = steps * step
    x, y, theta = (float(v) for v in np.asarray(env.robot.state).ravel()[:3])
    rate = 1.0 / step
    m.notes = f"step {step:g} s: {rate:g} Hz motion + {rate:g} Hz scans; {len(config['obstacle'])} obstacles, headless"
    if env.robot.collision_flag or env.robot.stop_flag:
        m.notes += "; the robot COLLIDED"
    if m.cpu > 1.2 * m.wall:
        m.notes += "; CPU > wall: its ray casting's matrix products run on numpy's BLAS threads"
    m.end_pose = (x, y, theta)
    with contextlib.suppress(Exception):
        env.end(0)
    return m


# -- Pluto's simulator, no bus ----------------------------------------------------------------------------------------


def run_pluto_sim(world: World, seconds: float, step: float) -> Measurement:
    m = Measurement("Pluto simulator alone")
    body = SimBody(world.segments(), world.circles, START, BodyParams())
    laser = SimLaser(RayCaster(world.segments(), world.circles), LaserParams())
    steps = round(seconds / step)
    stalled = False
    cpu0, wall0 = own_cpu(), time.perf_counter()
    t = 0.0
    for k in range(1, steps + 1):
        t = k * step
        movers = world.mover_circles(t)
        state = body.step(SPEED, TURN, step, movers)
        laser.scan(t, (state.x, state.y, state.theta), movers=movers)
        stalled = stalled or state.stalled
    m.wall, m.cpu = time.perf_counter() - wall0, own_cpu() - cpu0
    m.simulated = steps * step
    rate = 1.0 / step
    m.notes = f"SimBody + SimLaser, same rates ({rate:g} Hz motion + {rate:g} Hz scans), office world, no bus"
    if stalled:
        m.notes += "; the robot COLLIDED"
    m.end_pose = (body.x, body.y, body.theta)
    return m


# -- the mission profile in lock-step ---------------------------------------------------------------------------------


TMPFS = Path("/dev/shm")
runtime_parent: str | None = str(TMPFS) if TMPFS.is_dir() and os.access(TMPFS, os.W_OK) else None
"""Where the runs' runtime folders go (``--runtime-dir``): tmpfs where there is one, else the temporary folder."""


RUN_PREFIX = "pluto-bench-"
"""A run's folder is ``pluto-bench-<pid of the bench>-<random>``."""


def run_folder() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for one run's runtime folder and files, in :data:`runtime_parent`, named after this
    process (see :func:`sweep_run_folders`)."""
    return tempfile.TemporaryDirectory(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=runtime_parent)


def sweep_run_folders(parent: Path) -> list[Path]:
    """Remove the run folders in ``parent`` left by a bench that no longer runs (killed from outside, its clean-up
    never ran): those whose bench's process is gone. Returns the folders removed."""
    removed = []
    for folder in parent.glob(f"{RUN_PREFIX}*"):
        pid = folder.name.removeprefix(RUN_PREFIX).split("-", 1)[0]
        if not folder.is_dir() or not pid.isdigit() or pid_alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def isolated_bus_env(folder: Path) -> Iterator[None]:
    """A robot name, rendezvous port and runtime folder of this run's own (the module processes inherit them)."""
    values = {
        "PLUTO_ROBOT": f"bench-{uuid.uuid4().hex[:8]}",
        "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_tcp_port()}",
        "PLUTO_RUNTIME_DIR": str(folder),
    }
    cleared = ("PLUTO_CONNECT", "PLUTO_LISTEN", "PLUTO_CONFIG", "PLUTO_MULTICAST")
    saved = {name: os.environ.get(name) for name in (*values, *cleared)}
    os.environ.update(values)
    for name in cleared:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


GOTO_ROUTE = [(34.0, 10.0), (10.0, 10.0), (6.0, 10.0), (6.0, 2.5), (3.0, 2.0)]
"""The mission rows' gotos: down the office corridor and back, into the lobby and past the reception."""
GOTO_SPEED, GOTO_TURN_RATE = 0.6, 1.0  # m/s, rad/s
POLL = 0.05
"""Wall seconds between two looks of the measuring thread at the simulated time. Polled (a wait per ``Clock`` value
would cost CPU), and seldom: with the modules in this process each of its wake-ups takes Python's interpreter lock
from the lock-step's thread, which then waits until this thread has been scheduled, has run and has let go of it
again (on a busy machine, a wait of its own for a core each time). The simulated and wall times are read together,
so the time past the end that a look comes late is measured, not lost."""


class RouteDriver(threading.Thread):
    """Sends the gotos of a route (:data:`GOTO_ROUTE` by default) through the avoid module one after the other,
    round again after the last."""

    def __init__(self, bus: Any, clock: Any, route: list[tuple[float, float]] | None = None) -> None:
        super().__init__(name="route", daemon=True)
        from pluto.movement.avoid.core import AVOID_LASER, GOTO_REACHED, GOTO_STUCK
        from pluto.movement.avoid.proxy import AvoidProxy

        self.route, self.speed, self.turn_rate = route or GOTO_ROUTE, GOTO_SPEED, GOTO_TURN_RATE
        self.avoidance = AVOID_LASER
        self.done_states = (GOTO_REACHED, GOTO_STUCK)
        self.reached_state = GOTO_REACHED
        self.avoid = AvoidProxy(bus, start=False)
        self.clock = clock
        self.stopping = threading.Event()
        self.first_sent = threading.Event()
        self.reached = 0

    def now(self) -> float:
        value = self.clock.read()
        return float(value.stamp) if value is not None else 0.0

    def run(self) -> None:
        for x, y in itertools.cycle(self.route):
            sent = self.now()
            self.avoid.goto(x, y, max_speed=self.speed, max_turn_rate=self.turn_rate, avoidance=self.avoidance)
            self.first_sent.set()
            while True:
                if self.stopping.wait(0.05):
                    return
                status = self.avoid.status()
                state = status.element[1] if status is not None and len(status.element) > 1 else 0
                # The first statuses after a goto may still describe the previous one.
                if status is not None and status.stamp > sent + 0.5 and state in self.done_states:
                    break
            if state != self.reached_state:
                return  # stuck: the robot stays where it is
            self.reached += 1

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=2.0)
        with contextlib.suppress(Exception):
            self.avoid.set_velocity(0.0, 0.0)
        with contextlib.suppress(Exception):
            self.avoid.close()


def run_free_running(wall_seconds: float) -> Measurement:
    """The ``sim`` profile's simulator running on its own clock (not in lock-step) at :data:`FREE_RATE`: how many
    simulated seconds its Clock gives per wall second (its rate, if the machine keeps up)."""
    from pluto import msgs
    from pluto.bus import Bus
    from pluto.runtime.config import Config
    from pluto.runtime.profiles import load_profile, with_params
    from pluto.runtime.supervisor import Supervisor

    m = Measurement(f"Pluto sim profile, free-running at rate {FREE_RATE:g}")
    with run_folder() as tmp, isolated_bus_env(Path(tmp) / "runtime"):
        profile = with_params(load_profile("sim"), "sim", world=WORLD, rate=FREE_RATE)
        with Bus() as bus:
            supervisor = Supervisor(bus, profile, Config(), one_process=True)
            try:
                supervisor.start()
                clock = bus.create_reader("Clock", msgs.SimTime)
                first = clock.wait_for_update(timeout=10)
                cpu0, wall0 = own_cpu(), time.perf_counter()
                while True:
                    tick = clock.wait_for_update(timeout=5)
                    wall = time.perf_counter()
                    if wall - wall0 >= wall_seconds:
                        break
                m.simulated, m.wall, m.cpu = tick.stamp - first.stamp, wall - wall0, own_cpu() - cpu0
                m.notes = f"the sim profile in one process; its clock is to run {FREE_RATE:g}x the wall clock"
            except Exception as err:
                m.notes = f"n/a ({type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''})"
            finally:
                supervisor.shutdown()
    return m


def measure_run(
    m: Measurement, now: Callable[[], float], resume: Callable[[], Any], seconds: float, stall: float
) -> None:
    """Let the time run (``resume``) and measure, into ``m``, the wall time, this process's CPU time and the simulated
    time ``now`` gives until ``seconds`` of it have passed.

    Raises:
        RuntimeError: the simulated time stood still for ``stall`` wall seconds.
    """
    t0 = now()
    cpu0, wall0 = own_cpu(), time.perf_counter()
    resume()
    last, last_progress = t0, wall0
    while True:
        time.sleep(POLL)
        current = now()
        wall = time.perf_counter()
        if current >= t0 + seconds:
            break
        if current > last:
            last, last_progress = current, wall
        elif wall - last_progress > stall:
            raise RuntimeError(f"simulated time stopped at {current:.2f} s")
    m.wall, m.cpu, m.simulated = wall - wall0, own_cpu() - cpu0, current - t0


def run_mission(world: World, seconds: float, one_process: bool) -> Measurement:
    """The mission profile in lock-step, as fast as it goes, for ``seconds`` of simulated time."""
    how = "one process" if one_process else "separate processes"
    m = Measurement(f"Pluto mission profile, lock-step, {how}")
    try:
        measure_mission(m, world, seconds, one_process)
    except Exception as err:
        # A module that failed to start: the first clause of the message, and the last line of its log (the cause).
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        reason = lines[0].split("; end of ")[0] if lines else "no message"
        if len(lines) > 1:
            reason += ": " + lines[-1]
        if len(reason) > 150:
            reason = reason[:147] + "..."
        m.simulated = m.wall = m.cpu = math.nan
        m.notes = f"n/a ({type(err).__name__}: {reason})"
    return m


def measure_mission(m: Measurement, world: World, seconds: float, one_process: bool) -> None:
    from pluto import msgs
    from pluto.bus import Bus
    from pluto.cli.demo import write_start_pose
    from pluto.runtime.config import Config
    from pluto.runtime.profiles import load_profile, with_params
    from pluto.runtime.supervisor import Supervisor

    with run_folder() as tmp, isolated_bus_env(Path(tmp) / "runtime"):
        start_file = write_start_pose(world, Path(tmp))  # the localization frame is the world's, as in the demo
        profile = with_params(load_profile("mission"), "sim", **MISSION_SIM_PARAMS)
        profile = with_params(profile, "localization", start_pose_file=str(start_file))
        with Bus() as bus:
            supervisor = Supervisor(bus, profile, Config(), one_process=one_process)
            driver: RouteDriver | None = None
            try:
                supervisor.start()
                clock = bus.create_reader("Clock", msgs.SimTime)
                truth = bus.create_reader("Sim/Truth", msgs.Odometry)
                driver = RouteDriver(bus, clock)
                driver.start()
                if not driver.first_sent.wait(5.0):
                    raise RuntimeError("could not send the first goto")
                children0 = None if one_process else descendants_cpu()
                measure_run(m, driver.now, lambda: bus.call("sim/resume"), seconds, stall=10.0)
                children1 = None if one_process else descendants_cpu()
                pose = truth.read()
            finally:
                if driver is not None:
                    driver.stop()
                supervisor.shutdown()
    modules = len(profile.entries)
    if one_process:
        m.notes = f"{modules} modules in this process; CPU of this process"
    elif children0 is not None and children1 is not None:
        m.cpu += children1 - children0
        m.notes = f"{modules} module processes; CPU of this process + its children (/proc)"
    else:
        m.notes = f"{modules} module processes; CPU of this process only (no /proc: children not counted)"
    where = f", robot at ({pose.x:.1f}, {pose.y:.1f})" if pose is not None else ""
    m.notes += f"; goto route, {driver.reached if driver else 0} waypoints reached{where}"


def fleet_world(folder: Path, robots: int) -> Path:
    """A copy of the office world that places ``robots`` robots along its corridor (y = 10 m, 3 m apart, facing
    alternately east and west)."""
    import re

    text = load_world(WORLD).source.read_text(encoding="utf-8")
    places = "\n".join(
        f'    <robot x="{6.0 + 3.0 * i:g}" y="10" theta="{0.0 if i % 2 == 0 else 3.1416:g}"/>' for i in range(robots)
    )
    text, found = re.subn(r"<robots>.*?</robots>", f"<robots>\n{places}\n  </robots>", text, flags=re.DOTALL)
    if found != 1:
        raise RuntimeError(f"the {WORLD} world has no <robots> to replace")
    path = folder / f"{WORLD}-{robots}-robots.xml"
    path.write_text(text, encoding="utf-8")
    return path


def run_fleet(seconds: float, robots: int, per_robot: bool) -> Measurement:
    """``robots`` robots in one world, the mission profile each, in lock-step as fast as it goes: a process per robot
    (``per_robot``) or all in this process."""
    how = "a process per robot" if per_robot else "one process"
    m = Measurement(f"Pluto fleet, {robots} robots, {how}")
    try:
        measure_fleet(m, seconds, robots, per_robot)
    except Exception as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        reason = (lines[0] if lines else "no message")[:150]
        m.simulated = m.wall = m.cpu = math.nan
        m.notes = f"n/a ({type(err).__name__}: {reason})"
    return m


@contextlib.contextmanager
def fleet_runner(profile: Any, overrides: dict[str, dict[str, Any]], robots: int, per_robot: bool) -> Iterator[Any]:
    """The fleet, its time held, and a bus of this process for each robot (by name): a
    :class:`~pluto.sim.robot_processes.RobotProcesses` (a process per robot, buses of this process's own) or a
    :class:`~pluto.sim.fleet.Fleet` (its own buses)."""
    import msgspec

    from pluto.bus import Bus
    from pluto.runtime.config import Config
    from pluto.sim.fleet import Fleet
    from pluto.sim.robot_processes import RobotProcesses

    config = Config()
    runner: Any
    if per_robot:
        runner = RobotProcesses(profile, config, robots=robots, overrides=overrides)
    else:
        runner = Fleet(profile, config, robots=robots)
    buses: dict[str, Bus] = {}
    try:
        runner.start(resume=False)
        if per_robot:
            for name in runner.names:
                buses[name] = Bus(msgspec.structs.replace(config.bus, robot=name), share=runner.bus)
        yield runner, buses if per_robot else runner.buses
    finally:
        for bus in buses.values():
            bus.close()
        runner.shutdown()


def measure_fleet(m: Measurement, seconds: float, robots: int, per_robot: bool) -> None:
    from pluto import msgs
    from pluto.runtime.profiles import load_profile, with_robots
    from pluto.sim.fleet import fleet_robots

    with run_folder() as tmp, isolated_bus_env(Path(tmp) / "runtime"):
        world = fleet_world(Path(tmp), robots)
        overrides = {"sim": {**MISSION_SIM_PARAMS, "world": str(world)}}
        profile = with_robots(load_profile("mission", overrides), robots)
        drivers: list[RouteDriver] = []
        with fleet_runner(profile, overrides, robots, per_robot) as (runner, buses):
            try:
                names = list(buses)
                clock = buses[names[0]].create_reader("Clock", msgs.SimTime)
                for placement in fleet_robots(profile, robots, os.environ["PLUTO_ROBOT"]):
                    x, y = placement.x, placement.y
                    route = [(x + 1.2, y), (x - 1.2, y)]  # back and forth on its own stretch of corridor
                    drivers.append(RouteDriver(buses[str(placement.name)], clock, route))
                for driver in drivers:
                    driver.start()
                    if not driver.first_sent.wait(10.0):
                        raise RuntimeError("could not send the first gotos")
                children0 = descendants_cpu() if per_robot else None
                measure_run(m, drivers[0].now, runner.resume, seconds, stall=20.0)
                children1 = descendants_cpu() if per_robot else None
            finally:
                for driver in drivers:
                    driver.stop()
    reached = sum(driver.reached for driver in drivers)
    modules = len(profile.entries)
    if not per_robot:
        where = f"{robots} x {modules} modules in this process (a bus per robot, one session); CPU of this process"
    elif children0 is not None and children1 is not None:
        m.cpu += children1 - children0
        where = f"{robots} robot processes of {modules} modules; CPU of this process + its children (/proc)"
    else:
        where = f"{robots} robot processes of {modules} modules; CPU of this process only (no /proc)"
    m.notes = f"{where}; gotos along the corridor, {reached} reached"


# -- main -------------------------------------------------------------------------------------------------------------


def median_run(runs: list[Measurement]) -> Measurement:
    """The run with the median real-time factor (the lower middle one of an even count)."""
    good = [r for r in runs if r.measured]
    if not good:
        return runs[-1]
    good.sort(key=lambda r: r.rtf)
    return good[(len(good) - 1) // 2]


def repeat(k: int, run: Callable[[], Measurement]) -> Measurement:
    runs: list[Measurement] = []
    for _ in range(k):
        time.sleep(0.5)  # numpy's BLAS threads woken by the run before spin for a moment: not this run's CPU
        runs.append(run())
    chosen = median_run(runs)
    if k > 1 and chosen.measured:
        rtfs = sorted(r.rtf for r in runs if r.measured)
        chosen.notes += f"; median of {len(rtfs)} (RTF {rtfs[0]:.1f}..{rtfs[-1]:.1f})"
    return chosen


def number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "-"


def parse_args() -> argparse.Namespace:
    global runtime_parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        help="simulated seconds per run (default 60 for ir-sim and Pluto's simulator, 30 for the mission profile)",
    )
    parser.add_argument(
        "--step",
        type=float,
        default=0.1,
        help="step of ir-sim and of Pluto's simulator alone, s "
        "(default 0.1, ir-sim's default: motion and a scan at every step)",
    )
    parser.add_argument("--skip-mission", action="store_true", help="leave out the mission profile rows")
    parser.add_argument("--skip-fleet", action="store_true", help="leave out the fleet row")
    parser.add_argument("--skip-free", action="store_true", help="leave out the free-running simulator row")
    parser.add_argument(
        "--robots", type=int, default=FLEET_ROBOTS, help=f"robots in the fleet row (default {FLEET_ROBOTS})"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the median is shown (default 1)")
    parser.add_argument(
        "--runtime-dir",
        type=Path,
        help="folder for the runs' runtime folders, where the modules save their state "
        f"(default {runtime_parent or 'the temporary folder'})",
    )
    args = parser.parse_args()
    if args.step <= 0 or args.repeat < 1 or args.robots < 1 or (args.seconds is not None and args.seconds <= 0):
        parser.error("--step, --repeat, --robots and --seconds must be positive")
    if args.runtime_dir is not None:
        args.runtime_dir.expanduser().mkdir(parents=True, exist_ok=True)
        runtime_parent = str(args.runtime_dir.expanduser())
    return args


def print_setting(world: Any, irsim: Any, repeats: int) -> None:
    laser = LaserParams()
    print(
        f"real-time factor: the {world.name} world ({len(world.walls)} walls, {len(world.polygons)} polygons, "
        f"{len(world.circles)} round obstacles, {len(world.movers)} person), a {laser.beams}-beam laser over "
        f"{math.degrees(laser.fov):.0f}°, {laser.max_range:g} m"
    )
    print(f"python {platform.python_version()}, numpy {np.__version__}", end="")
    print(f", ir-sim {irsim.__version__}" if irsim is not None else ", ir-sim not installed", end="")
    where = tempfile.gettempdir() if runtime_parent is None else runtime_parent
    print(f"; {os.cpu_count()} CPUs; {repeats} run(s) per row; runtime folders in {where}")
    print()


def print_table(results: list[Any], args: argparse.Namespace) -> None:
    header = f"{'what runs':<54}{'sim s':>7}{'wall s':>9}{'RTF':>9}{'CPU s':>8}  notes"
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.what:<54}{number(r.simulated, 1):>7}{number(r.wall, 2):>9}{number(r.rtf, 1):>9}"
            f"{number(r.cpu, 2):>8}  {r.notes}"
        )
    if args.skip_mission:
        print(f"{'Pluto mission profile, lock-step':<54}{'':>33}  skipped (--skip-mission)")
    if args.skip_fleet:
        print(f"{'Pluto fleet, lock-step':<54}{'':>33}  skipped (--skip-fleet)")
    print()


def verdict_at_least(run: Any, target: float, skipped: bool, why: str) -> str:
    """``RTF -> met`` or ``NOT met`` against ``target``, or why it was not measured."""
    if run is not None and run.measured:
        return f"{run.rtf:.1f}x -> {'met' if run.rtf >= target else 'NOT met'}"
    return f"not measured ({why})" if skipped else "not measured"


def print_targets(results: list[Any], free_run: Any, fleet_run: Any, irsim: Any, args: argparse.Namespace) -> None:
    irsim_run, pluto_run = results[0], results[1]
    if irsim_run.end_pose is not None and pluto_run.end_pose is not None:
        ix, iy, _ = irsim_run.end_pose
        px, py, _ = pluto_run.end_pose
        print(
            f"same work: both robots drove the {SPEED:g} m/s, {TURN:.2f} rad/s circle; their end poses are "
            f"{math.hypot(ix - px, iy - py):.2f} m apart (Pluto's body ramps up to speed at 1 m/s²)"
        )
    mission = {r.what.rsplit(", ", 1)[-1]: r for r in results[2:] if "mission" in r.what}
    targets = (
        ("separate processes", TARGET_SEPARATE, "mission profile in separate processes"),
        ("one process", TARGET_ONE_PROCESS, "mission profile in one process"),
    )
    for key, target, label in targets:
        verdict = verdict_at_least(mission.get(key), target, args.skip_mission, "--skip-mission")
        print(f"target: {label} >= {target:g}x real time (on 2 cores): {verdict}")
    if free_run is not None and free_run.measured:
        within = 0.5 * FREE_RATE < free_run.rtf < 1.5 * FREE_RATE
        verdict = f"{free_run.rtf:.2f}x -> {'met' if within else 'NOT met'}"
    else:
        verdict = "not measured (--skip-free)" if free_run is None else "not measured"
    print(f"target: the free-running simulator at rate {FREE_RATE:g} runs {FREE_RATE:g}x real time (±50 %): {verdict}")
    verdict = verdict_at_least(fleet_run, TARGET_FLEET, args.skip_fleet, "--skip-fleet")
    print(
        f"target: {args.robots} robots in one world, a process per robot, >= {TARGET_FLEET:g}x real time "
        f"(on 2 cores): {verdict}"
    )
    if irsim_run.measured and pluto_run.measured:
        ratio = pluto_run.rtf / irsim_run.rtf
        verdict = f"{ratio:.1f}x faster -> met" if ratio > 1 else f"{1 / ratio:.1f}x slower -> NOT met"
    else:
        verdict = "not measured (ir-sim is not installed)" if irsim is None else "not measured"
    print(f"target: Pluto's simulator alone faster than ir-sim on the same work: {verdict}")


def main() -> int:
    args = parse_args()
    sim_seconds = args.seconds if args.seconds is not None else 60.0
    mission_seconds = args.seconds if args.seconds is not None else 30.0
    irsim = import_irsim()
    world = load_world(WORLD)
    for folder in sweep_run_folders(Path(runtime_parent or tempfile.gettempdir())):
        print(f"removed {folder}: left by a run of this bench that was killed")
    print_setting(world, irsim, args.repeat)
    results = [
        repeat(args.repeat, lambda: run_irsim(irsim, world, sim_seconds, args.step)),
        repeat(args.repeat, lambda: run_pluto_sim(world, sim_seconds, args.step)),
    ]
    if not args.skip_mission:
        for one_process in (False, True):
            results.append(repeat(args.repeat, lambda one=one_process: run_mission(world, mission_seconds, one)))
    free_run = None if args.skip_free else repeat(args.repeat, lambda: run_free_running(FREE_WALL))
    if free_run is not None:
        results.append(free_run)
    fleet_run = None
    if not args.skip_fleet:
        fleet_seconds = args.seconds if args.seconds is not None else 10.0
        for per_robot in (True, False):
            run = repeat(args.repeat, lambda p=per_robot: run_fleet(fleet_seconds, args.robots, p))
            results.append(run)
            fleet_run = fleet_run or run  # the target's: a process per robot
    print_table(results, args)
    print_targets(results, free_run, fleet_run, irsim, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
