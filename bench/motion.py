"""Moving to a goal on the simulated robot: motion moveto, avoid goto and a grid A* + pure-pursuit baseline over the
same seeded start/goal pairs per world (office, campus, clutter).

Run by hand: ``python bench/motion.py [--pairs 50] [--worlds office,campus,clutter] [--methods moveto,goto,astar]
[--seed 0] [--jobs 2]``. Prints a table per world and method against the targets of the motion module; asserts
nothing. ``--jobs`` runs that many pairs at once in worker processes; every run is in lock-step on a bus of its own,
so the figures are the same.

Strategy: each world's map (its walls, polygons and circles; the people who walk in it are left out) is laid on a
grid that holds each cell's clearance (distance from its centre to the nearest obstacle, exact for segments and
circles, 0 inside a polygon). Pairs are drawn with a seeded ``numpy.random.Generator`` from the cells at least
1 m from everything (clutter: 0.5 m, see :data:`MIN_CLEARANCE`), in the largest free region of the map inflated by
the robot's radius and the 2 cm at which its bumpers touch, with a straight-line distance of 5-25 m (campus: 5-40 m;
clutter: 2-25 m, see :data:`MIN_DISTANCE`) and a random start heading; every method gets the same pairs. The
shortest path of a pair is the A* path (``pyastar2d``, 8-connected) on the grid inflated by the robot's radius,
pulled taut (from each corner, straight to the farthest cell of the path in sight): a close upper bound of the true
shortest way.

Each run starts the stack in this process, in lock-step (simulated time as fast as the modules go): the ``sim``
profile with realistic noise seeded by the pair, localization given the start pose, the pose module with the world
as its map (so the goal, given in the world frame, is reached in the map frame), the drive, and per method:

* ``moveto``: avoid + motion, motion/command 42 (x, y); done when motion/status element[3] drops to <= 0.
* ``goto``: avoid, avoidance/command 22 (goto with laser avoidance, 0.6 m/s, 1 rad/s, goal weight 1); done when
  avoidance/status element[1] is 1 (reached) or 2 (stuck).
* ``astar``: an A* path on the map inflated by the robot's radius plus 3 cm, with a cost for passing near
  obstacles, pulled taut, followed by the :class:`PurePursuit` below, which writes ``drive/command`` (velocity)
  from ``Localization/Pose``; done within 0.3 m of the goal. It has no obstacle avoidance of its own: it relies on
  the map and the pose module.

A pair succeeds when, at the time its method says it is done (before the limit of 30 s + 3x the shortest path's
time at 0.6 m/s), the true pose (``Sim/Truth``) is within 0.5 m of the goal and no bumper (``Base/Contact``) was
pressed on the way. Time is the simulated time from the command to done; the path ratio is the true distance
travelled, plus the distance left to the goal at the end, over the shortest path; heading oscillation is the sum of
|Δθ| of the true heading while driving (turns on the spot left out) per metre driven, over the whole path and in
corridors (where the map's walls at ±90° from the heading are both within 1.5 m: the office's corridor and rooms'
doorways; the campus has none). The pose error is the largest distance between ``Localization/Pose`` and the truth.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import math
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyastar2d  # type: ignore[import-untyped]
from numpy.typing import NDArray
from scipy import ndimage  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.scenarios (the lock-step stack)

from tests.helpers import free_tcp_port
from tests.scenarios.stack import Lockstep, Script, without

from pluto import msgs, names
from pluto.bus import Bus
from pluto.geometry import wrap_angle
from pluto.movement.avoid.core import GOTO_REACHED, GOTO_STUCK
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.movement.motion.module import MotionModule, MotionModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.navigation.pose.module import PoseModule
from pluto.navigation.pose.tracker import PoseModuleParams
from pluto.runtime.profiles import load_profile
from pluto.sim.raycast import RayCaster
from pluto.sim.world import WORLDS_DIR, World, parse_world

FloatArray = NDArray[np.float64]

ROBOT_RADIUS = 0.4
"""The simulated base's footprint, m."""
GOAL_TOLERANCE = 0.5
"""A pair succeeds with the true pose this near its goal, m."""
MIN_CLEARANCE = {"office": 1.0, "campus": 1.0, "clutter": 0.5}
"""Starts and goals are at least this far from every obstacle, m. In the clutter no cell of the robot's largest free
region is 1 m from everything (none is 0.8 m), so its pairs are drawn from cells 0.5 m clear."""
MIN_DISTANCE = {"office": 5.0, "campus": 5.0, "clutter": 2.0}
MAX_DISTANCE = {"office": 25.0, "campus": 40.0, "clutter": 25.0}
"""Straight-line distance between a start and its goal, m. The clutter's largest region that the robot reaches
without touching anything is a 4 m x 1 m strip along its south wall (every other way passes gaps narrower than
the 0.84 m at which its bumpers touch), so its pairs are 2 m apart or more."""
SPEED = 0.6
"""Top speed of every method (the motion module's default), m/s."""
CORRIDOR_WIDTH = 1.5
"""In a corridor, the walls at ±90° from the heading are both within this distance, m."""
DRIVING = 0.1
"""Heading changes count as oscillation while the robot drives at least this fast (true speed), m/s."""
COMFORT_COST = 20.0
"""A grid step costs up to this much more the nearer a cell is to an obstacle (within a plan's comfort distance)."""
STUCK = "stuck"
LIMIT = "time limit"
"""Notes of a run that did not end at its goal: the method gave up, or the time ran out."""

WORLD_NAMES = ("office", "campus", "clutter")
METHODS = ("moveto", "goto", "astar")
RESOLUTION = {"office": 0.025, "campus": 0.1, "clutter": 0.025}
"""Grid cell size per world, m: fine enough for a baseline path through the office's 0.9 m doors that keeps
:data:`ROUTE_MARGIN` from the jambs (the campus has no doors)."""
ROUTE_MARGIN = ROBOT_RADIUS + 0.03
"""The baseline's path keeps this far from obstacles, m: the simulated bumpers touch at 2 cm, and a doorway leaves
5 cm on each side."""


# -- the map as a grid ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClearanceGrid:
    """Each cell's distance to the nearest obstacle of a world, m (capped at ``cap``; 0 inside a polygon).

    Cell ``(i, j)`` has its centre at ``(x0 + (j + 0.5)·resolution, y0 + (i + 0.5)·resolution)``.
    """

    x0: float
    y0: float
    resolution: float
    clearance: FloatArray

    def cell(self, x: float, y: float) -> tuple[int, int]:
        return int((y - self.y0) / self.resolution), int((x - self.x0) / self.resolution)

    def centre(self, i: int, j: int) -> tuple[float, float]:
        return self.x0 + (j + 0.5) * self.resolution, self.y0 + (i + 0.5) * self.resolution

    def free(self, margin: float) -> NDArray[np.bool_]:
        """The cells whose centre is more than ``margin`` (m) from every obstacle."""
        return self.clearance > margin


def clearance_grid(world: World, resolution: float, cap: float = 3.0) -> ClearanceGrid:
    """Lay ``world``'s static obstacles on a grid of ``resolution`` m and measure each cell's clearance (m)."""
    x0, y0, x1, y1 = world.bounds()
    nx = math.ceil((x1 - x0) / resolution)
    ny = math.ceil((y1 - y0) / resolution)
    xs = x0 + (np.arange(nx) + 0.5) * resolution
    ys = y0 + (np.arange(ny) + 0.5) * resolution
    clearance = np.full((ny, nx), cap)
    reach = math.ceil(cap / resolution) + 1

    def window(lo_x: float, hi_x: float, lo_y: float, hi_y: float) -> tuple[slice, slice]:
        j0 = max(0, int((lo_x - x0) / resolution) - reach)
        j1 = min(nx, int((hi_x - x0) / resolution) + reach + 1)
        i0 = max(0, int((lo_y - y0) / resolution) - reach)
        i1 = min(ny, int((hi_y - y0) / resolution) + reach + 1)
        return slice(i0, i1), slice(j0, j1)

    for ax, ay, bx, by in world.segments():
        rows, cols = window(min(ax, bx), max(ax, bx), min(ay, by), max(ay, by))
        px, py = np.meshgrid(xs[cols], ys[rows])
        ex, ey = bx - ax, by - ay
        length2 = ex * ex + ey * ey
        t = np.clip(((px - ax) * ex + (py - ay) * ey) / length2, 0.0, 1.0) if length2 > 0 else np.zeros_like(px)
        d = np.hypot(px - ax - t * ex, py - ay - t * ey)
        np.minimum(clearance[rows, cols], d, out=clearance[rows, cols])
    for cx, cy, r in world.circles:
        rows, cols = window(cx - r, cx + r, cy - r, cy + r)
        px, py = np.meshgrid(xs[cols], ys[rows])
        d = np.maximum(np.hypot(px - cx, py - cy) - r, 0.0)
        np.minimum(clearance[rows, cols], d, out=clearance[rows, cols])
    for polygon in world.polygons:
        points = np.asarray(polygon.points, dtype=np.float64)
        rows, cols = window(points[:, 0].min(), points[:, 0].max(), points[:, 1].min(), points[:, 1].max())
        px, py = np.meshgrid(xs[cols], ys[rows])
        inside = np.zeros(px.shape, dtype=bool)
        for (ax, ay), (bx, by) in zip(points, np.roll(points, -1, axis=0), strict=True):
            if ay == by:
                continue
            crosses = (ay > py) != (by > py)
            inside ^= crosses & (px < ax + (py - ay) * (bx - ax) / (by - ay))
        clearance[rows, cols][inside] = 0.0
    return ClearanceGrid(x0, y0, resolution, clearance)


def visible(free: NDArray[np.bool_], a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether the straight line between cells ``a`` and ``b`` stays in ``free`` cells (sampled at 1/3 cell)."""
    n = int(3 * max(abs(b[0] - a[0]), abs(b[1] - a[1]))) + 2
    i = np.rint(np.linspace(a[0], b[0], n)).astype(int)
    j = np.rint(np.linspace(a[1], b[1], n)).astype(int)
    return bool(free[i, j].all())


def taut(free: NDArray[np.bool_], cells: NDArray[np.int_]) -> list[tuple[int, int]]:
    """The corners of a grid path ``(K, 2)`` pulled taut: from each corner, the next is the farthest cell of the
    path that a straight line through ``free`` cells reaches (the next cell where none does)."""
    path = [(int(i), int(j)) for i, j in cells]
    corners = [path[0]]
    k = 0
    while k < len(path) - 1:
        far = len(path) - 1
        while far > k + 1 and not visible(free, path[k], path[far]):
            far -= 1
        corners.append(path[far])
        k = far
    return corners


def plan(
    grid: ClearanceGrid,
    start: tuple[float, float],
    goal: tuple[float, float],
    margin: float,
    comfort: float = 0.0,
    line_margin: float | None = None,
) -> list[tuple[float, float]] | None:
    """A taut path (world points, m) from ``start`` to ``goal`` through cells more than ``margin`` m from every
    obstacle, or None if there is none.

    With ``comfort`` > ``margin``, cells nearer than ``comfort`` cost more, so the path keeps away from walls where
    it can; with ``line_margin`` > ``margin``, the straight lines of the taut path keep that far from obstacles
    (where the grid path is narrower, its cells are kept as they are).

    The grid path is 8-connected A* (``pyastar2d``, where a diagonal step costs as much as a straight one, so that
    of two ways round a small obstacle it may take the longer one); pulling it taut from the farthest visible cell
    first takes the shorter way whenever a straight line passes there.
    """
    free = grid.free(margin)
    weights = np.where(free, 1.0, np.inf).astype(np.float32)
    if comfort > margin:
        weights += np.float32(COMFORT_COST) * np.clip(comfort - grid.clearance, 0.0, None).astype(np.float32) / comfort
    a, b = grid.cell(*start), grid.cell(*goal)
    if not (free[a] and free[b]):
        return None
    cells = pyastar2d.astar_path(weights, a, b, allow_diagonal=True)
    if cells is None:
        return None
    lines = free if line_margin is None else grid.free(line_margin)
    return [grid.centre(i, j) for i, j in taut(lines, cells)]


def path_length(points: list[tuple[float, float]]) -> float:
    return sum(math.dist(p, q) for p, q in itertools.pairwise(points))


# -- pairs ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """A start pose (x, y, θ; m, m, rad), a goal (x, y; m) and the length of the shortest path between them (m)."""

    start: tuple[float, float, float]
    goal: tuple[float, float]
    shortest: float


def draw_pairs(
    grid: ClearanceGrid, n: int, rng: np.random.Generator, min_clearance: float, distance: tuple[float, float]
) -> list[Pair]:
    """``n`` pairs from the cells at least ``min_clearance`` m from every obstacle in the largest region of the map
    inflated by :data:`ROUTE_MARGIN` (the robot can go from any place of it to any other without touching
    anything), ``distance`` (least, most) m apart in a straight line."""
    labels, count = ndimage.label(grid.free(ROUTE_MARGIN))
    if count == 0:
        raise ValueError("the map has no free cell")
    largest = 1 + int(np.argmax(np.bincount(labels.ravel())[1:]))
    candidates = np.argwhere((labels == largest) & (grid.clearance >= min_clearance))
    centres = np.column_stack(
        (grid.x0 + (candidates[:, 1] + 0.5) * grid.resolution, grid.y0 + (candidates[:, 0] + 0.5) * grid.resolution)
    )
    pairs: list[Pair] = []
    for _ in range(200 * n):
        if len(pairs) == n:
            break
        s = centres[rng.integers(len(centres))]
        d = np.hypot(centres[:, 0] - s[0], centres[:, 1] - s[1])
        near = np.flatnonzero((d >= distance[0]) & (d <= distance[1]))
        if near.size == 0:
            continue
        g = centres[near[rng.integers(near.size)]]
        theta = float(rng.uniform(-math.pi, math.pi))
        path = plan(grid, (s[0], s[1]), (g[0], g[1]), ROBOT_RADIUS)
        if path is None:
            continue
        pairs.append(Pair((float(s[0]), float(s[1]), theta), (float(g[0]), float(g[1])), path_length(path)))
    if len(pairs) < n:
        raise ValueError(f"only {len(pairs)} of {n} pairs found")
    return pairs


# -- the baseline's follower ----------------------------------------------------------------------------------------


@dataclass
class PurePursuit:
    """Pure pursuit of a polyline: steer along the arc through the point ``lookahead`` m ahead on the path.

    ω = v·2·sin(α)/d, with α the bearing and d the distance of the look-ahead point; the robot turns on the spot
    while |α| exceeds ``turn_in_place``, and slows down towards the goal. Where the map leaves less than ``narrow``
    m of clearance (a doorway is 5 cm wider than the robot on each side), it follows closely and slowly: a shorter
    look-ahead cuts corners less.
    """

    path: list[tuple[float, float]]
    clearance: Callable[[float, float], float]
    """The map's clearance at a point, m."""
    speed: float = SPEED
    turn_rate: float = 1.0
    lookahead: float = 0.8
    turn_in_place: float = math.radians(50.0)
    narrow: float = 0.8
    narrow_speed: float = 0.25
    narrow_lookahead: float = 0.15
    narrow_turn_in_place: float = math.radians(8.0)
    _segment: int = field(default=0, init=False)

    def command(self, x: float, y: float, theta: float) -> tuple[float, float]:
        """(v m/s, ω rad/s) at pose (x, y, θ)."""
        points = np.asarray(self.path)
        tight = self.clearance(x, y) < self.narrow
        lookahead = self.narrow_lookahead if tight else self.lookahead
        # the nearest point on the segments not yet passed (never going back along the path)
        best, best_d, best_t = self._segment, math.inf, 0.0
        for k in range(self._segment, len(points) - 1):
            a, b = points[k], points[k + 1]
            e = b - a
            t = float(np.clip(np.dot((x, y) - a, e) / max(float(np.dot(e, e)), 1e-12), 0.0, 1.0))
            d = math.dist((x, y), a + t * e)
            if d < best_d - 1e-9:
                best, best_d, best_t = k, d, t
            if d > best_d + 2.0 * self.lookahead:
                break
        self._segment = best
        target = self._ahead(best, best_t, lookahead)
        alpha = wrap_angle(math.atan2(target[1] - y, target[0] - x) - theta)
        goal_distance = math.dist((x, y), self.path[-1])
        if abs(alpha) > (self.narrow_turn_in_place if tight else self.turn_in_place):
            return 0.0, float(np.clip(2.0 * alpha, -self.turn_rate, self.turn_rate))
        v = min(self.narrow_speed if tight else self.speed, 0.2 + 0.5 * goal_distance) * max(0.3, math.cos(alpha))
        length = max(math.dist((x, y), target), 1e-3)
        omega = float(np.clip(v * 2.0 * math.sin(alpha) / length, -self.turn_rate, self.turn_rate))
        return v, omega

    def _ahead(self, k: int, t: float, lookahead: float) -> tuple[float, float]:
        """The point ``lookahead`` m along the path from parameter ``t`` of segment ``k``."""
        left = lookahead
        a, b = self.path[k], self.path[k + 1]
        point = (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
        while True:
            rest = math.dist(point, b)
            if rest >= left or k + 1 >= len(self.path) - 1:
                if rest <= left:
                    return b
                f = left / rest
                return point[0] + f * (b[0] - point[0]), point[1] + f * (b[1] - point[1])
            left -= rest
            k += 1
            point, b = b, self.path[k + 1]


# -- one run --------------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one method did on one pair."""

    success: bool
    time: float
    """simulated s from the command to done (or the limit)."""
    ratio: float
    """(true distance travelled + true distance left to the goal) / shortest path: the methods stop some 0.3 m
    short of the goal, which would make a straight run look shorter than the shortest path."""
    driven: float
    """m travelled while driving (true speed at least :data:`DRIVING`)."""
    turned: float
    """sum of |Δθ| of the true heading while driving, deg (turns on the spot are not oscillation)."""
    corridor_m: float
    """m driven in corridors."""
    corridor_turned: float
    """deg turned while driving in corridors."""
    collided: bool
    end_error: float
    """true distance from the goal at the end, m."""
    pose_error: float = math.nan
    """largest distance between ``Localization/Pose`` and the true pose of its time during the run, m."""
    note: str = ""


@contextlib.contextmanager
def own_bus() -> Iterator[Bus]:
    """A bus with a robot name and a rendezvous of its own (no other run, bench or test sees it)."""
    with tempfile.TemporaryDirectory() as runtime:
        os.environ["PLUTO_ROBOT"] = f"bench-{uuid.uuid4().hex[:8]}"
        os.environ["PLUTO_RENDEZVOUS"] = f"tcp/127.0.0.1:{free_tcp_port()}"
        os.environ["PLUTO_RUNTIME_DIR"] = runtime
        with Bus() as bus:
            yield bus


def world_text(name: str, start: tuple[float, float, float]) -> str:
    """The shipped world ``name`` with the robot at ``start`` and without its walking people."""
    text = (WORLDS_DIR / f"{name}.xml").read_text()
    text = re.sub(r"<start [^>]*/>", f'<start x="{start[0]}" y="{start[1]}" theta="{start[2]}"/>', text)
    return re.sub(r"<movers>.*</movers>", "", text, flags=re.S)


def run_pair(
    world: str,
    grid: ClearanceGrid,
    caster: RayCaster,
    pair: Pair,
    method: str,
    seed: int,
    folder: Path,
    trace: list[tuple[float, float, float, float]] | None = None,
) -> Outcome:
    """Run ``method`` on ``pair`` in a fresh lock-step stack; measure it (and add the true poses, stamp s, x m,
    y m, θ rad, to ``trace`` if given)."""
    limit = 30.0 + 3.0 * pair.shortest / SPEED
    path_file = folder / "world.xml"
    path_file.write_text(world_text(world, pair.start))
    start_file = folder / "start.toml"
    start_file.write_text(f"x = {pair.start[0]}\ny = {pair.start[1]}\ntheta = {pair.start[2]}\n")
    follower: PurePursuit | None = None
    if method == "astar":
        route = plan(grid, pair.start[:2], pair.goal, ROUTE_MARGIN, comfort=1.2, line_margin=ROBOT_RADIUS + 0.4)
        if route is None:  # only gaps narrower than the margin on the way (the clutter): as near as the bumpers allow
            route = plan(grid, pair.start[:2], pair.goal, ROBOT_RADIUS, comfort=1.2, line_margin=ROBOT_RADIUS + 0.4)
        assert route is not None, "every pair has a path on the map inflated by the robot's radius"
        follower = PurePursuit(
            [pair.start[:2], *route[1:-1], pair.goal], lambda x, y: float(grid.clearance[grid.cell(x, y)])
        )
    with own_bus() as bus, Lockstep(bus) as sim:
        sim.start(without(load_profile("sim"), "localization"), world=str(path_file), noise="realistic", seed=seed)
        sim.add(LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True, start_pose_file=str(start_file))))
        sim.add(PoseModule(bus, PoseModuleParams(use_sim_time=True, map=str(path_file))))
        sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
        if method in ("moveto", "goto"):
            sim.add(AvoidModule(bus, AvoidModuleParams(use_sim_time=True)))
        if method == "moveto":
            sim.add(MotionModule(bus, MotionModuleParams(use_sim_time=True)))
        truth = sim.collect(names.SIM_TRUTH.name, msgs.Odometry)
        contacts = sim.collect(names.BASE_CONTACT.name, msgs.Contact)
        poses = sim.collect(names.LOCALIZATION_POSE.name, msgs.PoseEstimate)
        script = Script(bus, rate_hz=10.0)
        done: dict[str, Any] = {}
        body = _script(method, script, pair, limit, follower, done)
        script.body = body
        sim.add(script)
        sim.resume()
        script.wait(timeout=max(600.0, 20.0 * limit))
        end = script.finished_at
        assert end is not None
        truths = truth.until(end)
        collided = any(c.front or c.rear for c in contacts.until(end))
        outcome = measure(truths, caster, pair, collided, done.get("t0", 0.0), end, done.get("note", ""))
        outcome.pose_error = pose_error(truths, poses.until(end))
        if trace is not None:
            trace.extend((t.stamp, t.x, t.y, t.theta) for t in truths)
        return outcome


def _script(
    method: str, script: Script, pair: Pair, limit: float, follower: PurePursuit | None, done: dict[str, Any]
) -> Callable[[float], Generator[None, float, None]]:
    """The script's body for ``method``: command the goal, then wait until the method says it is done."""
    motion_cmd = script.publisher(names.MOTION_COMMAND.name, msgs.ActuatorState)
    motion_status = script.reader(names.MOTION_STATUS.name, msgs.FVectorState)
    avoid_cmd = script.publisher(names.AVOIDANCE_COMMAND.name, msgs.ActuatorState)
    avoid_status = script.reader(names.AVOIDANCE_STATUS.name, msgs.FVectorState)
    drive_cmd = script.publisher(names.DRIVE_COMMAND.name, msgs.ActuatorState)
    pose = script.reader(names.LOCALIZATION_POSE.name, msgs.PoseEstimate)
    goal = list(pair.goal)

    def element(reader: Any, k: int) -> int | None:
        s = reader.read()
        return int(s.element[k]) if s is not None and len(s.element) > k else None

    def body(now: float) -> Generator[None, float, None]:
        t0 = done["t0"] = now
        if method == "moveto":
            motion_cmd.write(msgs.ActuatorState(cmd_flags=42, position=goal))
        elif method == "goto":
            avoid_cmd.write(msgs.ActuatorState(cmd_flags=22, position=goal, velocity=[SPEED, 1.0], force=[1.0]))
        while now - t0 < limit:
            if method == "moveto":
                state = element(motion_status, 3)
                if now - t0 >= 1.0 and state is not None and state <= 0:
                    done["note"] = "" if element(motion_status, 2) == 1 else STUCK
                    return
            elif method == "goto":
                state = element(avoid_status, 1)
                if now - t0 >= 1.0 and state in (GOTO_REACHED, GOTO_STUCK):
                    done["note"] = STUCK if state == GOTO_STUCK else ""
                    return
            else:
                assert follower is not None
                p = pose.read()
                if p is not None:
                    x, y, theta = p.pose[0], p.pose[1], p.pose[3]
                    if math.dist((x, y), pair.goal) < 0.3:
                        drive_cmd.write(msgs.ActuatorState(cmd_flags=0, velocity=[0.0, 0.0]))
                        return
                    v, omega = follower.command(x, y, theta)
                    drive_cmd.write(msgs.ActuatorState(cmd_flags=0, velocity=[v, omega]))
            now = yield
        done["note"] = LIMIT

    return body


def pose_error(truths: list[msgs.Odometry], poses: list[msgs.PoseEstimate]) -> float:
    """The largest distance between a pose estimate and the true pose of its time (the newest before it), m."""
    stamps = [t.stamp for t in truths]
    worst = 0.0
    for p in poses:
        k = bisect.bisect_right(stamps, p.stamp) - 1
        if k >= 0:
            worst = max(worst, math.dist((p.pose[0], p.pose[1]), (truths[k].x, truths[k].y)))
    return worst


def measure(
    truths: list[msgs.Odometry], caster: RayCaster, pair: Pair, collided: bool, t0: float, end: float, note: str
) -> Outcome:
    """The figures of one run from the true poses up to its end."""
    xy = np.array([(t.x, t.y) for t in truths])
    theta = np.array([t.theta for t in truths])
    steps = np.hypot(*np.diff(xy, axis=0).T)
    turns = np.abs(np.diff(theta))
    driving = np.abs([t.v for t in truths[1:]]) >= DRIVING
    # in a corridor: the map's walls at ±90° from the heading both within CORRIDOR_WIDTH
    corridor = np.zeros(len(steps), dtype=bool)
    for k in range(0, len(steps), 5):  # every 5th pose is enough
        sides = caster.cast(xy[k], np.array([theta[k] + math.pi / 2, theta[k] - math.pi / 2]), 5.0)
        corridor[k : k + 5] = bool(np.all(sides < CORRIDOR_WIDTH))
    corridor &= driving
    end_error = math.dist((truths[-1].x, truths[-1].y), pair.goal)
    return Outcome(
        success=end_error <= GOAL_TOLERANCE and not collided and note != LIMIT,
        time=end - t0,
        ratio=(float(steps.sum()) + end_error) / pair.shortest,
        driven=float(steps[driving].sum()),
        turned=math.degrees(float(turns[driving].sum())),
        corridor_m=float(steps[corridor].sum()),
        corridor_turned=math.degrees(float(turns[corridor].sum())),
        collided=collided,
        end_error=end_error,
        note=note,
    )


# -- the table ------------------------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


def per_metre(degrees: float, metres: float) -> float:
    return degrees / metres if metres >= 1.0 else math.nan


def print_table(world: str, results: dict[str, list[Outcome]]) -> None:
    print(
        f"\n{world}: {len(next(iter(results.values())))} pairs\n"
        f"{'method':<8}{'success %':>10}{'median s':>10}{'path x':>8}{'osc deg/m':>11}{'corr deg/m':>12}"
        f"{'corr m':>8}{'collisions':>12}{'stuck/limit':>13}"
    )
    oscillation: dict[str, tuple[float, float]] = {}
    for method, outcomes in results.items():
        ok = [o for o in outcomes if o.success]
        whole = per_metre(sum(o.turned for o in outcomes), sum(o.driven for o in outcomes))
        corridor_m = sum(o.corridor_m for o in outcomes)
        corridor = per_metre(sum(o.corridor_turned for o in outcomes), corridor_m)
        oscillation[method] = (whole, corridor)
        ended = sum(o.note in (STUCK, LIMIT) for o in outcomes)
        print(
            f"{method:<8}{100.0 * len(ok) / len(outcomes):>10.0f}{median([o.time for o in ok]):>10.1f}"
            f"{median([o.ratio for o in ok]):>8.2f}{whole:>11.1f}{corridor:>12.1f}{corridor_m:>8.0f}"
            f"{sum(o.collided for o in outcomes):>12}{ended:>13}"
        )
    if "goto" in oscillation and "moveto" in results:
        whole, corridor = oscillation["goto"]
        print(
            "targets (moveto): success >= 98 %, path <= 1.2x, no collisions, oscillation <= half of goto's: "
            f"<= {0.5 * whole:.1f} deg/m whole path, <= {0.5 * corridor:.1f} deg/m in corridors"
        )


_MAPS: dict[str, tuple[ClearanceGrid, RayCaster]] = {}


def world_maps(name: str) -> tuple[ClearanceGrid, RayCaster]:
    """The clearance grid and a ray caster of the shipped world ``name`` without its people (made once per
    process)."""
    if name not in _MAPS:
        world = parse_world((WORLDS_DIR / f"{name}.xml").read_text(), f"{name}.xml")
        world = World(world.name, world.walls, polygons=world.polygons, circles=world.circles, start=world.start)
        caster = RayCaster(world.segments(), world.circles if len(world.circles) else None)
        _MAPS[name] = (clearance_grid(world, RESOLUTION[name]), caster)
    return _MAPS[name]


def _run_task(
    name: str, pair: Pair, method: str, seed: int, maps: tuple[ClearanceGrid, RayCaster] | None = None
) -> Outcome:
    """One run in a folder of its own (in a worker process with ``--jobs``: each run has a bus of its own)."""
    grid, caster = maps if maps is not None else world_maps(name)
    with tempfile.TemporaryDirectory() as folder:
        return run_pair(name, grid, caster, pair, method, seed, Path(folder))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=50, help="start/goal pairs per world (default 50)")
    parser.add_argument("--worlds", default=",".join(WORLD_NAMES), help="comma-separated (default: all three)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default: all three)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pairs and of the simulator's noise")
    parser.add_argument("--verbose", action="store_true", help="print each run")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at once, each in a process of its own (default 1; the runs are in "
        "lock-step, so their figures do not depend on it)",
    )
    args = parser.parse_args(argv)
    worlds = [w for w in args.worlds.split(",") if w]
    methods = [m for m in args.methods.split(",") if m]
    for name in worlds:
        if name not in WORLD_NAMES:
            parser.error(f"unknown world {name!r} (one of {', '.join(WORLD_NAMES)})")
    for name in methods:
        if name not in METHODS:
            parser.error(f"unknown method {name!r} (one of {', '.join(METHODS)})")
    wall = time.monotonic()
    for name in worlds:
        grid, caster = world_maps(name)
        rng = np.random.default_rng([args.seed, WORLD_NAMES.index(name)])
        pairs = draw_pairs(grid, args.pairs, rng, MIN_CLEARANCE[name], (MIN_DISTANCE[name], MAX_DISTANCE[name]))
        results: dict[str, list[Outcome]] = {m: [] for m in methods}
        tasks = [(k, pair, method) for k, pair in enumerate(pairs) for method in methods]
        with contextlib.ExitStack() as stack:
            if args.jobs > 1:
                pool = stack.enter_context(ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")))
                outcomes: Iterator[Outcome] = pool.map(
                    _run_task,
                    [name] * len(tasks),
                    [pair for _, pair, _ in tasks],
                    [method for _, _, method in tasks],
                    [args.seed * 1000 + k for k, _, _ in tasks],
                )
            else:
                outcomes = (
                    _run_task(name, pair, method, args.seed * 1000 + k, (grid, caster)) for k, pair, method in tasks
                )
            for (k, pair, method), outcome in zip(tasks, outcomes, strict=True):
                results[method].append(outcome)
                if args.verbose:
                    print(
                        f"  {name} #{k} {method:<7} start ({pair.start[0]:.1f}, {pair.start[1]:.1f}, "
                        f"{math.degrees(pair.start[2]):.0f}°) goal ({pair.goal[0]:.1f}, {pair.goal[1]:.1f}) "
                        f"shortest {pair.shortest:.1f} m: {'ok' if outcome.success else 'FAIL'} "
                        f"{outcome.time:.1f} s, x{outcome.ratio:.2f}, "
                        f"{per_metre(outcome.turned, outcome.driven):.1f} deg/m, end "
                        f"{outcome.end_error:.2f} m, pose error <= {outcome.pose_error:.2f} m"
                        f"{', bumped' if outcome.collided else ''} {outcome.note} "
                        f"[{time.monotonic() - wall:.0f} s]",
                        flush=True,
                    )
        print_table(name, results)
    print(
        "\nsuccess: true pose within 0.5 m of the goal when the method is done, before the limit, no bumper pressed; "
        "median s (simulated) and path x ((travelled + left to the goal) / shortest on the map inflated by 0.4 m) "
        f"over the successes; osc: sum of |dθ| of the true heading while driving (>= {DRIVING} m/s) per metre driven, "
        "over all runs; corr: the same in corridors (walls within "
        f"{CORRIDOR_WIDTH} m on both sides), corr m the metres driven there; collisions: runs with a bumper pressed; "
        f"stuck/limit: runs that gave up or ran out of time. Wall time {time.monotonic() - wall:.0f} s."
    )


if __name__ == "__main__":
    main()
