"""What the motion controller reads and writes each step: the laser scan, the inputs, the commands for avoid and
the output (:class:`.core.MotionController`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .codes import LASER_VELOCITY

__all__ = ["AvoidOrder", "MotionInputs", "MotionOutput", "Scan", "WorldScan", "stop"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
WorldScan = tuple[tuple[float, float], FloatArray, FloatArray, BoolArray]
"""A scan in the pose frame: (laser origin m, world bearings rad, ranges m, echo mask)."""


@dataclass(frozen=True)
class Scan:
    """A laser scan as the controller needs it.

    Attributes:
        stamp: s.
        ranges: (N,) m (-1 fault, >= max_range no echo).
        angles: (N,) bearings in the laser frame, rad, increasing.
        max_range: m.
        pan, tilt: the wrist when it was taken, rad (tilt positive down).
        mount_x: forward offset of the wrist axis from the robot centre, m.
        pose: the robot's pose when it was taken, (x m, y m, θ rad), if known (else the step's pose is used).
    """

    stamp: float
    ranges: FloatArray
    angles: FloatArray
    max_range: float
    pan: float = 0.0
    tilt: float = 0.0
    mount_x: float = 0.25
    pose: tuple[float, float, float] | None = None

    def world(self, pose: tuple[float, float, float]) -> WorldScan:
        """(laser origin, world bearings (N,), ranges (N,), echo mask (N,)) of the scan, taken at its own pose if it
        has one, else at ``pose``."""
        x, y, th = self.pose if self.pose is not None else pose
        origin = (x + self.mount_x * math.cos(th), y + self.mount_x * math.sin(th))
        bearings = th + self.pan + self.angles
        r = self.ranges
        ok = (r > 0.0) & (r < self.max_range - 1e-6)
        return origin, bearings, r, ok


@dataclass(frozen=True)
class MotionInputs:
    """What the controller sees in one step.

    Attributes:
        pose: (x m, y m, θ rad) from ``Localization/Pose``, or None before the first.
        scan: the newest laser scan, or None.
        wrist: (pan, tilt) of ``Wrist/State``, rad, or None.
        avoid_data: data of ``avoidance/status``.
        avoid_element: element[0..1] of ``avoidance/status`` (element[1] -10 when the avoid thread is stopped).
        has_arm: an arm is present (investigate asks for it to unfold).
        pose_std: the pose's position uncertainty, m (standard deviation along its worst axis); the goal is reached
            only when it is at most a third of ``goal_tolerance``.
        scan_stale: the laser scans, heard before, are stale (``scan`` is then None).
        avoid_stale: avoid's status, heard before (its thread not stopped), is stale.
    """

    pose: tuple[float, float, float] | None = None
    scan: Scan | None = None
    wrist: tuple[float, float] | None = None
    avoid_data: tuple[float, float] = (0.0, 0.0)
    avoid_element: tuple[int, int] = (0, 0)
    has_arm: bool = False
    pose_std: float = 0.0
    scan_stale: bool = False
    avoid_stale: bool = False


@dataclass(frozen=True)
class AvoidOrder:
    """A command for ``avoidance/command``."""

    cmd_flags: int
    position: tuple[float, ...] = ()
    velocity: tuple[float, ...] = ()
    force: tuple[float, ...] = ()


@dataclass(frozen=True)
class MotionOutput:
    """The result of a step.

    Attributes:
        avoid: the commands to write to avoid, in order (none: write nothing).
        wrist: the (pan, tilt) to command, rad, or None to leave the wrist.
        data, element: the status.
        start_avoid: the avoid thread is stopped and a motion needs it: start it.
        unfold_arm: ask the arm to unfold (investigate, once).
    """

    avoid: tuple[AvoidOrder, ...]
    wrist: tuple[float, float] | None
    data: tuple[float, float]
    element: tuple[int, int, int, int]
    start_avoid: bool = False
    unfold_arm: bool = False


def stop() -> AvoidOrder:
    """Stop: a velocity of zero with laser protection."""
    return AvoidOrder(LASER_VELOCITY, (), (0.0, 0.0))
