"""Finding people in a scan: discs and pairs of legs are people; walls, flat pieces, corners and big round things
are not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.movement.follow.detect import DetectParams, blobs, find_people, scan_points, segment
from tests.movement.follow.scans import ANGLES, MAX_RANGE, cast, noisy

PARAMS = DetectParams()


def people_in(ranges: np.ndarray) -> list[tuple[float, float, bool]]:
    points, _ = scan_points(ranges, ANGLES, 0.0, 0.0, MAX_RANGE)
    return [(c.x, c.y, c.legs) for c in find_people(points, (0.0, 0.0), PARAMS)]


@pytest.mark.parametrize(("x", "y"), [(1.0, 0.0), (2.0, 0.8), (3.5, -1.0), (0.8, 0.5)])
def test_a_disc_is_a_person_at_its_centre(x: float, y: float) -> None:
    rng = np.random.default_rng(1)
    found = people_in(noisy(cast((0.0, 0.0, 0.0), discs=[(x, y, 0.25)]), rng))
    assert len(found) == 1
    fx, fy, legs = found[0]
    assert not legs
    assert math.dist((fx, fy), (x, y)) < 0.04  # the centre, not the near surface 0.25 m in front


def test_two_legs_are_one_person_between_them() -> None:
    rng = np.random.default_rng(2)
    ranges = noisy(cast((0.0, 0.0, 0.0), discs=[(2.0, 0.15, 0.06), (2.1, -0.12, 0.06)]), rng, 0.005)
    found = people_in(ranges)
    assert len(found) == 1
    fx, fy, legs = found[0]
    assert legs
    assert math.dist((fx, fy), (2.05, 0.015)) < 0.05


def test_legs_too_far_apart_are_nobody() -> None:
    rng = np.random.default_rng(3)
    ranges = noisy(cast((0.0, 0.0, 0.0), discs=[(2.0, 0.5, 0.06), (2.0, -0.5, 0.06)]), rng, 0.005)
    assert people_in(ranges) == []


def test_walls_flat_pieces_and_corners_are_nobody() -> None:
    rng = np.random.default_rng(4)
    room = [(3.0, -5.0, 3.0, 5.0), (-1.0, 2.0, 3.0, 2.0)]  # a wall ahead, one on the left: a concave corner
    piece = [(1.5, -1.2, 1.5, -0.8)]  # a flat board 0.4 m wide, person-wide
    ranges = noisy(cast((0.0, 0.0, 0.0), walls=room + piece), rng)
    assert people_in(ranges) == []


def test_a_round_thing_wider_than_a_person_is_nobody() -> None:
    ranges = cast((0.0, 0.0, 0.0), discs=[(3.0, 0.0, 0.6)])
    assert people_in(ranges) == []


def test_a_person_in_front_of_a_wall_is_found() -> None:
    rng = np.random.default_rng(5)
    ranges = noisy(cast((0.0, 0.0, 0.0), discs=[(2.0, 0.3, 0.25)], walls=[(3.0, -5.0, 3.0, 5.0)]), rng)
    found = people_in(ranges)
    assert len(found) == 1 and math.dist(found[0][:2], (2.0, 0.3)) < 0.04


def test_dropouts_inside_a_person_do_not_split_them() -> None:
    ranges = cast((0.0, 0.0, 0.0), discs=[(1.5, 0.0, 0.25)])
    hit = np.flatnonzero(ranges < MAX_RANGE)
    ranges[hit[len(hit) // 2]] = MAX_RANGE  # no echo for one beam in the middle
    ranges[hit[len(hit) // 3]] = -1.0  # and an error on another
    assert len(people_in(ranges)) == 1


def test_scan_points_drop_errors_and_missing_echoes_and_turn_with_the_pan() -> None:
    ranges = np.array([1.0, -1.0, MAX_RANGE, 2.0, math.nan])
    angles = np.array([0.0, 0.1, 0.2, math.pi / 2, 0.3])
    points, kept = scan_points(ranges, angles, math.pi / 2, 0.25, MAX_RANGE)
    assert kept.tolist() == [1.0, 2.0]
    assert points == pytest.approx(np.array([[0.25, 1.0], [-1.75, 0.0]]))
    with pytest.raises(ValueError, match="differ"):
        scan_points(np.ones(3), np.ones(4), 0.0, 0.0, MAX_RANGE)


def test_segment_cuts_at_jumps() -> None:
    points = np.array([[1.0, 0.0], [1.0, 0.05], [1.0, 0.1], [1.5, 0.1], [1.5, 0.15]])
    assert segment(points, 0.15) == [(0, 2), (3, 4)]
    assert segment(np.zeros((0, 2)), 0.15) == []
    blob = blobs(np.array([[1.0, -0.1], [0.95, 0.0], [1.0, 0.1]]), (0.0, 0.0), PARAMS)[0]
    assert blob.bulge > 0  # stands out towards the scanner
