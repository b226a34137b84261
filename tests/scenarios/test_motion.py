"""The motion module on the simulated robot (realistic noise, in lock-step, one process)."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.movement.motion.core import Scan
from pluto.movement.motion.geometry import CoverageGrid, Rectangle
from pluto.movement.motion.module import MotionModule, MotionModuleParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
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
    sim: Lockstep
    motion: MotionModule
    truth: Collector
    status: Collector
    script: Script
    command: StateWriter[msgs.ActuatorState]
    now_status: StateReader[msgs.FVectorState]
    now_truth: StateReader[msgs.Odometry]

    def run(self, body: Callable[[float], Generator[None, float, None]]) -> float:
        self.script.body = body
        self.sim.resume()
        self.script.wait()
        assert self.script.finished_at is not None
        return self.script.finished_at

    def send(self, flags: int, position: list[float] = [], velocity: list[float] = [], force: list[float] = []) -> None:  # noqa: B006
        self.command.write(msgs.ActuatorState(cmd_flags=flags, position=position, velocity=velocity, force=force))

    def element(self) -> list[int]:
        s = self.now_status.read()
        return list(s.element) if s is not None and len(s.element) >= 4 else [0, 0, 0, 0]


def start_stack(bus: Bus, sim: Lockstep, tmp_path: Path, world_text: str, start: tuple[float, float, float]) -> Stack:
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
    def go(now: float) -> Generator[None, float, None]:
        stack.send(42, list(goal))
        start = now
        while (now - start < 1.0 or stack.element()[3] > 0) and now - start < limit:
            now = yield

    return stack.run(go)


@pytest.mark.parametrize("goal", [(10.0, 13.5), (14.0, 6.5), (22.0, 13.5), (10.0, 6.5)])
def test_moveto_into_an_office_room_from_the_lobby(bus: Bus, tmp_path: Path, sim: Lockstep, goal: tuple[float, float]) -> None:
    stack = start_stack(bus, sim, tmp_path, office_from_lobby(4.0, 10.0, 0.0), (4.0, 10.0, 0.0))
    end = moveto(stack, goal, 200.0)
    codes = [(s.stamp, s.element[2], s.element[3]) for s in stack.status.until(end)]
    changes = [c for i, c in enumerate(codes) if i == 0 or c[1:] != codes[i - 1][1:]]
    job = stack.motion.core.job
    if job is not None and job.nav is not None:
        print(job.nav.phase, job.nav.visited, job.nav.choice)
    truths = stack.truth.until(end)
    print(changes)
    print(truths[-1], end)
    for t in truths[::30]:
        print(f"{t.stamp:.1f} {t.x:.2f} {t.y:.2f} {t.theta:.2f}")
    assert stack.status.until(end)[-1].element[2] == 1


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
    scans = sim.collect("Sick/Scan_mm", msgs.LaserScan)
    wrists = sim.collect("Wrist/State", msgs.ActuatorState)
    poses = sim.collect("Localization/Pose", msgs.PoseEstimate)
    b, h = 3.3, 8.0

    def go(now: float) -> Generator[None, float, None]:
        stack.send(44, [], [b, h])
        start = now
        while (now - start < 1.0 or stack.element()[3] > 0) and now - start < 400.0:
            now = yield

    end = stack.run(go)
    codes = [(s.stamp, s.element[2], s.element[3]) for s in stack.status.until(end)]
    changes = [c for i, c in enumerate(codes) if i == 0 or c[1:] != codes[i - 1][1:]]
    print(changes)
    truths = stack.truth.until(end)
    for t in truths[::50]:
        print(f"{t.stamp:.1f} {t.x:.2f} {t.y:.2f} {t.theta:.2f}")
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
                rect.contains(x, y)
                and not inside_polygon(x, y, RECEPTION)
                and math.hypot(x - 4.5, y - 7.5) > 0.3
            )
    covered = grid.seen_fraction(free)
    final = poses.until(end)[-1]
    print(covered, final.pose[:4], truths[-1])
    assert covered >= 0.9
    assert math.hypot(final.pose[0] - home[0], final.pose[1] - home[1]) < 0.3
    assert [c[1] for c in changes][-3:] == [-1, -2, 1]
