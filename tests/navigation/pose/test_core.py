"""The pose filter: prediction from dead reckoning, wall updates, consistency over simulated drives, the lost status
and relocalization of a kidnapped robot."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.geometry import compose, relative, wrap_angle
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.pose.core import Match, PoseFilter, PoseFilterParams, associate, relocalize
from pluto.navigation.pose.features import LineFeature, extract_lines
from pluto.navigation.pose.map import WallMap
from pluto.sim.raycast import RayCaster
from pluto.sim.world import load_world
from tests.navigation.pose.scenes import L_ROOM, MAX_RANGE, angles, drive, scan

CHI2_24 = (12.401, 39.364)
"""2.5 % and 97.5 % quantiles of the chi-square distribution with 24 degrees of freedom (8 runs x 3)."""

EXACT = PoseFilterParams(wall_angle_std=0.0, wall_offset_std=0.0)
"""A filter told its map is exact, as the simulated walls of these scenes are (none is a few cm off its plan)."""
HONEST = PoseFilterParams(
    distance_scale_std=0.0, heading_drift_std=0.0, turn_scale_std=0.0, wall_angle_std=0.0, wall_offset_std=0.0
)
"""Filter settings that trust the dead reckoning's noise model (what the simulated drives of these tests follow)."""


def seen(world_walls: WallMap | np.ndarray, laser: tuple[float, float, float], seed: int = 0) -> list[LineFeature]:
    segments = world_walls.segments if isinstance(world_walls, WallMap) else world_walls
    bearings = angles(361)
    ranges = scan(RayCaster(segments), laser, bearings, np.random.default_rng(seed))
    return extract_lines(ranges, bearings, max_range=MAX_RANGE)


# -- predict -----------------------------------------------------------------------------------------------------


def test_the_first_predict_only_takes_the_reference() -> None:
    f = PoseFilter((1.0, 2.0, 0.5), np.eye(3) * 0.01)
    f.predict((10.0, 10.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0), np.eye(3))
    assert f.pose == (1.0, 2.0, 0.5)
    np.testing.assert_array_equal(f.covariance, np.eye(3) * 0.01)


@pytest.mark.parametrize("frame", [0.0, math.pi / 2, -2.5])
def test_predict_composes_the_laser_increment_in_the_filters_frame(frame: float) -> None:
    """The filter's map frame is turned by ``frame`` from the dead reckoning's: the increment follows the filter."""
    a = (3.0, 1.0, 0.0, 0.4, 0.0, 0.0, 0.2, 0.0)  # 8-D laser pose with a pan of 0.2 rad
    b = (3.5, 1.3, 0.0, 0.7, 0.0, 0.0, 0.1, 0.0)
    start = (10.0, -4.0, 0.4 + frame)
    f = PoseFilter(start, np.zeros((3, 3)), reference=a)
    f.predict(b, np.zeros((3, 3)))
    expected = compose(start, relative((a[0], a[1], a[3]), (b[0], b[1], b[4 - 1])))
    assert f.pose == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("frame", [0.0, math.pi / 2])
def test_a_heading_error_of_the_robot_swings_the_laser_on_its_mount(frame: float) -> None:
    """The robot turns in place with an uncertain heading: the laser, 0.25 m ahead, gets a sideways error."""
    var = 0.01
    f = PoseFilter((0.0, 0.0, frame), np.zeros((3, 3)), reference=(0.25, 0.0, 0.0))
    f.predict((0.25, 0.0, 0.0), np.diag([0.0, 0.0, var]))
    p = f.covariance
    m = 0.25  # laser_mount[0] of the localization service's defaults
    assert PoseFilterParams().laser_mount[0] == LocalizationParams().laser_mount[0] == m
    side = (-math.sin(frame) * m, math.cos(frame) * m)  # the sideways direction of the laser, map frame
    np.testing.assert_allclose(p[:2, :2], var * np.outer(side, side), atol=1e-15)
    np.testing.assert_allclose(p[:2, 2], var * np.array(side), atol=1e-15)
    assert p[2, 2] == pytest.approx(var)


def test_predict_carries_the_covariance_over_the_motion() -> None:
    p0 = np.diag([0.0, 0.0, 0.01])
    f = PoseFilter((0.0, 0.0, 0.0), p0, reference=(0.0, 0.0, 0.0))
    f.predict((2.0, 0.0, 0.0), np.zeros((3, 3)))  # 2 m ahead: a heading error of 0.1 rad is 0.2 m sideways
    assert f.covariance[1, 1] == pytest.approx(4.0 * 0.01)
    assert f.covariance[1, 2] == pytest.approx(2.0 * 0.01)


# -- update ------------------------------------------------------------------------------------------------------


def test_one_wall_corrects_what_it_sees_and_nothing_else() -> None:
    wall = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]])
    truth = (1.0, 0.0, 0.0)
    p0 = np.diag([0.2**2, 0.2**2, 0.05**2])
    f = PoseFilter((1.25, 0.1, 0.04), p0, params=EXACT)
    result = f.update(seen(wall, truth), wall)
    assert len(result.matches) == 1 and result.matches[0].wall == 0
    x, y, theta = result.pose
    assert x == pytest.approx(1.0, abs=0.005) and theta == pytest.approx(0.0, abs=0.002)
    assert y == pytest.approx(0.1)  # along the wall: not observed
    p = result.covariance
    assert p[0, 0] < 1e-4 and p[2, 2] < 1e-5 and p[1, 1] == pytest.approx(p0[1, 1])
    assert np.all(np.linalg.eigvalsh(p) > 0)
    (match,) = result.matches
    assert match.innovation[1] == pytest.approx(0.25, abs=0.01)  # the wall is 0.25 m farther than predicted
    assert match.innovation[0] == pytest.approx(0.04, abs=0.003)
    assert match.predicted == pytest.approx((-0.04, 3.75))  # from the prior (1.25, 0.1, 0.04)
    assert result.nis == pytest.approx(match.nis) and result.dof == 2


def test_map_walls_are_taken_as_uncertain_as_a_plan_is() -> None:
    """A building as built is a few cm off its plan: however sharply the laser sees a wall, the filter does not hold
    its position against that wall to better than the plan's ``wall_offset_std`` (2 cm) allows, so where the walls
    around it disagree by a few cm it does not lock onto the wrong place with confidence. A wall the map says is less
    certain keeps the map's word."""
    wall = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]])
    p0 = np.diag([0.5**2, 0.5**2, 0.05**2])
    f = PoseFilter((1.0, 0.0, 0.0), p0)
    f.update(seen(wall, (1.0, 0.0, 0.0)), wall)
    assert math.sqrt(f.covariance[0, 0]) > 0.9 * PoseFilterParams().wall_offset_std == pytest.approx(0.018)
    exact = PoseFilter((1.0, 0.0, 0.0), p0, params=EXACT)
    exact.update(seen(wall, (1.0, 0.0, 0.0)), wall)
    assert math.sqrt(exact.covariance[0, 0]) < 0.005  # the laser alone, at 4 m
    vague = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]], sigmas=[[0.0, 0.2]])
    g = PoseFilter((1.0, 0.0, 0.0), p0)
    g.update(seen(vague, (1.0, 0.0, 0.0)), vague)
    assert math.sqrt(g.covariance[0, 0]) > 0.18


def test_a_wall_beyond_the_gate_is_not_matched() -> None:
    wall = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]])
    f = PoseFilter((2.0, 0.0, 0.0), np.diag([0.05**2, 0.05**2, 0.01**2]))  # 1 m off, 20 σ
    result = f.update(seen(wall, (1.0, 0.0, 0.0)), wall)
    assert result.matches == () and result.pose == (2.0, 0.0, 0.0)
    assert f.status.poor_scans == 1


def test_a_far_wall_ahead_fixes_the_position_along_a_street() -> None:
    """A street between two long façades, closed 50 m ahead: the façades fix the position across the street only,
    the far wall (within the scanner's 80 m) fixes it along."""
    street = WallMap.from_segments([[0.0, -5.0, 100.0, -5.0], [0.0, 5.0, 100.0, 5.0], [60.0, -5.0, 60.0, 5.0]])
    f = PoseFilter((10.4, 0.05, 0.0), np.diag([0.5**2, 0.1**2, 0.01**2]), params=EXACT)
    result = f.update(seen(street, (10.0, 0.0, 0.0)), street)
    assert 2 in {m.wall for m in result.matches}
    assert result.pose[0] == pytest.approx(10.0, abs=0.02) and result.pose[1] == pytest.approx(0.0, abs=0.01)
    assert math.sqrt(result.covariance[0, 0]) < 0.02


def test_update_lines_is_update_on_the_lines_arrays() -> None:
    """The pose module's per-scan path (the lines as arrays, pairs as indices) is the same update as the one on
    line objects: the same pairs, pose and covariance."""
    office = WallMap.from_file("office")
    features = seen(office, (12.0, 9.6, 0.1), seed=3)
    lines = np.array([(f.alpha, f.r, f.var_alpha, f.cov_alpha_r, f.var_r, *f.start, *f.end) for f in features])
    prior = ((12.1, 9.5, 0.12), np.diag([0.1**2, 0.1**2, 0.02**2]))
    a, b = PoseFilter(*prior), PoseFilter(*prior)
    result = a.update(features, office)
    pairs, table, nis, candidates = b.update_lines(lines, office)
    assert len(result.matches) >= 3
    assert pairs.tolist() == [[m.feature, m.wall] for m in result.matches]
    assert table[:, 4].tolist() == [m.nis for m in result.matches]
    assert (nis, candidates) == (result.nis, result.candidates)
    assert b.pose == a.pose
    np.testing.assert_array_equal(b.covariance, a.covariance)


def test_a_feature_must_overlap_its_wall() -> None:
    """The seen wall lies on the map wall's line but beyond its end: it is another wall, not that one."""
    short = WallMap.from_segments([[5.0, 4.0, 5.0, 9.0]])
    f = PoseFilter((1.0, 0.0, 0.0), np.diag([0.1**2, 0.1**2, 0.01**2]))
    result = f.update(seen(np.array([[5.0, -3.0, 5.0, 1.0]]), (1.0, 0.0, 0.0)), short)
    assert result.matches == ()


def test_collinear_walls_are_told_apart_by_overlap_one_to_one() -> None:
    """The office corridor: the walls beside the doors share one line; each piece seen goes to its own wall."""
    office = WallMap.from_file("office")
    world = load_world("office")
    truth = (14.0, 10.0, 0.0)
    bearings = angles(361)
    ranges = scan(RayCaster(world.segments(), world.circles), truth, bearings, np.random.default_rng(1))
    features = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    f = PoseFilter((14.05, 9.95, 0.01), np.diag([0.1**2, 0.1**2, 0.02**2]))
    result = f.update(features, office)
    walls = [m.wall for m in result.matches]
    assert len(walls) == len(set(walls)) >= 3
    assert len({m.feature for m in result.matches}) == len(walls)
    for m in result.matches:
        feature = features[m.feature]
        x1, y1, x2, y2 = office.segments[m.wall]
        # the middle of the feature, in the map, lies on the wall it was paired with
        mx, my = feature.midpoint
        c, s = math.cos(result.pose[2]), math.sin(result.pose[2])
        px, py = result.pose[0] + c * mx - s * my, result.pose[1] + s * mx + c * my
        assert min(x1, x2) - 0.1 <= px <= max(x1, x2) + 0.1 and min(y1, y2) - 0.1 <= py <= max(y1, y2) + 0.1
    assert math.hypot(result.pose[0] - truth[0], result.pose[1] - truth[1]) < 0.02


def joint_update(
    pose: tuple[float, float, float],
    p: np.ndarray,
    features: list[LineFeature],
    walls: WallMap,
    matches: list[Match],
    joined: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """The textbook update with all the pairs at once (S = H P Hᵀ + R, K = P Hᵀ S⁻¹, Joseph form), from the pairs'
    innovations: the reference for the filter's pair-by-pair update. A pair that other pieces of its wall joined
    (``joined``: rows of piece, paired feature) measures with their fused covariance (Σ C_i⁻¹)⁻¹."""
    x, y, _ = pose
    h_rows, r_blocks, nu = [], [], []
    for m in matches:
        a = float(walls.alpha[m.wall])
        ca, sa = math.cos(a), math.sin(a)
        sgn = -1.0 if walls.rho[m.wall] - x * ca - y * sa < 0 else 1.0
        h_rows += [[0.0, 0.0, -1.0], [-sgn * ca, -sgn * sa, 0.0]]
        jw = np.array([[1.0, 0.0], [sgn * (x * sa - y * ca), sgn]])
        pieces = [m.feature, *(int(g) for g, f in (joined if joined is not None else []) if f == m.feature)]
        fused = np.linalg.inv(sum(np.linalg.inv(features[i].covariance) for i in pieces))
        r_blocks.append(fused + jw @ walls.covariance[m.wall] @ jw.T)
        nu += list(m.innovation)
    h, v = np.array(h_rows), np.array(nu)
    r = np.zeros((2 * len(matches), 2 * len(matches)))
    for k, block in enumerate(r_blocks):
        r[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = block
    s = h @ p @ h.T + r
    gain = p @ h.T @ np.linalg.inv(s)
    a_ = np.eye(3) - gain @ h
    return np.array(pose) + gain @ v, a_ @ p @ a_.T + gain @ r @ gain.T, float(v @ np.linalg.solve(s, v))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_pairs_one_by_one_are_the_joint_update(seed: int) -> None:
    """Independent pairs applied in turn (the innovation moved by the state's change so far) give what one joint
    update gives: the same pose, covariance and NIS. Walls with uncertainty, so R has their part too."""
    rng = np.random.default_rng(seed)
    world = load_world("office")
    sigmas = np.column_stack((rng.uniform(0, 0.01, len(world.walls)), rng.uniform(0, 0.05, len(world.walls))))
    office = WallMap.from_segments(world.walls, sigmas=sigmas)
    truth = (14.0, 10.0, 0.0)
    bearings = angles(361)
    ranges = scan(RayCaster(world.segments(), world.circles), truth, bearings, rng)
    features = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    prior = (14.0 + rng.normal(0, 0.05), 10.0 + rng.normal(0, 0.05), rng.normal(0, 0.01))
    q = rng.normal(size=(3, 3))
    p0 = np.diag([0.1**2, 0.1**2, 0.02**2]) + 1e-4 * q @ q.T  # correlated
    f = PoseFilter(prior, p0, params=EXACT)
    result = f.update(features, office)
    assert len(result.matches) >= 3
    pose, p, nis = joint_update(prior, p0, features, office, list(result.matches), f.joined)
    np.testing.assert_allclose(result.pose, pose, atol=1e-12)
    np.testing.assert_allclose(result.covariance, p, atol=1e-14)
    assert result.nis == pytest.approx(nis, rel=1e-9)


def piece(r: float, var_r: float, y0: float, y1: float) -> LineFeature:
    """A feature of the wall 4 m ahead of the laser (its normal along x), from y0 to y1, measuring it at ``r``."""
    return LineFeature(0.0, r, var_r * 1e-2, 0.0, var_r, (r, y0), (r, y1), 20, 0, 19)


def test_the_pieces_of_a_wall_are_fused_into_its_pair() -> None:
    """A wall cut in two by a glass pane: a precise piece (1 mm) measures it right, a noisy one (1 cm) 2 cm too near,
    which is where the filter, 3 cm off, expects it: the pairing, nearest first, takes the noisy one. The precise one
    joins the pair and the two are fused by their information: the pose comes out where the precise piece says, as
    certain as it makes it."""
    wall = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]])
    features = [piece(4.0, 1e-6, -3.0, -0.5), piece(3.98, 1e-4, 0.5, 3.0)]
    f = PoseFilter((1.03, 0.0, 0.0), np.diag([0.05**2, 0.05**2, 0.01**2]), params=EXACT)
    result = f.update(features, wall)
    assert [m.feature for m in result.matches] == [1]  # the noisy piece is the nearest
    assert f.joined.tolist() == [[0, 1]]
    assert result.pose[0] == pytest.approx(1.0, abs=0.001)
    assert math.sqrt(result.covariance[0, 0]) < 0.0015


def test_the_pose_is_never_more_certain_than_its_map() -> None:
    """The same wall seen scan after scan: its error in the map is the same every time and does not average out, so
    the position across it and the heading stay at least as uncertain as the map's walls are."""
    wall = WallMap.from_segments([[5.0, -5.0, 5.0, 5.0]])
    prm = PoseFilterParams()
    f = PoseFilter((1.0, 0.0, 0.0), np.diag([0.1**2, 0.1**2, 0.02**2]))
    for seed in range(30):
        f.update(seen(wall, (1.0, 0.0, 0.0), seed), wall)
    assert f.covariance[0, 0] >= prm.wall_offset_std**2 - 1e-15
    assert f.covariance[2, 2] >= prm.wall_angle_std**2 - 1e-15
    assert np.all(np.linalg.eigvalsh(f.covariance) > 0)


@pytest.mark.parametrize("seed", range(5))
def test_associate_takes_the_pairs_as_going_down_the_sorted_list(seed: int) -> None:
    """Nearest first, the larger overlap first between equal distances, then scan order; each row and column once."""
    rng = np.random.default_rng(seed)
    d2 = rng.choice([0.5, 1.0, 2.0, 5.0, 20.0, math.nan], size=(6, 9))  # ties on purpose
    overlap = rng.choice([-1.0, 0.5, 1.0, 2.0], size=(6, 9))
    fi, ci = np.nonzero((d2 < 9.21) & (overlap > 0))
    order = np.lexsort((np.arange(fi.size), -overlap[fi, ci], d2[fi, ci]))
    expected: list[tuple[int, int]] = []
    for f, c in zip(fi[order].tolist(), ci[order].tolist(), strict=True):
        if all(f != g and c != h for g, h in expected):
            expected.append((f, c))
    assert associate(d2, overlap, 9.21) == expected
    assert associate(np.zeros((0, 3)), np.zeros((0, 3)), 9.21) == []


def test_consistency_and_bounded_error_over_simulated_drives() -> None:
    """Eight seeded drives round the L-room with noisy odometry: the average NEES lies within the two-sided 95 %
    chi-square bounds of 8 runs, and the error stays small while the dead reckoning drifts."""
    walls = WallMap.from_world(L_ROOM)
    p0 = np.diag([0.1**2, 0.1**2, 0.03**2])
    nees: list[float] = []
    nis: list[float] = []
    dof = 0
    worst = 0.0
    drift: list[float] = []
    unmatched = 0
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        f: PoseFilter | None = None
        for frame in drive(seed, seconds=40.0):
            if f is None:
                # the drives' odometry errors follow the localization service's own model: no extra noise
                f = PoseFilter(np.array(frame.laser) + rng.multivariate_normal(np.zeros(3), p0), p0, params=HONEST)
            f.predict(frame.dead_reckoning.pose, frame.dead_reckoning.increment)
            result = f.update(frame.features, walls)
            assert not result.lost
            unmatched += not result.matches  # a rare 3 σ heading error puts every wall outside the 99 % gate
            e = np.array(frame.laser) - np.array(result.pose)
            e[2] = wrap_angle(float(e[2]))
            nees.append(float(e @ np.linalg.solve(result.covariance, e)))
            nis.append(result.nis)
            dof += result.dof
            worst = max(worst, math.hypot(e[0], e[1]))
        dr = frame.dead_reckoning.pose
        drift.append(math.hypot(dr[0] - frame.laser[0], dr[1] - frame.laser[1]))
    average = float(np.mean(nees))
    assert CHI2_24[0] / 8 < average < CHI2_24[1] / 8, average
    assert sum(nis) / dof == pytest.approx(1.0, abs=0.15)
    assert unmatched < 0.01 * len(nees)
    assert float(np.mean(drift)) > 0.2  # dead reckoning alone drifts by decimetres ...
    assert worst < 0.05  # ... the filter stays within centimetres


# -- lost and relocalized ----------------------------------------------------------------------------------------


def test_walls_that_fit_nothing_for_too_long_are_lost_and_a_match_ends_it() -> None:
    walls = WallMap.from_world(L_ROOM)
    truth = (2.0, 2.0, 0.3)
    f = PoseFilter(truth, np.diag([0.01, 0.01, 0.001]), params=PoseFilterParams(lost_after=5))
    for _ in range(10):
        f.update([], walls)  # nothing in view (an open square): no evidence either way
    assert f.status.poor_scans == 0 and not f.lost
    elsewhere = seen(walls, (10.0, 3.0, 2.5))  # the walls of another place: nothing fits where the filter is
    for k in range(5):
        assert not f.lost
        result = f.update(elsewhere, walls)
        assert result.matches == () and result.lost == (k == 4)
    assert f.status.poor_scans == 5 and f.status.lost
    result = f.update(seen(walls, truth), walls)
    assert result.matches and not result.lost and f.status.poor_scans == 0


def test_growing_uncertainty_is_lost() -> None:
    f = PoseFilter((0.0, 0.0, 0.0), np.zeros((3, 3)), reference=(0.0, 0.0, 0.0))
    for k in range(1, 20):
        f.predict((0.1 * k, 0.0, 0.0), np.diag([0.3, 0.3, 0.0]))  # 0.55 m per step
    assert f.lost and f.status.position_std > 2.0
    f.reset((0.0, 0.0, 0.0), np.eye(3) * 0.01)
    assert not f.lost


@pytest.mark.parametrize(
    "truth", [(2.0, 2.0, 0.3), (10.0, 3.0, 2.5), (6.0, 6.5, -1.0), (7.0, 2.0, 1.6), (1.0, 7.0, -0.8)]
)
def test_relocalize_finds_the_pose_in_a_room_without_symmetry(truth: tuple[float, float, float]) -> None:
    walls = WallMap.from_world(L_ROOM)
    found = relocalize(seen(walls, truth, seed=3), walls)
    assert found is not None
    assert found.pose[:2] == pytest.approx(truth[:2], abs=0.02)
    assert wrap_angle(found.pose[2] - truth[2]) == pytest.approx(0.0, abs=0.005)
    assert found.fraction > 0.9 and found.matches >= 3
    assert np.all(np.linalg.eigvalsh(found.covariance) > 0) and found.covariance[0, 0] < 1e-3


def test_a_kidnapped_robot_is_lost_then_found_and_tracked_again() -> None:
    walls = WallMap.from_world(L_ROOM)
    believed, truth = (2.0, 2.0, 0.0), (7.5, 6.0, -2.2)
    f = PoseFilter(believed, np.diag([0.05**2, 0.05**2, 0.02**2]), params=PoseFilterParams(lost_after=3))
    for seed in range(3):
        assert f.update(seen(walls, truth, seed), walls).matches == ()
    assert f.lost
    features = seen(walls, truth, seed=9)
    found = relocalize(features, walls, hint=f.pose)
    assert found is not None and f.pose == believed  # the search never moves the filter itself
    assert found.runner_up < 0.95 * found.score
    f.reset(found.pose, found.covariance + np.diag([0.01**2, 0.01**2, 0.002**2]))
    result = f.update(seen(walls, truth, seed=10), walls)
    assert len(result.matches) >= 3 and not result.lost
    assert result.pose[:2] == pytest.approx(truth[:2], abs=0.02)


def test_relocalize_with_a_hint_searches_near_it_in_a_repetitive_office() -> None:
    office = WallMap.from_file("office")
    world = load_world("office")
    truth = (22.0, 13.0, -0.7)  # in a north room
    bearings = angles(361)
    ranges = scan(RayCaster(world.segments(), world.circles), truth, bearings, np.random.default_rng(2))
    features = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    # the rooms along the corridor are alike: searched everywhere, the answer says it is ambiguous
    anywhere = relocalize(features, office)
    assert anywhere is not None and anywhere.runner_up >= anywhere.score
    found = relocalize(features, office, hint=(21.0, 12.5, 0.0), radius=2.0)
    assert found is not None
    assert found.pose[:2] == pytest.approx(truth[:2], abs=0.05)
    assert wrap_angle(found.pose[2] - truth[2]) == pytest.approx(0.0, abs=0.01)
    assert found.runner_up < 0.95 * found.score


def test_relocalize_needs_two_lines() -> None:
    walls = WallMap.from_world(L_ROOM)
    one = seen(np.array([[5.0, -5.0, 5.0, 5.0]]), (0.0, 0.0, 0.0))
    assert len(one) == 1 and relocalize(one, walls) is None
    assert relocalize([], walls) is None


# -- output and arguments ----------------------------------------------------------------------------------------


def test_the_post_is_the_dead_reckoned_laser_pose_with_the_filters_plane_pose() -> None:
    f = PoseFilter((1.0, 2.0, 0.3), np.eye(3))
    dr = [5.0, 6.0, 0.9, 0.1, 0.01, 0.02, 0.05, -0.1]
    assert f.laser_post(dr) == [1.0, 2.0, 0.9, 0.3, 0.01, 0.02, 0.05, -0.1]
    assert f.laser_post(dr[:6]) == [1.0, 2.0, 0.9, 0.3, 0.01, 0.02]
    with pytest.raises(ValueError, match="6- or 8-D"):
        f.laser_post([1.0, 2.0, 3.0])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="3, 6 or 8"):
        PoseFilter((1.0, 2.0), np.eye(3))
    with pytest.raises(ValueError, match="finite"):
        PoseFilter((1.0, math.nan, 0.0), np.eye(3))
    with pytest.raises(ValueError, match="3x3"):
        PoseFilter((1.0, 2.0, 0.0), np.eye(2))
    f = PoseFilter((0.0, 0.0, 0.0), list(np.eye(3).ravel()))
    with pytest.raises(ValueError, match="increment"):
        f.predict((0.0, 0.0, 0.0), [1.0, 2.0])
    with pytest.raises(ValueError, match="gate"):
        PoseFilterParams(gate=0.0)
    with pytest.raises(ValueError, match="lost_after"):
        PoseFilterParams(lost_after=0)
