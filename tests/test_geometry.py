"""Planar pose arithmetic: composition, its inverse, angle wrapping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.geometry import angle_difference, compose, relative, wrap_angle

coordinate = st.floats(-100.0, 100.0)
angle = st.floats(-10.0, 10.0)
pose = st.tuples(coordinate, coordinate, angle)


def test_compose() -> None:
    assert compose((0.0, 0.0, 0.0), (1.0, 2.0, 0.3)) == pytest.approx((1.0, 2.0, 0.3))
    assert compose((1.0, 1.0, math.pi / 2), (2.0, 0.0, 0.0)) == pytest.approx((1.0, 3.0, math.pi / 2))
    assert compose((1.0, 1.0, math.pi / 2), (0.0, 1.0, 0.5)) == pytest.approx((0.0, 1.0, math.pi / 2 + 0.5))
    # associative
    a, b, c = (1.0, -2.0, 0.4), (0.5, 3.0, -1.1), (-2.0, 0.7, 2.0)
    assert compose(compose(a, b), c) == pytest.approx(compose(a, compose(b, c)))


@given(pose, pose)
def test_relative_undoes_compose(origin: tuple[float, float, float], p: tuple[float, float, float]) -> None:
    x, y, theta = compose(origin, relative(origin, p))
    assert (x, y) == pytest.approx(p[:2], abs=1e-9)
    assert angle_difference(theta, p[2]) == pytest.approx(0.0, abs=1e-9)
    assert -math.pi <= relative(origin, p)[2] < math.pi


@pytest.mark.parametrize(
    ("angle", "wrapped"),
    [
        (0.0, 0.0),
        (math.pi / 2, math.pi / 2),
        (3 * math.pi / 2, -math.pi / 2),
        (-3 * math.pi / 2, math.pi / 2),
        (math.pi, -math.pi),
        (-math.pi, -math.pi),
        (7.0, 7.0 - 2 * math.pi),
        (-20.0, -20.0 + 6 * math.pi),
    ],
)
def test_wrap_angle(angle: float, wrapped: float) -> None:
    assert wrap_angle(angle) == pytest.approx(wrapped)
    assert -math.pi <= wrap_angle(angle) < math.pi
    upper = wrap_angle(angle, positive_pi=True)  # (-π, π]: π reads +π
    assert upper == pytest.approx(math.pi if wrapped == -math.pi else wrapped)
    assert -math.pi < upper <= math.pi


def test_wrap_angle_wraps_an_array_element_by_element_to_the_bits_of_a_float() -> None:
    angles = np.array([0.0, 0.1, -0.1, math.pi, -math.pi, 7.0, -20.0, 1e-17, 3 * math.pi])
    for positive_pi in (False, True):
        wrapped = wrap_angle(angles, positive_pi=positive_pi)
        assert wrapped.shape == angles.shape
        assert wrapped.tolist() == [wrap_angle(float(a), positive_pi=positive_pi) for a in angles]


def test_the_compiled_twin_wraps_to_the_same_bits() -> None:
    from pluto.navigation.angles import compiled_wrap_angle

    for angle in (0.0, 0.1, -0.1, math.pi, -math.pi, 7.0, -20.0, 1e-17, 3 * math.pi):
        assert compiled_wrap_angle(angle) == wrap_angle(angle)


def test_angle_difference_takes_the_short_way_round() -> None:
    assert angle_difference(math.pi - 0.01, -math.pi + 0.01) == pytest.approx(-0.02)
    assert angle_difference(-math.pi + 0.01, math.pi - 0.01) == pytest.approx(0.02)
