"""The simulated body's compiled geometry against plain numpy and the world's ray caster, on random worlds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.hardware.base import body_kernels
from pluto.sim.raycast import RayCaster

NOTHING = body_kernels.NOTHING


def _world(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    segments = rng.uniform(-5.0, 5.0, size=(30, 4))
    segments[:3, 2:] = segments[:3, :2]  # walls of no length (points) too
    circles = np.column_stack((rng.uniform(-5.0, 5.0, size=(6, 2)), rng.uniform(0.1, 0.6, size=6)))
    movers = np.column_stack((rng.uniform(-5.0, 5.0, size=(3, 2)), np.full(3, 0.25)))
    return segments, circles, movers


def _closest(point: np.ndarray, segments: np.ndarray) -> np.ndarray:
    a, d = segments[:, :2], segments[:, 2:] - segments[:, :2]
    length2 = (d * d).sum(axis=1)
    t = np.clip(((point - a) * d).sum(axis=1) / np.where(length2 > 0, length2, 1.0), 0.0, 1.0)
    return a + t[:, None] * d


@pytest.mark.parametrize("seed", range(5))
def test_clearance_and_bumpers_are_those_of_the_closest_points(seed: int) -> None:
    rng = np.random.default_rng(seed)
    segments, circles, movers = _world(rng)
    for _ in range(200):
        p = rng.uniform(-6.0, 6.0, size=2)
        theta, reach = rng.uniform(-math.pi, math.pi), rng.uniform(0.1, 1.5)
        cp = _closest(p, segments)
        centres = np.vstack((circles, movers))
        delta = centres[:, :2] - p
        dist = np.hypot(delta[:, 0], delta[:, 1])
        expected = min(np.linalg.norm(cp - p, axis=1).min(), (dist - centres[:, 2]).min())
        assert body_kernels.clearance(p[0], p[1], segments, circles, movers) == pytest.approx(expected, abs=1e-12)

        touching = [cp[np.linalg.norm(cp - p, axis=1) <= reach]]
        near = dist - centres[:, 2] <= reach
        touching.append(centres[near, :2] - delta[near] / dist[near, None] * centres[near, 2:3])
        ahead = np.concatenate([(pts - p) @ np.array([math.cos(theta), math.sin(theta)]) for pts in touching])
        expected_sides = (bool((ahead >= 0).any()), bool((ahead < 0).any()))
        assert body_kernels.contacts(p[0], p[1], theta, reach, segments, circles, movers) == expected_sides


@pytest.mark.parametrize("seed", range(5))
def test_rays_land_where_the_world_ray_caster_lands_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    segments, circles, movers = _world(rng)
    caster = RayCaster(segments, circles)
    bearings = rng.uniform(-math.pi, math.pi, size=48)
    hits = 0
    for _ in range(100):
        x, y = rng.uniform(-6.0, 6.0, size=2)
        theta, reach = rng.uniform(-math.pi, math.pi), rng.uniform(1.0, 9.0)
        expected = caster.cast(np.array([x, y]), theta + bearings, reach, extra_circles=movers)
        got = body_kernels.cast(x, y, theta, bearings, reach, segments, circles, movers)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
        hits += int((got < reach).sum())
    assert hits > 1000  # most rays meet something: the comparison is not one of empty readings


def test_a_ray_through_the_corner_of_two_walls_stops_there_and_nothing_moving_is_an_empty_array() -> None:
    # two walls meeting at (2, 0); the ray along the x axis passes exactly through their shared end
    corner = np.array([[2.0, -1.0, 2.0, 0.0], [2.0, 0.0, 2.0, 1.0]])
    assert body_kernels.cast(0.0, 0.0, 0.0, np.array([0.0]), 8.0, corner, NOTHING, NOTHING)[0] == pytest.approx(2.0)
    # nothing at all: every ray reads its reach, the clearance is infinite, no bumper
    empty = np.zeros((0, 4))
    assert list(body_kernels.cast(0.0, 0.0, 0.0, np.array([0.0, 1.0]), 8.0, empty, NOTHING, NOTHING)) == [8.0, 8.0]
    assert body_kernels.clearance(0.0, 0.0, empty, NOTHING, NOTHING) == math.inf
    assert body_kernels.contacts(0.0, 0.0, 0.0, 0.3, empty, NOTHING, NOTHING) == (False, False)
    # a ray that starts inside a circle reads 0
    inside = np.array([[0.1, 0.0, 0.5]])
    assert body_kernels.cast(0.0, 0.0, 0.0, np.array([2.0]), 8.0, empty, inside, NOTHING)[0] == 0.0
