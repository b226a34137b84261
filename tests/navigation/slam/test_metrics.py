"""The relative pose error on trajectories whose errors can be worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.slam.metrics import (
    ErrorSummary,
    absolute_trajectory_error,
    align_trajectory,
    parse_relations,
    pose_pairs,
    relations_error,
    relative_motion,
    relative_pose_error,
)


def straight(n: int, step: float = 1.0) -> np.ndarray:
    return np.array([(k * step, 0.0, 0.0) for k in range(n)])


def test_the_reference_itself_has_no_error() -> None:
    ref = np.array([(0.0, 0.0, 0.0), (1.0, 0.5, 0.3), (2.0, 2.0, 1.5), (0.0, 3.0, 3.0)])
    error = relative_pose_error(ref, ref)
    assert error.pairs == 3
    assert error.translation_mean == pytest.approx(0.0, abs=1e-12)
    assert error.rotation_mean_deg == pytest.approx(0.0, abs=1e-12)


def test_the_frame_of_the_estimate_does_not_matter() -> None:
    ref = np.array([(0.0, 0.0, 0.0), (1.0, 0.5, 0.3), (2.0, 2.0, 1.5), (0.0, 3.0, 3.0)])
    turn, shift = 0.7, np.array([5.0, -3.0])
    c, s = math.cos(turn), math.sin(turn)
    moved = np.column_stack(
        (c * ref[:, 0] - s * ref[:, 1] + shift[0], s * ref[:, 0] + c * ref[:, 1] + shift[1], ref[:, 2] + turn)
    )
    error = relative_pose_error(moved, ref, distance=1.0)
    assert error.pairs > 0
    assert np.allclose(error.translation, 0.0, atol=1e-12) and np.allclose(error.rotation, 0.0, atol=1e-12)


def test_a_scale_error_of_ten_percent_is_ten_centimetres_a_metre() -> None:
    error = relative_pose_error(straight(5, 1.1), straight(5))
    assert error.pairs == 4
    assert error.translation_mean == pytest.approx(0.1)
    assert error.translation_std == pytest.approx(0.0, abs=1e-12)
    assert error.rotation_mean_deg == pytest.approx(0.0, abs=1e-12)
    # over pairs 2 m apart the error is 0.2 m
    assert relative_pose_error(straight(5, 1.1), straight(5), distance=2.0).translation_mean == pytest.approx(0.2)


def test_a_heading_error_is_a_rotation_error_only_where_the_motions_agree() -> None:
    # the estimate turns by 0.1 rad at pose 1, then drives 1 m on: E = (δ*)⁻¹·δ
    ref = straight(3)
    est = np.array([(0.0, 0.0, 0.0), (1.0, 0.0, 0.1), (1.0 + math.cos(0.1), math.sin(0.1), 0.1)])
    error = relative_pose_error(est, ref)
    # pair (0, 1): δ = (1, 0, 0.1), δ* = (1, 0, 0): the same translation, a turn of 0.1 rad
    assert error.translation[0] == pytest.approx(0.0, abs=1e-12)
    assert error.rotation[0] == pytest.approx(0.1)
    # pair (1, 2): the same motion as the reference's, in its own frame
    assert error.translation[1] == pytest.approx(0.0, abs=1e-12) and error.rotation[1] == pytest.approx(0.0, abs=1e-12)
    assert error.rotation_mean_deg == pytest.approx(math.degrees(0.05))
    assert error.rotation_max_deg == pytest.approx(math.degrees(0.1))


def test_a_heading_error_while_driving_counts_the_sideways_offset_it_causes() -> None:
    # the reference drives 1 m straight on; the estimate turns 0.1 rad as it drives 1 m: it ends beside the
    # reference's end, 2·sin(0.05) m away, and that distance is its translational error (|t - t*|). The other
    # order, δ·(δ*)⁻¹, turns the reference's motion by the heading error first and finds no error at all.
    ref = straight(2)
    est = np.array([(0.0, 0.0, 0.0), (math.cos(0.1), math.sin(0.1), 0.1)])
    error = relative_pose_error(est, ref)
    assert error.translation[0] == pytest.approx(2.0 * math.sin(0.05))
    assert error.rotation[0] == pytest.approx(0.1)
    # the error is the estimate's motion seen from the reference's: the same with the roles swapped
    back = relative_pose_error(ref, est)
    assert back.translation[0] == pytest.approx(error.translation[0])


def test_angles_across_pi_are_not_errors() -> None:
    ref = np.array([(0.0, 0.0, math.pi - 0.01), (-1.0, 0.0, math.pi + 0.01)])
    est = np.array([(0.0, 0.0, math.pi - 0.01), (-1.0, 0.0, -math.pi + 0.01)])  # the same, wrapped
    error = relative_pose_error(est, ref)
    assert error.rotation[0] == pytest.approx(0.0, abs=1e-12) and error.translation[0] == pytest.approx(0.0, abs=1e-12)


def test_relative_motion_in_the_first_frame() -> None:
    first = np.array([(1.0, 1.0, math.pi / 2)])
    second = np.array([(1.0, 3.0, math.pi)])
    assert np.allclose(relative_motion(first, second), [(2.0, 0.0, math.pi / 2)])


def test_pairs_consecutive_and_by_distance() -> None:
    i, j = pose_pairs(straight(4))
    assert i.tolist() == [0, 1, 2] and j.tolist() == [1, 2, 3]
    i, j = pose_pairs(straight(5), distance=2.0)
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(0, 2), (1, 3), (2, 4)]
    # turning on the spot adds no travel: the pair waits for the next metre
    ref = np.array([(0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.5, 0.0, 1.0), (1.0, 0.0, 1.0)])
    i, j = pose_pairs(ref, distance=1.0)
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(0, 3), (1, 3)]
    assert pose_pairs(straight(3), distance=10.0)[0].size == 0


def test_no_pairs_gives_nan() -> None:
    error = relative_pose_error(straight(1), straight(1))
    assert error.pairs == 0 and math.isnan(error.translation_mean) and "nan" in error.describe()


@pytest.mark.parametrize(
    ("estimate", "reference", "distance"),
    [
        (np.zeros((3, 2)), np.zeros((3, 2)), None),
        (np.zeros((3, 3)), np.zeros((4, 3)), None),
        (np.full((3, 3), np.nan), np.zeros((3, 3)), None),
        (np.zeros((3, 3)), np.zeros((3, 3)), 0.0),
        (np.zeros((3, 3)), np.zeros((3, 3)), -1.0),
    ],
)
def test_bad_input_is_refused(estimate: np.ndarray, reference: np.ndarray, distance: float | None) -> None:
    with pytest.raises(ValueError):
        relative_pose_error(estimate, reference, distance)


def moved_by(poses: np.ndarray, x: float, y: float, turn: float) -> np.ndarray:
    """``poses`` under the rigid motion: rotation by ``turn`` about the origin, then the shift (x, y)."""
    c, s = math.cos(turn), math.sin(turn)
    return np.column_stack(
        (c * poses[:, 0] - s * poses[:, 1] + x, s * poses[:, 0] + c * poses[:, 1] + y, poses[:, 2] + turn)
    )


def test_every_summary_gives_the_mean_the_95th_percentile_and_the_maximum() -> None:
    summary = ErrorSummary(np.arange(1.0, 101.0))  # 1 .. 100
    assert summary.count == 100 and summary.mean == pytest.approx(50.5) and summary.max == 100.0
    assert summary.p95 == pytest.approx(95.05)  # linear between the ranks 95 and 96
    assert summary.rmse == pytest.approx(math.sqrt(np.mean(np.arange(1.0, 101.0) ** 2)))
    assert summary.describe(" m", 1) == "50.5 m (95 % 95.0, max 100.0)"
    empty = ErrorSummary(np.zeros(0))
    assert math.isnan(empty.mean) and math.isnan(empty.p95) and math.isnan(empty.max) and math.isnan(empty.rmse)
    # the relative error's figures are these, rotations in degrees
    error = relative_pose_error(straight(5, 1.1), straight(5))
    assert error.translation_p95 == pytest.approx(0.1) and error.translation_max == pytest.approx(0.1)
    assert error.describe() == "0.100 m (95 % 0.100, max 0.100), 0.00° (95 % 0.00, max 0.00)"


def test_a_rigidly_moved_trajectory_has_no_absolute_error() -> None:
    ref = np.array([(0.0, 0.0, 0.0), (1.0, 0.5, 0.3), (2.0, 2.0, 1.5), (0.0, 3.0, 3.0), (-1.0, 1.0, 4.0)])
    est = moved_by(ref, 4.0, -2.0, 2.5)  # another map frame
    error = absolute_trajectory_error(est, ref)
    assert error.poses == 5
    assert np.allclose(error.translation, 0.0, atol=1e-9) and np.allclose(error.rotation, 0.0, atol=1e-9)
    # the alignment is the inverse motion: it takes the estimate back onto the reference
    x, y, turn = align_trajectory(est, ref)
    assert np.allclose(moved_by(est, x, y, turn)[:, :2], ref[:, :2], atol=1e-9)
    assert turn == pytest.approx(-2.5)


def test_the_absolute_error_is_what_no_rigid_motion_removes() -> None:
    # a square 4 m a side, and an estimate whose opposite corners 0 and 2 are 0.1 m out along the diagonal, both
    # away from the centre: no rigid motion moves them back (the centroid and the best turn stay), so the errors
    # are (√0.02, 0, √0.02, 0) m, whatever frame the estimate is in
    ref = np.array([(0.0, 0.0, 0.0), (4.0, 0.0, 0.0), (4.0, 4.0, 0.0), (0.0, 4.0, 0.0)])
    est = ref.copy()
    est[0, :2] -= 0.1
    est[2, :2] += 0.1
    error = absolute_trajectory_error(moved_by(est, 1.0, 2.0, 0.3), ref)
    assert error.translation == pytest.approx([math.sqrt(0.02), 0.0, math.sqrt(0.02), 0.0], abs=1e-9)
    assert error.rmse == pytest.approx(0.1)
    assert error.translation_summary.mean == pytest.approx(math.sqrt(0.02) / 2)
    assert error.translation_summary.max == pytest.approx(math.sqrt(0.02))
    assert "RMSE" in error.describe() and "95 %" in error.describe()
    # a straight line with an offset at the end: the alignment shares it out, the error is under the offset
    line = straight(11, 0.5)
    bent = line.copy()
    bent[-1, 1] += 0.5
    drift = absolute_trajectory_error(bent, line)
    assert 0.0 < drift.translation_summary.max < 0.5


RELATIONS = """\
# t1 t2 x y z roll pitch yaw
10.0 11.0 1.0 0.0 0 0 0 0.0
11.0 12.0 1.0 0.0 0 0 0 0.1

10.0 12.0 2.1 0.1 0 0 0 0.1
11.0 13.5 1.0 0.0 0 0 0 0.0
12.0 11.0 -1.0 0.1 0 0 0 -0.1 extra
12.0 oops 1.0 0.0 0 0 0 0.0
"""


def test_a_relations_file_gives_the_pairs_and_their_motions() -> None:
    relations = parse_relations(RELATIONS.splitlines())
    assert len(relations) == 4
    assert relations.first.tolist() == [10.0, 11.0, 10.0, 11.0] and relations.second.tolist()[-1] == 13.5
    assert np.allclose(relations.motion[2], (2.1, 0.1, 0.1))
    assert len(relations.skipped) == 2
    assert relations.skipped[0].startswith("line 7: 9 values") and relations.skipped[1].startswith("line 8: not a")


def test_the_error_over_relations_names_scans_by_their_stamps() -> None:
    relations = parse_relations(RELATIONS.splitlines())
    stamps = np.array([10.0, 11.0005, 12.0])  # a scan stamped within a millisecond of a relation's stamp is its scan
    est = np.array([(0.0, 0.0, 0.0), (1.1, 0.0, 0.0), (2.1, 0.1, 0.1)])
    error = relations_error(est, stamps, relations)
    # the relation to 13.5 s names no scan
    assert error.pairs == 3 and error.unmatched == 1
    # 10 -> 11: 1.1 m against 1 m; 11 -> 12: (1.0, 0.1, 0.1) against (1, 0, 0.1); 10 -> 12: exact
    assert error.translation == pytest.approx([0.1, 0.1, 0.0], abs=1e-9)
    assert error.rotation == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    # the file's order of the scans does not matter: stamps are looked up, not assumed sorted
    shuffled = [2, 0, 1]
    again = relations_error(est[shuffled], stamps[shuffled], relations)
    assert again.translation == pytest.approx(error.translation, abs=1e-9)
    none = relations_error(est, stamps + 100.0, relations)
    assert none.pairs == 0 and none.unmatched == 4 and math.isnan(none.translation_mean)
    with pytest.raises(ValueError, match="one per pose"):
        relations_error(est, stamps[:2], relations)
