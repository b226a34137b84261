"""The Kalman tracker: velocities estimated, gating, moving versus standing, tracks dropped when unseen."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.movement.follow.track import Tracker, TrackParams, kalman_predict, kalman_update, mahalanobis2


def test_predict_moves_by_the_velocity_and_grows_the_covariance() -> None:
    s = np.array([1.0, 2.0, 0.5, -1.0])
    p = np.eye(4) * 0.01
    s2, p2 = kalman_predict(s, p, 2.0, 1.0)
    assert s2 == pytest.approx([2.0, 0.0, 0.5, -1.0])
    assert np.all(np.diag(p2) > np.diag(p))
    assert p2 == pytest.approx(p2.T)


def test_update_pulls_towards_the_measurement_and_shrinks_the_covariance() -> None:
    s = np.array([0.0, 0.0, 0.0, 0.0])
    p = np.diag([1.0, 1.0, 1.0, 1.0])
    s2, p2 = kalman_update(s, p, np.array([1.0, 0.0]), 0.1)
    assert 0.95 < s2[0] < 1.0 and s2[1] == pytest.approx(0.0)
    assert p2[0, 0] < 0.011
    assert mahalanobis2(s, p, np.array([3.0, 0.0]), 0.1) > mahalanobis2(s, p, np.array([1.0, 0.0]), 0.1)


def test_a_walking_person_gets_their_velocity_and_moves() -> None:
    rng = np.random.default_rng(1)
    tracker = Tracker()
    ids = set()
    for k in range(20):  # 4 s of scans at 5 Hz, walking (0.6, 0.3) m/s
        t = 0.2 * k
        z = np.array([[1.0 + 0.6 * t, 2.0 + 0.3 * t]]) + rng.normal(0.0, 0.03, (1, 2))
        ids.update(tracker.update(z, t))
    assert len(ids) == 1
    track = tracker.tracks[ids.pop()]
    assert track.velocity == pytest.approx((0.6, 0.3), abs=0.1)
    assert track.moved and track.hits == 20
    x, y, _, _ = track.at(4.0, 1.0)  # predicted 0.2 s past the last scan
    assert math.dist((x, y), (1.0 + 0.6 * 4.0, 2.0 + 0.3 * 4.0)) < 0.08


def test_a_standing_person_does_not_move_whatever_the_noise() -> None:
    rng = np.random.default_rng(2)
    tracker = Tracker()
    for k in range(50):
        tracker.update(np.array([[3.0, -1.0]]) + rng.normal(0.0, 0.04, (1, 2)), 0.2 * k)
    (track,) = tracker.tracks.values()
    assert not track.moved
    assert math.hypot(*track.velocity) < 0.15


def test_gating_keeps_two_people_apart() -> None:
    tracker = Tracker()
    a = b = 0
    for k in range(10):  # two people 1.5 m apart, walking towards each other's line, measured in either order
        t = 0.2 * k
        za, zb = [0.5 * t, 0.0], [0.5 * t, 1.5]
        ids = tracker.update(np.array([zb, za] if k % 2 else [za, zb]), t)
        ib, ia = ids if k % 2 else ids[::-1]
        if k == 0:
            a, b = ia, ib
        assert (ia, ib) == (a, b)
    # a measurement 2 m off every track starts a new one
    new = tracker.update(np.array([[10.0, 10.0]]), 2.0)
    assert new[0] not in (a, b)


def test_unseen_tracks_go_after_the_timeout_unless_kept() -> None:
    tracker = Tracker(TrackParams(track_timeout=1.0))
    (a,) = tracker.update(np.array([[1.0, 0.0]]), 0.0)
    (b,) = tracker.update(np.array([[5.0, 0.0]]), 0.0)  # same stamp, another person
    tracker.update(np.zeros((0, 2)), 0.8)
    assert set(tracker.tracks) == {a, b}
    tracker.update(np.zeros((0, 2)), 1.2, keep=frozenset({b}))
    assert set(tracker.tracks) == {b}
    tracker.update(np.zeros((0, 2)), 1.4)
    assert tracker.tracks == {}


def test_the_number_of_tracks_is_bounded() -> None:
    tracker = Tracker(TrackParams(max_tracks=5))
    tracker.update(np.array([[float(i), 0.0] for i in range(0, 40, 4)]), 0.0)
    assert len(tracker.tracks) == 5
