"""The site: the world as built, which the map only approximates (walls a few cm off, glass panes, surfaces,
unmapped clutter), the same for the same seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.geometry import wrap_angle
from pluto.sim.noise import BASIC, IDEAL, REALISTIC, NoiseProfile
from pluto.sim.raycast import RayCaster, segment_distance
from pluto.sim.site import DOORWAY_CLEARANCE, START_CLEARANCE, build_site
from pluto.sim.world import load_world

OFFICE = load_world("office")


@pytest.mark.parametrize("noise", [IDEAL, BASIC])
def test_a_world_without_world_effects_is_its_own_site(noise: NoiseProfile) -> None:
    site = build_site(OFFICE, noise, seed=3)
    assert site.world is OFFICE and site.clutter == ()
    assert not site.surfaces.glass.any() and site.surfaces.remission.shape == (OFFICE.segments().shape[0],)


def test_walls_as_built_are_a_few_cm_off_the_map_and_still_meet() -> None:
    """One smooth displacement of the building: its corners move by a few cm (2 cm std per axis), walls that meet
    on the map still meet, and a wall turns by a fraction of a degree (the short ones the most)."""
    built = build_site(OFFICE, NoiseProfile(map_offset_std=0.02), seed=1).world
    moved = np.hypot(*(built.walls.reshape(-1, 2) - OFFICE.walls.reshape(-1, 2)).T)
    assert 0.01 < float(np.mean(moved)) < 0.04 and float(np.max(moved)) < 0.1
    ends, built_ends = OFFICE.walls.reshape(-1, 2), built.walls.reshape(-1, 2)
    for i, j in zip(*np.nonzero(np.all(np.abs(ends[:, None] - ends[None]) < 1e-9, axis=2)), strict=True):
        assert np.array_equal(built_ends[i], built_ends[j])  # a shared corner stays shared
    turn = np.arctan2(*(built.walls[:, 2:] - built.walls[:, :2]).T[::-1]) - np.arctan2(
        *(OFFICE.walls[:, 2:] - OFFICE.walls[:, :2]).T[::-1]
    )
    turn = np.abs(wrap_angle(turn))
    assert float(np.mean(turn)) < math.radians(0.3) and float(np.max(turn)) < math.radians(1.0)
    assert [p.name for p in built.polygons] == [p.name for p in OFFICE.polygons]


def test_glass_panes_are_parts_of_walls() -> None:
    """Every wall of 2 m or more gets a pane (here): the wall as built is its solid parts and the pane, along its
    line, end to end; the pane is marked glass for the laser, the rest is not."""
    site = build_site(OFFICE, NoiseProfile(laser_glass=1.0), seed=2)
    walls, glass = site.world.walls, site.surfaces.glass[: site.world.walls.shape[0]]
    long_walls = OFFICE.walls[np.hypot(*(OFFICE.walls[:, 2:] - OFFICE.walls[:, :2]).T) >= 2.0]
    assert glass.sum() == long_walls.shape[0]
    for pane in walls[glass]:
        owner = long_walls[
            np.argmin(
                [segment_distance(pane[:2], w[None])[0] + segment_distance(pane[2:], w[None])[0] for w in long_walls]
            )
        ]
        assert segment_distance(pane[:2], owner[None])[0] < 1e-9 and segment_distance(pane[2:], owner[None])[0] < 1e-9
        share = math.dist(pane[:2], pane[2:]) / math.dist(owner[:2], owner[2:])
        assert 0.3 - 1e-9 <= share <= 0.6 + 1e-9
    total = float(np.hypot(*(walls[:, 2:] - walls[:, :2]).T).sum())
    assert total == pytest.approx(float(np.hypot(*(OFFICE.walls[:, 2:] - OFFICE.walls[:, :2]).T).sum()))
    assert not site.surfaces.glass[walls.shape[0] :].any()  # obstacle edges are never glass


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clutter_is_not_in_the_map_and_keeps_out_of_the_way(seed: int) -> None:
    """Realistic noise puts boxes, chairs and pairs of legs along the office's walls that its map does not have:
    each touches no wall of the map, stands clear of every doorway and corner, of the robot's start and of the
    corridor (where it would block the way), and the laser meets it where the map has nothing."""
    site = build_site(OFFICE, REALISTIC, seed)
    kinds = {c.kind for c in site.clutter}
    assert len(site.clutter) >= 5 and kinds <= {"box", "chair", "legs"}
    assert len(site.world.polygons) + len(site.world.circle_names) > len(OFFICE.polygons) + len(OFFICE.circle_names)
    ends = OFFICE.walls.reshape(-1, 2)
    built = site.caster()
    planned = RayCaster(OFFICE.segments(), OFFICE.circles)
    for item in site.clutter:
        centre = np.array(item.centre)
        assert float(segment_distance(centre, OFFICE.segments()).min()) > item.radius - 0.3  # only its wall's gap
        assert float(np.hypot(*(ends - centre).T).min()) >= DOORWAY_CLEARANCE + item.radius - 1e-9
        assert math.dist(item.centre, OFFICE.start[:2]) >= START_CLEARANCE
        assert not (8.6 < centre[0] < 40.0 and 9.0 < centre[1] < 11.0)  # not in the 2 m corridor
        shape = [p for p in site.world.polygons if p.name == item.name]
        outline = shape[0].edges() if shape else np.zeros((0, 4))
        for corner in outline[:, :2]:  # a box or a chair stands off every wall of the map
            assert float(segment_distance(corner, OFFICE.segments()).min()) > 0.0
        # looked at from 1.5 m away, from some side: there in the site, not on the map
        seen = 0
        for a in np.linspace(0.0, 2.0 * math.pi, 16, endpoint=False):
            origin = centre + 1.5 * np.array([math.cos(a), math.sin(a)])
            toward = np.array([a + math.pi])
            seen += built.cast(origin, toward, 80.0)[0] < 1.5 < planned.cast(origin, toward, 80.0)[0]
        assert seen >= 1, item


def test_the_same_seed_builds_the_same_site() -> None:
    a, b, c = (build_site(OFFICE, REALISTIC, seed) for seed in (4, 4, 5))
    assert np.array_equal(a.world.segments(), b.world.segments()) and a.clutter == b.clutter
    assert np.array_equal(a.surfaces.remission, b.surfaces.remission)
    assert np.array_equal(a.world.circles, b.world.circles)
    assert not np.array_equal(a.world.walls, c.world.walls) and a.clutter != c.clutter
