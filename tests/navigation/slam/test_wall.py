"""Walls as segments on the filter's lines: projection, growing ends, realignment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam.wall import WallSegments, feature_segment, project_onto_line


def _on_line(points: np.ndarray, alpha: float, rho: float) -> float:
    p = np.asarray(points).reshape(-1, 2)
    return float(np.abs(p @ np.array([math.cos(alpha), math.sin(alpha)]) - rho).max())


def test_project_onto_line() -> None:
    feet = project_onto_line([[1.0, 5.0], [-2.0, 0.0]], math.pi / 2, 3.0)
    np.testing.assert_allclose(feet, [[1.0, 3.0], [-2.0, 3.0]], atol=1e-12)
    assert _on_line(project_onto_line([[4.0, -1.0]], 0.7, 2.0), 0.7, 2.0) < 1e-12


def test_feature_segment_in_the_map_frame() -> None:
    feature = LineFeature(0.0, 2.0, 1e-4, 0.0, 1e-4, (2.0, -1.0), (2.0, 1.0), 30, 0, 29)
    ends = feature_segment((1.0, 1.0, math.pi / 2), feature)
    np.testing.assert_allclose(ends, [[2.0, 3.0], [0.0, 3.0]], atol=1e-12)


def test_add_puts_the_ends_on_the_line_in_order() -> None:
    walls = WallSegments()
    index = walls.add(math.pi / 2, 3.0, [[4.0, 3.1], [1.0, 2.9]])
    assert index == 0 and len(walls) == 1
    # along d = (-sin α, cos α) = (-1, 0): the end at x = 4 comes first
    np.testing.assert_allclose(walls.segments[0], [4.0, 3.0, 1.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(walls.extent(0), (-4.0, -1.0), atol=1e-12)


def test_extend_only_grows() -> None:
    walls = WallSegments()
    walls.add(0.0, 2.0, [[2.0, 0.0], [2.0, 1.0]])
    assert not walls.extend(0, [[2.05, 0.2], [1.95, 0.8]])  # inside: nothing moves
    np.testing.assert_allclose(walls.segments[0], [2.0, 0.0, 2.0, 1.0], atol=1e-12)
    assert walls.extend(0, [[2.1, 0.5], [1.9, 3.0]])  # seen farther along one way
    np.testing.assert_allclose(walls.segments[0], [2.0, 0.0, 2.0, 3.0], atol=1e-12)
    assert walls.extend(0, [[2.0, -1.5], [2.0, -1.0]])  # and the other, past a gap
    np.testing.assert_allclose(walls.segments[0], [2.0, -1.5, 2.0, 3.0], atol=1e-12)


def test_realign_keeps_the_wall_straight_on_its_corrected_line() -> None:
    walls = WallSegments()
    walls.add(0.0, 2.0, [[2.0, -1.0], [2.0, 3.0]])
    walls.add(math.pi / 2, 5.0, [[0.0, 5.0], [1.0, 5.0]])
    walls.realign([(0, (0.02, 2.1))])
    seg = walls.segments
    assert _on_line(seg[0], 0.02, 2.1) < 1e-12
    np.testing.assert_allclose(walls.lines[0], [0.02, 2.1])
    # the ends moved across the line only: each is the foot of the old one
    np.testing.assert_allclose(seg[0].reshape(2, 2), project_onto_line([[2.0, -1.0], [2.0, 3.0]], 0.02, 2.1))
    np.testing.assert_allclose(seg[1], [1.0, 5.0, 0.0, 5.0])  # not named: untouched
    # a pure offset keeps the length
    walls.realign([(1, (math.pi / 2, 5.3))])
    np.testing.assert_allclose(walls.segments[1], [1.0, 5.3, 0.0, 5.3], atol=1e-12)


def test_to_wall_map_for_the_pose_module() -> None:
    walls = WallSegments()
    walls.add(0.0, 2.0, [[2.0, -1.0], [2.0, 3.0]])
    wall_map = walls.to_wall_map()
    assert len(wall_map) == 1
    assert abs(wall_map.rho[0] - 2.0) < 1e-12 and abs(wall_map.alpha[0]) < 1e-12


def test_the_grid_index_finds_the_same_walls_as_measuring_every_wall() -> None:
    rng = np.random.default_rng(4)
    segments = WallSegments(cell=3.0)
    for _ in range(60):
        a = rng.uniform(-30.0, 30.0, 2)
        b = a + rng.uniform(-12.0, 12.0, 2)
        alpha = math.atan2(b[0] - a[0], -(b[1] - a[1]))  # the normal of the segment a-b
        rho = float(a @ np.array([math.cos(alpha), math.sin(alpha)]))
        segments.add(alpha, rho, [a, b])
    # walls that grow, move (a corrected line) and leave the map are found where they are now
    for index in range(0, 60, 7):
        alpha, rho = segments.line(index)
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        segments.extend(index, segments.segment(index) + 9.0 * d)
    segments.realign((i, (segments.line(i)[0] + 0.05, segments.line(i)[1] + 2.0)) for i in range(0, 60, 5))
    for index in range(3, 60, 11):
        segments.retire(index)
    assert segments.active_count == 60 - len(range(3, 60, 11))
    for point in rng.uniform(-40.0, 40.0, (40, 2)):
        for radius in (0.5, 4.0, 12.0, 200.0):
            distance = np.array([_distance(point, segments.segment(i)) for i in range(len(segments))])
            expected = np.flatnonzero((distance <= radius) & segments.active)
            assert segments.near(float(point[0]), float(point[1]), radius).tolist() == expected.tolist()


def _distance(point: np.ndarray, ends: np.ndarray) -> float:
    a, b = ends
    u = float(np.clip((point - a) @ (b - a) / max(float((b - a) @ (b - a)), 1e-12), 0.0, 1.0))
    return float(np.hypot(*(point - a - u * (b - a))))


def test_a_wall_keeps_the_side_it_was_seen_from_when_its_normal_turns() -> None:
    segments = WallSegments()
    segments.add(0.0, 2.0, [(2.0, -1.0), (2.0, 1.0)], viewer=(0.0, 0.0))  # seen from x < 2: facing -x
    segments.add(0.0, 5.0, [(5.0, -1.0), (5.0, 1.0)])  # side unknown
    np.testing.assert_allclose(segments.facing([0, 1]), [[-1.0, 0.0], [0.0, 0.0]])
    segments.realign([(0, (math.pi, -2.0))])  # the same line with the opposite normal
    np.testing.assert_allclose(segments.facing([0]), [[-1.0, 0.0]], atol=1e-12)


def test_a_door_between_two_seen_pieces_of_a_wall_stays_open() -> None:
    segments = WallSegments(opening=0.5)
    index = segments.add(0.0, 2.0, [(2.0, -3.0), (2.0, -1.0)])  # the wall x = 2 from y = -3 to -1
    segments.extend(index, [(2.0, 0.0), (2.0, 3.0)])  # past a door 1 m wide
    segments.extend(index, [(2.0, -1.3), (2.0, -0.8)])  # and 20 cm more of the first piece, behind clutter
    assert segments.extent(index) == pytest.approx((-3.0, 3.0))
    np.testing.assert_allclose(segments.pieces(index), [[2.0, -3.0, 2.0, -0.8], [2.0, 0.0, 2.0, 3.0]], atol=1e-12)
    # seen again from before its first end: the pieces keep their place
    segments.extend(index, [(2.0, -4.0), (2.0, -3.6)])
    np.testing.assert_allclose(segments.pieces(index)[:, [1, 3]], [[-4.0, -3.6], [-3.0, -0.8], [0.0, 3.0]])
    # a gap narrower than the opening closes; the door is seen through, never as a wall, so it stays open
    segments.extend(index, [(2.0, -3.7), (2.0, -2.9)])
    np.testing.assert_allclose(segments.pieces(index)[:, [1, 3]], [[-4.0, -0.8], [0.0, 3.0]])
    # a wall merged into it brings its own pieces
    other = segments.add(0.0, 2.0, [(2.0, 3.0), (2.0, 6.0)], seen=[(2.0, 4.0), (2.0, 6.0)])
    assert segments.absorb(index, other)
    np.testing.assert_allclose(segments.pieces(index)[:, [1, 3]], [[-4.0, -0.8], [0.0, 3.0], [4.0, 6.0]])
