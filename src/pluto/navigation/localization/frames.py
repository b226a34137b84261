"""Where the laser is: the pose's rotation convention, and a robot pose to and from the laser's through the mount
and the wrist.

The laser turns about its mount point on the robot (as the simulated and real pan/tilt units do): its position
depends on the robot pose and the mount only, its heading is the robot's θ plus the pan and its pitch φ plus the
tilt. Poses are (x, y, z, θ, φ, ψ) with the rotation Rz(θ)·Ry(φ)·Rx(ψ) (docs/design.md); a laser pose carries the
pan and tilt as two more values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Matrix", "laser_pose", "robot_of_laser", "rotation"]

Matrix = npt.NDArray[np.float64]


def rotation(theta: float, phi: float, psi: float) -> Matrix:
    """The rotation matrix Rz(θ)·Ry(φ)·Rx(ψ) (3x3) of the pose's angle convention (docs/design.md)."""
    ct, st = math.cos(theta), math.sin(theta)
    cp, sp = math.cos(phi), math.sin(phi)
    cs, ss = math.cos(psi), math.sin(psi)
    return np.array(
        [
            [ct * cp, ct * sp * ss - st * cs, ct * sp * cs + st * ss],
            [st * cp, st * sp * ss + ct * cs, st * sp * cs - ct * ss],
            [-sp, cp * ss, cp * cs],
        ]
    )


def laser_pose(
    pose: Sequence[float], pan: float, tilt: float, mount: tuple[float, float, float]
) -> tuple[float, float, float, float, float, float, float, float]:
    """The 8-D laser pose of a robot pose: the mount point composed with the robot pose, then the wrist.

    The laser turns about the mount point (as the simulated and real pan/tilt units do), so its position does not
    depend on pan and tilt; its heading is θ + pan and its pitch φ + tilt.

    Args:
        pose: robot (x, y, z, θ, φ, ψ), m and rad.
        pan, tilt: wrist angles, rad.
        mount: laser position in the robot frame, m.

    Returns:
        (x, y, z, θ, φ, ψ, pan, tilt) of the laser, m and rad.
    """
    x, y, z, theta, phi, psi = (float(v) for v in pose[:6])
    mx, my, mz = mount
    if phi == 0.0 and psi == 0.0:
        c, s = math.cos(theta), math.sin(theta)
        lx, ly, lz = x + c * mx - s * my, y + s * mx + c * my, z + mz
    else:
        offset = rotation(theta, phi, psi) @ np.array(mount)
        lx, ly, lz = x + float(offset[0]), y + float(offset[1]), z + float(offset[2])
    return (lx, ly, lz, theta + pan, phi + tilt, psi, pan, tilt)


def robot_of_laser(
    laser: Sequence[float], pan: float, tilt: float, mount: tuple[float, float, float]
) -> tuple[float, float, float, float, float, float]:
    """The robot pose whose laser pose is ``laser`` (the inverse of :func:`laser_pose`).

    Args:
        laser: (x, y, z, θ, φ, ψ[, pan, tilt]) of the laser; pan and tilt in it, if given, win over the arguments.
        pan, tilt: wrist angles to use when ``laser`` is 6-D, rad.
        mount: laser position in the robot frame, m.
    """
    if len(laser) >= 8:
        pan, tilt = float(laser[6]), float(laser[7])
    lx, ly, lz, lt, lp, ls = (float(v) for v in laser[:6])
    theta, phi, psi = lt - pan, lp - tilt, ls
    offset = rotation(theta, phi, psi) @ np.array(mount)
    return (lx - float(offset[0]), ly - float(offset[1]), lz - float(offset[2]), theta, phi, psi)
