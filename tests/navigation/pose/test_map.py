"""The wall map: lines of the walls, loading with the simulator's loader, uncertainties, and the grid index."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pluto.navigation.pose.map import WallMap
from pluto.sim.raycast import segment_distance
from pluto.sim.world import SCHEMA_PATH, MapError, load_world, parse_world


def test_lines_of_walls_are_in_normal_form() -> None:
    walls = WallMap.from_segments([[0, 2, 10, 2], [3, 0, 3, 5], [5, 5, 0, 0], [1, -1, -1, 1], [0, -4, 6, -4]])
    assert walls.rho == pytest.approx([2.0, 3.0, 0.0, 0.0, 4.0], abs=1e-12)
    assert walls.alpha[[0, 1, 4]] == pytest.approx([math.pi / 2, 0.0, -math.pi / 2])
    # a line through the origin has either normal
    assert np.mod(walls.alpha[[2, 3]], math.pi) == pytest.approx([3 * math.pi / 4, math.pi / 4])
    # every end point lies on its line, and the extent spans the wall along it
    for (x1, y1, x2, y2), a, rho, (t0, t1) in zip(walls.segments, walls.alpha, walls.rho, walls.extent, strict=True):
        for x, y in ((x1, y1), (x2, y2)):
            assert x * math.cos(a) + y * math.sin(a) == pytest.approx(rho, abs=1e-12)
        assert t1 - t0 == pytest.approx(math.hypot(x2 - x1, y2 - y1))
    assert len(walls) == 5 and walls.names == (None,) * 5
    assert np.all(walls.covariance == 0.0)
    with pytest.raises(ValueError):
        walls.segments[0, 0] = 1.0  # read-only


def test_the_office_loads_with_the_simulators_loader() -> None:
    world = load_world("office")
    walls = WallMap.from_file("office")
    assert len(walls) == len(world.walls)
    np.testing.assert_array_equal(walls.segments, world.walls)
    i = walls.names.index("wing-north")
    assert walls.alpha[i] == pytest.approx(math.pi / 2) and walls.rho[i] == pytest.approx(16.0)
    with_obstacles = WallMap.from_world(world, include_obstacles=True)
    assert len(with_obstacles) == len(world.segments())


def test_a_bad_map_file_is_a_map_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.xml"
    path.write_text('<world name="w" version="1"><walls><wall x1="0" y1="0" x2="0" y2="0"/></walls></world>')
    with pytest.raises(MapError, match="zero length"):
        WallMap.from_file(path)


def test_wall_uncertainty_is_read_when_present_and_zero_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "mapped.xml"
    path.write_text(
        '<world name="mapped" version="1"><walls>'
        '<wall x1="2" y1="0" x2="2" y2="4" sigma_angle="0.01" sigma_offset="0.03"/>'
        '<wall x1="0" y1="5" x2="4" y2="5"/>'
        "</walls></world>"
    )
    walls = WallMap.from_file(path)
    np.testing.assert_array_equal(walls.sigmas, [[0.01, 0.03], [0.0, 0.0]])
    # the first wall's midpoint (2, 2) is 2 m along its line from the foot of the normal: ρ moves with α there
    c = walls.covariance[0]
    assert c[0, 0] == pytest.approx(1e-4)
    assert c[0, 1] == pytest.approx(2.0 * 1e-4)
    assert c[1, 1] == pytest.approx(4.0 * 1e-4 + 9e-4)
    assert np.all(walls.covariance[1] == 0.0)
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(SCHEMA_PATH)).validate(str(path))  # the schema knows the attributes too
    with pytest.raises(MapError, match="sigma_offset"):
        parse_world(
            '<world name="w" version="1"><walls><wall x1="0" y1="0" x2="1" y2="0" sigma_offset="-1"/></walls></world>'
        )


def test_uncertainty_of_a_wall_follows_its_midpoint() -> None:
    """Monte Carlo: perturb the wall about its midpoint, refit (α, ρ), compare with the covariance."""
    walls = WallMap.from_segments([[3.0, 1.0, 7.0, 5.0]], sigmas=[[0.02, 0.05]])
    rng = np.random.default_rng(2)
    da = rng.normal(0.0, 0.02, 4000)
    dd = rng.normal(0.0, 0.05, 4000)
    heading = math.pi / 4 + da  # the wall runs at 45° through its midpoint (5, 3)
    mx, my = 5.0 - dd * math.sin(math.pi / 4), 3.0 + dd * math.cos(math.pi / 4)
    ex, ey = 2.0 * np.cos(heading), 2.0 * np.sin(heading)
    many = WallMap.from_segments(np.stack((mx - ex, my - ey, mx + ex, my + ey), axis=1))
    sample = np.cov(np.stack((many.alpha, many.rho)))
    np.testing.assert_allclose(sample, walls.covariance[0], rtol=0.1, atol=1e-6)


@pytest.mark.parametrize("cell", [0.7, 2.0, 5.0])
def test_index_queries_agree_with_brute_force(cell: float) -> None:
    rng = np.random.default_rng(11)
    world = load_world("office")
    walls = WallMap.from_world(world, include_obstacles=True, cell=cell)
    diagonal = WallMap.from_segments(rng.uniform(-20, 20, size=(60, 4)), cell=cell)
    for wm in (walls, diagonal):
        x0, y0, x1, y1 = wm.bounds()
        for _ in range(200):
            x, y = rng.uniform(x0 - 5, x1 + 5), rng.uniform(y0 - 5, y1 + 5)
            radius = float(rng.choice([0.0, 0.5, 3.0, 12.0, 80.0, math.inf]))
            near = segment_distance((x, y), wm.segments) <= radius
            np.testing.assert_array_equal(wm.near(x, y, radius), np.flatnonzero(near))
            # visible: those of them with an end point not behind the laser
            theta = float(rng.uniform(-math.pi, math.pi))
            c, s = math.cos(theta), math.sin(theta)
            seg = wm.segments
            ahead = np.maximum((seg[:, 0] - x) * c + (seg[:, 1] - y) * s, (seg[:, 2] - x) * c + (seg[:, 3] - y) * s)
            expected = np.flatnonzero(near & (ahead > -1e-9))
            np.testing.assert_array_equal(wm.visible((x, y, theta), radius), expected)


def test_visible_walls_are_in_range_and_in_front() -> None:
    walls = WallMap.from_segments([[5, -1, 5, 1], [-5, -1, -5, 1], [0, 3, 0, 4], [40, -1, 40, 1], [-1, -2, 1, -2]])
    assert walls.visible((0.0, 0.0, 0.0), 30.0).tolist() == [0, 2, 4]  # the wall behind and the far one are not
    assert walls.visible((0.0, 0.0, math.pi), 30.0).tolist() == [1, 2, 4]
    assert walls.visible((0.0, 0.0, 0.0), 30.0, fov=2 * math.pi).tolist() == [0, 1, 2, 4]
    assert walls.near(0.0, 0.0, -1.0).tolist() == []


def test_an_empty_map_answers_nothing() -> None:
    walls = WallMap.from_world(parse_world('<world name="e" version="1"><walls/></world>'))
    assert len(walls) == 0 and walls.near(0.0, 0.0, 100.0).tolist() == []
    assert walls.bounds() == (0.0, 0.0, 0.0, 0.0)


def test_bad_segments_are_refused() -> None:
    with pytest.raises(ValueError, match="zero length"):
        WallMap.from_segments([[1, 1, 1, 1]])
    with pytest.raises(ValueError, match="finite"):
        WallMap.from_segments([[0, 0, math.nan, 1]])
    with pytest.raises(ValueError, match="one entry per wall"):
        WallMap.from_segments([[0, 0, 1, 1]], names=("a", "b"))
    with pytest.raises(ValueError, match=">= 0"):
        WallMap.from_segments([[0, 0, 1, 1]], sigmas=[[-0.1, 0.0]])


def test_covariance_at_least_raises_only_the_sigmas_that_are_smaller() -> None:
    """Walls of a plan (sigmas 0) become as uncertain as asked; a wall already less certain keeps its own sigmas;
    the result is the map's covariance formula on the raised sigmas (the offset at the wall's midpoint)."""
    sigmas = [[0.0, 0.0], [0.01, 0.1], [0.001, 0.0]]
    walls = WallMap.from_segments([[0, 2, 10, 2], [3, 0, 3, 5], [5, 5, 9, 1]], sigmas=sigmas)
    floored = walls.covariance_at_least(0.003, 0.03)
    raised = WallMap.from_segments(walls.segments, sigmas=[[0.003, 0.03], [0.01, 0.1], [0.003, 0.03]])
    np.testing.assert_allclose(floored, raised.covariance, atol=1e-15)
    assert walls.covariance_at_least(0.003, 0.03) is floored  # kept
    assert walls.covariance_at_least(0.0, 0.0) is walls.covariance
    with pytest.raises(ValueError):
        floored[0, 0, 0] = 1.0  # read-only
