"""The robots of a world file (``<robots>``): where each robot of a simulation of several starts, and its name."""

from __future__ import annotations

import math

import pytest

from pluto.sim.world import SCHEMA_PATH, MapError, RobotPlacement, load_world, parse_world


def world(robots: str, start: str = '<start x="1" y="1"/>') -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<world name="yard" version="1">
  {start}
  <robots>
{robots}
  </robots>
  <walls>
    <wall x1="0" y1="0" x2="20" y2="0"/>
  </walls>
</world>
"""


def test_office_places_four_robots_named_after_the_simulators_robot() -> None:
    office = load_world("office")
    assert len(office.robots) == 4
    fleet = office.fleet(3, "pluto")
    assert [r.name for r in fleet] == ["pluto-1", "pluto-2", "pluto-3"]
    assert fleet[0].pose == (10.0, 10.0, 3.1416) and fleet[1].pose == (16.0, 10.0, 0.0)
    assert all(r.radius == 0.4 for r in fleet)
    assert office.start == (10.0, 9.7, 0.0)  # a single robot still starts at <start>


def test_names_from_the_file_and_made_up_ones_mix() -> None:
    w = parse_world(
        world(
            '<robot name="scout" x="2" y="2" theta="1.5" radius="0.3"/>\n'
            '<robot x="5" y="2"/>\n'
            '<robot name="carrier" x="8" y="2"/>'
        )
    )
    assert w.fleet(3, "yard") == [
        RobotPlacement("scout", 2.0, 2.0, 1.5, 0.3),
        RobotPlacement("yard-2", 5.0, 2.0, 0.0, 0.4),
        RobotPlacement("carrier", 8.0, 2.0, 0.0, 0.4),
    ]
    assert w.fleet(1, "x") == [RobotPlacement("scout", 2.0, 2.0, 1.5, 0.3)]
    xmin, _, xmax, _ = w.bounds()
    assert xmin == 0.0 and xmax == 20.0


def test_a_single_robot_starts_at_the_first_robot_without_a_start() -> None:
    w = parse_world(world('<robot x="3" y="4" theta="0.5"/>', start=""))
    assert w.start == (3.0, 4.0, 0.5)


def test_more_robots_than_the_world_places_is_refused_with_what_to_do() -> None:
    office = load_world("office")
    with pytest.raises(MapError, match=r"places 4 in its <robots>, and 5 robots were asked for: add <robot>"):
        office.fleet(5, "pluto")
    with pytest.raises(MapError, match="places none"):
        parse_world(world("")).fleet(2, "pluto")


@pytest.mark.parametrize(
    ("robots", "reason"),
    [
        (
            '<robot name="a" x="1" y="1"/>\n<robot name="a" x="5" y="1"/>',
            r":6: duplicate robot name 'a' \(first used on line 5\)",
        ),
        ('<robot name="a/b" x="1" y="1"/>', r":5: robot name 'a/b' must not be empty or contain /"),
        ('<robot name="my robot" x="1" y="1"/>', "must not be empty or contain"),
        ('<robot name="a" x="1" y="1"/>\n<robot x="1.5" y="1"/>', r":6: robot number 2 overlaps robot 'a'"),
        ('<robot x="1" y="1" radius="0"/>', r"attribute 'radius' of <robot> must be in \(0, 10\] m"),
        ('<robot x="1" y="nan"/>', "is not finite"),
        ('<robot x="1" y="1" speed="2"/>', r"unknown attribute 'speed' on <robot> \(expected: x, y, name, theta"),
        ('<robot x="1"/>', "<robot> is missing attribute 'y'"),
    ],
)
def test_bad_robots_are_refused_at_their_line(robots: str, reason: str) -> None:
    with pytest.raises(MapError, match=reason):
        parse_world(world(robots), "yard.xml")


def test_a_made_up_name_that_clashes_with_a_given_one_is_refused() -> None:
    w = parse_world(world('<robot name="yard-2" x="1" y="1"/>\n<robot x="5" y="1"/>'))
    with pytest.raises(MapError, match="would be called 'yard-2': name them"):
        w.fleet(2, "yard")


def test_the_schema_takes_robots_and_refuses_a_bad_name() -> None:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(SCHEMA_PATH))
    schema.validate(world('<robot name="scout" x="2" y="2" theta="1.5" radius="0.3"/>\n<robot x="5" y="2"/>'))
    assert not schema.is_valid(world('<robot name="a b" x="2" y="2"/>'))
    assert not schema.is_valid(world('<robot name="a" x="2" y="2"/><robot name="a" x="5" y="2"/>'))
    assert math.isclose(load_world("office").robots[3].x, 11.6)
