"""The pose filter's update: a scan's lines paired with the map's walls, and the state corrected with the pairs.

Strategy (the wall model of Arras and Siegwart, SPIE 1997; :mod:`pluto.navigation.pose.core` holds the filter,
its state and its predict step), in four steps, each a function here:

* **Gate** (:func:`_gate`). A wall (α, ρ) seen from the laser at (x, y, θ) is the line
  (γ, ρ_r) = (α - θ, ρ - x·cos α - y·sin α), with (γ + π, -ρ_r) when ρ_r < 0 (a feature always has r >= 0), so
  H = [[0, 0, -1], [-s·cos α, -s·sin α, 0]] (s the sign), and the wall's own uncertainty enters through
  J_w = [[1, 0], [s·(x·sin α - y·cos α), s]]. For every feature and every wall the laser could see, the innovation
  ν = (α_f - γ, r_f - ρ_r) with S = H·P·Hᵀ + C_f + J_w·C_w·J_wᵀ is gated by its Mahalanobis distance
  νᵀS⁻¹ν < ``gate`` (chi-square, 2 dof) and by the segments: the feature's end points, carried into the map frame,
  must overlap the wall's extent with a margin (``overlap_margin`` plus three standard deviations of the pose along
  the wall). This runs for every feature and wall in view, so it stays in scalars, S's common part multiplied out
  once per wall.
* **Pair** (:func:`_greedy`). Pairs are taken greedily, nearest first (the larger overlap first between equal
  distances, which settles collinear walls), one feature per wall and one wall per feature.
* **Join the pieces of a wall** (:func:`_join_pieces`, :func:`_fuse_pieces`). A wall seen in pieces (a glass pane, a
  doorway or a box in front of it cuts it) gives a feature per piece, and the nearest in the Mahalanobis sense is
  often the least precise: every other piece that passes the gate with the wall, overlaps it and agrees with the
  paired feature (their difference within the gate) joins that pair, and the pair's measurement is its pieces fused
  by their information, C = (Σ C_i⁻¹)⁻¹ and ν = C·Σ C_i⁻¹·ν_i, the wall's own error added once, as it is the same
  for every piece (:attr:`~pluto.navigation.pose.core.PoseFilter.joined` lists them).
* **Correct** (:func:`_correct`). All the pairs update the state together: as their noises are independent, one
  pair after the other, H kept at the prior and each innovation moved by the state's change so far, which is the
  joint update with 2x2 inverses only: K = P·Hᵀ·S⁻¹, x ← x + K·ν, and the covariance in Joseph form,
  P ← (I - K·H)·P·(I - K·H)ᵀ + K·R·Kᵀ, which stays symmetric and positive.

A map wall's error is the same scan after scan, so it does not average out as the walls are seen again and again:
after an update the filter keeps the variances of x, y and θ at least ``wall_offset_std``² and ``wall_angle_std``²
(the map's own accuracy), which also keeps the gate open to a wall that disagrees by a few cm with the others.

All of it is compiled by numba (cached beside the module): on a few features and walls, numpy's per-call overhead
would cost more than the arithmetic, on every scan.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from pluto.navigation.angles import compiled_wrap_angle

__all__ = ["associate"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def associate(d2: FloatArray, overlap: FloatArray, gate: float) -> list[tuple[int, int]]:
    """One-to-one pairs (feature, candidate column) within the gate and overlapping, nearest first (the larger
    overlap first between equal distances)."""
    d2 = np.ascontiguousarray(d2, dtype=np.float64)
    overlap = np.ascontiguousarray(overlap, dtype=np.float64)
    if d2.ndim != 2 or d2.shape != overlap.shape:
        raise ValueError(f"d2 and overlap must be 2-D of the same shape, got {d2.shape} and {overlap.shape}")
    return [(f, c) for f, c in _greedy(d2, overlap, float(gate)).tolist()]


# -- compiled kernels ------------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _greedy(d2: FloatArray, overlap: FloatArray, gate: float) -> IntArray:
    """``(K, 2)`` pairs (row, column) with ``d2 < gate`` and ``overlap > 0``, one per row and column, in the order
    taken: the smallest ``d2`` of the pairs whose row and column are both free, then the largest ``overlap``, then
    the first in row-major order (the same pairs and order as going down the pairs sorted by those keys)."""
    rows, cols = d2.shape
    candidates = np.empty((rows * cols, 2), dtype=np.int64)
    k = 0
    for f in range(rows):
        for c in range(cols):
            if d2[f, c] < gate and overlap[f, c] > 0.0:  # NaN passes neither
                candidates[k, 0] = f
                candidates[k, 1] = c
                k += 1
    free_row = np.ones(rows, dtype=np.bool_)
    free_col = np.ones(cols, dtype=np.bool_)
    chosen = np.empty((min(rows, cols), 2), dtype=np.int64)
    m = 0
    while True:
        best = -1
        best_d2 = 0.0
        best_overlap = 0.0
        for i in range(k):
            f = candidates[i, 0]
            c = candidates[i, 1]
            if not (free_row[f] and free_col[c]):
                continue
            if best < 0 or d2[f, c] < best_d2 or (d2[f, c] == best_d2 and overlap[f, c] > best_overlap):
                best = i
                best_d2 = d2[f, c]
                best_overlap = overlap[f, c]
        if best < 0:
            break
        f = candidates[best, 0]
        c = candidates[best, 1]
        free_row[f] = False
        free_col[c] = False
        chosen[m, 0] = f
        chosen[m, 1] = c
        m += 1
    return chosen[:m].copy()


# -- small matrices ----------------------------------------------------------------------------------------------
# The correction runs for every pair of every scan. numpy's ``@`` in a kernel calls BLAS, whose call costs more than
# a 3x3 product, and a new array per result costs more again: these write their result into an array the caller
# gives (made once per scan), and numba inlines them where they are called.


@numba.njit(cache=True, inline="always")
def _product(out: FloatArray, a: FloatArray, b: FloatArray) -> None:
    """out ← a·b."""
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            total = 0.0
            for k in range(a.shape[1]):
                total += a[i, k] * b[k, j]
            out[i, j] = total


@numba.njit(cache=True, inline="always")
def _apply(out: FloatArray, a: FloatArray, v: FloatArray) -> None:
    """out ← a·v (v a vector)."""
    for i in range(a.shape[0]):
        total = 0.0
        for k in range(a.shape[1]):
            total += a[i, k] * v[k]
        out[i] = total


@numba.njit(cache=True, inline="always")
def _sandwich(out: FloatArray, a: FloatArray, m: FloatArray, plus: FloatArray) -> None:
    """out ← a·m·aᵀ + plus: the covariance ``m`` carried through the Jacobian ``a``, and another added."""
    for i in range(a.shape[0]):
        for j in range(a.shape[0]):
            out[i, j] = plus[i, j]
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            am = 0.0  # (a·m)[i, k]
            for n in range(a.shape[1]):
                am += a[i, n] * m[n, k]
            for j in range(a.shape[0]):
                out[i, j] += am * a[j, k]


@numba.njit(cache=True, inline="always")
def _invert_2x2(out: FloatArray, m: FloatArray) -> None:
    """out ← m⁻¹ of a 2x2 matrix, in closed form: its adjugate over its determinant."""
    k = 1.0 / (m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0])
    out[0, 0], out[0, 1], out[1, 0], out[1, 1] = k * m[1, 1], -k * m[0, 1], -k * m[1, 0], k * m[0, 0]


@numba.njit(cache=True, inline="always")
def _quadratic(m: FloatArray, v: FloatArray) -> float:
    """vᵀ·m·v."""
    total = 0.0
    for i in range(v.shape[0]):
        for k in range(v.shape[0]):
            total += v[i] * m[i, k] * v[k]
    return total


@numba.njit(cache=True, inline="always")
def _mahalanobis(s_aa: float, s_ar: float, s_rr: float, da: float, dr: float) -> float:
    """νᵀS⁻¹ν of ν = (da, dr) and the symmetric S = [[s_aa, s_ar], [s_ar, s_rr]]; infinite if S is not positive.
    (In scalars: the gate computes it for every line and wall in view.)"""
    det = s_aa * s_rr - s_ar * s_ar
    return (s_rr * da * da - 2.0 * s_ar * da * dr + s_aa * dr * dr) / det if det > 0.0 else math.inf


# -- a wall seen from the laser ----------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _jacobians(h: FloatArray, jw: FloatArray, x: float, y: float, alpha: float, s: float) -> None:
    """h ← H = ∂(γ, ρ_r)/∂(x, y, θ) and jw ← J_w = ∂(γ, ρ_r)/∂(α, ρ) of the wall (α, ρ) seen from (x, y) with sign
    s (2x3 and 2x2)."""
    ca, sa = math.cos(alpha), math.sin(alpha)
    h[0, 0], h[0, 1], h[0, 2] = 0.0, 0.0, -1.0
    h[1, 0], h[1, 1], h[1, 2] = -s * ca, -s * sa, 0.0
    jw[0, 0], jw[0, 1] = 1.0, 0.0
    jw[1, 0], jw[1, 1] = s * (x * sa - y * ca), s


@numba.njit(cache=True, inline="always")
def _wall_uncertainty(
    p: FloatArray, cw: FloatArray, x: float, y: float, ca: float, sa: float, s: float
) -> tuple[float, float, float, float]:
    """The part of S common to every line seen against a wall of normal (cos α, sin α) = (ca, sa), covariance ``cw``
    and sign s from the laser at (x, y) of covariance ``p``: H·P·Hᵀ + J_w·C_w·J_wᵀ as (S_αα, S_αr, S_rr), with the
    products of :func:`_jacobians`' matrices written out (H's first row is (0, 0, -1), J_w's (1, 0)); and the
    standard deviation of the pose along the wall, m."""
    j = s * (x * sa - y * ca)
    s_aa = p[2, 2] + cw[0, 0]
    s_ar = s * (ca * p[2, 0] + sa * p[2, 1]) + j * cw[0, 0] + s * cw[0, 1]
    s_rr = ca * ca * p[0, 0] + 2.0 * ca * sa * p[0, 1] + sa * sa * p[1, 1]
    s_rr += j * j * cw[0, 0] + 2.0 * j * s * cw[0, 1] + cw[1, 1]
    along = math.sqrt(max(sa * sa * p[0, 0] - 2.0 * sa * ca * p[0, 1] + ca * ca * p[1, 1], 0.0))
    return s_aa, s_ar, s_rr, along


@numba.njit(cache=True, inline="always")
def _overlap(
    x: float, y: float, ct: float, st: float, line: FloatArray, ca: float, sa: float, extent: FloatArray, slack: float
) -> float:
    """How much a line's segment (laser frame; start and end in columns 5-8), carried into the map frame from the
    laser at (x, y) heading (cos θ, sin θ) = (ct, st), overlaps a wall's extent along its line (normal (ca, sa))
    widened by ``slack`` at each end, m (negative: they are apart)."""
    t1 = -(x + ct * line[5] - st * line[6]) * sa + (y + st * line[5] + ct * line[6]) * ca
    t2 = -(x + ct * line[7] - st * line[8]) * sa + (y + st * line[7] + ct * line[8]) * ca
    return float(min(max(t1, t2), extent[1] + slack) - max(min(t1, t2), extent[0] - slack))


# -- the steps of the update -------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _gate(
    state: FloatArray,
    p: FloatArray,
    lines: FloatArray,
    wall_alpha: FloatArray,
    wall_rho: FloatArray,
    wall_extent: FloatArray,
    wall_cov: FloatArray,
    walls: IntArray,
    gate: float,
    margin: float,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Every line against every wall in view.

    Returns:
        The walls' predicted lines ``(C, 3)`` (γ, ρ_r, s); per pair ``(F, C)`` its νᵀS⁻¹ν (infinite when one
        component alone fails the gate) and the overlap of the segments (-1 outside the gate); the innovations
        ``(F, C, 2)``.
    """
    n_f = lines.shape[0]
    n_c = walls.shape[0]
    x, y, theta = state[0], state[1], state[2]
    ct, st = math.cos(theta), math.sin(theta)
    heading_std = math.sqrt(max(p[2, 2], 0.0))
    predicted = np.empty((n_c, 3))
    d2 = np.full((n_f, n_c), math.inf)
    overlap = np.full((n_f, n_c), -1.0)
    nu = np.empty((n_f, n_c, 2))
    for c in range(n_c):
        w = walls[c]
        ca, sa = math.cos(wall_alpha[w]), math.sin(wall_alpha[w])
        rho_r = wall_rho[w] - x * ca - y * sa
        s = -1.0 if rho_r < 0.0 else 1.0
        gamma = wall_alpha[w] - theta + (math.pi if s < 0.0 else 0.0)
        predicted[c, 0], predicted[c, 1], predicted[c, 2] = gamma, s * rho_r, s
        s_aa, s_ar, s_rr, along = _wall_uncertainty(p, wall_cov[w], x, y, ca, sa, s)
        for f in range(n_f):
            da = compiled_wrap_angle(lines[f, 0] - gamma)
            dr = lines[f, 1] - s * rho_r
            nu[f, c, 0], nu[f, c, 1] = da, dr
            f_aa, f_rr = lines[f, 2] + s_aa, lines[f, 4] + s_rr
            # νᵀS⁻¹ν >= Δα²/S_αα and >= Δr²/S_rr: most pairs (other walls, far off) fail these without the rest
            if da * da >= gate * f_aa or dr * dr >= gate * f_rr:
                continue
            d2[f, c] = _mahalanobis(f_aa, lines[f, 3] + s_ar, f_rr, da, dr)
            if not d2[f, c] < gate:
                continue
            distance = math.hypot(0.5 * (lines[f, 5] + lines[f, 7]), 0.5 * (lines[f, 6] + lines[f, 8]))
            slack = margin + 3.0 * (along + distance * heading_std)
            overlap[f, c] = _overlap(x, y, ct, st, lines[f], ca, sa, wall_extent[w], slack)
    return predicted, d2, overlap, nu


@numba.njit(cache=True)
def _join_pieces(lines: FloatArray, chosen: IntArray, d2: FloatArray, overlap: FloatArray, gate: float) -> IntArray:
    """Per line ``(F,)`` the pair (row of ``chosen``) it joins as another piece of that pair's wall, or -1: a line
    not paired itself that passes the gate with the pair's wall, overlaps it and agrees with the paired line (the
    chi-square of their difference below the gate; the pair it agrees with best)."""
    joined = np.full(lines.shape[0], -1, dtype=np.int64)
    taken = np.zeros(lines.shape[0], dtype=np.bool_)
    for k in range(chosen.shape[0]):
        taken[chosen[k, 0]] = True
    for g in range(lines.shape[0]):
        if taken[g]:
            continue
        best = gate
        for k in range(chosen.shape[0]):
            f, c = chosen[k, 0], chosen[k, 1]
            if not (d2[g, c] < gate and overlap[g, c] > 0.0):
                continue
            q = _mahalanobis(
                lines[g, 2] + lines[f, 2],
                lines[g, 3] + lines[f, 3],
                lines[g, 4] + lines[f, 4],
                compiled_wrap_angle(lines[g, 0] - lines[f, 0]),
                lines[g, 1] - lines[f, 1],
            )
            if q < best:
                best = q
                joined[g] = k
    return joined


@numba.njit(cache=True, inline="always")
def _line_covariance(out: FloatArray, line: FloatArray) -> None:
    """out ← the 2x2 covariance of a line's (α, r) (columns 2-4: Var α, Cov(α, r), Var r)."""
    out[0, 0], out[0, 1], out[1, 0], out[1, 1] = line[2], line[3], line[3], line[4]


@numba.njit(cache=True)
def _fuse_pieces(
    innovation: FloatArray, cov: FloatArray, lines: FloatArray, nu: FloatArray, c: int, pieces: IntArray
) -> None:
    """``innovation`` and ``cov`` (a pair's line's, in and out) fused with those of ``pieces``, the lines of the
    same wall (column ``c``) that joined the pair, by their information: C = (Σ C_i⁻¹)⁻¹ and ν = C·Σ C_i⁻¹·ν_i."""
    info = np.empty((2, 2))
    _invert_2x2(info, cov)
    weighted = np.empty(2)
    _apply(weighted, info, innovation)
    piece_cov = np.empty((2, 2))
    piece_info = np.empty((2, 2))
    piece_weighted = np.empty(2)
    for g in pieces:
        _line_covariance(piece_cov, lines[g])
        _invert_2x2(piece_info, piece_cov)
        _apply(piece_weighted, piece_info, nu[g, c])
        info += piece_info
        weighted += piece_weighted
    _invert_2x2(cov, info)
    _apply(innovation, cov, weighted)


@numba.njit(cache=True, inline="always")
def _correct(
    x: FloatArray,
    p: FloatArray,
    h: FloatArray,
    r: FloatArray,
    v: FloatArray,
    work: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
) -> float:
    """One Kalman correction of the state ``x`` and covariance ``p`` (in place) by a measurement of Jacobian ``h``
    (2x3), noise ``r`` (2x2) and innovation ``v`` (2,); ``work`` holds arrays of the shapes of S, S⁻¹, P·Hᵀ, K,
    K·H, A, K·R·Kᵀ and the new P to compute them in. The covariance in Joseph form, P ← A·P·Aᵀ + K·R·Kᵀ with
    A = I - K·H, made exactly symmetric.

    Returns:
        The innovation's νᵀS⁻¹ν.
    """
    s, s_inv, ph, gain, kh, a, krk, new = work
    _sandwich(s, h, p, r)  # S = H·P·Hᵀ + R
    _invert_2x2(s_inv, s)
    _product(ph, p, h.T)
    _product(gain, ph, s_inv)  # K = P·Hᵀ·S⁻¹
    for i in range(3):
        x[i] += gain[i, 0] * v[0] + gain[i, 1] * v[1]  # x ← x + K·ν
    _product(kh, gain, h)
    for i in range(3):
        for j in range(3):
            a[i, j] = (1.0 if i == j else 0.0) - kh[i, j]  # A = I - K·H
    krk[:] = 0.0
    _sandwich(krk, gain, r, krk)  # K·R·Kᵀ
    _sandwich(new, a, p, krk)  # A·P·Aᵀ + K·R·Kᵀ
    for i in range(3):
        for j in range(3):
            p[i, j] = 0.5 * (new[i, j] + new[j, i])
    return _quadratic(s_inv, v)


@numba.njit(cache=True)
def _update(
    state: FloatArray,
    p: FloatArray,
    feats: FloatArray,
    extra_var_alpha: float,
    extra_var_r: float,
    wall_alpha: FloatArray,
    wall_rho: FloatArray,
    wall_extent: FloatArray,
    wall_cov: FloatArray,
    walls: IntArray,
    gate: float,
    margin: float,
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, float, IntArray]:
    """Gate, pair and correct (see the module docstring) the features ``(F, 9)`` (α, r, Var α, Cov(α, r), Var r,
    start x, y, end x, y in the laser frame) against the map walls ``walls`` (indices into the map's arrays).

    Returns:
        The pairs ``(K, 2)`` (feature, wall index) in the order taken; per pair ``(K, 5)`` the predicted
        (γ, ρ), the innovation (Δα, Δr; of its pieces fused, when others joined it) and its NIS; the new state and
        covariance; the NIS of all pairs together; per feature ``(F,)`` the feature of the pair it joined as another
        piece of that pair's wall, or -1.
    """
    lines = feats.copy()  # with the extra variances of every line
    lines[:, 2] += extra_var_alpha
    lines[:, 4] += extra_var_r
    predicted, d2, overlap, nu = _gate(
        state, p, lines, wall_alpha, wall_rho, wall_extent, wall_cov, walls, gate, margin
    )
    chosen = _greedy(d2, overlap, gate)
    joined = _join_pieces(lines, chosen, d2, overlap, gate)
    table = np.empty((chosen.shape[0], 5))
    # The pairs' noises are independent (R is block-diagonal), so one joint update equals the pairs applied one
    # after the other with H kept at the prior and each innovation moved by the state's change so far: the same
    # estimate and covariance, and the NIS of all pairs is the sum of the successive ones (the chain rule of the
    # joint likelihood), with 2x2 inverses only.
    xs = state.copy()
    ps = p.copy()
    nis = 0.0
    work = (  # the correction's matrices (see _correct)
        np.empty((2, 2)),
        np.empty((2, 2)),
        np.empty((3, 2)),
        np.empty((3, 2)),
        np.empty((3, 3)),
        np.empty((3, 3)),
        np.empty((3, 3)),
        np.empty((3, 3)),
    )
    h, jw, cov, r = np.empty((2, 3)), np.empty((2, 2)), np.empty((2, 2)), np.empty((2, 2))
    v, moved, change = np.empty(2), np.empty(2), np.empty(3)
    pieces = np.zeros(chosen.shape[0], dtype=np.int64)  # per pair, the lines that joined it
    for g in range(joined.shape[0]):
        if joined[g] >= 0:
            pieces[joined[g]] += 1
    for k in range(chosen.shape[0]):
        f, c = chosen[k, 0], chosen[k, 1]
        w = walls[c]
        # the pair's measurement: its line's innovation and covariance, fused with the other pieces of its wall
        v[0], v[1] = nu[f, c, 0], nu[f, c, 1]
        _line_covariance(cov, lines[f])
        if pieces[k]:
            _fuse_pieces(v, cov, lines, nu, c, np.flatnonzero(joined == k))
        table[k] = (compiled_wrap_angle(predicted[c, 0]), predicted[c, 1], v[0], v[1], d2[f, c])
        _jacobians(h, jw, state[0], state[1], wall_alpha[w], predicted[c, 2])
        _sandwich(r, jw, wall_cov[w], cov)  # the wall's own error added once, however many pieces the pair has
        for i in range(3):
            change[i] = xs[i] - state[i]
        _apply(moved, h, change)
        v[0], v[1] = v[0] - moved[0], v[1] - moved[1]  # the innovation moved by the state's change so far
        nis += _correct(xs, ps, h, r, v, work)
    pairs = np.empty_like(chosen)
    for k in range(chosen.shape[0]):
        pairs[k, 0] = chosen[k, 0]
        pairs[k, 1] = walls[chosen[k, 1]]
    for g in range(feats.shape[0]):
        if joined[g] >= 0:
            joined[g] = chosen[joined[g], 0]  # the line of the pair it joined
    return pairs, table, xs, ps, nis, joined
