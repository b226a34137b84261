"""Line extraction: geometry of synthetic scans of known walls, covariance against Monte Carlo, invalid readings,
merging."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.features import LineFeature, extract_lines, line_table
from pluto.sim.raycast import RayCaster
from tests.navigation.pose.scenes import L_ROOM, MAX_RANGE, angles, scan, world_of


def expected_lines(walls: np.ndarray, laser: tuple[float, float, float]) -> np.ndarray:
    """(α, r) of each wall's line seen from the laser, r >= 0."""
    x, y, theta = laser
    ex, ey = walls[:, 2] - walls[:, 0], walls[:, 3] - walls[:, 1]
    n = np.hypot(ex, ey)
    nx, ny = -ey / n, ex / n
    rho = (walls[:, 0] - x) * nx + (walls[:, 1] - y) * ny
    a = np.arctan2(ny, nx)
    a = np.where(rho < 0, a + math.pi, a) - theta
    return np.stack((np.mod(a + math.pi, 2 * math.pi) - math.pi, np.abs(rho)), axis=1)


def nearest_line(feature: LineFeature, lines: np.ndarray) -> tuple[float, float]:
    da = np.mod(lines[:, 0] - feature.alpha + math.pi, 2 * math.pi) - math.pi
    dr = lines[:, 1] - feature.r
    k = int(np.argmin(np.abs(da) * 10 + np.abs(dr)))
    return float(da[k]), float(dr[k])


@pytest.mark.parametrize("beams", [181, 361])
@pytest.mark.parametrize("laser", [(2.0, 2.0, 0.3), (6.0, 4.0, 2.0), (10.0, 1.0, -2.6), (1.5, 6.5, -0.9)])
def test_lines_of_a_noise_free_room_are_its_walls(beams: int, laser: tuple[float, float, float]) -> None:
    caster = RayCaster(L_ROOM.segments())
    bearings = angles(beams)
    features = extract_lines(scan(caster, laser, bearings), bearings, max_range=MAX_RANGE)
    lines = expected_lines(L_ROOM.walls, laser)
    assert len(features) >= 2
    for f in features:
        da, dr = nearest_line(f, lines)
        assert abs(da) < 1e-6 and abs(dr) < 1e-6, (f, da, dr)
        assert -math.pi < f.alpha <= math.pi and f.r >= 0
        # the end points lie on the line, in scan order, inside the scan's beams
        for px, py in (f.start, f.end):
            assert px * math.cos(f.alpha) + py * math.sin(f.alpha) == pytest.approx(f.r, abs=1e-9)
        assert 0 <= f.first < f.last < beams and f.points <= f.last - f.first + 1
    assert [f.first for f in features] == sorted(f.first for f in features)


def test_a_wall_in_front_has_the_right_angle_distance_and_end_points() -> None:
    caster = RayCaster(np.array([[5.0, -3.0, 5.0, 4.0]]))
    bearings = angles(361)
    (line,) = extract_lines(scan(caster, (0.0, 0.0, 0.0), bearings), bearings, max_range=MAX_RANGE)
    assert line.alpha == pytest.approx(0.0, abs=1e-9) and line.r == pytest.approx(5.0, abs=1e-9)
    # the first and last beams that hit the wall, projected on it
    # (beams are 0.5° apart: about 6 cm on the wall near its ends)
    assert line.start[0] == pytest.approx(5.0) and line.start[1] == pytest.approx(-3.0, abs=0.07)
    assert line.end[0] == pytest.approx(5.0) and line.end[1] == pytest.approx(4.0, abs=0.07)
    assert line.length == pytest.approx(7.0, abs=0.1)
    assert line.midpoint[1] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("beams", [181, 361])
def test_covariance_agrees_with_monte_carlo(beams: int) -> None:
    """500 seeded noisy scans of an oblique wall: the spread of (α, r) is what the fit's covariance says."""
    caster = RayCaster(np.array([[2.0, -3.0, 6.0, 4.0]]))
    bearings = angles(beams)
    clean = scan(caster, (0.0, 0.0, 0.0), bearings)
    rng = np.random.default_rng(7)
    sigma = 0.01
    samples = []
    predicted = []
    for _ in range(500):
        noisy = np.where(clean < MAX_RANGE, clean + rng.normal(0.0, sigma, clean.shape), MAX_RANGE)
        lines = extract_lines(noisy, bearings, max_range=MAX_RANGE, range_sigma=sigma)
        assert len(lines) == 1
        samples.append((lines[0].alpha, lines[0].r))
        predicted.append(lines[0].covariance)
    sample = np.cov(np.array(samples).T)
    model = np.mean(predicted, axis=0)
    assert sample[0, 0] == pytest.approx(model[0, 0], rel=0.2)
    assert sample[1, 1] == pytest.approx(model[1, 1], rel=0.2)
    corr_sample = sample[0, 1] / math.sqrt(sample[0, 0] * sample[1, 1])
    corr_model = model[0, 1] / math.sqrt(model[0, 0] * model[1, 1])
    assert abs(corr_model) > 0.3  # the wall is off centre: α and r are correlated
    assert corr_sample == pytest.approx(corr_model, abs=0.1)
    # and the estimate is unbiased: the true line is α = atan2(-4, 7) + π ... as a normal pointing away
    truth = expected_lines(np.array([[2.0, -3.0, 6.0, 4.0]]), (0.0, 0.0, 0.0))[0]
    mean = np.mean(samples, axis=0)
    assert mean[0] == pytest.approx(truth[0], abs=3 * math.sqrt(model[0, 0] / 500) + 1e-9)
    assert mean[1] == pytest.approx(truth[1], abs=3 * math.sqrt(model[1, 1] / 500) + 1e-9)


def test_error_readings_and_max_range_are_ignored() -> None:
    caster = RayCaster(np.array([[4.0, -2.0, 4.0, 2.0]]))
    bearings = angles(361)
    ranges = scan(caster, (0.0, 0.0, 0.0), bearings)
    hits = np.flatnonzero(ranges < MAX_RANGE)
    (clean,) = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    broken = ranges.copy()
    middle = hits[len(hits) // 2]
    # invalid readings break the wall into pieces (each long enough for a line), which merge back
    broken[middle - 2 : middle + 1] = -1.0  # the scanner's error value
    broken[middle + 15] = MAX_RANGE  # no echo
    broken[middle + 30] = MAX_RANGE + 3.0
    (line,) = extract_lines(broken, bearings, max_range=MAX_RANGE)
    assert line.points == clean.points - 5
    assert line.alpha == pytest.approx(0.0, abs=1e-9) and line.r == pytest.approx(4.0, abs=1e-9)
    assert (line.first, line.last) == (clean.first, clean.last)


@pytest.mark.parametrize("value", [-1.0, MAX_RANGE])
def test_a_scan_of_nothing_has_no_lines(value: float) -> None:
    bearings = angles(361)
    assert extract_lines(np.full(361, value), bearings, max_range=MAX_RANGE) == []


def test_max_range_readings_never_make_a_line() -> None:
    """A short-range scanner reports max_range on a circle around itself: those points are not a wall."""
    caster = RayCaster(np.array([[3.0, -1.0, 3.0, 1.0]]))
    bearings = angles(361)
    ranges = np.minimum(scan(caster, (0.0, 0.0, 0.0), bearings), 8.0)
    lines = extract_lines(ranges, bearings, max_range=8.0)
    assert len(lines) == 1 and lines[0].r == pytest.approx(3.0)


def test_over_split_pieces_of_one_wall_merge_back() -> None:
    caster = RayCaster(np.array([[3.0, -6.0, 3.0, 6.0]]))
    bearings = angles(361)
    for seed in range(5):
        ranges = scan(caster, (0.0, 0.0, 0.3), bearings, np.random.default_rng(seed))
        # a split at 2 σ: noise alone splits the wall
        pieces = extract_lines(ranges, bearings, max_range=MAX_RANGE, merge_chi2=0.0, split_distance=0.02)
        merged = extract_lines(ranges, bearings, max_range=MAX_RANGE, split_distance=0.02)
        assert len(pieces) > 3
        assert len(merged) == 1
        line = merged[0]
        assert line.points >= sum(p.points for p in pieces)
        assert (line.first, line.last) == (pieces[0].first, pieces[-1].last)
        assert line.r == pytest.approx(3.0, abs=0.01) and line.alpha == pytest.approx(-0.3, abs=0.01)
        assert line.var_alpha < min(p.var_alpha for p in pieces)


def test_a_wall_behind_a_post_is_one_line_and_the_post_is_none() -> None:
    world = world_of([(4.0, -3.0, 4.0, 3.0)])
    caster = RayCaster(world.segments(), np.array([[2.0, 0.0, 0.05]]))
    bearings = angles(361)
    rng = np.random.default_rng(4)
    lines = extract_lines(scan(caster, (0.0, 0.0, 0.0), bearings, rng), bearings, max_range=MAX_RANGE)
    assert len(lines) == 1
    assert lines[0].r == pytest.approx(4.0, abs=0.01) and lines[0].length == pytest.approx(6.0, abs=0.1)


def test_two_walls_at_a_corner_are_not_merged() -> None:
    caster = RayCaster(np.array([[4.0, -3.0, 4.0, 1.0], [4.0, 1.0, 0.0, 5.0]]))
    bearings = angles(181)
    rng = np.random.default_rng(5)
    lines = extract_lines(scan(caster, (0.0, 0.0, 0.0), bearings, rng), bearings, max_range=MAX_RANGE)
    assert len(lines) == 2
    assert lines[0].alpha == pytest.approx(0.0, abs=0.01)
    assert lines[1].alpha == pytest.approx(math.pi / 4, abs=0.01)
    assert lines[1].r == pytest.approx(5.0 / math.sqrt(2.0), abs=0.01)


def test_a_step_in_range_breaks_a_line() -> None:
    """Two parallel walls one behind the other (a door recess) are two lines, not one through both."""
    caster = RayCaster(np.array([[3.0, -3.0, 3.0, 0.0], [3.5, 0.0, 3.5, 3.0]]))
    bearings = angles(361)
    lines = extract_lines(scan(caster, (0.0, 0.0, 0.0), bearings), bearings, max_range=MAX_RANGE)
    assert [round(f.r, 6) for f in lines] == [3.0, 3.5]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="same length"):
        extract_lines([1.0, 2.0], [0.0], max_range=MAX_RANGE)
    with pytest.raises(ValueError, match="max_range"):
        extract_lines([1.0], [0.0], max_range=0.0)
    with pytest.raises(ValueError, match="finite"):
        extract_lines([1.0, 1.0], [0.0, math.nan], max_range=MAX_RANGE)
    assert extract_lines([], [], max_range=MAX_RANGE) == []
    # every other reading an error: no run is long enough for a line
    assert extract_lines(np.tile([3.0, -1.0], 100), np.linspace(-1, 1, 200), max_range=MAX_RANGE) == []
    assert extract_lines([math.nan] * 10, np.linspace(0, 1, 10), max_range=MAX_RANGE) == []


def test_scan_layouts_may_alternate_and_each_gets_its_own_beam_tables() -> None:
    """The extractor keeps what it computes of each beam layout: layouts that come and go (361 and 181 beams, lists
    or arrays, the same count of beams pointing elsewhere) each give their own lines, every time."""
    caster = RayCaster(L_ROOM.segments())
    laser = (2.0, 1.5, 0.3)
    full = angles(361)
    turned = full + 0.1  # the same number of beams, 0.1 rad further round
    ranges = scan(caster, laser, full, np.random.default_rng(4))
    half_ranges, half = ranges[::2], full[::2]
    first_full = extract_lines(ranges, full, max_range=MAX_RANGE)
    first_half = extract_lines(half_ranges, half, max_range=MAX_RANGE)
    first_turned = extract_lines(ranges, turned, max_range=MAX_RANGE)
    assert len(first_full) >= 4 and len(first_half) >= 4
    # the same ranges read as beams 0.1 rad further round: the same walls, turned by 0.1 rad
    assert [f.alpha - g.alpha for f, g in zip(first_turned, first_full, strict=True)] == pytest.approx(
        [0.1] * len(first_full), abs=1e-9
    )
    for _ in range(3):
        assert extract_lines(half_ranges.tolist(), half.tolist(), max_range=MAX_RANGE) == first_half
        assert extract_lines(ranges, turned, max_range=MAX_RANGE) == first_turned
        assert extract_lines(ranges.tolist(), full.tolist(), max_range=MAX_RANGE) == first_full
    table = line_table(ranges, full, max_range=MAX_RANGE)
    assert table.features() == first_full
    assert table.values.shape == (len(first_full), 9) and table.counts.shape == (len(first_full), 3)


def test_a_far_wall_whose_noise_grows_with_the_range_stays_one_line() -> None:
    """A façade 20-40 m away seen by a scanner whose range noise is 1 cm + 0.1 % of the range (3-5 cm there): told
    so, the extractor keeps it as one line whose covariance covers its error; with the noise of 1 cm it splits it
    wherever a point strays more than 5 cm, into pieces mostly too short to keep."""
    caster = RayCaster(np.array([[20.0, -40.0, 20.0, 40.0]]))
    bearings = angles(361)
    hits = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        clean = caster.cast(np.zeros(2), bearings, MAX_RANGE)
        valid = (clean < 45.0) & (clean > 20.0)
        ranges = np.where(valid, clean + rng.normal(0.0, 1.0, clean.shape) * (0.01 + 0.001 * clean), MAX_RANGE)
        told = extract_lines(ranges, bearings, max_range=MAX_RANGE, range_sigma_per_m=0.001)
        fixed = extract_lines(ranges, bearings, max_range=MAX_RANGE)
        longest = max(told, key=lambda f: f.points)
        assert longest.points > 0.9 * valid.sum()
        assert sum(f.points for f in fixed) < 0.8 * valid.sum()
        # the one line's (α, r) error lies within its covariance's 99 % ellipse
        d = np.array([math.remainder(longest.alpha - 0.0, 2 * math.pi), longest.r - 20.0])
        hits += float(d @ np.linalg.solve(longest.covariance, d)) < 9.21
    assert hits >= 4


def test_range_sigma_per_m_is_checked() -> None:
    with pytest.raises(ValueError, match="range_sigma_per_m must be >= 0"):
        extract_lines(np.full(3, 5.0), angles(3), max_range=MAX_RANGE, range_sigma_per_m=-0.001)


def test_a_line_whose_points_scatter_more_than_the_range_noise_gets_the_covariance_of_that_scatter() -> None:
    """A scanner three times noisier than its range_sigma: 300 seeded scans of a wall with scatter=True spread
    as their covariance says (scatter=False says nine times too little); with noise as stated nothing changes."""
    caster = RayCaster(np.array([[2.0, -3.0, 6.0, 4.0]]))
    bearings = angles(361)
    clean = scan(caster, (0.0, 0.0, 0.0), bearings)
    rng = np.random.default_rng(11)
    samples, scaled, plain = [], [], []
    for _ in range(300):
        noisy = np.where(clean < MAX_RANGE, clean + rng.normal(0.0, 0.03, clean.shape), MAX_RANGE)
        # (a split distance the noise does not reach: the split test is not what is looked at here)
        (line,) = extract_lines(noisy, bearings, max_range=MAX_RANGE, split_distance=0.2, scatter=True)
        (unscaled,) = extract_lines(noisy, bearings, max_range=MAX_RANGE, split_distance=0.2)
        assert (line.alpha, line.r) == (unscaled.alpha, unscaled.r)  # the same fit: only its covariance is scaled
        samples.append((line.alpha, line.r))
        scaled.append(line.covariance)
        plain.append(unscaled.covariance)
    sample = np.cov(np.array(samples).T)
    model = np.mean(scaled, axis=0)
    assert sample[0, 0] == pytest.approx(model[0, 0], rel=0.25)
    assert sample[1, 1] == pytest.approx(model[1, 1], rel=0.25)
    assert np.mean(plain, axis=0)[1, 1] == pytest.approx(model[1, 1] / 9.0, rel=0.25)
    # noise as range_sigma says: the scatter is at most what it explains, and the covariance stays the model's
    honest = np.where(clean < MAX_RANGE, clean + rng.normal(0.0, 0.01, clean.shape), MAX_RANGE)
    (a,) = extract_lines(honest, bearings, max_range=MAX_RANGE, scatter=True)
    (b,) = extract_lines(honest, bearings, max_range=MAX_RANGE)
    assert a.var_r == pytest.approx(b.var_r, rel=0.3) and a.var_r >= b.var_r
