"""How good an estimated trajectory is: the relative pose error and the absolute trajectory error against a reference.

Strategy: the field's two standard measures, computed as their authors define them, so that a figure can be set beside
a published one measured the same way on the same data (and beside no other).

Relative pose error (Kümmerle et al., "On measuring the accuracy of SLAM algorithms", 2009; the RPE of the TUM RGB-D
and KITTI benchmarks): an estimate is judged by the motions between pairs of its poses, not by the poses themselves,
so an error early in a run is counted once where it happens instead of in every later pose, and the map's frame
(where the estimate started, how it is turned) does not matter. For a pair (i, j) with estimated poses e_i, e_j and
reference poses r_i, r_j (planar: x, y, θ), the relative motions are δ = e_i⁻¹·e_j and δ* = r_i⁻¹·r_j, and the error
is the estimated motion seen from the reference's, E = δ ⊖ δ* = (δ*)⁻¹·δ. With δ = (t, θ) and δ* = (t*, θ*):

    E = (R(-θ*)·(t - t*), θ - θ*),    so |t(E)| = |t - t*|  and  θ(E) = wrap(θ - θ*)

(t and t* each in the frame of its own first pose). The translational error is |t - t*| (m) and the rotational error
|θ(E)| (rad, reported in degrees). The other order, δ·(δ*)⁻¹, has translation t - R(θ - θ*)·t*: it turns the
reference's motion by the heading error before comparing, so it takes away the sideways offset that a heading error
causes, and understates the error of an estimate whose heading drifts.

Which pairs:

- consecutive poses (i, i + 1) (:func:`pose_pairs` with ``distance=None``): the error of each step, what an
  incremental estimator adds;
- by travel (``distance=D``): for every pose i, the first pose j after it at least D metres of travel along the
  reference trajectory later (pairs with no such j are left out): the drift over D metres, where dead reckoning and a
  map-corrected estimate differ most (the idea of the KITTI benchmark's segments, on a scale that fits indoors);
- Kümmerle's relations (:func:`parse_relations`, :func:`relations_error`): the reference relative motions the
  authors published for their data sets, one line ``t1 t2 x y z roll pitch yaw`` each (the stamps of two scans and
  the motion between them, m and rad; z, roll and pitch are 0 on a planar robot). The published figures are over
  these pairs, on the logs the relations were made for.

Absolute trajectory error (Sturm et al., the TUM RGB-D benchmark, 2012): the estimate is first moved onto the
reference by the rigid motion (rotation and translation, no scale: a laser's map has the right scale) that
minimises the sum of the squared distances between the positions at the same instants, in closed form (Umeyama 1991;
Horn 1987): with centred positions p'_k = p_k - p̄ (estimate) and q'_k = q_k - q̄ (reference), the angle is
φ = atan2(Σ p'ₓq'ᵧ - p'ᵧq'ₓ, Σ p'ₓq'ₓ + p'ᵧq'ᵧ) and the translation q̄ - R(φ)·p̄. The error of each pose is then the
distance between the moved estimate and the reference (and the difference of their headings, wrapped). It measures
the whole trajectory's shape, loops closed or not, where the relative error measures local drift; one bad turn early
in a run puts every later pose off, so it is the harsher of the two.

Every measure reports the mean, the 95th percentile and the maximum of its errors (:class:`ErrorSummary`), the
absolute error also its root mean square (the TUM benchmark's figure). Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pluto.geometry import wrap_angle

__all__ = [
    "AbsoluteTrajectoryError",
    "ErrorSummary",
    "Relations",
    "RelativePoseError",
    "absolute_trajectory_error",
    "align_trajectory",
    "parse_relations",
    "pose_pairs",
    "relations_error",
    "relative_motion",
    "relative_pose_error",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

PERCENTILE = 95.0
"""The percentile every measure reports beside its mean and maximum."""

STAMP_TOLERANCE = 0.001
"""s: a relation's stamp names the scan stamped within this of it (the relations files and the logs print stamps
to the microsecond or the millisecond)."""


def _trajectory(poses: npt.ArrayLike, what: str) -> FloatArray:
    out = np.asarray(poses, dtype=np.float64)
    if out.ndim != 2 or out.shape[1] != 3 or not np.all(np.isfinite(out)):
        raise ValueError(f"{what} must be an (n, 3) array of finite (x, y, θ), got shape {out.shape}")
    return out


@dataclass(frozen=True)
class ErrorSummary:
    """Errors of one kind (``(k,)``, >= 0) with the figures reported of them: mean, 95th percentile, maximum.

    Every figure is nan without errors.
    """

    values: FloatArray

    @property
    def count(self) -> int:
        """Number of errors."""
        return int(self.values.size)

    @property
    def mean(self) -> float:
        return float(self.values.mean()) if self.count else math.nan

    @property
    def p95(self) -> float:
        """The 95th percentile (linear between the nearest ranks)."""
        return float(np.percentile(self.values, PERCENTILE)) if self.count else math.nan

    @property
    def max(self) -> float:
        return float(self.values.max()) if self.count else math.nan

    @property
    def std(self) -> float:
        """Standard deviation (Kümmerle et al. publish mean ± std)."""
        return float(self.values.std()) if self.count else math.nan

    @property
    def rmse(self) -> float:
        """Root mean square."""
        return float(np.sqrt(np.mean(self.values**2))) if self.count else math.nan

    def describe(self, unit: str, digits: int, scale: float = 1.0, rmse: bool = False) -> str:
        """``0.031 m (95 % 0.080, max 0.210)``: the mean, the 95th percentile and the maximum, times ``scale``
        (with ``rmse``, the root mean square after them: ``..., max 0.210, RMSE 0.045)``)."""
        rms = f", RMSE {self.rmse * scale:.{digits}f}" if rmse else ""
        return (
            f"{self.mean * scale:.{digits}f}{unit} "
            f"(95 % {self.p95 * scale:.{digits}f}, max {self.max * scale:.{digits}f}{rms})"
        )


def relative_motion(first: FloatArray, second: FloatArray) -> FloatArray:
    """first⁻¹·second for ``(k, 3)`` arrays of planar poses (x m, y m, θ rad): the motion from each first pose to
    its second, in the first's frame, ``(k, 3)`` (θ wrapped to [-π, π))."""
    dx = second[:, 0] - first[:, 0]
    dy = second[:, 1] - first[:, 1]
    c, s = np.cos(first[:, 2]), np.sin(first[:, 2])
    return np.column_stack((c * dx + s * dy, -s * dx + c * dy, wrap_angle(second[:, 2] - first[:, 2])))


def pose_pairs(reference: npt.ArrayLike, distance: float | None = None) -> tuple[IntArray, IntArray]:
    """The pairs of poses the error is taken over (see the module docstring).

    Args:
        reference: ``(n, 3)`` the reference trajectory (x, y, θ), m and rad.
        distance: None for consecutive poses, else the travel (m, > 0) between the poses of a pair.

    Returns:
        The first and second indices of the pairs, two arrays of equal length.

    Raises:
        ValueError: a trajectory that is not ``(n, 3)`` and finite, or a distance that is not > 0.
    """
    ref = _trajectory(reference, "the reference")
    n = ref.shape[0]
    if distance is None:
        first = np.arange(max(n - 1, 0), dtype=np.intp)
        return first, first + 1
    if not (math.isfinite(distance) and distance > 0):
        raise ValueError(f"the distance between the poses of a pair must be > 0 m, got {distance}")
    travelled = np.concatenate(([0.0], np.cumsum(np.hypot(np.diff(ref[:, 0]), np.diff(ref[:, 1])))))
    second = np.searchsorted(travelled, travelled + distance, side="left").astype(np.intp)
    keep = second < n
    first = np.flatnonzero(keep).astype(np.intp)
    return first, second[keep]


@dataclass(frozen=True)
class _Errors:
    """Per-pair or per-pose errors: translation (m) and rotation (rad), with their summaries."""

    translation: FloatArray
    rotation: FloatArray

    @property
    def translation_summary(self) -> ErrorSummary:
        """The translational (position) errors, m."""
        return ErrorSummary(self.translation)

    @property
    def rotation_summary(self) -> ErrorSummary:
        """The rotational (heading) errors, rad."""
        return ErrorSummary(self.rotation)


@dataclass(frozen=True)
class RelativePoseError(_Errors):
    """The relative pose error of a trajectory: E = (δ*)⁻¹·δ for each pair (see the module docstring).

    Attributes:
        translation: ``(k,)`` translational error of each pair, |t - t*|, m.
        rotation: ``(k,)`` rotational error of each pair, |wrap(θ - θ*)|, rad.
        unmatched: pairs that could not be formed (relations whose stamps name no scan), left out of the figures.
    """

    unmatched: int = 0

    @property
    def pairs(self) -> int:
        """Number of pairs."""
        return int(self.translation.size)

    @property
    def translation_mean(self) -> float:
        """m (nan without pairs)."""
        return self.translation_summary.mean

    @property
    def translation_p95(self) -> float:
        """The 95th percentile, m (nan without pairs)."""
        return self.translation_summary.p95

    @property
    def translation_max(self) -> float:
        """m (nan without pairs)."""
        return self.translation_summary.max

    @property
    def translation_std(self) -> float:
        """m (nan without pairs)."""
        return self.translation_summary.std

    @property
    def rotation_mean_deg(self) -> float:
        """Degrees (nan without pairs)."""
        return math.degrees(self.rotation_summary.mean)

    @property
    def rotation_p95_deg(self) -> float:
        """The 95th percentile, degrees (nan without pairs)."""
        return math.degrees(self.rotation_summary.p95)

    @property
    def rotation_max_deg(self) -> float:
        """Degrees (nan without pairs)."""
        return math.degrees(self.rotation_summary.max)

    @property
    def rotation_std_deg(self) -> float:
        """Degrees (nan without pairs)."""
        return math.degrees(self.rotation_summary.std)

    def describe(self) -> str:
        """``0.031 m (95 % 0.080, max 0.210), 0.84° (95 % 2.10, max 4.00)``: mean (95th percentile, maximum)."""
        return (
            f"{self.translation_summary.describe(' m', 3)}, {self.rotation_summary.describe('°', 2, math.degrees(1.0))}"
        )


def _pair_error(estimate: FloatArray, expected: FloatArray, unmatched: int = 0) -> RelativePoseError:
    """E = (δ*)⁻¹·δ of estimated motions ``estimate`` and reference motions ``expected``, both ``(k, 3)``."""
    translation = np.hypot(estimate[:, 0] - expected[:, 0], estimate[:, 1] - expected[:, 1])
    rotation = np.abs(wrap_angle(estimate[:, 2] - expected[:, 2]))
    return RelativePoseError(translation, rotation, unmatched)


def relative_pose_error(
    estimate: npt.ArrayLike, reference: npt.ArrayLike, distance: float | None = None
) -> RelativePoseError:
    """The relative pose error of ``estimate`` against ``reference`` over the pairs of :func:`pose_pairs`.

    Args:
        estimate: ``(n, 3)`` estimated poses (x, y, θ), m and rad.
        reference: ``(n, 3)`` the reference poses at the same instants.
        distance: None for consecutive poses, else the travel between the poses of a pair, m.

    Returns:
        The errors of every pair.

    Raises:
        ValueError: trajectories that are not ``(n, 3)`` and finite or not of one length; a distance not > 0.
    """
    est = _trajectory(estimate, "the estimate")
    ref = _trajectory(reference, "the reference")
    if est.shape != ref.shape:
        raise ValueError(f"the estimate has {est.shape[0]} poses and the reference {ref.shape[0]}")
    i, j = pose_pairs(ref, distance)
    return _pair_error(relative_motion(est[i], est[j]), relative_motion(ref[i], ref[j]))


@dataclass(frozen=True)
class Relations:
    """Reference relative motions between pairs of scans named by their stamps (a Kümmerle ``.relations`` file).

    Attributes:
        first: ``(k,)`` stamp of each pair's first scan, s.
        second: ``(k,)`` stamp of its second scan, s.
        motion: ``(k, 3)`` the motion from the first scan's pose to the second's in the first's frame (x m, y m,
            θ rad).
        skipped: the lines that did not parse, ``line N: why``.
    """

    first: FloatArray
    second: FloatArray
    motion: FloatArray
    skipped: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.first.size)


def parse_relations(lines: Iterable[str]) -> Relations:
    """The relations of a ``.relations`` file's lines: ``t1 t2 x y z roll pitch yaw`` each (blank lines and ``#``
    comments are left out; the planar motion is x, y and yaw).

    A line that does not parse (not 8 numbers, or not finite) is left out and named in ``skipped``.

    Args:
        lines: the file's lines.

    Returns:
        The relations in the file's order.
    """
    rows: list[tuple[float, ...]] = []
    skipped: list[str] = []
    for number, text in enumerate(lines, 1):
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 8:
            skipped.append(f"line {number}: {len(fields)} values, expected 8 (t1 t2 x y z roll pitch yaw)")
            continue
        try:
            values = tuple(float(v) for v in fields)
        except ValueError:
            skipped.append(f"line {number}: not a number in {text.strip()[:60]!r}")
            continue
        if not all(math.isfinite(v) for v in values):
            skipped.append(f"line {number}: a value that is not finite in {text.strip()[:60]!r}")
            continue
        rows.append(values)
    table = np.array(rows, dtype=np.float64).reshape(-1, 8)
    motion = np.column_stack((table[:, 2], table[:, 3], table[:, 7]))
    return Relations(table[:, 0].copy(), table[:, 1].copy(), motion, skipped)


def _scan_at(stamps: FloatArray, order: IntArray, at: FloatArray, tolerance: float) -> IntArray:
    """Index of the scan stamped nearest each of ``at`` (-1 where none lies within ``tolerance``)."""
    sorted_stamps = stamps[order]
    right = np.clip(np.searchsorted(sorted_stamps, at), 1, max(sorted_stamps.size - 1, 1))
    left = right - 1
    right = np.minimum(right, sorted_stamps.size - 1)
    nearer = np.where(np.abs(sorted_stamps[left] - at) <= np.abs(sorted_stamps[right] - at), left, right)
    found = order[nearer]
    return np.where(np.abs(stamps[found] - at) <= tolerance, found, -1).astype(np.intp)


def relations_error(
    estimate: npt.ArrayLike,
    stamps: npt.ArrayLike,
    relations: Relations,
    tolerance: float = STAMP_TOLERANCE,
) -> RelativePoseError:
    """The relative pose error of ``estimate`` over the pairs of ``relations``, against their motions.

    Each relation's stamps name the scans stamped within ``tolerance`` of them; a relation either of whose stamps
    names no scan is counted in ``unmatched`` and left out.

    Args:
        estimate: ``(n, 3)`` estimated poses (x, y, θ) at the scans, m and rad.
        stamps: ``(n,)`` the scans' stamps, s.
        relations: the reference motions (:func:`parse_relations`).
        tolerance: s, > 0.

    Returns:
        The errors of the relations that name two scans.

    Raises:
        ValueError: an estimate that is not ``(n, 3)`` and finite, stamps not one per pose, a tolerance not > 0.
    """
    est = _trajectory(estimate, "the estimate")
    times = np.asarray(stamps, dtype=np.float64)
    if times.shape != (est.shape[0],) or not np.all(np.isfinite(times)):
        raise ValueError(f"the stamps must be {est.shape[0]} finite values, one per pose, got shape {times.shape}")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"the stamp tolerance must be > 0 s, got {tolerance}")
    if est.shape[0] == 0 or len(relations) == 0:
        empty = np.zeros(0)
        return RelativePoseError(empty, empty.copy(), len(relations))
    order = np.argsort(times, kind="stable").astype(np.intp)
    i = _scan_at(times, order, relations.first, tolerance)
    j = _scan_at(times, order, relations.second, tolerance)
    found = (i >= 0) & (j >= 0)
    i, j = i[found], j[found]
    return _pair_error(relative_motion(est[i], est[j]), relations.motion[found], int(np.count_nonzero(~found)))


def align_trajectory(estimate: npt.ArrayLike, reference: npt.ArrayLike) -> FloatArray:
    """The rigid motion that moves ``estimate`` onto ``reference`` best (least squares over the positions, no scale;
    see the module docstring), as a pose (x m, y m, φ rad): a point p goes to R(φ)·p + (x, y).

    Raises:
        ValueError: trajectories that are not ``(n, 3)`` and finite or not of one length.
    """
    est = _trajectory(estimate, "the estimate")
    ref = _trajectory(reference, "the reference")
    if est.shape != ref.shape:
        raise ValueError(f"the estimate has {est.shape[0]} poses and the reference {ref.shape[0]}")
    if est.shape[0] == 0:
        return np.zeros(3)
    p_mean = est[:, :2].mean(axis=0)
    q_mean = ref[:, :2].mean(axis=0)
    p = est[:, :2] - p_mean
    q = ref[:, :2] - q_mean
    cross = float(np.sum(p[:, 0] * q[:, 1] - p[:, 1] * q[:, 0]))
    dot = float(np.sum(p[:, 0] * q[:, 0] + p[:, 1] * q[:, 1]))
    angle = math.atan2(cross, dot) if (cross or dot) else 0.0
    c, s = math.cos(angle), math.sin(angle)
    shift = q_mean - np.array([c * p_mean[0] - s * p_mean[1], s * p_mean[0] + c * p_mean[1]])
    return np.array([shift[0], shift[1], angle])


@dataclass(frozen=True)
class AbsoluteTrajectoryError(_Errors):
    """The absolute trajectory error after a rigid alignment (see the module docstring).

    Attributes:
        translation: ``(n,)`` distance of each aligned pose from the reference's, m.
        rotation: ``(n,)`` |wrap(heading difference)| of each aligned pose, rad.
        alignment: the rigid motion applied to the estimate (x m, y m, φ rad).
    """

    alignment: FloatArray

    @property
    def poses(self) -> int:
        """Number of poses."""
        return int(self.translation.size)

    @property
    def rmse(self) -> float:
        """Root mean square of the position errors, m (nan without poses): the TUM benchmark's ATE."""
        return self.translation_summary.rmse

    def describe(self) -> str:
        """``0.095 m (95 % 0.250, max 0.400, RMSE 0.120), 1.10° (95 % 2.50, max 4.00)``: mean (95th percentile,
        maximum, and the positions' root mean square)."""
        return (
            f"{self.translation_summary.describe(' m', 3, rmse=True)}, "
            f"{self.rotation_summary.describe('°', 2, math.degrees(1.0))}"
        )


def absolute_trajectory_error(estimate: npt.ArrayLike, reference: npt.ArrayLike) -> AbsoluteTrajectoryError:
    """The absolute trajectory error of ``estimate`` against ``reference`` after :func:`align_trajectory`.

    Args:
        estimate: ``(n, 3)`` estimated poses (x, y, θ), m and rad.
        reference: ``(n, 3)`` the reference poses at the same instants.

    Returns:
        The error of every pose and the alignment.

    Raises:
        ValueError: trajectories that are not ``(n, 3)`` and finite or not of one length.
    """
    est = _trajectory(estimate, "the estimate")
    ref = _trajectory(reference, "the reference")
    x, y, angle = align_trajectory(est, ref)
    c, s = math.cos(angle), math.sin(angle)
    ax = c * est[:, 0] - s * est[:, 1] + x
    ay = s * est[:, 0] + c * est[:, 1] + y
    translation = np.hypot(ax - ref[:, 0], ay - ref[:, 1])
    rotation = np.abs(wrap_angle(est[:, 2] + angle - ref[:, 2]))
    return AbsoluteTrajectoryError(translation, rotation, np.array([x, y, angle]))
