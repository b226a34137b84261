"""The motion module on the simulated robot (realistic noise, in lock-step, one process): moveto from the office's
lobby into its rooms (through 0.9 m doors), round a building on the campus, exploring a rectangle of the lobby
and coming home, stopping, resuming and releasing, and investigating a pillar.

The stack is the ``sim`` profile plus localization (given the start pose, so goals are in world coordinates),
drive, avoid and motion (and, for movetos, the pose module with the world as its map), all in lock-step with the
simulator; the commands come from a script in the lock-step, so every run of a test is the same run.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.geometry import wrap_angle
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.movement.motion.core import Scan
from pluto.movement.motion.geometry import CoverageGrid, Rectangle
from pluto.movement.motion.module import MotionModule, MotionModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.navigation.pose.module import PoseModule
from pluto.navigation.pose.tracker import PoseModuleParams
from pluto.runtime.profiles import load_profile
from pluto.sim.world import WORLDS_DIR
from tests.scenarios.stack import Collector, Lockstep, Script, without

pytestmark = pytest.mark.scenario

SEED = 3


def office_from_lobby(x: float, y: float, theta: float) -> str:
    """The office without its visitor, the robot in the lobby at (x, y, theta)."""
    text = (WORLDS_DIR / "office.xml").read_text()
    text = re.sub(r"<start [^>]*/>", f'<start x="{x}" y="{y}" theta="{theta}"/>', text)
    return re.sub(r"<movers>.*</movers>", "", text, flags=re.S)


@dataclass
class Stack:
    """The running stack (time held), what the test watches, and the script that commands motion."""

    sim: Lockstep
    motion: MotionModule
    truth: Collector
    status: Collector
    script: Script
    command: StateWriter[msgs.ActuatorState]
    now_status: StateReader[msgs.FVectorState]
    now_truth: StateReader[msgs.Odometry]

    def run(self, body: Callable[[float], Generator[None, float, None]]) -> float:
        """Let the time run with ``body`` as the script until it returns; return the simulated time it did (s)."""
        self.script.body = body
        self.sim.resume()
        self.script.wait()
        assert self.script.finished_at is not None
        return self.script.finished_at

    def send(self, flags: int, position: list[float] = [], velocity: list[float] = [], force: list[float] = []) -> None:  # noqa: B006
        self.command.write(msgs.ActuatorState(cmd_flags=flags, position=position, velocity=velocity, force=force))

    def element(self) -> list[int]:
        """element[0..3] of the newest motion/status (zeros before the first)."""
        s = self.now_status.read()
        return list(s.element) if s is not None and len(s.element) >= 4 else [0, 0, 0, 0]


def start_stack(bus: Bus, sim: Lockstep, tmp_path: Path, world_text: str, start: tuple[float, float, float]) -> Stack:
    """Start sim + localization (at ``start``) + drive + avoid + motion in this process, and a script (10 Hz) to
    command motion, the time held at 0."""
    world = tmp_path / "world.xml"
    world.write_text(world_text)
    start_file = tmp_path / "start.toml"
    start_file.write_text(f"x = {start[0]}\ny = {start[1]}\ntheta = {start[2]}\n")
    sim.start(without(load_profile("sim"), "localization"), world=str(world), noise="realistic", seed=SEED)
    sim.add(LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True, start_pose_file=str(start_file))))
    sim.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
    sim.add(AvoidModule(bus, AvoidModuleParams(use_sim_time=True)))
    motion = sim.add(MotionModule(bus, MotionModuleParams(use_sim_time=True)))
    truth = sim.collect("Sim/Truth", msgs.Odometry)
    status = sim.collect("motion/status", msgs.FVectorState)
    script = Script(bus, rate_hz=10.0)
    command = script.publisher("motion/command", msgs.ActuatorState)
    now_status = script.reader("motion/status", msgs.FVectorState)
    now_truth = script.reader("Sim/Truth", msgs.Odometry)
    sim.add(script)
    return Stack(sim, motion, truth, status, script, command, now_status, now_truth)


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    with Lockstep(bus) as stack:
        yield stack


def moveto(stack: Stack, goal: tuple[float, float], limit: float) -> float:
    """Run a moveto until the motion is over (or ``limit`` simulated s); return the time it ended."""

    def go(now: float) -> Generator[None, float, None]:
        stack.send(42, list(goal))
        start = now
        while (now - start < 1.0 or stack.element()[3] > 0) and now - start < limit:
            now = yield

    return stack.run(go)


ROOMS = {
    "N1": ((10.0, 13.5), (8.0, 12.0, 11.0, 16.0)),
    "S2": ((14.0, 6.5), (12.0, 16.0, 4.0, 9.0)),
    "N4": ((22.0, 13.5), (20.0, 24.0, 11.0, 16.0)),
    "S1": ((10.0, 6.5), (8.0, 12.0, 4.0, 9.0)),
}
"""Goals in office rooms (x, y) and each room's walls (x0, x1, y0, y1), m: every room has a 0.9 m door."""


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_moveto_into_an_office_room_from_the_lobby(bus: Bus, tmp_path: Path, sim: Lockstep, room: str) -> None:
    goal, (x0, x1, y0, y1) = ROOMS[room]
    start = (4.0, 10.0, 0.0)
    stack = start_stack(bus, sim, tmp_path, office_from_lobby(*start), start)
    sim.add(PoseModule(bus, PoseModuleParams(use_sim_time=True, map=str(tmp_path / "world.xml"))))
    poses = sim.collect("Localization/Pose", msgs.PoseEstimate)
    end = moveto(stack, goal, 200.0)
    statuses = stack.status.until(end)
    assert statuses[-1].element[2] == 1, statuses[-1]  # at the goal
    moveto_codes = {s.element[2] for s in statuses}
    motion_codes = {s.element[3] for s in statuses}
    assert {-1, -2, 1} <= moveto_codes and {1, 3, 0} <= motion_codes
    pose = poses.until(end)[-1]
    assert math.hypot(pose.pose[0] - goal[0], pose.pose[1] - goal[1]) < 0.45, pose.pose  # reached at 0.3 m, then braked
    # and truly in the room, at the goal: the pose module keeps the localization on the map's walls
    end_truth = stack.truth.until(end)[-1]
    assert x0 + 0.4 <= end_truth.x <= x1 - 0.4 and y0 + 0.4 <= end_truth.y <= y1 - 0.4, end_truth
    assert math.hypot(end_truth.x - goal[0], end_truth.y - goal[1]) < 0.6, end_truth


def test_moveto_around_a_building_on_the_campus(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    """From the western street to the far side of the library (a 28 m x 33 m building in the way), with the pose
    module matching the buildings' walls to the map: the robot goes round the building and ends at the goal."""
    start, goal = (50.0, 30.0, math.pi / 2), (5.0, 28.0)
    text = (WORLDS_DIR / "campus.xml").read_text()
    text = re.sub(r"<start [^>]*/>", f'<start x="{start[0]}" y="{start[1]}" theta="{start[2]}"/>', text)
    world_text = re.sub(r"<movers>.*</movers>", "", text, flags=re.S)
    stack = start_stack(bus, sim, tmp_path, world_text, start)
    sim.add(PoseModule(bus, PoseModuleParams(use_sim_time=True, map=str(tmp_path / "world.xml"))))
    contacts = sim.collect("Base/Contact", msgs.Contact)
    end = moveto(stack, goal, 400.0)
    statuses = stack.status.until(end)
    assert statuses[-1].element[2] == 1, statuses[-1]  # at the goal
    assert {-1, -2, 1} <= {s.element[2] for s in statuses}
    truths = stack.truth.until(end)
    assert math.hypot(truths[-1].x - goal[0], truths[-1].y - goal[1]) < 0.6, truths[-1]
    assert not any(10.0 < t.x < 38.0 and 12.0 < t.y < 45.0 for t in truths)  # round the library, never through it
    assert not any(c.front or c.rear for c in contacts.until(end))  # and nothing touched on the way
    travelled = sum(math.hypot(b.x - a.x, b.y - a.y) for a, b in itertools.pairwise(truths))
    assert travelled < 2.0 * (45.0 + 33.0), travelled  # one way round, not a search of the campus


def inside_polygon(x: float, y: float, polygon: list[tuple[float, float]]) -> bool:
    inside = False
    for (x1, y1), (x2, y2) in zip(polygon, polygon[1:] + polygon[:1], strict=True):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


RECEPTION = [(1.5, 3.0), (4.5, 3.0), (4.5, 3.6), (2.1, 3.6), (2.1, 5.0), (1.5, 5.0)]


def test_explore_covers_the_lobby_and_comes_home(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    home = (4.0, 1.5, math.pi / 2)
    stack = start_stack(bus, sim, tmp_path, office_from_lobby(*home), home)
    sim.add(PoseModule(bus, PoseModuleParams(use_sim_time=True, map=str(tmp_path / "world.xml"))))
    scans = sim.collect("Sick/Scan_mm", msgs.LaserScan)
    wrists = sim.collect("Wrist/State", msgs.ActuatorState)
    poses = sim.collect("Localization/Pose", msgs.PoseEstimate)
    b, h = 4.0, 10.0  # 8 m x 10 m: the lobby from wall to wall, up past the corridor

    def go(now: float) -> Generator[None, float, None]:
        stack.send(44, [], [b, h])
        start = now
        while (now - start < 1.0 or stack.element()[3] > 0) and now - start < 400.0:
            now = yield

    end = stack.run(go)
    codes = [(s.element[2], s.element[3]) for s in stack.status.until(end)]
    changes = [c for i, c in enumerate(codes) if i == 0 or c != codes[i - 1]]
    truths = stack.truth.until(end)
    rect = Rectangle(*home, b, h)
    grid = CoverageGrid(rect, 0.25)
    truth_stamps = [t.stamp for t in truths]
    wrist_values = wrists.until(end)
    wrist_stamps = [w.stamp for w in wrist_values]
    for scan in scans.until(end):
        t = truths[max(0, bisect.bisect_right(truth_stamps, scan.stamp) - 1)]
        w = wrist_values[max(0, bisect.bisect_right(wrist_stamps, scan.stamp) - 1)]
        if abs(w.position[1]) > 0.02:
            continue
        s = Scan(scan.stamp, np.asarray(scan.ranges), np.asarray(scan.angles), scan.max_range, w.position[0], 0.0)
        origin, bearings, ranges, _ = s.world((t.x, t.y, t.theta))
        grid.add_scan(origin, bearings, ranges, scan.max_range)
    free = np.zeros_like(grid.cells, dtype=bool)
    for iu in range(grid.nu):
        for iw in range(grid.nw):
            x, y = grid.centre(iu, iw)
            free[iu, iw] = (
                rect.contains(x, y) and not inside_polygon(x, y, RECEPTION) and math.hypot(x - 4.5, y - 7.5) > 0.3
            )
    covered = grid.seen_fraction(free)
    final = poses.until(end)[-1]
    assert covered >= 0.9, covered
    # home, in the frame it was set in (Localization/Pose), facing into the rectangle
    assert math.hypot(final.pose[0] - home[0], final.pose[1] - home[1]) < 0.3, final.pose
    assert abs(wrap_angle(final.pose[3] - home[2])) < 0.15, final.pose
    assert math.hypot(truths[-1].x - home[0], truths[-1].y - home[1]) < 0.3, truths[-1]  # and in truth
    # the way home is a moveto: set, nearing, at the goal; the rectangle stays set
    moveto_codes = [c[0] for i, c in enumerate(changes) if i == 0 or c[0] != changes[i - 1][0]]
    assert moveto_codes[-3:] == [-1, -2, 1], changes
    assert changes[-1][1] == -1


def test_stop_resume_rectangle_and_release(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    """Every element[3] code of a moveto's life: 0 with no rectangle, -1 once set, 1 and 3 in motion, -1 when
    stopped by a pass-through command, back in motion on resume (44), and -10 once released."""
    start = (2.0, 10.0, 0.0)
    stack = start_stack(bus, sim, tmp_path, office_from_lobby(*start), start)
    seen: dict[str, list[int]] = {}

    def go(now: float) -> Generator[None, float, None]:
        now = yield
        seen["start"] = stack.element()
        stack.send(46, [1.0, 10.0], [6.0, 10.0], [0.0])  # home (1, 10) facing east: x 1..11, y 4..16
        while stack.element()[3] != -1:
            now = yield
        seen["rectangle"] = stack.element()
        stack.send(42, [6.5, 10.0])
        while stack.element()[3] != 3:
            now = yield
        t0 = now
        while now - t0 < 2.0:
            now = yield
        stack.send(20, [], [0.0, 0.0])  # a pass-through stops the motion
        while stack.element()[3] != -1:
            now = yield
        seen["stopped"] = stack.element()
        t0 = now
        while now - t0 < 1.0:
            now = yield
        stack.send(44)  # resumes the same motion
        while stack.element()[2] != 1:
            now = yield
        seen["there"] = stack.element()
        stack.send(-1)
        while stack.element()[3] != -10:
            now = yield
        seen["released"] = stack.element()

    end = stack.run(go)
    codes = {s.element[3] for s in stack.status.until(end)}
    assert {0, -1, 1, 3, -10} <= codes, codes
    assert seen["start"][3] == 0 and seen["rectangle"][3] == -1
    assert seen["stopped"][2] in (-1, -2)  # the moveto waits to be resumed
    assert seen["there"][3] == -1
    assert not stack.motion.active
    truth = stack.truth.until(end)[-1]
    assert math.hypot(truth.x - 6.5, truth.y - 10.0) < 0.5


def test_investigate_circles_the_closest_object(bus: Bus, tmp_path: Path, sim: Lockstep) -> None:
    start = (3.0, 10.0, -math.pi / 2)
    stack = start_stack(bus, sim, tmp_path, office_from_lobby(*start), start)

    def go(now: float) -> Generator[None, float, None]:
        stack.send(43)
        t0 = now
        while (now - t0 < 1.0 or stack.element()[3] > 0) and now - t0 < 200.0:
            now = yield

    end = stack.run(go)
    statuses = stack.status.until(end)
    codes = [(s.element[2], s.element[3]) for s in statuses]
    changes = [c for i, c in enumerate(codes) if i == 0 or c != codes[i - 1]]
    assert (0, 11) in changes and (0, 12) in changes
    assert statuses[-1].element[2] == 2
    truths = stack.truth.until(end)
    # it went round the south pillar (4.5, 7.5), never touching it
    distances = [math.hypot(t.x - 4.5, t.y - 7.5) for t in truths]
    assert min(distances) > 0.3 + 0.4
    circling = [t for t, s in zip(truths, distances, strict=False) if s < 2.0]
    angles = {int((math.atan2(t.y - 7.5, t.x - 4.5) + math.pi) / (math.pi / 2)) % 4 for t in circling}
    assert angles == {0, 1, 2, 3}
