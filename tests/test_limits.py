"""Range checks of values from outside: finite, sane sizes, physical limits of the command interfaces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto import msgs
from pluto.limits import MAX_VECTOR, LimitError, check, check_number, check_pose


def test_good_commands_pass_unchanged() -> None:
    cmd = msgs.ActuatorState(stamp=12.5, velocity=[0.94, -2.0])
    assert check("Base/Drive/Command", cmd) is cmd
    check("avoidance/command", msgs.ActuatorState(cmd_flags=32, position=[12.0, -3.0], velocity=[0.5, 1.0]))
    check("Wrist/Command", msgs.ActuatorState(position=[1.0, -0.5], velocity=[0.5, 0.5]))
    check("Arm/Command", msgs.ActuatorState(position=[math.nan, 0.3, 1.2], force=[2.0]))  # NaN: leave the joint


@pytest.mark.parametrize(
    ("name", "msg", "complaint"),
    [
        ("Base/Drive/Command", msgs.ActuatorState(velocity=[1e308, 0.0]), r"velocity\[0\] = 1e\+308 m/s"),
        ("Base/Drive/Command", msgs.ActuatorState(velocity=[0.1, math.inf]), r"velocity\[1\] = inf rad/s"),
        ("Base/Drive/Command", msgs.ActuatorState(velocity=[math.nan, 0.0]), r"velocity\[0\] = nan"),
        ("Base/Drive/Command", msgs.ActuatorState(velocity=[0.1] * 60_000), "60000 values; at most 2"),
        ("Base/Drive/Command", msgs.ActuatorState(stamp=1e308), "stamp = 1e\\+308"),
        ("Wrist/Command", msgs.ActuatorState(position=[0.0, 2.0]), r"position\[1\] = 2 rad .*\[-1.5708, 1.5708\]"),
        ("Arm/Command", msgs.ActuatorState(position=[math.inf]), r"position\[0\] = inf"),
        ("Arm/Command", msgs.ActuatorState(force=[-1.0]), r"force\[0\] = -1 s"),
        ("drive/command", msgs.ActuatorState(velocity=[5.0, 0.0]), r"velocity\[0\] = 5 m/s"),
        ("Base/Drive/State", msgs.Odometry(x=1e308), "x = 1e\\+308"),
        ("Sick/Scan_mm", msgs.LaserScan(ranges=[1.0] * (MAX_VECTOR + 1)), "at most 4096"),
        ("my/custom", msgs.FVectorState(element=[10**12]), r"element\[0\] = 1e\+12"),
    ],
)
def test_bad_values_are_refused_naming_the_field(name: str, msg: msgs.Message, complaint: str) -> None:
    with pytest.raises(LimitError, match=complaint) as caught:
        check(name, msg)
    assert str(caught.value).startswith(name)


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_a_velocity_command_passes_exactly_when_both_values_are_physical(v: float, w: float) -> None:
    good = abs(v) <= 3.0 and abs(w) <= 2 * math.pi  # False for NaN
    try:
        check("Base/Drive/Command", msgs.ActuatorState(velocity=[v, w]))
    except LimitError:
        assert not good
    else:
        assert good


def test_numbers_and_poses() -> None:
    assert check_number("x", 3) == 3.0
    for bad in (math.nan, math.inf, 2e9, "1", True, None):
        with pytest.raises(LimitError, match=r"^x "):
            check_number("x", bad)
    assert check_pose("start", [1, 2, 0.5]) == [1.0, 2.0, 0.5]
    with pytest.raises(LimitError, match="3 values"):
        check_pose("start", [1, 2])
    with pytest.raises(LimitError, match=r"start\[0\] = 1e\+308"):
        check_pose("start", [1e308, 0, 0])


POST = "Localization/Post_Pose"


def _posted(covariance: list[float]) -> msgs.PoseEstimate:
    return msgs.PoseEstimate(pose=[1.0, 2.0, 0.0, 0.5, 0.0, 0.0], covariance=covariance, cmd_flags=-1)


@pytest.mark.parametrize(
    ("covariance", "complaint"),
    [
        ([-1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], r"covariance\[0\] = -1 is a variance: it is out of range \[0, 1e\+09\]"),
        ([1.0, 0, 0, 0, 1.0, 0, 0, 0, -1e-3], r"covariance\[8\] = -0.001 is a variance"),
        ([1.0, 0.5, 0, 0, 1.0, 0, 0, 0, 1.0], r"covariance is not symmetric: \[1\] = 0.5 but \[3\] = 0"),
        # variances of 1 with a correlation of 2: a negative variance (-1) along x = -y
        ([1.0, 2.0, 0, 2.0, 1.0, 0, 0, 0, 1.0], r"covariance is not positive semi-definite: .*\(-1\)"),
        ([1.0, 0, 0, 1.0], r"covariance takes 9 values \(a 3x3 matrix, row-major\), got 4"),
    ],
)
def test_a_posted_covariance_that_cannot_be_one_is_refused_naming_the_entry(
    covariance: list[float], complaint: str
) -> None:
    with pytest.raises(LimitError, match=f"^{POST} {complaint}"):
        check(POST, _posted(covariance))


def test_a_covariance_within_rounding_of_one_passes() -> None:
    turn = np.array([[math.cos(0.3), -math.sin(0.3), 0], [math.sin(0.3), math.cos(0.3), 0], [0, 0, 1]])
    rotated = turn @ np.diag([0.04, 1e-4, 0.01]) @ turn.T  # as a filter computes it: symmetric up to rounding
    for covariance in (
        [float(v) for v in rotated.ravel()],
        [0.0] * 9,  # a pose set by hand: exact
        [],  # none given
        [1.0, 1.0, 0, 1.0, 1.0, 0, 0, 0, 0],  # singular: fully correlated, no variance in θ
        [1e-4, 0, 0, 0, 1e-4, 0, 0, 0, -1e-15],  # a variance of 0 that rounding made negative
    ):
        check(POST, _posted(covariance))
