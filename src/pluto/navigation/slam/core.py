"""The slam module's estimator step: predict, match, correct, map.

Strategy (spec/pluto-software.txt §7.2): the slam module works like the pose module, except that the walls are
estimated with the pose instead of read from a map. For every scan:

1. predict with the dead reckoning's laser pose and increment covariance (``Localization/Laser_Dead-Reckoning``);
2. take the mapped walls within range (their ends, :class:`~pluto.navigation.slam.wall.WallSegments`), their joint
   covariance with the pose from the filter, and pair them with the scan's lines
   (:func:`~pluto.navigation.slam.association.associate`);
3. correct the filter with the pairs, put the ends of the walls in range on their corrected lines, and move the ends
   of the matched walls out to what this scan saw of them;
4. count the lines that matched nothing in the tentative list; those confirmed become walls;
5. merge a wall that grew (or is new) with a wall nearby on the same line (:func:`duplicate`): the filter is told
   they are equal, the kept one takes the other's ends and the other leaves the map.

The filter is either the full EKF or the compressed one (the same estimate; the compressed one's cost follows the
walls near the robot). Walls out of range keep their ends until :meth:`WallSlam.realign` (before a map is saved).

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from pluto.geometry import wrap_angle
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
    walls_near_features,
)
from pluto.navigation.slam.compressed import CompressedWallEKF
from pluto.navigation.slam.ekf import WallObservation
from pluto.navigation.slam.wall import WallSegments, feature_segment

__all__ = ["SlamFilter", "SlamStep", "WallSlam"]

FloatArray = npt.NDArray[np.float64]

_PARALLEL = 0.3
"""Walls whose normals differ by more than this (rad, either sense) are never tested as one line."""


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

    def merge(self, keep: int, drop: int) -> float: ...


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
            nis = slam.update([(p.wall, WallObservation.from_feature(features[p.feature])) for p in found.pairs])
        self.segments.realign((w, slam.wall(w)) for w in walls)
        pose = slam.pose
        seen = [(p.feature, p.wall) for p in found.pairs] + list(found.on_walls.items())
        grown = {wall for feature, wall in seen if self.segments.extend(wall, feature_segment(pose, features[feature]))}
        matched = {feature for feature, _ in seen}
        unmatched = [i for i in range(len(features)) if i not in matched]
        added: list[int] = []
        for confirmed in self._tentative.observe(features, unmatched, pose, slam.pose_covariance):
            index = slam.add_wall(WallObservation.from_feature(features[confirmed.feature]))
            line = slam.wall(index)
            self.segments.add(float(line[0]), float(line[1]), confirmed.ends)
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

    def _merge_duplicates(self, changed: set[int], near: set[int]) -> list[tuple[int, int]]:
        """Merge each wall whose ends grew (or that is new) with a wall nearby that is the same line."""
        merged: list[tuple[int, int]] = []
        active = self.segments.active
        lines = self.segments.lines
        for w in sorted(changed):
            for v in sorted(near):
                if v == w or not (active[v] and active[w]):
                    continue
                turn = abs(wrap_angle(float(lines[v, 0] - lines[w, 0])))
                if min(turn, math.pi - turn) > _PARALLEL:
                    continue  # not nearly parallel (either way): not one line, whatever the covariance
                keep, drop = min(v, w), max(v, w)
                state, covariance = self.filter.marginal([keep, drop])
                if duplicate(keep, drop, state, covariance, self.segments, self.params) is None:
                    continue
                self.filter.merge(keep, drop)
                self.segments.extend(keep, self.segments.segment(drop))
                self.segments.retire(drop)
                active[drop] = False
                merged.append((keep, drop))
        if merged:
            self.segments.realign((w, self.filter.wall(w)) for w in sorted(near) if active[w])
        return merged

    def realign(self) -> None:
        """Put the ends of every wall on its current line."""
        self.segments.realign((w, self.filter.wall(w)) for w in range(len(self.filter)))
