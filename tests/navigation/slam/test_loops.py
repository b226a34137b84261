"""The loop-closing back end: the pose graph, the place check, the scan loop's corrections, and a synthetic loop
closed end to end by the offline runner."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest

from pluto.bus import Bus
from pluto.geometry import compose, relative
from pluto.navigation.slam.association import Pair
from pluto.navigation.slam.backend import LoopBackEnd, LoopWorker, rigid_corrections
from pluto.navigation.slam.compressed import CompressedWallEKF
from pluto.navigation.slam.core import SlamStep, WallSlam
from pluto.navigation.slam.ekf import WallEKF, WallObservation
from pluto.navigation.slam.loops import (
    ClosureCheck,
    GraphCorrection,
    Keyframe,
    LoopParams,
    LoopSearch,
    match_place,
)
from pluto.navigation.slam.metrics import absolute_trajectory_error
from pluto.navigation.slam.module import SlamModule, SlamModuleParams
from pluto.navigation.slam.offline import OdometryNoise, OfflineParams, OfflineResult, run_offline
from pluto.navigation.slam.posegraph import PoseGraph
from pluto.navigation.slam.scanmatch import ScanMatchParams, scan_points
from pluto.sim.raycast import RayCaster
from tests.navigation.slam.loopworld import BEAMS, loop_log, loop_path, loop_world
from tests.navigation.slam.test_module import feed

# -- the pose graph --------------------------------------------------------------------------------------------------


def _square(rng: np.random.Generator, sides: int = 4, steps: int = 40) -> tuple[list, PoseGraph, np.ndarray]:
    """A square drive of 0.5 m steps with noisy measured motions chained into a graph; the true poses."""
    true = [(0.0, 0.0, 0.0)]
    for k in range(sides * steps):
        turn = math.pi / 2 if k % steps == steps - 1 else 0.0
        true.append(compose(true[-1], (0.5, 0.0, turn)))
    graph = PoseGraph()
    graph.add_pose(true[0])
    sigma = np.array([0.02, 0.02, math.radians(1.0)])
    information = np.diag(1.0 / sigma**2)
    estimate = true[0]
    for k in range(1, len(true)):
        z = np.array(relative(true[k - 1], true[k])) + rng.normal(0.0, sigma)
        estimate = compose(estimate, (float(z[0]), float(z[1]), float(z[2])))
        graph.add_pose(estimate)
        graph.add_edge(k - 1, k, z, information)
    return true, graph, information


def test_a_closure_pulls_the_loop_together_and_a_false_one_is_outweighed() -> None:
    true, graph, information = _square(np.random.default_rng(3))
    n = len(true)
    drift = np.hypot(*(graph.poses[-1, :2] - np.array(true[-1][:2])))
    graph.add_edge(0, n - 1, relative(true[0], true[-1]), information, robust=True)
    graph.add_edge(20, 100, (4.0, 3.0, 1.0), information, robust=True)  # a closure to the wrong place
    solution = graph.optimise(iterations=50)
    assert solution.cost < solution.initial_cost
    error = np.hypot(*(solution.poses[:, :2] - np.array(true)[:, :2]).T)
    assert drift > 1.0  # the chain alone ends metres off
    assert error[-1] < 0.1 * drift
    assert solution.weights[0] > 0.9 and solution.weights[1] < 0.01
    assert np.array_equal(solution.poses[0], np.array(true[0]))  # the map's frame stays


def test_edges_are_checked() -> None:
    graph = PoseGraph()
    graph.add_pose((0.0, 0.0, 0.0))
    graph.add_pose((1.0, 0.0, 0.0))
    with pytest.raises(IndexError):
        graph.add_edge(0, 2, (1.0, 0.0, 0.0), np.eye(3))
    with pytest.raises(ValueError, match="positive definite"):
        graph.add_edge(0, 1, (1.0, 0.0, 0.0), -np.eye(3))
    with pytest.raises(ValueError, match="two different"):
        graph.add_edge(1, 1, (1.0, 0.0, 0.0), np.eye(3))
    with pytest.raises(ValueError):
        graph.add_pose((0.0, math.nan, 0.0))
    with pytest.raises(ValueError):
        PoseGraph(kernel=0.0)
    with pytest.raises(ValueError):
        LoopParams(min_inlier_ratio=1.5)


# -- the place check --------------------------------------------------------------------------------------------------

ROOM = [(0.0, 0.0, 8.0, 0.0), (8.0, 0.0, 8.0, 6.0), (8.0, 6.0, 0.0, 6.0), (0.0, 6.0, 0.0, 0.0)]
"""An 8 x 6 m room."""


def _scan_of(walls: list[tuple[float, float, float, float]], pose: tuple[float, float, float]) -> np.ndarray:
    ranges = RayCaster(np.array(walls)).cast(pose[:2], BEAMS + pose[2], 30.0)
    points = scan_points(ranges, BEAMS, 30.0, ScanMatchParams())
    return points[::2].copy()


def _room(pillars: list[tuple[float, float]], door: float) -> list[tuple[float, float, float, float]]:
    """The room with 0.4 m pillars and a doorway 1 m wide at ``door`` along its north wall, opening on a deep room."""
    walls = [*ROOM[:2], (8.0, 6.0, door + 1.0, 6.0), (door, 6.0, 0.0, 6.0), ROOM[3]]
    walls += [(door, 6.0, door, 9.0), (door + 1.0, 6.0, door + 1.0, 9.0), (door, 9.0, door + 1.0, 9.0)]
    for x, y in pillars:
        e, n = x + 0.4, y + 0.4
        walls += [(x, y, e, y), (e, y, e, n), (e, n, x, n), (x, n, x, y)]
    return walls


def test_the_same_place_seen_again_matches() -> None:
    here = _room([(2.0, 1.0), (5.5, 4.2)], door=3.0)
    seen_before = (3.0, 2.5, 0.3)
    now = (3.4, 2.2, 0.45)
    check = match_place(
        _scan_of(here, now),
        [(0.0, 0.0, 0.0)],
        [_scan_of(here, seen_before)],
        [relative(seen_before, compose(now, (0.3, -0.2, 0.05)))],
        LoopParams(),
    )
    assert check.motion is not None, check.reason
    truth = relative(seen_before, now)
    assert math.hypot(check.motion[0] - truth[0], check.motion[1] - truth[1]) < 0.03
    assert abs(check.motion[2] - truth[2]) < math.radians(0.5)


def test_a_similar_looking_but_different_place_is_rejected() -> None:
    """The same room shape with its door and one pillar elsewhere: most of the walls match, but the scans see
    through each other (a wall where the other saw the doorway, a pillar where the other saw floor)."""
    before = _room([(2.0, 1.0), (5.5, 4.2)], door=3.0)
    other = _room([(2.0, 1.0), (4.5, 3.2)], door=5.5)
    seen_before = (3.0, 2.5, 0.3)
    now = (3.0, 2.5, 0.3)
    check = match_place(
        _scan_of(other, now),
        [(0.0, 0.0, 0.0)],
        [_scan_of(before, seen_before)],
        [(0.0, 0.0, 0.0)],
        LoopParams(),
    )
    assert check.motion is None
    assert "seen through" in check.reason or "inliers" in check.reason


def test_a_bare_corridor_closes_nothing() -> None:
    corridor = [(-20.0, -1.5, 40.0, -1.5), (-20.0, 1.5, 40.0, 1.5)]
    check = match_place(
        _scan_of(corridor, (1.0, 0.0, 0.0)),
        [(0.0, 0.0, 0.0)],
        [_scan_of(corridor, (0.0, 0.0, 0.0))],
        [(1.0, 0.0, 0.0)],
        LoopParams(),
        free_space=False,
    )
    assert check.motion is None and "open" in check.reason


# -- the search's consistency ---------------------------------------------------------------------------------------


def _square_keyframes(laps: float = 1.4, side: float = 10.0, step: float = 0.5) -> list[Keyframe]:
    """Keyframes every ``step`` m round a square of ``side`` m (a quarter turn at each corner), with the true motion
    and a covariance of 3 cm and 0.5° per step, so that after a lap the search region is metres wide."""
    poses = [(0.0, 0.0, 0.0)]
    per_side = round(side / step)
    while len(poses) < laps * 4 * per_side:
        turn = math.pi / 2 if len(poses) % per_side == 0 else 0.0
        poses.append(compose(poses[-1], (step, 0.0, turn)))
    covariance = np.diag([0.03**2, 0.03**2, math.radians(0.5) ** 2])
    return [
        Keyframe(
            k,
            k,
            poses[k],
            np.zeros((0, 2)),
            relative(poses[k - 1], poses[k]) if k else (0.0, 0.0, 0.0),
            covariance if k else np.zeros((3, 3)),
            step * k,
        )
        for k in range(len(poses))
    ]


class _Scripted(LoopSearch):
    """A search whose place check is scripted: the keyframes in ``truth`` match their candidate where they truly
    are, those in ``false`` 1.5 m beside it (a place that looks the same, as a scan check could be fooled), every
    other check fails."""

    def __init__(self, frames: list[Keyframe], truth: set[int], false: set[int]) -> None:
        super().__init__()
        self.frames, self.truth, self.false = frames, truth, false

    def _check(
        self, keyframe: Keyframe, candidate: int, estimate: tuple[float, float, float], region: float
    ) -> ClosureCheck:
        covariance = np.diag([0.02**2, 0.02**2, math.radians(0.5) ** 2])
        motion = relative(self.frames[candidate].pose, keyframe.pose)
        if keyframe.index in self.false:
            return ClosureCheck(compose(motion, (1.5, 0.0, 0.0)), covariance, 100, 0.9, 0.01, "")
        if keyframe.index in self.truth:
            return ClosureCheck(motion, covariance, 100, 0.9, 0.01, "")
        return ClosureCheck(None, np.zeros((3, 3)), 0, 0.0, math.nan, "too few inliers")


def test_a_false_closure_no_other_closure_agrees_with_is_rejected() -> None:
    """Back at the start after a lap, the search region is wider than a metre, so a closure waits for a second one
    that makes a consistent cycle with it. A false match (1.5 m off: a place that looks the same) is held and never
    confirmed; the two true ones that follow confirm each other and are the only closures in the graph."""
    frames = _square_keyframes()
    back = 82  # a lap and a keyframe: the search looks for the start here
    search = _Scripted(frames, truth={back + 3, back + 5}, false={back})
    for keyframe in frames:
        search.add(keyframe)
    closures = [(e.first, e.second) for e in search.graph.edges() if e.robust]
    assert search.accepted == 2 and len(closures) == 2
    assert {second for _, second in closures} == {back + 3, back + 5}
    # the graph keeps the true shape: the false match pulled nothing
    assert np.allclose(search.graph.poses[:, :2], np.array([f.pose[:2] for f in frames]), atol=0.02)


def test_a_false_closure_alone_is_dropped() -> None:
    frames = _square_keyframes()
    search = _Scripted(frames, truth=set(), false={82})
    for keyframe in frames:
        search.add(keyframe)
    assert search.accepted == 0 and search.graph.closures == 0


# -- the scan loop's side --------------------------------------------------------------------------------------------


def test_rigid_corrections_carry_what_is_known_relative_to_a_pose() -> None:
    before = np.array([[1.0, 2.0, 0.3], [-4.0, 0.5, -2.0]])
    after = np.array([[1.5, 1.0, 0.7], [-3.0, 1.5, -1.5]])
    motion = rigid_corrections(before, after)
    for b, a, (tx, ty, phi) in zip(before, after, motion, strict=True):
        point = compose(tuple(b), (2.0, -1.0, 0.0))  # something 2 m ahead, 1 m right of the pose
        c, s = math.cos(phi), math.sin(phi)
        moved = (c * point[0] - s * point[1] + tx, s * point[0] + c * point[1] + ty)
        expected = compose(tuple(a), (2.0, -1.0, 0.0))
        assert moved == pytest.approx(expected[:2])


@pytest.mark.parametrize("compressed", [True, False])
def test_a_shift_moves_the_filter_mean_only(compressed: bool) -> None:
    start = (0.0, 0.0, 0.0)
    cov = np.diag([1e-4, 1e-4, 1e-5])
    ekf: CompressedWallEKF | WallEKF = CompressedWallEKF(start, cov) if compressed else WallEKF(start, cov)
    for gamma, rho in ((0.0, 3.0), (1.5, 2.0), (3.0, 4.0)):
        ekf.add_wall(WallObservation(gamma, rho, np.diag([1e-4, 1e-4]), (rho, 0.0)))
    ekf.move((20.0, 0.0, 0.0), np.diag([1e-3, 1e-3, 1e-4]))  # the compressed filter switches its area
    before_x, before_p = ekf.full_state()
    delta = np.arange(before_x.size) * 0.01
    ekf.shift(delta)
    after_x, after_p = ekf.full_state()
    assert after_x == pytest.approx(before_x + delta)
    assert np.array_equal(after_p, before_p)
    assert ekf.pose == pytest.approx(before_x[:3] + delta[:3])
    with pytest.raises(ValueError):
        ekf.shift(np.zeros(2))


def _slam_with_a_wall() -> WallSlam:
    slam = WallSlam(CompressedWallEKF((0.0, 0.0, 0.0), np.diag([1e-4, 1e-4, 1e-6])))
    index = slam.filter.add_wall(WallObservation(0.0, 2.0, np.diag([1e-4, 1e-4]), (2.0, 0.0)))
    line = slam.filter.wall(index)
    slam.segments.add(float(line[0]), float(line[1]), np.array([[2.0, -1.0], [2.0, 1.0]]), viewer=(0.0, 0.0))
    return slam


def test_walls_and_the_pose_move_with_their_keyframes_correction() -> None:
    """A wall seen from keyframe 0 moves with keyframe 0's correction: the keyframe turns 90° about the origin."""
    slam = _slam_with_a_wall()
    backend = LoopBackEnd(slam, keep_trajectory=True)
    step = SlamStep((0.0, 0.0, 0.0), np.eye(3) * 1e-4, (Pair(0, 0, 0.0),), 0.0, (), (), 1, 0)
    first = backend.observe(step, (0.0, 0.0, 0.0), np.zeros((3, 3)), np.zeros((0, 2)))
    assert first is not None and first.index == 0 and backend.keyframes == 1
    backend.apply(GraphCorrection(np.array([[0.0, 0.0, math.pi / 2]]), 1))
    x1, y1, x2, y2 = slam.segments.segments[0]
    assert {(round(x1, 6), round(y1, 6)), (round(x2, 6), round(y2, 6))} == {(1.0, 2.0), (-1.0, 2.0)}
    alpha, rho = slam.filter.wall(0)
    assert math.cos(alpha) * 0.0 + math.sin(alpha) * 2.0 == pytest.approx(rho)  # (0, 2) is on the moved line
    assert slam.filter.pose == pytest.approx([0.0, 0.0, math.pi / 2])
    assert backend.trajectory()[0] == pytest.approx([0.0, 0.0, math.pi / 2])
    with pytest.raises(ValueError):
        backend.apply(GraphCorrection(np.zeros((3, 3)), 0))


def _drive(
    backend: LoopBackEnd, poses: list[tuple[float, float, float]], fronts: list[tuple[float, float, float]]
) -> list[Keyframe]:
    """Steps of a filter at ``poses`` whose front end says ``fronts`` (2 cm and 0.5° of increment noise); the
    keyframes made."""
    increment = np.diag([0.02**2, 0.02**2, math.radians(0.5) ** 2])
    made = []
    for pose, front in zip(poses, fronts, strict=True):
        step = SlamStep(pose, np.eye(3) * 1e-4, (), 0.0, (), (), 0, 0)
        keyframe = backend.observe(step, front, increment, np.zeros((0, 2)))
        if keyframe is not None:
            made.append(keyframe)
    return made


def test_the_chain_follows_the_front_ends_motion_not_the_filters_corrections() -> None:
    """The filter's pose goes 1.5 cm to either side of the front end's, scan after scan (the walls' corrections as
    lines are paired; within the jump gate): the keyframes' motions and the trajectory are the front end's."""
    fronts = [(0.1 * k, 0.0, 0.0) for k in range(30)]
    poses = [(0.1 * k, 0.015 * (-1) ** k, 0.0) for k in range(30)]
    backend = LoopBackEnd(_slam_with_a_wall(), keep_trajectory=True)
    made = _drive(backend, poses, fronts)
    assert backend.jumps == 0 and len(made) == 6
    for keyframe in made[1:]:
        assert keyframe.motion == pytest.approx((0.5, 0.0, 0.0), abs=1e-12)
    assert np.allclose(backend.trajectory(np.array([[0.5 * k, 0.0, 0.0] for k in range(6)])), fronts, atol=1e-12)


def test_without_a_front_end_the_chain_follows_the_filter_but_not_its_jumps() -> None:
    """No scan matching: the motion given is the dead reckoning's, which the walls correct, so the chain is the
    filter's. The filter jumps 1 m sideways at scan 12 (it paired walls from long ago): the chain of keyframes and
    the trajectory on it follow the dead reckoning over that scan, and go on with the filter's motion after it."""
    fronts = [(0.1 * k, 0.0, 0.0) for k in range(30)]
    poses = [(0.1 * k, 0.0 if k < 12 else 1.0, 0.0) for k in range(30)]
    backend = LoopBackEnd(_slam_with_a_wall(), keep_trajectory=True, front_end=False)
    search = LoopSearch()
    for keyframe in _drive(backend, poses, fronts):
        assert search.add(keyframe) is None  # no place seen twice
    assert backend.jumps == 1
    steps = np.hypot(*np.diff(backend.trajectory(search.graph.poses)[:, :2], axis=0).T)
    assert steps.max() == pytest.approx(0.1, abs=1e-9)
    assert search.graph.poses[-1] == pytest.approx([2.5, 0.0, 0.0])  # the keyframes 0.5 m apart on the chain
    assert backend.trajectory(search.graph.poses)[-1] == pytest.approx([2.9, 0.0, 0.0])


def test_a_correction_is_no_jump_for_the_next_scan() -> None:
    slam = _slam_with_a_wall()
    backend = LoopBackEnd(slam, keep_trajectory=True)
    _drive(backend, [(0.1 * k, 0.0, 0.0) for k in range(8)], [(0.1 * k, 0.0, 0.0) for k in range(8)])
    assert backend.keyframes == 2
    backend.apply(GraphCorrection(np.array([[0.0, 0.0, 0.0], [0.5, 0.3, 0.1]]), 1))
    # keyframe 1 was made at (0.5, 0, 0) and the last scan at (0.7, 0, 0): it is now 0.2 m ahead of (0.5, 0.3, 0.1)
    last = compose((0.5, 0.3, 0.1), (0.2, 0.0, 0.0))
    moved = [compose(last, (0.1 * k, 0.0, 0.0)) for k in range(1, 5)]
    _drive(backend, moved, [(0.1 * k, 0.0, 0.0) for k in range(8, 12)])
    assert backend.jumps == 0


def test_the_worker_searches_off_the_callers_thread() -> None:
    callers = {threading.get_ident()}
    seen: list[int] = []

    class Watched(LoopSearch):
        def add(self, keyframe: Keyframe) -> GraphCorrection | None:
            seen.append(threading.get_ident())
            return GraphCorrection(np.zeros((keyframe.index + 1, 3)), 0) if keyframe.index == 2 else None

    worker = LoopWorker()
    worker.search = Watched()
    try:
        for k in range(4):
            worker.submit(Keyframe(k, k, (float(k), 0.0, 0.0), np.zeros((0, 2)), (1.0, 0.0, 0.0), np.eye(3), k))
        assert worker.wait_idle(timeout=30.0)
        correction = worker.poll()
        assert correction is not None and correction.poses.shape == (3, 3)
        assert worker.poll() is None  # taken once
        assert len(seen) == 4 and not callers & set(seen)
    finally:
        worker.stop()
    assert not worker.alive


def test_a_failing_search_is_reported_and_the_worker_drops_the_rest() -> None:
    errors: list[BaseException] = []

    class Broken(LoopSearch):
        def add(self, keyframe: Keyframe) -> GraphCorrection | None:
            raise RuntimeError("boom")

    worker = LoopWorker(on_error=errors.append)
    worker.search = Broken()
    try:
        for k in range(3):
            worker.submit(Keyframe(k, k, (0.0, 0.0, 0.0), np.zeros((0, 2)), (0.0, 0.0, 0.0), np.eye(3), 0.0))
        assert worker.wait_idle(timeout=30.0)
    finally:
        worker.stop()
    assert len(errors) == 1 and "boom" in str(errors[0])
    assert worker.poll() is None


# -- a loop closed end to end ----------------------------------------------------------------------------------------

NOISE = OdometryNoise(0.1, 0.02, 0.1, 0.05)
"""Odometry twice as poor as the runner's default: without the front end the loop ends more than a metre off."""


@pytest.fixture(scope="module")
def loop_runs() -> tuple[OfflineResult, OfflineResult]:
    """The loop of :mod:`loopworld` driven 1.25 times round with poor odometry and the scan-matching front end off
    (so the open loop drifts by metres, as a larger building's would), with and without the back end."""
    size = (48.0, 30.0)
    log = loop_log(loop_path(size), loop_world(size), np.random.default_rng(2), max_range=30.0)
    open_loop = run_offline(log, noise=NOISE, seed=2, params=OfflineParams(scan_match=None, loops=None))
    closed = run_offline(log, noise=NOISE, seed=2, params=OfflineParams(scan_match=None))
    return open_loop, closed


def test_a_synthetic_loop_closes(loop_runs: tuple[OfflineResult, OfflineResult]) -> None:
    open_loop, closed = loop_runs
    reference = open_loop.log.reference
    assert reference is not None
    before = absolute_trajectory_error(open_loop.estimate, reference).translation_summary.rmse
    after = absolute_trajectory_error(closed.estimate, reference).translation_summary.rmse
    assert before > 1.0
    assert after < 0.3 * before
    assert closed.search is not None and closed.search.accepted > 0
    # the filter's own trajectory, as it went, is what the smoothing improved on
    assert absolute_trajectory_error(closed.filter_estimate, reference).translation_summary.rmse > after


def test_walls_seen_twice_across_the_closed_loop_are_one(loop_runs: tuple[OfflineResult, OfflineResult]) -> None:
    open_loop, closed = loop_runs
    assert len(open_loop.wall_copies(where_loops_closed=False)) > 0  # the loop left open maps walls twice
    assert closed.backend is not None and closed.backend.merged > 0
    assert closed.closure_places().shape[0] > 0
    assert closed.wall_copies() == [] and closed.wall_copies(where_loops_closed=False) == []


# -- the slam module -------------------------------------------------------------------------------------------------


def test_the_module_hands_keyframes_to_its_worker_and_stops_it(bus: Bus, tmp_path: Path) -> None:
    module = SlamModule(bus, SlamModuleParams(map_file=str(tmp_path / "slam.xml"), use_sim_time=False))
    module.start()
    try:
        feed(module, [(3.0 + 0.1 * k, 2.0, 0.2) for k in range(14)])  # 1.3 m: keyframes every 0.5 m
        backend, worker = module.backend, module.worker
        assert backend is not None and worker is not None and worker.alive
        assert backend.keyframes >= 3
        assert worker.wait_idle(timeout=30.0)
        assert len(worker.search.keyframes) == backend.keyframes
        assert any("loop closing" in note for note in module.notes())
    finally:
        module.stop()
    assert module.worker is None and not worker.alive
