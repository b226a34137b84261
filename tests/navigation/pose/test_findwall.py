"""The original's find wall (docs/design.md): the longest wall in front, its points, (γ, ρ) and covariance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.pose.features import extract_lines
from pluto.navigation.pose.findwall import find_wall
from pluto.sim.raycast import RayCaster
from tests.navigation.pose.scenes import MAX_RANGE, angles, scan

# a corridor 2 m wide and 20 m long, closed 4 m ahead: the side walls are longer than the end wall
CORRIDOR = np.array([[-10.0, -1.0, 4.0, -1.0], [-10.0, 1.0, 4.0, 1.0], [4.0, -1.0, 4.0, 1.0]])


@pytest.mark.parametrize("heading", [0.0, 0.2, -0.35])
def test_the_wall_in_front_wins_over_longer_side_walls(heading: float) -> None:
    bearings = angles(361)
    ranges = scan(RayCaster(CORRIDOR), (0.0, 0.0, heading), bearings, np.random.default_rng(1))
    features = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    assert max(f.length for f in features) > 3.0  # a side wall
    wall = find_wall(features, sector=math.radians(30))
    assert wall is not None
    assert wall.gamma == pytest.approx(-heading, abs=0.01)
    assert wall.rho == pytest.approx(4.0, abs=0.01)
    assert wall.points == wall.feature.points > 10
    data = wall.data()
    assert len(data) == 6 and data[:2] == [wall.gamma, wall.rho]
    assert data[2] == wall.feature.var_alpha and data[3] == data[4] == wall.feature.cov_alpha_r
    assert data[5] == wall.feature.var_r


def test_no_wall_in_the_sector_is_none() -> None:
    bearings = angles(181)
    ranges = scan(RayCaster(CORRIDOR), (0.0, 0.0, 1.0), bearings)  # the end wall is 57° off the normal
    features = extract_lines(ranges, bearings, max_range=MAX_RANGE)
    assert features
    assert find_wall(features, sector=math.radians(30)) is None
    # a wider sector takes in the end wall (57°) and the left wall (33°): the longer one wins
    found = find_wall(features, sector=math.radians(60))
    assert found is not None and found.gamma == pytest.approx(math.pi / 2 - 1.0, abs=0.01)
    assert found.rho == pytest.approx(1.0, abs=0.01)
    assert find_wall([]) is None
