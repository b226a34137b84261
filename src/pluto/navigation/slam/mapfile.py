"""The slam module's map as a map file: the simulator's world format, walls with their uncertainty.

Strategy: a saved map is an ordinary world file (:mod:`pluto.sim.world`, format version 1), so the simulator, the
pose module and any tool that reads worlds take it as it is; nothing reads "slam maps" specially. Each active wall
of the map becomes a ``<wall>`` whose ends are the filter's current line over what the scans saw of it
(:class:`~pluto.navigation.slam.wall.WallSegments`), and whose ``sigma_angle`` and ``sigma_offset`` are its marginal
uncertainty: the map format gives a wall's direction and its position across itself at its midpoint, and the
filter holds (α, ρ) with covariance C. With t_m the tangential coordinate of the midpoint, the offset across the
wall there is d = ρ - t_m·α (to first order), so σ_angle² = C_αα and σ_offset² = C_ρρ - 2·t_m·C_αρ + t_m²·C_αα: the
inverse of what :class:`~pluto.navigation.pose.map.WallMap` does when it reads them.

Writing is atomic (:func:`write_map`): the text goes to a temporary file in the map's own folder, is flushed to the
disk, and replaces the old map with one rename, so a map is never half written, even when the process is killed or
the machine loses power while saving; the old map stays until the new one is complete. The text is checked with
the world parser before anything is written, so a saved map always loads.

Nothing here reads a clock or the bus; :func:`write_map` is the only function that touches the file system.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import numpy.typing as npt

from pluto.navigation.slam.core import WallSlam
from pluto.sim.world import FORMAT_VERSION, parse_world

__all__ = ["MIN_WALL_LENGTH", "MappedWall", "line_sigmas", "map_walls", "save_map", "world_xml", "write_map"]

FloatArray = npt.NDArray[np.float64]

MIN_WALL_LENGTH = 1e-3
"""Walls shorter than this (m) are left out: the map format refuses a wall of zero length, and a wall that short
was never seen along its length."""


@dataclass(frozen=True)
class MappedWall:
    """A wall of a saved map.

    Attributes:
        segment: ``(x1, y1, x2, y2)``, m, map frame.
        sigma_angle: std dev of its direction, rad.
        sigma_offset: std dev of its position across itself at its midpoint, m.
    """

    segment: tuple[float, float, float, float]
    sigma_angle: float = 0.0
    sigma_offset: float = 0.0

    @property
    def length(self) -> float:
        """m."""
        x1, y1, x2, y2 = self.segment
        return math.hypot(x2 - x1, y2 - y1)


def line_sigmas(alpha: float, segment: Sequence[float], covariance: npt.ArrayLike) -> tuple[float, float]:
    """(σ_angle rad, σ_offset m) of a wall on the line with normal angle ``alpha`` (rad) over ``segment``
    ``(x1, y1, x2, y2)`` (m), from the 2x2 covariance of its (α, ρ).

    The sign of the normal does not matter: with the opposite one both t_m and the offset change sign, and their
    variances do not.
    """
    c = np.asarray(covariance, dtype=np.float64).reshape(2, 2)
    x1, y1, x2, y2 = (float(v) for v in segment)
    tm = -0.5 * (x1 + x2) * math.sin(alpha) + 0.5 * (y1 + y2) * math.cos(alpha)
    var_angle = float(c[0, 0])
    var_offset = float(c[1, 1] - 2.0 * tm * c[0, 1] + tm * tm * c[0, 0])
    # rounding can leave a variance a hair below zero when it is really zero
    return math.sqrt(max(var_angle, 0.0)), math.sqrt(max(var_offset, 0.0))


def map_walls(slam: WallSlam) -> list[MappedWall]:
    """The seen pieces of the map's active walls (:meth:`WallSegments.pieces`: a door stays open), after merging the
    walls that are one (:meth:`WallSlam.merge_duplicates`), on the filter's current lines (:meth:`WallSlam.realign`),
    with their marginal uncertainty; pieces shorter than :data:`MIN_WALL_LENGTH` are left out."""
    slam.merge_duplicates()
    slam.realign()
    active = slam.segments.active
    walls: list[MappedWall] = []
    for index in np.flatnonzero(active).tolist():
        state, covariance = slam.filter.marginal([index])
        for piece in slam.segments.pieces(index).tolist():
            wall = MappedWall((piece[0], piece[1], piece[2], piece[3]))
            if wall.length < MIN_WALL_LENGTH:
                continue
            sigma_angle, sigma_offset = line_sigmas(float(state[3]), piece, covariance[3:5, 3:5])
            walls.append(MappedWall(wall.segment, sigma_angle, sigma_offset))
    return walls


def _number(value: float, digits: str) -> str:
    """A finite number as the map format writes it; -0 as 0."""
    if not math.isfinite(value):
        raise ValueError(f"a map holds finite numbers only, got {value}")
    text = format(value, digits)
    return "0" if float(text) == 0.0 else text


def world_xml(
    walls: Sequence[MappedWall],
    *,
    name: str = "slam",
    description: str = "",
    start: tuple[float, float, float] | None = None,
) -> str:
    """The map file's text: a ``<world>`` of format version 1 holding ``walls`` (unnamed).

    Coordinates are written to 0.1 mm, sigmas to 4 significant digits.

    Args:
        walls: the walls.
        name: the world's name.
        description: free text (where and when the map was made).
        start: a robot start pose (x m, y m, θ rad) for the simulator, or None.

    Raises:
        ValueError: an empty name, a wall of zero length, or a value that is not finite.
    """
    if not name.strip():
        raise ValueError("a map needs a name")
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<world name={quoteattr(name)} version={quoteattr(FORMAT_VERSION)}>",
    ]
    if description:
        lines.append(f"  <description>{escape(description)}</description>")
    if start is not None:
        x, y, theta = (_number(v, ".4f") for v in start)
        lines.append(f'  <start x="{x}" y="{y}" theta="{theta}"/>')
    lines.append("  <walls>")
    for wall in walls:
        x1, y1, x2, y2 = (_number(v, ".4f") for v in wall.segment)
        if x1 == x2 and y1 == y2:
            raise ValueError(f"a wall of zero length at ({x1}, {y1})")
        sa, so = _number(wall.sigma_angle, ".4g"), _number(wall.sigma_offset, ".4g")
        lines.append(f'    <wall x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" sigma_angle="{sa}" sigma_offset="{so}"/>')
    lines += ["  </walls>", "</world>", ""]
    return "\n".join(lines)


def write_map(path: str | os.PathLike[str], text: str) -> Path:
    """Write a map file atomically: the whole new text, or the old file untouched.

    The text is parsed as a world first (a map that would not load is never written), then written to a temporary
    file in the same folder (a rename is atomic only within one file system), flushed and synced to the disk, and
    renamed over ``path``; the folder is synced too so the rename itself survives a power cut. The folder is
    created if needed.

    Returns:
        The absolute path written.

    Raises:
        pluto.errors.MapError: ``text`` is not a valid map.
        OSError: the folder or the file cannot be written (the old file, if any, is unchanged).
    """
    target = Path(path).expanduser().absolute()
    parse_world(text, os.fspath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(target.parent)
    return target


def save_map(
    slam: WallSlam,
    path: str | os.PathLike[str],
    *,
    name: str = "slam",
    description: str = "",
    start: tuple[float, float, float] | None = None,
) -> tuple[Path, int]:
    """Save the map of ``slam`` to ``path`` (:func:`map_walls`, :func:`world_xml`, :func:`write_map`).

    Returns:
        The absolute path written and the number of walls in it.

    Raises:
        pluto.errors.MapError, OSError: as :func:`write_map`.
    """
    walls = map_walls(slam)
    written = write_map(path, world_xml(walls, name=name, description=description, start=start))
    return written, len(walls)


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries to the disk (where the system allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
