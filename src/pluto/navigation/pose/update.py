"""The pose filter's update: a scan's lines paired with the map's walls, and the state corrected with the pairs.

Strategy (the wall model of Arras and Siegwart, SPIE 1997; :mod:`pluto.navigation.pose.core` holds the filter, its
state and its predict step): a wall (α, ρ) seen from the laser at (x, y, θ) is the line (γ, ρ_r) = (α - θ, ρ - x·cos
α - y·sin α), with (γ + π, -ρ_r) when ρ_r < 0 (a feature always has r >= 0); H = [[0, 0, -1], [-s·cos α, -s·sin α,
0]] (s the sign), and a wall's own uncertainty enters through J_w = [[1, 0], [s·(x·sin α - y·cos α), s]]. For every
feature and every wall the laser could see, the innovation ν = (α_f - γ, r_f - ρ_r) with S = H·P·Hᵀ + C_f +
J_w·C_w·J_wᵀ is gated by its Mahalanobis distance νᵀS⁻¹ν < ``gate`` (chi-square, 2 dof) and by the segments: the
feature's end points, carried into the map frame, must overlap the wall's extent with a margin (``overlap_margin``
plus three standard deviations of the pose along the wall). Pairs are then taken greedily, nearest first (the larger
overlap first between equal distances, which settles collinear walls), one feature per wall and one wall per
feature. A wall seen in pieces (a glass pane, a doorway or a box in front of it cuts it) gives a feature per piece,
and the nearest in the Mahalanobis sense is often the least precise: every other piece that passes the gate with the
wall, overlaps it and agrees with the paired feature (their difference within the gate) joins that pair, and the
pair's measurement is its pieces fused by their information (C = (Σ C_i⁻¹)⁻¹, ν = C·Σ C_i⁻¹·ν_i), the wall's own
error added once, as it is the same for every piece (:attr:`~pluto.navigation.pose.core.PoseFilter.joined` lists
them). All the pairs update the state together: as their noises are independent, one pair after the other, H kept at
the prior and each innovation moved by the state's change so far, which is the joint update with 2x2 inverses only;
the covariance in Joseph form, P ← (I - K·H)·P·(I - K·H)ᵀ + K·R·Kᵀ, stays symmetric and positive. A map wall's error
is the same scan after scan, so it does not average out as the walls are seen again and again: after an update the
variances of x, y and θ are kept at least ``wall_offset_std``² and ``wall_angle_std``² (the map's own accuracy),
which also keeps the gate open to a wall that disagrees by a few cm with the others. The gating, pairing and update
are plain loops compiled by numba: on a few features and walls, numpy's per-call overhead would cost more than the
arithmetic, on every scan.

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
# The update runs on every scan; in numpy its dozens of array calls on a few features and walls cost more in call
# overhead than in arithmetic. These are plain loops over scalars, compiled by numba (cached beside the module).


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
    n_f = feats.shape[0]
    n_c = walls.shape[0]
    x, y, theta = state[0], state[1], state[2]
    cos_t, sin_t = math.cos(theta), math.sin(theta)
    heading_std = math.sqrt(max(p[2, 2], 0.0))
    gamma = np.empty(n_c)
    rho_r = np.empty(n_c)
    sign = np.empty(n_c)
    d2 = np.empty((n_f, n_c))
    overlap = np.empty((n_f, n_c))
    nu_a = np.empty((n_f, n_c))
    nu_r = np.empty((n_f, n_c))
    for c in range(n_c):
        w = walls[c]
        ca, sa = math.cos(wall_alpha[w]), math.sin(wall_alpha[w])
        rho = wall_rho[w] - x * ca - y * sa
        s = -1.0 if rho < 0.0 else 1.0
        sign[c] = s
        gamma[c] = wall_alpha[w] - theta + (math.pi if s < 0.0 else 0.0)
        rho_r[c] = s * rho
        # H P Hᵀ with H = [[0, 0, -1], [-s c, -s s, 0]]
        hp_aa = p[2, 2]
        hp_ar = s * (ca * p[2, 0] + sa * p[2, 1])
        hp_rr = ca * ca * p[0, 0] + 2.0 * ca * sa * p[0, 1] + sa * sa * p[1, 1]
        # the wall's own covariance through J_w = [[1, 0], [s (x sin α - y cos α), s]]
        j = s * (x * sa - y * ca)
        cw = wall_cov[w]
        w_aa = cw[0, 0]
        w_ar = j * cw[0, 0] + s * cw[0, 1]
        w_rr = j * j * cw[0, 0] + 2.0 * j * s * cw[0, 1] + cw[1, 1]
        along = math.sqrt(max(sa * sa * p[0, 0] - 2.0 * sa * ca * p[0, 1] + ca * ca * p[1, 1], 0.0))
        for f in range(n_f):
            s_aa = feats[f, 2] + extra_var_alpha + w_aa + hp_aa
            s_ar = feats[f, 3] + w_ar + hp_ar
            s_rr = feats[f, 4] + extra_var_r + w_rr + hp_rr
            da = compiled_wrap_angle(feats[f, 0] - gamma[c])
            dr = feats[f, 1] - rho_r[c]
            nu_a[f, c] = da
            nu_r[f, c] = dr
            overlap[f, c] = -1.0
            # νᵀS⁻¹ν >= Δα²/S_αα and >= Δr²/S_rr: most pairs (other walls, far off) fail these without the rest
            if da * da >= gate * s_aa or dr * dr >= gate * s_rr:
                d2[f, c] = math.inf
                continue
            det = s_aa * s_rr - s_ar * s_ar
            d2[f, c] = (s_rr * da * da - 2.0 * s_ar * da * dr + s_aa * dr * dr) / det if det > 0.0 else math.inf
            if not d2[f, c] < gate:
                continue
            # overlap of the feature's segment, in the map frame, with the wall's extent along its line
            t1 = (
                -(x + cos_t * feats[f, 5] - sin_t * feats[f, 6]) * sa
                + (y + sin_t * feats[f, 5] + cos_t * feats[f, 6]) * ca
            )
            t2 = (
                -(x + cos_t * feats[f, 7] - sin_t * feats[f, 8]) * sa
                + (y + sin_t * feats[f, 7] + cos_t * feats[f, 8]) * ca
            )
            distance = math.hypot(0.5 * (feats[f, 5] + feats[f, 7]), 0.5 * (feats[f, 6] + feats[f, 8]))
            slack = margin + 3.0 * (along + distance * heading_std)
            lo = max(min(t1, t2), wall_extent[w, 0] - slack)
            hi = min(max(t1, t2), wall_extent[w, 1] + slack)
            overlap[f, c] = hi - lo
    chosen = _greedy(d2, overlap, gate)
    # A wall seen in pieces (cut by a glass pane, a doorway, something standing in front of it) gives a feature per
    # piece, and the pairing takes one, not always the most precise: the other pieces measure the same line. Each
    # that passes the gate with that wall, overlaps it and agrees with the paired feature (the chi-square of their
    # difference below the gate) joins the pair it agrees with best; a pair's pieces are fused by their information,
    # and the wall's own error is added once, as it is the same for every piece of the wall.
    joined = np.full(n_f, -1, dtype=np.int64)
    taken = np.zeros(n_f, dtype=np.bool_)
    for k in range(chosen.shape[0]):
        taken[chosen[k, 0]] = True
    for g in range(n_f):
        if taken[g]:
            continue
        best = gate
        for k in range(chosen.shape[0]):
            f = chosen[k, 0]
            c = chosen[k, 1]
            if not (d2[g, c] < gate and overlap[g, c] > 0.0):
                continue
            da = compiled_wrap_angle(feats[g, 0] - feats[f, 0])
            dr = feats[g, 1] - feats[f, 1]
            saa = feats[g, 2] + feats[f, 2] + 2.0 * extra_var_alpha
            sar = feats[g, 3] + feats[f, 3]
            srr = feats[g, 4] + feats[f, 4] + 2.0 * extra_var_r
            det = saa * srr - sar * sar
            if det > 0.0:
                q = (srr * da * da - 2.0 * sar * da * dr + saa * dr * dr) / det
                if q < best:
                    best = q
                    joined[g] = k
    table = np.empty((chosen.shape[0], 5))
    # The pairs' noises are independent (R is block-diagonal), so one joint update equals the pairs applied one
    # after the other with H kept at the prior and each innovation moved by the state's change so far: the same
    # estimate and covariance, and the NIS of all pairs is the sum of the successive ones (the chain rule of the
    # joint likelihood), with 2x2 inverses only. The covariance in Joseph form stays symmetric and positive.
    xs = state.copy()
    ps = p.copy()
    nis = 0.0
    ph = np.empty((3, 2))
    gain = np.empty((3, 2))
    a = np.empty((3, 3))
    ap = np.empty((3, 3))
    new = np.empty((3, 3))
    for k in range(chosen.shape[0]):
        f = chosen[k, 0]
        c = chosen[k, 1]
        w = walls[c]
        table[k, 0] = compiled_wrap_angle(gamma[c])
        table[k, 1] = rho_r[c]
        table[k, 2] = nu_a[f, c]
        table[k, 3] = nu_r[f, c]
        table[k, 4] = d2[f, c]
        h0 = -sign[c] * math.cos(wall_alpha[w])  # H = [[0, 0, -1], [h0, h1, 0]]
        h1 = -sign[c] * math.sin(wall_alpha[w])
        ca, sa = -h0 * sign[c], -h1 * sign[c]
        j = sign[c] * (x * sa - y * ca)
        cw = wall_cov[w]
        # the pair's measurement: its feature's innovation, fused with those of the pieces that joined it
        m_aa, m_ar, m_rr = feats[f, 2] + extra_var_alpha, feats[f, 3], feats[f, 4] + extra_var_r
        m_a, m_r = nu_a[f, c], nu_r[f, c]
        if np.any(joined == k):
            det = m_aa * m_rr - m_ar * m_ar
            i_aa, i_ar, i_rr = m_rr / det, -m_ar / det, m_aa / det  # information of the paired feature
            b_a = i_aa * m_a + i_ar * m_r
            b_r = i_ar * m_a + i_rr * m_r
            for g in range(n_f):
                if joined[g] != k:
                    continue
                g_aa, g_ar, g_rr = feats[g, 2] + extra_var_alpha, feats[g, 3], feats[g, 4] + extra_var_r
                det = g_aa * g_rr - g_ar * g_ar
                j_aa, j_ar, j_rr = g_rr / det, -g_ar / det, g_aa / det
                i_aa += j_aa
                i_ar += j_ar
                i_rr += j_rr
                b_a += j_aa * nu_a[g, c] + j_ar * nu_r[g, c]
                b_r += j_ar * nu_a[g, c] + j_rr * nu_r[g, c]
            det = i_aa * i_rr - i_ar * i_ar
            m_aa, m_ar, m_rr = i_rr / det, -i_ar / det, i_aa / det
            m_a = m_aa * b_a + m_ar * b_r
            m_r = m_ar * b_a + m_rr * b_r
            table[k, 2] = m_a
            table[k, 3] = m_r
        r_aa = m_aa + cw[0, 0]
        r_ar = m_ar + j * cw[0, 0] + sign[c] * cw[0, 1]
        r_rr = m_rr + j * j * cw[0, 0] + 2.0 * j * sign[c] * cw[0, 1] + cw[1, 1]
        v_a = m_a + (xs[2] - state[2])
        v_r = m_r - h0 * (xs[0] - state[0]) - h1 * (xs[1] - state[1])
        # P Hᵀ, S = H P Hᵀ + R and its inverse, the gain K = P Hᵀ S⁻¹
        for i in range(3):
            ph[i, 0] = -ps[i, 2]
            ph[i, 1] = h0 * ps[i, 0] + h1 * ps[i, 1]
        s_aa = -ph[2, 0] + r_aa
        s_ar = h0 * ph[0, 0] + h1 * ph[1, 0] + r_ar
        s_rr = h0 * ph[0, 1] + h1 * ph[1, 1] + r_rr
        det = s_aa * s_rr - s_ar * s_ar
        i_aa, i_ar, i_rr = s_rr / det, -s_ar / det, s_aa / det
        nis += v_a * (i_aa * v_a + i_ar * v_r) + v_r * (i_ar * v_a + i_rr * v_r)
        for i in range(3):
            gain[i, 0] = ph[i, 0] * i_aa + ph[i, 1] * i_ar
            gain[i, 1] = ph[i, 0] * i_ar + ph[i, 1] * i_rr
            xs[i] += gain[i, 0] * v_a + gain[i, 1] * v_r
            # A = I - K H
            a[i, 0] = (1.0 if i == 0 else 0.0) - gain[i, 1] * h0
            a[i, 1] = (1.0 if i == 1 else 0.0) - gain[i, 1] * h1
            a[i, 2] = (1.0 if i == 2 else 0.0) + gain[i, 0]
        # P ← A P Aᵀ + K R Kᵀ
        for i in range(3):
            for m in range(3):
                ap[i, m] = a[i, 0] * ps[0, m] + a[i, 1] * ps[1, m] + a[i, 2] * ps[2, m]
        for i in range(3):
            for m in range(3):
                new[i, m] = (
                    ap[i, 0] * a[m, 0]
                    + ap[i, 1] * a[m, 1]
                    + ap[i, 2] * a[m, 2]
                    + gain[i, 0] * (r_aa * gain[m, 0] + r_ar * gain[m, 1])
                    + gain[i, 1] * (r_ar * gain[m, 0] + r_rr * gain[m, 1])
                )
        for i in range(3):
            for m in range(3):
                ps[i, m] = 0.5 * (new[i, m] + new[m, i])
    pairs = np.empty_like(chosen)
    for k in range(chosen.shape[0]):
        pairs[k, 0] = chosen[k, 0]
        pairs[k, 1] = walls[chosen[k, 1]]
    for g in range(n_f):
        if joined[g] >= 0:
            joined[g] = chosen[joined[g], 0]  # the feature of the pair it joined
    return pairs, table, xs, ps, nis, joined
