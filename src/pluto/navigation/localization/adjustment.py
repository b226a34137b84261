"""The correction of the dead reckoning by posted poses (interface 2): what turns interfaces 0 and 1 into 3 and 4.

Strategy: a posted pose (§3, interface 2) never moves dead reckoning (interfaces 0 and 1): it becomes a rigid 2-D
correction T with T ∘ DR(t_post) = posted pose, applied to interfaces 3 and 4. Its covariance restarts the absolute
covariance, so a post whose covariance cannot be one (not finite, not symmetric, a negative variance in some
direction: :func:`pluto.limits.check_covariance`) is refused whole, with nothing changed, not even the setter.

Nothing here reads a clock, the bus or a thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pluto.limits import LimitError, check_covariance
from pluto.navigation.localization.dead_reckoning import DeadReckoning
from pluto.navigation.localization.frames import Matrix, robot_of_laser

__all__ = ["ROBOT_POSE", "PoseAdjustment"]

ROBOT_POSE = -1
"""The setter value (``cmd_flags``) of a post that is a robot pose (any negative value is one)."""


def _rotate_covariance(covariance: Matrix, alpha: float) -> Matrix:
    c, s = math.cos(alpha), math.sin(alpha)
    r = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    rotated: Matrix = r @ covariance @ r.T
    return rotated


@dataclass
class PoseAdjustment:
    """The rigid 2-D correction from dead reckoning to the best pose, set by posts (interface 2).

    Attributes:
        setter: who set it last: 0 nobody, 1 the pose module, 2 and 3 SLAM, < 0 a robot pose posted by hand.
        dx, dy, alpha: the correction T: p ↦ Rot(alpha)·p + (dx, dy); θ ↦ θ + alpha (m, rad).
        posts: number of posts applied.
    """

    setter: int = 0
    dx: float = 0.0
    dy: float = 0.0
    alpha: float = 0.0
    posts: int = 0

    def post(
        self,
        dr: DeadReckoning,
        stamp: float,
        pose: Sequence[float],
        setter: int,
        covariance: Sequence[float] | None = None,
    ) -> bool:
        """Apply a post: ``pose`` is a robot pose if ``setter < 0``, else a laser pose (6-D or 8-D), at ``stamp``.

        An empty pose only changes the setter (the pose module stopping). The posted covariance (9 values, world
        frame; empty or None: zeros) restarts the absolute covariance at ``stamp``. A refused post changes nothing.

        Returns:
            True if the correction changed; False if only the setter did (empty pose, or no odometry yet).

        Raises:
            ValueError: a pose that is not 3-, 6- or 8-D, or not finite; a covariance that cannot be one
                (:class:`~pluto.limits.LimitError`, naming the entry: not 9 finite values, not symmetric, or not
                positive semi-definite).
        """
        if len(pose) and (len(pose) not in (3, 6, 8) or not all(math.isfinite(v) for v in pose)):
            raise ValueError(f"a posted pose must be 3-, 6- or 8-D and finite, got {list(pose)}")
        try:
            checked = check_covariance("posted covariance", covariance or [])
        except LimitError as err:
            raise LimitError(f"{err} (the post is refused)") from None
        self.setter = int(setter)
        if len(pose) == 0:
            return False
        if not dr.started:
            return False
        at = dr.pose_at(stamp)
        if at is None:  # outside the history: use the nearest end
            at = dr.pose() if stamp > dr.latest_stamp else dr.pose_at(dr.earliest_stamp)
            assert at is not None
            stamp = at.stamp
        if len(pose) == 3:
            target = (float(pose[0]), float(pose[1]), float(pose[2]))
        elif setter < 0:
            target = (float(pose[0]), float(pose[1]), float(pose[3]))
        else:
            pan, tilt = dr.wrist_at(stamp)
            robot = robot_of_laser(pose, pan, tilt, dr.params.laser_mount)
            target = (robot[0], robot[1], robot[3])
        x, y, _z, theta = at.pose[:4]
        self.alpha = target[2] - theta
        c, s = math.cos(self.alpha), math.sin(self.alpha)
        self.dx = target[0] - (c * x - s * y)
        self.dy = target[1] - (s * x + c * y)
        self.posts += 1
        posted = np.array(checked, dtype=float).reshape(3, 3) if checked else np.zeros((3, 3))
        dr.reset_absolute(stamp, _rotate_covariance(posted, -self.alpha))
        return True

    def apply(self, pose: Sequence[float]) -> list[float]:
        """The corrected pose: ``pose`` is a robot (6-D) or laser (8-D) pose in the dead-reckoning frame."""
        c, s = math.cos(self.alpha), math.sin(self.alpha)
        out = [float(v) for v in pose]
        out[0] = c * pose[0] - s * pose[1] + self.dx
        out[1] = s * pose[0] + c * pose[1] + self.dy
        out[3] = pose[3] + self.alpha
        return out

    def covariance(self, absolute: Matrix) -> list[float]:
        """The absolute covariance (dead-reckoning frame) in the corrected frame, as 9 row-major values."""
        return [float(v) for v in _rotate_covariance(absolute, self.alpha).ravel()]
