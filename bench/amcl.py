"""A reference AMCL (adaptive Monte Carlo localization) on a map of wall segments, for benchmarks.

The pose module is compared with the particle filter robotics users know from ROS 2 Nav2's ``nav2_amcl``. No
Python package of it fits a numpy benchmark, so this module is a documented implementation of the same algorithm,
with Nav2's parameter names and defaults, vectorised with numpy (no Python loop over particles or beams). It is a
core in the house style: no I/O, no clock, all randomness from one seeded ``numpy.random.Generator``.

    amcl = Amcl(load_world("office").segments(), seed=1)
    amcl.init_pose(10.0, 9.7, 0.0, np.diag([0.25, 0.25, 0.07]))
    x, y, theta, cov = amcl.update(odom_pose, ranges, angle_min, angle_increment, range_max)

Run it as a script (``.venv/bin/python bench/amcl.py [--seconds 120] [--seed 1]``) to print the CPU time per update
in the office world (see :func:`main`).

Algorithm
---------
One call of :meth:`Amcl.update` per laser scan, with the odometry pose of the same instant:

1. **Update thresholds.** The filter runs only when odometry has moved since its last run by more than
   ``update_min_d`` along x or along y (each axis apart, as Nav2 compares them) or turned by more than
   ``update_min_a``; the first scan after :meth:`Amcl.init_pose` or :meth:`Amcl.init_global` always runs it.
   Otherwise the scan is dropped and the last estimate, carried along by the odometry since, is returned (what a
   Nav2 user reads from the map -> odom -> base transforms).
2. **Motion model** ``diff``: ``sample_motion_model_odometry`` (Thrun, Burgard, Fox, *Probabilistic Robotics*,
   table 5.6). The odometry step from the pose of the last run to this one is split into a turn ``δrot1``, a
   straight line ``δtrans`` and a turn ``δrot2``; each particle moves by these three perturbed with zero-mean
   normal noise of variance ``α1 δrot1² + α2 δtrans²`` (turns, with ``δrot2`` for the second) and
   ``α3 δtrans² + α4 (δrot1² + δrot2²)`` (line). As in Nav2, a turn counts for the noise by its distance to 0 or
   π, whichever is nearer, so driving backwards is no noisier than forwards, and ``δrot1`` is 0 for steps under
   1 cm (a turn on the spot).
3. **Measurement model** ``likelihood_field``: a grid (``map_resolution``) over the map holds, for each cell, the
   distance ``d`` from its centre to the nearest wall, capped at ``laser_likelihood_max_dist``. Of the scan,
   ``max_beams`` beams are used: every ``step``-th beam with ``step = (n - 1) // (max_beams - 1)`` (61 of 361
   with the default 60). Readings at or over the range limit, at or under the minimum range, or NaN are skipped.
   Each used beam's end point, seen from each particle (through ``laser_pose``), looks up ``d`` in its cell (off
   the grid: the cap) and scores ``pz = z_hit exp(-d² / 2σ_hit²) + z_rand / range_max``; a particle's likelihood
   is Nav2's ad-hoc ``1 + Σ pz³`` (beams are not independent, so their product would be far too confident), and
   its weight is multiplied by it.
4. **Augmented MCL** (Probabilistic Robotics, table 8.3): the mean likelihood ``w_avg = Σ wᵢ pᵢ`` (weights
   normalised before the update) feeds a slow and a fast running average, ``w_s += α_slow (w_avg - w_s)`` and
   the same with ``α_fast``. At resampling each new particle is a uniformly random free pose with probability
   ``max(0, 1 - w_f / w_s)``: when the scans suddenly fit worse than they have for a long time the filter may be
   lost (kidnapped), and random particles let it find the pose again. Both averages restart after random
   particles were added, as in Nav2. ``recovery_alpha_slow = recovery_alpha_fast = 0`` turns this off.
5. **KLD-sampling** (Fox, "Adapting the sample size in particle filters through KLD-sampling", IJRR 2003): the
   particles are counted in bins of ``bin_xy`` x ``bin_xy`` x ``bin_theta`` (0.5 m x 0.5 m x 10°, Nav2's
   kd-tree leaves). With ``k`` occupied bins, ``n = (k - 1) / (2 ε) (1 - 2 / (9 (k - 1)) +
   sqrt(2 / (9 (k - 1))) z)³`` samples bound the KL divergence between the sample and the true posterior by
   ``ε = pf_err`` with confidence given by ``z = pf_z``, clipped to ``[min_particles, max_particles]``. As in
   Nav2, ``pf_z`` enters the formula as the quantile itself (0.99, not the 2.33 of a 99% quantile). Samples are
   drawn until their count exceeds ``n`` of the bins they fill so far, so a tight cloud keeps few particles and a
   spread one many.
6. **Low-variance resampling** (Probabilistic Robotics, table 4.4) every ``resample_interval`` filter runs: one
   random offset and a comb of equally spaced pointers into the cumulative weights, so a particle of weight
   ``w`` is copied ``floor(n w)`` or ``ceil(n w)`` times. It is combined with KLD-sampling in two passes: the
   count is found from a comb of ``max_particles`` pointers taken in random order (each prefix of it is then a
   fair sample), and the new set is a comb of exactly that many.
7. **Estimate**: the occupied bins are joined into clusters (bins touching by a face, an edge or a corner, as
   Nav2's kd-tree clustering); the estimate is the weighted mean of the heaviest cluster (``estimate="cluster"``,
   Nav2's choice) or of all particles (``estimate="mean"``), with its weighted covariance. Headings are averaged
   on the circle (``atan2`` of the summed sines and cosines) and their variance is the circular
   ``-2 ln R`` (``R`` the mean resultant length); the cross terms use headings wrapped about the mean.

Parameters (:class:`AmclParams`; Nav2's name where it differs)
-------------------------------------------------------------
============================  ===================  =========  ==================================================
here                          Nav2                 default    meaning
============================  ===================  =========  ==================================================
``alpha1`` .. ``alpha4``      same                 0.2        odometry noise: rot from rot, rot from trans,
                                                              trans from trans, trans from rot
``z_hit``, ``z_rand``         same                 0.5, 0.5   likelihood-field mixture weights
``sigma_hit``                 same                 0.2 m      std dev of the hit term
``laser_likelihood_max_dist`` same                 2.0 m      cap of the distance field
``laser_max_range``           same                 100 m      range limit (<= 0: the scan's ``range_max``)
``laser_min_range``           same                 -1 m       shorter readings are skipped (<= 0: none)
``max_beams``                 same                 60         beams used per scan
``laser_pose``                (from TF)            (0, 0, 0)  the scanner in the robot frame, m, m, rad
``map_resolution``            (the map's)          0.05 m     cell size of the distance field
``min_particles``             same                 500
``max_particles``             same                 2000
``pf_err``, ``pf_z``          same (ROS 1: kld_*)  0.05, 0.99 KLD bound ε and quantile z
``bin_xy``, ``bin_theta``     (fixed in pf.c)      0.5 m, 10° KLD and cluster bins
``recovery_alpha_slow``       same                 0.001      slow average rate (Nav2's default is 0: off)
``recovery_alpha_fast``       same                 0.1        fast average rate (Nav2's default is 0: off)
``update_min_d``              same                 0.25 m     translation that triggers a filter run
``update_min_a``              same                 0.2 rad    rotation that triggers a filter run
``resample_interval``         same                 1          filter runs per resampling
``estimate``                  --                   "cluster"  "cluster" (Nav2) or "mean"
============================  ===================  =========  ==================================================

Nav2's odometry alphas of 0.2 suit poor odometry (a step's length has a standard deviation of 45% of it). With
odometry as good as the simulator's they keep the cloud wide, at 1,500 to 2,000 particles in the office benchmark
with 0.3 m between filter runs; lower them, as a Nav2 user tunes them, for a tight cloud at ``min_particles``.

What differs from Nav2
----------------------
* The map is wall segments (and optionally discs), not an occupancy grid: the distance field holds the exact
  distance from each cell centre to the nearest segment, where Nav2 measures to the centres of occupied cells.
  Random poses are drawn uniformly over cells of the map's bounding box farther than one cell from a wall (Nav2:
  over the map's free cells); the map has no notion of inside and outside.
* Resampling is low-variance (above); Nav2 draws each new particle independently (multinomial), because its
  one-pass KLD loop cannot use a comb.
* Recovery is on by default with the rates the ROS documentation recommends (Nav2 ships it off); ``w_avg`` is the
  weighted mean likelihood, where Nav2 divides the weighted sum once more by the particle count, which makes its
  averages depend on how many particles KLD chose.
* With every particle in a single bin KLD asks for ``min_particles`` (Fox's bound for one bin is zero); Nav2 asks
  for ``max_particles`` then. Heading bins wrap around at ±π.
* The covariance returned is the estimate's own (the heaviest cluster's, 3 x 3 with cross terms); Nav2 publishes
  the x-y block and the heading variance of the whole particle set with the heaviest cluster's mean, and its
  cluster heading variance omits the division by the cluster's weight.
* Only the ``diff`` motion model and the ``likelihood_field`` sensor model; no beam skipping, no ``alpha5``
  (omni), no particle-cloud or transform publishing: :meth:`Amcl.update` returns the estimate.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.geometry import Pose2D, compose, relative, wrap_angle

__all__ = [
    "Amcl",
    "AmclParams",
    "LikelihoodField",
    "beam_subsample",
    "cluster_labels",
    "kld_sample_count",
    "likelihood_field_model",
    "low_variance_resample",
    "sample_motion_model_odometry",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_TWO_PI = 2.0 * math.pi
_MIN_STEP_FOR_BEARING = 0.01
"""m: an odometry step shorter than this has no direction (δrot1 = 0), as in Nav2."""
_FIELD_CHUNK = 1 << 20
"""Most cells whose distances are computed in one numpy pass while the distance field is built."""
_BIN_BITS = 21
"""Bits of each of the three bin indices packed into one int64 key (±1e6 bins: ±500 km at 0.5 m)."""


@dataclass(frozen=True)
class AmclParams:
    """The filter's parameters, with Nav2's defaults (see the module docstring for their meaning).

    Raises:
        ValueError: a value is out of its range.
    """

    alpha1: float = 0.2
    alpha2: float = 0.2
    alpha3: float = 0.2
    alpha4: float = 0.2
    z_hit: float = 0.5
    z_rand: float = 0.5
    sigma_hit: float = 0.2
    laser_likelihood_max_dist: float = 2.0
    laser_max_range: float = 100.0
    laser_min_range: float = -1.0
    max_beams: int = 60
    laser_pose: tuple[float, float, float] = (0.0, 0.0, 0.0)
    map_resolution: float = 0.05
    min_particles: int = 500
    max_particles: int = 2000
    pf_err: float = 0.05
    pf_z: float = 0.99
    bin_xy: float = 0.5
    bin_theta: float = math.radians(10.0)
    recovery_alpha_slow: float = 0.001
    recovery_alpha_fast: float = 0.1
    update_min_d: float = 0.25
    update_min_a: float = 0.2
    resample_interval: int = 1
    estimate: Literal["cluster", "mean"] = "cluster"

    def __post_init__(self) -> None:
        def check(name: str, ok: bool) -> None:
            if not ok:
                raise ValueError(f"AmclParams.{name} is out of range: {getattr(self, name)!r}")

        for name in ("alpha1", "alpha2", "alpha3", "alpha4", "z_hit", "z_rand", "update_min_d", "update_min_a"):
            value = getattr(self, name)
            check(name, math.isfinite(value) and value >= 0.0)
        for name in ("sigma_hit", "laser_likelihood_max_dist", "map_resolution", "pf_err", "pf_z", "bin_xy"):
            value = getattr(self, name)
            check(name, math.isfinite(value) and value > 0.0)
        check("bin_theta", 0.0 < self.bin_theta <= _TWO_PI)
        check("z_rand", self.z_hit + self.z_rand > 0.0)
        check("laser_max_range", math.isfinite(self.laser_max_range))
        check("laser_min_range", math.isfinite(self.laser_min_range))
        check("max_beams", self.max_beams >= 2)
        check("min_particles", self.min_particles >= 1)
        check("max_particles", self.max_particles >= self.min_particles)
        check("recovery_alpha_slow", 0.0 <= self.recovery_alpha_slow <= 1.0)
        check("recovery_alpha_fast", 0.0 <= self.recovery_alpha_fast <= 1.0)
        check("resample_interval", self.resample_interval >= 1)
        check("laser_pose", len(self.laser_pose) == 3 and all(math.isfinite(v) for v in self.laser_pose))
        check("estimate", self.estimate in ("cluster", "mean"))

    @property
    def recovery(self) -> bool:
        """Whether augmented MCL adds random particles (both rates > 0)."""
        return self.recovery_alpha_slow > 0.0 and self.recovery_alpha_fast > 0.0


# -- the map: a distance field over the walls ------------------------------------------------------------------------


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


# -- the algorithm's steps, as functions -----------------------------------------------------------------------------


def sample_motion_model_odometry(
    particles: FloatArray,
    odom_from: Pose2D,
    odom_to: Pose2D,
    alphas: tuple[float, float, float, float],
    rng: np.random.Generator,
) -> FloatArray:
    """Move every particle by one odometry step with sampled noise (Probabilistic Robotics, table 5.6).

    Args:
        particles: ``(N, 3)`` poses ``(x, y, θ)``, m, m, rad.
        odom_from: odometry pose at the previous filter run.  odom_to: odometry pose now.
        alphas: ``(α1, α2, α3, α4)``: rotation noise from rotation and from translation, translation noise from
            translation and from rotation.
        rng: the source of the noise.

    Returns:
        ``(N, 3)`` the moved particles (headings wrapped to [-π, π)); the input is not changed.
    """
    a1, a2, a3, a4 = alphas
    dx = odom_to[0] - odom_from[0]
    dy = odom_to[1] - odom_from[1]
    trans = math.hypot(dx, dy)
    rot1 = 0.0 if trans < _MIN_STEP_FOR_BEARING else wrap_angle(math.atan2(dy, dx) - odom_from[2])
    rot2 = wrap_angle(odom_to[2] - odom_from[2] - rot1)
    # A turn of nearly π is a step backwards: its noise is that of the small turn it differs from π by.
    rot1_noise = min(abs(rot1), math.pi - abs(rot1))
    rot2_noise = min(abs(rot2), math.pi - abs(rot2))
    n = particles.shape[0]
    std = np.sqrt(
        [
            a1 * rot1_noise**2 + a2 * trans**2,
            a3 * trans**2 + a4 * (rot1_noise**2 + rot2_noise**2),
            a1 * rot2_noise**2 + a2 * trans**2,
        ]
    )
    noise = rng.standard_normal((3, n)) * std[:, None]
    rot1_hat = rot1 - noise[0]
    trans_hat = trans - noise[1]
    rot2_hat = rot2 - noise[2]
    heading = particles[:, 2] + rot1_hat
    moved = np.empty_like(particles)
    moved[:, 0] = particles[:, 0] + trans_hat * np.cos(heading)
    moved[:, 1] = particles[:, 1] + trans_hat * np.sin(heading)
    moved[:, 2] = wrap_angle(heading + rot2_hat)
    return moved


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


def kld_sample_count(k: ArrayLike, err: float, z: float, min_particles: int, max_particles: int) -> IntArray:
    """Fox's KLD-sampling bound: how many samples ``k`` occupied bins need (vectorised over ``k``).

    ``n = ceil((k - 1) / (2 err) (1 - 2 / (9 (k - 1)) + sqrt(2 / (9 (k - 1))) z)³)``, clipped to
    ``[min_particles, max_particles]``; ``min_particles`` for ``k <= 1``.
    """
    kf = np.asarray(k, dtype=np.float64)
    km1 = np.maximum(kf - 1.0, 1.0)
    b = 2.0 / (9.0 * km1)
    x = 1.0 - b + np.sqrt(b) * z
    n = np.where(kf <= 1.0, min_particles, np.ceil(km1 / (2.0 * err) * x * x * x))
    count: IntArray = np.clip(n, min_particles, max_particles).astype(np.intp)
    return count


def low_variance_resample(weights: FloatArray, n: int, rng: np.random.Generator) -> IntArray:
    """Indices of ``n`` particles drawn by the low-variance sampler (Probabilistic Robotics, table 4.4).

    Args:
        weights: ``(N,)`` non-negative weights, not all zero (need not sum to 1).
        n: how many to draw.
        rng: the source of the comb's offset.

    Returns:
        ``(n,)`` indices into ``weights``, ascending.
    """
    cumulative = np.cumsum(weights)
    total = float(cumulative[-1])
    pointers = (rng.random() + np.arange(n)) * (total / n)
    indices: IntArray = np.minimum(np.searchsorted(cumulative, pointers, side="right"), weights.shape[0] - 1)
    return indices


def _bin_indices(particles: FloatArray, bin_xy: float, bin_theta: float) -> tuple[IntArray, IntArray, IntArray, int]:
    """Bin of each particle ``(ix, iy, iθ)`` and the number of heading bins (they wrap around)."""
    n_theta = max(1, round(_TWO_PI / bin_theta))
    ix = np.floor(particles[:, 0] / bin_xy).astype(np.intp)
    iy = np.floor(particles[:, 1] / bin_xy).astype(np.intp)
    ith = np.floor((particles[:, 2] + math.pi) * (n_theta / _TWO_PI)).astype(np.intp) % n_theta
    return ix, iy, ith, n_theta


def _pack(ix: IntArray, iy: IntArray, ith: IntArray) -> NDArray[np.int64]:
    offset = 1 << (_BIN_BITS - 1)
    keys: NDArray[np.int64] = (
        ((ix.astype(np.int64) + offset) << (2 * _BIN_BITS)) | ((iy.astype(np.int64) + offset) << _BIN_BITS) | ith
    )
    return keys


def bin_keys(particles: FloatArray, bin_xy: float, bin_theta: float) -> NDArray[np.int64]:
    """One int64 key per particle naming its ``bin_xy`` x ``bin_xy`` x ``bin_theta`` bin."""
    ix, iy, ith, _ = _bin_indices(particles, bin_xy, bin_theta)
    return _pack(ix, iy, ith)


def cluster_labels(particles: FloatArray, bin_xy: float, bin_theta: float) -> IntArray:
    """Cluster of each particle: occupied bins joined when they touch (26-neighbourhood, headings wrap).

    Returns:
        ``(N,)`` labels ``0 .. C-1``.

    Strategy: the occupied bins are sorted by key; each bin's 26 neighbours are looked up once by
    ``searchsorted``; then every bin takes the smallest label among itself and its neighbours, and labels jump to
    their label's label, until nothing changes (a few rounds for compact clouds).
    """
    ix, iy, ith, n_theta = _bin_indices(particles, bin_xy, bin_theta)
    keys = _pack(ix, iy, ith)
    occupied, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    bx, by, bth = ix[first], iy[first], ith[first]
    neighbours = []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dth in (-1, 0, 1):
                if dx == dy == dth == 0:
                    continue
                nkeys = _pack(bx + dx, by + dy, (bth + dth) % n_theta)
                at = np.minimum(np.searchsorted(occupied, nkeys), occupied.shape[0] - 1)
                neighbours.append(np.where(occupied[at] == nkeys, at, np.arange(occupied.shape[0])))
    table = np.stack(neighbours)
    labels = np.arange(occupied.shape[0])
    while True:
        updated = np.minimum(labels, labels[table].min(axis=0))
        updated = updated[updated]
        if np.array_equal(updated, labels):
            break
        labels = updated
    _, compact = np.unique(labels, return_inverse=True)
    per_particle: IntArray = compact[inverse.ravel()]
    return per_particle


def weighted_pose_stats(particles: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted mean ``(x, y, θ)`` and ``(3, 3)`` covariance of particles (headings on the circle).

    The heading's mean is ``atan2(Σ w sin θ, Σ w cos θ)`` and its variance ``-2 ln R`` with ``R`` the mean
    resultant length; the cross terms use headings wrapped about the mean.
    """
    w = weights / weights.sum()
    mx = float(w @ particles[:, 0])
    my = float(w @ particles[:, 1])
    sc = float(w @ np.cos(particles[:, 2]))
    ss = float(w @ np.sin(particles[:, 2]))
    mth = math.atan2(ss, sc)
    d = np.column_stack((particles[:, 0] - mx, particles[:, 1] - my, wrap_angle(particles[:, 2] - mth)))
    cov: FloatArray = (d * w[:, None]).T @ d
    resultant = min(1.0, math.hypot(sc, ss))
    cov[2, 2] = -2.0 * math.log(resultant) if resultant > 0.0 else math.inf
    return np.array([mx, my, mth]), cov


# -- the filter ------------------------------------------------------------------------------------------------------


class Amcl:
    """Adaptive Monte Carlo localization on a map of walls (see the module docstring).

    Args:
        walls: ``(N, 4)`` wall segments ``[x1, y1, x2, y2]``, m (e.g. ``World.segments()``: walls and obstacle
            edges).
        seed: seed of the filter's random generator; the same seed and inputs give the same estimates.
        params: the parameters.
        circles: ``(M, 3)`` solid discs ``[x, y, r]``, m, also in the map (pillars, trees), or None.

    Raises:
        ValueError: bad walls or circles.
    """

    def __init__(
        self,
        walls: ArrayLike,
        *,
        seed: int,
        params: AmclParams = AmclParams(),
        circles: ArrayLike | None = None,
    ) -> None:
        self.params = params
        self._rng = np.random.default_rng(seed)
        self.field = LikelihoodField(
            walls,
            circles,
            resolution=params.map_resolution,
            max_dist=params.laser_likelihood_max_dist,
            z_hit=params.z_hit,
            sigma_hit=params.sigma_hit,
        )
        self._particles = np.zeros((0, 3))
        self._weights = np.zeros(0)
        self._odom_last: Pose2D | None = None  # odometry at the last filter run; None: none since init
        self._runs = 0  # filter runs since init, for resample_interval
        self._w_slow = 0.0
        self._w_fast = 0.0
        self._mean = np.zeros(3)
        self._cov = np.zeros((3, 3))
        self.filter_runs = 0
        """Total filter runs (scans that passed the update thresholds)."""

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def particles(self) -> FloatArray:
        """``(N, 3)`` a copy of the particles ``(x, y, θ)``, m, m, rad."""
        return self._particles.copy()

    @property
    def weights(self) -> FloatArray:
        """``(N,)`` a copy of the particles' normalised weights."""
        return self._weights.copy()

    @property
    def particle_count(self) -> int:
        """How many particles the filter holds now."""
        return int(self._particles.shape[0])

    def estimate(self) -> tuple[float, float, float, FloatArray]:
        """The estimate at the last filter run: ``(x, y, θ, cov)``, cov ``(3, 3)`` over ``(x, y, θ)``."""
        return float(self._mean[0]), float(self._mean[1]), float(self._mean[2]), self._cov.copy()

    # -- initialisation ------------------------------------------------------------------------------------------

    def init_pose(self, x: float, y: float, theta: float, cov: ArrayLike) -> None:
        """Start from a Gaussian: ``max_particles`` particles drawn about ``(x, y, θ)`` (Nav2's initial pose).

        Args:
            x: m.  y: m.  theta: rad.
            cov: ``(3, 3)`` symmetric positive semi-definite covariance of ``(x, y, θ)`` (m², rad²); may be zero.

        Raises:
            ValueError: a value is not finite or ``cov`` has the wrong shape or a negative eigenvalue.
        """
        mean = np.array([x, y, theta], dtype=np.float64)
        c = np.asarray(cov, dtype=np.float64)
        if c.shape != (3, 3) or not np.all(np.isfinite(c)) or not np.all(np.isfinite(mean)):
            raise ValueError(f"init_pose needs a finite pose and a finite (3, 3) covariance, got shape {c.shape}")
        c = 0.5 * (c + c.T)
        eigenvalues, eigenvectors = np.linalg.eigh(c)
        if eigenvalues.min() < -1e-12 * max(1.0, float(np.abs(eigenvalues).max())):
            raise ValueError("init_pose: the covariance is not positive semi-definite")
        n = self.params.max_particles
        z = self._rng.standard_normal((n, 3)) * np.sqrt(np.maximum(eigenvalues, 0.0))
        particles = mean + z @ eigenvectors.T
        particles[:, 2] = wrap_angle(particles[:, 2])
        self._reset(particles)

    def init_global(self) -> None:
        """Start lost: ``max_particles`` particles spread uniformly over the map's free space (Nav2's global
        localization)."""
        self._reset(self._random_poses(self.params.max_particles))

    def _reset(self, particles: FloatArray) -> None:
        self._particles = particles
        self._weights = np.full(particles.shape[0], 1.0 / particles.shape[0])
        self._odom_last = None
        self._runs = 0
        self._w_slow = self._w_fast = 0.0
        self._update_estimate()

    def _random_poses(self, n: int) -> FloatArray:
        """``n`` poses uniform over the cells of the map's bounding box farther than one cell from a wall."""
        xmin, ymin, xmax, ymax = self.field.map_bounds
        out = np.zeros((0, 3))
        for _ in range(1000):
            m = 2 * (n - out.shape[0]) + 16
            x = self._rng.uniform(xmin, xmax, m)
            y = self._rng.uniform(ymin, ymax, m)
            free = self.field.distance_at(x, y) > self.field.resolution
            theta = self._rng.uniform(-math.pi, math.pi, m)
            out = np.vstack((out, np.column_stack((x, y, theta))[free]))
            if out.shape[0] >= n:
                return out[:n]
        raise ValueError("the map has no free space to place particles in")

    # -- the update ----------------------------------------------------------------------------------------------

    def update(
        self,
        odom_pose: tuple[float, float, float],
        scan_ranges: ArrayLike,
        angle_min: float,
        angle_increment: float,
        range_max: float,
    ) -> tuple[float, float, float, FloatArray]:
        """Take one scan with the odometry pose of the same instant; return the pose estimate.

        Args:
            odom_pose: the robot's odometry pose ``(x, y, θ)`` (m, m, rad) in the odometry frame.
            scan_ranges: ``(K,)`` ranges, m, beam ``i`` at ``angle_min + i angle_increment`` in the scanner frame;
                NaN, inf, readings at or beyond the range limit and negative values (a failed scanner) are ignored.
            angle_min: rad.  angle_increment: rad.
            range_max: the scanner's maximum range, m, > 0.

        Returns:
            ``(x, y, θ, cov)``: the map pose of the robot now (the last filter estimate carried along by the
            odometry since that run) and the ``(3, 3)`` covariance of that estimate.

        Raises:
            RuntimeError: no :meth:`init_pose` or :meth:`init_global` yet.
            ValueError: the scan or the pose is malformed.
        """
        if self._particles.shape[0] == 0:
            raise RuntimeError("Amcl.update before init_pose or init_global")
        odom: Pose2D = (float(odom_pose[0]), float(odom_pose[1]), float(odom_pose[2]))
        ranges = np.asarray(scan_ranges, dtype=np.float64)
        if ranges.ndim != 1 or not all(math.isfinite(v) for v in odom):
            raise ValueError("update needs a finite odometry pose and a 1-D scan")
        if not (math.isfinite(range_max) and range_max > 0.0):
            raise ValueError(f"range_max must be finite and > 0, got {range_max!r}")
        p = self.params
        last = self._odom_last
        if last is None:
            run = True
        else:
            run = (
                abs(odom[0] - last[0]) > p.update_min_d
                or abs(odom[1] - last[1]) > p.update_min_d
                or abs(wrap_angle(odom[2] - last[2])) > p.update_min_a
            )
            if run:
                alphas = (p.alpha1, p.alpha2, p.alpha3, p.alpha4)
                self._particles = sample_motion_model_odometry(self._particles, last, odom, alphas, self._rng)
        if run:
            self._odom_last = odom
            self._sensor_update(ranges, float(angle_min), float(angle_increment), float(range_max))
            self._runs += 1
            self.filter_runs += 1
            if self._runs % p.resample_interval == 0:
                self._resample()
            self._update_estimate()
        assert self._odom_last is not None
        moved = relative(self._odom_last, odom)
        x, y, theta = compose((float(self._mean[0]), float(self._mean[1]), float(self._mean[2])), moved)
        return x, y, wrap_angle(theta), self._cov.copy()

    def _sensor_update(self, ranges: FloatArray, angle_min: float, angle_increment: float, range_max: float) -> None:
        p = self.params
        limit = min(range_max, p.laser_max_range) if p.laser_max_range > 0.0 else range_max
        used = beam_subsample(ranges.shape[0], p.max_beams)
        r = ranges[used]
        with np.errstate(invalid="ignore"):
            keep = np.isfinite(r) & (r < limit) & (r > max(p.laser_min_range, 0.0))
        if not np.any(keep):
            return
        bearings = (used[keep] * angle_increment + angle_min).astype(np.float64)
        likelihood = likelihood_field_model(
            self._particles, self.field, r[keep], bearings, limit, p.laser_pose, p.z_rand
        )
        weights = self._weights * likelihood
        total = float(weights.sum())
        self._weights = weights / total
        w_avg = total  # the prior weights summed to 1: this is the weighted mean likelihood
        self._w_slow = w_avg if self._w_slow == 0.0 else self._w_slow + p.recovery_alpha_slow * (w_avg - self._w_slow)
        self._w_fast = w_avg if self._w_fast == 0.0 else self._w_fast + p.recovery_alpha_fast * (w_avg - self._w_fast)

    def _resample(self) -> None:
        p = self.params
        w_diff = max(0.0, 1.0 - self._w_fast / self._w_slow) if p.recovery and self._w_slow > 0.0 else 0.0
        # Pass 1: how many. Candidates as the new set would be drawn, in random order, so that every prefix of
        # them is a fair sample; count where the number drawn first exceeds the bound of the bins filled so far.
        m = p.max_particles
        candidates = self._particles[self._rng.permutation(low_variance_resample(self._weights, m, self._rng))]
        is_random = self._rng.random(m) < w_diff
        n_random_candidates = int(is_random.sum())
        if n_random_candidates:
            candidates[is_random] = self._random_poses(n_random_candidates)
        keys = bin_keys(candidates, p.bin_xy, p.bin_theta)
        _, first = np.unique(keys, return_index=True)
        new_bin = np.zeros(m, dtype=bool)
        new_bin[first] = True
        bins_so_far = np.cumsum(new_bin)
        over = np.arange(1, m + 1) > kld_sample_count(bins_so_far, p.pf_err, p.pf_z, p.min_particles, m)
        n = int(np.argmax(over)) + 1 if np.any(over) else m
        # Pass 2: the new set, a low-variance comb of that many, with the random share of pass 1.
        n_random = int(is_random[:n].sum())
        kept = self._particles[low_variance_resample(self._weights, n - n_random, self._rng)]
        particles = np.vstack((kept, self._random_poses(n_random))) if n_random else kept
        self._particles = particles
        self._weights = np.full(n, 1.0 / n)
        if w_diff > 0.0:
            self._w_slow = self._w_fast = 0.0  # as Nav2: restart the averages so recovery does not run away

    def _update_estimate(self) -> None:
        p = self.params
        particles, weights = self._particles, self._weights
        if p.estimate == "cluster":
            labels = cluster_labels(particles, p.bin_xy, p.bin_theta)
            heaviest = int(np.argmax(np.bincount(labels, weights=weights)))
            particles, weights = particles[labels == heaviest], weights[labels == heaviest]
        self._mean, self._cov = weighted_pose_stats(particles, weights)


# -- benchmark -------------------------------------------------------------------------------------------------------


CONFIGURATIONS: tuple[tuple[str, dict[str, float]], ...] = (
    ("Nav2 defaults", {}),
    ("every scan", {"update_min_d": 0.0, "update_min_a": 0.0}),
    ("every scan, α 0.05", {"update_min_d": 0.0, "update_min_a": 0.0, **{f"alpha{i}": 0.05 for i in range(1, 5)}}),
)
"""The benchmark's rows: a name and the parameters that differ from Nav2's defaults."""


def run_office(seconds: float, seed: int, changes: dict[str, float]) -> dict[str, float]:
    """Drive the office corridor with AMCL, as :func:`main` describes; return its figures."""
    from pluto.hardware.sick.sim import LaserParams, SimLaser
    from pluto.sim.noise import NoiseProfile
    from pluto.sim.raycast import RayCaster
    from pluto.sim.world import load_world

    world = load_world("office")
    laser_params = LaserParams()
    period = laser_params.period
    rng = np.random.default_rng(seed)
    laser = SimLaser(
        RayCaster(world.segments(), world.circles), laser_params, NoiseProfile(laser_range_std=0.01), rng=rng
    )
    angles = laser_params.angles()
    params = AmclParams(laser_pose=(laser_params.mount_x, 0.0, 0.0), **changes)  # type: ignore[arg-type]
    build = time.process_time()
    amcl = Amcl(world.segments(), seed=seed, params=params, circles=world.circles)
    build = time.process_time() - build
    truth: Pose2D = (10.0, 10.0, 0.0)
    odom: Pose2D = truth
    amcl.init_pose(*truth, np.diag([0.25, 0.25, (math.pi / 12) ** 2]))
    leg = 8.0 * math.pi  # s: two periods of the weave, 12.6 m
    run_times: list[float] = []
    skip_times: list[float] = []
    counts: list[int] = []
    errors: list[float] = []
    for k in range(1, int(seconds / period) + 1):
        t = k * period
        v = 0.5 if int(t // leg) % 2 == 0 else -0.5
        step: Pose2D = (v * period, 0.0, 0.15 * math.cos(0.5 * t) * period)
        truth = compose(truth, step)
        slip, turn = 1.0 + 0.02 * rng.standard_normal(2)
        odom = compose(odom, (step[0] * slip, 0.0, step[2] * turn))
        ranges = laser.scan(t, truth, movers=world.mover_circles(t))
        runs = amcl.filter_runs
        start = time.process_time()
        x, y, _, _ = amcl.update(odom, ranges, float(angles[0]), float(angles[1] - angles[0]), 80.0)
        elapsed = time.process_time() - start
        if t > 10.0:
            (run_times if amcl.filter_runs > runs else skip_times).append(elapsed)
            counts.append(amcl.particle_count)
            errors.append(math.hypot(x - truth[0], y - truth[1]))
    return {
        "build_s": build,
        "runs": len(run_times),
        "run_ms": 1e3 * float(np.mean(run_times)),
        "run_p90_ms": 1e3 * float(np.percentile(run_times, 90)),
        "skip_us": 1e6 * float(np.mean(skip_times)) if skip_times else math.nan,
        "particles": float(np.mean(counts)),
        "error_m": float(np.mean(errors)),
        "max_error_m": float(np.max(errors)),
    }


def main() -> None:
    """Print the CPU time of :meth:`Amcl.update` in the office world with 361-beam scans.

    The robot drives 12.6 m east along the office corridor and back, again and again, at 0.5 m/s with a gentle
    weave (heading ±0.3 rad); the simulated SICK (361 beams over 180°, 80 m, 1 cm resolution, 1 cm noise) scans at
    5 Hz from 0.25 m ahead of the centre, the walking person included; odometry has 2% random error on each step's
    length and turn. AMCL starts from the true pose with Nav2's default initial covariance. Rows: Nav2's defaults;
    the same with ``update_min_d = update_min_a = 0`` (every scan runs the filter, 0.1 m apart); and that with
    ``alpha1..4 = 0.05``, an odometry model closer to this odometry. Figures after the first 10 s: a *run* is a
    call that ran the filter, a *skip* one under the update thresholds; CPU of this process
    (``time.process_time``); the distance field's build time once per row.
    """
    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0] if main.__doc__ else None)
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per row (default 120)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"AMCL (bench/amcl.py), office world, 361-beam scans at 5 Hz, {args.seconds:.0f} s, seed {args.seed}")
    print(
        f"{'configuration':<20}{'field s':>8}{'runs':>6}{'run ms':>8}{'p90 ms':>8}"
        f"{'skip µs':>9}{'particles':>11}{'err m':>7}{'max m':>7}"
    )
    for name, changes in CONFIGURATIONS:
        r = run_office(args.seconds, args.seed, changes)
        skip = "-" if math.isnan(r["skip_us"]) else f"{r['skip_us']:.0f}"
        print(
            f"{name:<20}{r['build_s']:>8.2f}{r['runs']:>6.0f}{r['run_ms']:>8.2f}{r['run_p90_ms']:>8.2f}{skip:>9}"
            f"{r['particles']:>11.0f}{r['error_m']:>7.3f}{r['max_error_m']:>7.3f}"
        )
    print(f"({platform.processor() or platform.machine()}, Python {platform.python_version()}, numpy {np.__version__})")


if __name__ == "__main__":
    main()
