"""The localization core without a bus: interpolation, adjustment, setter, inertial loss, late data, consistency."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.localization.core import (
    DeadReckoning,
    LocalizationParams,
    PoseAdjustment,
    laser_pose,
    robot_of_laser,
)

MOUNT = (0.25, 0.0, 0.9)


def drive_arc(
    dr: DeadReckoning, v: float, omega: float, seconds: float, rate: float = 100.0, dmu: bool = True, t0: float = 0.0
) -> None:
    """Feed exact odometry (and inertial heading) of a constant arc from the origin."""
    n = int(seconds * rate)
    for k in range(n + 1):
        t = t0 + k / rate
        theta = omega * (t - t0)
        if omega == 0:
            x, y = v * (t - t0), 0.0
        else:
            x, y = v / omega * math.sin(theta), v / omega * (1 - math.cos(theta))
        if dmu:
            dr.add_dmu(t, theta, 0.0, 0.0, omega)
        dr.add_odometry(t, x, y, theta)


def test_straight_line_and_covariance_grows() -> None:
    dr = DeadReckoning()
    drive_arc(dr, 1.0, 0.0, 2.0)
    pose = dr.pose()
    assert pose.pose[0] == pytest.approx(2.0, abs=1e-9) and pose.pose[3] == pytest.approx(0.0, abs=1e-12)
    early = dr.pose_at(1.0)
    assert early is not None and early.covariance[0, 0] < pose.covariance[0, 0]
    assert dr.dmu_ok


def test_start_pose_is_applied() -> None:
    dr = DeadReckoning(start=(1.0, 2.0, math.pi / 2))
    drive_arc(dr, 1.0, 0.0, 1.0)
    x, y, _z, theta = dr.pose().pose[:4]
    assert (x, y, theta) == pytest.approx((1.0, 3.0, math.pi / 2), abs=1e-9)


def test_interpolation_to_the_scan_centre_on_an_arc() -> None:
    dr = DeadReckoning()
    drive_arc(dr, 1.0, 0.5, 3.0, rate=50.0)
    t = 1.2345
    laser = dr.scan(t)
    assert laser is not None
    theta = 0.5 * t
    x, y = 2.0 * math.sin(theta), 2.0 * (1 - math.cos(theta))
    truth = laser_pose((x, y, 0.0, theta, 0.0, 0.0), 0.0, 0.0, MOUNT)
    assert math.hypot(laser.pose[0] - truth[0], laser.pose[1] - truth[1]) < 0.002
    assert laser.pose[3] == pytest.approx(theta, abs=1e-6)
    assert len(laser.pose) == 8
    assert dr.scan(10.0) is None  # odometry has not got there yet
    second = dr.scan(1.4345)
    assert second is not None
    assert np.all(np.linalg.eigvalsh(second.increment) >= -1e-15) and second.increment[0, 0] > 0
    with pytest.raises(LookupError):
        dr.scan(1.3)  # older than the previous scan


def test_wrist_is_appended_and_turns_the_laser() -> None:
    dr = DeadReckoning()
    dr.add_wrist(0.0, 0.3, -0.1)
    dr.add_wrist(1.0, 0.5, -0.1)
    drive_arc(dr, 0.0, 0.0, 1.0)
    laser = dr.scan(0.5)
    assert laser is not None
    assert laser.pose[6:] == pytest.approx((0.4, -0.1))
    assert laser.pose[3] == pytest.approx(0.4) and laser.pose[0] == pytest.approx(0.25)
    robot = robot_of_laser(laser.pose, 0.0, 0.0, MOUNT)
    assert robot[:4] == pytest.approx((0.0, 0.0, 0.0, 0.0), abs=1e-12)


def test_posting_moves_the_adjusted_pose_never_dead_reckoning() -> None:
    dr = DeadReckoning()
    adj = PoseAdjustment()
    drive_arc(dr, 1.0, 0.2, 2.0)
    before = dr.pose()
    assert adj.post(dr, 1.0, [5.0, 6.0, 0.0, 1.0, 0.0, 0.0], -1, [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
    after = dr.pose()
    assert after.pose == before.pose  # interface 0 unchanged
    assert adj.setter == -1
    at_post = dr.pose_at(1.0)
    assert at_post is not None
    assert adj.apply(at_post.pose)[:4] == pytest.approx([5.0, 6.0, 0.0, 1.0], abs=1e-9)
    # the absolute covariance restarts at the posted one and grows from there
    cov = np.array(adj.covariance(after.absolute)).reshape(3, 3)
    assert cov[0, 0] > 0.01 - 1e-9 and cov[2, 2] >= 0.001
    assert cov[0, 0] < 0.02  # the posted 0.01 m², plus the θ variance over the ~1 m since and a little growth
    # a laser pose post (setter 1) gives the robot pose behind it
    laser = laser_pose((2.0, 3.0, 0.0, 0.5, 0.0, 0.0), 0.0, 0.0, MOUNT)
    assert adj.post(dr, 2.0, laser, 1)
    assert adj.setter == 1
    assert adj.apply(dr.pose().pose)[:4] == pytest.approx([2.0, 3.0, 0.0, 0.5], abs=1e-9)
    # the pose module stopping: setter 0, no pose
    assert not adj.post(dr, 2.0, [], 0)
    assert adj.setter == 0
    with pytest.raises(ValueError):
        adj.post(dr, 2.0, [1.0, math.nan, 0.0], -1)


def test_losing_the_inertial_unit_falls_back_to_odometry() -> None:
    dr = DeadReckoning()
    drive_arc(dr, 1.0, 0.0, 1.0)  # with the DMU
    assert dr.dmu_ok
    growth_dmu = dr.pose().covariance[2, 2]
    # the DMU stops: heading from odometry, covariance grows faster
    for k in range(1, 101):
        t = 1.0 + k / 100
        dr.add_odometry(t, 1.0 + (t - 1.0), 0.0, 0.0)
    assert not dr.dmu_ok
    assert dr.counters.odometry_only_steps > 40
    assert dr.pose().covariance[2, 2] - growth_dmu > 2 * growth_dmu
    # it comes back without a jump in heading, even if its integrated heading is elsewhere
    dr.add_dmu(2.01, 3.0, 0.0, 0.0, 0.0)
    dr.add_odometry(2.01, 2.01, 0.0, 0.0)
    assert dr.dmu_ok and dr.pose().pose[3] == pytest.approx(0.0, abs=1e-12)


def test_late_and_out_of_order_samples() -> None:
    dr = DeadReckoning()
    assert dr.add_odometry(0.0, 0.0, 0.0, 0.0)
    assert dr.add_odometry(0.2, 0.2, 0.0, 0.0)
    assert not dr.add_odometry(0.1, 0.1, 0.0, 0.0)  # late: dropped
    assert not dr.add_odometry(0.2, 0.2, 0.0, 0.0)  # duplicate
    assert dr.counters.late_odometry == 2
    assert dr.add_odometry(0.6, 0.6, 0.0, 0.0)  # a gap: one longer step
    assert dr.pose().pose[0] == pytest.approx(0.6)
    # inertial states out of order are sorted in
    dr2 = DeadReckoning()
    assert dr2.add_dmu(0.2, 0.2) and dr2.add_dmu(0.0, 0.0) and dr2.add_dmu(0.1, 0.1)
    assert not dr2.add_dmu(0.1, 0.1)
    dr2.add_odometry(0.0, 0.0, 0.0, 0.0)
    dr2.add_odometry(0.1, 0.05, 0.0, 0.0)
    assert dr2.pose().pose[3] == pytest.approx(0.1)  # the inertial heading, not the odometry's


def test_increment_covariance_sums_to_the_absolute_one() -> None:
    dr = DeadReckoning()
    drive_arc(dr, 1.0, 0.3, 2.0, dmu=False)
    total = dr.increment_covariance(0.0, 2.0)
    assert total == pytest.approx(dr.pose().covariance, rel=1e-9, abs=1e-15)


def test_params_are_checked() -> None:
    with pytest.raises(ValueError):
        LocalizationParams(distance_noise=-1.0)
    with pytest.raises(ValueError):
        DeadReckoning(start=(1.0, 2.0))


def test_incremental_covariance_is_consistent() -> None:
    """NEES of the scan-to-scan increments with odometry noise drawn from the model: the average lies within the
    two-sided 95% chi-square bounds."""
    params = LocalizationParams()
    rng = np.random.default_rng(7)
    dr = DeadReckoning(params)
    rate, scan_every = 100.0, 20
    x = y = th = 0.0  # the true pose
    ox = oy = oth = 0.0  # the odometry
    truth: dict[float, tuple[float, float, float]] = {}
    nees: list[float] = []
    prev_scan: float | None = None
    scans: list[float] = []
    dr.add_odometry(0.0, 0.0, 0.0, 0.0)
    truth[0.0] = (0.0, 0.0, 0.0)
    for k in range(1, 200 * scan_every + 1):
        t = k / rate
        v, omega = 1.0, 0.4 * math.sin(0.05 * t)
        ds, dth = v / rate, omega / rate
        # odometry increments with noise from the model (odometry only: no inertial unit)
        noisy_ds = ds + rng.normal(0.0, params.distance_noise * math.sqrt(ds))
        lateral = rng.normal(0.0, params.lateral_noise * math.sqrt(ds))
        noisy_dth = dth + rng.normal(
            0.0, math.sqrt(params.odometry_heading_noise**2 * abs(dth) + params.odometry_heading_per_distance**2 * ds)
        )
        mid = th + 0.5 * dth
        x += ds * math.cos(mid)
        y += ds * math.sin(mid)
        th += dth
        omid = oth + 0.5 * noisy_dth
        ox += noisy_ds * math.cos(omid) - lateral * math.sin(omid)
        oy += noisy_ds * math.sin(omid) + lateral * math.cos(omid)
        oth += noisy_dth
        dr.add_odometry(t, ox, oy, oth)
        truth[t] = (x, y, th)
        if k % scan_every == 0:
            scans.append(t)
        # a scan is placed once the dead reckoning has integrated its time (odometry only: after the wait for an
        # inertial unit that never comes)
        while scans and (laser := dr.scan(scans[0])) is not None:
            at = scans.pop(0)
            if prev_scan is not None:
                a, b = dr.pose_at(prev_scan), dr.pose_at(at)
                assert a is not None and b is not None
                est = np.array((b.pose[0] - a.pose[0], b.pose[1] - a.pose[1], b.pose[3] - a.pose[3]))
                ta, tb = truth[prev_scan], truth[at]
                # express the truth increment in the dead-reckoning frame: rotate by the heading offset at a
                offset = a.pose[3] - ta[2]
                c, s = math.cos(offset), math.sin(offset)
                tdx, tdy = tb[0] - ta[0], tb[1] - ta[1]
                true_inc = np.array((c * tdx - s * tdy, s * tdx + c * tdy, tb[2] - ta[2]))
                err = est - true_inc
                nees.append(float(err @ np.linalg.solve(laser.increment, err)))
            prev_scan = at
    assert not scans
    n = len(nees)
    mean = float(np.mean(nees))
    # chi-square(3 n) / n two-sided 95% bounds, normal approximation (n large)
    half = 1.96 * math.sqrt(2 * 3 * n) / n
    assert 3 - half < mean < 3 + half, (mean, 3 - half, 3 + half)


def test_still_wheels_mean_no_turn_and_the_gyro_bias_is_learned() -> None:
    """A robot standing still (odometry unchanged) keeps its heading while the gyro's integrated heading drifts; the
    drift rate is taken as the gyro bias and taken off the inertial increments once the robot moves."""
    bias = 0.02  # rad/s
    dr = DeadReckoning(LocalizationParams(bias_min_still=2.0, still_settle=0.5))
    rate = 20.0
    for k in range(int(5 * rate) + 1):  # 5 s still
        t = k / rate
        dr.add_dmu(t, bias * t, rate_z=bias)
        dr.add_odometry(t, 0.0, 0.0, 0.0)
    assert dr.pose().pose[3] == pytest.approx(0.0, abs=1e-12)  # the unit drifted 0.1 rad; the robot did not turn
    assert dr.counters.still_steps == int(5 * rate)
    assert dr.gyro_bias == pytest.approx(bias, rel=1e-9)
    # then a straight run of 2 s at 0.5 m/s: the unit still drifts, the heading does not
    for k in range(1, int(2 * rate) + 1):
        t = 5.0 + k / rate
        dr.add_dmu(t, bias * t, rate_z=bias)
        dr.add_odometry(t, 0.5 * (t - 5.0), 0.0, 0.0)
    pose = dr.pose().pose
    assert pose[3] == pytest.approx(0.0, abs=1e-9) and pose[0] == pytest.approx(1.0, abs=1e-9)


def test_without_enough_stillness_the_inertial_heading_is_taken_as_it_is() -> None:
    dr = DeadReckoning(LocalizationParams(bias_min_still=2.0, still_settle=0.5))
    for k in range(21):  # 1 s still: 0.5 s of it settled, not enough for a bias
        dr.add_dmu(k / 20, 0.02 * k / 20)
        dr.add_odometry(k / 20, 0.0, 0.0, 0.0)
    assert dr.gyro_bias == 0.0
    for k in range(1, 21):  # moving: the unit's whole change is taken
        t = 1.0 + k / 20
        dr.add_dmu(t, 0.02 * t)
        dr.add_odometry(t, t - 1.0, 0.0, 0.0)
    assert dr.pose().pose[3] == pytest.approx(0.02 * 1.0, abs=1e-9)


def test_a_gap_in_the_inertial_states_follows_the_odometrys_turn() -> None:
    """The robot speeds up its turn (ω = t rad/s) while the inertial unit's states are 0.3 s apart: between them the
    heading follows the odometry's shape, anchored to both states, not a straight line."""
    dr = DeadReckoning()
    rate = 20.0
    for k in range(int(1.0 * rate) + 1):
        t = k / rate
        heading = 0.5 * t * t
        if k % 6 == 0:  # a state every 0.3 s
            dr.add_dmu(t, heading)
        dr.add_odometry(t, 0.1 * t, 0.0, heading)
    assert dr.waiting == 2  # 0.95 and 1.0 wait for a state after 0.9
    for t in (0.35, 0.45, 0.5, 0.55):
        pose = dr.pose_at(t)
        assert pose is not None and pose.pose[3] == pytest.approx(0.5 * t * t, abs=1e-9)
    straight = 0.5 * 0.3**2 + (0.45 - 0.3) / 0.3 * (0.5 * 0.6**2 - 0.5 * 0.3**2)
    assert abs(straight - 0.5 * 0.45**2) > 0.01  # what straight interpolation would have made of it


@pytest.mark.parametrize(
    ("covariance", "complaint"),
    [
        ([-1.0, 0, 0, 0, 0.01, 0, 0, 0, 0.001], r"posted covariance\[0\] = -1 is a variance"),
        ([0.01, 0.1, 0, 0.1, 0.01, 0, 0, 0, 0.001], "posted covariance is not positive semi-definite"),
        ([0.01, 0.005, 0, 0, 0.01, 0, 0, 0, 0.001], "posted covariance is not symmetric"),
    ],
)
def test_a_post_whose_covariance_cannot_be_one_changes_nothing(covariance: list[float], complaint: str) -> None:
    dr = DeadReckoning()
    adj = PoseAdjustment()
    drive_arc(dr, 1.0, 0.2, 2.0)
    assert adj.post(dr, 1.0, [5.0, 6.0, 0.0, 1.0, 0.0, 0.0], -1, [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
    before = (adj.setter, adj.dx, adj.dy, adj.alpha, adj.posts, adj.covariance(dr.pose().absolute))
    with pytest.raises(ValueError, match=complaint):
        adj.post(dr, 2.0, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], 1, covariance)
    assert (adj.setter, adj.dx, adj.dy, adj.alpha, adj.posts, adj.covariance(dr.pose().absolute)) == before
