"""A start no scan has confirmed is a guess: the tracker checks the first scans against the map there, says it is
lost at the first scan that contradicts it, and searches the map around it, twice as far at each search, until it
finds the robot; a start the scans confirm is left alone."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from pluto.navigation.pose import tracker as tracker_module
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.tracker import PoseModuleParams, PoseTracker
from tests.navigation.pose.scenes import L_ROOM
from tests.navigation.pose.test_continuation import corrected, dead_reckoned, distance, laser_scan

TRUE_START = (1.5, 1.5, 0.0)
WRONG_START = (1.5, 6.5, math.pi / 2)
"""5 m from the robot and turned by 90°: a pose set by hand in the wrong place."""


def robot_at(k: int) -> tuple[float, float, float]:
    """The robot drives east along the L-room's south wall, 0.1 m a scan."""
    return TRUE_START[0] + 0.1 * k, TRUE_START[1], TRUE_START[2]


def run(start: tuple[float, float, float], scans: int) -> list[tuple[bool, tuple[float, float, float], int]]:
    """Per scan, the filter's lost flag, its laser pose and the relocalizations so far, started from ``start``
    (localization's laser pose at the first scan)."""
    tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams())
    states = []
    for k in range(scans):
        t = 0.2 * k
        robot = robot_at(k)
        tracker.process(t, laser_scan(robot, t), dead_reckoned(robot, t), corrected(start, t) if k == 0 else None)
        assert tracker.filter is not None
        states.append((tracker.filter.lost, tracker.filter.pose, tracker.relocalizations))
    return states


def test_a_wrong_start_is_lost_at_its_first_scan_and_found_within_a_few(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    radii: list[Any] = []
    real = tracker_module.relocalize

    def recorded(*args: Any, **kwargs: Any) -> Any:
        radii.append(kwargs.get("radius"))
        return real(*args, **kwargs)

    monkeypatch.setattr(tracker_module, "relocalize", recorded)
    with caplog.at_level(logging.INFO, logger="pluto.pose"):
        states = run(WRONG_START, 6)
    lost, _pose, found = states[0]
    assert lost and found == 0  # the first scan says so, not lost_after scans later
    assert "not confirmed by the scan" in caplog.text
    assert radii[0] is not None and radii[0] < 5.0  # around the start first...
    assert radii[1] is None or radii[1] > 2 * radii[0] - 0.5  # ...then twice as far
    first_found = next(k for k, (_lost, _pose, n) in enumerate(states) if n)
    assert first_found <= 3
    for k in range(first_found, len(states)):
        lost, pose, _n = states[k]
        assert not lost and distance(pose, robot_at(k)) < 0.1


def test_a_start_the_first_scan_confirms_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    searches: list[Any] = []
    monkeypatch.setattr(tracker_module, "relocalize", lambda *a, **k: searches.append(a))
    states = run(TRUE_START, 5)
    assert not searches
    for k, (lost, pose, found) in enumerate(states):
        assert not lost and found == 0 and distance(pose, robot_at(k)) < 0.05
