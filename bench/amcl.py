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

Files
-----
The filter (:class:`Amcl`, :class:`AmclParams`) and the office benchmark are here; the motion model is in
``bench/amcl_motion.py``, the measurement model (the distance field) in ``bench/amcl_field.py`` and the steps on
the particle set (KLD, resampling, bins and clusters, the estimate's statistics) in ``bench/amcl_particles.py``.
This module imports them by name (it puts bench/ on ``sys.path``) and re-exports their public names.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.geometry import Pose2D, compose, relative, wrap_angle

sys.path.append(str(Path(__file__).resolve().parent))  # the filter's other files (bench/ is not a package)

from amcl_field import LikelihoodField, beam_subsample, likelihood_field_model
from amcl_motion import sample_motion_model_odometry
from amcl_particles import (
    _TWO_PI,
    bin_keys,
    cluster_labels,
    kld_sample_count,
    low_variance_resample,
    weighted_pose_stats,
)

__all__ = [
    "Amcl",
    "AmclParams",
    "LikelihoodField",
    "beam_subsample",
    "bin_keys",
    "cluster_labels",
    "kld_sample_count",
    "likelihood_field_model",
    "low_variance_resample",
    "sample_motion_model_odometry",
    "weighted_pose_stats",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


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


# -- the filter --------------------------------------------------------------------------------------------------------


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


# -- benchmark ---------------------------------------------------------------------------------------------------------


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
