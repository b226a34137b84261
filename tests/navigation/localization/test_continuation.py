"""A restarted localization service continues from its last estimate: the dead reckoning resumes from a snapshot
with the odometry's motion since composed onto it, widened for the gap; an odometry reset keeps the pose; the module
does it on a restart and says so."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.navigation.localization.core import DeadReckoning, LocalizationParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.runtime import persist
from tests.helpers import wait_until

NO_WAIT = LocalizationParams(dmu_wait=0.0, wrist_wait=0.0)


def arc(t: float) -> tuple[float, float, float]:
    """The base's odometry (its own frame) of a robot driving an arc at 1 m/s and 0.2 rad/s from its origin."""
    theta = 0.2 * t
    return 5.0 * math.sin(theta), 5.0 * (1.0 - math.cos(theta)), theta


def fed(start: tuple[float, float, float], stamps: list[float]) -> DeadReckoning:
    dr = DeadReckoning(NO_WAIT, start)
    for t in stamps:
        dr.add_odometry(t, *arc(t))
    return dr


def test_a_resumed_dead_reckoning_composes_the_odometry_since_onto_the_saved_pose() -> None:
    start = (2.0, -1.0, 0.7)
    whole = fed(start, [i * 0.05 for i in range(201)])  # 0..10 s without a break
    before = fed(start, [i * 0.05 for i in range(81)])  # 0..4 s, then the process dies
    snapshot = before.snapshot()
    assert snapshot is not None and snapshot.stamp == pytest.approx(4.0)
    after = DeadReckoning(NO_WAIT, (50.0, 50.0, 0.0))  # its start pose is ignored: it resumes
    after.resume(snapshot)
    after.add_odometry(10.0, *arc(10.0))  # the first reading after the restart, 6 s later
    got, want = after.pose(), whole.pose()
    assert got.stamp == 10.0
    # the same pose as without the break, to the chord's rounding: the composition does not depend on the path
    assert np.allclose(got.pose[:4], want.pose[:4], atol=1e-9)
    # and more uncertain than the unbroken run by the gap's widening (6 s, 6 m)
    p = NO_WAIT
    extra = (p.resume_position_per_s * 6.0 + p.resume_position_per_m * 6.0) ** 2
    assert got.absolute[0, 0] + got.absolute[1, 1] > want.absolute[0, 0] + want.absolute[1, 1] + extra
    assert got.absolute[2, 2] > want.absolute[2, 2] + (p.resume_heading_per_s * 6.0) ** 2
    # the steps after the first go on as usual
    after.add_odometry(10.05, *arc(10.05))
    assert not after.resuming
    assert math.isclose(after.pose().pose[3], start[2] + 0.2 * 10.05, abs_tol=1e-9)


def test_a_dead_reckoning_resumes_only_before_any_odometry() -> None:
    dr = fed((0.0, 0.0, 0.0), [0.0, 0.1])
    snapshot = dr.snapshot()
    assert snapshot is not None
    with pytest.raises(ValueError, match="before"):
        dr.resume(snapshot)


def test_an_odometry_reset_keeps_the_pose_and_re_anchors() -> None:
    dr = fed((1.0, 1.0, 0.0), [i * 0.05 for i in range(61)])  # 3 s along the arc
    kept = dr.pose().pose
    dr.add_odometry(3.05, 0.0, 0.0, 0.0)  # the base started again: exactly its origin
    assert dr.counters.odometry_resets == 1
    assert np.allclose(dr.pose().pose, kept)
    dr.add_odometry(3.10, 0.05, 0.0, 0.0)  # and moves on 5 cm, straight ahead in its new frame
    x, y, _z, theta = dr.pose().pose[:4]
    assert math.hypot(x - kept[0], y - kept[1]) == pytest.approx(0.05)
    assert theta == pytest.approx(kept[3])
    # a jump farther than the robot can go is a reset too (set_odometry); a fast but possible step is not
    dr.add_odometry(3.15, 20.0, 0.0, 0.0)
    assert dr.counters.odometry_resets == 2
    dr.add_odometry(3.20, 20.1, 0.0, 0.0)
    assert dr.counters.odometry_resets == 2


def drive(bus: Bus, module: LocalizationModule, stamps: list[float], now: float) -> msgs.PoseEstimate:
    """Write the arc's odometry at ``stamps``, step the module at ``now``, return the new ``Localization/Pose``."""
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry, reliable=True)
    pose = bus.create_reader("Localization/Pose", msgs.PoseEstimate)
    for t in stamps:
        x, y, theta = arc(t)
        odometry.write(msgs.Odometry(stamp=t, x=x, y=y, theta=theta, v=1.0, omega=0.2))
    wait_until(
        lambda: module.queued.get(names.BASE_DRIVE_STATE, 0) >= len(stamps),
        message="odometry queued",
    )
    pose.read()
    module.step(now)
    value = pose.wait_for_update(timeout=5)
    bus.release(odometry)
    bus.release(pose)
    return value


def test_a_restarted_module_continues_from_its_last_estimate(
    bus: Bus, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    params = LocalizationModuleParams(autostart=False, start_pose=[3.0, 4.0, 0.5], model=NO_WAIT)
    first = LocalizationModule(bus, params)
    first.start()
    try:
        drive(bus, first, [i * 0.05 for i in range(41)], 2.0)
        # a posted correction (as the pose module's) is part of the estimate
        first.adjustment.post(first.core, 2.0, [3.5, 4.2, 0.0, 0.6, 0.0, 0.0], -1)
        before = first.core.pose()
        corrected = first.adjustment.apply(before.pose)
        saved = first.continuation.saves
    finally:
        first.stop()  # a clean stop saves too
    assert first.continuation.saves > saved

    monkeypatch.setenv(persist.RESUME_ENV, "1")  # what the supervisor sets in a restarted process
    second = LocalizationModule(bus, params)
    second.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.localization"):
            after = drive(bus, second, [5.0], 5.0)
        assert "resumed from the estimate of t=2.000 s" in caplog.text
        assert "odometry since t=2.000 s" in caplog.text
        # where the first instance would be at 5 s: its corrected pose moved by the odometry's motion since 2 s
        reference = DeadReckoning(NO_WAIT, (3.0, 4.0, 0.5))
        for t in [i * 0.05 for i in range(41)] + [5.0]:
            reference.add_odometry(t, *arc(t))
        want = first.adjustment.apply(reference.pose().pose)
        assert np.allclose(after.pose[:4], want[:4], atol=1e-9)
        assert after.cmd_flags == -1  # the setter came along
        assert math.hypot(after.pose[0] - corrected[0], after.pose[1] - corrected[1]) == pytest.approx(
            math.hypot(*(np.array(arc(5.0)[:2]) - np.array(arc(2.0)[:2]))), abs=1e-9
        )
        cov = np.array(after.covariance).reshape(3, 3)
        assert cov[0, 0] + cov[1, 1] > (NO_WAIT.resume_position_per_s * 3.0) ** 2
    finally:
        second.stop()


def test_a_restart_without_a_usable_state_says_so(
    bus: Bus, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    params = LocalizationModuleParams(autostart=False, start_pose=[3.0, 4.0, 0.5], model=NO_WAIT)
    persist.state_path(bus.robot, "localization").write_bytes(b"not a state")
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    module = LocalizationModule(bus, params)
    module.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.localization"):
            after = drive(bus, module, [5.0], 5.0)
        assert module.continuation.corrupt == 1
        assert "corrupt" in caplog.text and "starts at the start pose" in caplog.text
        assert after.pose[:2] == [3.0, 4.0]
    finally:
        module.stop()
