"""Planar pose arithmetic shared by the simulator, the drivers and the movement chain.

A pose is (x, y, θ): metres and radians, θ counter-clockwise from the x axis. :func:`unicycle_step` moves one along
the arc of constant velocities (the simulated base's motion, and where another robot is by now).

Angles are wrapped by :func:`wrap_angle` alone, a float or a numpy array of them, to [-π, π) (or to (-π, π] where π
must read as +π); the compiled kernels, which cannot call it, use its twin
:func:`pluto.navigation.angles.compiled_wrap_angle`, the same arithmetic.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:  # the arithmetic needs no numpy: a command that wraps floats does not import it
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

Pose2D = tuple[float, float, float]

_TWO_PI = 2.0 * math.pi

LASER_MOUNT: tuple[float, float, float] = (0.25, 0.0, 0.9)
"""Where the laser sits on the robot unless configured otherwise: x ahead of the base's centre, y to its left, z up, m
(the Pioneer's SICK on its wrist: the localization's, the pose module's and the log tools' default)."""


@overload
def wrap_angle(angle: float, *, positive_pi: bool = False) -> float: ...
@overload
def wrap_angle(angle: FloatArray, *, positive_pi: bool = False) -> FloatArray: ...
def wrap_angle(angle: float | FloatArray, *, positive_pi: bool = False) -> float | FloatArray:
    """``angle`` (rad, a float or an array of them, elementwise) wrapped to [-π, π), or to (-π, π] with
    ``positive_pi`` (a heading shown to a person or held by the keys reads 180°, not -180°).

    Python's ``%`` on a float and numpy's on an array are the same floor modulo, so a float and an array element
    wrap to the same bits.
    """
    if positive_pi:
        return -((-angle + math.pi) % _TWO_PI - math.pi)
    return (angle + math.pi) % _TWO_PI - math.pi


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


def unicycle_step(x: float, y: float, theta: float, v: float, omega: float, dt: float) -> tuple[float, float, float]:
    """Exact pose after moving at constant (v, ω) for ``dt`` (an arc, or a line when ω = 0)."""
    if abs(omega) < 1e-9:
        return x + v * dt * math.cos(theta), y + v * dt * math.sin(theta), theta
    r = v / omega
    new_theta = theta + omega * dt
    return x + r * (math.sin(new_theta) - math.sin(theta)), y - r * (math.cos(new_theta) - math.cos(theta)), new_theta
