"""Pictures of a simulated run: the map, the true and odometry trajectories, and a laser scan.

Plotting lives here and only here, so the algorithms never import matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pluto.errors import PlutoError
from pluto.sim.world import World

FloatArray = NDArray[np.float64]


def require_matplotlib() -> Any:
    """Return the matplotlib module.

    Raises:
        PlutoError: it is not installed (pictures are an optional extra: ``pip install 'pluto-robot[plot]'``).
    """
    try:
        import matplotlib
    except ImportError:
        raise PlutoError("pictures need matplotlib, which is not installed: pip install 'pluto-robot[plot]'") from None
    return matplotlib


def scan_points(
    pose: tuple[float, float, float],
    ranges: Sequence[float],
    angles: Sequence[float],
    mount_x: float = 0.0,
    max_range: float | None = None,
) -> FloatArray:
    """World coordinates (K, 2) of the valid points of a scan taken from ``pose`` (x, y, heading of the robot).

    Beams at max range or negative (no echo, fault) are left out.
    """
    r = np.asarray(ranges, dtype=np.float64)
    a = np.asarray(angles, dtype=np.float64)
    keep = r > 0
    if max_range is not None:
        keep &= r < max_range - 1e-6
    x, y, th = pose
    ox, oy = x + mount_x * math.cos(th), y + mount_x * math.sin(th)
    return np.column_stack((ox + r[keep] * np.cos(th + a[keep]), oy + r[keep] * np.sin(th + a[keep])))


def _segments(rows: FloatArray, color: str, width: float, label: str, alpha: float = 0.6) -> Any:
    """A matplotlib LineCollection of segments, rows (x1, y1, x2, y2) m (matplotlib imported by the caller)."""
    from matplotlib.collections import LineCollection

    return LineCollection(
        list(np.asarray(rows).reshape(-1, 2, 2)), colors=color, linewidths=width, alpha=alpha, label=label
    )


def plot_run(
    world: World,
    path: Path,
    truth: FloatArray,
    odometry: FloatArray | None = None,
    scan: FloatArray | None = None,
    title: str = "",
    estimate_label: str = "odometry",
    lines: FloatArray | None = None,
    built: FloatArray | None = None,
) -> Path:
    """Draw a run and save it as a PNG; return the path.

    Args:
        truth: true positions (N, 2), m.  odometry: odometry positions in the world frame (M, 2), m.
        scan: laser points in the world frame (K, 2), m.
        estimate_label: the legend of the second path (odometry, or the localization estimate).
        lines: wall lines found in the last scan, world frame, rows (x1, y1, x2, y2), m.
        built: the walls of a map built by the robot (SLAM), drawn over the world's, rows (x1, y1, x2, y2), m.
    """
    matplotlib = require_matplotlib()
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon

    xmin, ymin, xmax, ymax = world.bounds()
    width = max(xmax - xmin, 1.0)
    height = max(ymax - ymin, 1.0)
    scale = 12.0 / max(width, height)
    fig, ax = plt.subplots(figsize=(max(4.0, width * scale) + 1.5, max(3.0, height * scale) + 1.0), dpi=110)
    walls = world.walls
    ax.add_collection(_segments(walls, "0.15", 1.2, "walls", alpha=1.0))
    for polygon in world.polygons:
        ax.add_patch(Polygon(np.asarray(polygon.points), closed=True, facecolor="0.8", edgecolor="0.3"))
    for x, y, r in world.circles:
        ax.add_patch(Circle((x, y), r, facecolor="0.8", edgecolor="0.3"))
    if built is not None and len(built):
        ax.add_collection(_segments(built, "tab:purple", 2.4, "map built (SLAM)"))
    if len(truth):
        ax.plot(truth[:, 0], truth[:, 1], "-", color="tab:blue", linewidth=1.8, label="true path")
        ax.plot(truth[0, 0], truth[0, 1], "o", color="tab:blue")
    if odometry is not None and len(odometry):
        ax.plot(odometry[:, 0], odometry[:, 1], "--", color="tab:orange", linewidth=1.2, label=estimate_label)
    if scan is not None and len(scan):
        ax.plot(scan[:, 0], scan[:, 1], ".", color="tab:red", markersize=2.5, label="last scan")
    if lines is not None and len(lines):
        ax.add_collection(_segments(lines, "tab:green", 3.0, "wall lines of the last scan", alpha=0.7))
    ax.set_xlim(xmin - 1, xmax + 1)
    ax.set_ylim(ymin - 1, ymax + 1)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title or f"world {world.name}")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(True, linewidth=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
