"""The saved map: a world file the simulator and the pose module read back as it was written, written atomically."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from pluto.navigation.pose.map import WallMap
from pluto.navigation.slam import WallEKF, WallObservation
from pluto.navigation.slam.core import WallSlam
from pluto.navigation.slam.mapfile import MappedWall, line_sigmas, map_walls, save_map, world_xml, write_map
from pluto.sim.raycast import segment_distance
from pluto.sim.world import SCHEMA_PATH, MapError, load_world, parse_world
from tests.navigation.pose.scenes import L_ROOM_WALLS, drive


def _slam_with_walls() -> WallSlam:
    """A map of two walls seen from the origin: x = 3 (ahead) and y = 2 (to the left), one of them retired."""
    slam = WallSlam(WallEKF((0.0, 0.0, 0.0), np.diag([1e-4, 1e-4, 1e-5])))
    cov = np.diag([0.01**2, 0.02**2])
    for gamma, rho, ends in (
        (0.0, 3.0, [[3.0, -1.0], [3.0, 2.0]]),
        (math.pi / 2, 2.0, [[-1.0, 2.0], [2.5, 2.0]]),
        (math.pi / 2, 2.0, [[0.0, 2.0], [1.0, 2.0]]),
    ):
        index = slam.filter.add_wall(WallObservation(gamma, rho, cov))
        alpha, offset = slam.filter.wall(index)
        slam.segments.add(float(alpha), float(offset), ends)
    slam.segments.retire(2)
    return slam


def test_the_active_walls_are_saved_with_their_uncertainty(tmp_path: Path) -> None:
    slam = _slam_with_walls()
    path, walls = save_map(slam, tmp_path / "maps" / "room.xml", name="room", description="a <test> & more")
    assert path == (tmp_path / "maps" / "room.xml").absolute() and walls == 2
    world = load_world(path)
    assert world.name == "room" and world.description == "a <test> & more"
    np.testing.assert_allclose(world.walls, np.array([[3.0, -1.0, 3.0, 2.0], [2.5, 2.0, -1.0, 2.0]]), atol=1e-4)
    # the angle's σ is the filter's; the offset's includes the pose's uncertainty, larger than the scan's alone
    _, cov = slam.filter.marginal([0])
    assert world.wall_sigmas[0, 0] == pytest.approx(math.sqrt(cov[3, 3]), rel=1e-3)
    assert 0.02 < world.wall_sigmas[0, 1] < 0.05
    # the pose module reads it as a map
    wall_map = WallMap.from_file(path)
    assert len(wall_map) == 2
    assert wall_map.covariance[0, 0, 0] == pytest.approx(world.wall_sigmas[0, 0] ** 2, rel=1e-6)


def test_the_sigmas_invert_what_the_pose_module_reads() -> None:
    # WallMap turns (σ_angle, σ_offset) at the midpoint into the covariance of (α, ρ); line_sigmas turns it back
    segment = (4.0, -1.0, 5.0, 3.0)
    wall_map = WallMap.from_segments([segment], sigmas=[[0.02, 0.05]])
    sigma_angle, sigma_offset = line_sigmas(float(wall_map.alpha[0]), segment, wall_map.covariance[0])
    assert sigma_angle == pytest.approx(0.02) and sigma_offset == pytest.approx(0.05)
    # either normal of the line gives the same
    flipped = np.diag([1.0, -1.0]) @ wall_map.covariance[0] @ np.diag([1.0, -1.0])
    assert line_sigmas(float(wall_map.alpha[0]) + math.pi, segment, flipped) == pytest.approx(
        (sigma_angle, sigma_offset)
    )


def test_a_drive_round_trips_through_the_simulator_and_the_pose_module(tmp_path: Path) -> None:
    frames = list(drive(4, seconds=20.0))
    start = frames[0].dead_reckoning.pose
    slam = WallSlam(WallEKF((start[0], start[1], start[3]), np.diag([1e-6, 1e-6, 1e-7])))
    for frame in frames:
        slam.step(frame.dead_reckoning.pose, frame.dead_reckoning.increment, frame.features)
    walls = map_walls(slam)
    path = write_map(tmp_path / "l-room.xml", world_xml(walls, name="l-room"))
    world = load_world(path)
    assert world.walls.shape == (len(walls), 4) and len(walls) >= 5
    np.testing.assert_allclose(world.walls, [w.segment for w in walls], atol=1e-4)
    np.testing.assert_allclose(world.wall_sigmas, [(w.sigma_angle, w.sigma_offset) for w in walls], rtol=1e-3)
    assert np.all(world.wall_sigmas > 0)
    truth = np.array(L_ROOM_WALLS)
    for x1, y1, x2, y2 in world.walls:  # every saved wall lies on a wall of the room
        for end in ((x1, y1), (x2, y2)):
            assert float(segment_distance(end, truth).min()) < 0.1
    assert len(WallMap.from_file(path)) == len(walls)
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(SCHEMA_PATH)).validate(str(path))  # and the format's schema accepts it


def test_a_failed_write_leaves_the_old_map_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "maps" / "map.xml"
    write_map(path, world_xml([MappedWall((0.0, 0.0, 1.0, 0.0))]))
    old = path.read_text()

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="No space"):
        write_map(path, world_xml([MappedWall((0.0, 0.0, 2.0, 0.0)), MappedWall((0.0, 1.0, 2.0, 1.0))]))
    assert path.read_text() == old
    assert sorted(p.name for p in path.parent.iterdir()) == ["map.xml"]  # no temporary file left behind


def test_a_map_that_would_not_load_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "map.xml"
    write_map(path, world_xml([MappedWall((0.0, 0.0, 1.0, 0.0))]))
    old = path.read_text()
    with pytest.raises(MapError):
        write_map(path, old.replace("<walls>", "<walls><bogus/>"))
    with pytest.raises(ValueError, match="zero length"):
        world_xml([MappedWall((1.0, 1.0, 1.00001, 1.0))])
    with pytest.raises(ValueError, match="finite"):
        world_xml([MappedWall((0.0, 0.0, 1.0, 0.0), sigma_angle=math.nan)])
    assert path.read_text() == old


def test_an_empty_map_and_a_start_pose_are_valid() -> None:
    world = parse_world(world_xml([], name="empty", start=(1.0, -2.0, 0.5)))
    assert world.walls.shape == (0, 4) and world.start == (1.0, -2.0, 0.5)
