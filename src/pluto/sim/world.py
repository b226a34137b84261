"""The simulator's world: walls, obstacles and walking people, read from a map file.

The same map files are the a-priori map of the pose and SLAM modules, so the format is defined once, here, and
described for validators by ``world.xsd`` next to this module (:data:`SCHEMA_PATH`).
This module reads the files; the values they give (:class:`World`, :class:`Polygon`, :class:`Mover`,
:class:`RobotPlacement`) are defined in :mod:`pluto.sim.world_model` and importable from here.

Map format, version 1
---------------------
An XML document; all lengths in metres, angles in radians, in a right-handed world frame (x forward/east,
y left/north, angles counter-clockwise from +x)::

    <world name="office" version="1">
      <description>Free text.</description>                      optional
      <start x="12" y="9.6" theta="0"/>                           optional robot start pose; theta defaults to 0
      <robots>                                                    optional: several robots in one simulation
        <robot name="scout" x="10" y="9.7" theta="3.1416"/>       name, theta (0) and radius (0.4) optional
        <robot x="14" y="9.7"/>
      </robots>
      <walls>                                                     required (may be empty)
        <wall x1="0" y1="0" x2="40" y2="0" name="south"/>         a line segment; name optional
        <wall x1="0" y1="0" x2="0" y2="20" sigma_angle="0.01" sigma_offset="0.02"/>   with its uncertainty
      </walls>
      <obstacles>                                                 optional, any number of polygons and circles
        <polygon name="desk-1">                                   >= 3 points, closed implicitly
          <point x="1" y="1"/> <point x="2.6" y="1"/> <point x="2.6" y="1.8"/>
        </polygon>
        <circle name="pillar" x="4" y="10" r="0.3"/>              a solid disc, r > 0
      </obstacles>
      <movers>                                                    optional
        <person name="alice" radius="0.25" speed="1.2" loop="false">
          <waypoint x="14" y="10.5"/> <waypoint x="38" y="10.5"/> >= 2 waypoints
        </person>
      </movers>
      <gps origin_lat="48.2620" origin_lon="11.6670" origin_alt="480"/>  optional; see below
    </world>

* ``<world>``: ``name`` (required) and ``version`` (required, ``1``). Its children may come in any order, each at
  most once; ``<walls>`` is required. ``xmlns:xsi`` and ``xsi:noNamespaceSchemaLocation`` are allowed on it so a
  file can point at the schema.
* Names (of walls, polygons, circles and people) are unique across the whole world: behaviours and the a-priori
  map refer to things by name. Only a wall may be unnamed.
* A wall has non-zero length. A map made by a mapping module may give each wall's uncertainty: ``sigma_angle``
  (rad), the std dev of its direction, and ``sigma_offset`` (m), the std dev of its position across itself at its
  midpoint (both >= 0, default 0: a wall of an architect's plan is exact).
* A polygon has at least 3 points, no two consecutive points equal (the last point
  must not repeat the first: polygons are closed implicitly), and a non-zero area.
* A person walks its waypoints at a constant ``speed`` (m/s, >= 0) starting at the first waypoint at time 0.
  ``loop="true"`` walks on from the last waypoint back to the first and round again; ``loop="false"`` (the
  default) walks to the last waypoint and back, forever. ``radius`` (m, > 0) is the person's disc for sensors.
* ``<robots>``: where the robots of a simulation of several (``pluto sim --robots N``) start, in order; the
  first N are used (:meth:`World.fleet`). A robot's ``name`` is its robot name on the bus; an unnamed one is called
  ``<prefix>-<i>`` after its place ``i`` in the list (from 1), the prefix being the simulator's own robot name.
  Names are unique among the robots (and apart from the names of things) and may not contain ``/ * $ ? # @`` or
  spaces. ``radius`` (m, > 0, default 0.4: the simulated base's) is the disc the other robots' sensors and bumpers
  meet. Two robots may not start overlapping. Without ``<start>``, a single robot starts where the first one does.
* ``<gps>``: the geodetic position (WGS-84 latitude and longitude in degrees, altitude in m, default 0) of the
  world's origin. With it, the local metric grid is east-north-up: x east, y north.
* Numbers are plain decimals (``12``, ``-0.5``, ``1e3``); ``inf`` and ``nan`` are refused. No other elements or
  attributes are allowed, and no text except in ``<description>``. Comments are fine.
* DTDs and entities are refused outright (``<!DOCTYPE`` or ``<!ENTITY`` anywhere in the file): a map never needs
  them, and refusing them closes the entity-expansion and external-entity attacks without depending on
  ``defusedxml``.
* Sizes: at most :data:`MAX_WORLD_BYTES` (16 MB), checked before parsing, and :data:`MAX_WORLD_WALLS` walls
  (20,000) and five times as many elements of any kind, counted while parsing, which stops at the first one too
  many. Both are far above any real building (the shipped campus has 32 walls; a mapped office floor a few
  hundred); a map that really needs more raises them with ``PLUTO_MAP_MAX_BYTES`` and ``PLUTO_MAP_MAX_WALLS``.

Every problem raises :class:`MapError` with ``"<file>:<line>: <reason>"``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET
from xml.parsers import expat

import numpy as np

from pluto.errors import MapError
from pluto.sim.world_model import ROBOT_RADIUS, Mover, Polygon, RobotPlacement, World

__all__ = [
    "FORMAT_VERSION",
    "MAX_BYTES_ENV",
    "MAX_WALLS_ENV",
    "MAX_WORLD_BYTES",
    "MAX_WORLD_WALLS",
    "ROBOT_RADIUS",
    "SCHEMA_PATH",
    "WORLDS_DIR",
    "MapError",
    "Mover",
    "Polygon",
    "RobotPlacement",
    "World",
    "available_worlds",
    "load_world",
    "parse_world",
    "world_path",
]

FORMAT_VERSION = "1"
"""The map format version this module reads and writes."""

WORLDS_DIR = Path(__file__).with_name("worlds")
"""Directory of the shipped worlds (``<name>.xml``)."""

SCHEMA_PATH = Path(__file__).with_name("world.xsd")
"""The XML Schema of the map format."""

_BAD_ROBOT_CHARS = frozenset("/*$?#@ \t\n")


# -- shipped worlds and loading --------------------------------------------------------------------------------------


def available_worlds() -> list[str]:
    """Names of the shipped worlds, sorted (``['campus', 'clutter', 'office']``)."""
    return sorted(p.stem for p in WORLDS_DIR.glob("*.xml"))


def world_path(name: str) -> Path:
    """Path of the shipped world ``name``.

    Raises:
        MapError: no shipped world has that name.
    """
    if name not in available_worlds():
        raise MapError(f"no shipped world named {name!r} (available: {', '.join(available_worlds())})")
    return WORLDS_DIR / f"{name}.xml"


def load_world(source: str | os.PathLike[str]) -> World:
    """Read a world: a shipped world by name (``'office'``, ``'campus'``, ``'clutter'``) or a map file.

    Args:
        source: a name from :func:`available_worlds`, or the path of a map file: a world file, or the YAML file of
            a ROS ``map_server`` occupancy grid (``.yaml``, ``.yml``), whose occupied cells become walls
            (:func:`pluto.sim.gridmap.grid_walls`).

    Returns:
        The world, with ``source`` set to the file read.

    Raises:
        MapError: the file cannot be read or is not a valid map (``"<file>:<line>: <reason>"``).
    """
    if isinstance(source, str) and source in available_worlds():
        path = world_path(source)
    else:
        path = Path(source)
        if not path.exists() and isinstance(source, str) and not path.suffix and len(path.parts) == 1:
            raise MapError(
                f"no shipped world named {source!r} (available: {', '.join(available_worlds())}) and no such file"
            )
    if path.suffix.lower() in (".yaml", ".yml"):  # a ROS map_server occupancy grid: its occupied cells as walls
        from pluto.sim.gridmap import grid_walls

        grid = grid_walls(path)
        return World(
            name=path.stem,
            walls=grid.walls,
            description=grid.description,
            wall_sigmas=grid.sigmas,
            start=grid.start,
            source=path,
        )
    max_bytes, _ = _size_limits()
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as err:
        raise MapError(f"cannot read the map: {err.strerror or err}", path) from err
    return dataclasses.replace(parse_world(data, os.fspath(path)), source=path)


def parse_world(data: str | bytes, file: str = "<string>") -> World:
    """Parse and validate a map document.

    Args:
        data: the XML document.
        file: the name to give in error messages.

    Returns:
        The world (``source`` None).

    Raises:
        MapError: the document is not a valid map (``"<file>:<line>: <reason>"``), or is larger than
            :data:`MAX_WORLD_BYTES` or has more than :data:`MAX_WORLD_WALLS` walls (or the limits raised by the
            environment, :data:`MAX_BYTES_ENV` and :data:`MAX_WALLS_ENV`).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    max_bytes, max_walls = _size_limits()
    if len(raw) > max_bytes:
        limit = f"{max_bytes // 2**20} MB" if max_bytes % 2**20 == 0 else f"{max_bytes:,} bytes"
        raise MapError(
            f"the map is larger than {limit}, the limit (a building of thousands of walls is well under 1 MB): not "
            f"read. If a map really is that large, raise the limit with {MAX_BYTES_ENV}=<bytes>",
            file,
        )
    root, lines = _parse_xml(raw, file, max_walls)
    return _MapReader(file, lines).world(root)


def _size_limits() -> tuple[int, int]:
    """(bytes, walls): the limits of a map, :data:`MAX_WORLD_BYTES` and :data:`MAX_WORLD_WALLS` or the environment's.

    Raises:
        MapError: a limit in the environment is not a whole number > 0.
    """
    limits = []
    for env, default in ((MAX_BYTES_ENV, MAX_WORLD_BYTES), (MAX_WALLS_ENV, MAX_WORLD_WALLS)):
        text = os.environ.get(env, "").strip().replace("_", "")
        if not text:
            limits.append(default)
            continue
        if not text.isdigit() or int(text) == 0:
            raise MapError(f"{env} must be a whole number > 0, got {os.environ[env]!r}")
        limits.append(int(text))
    return limits[0], limits[1]


# -- XML with line numbers and no DTDs -------------------------------------------------------------------------------


def _parse_xml(data: bytes, file: str, max_walls: int) -> tuple[ET.Element, dict[ET.Element, int]]:
    """The element tree of ``data`` and the line of each element's start tag; parsing stops at the wall past
    ``max_walls``, or the element past five times as many."""
    for marker in (b"<!DOCTYPE", b"<!ENTITY"):
        at = data.find(marker)
        if at >= 0:
            raise MapError(
                f"{marker.decode()} is not allowed in a map file (DTDs and entities are refused)",
                file,
                data.count(b"\n", 0, at) + 1,
            )
    builder = ET.TreeBuilder()
    lines: dict[ET.Element, int] = {}
    parser = expat.ParserCreate()
    max_elements = ELEMENTS_PER_WALL * max_walls
    walls = 0

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal walls
        walls += tag == "wall"
        if walls > max_walls:
            raise MapError(
                f"the map has more than {max_walls:,} walls, the limit (far above any real building: the shipped "
                f"campus has 32, a mapped office floor a few hundred): not read. If a map really has that many, "
                f"raise the limit with {MAX_WALLS_ENV}=<walls>",
                file,
                parser.CurrentLineNumber,
            )
        if len(lines) >= max_elements:
            raise MapError(
                f"the map has more than {max_elements:,} elements (points, circles, waypoints, walls), the limit "
                f"({ELEMENTS_PER_WALL} per wall of {MAX_WALLS_ENV}, {max_walls:,}): not read. If a map really has "
                f"that many, raise the limit with {MAX_WALLS_ENV}=<walls>",
                file,
                parser.CurrentLineNumber,
            )
        lines[builder.start(tag, attrs)] = parser.CurrentLineNumber

    def end(tag: str) -> None:
        builder.end(tag)

    def refuse(*_: Any) -> None:
        # Reached only for encodings the byte scan above cannot see (UTF-16).
        raise MapError("DTDs and entities are not allowed in a map file", file, parser.CurrentLineNumber)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except expat.ExpatError as err:
        raise MapError(f"XML syntax error: {expat.ErrorString(err.code)}", file, err.lineno) from None
    return builder.close(), lines


@dataclass(frozen=True)
class _Spec:
    """What one element may hold."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    text: bool = False


_SPECS: dict[str, _Spec] = {
    "world": _Spec(
        ("name", "version"),
        ("xmlns:xsi", "xsi:noNamespaceSchemaLocation"),
        ("description", "start", "robots", "walls", "obstacles", "movers", "gps"),
    ),
    "description": _Spec(text=True),
    "start": _Spec(("x", "y"), ("theta",)),
    "robots": _Spec(children=("robot",)),
    "robot": _Spec(("x", "y"), ("name", "theta", "radius")),
    "walls": _Spec(children=("wall",)),
    "wall": _Spec(("x1", "y1", "x2", "y2"), ("name", "sigma_angle", "sigma_offset")),
    "obstacles": _Spec(children=("polygon", "circle")),
    "polygon": _Spec(("name",), children=("point",)),
    "point": _Spec(("x", "y")),
    "circle": _Spec(("name", "x", "y", "r")),
    "movers": _Spec(children=("person",)),
    "person": _Spec(("name", "radius", "speed"), ("loop",), children=("waypoint",)),
    "waypoint": _Spec(("x", "y")),
    "gps": _Spec(("origin_lat", "origin_lon"), ("origin_alt",)),
}

MAX_WORLD_BYTES = 16 * 1024 * 1024
"""Largest map file read, bytes (a building of thousands of walls is well under 1 MB; an 83 MB file took 35 s and
1.6 GB to parse). :data:`MAX_BYTES_ENV` raises it."""

MAX_WORLD_WALLS = 20_000
"""Most walls a map may have (the shipped campus has 32, a mapped office floor a few hundred; 300,000 walls took
2 s and 400 MB to load, and make every laser scan and map match slow). :data:`MAX_WALLS_ENV` raises it."""

ELEMENTS_PER_WALL = 5
"""Elements of any kind (walls, polygon points, circles, waypoints) a map may have per wall of its wall limit."""

MAX_BYTES_ENV = "PLUTO_MAP_MAX_BYTES"
"""Environment variable that sets another limit than :data:`MAX_WORLD_BYTES` (bytes), for a map that needs it."""

MAX_WALLS_ENV = "PLUTO_MAP_MAX_WALLS"
"""Environment variable that sets another limit than :data:`MAX_WORLD_WALLS`, for a map that needs it."""

MAX_COORDINATE = 1e6
"""Largest magnitude of any number in a map file (m, m/s, s, degrees): 1,000 km is no building any more."""

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NOT_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_BOOLEAN = {"true": True, "1": True, "false": False, "0": False}


class _MapReader:
    """Validates an element tree against the map format and builds the :class:`World`."""

    def __init__(self, file: str, lines: dict[ET.Element, int]) -> None:
        self.file = file
        self.lines = lines
        self.names: dict[str, int] = {}

    def error(self, element: ET.Element, reason: str) -> MapError:
        return MapError(reason, self.file, self.lines.get(element))

    # structure

    def check(self, element: ET.Element) -> None:
        """Elements, attributes and text of ``element`` and everything in it, against :data:`_SPECS`."""
        spec = _SPECS[element.tag]
        allowed = spec.required + spec.optional
        for attr in element.attrib:
            if attr not in allowed:
                expected = ", ".join(allowed) or "none"
                raise self.error(element, f"unknown attribute {attr!r} on <{element.tag}> (expected: {expected})")
        for attr in spec.required:
            if attr not in element.attrib:
                raise self.error(element, f"<{element.tag}> is missing attribute {attr!r}")
        if not spec.text and element.text and element.text.strip():
            raise self.error(element, f"unexpected text in <{element.tag}>: {element.text.strip()[:40]!r}")
        for child in element:
            if child.tag not in spec.children:
                expected = ", ".join(f"<{c}>" for c in spec.children) or "nothing"
                raise self.error(child, f"unknown element <{child.tag}> in <{element.tag}> (expected: {expected})")
            if child.tail and child.tail.strip():
                raise self.error(child, f"unexpected text after <{child.tag}>: {child.tail.strip()[:40]!r}")
            self.check(child)

    # values

    def number(self, element: ET.Element, attr: str, default: float | None = None) -> float:
        text = element.attrib.get(attr)
        if text is None:
            if default is None:
                raise self.error(element, f"<{element.tag}> is missing attribute {attr!r}")
            return default
        value = text.strip()
        if _NOT_FINITE.fullmatch(value):
            raise self.error(element, f"attribute {attr!r} of <{element.tag}> is not finite: {text!r}")
        if not _NUMBER.fullmatch(value):
            raise self.error(element, f"attribute {attr!r} of <{element.tag}> is not a number: {text!r}")
        number = float(value)
        if not math.isfinite(number):  # 1e999
            raise self.error(element, f"attribute {attr!r} of <{element.tag}> is not finite: {text!r}")
        if abs(number) > MAX_COORDINATE:
            raise self.error(element, f"attribute {attr!r} of <{element.tag}> is out of range [-1e6, 1e6]: {text!r}")
        return number

    def bounded(
        self, element: ET.Element, attr: str, ok: Callable[[float], bool], rule: str, default: float | None = None
    ) -> float:
        value = self.number(element, attr, default)
        if not ok(value):
            raise self.error(element, f"attribute {attr!r} of <{element.tag}> must be {rule}, got {value:g}")
        return value

    def name(self, element: ET.Element) -> str | None:
        name = element.attrib.get("name")
        if name is None:
            return None
        name = name.strip()
        if not name:
            raise self.error(element, f"<{element.tag}> has an empty name")
        line = self.lines.get(element, 0)
        if name in self.names:
            raise self.error(element, f"duplicate name {name!r} (first used on line {self.names[name]})")
        self.names[name] = line
        return name

    def point(self, element: ET.Element) -> tuple[float, float]:
        return self.number(element, "x"), self.number(element, "y")

    # the world

    def world(self, root: ET.Element) -> World:
        if root.tag != "world":
            raise self.error(root, f"the root element must be <world>, not <{root.tag}>")
        self.check(root)
        version = root.attrib["version"].strip()
        if version != FORMAT_VERSION:
            raise self.error(root, f"unsupported map version {version!r} (this reader knows version {FORMAT_VERSION})")
        world_name = root.attrib["name"].strip()
        if not world_name:
            raise self.error(root, "<world> has an empty name")
        sections: dict[str, ET.Element] = {}
        for child in root:
            if child.tag in sections:
                raise self.error(child, f"more than one <{child.tag}> in <world>")
            sections[child.tag] = child
        if "walls" not in sections:
            raise self.error(root, "<world> has no <walls>")

        description = ""
        if "description" in sections:
            description = " ".join((sections["description"].text or "").split())
        robots = self.robots(sections["robots"]) if "robots" in sections else ()
        start = robots[0].pose if robots else (0.0, 0.0, 0.0)
        if "start" in sections:
            s = sections["start"]
            start = (self.number(s, "x"), self.number(s, "y"), self.number(s, "theta", 0.0))

        walls, wall_names, wall_sigmas = self.walls(sections["walls"])
        polygons: list[Polygon] = []
        circles: list[tuple[float, float, float]] = []
        circle_names: list[str] = []
        if "obstacles" in sections:
            for item in sections["obstacles"]:
                if item.tag == "polygon":
                    polygons.append(self.polygon(item))
                else:
                    name = self.name(item)
                    assert name is not None  # required attribute, checked
                    x, y = self.point(item)
                    r = self.bounded(item, "r", lambda v: v > 0.0, "> 0")
                    circles.append((x, y, r))
                    circle_names.append(name)
        movers = tuple(self.person(p) for p in sections["movers"]) if "movers" in sections else ()
        gps_origin = self.gps(sections["gps"]) if "gps" in sections else None
        return World(
            name=world_name,
            description=description,
            walls=np.array(walls).reshape(-1, 4),
            wall_names=tuple(wall_names),
            wall_sigmas=np.array(wall_sigmas).reshape(-1, 2),
            polygons=tuple(polygons),
            circles=np.array(circles).reshape(-1, 3),
            circle_names=tuple(circle_names),
            movers=movers,
            start=start,
            robots=robots,
            gps_origin=gps_origin,
        )

    def robots(self, section: ET.Element) -> tuple[RobotPlacement, ...]:
        """The robots of ``<robots>``: names unique among them and fit for the bus, no two overlapping."""
        robots: list[RobotPlacement] = []
        lines: dict[str, int] = {}
        for element in section:
            name = element.attrib.get("name")
            if name is not None:
                name = name.strip()
                if not name or _BAD_ROBOT_CHARS & set(name):
                    raise self.error(element, f"robot name {name!r} must not be empty or contain / * $ ? # @ or spaces")
                if name in lines:
                    raise self.error(element, f"duplicate robot name {name!r} (first used on line {lines[name]})")
                lines[name] = self.lines.get(element, 0)
            x, y = self.point(element)
            theta = self.number(element, "theta", 0.0)
            radius = self.bounded(element, "radius", lambda v: 0.0 < v <= 10.0, "in (0, 10] m", ROBOT_RADIUS)
            robot = RobotPlacement(name, x, y, theta, radius)
            for i, other in enumerate(robots, 1):
                gap = math.hypot(x - other.x, y - other.y) - radius - other.radius
                if gap < 0.0:
                    this = repr(name) if name else f"number {len(robots) + 1}"
                    which = repr(other.name) if other.name else f"number {i}"
                    raise self.error(element, f"robot {this} overlaps robot {which} at its start")
            robots.append(robot)
        return tuple(robots)

    def walls(
        self, section: ET.Element
    ) -> tuple[list[tuple[float, float, float, float]], list[str | None], list[tuple[float, float]]]:
        walls: list[tuple[float, float, float, float]] = []
        names: list[str | None] = []
        sigmas: list[tuple[float, float]] = []
        for wall in section:
            x1, y1, x2, y2 = (self.number(wall, a) for a in ("x1", "y1", "x2", "y2"))
            name = self.name(wall)
            if x1 == x2 and y1 == y2:
                label = f" {name!r}" if name else ""
                raise self.error(wall, f"wall{label} has zero length (both ends at ({x1:g}, {y1:g}))")
            walls.append((x1, y1, x2, y2))
            names.append(name)
            sigmas.append(
                (
                    self.bounded(wall, "sigma_angle", lambda v: v >= 0.0, ">= 0", 0.0),
                    self.bounded(wall, "sigma_offset", lambda v: v >= 0.0, ">= 0", 0.0),
                )
            )
        return walls, names, sigmas

    def polygon(self, element: ET.Element) -> Polygon:
        name = self.name(element)
        assert name is not None  # required attribute, checked
        points = np.array([self.point(p) for p in element]).reshape(-1, 2)
        if points.shape[0] < 3:
            raise self.error(element, f"polygon {name!r} has {points.shape[0]} point(s); it needs at least 3")
        if np.array_equal(points[0], points[-1]):
            raise self.error(
                element, f"polygon {name!r}: the last point repeats the first (polygons close by themselves)"
            )
        if np.any(np.all(points[1:] == points[:-1], axis=1)):
            raise self.error(element, f"polygon {name!r} has two consecutive equal points")
        x, y = points[:, 0], points[:, 1]
        twice_area = float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
        if abs(twice_area) <= 1e-12:
            raise self.error(element, f"polygon {name!r} has zero area (its points are collinear)")
        return Polygon(name, points)

    def person(self, element: ET.Element) -> Mover:
        name = self.name(element)
        assert name is not None  # required attribute, checked
        radius = self.bounded(element, "radius", lambda v: v > 0.0, "> 0")
        speed = self.bounded(element, "speed", lambda v: v >= 0.0, ">= 0")
        loop_text = element.attrib.get("loop", "false").strip()
        if loop_text not in _BOOLEAN:
            raise self.error(element, f"attribute 'loop' of <person> must be true or false, got {loop_text!r}")
        waypoints = np.array([self.point(w) for w in element]).reshape(-1, 2)
        if waypoints.shape[0] < 2:
            raise self.error(element, f"person {name!r} has {waypoints.shape[0]} waypoint(s); it needs at least 2")
        mover = Mover(name=name, radius=radius, speed=speed, loop=_BOOLEAN[loop_text], waypoints=waypoints)
        if mover.path_length() <= 0.0:
            raise self.error(element, f"person {name!r} has a path of zero length (all waypoints equal)")
        return mover

    def gps(self, element: ET.Element) -> tuple[float, float, float]:
        lat = self.bounded(element, "origin_lat", lambda v: -90.0 <= v <= 90.0, "within [-90, 90] degrees")
        lon = self.bounded(element, "origin_lon", lambda v: -180.0 <= v <= 180.0, "within [-180, 180] degrees")
        alt = self.number(element, "origin_alt", 0.0)
        return lat, lon, alt
