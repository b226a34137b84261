"""A global search of the wall map for the laser's pose (a kidnapped or lost robot), and the share of a scan the map
explains seen from a pose.

Strategy: two non-parallel features fix a pose once they are assigned to two map walls (with a side each): θ from
the first, (x, y) from the two line equations. Every assignment whose angle difference agrees is a hypothesis; those
whose two segments do not overlap their walls are dropped, the rest are scored by the scan points of the features
that then match some wall, and the best is refined by least squares on its matches. Lines alone cannot tell apart
places where the same walls are seen (sliding along a corridor): :func:`scan_agreement` ray casts the map from each
candidate and counts the beams that agree, a second opinion on the best few. Features from half a metre on are used:
in a corridor the lines across it are door frames and recesses, most shorter than a metre, and without them a search
has only the corridor's two parallel walls, which cannot place the robot at all (a wrong start in Freiburg 079's
corridor took 7 m of travel to find with features from 0.8 m on, half a second with them). The pose filter
(:mod:`pluto.navigation.pose.core`) never moves itself to a pose found here: its caller decides.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluto.geometry import wrap_angle
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.pose.map import WallMap
from pluto.sim.raycast import RayCaster

__all__ = ["Relocalization", "can_relocalize", "relocalize", "scan_agreement"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


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


def can_relocalize(features: Sequence[LineFeature], min_length: float = 0.5) -> bool:
    """Whether a scan's lines can fix a pose at all (what :func:`relocalize` needs first): two features at least
    ``min_length`` long (m) that are not within 30° of parallel. A search with fewer says nothing about the place."""
    usable = [f.alpha for f in features if f.length >= min_length]
    return any(abs(math.sin(b - a)) >= 0.5 for i, a in enumerate(usable) for b in usable[i + 1 :])


def relocalize(
    features: Sequence[LineFeature],
    wall_map: WallMap,
    hint: Sequence[float] | FloatArray | None = None,
    *,
    radius: float | None = None,
    max_range: float = 30.0,
    max_features: int = 10,
    min_length: float = 0.5,
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
