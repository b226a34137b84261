"""The a-priori map of the pose module: walls as segments with their (α, ρ) lines, and a grid index over them.

Strategy: the map is read with the simulator's own loader (:func:`pluto.sim.world.load_world`), so the pose module
and the simulator agree on the format and its checks by construction. Each wall keeps its segment (for the overlap
test of data association) and its infinite line in normal form, p·(cos α, sin α) = ρ with ρ >= 0 (for the
measurement model). A wall's optional uncertainty (``sigma_angle``, ``sigma_offset`` of the map format: direction
and position across itself at its midpoint) becomes a covariance of (α, ρ): with t_m the tangential coordinate of
the midpoint, δρ = δd + t_m·δα, so C = J·diag(σ_α², σ_d²)·Jᵀ with J = [[1, 0], [t_m, 1]].

The index is a uniform grid in compressed-row form: every cell lists the walls that may pass through it (those
within half a cell diagonal of its centre), so a query for the walls within a radius of a point reads the rows of
cells covering the square around it and keeps the walls truly within the radius.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numba
import numpy as np
import numpy.typing as npt

from pluto.sim.world import World, load_world

__all__ = ["WallMap"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def _wall_covariance(sigmas: FloatArray, tm: FloatArray) -> FloatArray:
    """``(N, 2, 2)`` covariance of (α, ρ) of walls with ``(N, 2)`` sigmas (angle, offset at the midpoint) whose
    midpoints have the tangential coordinates ``tm`` (see the module docstring)."""
    va, vd = sigmas[:, 0] ** 2, sigmas[:, 1] ** 2
    covariance = np.empty((sigmas.shape[0], 2, 2))
    covariance[:, 0, 0] = va
    covariance[:, 0, 1] = covariance[:, 1, 0] = tm * va
    covariance[:, 1, 1] = tm * tm * va + vd
    return covariance


def _lines(segments: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Normal form (α, ρ >= 0) of the line through each segment."""
    ex = segments[:, 2] - segments[:, 0]
    ey = segments[:, 3] - segments[:, 1]
    length = np.hypot(ex, ey)
    nx, ny = -ey / length, ex / length
    rho = segments[:, 0] * nx + segments[:, 1] * ny
    flip = rho < 0.0
    nx = np.where(flip, -nx, nx)
    ny = np.where(flip, -ny, ny)
    return np.arctan2(ny, nx), np.abs(rho)


@dataclass(frozen=True, eq=False)
class WallMap:
    """Walls of a map with their lines, uncertainties and a spatial index.

    Build it with :meth:`from_file`, :meth:`from_world` or :meth:`from_segments`.

    Attributes:
        segments: ``(N, 4)`` walls ``[x1, y1, x2, y2]``, m, world frame.
        names: ``(N,)`` wall names (None for unnamed walls and obstacle edges).
        sigmas: ``(N, 2)`` ``[sigma_angle, sigma_offset]`` per wall, rad and m (0: exact).
        alpha: ``(N,)`` normal angle of each wall's line, rad, (-π, π].
        rho: ``(N,)`` distance of each line from the origin, m, >= 0.
        extent: ``(N, 2)`` the wall's span along its line, ``[t_min, t_max]`` of the tangential coordinate
            t = -x·sin α + y·cos α of its end points, m.
        covariance: ``(N, 2, 2)`` covariance of (α, ρ) from the sigmas.
        cell: side of a grid cell, m.

    Arrays are read-only.
    """

    segments: FloatArray
    names: tuple[str | None, ...] = ()
    sigmas: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))
    cell: float = 2.0
    alpha: FloatArray = field(init=False)
    rho: FloatArray = field(init=False)
    extent: FloatArray = field(init=False)
    covariance: FloatArray = field(init=False)
    _midpoint: FloatArray = field(init=False, repr=False)
    _origin: tuple[float, float] = field(init=False, repr=False)
    _shape: tuple[int, int] = field(init=False, repr=False)
    _row_start: IntArray = field(init=False, repr=False)
    _cell_walls: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        seg = np.array(self.segments, dtype=np.float64)
        if seg.size == 0:
            seg = np.zeros((0, 4))
        if seg.ndim != 2 or seg.shape[1] != 4:
            raise ValueError(f"segments must have shape (n, 4), got {seg.shape}")
        if not np.all(np.isfinite(seg)):
            raise ValueError("segments must be finite")
        if np.any(np.hypot(seg[:, 2] - seg[:, 0], seg[:, 3] - seg[:, 1]) <= 0.0):
            raise ValueError("a wall has zero length")
        n = seg.shape[0]
        names = tuple(self.names) if self.names else (None,) * n
        sigmas = np.array(self.sigmas, dtype=np.float64)
        if sigmas.size == 0:
            sigmas = np.zeros((n, 2))
        if len(names) != n or sigmas.shape != (n, 2):
            raise ValueError("names and sigmas must have one entry per wall")
        if not (np.all(np.isfinite(sigmas)) and np.all(sigmas >= 0.0)):
            raise ValueError("sigmas must be >= 0 and finite")
        if not (math.isfinite(self.cell) and self.cell > 0):
            raise ValueError(f"cell must be > 0, got {self.cell}")
        alpha, rho = _lines(seg)
        sa, ca = np.sin(alpha), np.cos(alpha)
        t1 = -seg[:, 0] * sa + seg[:, 1] * ca
        t2 = -seg[:, 2] * sa + seg[:, 3] * ca
        extent = np.stack((np.minimum(t1, t2), np.maximum(t1, t2)), axis=1)
        tm = 0.5 * (t1 + t2)
        covariance = _wall_covariance(sigmas, tm)
        for name, value in (
            ("segments", seg),
            ("sigmas", sigmas),
            ("alpha", alpha),
            ("rho", rho),
            ("extent", extent),
            ("covariance", covariance),
            ("_midpoint", tm),
        ):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "names", names)
        self._build_index()

    def covariance_at_least(self, sigma_angle: float, sigma_offset: float) -> FloatArray:
        """:attr:`covariance` with every wall at least this uncertain: each wall's sigmas raised to
        ``sigma_angle`` (rad) and ``sigma_offset`` (m) where they are smaller (read-only, kept per pair of values).

        A map is a plan, and a building as built differs from its plan by a few cm: a filter that took the plan's
        walls as exact would take that difference for an error of its pose.
        """
        key = (float(sigma_angle), float(sigma_offset))
        kept: dict[tuple[float, float], FloatArray] = self.__dict__.setdefault("_floored", {})
        if key not in kept:
            if key == (0.0, 0.0):
                kept[key] = self.covariance
            else:
                value = _wall_covariance(np.maximum(self.sigmas, np.array(key)), self._midpoint)
                value.setflags(write=False)
                kept[key] = value
        return kept[key]

    # -- construction --------------------------------------------------------------------------------------------

    @classmethod
    def from_world(cls, world: World, *, include_obstacles: bool = False, cell: float = 2.0) -> WallMap:
        """The walls of a simulator world.

        Args:
            world: the world.
            include_obstacles: also take the edges of its polygonal obstacles as walls (exact, unnamed).
            cell: side of a grid cell of the index, m.
        """
        segments = world.walls
        names: tuple[str | None, ...] = world.wall_names
        sigmas = world.wall_sigmas
        if include_obstacles and world.polygons:
            edges = np.vstack([p.edges() for p in world.polygons])
            segments = np.vstack((segments, edges))
            names = names + (None,) * edges.shape[0]
            sigmas = np.vstack((sigmas, np.zeros((edges.shape[0], 2))))
        return cls(segments, names, sigmas, cell)

    @classmethod
    def from_file(
        cls, source: str | os.PathLike[str], *, include_obstacles: bool = False, cell: float = 2.0
    ) -> WallMap:
        """The walls of a map file (or of a shipped world, by name).

        Raises:
            pluto.errors.MapError: the file cannot be read or is not a valid map.
        """
        return cls.from_world(load_world(source), include_obstacles=include_obstacles, cell=cell)

    @classmethod
    def from_segments(
        cls,
        segments: npt.ArrayLike,
        *,
        names: tuple[str | None, ...] = (),
        sigmas: npt.ArrayLike | None = None,
        cell: float = 2.0,
    ) -> WallMap:
        """Walls from ``(N, 4)`` segments ``[x1, y1, x2, y2]`` (m), optionally named and with ``(N, 2)`` sigmas."""
        seg = np.asarray(segments, dtype=np.float64).reshape(-1, 4)
        sig = np.zeros((seg.shape[0], 2)) if sigmas is None else np.asarray(sigmas, dtype=np.float64)
        return cls(seg, names, sig, cell)

    # -- the index -----------------------------------------------------------------------------------------------

    def _build_index(self) -> None:
        seg = self.segments
        c = self.cell
        if seg.shape[0] == 0:
            object.__setattr__(self, "_origin", (0.0, 0.0))
            object.__setattr__(self, "_shape", (1, 1))
            object.__setattr__(self, "_row_start", np.zeros(2, dtype=np.intp))
            object.__setattr__(self, "_cell_walls", np.zeros(0, dtype=np.intp))
            return
        lo = np.minimum(seg[:, :2], seg[:, 2:])
        hi = np.maximum(seg[:, :2], seg[:, 2:])
        x0, y0 = float(lo[:, 0].min()), float(lo[:, 1].min())
        nx = math.floor((float(hi[:, 0].max()) - x0) / c) + 1
        ny = math.floor((float(hi[:, 1].max()) - y0) / c) + 1
        ix0 = np.floor((lo[:, 0] - x0) / c).astype(np.intp)
        iy0 = np.floor((lo[:, 1] - y0) / c).astype(np.intp)
        ix1 = np.minimum(np.floor((hi[:, 0] - x0) / c).astype(np.intp), nx - 1)
        iy1 = np.minimum(np.floor((hi[:, 1] - y0) / c).astype(np.intp), ny - 1)
        wide = ix1 - ix0 + 1
        cells = wide * (iy1 - iy0 + 1)
        wall = np.repeat(np.arange(seg.shape[0]), cells)
        k = np.arange(int(cells.sum())) - np.repeat(np.cumsum(cells) - cells, cells)
        ix = ix0[wall] + k % wide[wall]
        iy = iy0[wall] + k // wide[wall]
        # keep the cells the segment comes within half a diagonal of (a superset of those it crosses)
        cx = x0 + (ix + 0.5) * c
        cy = y0 + (iy + 0.5) * c
        s = seg[wall]
        ex, ey = s[:, 2] - s[:, 0], s[:, 3] - s[:, 1]
        u = np.clip(((cx - s[:, 0]) * ex + (cy - s[:, 1]) * ey) / (ex * ex + ey * ey), 0.0, 1.0)
        near = np.hypot(s[:, 0] + u * ex - cx, s[:, 1] + u * ey - cy) <= 0.5 * math.sqrt(2.0) * c + 1e-9
        flat = (iy * nx + ix)[near]
        wall = wall[near]
        order = np.lexsort((wall, flat))
        flat, wall = flat[order], wall[order]
        row_start = np.searchsorted(flat, np.arange(nx * ny + 1))
        object.__setattr__(self, "_origin", (x0, y0))
        object.__setattr__(self, "_shape", (nx, ny))
        object.__setattr__(self, "_row_start", row_start.astype(np.intp))
        object.__setattr__(self, "_cell_walls", wall.astype(np.intp))

    def __len__(self) -> int:
        return int(self.segments.shape[0])

    def near(self, x: float, y: float, radius: float) -> IntArray:
        """Indices (sorted) of the walls with some point within ``radius`` (m) of (x, y) (m)."""
        return self._within(float(x), float(y), radius, None)

    def visible(self, pose: tuple[float, float, float], max_range: float, fov: float = math.pi) -> IntArray:
        """Walls a laser at ``pose`` (x, y, θ; m, rad) could see: within ``max_range`` (m) and, for a field of view
        of at most π (rad), with some part in front of the laser (occlusion is not considered)."""
        return self._within(float(pose[0]), float(pose[1]), max_range, None if fov > math.pi else float(pose[2]))

    def _within(self, x: float, y: float, radius: float, heading: float | None) -> IntArray:
        """The walls within ``radius`` of (x, y), and with some part ahead of ``heading`` unless it is None."""
        if len(self) == 0 or not radius >= 0:
            return np.zeros(0, dtype=np.intp)
        radius = min(radius, 1e12)  # an infinite radius: everything
        c = self.cell
        x0, y0 = self._origin
        nx, ny = self._shape
        ix0 = max(math.floor((x - radius - x0) / c), 0)
        ix1 = min(math.floor((x + radius - x0) / c), nx - 1)
        iy0 = max(math.floor((y - radius - y0) / c), 0)
        iy1 = min(math.floor((y + radius - y0) / c), ny - 1)
        if ix0 > ix1 or iy0 > iy1:
            return np.zeros(0, dtype=np.intp)
        ahead = heading is not None
        theta = heading if heading is not None else 0.0
        found: IntArray = _query(
            self._row_start,
            self._cell_walls,
            self.segments,
            nx,
            (ix0, ix1, iy0, iy1),
            (x, y, radius),
            ahead,
            (math.cos(theta), math.sin(theta)),
        )
        return found

    def bounds(self) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)`` of the walls, m (zeros for an empty map)."""
        if len(self) == 0:
            return 0.0, 0.0, 0.0, 0.0
        p = np.vstack((self.segments[:, :2], self.segments[:, 2:]))
        return float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max())


@numba.njit(cache=True)
def _query(
    row_start: IntArray,
    cell_walls: IntArray,
    segments: FloatArray,
    nx: int,
    cells: tuple[int, int, int, int],
    circle: tuple[float, float, float],
    ahead: bool,
    direction: tuple[float, float],
) -> IntArray:
    """Indices (sorted) of the walls listed in the grid's cells ``(ix0, ix1, iy0, iy1)`` (inclusive) whose segment
    comes within the ``circle`` (x, y, radius) and, if ``ahead``, has an end point not behind the line through its
    centre across ``direction`` (cos θ, sin θ).

    Compiled: a query of the grid runs for every scan, and in numpy it is a dozen array calls per row of cells."""
    ix0, ix1, iy0, iy1 = cells
    x, y, radius = circle
    c, s = direction
    hit = np.zeros(segments.shape[0], dtype=np.bool_)
    seen = np.zeros(segments.shape[0], dtype=np.bool_)
    for row in range(iy0, iy1 + 1):
        for k in range(row_start[row * nx + ix0], row_start[row * nx + ix1 + 1]):
            w = cell_walls[k]
            if seen[w]:
                continue
            seen[w] = True
            rx = segments[w, 0] - x
            ry = segments[w, 1] - y
            ex = segments[w, 2] - segments[w, 0]
            ey = segments[w, 3] - segments[w, 1]
            length2 = ex * ex + ey * ey
            u = -(rx * ex + ry * ey) / length2 if length2 > 0.0 else 0.0
            u = min(max(u, 0.0), 1.0)
            if math.hypot(rx + u * ex, ry + u * ey) > radius:
                continue
            if ahead and max(rx * c + ry * s, (segments[w, 2] - x) * c + (segments[w, 3] - y) * s) <= -1e-9:
                continue
            hit[w] = True
    return np.flatnonzero(hit)
