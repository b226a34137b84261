"""The measurement model of the reference AMCL (``bench/amcl.py``): Nav2's ``likelihood_field``, step 3 of the
algorithm there.

A distance field over the map's walls and discs (:class:`LikelihoodField`), which beams of a scan are used
(:func:`beam_subsample`) and each particle's likelihood of a scan (:func:`likelihood_field_model`). No I/O, no
clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["LikelihoodField", "beam_subsample", "likelihood_field_model"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_FIELD_CHUNK = 1 << 20
"""Most cells whose distances are computed in one numpy pass while the distance field is built."""


class LikelihoodField:
    """The distance from every cell of a grid to the nearest wall, and the likelihood-field hit term of it.

    Args:
        segments: ``(N, 4)`` walls ``[x1, y1, x2, y2]``, m, N >= 1.
        circles: ``(M, 3)`` solid discs ``[x, y, r]``, m, or None.
        resolution: cell size, m.
        max_dist: distances are capped here, m (Nav2's ``laser_likelihood_max_dist``).
        z_hit: weight of the hit term.  sigma_hit: its std dev, m.

    Raises:
        ValueError: a shape is wrong, a value is not finite, or there are no walls.

    The grid covers the map's bounding box widened by ``max_dist`` and two cells on every side, so that beyond it
    every distance is at the cap. Building it costs one vectorised pass per wall over the cells within ``max_dist`` of
    the wall's bounding box. The grids are float32.
    """

    def __init__(
        self,
        segments: ArrayLike,
        circles: ArrayLike | None,
        *,
        resolution: float,
        max_dist: float,
        z_hit: float,
        sigma_hit: float,
    ) -> None:
        s = np.asarray(segments, dtype=np.float64)
        if s.ndim != 2 or s.shape[1] != 4 or s.shape[0] == 0:
            raise ValueError(f"walls must have shape (N, 4) with N >= 1, got {s.shape}")
        c = np.zeros((0, 3)) if circles is None else np.asarray(circles, dtype=np.float64).reshape(-1, 3)
        if not (np.all(np.isfinite(s)) and np.all(np.isfinite(c))):
            raise ValueError("walls and circles must be finite")
        self.resolution = float(resolution)
        self.max_dist = float(max_dist)
        points = np.vstack((s[:, :2], s[:, 2:], c[:, :2] - c[:, 2:3], c[:, :2] + c[:, 2:3]))
        lo = points.min(axis=0)
        hi = points.max(axis=0)
        self.map_bounds = (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))
        """``(xmin, ymin, xmax, ymax)`` of the walls and discs, m."""
        margin = max_dist + 2.0 * resolution  # every cell centre on the grid's border is beyond the cap
        self.origin = (float(lo[0]) - margin, float(lo[1]) - margin)
        """World position ``(x, y)`` of the grid's lower-left corner, m."""
        self.shape = (
            math.ceil((hi[1] - lo[1] + 2.0 * margin) / resolution),
            math.ceil((hi[0] - lo[0] + 2.0 * margin) / resolution),
        )
        """``(rows, columns)``: rows along y, columns along x."""
        grid = np.full(self.shape, max_dist, dtype=np.float32)
        for x1, y1, x2, y2 in s:
            box = (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))
            self._lower(grid, box, _segment_metric(x1, y1, x2, y2))
        for cx, cy, r in c:
            self._lower(grid, (cx - r, cy - r, cx + r, cy + r), _disc_metric(cx, cy, r))
        self._distance = grid.ravel()
        self._hit = (z_hit * np.exp(-(self._distance**2) / np.float32(2.0 * sigma_hit * sigma_hit))).astype(np.float32)

    @property
    def distance(self) -> NDArray[np.float32]:
        """``(rows, columns)`` distance from each cell centre to the nearest wall or disc, capped, m (a view)."""
        return self._distance.reshape(self.shape)

    def _lower(self, grid: NDArray[np.float32], box: tuple[float, float, float, float], metric: _Metric) -> None:
        """Lower the cells within ``max_dist`` of ``box`` to their distance by ``metric``, in row chunks."""
        res = self.resolution
        rows, cols = self.shape
        j0 = max(0, math.floor((box[0] - self.max_dist - self.origin[0]) / res))
        j1 = min(cols, math.ceil((box[2] + self.max_dist - self.origin[0]) / res) + 1)
        i0 = max(0, math.floor((box[1] - self.max_dist - self.origin[1]) / res))
        i1 = min(rows, math.ceil((box[3] + self.max_dist - self.origin[1]) / res) + 1)
        if j1 <= j0 or i1 <= i0:
            return
        xs: FloatArray = self.origin[0] + (np.arange(j0, j1) + 0.5) * res
        step = max(1, _FIELD_CHUNK // (j1 - j0))
        for i in range(i0, i1, step):
            ys: FloatArray = self.origin[1] + (np.arange(i, min(i1, i + step)) + 0.5) * res
            block = grid[i : i + ys.shape[0], j0:j1]
            np.minimum(block, metric(xs[None, :], ys[:, None]), out=block)

    def cells(self, x: FloatArray, y: FloatArray) -> IntArray:
        """Flat cell index of each world point (m); a point off the grid gets the nearest border cell, whose
        distance is the cap like that of any point off the grid."""
        rows, cols = self.shape
        inv = 1.0 / self.resolution
        ix = np.clip((x - self.origin[0]) * inv, 0.0, cols - 1).astype(np.intp)
        iy = np.clip((y - self.origin[1]) * inv, 0.0, rows - 1).astype(np.intp)
        flat: IntArray = iy * cols + ix
        return flat

    def hit_term(self, x: FloatArray, y: FloatArray) -> NDArray[np.float32]:
        """``z_hit exp(-d² / 2σ²)`` at world points (m) of any shape, ``d`` the capped distance of their cells."""
        hit: NDArray[np.float32] = self._hit[self.cells(x, y)]
        return hit

    def distance_at(self, x: FloatArray, y: FloatArray) -> FloatArray:
        """Capped distance (m) to the nearest wall at world points of any shape, by their cells."""
        d: FloatArray = self._distance[self.cells(x, y)].astype(np.float64)
        return d


_Metric = Callable[[FloatArray, FloatArray], FloatArray]
"""Distance (m) from points ``(x, y)`` (broadcast together) to one shape."""


def _segment_metric(x1: float, y1: float, x2: float, y2: float) -> _Metric:
    ex, ey = x2 - x1, y2 - y1
    length2 = ex * ex + ey * ey
    inv_length2 = 1.0 / length2 if length2 > 0.0 else 0.0  # a zero-length wall is a point

    def distance(x: FloatArray, y: FloatArray) -> FloatArray:
        rx = x - x1
        ry = y - y1
        u = np.clip((rx * ex + ry * ey) * inv_length2, 0.0, 1.0)
        d: FloatArray = np.hypot(rx - u * ex, ry - u * ey)
        return d

    return distance


def _disc_metric(cx: float, cy: float, r: float) -> _Metric:
    def distance(x: FloatArray, y: FloatArray) -> FloatArray:
        d: FloatArray = np.maximum(np.hypot(x - cx, y - cy) - r, 0.0)
        return d

    return distance


def beam_subsample(count: int, max_beams: int) -> IntArray:
    """Indices of the beams of a ``count``-beam scan that the likelihood field uses: every ``step``-th from the
    first, ``step = max(1, (count - 1) // (max_beams - 1))`` (Nav2's choice: 61 of 361 for 60)."""
    step = max(1, (count - 1) // max(1, max_beams - 1))
    return np.arange(0, count, step, dtype=np.intp)


def likelihood_field_model(
    particles: FloatArray,
    field: LikelihoodField,
    ranges: FloatArray,
    bearings: FloatArray,
    range_max: float,
    laser_pose: tuple[float, float, float],
    z_rand: float,
) -> FloatArray:
    """Nav2's likelihood of a scan for each particle, ``1 + Σ pz³`` over the beams.

    Args:
        particles: ``(N, 3)`` robot poses, m, m, rad.
        field: the map's distance field (holds ``z_hit`` and ``σ_hit``).
        ranges: ``(B,)`` the used readings, m, each below ``range_max`` (skip the others before).
        bearings: ``(B,)`` their directions in the scanner frame, rad.
        range_max: the range limit, m (the random term is ``z_rand / range_max``).
        laser_pose: the scanner in the robot frame ``(x, y, θ)``.
        z_rand: weight of the random term.

    Returns:
        ``(N,)`` likelihoods, >= 1.
    """
    lx, ly, lth = laser_pose
    c = np.cos(particles[:, 2])
    s = np.sin(particles[:, 2])
    ox = particles[:, 0] + c * lx - s * ly
    oy = particles[:, 1] + s * lx + c * ly
    cl = np.cos(particles[:, 2] + lth)[:, None]
    sl = np.sin(particles[:, 2] + lth)[:, None]
    bx = (ranges * np.cos(bearings))[None, :]  # end points in the scanner frame
    by = (ranges * np.sin(bearings))[None, :]
    ex = ox[:, None] + cl * bx - sl * by
    ey = oy[:, None] + sl * bx + cl * by
    pz = field.hit_term(ex, ey) + z_rand / range_max
    likelihood: FloatArray = np.sum(pz * pz * pz, axis=1, dtype=np.float64)
    likelihood += 1.0
    return likelihood
