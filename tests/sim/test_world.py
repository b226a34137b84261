"""World model and map files: the shipped worlds, movers, and every validation error with its line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pluto.cli.main import main
from pluto.errors import ConfigError
from pluto.sim.raycast import segment_distance
from pluto.sim.world import (
    MAX_BYTES_ENV,
    MAX_WALLS_ENV,
    MAX_WORLD_BYTES,
    MAX_WORLD_WALLS,
    SCHEMA_PATH,
    MapError,
    Mover,
    World,
    available_worlds,
    load_world,
    parse_world,
    world_path,
)

SHIPPED = ["campus", "clutter", "office"]
CLEARANCE = 0.4  # m: the start pose is at least this far from anything


def inside_polygon(point: np.ndarray, polygon: np.ndarray) -> bool:
    """Even-odd rule."""
    x, y = point
    inside = False
    for (x1, y1), (x2, y2) in zip(polygon, np.roll(polygon, -1, axis=0), strict=True):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def clearance(world: World, point: np.ndarray) -> float:
    """Distance (m) from a point to the nearest segment or circle edge; negative inside an obstacle."""
    d = float(segment_distance(point, world.segments()).min())
    if len(world.circles):
        d = min(d, float(np.min(np.hypot(*(world.circles[:, :2] - point).T) - world.circles[:, 2])))
    if any(inside_polygon(point, p.points) for p in world.polygons):
        d = -d
    return d


# -- the shipped worlds --------------------------------------------------------------------------------------------


def test_available_worlds() -> None:
    assert available_worlds() == SHIPPED
    for name in SHIPPED:
        assert world_path(name).is_file()


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_world_loads_and_starts_in_free_space(name: str) -> None:
    world = load_world(name)
    assert world.name == name
    assert world.source == world_path(name)
    assert world.description
    assert len(world.walls) >= 4
    start = np.array(world.start[:2])
    assert clearance(world, start) > CLEARANCE
    xmin, ymin, xmax, ymax = world.bounds()
    assert xmin < start[0] < xmax and ymin < start[1] < ymax


@pytest.mark.parametrize(
    ("name", "width", "height"), [("office", 40.0, 20.0), ("campus", 200.0, 150.0), ("clutter", 8.0, 6.0)]
)
def test_shipped_worlds_have_real_sizes(name: str, width: float, height: float) -> None:
    xmin, ymin, xmax, ymax = load_world(name).bounds()
    assert xmax - xmin == pytest.approx(width, rel=0.1)
    assert ymax - ymin == pytest.approx(height, rel=0.1)


@pytest.mark.parametrize("name", SHIPPED)
def test_people_walk_in_free_space(name: str) -> None:
    world = load_world(name)
    for mover in world.movers:
        lap = mover.path_length() / mover.speed * (1 if mover.loop else 2)
        for t in np.linspace(0.0, lap, 200):
            assert clearance(world, mover.position(t)) > mover.radius


def test_office_and_campus_have_what_they_promise() -> None:
    office = load_world("office")
    assert len(office.movers) == 1 and len(office.polygons) >= 3
    campus = load_world("campus")
    assert campus.gps_origin is not None and len(campus.movers) == 1
    assert any(n.startswith("tree") for n in campus.circle_names)
    assert any(n.startswith("lamp") for n in campus.circle_names)
    clutter = load_world("clutter")
    assert len(clutter.polygons) + len(clutter.circles) >= 12


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_worlds_follow_the_schema(name: str) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(SCHEMA_PATH)).validate(str(world_path(name)))


def test_load_by_path_and_by_name_agree(tmp_path: Path) -> None:
    copy = tmp_path / "copy.xml"
    copy.write_bytes(world_path("clutter").read_bytes())
    by_name = load_world("clutter")
    for source in (copy, str(copy)):
        world = load_world(source)
        assert world.source == copy
        np.testing.assert_array_equal(world.segments(), by_name.segments())
        np.testing.assert_array_equal(world.circles, by_name.circles)


# -- the model -----------------------------------------------------------------------------------------------------

SMALL = """<?xml version="1.0"?>
<world name="small" version="1">
  <description>  A   test
     world. </description>
  <start x="1" y="1.5" theta="0.5"/>
  <walls>
    <wall x1="0" y1="0" x2="10" y2="0" name="south"/>
    <wall x1="10" y1="0" x2="10" y2="5"/>
  </walls>
  <obstacles>
    <circle name="post" x="3" y="3" r="0.25"/>
    <polygon name="tri"><point x="5" y="1"/><point x="6" y="1"/><point x="5.5" y="2"/></polygon>
  </obstacles>
  <movers>
    <person name="pacer" radius="0.3" speed="0.5" loop="false">
      <waypoint x="1" y="4"/><waypoint x="4" y="4"/><waypoint x="4" y="8"/>
    </person>
    <person name="looper" radius="0.2" speed="2" loop="true">
      <waypoint x="0" y="0"/><waypoint x="4" y="0"/><waypoint x="4" y="3"/>
    </person>
  </movers>
  <gps origin_lat="59.3498" origin_lon="18.0707"/>
</world>
"""


def test_parse_a_small_world() -> None:
    world = parse_world(SMALL)
    assert world.name == "small" and world.description == "A test world."
    assert world.start == (1.0, 1.5, 0.5)
    assert world.walls.shape == (2, 4) and world.wall_names == ("south", None)
    assert world.circle_names == ("post",)
    np.testing.assert_array_equal(world.circles, [[3.0, 3.0, 0.25]])
    assert [p.name for p in world.polygons] == ["tri"]
    assert world.segments().shape == (5, 4)  # 2 walls + 3 edges
    np.testing.assert_array_equal(world.segments()[2:], [[5, 1, 6, 1], [6, 1, 5.5, 2], [5.5, 2, 5, 1]])
    assert world.segments() is world.segments()
    assert world.gps_origin == (59.3498, 18.0707, 0.0)
    assert world.source is None
    assert world.bounds() == (-0.2, -0.2, 10.0, 8.3)
    with pytest.raises(ValueError):
        world.walls[0, 0] = 1.0  # read-only


def test_back_and_forth_mover_walks_at_its_speed() -> None:
    pacer = parse_world(SMALL).movers[0]
    assert pacer.path_length() == pytest.approx(7.0)
    np.testing.assert_allclose(pacer.position(0.0), [1, 4])
    np.testing.assert_allclose(pacer.position(2.0), [2, 4])  # 0.5 m/s for 2 s
    np.testing.assert_allclose(pacer.position(6.0), [4, 4])  # at the corner after 3 m
    np.testing.assert_allclose(pacer.position(14.0), [4, 8])  # the end after 7 m
    np.testing.assert_allclose(pacer.position(16.0), [4, 7])  # coming back
    np.testing.assert_allclose(pacer.position(28.0), [1, 4])  # back at the start after 14 m
    np.testing.assert_allclose(pacer.position(30.0), [2, 4])
    dt = 0.01
    for t in np.linspace(0.0, 40.0, 37):
        step = np.linalg.norm(pacer.position(t + dt) - pacer.position(t))
        assert step <= pacer.speed * dt + 1e-9


def test_looping_mover_wraps_back_to_the_start() -> None:
    looper = parse_world(SMALL).movers[1]
    assert looper.path_length() == pytest.approx(12.0)  # 4 + 3 + 5 back to the start
    np.testing.assert_allclose(looper.position(1.0), [2, 0])
    np.testing.assert_allclose(looper.position(3.5), [4, 3])
    np.testing.assert_allclose(looper.position(6.0), [0, 0], atol=1e-12)  # a lap takes 12 m / 2 m/s
    np.testing.assert_allclose(looper.position(6.0 + 1.0), [2, 0])
    # on the closing leg, from (4, 3) to (0, 0): 1 s after the corner is 2 m along it
    np.testing.assert_allclose(looper.position(4.5), [4 - 1.6, 3 - 1.2])


def test_mover_positions_and_circles() -> None:
    world = parse_world(SMALL)
    positions = world.mover_positions(2.0)
    np.testing.assert_allclose(positions, [[2, 4], [4, 0]])
    np.testing.assert_allclose(world.mover_circles(2.0), [[2, 4, 0.3], [4, 0, 0.2]])
    empty = World(name="empty", walls=np.zeros((0, 4)))
    assert empty.mover_positions(1.0).shape == (0, 2)
    assert empty.mover_circles(1.0).shape == (0, 3)
    assert empty.segments().shape == (0, 4)


def test_standing_person() -> None:
    still = Mover(name="still", radius=0.3, speed=0.0, loop=False, waypoints=np.array([[1.0, 2.0], [3.0, 2.0]]))
    np.testing.assert_allclose(still.position(100.0), [1, 2])


# -- validation ----------------------------------------------------------------------------------------------------

HERE = "<!--here-->"


def world_doc(walls: str = '<wall x1="0" y1="0" x2="1" y2="0"/>', extra: str = "") -> str:
    return f'<?xml version="1.0"?>\n<world name="w" version="1">\n<walls>\n{walls}\n</walls>\n{extra}\n</world>\n'


BAD = [
    (world_doc('<wal x1="0" y1="0" x2="1" y2="0"/>' + HERE), "unknown element <wal> in <walls>"),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0" z="3"/>' + HERE), "unknown attribute 'z' on <wall>"),
    (world_doc('<wall x1="0" y1="0" x2="1"/>' + HERE), "<wall> is missing attribute 'y2'"),
    (world_doc('<wall x1="0" y1="abc" x2="1" y2="0"/>' + HERE), "attribute 'y1' of <wall> is not a number: 'abc'"),
    (world_doc('<wall x1="1_0" y1="0" x2="1" y2="0"/>' + HERE), "attribute 'x1' of <wall> is not a number"),
    (world_doc('<wall x1="0" y1="0" x2="inf" y2="0"/>' + HERE), "attribute 'x2' of <wall> is not finite"),
    (world_doc('<wall x1="0" y1="NaN" x2="1" y2="0"/>' + HERE), "attribute 'y1' of <wall> is not finite"),
    (world_doc('<wall x1="0" y1="0" x2="1e999" y2="0"/>' + HERE), "attribute 'x2' of <wall> is not finite"),
    (world_doc('<wall x1="2" y1="3" x2="2" y2="3" name="w1"/>' + HERE), "wall 'w1' has zero length"),
    (world_doc('<wall x1="2" y1="3" x2="2.0" y2="3e0"/>' + HERE), "wall has zero length"),
    (
        world_doc(
            extra='<obstacles>\n<polygon name="p">' + HERE + '\n<point x="0" y="0"/><point x="1" y="0"/>'
            "\n</polygon>\n</obstacles>"
        ),
        "polygon 'p' has 2 point(s); it needs at least 3",
    ),
    (
        world_doc(
            extra='<obstacles><polygon name="p">' + HERE + '<point x="0" y="0"/><point x="1" y="0"/>'
            '<point x="1" y="1"/><point x="0" y="0"/></polygon></obstacles>'
        ),
        "the last point repeats the first",
    ),
    (
        world_doc(
            extra='<obstacles><polygon name="p">' + HERE + '<point x="0" y="0"/><point x="1" y="0"/>'
            '<point x="1" y="0"/><point x="1" y="1"/></polygon></obstacles>'
        ),
        "polygon 'p' has two consecutive equal points",
    ),
    (
        world_doc(
            extra='<obstacles><polygon name="p">' + HERE + '<point x="0" y="0"/><point x="1" y="1"/>'
            '<point x="2" y="2"/></polygon></obstacles>'
        ),
        "polygon 'p' has zero area",
    ),
    (
        world_doc(
            extra='<obstacles>\n<circle name="c" x="1" y="1" r="0.5"/>\n<circle name="d" x="1" y="1" r="0"/>'
            + HERE
            + "\n</obstacles>"
        ),
        "attribute 'r' of <circle> must be > 0, got 0",
    ),
    (
        world_doc(extra='<obstacles><circle name="d" x="1" y="1" r="-2"/>' + HERE + "</obstacles>"),
        "attribute 'r' of <circle> must be > 0, got -2",
    ),
    (
        world_doc(
            extra='<movers>\n<person name="p" radius="0" speed="1">' + HERE + '<waypoint x="0" y="0"/>'
            '<waypoint x="1" y="0"/></person>\n</movers>'
        ),
        "attribute 'radius' of <person> must be > 0",
    ),
    (
        world_doc(
            extra='<movers>\n<person name="p" radius="0.3" speed="-1">' + HERE + '<waypoint x="0" y="0"/>'
            '<waypoint x="1" y="0"/></person>\n</movers>'
        ),
        "attribute 'speed' of <person> must be >= 0",
    ),
    (
        world_doc(
            extra='<movers>\n<person name="p" radius="0.3" speed="1">'
            + HERE
            + '\n<waypoint x="0" y="0"/>\n</person>\n</movers>'
        ),
        "person 'p' has 1 waypoint(s); it needs at least 2",
    ),
    (
        world_doc(
            extra='<movers>\n<person name="p" radius="0.3" speed="1">'
            + HERE
            + '<waypoint x="2" y="0"/><waypoint x="2" y="0"/></person>\n</movers>'
        ),
        "person 'p' has a path of zero length",
    ),
    (
        world_doc(
            extra='<movers><person name="p" radius="0.3" speed="1" loop="maybe">'
            + HERE
            + '<waypoint x="0" y="0"/><waypoint x="1" y="0"/></person></movers>'
        ),
        "attribute 'loop' of <person> must be true or false, got 'maybe'",
    ),
    (
        world_doc(
            '<wall x1="0" y1="0" x2="1" y2="0" name="a"/>\n<wall x1="0" y1="0" x2="0" y2="1" name="b"/>',
            extra='<obstacles>\n<circle name="a" x="1" y="1" r="1"/>' + HERE + "\n</obstacles>",
        ),
        "duplicate name 'a' (first used on line 4)",
    ),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0" name=" "/>' + HERE), "<wall> has an empty name"),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0">thick</wall>' + HERE), "unexpected text in <wall>: 'thick'"),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0"/>stray' + HERE), "unexpected text after <wall>: 'stray"),
    (world_doc(extra='<start x="1" y="1"/>\n<start x="2" y="2"/>' + HERE), "more than one <start> in <world>"),
    (world_doc(extra='<gps origin_lat="91" origin_lon="0"/>' + HERE), "'origin_lat' of <gps> must be within [-90"),
    (world_doc(extra='<gps origin_lat="0" origin_lon="-180.5"/>' + HERE), "'origin_lon' of <gps> must be within"),
    (world_doc(extra='<robot x="1"/>' + HERE), "unknown element <robot> in <world>"),
    (world_doc(extra='<start x="1" y="1" heading="0"/>' + HERE), "unknown attribute 'heading' on <start>"),
    ('<?xml version="1.0"?>\n<world name="w" version="1">' + HERE + "\n<obstacles/>\n</world>", "has no <walls>"),
    (
        '<?xml version="1.0"?>\n<world name="w" version="2">' + HERE + "\n<walls/>\n</world>",
        "unsupported map version '2'",
    ),
    (
        '<?xml version="1.0"?>\n<world version="1">' + HERE + "\n<walls/>\n</world>",
        "<world> is missing attribute 'name'",
    ),
    ('<?xml version="1.0"?>\n<map name="m">' + HERE + "\n</map>", "the root element must be <world>, not <map>"),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0">\n</walls>' + HERE), "XML syntax error: mismatched tag"),
    (world_doc('<wall x1="0" y1="0" x2="1" y2="0" x1="2"/>' + HERE), "XML syntax error: duplicate attribute"),
    ("\n\n" + HERE, "XML syntax error: no element found"),
]


@pytest.mark.parametrize(("text", "reason"), BAD, ids=[reason for _, reason in BAD])
def test_map_errors_give_file_line_and_reason(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "bad.xml"
    path.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if HERE in s)
    with pytest.raises(MapError) as caught:
        load_world(path)
    err = caught.value
    assert (err.file, err.line) == (str(path), line), str(err)
    assert reason in err.reason
    assert str(err).startswith(f"{path}:{line}: ")
    assert isinstance(err, ConfigError)


def test_a_valid_variant_of_each_element_is_accepted() -> None:
    text = world_doc(
        '<wall x1=" -1.5 " y1="+2" x2=".5" y2="1E2" name="n"/>',
        extra='<start x="1" y="2"/><gps origin_lat="-90" origin_lon="180" origin_alt="-12.5"/>'
        '<movers><person name="p" radius="0.3" speed="0" loop="1"><waypoint x="0" y="0"/><waypoint x="1" y="0"/>'
        "</person></movers><description/>",
    )
    world = parse_world(text)
    np.testing.assert_array_equal(world.walls, [[-1.5, 2.0, 0.5, 100.0]])
    assert world.start == (1.0, 2.0, 0.0)
    assert world.gps_origin == (-90.0, 180.0, -12.5)
    assert world.movers[0].loop is True
    assert world.description == ""


def test_parse_world_names_the_source_in_errors() -> None:
    with pytest.raises(MapError, match=r"^inline:3: unknown element <walll>"):
        parse_world(world_doc().replace("<walls>", "<walll>").replace("</walls>", "</walll>"), "inline")


def test_missing_file_and_unknown_world(tmp_path: Path) -> None:
    with pytest.raises(MapError, match="no shipped world named 'atlantis'"):
        load_world("atlantis")
    with pytest.raises(MapError, match="cannot read the map"):
        load_world(tmp_path / "nowhere.xml")
    with pytest.raises(MapError, match="no shipped world"):
        world_path("nowhere")


# -- no DTDs, no entities ------------------------------------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE world [
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<world name="&lol3;" version="1"><walls/></world>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE world [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<world name="w" version="1"><description>&secret;</description><walls/></world>
"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE world SYSTEM "http://example.com/world.dtd">
<world name="w" version="1"><walls/></world>
"""


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD])
def test_doctype_and_entities_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "evil.xml"
    path.write_text(text)
    with pytest.raises(MapError, match=r":2: <!DOCTYPE is not allowed") as caught:
        load_world(path)
    assert caught.value.line == 2


def test_doctype_is_refused_in_utf16_too() -> None:
    data = EXTERNAL_ENTITY.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="UTF-16"?>')
    with pytest.raises(MapError, match=r"DTDs and entities are not allowed"):
        parse_world(data.encode("utf-16"))


def test_undeclared_entity_is_a_syntax_error() -> None:
    with pytest.raises(MapError, match=r"^<string>:1: XML syntax error: undefined entity"):
        parse_world('<world name="&x;" version="1"><walls/></world>')


def test_entity_in_a_comment_is_still_refused() -> None:
    with pytest.raises(MapError, match=r"<!ENTITY is not allowed"):
        parse_world(world_doc(extra="<!-- <!ENTITY x 'y'> -->"))


def test_angles_are_radians() -> None:
    world = parse_world(world_doc(extra=f'<start x="0" y="0" theta="{math.pi}"/>'))
    assert world.start[2] == pytest.approx(math.pi)


@pytest.mark.parametrize("where", ['<start x="1e308" y="0" theta="0"/>', '<start x="0" y="-2e6" theta="0"/>'])
def test_absurd_numbers_are_refused_with_their_line(where: str) -> None:
    with pytest.raises(MapError, match=r"is out of range \[-1e6, 1e6\]"):
        parse_world(world_doc(extra=where))


def test_a_huge_map_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.xml"
    wall = '<wall x1="0" y1="0" x2="1" y2="0"/>\n'
    with path.open("w") as file:
        file.write('<world name="huge" version="1"><walls>\n')
        file.write(wall * (MAX_WORLD_BYTES // len(wall) + 1))
        file.write("</walls></world>\n")
    with pytest.raises(MapError, match="larger than 16 MB"):
        load_world(path)


def _walls(count: int) -> str:
    """``count`` short walls, one a line, on a grid (a 1,000 x N block of a city of sheds)."""
    return "\n".join(
        f'<wall x1="{i % 1000}" y1="{i // 1000}" x2="{i % 1000 + 0.5}" y2="{i // 1000}"/>' for i in range(count)
    )


def test_a_map_with_more_walls_than_the_limit_is_refused_at_the_first_one_too_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MAX_WALLS_ENV, raising=False)
    path = tmp_path / "sheds.xml"
    path.write_text(world_doc(_walls(MAX_WORLD_WALLS + 1)))
    with pytest.raises(MapError) as refused:
        load_world(path)
    error = refused.value
    assert error.line == MAX_WORLD_WALLS + 4  # the first wall too many: the document's fourth line is the first wall
    assert "more than 20,000 walls, the limit" in error.reason
    assert f"raise the limit with {MAX_WALLS_ENV}=<walls>" in error.reason  # how, if a map really needs more
    # the limit, raised for a map that needs it
    monkeypatch.setenv(MAX_WALLS_ENV, "25_000")
    assert load_world(path).walls.shape == (MAX_WORLD_WALLS + 1, 4)
    monkeypatch.setenv(MAX_WALLS_ENV, "many")
    with pytest.raises(MapError, match=f"{MAX_WALLS_ENV} must be a whole number > 0, got 'many'"):
        load_world(path)


def test_a_map_at_the_wall_limit_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAX_WALLS_ENV, raising=False)
    path = tmp_path / "sheds.xml"
    path.write_text(world_doc(_walls(MAX_WORLD_WALLS)))
    assert load_world(path).walls.shape == (MAX_WORLD_WALLS, 4)


def test_a_map_of_too_many_elements_of_any_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_WALLS_ENV, "100")  # 500 elements in all
    points = "".join(f'<point x="{np.cos(a):.6f}" y="{np.sin(a):.6f}"/>' for a in np.linspace(0, 6, 600))
    doc = world_doc(extra=f'<obstacles><polygon name="round">{points}</polygon></obstacles>')
    with pytest.raises(MapError, match=rf"more than 500 elements .* raise the limit with {MAX_WALLS_ENV}"):
        parse_world(doc)


def test_the_byte_limit_says_how_to_raise_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "office.xml"
    path.write_text(world_doc(_walls(100)))
    monkeypatch.setenv(MAX_BYTES_ENV, "2000")
    with pytest.raises(MapError, match=f"larger than 2,000 bytes, the limit .* {MAX_BYTES_ENV}=<bytes>"):
        load_world(path)
    monkeypatch.setenv(MAX_BYTES_ENV, str(MAX_WORLD_BYTES))
    assert load_world(path).walls.shape == (100, 4)


def test_pluto_sim_refuses_a_map_of_too_many_walls_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(MAX_WALLS_ENV, raising=False)
    path = tmp_path / "sheds.xml"
    path.write_text(world_doc(_walls(MAX_WORLD_WALLS + 1)))
    assert main(["sim", "--world", str(path)]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"pluto sim: {path}:") and "more than 20,000 walls" in line
