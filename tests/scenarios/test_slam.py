"""The slam module on the simulated robot (basic noise, in lock-step, one process): it maps a room while it sets
the pose, saves the map on request and when its thread stops, and the saved map is the room's walls, in a file the
simulator and the pose module load."""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Iterator
from pathlib import Path

import numpy as np
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.module import PoseModule, PoseModuleParams
from pluto.navigation.slam.mapcheck import wall_match
from pluto.navigation.slam.module import SAVE, SAVING, SlamModule, SlamModuleParams
from pluto.runtime.profiles import load_profile, with_params
from pluto.sim.world import WORLDS_DIR, load_world
from tests.scenarios.stack import INNER_START, DriveCommand, Lockstep, Script, write_inner_room

pytestmark = pytest.mark.scenario

SEED = 7
START = INNER_START
SAVE_AT = 12.0
"""Simulated s at which a client asks for the map to be saved."""
STOP_AT = 32.0
"""Simulated s at which the slam thread is stopped (about one circle)."""


@pytest.fixture
def world(tmp_path: Path) -> Path:
    return write_inner_room(tmp_path)


@pytest.fixture
def sim(bus: Bus, world: Path) -> Iterator[Lockstep]:
    """The sim profile (basic noise, localization starting at the world's start) in lock-step, and the slam
    module in this process (``sim.modules[0]``) with its thread started, the time held at 0."""
    profile = with_params(load_profile("sim"), "localization", start_pose_file=str(world.parent / "start.toml"))
    with Lockstep(bus) as stack:
        stack.start(profile, world=str(world), noise="basic", seed=SEED)
        slam = stack.add(SlamModule(bus, SlamModuleParams(map_file=str(world.parent / "saved" / "map.xml"))))
        slam.start_activity()  # at time 0: it takes part in the lock-step from the first tick
        yield stack


def test_the_saved_map_is_the_rooms_walls(bus: Bus, sim: Lockstep, world: Path) -> None:
    slam = sim.modules[0]
    assert isinstance(slam, SlamModule)
    statuses = sim.collect(names.SLAM_STATUS, msgs.FVectorState)
    posts = sim.collect(names.LOCALIZATION_POST_POSE, msgs.PoseEstimate)
    pose = sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    drive = sim.add(DriveCommand(bus, 0.4, 0.2, until=STOP_AT + 1.0))

    def run(now: float) -> Generator[None, float, None]:
        while now < SAVE_AT:
            now = yield
        request.write(msgs.FVectorState(stamp=now, element=[1, SAVE]))  # a client asks for a save
        while now < STOP_AT:
            now = yield
        slam.stop_activity()  # saves the map, at this simulated time: the same map on every run

    script = sim.add(Script(bus, run=run))
    request = script.publisher(names.SLAM_STATUS, msgs.FVectorState)
    sim.resume()
    script.wait()
    drive.finish()

    # a save on request, then one at the stop; the setter 2 while mapping, 3 while saving, 0 after
    assert slam.saves == 2 and not slam.active
    codes = [int(s.element[1]) for s in statuses.snapshot() if len(s.element) > 1]
    assert codes.count(SAVING) >= 2 and codes[-1] == 0
    flags = [p.cmd_flags for p in posts.snapshot()]
    assert flags.count(2) > 100  # a post per scan (5 Hz)
    ours = posts.snapshot()[flags.index(2) :]  # localization's own "nobody sets the pose" comes first
    assert [p.cmd_flags for p in ours if not p.pose] == [3, 2, 3, 0]
    assert 2 in [p.cmd_flags for p in pose.snapshot()]  # localization showed the slam module as the setter

    # the saved map: every wall seen lies on a wall of the room, and the room's walls are in it
    path = slam.map_path
    saved = load_world(path)
    truth = load_world(world)
    assert saved.walls.shape[0] == slam.saved_walls
    assert np.all(saved.wall_sigmas > 0)  # the walls carry their uncertainty
    found: dict[str, tuple[float, float]] = {}
    covered = {name: np.zeros(200) for name in truth.wall_names if name is not None}  # of each wall's length
    strays = 0
    for segment in saved.walls:
        fits = [(wall_match(segment, wall), name) for wall, name in zip(truth.walls, truth.wall_names, strict=True)]
        (turn, off, overlap), name = min(fits, key=lambda f: f[0][1] + (0 if f[0][2] > 0.5 else 1e3))
        if overlap < 0.5 or off > 0.05 or turn > 2.0:
            strays += 1
            continue
        assert name is not None
        worst = found.get(name, (0.0, 0.0))
        found[name] = (max(worst[0], turn), max(worst[1], off))
        wall = truth.walls[truth.wall_names.index(name)]
        d = (wall[2:] - wall[:2]) / np.linalg.norm(wall[2:] - wall[:2])
        t = np.clip((segment.reshape(2, 2) - wall[:2]) @ d / np.linalg.norm(wall[2:] - wall[:2]), 0.0, 1.0)
        covered[name][int(t.min() * 200) : math.ceil(t.max() * 200)] = 1
    print(
        f"saved {saved.walls.shape[0]} walls to {path}; room walls found (worst angle, offset; length covered): "
        + ", ".join(f"{n} ({t:.2f}°, {o * 100:.1f} cm; {covered[n].mean():.0%})" for n, (t, o) in sorted(found.items()))
        + f"; {strays} not on a room wall"
    )
    assert {"south", "east", "north", "west"} <= set(found)
    assert len(found) >= 6
    assert strays <= 1
    assert all(covered[n].mean() > 0.6 for n in ("south", "east", "north", "west"))
    # and the pose module loads it as its map
    assert len(WallMap.from_file(path)) == saved.walls.shape[0]
    pose_module = PoseModule(bus, PoseModuleParams(map=str(path), autostart=False, use_sim_time=False))
    pose_module.start()
    try:
        assert len(pose_module.tracker.wall_map) == saved.walls.shape[0]
    finally:
        pose_module.stop()


OFFICE_START = (4.0, 10.0, 0.0)
"""In the office's lobby, facing the corridor that runs east past the rooms' doors."""


def test_a_run_down_the_office_corridor_maps_every_wall_it_saw(bus: Bus, tmp_path: Path) -> None:
    """The robot drives from the lobby down the corridor (basic noise): every wall in the saved map lies on a
    wall of the office, within 5 cm and 1°."""
    text = (WORLDS_DIR / "office.xml").read_text()
    text = re.sub(r"<start [^>]*/>", '<start x="{}" y="{}" theta="{}"/>'.format(*OFFICE_START), text)
    world = tmp_path / "office.xml"
    world.write_text(re.sub(r"<movers>.*</movers>", "", text, flags=re.S))
    start = tmp_path / "start.toml"
    start.write_text("x = {}\ny = {}\ntheta = {}\n".format(*OFFICE_START))
    profile = with_params(load_profile("sim"), "localization", start_pose_file=str(start))
    with Lockstep(bus) as sim:
        sim.start(profile, world=str(world), noise="basic", seed=SEED)
        slam = sim.add(SlamModule(bus, SlamModuleParams(map_file=str(tmp_path / "saved" / "map.xml"))))
        slam.start_activity()
        drive = sim.add(DriveCommand(bus, 0.5, 0.0, until=30.0))

        def run(now: float) -> Generator[None, float, None]:
            while now < 30.0:
                now = yield
            slam.stop_activity()

        script = sim.add(Script(bus, run=run))
        sim.resume()
        script.wait()
        drive.finish()
    saved = load_world(slam.map_path)
    truth = load_world(world)
    assert saved.walls.shape[0] >= 10
    worst = []
    for segment in saved.walls:
        # a mapped wall may span several pieces of one wall of the office (the corridor's walls between doors):
        # it is measured against the line of the piece it lies along
        fits = [wall_match(segment, wall) for wall in truth.walls]
        turn, off, _ = min(fits, key=lambda f: f[1] + (0 if f[2] > 0.0 else 1e3))
        worst.append((off, turn))
    offset, angle = max(o for o, _ in worst), max(t for _, t in worst)
    print(f"{len(worst)} walls; worst offset {offset * 100:.1f} cm, angle {angle:.2f}°")
    assert all(off <= 0.05 and turn <= 1.0 for off, turn in worst), worst
