"""The picture of a log: trajectories aligned in the reference frame, laser points where the walls are."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from pluto import msgs
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.record.plot import laser_points, plot_log, trajectory
from pluto.record.writer import LogWriter


@pytest.fixture
def log(tmp_path: Path) -> LogFile:
    """The robot drives up the y axis of the world from (5, 5) facing +y; its odometry starts at (0, 0, 0). Its
    laser, 0.25 m ahead, sees a wall at x = 2 to its left through a beam at +90° (pan 0), then, panned by +90°,
    through its beam at 0°."""
    path = tmp_path / "run.mcap"
    with LogWriter(path, metadata={"robot": "r"}) as writer:
        for i in range(11):
            t = i * 0.1
            writer.add("Sim/Truth", msgs.Odometry(stamp=t, x=5.0, y=5.0 + t, theta=math.pi / 2), t)
            writer.add("Base/Drive/State", msgs.Odometry(stamp=t, x=t, y=0.0, theta=0.0), t)
        writer.add("Wrist/State", msgs.ActuatorState(stamp=0.0, position=[0.0, 0.0]), 0.0)
        writer.add("Wrist/State", msgs.ActuatorState(stamp=0.55, position=[math.pi / 2, 0.0]), 0.55)
        for t in (0.5, 0.6):
            scan = msgs.LaserScan(stamp=t, ranges=[1.0, 3.0, 80.0], angles=[0.0, math.pi / 2, math.pi], count=3)
            writer.add("Sick/Scan_mm", scan, t)
    return LogFile(path)


def test_trajectories_align_to_the_reference_frame(log: LogFile) -> None:
    truth, odometry = trajectory(log, "Sim/Truth"), trajectory(log, "Base/Drive/State")
    assert truth is not None and odometry is not None
    aligned = odometry.aligned_to(truth)
    assert aligned.x == pytest.approx(truth.x) and aligned.y == pytest.approx(truth.y)
    assert aligned.theta == pytest.approx(truth.theta)
    assert trajectory(log, "GPS/State") is None


def test_laser_points_land_on_the_wall(log: LogFile) -> None:
    truth = trajectory(log, "Sim/Truth")
    assert truth is not None
    points = laser_points(log, truth, "Sick/Scan_mm", laser_offset=0.25)
    # scan at 0.5 (pan 0) from the laser at (5, 5.75): beam 0° -> (5, 6.75), beam 90° -> (2, 5.75), 80 m dropped
    # scan at 0.6 (pan 90°) from (5, 5.85): beam 0° -> (4, 5.85), beam 90° -> (5, 2.85)
    assert np.round(points, 6).tolist() == [[5.0, 6.75], [2.0, 5.75], [4.0, 5.85], [5.0, 2.85]]


def test_the_picture_is_written(log: LogFile, tmp_path: Path) -> None:
    path = plot_log(log, tmp_path / "run.png")
    image = imread(path)
    assert image.shape[0] > 500 and image.shape[1] > 500
    assert (image[..., :3] < 0.5).any()  # something dark drawn
    other = plot_log(log, tmp_path / "odo.png", reference="Base/Drive/State", laser_offset=0.0)
    assert other.exists()
    with pytest.raises(LogError, match="no poses on Localization/Pose"):
        plot_log(log, tmp_path / "x.png", reference="Localization/Pose")
    with pytest.raises(LogError, match="cannot write"):
        plot_log(log, tmp_path / "missing" / "x.png")


def test_a_log_without_poses_cannot_be_drawn(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "beats.mcap") as writer:
        writer.add("Heartbeat", msgs.Heartbeat(seq=1), 1.0)
    with pytest.raises(LogError, match="no trajectory"):
        plot_log(LogFile(tmp_path / "beats.mcap"), tmp_path / "x.png")
