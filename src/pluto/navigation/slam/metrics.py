"""How good an estimated trajectory is: the relative pose error against a reference trajectory.

Strategy (Kümmerle et al., "On measuring the accuracy of SLAM algorithms", 2009; reference/estimation.md): an
estimate is judged by the motions between pairs of its poses, not by the poses themselves, so an error early in a
run is counted once where it happens instead of in every later pose, and the map's frame (where the estimate
started, how it is turned) does not matter. For a pair of poses (i, j) with estimated poses e_i, e_j and reference
poses r_i, r_j (planar: x, y, θ), the relative motions are δ = e_i⁻¹·e_j and δ* = r_i⁻¹·r_j and the error is
ε = δ·δ*⁻¹; its translational error is |t(ε)| (m) and its rotational error |θ(ε)| (rad, reported in degrees).
Both are summarised by their mean and standard deviation over the pairs.

Which pairs (:func:`pose_pairs`):

- ``distance=None``: consecutive poses (i, i + 1): the error of each step, what an incremental estimator adds;
- ``distance=D``: for every pose i, the first pose j after it at least D metres of travel along the reference
  trajectory later (pairs with no such j are left out): the drift over D metres, where dead reckoning and a
  map-corrected estimate differ most (the same idea as the KITTI odometry benchmark's segments, on a scale that fits
  indoors).

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["RelativePoseError", "pose_pairs", "relative_motion", "relative_pose_error"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def _trajectory(poses: npt.ArrayLike, what: str) -> FloatArray:
    out = np.asarray(poses, dtype=np.float64)
    if out.ndim != 2 or out.shape[1] != 3 or not np.all(np.isfinite(out)):
        raise ValueError(f"{what} must be an (n, 3) array of finite (x, y, θ), got shape {out.shape}")
    return out


def relative_motion(first: FloatArray, second: FloatArray) -> FloatArray:
    """first⁻¹·second for ``(k, 3)`` arrays of planar poses (x m, y m, θ rad): the motion from each first pose to
    its second, in the first's frame, ``(k, 3)`` (θ wrapped to [-π, π))."""
    dx = second[:, 0] - first[:, 0]
    dy = second[:, 1] - first[:, 1]
    c, s = np.cos(first[:, 2]), np.sin(first[:, 2])
    dtheta = np.mod(second[:, 2] - first[:, 2] + math.pi, 2.0 * math.pi) - math.pi
    return np.column_stack((c * dx + s * dy, -s * dx + c * dy, dtheta))


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
class RelativePoseError:
    """The relative pose error of a trajectory.

    Attributes:
        translation: ``(k,)`` translational error of each pair, m.
        rotation: ``(k,)`` rotational error of each pair, rad.
    """

    translation: FloatArray
    rotation: FloatArray

    @property
    def pairs(self) -> int:
        """Number of pairs."""
        return int(self.translation.size)

    @property
    def translation_mean(self) -> float:
        """m (nan without pairs)."""
        return float(self.translation.mean()) if self.pairs else math.nan

    @property
    def translation_std(self) -> float:
        """m (nan without pairs)."""
        return float(self.translation.std()) if self.pairs else math.nan

    @property
    def rotation_mean_deg(self) -> float:
        """Degrees (nan without pairs)."""
        return math.degrees(float(self.rotation.mean())) if self.pairs else math.nan

    @property
    def rotation_std_deg(self) -> float:
        """Degrees (nan without pairs)."""
        return math.degrees(float(self.rotation.std())) if self.pairs else math.nan

    def describe(self) -> str:
        """``0.031 ± 0.026 m, 0.84 ± 0.90°`` (mean ± std)."""
        return (
            f"{self.translation_mean:.3f} ± {self.translation_std:.3f} m, "
            f"{self.rotation_mean_deg:.2f} ± {self.rotation_std_deg:.2f}°"
        )


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
    delta = relative_motion(est[i], est[j])
    expected = relative_motion(ref[i], ref[j])
    # ε = δ·δ*⁻¹: δ*⁻¹ = (-R(-θ*)·t*, -θ*), so t(ε) = t - R(θ - θ*)·t* and θ(ε) = θ - θ*
    turn = delta[:, 2] - expected[:, 2]
    c, s = np.cos(turn), np.sin(turn)
    ex = delta[:, 0] - (c * expected[:, 0] - s * expected[:, 1])
    ey = delta[:, 1] - (s * expected[:, 0] + c * expected[:, 1])
    rotation = np.abs(np.mod(turn + math.pi, 2.0 * math.pi) - math.pi)
    return RelativePoseError(np.hypot(ex, ey), rotation)
