"""Occupancy grids as ROS's ``map_server`` keeps them (a YAML file and a PGM image), both ways: walls drawn into a
grid, and walls found again in a grid's occupied cells.

The format (ROS ``map_server``, Nav2's ``nav2_map_server``): a YAML file ::

    image: office.pgm              the image, relative to the YAML file (or absolute)
    resolution: 0.05               m per cell (pixel)
    origin: [-1.0, -2.0, 0.0]      the pose (x m, y m, yaw rad) of the lower-left corner of the image's last row
    negate: 0                      1: white is occupied, black free
    occupied_thresh: 0.65          a cell whose occupancy is above this is occupied
    free_thresh: 0.196             a cell whose occupancy is below this is free; between the two, unknown
    mode: trinary                  optional: trinary (the default), scale or raw

and a grey image whose first row is the grid's top (the largest y). A pixel of value v (maxval m) has the occupancy
p = (m - v)/m, or v/m with ``negate``; in ``raw`` mode the value is the occupancy in percent. ``map_saver`` writes
occupied cells 0 (black), free ones 254 and unknown ones 205, with the thresholds above: :func:`write_grid` does the
same. Images are read as binary (P5) or plain (P2) PGM, 8 or 16 bits; other image formats are refused with a clear
error (convert them to PGM).

Strategy, walls to grid (:func:`grid_of_walls`): every segment is sampled at a quarter of a cell and each sample's
cell is marked occupied, so a wall becomes an unbroken line of cells one or two cells wide; circles are filled. The
rest is unknown unless the caller knows which cells the laser saw through (``rays``: each beam from the laser to what
it hit, sampled every half cell; ``pluto slam offline --grid`` gives its scans on its trajectory): a map of walls
says nothing of what lies between them.

Strategy, grid to walls (:func:`walls_of_grid`): the occupied cells are split into connected pieces (8-neighbours),
and each piece is explained by straight walls one after the other. A Hough transform of the piece's cells (normal
directions every degree, offsets in bins of one cell) proposes the line with the most unexplained cells; it is
fitted by least squares three times: to the cells within :attr:`WallExtraction.tolerance` of the proposal (a long
wall between two Hough directions is then fitted whole), to those within :attr:`WallExtraction.thickness` of that
fit (the middle of a wall two or three cells thick), and to those within the tolerance again. The line's cells are cut
where a gap along it is wider than :attr:`WallExtraction.max_gap`, and each run of at least
:attr:`WallExtraction.min_cells` cells becomes a wall from its first cell's centre to its last's (a wall's end lies
somewhere in its last cell). A cell may belong to two walls (the corner of a room belongs to both its walls), but
each wall must explain some cell no wall explained before; the cells within the thickness of a wall found are
explained by it. The Hough votes of explained cells are taken out as they are explained, so a piece costs two passes
over its cells and every direction, not one per wall. A wall drawn by :func:`grid_of_walls` comes back within a cell
of where it was; features closer together than two cells (a desk against a wall) merge, as they do in the grid.

Every problem with a grid file raises :class:`GridError` (a :class:`~pluto.errors.MapError`) naming the file and
the reason; the command line exits with status 2 on it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml
from scipy import ndimage  # type: ignore[import-untyped]  # scipy ships no type stubs

from pluto.errors import MapError

__all__ = [
    "FREE",
    "GRID_SUFFIXES",
    "MAX_GRID_CELLS",
    "OCCUPIED",
    "UNKNOWN",
    "GridError",
    "GridWalls",
    "OccupancyGrid",
    "WallExtraction",
    "grid_of_walls",
    "grid_walls",
    "read_grid",
    "walls_of_grid",
    "write_grid",
]

FloatArray = npt.NDArray[np.float64]
CellArray = npt.NDArray[np.int8]

OCCUPIED = 100
FREE = 0
UNKNOWN = -1
"""Cell values, as in ``nav_msgs/OccupancyGrid``."""

GRID_SUFFIXES = (".yaml", ".yml")
"""A map file with one of these suffixes is an occupancy grid's YAML file."""

MAX_GRID_CELLS = 100_000_000
"""Largest grid read or written, cells (a 500 x 500 m building at 5 cm is 100 million)."""

REQUIRED_KEYS = ("image", "resolution", "origin", "negate", "occupied_thresh", "free_thresh")
"""The keys ``map_server`` requires of a map's YAML file."""

MODES = ("trinary", "scale", "raw")

_PIXEL_OCCUPIED, _PIXEL_FREE, _PIXEL_UNKNOWN = 0, 254, 205
"""The values ``map_saver`` writes."""
_OCCUPIED_THRESH, _FREE_THRESH = 0.65, 0.196


class GridError(MapError):
    """An occupancy grid's YAML file or image cannot be read, or a grid cannot be written; the message says which
    file and why. Commands exit with status 2 on it."""

    exit_status = 2


@dataclass(frozen=True, eq=False)
class OccupancyGrid:
    """An occupancy grid.

    Attributes:
        cells: ``(rows, columns)`` int8, :data:`OCCUPIED`, :data:`FREE` or :data:`UNKNOWN`; row 0 is the bottom
            (the smallest y), unlike the image, whose first row is the top.
        resolution: side of a cell, m.
        origin: pose of the grid's lower-left corner in the map frame (x m, y m, yaw rad).
    """

    cells: CellArray
    resolution: float
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if self.cells.ndim != 2 or self.cells.size == 0:
            raise ValueError(f"a grid needs rows and columns, got shape {self.cells.shape}")
        if not (math.isfinite(self.resolution) and self.resolution > 0):
            raise ValueError(f"resolution must be > 0 m, got {self.resolution}")
        if not all(math.isfinite(v) for v in self.origin):
            raise ValueError(f"the origin must be finite, got {self.origin}")

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return int(self.cells.shape[0]), int(self.cells.shape[1])

    def to_world(self, points: npt.ArrayLike) -> FloatArray:
        """``(n, 2)`` points in cell units (x along the columns, y along the rows, from the lower-left corner) as map
        coordinates, m."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 2) * self.resolution
        x0, y0, yaw = self.origin
        c, s = math.cos(yaw), math.sin(yaw)
        return np.column_stack((x0 + c * p[:, 0] - s * p[:, 1], y0 + s * p[:, 0] + c * p[:, 1]))

    def to_cells(self, points: npt.ArrayLike) -> FloatArray:
        """``(n, 2)`` map coordinates (m) in cell units (the inverse of :meth:`to_world`)."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        x0, y0, yaw = self.origin
        c, s = math.cos(yaw), math.sin(yaw)
        dx, dy = p[:, 0] - x0, p[:, 1] - y0
        return np.column_stack((c * dx + s * dy, -s * dx + c * dy)) / self.resolution


# -- reading ---------------------------------------------------------------------------------------------------------


def _number(config: Mapping[str, Any], key: str, path: Path) -> float:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GridError(f"{key} must be a number, got {value!r}", path)
    return float(value)


def read_grid(path: str | os.PathLike[str]) -> OccupancyGrid:
    """Read a ``map_server`` map: its YAML file and the image it names.

    Raises:
        GridError: a file cannot be read, the YAML is not a mapping or lacks a required key (``image``,
            ``resolution``, ``origin``, ``negate``, ``occupied_thresh``, ``free_thresh``), a value is out of range,
            or the image is not a valid PGM.
    """
    source = Path(path)
    config = _read_yaml(source)
    resolution = _number(config, "resolution", source)
    if resolution <= 0:
        raise GridError(f"resolution must be > 0 m, got {resolution}", source)
    pose = _origin(config["origin"], source)
    occupied, free = _number(config, "occupied_thresh", source), _number(config, "free_thresh", source)
    if not 0.0 <= free <= occupied <= 1.0:
        raise GridError(
            f"thresholds must satisfy 0 <= free_thresh <= occupied_thresh <= 1, got {free}, {occupied}", source
        )
    negate = config["negate"]
    if negate not in (0, 1, True, False):
        raise GridError(f"negate must be 0 or 1, got {negate!r}", source)
    mode = config.get("mode", "trinary")
    if mode not in MODES:
        raise GridError(f"mode must be one of {', '.join(MODES)}, got {mode!r}", source)
    image = config["image"]
    if not isinstance(image, str) or not image:
        raise GridError(f"image must name the image file, got {image!r}", source)
    pixels, maxval = read_pgm(Path(image) if Path(image).is_absolute() else source.parent / image)
    cells = _classify(pixels, maxval, raw=mode == "raw", negate=bool(negate), occupied=occupied, free=free)
    return OccupancyGrid(np.ascontiguousarray(cells[::-1]), resolution, pose)


def _read_yaml(source: Path) -> dict[str, Any]:
    """The mapping of a ``map_server`` YAML file, with every required key.

    Raises:
        GridError: the file cannot be read, is not YAML, not a mapping, or lacks a required key.
    """
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise GridError(f"cannot read the map: {getattr(err, 'strerror', None) or err}", source) from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise GridError(f"not valid YAML{where}: {getattr(err, 'problem', None) or err}", source) from None
    if not isinstance(config, dict):
        raise GridError("not a map_server map: the YAML is not a mapping of keys to values", source)
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise GridError(
            f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)} (a map_server map has "
            f"{', '.join(REQUIRED_KEYS)}; mode is optional)",
            source,
        )
    return config


def _origin(origin: object, source: Path) -> tuple[float, float, float]:
    """The ``origin`` of a YAML file as (x m, y m, yaw rad); a yaw left out is 0.

    Raises:
        GridError: it is not a list of two or three finite numbers.
    """
    if (
        not isinstance(origin, list)
        or len(origin) not in (2, 3)
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in origin)
    ):
        raise GridError(f"origin must be [x, y, yaw] (numbers), got {origin!r}", source)
    return float(origin[0]), float(origin[1]), float(origin[2]) if len(origin) == 3 else 0.0


def _classify(
    pixels: npt.NDArray[np.uint16], maxval: int, *, raw: bool, negate: bool, occupied: float, free: float
) -> CellArray:
    """The cells of an image (first row the top, as the image): occupied above ``occupied``, free below ``free``,
    unknown between them; in ``raw`` mode a pixel is the occupancy in percent (over 100: unknown), else ``maxval``
    is free (occupied with ``negate``)."""
    values = pixels.astype(np.float64)
    if raw:
        p = values / 100.0
        known = values <= 100
    else:
        p = values / maxval if negate else (maxval - values) / maxval
        known = np.ones(values.shape, dtype=bool)
    cells = np.full(values.shape, UNKNOWN, dtype=np.int8)
    cells[known & (p > occupied)] = OCCUPIED
    cells[known & (p < free)] = FREE
    return cells


_PGM_TOKEN = re.compile(rb"(?:\s|#[^\n]*\n?)*(\S+)")


def read_pgm(path: str | os.PathLike[str]) -> tuple[npt.NDArray[np.uint16], int]:
    """The pixels (first row the top) and the maxval of a PGM image, binary (P5) or plain (P2).

    Raises:
        GridError: the file cannot be read, is not a PGM, or is cut short or too large.
    """
    source = Path(path)
    try:
        data = source.read_bytes()
    except OSError as err:
        raise GridError(f"cannot read the map's image: {err.strerror or err}", source) from None
    magic = data[:2]
    if magic not in (b"P5", b"P2"):
        kind = "a PNG image" if data[:4] == b"\x89PNG" else f"it starts with {data[:8]!r}"
        raise GridError(
            f"the map's image is not a PGM (P5 or P2; {kind}): convert it, e.g. `convert map.png map.pgm`", source
        )
    pos = 2
    header: list[int] = []
    for what in ("width", "height", "maxval"):
        match = _PGM_TOKEN.match(data, pos)
        if match is None:
            raise GridError(f"the PGM header is cut short before its {what}", source)
        try:
            value = int(match.group(1))
        except ValueError:
            raise GridError(f"the PGM's {what} is not a number: {match.group(1)[:20]!r}", source) from None
        header.append(value)
        pos = match.end()
    width, height, maxval = header
    if width <= 0 or height <= 0 or not 0 < maxval < 65536:
        raise GridError(f"the PGM's size {width} x {height} or maxval {maxval} is not valid", source)
    if width * height > MAX_GRID_CELLS:
        raise GridError(f"the PGM has {width * height:,} pixels, more than {MAX_GRID_CELLS:,}", source)
    count = width * height
    if magic == b"P5":
        pos += 1  # the single blank after maxval
        depth = 1 if maxval < 256 else 2
        body = data[pos : pos + count * depth]
        if len(body) < count * depth:
            raise GridError(
                f"the PGM is cut short: {width} x {height} pixels need {count * depth:,} bytes, it has {len(body):,}",
                source,
            )
        pixels = np.frombuffer(body, dtype=np.uint8 if depth == 1 else ">u2").astype(np.uint16)
    else:
        tokens = re.sub(rb"#[^\n]*", b" ", data[pos:]).split()
        if len(tokens) < count:
            raise GridError(f"the PGM is cut short: {width} x {height} pixels, it has {len(tokens):,}", source)
        try:
            pixels = np.array([int(t) for t in tokens[:count]], dtype=np.int64).astype(np.uint16)
        except ValueError:
            raise GridError("the plain PGM holds a pixel that is not a number", source) from None
    if int(pixels.max()) > maxval:
        raise GridError(f"the PGM holds a pixel above its maxval {maxval}", source)
    return pixels.reshape(height, width), maxval


# -- writing ---------------------------------------------------------------------------------------------------------


def write_grid(grid: OccupancyGrid, path: str | os.PathLike[str], *, image: str | None = None) -> tuple[Path, Path]:
    """Write a grid as ``map_server`` reads it: the PGM image (``map_saver``'s values) and the YAML file.

    Args:
        grid: the grid.
        path: the YAML file.
        image: the image's file name, beside the YAML file (default: the YAML's name with ``.pgm``).

    Returns:
        The YAML file and the image written.

    Raises:
        GridError: a file cannot be written.
    """
    target = Path(path)
    picture = target.with_name(image) if image else target.with_suffix(".pgm")
    rows, columns = grid.shape
    pixels = np.full(grid.cells.shape, _PIXEL_UNKNOWN, dtype=np.uint8)
    pixels[grid.cells == OCCUPIED] = _PIXEL_OCCUPIED
    pixels[grid.cells == FREE] = _PIXEL_FREE
    x, y, yaw = grid.origin
    text = (
        f"image: {picture.name}\n"
        f"resolution: {grid.resolution!r}\n"
        f"origin: [{x!r}, {y!r}, {yaw!r}]\n"
        "negate: 0\n"
        f"occupied_thresh: {_OCCUPIED_THRESH}\n"
        f"free_thresh: {_FREE_THRESH}\n"
        "mode: trinary\n"
    )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        picture.write_bytes(f"P5\n{columns} {rows}\n255\n".encode("ascii") + pixels[::-1].tobytes())
        target.write_text(text, encoding="utf-8")
    except OSError as err:
        raise GridError(f"cannot write the grid: {err.strerror or err}", target) from None
    return target, picture


def grid_of_walls(
    segments: npt.ArrayLike,
    *,
    resolution: float = 0.05,
    margin: float = 1.0,
    circles: npt.ArrayLike | None = None,
    free: npt.ArrayLike | None = None,
    rays: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> OccupancyGrid:
    """A grid whose occupied cells are the walls (see the module docstring).

    Args:
        segments: ``(n, 4)`` walls ``[x1, y1, x2, y2]``, m.
        resolution: side of a cell, m.
        margin: unknown border around everything drawn, m.
        circles: ``(m, 3)`` discs ``[x, y, r]`` (m) drawn filled.
        free: ``(k, 2)`` points (m) whose cells are free; walls win over them.
        rays: ``(origins, ends)``, each ``(r, 2)`` (m): the laser's beams from where it was to what it hit; the
            cells a beam crossed before the cell it hit are free (walls win over them).

    Raises:
        ValueError: a bad resolution or margin, nothing to draw, or a grid of more than :data:`MAX_GRID_CELLS`.
    """
    if not (math.isfinite(resolution) and resolution > 0):
        raise ValueError(f"resolution must be > 0 m, got {resolution}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be >= 0 m, got {margin}")
    seg = np.asarray(segments, dtype=np.float64).reshape(-1, 4)
    discs = np.zeros((0, 3)) if circles is None else np.asarray(circles, dtype=np.float64).reshape(-1, 3)
    seen = np.zeros((0, 2)) if free is None else np.asarray(free, dtype=np.float64).reshape(-1, 2)
    starts = np.zeros((0, 2)) if rays is None else np.asarray(rays[0], dtype=np.float64).reshape(-1, 2)
    stops = np.zeros((0, 2)) if rays is None else np.asarray(rays[1], dtype=np.float64).reshape(-1, 2)
    if starts.shape != stops.shape:
        raise ValueError(f"rays need as many ends as origins, got {starts.shape[0]} and {stops.shape[0]}")
    extents = [seg[:, :2], seg[:, 2:], discs[:, :2] - discs[:, 2:3], discs[:, :2] + discs[:, 2:3], seen, starts, stops]
    points = np.vstack(extents)
    if points.shape[0] == 0:
        raise ValueError("nothing to draw: no wall, circle or free point")
    if not np.all(np.isfinite(points)):
        raise ValueError("walls, circles and free points must be finite")
    lo = points.min(axis=0) - margin
    hi = points.max(axis=0) + margin
    # the origin on a whole number of cells, so that the same walls always fall in the same cells
    lo = np.floor(lo / resolution) * resolution
    columns = math.ceil((hi[0] - lo[0]) / resolution) + 1
    rows = math.ceil((hi[1] - lo[1]) / resolution) + 1
    if rows * columns > MAX_GRID_CELLS:
        raise ValueError(f"a grid of {rows} x {columns} cells is larger than {MAX_GRID_CELLS:,} cells")
    cells = np.full((rows, columns), UNKNOWN, dtype=np.int8)
    grid = OccupancyGrid(cells, float(resolution), (float(lo[0]), float(lo[1]), 0.0))
    if seen.shape[0]:
        _mark(cells, grid.to_cells(seen), FREE)
    if starts.shape[0]:
        _mark_rays(cells, grid.to_cells(starts), grid.to_cells(stops))
    for x1, y1, x2, y2 in seg.tolist():
        length = math.hypot(x2 - x1, y2 - y1)
        steps = max(1, math.ceil(4.0 * length / resolution))
        # the ends pulled in by a micrometre: an end on a cell's edge marks the cell it closes, not the next one
        inset = min(1e-6 / length, 0.5) if length > 0 else 0.0
        t = np.linspace(inset, 1.0 - inset, steps + 1)
        _mark(cells, grid.to_cells(np.column_stack((x1 + t * (x2 - x1), y1 + t * (y2 - y1)))), OCCUPIED)
    for x, y, r in discs.tolist():
        u = grid.to_cells([(x, y)])[0]
        reach = r / resolution
        ix = np.arange(math.floor(u[0] - reach), math.ceil(u[0] + reach) + 1)
        iy = np.arange(math.floor(u[1] - reach), math.ceil(u[1] + reach) + 1)
        gx, gy = np.meshgrid(ix + 0.5, iy + 0.5)
        inside = np.hypot(gx - u[0], gy - u[1]) <= max(reach, 0.5)
        _mark(cells, np.column_stack((gx[inside], gy[inside])), OCCUPIED)
    return grid


def _mark_rays(cells: CellArray, starts: FloatArray, stops: FloatArray, batch: int = 4096) -> None:
    """Mark free the cells along each ray (cell units), sampled every half cell, up to a cell before its end."""
    for first in range(0, starts.shape[0], batch):
        a, b = starts[first : first + batch], stops[first : first + batch]
        length = np.hypot(*(b - a).T)
        steps = np.floor(2.0 * np.maximum(length - 1.0, 0.0)).astype(np.intp)  # half cells, the last cell left
        total = int(steps.sum())
        if total == 0:
            continue
        ray = np.repeat(np.arange(a.shape[0]), steps)
        k = np.arange(total) - np.repeat(np.cumsum(steps) - steps, steps)
        fraction = 0.5 * k / np.maximum(length[ray], 1e-12)
        _mark(cells, a[ray] + (b - a)[ray] * fraction[:, None], FREE)


def _mark(cells: CellArray, points: FloatArray, value: int) -> None:
    """Set the cells holding ``points`` (cell units) to ``value``; points outside the grid are left out."""
    ix = np.floor(points[:, 0]).astype(np.intp)
    iy = np.floor(points[:, 1]).astype(np.intp)
    inside = (ix >= 0) & (iy >= 0) & (ix < cells.shape[1]) & (iy < cells.shape[0])
    cells[iy[inside], ix[inside]] = value


# -- finding walls ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WallExtraction:
    """Settings of :func:`walls_of_grid`, in cells.

    Attributes:
        tolerance: a cell belongs to a line when its centre lies within this of it (a diagonal wall's cells lie
            within 0.71 of it).
        thickness: the cells within this of a wall found are explained by it (a mapped wall is often two or three
            cells thick: its outer cells are not walls of their own).
        max_gap: a gap along a line wider than this (between two cells' centres) ends a wall: a door.
        min_cells: fewest cells of a wall (shorter runs are specks, not walls).
        directions: the Hough transform's normal directions over a half turn.
    """

    tolerance: float = 0.75
    thickness: float = 2.0
    max_gap: float = 2.5
    min_cells: int = 4
    directions: int = 180


def _segment_distance(points: FloatArray, a: FloatArray, b: FloatArray) -> FloatArray:
    """Distance of each point from the segment ``a``-``b``."""
    ab = b - a
    span = float(ab @ ab)
    t = np.clip(((points - a) @ ab) / span, 0.0, 1.0) if span > 0 else np.zeros(points.shape[0])
    return np.asarray(np.hypot(*(points - a - t[:, None] * ab).T), dtype=np.float64)


def _fit(points: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """Least-squares line of ``points``: (unit direction, unit normal, offset along the normal)."""
    centre = points.mean(axis=0)
    d = points - centre
    cov = d.T @ d
    values, vectors = np.linalg.eigh(cov)
    direction = vectors[:, int(np.argmax(values))]
    normal = np.array([-direction[1], direction[0]])
    return direction, normal, float(normal @ centre)


def _piece_walls(points: FloatArray, prm: WallExtraction) -> list[tuple[float, float, float, float]]:
    """Walls (cell units) explaining one connected piece's cell centres."""
    n = points.shape[0]
    theta = np.arange(prm.directions) * (math.pi / prm.directions)
    cos, sin = np.cos(theta), np.sin(theta)
    shift = math.ceil(float(np.abs(points).max(initial=0.0)) * math.sqrt(2.0)) + 2
    bins = 2 * shift + 1

    def votes(index: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        rho = np.rint(points[index, 0:1] * cos + points[index, 1:2] * sin).astype(np.intp) + shift
        flat = rho + np.arange(prm.directions) * bins
        return np.bincount(flat.ravel(), minlength=prm.directions * bins)

    accumulator = votes(np.arange(n))
    explained = np.zeros(n, dtype=bool)
    walls: list[tuple[float, float, float, float]] = []
    while True:
        best = int(np.argmax(accumulator))
        if accumulator[best] < prm.min_cells:
            break
        k, rho = divmod(best, bins)
        normal = np.array([cos[k], sin[k]])
        offset = float(rho - shift)
        near = np.abs(points @ normal - offset) <= prm.tolerance
        for band in (prm.tolerance, prm.thickness, prm.tolerance):  # refit: near cells, the wall's band, near cells
            if np.count_nonzero(near) >= 2:
                direction, normal, offset = _fit(points[near])
            near = np.abs(points @ normal - offset) <= band
        direction = np.array([normal[1], -normal[0]])
        index = np.flatnonzero(near)
        along = points[index] @ direction
        order = np.argsort(along)
        index, along = index[order], along[order]
        cuts = np.flatnonzero(np.diff(along) > prm.max_gap) + 1
        newly = np.zeros(n, dtype=bool)
        for run in np.split(index, cuts):
            if run.size < prm.min_cells or explained[run].all():
                continue
            d, nrm, off = _fit(points[run]) if run.size >= 2 else (direction, normal, offset)
            if float(d @ direction) < 0:
                d = -d
            t_run = points[run] @ d
            foot = nrm * off
            a = foot + d * float(t_run.min())
            b = foot + d * float(t_run.max())
            walls.append((float(a[0]), float(a[1]), float(b[0]), float(b[1])))
            newly[run] = True
            newly |= _segment_distance(points, a, b) <= prm.thickness
        newly &= ~explained
        if not newly.any():  # nothing new: the proposal's own cells are explained, so the search moves on
            proposal = np.abs(points @ np.array([cos[k], sin[k]]) - float(rho - shift)) <= 0.5
            newly = proposal & ~explained
            if not newly.any():
                accumulator[best] = 0
                continue
        explained |= newly
        accumulator -= votes(np.flatnonzero(newly))
    return walls


def walls_of_grid(grid: OccupancyGrid, params: WallExtraction | None = None) -> FloatArray:
    """The walls of a grid's occupied cells (see the module docstring).

    Returns:
        ``(n, 4)`` walls ``[x1, y1, x2, y2]`` in the map frame, m.
    """
    prm = params or WallExtraction()
    occupied = grid.cells == OCCUPIED
    labels, count = ndimage.label(occupied, structure=np.ones((3, 3), dtype=bool))
    if count == 0:
        return np.zeros((0, 4))
    rows, columns = np.nonzero(labels)
    piece = labels[rows, columns]
    order = np.argsort(piece, kind="stable")
    rows, columns, piece = rows[order], columns[order], piece[order]
    starts = np.searchsorted(piece, np.arange(1, count + 1))
    ends = np.append(starts[1:], piece.size)
    found: list[tuple[float, float, float, float]] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end - start < prm.min_cells:
            continue
        centres = np.column_stack((columns[start:end] + 0.5, rows[start:end] + 0.5)).astype(np.float64)
        base = centres.min(axis=0)  # the piece's own frame keeps the Hough transform's offsets small
        found.extend(
            (x1 + base[0], y1 + base[1], x2 + base[0], y2 + base[1])
            for x1, y1, x2, y2 in _piece_walls(centres - base, prm)
        )
    if not found:
        return np.zeros((0, 4))
    cells = np.array(found, dtype=np.float64)
    ends_world = grid.to_world(cells.reshape(-1, 2))
    return ends_world.reshape(-1, 4)


@dataclass(frozen=True)
class GridWalls:
    """What a ``map_server`` map gives a world: its walls, their uncertainties, a start pose and a description."""

    walls: npt.NDArray[np.float64]
    """(n, 4) wall segments x1, y1, x2, y2 in the map frame, m."""
    sigmas: npt.NDArray[np.float64]
    """(n, 2) each wall's angle (rad) and offset (m) standard deviations."""
    start: tuple[float, float, float]
    description: str


def grid_walls(path: str | os.PathLike[str], params: WallExtraction | None = None) -> GridWalls:
    """The walls of a ``map_server`` map (:func:`read_grid`, :func:`walls_of_grid`), for the simulator and the pose
    module (:func:`pluto.sim.world.load_world` makes a world of them).

    Each wall's uncertainty is that of a cell: ``sigma_offset`` half a cell, ``sigma_angle`` a cell over its length.
    The start pose is the map frame's origin unless its cell is occupied, else the free cell nearest it.

    Raises:
        GridError: the map cannot be read, or holds no wall.
    """
    source = Path(path)
    grid = read_grid(source)
    walls = walls_of_grid(grid, params)
    if walls.shape[0] == 0:
        raise GridError("the grid has no occupied cells that form a wall", source)
    length = np.hypot(walls[:, 2] - walls[:, 0], walls[:, 3] - walls[:, 1])
    sigmas = np.column_stack((grid.resolution / length, np.full(length.shape, 0.5 * grid.resolution)))
    description = (
        f"Walls found in the occupied cells of the occupancy grid {source.name} "
        f"({grid.shape[1]} x {grid.shape[0]} cells of {grid.resolution:g} m)."
    )
    return GridWalls(walls, sigmas, _start_pose(grid), description)


def _start_pose(grid: OccupancyGrid) -> tuple[float, float, float]:
    u = grid.to_cells([(0.0, 0.0)])[0]
    ix, iy = math.floor(u[0]), math.floor(u[1])
    rows, columns = grid.shape
    if not (0 <= ix < columns and 0 <= iy < rows) or grid.cells[iy, ix] != OCCUPIED:
        return (0.0, 0.0, 0.0)
    free_rows, free_columns = np.nonzero(grid.cells == FREE)
    if free_rows.size == 0:
        return (0.0, 0.0, 0.0)
    nearest = int(np.argmin(np.hypot(free_columns + 0.5 - u[0], free_rows + 0.5 - u[1])))
    x, y = grid.to_world([(free_columns[nearest] + 0.5, free_rows[nearest] + 0.5)])[0]
    return (float(x), float(y), 0.0)
