"""The site: the world as it is built, which its map (the world file the robot localizes against) only approximates.

The simulated devices live in the site; the pose and SLAM modules read the map. With an ideal or basic noise profile
the two are the same. With the ``realistic`` one (:mod:`pluto.sim.noise`) the site differs as a real building
differs from its plan:

* **Map mismatch** (``map_offset_std``): every corner of every wall, obstacle outline and round obstacle is moved by
  one smooth random displacement field d(p), a sum of :data:`MISMATCH_WAVES` plane waves per axis with wavelengths
  of :data:`MISMATCH_WAVELENGTHS` metres and random directions and phases, scaled so each component's standard
  deviation is ``map_offset_std``. A smooth field keeps the building whole (walls meeting at a corner still meet,
  a straight wall stays straight) while each wall ends up a few cm off and turned by a fraction of a degree, as a
  surveyed plan and the building disagree; its gradient, not its value, turns the walls.
* **Glass** (``laser_glass``): that share of the walls at least 2 m long get a pane (30-60 % of the wall, somewhere
  along it); the wall is split into the solid part(s) and the pane. The body and the sonar meet the pane like any
  wall; the laser sees it only near its normal (:class:`pluto.hardware.sick.sim.SimLaser`).
* **Surfaces** (``laser_dark_surfaces``): each wall, obstacle and clutter object gets a remission, the share of the
  laser's light it scatters back (1 is a white matte surface): 40-90 % for a wall (paint, plaster), 20-90 % for
  anything else, or 2-6 % for that share of dark surfaces.
* **Clutter** (``clutter_spacing``): objects that are not in the map: boxes (0.3-0.8 m), chairs (0.45 m) and pairs
  of legs (two discs of 6 cm radius, 20 cm apart: a person standing), one per ``clutter_spacing`` metres of wall on
  average. Each stands along a wall (boxes and chairs 2-15 cm from it, legs 30-80 cm) where it leaves the way free:
  a disc of :data:`PASSAGE` m diameter in front of it holds nothing, no wall end (a doorway or a corner) is within
  :data:`DOORWAY_CLEARANCE` m, a robot's start within :data:`START_CLEARANCE` m, a walking person's path within
  :data:`PATH_CLEARANCE` m, and no other object or clutter is touched. A place that fails is drawn again, up to
  :data:`ATTEMPTS` times per object, so a cramped world gets less clutter, never clutter in its doorways.

Everything is drawn from one generator, ``device_rng(seed, "site")``: every device builds the same site from the
same seed, and the same seed gives the same site on every run.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from pluto.sim.noise import IDEAL, NoiseProfile, device_rng
from pluto.sim.raycast import RayCaster, segment_distance
from pluto.sim.world import Polygon, World

__all__ = [
    "ATTEMPTS",
    "DOORWAY_CLEARANCE",
    "MISMATCH_WAVELENGTHS",
    "MISMATCH_WAVES",
    "PASSAGE",
    "PATH_CLEARANCE",
    "START_CLEARANCE",
    "Clutter",
    "Site",
    "Surfaces",
    "build_site",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

MISMATCH_WAVES = 6
"""Plane waves per axis in the displacement field of the map mismatch."""
MISMATCH_WAVELENGTHS = (10.0, 40.0)
"""Range of their wavelengths, m: a wall bends with the building, not on its own."""
PASSAGE = 2.0
"""Diameter of the free disc in front of a clutter object, m (the robot is 0.8 m wide)."""
DOORWAY_CLEARANCE = 1.5
"""Least distance from a clutter object's centre to any wall's end (doorways and corners), m, beyond its own size."""
START_CLEARANCE = 2.0
"""Least distance from a clutter object's centre to a robot's start (the world's, and each of its ``<robots>``), m."""
PATH_CLEARANCE = 1.0
"""Least distance from a clutter object to a walking person's path, m, beyond its own size."""
ATTEMPTS = 30
"""Places drawn per clutter object before giving up on it."""
GLASS_MIN_WALL = 2.0
"""Walls shorter than this (m) never hold a pane."""
WALL_REMISSION = (0.4, 0.9)
"""Range of the remission of a wall that is not dark (paint, plaster); other surfaces 0.2-0.9."""
DEFAULT_REMISSION = 0.5
"""Remission of a surface nobody described (movers, a site built without surfaces)."""

ClutterKind = Literal["box", "chair", "legs"]

_CORNERS = ((-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0))


@dataclass(frozen=True)
class Surfaces:
    """What the laser needs to know of the surfaces of a site, aligned with its ray caster's primitives.

    Attributes:
        remission: ``(N,)`` per segment (walls, then obstacle edges, as :meth:`World.segments`), in (0, 1].
        glass: ``(N,)`` per segment: a glass pane.
        circle_remission: ``(M,)`` per circle.
    """

    remission: FloatArray
    glass: BoolArray
    circle_remission: FloatArray

    def __post_init__(self) -> None:
        if self.remission.shape != self.glass.shape or self.remission.ndim != 1 or self.circle_remission.ndim != 1:
            raise ValueError(
                f"remission and glass must be (N,) alike and circle_remission (M,), got {self.remission.shape}, "
                f"{self.glass.shape} and {self.circle_remission.shape}"
            )

    @classmethod
    def plain(cls, segments: int, circles: int) -> Surfaces:
        """Every surface of :data:`DEFAULT_REMISSION`, no glass."""
        return cls(
            np.full(segments, DEFAULT_REMISSION), np.zeros(segments, dtype=bool), np.full(circles, DEFAULT_REMISSION)
        )


@dataclass(frozen=True)
class Clutter:
    """An object of the site that the map does not have.

    Attributes:
        name: unique in the site (``clutter-<kind>-<n>``).
        kind: ``box``, ``chair`` or ``legs``.
        centre: (x, y), m.
        radius: of a disc holding all of it, m.
    """

    name: str
    kind: ClutterKind
    centre: tuple[float, float]
    radius: float


@dataclass(frozen=True)
class Site:
    """The world as built.

    Attributes:
        world: the site as a :class:`World` (what the body, its sonar and the laser meet), walls split where they
            hold a pane; the start, the robots' places, the movers and the GPS origin are the map's.
        surfaces: the laser's view of its segments and circles.
        clutter: the unmapped objects, in the order drawn (their shapes are in ``world``).
        map: the world it was built from.
    """

    world: World
    surfaces: Surfaces
    clutter: tuple[Clutter, ...] = ()
    map: World | None = None

    def caster(self) -> RayCaster:
        """A ray caster over the site's segments and circles (aligned with :attr:`surfaces`)."""
        return RayCaster(self.world.segments(), self.world.circles)


def build_site(world: World, noise: NoiseProfile = IDEAL, seed: int = 0) -> Site:
    """The site of ``world`` under ``noise`` (the module docstring says what is drawn), from ``seed``.

    With no world effects in ``noise`` (:attr:`NoiseProfile.rough_world` false) the site is the world itself with
    plain surfaces, and nothing is drawn.
    """
    if not noise.rough_world:
        return Site(world, Surfaces.plain(world.segments().shape[0], world.circles.shape[0]), (), world)
    # One generator, drawn from in a fixed order (the field, the panes, the surfaces, the clutter): the same seed
    # gives the same site.
    rng = device_rng(seed, "site")
    dark = noise.laser_dark_surfaces
    shift = _displacement(rng, noise.map_offset_std)
    walls = np.array([[*shift(w[0], w[1]), *shift(w[2], w[3])] for w in world.walls]).reshape(-1, 4)
    polygons = [Polygon(p.name, np.array([shift(x, y) for x, y in p.points])) for p in world.polygons]
    circles = np.array([[*shift(x, y), r] for x, y, r in world.circles]).reshape(-1, 3)
    wall_rows, wall_names, glass = _glazed_walls(rng, walls, world.wall_names, noise.laser_glass)
    wall_array = np.array(wall_rows).reshape(-1, 4)
    drawn = _SurfaceDraft([_remission(rng, dark, WALL_REMISSION) for _ in wall_rows], glass)
    for p in polygons:
        drawn.add_segments(p.points.shape[0], _remission(rng, dark))
    for _ in range(circles.shape[0]):
        drawn.add_circles(1, _remission(rng, dark))
    clutter, shapes, discs = _draw_clutter(rng, noise, _ClutterPlacer(world, wall_array, polygons, circles), drawn)

    leg_names = [f"{c.name}-{side}" for c in clutter if c.kind == "legs" for side in ("left", "right")]
    # everything else (the start, the robots' places, the movers, the GPS origin) as the map has it
    built = dataclasses.replace(
        world,
        walls=wall_array,
        wall_names=tuple(_unique_names(wall_names)),
        wall_sigmas=np.zeros((wall_array.shape[0], 2)),
        polygons=(*polygons, *shapes),
        circles=np.vstack((circles, *(d.reshape(1, 3) for d in discs))) if discs else circles,
        circle_names=(*world.circle_names, *leg_names),
    )
    surfaces = drawn.surfaces()
    if surfaces.remission.shape[0] != built.segments().shape[0]:  # a bug here, not bad input
        raise AssertionError("site surfaces do not match its segments")
    return Site(built, surfaces, tuple(clutter), world)


def _glazed_walls(
    rng: np.random.Generator, walls: FloatArray, names: tuple[str | None, ...], share: float
) -> tuple[list[FloatArray], list[str | None], list[bool]]:
    """The walls with their glass panes: ``share`` of the walls at least :data:`GLASS_MIN_WALL` long become
    (solid, pane, solid), a solid part of no length dropped. Returns the rows ``[x1, y1, x2, y2]``, their names (a
    wall's name stays with its first part) and whether each is a pane."""
    rows: list[FloatArray] = []
    row_names: list[str | None] = []
    glass: list[bool] = []
    for row, name in zip(walls, names, strict=True):
        length = math.hypot(row[2] - row[0], row[3] - row[1])
        if length < GLASS_MIN_WALL or not rng.random() < share:
            rows.append(row)
            row_names.append(name)
            glass.append(False)
            continue
        pane = float(rng.uniform(0.3, 0.6))
        start = float(rng.uniform(0.0, 1.0 - pane))
        a, b = row[:2], row[2:]
        cuts = [0.0, start, start + pane, 1.0]
        for k in range(3):
            if cuts[k + 1] - cuts[k] <= 1e-9:
                continue
            p, q = a + (b - a) * cuts[k], a + (b - a) * cuts[k + 1]
            rows.append(np.concatenate((p, q)))
            row_names.append(name if k == 0 else None)
            glass.append(k == 1)
    return rows, row_names, glass


@dataclass
class _SurfaceDraft:
    """The site's surfaces as they are drawn, in the order of its segments and of its circles."""

    remission: list[float]
    glass: list[bool]
    circle_remission: list[float] = field(default_factory=list)

    def add_segments(self, count: int, remission: float) -> None:
        """``count`` more segments (an outline's edges), all of one remission, none of them glass."""
        self.remission += [remission] * count
        self.glass += [False] * count

    def add_circles(self, count: int, remission: float) -> None:
        """``count`` more circles, all of one remission."""
        self.circle_remission += [remission] * count

    def surfaces(self) -> Surfaces:
        return Surfaces(np.array(self.remission), np.array(self.glass, dtype=bool), np.array(self.circle_remission))


def _draw_clutter(
    rng: np.random.Generator, noise: NoiseProfile, placer: _ClutterPlacer, drawn: _SurfaceDraft
) -> tuple[list[Clutter], list[Polygon], list[FloatArray]]:
    """The clutter, placed among what is built so far, one object per ``clutter_spacing`` m of the map's walls on
    average (fewer where no place is found); each object's surface goes to ``drawn``. Returns the objects, the
    outlines of the boxes and chairs, and the discs of the legs."""
    clutter: list[Clutter] = []
    shapes: list[Polygon] = []
    discs: list[FloatArray] = []
    if not noise.clutter_spacing > 0:
        return clutter, shapes, discs
    walls = placer.world.walls
    lengths = np.hypot(walls[:, 2] - walls[:, 0], walls[:, 3] - walls[:, 1])
    wanted = round(float(lengths.sum()) / noise.clutter_spacing) if lengths.size else 0
    for number in range(wanted):
        placed = placer.place(rng, number)
        if placed is None:
            continue
        item, shape, legs = placed
        clutter.append(item)
        if shape is not None:
            shapes.append(shape)
            drawn.add_segments(shape.points.shape[0], _remission(rng, noise.laser_dark_surfaces))
        discs.extend(legs)
        if legs:
            drawn.add_circles(len(legs), _remission(rng, noise.laser_dark_surfaces))
    return clutter, shapes, discs


def _unique_names(names: list[str | None]) -> list[str | None]:
    seen: set[str] = set()
    out: list[str | None] = []
    for name in names:
        if name is not None and name in seen:
            name = None
        if name is not None:
            seen.add(name)
        out.append(name)
    return out


def _remission(rng: np.random.Generator, dark_share: float, bright: tuple[float, float] = (0.2, 0.9)) -> float:
    """A surface's remission: dark (2-6 %) with probability ``dark_share``, else uniform in ``bright``."""
    if rng.random() < dark_share:
        return float(rng.uniform(0.02, 0.06))
    return float(rng.uniform(*bright))


def _displacement(rng: np.random.Generator, std: float) -> _Field:
    """The smooth displacement field of the map mismatch (the module docstring), or none for ``std`` 0."""
    if std <= 0:
        return _Field(np.zeros((0, 2)), np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))
    waves = 2 * MISMATCH_WAVES  # the x component's waves, then the y component's
    lo, hi = MISMATCH_WAVELENGTHS
    wavelength = rng.uniform(lo, hi, waves)
    direction = rng.uniform(0.0, 2.0 * math.pi, waves)
    k = (2.0 * math.pi / wavelength)[:, None] * np.column_stack((np.cos(direction), np.sin(direction)))
    phase = rng.uniform(0.0, 2.0 * math.pi, waves)
    amplitude = np.full(waves, std * math.sqrt(2.0 / MISMATCH_WAVES))  # each component's variance is std²
    return _Field(k, phase, amplitude, np.arange(waves) >= MISMATCH_WAVES)


@dataclass(frozen=True)
class _Field:
    """d(p) = Σ a_i sin(k_i · p + φ_i), the sum over the x waves giving d_x and over the y waves d_y."""

    k: FloatArray
    phase: FloatArray
    amplitude: FloatArray
    is_y: BoolArray

    def __call__(self, x: float, y: float) -> tuple[float, float]:
        """The point (x, y) moved by the field, m."""
        if self.k.shape[0] == 0:
            return float(x), float(y)
        s = self.amplitude * np.sin(self.k[:, 0] * x + self.k[:, 1] * y + self.phase)
        return float(x + s[~self.is_y].sum()), float(y + s[self.is_y].sum())


@dataclass
class _ClutterPlacer:
    """Draws clutter places along the map's walls and checks them against the site built so far."""

    world: World
    walls: FloatArray
    polygons: list[Polygon]
    circles: FloatArray
    segments: FloatArray = field(init=False)
    discs: FloatArray = field(init=False)
    ends: FloatArray = field(init=False)
    paths: FloatArray = field(init=False)
    placed: list[Clutter] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.segments = np.vstack((self.walls, *(p.edges() for p in self.polygons))).reshape(-1, 4)
        self.discs = self.circles.reshape(-1, 3)
        self.ends = np.vstack((self.world.walls[:, :2], self.world.walls[:, 2:])).reshape(-1, 2)
        paths = [np.hstack((m.path()[:-1], m.path()[1:])) for m in self.world.movers if m.path().shape[0] > 1]
        self.paths = np.vstack(paths).reshape(-1, 4) if paths else np.zeros((0, 4))

    def place(self, rng: np.random.Generator, number: int) -> tuple[Clutter, Polygon | None, list[FloatArray]] | None:
        """One clutter object (its record, its outline or its legs' discs), or None if no place was found."""
        walls = self.world.walls
        lengths = np.hypot(walls[:, 2] - walls[:, 0], walls[:, 3] - walls[:, 1])
        if not lengths.sum() > 0:
            return None
        kind: ClutterKind = ("box", "box", "chair", "legs")[int(rng.integers(4))]
        if kind == "box":
            width, depth = float(rng.uniform(0.3, 0.8)), float(rng.uniform(0.3, 0.6))
            gap = float(rng.uniform(0.03, 0.15))
        elif kind == "chair":
            width = depth = 0.45
            gap = float(rng.uniform(0.03, 0.15))
        else:
            width, depth = 0.32, 0.12
            gap = float(rng.uniform(0.3, 0.8))
        radius = 0.5 * math.hypot(width, depth)
        name = f"clutter-{kind}-{number}"
        for _ in range(ATTEMPTS):
            j = int(rng.choice(lengths.shape[0], p=lengths / lengths.sum()))
            a, b = walls[j, :2], walls[j, 2:]
            along = (b - a) / lengths[j]
            normal = np.array([-along[1], along[0]]) * (1.0 if rng.random() < 0.5 else -1.0)
            base = a + (b - a) * float(rng.uniform(0.0, 1.0))
            centre = base + normal * (gap + 0.5 * depth)
            turn = float(rng.normal(0.0, 0.02))  # not quite square to the wall
            c, s = math.cos(turn), math.sin(turn)
            u = np.array([c * along[0] - s * along[1], s * along[0] + c * along[1]])
            v = np.array([-u[1], u[0]])
            corners = np.array([centre + u * (sx * 0.5 * width) + v * (sy * 0.5 * depth) for sx, sy in _CORNERS])
            if self._fits(centre, radius, normal, depth, corners):
                self.placed.append(Clutter(name, kind, (float(centre[0]), float(centre[1])), radius))
                if kind == "legs":
                    legs = [np.array([*(centre + u * sign * 0.1), 0.06]) for sign in (-1.0, 1.0)]
                    self.discs = np.vstack((self.discs, *(leg.reshape(1, 3) for leg in legs)))
                    return self.placed[-1], None, legs
                shape = Polygon(name, corners)
                self.segments = np.vstack((self.segments, shape.edges()))
                return self.placed[-1], shape, []
        return None

    def _fits(self, centre: FloatArray, radius: float, normal: FloatArray, depth: float, corners: FloatArray) -> bool:
        """The checks of the module docstring for an object of ``radius`` at ``centre`` facing ``normal``, its
        outline ``corners``."""
        x0, y0, x1, y1 = self.world.bounds()
        if not (x0 + radius <= centre[0] <= x1 - radius and y0 + radius <= centre[1] <= y1 - radius):
            return False
        if self.ends.shape[0] and float(np.hypot(*(self.ends - centre).T).min()) < DOORWAY_CLEARANCE + radius:
            return False
        starts = [self.world.start[:2], *((r.x, r.y) for r in self.world.robots)]
        if min(math.dist(centre, start) for start in starts) < START_CLEARANCE:
            return False
        if self.paths.shape[0] and float(segment_distance(centre, self.paths).min()) < PATH_CLEARANCE + radius:
            return False
        for other in self.placed:
            if math.dist(centre, other.centre) < radius + other.radius + 0.3:
                return False
        # the object itself touches nothing (the wall behind it is at least its gap away)
        if self._clearance(centre) < 0.5 * depth or min(self._clearance(c) for c in corners) < 0.01:
            return False
        # the way in front of it is free
        front = centre + normal * (0.5 * depth + 0.5 * PASSAGE + 0.05)
        return self._clearance(front) >= 0.5 * PASSAGE

    def _clearance(self, point: FloatArray) -> float:
        """Distance from ``point`` to the nearest segment or disc of the site so far, m."""
        best = math.inf
        if self.segments.shape[0]:
            best = float(segment_distance(point, self.segments).min())
        if self.discs.shape[0]:
            best = min(best, float((np.hypot(*(self.discs[:, :2] - point).T) - self.discs[:, 2]).min()))
        return best
