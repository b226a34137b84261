"""``pluto log plot``: a log's trajectories and its laser points in the world frame, as a PNG.

The world frame is that of one pose interface, the *reference*: ``Sim/Truth`` when the log has it (the simulated
world), else ``Localization/Pose``, else the odometry (``Base/Drive/State``). Each other trajectory is drawn in
the reference frame, moved rigidly so that it starts where the reference is at that time (the usual alignment
for comparing trajectories). Each scan's points are placed with the reference pose interpolated at the scan's
stamp, the laser's mount (``laser_offset`` m ahead of the robot's centre) and the wrist's pan, if recorded.

Plotting lives here and only here, so the rest of the package never imports matplotlib.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from pluto import msgs, names
from pluto.geometry import LASER_MOUNT, compose, relative
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.sim.plot import require_matplotlib, scan_points

__all__ = ["POSE_SOURCES", "Trajectory", "laser_points", "plot_log", "trajectory"]

FloatArray = NDArray[np.float64]

POSE_SOURCES = (names.SIM_TRUTH, names.LOCALIZATION_POSE, names.LOCALIZATION_DEAD_RECKONING, names.BASE_DRIVE_STATE)
"""Pose interfaces drawn as trajectories, in order of preference as the reference frame."""

LASERS = (names.SICK_SCAN_MM, names.SICK_SCAN)


@dataclass(frozen=True)
class Trajectory:
    """Poses of one interface: stamps (N,), s; x, y (N,), m; heading (N,), rad, continuous."""

    name: str
    t: FloatArray
    x: FloatArray
    y: FloatArray
    theta: FloatArray

    def at(self, t: float) -> tuple[float, float, float]:
        """The pose interpolated at ``t`` (the first or last one outside the series)."""
        return (
            float(np.interp(t, self.t, self.x)),
            float(np.interp(t, self.t, self.y)),
            float(np.interp(t, self.t, self.theta)),
        )

    def aligned_to(self, reference: Trajectory) -> Trajectory:
        """This trajectory moved rigidly so that its first pose lies on ``reference`` at the same time."""
        t0 = float(self.t[0])
        start = (float(self.x[0]), float(self.y[0]), float(self.theta[0]))
        shift = compose(reference.at(t0), relative(start, (0.0, 0.0, 0.0)))
        c, s = math.cos(shift[2]), math.sin(shift[2])
        return Trajectory(
            self.name,
            self.t,
            shift[0] + c * self.x - s * self.y,
            shift[1] + s * self.x + c * self.y,
            self.theta + shift[2],
        )


def trajectory(log: LogFile, name: str) -> Trajectory | None:
    """The poses of interface ``name`` (odometry or pose estimates), in stamp order; None if it has none."""
    points: list[tuple[float, float, float, float]] = []
    for m in log.messages([name]):
        value = m.message
        if isinstance(value, msgs.Odometry):
            points.append((value.stamp, value.x, value.y, value.theta))
        elif isinstance(value, msgs.PoseEstimate) and len(value.pose) >= 4 and math.isfinite(value.stamp):
            points.append((value.stamp, value.pose[0], value.pose[1], value.pose[3]))
    if not points:
        return None
    points.sort(key=lambda p: p[0])
    a = np.asarray(points, dtype=np.float64)
    return Trajectory(name, a[:, 0], a[:, 1], a[:, 2], np.unwrap(a[:, 3]))


def _pan_at(pans: FloatArray | None, t: float) -> float:
    if pans is None:
        return 0.0
    i = int(np.searchsorted(pans[:, 0], t, side="right")) - 1
    return float(pans[max(i, 0), 1])


def laser_points(
    log: LogFile,
    reference: Trajectory,
    laser: str,
    laser_offset: float,
    max_points: int = 200_000,
) -> FloatArray:
    """World coordinates (K, 2) of the valid laser points of the log, thinned to at most about ``max_points``.

    Scans are taken evenly across the log when there are too many points to draw them all.
    """
    scans = [m.message for m in log.messages([laser]) if isinstance(m.message, msgs.LaserScan)]
    if not scans:
        return np.zeros((0, 2))
    wrist = [m.message for m in log.messages([names.WRIST_STATE]) if isinstance(m.message, msgs.ActuatorState)]
    pans = np.asarray([(w.stamp, w.position[0]) for w in wrist if w.position], dtype=np.float64) if wrist else None
    if pans is not None and len(pans) == 0:
        pans = None
    per_scan = max(1, max(len(s.ranges) for s in scans))
    step = max(1, math.ceil(len(scans) * per_scan / max_points))
    chunks = []
    lo, hi = float(reference.t[0]), float(reference.t[-1])
    for scan in scans[::step]:
        if not lo <= scan.stamp <= hi or len(scan.angles) != len(scan.ranges):
            continue
        pan = _pan_at(pans, scan.stamp)
        angles = cast(Sequence[float], np.asarray(scan.angles, dtype=np.float64) + pan)
        chunks.append(scan_points(reference.at(scan.stamp), scan.ranges, angles, laser_offset, scan.max_range))
    return np.concatenate(chunks) if chunks else np.zeros((0, 2))


def _laser_offset(log: LogFile) -> float:
    text = log.info.get("laser_offset_x", "")
    try:
        value = float(text)
    except ValueError:
        return LASER_MOUNT[0]
    return value if math.isfinite(value) else LASER_MOUNT[0]


def plot_log(
    log: LogFile,
    output: str | os.PathLike[str],
    *,
    reference: str | None = None,
    laser: str | None = None,
    laser_offset: float | None = None,
    max_points: int = 200_000,
    sources: Sequence[str] = POSE_SOURCES,
) -> Path:
    """Draw the log's trajectories and laser points to a PNG; return its path.

    Args:
        reference: the pose interface whose frame is the world (default: see the module docstring).
        laser: the laser interface (default ``Sick/Scan_mm``, else ``Sick/Scan``).
        laser_offset: the laser's mount ahead of the robot's centre, m (default: from the log's metadata, else
            the Pluto robot's mount).
        max_points: about how many laser points to draw at most.
        sources: the pose interfaces to draw.

    Raises:
        LogError: the log has no pose to draw, or the picture cannot be written.
    """
    tracks = {name: t for name in sources if (t := trajectory(log, name)) is not None}
    if reference is not None and reference not in tracks:
        have = ", ".join(tracks) or "none"
        raise LogError(f"{log.path} has no poses on {reference} (pose interfaces in it: {have})")
    if not tracks:
        raise LogError(f"{log.path} has no trajectory to draw (none of {', '.join(sources)} is in it)")
    ref = tracks[reference] if reference is not None else next(iter(tracks.values()))
    laser = laser or next((name for name in LASERS if name in log.channels), None)
    offset = _laser_offset(log) if laser_offset is None else laser_offset
    points = laser_points(log, ref, laser, offset, max_points) if laser else np.zeros((0, 2))

    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    figure = Figure(figsize=(10, 8), dpi=110)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    handles: list[Any] = []
    if len(points):
        ax.scatter(points[:, 0], points[:, 1], s=0.3, c="0.35", alpha=0.5, linewidths=0)
        handles.append(Line2D([], [], linestyle="", marker=".", color="0.35", label=f"{laser} points"))
    colours = ("tab:green", "tab:blue", "tab:orange", "tab:red")
    for i, (name, track) in enumerate(tracks.items()):
        drawn = track if track is ref else track.aligned_to(ref)
        label = name if track is ref else f"{name} (aligned at its start)"
        handles += ax.plot(drawn.x, drawn.y, color=colours[i % len(colours)], linewidth=1.2, label=label)
    handles += ax.plot([ref.x[0]], [ref.y[0]], "o", color="black", markersize=5, label="start")
    handles += ax.plot([ref.x[-1]], [ref.y[-1]], "s", color="black", markersize=5, label="end")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    robot = log.info.get("robot", "")
    ax.set_title(
        f"{log.path.name}{f' ({robot})' if robot else ''}: {log.duration:.1f} s, world frame of {ref.name}",
        fontsize=10,
    )
    ax.grid(True, linewidth=0.3)
    ax.legend(handles=handles, loc="best", fontsize=8)
    path = Path(output)
    try:
        figure.savefig(path)
    except OSError as err:
        raise LogError(f"cannot write {path}: {err.strerror or err}") from None
    return path
