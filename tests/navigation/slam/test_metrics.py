"""The relative pose error on trajectories whose errors can be worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.slam.metrics import pose_pairs, relative_motion, relative_pose_error


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


def test_a_heading_error_turns_the_later_motion() -> None:
    # the estimate turns by 0.1 rad at pose 1, then drives 1 m on: ε = δ·δ*⁻¹
    ref = straight(3)
    est = np.array([(0.0, 0.0, 0.0), (1.0, 0.0, 0.1), (1.0 + math.cos(0.1), math.sin(0.1), 0.1)])
    error = relative_pose_error(est, ref)
    # pair (0, 1): δ = (1, 0, 0.1), δ* = (1, 0, 0): t(ε) = (1, 0) - R(0.1)·(1, 0), |t| = 2·sin(0.05)
    assert error.translation[0] == pytest.approx(2.0 * math.sin(0.05))
    assert error.rotation[0] == pytest.approx(0.1)
    # pair (1, 2): the same motion as the reference's, in its own frame
    assert error.translation[1] == pytest.approx(0.0, abs=1e-12) and error.rotation[1] == pytest.approx(0.0, abs=1e-12)
    assert error.rotation_mean_deg == pytest.approx(math.degrees(0.05))
    assert error.rotation_std_deg == pytest.approx(math.degrees(0.05))


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
