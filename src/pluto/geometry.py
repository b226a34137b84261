"""Planar pose arithmetic shared by the simulator, the drivers and the movement chain.

A pose is (x, y, θ): metres and radians, θ counter-clockwise from the x axis.
"""

from __future__ import annotations

import math

Pose2D = tuple[float, float, float]

LASER_MOUNT: tuple[float, float, float] = (0.25, 0.0, 0.9)
"""Where the laser sits on the robot unless configured otherwise: x ahead of the base's centre, y to its left, z up, m
(the Pioneer's SICK on its wrist: the localization's, the pose module's and the log tools' default)."""


def wrap_angle(angle: float) -> float:
    """``angle`` (rad) wrapped to [-π, π)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def angle_difference(a: float, b: float) -> float:
    """The signed smallest rotation (rad) that takes ``b`` to ``a``, in [-π, π)."""
    return wrap_angle(a - b)


def compose(origin: Pose2D, relative: Pose2D) -> Pose2D:
    """The pose ``relative`` (in the frame of ``origin``) expressed in the frame ``origin`` is given in."""
    ox, oy, oth = origin
    rx, ry, rth = relative
    c, s = math.cos(oth), math.sin(oth)
    return ox + c * rx - s * ry, oy + s * rx + c * ry, oth + rth


def relative(origin: Pose2D, pose: Pose2D) -> Pose2D:
    """``pose`` expressed in the frame of ``origin`` (the inverse of :func:`compose`), heading wrapped."""
    ox, oy, oth = origin
    c, s = math.cos(oth), math.sin(oth)
    dx, dy = pose[0] - ox, pose[1] - oy
    return c * dx + s * dy, -s * dx + c * dy, wrap_angle(pose[2] - oth)
