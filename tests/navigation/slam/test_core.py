"""The slam step on a simulated drive: real scans, lines, dead reckoning; a map of the room and a corrected pose."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.slam import AreaParams, CompressedWallEKF, WallEKF, WallObservation
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
