"""The original's "find wall" (docs/design.md): the longest wall in front of the laser, as the pose module's status
reports it.

Strategy (docs/design.md, "pose and slam"): a wall is in front when the normal of its line, as seen from the laser,
points within ``sector`` of straight ahead (|γ| <= sector); of those the longest segment wins. The status carries the
number of its scan points and 6 numbers: γ, ρ and the 2x2 covariance of (γ, ρ), row-major.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluto import msgs
from pluto.geometry import wrap_angle
from pluto.navigation.pose.features import LineFeature

__all__ = ["FoundWall", "WallReading", "find_wall", "wall_of"]


@dataclass(frozen=True)
class FoundWall:
    """The longest wall in front.

    Attributes:
        points: scan points on the wall.
        gamma: angle of the wall's normal in the laser frame, rad (0: the wall faces the laser squarely).
        rho: distance from the laser to the wall's line, m.
        covariance: 2x2 covariance of (γ, ρ): rad², m·rad, m².
        feature: the line it came from.
    """

    points: int
    gamma: float
    rho: float
    covariance: npt.NDArray[np.float64]
    feature: LineFeature

    def data(self) -> list[float]:
        """The 6 numbers of the status's data vector: γ, ρ and the covariance row-major."""
        return [self.gamma, self.rho, *(float(v) for v in self.covariance.ravel())]


def find_wall(features: Sequence[LineFeature], *, sector: float = math.radians(30.0)) -> FoundWall | None:
    """The longest of ``features`` whose normal is within ``sector`` (rad) of straight ahead, or None."""
    best: LineFeature | None = None
    for feature in features:
        gamma = wrap_angle(feature.alpha)
        if abs(gamma) <= sector and (best is None or feature.length > best.length):
            best = feature
    if best is None:
        return None
    gamma = wrap_angle(best.alpha)
    return FoundWall(best.points, gamma, best.r, best.covariance, best)


@dataclass(frozen=True)
class WallReading:
    """An answer of "find wall" as a client reads it from ``pose/status`` (what :meth:`FoundWall.data` wrote).

    Attributes:
        points: scan points on the wall (0: no wall in front).
        gamma: angle of the wall's normal in the laser frame, rad.
        rho: distance from the laser to the wall's line, m.
        covariance: (γ, ρ) covariance, row-major 2x2: rad², m·rad, m·rad, m².
    """

    points: int
    gamma: float
    rho: float
    covariance: tuple[float, float, float, float]

    @property
    def gamma_std(self) -> float:
        """Standard deviation of γ, rad."""
        return math.sqrt(max(self.covariance[0], 0.0))

    @property
    def rho_std(self) -> float:
        """Standard deviation of ρ, m."""
        return math.sqrt(max(self.covariance[3], 0.0))


def wall_of(status: msgs.FVectorState) -> WallReading:
    """The answer a ``pose/status`` carries (element[1] points, data γ, ρ and the covariance); NaN for what is
    missing."""
    points = int(status.element[1]) if len(status.element) > 1 else 0
    d = [*(float(v) for v in status.data), *([math.nan] * 6)][:6]
    return WallReading(max(points, 0), d[0], d[1], (d[2], d[3], d[4], d[5]))
