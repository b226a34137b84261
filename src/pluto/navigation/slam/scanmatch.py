"""The slam filter's motion input refined by scan matching: each scan registered on a small local map of points.

Strategy: the walls use only the points that fall on extracted lines, and between two scans the filter moves by the
odometry, whose errors (a few percent of the travel and of the turn) are what the walls then have to correct. Every
point of a scan says something about the motion, clutter included, so before the filter's predict the odometry's
increment is refined by registering the scan's points on those of the last few scans:

1. **Local map.** The points of the last :attr:`ScanMatchParams.keyframes` key scans, in the front end's own frame
   (the refined dead reckoning), each with the normal of the line through its neighbours in the scan (the scatter
   of a window of consecutive points; a point whose window is not flat has no normal and is left out), bucketed in
   a grid of cells as wide as the pairing distance. A scan becomes a key scan when it lies
   :attr:`~ScanMatchParams.keyframe_distance` or :attr:`~ScanMatchParams.keyframe_turn` from the previous one: a
   robot standing still matches on the same scan and does not drift, and a scan is matched on some metres of
   recent scans rather than on the last one only, so the errors of successive matches do not simply add up.
2. **Registration** (:func:`register`): point-to-line ICP started from the odometry's prediction x₀ = x_{k-1} ⊕ u,
   with the increment's covariance Q as a prior. A scan point p (thinned to one per
   :attr:`~ScanMatchParams.spacing` along the scan) pairs with its nearest map point m (normal n) within
   :attr:`~ScanMatchParams.pair_distance`; its residual is r = n·(R(θ)p + t − m), ∂r/∂(t, θ) = (n, n·R(θ + π/2)p).
   Each Gauss-Newton step solves (H + Q⁻¹)·δ = −(g + Q⁻¹·(x − x₀)) with H = c·Σ w·J·Jᵀ/σ², g = c·Σ w·J·r/σ²
   (w a Huber weight with its knee at 2σ, σ :attr:`~ScanMatchParams.residual_std`), pairing again at the new pose,
   until the step is below a tenth of a millimetre. c = :attr:`~ScanMatchParams.information_scale` < 1: the
   residuals of neighbouring points are not independent (a wall's points err together, a scan's pose is
   uncertain as a whole), so a scan of 300 points counts as about 15 independent ones. The result is the
   information-weighted blend of the match and the odometry: where the odometry is good (short steps) it keeps
   more of it, where it is poor (long steps, sharp turns) the match takes over, and what the scan cannot see stays
   where the odometry put it (along a bare corridor the points fix the heading and the offset across it, not the
   travel: the match is then marked :data:`DEGENERATE`, the travel's precision from the points alone being worse
   than :attr:`~ScanMatchParams.degenerate_std`).
3. **Gate**: the match falls back to the odometry (x₀ and Q, :data:`FALLBACK`) when fewer than
   :attr:`~ScanMatchParams.min_inliers` points (or :attr:`~ScanMatchParams.min_overlap` of them) pair within
   :attr:`~ScanMatchParams.inlier_distance`, or the correction is not plausible under Q and the fit's own spread
   together (its Mahalanobis distance squared beyond :attr:`~ScanMatchParams.gate`).
4. **Covariance** of the refined increment: (H + Q⁻¹)⁻¹ plus a floor (:attr:`~ScanMatchParams.floor_std`,
   :attr:`~ScanMatchParams.floor_heading_std`); the filter's predict adds it as the increment's noise.

The kernels (the normals, the pairing and the Gauss-Newton loop) are plain loops compiled by numba: a scan costs
a few tenths of a millisecond.

:class:`ScanMatcher` turns a stream of dead-reckoned laser poses, increment covariances and scans into a stream of
refined laser poses and increment covariances in the same form, so the filter's predict takes them unchanged; the
offline runner and the slam module both put it in front of :meth:`WallSlam.step
<pluto.navigation.slam.core.WallSlam.step>`. Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Annotated

import numba
import numpy as np
import numpy.typing as npt

from pluto.geometry import compose, relative, wrap_angle
from pluto.navigation.angles import compiled_wrap_angle
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

__all__ = [
    "DEGENERATE",
    "FALLBACK",
    "MATCHED",
    "LocalPointMap",
    "Registration",
    "ScanMatchParams",
    "ScanMatchStep",
    "ScanMatcher",
    "laser_increment_covariance",
    "point_normals",
    "register",
    "robot_increment_covariance",
    "scan_points",
    "thin",
    "warm_up",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MATCHED = "matched"
"""A registration that fixed all three degrees of freedom."""
DEGENERATE = "degenerate"
"""A registration whose points left a direction (typically along a corridor) to the odometry."""
FALLBACK = "fallback"
"""No usable registration (first scan, too few points, a poor or implausible fit): the odometry as given."""


class ScanMatchParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of the scan-matching front end.

    Attributes:
        min_range: readings below this are left out, m.
        usable_range: readings beyond this are left out, m (far points are sparse and noisy).
        spacing: a scan's points are thinned to one per this much of the polyline through them, in scan order,
            for the registration (a dense scan costs time without saying more), m.
        normal_window: neighbours on each side of a map point that give its normal.
        max_flatness: a map point whose window's scatter has eigenvalues λ₁ <= λ₂ with λ₁/λ₂ above this has no
            normal (a corner, clutter).
        neighbour_gap: neighbours in the window farther from the point than this (m) plus 3° of bearing at its
            range, per place in the window, are not on its surface.
        iterations: Gauss-Newton steps at most.
        pair_distance: a scan point pairs with a map point within this distance, m.
        inlier_distance: a pair whose residual is within this is an inlier (for the gate), m.
        residual_std: σ of a point's residual from its line, m (the Huber weight's knee is 2σ).
        information_scale: c, the weight of each point's residual as an independent measurement (module docstring).
        floor_std: std dev added to the refined increment's position, m, and ...
        floor_heading_std: ... its heading, rad.
        min_inliers: fewer inliers than this, or ...
        min_overlap: ... than this fraction of the scan's points: fall back to the odometry.
        gate: Mahalanobis distance squared (3 dof) of the correction beyond which the match is not believed.
        degenerate_std: a direction the points alone fix worse than this (m, or rad times 1 m) is degenerate.
        keyframes: key scans in the local map.
        keyframe_distance: a scan this far from the last key scan becomes one, m, ...
        keyframe_turn: ... or turned this much from it, rad.
    """

    min_range: Annotated[float, between(0.0, 10.0)] = 0.05
    usable_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 20.0
    spacing: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.03
    normal_window: Annotated[int, between(1, 100)] = 2
    max_flatness: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.05
    neighbour_gap: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.1
    iterations: Annotated[int, between(1, 1000)] = 20
    pair_distance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.3
    inlier_distance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    residual_std: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.02
    information_scale: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.05
    floor_std: Annotated[float, between(0.0, 10.0)] = 0.003
    floor_heading_std: Annotated[float, between(0.0, math.pi)] = math.radians(0.1)
    min_inliers: Annotated[int, between(1, 1_000_000)] = 30
    min_overlap: Annotated[float, between(0.0, 1.0)] = 0.3
    gate: Annotated[float, between(0.0, 1e12, open_low=True)] = 25.0  # 1e12: no gate
    degenerate_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    keyframes: Annotated[int, between(1, 10_000)] = 20
    keyframe_distance: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.25
    keyframe_turn: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(10.0)


def scan_points(ranges: npt.ArrayLike, angles: npt.ArrayLike, max_range: float, params: ScanMatchParams) -> FloatArray:
    """``(k, 2)`` the laser-frame points of a scan's readings within the usable ranges, in beam order, m.

    Args:
        ranges: range per beam, m (negative, zero, not finite or at ``max_range``: no echo).
        angles: bearing per beam, laser frame, rad.
        max_range: the scanner's largest range, m.
        params: the usable ranges.

    Raises:
        ValueError: ranges and angles of different lengths.
    """
    r = np.asarray(ranges, dtype=np.float64).ravel()
    a = np.asarray(angles, dtype=np.float64).ravel()
    if r.shape != a.shape:
        raise ValueError(f"{r.size} ranges and {a.size} angles")
    top = min(max_range - 1e-3, params.usable_range)
    ok = np.isfinite(r) & np.isfinite(a) & (r > params.min_range) & (r < top)
    r, a = r[ok], a[ok]
    return np.column_stack((r * np.cos(a), r * np.sin(a)))


def thin(points: FloatArray, spacing: float) -> FloatArray:
    """The points (in order), one per ``spacing`` (m) of the polyline through them: the first of each stretch."""
    if points.shape[0] < 2:
        return points
    step = np.hypot(*np.diff(points, axis=0).T)
    travelled = np.concatenate(([0.0], np.cumsum(step)))
    # one point per stretch of ``spacing`` along the scan (a vectorised stand-in for "spacing from the last kept")
    bins = np.floor(travelled / spacing)
    keep = np.concatenate(([True], np.diff(bins) > 0))
    return points[keep]


def point_normals(points: FloatArray, params: ScanMatchParams) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """The unit normal of each point of a scan (in beam order) from the scatter of its window of neighbours.

    Args:
        points: ``(k, 2)`` a scan's points in beam order, m.
        params: the window, the flatness and the neighbour gap.

    Returns:
        ``(k, 2)`` normals (pointing towards the laser at the origin) and ``(k,)`` which points have one.
    """
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 2)
    return _normals(pts, params.normal_window, params.max_flatness, params.neighbour_gap)


@dataclass(frozen=True)
class Registration:
    """One scan registered on a point map.

    Attributes:
        pose: the laser's (x, y, θ) in the map's frame, m and rad.
        covariance: its 3x3 covariance (the fit's scaled information and the prior's), m², m·rad, rad².
        information: 3x3 the points' information alone, H (unscaled).
        status: :data:`MATCHED`, :data:`DEGENERATE` or :data:`FALLBACK` (then ``pose`` is the prior's).
        inliers: pairs within the inlier distance at the end.
        points: the scan's points used.
        rms: root mean square residual of the inliers, m (nan without inliers).
        iterations: Gauss-Newton steps taken.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    information: FloatArray
    status: str
    inliers: int
    points: int
    rms: float
    iterations: int


def register(
    points: FloatArray,
    reference: LocalPointMap,
    guess: npt.ArrayLike,
    prior: npt.ArrayLike,
    params: ScanMatchParams,
) -> Registration:
    """Point-to-line ICP of a scan's points on a point map, with the odometry's prediction as a prior.

    Args:
        points: ``(k, 2)`` the scan's points, laser frame, m.
        reference: the map's points and normals.
        guess: the predicted laser pose (x, y, θ) in the map's frame, m and rad (x₀).
        prior: its 3x3 covariance (Q), m², m·rad, rad²; a floor keeps it invertible.
        params: settings.

    Returns:
        The registration; :data:`FALLBACK` with ``guess`` and ``prior`` when the gate says no.

    Raises:
        ValueError: a guess or prior of the wrong shape or not finite.
    """
    x0 = np.array(guess, dtype=np.float64).ravel()
    q = np.array(prior, dtype=np.float64)
    if x0.shape != (3,) or q.size != 9 or not (np.all(np.isfinite(x0)) and np.all(np.isfinite(q))):
        raise ValueError("the guess must be 3 finite values and the prior a finite 3x3 matrix")
    q = q.reshape(3, 3)
    q = 0.5 * (q + q.T) + np.diag([1e-8, 1e-8, 1e-10])
    q_inv = np.asarray(np.linalg.inv(q), dtype=np.float64)
    pose0 = (float(x0[0]), float(x0[1]), float(x0[2]))
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 2)
    n = pts.shape[0]
    if n < params.min_inliers or reference.size < params.min_inliers:
        return Registration(pose0, q, np.zeros((3, 3)), FALLBACK, 0, n, math.nan, 0)
    x, info, inliers, rms, steps = _icp(
        pts,
        reference.points,
        reference.normals,
        reference.starts,
        reference.origin,
        reference.shape,
        params.pair_distance,
        x0,
        q_inv,
        params.residual_std**2 / params.information_scale,
        2.0 * params.residual_std,
        params.inlier_distance,
        params.iterations,
    )
    if inliers < params.min_inliers or inliers < params.min_overlap * n:
        return Registration(pose0, q, info, FALLBACK, inliers, n, rms, steps)
    scaled = info  # already c·H: the fit weighs the points as the covariance does
    e = x - x0
    e[2] = wrap_angle(float(e[2]))
    # the correction against what the odometry allows and what the fit itself leaves open
    spread = q + np.linalg.pinv(scaled + np.diag([1e-9, 1e-9, 1e-9]))
    if float(e @ np.linalg.solve(spread, e)) > params.gate:
        return Registration(pose0, q, info, FALLBACK, inliers, n, rms, steps)
    covariance = np.asarray(np.linalg.inv(scaled + q_inv), dtype=np.float64)
    covariance += np.diag([params.floor_std**2, params.floor_std**2, params.floor_heading_std**2])
    # the points' own precision (the heading's at 1 m): a direction worse than degenerate_std is the prior's
    weakest = float(np.linalg.eigvalsh(scaled)[0])
    status = DEGENERATE if weakest < 1.0 / params.degenerate_std**2 else MATCHED
    return Registration((float(x[0]), float(x[1]), float(x[2])), covariance, info, status, inliers, n, rms, steps)


class LocalPointMap:
    """The points of the last key scans with their normals, in the front end's frame, bucketed in a grid of cells
    :attr:`ScanMatchParams.pair_distance` wide (a point's partners are in its cell and the 8 around it).

    Args:
        params: how many key scans, the normals' window, the cell size.
    """

    def __init__(self, params: ScanMatchParams) -> None:
        self.params = params
        self._scans: deque[tuple[FloatArray, FloatArray]] = deque(maxlen=params.keyframes)
        self.clear()

    @property
    def size(self) -> int:
        """Points in the map."""
        return int(self.points.shape[0])

    def add(self, points: FloatArray, pose: tuple[float, float, float]) -> None:
        """Add a key scan: its points in beam order (laser frame) seen from ``pose``; the oldest key scan leaves
        when there are :attr:`ScanMatchParams.keyframes`."""
        normals, ok = point_normals(points, self.params)
        c, s = math.cos(pose[2]), math.sin(pose[2])
        rot = np.array([[c, -s], [s, c]])
        world = points[ok] @ rot.T + np.array(pose[:2])
        self._scans.append((world, normals[ok] @ rot.T))
        self._index(np.concatenate([p for p, _ in self._scans]), np.concatenate([nr for _, nr in self._scans]))

    def clear(self) -> None:
        """Forget every key scan."""
        self._scans.clear()
        self._index(np.zeros((0, 2)), np.zeros((0, 2)))

    def _index(self, points: FloatArray, normals: FloatArray) -> None:
        cell = self.params.pair_distance
        if points.shape[0] == 0:
            self.points, self.normals = points, normals
            self.starts = np.zeros(2, dtype=np.int64)
            self.origin = np.zeros(3)
            self.shape = np.ones(2, dtype=np.int64)
            return
        low = points.min(axis=0) - cell
        ij = np.floor((points - low) / cell).astype(np.int64)
        shape = ij.max(axis=0) + 2
        key = ij[:, 0] * shape[1] + ij[:, 1]
        order = np.argsort(key, kind="stable")
        # the points sorted by cell, so each cell's are one run: starts[c] .. starts[c + 1]
        self.points = np.ascontiguousarray(points[order])
        self.normals = np.ascontiguousarray(normals[order])
        counts = np.bincount(key, minlength=int(shape[0] * shape[1]))
        self.starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.origin = np.array([low[0], low[1], cell])
        self.shape = shape.astype(np.int64)


# -- the compiled kernels ------------------------------------------------------------------------------------------
# Plain loops over scalars: a scan has a few hundred points and a match a few iterations, where numpy's per-call
# overhead would cost more than the arithmetic. Compiled by numba, cached beside the module.


@numba.njit(cache=True)
def _normals(points: FloatArray, half: int, max_flatness: float, gap: float) -> tuple[FloatArray, BoolArray]:
    """See :func:`point_normals`."""
    k = points.shape[0]
    normals = np.zeros((k, 2))
    ok = np.zeros(k, dtype=np.bool_)
    spacing = math.radians(1.0)
    for i in range(k):
        px, py = points[i, 0], points[i, 1]
        reach = (gap + 3.0 * math.hypot(px, py) * spacing) * half
        count = 0
        sx = 0.0
        sy = 0.0
        for j in range(max(0, i - half), min(k, i + half + 1)):
            if math.hypot(points[j, 0] - px, points[j, 1] - py) <= reach:
                count += 1
                sx += points[j, 0]
                sy += points[j, 1]
        if count < half + 2:
            continue
        mx, my = sx / count, sy / count
        sxx = 0.0
        syy = 0.0
        sxy = 0.0
        for j in range(max(0, i - half), min(k, i + half + 1)):
            if math.hypot(points[j, 0] - px, points[j, 1] - py) <= reach:
                dx, dy = points[j, 0] - mx, points[j, 1] - my
                sxx += dx * dx
                syy += dy * dy
                sxy += dx * dy
        half_trace = 0.5 * (sxx + syy)
        spread = math.hypot(0.5 * (sxx - syy), sxy)
        small, large = half_trace - spread, half_trace + spread
        if large <= 0.0 or small > max_flatness * large:
            continue
        angle = 0.5 * math.atan2(2.0 * sxy, sxx - syy) + 0.5 * math.pi  # across the direction of most scatter
        nx, ny = math.cos(angle), math.sin(angle)
        if nx * px + ny * py > 0.0:  # towards the laser
            nx, ny = -nx, -ny
        normals[i, 0] = nx
        normals[i, 1] = ny
        ok[i] = True
    return normals, ok


@numba.njit(cache=True)
def _solve3(a: FloatArray, b: FloatArray) -> FloatArray:
    """a⁻¹·b for a symmetric positive definite 3x3 ``a`` (Cholesky)."""
    l00 = math.sqrt(a[0, 0])
    l10 = a[1, 0] / l00
    l20 = a[2, 0] / l00
    l11 = math.sqrt(a[1, 1] - l10 * l10)
    l21 = (a[2, 1] - l20 * l10) / l11
    l22 = math.sqrt(a[2, 2] - l20 * l20 - l21 * l21)
    y0 = b[0] / l00
    y1 = (b[1] - l10 * y0) / l11
    y2 = (b[2] - l20 * y0 - l21 * y1) / l22
    out = np.empty(3)
    out[2] = y2 / l22
    out[1] = (y1 - l21 * out[2]) / l11
    out[0] = (y0 - l10 * out[1] - l20 * out[2]) / l00
    return out


@numba.njit(cache=True)
def _icp(
    points: FloatArray,
    ref: FloatArray,
    normals: FloatArray,
    starts: IntArray,
    origin: FloatArray,
    shape: IntArray,
    pair_distance: float,
    x0: FloatArray,
    q_inv: FloatArray,
    variance: float,
    knee: float,
    inlier_distance: float,
    iterations: int,
) -> tuple[FloatArray, FloatArray, int, float, int]:
    """Gauss-Newton point-to-line ICP with a prior (see the module docstring), each residual weighed by 1/variance
    (times a Huber weight, knee in m): the pose, the points' information at the end, the inliers, their rms residual
    and the steps taken."""
    x = x0.copy()
    var = variance
    limit2 = pair_distance * pair_distance
    cell = origin[2]
    info = np.zeros((3, 3))
    grad = np.zeros(3)
    inliers = 0
    sum2 = 0.0
    steps = 0
    for _ in range(iterations):
        steps += 1
        c, s = math.cos(x[2]), math.sin(x[2])
        info[:, :] = 0.0
        grad[:] = 0.0
        inliers = 0
        sum2 = 0.0
        for i in range(points.shape[0]):
            rx = c * points[i, 0] - s * points[i, 1]
            ry = s * points[i, 0] + c * points[i, 1]
            wx, wy = rx + x[0], ry + x[1]
            ci = math.floor((wx - origin[0]) / cell)
            cj = math.floor((wy - origin[1]) / cell)
            best = -1
            best2 = limit2
            for a in range(max(ci - 1, 0), min(ci + 2, shape[0])):
                for b in range(max(cj - 1, 0), min(cj + 2, shape[1])):
                    key = a * shape[1] + b
                    for j in range(starts[key], starts[key + 1]):
                        d2 = (ref[j, 0] - wx) ** 2 + (ref[j, 1] - wy) ** 2
                        if d2 < best2:
                            best2 = d2
                            best = j
            if best < 0:
                continue
            nx, ny = normals[best, 0], normals[best, 1]
            r = nx * (wx - ref[best, 0]) + ny * (wy - ref[best, 1])
            j0, j1, j2 = nx, ny, -nx * ry + ny * rx
            a_r = abs(r)
            w = (1.0 if a_r <= knee else knee / a_r) / var
            info[0, 0] += w * j0 * j0
            info[0, 1] += w * j0 * j1
            info[0, 2] += w * j0 * j2
            info[1, 1] += w * j1 * j1
            info[1, 2] += w * j1 * j2
            info[2, 2] += w * j2 * j2
            grad[0] += w * j0 * r
            grad[1] += w * j1 * r
            grad[2] += w * j2 * r
            if a_r <= inlier_distance:
                inliers += 1
                sum2 += r * r
        info[1, 0] = info[0, 1]
        info[2, 0] = info[0, 2]
        info[2, 1] = info[1, 2]
        e = x - x0
        e[2] = compiled_wrap_angle(e[2])
        delta = -_solve3(info + q_inv, grad + q_inv @ e)
        x += delta
        if abs(delta[0]) < 1e-4 and abs(delta[1]) < 1e-4 and abs(delta[2]) < 1e-5:
            break
    rms = math.sqrt(sum2 / inliers) if inliers else math.nan
    return x, info, inliers, rms, steps


@dataclass(frozen=True)
class ScanMatchStep:
    """What the front end made of one scan.

    Attributes:
        pose: the refined laser pose (x, y, θ) in the front end's frame (the dead reckoning's at the first scan).
        covariance: 3x3 covariance of the increment since the previous scan, in that frame (as the dead reckoning
            gives its own): what the filter's predict takes.
        registration: the match, None at the first scan.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    registration: Registration | None


def _lever(mount: tuple[float, float] | npt.ArrayLike, heading: float) -> FloatArray:
    """T = ∂(laser increment)/∂(robot increment) for a laser at ``mount`` (robot frame) on a robot at ``heading``."""
    mx, my = (float(v) for v in np.asarray(mount, dtype=np.float64).ravel()[:2])
    c, s = math.cos(heading), math.sin(heading)
    ox, oy = c * mx - s * my, s * mx + c * my
    return np.array([[1.0, 0.0, -oy], [0.0, 1.0, ox], [0.0, 0.0, 1.0]])


def laser_increment_covariance(
    covariance: npt.ArrayLike, mount: tuple[float, float] | npt.ArrayLike, heading: float
) -> FloatArray:
    """The covariance of the laser's increment, T·Σ·Tᵀ, from that of the robot's (3x3 or 9 values, dead-reckoning
    frame; what ``Localization/Laser_Dead-Reckoning`` gives), the laser at ``mount`` (x, y m, robot frame) and the
    robot's heading ``heading`` (rad) at the scan (as the pose filter's predict carries it)."""
    t = _lever(mount, heading)
    out: FloatArray = t @ np.asarray(covariance, dtype=np.float64).reshape(3, 3) @ t.T
    return out


def robot_increment_covariance(
    covariance: npt.ArrayLike, mount: tuple[float, float] | npt.ArrayLike, heading: float
) -> FloatArray:
    """The inverse of :func:`laser_increment_covariance`: T⁻¹·C·T⁻ᵀ."""
    t_inv = np.linalg.inv(_lever(mount, heading))
    out: FloatArray = t_inv @ np.asarray(covariance, dtype=np.float64).reshape(3, 3) @ t_inv.T
    return out


def warm_up() -> None:
    """Have numba load (or compile) the front end's kernels now: a short registration of a synthetic room (their
    first call in a process otherwise costs a fraction of a second inside the first scan's time)."""
    angles = np.radians(np.arange(-90.0, 90.5, 1.0))
    ranges = np.minimum(3.0 / np.maximum(np.abs(np.cos(angles)), 1e-3), 2.0 / np.maximum(np.abs(np.sin(angles)), 1e-3))
    matcher = ScanMatcher()
    points = scan_points(ranges, angles, 80.0, matcher.params)
    matcher.step((0.0, 0.0, 0.0), np.zeros((3, 3)), points)
    matcher.step((0.01, 0.0, 0.0), np.diag([1e-4, 1e-4, 1e-4]), points)


def _rotation(angle: float) -> FloatArray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class ScanMatcher:
    """The scan-matching front end: dead-reckoned laser poses in, refined ones out (see the module docstring).

    Args:
        params: settings.
    """

    def __init__(self, params: ScanMatchParams | None = None) -> None:
        self.params = params or ScanMatchParams()
        self.map = LocalPointMap(self.params)
        self._odometry: tuple[float, float, float] | None = None
        self._pose: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self._key: tuple[float, float, float] | None = None
        self.counts = {MATCHED: 0, DEGENERATE: 0, FALLBACK: 0}

    def reset(self) -> None:
        """Forget the local map (after a gap in the scans): the next scan moves by the odometry alone and starts a
        new map; the refined poses go on from the last one."""
        self.map.clear()
        self._key = None

    def step(self, dr_pose: npt.ArrayLike, increment: npt.ArrayLike, points: FloatArray) -> ScanMatchStep:
        """Refine the dead reckoning's motion since the previous scan with this scan's points.

        Args:
            dr_pose: the dead-reckoned laser pose (x, y, θ) at the scan, m and rad.
            increment: 3x3 covariance of the laser's increment since the previous scan, dead-reckoning frame.
            points: ``(k, 2)`` the scan's points in beam order, laser frame (:func:`scan_points`); none: the
                odometry as given.

        Raises:
            ValueError: a pose or covariance of the wrong shape or not finite.
        """
        odo = np.array(dr_pose, dtype=np.float64).ravel()
        cov = np.array(increment, dtype=np.float64)
        if odo.shape != (3,) or cov.size != 9 or not (np.all(np.isfinite(odo)) and np.all(np.isfinite(cov))):
            raise ValueError("the pose must be 3 finite values and the increment's covariance a finite 3x3 matrix")
        cov = cov.reshape(3, 3)
        now = (float(odo[0]), float(odo[1]), float(odo[2]))
        previous, self._odometry = self._odometry, now
        if previous is None:
            self._pose = now
            self._add_key(points)
            return ScanMatchStep(now, np.zeros((3, 3)), None)
        # the odometry's increment in the previous laser frame, put after the previous refined pose
        guess = compose(self._pose, relative(previous, now))
        turn = _rotation(self._pose[2] - previous[2])  # the dead reckoning's frame into the front end's
        prior = turn @ (0.5 * (cov + cov.T)) @ turn.T
        match = register(thin(points, self.params.spacing), self.map, guess, prior, self.params)
        self.counts[match.status] += 1
        self._pose = match.pose
        if self._key is None or self._far_from_key(match.pose):
            self._add_key(points)
        return ScanMatchStep(match.pose, match.covariance, match)

    def _far_from_key(self, pose: tuple[float, float, float]) -> bool:
        assert self._key is not None
        p = self.params
        moved = math.hypot(pose[0] - self._key[0], pose[1] - self._key[1])
        return moved >= p.keyframe_distance or abs(wrap_angle(pose[2] - self._key[2])) >= p.keyframe_turn

    def _add_key(self, points: FloatArray) -> None:
        if points.shape[0] >= 2 * self.params.normal_window + 1:
            self.map.add(points, self._pose)
            self._key = self._pose
