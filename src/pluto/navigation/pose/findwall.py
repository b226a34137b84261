"""The seed's "find wall": the longest wall in front of the laser, as the pose module's status reports it.

Strategy (spec/pluto-software.txt §7.1): a wall is in front when the normal of its line, as seen from the laser,
points within ``sector`` of straight ahead (|γ| <= sector); of those the longest segment wins. The status carries the
number of its scan points and 6 numbers: γ, ρ and the 2x2 covariance of (γ, ρ), row-major.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.features import LineFeature

__all__ = ["FoundWall", "find_wall"]


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
        gamma = (feature.alpha + math.pi) % (2.0 * math.pi) - math.pi
        if abs(gamma) <= sector and (best is None or feature.length > best.length):
            best = feature
    if best is None:
        return None
    gamma = (best.alpha + math.pi) % (2.0 * math.pi) - math.pi
    return FoundWall(best.points, gamma, best.r, best.covariance, best)
