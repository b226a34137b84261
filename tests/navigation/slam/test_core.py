"""The slam step on a simulated drive: real scans, lines, dead reckoning; a map of the room and a corrected pose."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam import AreaParams, CompressedWallEKF, WallEKF, WallObservation
from pluto.navigation.slam.association import AssociationParams
from pluto.navigation.slam.core import WallSlam
from pluto.sim.raycast import segment_distance
from tests.navigation.pose.scenes import L_ROOM_WALLS, Frame, drive

START_COV = np.diag([1e-6, 1e-6, 1e-7])


@pytest.fixture(scope="module")
def frames() -> list[Frame]:
    return list(drive(4, seconds=40.0))


def _run(slam: WallSlam, frames: list[Frame]) -> list[float]:
    errors = []
    for frame in frames:
        step = slam.step(frame.dead_reckoning.pose, frame.dead_reckoning.increment, frame.features)
        errors.append(math.hypot(step.pose[0] - frame.laser[0], step.pose[1] - frame.laser[1]))
    slam.realign()
    return errors


def _start(frames: list[Frame]) -> tuple[float, float, float]:
    p = frames[0].dead_reckoning.pose
    return p[0], p[1], p[3]


def test_slam_maps_the_room_and_corrects_the_dead_reckoning(frames: list[Frame]) -> None:
    slam = WallSlam(WallEKF(_start(frames), START_COV))
    errors = _run(slam, frames)
    last = frames[-1]
    dr_error = math.hypot(last.dead_reckoning.pose[0] - last.laser[0], last.dead_reckoning.pose[1] - last.laser[1])
    assert dr_error > 0.3  # the dead reckoning alone drifts
    assert max(errors) < 0.1 and errors[-1] < 0.05
    segments = slam.segments.segments[slam.segments.active]
    truth = np.array(L_ROOM_WALLS)
    assert len(segments) == len(truth)  # one wall each: pieces seen apart were merged
    # every mapped wall lies on a wall of the room
    for seg in segments:
        for end in seg.reshape(2, 2):
            assert float(segment_distance(end, truth).min()) < 0.1
    # and every wall of the room is mapped over most of its length
    for x1, y1, x2, y2 in truth:
        length = math.hypot(x2 - x1, y2 - y1)
        d = np.array([x2 - x1, y2 - y1]) / length
        covered = np.zeros(int(length * 20))
        for seg in segments:
            ends = seg.reshape(2, 2)
            if float(segment_distance(ends.mean(axis=0), np.array([[x1, y1, x2, y2]]))[0]) > 0.1:
                continue
            e = ends[1] - ends[0]
            if abs(float(d[0] * e[1] - d[1] * e[0])) > 0.05 * float(np.linalg.norm(e)):
                continue  # a crossing wall touching this one
            t = np.clip((ends - [x1, y1]) @ d, 0.0, length)
            covered[int(t.min() * 20) : int(t.max() * 20)] = 1
        assert covered.mean() > 0.8, (x1, y1, x2, y2, covered.mean())


def test_compressed_slam_builds_the_same_map(frames: list[Frame]) -> None:
    full = WallSlam(WallEKF(_start(frames), START_COV))
    comp_filter = CompressedWallEKF(_start(frames), START_COV, area=AreaParams(radius=4.0, switch_distance=1.5))
    comp = WallSlam(comp_filter)
    errors_full = _run(full, frames)
    errors_comp = _run(comp, frames)
    assert comp_filter.full_updates >= 10
    assert comp_filter.area_size < 3 + 2 * len(comp_filter)
    np.testing.assert_allclose(errors_comp, errors_full, atol=1e-8)
    assert comp.segments.segments.shape == full.segments.segments.shape
    np.testing.assert_allclose(comp.segments.segments, full.segments.segments, atol=1e-6)


def test_slam_needs_an_empty_filter() -> None:
    slam = WallEKF((0.0, 0.0, 0.0), START_COV)
    slam.add_wall(WallObservation(0.0, 2.0, START_COV[:2, :2]))
    with pytest.raises(ValueError):
        WallSlam(slam)


def _line(alpha: float, r: float, t0: float, t1: float, var: float = 1e-5) -> LineFeature:
    n = np.array([math.cos(alpha), math.sin(alpha)])
    d = np.array([-math.sin(alpha), math.cos(alpha)])
    start, end = r * n + t0 * d, r * n + t1 * d
    return LineFeature(alpha, r, var, 0.0, var, (float(start[0]), float(start[1])), (float(end[0]), float(end[1])),
                       40, 0, 39)  # fmt: skip


def test_two_overlapping_walls_on_one_line_are_merged_when_the_map_is_tidied() -> None:
    # one wall mapped twice (1.5 cm apart, overlapping) and a wall 30 cm behind it: the first two become one
    slam = WallSlam(WallEKF((0.0, 0.0, 0.0), START_COV))
    for alpha, rho, t0, t1 in ((0.0, 4.0, -2.0, 1.0), (0.0, 4.015, -1.0, 3.0), (0.0, 4.3, -1.0, 1.0)):
        f = _line(alpha, rho, t0, t1)
        index = slam.filter.add_wall(WallObservation.from_feature(f))
        line = slam.filter.wall(index)
        slam.segments.add(float(line[0]), float(line[1]), [f.start, f.end], viewer=(0.0, 0.0))
    assert slam.merge_duplicates() == [(0, 1)]
    assert slam.segments.active.tolist() == [True, False, True]
    lo, hi = slam.segments.extent(0)
    assert lo == pytest.approx(-2.0, abs=0.01) and hi == pytest.approx(3.0, abs=0.01)
    assert slam.merge_duplicates() == []


def test_lines_beyond_the_walls_range_start_no_wall() -> None:
    params = AssociationParams(max_range=12.0, confirm=2)
    slam = WallSlam(WallEKF((0.0, 0.0, 0.0), START_COV), params)
    far, near = _line(0.0, 15.0, -2.0, 2.0), _line(math.pi / 2, 3.0, -2.0, 2.0)
    added = [slam.step((0.0, 0.0, 0.0), np.zeros((3, 3)), [far, near]).added for _ in range(4)]
    assert [a for a in added if a] == [(0,)]  # the near one only
    assert slam.filter.wall(0)[1] == pytest.approx(3.0, abs=1e-3)
