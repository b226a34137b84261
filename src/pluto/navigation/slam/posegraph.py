"""A planar pose graph and its optimisation: Gauss-Newton on the sparse normal equations, loop closures under a
robust kernel.

Strategy: the nodes are keyframe poses x_i = (x, y, θ) (m, rad) and each edge (i, j) a measured motion z from x_i to
x_j with its information Ω = Lᵀ·L (L upper triangular, :func:`numpy.linalg.cholesky` of Ω transposed). The error of
an edge is e = h(x_i, x_j) - z (its angle wrapped) with h(x_i, x_j) = x_i⁻¹·x_j = (R_iᵀ·(t_j - t_i), θ_j - θ_i), and
the graph's cost is Σ ρ(|L·e|²) with ρ(s) = s for the chain of motions between consecutive keyframes and Cauchy's
ρ(s) = c²·log(1 + s/c²) for loop closures (:attr:`Edge.robust`), so one wrong closure that got past the checks pulls
the graph by a bounded force instead of folding it.

Jacobians (∂h/∂x_i = A, ∂h/∂x_j = B), with Δt = t_j - t_i:

    A = [[-cos θ_i, -sin θ_i, -sin θ_i·Δx + cos θ_i·Δy],
         [ sin θ_i, -cos θ_i, -cos θ_i·Δx - sin θ_i·Δy],
         [ 0,        0,       -1]]
    B = [[ cos θ_i,  sin θ_i, 0],
         [-sin θ_i,  cos θ_i, 0],
         [ 0,        0,       1]]

Each iteration re-weights the robust edges (iteratively re-weighted least squares: w = 1/(1 + |L·e|²/c²)), builds
the normal equations H·δ = -g from the edges' 3x3 blocks in one vectorised pass (H = Σ Jᵀ·w·J is as sparse as the
graph: a block band along the chain plus one block pair per closure), holds the first pose fixed (the map's frame)
and solves with a sparse direct factorisation (``scipy.sparse.linalg.splu``), with Levenberg's damping raised when a
step does not lower the cost.

Why this and not ``scipy.optimize.least_squares``: its sparse mode solves each trust-region step iteratively (LSMR),
which converges slowly on a long chain of keyframes (the normal matrix of a chain is badly conditioned: its smallest
eigenvalues belong to the chain bending as a whole), and its loss function applies to every residual alike, where
only the closures should be robust. A direct factorisation of the 3n x 3n banded-plus-closures matrix is exact and
takes milliseconds for thousands of keyframes. GTSAM does the same (and more) but is not a dependency of the robot's
software, only of the benchmark; scipy already is.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse  # type: ignore[import-untyped]  # scipy ships no type stubs
import scipy.sparse.linalg  # type: ignore[import-untyped]

from pluto.geometry import wrap_angle

__all__ = ["Edge", "GraphSolution", "PoseGraph", "edge_errors"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Edge:
    """A measured motion between two poses of the graph.

    Attributes:
        first: index of the pose the motion starts from.
        second: index of the pose it ends at.
        motion: (Δx, Δy, Δθ) of the second pose in the first one's frame, m and rad.
        information: 3x3 inverse covariance of the motion.
        robust: a loop closure (Cauchy kernel), else part of the chain (least squares).
    """

    first: int
    second: int
    motion: tuple[float, float, float]
    information: FloatArray
    robust: bool = False


@dataclass(frozen=True)
class GraphSolution:
    """What an optimisation gave.

    Attributes:
        poses: ``(n, 3)`` the optimised poses, m and rad (θ continuous along the chain).
        iterations: Gauss-Newton steps taken.
        cost: the robust cost at the end (½ Σ ρ).
        initial_cost: the same before.
        weights: ``(k,)`` the final IRLS weight of each robust edge, in the order they were added (1 = fully
            believed, near 0 = treated as an outlier).
    """

    poses: FloatArray
    iterations: int
    cost: float
    initial_cost: float
    weights: FloatArray


def edge_errors(
    poses: FloatArray, first: IntArray, second: IntArray, motion: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The errors e = x_i⁻¹·x_j - z of edges, ``(m, 3)``, and their Jacobians A, B, ``(m, 3, 3)``.

    Args:
        poses: ``(n, 3)`` the graph's poses.
        first: ``(m,)`` i of each edge.
        second: ``(m,)`` j of each edge.
        motion: ``(m, 3)`` z of each edge.
    """
    xi, xj = poses[first], poses[second]
    c, s = np.cos(xi[:, 2]), np.sin(xi[:, 2])
    dx, dy = xj[:, 0] - xi[:, 0], xj[:, 1] - xi[:, 1]
    h = np.column_stack((c * dx + s * dy, -s * dx + c * dy, xj[:, 2] - xi[:, 2]))
    e = h - motion
    e[:, 2] = wrap_angle(e[:, 2])
    m = first.size
    a = np.zeros((m, 3, 3))
    a[:, 0, 0], a[:, 0, 1], a[:, 0, 2] = -c, -s, -s * dx + c * dy
    a[:, 1, 0], a[:, 1, 1], a[:, 1, 2] = s, -c, -c * dx - s * dy
    a[:, 2, 2] = -1.0
    b = np.zeros((m, 3, 3))
    b[:, 0, 0], b[:, 0, 1] = c, s
    b[:, 1, 0], b[:, 1, 1] = -s, c
    b[:, 2, 2] = 1.0
    return e, a, b


class PoseGraph:
    """Poses and the motions measured between them (see the module docstring).

    Args:
        kernel: c of the closures' Cauchy kernel, in standard deviations of the closure's own noise.

    Raises:
        ValueError: a kernel that is not > 0.
    """

    def __init__(self, kernel: float = 3.0) -> None:
        if not (math.isfinite(kernel) and kernel > 0):
            raise ValueError(f"the kernel's width must be > 0, got {kernel}")
        self.kernel = float(kernel)
        self._poses = np.zeros((0, 3))
        self._first: list[int] = []
        self._second: list[int] = []
        self._motion: list[tuple[float, float, float]] = []
        self._root: list[FloatArray] = []  # L of each edge (Ω = Lᵀ·L)
        self._robust: list[bool] = []

    def __len__(self) -> int:
        return int(self._poses.shape[0])

    @property
    def poses(self) -> FloatArray:
        """``(n, 3)`` the current poses (a copy)."""
        return self._poses.copy()

    @property
    def edge_count(self) -> int:
        """Edges in the graph."""
        return len(self._first)

    @property
    def closures(self) -> int:
        """Robust edges (loop closures) in the graph."""
        return sum(self._robust)

    def edges(self) -> list[Edge]:
        """Every edge, in the order added."""
        return [
            Edge(i, j, z, root.T @ root, robust)
            for i, j, z, root, robust in zip(
                self._first, self._second, self._motion, self._root, self._robust, strict=True
            )
        ]

    def add_pose(self, pose: npt.ArrayLike) -> int:
        """Add a pose (x, y, θ), its initial value; returns its index.

        Raises:
            ValueError: not 3 finite values.
        """
        x = np.asarray(pose, dtype=np.float64).ravel()
        if x.shape != (3,) or not np.all(np.isfinite(x)):
            raise ValueError(f"a pose is 3 finite values, got {pose!r}")
        self._poses = np.vstack((self._poses, x))
        return len(self) - 1

    def set_poses(self, poses: npt.ArrayLike) -> None:
        """Replace the current values of all the poses (``(n, 3)``, as many as the graph has).

        Raises:
            ValueError: the wrong shape or a value that is not finite.
        """
        x = np.asarray(poses, dtype=np.float64)
        if x.shape != self._poses.shape or not np.all(np.isfinite(x)):
            raise ValueError(f"expected {self._poses.shape} finite values, got shape {x.shape}")
        self._poses = x.copy()

    def add_edge(
        self, first: int, second: int, motion: npt.ArrayLike, information: npt.ArrayLike, *, robust: bool = False
    ) -> None:
        """Add the motion ``motion`` (Δx, Δy, Δθ) from pose ``first`` to pose ``second`` with its 3x3
        ``information``; ``robust`` for a loop closure.

        Raises:
            IndexError: a pose that is not in the graph.
            ValueError: the same pose twice, or a motion or information that is not finite, symmetric and positive
                definite.
        """
        n = len(self)
        for index in (first, second):
            if not 0 <= index < n:
                raise IndexError(f"no pose {index} (the graph has {n})")
        if first == second:
            raise ValueError("an edge joins two different poses")
        z = np.asarray(motion, dtype=np.float64).ravel()
        omega = np.asarray(information, dtype=np.float64)
        if z.shape != (3,) or omega.shape != (3, 3) or not (np.all(np.isfinite(z)) and np.all(np.isfinite(omega))):
            raise ValueError("a motion is 3 finite values and its information a finite 3x3 matrix")
        try:
            root = np.linalg.cholesky(0.5 * (omega + omega.T)).T
        except np.linalg.LinAlgError:
            raise ValueError("an edge's information must be positive definite") from None
        self._first.append(int(first))
        self._second.append(int(second))
        self._motion.append((float(z[0]), float(z[1]), float(z[2])))
        self._root.append(np.asarray(root, dtype=np.float64))
        self._robust.append(bool(robust))

    def _arrays(self) -> tuple[IntArray, IntArray, FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        return (
            np.array(self._first, dtype=np.intp),
            np.array(self._second, dtype=np.intp),
            np.array(self._motion, dtype=np.float64).reshape(-1, 3),
            np.array(self._root, dtype=np.float64).reshape(-1, 3, 3),
            np.array(self._robust, dtype=bool),
        )

    def optimise(self, iterations: int = 20, tolerance: float = 1e-6) -> GraphSolution:
        """Optimise the poses (the first one held fixed) and keep the result as the graph's current values.

        Args:
            iterations: Gauss-Newton steps at most.
            tolerance: stop when the largest change of a pose is below this (m, rad).

        Returns:
            The solution.
        """
        n = len(self)
        first, second, motion, root, robust = self._arrays()
        poses = self._poses.copy()
        c2 = self.kernel**2
        if n < 2 or first.size == 0:
            return GraphSolution(poses, 0, 0.0, 0.0, np.ones(int(robust.sum())))

        def evaluate(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
            e, a, b = edge_errors(x, first, second, motion)
            r = np.einsum("mij,mj->mi", root, e)
            s = np.einsum("mi,mi->m", r, r)
            cost = float(np.where(robust, c2 * np.log1p(s / c2), s).sum()) * 0.5
            return r, a, b, s, cost

        r, a, b, s, cost = evaluate(poses)
        initial = cost
        damping = 1e-6
        steps = 0
        size = 3 * n
        for _ in range(iterations):
            steps += 1
            w = np.where(robust, 1.0 / (1.0 + s / c2), 1.0)
            ja = np.einsum("mij,mjk->mik", root, a)
            jb = np.einsum("mij,mjk->mik", root, b)
            # blocks of H = Σ w·Jᵀ·J and g = Σ w·Jᵀ·r
            haa = np.einsum("m,mji,mjk->mik", w, ja, ja)
            hab = np.einsum("m,mji,mjk->mik", w, ja, jb)
            hbb = np.einsum("m,mji,mjk->mik", w, jb, jb)
            ga = np.einsum("m,mji,mj->mi", w, ja, r)
            gb = np.einsum("m,mji,mj->mi", w, jb, r)
            grid = np.arange(3)
            rows_of = (3 * first[:, None] + grid)[:, :, None]
            cols_of = (3 * second[:, None] + grid)[:, None, :]
            rows_i = np.broadcast_to(rows_of, haa.shape)
            cols_i = np.broadcast_to((3 * first[:, None] + grid)[:, None, :], haa.shape)
            rows_j = np.broadcast_to((3 * second[:, None] + grid)[:, :, None], haa.shape)
            cols_j = np.broadcast_to(cols_of, haa.shape)
            data = np.concatenate([haa.ravel(), hab.ravel(), hab.transpose(0, 2, 1).ravel(), hbb.ravel()])
            rows = np.concatenate([rows_i.ravel(), rows_i.ravel(), rows_j.ravel(), rows_j.ravel()])
            cols = np.concatenate([cols_i.ravel(), cols_j.ravel(), cols_i.ravel(), cols_j.ravel()])
            h = scipy.sparse.coo_matrix((data, (rows, cols)), shape=(size, size)).tocsc()
            g = np.zeros(size)
            np.add.at(g, (3 * first[:, None] + grid).ravel(), ga.ravel())
            np.add.at(g, (3 * second[:, None] + grid).ravel(), gb.ravel())
            free = h[3:, 3:]  # the first pose is the map's frame
            scale = free.diagonal()
            improved = False
            while damping < 1e12:
                system = (free + scipy.sparse.diags(damping * np.maximum(scale, 1e-9))).tocsc()
                try:
                    delta = scipy.sparse.linalg.splu(system).solve(-g[3:])
                except RuntimeError:  # singular: a pose no edge reaches; damp it into place
                    damping *= 10.0
                    continue
                trial = poses.copy()
                trial[1:] += delta.reshape(-1, 3)
                r_t, a_t, b_t, s_t, cost_t = evaluate(trial)
                if cost_t <= cost:
                    poses, r, a, b, s, cost = trial, r_t, a_t, b_t, s_t, cost_t
                    damping = max(damping / 10.0, 1e-9)
                    improved = True
                    break
                damping *= 10.0
            if not improved or float(np.abs(delta).max()) < tolerance:
                break
        self._poses = poses
        weights = (1.0 / (1.0 + s / c2))[robust]
        return GraphSolution(poses.copy(), steps, cost, initial, weights)
