"""Data association of a scan's lines with mapped walls, and new walls through the tentative list."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam import WallEKF
from pluto.navigation.slam.association import (
    AssociationParams,
    TentativeWalls,
    associate,
    candidate_walls,
    duplicate,
    merge_tolerance,
    same_line_distances,
    walls_near_features,
)
from pluto.navigation.slam.ekf import WallObservation
from pluto.navigation.slam.wall import WallSegments

POSE_COV = np.diag([1e-4, 1e-4, 1e-5])


def _feature(alpha: float, r: float, t0: float, t1: float, var: float = 1e-5) -> LineFeature:
    """A line of the laser frame with its ends at tangential coordinates t0, t1."""
    n = np.array([math.cos(alpha), math.sin(alpha)])
    d = np.array([-math.sin(alpha), math.cos(alpha)])
    start, end = r * n + t0 * d, r * n + t1 * d
    return LineFeature(alpha, r, var, 0.0, var, (float(start[0]), float(start[1])), (float(end[0]), float(end[1])),
                       40, 0, 39)  # fmt: skip


def _mapped(lines: list[tuple[float, float, float, float]]) -> tuple[WallEKF, WallSegments]:
    """A filter at the origin facing +x with walls seen as (γ, ρ) between tangential coordinates t0, t1."""
    slam = WallEKF((0.0, 0.0, 0.0), POSE_COV)
    segments = WallSegments()
    for gamma, rho, t0, t1 in lines:
        f = _feature(gamma, rho, t0, t1)
        index = slam.add_wall(WallObservation.from_feature(f))
        wall = slam.wall(index)
        segments.add(float(wall[0]), float(wall[1]), [f.start, f.end])
    return slam, segments


def test_lines_pair_with_their_walls_one_to_one() -> None:
    # a corridor: walls 2 m left and right, and one ahead at 6 m; seen again from where they were mapped, so only
    # the lines' own noise (σ about 4 mm) separates them
    slam, segments = _mapped([(math.pi / 2, 2.0, -1.0, 4.0), (-math.pi / 2, 2.0, -4.0, 1.0), (0.0, 6.0, -2.0, 2.0)])
    walls = candidate_walls(segments, slam.pose, 30.0).tolist()
    assert walls == [0, 1, 2]
    x, p = slam.marginal(walls)
    features = [
        _feature(0.0, 6.003, -1.5, 1.5),
        _feature(math.pi / 2, 1.998, 0.0, 3.0),
        _feature(-math.pi / 2, 2.002, -3.0, 0.0),
        _feature(math.pi / 2, 1.996, 3.2, 3.9),  # a second piece of the left wall
        _feature(math.pi / 2, 1.999, 9.0, 10.0),  # on the left wall's line but 5 m past its end: another wall
        _feature(0.5, 4.0, -0.5, 0.5),  # nothing mapped there
    ]
    found = associate(features, walls, x, p, segments)
    assert sorted((pair.feature, pair.wall) for pair in found.pairs) == [(0, 2), (1, 0), (2, 1)]
    assert all(pair.nis < AssociationParams().gate for pair in found.pairs)
    assert found.on_walls == {3: 0}


def test_the_gate_uses_the_joint_uncertainty() -> None:
    slam, segments = _mapped([(0.0, 4.0, -1.0, 1.0)])
    x, p = slam.marginal([0])
    far = [_feature(0.0, 4.5, -1.0, 1.0)]
    assert associate(far, [0], x, p, segments).pairs == ()
    # the same line 0.5 m off passes once the pose is that uncertain
    p_loose = p.copy()
    p_loose[:3, :3] += np.diag([0.3, 0.3, 0.0])
    assert [pair.wall for pair in associate(far, [0], x, p_loose, segments).pairs] == [0]


def test_a_new_line_becomes_a_wall_after_repeated_sightings() -> None:
    tentative = TentativeWalls(AssociationParams(confirm=3))
    pose = np.zeros(3)
    line = _feature(0.3, 3.0, -1.0, 1.0)
    assert tentative.observe([line], [0], pose, POSE_COV) == []
    assert len(tentative) == 1
    # seen again a little farther along: the same tentative wall
    assert tentative.observe([_feature(0.3, 3.01, -0.5, 1.6)], [0], pose, POSE_COV) == []
    confirmed = tentative.observe([_feature(0.301, 2.99, -0.8, 1.2)], [0], pose, POSE_COV)
    assert [c.feature for c in confirmed] == [0]
    assert len(tentative) == 0
    d = np.array([-math.sin(0.3), math.cos(0.3)])
    t = confirmed[0].ends @ d
    assert t.min() == pytest.approx(-1.0, abs=0.05) and t.max() == pytest.approx(1.6, abs=0.05)


def test_tentative_walls_are_forgotten_and_short_lines_ignored() -> None:
    tentative = TentativeWalls(AssociationParams(confirm=2, max_missed=1, min_length=0.6))
    pose = np.zeros(3)
    assert tentative.observe([_feature(0.0, 3.0, -0.2, 0.2)], [0], pose, POSE_COV) == []  # 0.4 m: too short
    assert len(tentative) == 0
    tentative.observe([_feature(0.0, 3.0, -1.0, 1.0)], [0], pose, POSE_COV)
    tentative.observe([], [], pose, POSE_COV)
    tentative.observe([], [], pose, POSE_COV)  # missed twice: forgotten
    assert len(tentative) == 0
    assert tentative.observe([_feature(0.0, 3.0, -1.0, 1.0)], [0], pose, POSE_COV) == []  # starts over


def test_two_pieces_of_one_new_line_in_one_scan_count_once() -> None:
    tentative = TentativeWalls(AssociationParams(confirm=2))
    pose = np.zeros(3)
    pieces = [_feature(0.0, 3.0, -2.0, -0.5), _feature(0.0, 3.0, 0.5, 2.0)]  # behind a pillar
    tentative.observe(pieces, [0, 1], pose, POSE_COV)
    assert len(tentative) == 1
    confirmed = tentative.observe(pieces, [0, 1], pose, POSE_COV)
    assert len(confirmed) == 1
    np.testing.assert_allclose(sorted(confirmed[0].ends[:, 1]), [-2.0, 2.0], atol=1e-9)


def test_params_are_checked() -> None:
    with pytest.raises(ValueError):
        AssociationParams(gate=0.0)
    with pytest.raises(ValueError):
        AssociationParams(confirm=0)
    with pytest.raises(ValueError):
        AssociationParams(join_gap=-1.0)


def test_duplicate_walls_are_found_on_one_line_only() -> None:
    # the same wall seen as two pieces 1 m apart, a parallel wall 0.3 m behind, and a piece 6 m farther along
    slam, segments = _mapped([(0.0, 4.0, -3.0, -1.0), (0.0, 4.0, 0.0, 2.0), (0.0, 4.3, 0.0, 2.0), (0.0, 4.0, 8.0, 9.0)])
    x, p = slam.marginal([0, 1])
    assert duplicate(0, 1, x, p, segments) is not None
    x, p = slam.marginal([1, 2])
    assert duplicate(1, 2, x, p, segments) is None
    x, p = slam.marginal([1, 3])
    assert duplicate(1, 3, x, p, segments) is None
    # the batched line test gives the same distances as the test of one pair
    first, second = np.array([0, 1, 1, 2]), np.array([1, 2, 3, 3])
    x, p = slam.marginal([0, 1, 2, 3])
    batched = same_line_distances(x, p, first, second)
    for k, (a, b) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
        xa, pa = slam.marginal([a, b])
        nu = np.array([xa[3] - xa[5], xa[4] - xa[6]])
        s = pa[3:5, 3:5] + pa[5:7, 5:7] - pa[3:5, 5:7] - pa[5:7, 3:5] + 1e-10 * np.eye(2)
        assert batched[k] == pytest.approx(float(nu @ np.linalg.solve(s, nu)), rel=1e-9)
    # after the merge the two are one line in the filter
    slam.merge(0, 1)
    np.testing.assert_allclose(slam.wall(0), slam.wall(1), atol=1e-6)


def test_the_candidates_of_a_scan_are_the_walls_near_its_lines() -> None:
    # walls ahead at 3 m and 6.5 m (x = 3, 6.5), one to the left (y = 4), one 20 m behind (x = -20): the scan sees
    # only the wall at x = 3, from y = -1 to 1
    _, segments = _mapped([(0.0, 3.0, -1.0, 1.0), (0.0, 6.5, -3.0, 3.0), (math.pi / 2, 4.0, -2.0, 2.0),
                           (math.pi, 20.0, -1.0, 1.0)])  # fmt: skip
    pose = (0.0, 0.0, 0.0)
    seen = [_feature(0.0, 3.0, -1.0, 1.0)]
    assert candidate_walls(segments, pose, 30.0).tolist() == [0, 1, 2, 3]  # in range: all of them
    assert walls_near_features(segments, pose, seen, AssociationParams()).tolist() == [0]
    assert walls_near_features(segments, pose, seen, AssociationParams(near_features=3.5)).tolist() == [0, 1, 2]
    assert walls_near_features(segments, pose, seen, AssociationParams(near_features=0.0)).tolist() == [0, 1, 2, 3]
    assert walls_near_features(segments, pose, [], AssociationParams()).tolist() == []
    # a line at the end of a long wall still finds it: the wall at x = 6.5 seen from y = 2.5 to 3
    assert walls_near_features(segments, pose, [_feature(0.0, 6.5, 2.5, 3.0)], AssociationParams()).tolist() == [1]


def test_walls_a_centimetre_apart_are_one_within_the_tolerance_but_not_two_faces() -> None:
    # one wall mapped twice from one pose, 1.5 cm apart: the filter alone holds them apart (their lines' noise is
    # a few mm), the tolerance of a wall's line makes them one; the two faces of a thin wall never are
    slam, segments = _mapped([(0.0, 4.0, -2.0, 2.0), (0.0, 4.015, -1.0, 3.0)])
    x, p = slam.marginal([0, 1])
    exact = AssociationParams(merge_angle_std=0.0, merge_offset_std=0.0)
    assert duplicate(0, 1, x, p, segments, exact) is None
    assert duplicate(0, 1, x, p, segments) is not None
    faces = WallSegments()
    faces.add(0.0, 4.0, [(4.0, -2.0), (4.0, 2.0)], viewer=(0.0, 0.0))
    faces.add(0.0, 4.015, [(4.015, -1.0), (4.015, 3.0)], viewer=(6.0, 0.0))
    assert duplicate(0, 1, x, p, faces) is None


def test_the_tolerance_is_across_the_wall_where_it_is_compared() -> None:
    # at t along the line the offset o = ρ - t·α has the variance σ_o² + ... only σ_o² once α's part is taken out
    t = np.array([0.0, 5.0])
    prm = AssociationParams(merge_angle_std=0.01, merge_offset_std=0.02)
    tol = merge_tolerance(t, prm)
    for k, tk in enumerate(t.tolist()):
        j = np.array([-tk, 1.0])  # ∂o/∂(α, ρ)
        assert float(j @ tol[k] @ j) == pytest.approx(0.02**2)
        assert tol[k, 0, 0] == pytest.approx(0.01**2)
