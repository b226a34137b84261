"""The slam module's estimator step: predict, match, correct, map.

Strategy (docs/design.md, "pose and slam"): the slam module works like the pose module, except that the walls are
estimated with the pose instead of read from a map. For every scan:

1. predict with the dead reckoning's laser pose and increment covariance (``Localization/Laser_Dead-Reckoning``),
   or, in front of this step, the same refined by registering the scan's points on the last scans
   (:class:`~pluto.navigation.slam.scanmatch.ScanMatcher`: the offline runner and the slam module do so);
2. take the mapped walls within range (their ends, :class:`~pluto.navigation.slam.wall.WallSegments`), their joint
   covariance with the pose from the filter, and pair them with the scan's lines
   (:func:`~pluto.navigation.slam.association.associate`);
3. correct the filter with the pairs (each line's covariance times ``sighting_inflation``: a wall's line errs alike
   scan after scan, so its sightings are not independent measurements), put the ends of the walls in range on their
   corrected lines, and move the ends of the matched walls out to what this scan saw of them;
4. count the lines that matched nothing in the tentative list; those confirmed become walls;
5. merge a wall that grew (or is new) with a wall nearby on the same line (:func:`duplicate`): the filter is told
   they are equal, the kept one takes the other's ends and the other leaves the map.

The filter is either the full EKF or the compressed one (the same estimate; the compressed one's cost follows the
walls near the robot). Walls out of range keep their ends until :meth:`WallSlam.realign` (before a map is saved).

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.core import PoseLike
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.slam.association import (
    Association,
    AssociationParams,
    Pair,
    TentativeWalls,
    associate,
    candidate_walls,
    duplicate,
    merge_tolerance,
    same_line_distances,
    walls_near_features,
)
from pluto.navigation.slam.compressed import CompressedWallEKF
from pluto.navigation.slam.ekf import POSE_SIZE, WALL_SIZE, WallObservation
from pluto.navigation.slam.wall import WallSegments, feature_segment

__all__ = ["SlamFilter", "SlamStep", "WallSlam"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

_PARALLEL = 0.3
"""Walls whose normals differ by more than this (rad, either sense) are never tested as one line."""

_NEAR_LINE = 1.0
"""Walls whose ends lie farther than this from each other's line (m) are never tested as one line."""

_GATE_SLACK = 1.0 + 1e-6
"""The batched line test lets pairs a rounding above the gate through to :func:`duplicate`, which decides."""


class SlamFilter(Protocol):
    """What :class:`WallSlam` needs of a filter (:class:`WallEKF`, :class:`CompressedWallEKF`)."""

    def __len__(self) -> int: ...

    @property
    def pose(self) -> FloatArray: ...

    @property
    def pose_covariance(self) -> FloatArray: ...

    def wall(self, index: int) -> FloatArray: ...

    def marginal(self, walls: Sequence[int]) -> tuple[FloatArray, FloatArray]: ...

    def predict(self, dr_pose: PoseLike, increment: npt.ArrayLike) -> None: ...

    def update(self, observations: Sequence[tuple[int, WallObservation]]) -> float: ...

    def add_wall(self, observation: WallObservation) -> int: ...

    def merge(self, keep: int, drop: int, noise: npt.ArrayLike | None = None) -> float: ...

    def shift(self, delta: npt.ArrayLike) -> None: ...


@dataclass(frozen=True)
class SlamStep:
    """What one scan did.

    Attributes:
        pose: the laser's (x, y, θ) after the scan, m and rad.
        covariance: its 3x3 covariance.
        pairs: the lines matched to mapped walls (those that corrected the filter).
        nis: their normalised innovation squared together (2 dof each); 0 without pairs.
        added: the walls added by this scan.
        merged: (kept, dropped) walls found to be one by this scan.
        candidates: mapped walls within range.
        tentative: lines waiting to be confirmed as walls.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    pairs: tuple[Pair, ...]
    nis: float
    added: tuple[int, ...]
    merged: tuple[tuple[int, int], ...]
    candidates: int
    tentative: int


class WallSlam:
    """A map of walls built with a filter that corrects the laser's pose.

    Args:
        slam_filter: the filter (its walls are this map's walls, in order; start it without walls). A compressed
            filter chooses its local area by these walls' ends.
        params: data association and new walls.

    Raises:
        ValueError: the filter already has walls (their ends are unknown).
    """

    def __init__(self, slam_filter: SlamFilter, params: AssociationParams | None = None) -> None:
        if len(slam_filter):
            raise ValueError("start from a filter without walls")
        self.filter = slam_filter
        self.params = params or AssociationParams()
        self.segments = WallSegments()
        self._tentative = TentativeWalls(self.params)
        if isinstance(slam_filter, CompressedWallEKF):
            segments = self.segments
            slam_filter.locate = lambda x, y, radius: candidate_walls(segments, (x, y), radius).tolist()

    def step(self, dr_pose: PoseLike, increment: npt.ArrayLike, features: Sequence[LineFeature]) -> SlamStep:
        """Process one scan.

        Args:
            dr_pose: the dead-reckoned laser pose at the scan (3-, 6- or 8-D).
            increment: the covariance of the robot's increment since the previous scan.
            features: the scan's lines (:func:`~pluto.navigation.pose.extract_lines`), laser frame.

        Raises:
            ValueError: a pose or covariance of the wrong shape or not finite.
        """
        slam = self.filter
        slam.predict(dr_pose, increment)
        walls = walls_near_features(self.segments, slam.pose, features, self.params).tolist()
        found = Association((), {})
        nis = 0.0
        if walls and features:
            state, covariance = slam.marginal(walls)
            found = associate(features, walls, state, covariance, self.segments, self.params)
            k = self.params.sighting_inflation
            nis = slam.update(
                [
                    (p.wall, WallObservation(f.alpha, f.r, k * f.covariance, f.midpoint))
                    for p in found.pairs
                    for f in (features[p.feature],)
                ]
            )
        self.segments.realign((w, slam.wall(w)) for w in walls)
        pose = slam.pose
        seen = [(p.feature, p.wall) for p in found.pairs] + list(found.on_walls.items())
        grown = {wall for feature, wall in seen if self.segments.extend(wall, feature_segment(pose, features[feature]))}
        matched = {feature for feature, _ in seen}
        # a line beyond the walls' range is never matched (its wall is not a candidate): as a new wall it would map
        # that wall again at every visit
        unmatched = [i for i, f in enumerate(features) if i not in matched and _distance(f) <= self.params.max_range]
        added: list[int] = []
        for confirmed in self._tentative.observe(features, unmatched, pose, slam.pose_covariance):
            index = slam.add_wall(WallObservation.from_feature(features[confirmed.feature]))
            line = slam.wall(index)
            piece = feature_segment(pose, features[confirmed.feature])
            self.segments.add(float(line[0]), float(line[1]), confirmed.ends, viewer=pose[:2], seen=piece)
            added.append(index)
        merged = self._merge_duplicates(grown | set(added), set(walls) | set(added))
        x, y, theta = (float(v) for v in slam.pose)
        return SlamStep(
            (x, y, theta),
            slam.pose_covariance,
            found.pairs,
            nis,
            tuple(added),
            tuple(merged),
            len(walls),
            len(self._tentative),
        )

    def merge_duplicates(self, walls: Iterable[int] | None = None) -> list[tuple[int, int]]:
        """Merge every pair of walls of the map that are one (:func:`duplicate`), as each scan does for the walls it
        grew or added; returns the (kept, dropped) pairs. The map is tidied so before it is saved: a pair that
        failed the test when it last grew may pass it later, once the filter has seen more. ``walls``: only pairs
        with one of these walls and a wall near it (after a loop closure moved them), else every pair."""
        if walls is None:
            every = set(np.flatnonzero(self.segments.active).tolist())
            return self._merge_duplicates(every, every)
        changed = {w for w in walls if self.segments.is_active(w)}
        near: set[int] = set(changed)
        for w in changed:
            (x1, y1), (x2, y2) = self.segments.segment(w).tolist()
            half = 0.5 * math.hypot(x2 - x1, y2 - y1)
            near.update(self.segments.near(0.5 * (x1 + x2), 0.5 * (y1 + y2), half + self.params.join_gap).tolist())
        return self._merge_duplicates(changed, near)

    def _merge_duplicates(self, changed: set[int], near: set[int]) -> list[tuple[int, int]]:
        """Merge each wall whose ends grew (or that is new) with a wall nearby that is the same line.

        Pairs are nearly parallel walls facing the same way whose ends, on the first one's line, lie within
        :data:`_NEAR_LINE` of it and within ``join_gap`` of its ends; every pair's line test is done at once on one
        marginal of the filter (again after a merge, which changes it), and only a pair that passes it is decided by
        :func:`duplicate`, so a scan costs one marginal and a few array operations, not a marginal and a test per
        pair. The merge draws the two lines together with the tolerance of the test (:func:`merge_tolerance`)."""
        merged: list[tuple[int, int]] = []
        segments = self.segments
        prm = self.params
        first = np.array([w for w in sorted(changed) if segments.is_active(w)], dtype=np.intp)
        second = np.array([v for v in sorted(near) if segments.is_active(v)], dtype=np.intp)
        if first.size == 0 or second.size == 0:
            return merged
        pairs, tolerance = self._close_pairs(self._parallel_pairs(first, second))
        marginal: tuple[dict[int, int], FloatArray, FloatArray, FloatArray] | None = None
        for n, (keep, drop) in enumerate(pairs):
            if not (segments.is_active(keep) and segments.is_active(drop)):
                continue  # one of them went into another wall earlier in this scan
            if marginal is None:  # every pair's line test at once (again after a merge, which changes the filter)
                marginal = self._pairs_marginal(pairs, tolerance)
            column, state, covariance, d2 = marginal
            if not d2[n] < prm.gate * _GATE_SLACK:
                continue
            rows_of = np.concatenate(
                (
                    np.arange(POSE_SIZE),
                    *(POSE_SIZE + WALL_SIZE * column[w] + np.arange(WALL_SIZE) for w in (keep, drop)),
                )
            )
            pair_state, pair_covariance = state[rows_of], covariance[np.ix_(rows_of, rows_of)]
            if duplicate(keep, drop, pair_state, pair_covariance, segments, prm) is None:
                continue
            self.filter.merge(keep, drop, tolerance[n])
            segments.absorb(keep, drop)
            segments.retire(drop)
            merged.append((keep, drop))
            marginal = None  # the merge changed the filter
        if merged:
            segments.realign((w, self.filter.wall(w)) for w in sorted(near) if segments.is_active(w))
        return merged

    def _parallel_pairs(self, first: IntArray, second: IntArray) -> list[tuple[int, int]]:
        """The pairs (lower wall, higher wall) of a wall of ``first`` and another of ``second`` that are nearly
        parallel (either way) and seen from the same side, else not one wall whatever the covariance."""
        segments = self.segments
        turn = np.abs(np.remainder(segments.angles(first)[:, None] - segments.angles(second)[None, :], math.pi))
        facing = segments.facing(first) @ segments.facing(second).T
        parallel = (np.minimum(turn, math.pi - turn) <= _PARALLEL) & (facing >= 0.0)
        parallel &= first[:, None] != second[None, :]
        rows, cols = np.nonzero(parallel)
        found = dict.fromkeys(
            (min(w, v), max(w, v)) for w, v in zip(first[rows].tolist(), second[cols].tolist(), strict=True)
        )
        return list(found)

    def _close_pairs(self, found: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], FloatArray]:
        """The pairs whose dropped wall's ends lie on the kept wall's line (as last aligned): close to it and to its
        ends; with each one's merge tolerance (:func:`merge_tolerance`)."""
        if not found:
            return [], np.zeros(0)
        segments = self.segments
        keep_of = np.array([k for k, _ in found], dtype=np.intp)
        drop_of = np.array([d for _, d in found], dtype=np.intp)
        lines = segments.lines
        alpha, rho = lines[keep_of, 0], lines[keep_of, 1]
        normal = np.stack((np.cos(alpha), np.sin(alpha)), axis=1)  # (p, 2)
        along = np.stack((-np.sin(alpha), np.cos(alpha)), axis=1)
        ends_keep = segments.rows(keep_of).reshape(-1, 2, 2)
        ends_drop = segments.rows(drop_of).reshape(-1, 2, 2)
        across = np.abs(np.einsum("pkj,pj->pk", ends_drop, normal) - rho[:, None]).max(axis=1)
        t_keep = np.einsum("pkj,pj->pk", ends_keep, along)
        t_drop = np.einsum("pkj,pj->pk", ends_drop, along)
        low = np.maximum(t_keep.min(axis=1), t_drop.min(axis=1))
        high = np.minimum(t_keep.max(axis=1), t_drop.max(axis=1))
        close = (across <= _NEAR_LINE) & (high - low + self.params.join_gap > 0.0)
        pairs = [pair for pair, ok in zip(found, close.tolist(), strict=True) if ok]
        if not pairs:
            return [], np.zeros(0)
        return pairs, merge_tolerance(0.5 * (low + high)[close], self.params)

    def _pairs_marginal(
        self, pairs: list[tuple[int, int]], tolerance: FloatArray
    ) -> tuple[dict[int, int], FloatArray, FloatArray, FloatArray]:
        """The filter's marginal of the pairs' active walls (each wall's column in it, state, covariance) and every
        pair's same-line distance. A compressed filter first brings the walls of the pairs that may merge into its
        local area, in one full update."""
        segments = self.segments
        walls = sorted({w for pair in pairs for w in pair if segments.is_active(w)})
        state, covariance = self.filter.marginal(walls)
        column = {w: k for k, w in enumerate(walls)}
        # a pair with a wall gone is skipped by the caller: its column (0) does not matter
        k_col = np.array([column.get(k, 0) for k, _ in pairs], dtype=np.intp)
        d_col = np.array([column.get(d, 0) for _, d in pairs], dtype=np.intp)
        d2 = same_line_distances(state, covariance, k_col, d_col, tolerance)
        if isinstance(self.filter, CompressedWallEKF):
            # the walls of every pair that may merge join the local area in one full update, not one each
            passing = d2 < self.params.gate * _GATE_SLACK
            outside = {w for (k, d), ok in zip(pairs, passing.tolist(), strict=True) if ok for w in (k, d)}
            outside = {w for w in outside if segments.is_active(w)} - set(self.filter.area_walls)
            if outside:
                self.filter.full_update(sorted(outside))
        return column, state, covariance, d2

    def realign(self) -> None:
        """Put the ends of every wall on its current line."""
        self.segments.realign((w, self.filter.wall(w)) for w in range(len(self.filter)))


def _distance(feature: LineFeature) -> float:
    """The distance from the laser to the nearest point of a line's segment, m."""
    (x1, y1), (x2, y2) = feature.start, feature.end
    ex, ey = x2 - x1, y2 - y1
    length2 = ex * ex + ey * ey
    u = 0.0 if length2 <= 0.0 else min(1.0, max(0.0, -(x1 * ex + y1 * ey) / length2))
    return math.hypot(x1 + u * ex, y1 + u * ey)
