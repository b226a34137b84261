"""One link of a serial arm: its parameters, its servo channel, and the homogeneous transforms it is made of.

    link = Link(name="Elbow", index=2, type="revolute", parent=1, r=0.0917, lower=-1.57, upper=1.57)
    link.transform(0.3)                 # (4, 4): the parent's frame to this link's frame at joint value 0.3 rad

A link's transform from its parent is ``Rz(θ) · Tz(d) · Tx(r) · Rx(α) · Rz(q + q_offset)`` for a revolute joint, with
``Tz(q + q_offset)`` as the last factor for a prismatic one; frames and joints whose limits are equal are immobile.
Lengths are in m, angles in rad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["FloatArray", "JointType", "Link", "ServoChannel", "rot_x", "rot_z", "trans"]

FloatArray = NDArray[np.float64]
JointType = Literal["revolute", "prismatic", "fixed"]


def rot_z(angle: float) -> FloatArray:
    """Homogeneous rotation about z by ``angle`` rad, (4, 4)."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0, 0.0], [s, c, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def rot_x(angle: float) -> FloatArray:
    """Homogeneous rotation about x by ``angle`` rad, (4, 4)."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, c, -s, 0.0], [0.0, s, c, 0.0], [0.0, 0.0, 0.0, 1.0]])


def trans(x: float, y: float, z: float) -> FloatArray:
    """Homogeneous translation by (x, y, z) m, (4, 4)."""
    t = np.eye(4)
    t[:3, 3] = (x, y, z)
    return t


@dataclass(frozen=True)
class ServoChannel:
    """How a joint maps onto an SSC-32 channel: linear from ``pulse_at_min`` (at the lower limit) to
    ``pulse_at_max`` (at the upper limit), µs; the two may be in either order (a servo mounted the other way)."""

    channel: int
    pulse_at_min: float
    pulse_at_max: float


@dataclass(frozen=True)
class Link:
    """One link of the arm: a joint (an output) or an extra frame.

    Attributes:
        name: the output or frame name (``Shldr:rot``, ``GripperFrame``).
        index: the link index (the output offset; frames follow the outputs).
        type: ``revolute``, ``prismatic`` or ``fixed`` (frames).
        parent: index of the parent link, -1 for the base.
        theta, alpha, q_offset: rad (q_offset in m for a prismatic joint).
        d, r: m.
        lower, upper: joint limits, rad or m; equal for an immobile joint.
        max_speed: the servo's top speed, rad/s or m/s (inf if not given).
        home: the joint value assumed when the arm starts, rad or m.
        ssc32: the servo channel, if the joint has one.
    """

    name: str
    index: int
    type: JointType
    parent: int = -1
    theta: float = 0.0
    d: float = 0.0
    alpha: float = 0.0
    r: float = 0.0
    q_offset: float = 0.0
    lower: float = 0.0
    upper: float = 0.0
    max_speed: float = math.inf
    home: float = 0.0
    ssc32: ServoChannel | None = None
    fixed: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        f = rot_z(self.theta) @ trans(0.0, 0.0, self.d) @ trans(self.r, 0.0, 0.0) @ rot_x(self.alpha)
        object.__setattr__(self, "fixed", f)

    @property
    def movable(self) -> bool:
        """The joint can move (not a frame, and its limits differ)."""
        return self.type != "fixed" and self.upper > self.lower

    def motion(self, q: float) -> FloatArray:
        """The joint's own factor at joint value ``q``: ``Rz(q + q_offset)`` or ``Tz(q + q_offset)``, (4, 4)."""
        if self.type == "prismatic":
            return trans(0.0, 0.0, q + self.q_offset)
        return rot_z((q if self.type == "revolute" else 0.0) + self.q_offset)

    def transform(self, q: float) -> FloatArray:
        """Transform from the parent's frame to this link's frame at joint value ``q``, (4, 4), m."""
        return self.fixed @ self.motion(q)
