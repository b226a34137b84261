"""The slam module's compressed extended Kalman filter: the cost of a scan depends on the walls near the robot only.

Strategy (Guivant and Nebot, IEEE Trans. Robotics and Automation 17(3), 2001): the state X = [X_A; X_B] is split into
the local area A, the laser's pose and the walls within ``radius`` of the area's centre (by their ends when the
caller says where they are, else by the point where each was first seen), and B, the rest. At the start of an area
the filter saves X_B(0), P_AB(0) and P_BB(0) and sets φ = I, ψ = 0, θ = 0; while the robot stays in the area,
predict, update and new walls touch only X_A, P_AA and the accumulators:

- predict: X_A ← f(X_A, u); P_AA ← J·P_AA·Jᵀ + Q; φ ← J·φ (J differs from I in the pose rows only);
- update (using the prior P_AA and φ): S = H·P_AA·Hᵀ + R; ψ ← ψ + φᵀ·Hᵀ·S⁻¹·H·φ; θ ← θ + φᵀ·Hᵀ·S⁻¹·ν;
  φ ← φ - P_AA·Hᵀ·S⁻¹·H·φ; W = P_AA·Hᵀ·S⁻¹; X_A ← X_A + W·ν; P_AA ← P_AA - W·S·Wᵀ
  (products are taken through H·φ and W, so a scan of m walls costs O(m·N_A²));
- a new wall joins A as in the full filter and appends the rows G_v·φ_v to φ (its correlation with B is
  G_v·P_vB = G_v·φ_v·P_AB(0)); φ becomes N_A(k) x N_A(0), ψ and θ keep the size of the area's start.

The full update gives the rest of the state back exactly: P_AB = φ·P_AB(0); P_BB = P_BB(0) - P_AB(0)ᵀ·ψ·P_AB(0);
X_B = X_B(0) + P_AB(0)ᵀ·θ (O(N_A·N_B² + N_A²·N_B)). It runs when the robot has moved more than ``switch_distance``
from the area's centre (then A is chosen again around it), when a scan sees a wall of B (which then joins A), and on
demand (:meth:`CompressedWallEKF.full_update`). The result equals :class:`~pluto.navigation.slam.ekf.WallEKF` on the
same data up to rounding; the pose, the measurement model, new walls and the odometry are the same functions.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.core import PoseFilterParams, PoseLike
from pluto.navigation.slam.ekf import (
    POSE_SIZE,
    WALL_SIZE,
    Odometry,
    WallObservation,
    anchor_of,
    check_covariance,
    check_increment,
    check_shift,
    kalman_update,
    merge_noise,
    new_wall,
    same_line,
    stack_observations,
)
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

__all__ = ["AreaParams", "CompressedWallEKF", "compressed_update"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


class AreaParams(Params, kw_only=True, forbid_unknown_fields=True):
    """How the local area is chosen.

    Attributes:
        radius: walls anchored within this distance of the area's centre belong to A, m.
        switch_distance: the area is chosen again (after a full update) when the laser is farther than this from
            its centre, m.
    """

    radius: Annotated[float, between(0.0, 1000.0, open_low=True)] = 12.0
    switch_distance: Annotated[float, between(0.0, 1000.0, open_low=True)] = 4.0


def compressed_update(
    x_a: FloatArray,
    p_aa: FloatArray,
    phi: FloatArray,
    psi: FloatArray,
    theta: FloatArray,
    h: FloatArray,
    r: FloatArray,
    nu: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """One correction of the local area and the accumulators.

    Args:
        x_a: ``(N_A,)`` local state.
        p_aa: ``(N_A, N_A)`` its covariance (prior).
        phi: ``(N_A, N_A0)`` φ.
        psi: ``(N_A0, N_A0)`` ψ.
        theta: ``(N_A0,)`` θ.
        h: ``(2m, N_A)`` Jacobian of the observations.
        r: ``(2m, 2m)`` their noise.
        nu: ``(2m,)`` innovations.

    Returns:
        The new x_a, p_aa, φ, ψ, θ and the NIS νᵀ·S⁻¹·ν.
    """
    ph = p_aa @ h.T
    s = h @ ph + r
    h_phi = h @ phi
    s_inv_h_phi = np.linalg.solve(s, h_phi)
    s_inv_nu = np.linalg.solve(s, nu)
    psi_new = psi + h_phi.T @ s_inv_h_phi
    psi_new = 0.5 * (psi_new + psi_new.T)
    theta_new = theta + h_phi.T @ s_inv_nu
    phi_new = phi - ph @ s_inv_h_phi
    x_new, p_new, nis = kalman_update(x_a, p_aa, h, r, nu)
    return x_new, p_new, phi_new, psi_new, theta_new, nis


class CompressedWallEKF:
    """The compressed EKF of the laser's pose and the walls, with the interface of
    :class:`~pluto.navigation.slam.ekf.WallEKF`.

    Args:
        pose: the laser's starting (x, y, θ) in the map frame, m and rad.
        covariance: its 3x3 covariance.
        area: how the local area is chosen.
        params: the pose filter's settings, for the odometry noise of :meth:`predict`.
        locate: the walls within a distance of a point, ``locate(x, y, radius)`` (m), to choose the area by the walls'
            whole extent (:attr:`locate` may also be set later); None: by the point where each wall was first seen.

    Raises:
        ValueError: a pose or covariance of the wrong shape or not finite.
    """

    def __init__(
        self,
        pose: Sequence[float],
        covariance: npt.ArrayLike,
        *,
        area: AreaParams | None = None,
        params: PoseFilterParams | None = None,
        locate: Callable[[float, float, float], Iterable[int]] | None = None,
    ) -> None:
        self.area = area or AreaParams()
        self.locate = locate
        x = np.array(pose, dtype=np.float64)
        if x.shape != (POSE_SIZE,) or not np.all(np.isfinite(x)):
            raise ValueError(f"the pose must be 3 finite values, got {pose!r}")
        p = check_covariance(covariance, (3, 3), "covariance")
        self._odometry = Odometry(params)
        self._anchors: list[FloatArray] = []
        self._walls = 0
        self._full_updates = 0
        # the whole state as of the last full update
        self._x = x
        self._p = p
        self._partition(())

    # -- partition -----------------------------------------------------------------------------------------------

    def _partition(self, extra: Iterable[int]) -> None:
        """Choose A around the laser (plus the walls ``extra``) from the whole state, and reset the accumulators."""
        centre = self._x[:2].copy()
        near = set(extra)
        if self.locate is not None:
            near.update(w for w in self.locate(float(centre[0]), float(centre[1]), self.area.radius) if w < self._walls)
        elif self._anchors:
            anchors = np.array(self._anchors)
            close = np.hypot(anchors[:, 0] - centre[0], anchors[:, 1] - centre[1]) <= self.area.radius
            near.update(np.flatnonzero(close).tolist())
        area_walls = sorted(near)
        cols = [np.arange(POSE_SIZE)] + [POSE_SIZE + WALL_SIZE * w + np.arange(WALL_SIZE) for w in area_walls]
        a: IntArray = np.concatenate(cols).astype(np.intp)
        in_a = np.zeros(self._x.size, dtype=bool)
        in_a[a] = True
        b: IntArray = np.flatnonzero(~in_a).astype(np.intp)
        self._centre = centre
        self._a = a
        self._b = b
        self._slot = {w: POSE_SIZE + WALL_SIZE * k for k, w in enumerate(area_walls)}
        self._b_slot = np.full(self._x.size, -1, dtype=np.intp)
        self._b_slot[b] = np.arange(b.size)
        self._xa = self._x[a].copy()
        self._paa = self._p[np.ix_(a, a)].copy()
        self._xb0 = self._read_only(self._x[b])
        self._pab0 = self._read_only(self._p[np.ix_(a, b)])
        self._pbb0 = self._read_only(self._p[np.ix_(b, b)])
        self._phi = np.eye(a.size)
        self._psi = np.zeros((a.size, a.size))
        self._theta = np.zeros(a.size)
        self._added: list[int] = []
        self._current = True

    @staticmethod
    def _read_only(array: FloatArray) -> FloatArray:
        out = np.array(array, dtype=np.float64)
        out.flags.writeable = False
        return out

    def full_update(self, extra: Iterable[int] = ()) -> None:
        """Recover P_AB, P_BB and X_B from the accumulators, then choose the local area again around the laser
        (with the walls ``extra`` in it) and reset φ, ψ, θ.

        Raises:
            IndexError: a wall of ``extra`` out of range.
        """
        extra = list(extra)
        for w in extra:
            if not 0 <= w < self._walls:
                raise IndexError(f"no wall {w} (the map has {self._walls})")
        if self._current:
            self._partition(extra)
            return
        n = POSE_SIZE + WALL_SIZE * self._walls
        # walls added in this area follow the area's start in X_A and take the last columns of the whole state
        added = [POSE_SIZE + WALL_SIZE * w + np.arange(WALL_SIZE) for w in self._added]
        a: IntArray = np.concatenate([self._a, *added]).astype(np.intp)
        b = self._b
        p_ab = self._phi @ self._pab0
        p_bb = self._pbb0 - self._pab0.T @ self._psi @ self._pab0
        x = np.empty(n)
        p = np.empty((n, n))
        x[a] = self._xa
        x[b] = self._xb0 + self._pab0.T @ self._theta
        p[np.ix_(a, a)] = self._paa
        p[np.ix_(a, b)] = p_ab
        p[np.ix_(b, a)] = p_ab.T
        p[np.ix_(b, b)] = 0.5 * (p_bb + p_bb.T)
        self._x = x
        self._p = p
        self._full_updates += 1
        self._partition(extra)

    # -- state ---------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of walls."""
        return self._walls

    @property
    def pose(self) -> FloatArray:
        """A copy of the laser's (x, y, θ), m and rad."""
        return self._xa[:POSE_SIZE].copy()

    @property
    def pose_covariance(self) -> FloatArray:
        """A copy of the pose's 3x3 covariance."""
        return self._paa[:POSE_SIZE, :POSE_SIZE].copy()

    def wall(self, index: int) -> FloatArray:
        """(α, ρ) of wall ``index``, rad and m (a wall of B corrected from θ, without a full update).

        Raises:
            IndexError: ``index`` out of range.
        """
        if not 0 <= index < self._walls:
            raise IndexError(f"no wall {index} (the map has {self._walls})")
        slot = self._slot.get(index)
        if slot is not None:
            return self._xa[slot : slot + WALL_SIZE].copy()
        cols = self._b_slot[POSE_SIZE + WALL_SIZE * index + np.arange(WALL_SIZE)]
        out: FloatArray = self._xb0[cols] + self._pab0[:, cols].T @ self._theta
        return out

    @property
    def anchors(self) -> FloatArray:
        """``(n, 2)`` the map-frame point where each wall was first seen, m."""
        return np.array(self._anchors).reshape(-1, 2)

    @property
    def area_walls(self) -> tuple[int, ...]:
        """The walls of the local area A."""
        return tuple(self._slot)

    @property
    def area_size(self) -> int:
        """N_A, the entries of the local state (pose and the area's walls)."""
        return int(self._xa.size)

    @property
    def full_updates(self) -> int:
        """Full updates done so far (area switches, B walls seen and those asked for)."""
        return self._full_updates

    def full_state(self) -> tuple[FloatArray, FloatArray]:
        """Copies of the whole state vector and its covariance (a full update first when anything changed)."""
        if not self._current:
            self.full_update()
        return self._x.copy(), self._p.copy()

    def shift(self, delta: npt.ArrayLike) -> None:
        """As :meth:`WallEKF.shift <pluto.navigation.slam.ekf.WallEKF.shift>`: ``delta`` is added to X_A, to X_B(0)
        (so X_B = X_B(0) + P_AB(0)ᵀ·θ moves by it) and to the state of the last full update, in O(N), without a
        full update.

        Raises:
            ValueError: not one finite value per entry of the state.
        """
        d = check_shift(delta, POSE_SIZE + WALL_SIZE * self._walls)
        self._x = self._x + d[: self._x.size]
        added = [POSE_SIZE + WALL_SIZE * w + np.arange(WALL_SIZE) for w in self._added]
        a = np.concatenate([self._a, *added]).astype(np.intp)
        self._xa = self._xa + d[a]
        self._xb0 = self._read_only(self._xb0 + d[self._b])

    def marginal(self, walls: Sequence[int]) -> tuple[FloatArray, FloatArray]:
        """The pose and the given walls, [x, y, θ, α_1, ρ_1, ...], and their joint covariance, exactly, without a
        full update (walls of B cost O(N_A²) each: P_vB = φ_v·P_AB(0), P_BB from ψ).

        Raises:
            IndexError: a wall index out of range.
        """
        local: list[int] = list(range(POSE_SIZE))
        outside: list[int] = []
        order: list[tuple[bool, int]] = [(True, i) for i in range(POSE_SIZE)]
        for w in walls:
            if not 0 <= w < self._walls:
                raise IndexError(f"no wall {w} (the map has {self._walls})")
            slot = self._slot.get(w)
            for k in range(WALL_SIZE):
                if slot is not None:
                    order.append((True, len(local)))
                    local.append(slot + k)
                else:
                    order.append((False, len(outside)))
                    outside.append(int(self._b_slot[POSE_SIZE + WALL_SIZE * w + k]))
        la, ob = np.array(local, dtype=np.intp), np.array(outside, dtype=np.intp)
        p_ab0 = self._pab0[:, ob]
        x = np.concatenate((self._xa[la], self._xb0[ob] + p_ab0.T @ self._theta))
        cross = self._phi[la] @ p_ab0
        p = np.block(
            [
                [self._paa[np.ix_(la, la)], cross],
                [cross.T, self._pbb0[np.ix_(ob, ob)] - p_ab0.T @ self._psi @ p_ab0],
            ]
        )
        perm = np.array([i if inside else la.size + i for inside, i in order], dtype=np.intp)
        return x[perm], p[np.ix_(perm, perm)]

    # -- predict -------------------------------------------------------------------------------------------------

    def predict(self, dr_pose: PoseLike, increment: npt.ArrayLike) -> None:
        """As :meth:`WallEKF.predict <pluto.navigation.slam.ekf.WallEKF.predict>`; switches the area when the laser
        has left it."""
        step = self._odometry.step(self._xa[:POSE_SIZE], dr_pose, increment)
        if step is not None:
            self.move(*step)

    def move(self, delta: npt.ArrayLike, noise: npt.ArrayLike) -> None:
        """Move the pose by a map-frame increment (Δx, Δy, Δθ) with 3x3 noise Q; switches the area when the laser
        has left it.

        Raises:
            ValueError: an increment or noise of the wrong shape or not finite.
        """
        u = check_increment(delta)
        q = check_covariance(noise, (3, 3), "noise")
        f = np.array([[1.0, 0.0, -u[1]], [0.0, 1.0, u[0]], [0.0, 0.0, 1.0]])
        self._mark()
        self._xa[:POSE_SIZE] += u
        v = slice(0, POSE_SIZE)
        self._paa[v, :] = f @ self._paa[v, :]
        self._paa[:, v] = self._paa[:, v] @ f.T
        self._paa[v, v] += q
        self._phi[v, :] = f @ self._phi[v, :]
        if math.hypot(self._xa[0] - self._centre[0], self._xa[1] - self._centre[1]) > self.area.switch_distance:
            self.full_update()

    def _mark(self) -> None:
        self._current = False

    # -- update --------------------------------------------------------------------------------------------------

    def update(self, observations: Sequence[tuple[int, WallObservation]]) -> float:
        """As :meth:`WallEKF.update <pluto.navigation.slam.ekf.WallEKF.update>`, on the local area only (a wall of
        B joins A through a full update first).

        Raises:
            IndexError: a wall index out of range.
        """
        if not observations:
            return 0.0
        for index, _ in observations:
            if not 0 <= index < self._walls:
                raise IndexError(f"no wall {index} (the map has {self._walls})")
        if any(index not in self._slot for index, _ in observations):
            self.full_update(index for index, _ in observations)
        self._mark()
        cols = [self._slot[i] for i, _ in observations]
        walls = [self._xa[c : c + WALL_SIZE] for c in cols]
        h, r, nu = stack_observations(self._xa[:POSE_SIZE], walls, cols, [o for _, o in observations], self._xa.size)
        self._xa, self._paa, self._phi, self._psi, self._theta, nis = compressed_update(
            self._xa, self._paa, self._phi, self._psi, self._theta, h, r, nu
        )
        return nis

    def merge(self, keep: int, drop: int, noise: npt.ArrayLike | None = None) -> float:
        """As :meth:`WallEKF.merge <pluto.navigation.slam.ekf.WallEKF.merge>`, on the local area (walls of B join it
        through a full update first).

        Raises:
            IndexError: a wall index out of range; ValueError: the same wall twice.
        """
        for w in (keep, drop):
            if not 0 <= w < self._walls:
                raise IndexError(f"no wall {w} (the map has {self._walls})")
        if keep == drop:
            raise ValueError("a wall cannot be merged with itself")
        if keep not in self._slot or drop not in self._slot:
            self.full_update((keep, drop))
        self._mark()
        ck, cd = self._slot[keep], self._slot[drop]
        nu, h_k, h_d = same_line(self._xa[ck : ck + WALL_SIZE], self._xa[cd : cd + WALL_SIZE])
        h = np.zeros((WALL_SIZE, self._xa.size))
        h[:, ck : ck + WALL_SIZE] = h_k
        h[:, cd : cd + WALL_SIZE] = h_d
        self._xa, self._paa, self._phi, self._psi, self._theta, nis = compressed_update(
            self._xa, self._paa, self._phi, self._psi, self._theta, h, merge_noise(noise), nu
        )
        return nis

    def add_wall(self, observation: WallObservation) -> int:
        """Add a wall first seen as ``observation`` from the current pose to the local area; returns its index."""
        self._mark()
        pose = self._xa[:POSE_SIZE]
        wall, g_v, g_z = new_wall(pose, observation.gamma, observation.rho)
        cross = g_v @ self._paa[:POSE_SIZE, :]
        own = cross[:, :POSE_SIZE] @ g_v.T + g_z @ observation.covariance @ g_z.T
        n = self._xa.size
        p = np.empty((n + WALL_SIZE, n + WALL_SIZE))
        p[:n, :n] = self._paa
        p[n:, :n] = cross
        p[:n, n:] = cross.T
        p[n:, n:] = 0.5 * (own + own.T)
        self._paa = p
        self._xa = np.concatenate((self._xa, wall))
        self._phi = np.vstack((self._phi, g_v @ self._phi[:POSE_SIZE, :]))
        index = self._walls
        self._walls += 1
        self._slot[index] = n
        self._added.append(index)
        self._anchors.append(anchor_of(pose, observation))
        return index
