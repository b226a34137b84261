"""The pose module's estimator: an extended Kalman filter of the laser's pose on an a-priori map of walls.

Strategy (docs/design.md, "pose and slam"; the wall model of Arras and Siegwart, SPIE 1997): the state is the planar
pose (x, y, θ) of the **laser** in the map frame, because that is what the scans measure, what the localization
service gives at scan time (``Localization/Laser_Dead-Reckoning``) and what the pose module posts back
(``Localization/Post_Pose`` with setter 1 is a laser pose). θ is not wrapped: it follows the dead reckoning's
continuous heading, so the correction the localization service derives from a post stays a small angle.

**Predict.** Between two scans the dead reckoning moved the laser from L_a to L_b (its frame); the increment
u = L_a⁻¹·L_b is composed onto the state, X ← X ⊕ u, with F = ∂(X ⊕ u)/∂X = [[1, 0, -Δy], [0, 1, Δx], [0, 0, 1]]
(Δx, Δy the displacement in the map frame). The localization service's incremental covariance Σ is that of the
*robot's* increment, in the dead-reckoning frame, as an error of the end pose; the laser sits at the mount offset m
ahead of the robot centre, so a heading error also swings it: Q = R·T·Σ·Tᵀ·Rᵀ with
T = [[1, 0, -m_y'], [0, 1, m_x'], [0, 0, 1]] (m' the offset turned by the robot's heading) and R the rotation from
the dead-reckoning frame to the map frame. P ← F·P·Fᵀ + Q.

**Update.** A scan's lines are paired with the map's walls by a Mahalanobis gate and the overlap of their
segments, pieces of one wall fused, and the state corrected with all the pairs, the covariance in Joseph form
(:mod:`pluto.navigation.pose.update`, which says how). A map wall's error is the same scan after scan, so it does
not average out as the walls are seen again and again: after an update the variances of x, y and θ are kept at
least ``wall_offset_std``² and ``wall_angle_std``² (the map's own accuracy), which also keeps the gate open to a
wall that disagrees by a few cm with the others.

**Lost.** A scan with fewer than ``min_matches`` pairs is poor; after ``lost_after`` poor scans in a row, or when the
position's standard deviation passes ``lost_position_std``, the filter says it is lost, until a scan matches again.
It keeps predicting and updating; the caller may search with :func:`relocalize` and, if it trusts the answer,
:meth:`PoseFilter.reset` the filter. The core never moves itself to a pose found that way. A caller with evidence
the lines cannot give (a start that the scan's beams contradict) may say the filter is lost at once
(:meth:`PoseFilter.declare_lost`).

**Continuing.** :meth:`PoseFilter.snapshot` gives the state (pose, covariance, the dead-reckoned laser pose it was
last moved to, and the lost count); :meth:`PoseFilter.resume` builds a filter from it in a new process, and
:meth:`PoseFilter.widen` adds the uncertainty of the time the filter did not follow: ``resume_position_per_s`` (m)
and ``resume_heading_per_s`` (rad) of standard deviation per second of the gap, added to the position's and the
heading's variances as (rate · gap)². The motion meanwhile is the dead reckoning's, composed by the next
:meth:`PoseFilter.predict` from the saved reference (with its own growth per metre driven).

**Relocalize.** :func:`~pluto.navigation.pose.relocalization.relocalize` searches the map for the pose that
best explains a scan's lines (:mod:`pluto.navigation.pose.relocalization`, re-exported here).

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import msgspec
import numba
import numpy as np
import numpy.typing as npt

from pluto.geometry import LASER_MOUNT
from pluto.navigation.pose.features import LineFeature
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.relocalization import Relocalization, can_relocalize, relocalize, scan_agreement
from pluto.navigation.pose.update import _update, associate
from pluto.runtime.params import Params
from pluto.runtime.ranges import Offset, between

__all__ = [
    "FilterStatus",
    "Match",
    "PoseFilter",
    "PoseFilterParams",
    "PoseFilterState",
    "Relocalization",
    "UpdateResult",
    "associate",
    "can_relocalize",
    "relocalize",
    "scan_agreement",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
PoseLike = Sequence[float] | FloatArray
"""A pose given as a sequence of floats or a numpy vector."""


class PoseFilterParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of the pose filter.

    Attributes:
        gate: Mahalanobis gate of a feature-wall pair (chi-square, 2 dof; 9.21 is the 99 % quantile).
        overlap_margin: a feature must overlap its wall's extent widened by this, m (plus 3 σ of the pose along it).
        max_range: walls farther than this from the laser are not considered, m. The scanner's own range (the SICK
            LMS's 80 m): on a campus the walls across a cross street or at the end of a block are 30-80 m away, and
            they are what fixes the position along a street whose façades only fix it across; a far wall's line is
            less certain (its points are farther apart), which its covariance already says.
        min_matches: a scan with fewer pairs than this is poor.
        lost_after: number of poor scans in a row after which the filter is lost.
        lost_position_std: the filter is lost when the position's largest standard deviation passes this, m.
        laser_mount: (x, y) of the laser's pan centre in the robot frame, m (as the localization service's).
        extra_alpha_std: std dev added to every feature's angle, rad (walls that are not quite flat).
        extra_r_std: std dev added to every feature's distance, m.
        wall_angle_std: least std dev of a map wall's direction, rad...
        wall_offset_std: ...and of its position across itself at its midpoint, m: a wall the map gives as more
            certain (an architect's plan gives them as exact) is taken as this uncertain. A building as built
            differs from its plan by a few cm and a fraction of a degree; a filter that took the plan as exact
            would take that difference for an error of its pose, and hold a wrong pose with confidence where the
            walls around it disagree with each other. The pose is never held as more certain than these either.
        distance_scale_std: odometry's error of scale (a fraction of the distance driven), added to the dead
            reckoning's own increment covariance along the motion: the localization service models it as random
            noise, but a scale error or a worn wheel adds up over a long corridor where no wall fixes the position
            along it, and the filter must know it is that uncertain when the robot turns.
        heading_drift_std: heading error per metre driven, rad/m (gyro bias, wheel slip), added the same way.
        turn_scale_std: heading error as a fraction of the turn, added the same way.
        correlation_length: distance over which such an error keeps its sign, m.
        informative_length: a scan counts as poor only if it has a line at least this long that matched nothing.
        resume_position_per_s: std dev of the position added per second a resumed filter did not follow (the time
            between its saved state and its first scan after a restart), m/s.
        resume_heading_per_s: the same for the heading, rad/s.
    """

    gate: Annotated[float, between(0.0, 1000.0, open_low=True)] = 9.21
    overlap_margin: Annotated[float, between(0.0, 10.0)] = 0.3
    max_range: Annotated[float, between(0.0, 1000.0, open_low=True)] = 80.0
    min_matches: Annotated[int, between(1, 10_000)] = 1
    lost_after: Annotated[int, between(1, 100_000)] = 25
    lost_position_std: Annotated[float, between(0.0, 1000.0, open_low=True)] = 2.0
    laser_mount: tuple[Offset, Offset] = (LASER_MOUNT[0], LASER_MOUNT[1])
    extra_alpha_std: Annotated[float, between(0.0, math.pi)] = 0.0
    extra_r_std: Annotated[float, between(0.0, 10.0)] = 0.0
    wall_angle_std: Annotated[float, between(0.0, math.pi)] = 0.003
    wall_offset_std: Annotated[float, between(0.0, 10.0)] = 0.02
    distance_scale_std: Annotated[float, between(0.0, 1.0)] = 0.02
    heading_drift_std: Annotated[float, between(0.0, 1.0)] = 0.005
    turn_scale_std: Annotated[float, between(0.0, 1.0)] = 0.02
    correlation_length: Annotated[float, between(0.0, 10_000.0)] = 20.0
    informative_length: Annotated[float, between(0.0, 100.0)] = 1.0
    resume_position_per_s: Annotated[float, between(0.0, 10.0)] = 0.05
    resume_heading_per_s: Annotated[float, between(0.0, 10.0)] = 0.01


@dataclass(frozen=True)
class Match:
    """A feature paired with a map wall.

    Attributes:
        feature: index in the features given to :meth:`PoseFilter.update`.
        wall: index of the wall in the :class:`WallMap`.
        predicted: the wall's line (γ, ρ) as the prior pose predicted it in the laser frame, rad and m.
        innovation: (Δα rad, Δr m), measured minus predicted, before the update.
        nis: normalised innovation squared of this pair, νᵀS⁻¹ν (2 dof).
    """

    feature: int
    wall: int
    predicted: tuple[float, float]
    innovation: tuple[float, float]
    nis: float


@dataclass(frozen=True)
class UpdateResult:
    """What one scan did to the filter.

    Attributes:
        pose: the laser's (x, y, θ) after the update, m and rad.
        covariance: its 3x3 covariance.
        matches: the pairs used.
        nis: normalised innovation squared of all pairs together (``2 * len(matches)`` dof); 0 without pairs.
        candidates: number of map walls considered.
        lost: the filter's lost flag after this scan.
    """

    pose: tuple[float, float, float]
    covariance: FloatArray
    matches: tuple[Match, ...]
    nis: float
    candidates: int
    lost: bool

    @property
    def dof(self) -> int:
        """Degrees of freedom of :attr:`nis`."""
        return 2 * len(self.matches)


@dataclass(frozen=True)
class FilterStatus:
    """The filter's health.

    Attributes:
        lost: too few matches for too long, or too uncertain.
        poor_scans: scans in a row with fewer than ``min_matches`` pairs.
        last_matches: pairs used by the last update.
        updates: scans processed.
        position_std: largest standard deviation of the position, m.
        heading_std: standard deviation of the heading, rad.
    """

    lost: bool
    poor_scans: int
    last_matches: int
    updates: int
    position_std: float
    heading_std: float


class PoseFilterState(msgspec.Struct, frozen=True, kw_only=True):
    """A :class:`PoseFilter`'s state, to continue from in another process (:meth:`PoseFilter.snapshot`).

    Attributes:
        pose: the laser's (x, y, θ) in the map frame, m and rad.
        covariance: its 3x3 covariance, 9 row-major values.
        reference: the dead-reckoned laser pose (x, y, θ, pan) the state was last moved to; None: not yet.
        poor_scans: poor scans in a row.
        lost: the lost flag.
    """

    pose: tuple[float, float, float]
    covariance: list[float]
    reference: tuple[float, float, float, float] | None = None
    poor_scans: int = 0
    lost: bool = False


def planar(pose: PoseLike) -> tuple[float, float, float, float]:
    """(x, y, θ, pan) of a 3-D (x, y, θ), 6-D (x, y, z, θ, φ, ψ) or 8-D (+ pan, tilt) pose; pan 0 unless given.

    Raises:
        ValueError: another length, or a value that is not finite.
    """
    n = len(pose)
    if n == 3:
        out = (float(pose[0]), float(pose[1]), float(pose[2]), 0.0)
    elif n in (6, 8):
        out = (float(pose[0]), float(pose[1]), float(pose[3]), float(pose[6]) if n == 8 else 0.0)
    else:
        raise ValueError(f"a pose must have 3, 6 or 8 values, got {n}")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"a pose must be finite, got {list(pose)}")
    return out


def _covariance(value: npt.ArrayLike, what: str) -> FloatArray:
    c = np.array(value, dtype=np.float64)
    if c.size == 9:
        c = c.reshape(3, 3)
    if c.shape != (3, 3) or not np.all(np.isfinite(c)):
        raise ValueError(f"{what} must be a finite 3x3 matrix (or 9 values), got shape {c.shape}")
    return 0.5 * (c + c.T)


def _largest_position_variance(p: FloatArray) -> float:
    """The larger eigenvalue of the position block of ``p``, m² (in closed form: a 2x2 symmetric matrix)."""
    a, b, c = float(p[0, 0]), float(p[0, 1]), float(p[1, 1])
    return 0.5 * (a + c) + math.hypot(0.5 * (a - c), b)


def _at_least(p: FloatArray, position_std: float, heading_std: float) -> FloatArray:
    """``p`` with the variances of x and y raised to at least ``position_std``² and that of θ to ``heading_std``²
    (adding to the diagonal keeps a covariance positive)."""
    floor = np.array([position_std * position_std, position_std * position_std, heading_std * heading_std])
    out: FloatArray = p + np.diag(np.maximum(floor - np.diag(p), 0.0))
    return out


def _longest(lines: FloatArray) -> float:
    """The length of the longest of ``(F, 9)`` lines (start x, y and end x, y in columns 5-8), m."""
    return float(np.hypot(lines[:, 7] - lines[:, 5], lines[:, 8] - lines[:, 6]).max())


@numba.njit(cache=True)
def _finite(values: FloatArray) -> bool:
    """Whether every value is finite."""
    return bool(np.all(np.isfinite(values)))


@numba.njit(cache=True)
def _predict(
    state: FloatArray,
    p: FloatArray,
    sigma: FloatArray,
    px: float,
    py: float,
    pt: float,
    x: float,
    y: float,
    theta: float,
    pan: float,
    mx: float,
    my: float,
    distance_scale_std: float,
    heading_drift_std: float,
    turn_scale_std: float,
    correlation_length: float,
) -> tuple[FloatArray, FloatArray]:
    """The predict step (see the module docstring and :meth:`PoseFilter.predict`): the state and covariance moved
    by the dead reckoning's laser motion from (px, py, pt) to (x, y, θ) (pan: the wrist's), ``sigma`` the robot's
    increment covariance (9 values, row-major, dead-reckoning frame), (mx, my) the laser mount."""
    # the increment in the previous laser frame, then in the map frame at the filter's heading
    c, s = math.cos(pt), math.sin(pt)
    ux, uy = c * (x - px) + s * (y - py), -s * (x - px) + c * (y - py)
    dtheta = theta - pt
    ft = state[2]
    cf, sf = math.cos(ft), math.sin(ft)
    dx, dy = cf * ux - sf * uy, sf * ux + cf * uy
    f = np.array([[1.0, 0.0, -dy], [0.0, 1.0, dx], [0.0, 0.0, 1.0]])
    # the robot's increment covariance carried to the laser (mount lever), then into the map frame: G = Rot·T
    robot = theta - pan
    cr, sr = math.cos(robot), math.sin(robot)
    ox, oy = cr * mx - sr * my, sr * mx + cr * my
    turn = ft - pt
    ct, st = math.cos(turn), math.sin(turn)
    g = np.array([[ct, -st, -ct * oy - st * ox], [st, ct, -st * oy + ct * ox], [0.0, 0.0, 1.0]])
    sym = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            sym[i, j] = 0.5 * (sigma[3 * i + j] + sigma[3 * j + i])
    q = g @ sym @ g.T
    # what the dead reckoning's random-noise model leaves out: errors that grow with the distance and the turn. A
    # bias adds up over the distance it lasts: spread as a random walk over ``correlation_length`` metres, the
    # variance grows by k²·L per metre (σ = k·√(L·D) after D metres, k·D while D < L).
    step = math.hypot(dx, dy)
    if step > 0.0:
        ex, ey = dx / step, dy / step
        along = distance_scale_std * distance_scale_std * correlation_length * step
        q[0, 0] += along * ex * ex
        q[0, 1] += along * ex * ey
        q[1, 0] += along * ex * ey
        q[1, 1] += along * ey * ey
    q[2, 2] += (
        heading_drift_std * heading_drift_std * correlation_length * step
        + turn_scale_std * turn_scale_std * abs(dtheta) * math.pi
    )
    new_state = np.array([state[0] + dx, state[1] + dy, state[2] + dtheta])
    fp = f @ p @ f.T + q
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = 0.5 * (fp[i, j] + fp[j, i])
    return new_state, out


class PoseFilter:
    """EKF of the laser's planar pose on a wall map (see the module docstring).

    Args:
        pose: the laser's starting pose in the map frame, (x, y, θ) or 6-D/8-D (x, y, z, θ, ...), m and rad.
        covariance: its 3x3 covariance (or 9 row-major values), m², m·rad, rad².
        reference: the dead-reckoned laser pose at the same time (``Localization/Laser_Dead-Reckoning``); None:
            the first :meth:`predict` only takes its pose as the reference.
        params: settings.

    Raises:
        ValueError: a pose or covariance of the wrong shape or not finite.
    """

    def __init__(
        self,
        pose: PoseLike,
        covariance: npt.ArrayLike,
        *,
        reference: PoseLike | None = None,
        params: PoseFilterParams | None = None,
    ) -> None:
        self.params = params or PoseFilterParams()
        self._x = np.zeros(3)
        self._p = np.zeros((3, 3))
        self._reference: tuple[float, float, float, float] | None = None
        self._poor = 0
        self._last_matches = 0
        self._updates = 0
        self._lost = False
        self.joined: IntArray = np.zeros((0, 2), dtype=np.intp)
        """``(J, 2)`` the features of the last update that joined a pair as other pieces of its wall, each with the
        feature of the pair it joined (rows of the lines given)."""
        self.reset(pose, covariance, reference)

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def pose(self) -> tuple[float, float, float]:
        """The laser's (x, y, θ) in the map frame, m and rad (θ continuous, not wrapped)."""
        return float(self._x[0]), float(self._x[1]), float(self._x[2])

    @property
    def covariance(self) -> FloatArray:
        """A copy of the 3x3 covariance of :attr:`pose`."""
        return self._p.copy()

    @property
    def status(self) -> FilterStatus:
        """The filter's health (see :class:`FilterStatus`)."""
        position = math.sqrt(max(_largest_position_variance(self._p), 0.0))
        return FilterStatus(
            self._lost,
            self._poor,
            self._last_matches,
            self._updates,
            position,
            math.sqrt(max(float(self._p[2, 2]), 0.0)),
        )

    @property
    def lost(self) -> bool:
        """Too few matches for too long, or too uncertain (see :class:`PoseFilterParams`)."""
        return self._lost

    def reset(self, pose: PoseLike, covariance: npt.ArrayLike, reference: PoseLike | None = None) -> None:
        """Restart from ``pose`` with ``covariance`` (a pose set by hand, or one :func:`relocalize` found).

        Args:
            pose: the laser's pose in the map frame, 3-, 6- or 8-D.
            covariance: 3x3 (or 9 values).
            reference: the dead-reckoned laser pose at the same time, or None (see the class).
        """
        x, y, theta, _ = planar(pose)
        p = _covariance(covariance, "covariance")
        self._x = np.array([x, y, theta])
        self._p = p
        self._reference = None if reference is None else planar(reference)
        self._poor = 0
        self._lost = False
        self._check_lost()

    # -- continuing ----------------------------------------------------------------------------------------------

    def snapshot(self) -> PoseFilterState:
        """The state to continue from (see the module docstring)."""
        return PoseFilterState(
            pose=self.pose,
            covariance=[float(v) for v in self._p.ravel()],
            reference=self._reference,
            poor_scans=self._poor,
            lost=self._lost,
        )

    @classmethod
    def resume(cls, state: PoseFilterState, params: PoseFilterParams | None = None) -> PoseFilter:
        """A filter that continues from ``state`` (its next :meth:`predict` moves it from the saved reference).

        Raises:
            ValueError: a pose or covariance that is not finite, or a covariance that is not positive.
        """
        cov = _covariance(state.covariance, "covariance")
        if np.any(np.diag(cov) < 0.0):
            raise ValueError(f"a covariance must have a positive diagonal, got {np.diag(cov).tolist()}")
        reference = None
        if state.reference is not None:
            x, y, theta, pan = state.reference
            reference = (x, y, 0.0, theta, 0.0, 0.0, pan, 0.0)
        out = cls(state.pose, cov, reference=reference, params=params)
        out._poor = max(0, int(state.poor_scans))
        out._lost = bool(state.lost)
        out._check_lost()
        return out

    def widen(self, gap: float) -> None:
        """Add the uncertainty of ``gap`` seconds the filter did not follow (``resume_*_per_s``; see the module
        docstring). A gap of 0 or less changes nothing."""
        if not gap > 0.0:
            return
        prm = self.params
        position = (prm.resume_position_per_s * gap) ** 2
        self._p = self._p + np.diag([position, position, (prm.resume_heading_per_s * gap) ** 2])
        self._check_lost()

    # -- predict -------------------------------------------------------------------------------------------------

    def predict(self, dr_pose: PoseLike, increment: npt.ArrayLike) -> None:
        """Move the state by the dead reckoning's laser motion since the previous call.

        Args:
            dr_pose: the dead-reckoned laser pose at this scan (``Localization/Laser_Dead-Reckoning``: 8-D with pan
                and tilt; 3- and 6-D are taken with pan 0).
            increment: the covariance of the robot's (x, y, θ) increment since the previous scan (that interface's
                covariance, 3x3 or 9 values), dead-reckoning frame.

        Raises:
            ValueError: a pose or covariance of the wrong shape or not finite.
        """
        now = planar(dr_pose)
        sigma = np.array(increment, dtype=np.float64)
        if sigma.size != 9 or not _finite(sigma.reshape(9)):
            raise ValueError(f"increment must be a finite 3x3 matrix (or 9 values), got shape {sigma.shape}")
        previous, self._reference = self._reference, now
        if previous is None:
            return
        prm = self.params
        self._x, self._p = _predict(
            self._x,
            self._p,
            sigma.reshape(9),
            previous[0],
            previous[1],
            previous[2],
            now[0],
            now[1],
            now[2],
            now[3],
            prm.laser_mount[0],
            prm.laser_mount[1],
            prm.distance_scale_std,
            prm.heading_drift_std,
            prm.turn_scale_std,
            prm.correlation_length,
        )
        self._check_lost()

    # -- update --------------------------------------------------------------------------------------------------

    def update(self, features: Sequence[LineFeature], wall_map: WallMap) -> UpdateResult:
        """Match a scan's features to the map and correct the state with the pairs.

        Args:
            features: the scan's lines (:func:`~pluto.navigation.pose.features.extract_lines`), laser frame.
            wall_map: the map.

        Returns:
            The pairs, their innovations and NIS, and the new pose and covariance.
        """
        lines = np.array([(f.alpha, f.r, f.var_alpha, f.cov_alpha_r, f.var_r, *f.start, *f.end) for f in features])
        pairs, table, nis, candidates = self.update_lines(lines.reshape(-1, 9), wall_map)
        matches = [
            Match(f, w, (gamma, rho), (nu_a, nu_r), d2)
            for (f, w), (gamma, rho, nu_a, nu_r, d2) in zip(pairs.tolist(), table.tolist(), strict=True)
        ]
        return UpdateResult(self.pose, self.covariance, tuple(matches), nis, candidates, self._lost)

    def update_lines(self, lines: FloatArray, wall_map: WallMap) -> tuple[IntArray, FloatArray, float, int]:
        """:meth:`update` on a scan's lines given as the rows of a
        :class:`~pluto.navigation.pose.features.LineTable`'s values (what the pose module runs on every scan: no
        object per line or per pair).

        Args:
            lines: ``(F, 9)`` α, r, Var α, Cov(α, r), Var r, start x, y, end x, y per line, laser frame.
            wall_map: the map.

        Returns:
            The pairs ``(K, 2)`` (row of ``lines``, wall index in the map) in the order taken; per pair ``(K, 5)`` the
            predicted (γ, ρ), the innovation (Δα, Δr) and its NIS; the NIS of all pairs; the walls considered.
        """
        prm = self.params
        walls = wall_map.visible(self.pose, prm.max_range)
        pairs = np.zeros((0, 2), dtype=np.intp)
        table = np.zeros((0, 5))
        nis = 0.0
        self.joined = np.zeros((0, 2), dtype=np.intp)
        if lines.shape[0] and walls.shape[0]:
            chosen, table, x, p, nis, joined = _update(
                self._x,
                self._p,
                np.ascontiguousarray(lines, dtype=np.float64),
                prm.extra_alpha_std**2,
                prm.extra_r_std**2,
                wall_map.alpha,
                wall_map.rho,
                wall_map.extent,
                wall_map.covariance_at_least(prm.wall_angle_std, prm.wall_offset_std),
                walls,
                prm.gate,
                prm.overlap_margin,
            )
            if chosen.shape[0]:
                self._x, self._p, pairs = x, _at_least(p, prm.wall_offset_std, prm.wall_angle_std), chosen
                rows = np.flatnonzero(joined >= 0)
                self.joined = np.column_stack((rows, joined[rows])).astype(np.intp)
        self._updates += 1
        self._last_matches = int(pairs.shape[0])
        if pairs.shape[0] >= prm.min_matches:
            self._poor = 0
            self._lost = False
        elif lines.shape[0] and _longest(lines) >= prm.informative_length:
            self._poor += 1  # walls in view that fit no wall of the map: evidence of being lost
        # (a scan with no wall worth the name, an open square, says nothing either way)
        self._check_lost()
        return pairs, table, nis, int(walls.shape[0])

    def declare_lost(self) -> None:
        """Say the filter is lost (its caller has evidence this scan's lines cannot give it: a start that no scan has
        matched); the next scan that matches the map clears it, as for any lost filter."""
        self._lost = True

    def _check_lost(self) -> None:
        prm = self.params
        position = _largest_position_variance(self._p)
        if self._poor >= prm.lost_after or position > prm.lost_position_std**2:
            self._lost = True

    # -- output --------------------------------------------------------------------------------------------------

    def laser_post(self, dr_pose: PoseLike) -> list[float]:
        """The pose to post on ``Localization/Post_Pose`` (setter 1: a laser pose): ``dr_pose`` (the dead-reckoned
        laser pose of the same scan, 6- or 8-D) with x, y and θ replaced by the filter's.

        Raises:
            ValueError: ``dr_pose`` is not 6- or 8-D.
        """
        if len(dr_pose) not in (6, 8):
            raise ValueError(f"the dead-reckoned laser pose must be 6- or 8-D, got {len(dr_pose)} values")
        out = [float(v) for v in dr_pose]
        out[0], out[1], out[3] = self.pose
        return out
