"""The motion model of the reference AMCL (``bench/amcl.py``): Nav2's ``diff``, Probabilistic Robotics'
``sample_motion_model_odometry``, step 2 of the algorithm there. Its randomness comes from the caller's seeded
generator.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from pluto.geometry import Pose2D, wrap_angle

__all__ = ["sample_motion_model_odometry"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_MIN_STEP_FOR_BEARING = 0.01
"""m: an odometry step shorter than this has no direction (δrot1 = 0), as in Nav2."""


def sample_motion_model_odometry(
    particles: FloatArray,
    odom_from: Pose2D,
    odom_to: Pose2D,
    alphas: tuple[float, float, float, float],
    rng: np.random.Generator,
) -> FloatArray:
    """Move every particle by one odometry step with sampled noise (Probabilistic Robotics, table 5.6).

    Args:
        particles: ``(N, 3)`` poses ``(x, y, θ)``, m, m, rad.
        odom_from: odometry pose at the previous filter run.  odom_to: odometry pose now.
        alphas: ``(α1, α2, α3, α4)``: rotation noise from rotation and from translation, translation noise from
            translation and from rotation.
        rng: the source of the noise.

    Returns:
        ``(N, 3)`` the moved particles (headings wrapped to [-π, π)); the input is not changed.
    """
    a1, a2, a3, a4 = alphas
    dx = odom_to[0] - odom_from[0]
    dy = odom_to[1] - odom_from[1]
    trans = math.hypot(dx, dy)
    rot1 = 0.0 if trans < _MIN_STEP_FOR_BEARING else wrap_angle(math.atan2(dy, dx) - odom_from[2])
    rot2 = wrap_angle(odom_to[2] - odom_from[2] - rot1)
    # A turn of nearly π is a step backwards: its noise is that of the small turn it differs from π by.
    rot1_noise = min(abs(rot1), math.pi - abs(rot1))
    rot2_noise = min(abs(rot2), math.pi - abs(rot2))
    n = particles.shape[0]
    std = np.sqrt(
        [
            a1 * rot1_noise**2 + a2 * trans**2,
            a3 * trans**2 + a4 * (rot1_noise**2 + rot2_noise**2),
            a1 * rot2_noise**2 + a2 * trans**2,
        ]
    )
    noise = rng.standard_normal((3, n)) * std[:, None]
    rot1_hat = rot1 - noise[0]
    trans_hat = trans - noise[1]
    rot2_hat = rot2 - noise[2]
    heading = particles[:, 2] + rot1_hat
    moved = np.empty_like(particles)
    moved[:, 0] = particles[:, 0] + trans_hat * np.cos(heading)
    moved[:, 1] = particles[:, 1] + trans_hat * np.sin(heading)
    moved[:, 2] = wrap_angle(heading + rot2_hat)
    return moved
