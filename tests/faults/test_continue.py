"""A module killed mid-moveto and restarted by the supervisor goes on with what it was doing: the motion module's
restarted process continues the moveto from its saved job, to the goal (it ends "not at the goal" otherwise: the
moveto that was going on is not commanded again)."""

from __future__ import annotations

import math

import pytest

from pluto.bus import Bus
from tests.faults.mission import GOAL_TOLERANCE, FaultMission

pytestmark = [pytest.mark.scenario, pytest.mark.faults]


def test_a_killed_motion_module_goes_on_with_its_moveto(bus: Bus) -> None:
    with FaultMission(bus) as run:
        out = run.inject("motion")
    assert not out.notes, out.notes
    assert math.isfinite(out.back_at), "the motion module did not come back"
    assert out.at_goal, out.describe()
    assert out.distance_to_goal <= GOAL_TOLERANCE, out.describe()
