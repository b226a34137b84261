"""What the reference AMCL (``bench/amcl.py``) does with its particle set: how many to keep (KLD-sampling,
step 5 of the algorithm there), which to copy (low-variance resampling, step 6), the bins they fall in and the
clusters of those bins, and the weighted pose statistics of a set (the estimate, step 7).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.geometry import wrap_angle

__all__ = ["bin_keys", "cluster_labels", "kld_sample_count", "low_variance_resample", "weighted_pose_stats"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_TWO_PI = 2.0 * math.pi
_BIN_BITS = 21
"""Bits of each of the three bin indices packed into one int64 key (±1e6 bins: ±500 km at 0.5 m)."""


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
