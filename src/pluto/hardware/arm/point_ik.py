"""Point inverse kinematics of one link of an arm: joint values within the limits that put the link's origin at a
target, in closed form where the chain allows it and by damped least squares otherwise.

    solver = PointIK(model, "GripperFrame")           # or model.solver("GripperFrame"), kept per link
    result = solver.solve([0.2, 0.05, 0.1], q)        # IKResult: q, success, error (m), iterations
    solver.positions(q_batch)                         # the link's origin for a batch of the solver's joint values

Lengths are in m, angles in rad.
"""

# Strategy: point IK is solved in closed form when the chain to the link is a yaw followed by two or three parallel
# joints bending in a vertical plane, as the LynxArm6's is up to its wrist (pluto.hardware.arm.closed_form: a few
# dozen float operations compiled by numba, one call from solve, the wrist pitch kept from the current posture when it
# reaches; about 2 µs a solve, most of it Python's and numba's calling). For other chains, and for targets the closed
# form cannot take (beyond the arm's reach or its limits, or a sliver of pitch at the workspace's edge), point IK is
# damped least squares (Δq = J^T (J J^T + λ²I)^-1 e) with every iterate clamped to the joint limits, run on a small
# batch of seeds at once so that numpy's per-call cost is paid once for all of them; numpy calls, not arithmetic, are
# what cost, so each iteration is a handful of them. The joints' local transforms are one matrix product of (cos v,
# sin v) with precomputed coefficient matrices; frames carry the rows x, y, z, x, y, 1, so the Jacobian's cross
# products z × (p - o) are slices, not copies. The seeds are the arm's current joint values and up to two
# configurations of a workspace table built once per (model, link) from random joint values within the limits, binned
# in 1.2 cm cells, each stored with its point and its damped least-squares matrix: one step toward the target costs a
# matrix-vector product before the first iteration, and from a few mm away the iterations then converge in one or two
# steps (reference anchors: a C++ solver takes about 0.05 ms; this stays within a few times that). A table seed starts
# inside the limits, so clamping rarely fights the step. If no seed converges, batches of random seeds follow with the
# step size capped; the best solution found is returned (and applied by the caller) with its remaining error. Among
# converged seeds the one nearest the current joint values wins, and when a table seed converges first while the arm's
# own posture is close, that one is followed on, so that a small move never swings the arm to another solution. The
# chain is compiled once per link: fixed transforms between moving joints are folded together, and a revolute joint
# whose axis passes through the target link's origin (the wrist roll for the gripper frame) is dropped, since it
# cannot move that point.

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pluto.hardware.arm.closed_form import YawPlanarIK
from pluto.hardware.arm.links import FloatArray, Link

__all__ = ["CLOSED_FORM_TOLERANCE", "ArmChain", "IKResult", "PointIK"]

CLOSED_FORM_TOLERANCE = 1e-9
"""The smallest tolerance (m) the closed-form solution is used for: it is exact to rounding, and to joint values
held to their limits when they overshoot them by rounding (:data:`~pluto.hardware.arm.closed_form.LIMIT_SLACK`)."""


class ArmChain(Protocol):
    """What point IK needs of an arm: an :class:`~pluto.hardware.arm.kinematics.ArmModel`."""

    name: str
    links: tuple[Link, ...]
    num_outputs: int
    lower: FloatArray
    upper: FloatArray

    def link(self, key: int | str) -> Link:
        """The link with this index or name (KeyError if none)."""
        ...

    def clamp(self, q: ArrayLike) -> FloatArray:
        """Joint values held within the limits, (num_outputs,) (ValueError for another shape)."""
        ...


@dataclass(frozen=True)
class IKResult:
    """The outcome of point inverse kinematics.

    Attributes:
        q: joint values for every output (joints IK did not use keep their starting values), within limits.
        success: the link's origin is within the tolerance of the target.
        error: distance left between the link's origin and the target, m (0 for a closed-form solution, which is
            exact to rounding).
        iterations: least-squares iterations run (over all seeds of a batch, counted once per batch; 0 for a
            closed-form solution).
    """

    q: FloatArray
    success: bool
    error: float
    iterations: int


# Constant pieces of a joint's motion: P · Rz(v) = P·E0 + cos(v)·P·E1 + sin(v)·P·E2, P · Tz(v) = P + v·P·E3.
_E0 = np.diag([0.0, 0.0, 1.0, 1.0])
_E1 = np.diag([1.0, 1.0, 0.0, 0.0])
_E2 = np.array([[0.0, -1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
_E3 = np.zeros((4, 4))
_E3[2, 3] = 1.0
# Rows x, y, z, x, y, 1 of a frame: with x and y repeated, a cross product needs only slices (no copies).
_ROWS = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])
_FLOAT64 = np.dtype(np.float64)  # an array's dtype is this very object when it is native float64
_CLOSED_FORM_FIELDS = {"success": True, "error": 0.0, "iterations": 0}
_new_object = object.__new__
_PHASE = np.array([0.0, math.pi / 2])  # cos(v - phase) = (cos v, sin v)


def _path_to(model: ArmChain, end: Link) -> list[Link]:
    """The links from the base to ``end``, in order (``end`` last)."""
    chain: list[Link] = []
    node = end
    while True:
        chain.append(node)
        if node.parent < 0:
            break
        node = model.links[node.parent]
    chain.reverse()
    return chain


def _moving_steps(model: ArmChain, end: Link) -> tuple[list[tuple[FloatArray, Link]], FloatArray]:
    """The joints that move the origin of ``end``, each with the fixed transform from the previous one's motion to
    its own, and the transform from the last one's motion to ``end`` (the tail).

    Raises:
        ValueError: no joint moves the origin of ``end``.
    """
    # The target link's own revolute factor never moves its origin: only its fixed part counts.
    steps: list[tuple[FloatArray, Link]] = []
    pending = np.eye(4)
    for link in _path_to(model, end):
        if link.movable and (link is not end or link.type == "prismatic"):
            steps.append((pending @ link.fixed, link))
            pending = np.eye(4)
        elif link is end:
            pending = pending @ link.fixed
        else:
            pending = pending @ link.transform(link.lower if link.index < model.num_outputs else 0.0)
    tail = pending
    # Drop trailing revolute joints whose axis passes through the target point: they cannot move it.
    while steps and steps[-1][1].type == "revolute" and np.allclose(tail[:2, 3], 0.0, atol=1e-12):
        fixed, _ = steps.pop()
        tail = fixed @ tail
    if not steps:
        raise ValueError(f"no joint of {model.name} can move the origin of {end.name}")
    return steps, tail


def _motion_coefficients(steps: list[tuple[FloatArray, Link]], prismatic_any: bool) -> tuple[FloatArray, FloatArray]:
    """Each joint's local transform as ``const_i + Σ_j w_ij · coef_ij`` with ``w = (cos v, sin v[, v])``:
    const (m, 1, 16) and coef (m, 2 or 3, 16), the 4 x 4 matrices flattened."""
    m = len(steps)
    const = np.empty((m, 1, 16))
    coef = np.zeros((m, 3 if prismatic_any else 2, 16))
    for i, (fixed, joint) in enumerate(steps):
        if joint.type == "revolute":
            const[i, 0] = (fixed @ _E0).ravel()
            coef[i, 0] = (fixed @ _E1).ravel()
            coef[i, 1] = (fixed @ _E2).ravel()
        else:
            const[i, 0] = fixed.ravel()
            coef[i, 2] = (fixed @ _E3).ravel()
    return const, coef


class PointIK:
    """Point inverse kinematics of one link of a model (see the module's notes for the method).

    Args:
        model: the arm.
        link: index of the link whose origin is placed.
        table_size: random configurations in the workspace table.
        cell: edge of the table's cells, m.
        seed: seed of the random generator of the restarts (results are reproducible).

    Raises:
        ValueError: the link cannot be moved by any joint.
    """

    MAX_ITERATIONS = 30
    """Iterations per batch of random seeds."""
    FIRST_ITERATIONS = 10
    """Iterations of the first batch (the current joint values and the table's seeds, which start close)."""
    RESTARTS = 4
    """Batches of random seeds tried after the first batch, when that does not converge."""
    RESTART_SEEDS = 8
    """Seeds per batch of random restarts."""
    DAMPING = 1e-3
    """λ of the damped least squares, m."""
    MAX_STEP = 0.5
    """Largest change of one joint in one iteration from a random seed, rad (or m)."""
    NEAR = 0.03
    """Distance from the target within which the arm's own posture is followed to a solution, m."""
    TABLE_SEEDS = 2
    """Configurations kept per cell of the workspace table."""

    def __init__(
        self, model: ArmChain, link: int, *, table_size: int = 100_000, cell: float = 0.012, seed: int = 0
    ) -> None:
        self.model = model
        self.link = model.link(link)
        self._rng = np.random.default_rng(seed)
        self._compile()
        self._cell = cell
        self._table_size = table_size
        self._table: dict[tuple[int, int, int], tuple[FloatArray, FloatArray, FloatArray]] | None = None
        self._table_lock = threading.Lock()

    def _compile(self) -> None:
        """The solver's constants: its moving joints, their motion coefficients, the closed form if it has one."""
        model = self.model
        steps, tail = _moving_steps(model, self.link)
        joints = [link for _, link in steps]
        self.joints: NDArray[np.intp] = np.array([j.index for j in joints], dtype=np.intp)
        self._revolute: NDArray[np.bool_] = np.array([j.type == "revolute" for j in joints])
        self._prismatic_any = not bool(self._revolute.all())
        self._offset: FloatArray = np.array([j.q_offset for j in joints])[:, None]  # (m, 1)
        self._lower: FloatArray = np.array([j.lower for j in joints])
        self._upper: FloatArray = np.array([j.upper for j in joints])
        self._const, self._coef = _motion_coefficients(steps, self._prismatic_any)
        self._tail: FloatArray = tail[:, 3].copy()  # the target point in the last moving joint's frame
        self.closed_form: YawPlanarIK | None = None
        if not self._prismatic_any:
            self.closed_form = YawPlanarIK.from_chain(
                [fixed for fixed, _ in steps],
                [j.q_offset for j in joints],
                [j.lower for j in joints],
                [j.upper for j in joints],
                self._tail,
            )
        # The closed form's hot path: every output's limits, and which outputs its joints are, as it takes them.
        self._limits: FloatArray = np.array([model.lower, model.upper], dtype=np.float64)
        self._joints64: NDArray[np.int64] = self.joints.astype(np.int64)
        self._outputs = (model.num_outputs,)
        self._placer: Callable[[float, float, float, FloatArray, NDArray[np.int64], FloatArray], bool] | None = None

    # -- the batched chain --------------------------------------------------------------------------------------

    def _chain(self, q: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Frames of the moving joints and the target point for a batch of joint vectors.

        Args:
            q: (K, m) values of the solver's joints.

        Returns:
            frames (m, K, 6, 4) after each joint's motion, rows x, y, z, x, y, 1; the point (K, 6), same rows, m.
        """
        m, k = self._const.shape[0], q.shape[0]
        value = q.T + self._offset  # (m, K)
        if self._prismatic_any:
            weights = np.empty((m, k, 3))
            weights[..., :2] = np.cos(value[..., None] - _PHASE)
            weights[..., 2] = value
        else:
            weights = np.cos(value[..., None] - _PHASE)
        local = (weights @ self._coef + self._const).reshape(m, k, 4, 4)
        frames = np.empty((m, k, 6, 4))
        np.matmul(_ROWS, local[0], out=frames[0])
        for i in range(1, m):
            np.matmul(frames[i - 1], local[i], out=frames[i])
        return frames, frames[m - 1] @ self._tail

    def positions(self, q: ArrayLike) -> FloatArray:
        """The target link's origin for a batch of values of the solver's joints (K, m), as (K, 3), m."""
        values = np.atleast_2d(np.asarray(q, dtype=np.float64))
        return self._chain(values)[1][:, :3]

    def _iterate(
        self, q: FloatArray, target: FloatArray, tolerance: float, limit_step: bool
    ) -> tuple[FloatArray, FloatArray, int]:
        """Damped least squares on a batch of seeds until one converges; returns (q, squared error, iterations)."""
        lam2 = np.eye(3) * self.DAMPING**2
        lower, upper, tol2 = self._lower, self._upper, tolerance * tolerance
        limit = self.MAX_ITERATIONS if limit_step else self.FIRST_ITERATIONS
        iteration = 0
        while True:
            frames, point = self._chain(q)
            e = target - point[:, :3]  # (K, 3)
            err2 = (e * e).sum(axis=1)
            if err2.min() < tol2 or iteration == limit:
                return q, err2, iteration
            iteration += 1
            z = frames[..., 2]  # (m, K, 6): joint axes
            r = point - frames[..., 3]  # (m, K, 6): from each joint to the point
            jac = z[..., 1:4] * r[..., 2:5] - z[..., 2:5] * r[..., 1:4]  # z × r, (m, K, 3)
            if self._prismatic_any:
                jac = np.where(self._revolute[:, None, None], jac, z[..., :3])
            jt = jac.transpose(1, 0, 2)  # (K, m, 3): J^T
            jjt = jac.transpose(1, 2, 0) @ jt
            jjt += lam2
            step = (jt @ np.linalg.solve(jjt, e[..., None]))[..., 0]  # (K, m)
            if limit_step:
                step *= np.minimum(1.0, self.MAX_STEP / (np.abs(step).max(axis=1, keepdims=True) + 1e-300))
            q = np.minimum(np.maximum(q + step, lower), upper)

    # -- the workspace table ------------------------------------------------------------------------------------

    def _build_table(
        self, cancel: threading.Event | None = None
    ) -> dict[tuple[int, int, int], tuple[FloatArray, FloatArray, FloatArray]] | None:
        """Cells of the workspace -> (joint values (S, m), their points (S, 3), their DLS matrices (S, m, 3));
        None if ``cancel`` was set meanwhile."""

        def cancelled() -> bool:
            return cancel is not None and cancel.is_set()

        rng = np.random.default_rng(12345)
        q = rng.uniform(self._lower, self._upper, size=(self._table_size, len(self.joints)))
        parts = []
        for chunk in np.array_split(q, 50):
            if cancelled():
                return None
            parts.append(self._chain(chunk)[1][:, :3])
        points = np.concatenate(parts)
        keys = np.floor(points / self._cell).astype(np.int64)
        order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
        keys, q, points = keys[order], q[order], points[order]
        starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)])
        ends = np.r_[starts[1:], len(keys)]
        keep = np.concatenate([np.arange(s, min(e, s + self.TABLE_SEEDS)) for s, e in zip(starts, ends, strict=True)])
        gain_parts = []
        for chunk in np.array_split(q[keep], 20):
            if cancelled():
                return None
            gain_parts.append(self._gain(chunk))
        gains = np.concatenate(gain_parts)
        position = np.empty(len(keys), dtype=np.intp)
        position[keep] = np.arange(len(keep))
        table = {}
        for s, e in zip(starts, ends, strict=True):
            rows = position[s : min(e, s + self.TABLE_SEEDS)]
            table[(int(keys[s, 0]), int(keys[s, 1]), int(keys[s, 2]))] = (
                q[keep[rows]],
                points[keep[rows]],
                gains[rows],
            )
        return table

    def _gain(self, q: FloatArray) -> FloatArray:
        """The damped least-squares matrices J^T (J J^T + λ²I)^-1 at a batch of joint values, (K, m, 3)."""
        frames, point = self._chain(q)
        z = frames[..., 2]
        r = point - frames[..., 3]
        jac = z[..., 1:4] * r[..., 2:5] - z[..., 2:5] * r[..., 1:4]
        if self._prismatic_any:
            jac = np.where(self._revolute[:, None, None], jac, z[..., :3])
        jt = jac.transpose(1, 0, 2)
        inverse = np.linalg.inv(jac.transpose(1, 2, 0) @ jt + np.eye(3) * self.DAMPING**2)
        return jt @ inverse

    def _table_seeds(self, target: FloatArray) -> FloatArray | None:
        """Seeds near ``target``: table configurations moved by one precomputed step toward it, (S, m)."""
        if self._table is None:
            self.prepare()
        assert self._table is not None
        cell = self._cell
        key = (math.floor(target[0] / cell), math.floor(target[1] / cell), math.floor(target[2] / cell))
        found = self._table.get(key)
        if found is None:
            near = [
                self._table[k]
                for dx in (-1, 0, 1)
                for dy in (-1, 0, 1)
                for dz in (-1, 0, 1)
                if (k := (key[0] + dx, key[1] + dy, key[2] + dz)) in self._table
            ][:3]
            if not near:
                return None
            found = (
                np.concatenate([n[0] for n in near]),
                np.concatenate([n[1] for n in near]),
                np.concatenate([n[2] for n in near]),
            )
        q, points, gains = found
        step = (gains @ (target - points)[..., None])[..., 0]
        return np.minimum(np.maximum(q + step, self._lower), self._upper)

    def prepare(self, cancel: threading.Event | None = None) -> None:
        """Build the closed form's pitch table and the numerical solver's workspace table now (else the first solve
        that needs one does; each takes a fraction of a second).

        Thread-safe: a solve waits for a build another thread has started.

        Args:
            cancel: when set, a build under way stops soon (and the table stays to be built).
        """
        if self.closed_form is not None:
            self.closed_form.prepare(cancel)
        with self._table_lock:
            if self._table is None:
                self._table = self._build_table(cancel)

    @property
    def table_built(self) -> bool:
        """The numerical solver's workspace table is built (by :meth:`prepare`, or by the first solve needing it)."""
        return self._table is not None

    # -- solving ------------------------------------------------------------------------------------------------

    def solve(self, target: ArrayLike, q_start: ArrayLike, *, tolerance: float = 1e-5) -> IKResult:
        """Joint values that put the link's origin at ``target``; see
        :meth:`~pluto.hardware.arm.kinematics.ArmModel.point_ik`.

        Raises:
            ValueError: a target that is not three finite numbers, or ``q_start`` of the wrong shape.
        """
        closed = self.closed_form
        if closed is not None and tolerance >= CLOSED_FORM_TOLERANCE:
            # The closed form in line: it is the whole cost of most solves, so the cheap checks come first and the
            # rest is one compiled call (YawPlanarIK.placer). Anything it does not take goes on to the numerical
            # solver, which also explains a bad target.
            try:
                if type(target) is np.ndarray and target.shape == (3,) and target.dtype is _FLOAT64:
                    x, y, z = target.tolist()
                else:
                    x, y, z = (float(v) for v in cast("Sequence[float]", target))
            except (TypeError, ValueError):
                return self._solve_numerically(target, q_start, tolerance)
            if type(q_start) is np.ndarray and q_start.shape == self._outputs and q_start.dtype is _FLOAT64:
                q = q_start.copy()
            else:
                q = self.model.clamp(q_start)
            place = self._placer
            if place is None:
                place = self._placer = closed.placer()
            if place(x, y, z, q, self._joints64, self._limits):
                # Built without the frozen dataclass's __init__, whose guarded assignments cost a tenth of the solve.
                result: IKResult = _new_object(IKResult)
                fields = result.__dict__
                fields.update(_CLOSED_FORM_FIELDS)
                fields["q"] = q
                return result
        return self._solve_numerically(target, q_start, tolerance)

    def _solve_numerically(self, target: ArrayLike, q_start: ArrayLike, tolerance: float) -> IKResult:
        """Damped least squares from the arm's posture and the table's seeds, then random restarts (see the
        module).

        Raises:
            ValueError: a target that is not three finite numbers, or ``q_start`` of the wrong shape.
        """
        goal = np.asarray(target, dtype=np.float64)
        if goal.shape != (3,) or not math.isfinite(goal.sum()):
            raise ValueError(f"the target must be three finite numbers (m), got {target!r}")
        start = self.model.clamp(q_start)
        own = start[self.joints]
        seeds = self._table_seeds(goal)
        batch = own[None] if seeds is None else np.concatenate((own[None], seeds))
        best_q, best_error, total = own, math.inf, 0
        tol2 = tolerance * tolerance
        for attempt in range(self.RESTARTS + 1):
            if attempt:
                batch = self._rng.uniform(self._lower, self._upper, size=(self.RESTART_SEEDS, len(self.joints)))
            q, err2, iterations = self._iterate(batch, goal, tolerance, limit_step=attempt > 0)
            total += iterations
            ok = np.flatnonzero(err2 < tol2)
            if len(ok) and attempt == 0 and ok[0] != 0 and err2[0] < self.NEAR**2:
                # A table seed got there first, but the arm's own posture is close: follow it on, so that the arm
                # does not swing to another solution for a small move.
                q_own, err2_own, more = self._iterate(q[:1], goal, tolerance, limit_step=False)
                total += more
                if err2_own[0] < tol2:
                    return self._result(start, q_own[0], True, math.sqrt(err2_own[0]), total)
            if len(ok):
                # Among the solutions, the one nearest the arm's current joint values.
                i = int(ok[0] if len(ok) == 1 else ok[np.argmin(np.abs(q[ok] - own).sum(axis=1))])
                return self._result(start, q[i], True, math.sqrt(err2[i]), total)
            i = int(np.argmin(err2))
            if err2[i] < best_error:
                best_q, best_error = q[i], float(err2[i])
        return self._result(start, best_q, False, math.sqrt(best_error), total)

    def _result(self, start: FloatArray, own: FloatArray, success: bool, error: float, iterations: int) -> IKResult:
        q = start.copy()
        q[self.joints] = own
        return IKResult(q=q, success=success, error=error, iterations=iterations)
