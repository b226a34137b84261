"""Closed-form point inverse kinematics of an arm that turns about one vertical axis and bends in one plane.

    ik = YawPlanarIK.from_chain(fixed, offsets, lower, upper, tail)   # None if the chain has another shape
    q = ik.solve(x, y, z, start)                                      # joint values (list), or None

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

Strategy: a solve is a few dozen float operations in plain ``math`` (numpy's per-call cost would be most of the
time at this size), one pass per yaw branch within its limits, both elbow branches in it; a joint value is the turn
of its angle within its limits (the ranges are under a full turn, so there is at most one), and the candidate
nearest the start (sum of absolute joint changes) wins. Which pitches reach a point of the plane is looked up rather
than searched: a pitch table, built once (vectorised, a fraction of a second), holds for each 4 mm cell of the
plane the intervals of pitch (sampled every 2°) that reach its centre within every limit. The starting pitch is
used when it lies well inside an interval; near an interval's edge it is tried first; otherwise the nearest point
:data:`PITCH_MARGIN` inside an interval is. Only when the table's answer fails there (a cell on the edge of the
workspace) are pitches searched, at growing distances on both sides of the starting pitch and refined by bisection.
``from_chain`` recognises the shape from the transforms and checks the closed form against the chain's forward
kinematics at random joint values; anything else (another shape, a target out of reach or limits) is left to the
numerical solver.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["PITCH_MARGIN", "YawPlanarIK"]

FloatArray = NDArray[np.float64]
PitchIntervals = tuple[tuple[float, float, float, float], ...]
"""Pitches that reach a cell, an interval each: the start and width of the part taken to reach for sure (at least
:data:`PITCH_MARGIN` inside; its middle if it is narrower), then the start and width of the interval widened by
:data:`PITCH_MARGIN` on each side (the edge where a pitch may or may not reach), rad; a width of 2π or more is the
whole turn."""

CELL = 0.004
"""Edge of the pitch table's cells in the plane, m."""
PITCH_SAMPLE = math.radians(2.0)
"""Spacing of the pitches the table checks, rad."""
PITCH_MARGIN = math.radians(6.0)
"""How far inside the edge of a table interval a pitch is taken to reach for sure, rad (the sampling, and the
pitch edges' shift across a cell)."""
SEARCH_STEP = math.radians(10.0)
"""Spacing of the pitches searched when the table's choice fails, rad."""
SEARCH_BISECTIONS = 7
"""Halvings of the last search step toward the starting pitch (10° / 2⁷ ≈ 0.08°)."""
LIMIT_SLACK = 1e-9
"""A joint value this far outside its limits (rad) is rounding and is held to the limit."""
REACH_SLACK = 1e-12
"""A cosine of the elbow this far beyond ±1 is rounding (a fully stretched or folded arm)."""

_TAU = 2.0 * math.pi
_PI = math.pi


def _interval(first: float, width: float) -> tuple[float, float, float, float]:
    """A table interval from the first pitch that reaches and the width of the run, rad (see PitchIntervals)."""
    if width >= 2.0 * PITCH_MARGIN:
        safe_first, safe_width = first + PITCH_MARGIN, width - 2.0 * PITCH_MARGIN
    else:
        safe_first, safe_width = first + 0.5 * width, 0.0
    return (safe_first, safe_width, first - PITCH_MARGIN, width + 2.0 * PITCH_MARGIN)


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
        # base: joint 0's frame in the base frame (rotation rows, then origin), to bring targets into it.
        self._base = base
        # plane: c, angle of h (η), sign of Z relative to h (σ), o1·h, o1·ẑ, X·h, Y·h, X·ẑ, Y·ẑ.
        self._plane = plane
        self._a1, self._a2, self._a3 = links
        self._k1, self._k2, self._k3 = joint_constants
        self._pitch_zero = self._k1 + self._k2 + self._k3  # the sum of joints 1..3 at pitch 0
        self._lower = tuple(float(v) for v in lower)
        self._upper = tuple(float(v) for v in upper)
        # The yaw's lower limit, its range, and the angle of h from the yaw's zero plus the lower limit.
        self._yaw = (self._lower[0], self._upper[0] - self._lower[0], plane[1] + yaw_offset + self._lower[0])
        self.num_joints = len(self._lower)
        # The table's cells cover the square of the arm's reach around joint 1, row by row.
        self._reach = links[0] + links[1] + links[2] + CELL
        self._cells = math.ceil(2.0 * self._reach / CELL)
        self._table: list[PitchIntervals] | None = None
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
        k = len(fixed)
        if k not in (3, 4) or not (len(offsets) == len(lower) == len(upper) == k):
            return None
        if any(u - lo >= _TAU - 4.0 * LIMIT_SLACK for lo, u in zip(lower, upper, strict=True)):
            return None  # a joint that turns a full turn has several valid turns; the numerical solver copes
        f0, f1 = np.asarray(fixed[0], dtype=np.float64), np.asarray(fixed[1], dtype=np.float64)
        rotation0, origin0 = f0[:3, :3], f0[:3, 3]
        if not np.allclose(rotation0 @ rotation0.T, np.eye(3), atol=1e-9):
            return None
        r1, o1 = f1[:3, :3], f1[:3, 3]
        axis = r1[:, 2]  # joint 1's axis Z in joint 0's frame
        if abs(axis[2]) > 1e-9:
            return None  # the plane does not hold the yaw axis
        planar = [np.asarray(f, dtype=np.float64) for f in fixed[2:]]
        if any(abs(f[2, 2] - 1.0) > 1e-9 or abs(f[0, 2]) > 1e-9 or abs(f[1, 2]) > 1e-9 for f in planar):
            return None  # a later joint's axis is not parallel to joint 1's
        point = np.asarray(tail, dtype=np.float64)[:3]
        vectors = [f[:3, 3] for f in planar] + [point]
        lengths = [math.hypot(v[0], v[1]) for v in vectors]
        if lengths[0] < 1e-9 or lengths[1] < 1e-9:
            return None
        directions = [math.atan2(v[1], v[0]) for v in vectors]
        betas = [math.atan2(f[1, 0], f[0, 0]) for f in planar]
        lateral = float(sum(v[2] for v in vectors))
        h = np.cross(axis, [0.0, 0.0, 1.0])
        h /= np.linalg.norm(h)
        x_axis, y_axis = r1[:, 0], r1[:, 1]
        # Z = Rz(σ·90°) h: σ = +1 when Z is h turned a quarter counter-clockwise.
        sigma = 1.0 if (h[0] * axis[1] - h[1] * axis[0]) > 0 else -1.0
        offset = float(o1 @ axis + lateral)  # off the yaw axis: 0 for most arms, up to rounding
        plane = (
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
        g2, g3 = directions[0], directions[1]
        k1 = -(g2 + offsets[1])
        k2 = g2 - betas[0] - g3 - offsets[2]
        if k == 4:
            a3 = lengths[2]
            k3 = g3 - betas[1] - directions[2] - offsets[3]
        else:
            a3, k3 = 0.0, 0.0
        ik = cls(
            base=(*rotation0.T.ravel().tolist(), *origin0.tolist()),
            plane=plane,
            links=(lengths[0], lengths[1], a3),
            joint_constants=(k1, k2, k3),
            yaw_offset=float(offsets[0]),
            lower=lower,
            upper=upper,
        )
        return ik if ik._agrees_with(fixed, offsets, tail) else None

    def _agrees_with(self, fixed: Sequence[FloatArray], offsets: Sequence[float], tail: FloatArray) -> bool:
        """The closed form gives back random joint values from the chain's own forward kinematics (same pitch)."""

        def place(q: Sequence[float]) -> FloatArray:
            frame = np.eye(4)
            for f, value, offset in zip(fixed, q, offsets, strict=True):
                c, s = math.cos(value + offset), math.sin(value + offset)
                frame = frame @ f @ np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
            out: FloatArray = frame[:3, :3] @ np.asarray(tail, dtype=np.float64)[:3] + frame[:3, 3]
            return out

        rng = np.random.default_rng(0)
        for q in rng.uniform(self._lower, self._upper, size=(20, self.num_joints)):
            target = place(q)
            x, y, z = target.tolist()
            found = self._solve_at(x, y, z, q.tolist(), self.pitch(q.tolist()))
            if found is None or np.linalg.norm(place(found) - target) > 1e-9:
                return False
        return True

    # -- the pitch table ----------------------------------------------------------------------------------------

    def prepare(self, cancel: threading.Event | None = None) -> None:
        """Build the pitch table now (else the first solve does; about a tenth of a second).

        Args:
            cancel: when set, a build under way stops soon (and the table stays to be built).
        """
        with self._table_lock:
            if self._table is None:
                self._table = self._build_table(cancel)

    def _build_table(self, cancel: threading.Event | None) -> list[PitchIntervals] | None:
        """Each cell's pitch intervals, from the feasibility of every sampled pitch at the cell's centre."""
        n = self._cells
        pitches = np.arange(-_PI, _PI, PITCH_SAMPLE)
        samples = len(pitches)
        centres = -self._reach + (np.arange(n) + 0.5) * CELL
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
        whole: list[bool] = np.all(reach, axis=1).tolist()
        # Runs of reaching pitches, each row turned to start at a pitch that does not reach, so no run wraps.
        turn = np.argmin(reach, axis=1)
        index = (np.arange(samples) + turn[:, None]) % samples
        turned = np.take_along_axis(reach, index, axis=1)
        starts = np.nonzero(turned & ~np.roll(turned, 1, axis=1))
        ends = np.nonzero(turned & ~np.roll(turned, -1, axis=1))  # the last sample of each run; same order
        firsts = pitches[0] + ((starts[1] + turn[starts[0]]) % samples) * PITCH_SAMPLE
        widths = (ends[1] - starts[1]) * PITCH_SAMPLE
        empty: PitchIntervals = ()
        table: list[PitchIntervals] = [empty] * (n * n)
        runs: dict[int, list[tuple[float, float, float, float]]] = {}
        for row, first, width in zip(starts[0].tolist(), firsts.tolist(), widths.tolist(), strict=True):
            runs.setdefault(row, []).append(_interval(first, width))
        for row, (cell, everywhere) in enumerate(zip(cells.tolist(), whole, strict=True)):
            table[cell] = (_interval(-_PI, 2.0 * _TAU),) if everywhere else tuple(runs[row])
        return table

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

    # -- solving ------------------------------------------------------------------------------------------------

    def pitch(self, start: Sequence[float]) -> float:
        """The pitch (Φ_3, the last link's angle in the plane) of the joint values ``start``, rad."""
        if self.num_joints == 3:
            return 0.0
        return start[1] + start[2] + start[3] - self._pitch_zero

    def _branches(self, x: float, y: float, z: float, start: Sequence[float]) -> list[tuple[float, float, float]]:
        """The yaws within limits that turn the plane to (x, y, z), each with the target in the plane's
        coordinates: [(q_0, P_x, P_y)]."""
        r00, r01, r02, r10, r11, r12, r20, r21, r22, ox, oy, oz = self._base
        dx, dy, dz = x - ox, y - oy, z - oz
        px = r00 * dx + r01 * dy + r02 * dz
        py = r10 * dx + r11 * dy + r12 * dz
        c, _, sigma, o1h, o1z, xh, yh, xz, yz = self._plane
        rho2 = px * px + py * py - c * c
        if rho2 < 0.0:
            return []
        w = r20 * dx + r21 * dy + r22 * dz - o1z
        if rho2 == 0.0 and c == 0.0:
            # On the yaw axis: every yaw reaches it, and the one the arm has moves least.
            return [(start[0], -xh * o1h + xz * w, -yh * o1h + yz * w)]
        lower, span, turn = self._yaw
        heading = math.atan2(py, px) - turn
        rho = math.sqrt(rho2)
        out = []
        for r in (rho, -rho) if rho > 0.0 else (0.0,):
            # The plane's point c Z + ρ h lies at atan2(σ c, ρ) from h: 0 or π with no offset off the plane.
            q0 = heading - (math.atan2(sigma * c, r) if c else 0.0 if r >= 0.0 else _PI)
            q0 = (q0 + LIMIT_SLACK) % _TAU - LIMIT_SLACK
            if q0 <= span + LIMIT_SLACK:
                u = r - o1h
                q0 = lower if q0 < 0.0 else lower + span if q0 > span else lower + q0
                out.append((q0, xh * u + xz * w, yh * u + yz * w))
        return out

    def solve(self, x: float, y: float, z: float, start: Sequence[float]) -> list[float] | None:
        """Joint values within the limits that place the point at (x, y, z) (base frame, m), nearest ``start``.

        The pitch of ``start`` is kept if it reaches the target, else the pitch nearest it that does (see the
        module).

        Args:
            x, y, z: the target, m.
            start: the joints' starting values (within their limits), rad.

        Returns:
            The joint values, rad, or None if no solution was found (out of reach or limits).
        """
        table = self._table
        if table is None:
            self.prepare()
            table = self._table
            assert table is not None
        # _branches, the pitch and the table lookup in line: this is the whole cost of most solves.
        r00, r01, r02, r10, r11, r12, r20, r21, r22, ox, oy, oz = self._base
        dx, dy, dz = x - ox, y - oy, z - oz
        px = r00 * dx + r01 * dy + r02 * dz
        py = r10 * dx + r11 * dy + r12 * dz
        c, _, sigma, o1h, o1z, xh, yh, xz, yz = self._plane
        rho2 = px * px + py * py - c * c
        if rho2 <= 0.0:
            return self._solve_at(x, y, z, start, None)  # on or too near the yaw axis
        w = r20 * dx + r21 * dy + r22 * dz - o1z
        wanted = start[1] + start[2] + start[3] - self._pitch_zero if self.num_joints == 4 else 0.0
        if wanted != wanted:
            return None  # a starting value that is not a number (one in the yaw or the shoulder fails the cost)
        lower, span, turn = self._yaw
        heading = math.atan2(py, px) - turn
        rho = math.sqrt(rho2)
        n, reach = self._cells, self._reach
        best: list[float] | None = None
        best_cost = math.inf
        for r in (rho, -rho):
            q0 = heading - (math.atan2(sigma * c, r) if c else 0.0 if r > 0.0 else _PI)
            q0 = (q0 + LIMIT_SLACK) % _TAU - LIMIT_SLACK
            if q0 > span + LIMIT_SLACK:
                continue
            q0 = lower if q0 < 0.0 else lower + span if q0 > span else lower + q0
            u = r - o1h
            px, py = xh * u + xz * w, yh * u + yz * w
            i, j = int((px + reach) / CELL), int((py + reach) / CELL)
            intervals = table[i * n + j] if 0 <= i < n and 0 <= j < n else ()
            # The starting pitch if it is well inside an interval, else the nearest pitch well inside one; near an
            # interval's edge (or with no interval) the careful way, _pitched.
            pitch, distance, near_edge = wanted, math.inf, False
            for safe_first, safe_width, edge_first, edge_width in intervals:
                into = (wanted - safe_first) % _TAU
                if into <= safe_width:
                    pitch, distance = wanted, 0.0
                    break
                if (wanted - edge_first) % _TAU <= edge_width:
                    near_edge = True
                if into - safe_width < distance:
                    pitch, distance = wanted - into + safe_width, into - safe_width
                if _TAU - into < distance:
                    pitch, distance = wanted + _TAU - into, _TAU - into
            found = None
            if distance == 0.0 or not (near_edge or distance == math.inf):
                found = self._at_pitch(q0, px, py, pitch, start)
            if found is None:
                found = self._pitched(q0, px, py, wanted, start, intervals)
            if found is not None and found[0] < best_cost:
                best_cost, best = found
        return best

    def _solve_at(
        self, x: float, y: float, z: float, start: Sequence[float], pitch: float | None
    ) -> list[float] | None:
        """The solution nearest ``start`` at this pitch (None: the pitch the table picks), yaw branch by branch."""
        best: list[float] | None = None
        best_cost = math.inf
        for q0, px, py in self._branches(x, y, z, start):
            if pitch is not None:
                found = self._at_pitch(q0, px, py, pitch, start)
            else:
                found = self._pitched(q0, px, py, self.pitch(start), start, self._intervals(px, py))
            if found is not None and found[0] < best_cost:
                best_cost, best = found
        return best

    def _intervals(self, px: float, py: float) -> PitchIntervals:
        """The table's pitch intervals at (px, py) in the plane, m (the table is built)."""
        assert self._table is not None
        n, reach = self._cells, self._reach
        i, j = int((px + reach) / CELL), int((py + reach) / CELL)
        return self._table[i * n + j] if 0 <= i < n and 0 <= j < n else ()

    def _pitched(
        self, q0: float, px: float, py: float, wanted: float, start: Sequence[float], intervals: PitchIntervals
    ) -> tuple[float, list[float]] | None:
        """The solution of one yaw branch at the pitch the table's ``intervals`` pick, or by search; (cost,
        joints) or None."""
        if self.num_joints == 3:
            return self._at_pitch(q0, px, py, 0.0, start)
        nearest, distance, near_edge = wanted, math.inf, False
        for safe_first, safe_width, edge_first, edge_width in intervals:
            into = (wanted - safe_first) % _TAU
            if into <= safe_width:
                found = self._at_pitch(q0, px, py, wanted, start)
                return found if found is not None else self._search(q0, px, py, wanted, start)
            if (wanted - edge_first) % _TAU <= edge_width:
                near_edge = True
            down, up = into - safe_width, _TAU - into  # to the safe part's end below, its start above
            if down < distance:
                nearest, distance = wanted - down, down
            if up < distance:
                nearest, distance = wanted + up, up
        if near_edge:
            found = self._at_pitch(q0, px, py, wanted, start)
            if found is not None:
                return found
        if distance < math.inf:
            found = self._at_pitch(q0, px, py, nearest, start)
            if found is not None:
                return found
        return self._search(q0, px, py, wanted, start)

    def _search(
        self, q0: float, px: float, py: float, wanted: float, start: Sequence[float]
    ) -> tuple[float, list[float]] | None:
        """The solution at the pitch nearest ``wanted`` that reaches, on a grid refined by bisection."""
        steps = math.ceil(_PI / SEARCH_STEP)
        for n in range(steps + 1):
            for side in (1.0, -1.0) if n else (0.0,):
                offset = side * min(n * SEARCH_STEP, _PI)
                found = self._at_pitch(q0, px, py, wanted + offset, start)
                if found is None:
                    continue
                if n == 0:
                    return found
                bad, good = side * (n - 1) * SEARCH_STEP, offset
                for _ in range(SEARCH_BISECTIONS):
                    middle = 0.5 * (bad + good)
                    nearer = self._at_pitch(q0, px, py, wanted + middle, start)
                    if nearer is None:
                        bad = middle
                    else:
                        good, found = middle, nearer
                return found
        return None

    def _at_pitch(
        self, q0: float, px: float, py: float, pitch: float, start: Sequence[float]
    ) -> tuple[float, list[float]] | None:
        """Of the elbow branches that place the point at (px, py) in the plane with this pitch, the one within
        limits nearest ``start``: (sum of absolute joint changes, joint values), or None."""
        a1, a2, a3 = self._a1, self._a2, self._a3
        wx, wy = px - a3 * math.cos(pitch), py - a3 * math.sin(pitch)
        cos_elbow = (wx * wx + wy * wy - a1 * a1 - a2 * a2) / (2.0 * a1 * a2)
        if cos_elbow > 1.0:
            if cos_elbow > 1.0 + REACH_SLACK:
                return None
            cos_elbow = 1.0
        elif cos_elbow < -1.0:
            if cos_elbow < -1.0 - REACH_SLACK:
                return None
            cos_elbow = -1.0
        elbow = math.acos(cos_elbow)
        sin_elbow = math.sqrt(1.0 - cos_elbow * cos_elbow)
        toward = math.atan2(wy, wx)
        lower, upper = self._lower, self._upper
        s1, s2 = start[1], start[2]
        best: tuple[float, list[float]] | None = None
        for delta, sin_delta in ((elbow, sin_elbow), (-elbow, -sin_elbow)) if elbow > 0.0 else ((0.0, 0.0),):
            # Each joint's turn within its limits: the angle from the lower limit, modulo a turn.
            q2 = (delta + self._k2 - lower[2] + LIMIT_SLACK) % _TAU - LIMIT_SLACK
            span = upper[2] - lower[2]
            if q2 > span + LIMIT_SLACK:
                continue
            q2 = lower[2] if q2 < 0.0 else upper[2] if q2 > span else lower[2] + q2
            phi1 = toward - math.atan2(a2 * sin_delta, a1 + a2 * cos_elbow)
            q1 = (phi1 + self._k1 - lower[1] + LIMIT_SLACK) % _TAU - LIMIT_SLACK
            span = upper[1] - lower[1]
            if q1 > span + LIMIT_SLACK:
                continue
            q1 = lower[1] if q1 < 0.0 else upper[1] if q1 > span else lower[1] + q1
            cost = abs(q0 - start[0]) + abs(q1 - s1) + abs(q2 - s2)
            if self.num_joints == 4:
                q3 = (pitch - phi1 - delta + self._k3 - lower[3] + LIMIT_SLACK) % _TAU - LIMIT_SLACK
                span = upper[3] - lower[3]
                if q3 > span + LIMIT_SLACK:
                    continue
                q3 = lower[3] if q3 < 0.0 else upper[3] if q3 > span else lower[3] + q3
                cost += abs(q3 - start[3])
                if best is None or cost < best[0]:
                    best = (cost, [q0, q1, q2, q3])
            elif best is None or cost < best[0]:
                best = (cost, [q0, q1, q2])
        return best
