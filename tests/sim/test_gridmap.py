"""Occupancy grids of ROS's map_server: walls drawn into a grid and found again within a cell, the YAML and PGM files
both ways, grids as worlds for the simulator and the pose module, and bad files refused with status 2."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pluto.cli.main import main
from pluto.navigation.pose.map import WallMap
from pluto.sim.gridmap import (
    FREE,
    OCCUPIED,
    UNKNOWN,
    GridError,
    OccupancyGrid,
    grid_of_walls,
    read_grid,
    walls_of_grid,
    write_grid,
)
from pluto.sim.world import World, load_world

# A room with a door, a free-standing wall, a diagonal wall, a short wall, and a wall 1° off the axes.
WALLS = np.array(
    [
        [0.0, 0.0, 8.0, 0.0],
        [8.0, 0.0, 8.0, 6.0],
        [8.0, 6.0, 4.9, 6.0],
        [4.0, 6.0, 0.0, 6.0],  # the door: 4.0 to 4.9
        [0.0, 6.0, 0.0, 0.0],
        [2.0, 2.0, 5.0, 4.5],  # diagonal
        [6.0, 1.0, 6.0, 2.2],  # short
        [1.0, 4.9, 3.5, 4.9 + 2.5 * math.tan(math.radians(1.0))],
    ]
)
RESOLUTION = 0.05


def _ends_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The larger of the two ends' distances between walls ``a`` and ``b``, whichever way round."""
    same = max(math.dist(a[:2], b[:2]), math.dist(a[2:], b[2:]))
    swapped = max(math.dist(a[:2], b[2:]), math.dist(a[2:], b[:2]))
    return min(same, swapped)


def _matched_within(original: np.ndarray, found: np.ndarray, tolerance: float) -> list[float]:
    """For each original wall, the found wall nearest it by its ends; asserts it is within ``tolerance``."""
    worst = []
    for wall in original:
        distance = min(_ends_distance(wall, f) for f in found)
        assert distance <= tolerance, (wall, distance)
        worst.append(distance)
    return worst


def test_walls_drawn_into_a_grid_come_back_within_a_cell(tmp_path: Path) -> None:
    grid = grid_of_walls(WALLS, resolution=RESOLUTION)
    yaml_path, image = write_grid(grid, tmp_path / "room.yaml")
    assert image == tmp_path / "room.pgm" and image.read_bytes().startswith(b"P5\n")
    read = read_grid(yaml_path)
    assert np.array_equal(read.cells, grid.cells) and read.resolution == RESOLUTION
    assert read.origin == pytest.approx(grid.origin)
    found = walls_of_grid(read)
    assert found.shape[0] == WALLS.shape[0]  # one wall each, none made up
    _matched_within(WALLS, found, RESOLUTION)


def test_the_yaml_has_every_key_of_map_server(tmp_path: Path) -> None:
    yaml_path, _ = write_grid(grid_of_walls(WALLS[:2], resolution=0.1, margin=0.5), tmp_path / "m.yaml")
    text = yaml_path.read_text()
    for key in ("image: m.pgm", "resolution: 0.1", "origin: [", "negate: 0", "occupied_thresh: 0.65", "free_thresh:"):
        assert key in text


def test_a_grid_is_a_world_for_the_simulator_and_a_map_for_the_pose_module(tmp_path: Path) -> None:
    write_grid(grid_of_walls(WALLS, resolution=RESOLUTION), tmp_path / "room.yaml")
    world = load_world(tmp_path / "room.yaml")
    assert isinstance(world, World) and world.name == "room" and world.source == tmp_path / "room.yaml"
    _matched_within(WALLS, world.walls, RESOLUTION)
    assert np.all(world.wall_sigmas[:, 1] == pytest.approx(RESOLUTION / 2))
    wall_map = WallMap.from_file(tmp_path / "room.yaml")
    assert len(wall_map) == WALLS.shape[0]


def test_thick_walls_are_one_wall_each() -> None:
    thick = [w + np.array([0.0, d, 0.0, d]) for d in (-0.05, 0.0, 0.05) for w in WALLS[:1]]
    thick += [w + np.array([d, 0.0, d, 0.0]) for d in (-0.05, 0.0, 0.05) for w in WALLS[1:2]]
    found = walls_of_grid(grid_of_walls(np.array(thick), resolution=RESOLUTION))
    assert found.shape[0] == 2
    _matched_within(WALLS[:2], found, 2 * RESOLUTION)  # a thick wall's ends are as uncertain as it is thick


def test_pixels_are_read_with_negate_and_the_thresholds(tmp_path: Path) -> None:
    # plain PGM, maxval 100: 0 black, 100 white, 60 grey
    (tmp_path / "g.pgm").write_text("P2\n# a comment\n3 2\n100\n0 100 60\n100 0 100\n")
    base = "image: g.pgm\nresolution: 0.5\norigin: [1.0, 2.0, 0.0]\noccupied_thresh: 0.65\nfree_thresh: 0.2\n"
    (tmp_path / "g.yaml").write_text(base + "negate: 0\n")
    grid = read_grid(tmp_path / "g.yaml")
    # row 0 is the image's last row (the bottom)
    assert grid.cells.tolist() == [[FREE, OCCUPIED, FREE], [OCCUPIED, FREE, UNKNOWN]]
    (tmp_path / "g.yaml").write_text(base + "negate: 1\n")
    assert read_grid(tmp_path / "g.yaml").cells.tolist() == [[OCCUPIED, FREE, OCCUPIED], [FREE, OCCUPIED, UNKNOWN]]
    assert grid.to_world([(0.0, 0.0), (3.0, 2.0)]).tolist() == [[1.0, 2.0], [2.5, 3.0]]


def test_a_rotated_origin_places_the_cells() -> None:
    grid = OccupancyGrid(np.zeros((2, 2), dtype=np.int8), 1.0, (1.0, 0.0, math.pi / 2))
    assert grid.to_world([(1.0, 0.0)]) == pytest.approx(np.array([[1.0, 1.0]]))
    assert grid.to_cells(grid.to_world([(0.3, 1.7)])) == pytest.approx(np.array([[0.3, 1.7]]))


def _write_yaml(folder: Path, text: str) -> Path:
    (folder / "g.pgm").write_bytes(b"P5\n2 2\n255\n\x00\xfe\xcd\x00")
    path = folder / "g.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("image: g.pgm\nresolution: 0.05\n", "missing keys origin, negate, occupied_thresh, free_thresh"),
        (
            "image: g.pgm\nresolution: -1\norigin: [0, 0, 0]\nnegate: 0\noccupied_thresh: 0.65\nfree_thresh: 0.2\n",
            "resolution must be > 0",
        ),
        (
            "image: g.pgm\nresolution: 0.05\norigin: 3\nnegate: 0\noccupied_thresh: 0.65\nfree_thresh: 0.2\n",
            "origin must be [x, y, yaw]",
        ),
        (
            "image: g.pgm\nresolution: 0.05\norigin: [0, 0]\nnegate: 0\noccupied_thresh: 0.1\nfree_thresh: 0.2\n",
            "thresholds",
        ),
        ("- just\n- a list\n", "not a mapping"),
        ("image: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_yaml_is_refused_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(GridError, match=reason.replace("[", r"\[")):
        read_grid(_write_yaml(tmp_path, text))


GOOD_YAML = "image: g.pgm\nresolution: 0.05\norigin: [0, 0, 0]\nnegate: 0\noccupied_thresh: 0.65\nfree_thresh: 0.2\n"


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        (b"P5\n2 2\n255\n\x00", "cut short"),
        (b"\x89PNG\r\n\x1a\n....", "not a PGM"),
        (b"P5\n2", "cut short before its height"),
        (b"P5\nx 2\n255\n", "width is not a number"),
        (b"P5\n0 2\n255\n", "not valid"),
        (b"P2\n2 2\n10\n1 2 3 99\n", "above its maxval"),
    ],
)
def test_a_corrupt_image_is_refused_with_the_reason(tmp_path: Path, image: bytes, reason: str) -> None:
    path = _write_yaml(tmp_path, GOOD_YAML)
    (tmp_path / "g.pgm").write_bytes(image)
    with pytest.raises(GridError, match=reason):
        read_grid(path)


def test_bad_grid_files_exit_with_status_2_and_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_yaml(tmp_path, GOOD_YAML)
    (tmp_path / "g.pgm").write_bytes(b"P5\n40 40\n255\n\x00\x00")
    assert main(["slam", "export-grid", str(path), str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "g.pgm" in err[0] and "cut short" in err[0], err
    path.write_text("image: g.pgm\n")
    assert main(["slam", "export-grid", str(path), str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing keys resolution, origin" in err[0], err


def test_export_grid_writes_a_map_as_a_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slam", "export-grid", "clutter", str(tmp_path / "clutter.yaml"), "--resolution", "0.1"]) == 0
    assert "occupancy grid saved to" in capsys.readouterr().out
    grid = read_grid(tmp_path / "clutter.yaml")
    assert grid.resolution == 0.1 and np.count_nonzero(grid.cells == OCCUPIED) > 100
    walls = load_world("clutter").walls  # the room's walls are found again, within a cell
    _matched_within(walls, walls_of_grid(grid), 0.1)
    assert main(["slam", "export-grid", "clutter", str(tmp_path / "x.yaml"), "--resolution", "0"]) == 1


def test_the_cells_a_beam_crossed_are_free_up_to_what_it_hit() -> None:
    wall = np.array([[4.0, 0.0, 4.0, 2.0]])
    grid = grid_of_walls(wall, resolution=0.1, margin=0.5, rays=(np.array([[1.0, 1.0]]), np.array([[4.0, 1.0]])))
    row = grid.cells[math.floor(grid.to_cells([(0.0, 1.05)])[0, 1])]
    column = [math.floor(grid.to_cells([(x, 1.05)])[0, 0]) for x in (0.95, 1.05, 3.85, 3.95, 4.05, 4.25)]
    assert [int(row[c]) for c in column] == [UNKNOWN, FREE, FREE, UNKNOWN, OCCUPIED, UNKNOWN]
    assert np.count_nonzero(grid.cells == FREE) == 29  # 1.0 to 3.9 m: up to a cell before the hit
