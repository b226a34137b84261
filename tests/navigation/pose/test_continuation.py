"""A restarted pose module continues from its saved filter: widened for the time lost, moved by the dead reckoning
since, searched for around that estimate (never the whole map first) if the scan does not match there; the module
does it on a restart and says so."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.navigation.pose import tracker as tracker_module
from pluto.navigation.pose.core import PoseFilter, PoseFilterParams
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.module import PoseModule, PoseModuleParams
from pluto.navigation.pose.tracker import PoseTracker, PoseTrackerState
from pluto.runtime import persist
from pluto.sim.raycast import RayCaster
from tests.helpers import wait_until
from tests.navigation.pose.scenes import L_ROOM, L_ROOM_WALLS, MAX_RANGE, angles, laser_of, scan

ROOM = "".join(f'<wall x1="{a}" y1="{b}" x2="{c}" y2="{d}"/>' for a, b, c, d in L_ROOM_WALLS)
DRIFT = (-1.0, 0.5)
"""The dead reckoning's frame is the map's shifted by this much (m): its poses are not the map's."""
START = (1.5, 1.5, 0.0)
"""The world's start: where localization's corrected pose is if its correction was lost."""


def laser_scan(robot: tuple[float, float, float], t: float) -> msgs.LaserScan:
    bearings = angles()
    ranges = scan(RayCaster(np.array(L_ROOM_WALLS)), laser_of(robot), bearings)
    return msgs.LaserScan(
        stamp=t, ranges=ranges.tolist(), angles=bearings.tolist(), count=len(bearings), max_range=MAX_RANGE
    )


def dead_reckoned(robot: tuple[float, float, float], t: float) -> msgs.PoseEstimate:
    """The dead-reckoned laser pose (``Localization/Laser_Dead-Reckoning``) of a robot at ``robot`` (map frame)."""
    x, y, theta = laser_of(robot)
    return msgs.PoseEstimate(
        stamp=t, pose=[x + DRIFT[0], y + DRIFT[1], 0.9, theta, 0.0, 0.0, 0.0, 0.0], covariance=[0.0] * 9
    )


def corrected(robot: tuple[float, float, float], t: float, setter: int = 1) -> msgs.PoseEstimate:
    """Localization's corrected laser pose (``Localization/Laser_Pose``) of a robot at ``robot``."""
    x, y, theta = laser_of(robot)
    return msgs.PoseEstimate(
        stamp=t,
        pose=[x, y, 0.9, theta, 0.0, 0.0, 0.0, 0.0],
        covariance=[0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.001],
        cmd_flags=setter,
    )


def tracked(robot: tuple[float, float, float], t: float) -> PoseTracker:
    """A tracker that took a scan of a robot at ``robot`` at ``t``, started from its true pose."""
    tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams())
    assert tracker.process(t, laser_scan(robot, t), dead_reckoned(robot, t), corrected(robot, t)) is not None
    return tracker


def distance(pose: Any, robot: tuple[float, float, float]) -> float:
    x, y, _theta = laser_of(robot)
    return math.hypot(pose[0] - x, pose[1] - y)


def test_a_filter_state_round_trips_and_widens_by_its_rate_per_second() -> None:
    params = PoseFilterParams(resume_position_per_s=0.1, resume_heading_per_s=0.02)
    f = PoseFilter((3.0, 2.0, 0.4), np.diag([0.01, 0.02, 0.003]), reference=(2.0, 2.5, 0.0, 0.4, 0, 0, 0.1, 0))
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(f.snapshot()), type=type(f.snapshot()))
    g = PoseFilter.resume(state, params)
    assert g.pose == f.pose and np.array_equal(g.covariance, f.covariance)
    assert g.snapshot().reference == (2.0, 2.5, 0.4, 0.1)
    g.widen(3.0)
    assert np.allclose(g.covariance - f.covariance, np.diag([0.3**2, 0.3**2, 0.06**2]))
    g.widen(-1.0)  # no time lost: nothing
    assert np.allclose(g.covariance - f.covariance, np.diag([0.3**2, 0.3**2, 0.06**2]))
    with pytest.raises(ValueError):
        PoseFilter.resume(msgspec.structs.replace(state, covariance=[math.nan] * 9))


def test_a_resumed_tracker_goes_on_from_its_filter_not_from_localizations_pose(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before, after = (3.0, 2.0, 0.2), (5.5, 2.6, 0.5)
    saved = tracked(before, 1.0).snapshot()
    assert saved is not None and saved.stamp == 1.0
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(saved), type=PoseTrackerState)  # as the file holds it
    tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams())
    tracker.resume(state)
    assert tracker.resuming and tracker.filter is None
    # 3 s later; localization's corrected pose is at the world's start (its correction was lost meanwhile)
    with caplog.at_level(logging.WARNING, logger="pluto.pose"):
        post = tracker.process(4.0, laser_scan(after, 4.0), dead_reckoned(after, 4.0), corrected(START, 4.0))
    assert post is not None and tracker.filter is not None and not tracker.resuming
    assert distance(tracker.filter.pose, after) < 0.02  # the saved filter moved by the dead reckoning since
    assert len(tracker.matched) >= 3 and not tracker.lost and tracker.relocalizations == 0
    assert "continues from its state of t=1.000 s" in caplog.text and "for the 3.000 s lost" in caplog.text
    assert "searching" not in caplog.text


def test_the_resumed_covariance_is_widened_for_the_time_lost() -> None:
    robot = (3.0, 2.0, 0.2)
    saved = tracked(robot, 1.0).snapshot()
    assert saved is not None
    variances = []
    for gap in (0.2, 10.0):
        tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams(max_tilt=0.01))
        tracker.resume(saved)
        tilted = dead_reckoned(robot, 1.0 + gap)
        tilted.pose[7] = 0.1  # not matched: the filter shows its prior
        assert tracker.process(1.0 + gap, laser_scan(robot, 1.0 + gap), tilted, None) is None
        assert tracker.filter is not None
        variances.append(tracker.filter.covariance[0, 0])
    rate = PoseFilterParams().resume_position_per_s
    assert variances[1] - variances[0] == pytest.approx((rate * 10.0) ** 2 - (rate * 0.2) ** 2, rel=1e-6)


def test_a_resumed_estimate_that_does_not_match_is_searched_around_not_the_whole_map(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = (3.0, 2.0, 0.2)
    saved = tracked(before, 1.0).snapshot()
    assert saved is not None
    searches: list[tuple[Any, Any]] = []
    real = tracker_module.relocalize

    def recorded(*args: Any, **kwargs: Any) -> Any:
        searches.append((args[2], kwargs.get("radius")))
        return real(*args, **kwargs)

    monkeypatch.setattr(tracker_module, "relocalize", recorded)
    tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams())
    tracker.resume(saved)
    # the robot was pushed 0.9 m meanwhile (the dead reckoning did not see it): the resumed estimate matches nothing
    pushed = (3.7, 2.6, 0.2)
    with caplog.at_level(logging.INFO, logger="pluto.pose"):
        tracker.process(1.4, laser_scan(pushed, 1.4), dead_reckoned(before, 1.4), corrected(START, 1.4))
    assert len(searches) == 1
    hint, radius = searches[0]
    assert hint is not None and radius is not None  # around the estimate, not the whole map
    assert distance(hint, before) < 0.05 and radius < 5.0
    assert "searching around it" in caplog.text
    assert tracker.relocalizations == 1 and tracker.filter is not None
    assert distance(tracker.filter.pose, pushed) < 0.05


def test_a_pose_set_by_hand_meanwhile_wins_over_the_saved_state(caplog: pytest.LogCaptureFixture) -> None:
    saved = tracked((3.0, 2.0, 0.2), 1.0).snapshot()
    assert saved is not None
    tracker = PoseTracker(WallMap.from_world(L_ROOM), PoseModuleParams())
    tracker.resume(saved)
    there = (8.0, 6.0, 1.0)
    with caplog.at_level(logging.WARNING, logger="pluto.pose"):
        tracker.process(3.0, laser_scan(there, 3.0), dead_reckoned(there, 3.0), corrected(there, 3.0, setter=-1))
    assert tracker.filter is not None and distance(tracker.filter.pose, there) < 0.05
    assert "set by hand" in caplog.text


# -- the module ---------------------------------------------------------------------------------------------------


@pytest.fixture
def room(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "l-room.xml"
    path.write_text(f'<world name="l-room" version="1"><walls>{ROOM}</walls></world>')
    yield str(path)


def posted(bus: Bus, module: PoseModule, robot: tuple[float, float, float], t: float) -> msgs.PoseEstimate:
    """Give the module a scan of ``robot`` at ``t`` (localization's corrected pose at the world's start), step it,
    return its post."""
    seen: list[msgs.PoseEstimate] = []
    posts = bus.create_subscription("Localization/Post_Pose", seen.append, msgs.PoseEstimate, depth=16, current=False)
    module.inputs.add(laser_scan(robot, t), dead_reckoned(robot, t), corrected(START, t))
    module.step(t)
    wait_until(lambda: any(p.stamp == t for p in seen), message="the post")
    posts.close()
    return next(p for p in seen if p.stamp == t)


def test_a_restarted_module_continues_from_its_saved_filter(
    bus: Bus, room: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    params = PoseModuleParams(map=room, autostart=False, use_sim_time=False)
    first = PoseModule(bus, params)
    first.start()
    try:
        # the first scan starts from localization's corrected pose; it is true here
        robot = (3.0, 2.0, 0.2)
        first.inputs.add(laser_scan(robot, 1.0), dead_reckoned(robot, 1.0), corrected(robot, 1.0))
        first.step(1.0)
        assert first.tracker.filter is not None and first.continuation.flush() and first.continuation.saves == 1
    finally:
        first.stop()

    monkeypatch.setenv(persist.RESUME_ENV, "1")  # what the supervisor sets in a restarted process
    second = PoseModule(bus, params)
    second.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.pose"):
            post = posted(bus, second, (5.5, 2.6, 0.5), 4.0)
        assert "resuming the filter saved at t=1.000 s" in caplog.text
        assert distance(post.pose, (5.5, 2.6, 0.5)) < 0.02  # not the world's start localization offered
        assert second.tracker.resumes == 1
    finally:
        second.stop()


def test_a_restart_without_a_usable_state_says_so(
    bus: Bus, room: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    persist.state_path(bus.robot, "pose").write_bytes(b"not a state")
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    module = PoseModule(bus, PoseModuleParams(map=room, autostart=False, use_sim_time=False))
    module.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.pose"):
            post = posted(bus, module, (5.5, 2.6, 0.5), 4.0)
        assert module.continuation.corrupt == 1
        assert "restarted without a saved filter state" in caplog.text
        assert distance(post.pose, START) < 0.3  # localization's corrected pose, the only one there is
    finally:
        module.stop()
