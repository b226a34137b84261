"""The free-space check of relocalization: how much of a scan the map explains from a candidate pose."""

from __future__ import annotations

import numpy as np
import pytest

from pluto.navigation.pose.core import scan_agreement
from pluto.sim.raycast import RayCaster
from tests.navigation.pose.scenes import L_ROOM_WALLS, MAX_RANGE, angles, scan


def test_the_true_pose_explains_the_scan_and_a_shifted_one_does_not() -> None:
    caster = RayCaster(np.array(L_ROOM_WALLS))
    bearings = angles()
    laser = (3.0, 2.0, 0.3)
    ranges = scan(caster, laser, bearings, np.random.default_rng(1))
    shares = scan_agreement(
        caster,
        ranges,
        bearings,
        [laser, (3.6, 2.0, 0.3), (3.0, 2.0, 0.6), (9.0, 2.0, 0.3)],
        max_range=MAX_RANGE,
    )
    assert shares[0] > 0.97
    assert all(share < 0.8 for share in shares[1:])


def test_beams_through_walls_count_against_and_unexplained_obstacles_partly() -> None:
    caster = RayCaster(np.array(L_ROOM_WALLS))
    bearings = angles(181)
    laser = (3.0, 2.0, 0.0)
    ranges = scan(caster, laser, bearings)
    # something not in the map 0.5 m in front of every beam: each counts `unexplained`
    shorter = scan_agreement(caster, np.minimum(ranges, 0.5), bearings, [laser], max_range=MAX_RANGE, unexplained=0.3)
    assert shorter[0] == pytest.approx(0.3)
    # every beam reaching 2 m beyond the map's walls went through them
    longer = scan_agreement(caster, ranges + 2.0, bearings, [laser], max_range=MAX_RANGE)
    assert longer[0] == 0.0
    # invalid readings are left out; none valid: nothing to disagree with
    assert scan_agreement(caster, -np.ones_like(ranges), bearings, [laser], max_range=MAX_RANGE)[0] == 1.0
