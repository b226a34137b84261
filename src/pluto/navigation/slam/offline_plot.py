"""A picture of an offline SLAM run: the map's walls, the reference trajectory, the SLAM trajectory and the odometry.

Importing this module imports matplotlib (with the Agg back end, no display needed): it raises ImportError where
matplotlib is not installed, and callers say so and go on without the picture.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from pluto.navigation.slam.offline import OfflineResult

__all__ = ["plot_offline"]


def plot_offline(result: OfflineResult, path: str | os.PathLike[str]) -> Path:
    """Draw ``result`` to a PNG file at ``path``; returns the absolute path written.

    Raises:
        OSError: the file cannot be written.
    """
    target = Path(path).expanduser().absolute()
    result.slam.realign()
    walls = result.slam.segments
    segments = np.concatenate([walls.pieces(i) for i in np.flatnonzero(walls.active).tolist()] or [np.zeros((0, 4))])
    fig, ax = plt.subplots(figsize=(9, 9))
    try:
        if segments.size:
            xs = np.column_stack((segments[:, 0], segments[:, 2], np.full(len(segments), np.nan))).ravel()
            ys = np.column_stack((segments[:, 1], segments[:, 3], np.full(len(segments), np.nan))).ravel()
            ax.plot(xs, ys, color="black", lw=1.2, label=f"map ({len(segments)} walls)")
        reference = result.log.reference
        if reference is not None:
            ax.plot(reference[:, 0], reference[:, 1], color="tab:green", lw=1.0, label="corrected (reference)")
        ax.plot(result.estimate[:, 0], result.estimate[:, 1], color="tab:blue", lw=1.0, label="SLAM")
        odometry_label = "odometry" if result.noise is None else f"noisy odometry (seed {result.seed})"
        ax.plot(result.odometry[:, 0], result.odometry[:, 1], color="tab:red", lw=0.7, alpha=0.7, label=odometry_label)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_title(f"{result.log.path.name}: {len(result.log.scans)} scans")
        ax.legend(loc="best", fontsize="small")
        ax.grid(True, lw=0.3)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return target
