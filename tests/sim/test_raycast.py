"""Ray casting and distance queries: analytic cases, degenerate geometry, and properties against a brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto.sim import raycast
from pluto.sim.raycast import (
    RayCaster,
    cast_rays,
    circle_hits_segments,
    disc_overlaps_circles,
    segment_distance,
)

BOX = np.array([[0, 0, 10, 0], [10, 0, 10, 10], [10, 10, 0, 10], [0, 10, 0, 0]], dtype=float)
AXES = np.array([0.0, math.pi / 2, math.pi, -math.pi / 2])
DIAGONALS = np.array([math.pi / 4, 3 * math.pi / 4, -3 * math.pi / 4, -math.pi / 4])


def box_distances(x: float, y: float) -> tuple[list[float], list[float]]:
    """Analytic distances from (x, y) in BOX along AXES and DIAGONALS."""
    east, north, west, south = 10 - x, 10 - y, x, y
    axes = [east, north, west, south]
    r2 = math.sqrt(2.0)
    diagonals = [min(east, north) * r2, min(west, north) * r2, min(west, south) * r2, min(east, south) * r2]
    return axes, diagonals


# -- analytic distances --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x, y", [(3.0, 4.0), (5.0, 5.0), (0.5, 9.25), (9.999, 0.001), (7.0, 2.0)])
def test_box_axes_and_diagonals(x: float, y: float) -> None:
    axes, diagonals = box_distances(x, y)
    ranges = cast_rays((x, y), np.concatenate((AXES, DIAGONALS)), BOX, None, 100.0)
    np.testing.assert_allclose(ranges, axes + diagonals, rtol=0, atol=1e-9)


def test_diagonal_through_a_corner_hits_the_corner() -> None:
    # From the centre every diagonal meets two walls exactly at their common end point.
    ranges = cast_rays((5.0, 5.0), DIAGONALS, BOX, None, 100.0)
    np.testing.assert_allclose(ranges, 5 * math.sqrt(2.0), rtol=0, atol=1e-9)


def test_ray_caster_matches_cast_rays_and_reuses_beams() -> None:
    caster = RayCaster(BOX)
    angles = np.linspace(-math.pi, math.pi, 73)
    for origin in [(1.0, 1.0), (2.5, 7.5), (9.0, 5.0)]:
        expected = cast_rays(origin, angles, BOX, None, 100.0)
        np.testing.assert_array_equal(caster.cast(origin, angles, 100.0), expected)
    np.testing.assert_array_equal(caster.segments, BOX)


def test_angles_need_not_be_sorted_or_wrapped() -> None:
    rng = np.random.default_rng(3)
    angles = rng.uniform(-3 * math.pi, 3 * math.pi, 50)
    wrapped = np.mod(angles + math.pi, 2 * math.pi) - math.pi
    a = cast_rays((3.0, 4.0), angles, BOX, None, 100.0)
    b = cast_rays((3.0, 4.0), wrapped, BOX, None, 100.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    order = np.argsort(angles)
    np.testing.assert_array_equal(cast_rays((3.0, 4.0), angles[order], BOX, None, 100.0), a[order])


def test_circle_obstacle_distances() -> None:
    circles = np.array([[5.0, 0.0, 1.0]])
    d, r = 5.0, 1.0
    angles = np.array([0.0, 0.1, -0.15, math.asin(r / d) - 1e-6, 0.25, math.pi])
    ranges = cast_rays((0.0, 0.0), angles, np.zeros((0, 4)), circles, 50.0)
    expected = []
    for a in angles[:4]:
        b = d * math.cos(a)
        p = d * math.sin(a)
        expected.append(b - math.sqrt(r * r - p * p))
    np.testing.assert_allclose(ranges[:4], expected, rtol=0, atol=1e-9)
    assert ranges[4] == 50.0 and ranges[5] == 50.0  # beside and behind


def test_tangent_beam_hits_the_tangent_point() -> None:
    d, r = 5.0, 1.0
    ranges = cast_rays((0.0, 0.0), [math.asin(r / d)], None, [[d, 0.0, r]], 50.0)
    assert ranges[0] == pytest.approx(math.sqrt(d * d - r * r), abs=1e-6)


def test_circle_in_front_of_a_wall_and_extra_circles() -> None:
    caster = RayCaster(BOX, [[7.0, 4.0, 0.5]])
    assert caster.cast((3.0, 4.0), [0.0], 100.0)[0] == pytest.approx(3.5, abs=1e-12)
    # a person at (5, 4) for this cast only; the static circle stays
    assert caster.cast((3.0, 4.0), [0.0], 100.0, extra_circles=[[5.0, 4.0, 0.25]])[0] == pytest.approx(1.75)
    assert caster.cast((3.0, 4.0), [0.0], 100.0)[0] == pytest.approx(3.5, abs=1e-12)
    np.testing.assert_array_equal(caster.circles, [[7.0, 4.0, 0.5]])


def test_nothing_within_range_gives_max_range() -> None:
    ranges = cast_rays((3.0, 4.0), np.concatenate((AXES, DIAGONALS)), BOX, None, 2.5)
    np.testing.assert_array_equal(ranges, 2.5)
    # just short of the east wall (7 m away) and just past it
    assert cast_rays((3.0, 4.0), [0.0], BOX, None, 6.999)[0] == 6.999
    assert cast_rays((3.0, 4.0), [0.0], BOX, None, 7.001)[0] == pytest.approx(7.0, abs=1e-12)


def test_no_segments_at_all() -> None:
    angles = np.linspace(-1, 1, 11)
    for segments in (np.zeros((0, 4)), [], None):
        np.testing.assert_array_equal(cast_rays((0.0, 0.0), angles, segments, None, 8.0), 8.0)
    np.testing.assert_array_equal(RayCaster(np.zeros((0, 4))).cast((1.0, 2.0), angles, 3.0), 3.0)
    assert cast_rays((0.0, 0.0), [], BOX, None, 8.0).shape == (0,)


def test_ray_through_a_gap() -> None:
    # A wall at x = 4 with a 1 m door from y = 4.5 to 5.5, in front of the east wall of the box.
    walls = np.vstack((BOX, [[4, 0, 4, 4.5], [4, 5.5, 4, 10]]))
    origin = (2.0, 5.0)
    inside = math.atan2(0.4, 2.0)  # through the door, near its edge
    through = cast_rays(origin, [0.0, inside, -inside], walls, None, 100.0)
    np.testing.assert_allclose(through, [8.0, 8.0 / math.cos(inside), 8.0 / math.cos(inside)], rtol=0, atol=1e-9)
    # aimed at the door jambs: the jamb end points are hit
    jambs = cast_rays(origin, [math.atan2(0.5, 2.0), math.atan2(-0.5, 2.0)], walls, None, 100.0)
    np.testing.assert_allclose(jambs, math.hypot(2.0, 0.5), atol=1e-9)
    # past the jambs, the door wall
    beyond = cast_rays(origin, [math.atan2(1.0, 2.0)], walls, None, 100.0)
    assert beyond[0] == pytest.approx(math.hypot(2.0, 1.0), abs=1e-9)


def test_parallel_and_collinear_rays() -> None:
    walls = np.array([[2.0, 1.0, 8.0, 1.0], [3.0, 0.0, 6.0, 0.0]])
    # parallel to the first wall, 1 m beside it: passes; collinear with the second: hits its near end
    ranges = cast_rays((0.0, 0.0), [0.0, math.pi], walls, None, 20.0)
    assert ranges[0] == pytest.approx(3.0, abs=1e-12)
    assert ranges[1] == 20.0
    only_parallel = cast_rays((0.0, 0.0), [0.0], walls[:1], None, 20.0)
    assert only_parallel[0] == 20.0


def test_hit_exactly_at_an_end_point() -> None:
    walls = np.array([[5.0, 0.0, 5.0, 3.0], [5.0, -3.0, 5.0, -0.0001]])
    assert cast_rays((0.0, 0.0), [0.0], walls, None, 20.0)[0] == pytest.approx(5.0, abs=1e-12)
    far_end = cast_rays((0.0, 0.0), [math.atan2(3.0, 5.0)], walls, None, 20.0)[0]
    assert far_end == pytest.approx(math.hypot(5.0, 3.0), abs=1e-9)


def test_origin_on_a_segment_or_in_a_circle_gives_zero() -> None:
    angles = np.linspace(-math.pi, math.pi, 17)
    on_wall = cast_rays((4.0, 0.0), angles, BOX, None, 20.0)
    np.testing.assert_allclose(on_wall, 0.0, atol=1e-9)
    at_corner = cast_rays((0.0, 0.0), angles, BOX, None, 20.0)
    np.testing.assert_allclose(at_corner, 0.0, atol=1e-9)
    in_circle = cast_rays((5.0, 5.0), angles, BOX, [[5.2, 5.0, 0.5]], 20.0)
    np.testing.assert_array_equal(in_circle, 0.0)
    assert not np.any(np.signbit(in_circle))


def test_chunked_beams_give_the_same_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    segments = random_segments(rng, 300, 30.0)
    circles = np.column_stack((rng.uniform(0, 30, (20, 2)), rng.uniform(0.1, 0.6, 20)))
    angles = rng.uniform(-math.pi, math.pi, 361)
    whole = RayCaster(segments, circles).cast((15.0, 15.0), angles, 25.0)
    monkeypatch.setattr(raycast, "MAX_PAIRS", 1000)  # about 3 beams per chunk
    chunked = RayCaster(segments, circles).cast((15.0, 15.0), angles, 25.0)
    np.testing.assert_array_equal(chunked, whole)


@pytest.mark.parametrize(
    "angles",
    [
        np.linspace(-math.pi / 2, math.pi / 2, 361),  # a laser scan
        np.linspace(-math.pi / 2, math.pi / 2, 361) + 2.9,  # ... across ±π
        np.linspace(-7.0, -7.0 + math.pi, 181),  # ... far outside [-π, π)
        np.arange(360) * (2 * math.pi / 360),  # all round
        np.linspace(0.3, 0.4, 2),
    ],
    ids=["laser", "across-pi", "unwrapped", "full-circle", "two"],
)
def test_uniform_scans_match_any_order_of_the_same_beams(angles: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    # A uniform scan is located by arithmetic, shuffled angles by binary search: both must agree with the brute force.
    rng = np.random.default_rng(7)
    segments = random_segments(rng, 400, 30.0)
    circles = np.column_stack((rng.uniform(0, 30, (10, 2)), rng.uniform(0.1, 0.6, 10)))
    origin = np.array([15.0, 15.0])
    uniform = RayCaster(segments, circles).cast(origin, angles, 25.0)
    shuffle = rng.permutation(len(angles))
    shuffled = RayCaster(segments, circles).cast(origin, angles[shuffle], 25.0)
    np.testing.assert_array_equal(shuffled, uniform[shuffle])
    np.testing.assert_allclose(uniform, brute_force(origin, angles, segments, circles, 25.0), rtol=0, atol=1e-9)
    monkeypatch.setattr(raycast, "MAX_PAIRS", 2000)  # a few beams per chunk
    np.testing.assert_array_equal(RayCaster(segments, circles).cast(origin, angles, 25.0), uniform)


def test_many_random_walls_against_brute_force() -> None:
    rng = np.random.default_rng(5)
    segments = random_segments(rng, 2000, 100.0)
    circles = np.column_stack((rng.uniform(0, 100, (50, 2)), rng.uniform(0.1, 1.0, 50)))
    caster = RayCaster(segments, circles)
    angles = np.linspace(-math.pi / 2, math.pi / 2, 361)
    for _ in range(5):
        origin = rng.uniform(0, 100, 2)
        heading = rng.uniform(-math.pi, math.pi)
        got = caster.cast(origin, angles + heading, 40.0)
        want = brute_force(origin, angles + heading, segments, circles, 40.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_bad_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError, match="origin"):
        cast_rays((1.0, 2.0, 3.0), [0.0], BOX, None, 5.0)
    with pytest.raises(ValueError, match="segments"):
        cast_rays((1.0, 2.0), [0.0], np.zeros((3, 3)), None, 5.0)
    with pytest.raises(ValueError, match="max_range"):
        cast_rays((1.0, 2.0), [0.0], BOX, None, 0.0)
    with pytest.raises(ValueError, match="angles"):
        cast_rays((1.0, 2.0), [[0.0]], BOX, None, 5.0)
    with pytest.raises(ValueError, match="finite"):
        cast_rays((1.0, math.nan), [0.0], BOX, None, 5.0)
    with pytest.raises(ValueError, match="radii"):
        RayCaster(BOX, [[1.0, 1.0, 0.0]])


# -- distance queries ----------------------------------------------------------------------------------------------


def test_segment_distance() -> None:
    segments = np.array([[0, 0, 10, 0], [0, 0, 0, 10], [3, 4, 3, 4], [5, 5, 6, 6]], dtype=float)
    d = segment_distance((3.0, -2.0), segments)
    np.testing.assert_allclose(d, [2.0, math.hypot(3, 2), 6.0, math.hypot(2, 7)], atol=1e-12)
    assert segment_distance((0.0, 0.0), np.zeros((0, 4))).shape == (0,)


def test_disc_against_segments_and_circles() -> None:
    assert circle_hits_segments((5.0, 0.3), 0.3, BOX)  # touching counts
    assert not circle_hits_segments((5.0, 0.31), 0.3, BOX)
    assert circle_hits_segments((10.2, 5.0), 0.3, BOX)
    assert not circle_hits_segments((5.0, 5.0), 1.0, np.zeros((0, 4)))
    circles = np.array([[2.0, 2.0, 0.5], [8.0, 8.0, 1.0]])
    assert disc_overlaps_circles((2.0, 3.0), 0.5, circles)
    assert not disc_overlaps_circles((2.0, 3.01), 0.5, circles)
    assert disc_overlaps_circles((8.0, 8.0), 0.1, circles)  # inside
    assert not disc_overlaps_circles((8.0, 8.0), 0.1, None)
    with pytest.raises(ValueError):
        circle_hits_segments((0.0, 0.0), -1.0, BOX)


# -- properties ------------------------------------------------------------------------------------------------------


def random_segments(rng: np.random.Generator, n: int, size: float) -> np.ndarray:
    centre = rng.uniform(0, size, (n, 2))
    length = rng.uniform(0.2, size / 10, n)
    heading = rng.uniform(0, math.pi, n)
    half = 0.5 * length[:, None] * np.column_stack((np.cos(heading), np.sin(heading)))
    return np.hstack((centre - half, centre + half))


def brute_force(
    origin: np.ndarray,
    angles: np.ndarray,
    segments: np.ndarray,
    circles: np.ndarray | None,
    max_range: float,
    slack: float = 0.0,
) -> np.ndarray:
    """Every beam against every primitive. ``slack`` (m) > 0 counts near misses as hits, < 0 near hits as misses."""
    o = np.asarray(origin, dtype=float)
    d = np.column_stack((np.cos(angles), np.sin(angles)))
    best = np.full(len(angles), float(max_range))
    for x1, y1, x2, y2 in segments:
        p1 = np.array([x1, y1]) - o
        p2 = np.array([x2, y2]) - o
        e = p2 - p1
        length = math.hypot(*e)
        if slack >= 0 and segment_distance((0.0, 0.0), [[*p1, *p2]])[0] <= slack:
            best[:] = 0.0
            continue
        den = d[:, 0] * e[1] - d[:, 1] * e[0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = (p1[0] * e[1] - p1[1] * e[0]) / den
            u = (p1[0] * d[:, 1] - p1[1] * d[:, 0]) / den
        margin = slack / length if length > 0 else 0.0
        hit = (np.abs(den) > 1e-12) & (t >= -max(slack, 0.0)) & (u >= -margin) & (u <= 1 + margin)
        best = np.where(hit, np.minimum(best, np.maximum(t, 0.0)), best)
        if slack > 0:  # end points within slack of the beam (collinear and grazing beams)
            for p in (p1, p2):
                along = d @ p
                beside = np.abs(d[:, 0] * p[1] - d[:, 1] * p[0])
                best = np.where((along >= 0) & (beside <= slack), np.minimum(best, along), best)
    for cx, cy, r in [] if circles is None else circles:
        c = np.array([cx, cy]) - o
        dist = math.hypot(*c)
        if dist <= r + max(slack, 0.0):
            if slack >= 0:
                best[:] = 0.0
            continue
        along = d @ c
        beside = np.abs(d[:, 0] * c[1] - d[:, 1] * c[0])
        hit = (along > 0) & (beside <= r + slack)
        t = along - np.sqrt(np.maximum(r * r - beside * beside, 0.0))
        best = np.where(hit, np.minimum(best, t), best)
    return np.minimum(best, max_range)


coordinate = st.one_of(
    st.integers(-20, 20).map(float),
    st.floats(-20, 20, allow_nan=False, allow_infinity=False),
)
point = st.tuples(coordinate, coordinate)


@st.composite
def scenes(
    draw: st.DrawFn, coordinate: st.SearchStrategy[float] = coordinate
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(origin, angles, segments, circles) with some beams aimed exactly at end points."""
    segments = np.array(draw(st.lists(st.tuples(coordinate, coordinate, coordinate, coordinate), max_size=12)))
    segments = segments.reshape(-1, 4)
    circles = np.array(
        draw(st.lists(st.tuples(coordinate, coordinate, st.floats(0.05, 3.0)), max_size=3)), dtype=float
    ).reshape(-1, 3)
    origin = np.array(draw(st.tuples(coordinate, coordinate)))
    angles = draw(st.lists(st.floats(-7.0, 7.0), min_size=1, max_size=16))
    if len(segments):
        ends = segments.reshape(-1, 2)[draw(st.lists(st.integers(0, 2 * len(segments) - 1), max_size=6))]
        angles += list(np.arctan2(ends[:, 1] - origin[1], ends[:, 0] - origin[0]))
    return origin, np.array(angles), segments, circles


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_hits_lie_between_strict_and_lenient_brute_force(scene: tuple[np.ndarray, ...]) -> None:
    origin, angles, segments, circles = scene
    max_range = 60.0
    got = cast_rays(origin, angles, segments, circles, max_range)
    lenient = brute_force(origin, angles, segments, circles, max_range, slack=1e-6)
    strict = brute_force(origin, angles, segments, circles, max_range, slack=-1e-6)
    assert np.all(got >= lenient - 1e-6)
    assert np.all(got <= strict + 1e-6)


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_hit_point_lies_on_a_segment_at_the_hit_distance(scene: tuple[np.ndarray, ...]) -> None:
    origin, angles, segments, _ = scene
    max_range = 60.0
    got = cast_rays(origin, angles, segments, None, max_range)
    assert np.all((got >= 0.0) & (got <= max_range))
    for angle, distance in zip(angles, got, strict=True):
        if distance >= max_range:
            continue
        hit = origin + distance * np.array([math.cos(angle), math.sin(angle)])
        assert math.hypot(*(hit - origin)) == pytest.approx(distance, abs=1e-9)
        assert segment_distance(hit, segments).min() <= 1e-6 * max(1.0, distance)


dyadic = st.integers(-1280, 1280).map(lambda i: i / 64.0)  # on a grid where adding an integer is exact


@settings(max_examples=200, deadline=None)
@given(scenes(dyadic), st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_translating_the_world_and_origin_changes_nothing(scene: tuple[np.ndarray, ...], dx: int, dy: int) -> None:
    # With coordinates on a binary grid the translation itself is exact, so the ranges must be identical: the
    # caster depends only on positions relative to the origin, wherever the world is.
    origin, angles, segments, circles = scene
    shift = np.array([dx, dy], dtype=float)
    moved_segments = segments + np.tile(shift, 2)
    moved_circles = circles + np.array([dx, dy, 0.0])
    a = cast_rays(origin, angles, segments, circles, 60.0)
    b = cast_rays(origin + shift, angles, moved_segments, moved_circles, 60.0)
    np.testing.assert_array_equal(a, b)
