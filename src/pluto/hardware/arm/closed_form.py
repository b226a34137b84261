"""Closed-form point inverse kinematics of an arm that turns about one vertical axis and bends in one plane.

    ik = YawPlanarIK.from_chain(fixed, offsets, lower, upper, tail)   # None if the chain has another shape
    q = ik.solve(x, y, z, start)                                      # joint values (list), or None
    ok = ik.place(x, y, z, q, joints, limits)     # in place, on every output's values: the hot path (or ik.placer())

An arm such as the LynxArm6 places a point with a base yaw followed by two or three revolute joints whose axes are
parallel to each other and perpendicular to the yaw axis (shoulder, elbow, wrist pitch): the yaw turns the plane
those joints move in toward the target, and in that plane the shoulder and the elbow are a two-link arm. With three
planar joints the point leaves one degree of freedom, the wrist pitch (the angle of the last link in the plane). It
is kept at the pitch of the starting posture, so that the gripper keeps its attitude while it moves; when that pitch
cannot reach the target, the pitch nearest it that can is taken, a few degrees inside the edge of what reaches (so
that no joint ends at its limit and the arm is not stretched straight).

Derivation. The solver's chain is ``F_0 Rz(v_0) F_1 Rz(v_1) ... F_k Rz(v_k) p`` with ``v_i = q_i + q_offset_i``.
Joints 2..k are planar when ``F_i`` rotates only about z (``F_i = Rz(β_i) T(t_i)``); with ``t_{k+1} = p``, a link
``t_i`` has length ``a_i`` and direction ``γ_i`` in its frame's xy plane, and its z parts add up to a constant
offset ``lat`` off the plane. In joint 1's frame the point is then, with ``e(φ) = (cos φ, sin φ)``,

    P = a_1 e(Φ_1) + a_2 e(Φ_2) [+ a_3 e(Φ_3)],   Φ_1 = v_1 + γ_2,   Φ_2 = Φ_1 - γ_2 + β_2 + v_2 + γ_3, ...

so ``v_1 = Φ_1 - γ_2``, ``v_2 = Φ_2 - Φ_1 + γ_2 - β_2 - γ_3`` and ``v_3 = Φ_3 - Φ_2 + γ_3 - β_3 - γ_4``. Given
the pitch ``Φ_3``, the wrist ``W = P - a_3 e(Φ_3)`` is a two-link problem: ``cos δ = (|W|² - a_1² - a_2²) /
(2 a_1 a_2)`` with ``δ = Φ_2 - Φ_1`` (two signs, the elbow branches), ``Φ_1 = atan2(W) - atan2(a_2 sin δ, a_1 +
a_2 cos δ)``. Joint 1's axis ``Z`` is horizontal in joint 0's frame (the plane holds the yaw axis); with ``h = Z ×
ẑ`` the plane's point lies at ``c Z + ρ h + z ẑ`` before the yaw, ``c = o_1·Z + lat``, ``ρ = o_1·h + P·(X·h, Y·h)``
and ``z = o_1·ẑ + P·(X·ẑ, Y·ẑ)`` (X, Y joint 1's axes). A target at horizontal distance ``r`` needs ``ρ = ±√(r² -
c²)`` (in front of the yaw axis or reaching over it) and ``v_0 = atan2(y, x) - angle(c Z + ρ h)``; ``(ρ, z)`` then
give ``P`` through the orthogonal 2 x 2 matrix of X and Y in (h, ẑ).

Strategy: the arithmetic is compiled by numba (:mod:`pluto.hardware.arm.closed_form_kernels`): in plain Python
the interpreter, not the few dozen float operations, was the cost of a solve. One pass per yaw branch within its
limits, both elbow branches in it; a joint value is the turn of its angle within its limits (the ranges are under a
full turn, so there is at most one), and the candidate nearest the start (sum of absolute joint changes) wins. Which
pitches reach a point of the plane is looked up rather than searched: a pitch table, built once (vectorised, a
fraction of a second), holds for each 4 mm cell of the plane the intervals of pitch (sampled every 2°) that reach
its centre within every limit. The starting pitch is used when it lies well inside an interval; near an interval's
edge it is tried first; otherwise the nearest point :data:`PITCH_MARGIN` inside an interval is. Only when the
table's answer fails there (a cell on the edge of the workspace) are pitches searched, at growing distances on both
sides of the starting pitch and refined by bisection. ``from_chain`` recognises the shape from the transforms and
checks the closed form against the chain's forward kinematics at random joint values; anything else (another shape,
a target out of reach or limits) is left to the numerical solver. numba is imported when the first closed form is
built, so that a process that only drives the arm does not load it.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

__all__ = ["PITCH_MARGIN", "YawPlanarIK"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
PitchIntervals = tuple[tuple[float, float, float, float], ...]
"""Pitches that reach a cell, an interval each: the start and width of the part taken to reach for sure (at least
:data:`PITCH_MARGIN` inside; its middle if it is narrower), then the start and width of the interval widened by
:data:`PITCH_MARGIN` on each side (the edge where a pitch may or may not reach), rad; a width of 2π or more is the
whole turn. The table holds them as rows of an array (see :mod:`pluto.hardware.arm.closed_form_kernels`)."""

PITCH_SAMPLE = math.radians(2.0)
"""Spacing of the pitches the table checks, rad."""
PITCH_MARGIN = math.radians(6.0)
"""How far inside the edge of a table interval a pitch is taken to reach for sure, rad (the sampling, and the
pitch edges' shift across a cell)."""

_TAU = 2.0 * math.pi
_PI = math.pi


def _kernels() -> ModuleType:
    """The compiled kernels (numba is imported, and they are loaded from its cache or compiled, on first use)."""
    from pluto.hardware.arm import closed_form_kernels

    return closed_form_kernels


def _intervals(first: FloatArray, width: FloatArray) -> FloatArray:
    """Table intervals (rows, see PitchIntervals) from the first pitch that reaches and the width of each run, rad."""
    wide = width >= 2.0 * PITCH_MARGIN
    return np.stack(
        [
            np.where(wide, first + PITCH_MARGIN, first + 0.5 * width),
            np.where(wide, width - 2.0 * PITCH_MARGIN, 0.0),
            first - PITCH_MARGIN,
            width + 2.0 * PITCH_MARGIN,
        ],
        axis=1,
    )


def _yaw_then_parallel(
    frames: Sequence[FloatArray], offsets: int, lower: Sequence[float], upper: Sequence[float]
) -> bool:
    """The chain's fixed transforms are a yaw's followed by two or three joints whose axes are parallel to each other
    and perpendicular to the yaw's, each turning under a full turn."""
    k = len(frames)
    if k not in (3, 4) or not (offsets == len(lower) == len(upper) == k):
        return False
    if any(u - lo >= _TAU - 4.0 * _kernels().LIMIT_SLACK for lo, u in zip(lower, upper, strict=True)):
        return False  # a joint that turns a full turn has several valid turns; the numerical solver copes
    rotation0 = frames[0][:3, :3]
    if not np.allclose(rotation0 @ rotation0.T, np.eye(3), atol=1e-9):
        return False
    if abs(frames[1][2, 2]) > 1e-9:
        return False  # the plane does not hold the yaw axis
    # A later joint's axis not parallel to joint 1's.
    return not any(abs(f[2, 2] - 1.0) > 1e-9 or abs(f[0, 2]) > 1e-9 or abs(f[1, 2]) > 1e-9 for f in frames[2:])


def _plane_constants(f1: FloatArray, lateral: float) -> tuple[float, ...]:
    """c, angle of h (η), sign of Z relative to h (σ), o1·h, o1·ẑ, X·h, Y·h, X·ẑ, Y·ẑ from joint 1's fixed transform
    and the planar links' offset off the plane (see the module's derivation)."""
    r1, o1 = f1[:3, :3], f1[:3, 3]
    axis = r1[:, 2]  # joint 1's axis Z in joint 0's frame
    h = np.cross(axis, [0.0, 0.0, 1.0])
    h /= np.linalg.norm(h)
    x_axis, y_axis = r1[:, 0], r1[:, 1]
    # Z = Rz(σ·90°) h: σ = +1 when Z is h turned a quarter counter-clockwise.
    sigma = 1.0 if (h[0] * axis[1] - h[1] * axis[0]) > 0 else -1.0
    offset = float(o1 @ axis + lateral)  # off the yaw axis: 0 for most arms, up to rounding
    return (
        0.0 if abs(offset) < 1e-12 else offset,
        math.atan2(h[1], h[0]),
        sigma,
        float(o1 @ h),
        float(o1[2]),
        float(x_axis @ h),
        float(y_axis @ h),
        float(x_axis[2]),
        float(y_axis[2]),
    )


class YawPlanarIK:
    """Closed-form point IK of a yaw joint followed by two or three parallel revolute joints (see the module).

    Build it with :meth:`from_chain`, which recognises the shape; the constructor takes the derived constants.
    Lengths are in m, angles in rad. Thread-safe: the pitch table is built once, under a lock.
    """

    def __init__(
        self,
        *,
        base: tuple[float, ...],
        plane: tuple[float, ...],
        links: tuple[float, float, float],
        joint_constants: tuple[float, float, float],
        yaw_offset: float,
        lower: Sequence[float],
        upper: Sequence[float],
    ) -> None:
        kernels = _kernels()
        self._a1, self._a2, self._a3 = links
        self._k1, self._k2, self._k3 = joint_constants
        self._lower = tuple(float(v) for v in lower)
        self._upper = tuple(float(v) for v in upper)
        self.num_joints = len(self._lower)
        # The table's cells cover the square of the arm's reach around joint 1, row by row.
        self._reach = links[0] + links[1] + links[2] + kernels.CELL
        self._cells = math.ceil(2.0 * self._reach / kernels.CELL)
        c = np.zeros(kernels.CONSTANTS)
        c[kernels.BASE : kernels.BASE + 12] = base
        c[kernels.PLANE : kernels.PLANE + 9] = plane
        c[kernels.LINKS : kernels.LINKS + 3] = links
        c[kernels.JOINT_CONSTANTS : kernels.JOINT_CONSTANTS + 3] = joint_constants
        c[kernels.PITCH_ZERO] = self._k1 + self._k2 + self._k3  # the sum of joints 1..3 at pitch 0
        # The yaw's lower limit, its range, and the angle of h from the yaw's zero plus the lower limit.
        c[kernels.YAW : kernels.YAW + 3] = (
            self._lower[0],
            self._upper[0] - self._lower[0],
            plane[1] + yaw_offset + self._lower[0],
        )
        c[kernels.REACH], c[kernels.CELLS], c[kernels.NUM_JOINTS] = self._reach, self._cells, self.num_joints
        c[kernels.LOWER : kernels.LOWER + self.num_joints] = self._lower
        c[kernels.UPPER : kernels.UPPER + self.num_joints] = self._upper
        self._constants = c
        self._kernels = kernels
        self._place: Callable[..., bool] = kernels.place
        self._table_starts: IntArray | None = None
        self._table_intervals: FloatArray | None = None
        self._table_lock = threading.Lock()

    # -- recognising the chain ----------------------------------------------------------------------------------

    @classmethod
    def from_chain(
        cls,
        fixed: Sequence[FloatArray],
        offsets: Sequence[float],
        lower: Sequence[float],
        upper: Sequence[float],
        tail: FloatArray,
    ) -> YawPlanarIK | None:
        """The closed form of a chain ``F_0 Rz(q_0 + o_0) ... F_k Rz(q_k + o_k) tail`` of revolute joints, or None
        when the chain is not a yaw joint followed by two or three parallel joints that bend in a plane holding
        the yaw axis.

        Args:
            fixed: each joint's fixed transform from the previous joint's frame (after its motion), (4, 4), m.
            offsets: each joint's q_offset, rad.
            lower, upper: each joint's limits, rad.
            tail: the placed point in the last joint's frame, (4,) or (3,), m.
        """
        frames = [np.asarray(f, dtype=np.float64) for f in fixed]
        if not _yaw_then_parallel(frames, len(offsets), lower, upper):
            return None
        vectors = [f[:3, 3] for f in frames[2:]] + [np.asarray(tail, dtype=np.float64)[:3]]
        lengths = [math.hypot(v[0], v[1]) for v in vectors]
        if lengths[0] < 1e-9 or lengths[1] < 1e-9:
            return None
        directions = [math.atan2(v[1], v[0]) for v in vectors]
        betas = [math.atan2(f[1, 0], f[0, 0]) for f in frames[2:]]
        g2, g3 = directions[0], directions[1]
        a3, k3 = 0.0, 0.0
        if len(frames) == 4:
            a3, k3 = lengths[2], g3 - betas[1] - directions[2] - offsets[3]
        ik = cls(
            base=(*frames[0][:3, :3].T.ravel().tolist(), *frames[0][:3, 3].tolist()),
            plane=_plane_constants(frames[1], float(sum(v[2] for v in vectors))),
            links=(lengths[0], lengths[1], a3),
            joint_constants=(-(g2 + offsets[1]), g2 - betas[0] - g3 - offsets[2], k3),
            yaw_offset=float(offsets[0]),
            lower=lower,
            upper=upper,
        )
        return ik if ik._agrees_with(fixed, offsets, tail) else None

    def _agrees_with(self, fixed: Sequence[FloatArray], offsets: Sequence[float], tail: FloatArray) -> bool:
        """The closed form gives back random joint values from the chain's own forward kinematics (same pitch)."""

        def place(q: FloatArray) -> FloatArray:
            frame = np.eye(4)
            for f, value, offset in zip(fixed, q, offsets, strict=True):
                c, s = math.cos(value + offset), math.sin(value + offset)
                frame = frame @ f @ np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
            out: FloatArray = frame[:3, :3] @ np.asarray(tail, dtype=np.float64)[:3] + frame[:3, 3]
            return out

        rng = np.random.default_rng(0)
        found = np.empty(self.num_joints)
        for q in rng.uniform(self._lower, self._upper, size=(20, self.num_joints)):
            x, y, z = place(q).tolist()
            pitch = self._kernels.start_pitch(self._constants, q)
            if not self._kernels.solve_at_pitch(self._constants, x, y, z, q, pitch, found):
                return False
            if np.linalg.norm(place(found) - (x, y, z)) > 1e-9:
                return False
        return True

    # -- the pitch table ----------------------------------------------------------------------------------------

    def prepare(self, cancel: threading.Event | None = None) -> None:
        """Build the pitch table now (else the first solve does; about a tenth of a second).

        Args:
            cancel: when set, a build under way stops soon (and the table stays to be built).
        """
        with self._table_lock:
            if self._table_starts is None:
                table = self._build_table(cancel)
                if table is not None:
                    self._table_intervals = table[1]
                    self._table_starts = table[0]

    def _build_table(self, cancel: threading.Event | None) -> tuple[IntArray, FloatArray] | None:
        """Each cell's pitch intervals, from the feasibility of every sampled pitch at the cell's centre: where each
        cell's intervals start in the array of intervals (cells + 1), and the intervals (rows, see PitchIntervals)."""
        n, cell_size = self._cells, self._kernels.CELL
        pitches = np.arange(-_PI, _PI, PITCH_SAMPLE)
        samples = len(pitches)
        centres = -self._reach + (np.arange(n) + 0.5) * cell_size
        px, py = (c.ravel() for c in np.meshgrid(centres, centres, indexing="ij"))
        cells = np.flatnonzero(np.hypot(px, py) <= self._reach)  # the rest is out of reach at every pitch
        reach = np.zeros((len(cells), samples), dtype=bool)
        for chunk in np.array_split(np.arange(len(cells)), 8):
            if cancel is not None and cancel.is_set():
                return None
            wx = px[cells[chunk], None] - self._a3 * np.cos(pitches)
            wy = py[cells[chunk], None] - self._a3 * np.sin(pitches)
            reach[chunk] = self._feasible(wx, wy, np.broadcast_to(pitches, wx.shape))
        some = reach.any(axis=1)
        cells, reach = cells[some], reach[some]
        whole = np.flatnonzero(np.all(reach, axis=1))
        # Runs of reaching pitches, each row turned to start at a pitch that does not reach, so no run wraps.
        turn = np.argmin(reach, axis=1)
        index = (np.arange(samples) + turn[:, None]) % samples
        turned = np.take_along_axis(reach, index, axis=1)
        starts = np.nonzero(turned & ~np.roll(turned, 1, axis=1))
        ends = np.nonzero(turned & ~np.roll(turned, -1, axis=1))  # the last sample of each run; same order
        firsts: FloatArray = pitches[0] + ((starts[1] + turn[starts[0]]) % samples) * PITCH_SAMPLE
        widths: FloatArray = (ends[1] - starts[1]).astype(np.float64) * PITCH_SAMPLE
        # A row that reaches at every pitch has no run: one interval of the whole turn.
        rows = np.concatenate((starts[0], whole))
        intervals = np.concatenate(
            (
                _intervals(firsts, widths),
                _intervals(np.full(len(whole), -_PI), np.full(len(whole), 2.0 * _TAU)),
            )
        )
        order = np.argsort(rows, kind="stable")  # a cell's intervals together, in the order of its runs
        counts = np.bincount(cells[rows[order]], minlength=n * n)
        table_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return table_starts, np.ascontiguousarray(intervals[order])

    def _feasible(self, wx: FloatArray, wy: FloatArray, pitch: FloatArray) -> NDArray[np.bool_]:
        """Whether some elbow branch places the wrist at (wx, wy) within every planar joint's limits, for
        arrays of one shape; the work is done only where the previous checks passed."""
        a1, a2 = self._a1, self._a2
        lower, upper = self._lower, self._upper
        found = np.zeros(wx.shape, dtype=bool)
        cos_elbow = (wx * wx + wy * wy - a1 * a1 - a2 * a2) / (2.0 * a1 * a2)
        where = np.flatnonzero(np.abs(cos_elbow) <= 1.0)
        cos_elbow = cos_elbow.ravel()[where]
        elbow = np.arccos(cos_elbow)
        toward = np.arctan2(wy.ravel()[where], wx.ravel()[where])
        pitch = pitch.ravel()[where]
        for delta in (elbow, -elbow):
            ok = np.flatnonzero((delta + self._k2 - lower[2]) % _TAU <= upper[2] - lower[2])
            d = delta[ok]
            phi1 = toward[ok] - np.arctan2(a2 * np.sin(d), a1 + a2 * cos_elbow[ok])
            good = (phi1 + self._k1 - lower[1]) % _TAU <= upper[1] - lower[1]
            if self.num_joints == 4:
                good &= (pitch[ok] - phi1 - d + self._k3 - lower[3]) % _TAU <= upper[3] - lower[3]
            found.ravel()[where[ok[good]]] = True
        return found

    def _table(self) -> tuple[IntArray, FloatArray]:
        """The pitch table, built now if it is not yet."""
        if self._table_starts is None:
            self.prepare()
        assert self._table_starts is not None and self._table_intervals is not None
        return self._table_starts, self._table_intervals

    # -- solving ------------------------------------------------------------------------------------------------

    def pitch(self, start: Sequence[float]) -> float:
        """The pitch (Φ_3, the last link's angle in the plane) of the joint values ``start``, rad."""
        return float(self._kernels.start_pitch(self._constants, self._joint_values(start)))

    def solve(self, x: float, y: float, z: float, start: Sequence[float]) -> list[float] | None:
        """Joint values within the limits that place the point at (x, y, z) (base frame, m), nearest ``start``.

        The pitch of ``start`` is kept if it reaches the target, else the pitch nearest it that does (see the
        module).

        Args:
            x, y, z: the target, m.
            start: the joints' starting values (within their limits), rad.

        Returns:
            The joint values, rad, or None if no solution was found (out of reach or limits).

        Raises:
            ValueError: ``start`` is not one value per joint.
        """
        table_starts, intervals = self._table()
        out = np.empty(self.num_joints)
        begin = self._joint_values(start)
        if not self._kernels.solve(self._constants, table_starts, intervals, float(x), float(y), float(z), begin, out):
            return None
        solution: list[float] = out.tolist()
        return solution

    def place(self, x: float, y: float, z: float, q: FloatArray, joints: IntArray, limits: FloatArray) -> bool:
        """Point IK of the whole arm in one compiled call, the closed form's hot path.

        Args:
            x, y, z: the target (floats), m.
            q: every output's starting value, (outputs,) float64, C order; held to ``limits``, and its ``joints``
                then set to the solution if there is one.
            joints: which outputs the closed form's joints are, (num_joints,) int64.
            limits: every output's lower and upper limit, (2, outputs) float64, C order.

        Returns:
            Whether the closed form solved (a finite target within reach and limits).
        """
        table_starts = self._table_starts
        if table_starts is None:
            table_starts = self._table()[0]
        return self._place(self._constants, table_starts, self._table_intervals, x, y, z, q, joints, limits)

    def placer(self) -> Callable[[float, float, float, FloatArray, IntArray, FloatArray], bool]:
        """:meth:`place` as a function bound to this closed form's constants and pitch table (built now if it is
        not yet): the same call without a Python method in between, for a caller that solves often."""
        table_starts, intervals = self._table()
        return functools.partial(self._place, self._constants, table_starts, intervals)

    def _joint_values(self, start: Sequence[float]) -> FloatArray:
        values = np.array(start, dtype=np.float64)
        if values.shape != (self.num_joints,):
            raise ValueError(f"the closed form needs {self.num_joints} joint values, got shape {values.shape}")
        return values

    def _branches(self, x: float, y: float, z: float, start: Sequence[float]) -> list[tuple[float, float, float]]:
        """The yaws within limits that turn the plane to (x, y, z), each with the target in the plane's
        coordinates: [(q_0, P_x, P_y)]."""
        out = np.empty(6)
        count = self._kernels.branches(self._constants, float(x), float(y), float(z), float(start[0]), out)
        return [(q0, px, py) for q0, px, py in out[: 3 * count].reshape(count, 3).tolist()]

    def _at_pitch(
        self, q0: float, px: float, py: float, pitch: float, start: Sequence[float]
    ) -> tuple[float, list[float]] | None:
        """Of the elbow branches that place the point at (px, py) in the plane with this pitch, the one within
        limits nearest ``start``: (sum of absolute joint changes, joint values), or None."""
        out = np.empty(self.num_joints)
        begin = self._joint_values(start)
        cost = self._kernels.at_pitch(self._constants, float(q0), float(px), float(py), float(pitch), begin, out)
        return None if cost == math.inf else (float(cost), out.tolist())
