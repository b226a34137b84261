"""The loop-closing back end's scan-loop side: keyframes out, optimised keyframe poses in, walls and filter moved.

Strategy: the wall filter (:class:`~pluto.navigation.slam.core.WallSlam`) runs scan by scan as before; the back end
(:mod:`pluto.navigation.slam.loops`) looks for loop closures and optimises a pose graph of keyframes, off the scan
loop. This side does what must happen between two scans, at a cost that does not grow with the time spent:

- :meth:`LoopBackEnd.observe`, after each scan's step: the front end's increment covariance propagated since the
  last keyframe (Σ ← F·Σ·Fᵀ + Q), and the scan's pose on the chain from the newest keyframe. With a scan-matching
  front end (``front_end``), the chain follows its motion since the last scan, the measurement that covariance
  describes: the filter's own motion holds the walls' corrections too, a few millimetres and tenths of a degree back
  and forth at each scan as lines are paired (and a jump when it pairs a wall from long ago), which the graph would
  take as motion and add up between closures (on the Radish logs the 5 m relative error is 6 to 10 % larger with
  the filter's motion as the chain). Without a front end the motion given is the dead reckoning's, whose errors the
  walls correct: the chain then follows the filter's motion, or the dead reckoning's over a scan where the two
  disagree beyond a 3-dof gate (the filter jumped: a correction the pose graph must not take as motion). A new
  :class:`~pluto.navigation.slam.loops.Keyframe` is made when that pose has moved
  :attr:`LoopParams.keyframe_distance <pluto.navigation.slam.loops.LoopParams.keyframe_distance>` or turned
  :attr:`~pluto.navigation.slam.loops.LoopParams.keyframe_turn`; every wall the scan paired or added is carried by
  the keyframes nearest its ends that saw it (its position is known relative to their poses), and the scan's pose is
  kept on the chain from its keyframe (the smoothed trajectory).
- :meth:`LoopBackEnd.apply`, when the back end has optimised: each keyframe's correction is the rigid motion from
  where the scan loop last knew it to its optimised pose (keyframes made since the optimisation take the newest
  optimised one's). Each end of a wall moves with the correction of its keyframe and the wall takes the rigid
  motion of the segment between them (a long wall turns with the corridor it lines), in the filter's state
  (:meth:`CompressedWallEKF.shift <pluto.navigation.slam.compressed.CompressedWallEKF.shift>`: the mean only; the
  covariance keeps what the filter knows of the walls relative to each other) and in the walls' ends
  (:meth:`WallSegments.transform_all <pluto.navigation.slam.wall.WallSegments.transform_all>`), in one vectorised
  pass; the filter's pose moves with the newest keyframe's. Walls seen twice across the closed loop now lie on each
  other. The moved walls are checked for their copies :attr:`~pluto.navigation.slam.loops.LoopParams.merge_batch`
  per scan, the nearest to the robot first (:meth:`LoopBackEnd.check_merges`): the filter's own test
  (:meth:`WallSlam.merge_duplicates <pluto.navigation.slam.core.WallSlam.merge_duplicates>`, the moved walls against
  those near them), then any two walls seen from the same side that overlap within
  :attr:`~pluto.navigation.slam.loops.LoopParams.copy_distance` of each other are folded into one: one straight wall
  where two parallel copies were. :meth:`LoopBackEnd.tidy` checks every wall so before a map is saved.

:class:`LoopWorker` runs a :class:`~pluto.navigation.slam.loops.LoopSearch` on a thread of its own (the slam
module): keyframes go in through a queue, the newest correction comes back, and no scan waits for a search or an
optimisation. The offline runner calls the search in line instead (the same results on every run), and reports its
time apart from the scan loop's.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from pluto.geometry import Pose2D, compose, relative, wrap_angle
from pluto.navigation.slam.core import SlamStep, WallSlam
from pluto.navigation.slam.ekf import POSE_SIZE, WALL_SIZE
from pluto.navigation.slam.loops import GraphCorrection, Keyframe, LoopParams, LoopSearch
from pluto.navigation.slam.scanmatch import thin

__all__ = ["LoopBackEnd", "LoopWorker", "rigid_corrections"]

FloatArray = npt.NDArray[np.float64]

_GATE = 16.27
"""χ² (3 dof, 99.9 %) beyond which the filter's motion over a scan is not the front end's: the filter jumped."""

_STEP_FLOOR = np.diag([0.002**2, 0.002**2, math.radians(0.05) ** 2])
"""Added to a scan's increment covariance in that test (a front end sure of a standing robot is not exact)."""

_MOVED = 0.01
"""A wall whose correction moves its ends less than this (m) is not checked for copies again."""


def rigid_corrections(before: FloatArray, after: FloatArray) -> FloatArray:
    """``(n, 3)`` the rigid motions (t_x, t_y, φ) that take the poses ``before`` to ``after`` (both ``(n, 3)``):
    p ↦ R(φ)·p + t carries anything known relative to a pose with it."""
    phi = after[:, 2] - before[:, 2]
    c, s = np.cos(phi), np.sin(phi)
    tx = after[:, 0] - (c * before[:, 0] - s * before[:, 1])
    ty = after[:, 1] - (s * before[:, 0] + c * before[:, 1])
    return np.column_stack((tx, ty, phi))


def _pose(row: npt.ArrayLike) -> Pose2D:
    values = np.asarray(row, dtype=np.float64).ravel()
    return float(values[0]), float(values[1]), float(values[2])


class LoopBackEnd:
    """The scan loop's side of the back end for one map (see the module docstring).

    Args:
        slam: the map and filter to correct.
        params: the back end's settings.
        keep_trajectory: keep every scan's pose relative to its keyframe (:meth:`trajectory`; the offline runner).
        front_end: the poses :meth:`observe` is given are a scan-matching front end's (the chain follows them), not
            the dead reckoning's (the chain follows the filter's, see the module docstring).
    """

    def __init__(
        self,
        slam: WallSlam,
        params: LoopParams | None = None,
        *,
        keep_trajectory: bool = False,
        front_end: bool = True,
    ) -> None:
        self.slam = slam
        self.params = params or LoopParams()
        self.keep_trajectory = keep_trajectory
        self.front_end = front_end
        self._anchors: list[Pose2D] = []  # each keyframe's pose in the filter's frame as it is now
        self._travelled: list[float] = []
        self._end_keys = np.full((16, 2), -1, dtype=np.intp)  # per wall of the filter: the keyframe of each end
        self._scan_keyframe: list[int] = []
        self._scan_relative: list[Pose2D] = []
        self._scans = 0
        self._last_pose: Pose2D | None = None
        self._last_reference: Pose2D | None = None
        self._reference_at_key: Pose2D = (0.0, 0.0, 0.0)
        self._since_key = np.zeros((3, 3))
        self._chain: Pose2D = (0.0, 0.0, 0.0)  # the scan's pose on the chain from the newest keyframe
        self._distance = 0.0
        self._unchecked: list[int] = []
        self.jumps = 0
        self.corrections = 0
        self.merged = 0

    @property
    def keyframes(self) -> int:
        """Keyframes made so far."""
        return len(self._anchors)

    def observe(
        self, step: SlamStep, reference: npt.ArrayLike, increment: npt.ArrayLike, points: npt.ArrayLike
    ) -> Keyframe | None:
        """Take one scan's step; returns a new keyframe for the search when this scan is one.

        Args:
            step: what the filter made of the scan.
            reference: the pose (x, y, θ) in the frame ``increment`` is given in: the front end's refined pose (or
                the dead reckoning's without a front end: ``front_end`` False).
            increment: 3x3 covariance of the motion since the previous scan, in that frame (what the filter's
                predict took).
            points: ``(k, 2)`` the scan's points, laser frame, m (:func:`~pluto.navigation.slam.scanmatch.scan_points`).
        """
        pose = step.pose
        ref = _pose(reference)
        q = np.asarray(increment, dtype=np.float64).reshape(3, 3)
        q = 0.5 * (q + q.T)
        p = self.params
        if self._last_reference is not None and self._last_pose is not None:
            last_ref = self._last_reference
            ux, uy = ref[0] - last_ref[0], ref[1] - last_ref[1]
            f = np.array([[1.0, 0.0, -uy], [0.0, 1.0, ux], [0.0, 0.0, 1.0]])
            self._since_key = f @ self._since_key @ f.T + q
            # the front end's motion since the last scan (what q describes); without one, the filter's unless it
            # jumped (a wall from long ago pulled it): then the dead reckoning's, so the chain stays continuous
            step_filter = relative(self._last_pose, pose)
            step_front = relative(last_ref, ref)
            c, s = math.cos(last_ref[2]), math.sin(last_ref[2])
            turn = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
            e = np.array([step_filter[0] - step_front[0], step_filter[1] - step_front[1]])
            e = np.append(e, wrap_angle(step_filter[2] - step_front[2]))
            jumped = float(e @ np.linalg.solve(turn @ q @ turn.T + _STEP_FLOOR, e)) > _GATE
            self.jumps += jumped
            step_chain = step_front if self.front_end or jumped else step_filter
            self._chain = compose(self._chain, step_chain)
            self._distance += math.hypot(step_chain[0], step_chain[1])
        self._last_reference = ref
        self._last_pose = pose
        new = None
        if not self._anchors:
            new = self._keyframe(step, ref, (0.0, 0.0, 0.0), np.zeros((3, 3)), points)
        else:
            chain = self._chain
            if math.hypot(chain[0], chain[1]) >= p.keyframe_distance or abs(chain[2]) >= p.keyframe_turn:
                c, s = math.cos(self._reference_at_key[2]), math.sin(self._reference_at_key[2])
                turn = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
                new = self._keyframe(step, ref, chain, turn @ self._since_key @ turn.T, points)
        for w in [pair.wall for pair in step.pairs] + list(step.added):
            self._carry(w)
        for kept, _ in step.merged:
            self._carry(kept)
        if self._unchecked:
            self.check_merges(p.merge_batch)
        if self.keep_trajectory:
            self._scan_keyframe.append(len(self._anchors) - 1)
            self._scan_relative.append(self._chain)
        self._scans += 1
        return new

    def _carry(self, wall: int) -> None:
        """Note that the newest keyframe saw ``wall``: it becomes the keyframe of each end it is nearer to than that
        end's keyframe was (a long wall seen along a corridor is carried by the keyframes near its two ends)."""
        key = max(len(self._anchors) - 1, 0)
        while self._end_keys.shape[0] <= wall:
            self._end_keys = np.vstack((self._end_keys, np.full_like(self._end_keys, -1)))
        keys = self._end_keys[wall]
        if keys[0] < 0 or not self._anchors:
            keys[:] = key
            return
        here = self._anchors[key]
        ends = self.slam.segments.segment(wall)
        for e in range(2):
            then = self._anchors[int(keys[e])]
            x, y = float(ends[e, 0]), float(ends[e, 1])
            if math.hypot(here[0] - x, here[1] - y) <= math.hypot(then[0] - x, then[1] - y):
                keys[e] = key

    def _wall_motions(self, motions: FloatArray, walls: int) -> FloatArray:
        """``(walls, 3)`` the rigid motion of every wall for the keyframes' ``motions``: each end moves with the
        correction of its keyframe (:meth:`_carry`), and the wall takes the motion of the segment between them (it
        turns with the corridor it lines, not with the last place it was seen from)."""
        keys = self._end_keys[:walls].copy()
        unknown = keys < 0
        keys[unknown] = len(self._anchors) - 1
        ends = self.slam.segments.segments[:walls].reshape(-1, 2, 2)
        moved = np.empty_like(ends)
        for e in range(2):
            m = motions[keys[:, e]]
            c, s = np.cos(m[:, 2]), np.sin(m[:, 2])
            moved[:, e, 0] = c * ends[:, e, 0] - s * ends[:, e, 1] + m[:, 0]
            moved[:, e, 1] = s * ends[:, e, 0] + c * ends[:, e, 1] + m[:, 1]
        before, after = ends[:, 1] - ends[:, 0], moved[:, 1] - moved[:, 0]
        phi = np.arctan2(after[:, 1], after[:, 0]) - np.arctan2(before[:, 1], before[:, 0])
        phi = wrap_angle(phi)
        # a wall of no length, or carried by one keyframe: that keyframe's motion
        single = (np.hypot(before[:, 0], before[:, 1]) < 1e-6) | (keys[:, 0] == keys[:, 1])
        phi[single] = motions[keys[single, 0], 2]
        c, s = np.cos(phi), np.sin(phi)
        mid, mid_after = ends.mean(axis=1), moved.mean(axis=1)
        out = np.column_stack(
            (mid_after[:, 0] - (c * mid[:, 0] - s * mid[:, 1]), mid_after[:, 1] - (s * mid[:, 0] + c * mid[:, 1]), phi)
        )
        out[single] = motions[keys[single, 0]]
        return out

    def _keyframe(
        self, step: SlamStep, ref: Pose2D, motion: Pose2D, covariance: FloatArray, points: npt.ArrayLike
    ) -> Keyframe:
        index = len(self._anchors)
        self._anchors.append(step.pose)
        self._travelled.append(self._distance)
        self._reference_at_key = ref
        self._since_key = np.zeros((3, 3))
        self._chain = (0.0, 0.0, 0.0)
        pts = thin(np.asarray(points, dtype=np.float64).reshape(-1, 2), self.params.spacing)
        return Keyframe(index, self._scans, step.pose, pts, motion, covariance, self._distance, step.covariance.copy())

    def apply(self, correction: GraphCorrection) -> int:
        """Move the walls and the filter to the optimised keyframe poses; returns the walls that moved (they are
        checked for copies over the next scans, :meth:`check_merges`).

        Raises:
            ValueError: a correction for keyframes this map never made.
        """
        n = correction.poses.shape[0]
        if n == 0:
            return 0
        if n > len(self._anchors):
            raise ValueError(f"a correction of {n} keyframes for a map of {len(self._anchors)}")
        anchors = np.array(self._anchors, dtype=np.float64)
        target = anchors.copy()
        target[:n] = correction.poses
        newest = rigid_corrections(anchors[n - 1 : n], correction.poses[n - 1 : n])[0]
        if len(self._anchors) > n:  # keyframes made since the optimisation go with the newest optimised one
            c, s = math.cos(newest[2]), math.sin(newest[2])
            rest = anchors[n:]
            target[n:, 0] = c * rest[:, 0] - s * rest[:, 1] + newest[0]
            target[n:, 1] = s * rest[:, 0] + c * rest[:, 1] + newest[1]
            target[n:, 2] = rest[:, 2] + newest[2]
        motions = rigid_corrections(anchors, target)
        slam = self.slam
        walls = len(slam.filter)
        delta = np.zeros(POSE_SIZE + WALL_SIZE * walls)
        pose = slam.filter.pose
        c, s = math.cos(newest[2]), math.sin(newest[2])
        delta[:POSE_SIZE] = (
            c * pose[0] - s * pose[1] + newest[0] - pose[0],
            s * pose[0] + c * pose[1] + newest[1] - pose[1],
            newest[2],
        )
        segments = slam.segments
        wall_motions = self._wall_motions(motions, walls)
        before = segments.segments[:walls]
        segments.transform_all(wall_motions)
        # the filter's lines move as the walls' ends do: α + φ, ρ + t·n(α + φ) (the lines the ends were last put
        # on stand for the filter's, which differ from them by the last scan's correction at most)
        alpha = segments.lines[:walls, 0]
        delta[POSE_SIZE::WALL_SIZE] = wall_motions[:, 2]
        delta[POSE_SIZE + 1 :: WALL_SIZE] = wall_motions[:, 0] * np.cos(alpha) + wall_motions[:, 1] * np.sin(alpha)
        shifted = np.abs(segments.segments[:walls] - before).max(axis=1) if walls else np.zeros(0)
        moved = np.flatnonzero((shifted >= _MOVED) & segments.active[:walls]).tolist()
        slam.filter.shift(delta)
        if self._last_pose is not None:  # the next scan's motion is measured from the corrected pose
            x, y, theta = self._last_pose
            self._last_pose = (c * x - s * y + newest[0], s * x + c * y + newest[1], theta + newest[2])
        self._anchors = [_pose(row) for row in target]
        self.corrections += 1
        # the moved walls are checked for their copies a few per scan, the nearest to the robot (where the loop
        # closed) first: checking a whole loop's walls at once costs more than a scan may
        here = slam.filter.pose
        queued = set(self._unchecked) | set(moved)
        ends = segments.rows(np.array(sorted(queued), dtype=np.intp)).reshape(-1, 2, 2) if queued else None
        if ends is not None:
            far = np.hypot(ends.mean(axis=1)[:, 0] - here[0], ends.mean(axis=1)[:, 1] - here[1])
            self._unchecked = [w for _, w in sorted(zip(far.tolist(), sorted(queued), strict=True))]
        return len(moved)

    def check_merges(self, walls: int | None = None) -> int:
        """Merge moved walls with their copies: the next ``walls`` of those a correction moved (all: None); returns
        the walls merged. :meth:`observe` does it for :attr:`LoopParams.merge_batch
        <pluto.navigation.slam.loops.LoopParams.merge_batch>` walls each scan."""
        count = len(self._unchecked) if walls is None else walls
        batch, self._unchecked = self._unchecked[:count], self._unchecked[count:]
        batch = [w for w in batch if self.slam.segments.is_active(w)]
        if not batch:
            return 0
        merged = self.slam.merge_duplicates(batch)
        merged += self._fold_copies(w for w in batch if self.slam.segments.is_active(w))
        for kept, _ in merged:
            self._carry(kept)
        self.merged += len(merged)
        return len(merged)

    def _fold_copies(self, walls: Iterable[int]) -> list[tuple[int, int]]:
        """Fold into one the walls that lie on each other but that the filter's test keeps apart: seen from the
        same side, overlapping along their length, the shorter's ends over the overlap within
        :attr:`LoopParams.copy_distance <pluto.navigation.slam.loops.LoopParams.copy_distance>` of the longer's line
        (the filter's test weighs a short piece's poorly known direction against a long wall's, and a few degrees
        on a wall of tens of metres fail it). The shorter leaves the map, its seen pieces go to the longer; the
        filter is not told (the two lines differ by more than it believes: an update would pull the pose)."""
        segments = self.slam.segments
        limit = self.params.copy_distance
        folded: list[tuple[int, int]] = []
        for w in walls:
            if not segments.is_active(w):
                continue
            (x1, y1), (x2, y2) = segments.segment(w).tolist()
            half = 0.5 * math.hypot(x2 - x1, y2 - y1)
            for v in segments.near(0.5 * (x1 + x2), 0.5 * (y1 + y2), half + limit).tolist():
                if v == w or not (segments.is_active(v) and segments.is_active(w)):
                    continue
                if float(segments.facing([w])[0] @ segments.facing([v])[0]) <= 0.0:
                    continue
                long_, short = (
                    (w, v)
                    if segments.extent(w)[1] - segments.extent(w)[0] >= (segments.extent(v)[1] - segments.extent(v)[0])
                    else (v, w)
                )
                alpha, rho = segments.line(long_)
                normal = np.array([math.cos(alpha), math.sin(alpha)])
                along = np.array([-math.sin(alpha), math.cos(alpha)])
                ends_long, ends_short = segments.segment(long_), segments.segment(short)
                t_long, t_short = ends_long @ along, ends_short @ along
                low, high = max(t_long.min(), t_short.min()), min(t_long.max(), t_short.max())
                if high <= low:
                    continue
                # the shorter wall's points at the overlap's ends, their distance from the longer wall's line
                a, b = ends_short[0], ends_short[1]
                span = float((b - a) @ along)
                if abs(span) < 1e-9:
                    continue
                probe = np.array([a + (b - a) * ((t - float(a @ along)) / span) for t in (low, high)])
                if float(np.abs(probe @ normal - rho).max()) > limit:
                    continue
                segments.absorb(long_, short)
                segments.retire(short)
                folded.append((long_, short))
        return folded

    def tidy(self) -> int:
        """Before a map is saved: every wall checked for copies (the filter's test on every pair, then the folding of
        :meth:`check_merges`), those a correction moved and those mapped since alike; returns the walls merged."""
        self._unchecked = []
        merged = self.slam.merge_duplicates()
        merged += self._fold_copies(np.flatnonzero(self.slam.segments.active).tolist())
        for kept, _ in merged:
            self._carry(kept)
        self.merged += len(merged)
        return len(merged)

    @property
    def unchecked(self) -> int:
        """Walls moved by a correction and not yet checked for copies."""
        return len(self._unchecked)

    def trajectory(self, keyframes: npt.ArrayLike | None = None) -> FloatArray:
        """``(n, 3)`` every scan's pose on the chain from its keyframe (``keep_trajectory`` only), θ continuous.

        Args:
            keyframes: ``(k, 3)`` the keyframes' poses on the chain (the pose graph's, optimised or not: the filter's
                own poses at keyframes made after it jumped are not on the chain); None: their poses in the filter's
                frame as it is now (the optimised ones where a correction was applied).

        Raises:
            ValueError: fewer keyframe poses than keyframes.
        """
        if not self._scan_keyframe:
            return np.zeros((0, 3))
        anchors = self._anchors if keyframes is None else [_pose(row) for row in np.asarray(keyframes)]
        if len(anchors) < len(self._anchors):
            raise ValueError(f"{len(anchors)} keyframe poses for {len(self._anchors)} keyframes")
        rows = [compose(anchors[k], rel) for k, rel in zip(self._scan_keyframe, self._scan_relative, strict=True)]
        out = np.array(rows, dtype=np.float64)
        out[:, 2] = np.unwrap(out[:, 2])
        return out


class LoopWorker:
    """A :class:`~pluto.navigation.slam.loops.LoopSearch` on a thread of its own: :meth:`submit` a keyframe (never
    blocks), :meth:`poll` the newest correction (never blocks).

    Args:
        params: the search's settings.
        on_error: called (on the worker's thread) with an exception that stopped the search; the worker then only
            drops what it is given.
        name: the thread's name.
    """

    def __init__(
        self,
        params: LoopParams | None = None,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        name: str = "slam-loops",
    ) -> None:
        self.search = LoopSearch(params)
        self._queue: queue.SimpleQueue[Keyframe | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._correction: GraphCorrection | None = None
        self._on_error = on_error
        self._failed = False
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, keyframe: Keyframe) -> None:
        """Hand a keyframe to the search (in order)."""
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._queue.put(keyframe)

    def poll(self) -> GraphCorrection | None:
        """The newest correction not taken yet, or None."""
        with self._lock:
            out, self._correction = self._correction, None
        return out

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every submitted keyframe has been searched; returns whether it was before ``timeout`` (s)."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the thread after the keyframe it is on (the rest are dropped)."""
        self._queue.put(None)
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            keyframe = self._queue.get()
            if keyframe is None:
                return
            try:
                if not self._failed:
                    found = self.search.add(keyframe)
                    if found is not None:
                        with self._lock:
                            self._correction = found
            except Exception as err:  # a bug must not kill the module's scan loop: it is reported, the map goes on
                self._failed = True
                if self._on_error is not None:
                    self._on_error(err)
            finally:
                with self._lock:
                    self._pending -= 1
                    if self._pending == 0:
                        self._idle.set()
