"""A built map against the true walls: how a built wall fits a true one, which walls scans saw, the map's score; a
built map's walls mapped twice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pluto.navigation.slam.mapcheck import parallel_copies, score_map, wall_match, walls_seen

# A 4 m x 3 m room: south, east, north, west.
ROOM = np.array(
    [
        [0.0, 0.0, 4.0, 0.0],
        [4.0, 0.0, 4.0, 3.0],
        [4.0, 3.0, 0.0, 3.0],
        [0.0, 3.0, 0.0, 0.0],
    ]
)


def turned(x0: float, y0: float, length: float, degrees: float) -> list[float]:
    """A segment from (x0, y0) of ``length`` m at ``degrees`` to +x."""
    a = math.radians(degrees)
    return [x0, y0, x0 + length * math.cos(a), y0 + length * math.sin(a)]


def test_wall_match_measures_angle_offset_and_overlap() -> None:
    # 2 m along the south wall, 2 cm inside the room, half of it past the wall's east end
    turn, off, overlap = wall_match([3.0, 0.02, 5.0, 0.02], ROOM[0])
    assert turn == pytest.approx(0.0, abs=1e-9)
    assert off == pytest.approx(0.02)
    assert overlap == pytest.approx(0.5)
    # a wall has no direction: the same segment drawn the other way fits as well
    assert wall_match([5.0, 0.02, 3.0, 0.02], ROOM[0]) == pytest.approx((turn, off, overlap))
    # turned by 1.5° about its start: the far end is 1 m * sin(1.5°) off the line
    turn, off, overlap = wall_match(turned(1.0, 0.0, 1.0, -1.5), ROOM[0])
    assert turn == pytest.approx(1.5)
    assert off == pytest.approx(math.sin(math.radians(1.5)))
    assert overlap == pytest.approx(1.0)
    # across the wall: 90°, and nothing of it along the wall's length
    turn, _, overlap = wall_match([6.0, -1.0, 6.0, 1.0], ROOM[0])
    assert turn == pytest.approx(90.0)
    assert overlap == 0.0


def test_a_wall_is_seen_when_scans_put_enough_points_along_enough_of_it() -> None:
    along_south = np.column_stack((np.linspace(1.0, 2.0, 8), np.full(8, 0.01)))  # 8 points over 1 m
    short_east = np.column_stack((np.full(8, 3.99), np.linspace(1.0, 1.3, 8)))  # 8 points over 0.3 m
    person = np.column_stack((np.linspace(1.8, 2.2, 20), np.full(20, 1.5)))  # in the middle of the room
    scan = np.vstack((along_south, short_east, person))
    assert walls_seen(ROOM, [scan] * 3).tolist() == [True, False, False, False]
    # a glimpse: two scans are not the three a wall needs by default, one is enough when asked for
    assert walls_seen(ROOM, [scan] * 2).tolist() == [False] * 4
    assert walls_seen(ROOM, [scan], min_scans=1).tolist() == [True, False, False, False]
    # the north wall's points split over two scans: neither has enough of them
    north = np.column_stack((np.linspace(0.5, 3.5, 8), np.full(8, 2.99)))
    assert not walls_seen(ROOM, [north[:4], north[4:]], min_scans=1)[2]
    assert walls_seen(ROOM, [north], min_scans=1)[2]
    # points 8 cm off the west wall are not on it, with the default 5 cm tolerance, but are with 10 cm
    west = np.column_stack((np.full(8, 0.08), np.linspace(0.5, 2.5, 8)))
    assert not walls_seen(ROOM, [west] * 3)[3]
    assert walls_seen(ROOM, [west] * 3, tolerance=0.1)[3]
    assert walls_seen(ROOM, []).tolist() == [False] * 4


def test_the_score_counts_the_seen_walls_mapped_and_the_built_walls_on_none() -> None:
    built = np.array(
        [
            [0.5, 0.03, 3.5, 0.03],  # the south wall, 3 cm off
            turned(0.0, 0.5, 2.0, 90.5),  # the west wall, 0.5° off: its far end 1.7 cm off the line
            [0.5, 2.9, 3.5, 2.9],  # 10 cm inside the north wall: a stray
            [1.0, 1.0, 3.0, 2.0],  # across the room: a stray
        ]
    )
    seen = np.array([True, False, True, True])  # the east wall was never seen
    score = score_map(built, ROOM, seen)
    assert (score.built, score.fitting, score.strays) == (4, 2, 2)
    assert (score.seen, score.mapped) == (3, 2)
    assert score.worst_offset == pytest.approx(0.03)
    assert score.worst_angle == pytest.approx(0.5)
    assert score.describe() == (
        "2 of the 3 walls seen mapped within 5 cm and 1° (at worst 3.0 cm, 0.50°); "
        "4 walls in the map, 2 on no true wall"
    )
    # a looser criterion takes the north wall in; without a mask every wall counts
    assert score_map(built, ROOM, seen, max_offset=0.11).mapped == 3
    assert score_map(built, ROOM).seen == 4


def test_a_built_wall_along_two_pieces_of_a_wall_maps_both() -> None:
    pieces = np.array([[0.0, 0.0, 2.0, 0.0], [2.9, 0.0, 5.0, 0.0]])  # a wall with a door between 2.0 and 2.9 m
    score = score_map([[0.2, 0.01, 4.8, -0.01]], pieces)
    assert (score.fitting, score.mapped, score.strays) == (1, 2, 0)
    assert score_map(np.zeros((0, 4)), pieces).mapped == 0


def test_bad_input_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="seen has 3 values for 4 walls"):
        score_map(ROOM, ROOM, [True, True, True])
    with pytest.raises(ValueError, match="finite"):
        score_map([[0.0, 0.0, math.nan, 1.0]], ROOM)
    with pytest.raises(ValueError, match="finite"):
        walls_seen(ROOM, [[[math.inf, 0.0]]])
    with pytest.raises(ValueError, match="tolerance"):
        walls_seen(ROOM, [], tolerance=0.0)


def test_a_wall_mapped_twice_is_a_copy_and_a_thin_wall_or_a_corridor_is_not() -> None:
    walls = np.array(
        [
            [0.0, 0.0, 6.0, 0.0],  # a corridor's south wall, seen from the north
            [1.0, 0.04, 4.0, 0.06],  # the same wall mapped again 4-6 cm off: a copy
            [0.0, 2.0, 6.0, 2.0],  # the corridor's north wall, seen from the south
            [0.0, 2.08, 6.0, 2.08],  # its other face, 8 cm away, seen from the room behind it
            [2.0, -0.2, 5.0, -0.2],  # 20 cm away: another wall
            [7.0, 0.03, 9.0, 0.03],  # on the south wall's line but past its end: no overlap
            [1.0, 0.05, 4.0, 0.05 + 3.0 * math.tan(math.radians(10.0))],  # turned 10°
        ]
    )
    north, south = (0.0, 1.0), (0.0, -1.0)
    facing = np.array([north, north, south, north, north, north, north])
    assert parallel_copies(walls, facing) == [(0, 1)]
    # a wall whose side is not known is tested against both sides
    assert (2, 3) in parallel_copies(walls, np.vstack((facing[:3], [[0.0, 0.0]], facing[4:])))
    assert parallel_copies(walls, facing, distance=0.03) == []


def test_copies_are_counted_where_loops_closed_only_when_asked() -> None:
    walls = np.array([[0.0, 0.0, 6.0, 0.0], [1.0, 0.05, 4.0, 0.05], [30.0, 0.0, 36.0, 0.0], [31.0, 0.05, 34.0, 0.05]])
    facing = np.tile([0.0, 1.0], (4, 1))
    assert parallel_copies(walls, facing) == [(0, 1), (2, 3)]
    assert parallel_copies(walls, facing, near=[[33.0, 1.0]], radius=2.0) == [(2, 3)]
    assert parallel_copies(walls, facing, near=np.zeros((0, 2))) == []
    with pytest.raises(ValueError, match="facing"):
        parallel_copies(walls, facing[:3])
    with pytest.raises(ValueError, match="finite"):
        parallel_copies(walls, facing, near=[[math.nan, 0.0]])
    with pytest.raises(ValueError, match="distance"):
        parallel_copies(walls, facing, distance=0.0)
