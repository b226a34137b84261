"""The slam module's data association: which line of a scan is which mapped wall, and when a new line is a wall.

Strategy: a scan's line (α_f, r_f) and a mapped wall are a candidate pair when the innovation ν = (α_f - γ, r_f - ρ_r)
passes the pose module's Mahalanobis gate (chi-square, 2 dof, :attr:`PoseFilterParams.gate`) with the full innovation
covariance S = J·P·Jᵀ + C_f + T (T: :func:`merge_tolerance`, what two fits of one wall's line differ by beyond their
covariances, so that a wall seen again a centimetre or two off its estimate is not mapped again), where J = [H_v, H_w]
and P is the joint covariance of the pose and that wall (the filter's :meth:`marginal`, exact also for the compressed
filter's walls outside the area), and when the line's segment, carried into the map frame, overlaps the wall's ends with
a margin. Pairs are then chosen one to one, nearest first, by the pose module's own assignment.

A line that matches no wall is not a wall yet: it may be a person, a door left open or a spurious fit. It goes to a
tentative list in the map frame, and becomes a wall when it has been seen ``confirm`` times (in different scans,
each sighting gated against the tentative line with the pose's uncertainty) without being missed ``max_missed``
scans in a row; only then does the filter get it, from the confirming sighting.

Two mapped walls can still turn out to be one (two pieces first seen apart that grew towards each other, or a wall
mapped again when the robot came back to it and its line was a few centimetres off the old one): when they face the
same way (seen from the same side: the two faces of a thin wall are two walls), their lines agree within the gate,
with the covariance of their difference plus a tolerance (:func:`merge_tolerance`: two fits of one wall's line
differ by more than the filter's covariance says, as a wall is not flat and clutter stands along it), and their ends
overlap or nearly touch, :func:`duplicate` says so and the caller merges them.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
import numpy.typing as npt

from pluto.geometry import wrap_angle
from pluto.navigation.pose.core import PoseFilterParams
from pluto.navigation.pose.core import associate as one_to_one
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam.ekf import MERGE_VARIANCE, POSE_SIZE, WALL_SIZE, new_wall, same_line
from pluto.navigation.slam.wall import WallSegments, feature_segment, project_onto_line
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

__all__ = [
    "Association",
    "AssociationParams",
    "Confirmed",
    "Pair",
    "TentativeWalls",
    "associate",
    "candidate_walls",
    "duplicate",
    "merge_tolerance",
    "same_line_distances",
    "walls_near_features",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


class AssociationParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of the data association and of new walls.

    Attributes:
        gate: Mahalanobis gate of a line-wall pair (chi-square, 2 dof), the pose module's by default.
        overlap_margin: a line must overlap its wall's ends widened by this, m.
        join_gap: a line on a mapped wall's line (within the gate) less than this beyond its ends is more of that wall
            (seen past a door or an obstacle), not a new one, m; so are two such pieces of a new line in one scan.
        max_range: walls farther than this from the laser are not considered, m.
        near_features: only walls within this of a line seen in the scan (map frame, at the predicted pose) are
            candidates, so the work of a scan follows what it sees, not the size of the map, m (0: every wall in
            range).
        confirm: sightings of a new line before it becomes a wall.
        max_missed: scans in a row a tentative wall may go unseen before it is forgotten.
        min_length: shorter lines do not start new walls, m.
        sighting_inflation: a matched line's covariance is multiplied by this when it corrects the filter (not when
            it is gated): a wall's line errs alike scan after scan (the wall is not flat, clutter stands along it), so
            n sightings are worth fewer than n independent measurements; 1: as the line fit says.
        merge_angle_std: how far two lines of one wall may differ in direction beyond their covariances (a wall is
            not flat, clutter stands along it): std dev added to a line-wall pair's innovation and to the difference
            of two walls tested as one (:func:`merge_tolerance`), rad; 0: by the covariances alone.
        merge_offset_std: the same across the wall, where the two are compared, m.
    """

    gate: Annotated[float, between(0.0, 1000.0, open_low=True)] = PoseFilterParams().gate
    overlap_margin: Annotated[float, between(0.0, 10.0)] = 0.5
    join_gap: Annotated[float, between(0.0, 100.0)] = 2.5
    max_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 30.0
    near_features: Annotated[float, between(0.0, 100.0)] = 2.0
    confirm: Annotated[int, between(1, 1000)] = 3
    max_missed: Annotated[int, between(0, 1000)] = 3
    min_length: Annotated[float, between(0.0, 100.0)] = 0.6
    sighting_inflation: Annotated[float, between(0.0, 1000.0, open_low=True)] = 1.0
    merge_angle_std: Annotated[float, between(0.0, math.pi)] = math.radians(0.5)
    merge_offset_std: Annotated[float, between(0.0, 10.0)] = 0.015


@dataclass(frozen=True)
class Pair:
    """A scan's line matched to a mapped wall.

    Attributes:
        feature: index of the line in the scan's features.
        wall: index of the wall.
        nis: νᵀ·S⁻¹·ν of the pair (2 dof).
    """

    feature: int
    wall: int
    nis: float


@dataclass(frozen=True)
class Association:
    """A scan's lines against the map.

    Attributes:
        pairs: lines matched one to one with walls, to correct the filter, nearest first.
        on_walls: every other line that lies on a mapped wall (a second piece of a matched wall, or one seen beyond
            its ends by less than ``join_gap``): line index -> wall index. Not a new wall; it extends that wall.
    """

    pairs: tuple[Pair, ...]
    on_walls: dict[int, int]


def candidate_walls(segments: WallSegments, pose: Sequence[float] | FloatArray, max_range: float) -> IntArray:
    """The active walls with some part within ``max_range`` (m) of the laser at ``pose``, sorted (through the walls'
    grid index: the work follows the walls around the laser, not the map)."""
    return segments.near(float(pose[0]), float(pose[1]), max_range)


def walls_near_features(
    segments: WallSegments,
    pose: Sequence[float] | FloatArray,
    features: Sequence[LineFeature],
    params: AssociationParams,
) -> IntArray:
    """The candidate walls of a scan: active, within ``max_range`` of the laser at ``pose``, and within
    ``near_features`` of one of the scan's lines placed at ``pose`` (every wall in range when that is 0), sorted.

    The distance of a wall to a line is the least distance from the wall to points spaced at most
    ``near_features`` along the line (ends included), so a wall closer than that to the line is always kept."""
    walls = candidate_walls(segments, pose, params.max_range)
    margin = params.near_features
    if margin <= 0.0 or len(walls) == 0:
        return walls
    if not features:
        return walls[:0]
    points = []
    for f in features:
        ends = feature_segment(pose, f)
        n = max(2, math.ceil(float(np.hypot(*(ends[1] - ends[0]))) / margin) + 1)
        t = np.linspace(0.0, 1.0, n)[:, None]
        points.append(ends[0] + t * (ends[1] - ends[0]))
    p = np.concatenate(points)  # (P, 2)
    s = segments.rows(walls)  # (W, 4)
    a, e = s[:, :2], s[:, 2:] - s[:, :2]
    length2 = np.maximum((e * e).sum(axis=1), 1e-12)
    rel = p[:, None, :] - a[None, :, :]  # (P, W, 2)
    u = np.clip((rel * e[None, :, :]).sum(axis=2) / length2, 0.0, 1.0)
    gap = rel - u[:, :, None] * e[None, :, :]
    distance = np.sqrt((gap * gap).sum(axis=2)).min(axis=0)  # (W,)
    near: IntArray = walls[distance <= margin * 1.5]
    return near


def associate(
    features: Sequence[LineFeature],
    walls: Sequence[int],
    state: FloatArray,
    covariance: FloatArray,
    segments: WallSegments,
    params: AssociationParams | None = None,
) -> Association:
    """Pair a scan's lines with mapped walls, one to one, and find the other lines that lie on mapped walls.

    Args:
        features: the scan's lines, laser frame.
        walls: the candidate walls (:func:`candidate_walls`).
        state: [x, y, θ, α_1, ρ_1, ...] of the pose and the candidates, in the order of ``walls`` (the filter's
            :meth:`marginal`).
        covariance: their joint covariance.
        segments: the walls' ends.
        params: settings.

    Returns:
        The pairs and the other lines on walls.
    """
    prm = params or AssociationParams()
    nf, nw = len(features), len(walls)
    if nf == 0 or nw == 0:
        return Association((), {})
    pose = state[:POSE_SIZE]
    x, y, heading = float(pose[0]), float(pose[1]), float(pose[2])
    # every line against every wall at once (the model of ekf.observe_wall, one row per wall); the 2x2 innovation
    # covariances are solved in closed form
    lines = state[POSE_SIZE : POSE_SIZE + WALL_SIZE * nw].reshape(nw, WALL_SIZE)
    alpha = lines[:, 0]
    ca, sa = np.cos(alpha), np.sin(alpha)
    rho_r = lines[:, 1] - x * ca - y * sa
    sign = np.where(rho_r < 0.0, -1.0, 1.0)
    gamma = alpha - heading + np.where(sign < 0.0, math.pi, 0.0)
    z_gamma = wrap_angle(gamma)
    z_rho = sign * rho_r
    h_v = np.zeros((nw, 2, POSE_SIZE))
    h_v[:, 0, 2] = -1.0
    h_v[:, 1, 0] = -sign * ca
    h_v[:, 1, 1] = -sign * sa
    h_w = np.zeros((nw, 2, WALL_SIZE))
    h_w[:, 0, 0] = 1.0
    h_w[:, 1, 0] = sign * (x * sa - y * ca)
    h_w[:, 1, 1] = sign
    p_vv = covariance[:POSE_SIZE, :POSE_SIZE]
    p_vw = covariance[:POSE_SIZE, POSE_SIZE:].reshape(POSE_SIZE, nw, WALL_SIZE).transpose(1, 0, 2)  # (nw, 3, 2)
    idx = POSE_SIZE + WALL_SIZE * np.arange(nw)
    p_ww = np.empty((nw, WALL_SIZE, WALL_SIZE))
    for i in range(WALL_SIZE):
        for j in range(WALL_SIZE):
            p_ww[:, i, j] = covariance[idx + i, idx + j]
    cross = h_v @ p_vw @ h_w.transpose(0, 2, 1)
    jpj = h_v @ p_vv @ h_v.transpose(0, 2, 1) + cross + cross.transpose(0, 2, 1) + h_w @ p_ww @ h_w.transpose(0, 2, 1)
    measured = np.array([(f.alpha, f.r) for f in features])  # (nf, 2)
    c_f = np.array([f.covariance for f in features])  # (nf, 2, 2)
    s = jpj[None, :, :, :] + c_f[:, None, :, :]  # (nf, nw, 2, 2)
    # a line of a wall lies within a tolerance of the wall's line beyond the covariances (where the line is seen:
    # the tangential coordinate of its midpoint in the laser frame), else the wall is mapped again beside itself
    mid = np.array([f.midpoint for f in features])  # (nf, 2)
    s = s + merge_tolerance(-mid[:, 0] * np.sin(measured[:, 0]) + mid[:, 1] * np.cos(measured[:, 0]), prm)[:, None]
    nu_a = wrap_angle(measured[:, :1] - z_gamma[None, :])
    nu_r = measured[:, 1:] - z_rho[None, :]
    s00, s01, s10, s11 = s[..., 0, 0], s[..., 0, 1], s[..., 1, 0], s[..., 1, 1]
    d2 = (s11 * nu_a * nu_a - (s01 + s10) * nu_a * nu_r + s00 * nu_r * nu_r) / (s00 * s11 - s01 * s10)
    # each line's ends along each wall's line (the projection along the wall's direction d = (-sin α, cos α)),
    # against the wall's ends widened by the margin
    seen = np.array([feature_segment(pose, f) for f in features])  # (nf, 2, 2) map-frame ends
    t = seen[:, :, 0, None] * -sa[None, None, :] + seen[:, :, 1, None] * ca[None, None, :]  # (nf, 2, nw)
    ends = segments.rows(walls).reshape(nw, 2, 2)
    t_wall = ends[:, :, 0] * -sa[:, None] + ends[:, :, 1] * ca[:, None]  # (nw, 2)
    lo, hi = t_wall.min(axis=1), t_wall.max(axis=1)
    overlap = np.minimum(t.max(axis=1), hi[None, :] + prm.overlap_margin) - np.maximum(
        t.min(axis=1), lo[None, :] - prm.overlap_margin
    )
    chosen = one_to_one(d2, overlap, prm.gate)
    pairs = tuple(Pair(i, int(walls[k]), float(d2[i, k])) for i, k in chosen)
    matched = {i for i, _ in chosen}
    near = (d2 < prm.gate) & (overlap > prm.overlap_margin - prm.join_gap)
    on_walls = {
        i: int(walls[int(np.argmin(np.where(near[i], d2[i], np.inf)))])
        for i in range(nf)
        if i not in matched and near[i].any()
    }
    return Association(pairs, on_walls)


def duplicate(
    keep: int,
    drop: int,
    state: FloatArray,
    covariance: FloatArray,
    segments: WallSegments,
    params: AssociationParams | None = None,
) -> float | None:
    """Whether two mapped walls are one: they face the same way (:meth:`WallSegments.facing`), their lines agree
    within the gate (the difference's covariance from their joint covariance, plus :func:`merge_tolerance` where
    they overlap) and their ends overlap or leave a gap shorter than ``join_gap``.

    Args:
        keep: the first wall.
        drop: the second.
        state: [x, y, θ, α_keep, ρ_keep, α_drop, ρ_drop] (the filter's :meth:`marginal` of ``[keep, drop]``).
        covariance: its covariance.
        segments: the walls' ends.
        params: settings.

    Returns:
        The Mahalanobis distance² of the difference when they are one wall, else None.
    """
    prm = params or AssociationParams()
    if float(segments.facing([keep])[0] @ segments.facing([drop])[0]) < 0.0:
        return None
    k, d = POSE_SIZE, POSE_SIZE + WALL_SIZE
    alpha, rho = float(state[k]), float(state[k + 1])
    direction = np.array([-math.sin(alpha), math.cos(alpha)])
    t_drop = project_onto_line(segments.segment(drop), alpha, rho) @ direction
    t_keep = project_onto_line(segments.segment(keep), alpha, rho) @ direction
    if _overlap(t_drop, t_keep, prm.join_gap) <= 0.0:
        return None
    nu, h_k, h_d = same_line(state[k : k + WALL_SIZE], state[d : d + WALL_SIZE])
    j = np.zeros((WALL_SIZE, state.size))
    j[:, k : k + WALL_SIZE] = h_k
    j[:, d : d + WALL_SIZE] = h_d
    where = 0.5 * (max(t_drop.min(), t_keep.min()) + min(t_drop.max(), t_keep.max()))
    tolerance = merge_tolerance(np.array([where]), prm)[0]
    s = j @ covariance @ j.T + MERGE_VARIANCE * np.eye(WALL_SIZE) + tolerance
    d2 = float(nu @ np.linalg.solve(s, nu))
    if d2 >= prm.gate:
        return None
    return d2


def merge_tolerance(where: npt.ArrayLike, params: AssociationParams | None = None) -> FloatArray:
    """How much two lines of one wall may differ beyond their covariance: ``(k, 2, 2)`` covariances in (α, ρ).

    A std dev σ_a of the direction and σ_o of the offset across the wall at the tangential coordinate t of the place
    where the two are compared (``where``, m: the middle of their overlap); the offset there is o = ρ - t·α to first
    order, so in (α, ρ) the covariance is [[σ_a², t·σ_a²], [t·σ_a², t²·σ_a² + σ_o²]] (rad², rad·m, m²).
    """
    prm = params or AssociationParams()
    t = np.asarray(where, dtype=np.float64).reshape(-1)
    va, vo = prm.merge_angle_std**2, prm.merge_offset_std**2
    out = np.empty((t.size, WALL_SIZE, WALL_SIZE))
    out[:, 0, 0] = va
    out[:, 0, 1] = out[:, 1, 0] = t * va
    out[:, 1, 1] = t * t * va + vo
    return out


def same_line_distances(
    state: FloatArray,
    covariance: FloatArray,
    first: IntArray,
    second: IntArray,
    tolerance: FloatArray | None = None,
) -> FloatArray:
    """The Mahalanobis distance² of :func:`duplicate`'s test for many pairs at once (without the ends).

    Args:
        state: [x, y, θ, α_1, ρ_1, ...] (a filter's :meth:`marginal`).
        covariance: its covariance.
        first: ``(k,)`` positions of the kept walls among the marginal's walls (0 the first wall).
        second: ``(k,)`` positions of the walls that would go.
        tolerance: ``(k, 2, 2)`` added to each difference's covariance (:func:`merge_tolerance`); None: nothing.

    Returns:
        ``(k,)`` νᵀ·S⁻¹·ν of each pair (the pseudo-observation of :func:`~pluto.navigation.slam.ekf.same_line`).
    """
    ck = POSE_SIZE + WALL_SIZE * np.asarray(first, dtype=np.intp)
    cd = POSE_SIZE + WALL_SIZE * np.asarray(second, dtype=np.intp)
    turn = wrap_angle(state[ck] - state[cd])
    flip = np.abs(turn) > math.pi / 2
    sign = np.where(flip, -1.0, 1.0)
    nu_a = wrap_angle(state[ck] - state[cd] - np.where(flip, math.pi, 0.0))
    nu_r = state[ck + 1] - sign * state[cd + 1]

    def block(rows: IntArray, cols: IntArray) -> FloatArray:
        out = np.empty((rows.size, WALL_SIZE, WALL_SIZE))
        for i in range(WALL_SIZE):
            for j in range(WALL_SIZE):
                out[:, i, j] = covariance[rows + i, cols + j]
        return out

    p_kk, p_dd, p_kd = block(ck, ck), block(cd, cd), block(ck, cd)
    # S = P_kk + P_kd·Dᵀ + D·P_dk + D·P_dd·Dᵀ + MERGE_VARIANCE·I with D = diag(-1, -sign)
    dg = np.stack((-np.ones_like(sign), -sign), axis=1)  # (k, 2) the diagonal of D
    kd = p_kd * dg[:, None, :]
    s = p_kk + kd + kd.transpose(0, 2, 1) + p_dd * dg[:, :, None] * dg[:, None, :]
    s[:, 0, 0] += MERGE_VARIANCE
    s[:, 1, 1] += MERGE_VARIANCE
    if tolerance is not None:
        s += tolerance
    s00, s01, s10, s11 = s[:, 0, 0], s[:, 0, 1], s[:, 1, 0], s[:, 1, 1]
    d2: FloatArray = (s11 * nu_a * nu_a - (s01 + s10) * nu_a * nu_r + s00 * nu_r * nu_r) / (s00 * s11 - s01 * s10)
    return d2


@dataclass
class _Tentative:
    line: FloatArray  # (α, ρ), map frame
    covariance: FloatArray
    ends: FloatArray  # (2, 2) the union of the segments seen, map frame
    sightings: int
    missed: int = 0
    seen_this_scan: bool = field(default=False)


@dataclass(frozen=True)
class Confirmed:
    """A line seen often enough to become a wall.

    Attributes:
        feature: index of the confirming line in this scan's features.
        ends: ``(2, 2)`` map-frame ends of all that was seen of it, m.
    """

    feature: int
    ends: FloatArray


class TentativeWalls:
    """Lines seen but not yet mapped, in the map frame, until they are confirmed or forgotten.

    Args:
        params: settings (``confirm``, ``max_missed``, ``min_length``, ``gate``, ``overlap_margin``).
    """

    def __init__(self, params: AssociationParams | None = None) -> None:
        self.params = params or AssociationParams()
        self._items: list[_Tentative] = []

    def __len__(self) -> int:
        return len(self._items)

    def observe(
        self,
        features: Sequence[LineFeature],
        unmatched: Sequence[int],
        pose: Sequence[float] | FloatArray,
        pose_covariance: FloatArray,
    ) -> list[Confirmed]:
        """Count one scan's unmatched lines and return those now confirmed (removed from the list).

        Args:
            features: the scan's lines, laser frame.
            unmatched: indices of the lines that matched no mapped wall.
            pose: the laser's (x, y, θ) estimate, m and rad.
            pose_covariance: its 3x3 covariance.
        """
        prm = self.params
        p = np.asarray(pose, dtype=np.float64)
        fresh = [i for i in unmatched if features[i].length >= prm.min_length]
        lines = []
        for i in fresh:
            f = features[i]
            wall, g_v, g_z = new_wall(p, f.alpha, f.r)
            cov = g_v @ pose_covariance @ g_v.T + g_z @ f.covariance @ g_z.T
            lines.append((i, wall, cov, feature_segment(p, f)))
        lines = self._merge_pieces(lines)
        chosen: list[tuple[int, int]] = []
        if lines and self._items:
            d2 = np.full((len(lines), len(self._items)), np.inf)
            overlap = np.full(d2.shape, -np.inf)
            for a, (_, wall, cov, ends) in enumerate(lines):
                for b, item in enumerate(self._items):
                    nu = np.array([wrap_angle(float(wall[0] - item.line[0])), float(wall[1] - item.line[1])])
                    d2[a, b] = float(nu @ np.linalg.solve(cov + item.covariance, nu))
                    alpha, rho = float(item.line[0]), float(item.line[1])
                    d = np.array([-math.sin(alpha), math.cos(alpha)])
                    t_new = project_onto_line(ends, alpha, rho) @ d
                    t_old = item.ends @ d
                    overlap[a, b] = _overlap(t_new, t_old, prm.overlap_margin)
            chosen = one_to_one(d2, overlap, prm.gate)
        confirmed: list[Confirmed] = []
        matched_lines = set()
        done: set[int] = set()
        for a, b in chosen:
            matched_lines.add(a)
            i, wall, cov, ends = lines[a]
            item = self._items[b]
            item.sightings += 1
            item.missed = 0
            item.seen_this_scan = True
            alpha, rho = float(wall[0]), float(wall[1])
            d = np.array([-math.sin(alpha), math.cos(alpha)])
            both = project_onto_line(np.vstack((item.ends, ends)), alpha, rho)
            t = both @ d
            item.ends = both[[int(np.argmin(t)), int(np.argmax(t))]]
            item.line, item.covariance = wall, cov
            if item.sightings >= prm.confirm:
                confirmed.append(Confirmed(i, item.ends.copy()))
                done.add(b)
        kept: list[_Tentative] = []
        for b, item in enumerate(self._items):
            if b in done:
                continue
            if not item.seen_this_scan:
                item.missed += 1
            item.seen_this_scan = False
            if item.missed <= prm.max_missed:
                kept.append(item)
        for a, (i, wall, cov, ends) in enumerate(lines):
            if a not in matched_lines:
                if prm.confirm <= 1:
                    confirmed.append(Confirmed(i, ends))
                else:
                    kept.append(_Tentative(wall, cov, ends, 1))
        self._items = kept
        return confirmed

    def _merge_pieces(
        self, lines: list[tuple[int, FloatArray, FloatArray, FloatArray]]
    ) -> list[tuple[int, FloatArray, FloatArray, FloatArray]]:
        """Pieces of one line in one scan (less than ``join_gap`` apart) as one, kept with the longest's sighting."""
        prm = self.params
        out: list[tuple[int, FloatArray, FloatArray, FloatArray]] = []
        for i, wall, cov, ends in sorted(lines, key=lambda line: -float(np.hypot(*(line[3][1] - line[3][0])))):
            for k, (j, kept, kept_cov, kept_ends) in enumerate(out):
                nu = np.array([wrap_angle(float(wall[0] - kept[0])), float(wall[1] - kept[1])])
                alpha, rho = float(kept[0]), float(kept[1])
                d = np.array([-math.sin(alpha), math.cos(alpha)])
                t_new = project_onto_line(ends, alpha, rho) @ d
                t_old = project_onto_line(kept_ends, alpha, rho) @ d
                if (
                    float(nu @ np.linalg.solve(cov + kept_cov, nu)) < prm.gate
                    and _overlap(t_new, t_old, prm.join_gap) > 0.0
                ):
                    both = project_onto_line(np.vstack((kept_ends, ends)), alpha, rho)
                    t = both @ d
                    out[k] = (j, kept, kept_cov, both[[int(np.argmin(t)), int(np.argmax(t))]])
                    break
            else:
                out.append((i, wall, cov, ends))
        return out


def _overlap(t_a: FloatArray, t_b: FloatArray, margin: float) -> float:
    """Overlap of two spans along a line, the second widened by ``margin`` at both ends (negative: the gap), m."""
    return float(min(t_a.max(), t_b.max() + margin) - max(t_a.min(), t_b.min() - margin))
