"""The full EKF: the wall model and its Jacobians, new walls, the shared odometry, and a drive."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.core import PoseFilter
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam import WallEKF, WallObservation, new_wall, observe_wall
from tests.navigation.slam.drive import OBS_COV, Mapper, drive, track_path, track_world


def _numeric(f: object, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    cols = []
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        hi, lo = f(x + d), f(x - d)  # type: ignore[operator]
        diff = hi - lo
        diff[0] = math.remainder(diff[0], 2 * math.pi)
        cols.append(diff / (2 * eps))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize(
    ("pose", "wall"),
    [
        ((1.0, 2.0, 0.3), (0.4, 6.0)),  # the laser on the origin's side of the wall
        ((8.0, 7.0, -2.0), (0.4, 6.0)),  # beyond it: the line is seen with the opposite normal
        ((-3.0, 0.5, 3.0), (-2.9, 1.0)),
    ],
)
def test_observe_wall_jacobians_match_finite_differences(
    pose: tuple[float, float, float], wall: tuple[float, float]
) -> None:
    p, w = np.array(pose), np.array(wall)
    z, h_v, h_w = observe_wall(p, w)
    assert z[1] >= 0.0
    np.testing.assert_allclose(h_v, _numeric(lambda v: observe_wall(v, w)[0], p), atol=1e-6)
    np.testing.assert_allclose(h_w, _numeric(lambda v: observe_wall(p, v)[0], w), atol=1e-6)


def test_observe_wall_matches_the_reference_formula() -> None:
    z, _, _ = observe_wall(np.array([1.0, -1.0, 0.5]), np.array([math.pi / 2, 4.0]))
    # the wall y = 4 seen from (1, -1) heading 0.5 rad: 5 m away, normal at 90° - 0.5 rad
    np.testing.assert_allclose(z, [math.pi / 2 - 0.5, 5.0], atol=1e-12)


@pytest.mark.parametrize("pose", [(1.0, 2.0, 0.3), (-4.0, 3.0, 2.5), (10.0, -6.0, -1.0)])
@pytest.mark.parametrize("z", [(0.2, 3.0), (-2.5, 0.7), (3.0, 12.0)])
def test_new_wall_inverts_observe_wall_and_its_jacobians(
    pose: tuple[float, float, float], z: tuple[float, float]
) -> None:
    p = np.array(pose)
    wall, g_v, g_z = new_wall(p, *z)
    assert wall[1] >= 0.0
    seen, _, _ = observe_wall(p, wall)
    assert abs(math.remainder(seen[0] - z[0], 2 * math.pi)) < 1e-12 and abs(seen[1] - z[1]) < 1e-12
    np.testing.assert_allclose(g_v, _numeric(lambda v: new_wall(v, *z)[0], p), atol=1e-6)
    np.testing.assert_allclose(g_z, _numeric(lambda v: new_wall(p, v[0], v[1])[0], np.array(z)), atol=1e-6)


def test_predict_is_the_pose_filters_predict() -> None:
    start = (2.0, 1.0, 0.4)
    cov = np.diag([0.01, 0.02, 0.003])
    slam = WallEKF(start, cov)
    slam.add_wall(WallObservation(0.0, 3.0, OBS_COV))
    pose_filter = PoseFilter(start, cov)
    dr = [(0.0, 0.0, 0.0), (0.5, 0.1, 0.05), (1.1, 0.1, 0.3), (1.5, 0.6, 0.9)]
    inc = np.diag([1e-4, 2e-4, 1e-4])
    for d in dr:
        slam.predict(d, inc)
        pose_filter.predict(d, inc)
    np.testing.assert_allclose(slam.pose, pose_filter.pose, atol=1e-12)
    np.testing.assert_allclose(slam.pose_covariance, pose_filter.covariance, atol=1e-12)
    # the wall did not move, and its correlation with the pose followed F
    np.testing.assert_allclose(slam.wall(0), new_wall(np.array(start), 0.0, 3.0)[0])


def test_seeing_a_wall_again_shrinks_its_covariance_and_the_pose_stays_put() -> None:
    slam = WallEKF((0.0, 0.0, 0.0), np.diag([1e-4, 1e-4, 1e-5]))
    i = slam.add_wall(WallObservation(0.0, 3.0, OBS_COV))
    _, p0 = slam.full_state()
    nis = slam.update([(i, WallObservation(0.0, 3.0, OBS_COV))])
    x1, p1 = slam.full_state()
    assert nis == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(x1[:3], 0.0, atol=1e-12)
    assert p1[3, 3] < p0[3, 3] and p1[4, 4] < p0[4, 4]
    assert np.all(np.linalg.eigvalsh(p1) > 0.0)
    # a wall cannot be known better than the pose it was seen from: its offset keeps the pose's variance
    assert p1[4, 4] > 0.9e-4


def test_drive_keeps_pose_and_walls_consistent() -> None:
    rng = np.random.default_rng(21)
    world = track_world(rng, walls=50)
    path = track_path(laps=1.1)
    slam = WallEKF(path[0], np.diag([1e-4, 1e-4, 1e-5]))
    mapper = Mapper(slam)
    nees = []
    for scan in drive(world, path, rng):
        mapper.step(scan)
        err = np.array(scan.true_pose) - slam.pose
        err[2] = math.remainder(err[2], 2 * math.pi)
        nees.append(float(err @ np.linalg.solve(slam.pose_covariance, err)))
    # pose NEES (3 dof) averages about 3 for an honest filter (less here: the pose filter adds odometry noise)
    assert 0.5 < float(np.mean(nees)) < 10.0
    assert len(slam) >= 45
    x, p = slam.full_state()
    walls = sorted(mapper.index.items())
    d2 = []
    for truth, index in walls:
        e = x[3 + 2 * index : 5 + 2 * index] - np.array([world.alpha[truth], world.rho[truth]])
        e[0] = math.remainder(e[0], 2 * math.pi)
        c = p[3 + 2 * index : 5 + 2 * index, 3 + 2 * index : 5 + 2 * index]
        d2.append(float(e @ np.linalg.solve(c, e)))
    assert float(np.mean(d2)) < 6.0


def test_observation_checks() -> None:
    with pytest.raises(ValueError):
        WallObservation(0.0, -1.0, OBS_COV)
    with pytest.raises(ValueError):
        WallObservation(0.0, 1.0, np.eye(3))
    with pytest.raises(ValueError):
        WallEKF((0.0, 0.0), np.eye(3))
    slam = WallEKF((0.0, 0.0, 0.0), np.eye(3))
    with pytest.raises(IndexError):
        slam.update([(0, WallObservation(0.0, 1.0, OBS_COV))])
    feature = LineFeature(0.1, 2.0, 1e-4, 0.0, 1e-4, (2.0, -1.0), (2.0, 1.0), 30, 0, 29)
    obs = WallObservation.from_feature(feature)
    assert obs.anchor == (2.0, 0.0)
    assert WallObservation(0.0, 2.0, OBS_COV).anchor == (2.0, 0.0)
