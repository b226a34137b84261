"""Loop closing for the wall SLAM: keyframes, closures found by place and checked by scan matching, and the pose
graph that spreads a closure's correction along the loop.

Strategy. The filter (:mod:`pluto.navigation.slam.core`) is good over a few metres and poor over a loop: walls seen
long ago are out of its local area, and when the robot comes back after a long loop its drift (metres in a large
building) is beyond the gate that pairs lines with walls, so it maps the place again beside itself. The back end
keeps what is needed to correct that afterwards:

1. **Keyframes** (:class:`Keyframe`): every :attr:`LoopParams.keyframe_distance` of travel or
   :attr:`~LoopParams.keyframe_turn` of turn, the filter's pose, the scan's points (laser frame, thinned) and the
   motion from the previous keyframe with its covariance (the scan-matching front end's increments propagated
   between the two keyframes: what the chain of keyframes knows of each step). The motion is the front end's too
   (the filter's holds the walls' scan-by-scan corrections, which the chain would add up as motion); without a
   front end, the filter's (:mod:`pluto.navigation.slam.backend`).
2. **Candidates by place** (:meth:`LoopSearch.add`): keyframes at least :attr:`~LoopParams.min_travel` of travel back
   whose estimated position lies within the search radius of the new keyframe's. The radius grows with the
   uncertainty between the two through the graph: shortest paths (Dijkstra) over the edges' position variances and
   heading variances, the heading's times the travel between them (a heading error turns the whole way after it),
   and no more than :attr:`~LoopParams.filter_inflation` times the filter's own position uncertainty at the two
   keyframes (its walls hold the drift that the increments alone would let grow); 3 σ, at least
   :attr:`~LoopParams.min_radius`, at most :attr:`~LoopParams.max_radius`. A closed loop shortens the paths, so the
   next pass searches a small region again. At most :attr:`~LoopParams.candidates` are checked per keyframe, the
   nearest first, spread at least :attr:`~LoopParams.candidate_spacing` of travel apart.
3. **Check** (:func:`match_place`): the new keyframe's points registered (the front end's point-to-line ICP,
   :func:`~pluto.navigation.slam.scanmatch.register`, without a prior) on a submap of the candidate and its
   neighbours (the keyframes of the same pass within :attr:`~LoopParams.submap_travel`), started from the estimated
   relative pose, from the keyframe put on the candidate's position (the estimate can be metres off) and, in a
   region wider than :attr:`~LoopParams.local_radius`, from :attr:`~LoopParams.search_offsets` ahead, behind and to
   either side of the estimate, each coarse (pairs within 1 m) then fine. A match is believed when enough of the
   scan's points are inliers (:attr:`~LoopParams.min_inlier_ratio`, :attr:`~LoopParams.min_inliers`), their rms
   residual is small, the points fix every direction to :attr:`~LoopParams.weakest_std` (a corridor with a few
   features lets a scan slide along it), no start found another pose nearly as good
   (:attr:`~LoopParams.distinct_margin`: a place that matches in two ways gives nothing), and at most
   :attr:`~LoopParams.max_conflicts` of the points of the keyframe and of the submap's scans lie where the other
   side saw free space (:func:`free_space_conflicts`: a wall where the submap saw a doorway is another place that
   looks alike).
4. **Consistency**: the match must agree with the graph's estimate within the search region's own uncertainty
   (a Mahalanobis gate); a closure whose region is wider than :attr:`~LoopParams.local_radius` (the loop is long
   enough for a similar-looking place to fit in it) is held until a second closure from a later keyframe agrees
   with it (the two together and the chains between them make a cycle whose error must be within
   :attr:`~LoopParams.pair_tolerance`); a closure left alone is dropped. A false closure is worse than none.
5. **Optimisation**: each accepted closure is a robust edge of the pose graph (:mod:`pluto.navigation.slam.posegraph`)
   and the graph is optimised; when it moved a keyframe by :attr:`~LoopParams.publish_distance` or
   :attr:`~LoopParams.publish_turn` the result (:class:`GraphCorrection`) goes to the scan loop, which moves the
   walls and the filter (:mod:`pluto.navigation.slam.backend`).

Nothing here reads a clock, the bus or a file; a :class:`LoopSearch` belongs to one thread (the back end's worker).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
import numpy.typing as npt
import scipy.sparse  # type: ignore[import-untyped]  # scipy ships no type stubs
import scipy.sparse.csgraph  # type: ignore[import-untyped]

from pluto.geometry import Pose2D, compose, relative, wrap_angle
from pluto.navigation.slam.posegraph import PoseGraph
from pluto.navigation.slam.scanmatch import DEGENERATE, FALLBACK, LocalPointMap, ScanMatchParams, register
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

__all__ = [
    "ClosureCheck",
    "GraphCorrection",
    "Keyframe",
    "LoopParams",
    "LoopSearch",
    "free_space_conflicts",
    "match_place",
]

FloatArray = npt.NDArray[np.float64]

_CHI2_3_999 = 16.27
"""χ² with 3 degrees of freedom at 99.9 %: the gates on 3-dof disagreements."""


class LoopParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of the loop-closing back end.

    Attributes:
        keyframe_distance: a scan this far (m) from the last keyframe becomes one, ...
        keyframe_turn: ... or turned this much from it (rad).
        spacing: a keyframe's points are thinned to one per this much of the scan's polyline, m.
        min_travel: candidates lie at least this much travel back, m (nearer ones are the front end's business).
        min_radius: the search radius is at least this, m, ...
        max_radius: ... and at most this (a robot lost by more is not found by place).
        sigmas: the search radius in standard deviations of the position's uncertainty.
        filter_inflation: the filter's own position uncertainty bounds the search radius times this (an EKF's
            covariance understates its error over a long way: linearisation, sightings of one wall that err alike).
        candidates: candidates checked per keyframe at most.
        candidate_spacing: the candidates of a keyframe lie at least this much travel apart, m.
        submap_travel: a candidate's submap holds the keyframes of its pass within this much travel of it, m.
        min_inliers: a match needs at least this many inlier points, ...
        min_inlier_ratio: ... and this fraction of the keyframe's points within ``inlier_distance`` of the submap.
        inlier_distance: m.
        max_rms: the inliers' rms residual at most this, m.
        weakest_std: the match must fix its least certain direction to this (m, or rad times 1 m): a corridor with a
            few features along it lets a scan slide by metres for a small loss of fit.
        agree_distance: two starts that end within this (m) ...
        agree_turn: ... and this (rad) found the same pose.
        distinct_margin: the best match must have this fraction of the keyframe's points more inliers than any
            other pose a start converged to, else the place is ambiguous.
        search_offsets: in a search region wider than ``local_radius``, starts are also put these distances (m) ahead,
            behind and to either side of the estimate.
        local_radius: a closure whose search radius is within this (m) is accepted alone; a wider one waits for a
            second that agrees.
        pair_window: a held closure waits this many keyframes for a second one.
        pair_tolerance: the cycle through two closures closes within this (m) plus ``pair_drift`` of the travel
            between their keyframes, and within ``pair_turn`` (rad).
        pair_drift: see ``pair_tolerance``.
        pair_turn: see ``pair_tolerance``.
        closure_std: std dev floor of a closure's position, m, ...
        closure_heading_std: ... and heading, rad (a scan matched from another viewpoint errs by more than its
            points' spread says).
        edge_std: std dev floor of a keyframe-to-keyframe motion's position, m, ...
        edge_heading_std: ... and heading, rad.
        max_conflicts: a match where more than this fraction of either scan's points lie in space the other saw
            empty is two different places (:func:`free_space_conflicts`).
        free_space_bin: the bearing bins of that test, rad, ...
        free_space_margin: ... and how much nearer than the other scan's beam a point must be to conflict, m.
        kernel: the closures' Cauchy kernel, in their standard deviations.
        iterations: Gauss-Newton steps per optimisation at most.
        publish_distance: an optimisation that moved no keyframe by this (m) ...
        publish_turn: ... nor turned one by this (rad) is not handed to the scan loop (moving the map costs it a
            full update of the filter); the next one carries it.
        merge_batch: walls moved by a correction checked for copies per scan (the scan loop's cost).
        copy_distance: a moved wall and another seen from the same side that overlap and lie within this of each
            other (m) are one wall (no two parallel faces of a building are so close).
    """

    keyframe_distance: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.5
    keyframe_turn: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(20.0)
    spacing: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    min_travel: Annotated[float, between(0.0, 10_000.0)] = 10.0
    min_radius: Annotated[float, between(0.0, 1000.0, open_low=True)] = 1.0
    max_radius: Annotated[float, between(0.0, 1000.0, open_low=True)] = 15.0
    sigmas: Annotated[float, between(0.0, 100.0, open_low=True)] = 3.0
    filter_inflation: Annotated[float, between(0.0, 100.0, open_low=True)] = 3.0
    candidates: Annotated[int, between(1, 1000)] = 4
    candidate_spacing: Annotated[float, between(0.0, 1000.0, open_low=True)] = 1.0
    submap_travel: Annotated[float, between(0.0, 1000.0, open_low=True)] = 3.0
    min_inliers: Annotated[int, between(1, 1_000_000)] = 60
    min_inlier_ratio: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.6
    inlier_distance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    max_rms: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.03
    weakest_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.02
    agree_distance: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.1
    agree_turn: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(2.0)
    distinct_margin: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.05
    search_offsets: tuple[Annotated[float, between(0.0, 100.0)], ...] = (1.0, 2.0)
    local_radius: Annotated[float, between(0.0, 1000.0, open_low=True)] = 1.0
    pair_window: Annotated[int, between(1, 10_000)] = 10
    pair_tolerance: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.15
    pair_drift: Annotated[float, between(0.0, 1.0)] = 0.02
    pair_turn: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(3.0)
    closure_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    closure_heading_std: Annotated[float, between(0.0, math.pi, open_low=True)] = math.radians(1.0)
    edge_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.005
    edge_heading_std: Annotated[float, between(0.0, math.pi, open_low=True)] = math.radians(0.1)
    max_conflicts: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.1
    free_space_bin: Annotated[float, between(0.0, math.pi, open_low=True)] = math.radians(1.0)
    free_space_margin: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.15
    kernel: Annotated[float, between(0.0, 100.0, open_low=True)] = 3.0
    iterations: Annotated[int, between(1, 1000)] = 20
    publish_distance: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.02
    publish_turn: Annotated[float, between(0.0, 2.0 * math.pi, open_low=True)] = math.radians(0.2)
    merge_batch: Annotated[int, between(1, 10_000)] = 8
    copy_distance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_radius < self.min_radius:
            raise ValueError(f"max_radius {self.max_radius} is below min_radius {self.min_radius}")


@dataclass(frozen=True)
class Keyframe:
    """A scan kept for loop closing (made by the scan loop, read by the back end's worker; never changed).

    Attributes:
        index: its place in the chain of keyframes, from 0.
        scan: the scan it was taken at (its count since the map started).
        pose: the filter's laser pose at the scan, m and rad, in the filter's frame when it was taken.
        points: ``(k, 2)`` the scan's points, laser frame, thinned, m.
        motion: the motion from the previous keyframe, in its frame (zeros for the first).
        covariance: 3x3 covariance of that motion.
        travelled: travel from the first keyframe, m.
        uncertainty: 3x3 the filter's covariance of ``pose`` (in the map's frame).
    """

    index: int
    scan: int
    pose: Pose2D
    points: FloatArray = field(repr=False)
    motion: Pose2D
    covariance: FloatArray = field(repr=False)
    travelled: float
    uncertainty: FloatArray = field(repr=False, default_factory=lambda: np.full((3, 3), np.inf))


@dataclass(frozen=True)
class ClosureCheck:
    """What checking one candidate gave.

    Attributes:
        motion: the new keyframe's pose in the candidate's frame (x, y, θ), m and rad, or None if not matched.
        covariance: 3x3 covariance of ``motion`` (with the floors of :class:`LoopParams`).
        inliers: inlier points of the best match.
        ratio: their fraction of the keyframe's points.
        rms: their rms residual, m.
        reason: why it was not matched ('' when it was).
    """

    motion: Pose2D | None
    covariance: FloatArray
    inliers: int
    ratio: float
    rms: float
    reason: str


@dataclass(frozen=True)
class GraphCorrection:
    """The optimised poses of keyframes 0..n-1, in the frame of the graph (the filter's after the previous
    corrections were applied); what the scan loop applies (:meth:`LoopBackEnd.apply
    <pluto.navigation.slam.backend.LoopBackEnd.apply>`).

    Attributes:
        poses: ``(n, 3)`` m and rad.
        closures: closures in the graph.
    """

    poses: FloatArray
    closures: int


_COARSE = ScanMatchParams(
    pair_distance=1.0, inlier_distance=0.05, min_inliers=1, min_overlap=0.0, gate=1e12, iterations=30, keyframes=64
)
_FINE = ScanMatchParams(
    pair_distance=0.3, inlier_distance=0.05, min_inliers=1, min_overlap=0.0, gate=1e12, iterations=30, keyframes=64
)
_FREE = np.diag([1e6, 1e6, 1e4])
"""The registration's prior when checking a place: none to speak of (the guess only starts it)."""


def _submap(poses: list[Pose2D], points: list[FloatArray], params: ScanMatchParams) -> LocalPointMap:
    target = LocalPointMap(params)
    for pose, pts in zip(poses, points, strict=True):
        target.add(pts, pose)
    return target


def match_place(
    points: FloatArray,
    submap_poses: list[Pose2D],
    submap_points: list[FloatArray],
    guesses: list[Pose2D],
    params: LoopParams,
    *,
    free_space: bool = True,
) -> ClosureCheck:
    """Register a keyframe's points on a submap from several starts and say whether it is that place.

    Args:
        points: ``(k, 2)`` the keyframe's points, laser frame, m.
        submap_poses: the submap's keyframe poses in the candidate's frame (the candidate's is (0, 0, 0)).
        submap_points: their points, each in its own laser frame.
        guesses: starting poses of the keyframe in the candidate's frame.
        params: the thresholds.
        free_space: test the match against the space the submap's scans saw empty (:func:`free_space_conflicts`).

    Returns:
        The check: a motion when the match is good, unique, fixes all three degrees of freedom and neither scan
        sees through what the other saw.
    """
    none = np.zeros((3, 3))
    n = int(points.shape[0])
    if n < params.min_inliers:
        return ClosureCheck(None, none, 0, 0.0, math.nan, f"{n} points, fewer than {params.min_inliers}")
    coarse = _submap(submap_poses, submap_points, _COARSE)
    fine = _submap(submap_poses, submap_points, _FINE)
    found: list[tuple[Pose2D, FloatArray, int, float, str]] = []
    for guess in guesses:
        first = register(points, coarse, guess, _FREE, _COARSE)
        if first.status == FALLBACK:
            continue
        match = register(points, fine, first.pose, _FREE, _FINE)
        if match.status == FALLBACK:
            continue
        found.append((match.pose, match.information, match.inliers, match.rms, match.status))
    if not found:
        return ClosureCheck(None, none, 0, 0.0, math.nan, "no start converged")
    found.sort(key=lambda f: -f[2])
    pose, info, inliers, rms, status = found[0]
    ratio = inliers / n
    if inliers < params.min_inliers or ratio < params.min_inlier_ratio:
        return ClosureCheck(None, none, inliers, ratio, rms, f"{inliers} inliers ({100 * ratio:.0f} %), too few")
    if not rms <= params.max_rms:
        return ClosureCheck(None, none, inliers, ratio, rms, f"rms residual {rms:.3f} m")
    weakest = float(np.linalg.eigvalsh(info)[0])
    if status == DEGENERATE or weakest < 1.0 / params.weakest_std**2:
        return ClosureCheck(None, none, inliers, ratio, rms, "the points leave a direction open (a corridor)")
    for other, _, other_inliers, _, _ in found[1:]:
        if other_inliers < inliers - params.distinct_margin * n:
            continue  # clearly worse: the place is told from it
        apart = math.hypot(other[0] - pose[0], other[1] - pose[1])
        if apart > params.agree_distance or abs(wrap_angle(other[2] - pose[2])) > params.agree_turn:
            return ClosureCheck(None, none, inliers, ratio, rms, f"ambiguous: two matches {apart:.2f} m apart")
    if free_space:
        # the keyframe's points against the space each scan of the submap saw empty, and theirs against its own
        conflicts = covered = 0
        for member, pts in zip(submap_poses, submap_points, strict=True):
            seen_from = relative(member, pose)  # the keyframe in the member's laser frame
            c, s = math.cos(seen_from[2]), math.sin(seen_from[2])
            mine = points @ np.array([[c, s], [-s, c]]) + np.array(seen_from[:2])
            theirs = (pts - np.array(seen_from[:2])) @ np.array([[c, -s], [s, c]])
            for a, b in ((mine, pts), (theirs, points)):
                k, n_covered = free_space_conflicts(a, b, params)
                conflicts += k
                covered += n_covered
        share = conflicts / max(covered, 1)
        if share > params.max_conflicts:
            return ClosureCheck(
                None,
                none,
                inliers,
                ratio,
                rms,
                f"seen through: {100 * share:.0f} % of the points where the other scans saw free space",
            )
    floor = np.diag([params.closure_std**2, params.closure_std**2, params.closure_heading_std**2])
    covariance = np.asarray(np.linalg.pinv(info + np.diag([1e-9, 1e-9, 1e-9])), dtype=np.float64) + floor
    return ClosureCheck(pose, covariance, inliers, ratio, rms, "")


def free_space_conflicts(points: FloatArray, scan: FloatArray, params: LoopParams) -> tuple[int, int]:
    """How many of ``points`` lie where ``scan`` saw free space, of those it could have seen.

    Both are ``(k, 2)`` in the frame of the laser that took ``scan`` (its points, m). The scan's bearings are cut in
    bins of :attr:`LoopParams.free_space_bin`; in each, the nearest of its points is where its beams stopped. A point
    of ``points`` in a bin that (with its two neighbours) holds some of the scan's points, nearer than the nearest of
    them by more than
    :attr:`~LoopParams.free_space_margin` plus 3 % of its range, lies in space the scan saw through: two views of one
    place do not disagree so (but for what moved between them), two similar places do (a wall where the other saw a
    doorway).

    Returns:
        (conflicting points, points in bins the scan covers).
    """
    width = params.free_space_bin
    bins = math.ceil(2.0 * math.pi / width)
    nearest = np.full(bins, np.inf)
    if scan.shape[0] == 0 or points.shape[0] == 0:
        return 0, 0
    scan_bin = (np.floor((np.arctan2(scan[:, 1], scan[:, 0]) + math.pi) / width).astype(np.intp)) % bins
    np.minimum.at(nearest, scan_bin, np.hypot(scan[:, 0], scan[:, 1]))
    rng = np.hypot(points[:, 0], points[:, 1])
    point_bin = (np.floor((np.arctan2(points[:, 1], points[:, 0]) + math.pi) / width).astype(np.intp)) % bins
    # a bin and its two neighbours: the scan's beams (thinned) need not fall in every bin
    limit = np.minimum(np.minimum(nearest[point_bin], nearest[(point_bin + 1) % bins]), nearest[point_bin - 1])
    covered = np.isfinite(limit)
    conflict = covered & (rng < limit - params.free_space_margin - 0.03 * rng)
    return int(conflict.sum()), int(covered.sum())


@dataclass(frozen=True)
class _Held:
    """A closure waiting for a second that agrees with it."""

    candidate: int
    keyframe: int
    motion: Pose2D
    covariance: FloatArray


class LoopSearch:
    """The worker's side of the back end: the keyframes, the graph, the closures (see the module docstring).

    Args:
        params: settings.
    """

    def __init__(self, params: LoopParams | None = None) -> None:
        self.params = params or LoopParams()
        self.graph = PoseGraph(self.params.kernel)
        self.keyframes: list[Keyframe] = []
        self._held: list[_Held] = []
        self._edges: list[tuple[int, int, float, float, float]] = []  # (i, j, position var, heading var, travel)
        self._published = np.zeros((0, 3))
        self._unpublished = False
        self.accepted = 0
        self.rejected: dict[str, int] = {}
        self.checked = 0
        self.optimisations = 0

    def _reject(self, why: str) -> None:
        key = why.split(":")[0].split(" (")[0]
        key = "".join(c for c in key if not c.isdigit()).strip()
        self.rejected[key] = self.rejected.get(key, 0) + 1

    def add(self, keyframe: Keyframe) -> GraphCorrection | None:
        """Add a keyframe, look for closures at it, and optimise when one was accepted.

        Returns:
            The optimised keyframe poses when the graph changed by :attr:`LoopParams.publish_distance` or
            :attr:`~LoopParams.publish_turn` at some keyframe since the last correction, else None.

        Raises:
            ValueError: a keyframe out of order.
        """
        if keyframe.index != len(self.keyframes):
            raise ValueError(f"keyframe {keyframe.index} after {len(self.keyframes)} keyframes")
        graph = self.graph
        if keyframe.index == 0:
            graph.add_pose(keyframe.pose)
        else:
            previous = graph.poses[-1]
            graph.add_pose(compose((float(previous[0]), float(previous[1]), float(previous[2])), keyframe.motion))
            cov = self._edge_covariance(keyframe.covariance)
            graph.add_edge(keyframe.index - 1, keyframe.index, keyframe.motion, np.linalg.inv(cov))
            travel = keyframe.travelled - self.keyframes[-1].travelled
            self._edges.append((keyframe.index - 1, keyframe.index, cov[0, 0] + cov[1, 1], cov[2, 2], travel))
        self.keyframes.append(keyframe)
        accepted = self._search(keyframe)
        if not accepted:
            return None
        for first, second, motion, covariance in accepted:
            graph.add_edge(first, second, motion, np.linalg.inv(covariance), robust=True)
            self._edges.append((first, second, covariance[0, 0] + covariance[1, 1], covariance[2, 2], 0.0))
            self.accepted += 1
        graph.optimise(self.params.iterations)
        self.optimisations += 1
        poses = graph.poses
        m = self._published.shape[0]
        change = poses[:m] - self._published
        moved = float(np.hypot(change[:, 0], change[:, 1]).max()) if m else math.inf
        turned = float(np.abs(change[:, 2]).max()) if m else math.inf
        if moved < self.params.publish_distance and turned < self.params.publish_turn:
            self._unpublished = True  # too small to move the map for: the next correction carries it
            return None
        return self.correction()

    def correction(self) -> GraphCorrection:
        """The graph's current poses as a correction (the last one is taken as published)."""
        poses = self.graph.poses
        self._published = poses
        self._unpublished = False
        return GraphCorrection(poses, self.graph.closures)

    @property
    def unpublished(self) -> bool:
        """Whether the graph moved since the last correction by less than was worth publishing."""
        return self._unpublished

    def _edge_covariance(self, covariance: FloatArray) -> FloatArray:
        p = self.params
        floor = np.diag([p.edge_std**2, p.edge_std**2, p.edge_heading_std**2])
        out: FloatArray = 0.5 * (covariance + covariance.T) + floor
        return out

    def _uncertainty(self, source: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Position variance, heading variance and travel of the least uncertain graph paths from ``source`` to
        every keyframe."""
        n = len(self.keyframes)
        if not self._edges:
            zero = np.zeros(n)
            return zero, zero, zero
        edges = np.array(self._edges, dtype=np.float64)
        i, j = edges[:, 0].astype(np.intp), edges[:, 1].astype(np.intp)
        out = []
        for column in (2, 3, 4):
            # a zero weight means "no edge" to csgraph: a tiny one stands for a free hop
            weight = np.maximum(edges[:, column], 1e-12)
            matrix = scipy.sparse.coo_matrix((weight, (i, j)), shape=(n, n)).tocsr()
            out.append(np.asarray(scipy.sparse.csgraph.dijkstra(matrix, directed=False, indices=source)))
        return out[0], out[1], out[2]

    def _search(self, keyframe: Keyframe) -> list[tuple[int, int, Pose2D, FloatArray]]:
        """The closures accepted at ``keyframe`` (with any held one it confirms)."""
        p = self.params
        k = keyframe.index
        self._held = [h for h in self._held if k - h.keyframe <= p.pair_window]
        travelled = np.array([f.travelled for f in self.keyframes])
        old = np.flatnonzero(travelled <= keyframe.travelled - p.min_travel)
        if old.size == 0:
            return []
        poses = self.graph.poses
        here = poses[k]
        distance = np.hypot(poses[old, 0] - here[0], poses[old, 1] - here[1])
        var_t, var_h, travel = self._uncertainty(k)
        lever = np.minimum(travel[old], keyframe.travelled - travelled[old])
        radius = p.sigmas * np.sqrt(var_t[old] + var_h[old] * lever**2)
        # the filter's own uncertainty of the two poses bounds it too: its walls hold the drift the chain's
        # increments alone would let grow
        mine = float(np.trace(keyframe.uncertainty[:2, :2]))
        if math.isfinite(mine):
            theirs = np.array([float(np.trace(self.keyframes[j].uncertainty[:2, :2])) for j in old.tolist()])
            radius = np.minimum(radius, p.sigmas * p.filter_inflation * np.sqrt(mine + theirs))
        radius = np.clip(radius, p.min_radius, p.max_radius)
        inside = distance <= radius
        if not inside.any():
            return []
        order = old[inside][np.argsort(distance[inside], kind="stable")]
        picked: list[int] = []
        for c in order.tolist():
            if all(abs(travelled[c] - travelled[q]) >= p.candidate_spacing for q in picked):
                picked.append(c)
            if len(picked) >= p.candidates:
                break
        region = dict(zip(old[inside].tolist(), radius[inside].tolist(), strict=True))
        pose_k = _pose(here)
        for c in picked:
            self.checked += 1
            pose_c = _pose(poses[c])
            estimate = relative(pose_c, pose_k)
            check = self._check(keyframe, c, estimate, region[c])
            if check.motion is None:
                self._reject(check.reason)
                continue
            # agreement with the estimate within the region's own uncertainty (a 3 σ region: σ = radius / sigmas)
            sigma_t = region[c] / p.sigmas
            lever_c = max(keyframe.travelled - float(travelled[c]), 1.0)
            sigma_h = max(math.sqrt(var_h[c]), sigma_t / lever_c)
            error = relative(estimate, check.motion)
            d2 = (error[0] ** 2 + error[1] ** 2) / sigma_t**2 + (error[2] / sigma_h) ** 2
            if d2 > _CHI2_3_999 and math.hypot(error[0], error[1]) > p.min_radius:
                self._reject("disagrees with the graph")
                continue
            found = (c, k, check.motion, check.covariance)
            if region[c] <= p.local_radius:
                return [found]
            confirmed = self._confirmed(c, k, check.motion, travelled)
            if confirmed is not None:
                self._held = [h for h in self._held if h is not confirmed]
                return [(confirmed.candidate, confirmed.keyframe, confirmed.motion, confirmed.covariance), found]
            self._held.append(_Held(c, k, check.motion, check.covariance))
            return []
        return []

    def _confirmed(self, candidate: int, keyframe: int, motion: Pose2D, travelled: FloatArray) -> _Held | None:
        """A held closure that makes a consistent cycle with this one, or None."""
        p = self.params
        poses = self.graph.poses
        for held in reversed(self._held):
            if held.keyframe == keyframe:
                continue
            # the held keyframe's pose in this candidate's frame, through the held closure: c ← c_h ← k_h
            via_old = relative(_pose(poses[candidate]), _pose(poses[held.candidate]))
            since = relative(_pose(poses[held.keyframe]), _pose(poses[keyframe]))
            predicted = compose(compose(via_old, held.motion), since)
            error = relative(predicted, motion)
            span = abs(float(travelled[keyframe] - travelled[held.keyframe])) + abs(
                float(travelled[candidate] - travelled[held.candidate])
            )
            if math.hypot(error[0], error[1]) <= p.pair_tolerance + p.pair_drift * span and abs(error[2]) <= (
                p.pair_turn
            ):
                return held
        return None

    def _check(self, keyframe: Keyframe, candidate: int, estimate: Pose2D, region: float) -> ClosureCheck:
        p = self.params
        frames = self.keyframes
        poses = self.graph.poses
        centre = frames[candidate].travelled
        members = [
            m
            for m in range(max(0, candidate - 200), min(len(frames), candidate + 200))
            if abs(frames[m].travelled - centre) <= p.submap_travel
            and frames[m].travelled <= keyframe.travelled - p.min_travel
        ]
        origin = _pose(poses[candidate])
        sub_poses = [relative(origin, _pose(poses[m])) for m in members]
        sub_points = [frames[m].points for m in members]
        guesses = [estimate, (0.0, 0.0, estimate[2])]
        if region > p.local_radius:
            # a wide region may hold a similar place beside the right one: starts around the estimate find it, and a
            # match not clearly better than another is no match
            c, s = math.cos(estimate[2]), math.sin(estimate[2])
            for d in p.search_offsets:
                if d <= region:
                    for ux, uy in ((d, 0.0), (-d, 0.0), (0.0, d), (0.0, -d)):
                        guesses.append((estimate[0] + c * ux - s * uy, estimate[1] + s * ux + c * uy, estimate[2]))
        return match_place(keyframe.points, sub_poses, sub_points, guesses, p)


def _pose(row: FloatArray) -> Pose2D:
    return float(row[0]), float(row[1]), float(row[2])
