"""Odometry calibration from one wall seen again and again while the robot drives (the original's pose_i).

Strategy (docs/design.md, "pose and slam"): a fixed wall is a reference the odometry cannot fool. With the wall's line
(γ_k, ρ_k) measured in the laser frame at dead-reckoned laser poses (x_k, y_k, θ_k):

* **Distance scale.** Driving toward or away from the wall, ρ_k = ρ₀ - c·d_k, where d_k is the odometry's
  displacement since the first sighting along the wall's normal (the direction θ + γ, averaged over the sightings)
  and c the true distance per odometry metre (1: exact; the factor to multiply the odometry's distances by).
* **Heading.** The wall's bearing turns against the robot: γ_k = γ₀ - g·Δθ_k - b·s_k, where Δθ_k is the odometry's
  heading change and s_k the path length since the first sighting; g is the true rotation per odometry radian (the
  gain, 1: exact) and b a heading drift per metre travelled (the bias, rad/m: e.g. unequal wheels). g needs the robot
  to turn, b to travel: a term whose input barely varies is left out and reported as NaN.

Both are weighted least squares (weights 1/Var ρ_k, 1/Var γ_k from the line fits); the standard deviations come from
the inverse normal matrix, scaled up by the reduced chi-square when the residuals are larger than the weights say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.findwall import FoundWall

__all__ = ["OdometryCalibration", "WallCalibration", "WallSighting", "fit_distance_scale", "fit_heading"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WallSighting:
    """One measurement of the reference wall.

    Attributes:
        pose: the dead-reckoned laser pose (x, y, θ) at the scan, m and rad (θ continuous).
        gamma: angle of the wall's normal in the laser frame, rad.
        rho: distance from the laser to the wall's line, m.
        var_gamma: variance of ``gamma``, rad².
        var_rho: variance of ``rho``, m².
        distance: odometry path length since the start (m), or None to take it from the poses.
    """

    pose: tuple[float, float, float]
    gamma: float
    rho: float
    var_gamma: float
    var_rho: float
    distance: float | None = None


@dataclass(frozen=True)
class OdometryCalibration:
    """Odometry correction factors with their standard deviations (NaN: not observable from the sightings).

    Attributes:
        distance_scale: true distance per odometry metre.
        distance_scale_std: its standard deviation.
        heading_gain: true rotation per odometry radian.
        heading_gain_std: its standard deviation.
        heading_bias: heading drift per metre travelled that the odometry missed, rad/m.
        heading_bias_std: its standard deviation, rad/m.
        samples: number of sightings.
        rho_rms: rms residual of the distance fit, m.
        gamma_rms: rms residual of the heading fit, rad.
    """

    distance_scale: float
    distance_scale_std: float
    heading_gain: float
    heading_gain_std: float
    heading_bias: float
    heading_bias_std: float
    samples: int
    rho_rms: float
    gamma_rms: float


def _weighted_fit(a: FloatArray, b: FloatArray, var: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """Least squares of a·p = b with weights 1/var: parameters, their standard deviations, rms residual."""
    w = 1.0 / np.maximum(var, 1e-18)
    aw = a * w[:, None]
    normal = a.T @ aw
    cov = np.linalg.inv(normal)
    p = cov @ (aw.T @ b)
    residual = b - a @ p
    dof = a.shape[0] - a.shape[1]
    chi2 = float(residual @ (w * residual))
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    std = np.sqrt(np.diag(cov) * scale)
    return p, std, float(np.sqrt(np.mean(residual * residual)))


def _path(sightings: Sequence[WallSighting]) -> FloatArray:
    if all(s.distance is not None for s in sightings):
        d: FloatArray = np.array([s.distance for s in sightings], dtype=np.float64)
        return d - float(d[0])
    xy = np.array([s.pose[:2] for s in sightings])
    step = np.diff(xy, axis=0)
    path: FloatArray = np.concatenate(([0.0], np.cumsum(np.hypot(step[:, 0], step[:, 1]))))
    return path


def fit_distance_scale(sightings: Sequence[WallSighting], *, min_travel: float = 0.5) -> tuple[float, float, float]:
    """The distance scale c of ρ_k = ρ₀ - c·d_k (see the module docstring).

    Returns:
        (c, its standard deviation, rms residual in m); NaNs when the robot moved less than ``min_travel`` (m)
        along the wall's normal, or there are fewer than 3 sightings.
    """
    if len(sightings) < 3:
        return math.nan, math.nan, math.nan
    pose = np.array([s.pose for s in sightings])
    gamma = np.array([s.gamma for s in sightings])
    normal = pose[:, 2] + gamma
    direction = math.atan2(float(np.sin(normal).mean()), float(np.cos(normal).mean()))
    d = (pose[:, 0] - pose[0, 0]) * math.cos(direction) + (pose[:, 1] - pose[0, 1]) * math.sin(direction)
    if float(d.max() - d.min()) < min_travel:
        return math.nan, math.nan, math.nan
    rho = np.array([s.rho for s in sightings])
    var = np.array([s.var_rho for s in sightings])
    a = np.stack((np.ones_like(d), -d), axis=1)
    p, std, rms = _weighted_fit(a, rho, var)
    return float(p[1]), float(std[1]), rms


def fit_heading(
    sightings: Sequence[WallSighting], *, min_turn: float = 0.2, min_travel: float = 1.0
) -> tuple[float, float, float, float, float]:
    """The heading gain g and drift b of γ_k = γ₀ - g·Δθ_k - b·s_k (see the module docstring).

    Args:
        sightings: the measurements, in time order.
        min_turn: the gain is fitted only if the odometry heading spans at least this, rad.
        min_travel: the drift is fitted only if the path spans at least this, m.

    Returns:
        (g, std g, b, std b, rms residual in rad), NaN for what was not fitted.
    """
    if len(sightings) < 3:
        return math.nan, math.nan, math.nan, math.nan, math.nan
    theta = np.array([s.pose[2] for s in sightings])
    dtheta = theta - theta[0]
    gamma = np.unwrap(np.array([s.gamma for s in sightings]))
    var = np.array([s.var_gamma for s in sightings])
    s_k = _path(sightings)
    columns = [np.ones_like(dtheta)]
    fit_gain = float(dtheta.max() - dtheta.min()) >= min_turn
    fit_bias = float(s_k.max() - s_k.min()) >= min_travel
    if fit_gain:
        columns.append(-dtheta)
    if fit_bias:
        columns.append(-s_k)
    a = np.stack(columns, axis=1)
    if a.shape[0] <= a.shape[1] or np.linalg.cond(a.T @ a) > 1e12:
        return math.nan, math.nan, math.nan, math.nan, math.nan
    # with the gain left out, the turn the odometry saw still has to be taken off at gain 1
    b = gamma if fit_gain else gamma + dtheta
    p, std, rms = _weighted_fit(a, b, var)
    g, g_std = (float(p[1]), float(std[1])) if fit_gain else (math.nan, math.nan)
    k = 2 if fit_gain else 1
    bias, bias_std = (float(p[k]), float(std[k])) if fit_bias else (math.nan, math.nan)
    return g, g_std, bias, bias_std, rms


@dataclass
class WallCalibration:
    """Collects sightings of the reference wall and fits the odometry's corrections.

    Feed it the wall found in each scan (:meth:`add_found`, :meth:`add`), then call :meth:`result`.
    """

    sightings: list[WallSighting] = field(default_factory=list)

    def add(
        self,
        pose: Sequence[float],
        gamma: float,
        rho: float,
        covariance: npt.ArrayLike,
        distance: float | None = None,
    ) -> None:
        """One sighting: dead-reckoned laser pose (x, y, θ or 6-/8-D), the wall's (γ, ρ), its 2x2 covariance and
        optionally the odometry path length so far (m).

        Raises:
            ValueError: a value is not finite or the covariance is not 2x2.
        """
        c = np.asarray(covariance, dtype=np.float64).reshape(-1)
        if c.shape != (4,):
            raise ValueError("the covariance must be 2x2")
        xy_theta = (float(pose[0]), float(pose[1]), float(pose[2] if len(pose) == 3 else pose[3]))
        values = (*xy_theta, gamma, rho, float(c[0]), float(c[3]))
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"a sighting must be finite, got {values}")
        self.sightings.append(WallSighting(xy_theta, float(gamma), float(rho), float(c[0]), float(c[3]), distance))

    def add_found(self, pose: Sequence[float], wall: FoundWall, distance: float | None = None) -> None:
        """One sighting from :func:`~pluto.navigation.pose.findwall.find_wall`."""
        self.add(pose, wall.gamma, wall.rho, wall.covariance, distance)

    def result(self) -> OdometryCalibration:
        """The fitted corrections (NaN where the sightings do not determine them)."""
        scale, scale_std, rho_rms = fit_distance_scale(self.sightings)
        gain, gain_std, bias, bias_std, gamma_rms = fit_heading(self.sightings)
        return OdometryCalibration(
            scale, scale_std, gain, gain_std, bias, bias_std, len(self.sightings), rho_rms, gamma_rms
        )
