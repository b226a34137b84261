"""What Pluto's ROS bags, written and read, share: the frames, topics and message types of the ROS conventions
(REP 105), 32-bit floats read back as the decimals they were, and the rotations of the transforms.

:mod:`.rosbag_export` writes a Pluto log as a ROS 2 bag, :mod:`.rosbag` reads ROS bags as Pluto logs (and is where
both are imported from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluto.record.format import LogError

__all__ = [
    "FRAME_BASE",
    "FRAME_LASER",
    "FRAME_MAP",
    "FRAME_ODOM",
    "IDENTITY",
    "LASER_SCAN",
    "ODOMETRY",
    "READ_TYPES",
    "TF_MESSAGE",
    "TOPIC_CMD_VEL",
    "TOPIC_ODOM",
    "TOPIC_SCAN",
    "TOPIC_TF",
    "TOPIC_TF_STATIC",
    "TWIST",
    "TWIST_STAMPED",
    "BagError",
    "Quaternion",
    "Transform",
    "beam_angles",
    "compose_inverse",
    "float32_decimals",
    "quaternion",
    "yaw",
]

FloatArray = npt.NDArray[np.float64]

FRAME_MAP = "map"
FRAME_ODOM = "odom"
FRAME_BASE = "base_link"
FRAME_LASER = "laser"

TOPIC_SCAN = "/scan"
TOPIC_ODOM = "/odom"
TOPIC_TF = "/tf"
TOPIC_TF_STATIC = "/tf_static"
TOPIC_CMD_VEL = "/cmd_vel"

LASER_SCAN = "sensor_msgs/msg/LaserScan"
ODOMETRY = "nav_msgs/msg/Odometry"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
TWIST = "geometry_msgs/msg/Twist"
TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
READ_TYPES = (LASER_SCAN, ODOMETRY, TF_MESSAGE, TWIST, TWIST_STAMPED)


class BagError(LogError):
    """A ROS bag cannot be written or read as Pluto reads it; the message says which bag and why. Commands exit
    with status 2 on it."""

    exit_status = 2


# -- numbers -----------------------------------------------------------------------------------------------------------

_POWERS = np.array([float(10**k) for k in range(23)])
"""10^0 .. 10^22, each exact in a float64."""


def float32_decimals(values: npt.ArrayLike) -> FloatArray:
    """32-bit floats as the shortest decimals (at most 9 significant digits) that round to them, as 64-bit floats.

    A value that was a decimal before it was stored in 32 bits (a range of 2.34 m) comes back as that decimal;
    0, infinities and NaN stay as they are.
    """
    stored = np.asarray(values, dtype=np.float32)
    out = stored.astype(np.float64)
    flat = out.reshape(-1)
    pick = np.flatnonzero(np.isfinite(flat) & (flat != 0.0))
    if pick.size == 0:
        return out
    x = flat[pick]
    target = stored.reshape(-1)[pick]
    exponent = np.floor(np.log10(np.abs(x))).astype(np.int64)
    result = x.copy()
    pending = np.ones(x.size, dtype=bool)
    for digits in range(1, 10):
        power = digits - 1 - exponent  # x rounded to `digits` significant digits is rint(x·10^power)/10^power
        usable = pending & (np.abs(power) <= 22)
        if not usable.any():
            break
        scale = _POWERS[np.abs(power)]
        up = power >= 0  # divide by an exact power of ten, or multiply by one: the decimal correctly rounded
        candidate = np.where(up, np.rint(x * scale) / scale, np.rint(x / scale) * scale)
        found = usable & (candidate.astype(np.float32) == target)
        result[found] = candidate[found]
        pending &= ~found
        if not pending.any():
            break
    flat[pick] = result
    return out


def _whole_fraction(value: float) -> float:
    """``value`` (a 32-bit float read as 64 bits) as π/k when it is within the 32-bit float's precision of that,
    for a whole k; else as it is."""
    if value == 0.0 or not math.isfinite(value):
        return value
    k = round(math.pi / value)
    if k == 0:
        return value
    exact = math.pi / k
    return exact if abs(exact - value) <= 2.0**-23 * abs(value) else value


def beam_angles(angle_min: float, increment: float, count: int) -> FloatArray:
    """The bearings of a ``LaserScan``'s ``count`` beams, rad, from its 32-bit ``angle_min`` and
    ``angle_increment``: the increment as a whole fraction of a half turn and the first angle as a whole number
    of increments where the 32-bit values are those numbers rounded (see the module docstring)."""
    step = _whole_fraction(float(increment))
    first = float(angle_min)
    if step != 0.0:
        m = round(first / step)
        if abs(m * step - first) <= 2.0**-23 * max(abs(first), abs(step)):
            first = m * step
    angles: FloatArray = first + np.arange(count, dtype=np.float64) * step
    return angles


# -- rotations ---------------------------------------------------------------------------------------------------------

Quaternion = tuple[float, float, float, float]
"""(x, y, z, w)."""


def quaternion(yaw: float, pitch: float = 0.0) -> Quaternion:
    """The rotation Rz(yaw)·Ry(pitch) as a unit quaternion."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    return (-sy * sp, cy * sp, sy * cp, cy * cp)


def yaw(q: Quaternion) -> float:
    """The heading of a rotation, rad."""
    x, y, z, w = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _multiply(a: Quaternion, b: Quaternion) -> Quaternion:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def _rotate(q: Quaternion, v: tuple[float, float, float]) -> tuple[float, float, float]:
    moved = _multiply(_multiply(q, (v[0], v[1], v[2], 0.0)), (-q[0], -q[1], -q[2], q[3]))
    return (moved[0], moved[1], moved[2])


@dataclass(frozen=True)
class Transform:
    """A rigid transform: a translation (m) and a rotation."""

    translation: tuple[float, float, float]
    rotation: Quaternion

    def then(self, inner: Transform) -> Transform:
        """This transform followed by ``inner`` (a child's pose in this frame's child)."""
        moved = _rotate(self.rotation, inner.translation)
        t = self.translation
        return Transform((t[0] + moved[0], t[1] + moved[1], t[2] + moved[2]), _multiply(self.rotation, inner.rotation))


IDENTITY = Transform((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))


def compose_inverse(pose: tuple[float, float, float], odom: tuple[float, float, float]) -> tuple[float, float, float]:
    """``pose ∘ odom⁻¹``: the ``map -> odom`` transform that puts ``base_link`` (at ``odom`` in ``odom``) at ``pose``
    in ``map``."""
    turn = pose[2] - odom[2]
    c, s = math.cos(turn), math.sin(turn)
    return pose[0] - (c * odom[0] - s * odom[1]), pose[1] - (s * odom[0] + c * odom[1]), turn
