"""The slam module's walls as segments: M-space features whose line the filter estimates and whose ends it does not.

Strategy (Folkesson, Jensfelt and Christensen, IEEE T-RO 2007, "The M-Space Feature Representation for SLAM"): a wall
keeps full coordinates, its two end points in the map frame, but the filter only estimates what the scans actually
measure, the rotation and offset of its line (α, ρ). In M-space terms the filter's perturbation δx_p = (δα, δρ) is
absorbed into the feature after every update and returns to zero; the filters of this package hold (α, ρ) directly,
which is the same thing for this subspace, and this module keeps the rest: after an update each end point is
projected onto the corrected line (so the wall stays straight and its ends agree with its line), and when the laser
sees the wall farther along than its ends, the ends move out to cover what was seen (the extent only grows: a part
hidden behind a person is not a shorter wall). The along-wall position and length are not filtered; they are what the
scans have shown, carried along as the line moves.

The walls near a point are found through a grid of square cells (:attr:`WallSegments.cell`): each active wall is
listed in the cells its bounding box covers, re-listed when its ends move, so a query looks at the cells around the
point and the walls listed there, whatever the size of the map.

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
from pluto.sim.raycast import segment_distance

__all__ = ["WallSegments", "feature_segment", "project_onto_line"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


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


_Box = tuple[int, int, int, int]


class WallSegments:
    """The end points of the mapped walls, kept on the filter's lines, with a grid index of where they are.

    Wall ``i`` here is wall ``i`` of the filter (add them in the same order).

    Besides its ends (all that was seen of it, from one end to the other: what the association matches against), a
    wall keeps the pieces of it that were seen (:meth:`pieces`): a door in a corridor's wall is a gap between two
    pieces of one wall, which the filter estimates as one line, but which the saved map must leave open.

    Args:
        cell: side of the index's cells, m.
        opening: a gap at least this wide between the seen pieces of a wall stays open (a door, a passage); a
            narrower one (the clutter in front of a wall) is closed, m.

    Raises:
        ValueError: a cell that is not > 0 and finite, or an opening < 0.
    """

    def __init__(self, cell: float = 4.0, opening: float = 0.5) -> None:
        if not (math.isfinite(cell) and cell > 0):
            raise ValueError(f"cell must be > 0 and finite, got {cell}")
        if not (math.isfinite(opening) and opening >= 0):
            raise ValueError(f"opening must be >= 0 and finite, got {opening}")
        self.cell = float(cell)
        self.opening = float(opening)
        self._pieces: list[list[tuple[float, float]]] = []  # per wall: disjoint, sorted spans from its first end, m
        self._ends = np.zeros((16, 4))
        self._lines = np.zeros((16, 2))
        self._facing = np.zeros((16, 2))
        self._active = np.zeros(16, dtype=bool)
        self._count = 0
        self._live = 0
        self._grid: dict[tuple[int, int], set[int]] = {}
        self._boxes: dict[int, _Box] = {}

    def __len__(self) -> int:
        return self._count

    @property
    def active_count(self) -> int:
        """Walls still on the map."""
        return self._live

    @property
    def segments(self) -> FloatArray:
        """``(n, 4)`` ``[x1, y1, x2, y2]`` of every wall, m, map frame (a copy)."""
        return self._ends[: self._count].copy()

    def rows(self, indices: npt.ArrayLike) -> FloatArray:
        """``(k, 4)`` ``[x1, y1, x2, y2]`` of the given walls, m, map frame (a copy)."""
        out: FloatArray = self._ends[np.asarray(indices, dtype=np.intp)]
        return out

    def segment(self, index: int) -> FloatArray:
        """``(2, 2)`` the two ends of wall ``index``, m, map frame (a copy)."""
        out: FloatArray = self._ends[index].reshape(2, 2).copy()
        return out

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        """``(n,)`` whether each wall is still a wall of the map (False once merged into another), a copy."""
        return self._active[: self._count].copy()

    def is_active(self, index: int) -> bool:
        """Whether wall ``index`` is still a wall of the map."""
        return bool(self._active[index])

    def retire(self, index: int) -> None:
        """Take wall ``index`` off the map (it was merged into another); its row stays so indices do not move."""
        if self._active[index]:
            self._active[index] = False
            self._live -= 1
            self._unlist(index)

    @property
    def lines(self) -> FloatArray:
        """``(n, 2)`` the (α, ρ) each wall's ends were last put on, rad and m (a copy)."""
        return self._lines[: self._count].copy()

    def angles(self, indices: npt.ArrayLike) -> FloatArray:
        """The α of the lines the given walls' ends were last put on, rad."""
        out: FloatArray = self._lines[np.asarray(indices, dtype=np.intp), 0]
        return out

    def facing(self, indices: npt.ArrayLike) -> FloatArray:
        """``(k, 2)`` the unit normal of each given wall that points to the side it was seen from (a wall's face is
        seen from one side only: the other side of a thin wall is another face); (0, 0) where that is not known."""
        out: FloatArray = self._facing[np.asarray(indices, dtype=np.intp)]
        return out

    def line(self, index: int) -> tuple[float, float]:
        """The (α, ρ) the ends of wall ``index`` were last put on, rad and m."""
        return float(self._lines[index, 0]), float(self._lines[index, 1])

    def near(self, x: float, y: float, radius: float) -> IntArray:
        """The active walls with some part within ``radius`` of (x, y) (m), sorted; the work follows the walls
        around the point, not the map."""
        c = self.cell
        i0, i1 = math.floor((x - radius) / c), math.floor((x + radius) / c)
        j0, j1 = math.floor((y - radius) / c), math.floor((y + radius) / c)
        found: set[int] = set()
        grid = self._grid
        if (i1 - i0 + 1) * (j1 - j0 + 1) <= len(grid):
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    listed = grid.get((i, j))
                    if listed:
                        found |= listed
        else:  # a query wider than the map: the listed cells are fewer than the cells asked for
            for (i, j), listed in grid.items():
                if i0 <= i <= i1 and j0 <= j <= j1:
                    found |= listed
        if not found:
            return np.zeros(0, dtype=np.intp)
        walls = np.array(sorted(found), dtype=np.intp)
        distance = segment_distance((x, y), self._ends[walls])
        near: IntArray = walls[distance <= radius]
        return near

    def extent(self, index: int) -> tuple[float, float]:
        """(t_min, t_max) of wall ``index`` along its line, m."""
        alpha = float(self._lines[index, 0])
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t = self._ends[index].reshape(2, 2) @ d
        return float(t.min()), float(t.max())

    def add(
        self,
        alpha: float,
        rho: float,
        ends: npt.ArrayLike,
        viewer: Sequence[float] | FloatArray | None = None,
        seen: npt.ArrayLike | None = None,
    ) -> int:
        """A new wall on the line (α, ρ) over the segment ``ends`` (``(2, 2)`` map-frame points, projected on the
        line), seen from the point ``viewer`` (x, y) if given (:meth:`facing`); its one seen piece is ``seen``
        (``(2, 2)`` points, within the ends), else the whole of it. Returns its index."""
        feet = self._ordered(alpha, project_onto_line(ends, alpha, rho))
        index = self._count
        if index == self._ends.shape[0]:  # room for twice as many, so adding a wall costs O(1) on average
            self._ends = np.vstack((self._ends, np.zeros_like(self._ends)))
            self._lines = np.vstack((self._lines, np.zeros_like(self._lines)))
            self._active = np.concatenate((self._active, np.zeros_like(self._active)))
            self._facing = np.vstack((self._facing, np.zeros_like(self._facing)))
        self._ends[index] = feet.reshape(4)
        self._lines[index] = (alpha, rho)
        self._facing[index] = (0.0, 0.0)
        if viewer is not None:
            side = float(viewer[0]) * math.cos(alpha) + float(viewer[1]) * math.sin(alpha) - rho
            if side != 0.0:
                self._facing[index] = math.copysign(1.0, side) * np.array([math.cos(alpha), math.sin(alpha)])
        self._active[index] = True
        self._count += 1
        self._live += 1
        self._list(index)
        length = float(np.hypot(*(feet[1] - feet[0])))
        self._pieces.append([(0.0, length)])
        if seen is not None:
            d = np.array([-math.sin(alpha), math.cos(alpha)])
            t = project_onto_line(seen, alpha, rho) @ d - float(feet[0] @ d)
            self._pieces[index] = [(max(0.0, float(t.min())), min(length, float(t.max())))]
        return index

    def extend(self, index: int, ends: npt.ArrayLike) -> bool:
        """Move the ends of wall ``index`` out to cover the seen segment ``ends`` (``(2, 2)`` map-frame points,
        projected on the wall's line), and count it as a seen piece; returns whether the ends moved."""
        alpha, rho = (float(v) for v in self._lines[index])
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t_now = self._ends[index].reshape(2, 2) @ d
        t_seen = project_onto_line(ends, alpha, rho) @ d
        first = float(t_now.min())
        lo, hi = min(first, float(t_seen.min())), max(float(t_now.max()), float(t_seen.max()))
        pieces = self._pieces[index]
        if lo < first:  # the pieces are counted from the first end, which moves back
            pieces[:] = [(a + first - lo, b + first - lo) for a, b in pieces]
        self._add_piece(pieces, float(t_seen.min()) - lo, float(t_seen.max()) - lo)
        if lo >= first and hi <= t_now.max():
            return False
        n = np.array([math.cos(alpha), math.sin(alpha)])
        self._ends[index] = np.concatenate((rho * n + lo * d, rho * n + hi * d))
        self._list(index)
        return True

    def absorb(self, keep: int, drop: int) -> bool:
        """Extend wall ``keep`` by the seen pieces of wall ``drop`` (merged into it); returns whether its ends
        moved. ``drop`` stays as it is (:meth:`retire` it)."""
        moved = False
        for piece in self.pieces(drop):
            moved = self.extend(keep, piece.reshape(2, 2)) or moved
        return moved

    def pieces(self, index: int) -> FloatArray:
        """``(k, 4)`` ``[x1, y1, x2, y2]`` of the seen pieces of wall ``index`` along its line, m, map frame."""
        ends = self._ends[index].reshape(2, 2)
        length = float(np.hypot(*(ends[1] - ends[0])))
        alpha = float(self._lines[index, 0])
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        spans = np.array(
            [(min(a, length), min(b, length)) for a, b in self._pieces[index] if a < length] or [(0.0, 0.0)]
        )
        out: FloatArray = np.column_stack((ends[0] + spans[:, :1] * d, ends[0] + spans[:, 1:] * d))
        return out

    def _add_piece(self, pieces: list[tuple[float, float]], a: float, b: float) -> None:
        """Add the span [a, b] to the sorted, disjoint ``pieces``, joining those less than :attr:`opening` apart."""
        gap = self.opening
        kept: list[tuple[float, float]] = []
        for lo, hi in pieces:
            if hi + gap < a or lo - gap > b:
                kept.append((lo, hi))
            else:
                a, b = min(a, lo), max(b, hi)
        kept.append((a, b))
        kept.sort()
        pieces[:] = kept

    def realign(self, lines: Iterable[tuple[int, npt.ArrayLike]]) -> None:
        """Put the ends of the given walls on their corrected lines: (index, (α, ρ)) pairs from the filter."""
        # scalar arithmetic: a scan realigns tens of walls, and numpy's per-call overhead on 2x2 arrays is most of
        # the cost (this is project_onto_line and _ordered written out)
        for index, line in lines:
            alpha, rho = (float(v) for v in np.asarray(line, dtype=np.float64))
            c, s = math.cos(alpha), math.sin(alpha)
            x1, y1, x2, y2 = self._ends[index].tolist()
            e1, e2 = x1 * c + y1 * s - rho, x2 * c + y2 * s - rho
            x1, y1, x2, y2 = x1 - e1 * c, y1 - e1 * s, x2 - e2 * c, y2 - e2 * s
            if -x1 * s + y1 * c > -x2 * s + y2 * c:
                x1, y1, x2, y2 = x2, y2, x1, y1
            self._ends[index] = (x1, y1, x2, y2)
            self._lines[index] = (alpha, rho)
            fx, fy = self._facing[index].tolist()
            if fx or fy:  # the same side, on the new line's normal (which may have turned by π)
                self._facing[index] = (c, s) if fx * c + fy * s >= 0.0 else (-c, -s)
            self._list(index)

    def transform(self, index: int, motion: Sequence[float] | FloatArray) -> None:
        """Move wall ``index`` rigidly: its ends, line and facing turned by θ about the map's origin and shifted by
        (x, y) of ``motion`` (m, rad); its seen pieces, counted along it from its first end, go with it."""
        x, y, theta = (float(v) for v in motion[:3])
        c, s = math.cos(theta), math.sin(theta)
        x1, y1, x2, y2 = self._ends[index].tolist()
        self._ends[index] = (c * x1 - s * y1 + x, s * x1 + c * y1 + y, c * x2 - s * y2 + x, s * x2 + c * y2 + y)
        alpha = float(self._lines[index, 0]) + theta
        rho = float(self._lines[index, 1]) + x * math.cos(alpha) + y * math.sin(alpha)
        self._lines[index] = (alpha, rho)
        fx, fy = self._facing[index].tolist()
        self._facing[index] = (c * fx - s * fy, s * fx + c * fy)
        self._list(index)

    def transform_all(self, motions: npt.ArrayLike) -> None:
        """:meth:`transform` every wall at once: ``motions`` ``(n, 3)`` holds each wall's (x, y, θ), m and rad."""
        m = np.asarray(motions, dtype=np.float64).reshape(-1, 3)
        n = self._count
        if m.shape[0] != n:
            raise ValueError(f"{m.shape[0]} motions for {n} walls")
        c, s = np.cos(m[:, 2]), np.sin(m[:, 2])
        e = self._ends[:n]
        x1 = c * e[:, 0] - s * e[:, 1] + m[:, 0]
        y1 = s * e[:, 0] + c * e[:, 1] + m[:, 1]
        x2 = c * e[:, 2] - s * e[:, 3] + m[:, 0]
        y2 = s * e[:, 2] + c * e[:, 3] + m[:, 1]
        self._ends[:n] = np.column_stack((x1, y1, x2, y2))
        alpha = self._lines[:n, 0] + m[:, 2]
        rho = self._lines[:n, 1] + m[:, 0] * np.cos(alpha) + m[:, 1] * np.sin(alpha)
        self._lines[:n] = np.column_stack((alpha, rho))
        f = self._facing[:n]
        self._facing[:n] = np.column_stack((c * f[:, 0] - s * f[:, 1], s * f[:, 0] + c * f[:, 1]))
        for index in np.flatnonzero(self._active[:n]).tolist():
            self._list(index)

    def to_wall_map(self, cell: float = 2.0) -> WallMap:
        """The active walls as the pose module's map (to localize on what was mapped)."""
        return WallMap.from_segments(self._ends[: self._count][self.active], cell=cell)

    def _box(self, index: int) -> _Box:
        """The cells (i0, j0, i1, j1) covered by the bounding box of wall ``index``."""
        x1, y1, x2, y2 = (float(v) for v in self._ends[index])
        c = self.cell
        return (
            math.floor(min(x1, x2) / c),
            math.floor(min(y1, y2) / c),
            math.floor(max(x1, x2) / c),
            math.floor(max(y1, y2) / c),
        )

    def _list(self, index: int) -> None:
        """List an active wall in the cells of its bounding box (again, if its ends moved to other cells)."""
        if not self._active[index]:
            return
        box = self._box(index)
        if self._boxes.get(index) == box:
            return
        self._unlist(index)
        i0, j0, i1, j1 = box
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                self._grid.setdefault((i, j), set()).add(index)
        self._boxes[index] = box

    def _unlist(self, index: int) -> None:
        box = self._boxes.pop(index, None)
        if box is None:
            return
        i0, j0, i1, j1 = box
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                listed = self._grid.get((i, j))
                if listed is not None:
                    listed.discard(index)
                    if not listed:
                        del self._grid[(i, j)]

    @staticmethod
    def _ordered(alpha: float, feet: FloatArray) -> FloatArray:
        """The two feet with the smaller tangential coordinate first."""
        d = np.array([-math.sin(alpha), math.cos(alpha)])
        t = feet @ d
        return feet if t[0] <= t[1] else feet[::-1].copy()
