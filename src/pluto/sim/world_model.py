"""The simulator's world as values: walls, polygonal and round obstacles, walking people, where the robots start.

:class:`World` is what a map file (:mod:`pluto.sim.world`, which documents the format and reads it) describes, and
what the simulator, the pose and SLAM modules and the gateways use; every name here is importable from
:mod:`pluto.sim.world` too. All lengths in metres, angles in radians, in a right-handed world frame. A world never
changes: its arrays are read-only, and the people are functions of time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.errors import MapError

__all__ = ["ROBOT_RADIUS", "Mover", "Polygon", "RobotPlacement", "World"]

FloatArray = NDArray[np.float64]


def _frozen_array(values: ArrayLike, columns: int, what: str) -> FloatArray:
    """A read-only float64 copy of ``values`` with shape ``(n, columns)``; empty input gives ``(0, columns)``."""
    a = np.array(values, dtype=np.float64)
    if a.size == 0:
        a = np.zeros((0, columns))
    if a.ndim != 2 or a.shape[1] != columns:
        raise ValueError(f"{what} must have shape (n, {columns}), got {a.shape}")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Polygon:
    """A named polygonal obstacle.

    Attributes:
        name: unique name in the world.
        points: ``(K, 2)`` corners ``(x, y)``, m, K >= 3; the last connects back to the first.
    """

    name: str
    points: FloatArray

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", _frozen_array(self.points, 2, "polygon points"))

    def edges(self) -> FloatArray:
        """``(K, 4)`` the edges ``[x1, y1, x2, y2]``, m, including the closing edge."""
        p = self.points
        return np.hstack((p, np.roll(p, -1, axis=0)))


@dataclass(frozen=True, eq=False)
class Mover:
    """A person walking a path at constant speed.

    Attributes:
        name: unique name in the world.
        radius: radius of the person's disc, m.
        speed: walking speed along the path, m/s.
        loop: True: after the last waypoint walk back to the first and round again; False: walk back and forth.
        waypoints: ``(W, 2)`` the path ``(x, y)``, m, W >= 2; the person is at the first one at time 0.
    """

    name: str
    radius: float
    speed: float
    loop: bool
    waypoints: FloatArray

    _lap: FloatArray = field(init=False, repr=False)
    _arc: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "waypoints", _frozen_array(self.waypoints, 2, "waypoints"))
        # the lap and the arc length at each of its vertices: the simulation asks for positions at every step
        w = self.waypoints
        lap = np.vstack((w, w[:1])) if self.loop else w
        arc = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(lap, axis=0), axis=1))))
        lap.setflags(write=False)
        arc.setflags(write=False)
        object.__setattr__(self, "_lap", lap)
        object.__setattr__(self, "_arc", arc)

    def path(self) -> FloatArray:
        """``(V, 2)`` the vertices walked in one lap: the waypoints, and the first again if ``loop`` (read-only)."""
        return self._lap

    def path_length(self) -> float:
        """Length of one lap of :meth:`path` (one way when not looping), m."""
        return float(self._arc[-1])

    def position(self, t: float) -> FloatArray:
        """``(2,)`` position at time ``t`` (s): arc length ``speed * t`` along the path, wrapped or reflected."""
        path, arc = self.path(), self._arc
        length = float(arc[-1])
        if length <= 0.0:
            return np.array(path[0], dtype=np.float64)
        s = self.speed * t
        if self.loop:
            s = s % length
        else:
            s = s % (2.0 * length)
            if s > length:
                s = 2.0 * length - s
        position: FloatArray = np.array([np.interp(s, arc, path[:, 0]), np.interp(s, arc, path[:, 1])])
        return position


ROBOT_RADIUS = 0.4
"""m: the radius of a robot of ``<robots>`` that gives none (the simulated base's default)."""


@dataclass(frozen=True)
class RobotPlacement:
    """Where one robot of a simulation of several starts.

    Attributes:
        name: its robot name on the bus, or None to be named after its place (see :meth:`World.fleet`).
        x, y, theta: start pose, m, m, rad.
        radius: the disc the other robots' sensors and bumpers meet, m.
    """

    name: str | None
    x: float
    y: float
    theta: float = 0.0
    radius: float = ROBOT_RADIUS

    @property
    def pose(self) -> tuple[float, float, float]:
        """The start pose (x m, y m, θ rad)."""
        return self.x, self.y, self.theta


@dataclass(frozen=True, eq=False)
class World:
    """A simulated world: static walls and obstacles, moving people, a start pose.

    Attributes:
        name: the world's name.
        description: free text, "" if none.
        walls: ``(N, 4)`` wall segments ``[x1, y1, x2, y2]``, m.
        wall_names: ``(N,)`` the wall names, None for unnamed walls.
        wall_sigmas: ``(N, 2)`` each wall's ``[sigma_angle, sigma_offset]``, rad and m (zeros when not given).
        polygons: the polygonal obstacles.
        circles: ``(M, 3)`` circular obstacles ``[x, y, r]``, m.
        circle_names: ``(M,)`` their names.
        movers: the walking people.
        start: robot start pose ``(x, y, theta)``, m, m, rad.
        robots: where the robots of a simulation of several start (``<robots>``), in order; empty if not given.
        gps_origin: ``(latitude, longitude, altitude)`` of the origin, degrees, degrees, m; or None.
        source: the file it was read from, or None.

    Arrays are read-only; the world never changes, movers are functions of time.
    """

    name: str
    walls: FloatArray
    description: str = ""
    wall_names: tuple[str | None, ...] = ()
    wall_sigmas: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))
    polygons: tuple[Polygon, ...] = ()
    circles: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    circle_names: tuple[str, ...] = ()
    movers: tuple[Mover, ...] = ()
    start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    robots: tuple[RobotPlacement, ...] = ()
    gps_origin: tuple[float, float, float] | None = None
    source: Path | None = None
    _segments: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        walls = _frozen_array(self.walls, 4, "walls")
        circles = _frozen_array(self.circles, 3, "circles")
        object.__setattr__(self, "walls", walls)
        object.__setattr__(self, "circles", circles)
        if not self.wall_names:
            object.__setattr__(self, "wall_names", (None,) * walls.shape[0])
        sigmas = _frozen_array(self.wall_sigmas, 2, "wall_sigmas")
        if sigmas.shape[0] == 0:
            sigmas = _frozen_array(np.zeros((walls.shape[0], 2)), 2, "wall_sigmas")
        if sigmas.shape[0] != walls.shape[0] or not bool(np.all(sigmas >= 0.0)):
            raise ValueError("wall_sigmas must have one row of two values >= 0 per wall")
        object.__setattr__(self, "wall_sigmas", sigmas)
        if not self.circle_names:
            object.__setattr__(self, "circle_names", tuple(f"circle-{i}" for i in range(circles.shape[0])))
        if len(self.wall_names) != walls.shape[0] or len(self.circle_names) != circles.shape[0]:
            raise ValueError("wall_names and circle_names must have one name per wall and per circle")
        segments = np.vstack((walls, *(p.edges() for p in self.polygons)))
        segments.setflags(write=False)
        object.__setattr__(self, "_segments", segments)

    def segments(self) -> FloatArray:
        """``(N', 4)`` every static segment, m: the walls, then the edges of each polygon (read-only, cached)."""
        return self._segments

    def bounds(self) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)``, m, of everything in the world: segments, circles, movers' paths, start."""
        seg = self._segments
        c = self.circles
        parts = [
            seg[:, :2],
            seg[:, 2:],
            c[:, :2] - c[:, 2:3],
            c[:, :2] + c[:, 2:3],
            np.array([self.start[:2]]),
            *(np.array([[r.x - r.radius, r.y - r.radius], [r.x + r.radius, r.y + r.radius]]) for r in self.robots),
        ]
        for m in self.movers:
            parts += [m.waypoints - m.radius, m.waypoints + m.radius]
        points = np.vstack(parts)
        lo = points.min(axis=0)
        hi = points.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])

    def fleet(self, count: int, prefix: str) -> list[RobotPlacement]:
        """The first ``count`` robots of :attr:`robots`, each with its name (an unnamed one is ``<prefix>-<i>``,
        ``i`` its place in the list from 1).

        Raises:
            MapError: the world places fewer robots, or a made-up name is that of another robot.
        """
        if count < 1:
            raise MapError(f"a simulation needs at least 1 robot, not {count}")
        if count > len(self.robots):
            placed = f"places {len(self.robots)}" if self.robots else "places none"
            raise MapError(
                f"world {self.name} {placed} in its <robots>, and {count} robots were asked for: add <robot> "
                "elements to its <robots> (see pluto/sim/world.py)",
                self.source,
            )
        chosen = [dataclasses.replace(r, name=r.name or f"{prefix}-{i}") for i, r in enumerate(self.robots[:count], 1)]
        names = [r.name for r in chosen]
        for name in names:
            if names.count(name) > 1:
                raise MapError(f"two robots of world {self.name} would be called {name!r}: name them", self.source)
        return chosen

    def mover_positions(self, t: float) -> FloatArray:
        """``(P, 2)`` positions (m) of the movers at time ``t`` (s), in the order of :attr:`movers`."""
        if not self.movers:
            return np.zeros((0, 2))
        return np.array([m.position(t) for m in self.movers])

    def mover_circles(self, t: float) -> FloatArray:
        """``(P, 3)`` the movers at time ``t`` (s) as circles ``[x, y, radius]``, m, ready for ray casting."""
        cached: tuple[float, FloatArray] | None = self.__dict__.get("_mover_circles")
        if cached is not None and cached[0] == t:
            return cached[1].copy()  # the base and its sonar ask for the same time in one step
        radii = np.array([[m.radius] for m in self.movers]).reshape(-1, 1)
        circles = np.hstack((self.mover_positions(t), radii))
        self.__dict__["_mover_circles"] = (t, circles)
        return circles.copy()
