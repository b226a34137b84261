"""The pose module's estimator: an extended Kalman filter of the laser's pose on an a-priori map of walls.

Strategy (docs/design.md, "pose and slam"; the wall model of Arras and Siegwart, SPIE 1997): the state is the planar
pose (x, y, θ) of the **laser** in the map frame, because that is what the scans measure, what the localization
service gives at scan time (``Localization/Laser_Dead-Reckoning``) and what the pose module posts back
(``Localization/Post_Pose`` with setter 1 is a laser pose). θ is not wrapped: it follows the dead reckoning's
continuous heading, so the correction the localization service derives from a post stays a small angle.

**Predict.** Between two scans the dead reckoning moved the laser from L_a to L_b (its frame); the increment
u = L_a⁻¹·L_b is composed onto the state, X ← X ⊕ u, with F = ∂(X ⊕ u)/∂X = [[1, 0, -Δy], [0, 1, Δx], [0, 0, 1]]
(Δx, Δy the displacement in the map frame). The localization service's incremental covariance Σ is that of the
*robot's* increment, in the dead-reckoning frame, as an error of the end pose; the laser sits at the mount offset m
ahead of the robot centre, so a heading error also swings it: Q = R·T·Σ·Tᵀ·Rᵀ with
T = [[1, 0, -m_y'], [0, 1, m_x'], [0, 0, 1]] (m' the offset turned by the robot's heading) and R the rotation from
the dead-reckoning frame to the map frame. P ← F·P·Fᵀ + Q.

**Update.** A wall (α, ρ) seen from the laser at (x, y, θ) is the line (γ, ρ_r) = (α - θ, ρ - x·cos α - y·sin α),
with (γ + π, -ρ_r) when ρ_r < 0 (a feature always has r >= 0); H = [[0, 0, -1], [-s·cos α, -s·sin α, 0]] (s the
sign), and a wall's own uncertainty enters through J_w = [[1, 0], [s·(x·sin α - y·cos α), s]]. For every feature
and every wall the laser could see, the innovation ν = (α_f - γ, r_f - ρ_r) with S = H·P·Hᵀ + C_f + J_w·C_w·J_wᵀ is
gated by its Mahalanobis distance νᵀS⁻¹ν < ``gate`` (chi-square, 2 dof) and by the segments: the feature's end
points, carried into the map frame, must overlap the wall's extent with a margin (``overlap_margin`` plus three
standard deviations of the pose along the wall). Pairs are then taken greedily, nearest first (the larger overlap
first between equal distances, which settles collinear walls), one feature per wall and one wall per feature. A
wall seen in pieces (a glass pane, a doorway or a box in front of it cuts it) gives a feature per piece, and the
nearest in the Mahalanobis sense is often the least precise: every other piece that passes the gate with the wall,
overlaps it and agrees with the paired feature (their difference within the gate) joins that pair, and the pair's
measurement is its pieces fused by their information (C = (Σ C_i⁻¹)⁻¹, ν = C·Σ C_i⁻¹·ν_i), the wall's own error
added once, as it is the same for every piece (:attr:`PoseFilter.joined` lists them). All the pairs update the
state together: as their noises are independent, one pair after the other, H kept at the prior and each innovation
moved by the state's change so far, which is the joint update with 2x2 inverses only; the covariance in Joseph
form, P ← (I - K·H)·P·(I - K·H)ᵀ + K·R·Kᵀ, stays symmetric and positive. A map wall's error is the same scan after
scan, so it does not average out as the walls are seen again and again: after an update the variances of x, y and θ
are kept at least ``wall_offset_std``² and ``wall_angle_std``² (the map's own accuracy), which also keeps the gate
open to a wall that disagrees by a few cm with the others. The gating, pairing and update are plain loops compiled
by numba: on a few features and walls, numpy's per-call overhead would cost more than the arithmetic, on every
scan.

**Lost.** A scan with fewer than ``min_matches`` pairs is poor; after ``lost_after`` poor scans in a row, or when the
position's standard deviation passes ``lost_position_std``, the filter says it is lost, until a scan matches again.
It keeps predicting and updating; the caller may search with :func:`relocalize` and, if it trusts the answer,
:meth:`PoseFilter.reset` the filter. The core never moves itself to a pose found that way. A caller with evidence
the lines cannot give (a start that the scan's beams contradict) may say the filter is lost at once
(:meth:`PoseFilter.declare_lost`).

**Continuing.** :meth:`PoseFilter.snapshot` gives the state (pose, covariance, the dead-reckoned laser pose it was
last moved to, and the lost count); :meth:`PoseFilter.resume` builds a filter from it in a new process, and
:meth:`PoseFilter.widen` adds the uncertainty of the time the filter did not follow: ``resume_position_per_s`` (m)
and ``resume_heading_per_s`` (rad) of standard deviation per second of the gap, added to the position's and the
heading's variances as (rate · gap)². The motion meanwhile is the dead reckoning's, composed by the next
:meth:`PoseFilter.predict` from the saved reference (with its own growth per metre driven).

**Relocalize.** Two non-parallel features fix a pose once they are assigned to two map walls (with a side each):
θ from the first, (x, y) from the two line equations. Every assignment whose angle difference agrees is a
hypothesis; those whose two segments do not overlap their walls are dropped, the rest are scored by the scan points
of the features that then match some wall, and the best is refined by least squares on its matches.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated

import msgspec
import numba
import numpy as np
import numpy.typing as npt

from pluto.geometry import LASER_MOUNT, wrap_angle
from pluto.navigation.angles import compiled_wrap_angle
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.pose.map import WallMap
from pluto.runtime.params import Params
from pluto.runtime.ranges import Offset, between
from pluto.sim.raycast import RayCaster

__all__ = [
    "FilterStatus",
    "Match",
    "PoseFilter",
    "PoseFilterParams",
    "PoseFilterState",
    "Relocalization",
    "UpdateResult",
    "associate",
    "can_relocalize",
    "relocalize",
    "scan_agreement",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
PoseLike = Sequence[float] | FloatArray
"""A pose given as a sequence of floats or a numpy vector."""


class PoseFilterParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of the pose filter.

    Attributes:
        gate: Mahalanobis gate of a feature-wall pair (chi-square, 2 dof; 9.21 is the 99 % quantile).
        overlap_margin: a feature must overlap its wall's extent widened by this, m (plus 3 σ of the pose along it).
        max_range: walls farther than this from the laser are not considered, m. The scanner's own range (the SICK
            LMS's 80 m): on a campus the walls across a cross street or at the end of a block are 30-80 m away, and
            they are what fixes the position along a street whose façades only fix it across; a far wall's line is
            less certain (its points are farther apart), which its covariance already says.
        min_matches: a scan with fewer pairs than this is poor.
        lost_after: number of poor scans in a row after which the filter is lost.
        lost_position_std: the filter is lost when the position's largest standard deviation passes this, m.
        laser_mount: (x, y) of the laser's pan centre in the robot frame, m (as the localization service's).
        extra_alpha_std: std dev added to every feature's angle, rad (walls that are not quite flat).
        extra_r_std: std dev added to every feature's distance, m.
        wall_angle_std: least std dev of a map wall's direction, rad...
        wall_offset_std: ...and of its position across itself at its midpoint, m: a wall the map gives as more
            certain (an architect's plan gives them as exact) is taken as this uncertain. A building as built
            differs from its plan by a few cm and a fraction of a degree; a filter that took the plan as exact
            would take that difference for an error of its pose, and hold a wrong pose with confidence where the
            walls around it disagree with each other. The pose is never held as more certain than these either.
        distance_scale_std: odometry's error of scale (a fraction of the distance driven), added to the dead
            reckoning's own increment covariance along the motion: the localization service models it as random
            noise, but a scale error or a worn wheel adds up over a long corridor where no wall fixes the position
            along it, and the filter must know it is that uncertain when the robot turns.
        heading_drift_std: heading error per metre driven, rad/m (gyro bias, wheel slip), added the same way.
        turn_scale_std: heading error as a fraction of the turn, added the same way.
        correlation_length: distance over which such an error keeps its sign, m.
        informative_length: a scan counts as poor only if it has a line at least this long that matched nothing.
        resume_position_per_s: std dev of the position added per second a resumed filter did not follow (the time
            between its saved state and its first scan after a restart), m/s.
        resume_heading_per_s: the same for the heading, rad/s.
    """

    gate: Annotated[float, between(0.0, 1000.0, open_low=True)] = 9.21
    overlap_margin: Annotated[float, between(0.0, 10.0)] = 0.3
    max_range: Annotated[float, between(0.0, 1000.0, open_low=True)] = 80.0
    min_matches: Annotated[int, between(1, 10_000)] = 1
    lost_after: Annotated[int, between(1, 100_000)] = 25
    lost_position_std: Annotated[float, between(0.0, 1000.0, open_low=True)] = 2.0
    laser_mount: tuple[Offset, Offset] = (LASER_MOUNT[0], LASER_MOUNT[1])
    extra_alpha_std: Annotated[float, between(0.0, math.pi)] = 0.0
    extra_r_std: Annotated[float, between(0.0, 10.0)] = 0.0
    wall_angle_std: Annotated[float, between(0.0, math.pi)] = 0.003
    wall_offset_std: Annotated[float, between(0.0, 10.0)] = 0.02
    distance_scale_std: Annotated[float, between(0.0, 1.0)] = 0.02
    heading_drift_std: Annotated[float, between(0.0, 1.0)] = 0.005
    turn_scale_std: Annotated[float, between(0.0, 1.0)] = 0.02
    correlation_length: Annotated[float, between(0.0, 10_000.0)] = 20.0
    informative_length: Annotated[float, between(0.0, 100.0)] = 1.0
    resume_position_per_s: Annotated[float, between(0.0, 10.0)] = 0.05
    resume_heading_per_s: Annotated[float, between(0.0, 10.0)] = 0.01


@dataclass(frozen=True)
class Match:
    """A feature paired with a map wall.

    Attributes:
        feature: index in the features given to :meth:`PoseFilter.update`.
        wall: index of the wall in the :class:`WallMap`.
        predicted: the wall's line (γ, ρ) as the prior pose predicted it in the laser frame, rad and m.
        innovation: (Δα rad, Δr m), measured minus predicted, before the update.
        nis: normalised innovation squared of this pair, νᵀS⁻¹ν (2 dof).
    """

    feature: int
    wall: int
    predicted: tuple[float, float]
    innovation: tuple[float, float]
    nis: float


@dataclass(frozen=True)
class UpdateResult:
    """What one scan did to the filter.

    Attributes:
        pose: the laser's (x, y, θ) after the update, m and rad.
        covariance: its 3x3 covariance.
        matches: the pairs used.
        nis: normalised innovation squared of all pairs together (``2 * len(matches)`` dof); 0 without pairs.
        candidates: number of map walls considered.
        lost: the filter's lost flag after this scan.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    matches: tuple[Match, ...]
    nis: float
    candidates: int
    lost: bool

    @property
    def dof(self) -> int:
        """Degrees of freedom of :attr:`nis`."""
        return 2 * len(self.matches)


@dataclass(frozen=True)
class FilterStatus:
    """The filter's health.

    Attributes:
        lost: too few matches for too long, or too uncertain.
        poor_scans: scans in a row with fewer than ``min_matches`` pairs.
        last_matches: pairs used by the last update.
        updates: scans processed.
        position_std: largest standard deviation of the position, m.
        heading_std: standard deviation of the heading, rad.
    """

    lost: bool
    poor_scans: int
    last_matches: int
    updates: int
    position_std: float
    heading_std: float


class PoseFilterState(msgspec.Struct, frozen=True, kw_only=True):
    """A :class:`PoseFilter`'s state, to continue from in another process (:meth:`PoseFilter.snapshot`).

    Attributes:
        pose: the laser's (x, y, θ) in the map frame, m and rad.
        covariance: its 3x3 covariance, 9 row-major values.
        reference: the dead-reckoned laser pose (x, y, θ, pan) the state was last moved to; None: not yet.
        poor_scans: poor scans in a row.
        lost: the lost flag.
    """

    pose: tuple[float, float, float]
    covariance: list[float]
    reference: tuple[float, float, float, float] | None = None
    poor_scans: int = 0
    lost: bool = False


def planar(pose: PoseLike) -> tuple[float, float, float, float]:
    """(x, y, θ, pan) of a 3-D (x, y, θ), 6-D (x, y, z, θ, φ, ψ) or 8-D (+ pan, tilt) pose; pan 0 unless given.

    Raises:
        ValueError: another length, or a value that is not finite.
    """
    n = len(pose)
    if n == 3:
        out = (float(pose[0]), float(pose[1]), float(pose[2]), 0.0)
    elif n in (6, 8):
        out = (float(pose[0]), float(pose[1]), float(pose[3]), float(pose[6]) if n == 8 else 0.0)
    else:
        raise ValueError(f"a pose must have 3, 6 or 8 values, got {n}")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"a pose must be finite, got {list(pose)}")
    return out


def _covariance(value: npt.ArrayLike, what: str) -> FloatArray:
    c = np.array(value, dtype=np.float64)
    if c.size == 9:
        c = c.reshape(3, 3)
    if c.shape != (3, 3) or not np.all(np.isfinite(c)):
        raise ValueError(f"{what} must be a finite 3x3 matrix (or 9 values), got shape {c.shape}")
    return 0.5 * (c + c.T)


def _largest_position_variance(p: FloatArray) -> float:
    """The larger eigenvalue of the position block of ``p``, m² (in closed form: a 2x2 symmetric matrix)."""
    a, b, c = float(p[0, 0]), float(p[0, 1]), float(p[1, 1])
    return 0.5 * (a + c) + math.hypot(0.5 * (a - c), b)


class _Features:
    """The features of one scan as arrays."""

    def __init__(self, features: Sequence[LineFeature], extra_alpha: float, extra_r: float) -> None:
        self.count = len(features)
        self.alpha = np.array([f.alpha for f in features])
        self.r = np.array([f.r for f in features])
        self.caa = np.array([f.var_alpha for f in features]) + extra_alpha * extra_alpha
        self.car = np.array([f.cov_alpha_r for f in features])
        self.crr = np.array([f.var_r for f in features]) + extra_r * extra_r
        self.ends = np.array([(*f.start, *f.end) for f in features]).reshape(-1, 4)
        self.points = np.array([f.points for f in features], dtype=np.float64)
        mid = 0.5 * (self.ends[:, :2] + self.ends[:, 2:])
        self.distance = np.hypot(mid[:, 0], mid[:, 1])


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


def _at_least(p: FloatArray, position_std: float, heading_std: float) -> FloatArray:
    """``p`` with the variances of x and y raised to at least ``position_std``² and that of θ to ``heading_std``²
    (adding to the diagonal keeps a covariance positive)."""
    floor = np.array([position_std * position_std, position_std * position_std, heading_std * heading_std])
    out: FloatArray = p + np.diag(np.maximum(floor - np.diag(p), 0.0))
    return out


def _longest(lines: FloatArray) -> float:
    """The length of the longest of ``(F, 9)`` lines (start x, y and end x, y in columns 5-8), m."""
    return float(np.hypot(lines[:, 7] - lines[:, 5], lines[:, 8] - lines[:, 6]).max())


@numba.njit(cache=True)
def _finite(values: FloatArray) -> bool:
    """Whether every value is finite."""
    return bool(np.all(np.isfinite(values)))


@numba.njit(cache=True)
def _predict(
    state: FloatArray,
    p: FloatArray,
    sigma: FloatArray,
    px: float,
    py: float,
    pt: float,
    x: float,
    y: float,
    theta: float,
    pan: float,
    mx: float,
    my: float,
    distance_scale_std: float,
    heading_drift_std: float,
    turn_scale_std: float,
    correlation_length: float,
) -> tuple[FloatArray, FloatArray]:
    """The predict step (see the module docstring and :meth:`PoseFilter.predict`): the state and covariance moved
    by the dead reckoning's laser motion from (px, py, pt) to (x, y, θ) (pan: the wrist's), ``sigma`` the robot's
    increment covariance (9 values, row-major, dead-reckoning frame), (mx, my) the laser mount."""
    # the increment in the previous laser frame, then in the map frame at the filter's heading
    c, s = math.cos(pt), math.sin(pt)
    ux, uy = c * (x - px) + s * (y - py), -s * (x - px) + c * (y - py)
    dtheta = theta - pt
    ft = state[2]
    cf, sf = math.cos(ft), math.sin(ft)
    dx, dy = cf * ux - sf * uy, sf * ux + cf * uy
    f = np.array([[1.0, 0.0, -dy], [0.0, 1.0, dx], [0.0, 0.0, 1.0]])
    # the robot's increment covariance carried to the laser (mount lever), then into the map frame: G = Rot·T
    robot = theta - pan
    cr, sr = math.cos(robot), math.sin(robot)
    ox, oy = cr * mx - sr * my, sr * mx + cr * my
    turn = ft - pt
    ct, st = math.cos(turn), math.sin(turn)
    g = np.array([[ct, -st, -ct * oy - st * ox], [st, ct, -st * oy + ct * ox], [0.0, 0.0, 1.0]])
    sym = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            sym[i, j] = 0.5 * (sigma[3 * i + j] + sigma[3 * j + i])
    q = g @ sym @ g.T
    # what the dead reckoning's random-noise model leaves out: errors that grow with the distance and the turn. A
    # bias adds up over the distance it lasts: spread as a random walk over ``correlation_length`` metres, the
    # variance grows by k²·L per metre (σ = k·√(L·D) after D metres, k·D while D < L).
    step = math.hypot(dx, dy)
    if step > 0.0:
        ex, ey = dx / step, dy / step
        along = distance_scale_std * distance_scale_std * correlation_length * step
        q[0, 0] += along * ex * ex
        q[0, 1] += along * ex * ey
        q[1, 0] += along * ex * ey
        q[1, 1] += along * ey * ey
    q[2, 2] += (
        heading_drift_std * heading_drift_std * correlation_length * step
        + turn_scale_std * turn_scale_std * abs(dtheta) * math.pi
    )
    new_state = np.array([state[0] + dx, state[1] + dy, state[2] + dtheta])
    fp = f @ p @ f.T + q
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = 0.5 * (fp[i, j] + fp[j, i])
    return new_state, out


class PoseFilter:
    """EKF of the laser's planar pose on a wall map (see the module docstring).

    Args:
        pose: the laser's starting pose in the map frame, (x, y, θ) or 6-D/8-D (x, y, z, θ, ...), m and rad.
        covariance: its 3x3 covariance (or 9 row-major values), m², m·rad, rad².
        reference: the dead-reckoned laser pose at the same time (``Localization/Laser_Dead-Reckoning``); None:
            the first :meth:`predict` only takes its pose as the reference.
        params: settings.

    Raises:
        ValueError: a pose or covariance of the wrong shape or not finite.
    """

    def __init__(
        self,
        pose: PoseLike,
        covariance: npt.ArrayLike,
        *,
        reference: PoseLike | None = None,
        params: PoseFilterParams | None = None,
    ) -> None:
        self.params = params or PoseFilterParams()
        self._x = np.zeros(3)
        self._p = np.zeros((3, 3))
        self._reference: tuple[float, float, float, float] | None = None
        self._poor = 0
        self._last_matches = 0
        self._updates = 0
        self._lost = False
        self.joined: IntArray = np.zeros((0, 2), dtype=np.intp)
        """``(J, 2)`` the features of the last update that joined a pair as other pieces of its wall, each with the
        feature of the pair it joined (rows of the lines given)."""
        self.reset(pose, covariance, reference)

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def pose(self) -> tuple[float, float, float]:
        """The laser's (x, y, θ) in the map frame, m and rad (θ continuous, not wrapped)."""
        return float(self._x[0]), float(self._x[1]), float(self._x[2])

    @property
    def covariance(self) -> FloatArray:
        """A copy of the 3x3 covariance of :attr:`pose`."""
        return self._p.copy()

    @property
    def status(self) -> FilterStatus:
        """The filter's health (see :class:`FilterStatus`)."""
        position = math.sqrt(max(_largest_position_variance(self._p), 0.0))
        return FilterStatus(
            self._lost,
            self._poor,
            self._last_matches,
            self._updates,
            position,
            math.sqrt(max(float(self._p[2, 2]), 0.0)),
        )

    @property
    def lost(self) -> bool:
        """Too few matches for too long, or too uncertain (see :class:`PoseFilterParams`)."""
        return self._lost

    def reset(self, pose: PoseLike, covariance: npt.ArrayLike, reference: PoseLike | None = None) -> None:
        """Restart from ``pose`` with ``covariance`` (a pose set by hand, or one :func:`relocalize` found).

        Args:
            pose: the laser's pose in the map frame, 3-, 6- or 8-D.
            covariance: 3x3 (or 9 values).
            reference: the dead-reckoned laser pose at the same time, or None (see the class).
        """
        x, y, theta, _ = planar(pose)
        p = _covariance(covariance, "covariance")
        self._x = np.array([x, y, theta])
        self._p = p
        self._reference = None if reference is None else planar(reference)
        self._poor = 0
        self._lost = False
        self._check_lost()

    # -- continuing ----------------------------------------------------------------------------------------------

    def snapshot(self) -> PoseFilterState:
        """The state to continue from (see the module docstring)."""
        return PoseFilterState(
            pose=self.pose,
            covariance=[float(v) for v in self._p.ravel()],
            reference=self._reference,
            poor_scans=self._poor,
            lost=self._lost,
        )

    @classmethod
    def resume(cls, state: PoseFilterState, params: PoseFilterParams | None = None) -> PoseFilter:
        """A filter that continues from ``state`` (its next :meth:`predict` moves it from the saved reference).

        Raises:
            ValueError: a pose or covariance that is not finite, or a covariance that is not positive.
        """
        cov = _covariance(state.covariance, "covariance")
        if np.any(np.diag(cov) < 0.0):
            raise ValueError(f"a covariance must have a positive diagonal, got {np.diag(cov).tolist()}")
        reference = None
        if state.reference is not None:
            x, y, theta, pan = state.reference
            reference = (x, y, 0.0, theta, 0.0, 0.0, pan, 0.0)
        out = cls(state.pose, cov, reference=reference, params=params)
        out._poor = max(0, int(state.poor_scans))
        out._lost = bool(state.lost)
        out._check_lost()
        return out

    def widen(self, gap: float) -> None:
        """Add the uncertainty of ``gap`` seconds the filter did not follow (``resume_*_per_s``; see the module
        docstring). A gap of 0 or less changes nothing."""
        if not gap > 0.0:
            return
        prm = self.params
        position = (prm.resume_position_per_s * gap) ** 2
        self._p = self._p + np.diag([position, position, (prm.resume_heading_per_s * gap) ** 2])
        self._check_lost()

    # -- predict -------------------------------------------------------------------------------------------------

    def predict(self, dr_pose: PoseLike, increment: npt.ArrayLike) -> None:
        """Move the state by the dead reckoning's laser motion since the previous call.

        Args:
            dr_pose: the dead-reckoned laser pose at this scan (``Localization/Laser_Dead-Reckoning``: 8-D with pan
                and tilt; 3- and 6-D are taken with pan 0).
            increment: the covariance of the robot's (x, y, θ) increment since the previous scan (that interface's
                covariance, 3x3 or 9 values), dead-reckoning frame.

        Raises:
            ValueError: a pose or covariance of the wrong shape or not finite.
        """
        now = planar(dr_pose)
        sigma = np.array(increment, dtype=np.float64)
        if sigma.size != 9 or not _finite(sigma.reshape(9)):
            raise ValueError(f"increment must be a finite 3x3 matrix (or 9 values), got shape {sigma.shape}")
        previous, self._reference = self._reference, now
        if previous is None:
            return
        prm = self.params
        self._x, self._p = _predict(
            self._x,
            self._p,
            sigma.reshape(9),
            previous[0],
            previous[1],
            previous[2],
            now[0],
            now[1],
            now[2],
            now[3],
            prm.laser_mount[0],
            prm.laser_mount[1],
            prm.distance_scale_std,
            prm.heading_drift_std,
            prm.turn_scale_std,
            prm.correlation_length,
        )
        self._check_lost()

    # -- update --------------------------------------------------------------------------------------------------

    def update(self, features: Sequence[LineFeature], wall_map: WallMap) -> UpdateResult:
        """Match a scan's features to the map and correct the state with the pairs.

        Args:
            features: the scan's lines (:func:`~pluto.navigation.pose.features.extract_lines`), laser frame.
            wall_map: the map.

        Returns:
            The pairs, their innovations and NIS, and the new pose and covariance.
        """
        lines = np.array([(f.alpha, f.r, f.var_alpha, f.cov_alpha_r, f.var_r, *f.start, *f.end) for f in features])
        pairs, table, nis, candidates = self.update_lines(lines.reshape(-1, 9), wall_map)
        matches = [
            Match(f, w, (gamma, rho), (nu_a, nu_r), d2)
            for (f, w), (gamma, rho, nu_a, nu_r, d2) in zip(pairs.tolist(), table.tolist(), strict=True)
        ]
        return UpdateResult(self.pose, self.covariance, tuple(matches), nis, candidates, self._lost)

    def update_lines(self, lines: FloatArray, wall_map: WallMap) -> tuple[IntArray, FloatArray, float, int]:
        """:meth:`update` on a scan's lines given as the rows of a
        :class:`~pluto.navigation.pose.features.LineTable`'s values (what the pose module runs on every scan: no
        object per line or per pair).

        Args:
            lines: ``(F, 9)`` α, r, Var α, Cov(α, r), Var r, start x, y, end x, y per line, laser frame.
            wall_map: the map.

        Returns:
            The pairs ``(K, 2)`` (row of ``lines``, wall index in the map) in the order taken; per pair ``(K, 5)`` the
            predicted (γ, ρ), the innovation (Δα, Δr) and its NIS; the NIS of all pairs; the walls considered.
        """
        prm = self.params
        walls = wall_map.visible(self.pose, prm.max_range)
        pairs = np.zeros((0, 2), dtype=np.intp)
        table = np.zeros((0, 5))
        nis = 0.0
        self.joined = np.zeros((0, 2), dtype=np.intp)
        if lines.shape[0] and walls.shape[0]:
            chosen, table, x, p, nis, joined = _update(
                self._x,
                self._p,
                np.ascontiguousarray(lines, dtype=np.float64),
                prm.extra_alpha_std**2,
                prm.extra_r_std**2,
                wall_map.alpha,
                wall_map.rho,
                wall_map.extent,
                wall_map.covariance_at_least(prm.wall_angle_std, prm.wall_offset_std),
                walls,
                prm.gate,
                prm.overlap_margin,
            )
            if chosen.shape[0]:
                self._x, self._p, pairs = x, _at_least(p, prm.wall_offset_std, prm.wall_angle_std), chosen
                rows = np.flatnonzero(joined >= 0)
                self.joined = np.column_stack((rows, joined[rows])).astype(np.intp)
        self._updates += 1
        self._last_matches = int(pairs.shape[0])
        if pairs.shape[0] >= prm.min_matches:
            self._poor = 0
            self._lost = False
        elif lines.shape[0] and _longest(lines) >= prm.informative_length:
            self._poor += 1  # walls in view that fit no wall of the map: evidence of being lost
        # (a scan with no wall worth the name, an open square, says nothing either way)
        self._check_lost()
        return pairs, table, nis, int(walls.shape[0])

    def declare_lost(self) -> None:
        """Say the filter is lost (its caller has evidence this scan's lines cannot give it: a start that no scan has
        matched); the next scan that matches the map clears it, as for any lost filter."""
        self._lost = True

    def _check_lost(self) -> None:
        prm = self.params
        position = _largest_position_variance(self._p)
        if self._poor >= prm.lost_after or position > prm.lost_position_std**2:
            self._lost = True

    # -- output --------------------------------------------------------------------------------------------------

    def laser_post(self, dr_pose: PoseLike) -> list[float]:
        """The pose to post on ``Localization/Post_Pose`` (setter 1: a laser pose): ``dr_pose`` (the dead-reckoned
        laser pose of the same scan, 6- or 8-D) with x, y and θ replaced by the filter's.

        Raises:
            ValueError: ``dr_pose`` is not 6- or 8-D.
        """
        if len(dr_pose) not in (6, 8):
            raise ValueError(f"the dead-reckoned laser pose must be 6- or 8-D, got {len(dr_pose)} values")
        out = [float(v) for v in dr_pose]
        out[0], out[1], out[3] = self.pose
        return out


# -- relocalization ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Relocalization:
    """A pose found by a global search of the map (never applied by the filter itself).

    Attributes:
        pose: the laser's (x, y, θ) in the map frame, m and rad (θ in [-π, π)).
        covariance: 3x3 covariance of the least-squares fit on the matched features.
        score: scan points of the features that match a wall at ``pose``.
        fraction: ``score`` over the scan points of all the features used.
        matches: number of features matched.
        runner_up: the best score of a hypothesis away from ``pose`` (more than 0.5 m or 0.2 rad): close to
            ``score`` means the place is ambiguous.
        hypotheses: number of hypotheses scored.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    score: float
    fraction: float
    matches: int
    runner_up: float
    hypotheses: int


def can_relocalize(features: Sequence[LineFeature], min_length: float = 0.8) -> bool:
    """Whether a scan's lines can fix a pose at all (what :func:`relocalize` needs first): two features at least
    ``min_length`` long (m) that are not within 30° of parallel. A search with fewer says nothing about the place."""
    usable = [f.alpha for f in features if f.length >= min_length]
    return any(abs(math.sin(b - a)) >= 0.5 for i, a in enumerate(usable) for b in usable[i + 1 :])


def relocalize(
    features: Sequence[LineFeature],
    wall_map: WallMap,
    hint: PoseLike | None = None,
    *,
    radius: float | None = None,
    max_range: float = 30.0,
    max_features: int = 10,
    min_length: float = 0.8,
    angle_tolerance: float = 0.05,
    distance_tolerance: float = 0.15,
    overlap_margin: float = 0.3,
    chunk: int = 2048,
    check: Callable[[FloatArray], FloatArray] | None = None,
    checked: int = 200,
) -> Relocalization | None:
    """Search the map for the laser pose that best explains a scan's lines (a kidnapped robot).

    Args:
        features: the scan's lines, laser frame.
        wall_map: the map.
        hint: a pose (x, y[, ...]) to search around, or None to search the whole map.
        radius: with a hint, how far from it the pose may be, m (None: anywhere).
        max_range: walls farther than this from the search area are not used, m.
        max_features: the longest features used.
        min_length: shorter features are not used, m.
        angle_tolerance: how far a feature's direction may be from its wall's, rad.
        distance_tolerance: how far a feature's line may be from its wall's, m.
        overlap_margin: how far beyond its wall's ends a feature may reach, m.
        chunk: hypotheses scored at once (bounds memory).
        check: a second opinion on whole poses: given ``(N, 3)`` laser poses it returns the share (0..1) of the
            scan that agrees with the map seen from each (:func:`scan_agreement`). Lines alone cannot tell apart
            places where the same walls are seen (sliding along a corridor); the free space along the beams can.
            The ``checked`` best hypotheses by lines are then ranked by line points times that share.

    Returns:
        The best pose, or None if no two non-parallel features could be assigned to walls.
    """
    usable = sorted((f for f in features if f.length >= min_length), key=lambda f: -f.length)[:max_features]
    if len(usable) < 2 or len(wall_map) == 0:
        return None
    feats = _Features(usable, 0.0, 0.0)
    if hint is not None and radius is not None:
        walls = wall_map.near(float(hint[0]), float(hint[1]), radius + max_range)
        centre: tuple[float, float] | None = (float(hint[0]), float(hint[1]))
    else:
        walls = np.arange(len(wall_map))
        centre = None
    if walls.shape[0] < 2:
        return None
    # every wall with both of its sides: normal angle, offset (p·n = offset), extent along the line
    a_w = np.concatenate((wall_map.alpha[walls], wall_map.alpha[walls] + math.pi))
    o_w = np.concatenate((wall_map.rho[walls], -wall_map.rho[walls]))
    ids = np.concatenate((walls, walls))
    hyp = _hypotheses(feats, a_w, o_w, ids, wall_map, angle_tolerance, overlap_margin)
    if hyp.shape[0] == 0:
        return None
    x0, y0, x1, y1 = wall_map.bounds()
    inside = (hyp[:, 0] >= x0) & (hyp[:, 0] <= x1) & (hyp[:, 1] >= y0) & (hyp[:, 1] <= y1)
    if centre is not None and radius is not None:
        inside &= np.hypot(hyp[:, 0] - centre[0], hyp[:, 1] - centre[1]) <= radius
    hyp = hyp[inside]
    if hyp.shape[0] == 0:
        return None
    parts = [
        _score(hyp[i : i + chunk], feats, wall_map, walls, angle_tolerance, distance_tolerance, overlap_margin)
        for i in range(0, hyp.shape[0], chunk)
    ]
    scores = np.concatenate([points for points, _ in parts])
    residuals = np.concatenate([residual for _, residual in parts])
    if check is not None:
        top = np.lexsort((residuals, -scores))[:checked]
        hyp, scores, residuals = hyp[top], scores[top] * check(hyp[top]), residuals[top]
    best = int(np.lexsort((residuals, -scores))[0])  # most points; between equals, the smallest residuals
    pose = hyp[best]
    refined = _refine(pose, feats, wall_map, walls, angle_tolerance, distance_tolerance, overlap_margin)
    if refined is None:
        return None
    pose_r, cov, matched = refined
    far = (np.hypot(hyp[:, 0] - pose_r[0], hyp[:, 1] - pose_r[1]) > 0.5) | (
        np.abs(wrap_angle(hyp[:, 2] - pose_r[2])) > 0.2
    )
    runner_up = float(scores[far].max()) if far.any() else 0.0
    score = float(feats.points[matched].sum())
    if check is not None:
        score *= float(check(np.asarray([pose_r], dtype=float))[0])
    return Relocalization(
        (float(pose_r[0]), float(pose_r[1]), wrap_angle(float(pose_r[2]))),
        cov,
        score,
        score / float(feats.points.sum()),
        int(matched.sum()),
        runner_up,
        int(hyp.shape[0]),
    )


def _hypotheses(
    feats: _Features,
    a_w: FloatArray,
    o_w: FloatArray,
    ids: IntArray,
    wall_map: WallMap,
    angle_tolerance: float,
    margin: float,
) -> FloatArray:
    """``(H, 3)`` poses from every non-parallel pair of features assigned to every pair of sided walls."""
    out: list[FloatArray] = []
    n = feats.count
    for i in range(n):
        for j in range(i + 1, n):
            da = float(feats.alpha[j] - feats.alpha[i])
            if abs(math.sin(da)) < 0.5:  # within 30° of parallel: a poor fix (as can_relocalize)
                continue
            # θ = a_k - α_i must also turn feature j onto wall l: a_l - a_k = α_j - α_i
            diff = wrap_angle(a_w[None, :] - a_w[:, None] - da)
            k, l_ = np.nonzero(np.abs(diff) < 2.0 * angle_tolerance)
            k, l_ = k[ids[k] != ids[l_]], l_[ids[k] != ids[l_]]
            if k.shape[0] == 0:
                continue
            theta = a_w[k] - feats.alpha[i]
            # (x, y)·n(a) = offset - r for both lines
            c1, s1, c2, s2 = np.cos(a_w[k]), np.sin(a_w[k]), np.cos(a_w[l_]), np.sin(a_w[l_])
            b1, b2 = o_w[k] - feats.r[i], o_w[l_] - feats.r[j]
            det = c1 * s2 - s1 * c2
            ok = np.abs(det) > 1e-6
            det = np.where(ok, det, 1.0)
            x = (b1 * s2 - s1 * b2) / det
            y = (c1 * b2 - b1 * c2) / det
            pose = np.stack((x, y, theta), axis=1)[ok]
            wk, wl = ids[k][ok], ids[l_][ok]
            keep = _overlaps(pose, feats.ends[i], wall_map, wk, margin) & _overlaps(
                pose, feats.ends[j], wall_map, wl, margin
            )
            out.append(pose[keep])
    return np.concatenate(out) if out else np.zeros((0, 3))


def _overlaps(
    pose: FloatArray, ends: FloatArray, wall_map: WallMap, walls: IntArray, margin: float
) -> npt.NDArray[np.bool_]:
    """Whether one feature's segment (laser frame), seen from each pose, overlaps the paired wall's extent."""
    c, s = np.cos(pose[:, 2]), np.sin(pose[:, 2])
    x1 = pose[:, 0] + c * ends[0] - s * ends[1]
    y1 = pose[:, 1] + s * ends[0] + c * ends[1]
    x2 = pose[:, 0] + c * ends[2] - s * ends[3]
    y2 = pose[:, 1] + s * ends[2] + c * ends[3]
    sa, ca = np.sin(wall_map.alpha[walls]), np.cos(wall_map.alpha[walls])
    t1 = -x1 * sa + y1 * ca
    t2 = -x2 * sa + y2 * ca
    ext = wall_map.extent[walls]
    result: npt.NDArray[np.bool_] = np.minimum(np.maximum(t1, t2), ext[:, 1] + margin) > np.maximum(
        np.minimum(t1, t2), ext[:, 0] - margin
    )
    return result


def _feature_matches(
    pose: FloatArray,
    feats: _Features,
    wall_map: WallMap,
    walls: IntArray,
    angle_tolerance: float,
    distance_tolerance: float,
    margin: float,
) -> tuple[npt.NDArray[np.bool_], FloatArray]:
    """For ``(H, 3)`` poses: ``(H, F, W)`` whether each feature lies on each wall, and the distance residual."""
    x, y, th = pose[:, 0, None], pose[:, 1, None], pose[:, 2, None]
    a = th + feats.alpha[None, :]  # (H, F) the feature's normal in the map frame
    offset = feats.r[None, :] + x * np.cos(a) + y * np.sin(a)
    alpha = wall_map.alpha[walls]
    rho = wall_map.rho[walls]
    delta = wrap_angle(a[:, :, None] - alpha[None, None, :])
    same = np.abs(delta) < angle_tolerance
    opposite = np.abs(wrap_angle(delta + math.pi)) < angle_tolerance
    residual = np.where(same, offset[:, :, None] - rho, offset[:, :, None] + rho)
    on = (same | opposite) & (np.abs(residual) < distance_tolerance)
    c, s = np.cos(pose[:, 2])[:, None], np.sin(pose[:, 2])[:, None]
    e = feats.ends
    x1 = pose[:, 0, None] + c * e[None, :, 0] - s * e[None, :, 1]
    y1 = pose[:, 1, None] + s * e[None, :, 0] + c * e[None, :, 1]
    x2 = pose[:, 0, None] + c * e[None, :, 2] - s * e[None, :, 3]
    y2 = pose[:, 1, None] + s * e[None, :, 2] + c * e[None, :, 3]
    sa, ca = np.sin(alpha), np.cos(alpha)
    t1 = -x1[:, :, None] * sa + y1[:, :, None] * ca
    t2 = -x2[:, :, None] * sa + y2[:, :, None] * ca
    ext = wall_map.extent[walls]
    on &= np.minimum(np.maximum(t1, t2), ext[:, 1] + margin) > np.maximum(np.minimum(t1, t2), ext[:, 0] - margin)
    return on, residual


def _score(
    pose: FloatArray,
    feats: _Features,
    wall_map: WallMap,
    walls: IntArray,
    angle_tolerance: float,
    distance_tolerance: float,
    margin: float,
) -> tuple[FloatArray, FloatArray]:
    """Per pose: the scan points of the features that lie on some wall, and the sum of the features' distance
    residuals (the tolerance for a feature on no wall), m."""
    on, residual = _feature_matches(pose, feats, wall_map, walls, angle_tolerance, distance_tolerance, margin)
    points: FloatArray = (on.any(axis=2) * feats.points[None, :]).sum(axis=1)
    residuals: FloatArray = np.where(on, np.abs(residual), distance_tolerance).min(axis=2).sum(axis=1)
    return points, residuals


def _refine(
    pose: FloatArray,
    feats: _Features,
    wall_map: WallMap,
    walls: IntArray,
    angle_tolerance: float,
    distance_tolerance: float,
    margin: float,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]] | None:
    """Weighted least squares of a pose on the features that lie on a wall there (a few Gauss-Newton steps)."""
    x = pose.astype(np.float64).copy()
    cov = np.full((3, 3), np.nan)
    matched = np.zeros(feats.count, dtype=bool)
    for _ in range(4):
        on, residual = _feature_matches(x[None, :], feats, wall_map, walls, angle_tolerance, distance_tolerance, margin)
        on, residual = on[0], residual[0]
        matched = on.any(axis=1)
        if matched.sum() < 2:
            return None
        wall = np.argmin(np.where(on, np.abs(residual), np.inf), axis=1)
        info = np.zeros((3, 3))
        grad = np.zeros(3)
        for f in np.flatnonzero(matched).tolist():
            w = int(walls[wall[f]])
            a, rho = float(wall_map.alpha[w]), float(wall_map.rho[w])
            ca, sa = math.cos(a), math.sin(a)
            rho_r = rho - x[0] * ca - x[1] * sa
            sgn = -1.0 if rho_r < 0 else 1.0
            gamma = a - x[2] + (math.pi if sgn < 0 else 0.0)
            nu = np.array([wrap_angle(float(feats.alpha[f] - gamma)), feats.r[f] - sgn * rho_r])
            h = np.array([[0.0, 0.0, -1.0], [-sgn * ca, -sgn * sa, 0.0]])
            r = np.array([[feats.caa[f], feats.car[f]], [feats.car[f], feats.crr[f]]])
            w_inv = np.linalg.inv(r)
            info += h.T @ w_inv @ h
            grad += h.T @ w_inv @ nu
        try:
            cov = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            return None
        step = cov @ grad
        x = x + step
        if float(np.abs(step).max()) < 1e-6:
            break
    return x, 0.5 * (cov + cov.T), matched


def scan_agreement(
    caster: RayCaster,
    ranges: npt.ArrayLike,
    angles: npt.ArrayLike,
    poses: npt.ArrayLike,
    *,
    max_range: float,
    beams: int = 45,
    tolerance: float = 0.3,
    unexplained: float = 0.3,
) -> FloatArray:
    """The share of a scan that the map explains, seen from each of ``poses`` (laser poses, ``(N, 3)``).

    A beam agrees (1) when its range is within ``tolerance`` of the map's (ray cast from the pose); one that is
    shorter may have met something that is not in the map (a person, a chair), but as often it says the place is
    wrong: it counts ``unexplained``; one that reaches farther than the map allows went through a wall (0). Invalid
    readings (-1, max range) are left out. ``beams`` of the scan are used, evenly.

    Returns:
        ``(N,)`` shares in [0, 1] (1 for a scan with no valid beam).
    """
    r = np.asarray(ranges, dtype=float)
    a = np.asarray(angles, dtype=float)
    valid = np.flatnonzero((r > 0.0) & (r < max_range - 0.05) & np.isfinite(r))
    if valid.size == 0:
        return np.ones(len(np.atleast_2d(poses)))
    pick = valid[np.linspace(0, valid.size - 1, min(beams, valid.size)).astype(int)]
    r, a = r[pick], a[pick]
    out = []
    for x, y, theta in np.atleast_2d(np.asarray(poses, dtype=float)):
        expected = caster.cast((x, y), a + theta, max_range)
        near = np.abs(r - expected) <= tolerance
        short = r < expected - tolerance
        out.append(float(np.mean(near + unexplained * short)))
    return np.array(out)
