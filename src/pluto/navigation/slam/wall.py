"""The slam module's walls as segments: M-space features whose line the filter estimates and whose ends it does not.

Strategy (Folkesson, Jensfelt and Christensen, IEEE T-RO 2007, as summarised in reference/estimation.md): a wall
keeps full coordinates, its two end points in the map frame, but the filter only estimates what the scans actually
measure, the rotation and offset of its line (α, ρ). In M-space terms the filter's perturbation δx_p = (δα, δρ) is
absorbed into the feature after every update and returns to zero; the filters of this package hold (α, ρ) directly,
which is the same thing for this subspace, and this module keeps the rest: after an update each end point is
projected onto the corrected line (so the wall stays straight and its ends agree with its line), and when the laser
sees the wall farther along than its ends, the ends move out to cover what was seen (the extent only grows: a part
hidden behind a person is not a shorter wall). The along-wall position and length are not filtered; they are what the
scans have shown, carried along as the line moves.

A point p on the line p·n = ρ (n = (cos α, sin α)) has the tangential coordinate t = p·d, d = (-sin α, cos α);
p = ρ·n + t·d.

Nothing here reads a clock, the bus or a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.features import LineFeature
from pluto.navigation.pose.map import WallMap

__all__ = ["WallSegments", "feature_segment", "project_onto_line"]

FloatArray = npt.NDArray[np.float64]


def project_onto_line(points: npt.ArrayLike, alpha: float, rho: float) -> FloatArray:
    """The feet of ``(k, 2)`` points (m) on the line p·(cos α, sin α) = ρ (rad, m), ``(k, 2)``."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    n = np.array([math.cos(alpha), math.sin(alpha)])
    out: FloatArray = p - np.outer(p @ n - rho, n)
    return out


def feature_segment(pose: Sequence[float] | FloatArray, feature: LineFeature) -> FloatArray:
    """A feature's end points (laser frame) in the map frame, seen from the laser at ``pose`` (x, y, θ): ``(2, 2)``."""
    x, y, theta = float(pose[0]), float(pose[1]), float(pose[2])
    c, s = math.cos(theta), math.sin(theta)
    ends = np.array([feature.start, feature.end], dtype=np.float64)
    return np.column_stack((x + c * ends[:, 0] - s * ends[:, 1], y + s * ends[:, 0] + c * ends[:, 1]))


class WallSegments:
    """The end points of the mapped walls, kept on the filter's lines.

    Wall ``i`` here is wall ``i`` of the filter (add them in the same order).
    """

    def __init__(self) -> None:
        self._ends = np.zeros((0, 4))
        self._lines = np.zeros((0, 2))
        self._active = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return int(self._ends.shape[0])

    @property
    def segments(self) -> FloatArray:
        """``(n, 4)`` ``[x1, y1, x2, y2]`` of every wall, m, map frame (a copy)."""
        return self._ends.copy()

    def segment(self, index: int) -> FloatArray:
        """``(2, 2)`` the two ends of wall ``index``, m, map frame (a copy)."""
        out: FloatArray = self._ends[index].reshape(2, 2).copy()
        return out

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        """``(n,)`` whether each wall is still a wall of the map (False once merged into another), a copy."""
        return self._active.copy()

    def retire(self, index: int) -> None:
        """Take wall ``index`` off the map (it was merged into another); its row stays so indices do not move."""
        self._active[index] = False

    @property
    def lines(self) -> FloatArray:
        """``(n, 2)`` the (α, ρ) each wall's ends were last put on, rad and m (a copy)."""
        return self._lines.copy()

    def extent(self, index: int) -> tuple[float, float]:
        """(t_min, t_max) of wall ``index`` along its line, m."""
        alpha = float(self._lines[index, 0])
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t = self._ends[index].reshape(2, 2) @ d
        return float(t.min()), float(t.max())

    def add(self, alpha: float, rho: float, ends: npt.ArrayLike) -> int:
        """A new wall on the line (α, ρ) over the segment ``ends`` (``(2, 2)`` map-frame points, projected on the
        line); returns its index."""
        feet = self._ordered(alpha, project_onto_line(ends, alpha, rho))
        self._ends = np.vstack((self._ends, feet.reshape(1, 4)))
        self._lines = np.vstack((self._lines, [alpha, rho]))
        self._active = np.append(self._active, True)
        return len(self) - 1

    def extend(self, index: int, ends: npt.ArrayLike) -> bool:
        """Move the ends of wall ``index`` out to cover the seen segment ``ends`` (``(2, 2)`` map-frame points,
        projected on the wall's line); returns whether they moved."""
        alpha, rho = (float(v) for v in self._lines[index])
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t_now = self._ends[index].reshape(2, 2) @ d
        t_seen = project_onto_line(ends, alpha, rho) @ d
        lo, hi = min(t_now.min(), t_seen.min()), max(t_now.max(), t_seen.max())
        if lo >= t_now.min() and hi <= t_now.max():
            return False
        n = np.array([math.cos(alpha), math.sin(alpha)])
        self._ends[index] = np.concatenate((rho * n + lo * d, rho * n + hi * d))
        return True

    def realign(self, lines: Iterable[tuple[int, npt.ArrayLike]]) -> None:
        """Put the ends of the given walls on their corrected lines: (index, (α, ρ)) pairs from the filter."""
        for index, line in lines:
            alpha, rho = (float(v) for v in np.asarray(line, dtype=np.float64))
            feet = project_onto_line(self._ends[index], alpha, rho)
            self._ends[index] = self._ordered(alpha, feet).reshape(4)
            self._lines[index] = (alpha, rho)

    def to_wall_map(self, cell: float = 2.0) -> WallMap:
        """The active walls as the pose module's map (to localize on what was mapped)."""
        return WallMap.from_segments(self._ends[self._active], cell=cell)

    @staticmethod
    def _ordered(alpha: float, feet: FloatArray) -> FloatArray:
        """The two feet with the smaller tangential coordinate first."""
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t = feet @ d
        return feet if t[0] <= t[1] else feet[::-1].copy()
