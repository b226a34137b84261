"""The pose module over a log, without the bus: when an estimate that started wrong is back on the reference, and
the module's parameters for a log."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.offline import offline_params, recovery
from pluto.navigation.pose.tracker import PoseModuleParams


def straight(n: int) -> np.ndarray:
    """A reference driving east, 0.5 m a scan."""
    return np.column_stack((0.5 * np.arange(n), np.zeros(n), np.zeros(n)))


def test_recovery_is_the_first_scan_from_which_the_estimate_stays_within_the_limits() -> None:
    reference = straight(10)
    estimate = reference.copy()
    estimate[:3, 1] += 5.0  # a wrong start, found at scan 3
    estimate[5, 2] += math.radians(15.0)  # off again at scan 5 by its heading
    stamps = 2.0 + 1.5 * np.arange(10)
    back = recovery(estimate, reference, stamps)
    assert back.recovered and back.index == 6
    assert back.time == pytest.approx(9.0) and back.distance == pytest.approx(3.0)
    assert "after 9.0 s of log (6 scans, 3.0 m of travel)" in back.describe()
    untimed = recovery(estimate, reference, None)
    assert untimed.index == 6 and untimed.time is None and "cannot time" in untimed.describe()
    estimate[-1, 0] += 0.4
    never = recovery(estimate, reference, stamps)
    assert not never.recovered and "never" in never.describe()


def test_where_the_filter_started_right_is_off_too_the_wrong_start_is_judged_beside_it() -> None:
    reference = straight(8)
    tracking = reference.copy()
    tracking[4:6, 1] += 0.5  # the map is 0.5 m off there: a filter started right is off as well
    estimate = tracking.copy()
    estimate[:2, 0] -= 5.0
    assert recovery(estimate, reference, None).index == 6
    assert recovery(estimate, reference, None, tracking=tracking).index == 2
    estimate[5, 1] += 0.5  # 1 m off the reference and 0.5 m off the other filter: not back
    assert recovery(estimate, reference, None, tracking=tracking).index == 6
    with pytest.raises(ValueError):
        recovery(estimate, reference[:4], None)


def test_a_logs_poses_are_the_lasers_and_its_odometry_noise_is_told_exactly() -> None:
    base = PoseModuleParams()
    params = offline_params(base)
    assert params.filter.laser_mount == (0.0, 0.0)
    assert params.filter.distance_scale_std == params.filter.heading_drift_std == params.filter.turn_scale_std == 0.0
    assert params.filter.gate == base.filter.gate and params.range_sigma == base.range_sigma
