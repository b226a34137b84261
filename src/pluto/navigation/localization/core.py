"""The localization service's pure logic: dead reckoning, laser-pose interpolation and pose adjustment.

Strategy (docs/design.md, "Interfaces"), in three modules by idea, whose names this one re-exports:

* :mod:`~pluto.navigation.localization.dead_reckoning`: the robot's pose integrated from the base's odometry
  increments, with the heading increment from the inertial unit's integrated heading while it is fresh (its gyro
  bias learnt while the wheels are still, gaps bridged by the odometry's heading shape), fused by the stamps of the
  inputs, never by their arrival; the history of steps that places a scan after the fact and sums the covariance of
  the increment between two scans; continuing after a restart, and odometry resets.
* :mod:`~pluto.navigation.localization.frames`: the laser's pose from the robot's, through the mount and the wrist,
  and back.
* :mod:`~pluto.navigation.localization.adjustment`: a posted pose never moves the dead reckoning (interfaces 0 and
  1); it becomes a rigid 2-D correction applied to interfaces 3 and 4.

(:mod:`~pluto.navigation.localization.series` holds the time series they look values up in.)

Nothing here reads a clock, the bus or a thread: every input carries its own stamp (s).
"""

from __future__ import annotations

from pluto.navigation.localization.adjustment import ROBOT_POSE, PoseAdjustment
from pluto.navigation.localization.dead_reckoning import (
    RESET_MARGIN,
    Counters,
    DeadReckoning,
    DeadReckoningState,
    LaserPose,
    LocalizationParams,
    RobotPose,
    flat,
)
from pluto.navigation.localization.frames import Matrix, laser_pose, robot_of_laser, rotation

__all__ = [
    "RESET_MARGIN",
    "ROBOT_POSE",
    "Counters",
    "DeadReckoning",
    "DeadReckoningState",
    "LaserPose",
    "LocalizationParams",
    "Matrix",
    "PoseAdjustment",
    "RobotPose",
    "flat",
    "laser_pose",
    "robot_of_laser",
    "rotation",
]
