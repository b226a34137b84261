"""The slam module's full extended Kalman filter over the laser's pose and the walls it has seen.

Strategy (docs/design.md, "pose and slam"; the wall model of Arras and Siegwart, SPIE 1997): the state is
X = [x, y, θ, α_1, ρ_1, ..., α_n, ρ_n], the laser's planar pose in the map frame (as the pose module's filter, since
that is what the scans measure and what ``Localization/Laser_Dead-Reckoning`` gives) followed by every wall's line
p·(cos α, sin α) = ρ. θ and the α are not wrapped; innovations of angles are.

**Predict.** The dead reckoning's laser motion between two scans is turned into a map-frame increment
u = (Δx, Δy, Δθ) and its noise Q by the pose module's own :meth:`PoseFilter.predict` (run on the current pose with
a zero covariance: it returns X ⊕ u and Q, so both modules share one odometry model, mount lever and extra noise).
Only the pose moves: X_v ← X_v + u, with F = [[1, 0, -Δy], [0, 1, Δx], [0, 0, 1]]; the covariance changes only in
the pose rows and columns, P_vv ← F·P_vv·Fᵀ + Q, P_vw ← F·P_vw.

**Observe.** A wall (α, ρ) seen from (x, y, θ) is z = (γ, ρ_r) = (α - θ, ρ - x·cos α - y·sin α), or
(γ + π, -ρ_r) when ρ_r < 0 (a line feature always has r >= 0); with s that sign,
H_v = [[0, 0, -1], [-s·cos α, -s·sin α, 0]] and H_w = [[1, 0], [s·(x·sin α - y·cos α), s]].

**Update.** All the matched observations of a scan at once: S = H·P·Hᵀ + R, W = P·Hᵀ·S⁻¹, X ← X + W·ν,
P ← P - W·S·Wᵀ (the form the compressed filter uses too, so the two agree to rounding).

**New wall.** Its line from the pose and the observation, g(X_v, z): α = θ + γ, ρ = ρ_r + x·cos α + y·sin α (negated,
with α + π, when negative). With G_v = ∂g/∂X_v = [[0, 0, 1], [s·cos α, s·sin α, s·t]] and
G_z = ∂g/∂z = [[1, 0], [s·t, s]] (t = -x·sin α + y·cos α): P_ww = G_v·P_vv·G_vᵀ + G_z·R·G_zᵀ, P_w· = G_v·P_v·.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pluto.geometry import wrap_angle
from pluto.navigation.pose.core import PoseFilter, PoseFilterParams, PoseLike
from pluto.navigation.pose.features import LineFeature

__all__ = [
    "MERGE_VARIANCE",
    "POSE_SIZE",
    "WALL_SIZE",
    "Odometry",
    "WallEKF",
    "WallObservation",
    "anchor_of",
    "check_covariance",
    "check_increment",
    "check_shift",
    "kalman_update",
    "merge_noise",
    "new_wall",
    "observe_wall",
    "same_line",
    "stack_observations",
]

FloatArray = npt.NDArray[np.float64]

POSE_SIZE = 3
"""Entries of the pose in the state: x, y, θ."""
WALL_SIZE = 2
"""Entries of a wall in the state: α, ρ."""


def check_covariance(value: npt.ArrayLike, shape: tuple[int, int], what: str) -> FloatArray:
    """``value`` as a symmetric matrix of ``shape`` (a flat one of the right size is reshaped).

    Raises:
        ValueError: another size, or a value that is not finite.
    """
    m = np.array(value, dtype=np.float64)
    if m.size == shape[0] * shape[1]:
        m = m.reshape(shape)
    if m.shape != shape or not np.all(np.isfinite(m)):
        raise ValueError(f"{what} must be a finite {shape[0]}x{shape[1]} matrix, got shape {m.shape}")
    return 0.5 * (m + m.T)


def check_shift(value: npt.ArrayLike, size: int) -> FloatArray:
    """``value`` as a state-sized vector of finite numbers (a filter's :meth:`WallEKF.shift`).

    Raises:
        ValueError: the wrong size or a value that is not finite.
    """
    out = np.asarray(value, dtype=np.float64).ravel()
    if out.shape != (size,) or not np.all(np.isfinite(out)):
        raise ValueError(f"a shift of the state is {size} finite values, got shape {out.shape}")
    return out


def check_increment(value: npt.ArrayLike) -> FloatArray:
    """(Δx, Δy, Δθ) as a vector.

    Raises:
        ValueError: not 3 finite values.
    """
    u = np.array(value, dtype=np.float64)
    if u.shape != (POSE_SIZE,) or not np.all(np.isfinite(u)):
        raise ValueError(f"an increment must be 3 finite values, got shape {u.shape}")
    return u


@dataclass(frozen=True)
class WallObservation:
    """A wall's line seen in one scan, in the laser frame.

    Attributes:
        gamma: angle of the line's normal, rad.
        rho: distance from the laser to the line, m, >= 0.
        covariance: 2x2 covariance of (γ, ρ), rad², m·rad, m².
        midpoint: a point of the seen segment, laser frame, m (where a new wall is anchored on the map);
            None: the foot of the normal, ρ·(cos γ, sin γ).
    """

    gamma: float
    rho: float
    covariance: FloatArray = field(repr=False)
    midpoint: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.gamma) and math.isfinite(self.rho)) or self.rho < 0.0:
            raise ValueError(f"an observation needs a finite γ and ρ >= 0, got ({self.gamma}, {self.rho})")
        object.__setattr__(self, "covariance", check_covariance(self.covariance, (2, 2), "covariance"))

    @classmethod
    def from_feature(cls, feature: LineFeature) -> WallObservation:
        """The observation of a line extracted from a scan (:func:`~pluto.navigation.pose.extract_lines`)."""
        return cls(feature.alpha, feature.r, feature.covariance, feature.midpoint)

    @property
    def anchor(self) -> tuple[float, float]:
        """:attr:`midpoint`, or the foot of the normal when it is None, laser frame, m."""
        if self.midpoint is not None:
            return self.midpoint
        return self.rho * math.cos(self.gamma), self.rho * math.sin(self.gamma)


def observe_wall(pose: FloatArray, wall: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The line a wall makes in the laser frame, and its Jacobians.

    Args:
        pose: (x, y, θ) of the laser, m and rad.
        wall: (α, ρ) of the wall, rad and m.

    Returns:
        z = (γ, ρ_r) (γ wrapped to [-π, π)), H_v (2x3) = ∂z/∂pose and H_w (2x2) = ∂z/∂wall.
    """
    x, y, theta = float(pose[0]), float(pose[1]), float(pose[2])
    alpha, rho = float(wall[0]), float(wall[1])
    ca, sa = math.cos(alpha), math.sin(alpha)
    rho_r = rho - x * ca - y * sa
    s = -1.0 if rho_r < 0.0 else 1.0
    gamma = alpha - theta + (math.pi if s < 0.0 else 0.0)
    z = np.array([wrap_angle(gamma), s * rho_r])
    h_v = np.array([[0.0, 0.0, -1.0], [-s * ca, -s * sa, 0.0]])
    h_w = np.array([[1.0, 0.0], [s * (x * sa - y * ca), s]])
    return z, h_v, h_w


def new_wall(pose: FloatArray, gamma: float, rho: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A wall's (α, ρ) in the map frame from the laser's pose and the line it sees, and the Jacobians.

    Args:
        pose: (x, y, θ) of the laser, m and rad.
        gamma: the line's normal angle in the laser frame, rad.
        rho: the line's distance from the laser, m.

    Returns:
        (α, ρ) with ρ >= 0 (α wrapped to [-π, π)), G_v (2x3) = ∂(α, ρ)/∂pose and G_z (2x2) = ∂(α, ρ)/∂(γ, ρ_r).
    """
    x, y, theta = float(pose[0]), float(pose[1]), float(pose[2])
    alpha = theta + gamma
    ca, sa = math.cos(alpha), math.sin(alpha)
    offset = rho + x * ca + y * sa
    t = -x * sa + y * ca
    s = -1.0 if offset < 0.0 else 1.0
    wall = np.array([wrap_angle(alpha + (math.pi if s < 0.0 else 0.0)), s * offset])
    g_v = np.array([[0.0, 0.0, 1.0], [s * ca, s * sa, s * t]])
    g_z = np.array([[1.0, 0.0], [s * t, s]])
    return wall, g_v, g_z


def stack_observations(
    x_pose: FloatArray,
    walls: Sequence[FloatArray],
    columns: Sequence[int],
    observations: Sequence[WallObservation],
    size: int,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """H (2m x size), R (2m x 2m) and ν (2m) of m observations; the pose is columns 0..2 and wall k's
    (α, ρ) columns ``columns[k]``, ``columns[k] + 1``."""
    m = len(observations)
    h = np.zeros((2 * m, size))
    r = np.zeros((2 * m, 2 * m))
    nu = np.zeros(2 * m)
    for k, (wall, col, obs) in enumerate(zip(walls, columns, observations, strict=True)):
        z, h_v, h_w = observe_wall(x_pose, wall)
        rows = slice(2 * k, 2 * k + 2)
        h[rows, :POSE_SIZE] = h_v
        h[rows, col : col + WALL_SIZE] = h_w
        r[rows, rows] = obs.covariance
        nu[2 * k] = wrap_angle(obs.gamma - float(z[0]))
        nu[2 * k + 1] = obs.rho - float(z[1])
    return h, r, nu


MERGE_VARIANCE = 1e-10
"""Variance of the pseudo-observation that two walls are one line (rad², m²): small enough to make them equal, large
enough to keep S well conditioned."""


def same_line(keep: FloatArray, drop: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The pseudo-observation that two walls are one line: ν (2), ∂/∂keep (2x2) and ∂/∂drop (2x2).

    The difference (α_k - α_d, ρ_k - ρ_d) is observed to be zero; a line through the origin may carry the opposite
    normal in the other wall, (α_d + π, -ρ_d), and is compared that way.
    """
    flip = abs(wrap_angle(float(keep[0] - drop[0]))) > math.pi / 2
    s = -1.0 if flip else 1.0
    diff = np.array(
        [wrap_angle(float(keep[0] - drop[0]) - (math.pi if flip else 0.0)), float(keep[1]) - s * float(drop[1])]
    )
    return -diff, np.eye(2), np.diag([-1.0, -s])


def merge_noise(noise: npt.ArrayLike | None) -> FloatArray:
    """The 2x2 covariance of a merge's pseudo-observation: :data:`MERGE_VARIANCE` on the diagonal plus ``noise``.

    Raises:
        ValueError: a ``noise`` that is not a finite 2x2 matrix.
    """
    r = MERGE_VARIANCE * np.eye(WALL_SIZE)
    if noise is not None:
        r = r + check_covariance(noise, (WALL_SIZE, WALL_SIZE), "noise")
    return r


def anchor_of(pose: FloatArray, observation: WallObservation) -> FloatArray:
    """The map-frame point where a wall first seen as ``observation`` from ``pose`` is anchored, m."""
    ax, ay = observation.anchor
    c, s = math.cos(float(pose[2])), math.sin(float(pose[2]))
    return np.array([float(pose[0]) + c * ax - s * ay, float(pose[1]) + s * ax + c * ay])


class Odometry:
    """Turns the dead-reckoned laser poses of successive scans into map-frame increments and their noise.

    The pose module's :class:`PoseFilter` does the work: reset at the current estimate with a zero covariance, its
    predict returns the moved pose and, as its covariance, exactly the noise Q of the step.

    Args:
        params: the pose filter's settings (laser mount, extra odometry noise).
    """

    def __init__(self, params: PoseFilterParams | None = None) -> None:
        self._filter = PoseFilter((0.0, 0.0, 0.0), np.zeros((3, 3)), params=params)
        self._reference: PoseLike | None = None

    def step(
        self, estimate: FloatArray, dr_pose: PoseLike, increment: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray] | None:
        """The increment (Δx, Δy, Δθ) in the map frame at ``estimate`` and its 3x3 noise, or None on the first call
        (which only takes ``dr_pose`` as the reference).

        Raises:
            ValueError: a pose or covariance of the wrong shape or not finite.
        """
        now = [float(v) for v in dr_pose]
        if self._reference is not None:
            self._filter.reset(estimate, np.zeros((3, 3)), reference=self._reference)
        self._filter.predict(dr_pose, increment)  # checks the inputs before anything changes
        previous, self._reference = self._reference, now
        if previous is None:
            return None
        return np.array(self._filter.pose) - estimate, self._filter.covariance


class WallEKF:
    """The full EKF of the laser's pose and the walls (every entry of the covariance updated every time).

    Args:
        pose: the laser's starting (x, y, θ) in the map frame, m and rad.
        covariance: its 3x3 covariance.
        params: the pose filter's settings, for the odometry noise of :meth:`predict`.

    Raises:
        ValueError: a pose or covariance of the wrong shape or not finite.
    """

    def __init__(
        self, pose: Sequence[float], covariance: npt.ArrayLike, *, params: PoseFilterParams | None = None
    ) -> None:
        x = np.array(pose, dtype=np.float64)
        if x.shape != (POSE_SIZE,) or not np.all(np.isfinite(x)):
            raise ValueError(f"the pose must be 3 finite values, got {pose!r}")
        self._x = x
        self._p = check_covariance(covariance, (3, 3), "covariance")
        self._anchors = np.zeros((0, 2))
        self._odometry = Odometry(params)

    # -- state ---------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of walls."""
        return int(self._x.shape[0] - POSE_SIZE) // WALL_SIZE

    @property
    def pose(self) -> FloatArray:
        """A copy of the laser's (x, y, θ), m and rad."""
        return self._x[:POSE_SIZE].copy()

    @property
    def pose_covariance(self) -> FloatArray:
        """A copy of the pose's 3x3 covariance."""
        return self._p[:POSE_SIZE, :POSE_SIZE].copy()

    def wall(self, index: int) -> FloatArray:
        """(α, ρ) of wall ``index``, rad and m."""
        col = POSE_SIZE + WALL_SIZE * index
        return self._x[col : col + WALL_SIZE].copy()

    @property
    def anchors(self) -> FloatArray:
        """``(n, 2)`` the map-frame point where each wall was first seen, m."""
        return self._anchors.copy()

    def full_state(self) -> tuple[FloatArray, FloatArray]:
        """Copies of the whole state vector and its covariance."""
        return self._x.copy(), self._p.copy()

    def shift(self, delta: npt.ArrayLike) -> None:
        """Add ``delta`` to the whole state's mean, [x, y, θ, α_1, ρ_1, ...], leaving the covariance as it is: a
        smoothing back end moves the pose and the walls to where an optimised trajectory puts them (their uncertainty
        relative to each other is what the filter still knows best).

        Raises:
            ValueError: not one finite value per entry of the state.
        """
        self._x = self._x + check_shift(delta, self._x.size)

    def marginal(self, walls: Sequence[int]) -> tuple[FloatArray, FloatArray]:
        """The pose and the given walls, [x, y, θ, α_1, ρ_1, ...], and their joint covariance.

        Raises:
            IndexError: a wall index out of range.
        """
        n = len(self)
        for w in walls:
            if not 0 <= w < n:
                raise IndexError(f"no wall {w} (the map has {n})")
        idx = np.concatenate(
            [np.arange(POSE_SIZE)] + [POSE_SIZE + WALL_SIZE * w + np.arange(WALL_SIZE) for w in walls]
        ).astype(np.intp)
        return self._x[idx].copy(), self._p[np.ix_(idx, idx)].copy()

    # -- predict -------------------------------------------------------------------------------------------------

    def predict(self, dr_pose: PoseLike, increment: npt.ArrayLike) -> None:
        """Move the pose by the dead reckoning's laser motion since the previous call, as
        :meth:`PoseFilter.predict` does (the first call only takes ``dr_pose`` as the reference).

        Args:
            dr_pose: the dead-reckoned laser pose at this scan (``Localization/Laser_Dead-Reckoning``).
            increment: the covariance of the robot's increment since the previous scan (that interface's).
        """
        step = self._odometry.step(self._x[:POSE_SIZE], dr_pose, increment)
        if step is not None:
            self.move(*step)

    def move(self, delta: npt.ArrayLike, noise: npt.ArrayLike) -> None:
        """Move the pose by a map-frame increment (Δx, Δy, Δθ) with 3x3 noise Q (m, rad).

        Raises:
            ValueError: an increment or noise of the wrong shape or not finite.
        """
        u = check_increment(delta)
        q = check_covariance(noise, (3, 3), "noise")
        f = np.array([[1.0, 0.0, -u[1]], [0.0, 1.0, u[0]], [0.0, 0.0, 1.0]])
        self._x[:POSE_SIZE] += u
        v = slice(0, POSE_SIZE)
        self._p[v, :] = f @ self._p[v, :]
        self._p[:, v] = self._p[:, v] @ f.T
        self._p[v, v] += q

    # -- update --------------------------------------------------------------------------------------------------

    def update(self, observations: Sequence[tuple[int, WallObservation]]) -> float:
        """Correct the state with walls seen in one scan.

        Args:
            observations: (wall index, its observation) pairs, one per wall.

        Returns:
            The normalised innovation squared of all of them (2 dof each); 0 when there are none.

        Raises:
            IndexError: a wall index out of range.
        """
        if not observations:
            return 0.0
        n = len(self)
        for index, _ in observations:
            if not 0 <= index < n:
                raise IndexError(f"no wall {index} (the map has {n})")
        cols = [POSE_SIZE + WALL_SIZE * i for i, _ in observations]
        walls = [self._x[c : c + WALL_SIZE] for c in cols]
        h, r, nu = stack_observations(self._x[:POSE_SIZE], walls, cols, [o for _, o in observations], self._x.size)
        self._x, self._p, nis = kalman_update(self._x, self._p, h, r, nu)
        return nis

    def merge(self, keep: int, drop: int, noise: npt.ArrayLike | None = None) -> float:
        """Make two walls found to be one line equal (a pseudo-observation of their difference with
        :data:`MERGE_VARIANCE`); ``drop`` stays in the state, equal to ``keep``, and should no longer be observed.

        Args:
            keep: the wall that stays on the map.
            drop: the wall that goes.
            noise: the pseudo-observation's 2x2 covariance in (α, ρ) (rad², m²) when the two lines are one wall only
                within a tolerance (:func:`~pluto.navigation.slam.association.merge_tolerance`): they are drawn
                together as far as it says, not made equal; None: :data:`MERGE_VARIANCE`.

        Returns:
            The NIS of the difference (2 dof).

        Raises:
            IndexError: a wall index out of range; ValueError: the same wall twice.
        """
        n = len(self)
        for w in (keep, drop):
            if not 0 <= w < n:
                raise IndexError(f"no wall {w} (the map has {n})")
        if keep == drop:
            raise ValueError("a wall cannot be merged with itself")
        ck, cd = POSE_SIZE + WALL_SIZE * keep, POSE_SIZE + WALL_SIZE * drop
        nu, h_k, h_d = same_line(self._x[ck : ck + WALL_SIZE], self._x[cd : cd + WALL_SIZE])
        h = np.zeros((WALL_SIZE, self._x.size))
        h[:, ck : ck + WALL_SIZE] = h_k
        h[:, cd : cd + WALL_SIZE] = h_d
        self._x, self._p, nis = kalman_update(self._x, self._p, h, merge_noise(noise), nu)
        return nis

    def add_wall(self, observation: WallObservation) -> int:
        """Add a wall first seen as ``observation`` from the current pose; returns its index."""
        pose = self._x[:POSE_SIZE]
        wall, g_v, g_z = new_wall(pose, observation.gamma, observation.rho)
        cross = g_v @ self._p[:POSE_SIZE, :]
        own = cross[:, :POSE_SIZE] @ g_v.T + g_z @ observation.covariance @ g_z.T
        n = self._x.size
        p = np.empty((n + WALL_SIZE, n + WALL_SIZE))
        p[:n, :n] = self._p
        p[n:, :n] = cross
        p[:n, n:] = cross.T
        p[n:, n:] = 0.5 * (own + own.T)
        self._p = p
        self._x = np.concatenate((self._x, wall))
        self._anchors = np.vstack((self._anchors, anchor_of(pose, observation)))
        return len(self) - 1


def kalman_update(
    x: FloatArray, p: FloatArray, h: FloatArray, r: FloatArray, nu: FloatArray
) -> tuple[FloatArray, FloatArray, float]:
    """One EKF correction: the new state, covariance (P - W·S·Wᵀ, symmetrised) and the NIS νᵀ·S⁻¹·ν."""
    ph = p @ h.T
    s = h @ ph + r
    w = np.linalg.solve(s, ph.T).T  # P Hᵀ S⁻¹ (S symmetric)
    p_new = p - w @ s @ w.T
    return x + w @ nu, 0.5 * (p_new + p_new.T), float(nu @ np.linalg.solve(s, nu))
