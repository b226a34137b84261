"""The frames the Player gateway translates between, without I/O: the odometry frame its clients declared
(SET_ODOM, RESET_ODOM) against the base's, and the clock the data is stamped with against the module's.

    frame = OdometryFrame.declaring((1.0, 2.0, 0.5), base_pose=(odometry.x, odometry.y, odometry.theta))
    reported = frame.to_client(odometry)            # what position data says from now on
    goal_on_the_base = frame.to_base((3.0, 2.0, 0.0))  # a position command, in the base's odometry frame
    offset = stamp_clock_offset(now, sim_now, newest_stamp)
"""

# Strategy: Player's position interface (Player 1.5 manual §6.19, "Set odometry", "Reset odometry") declares the
# robot's current odometry pose; the robot does not move. The 1.5 p2os driver did it with offsets of its own
# (sippacket x_offset, y_offset, angle_offset), so only what the position device reports changed. The gateway does
# the same: it keeps where the base's odometry frame sits in the declared one and applies it to what it reports and
# to the position commands it takes, and never changes the base's odometry on the bus, which the localization, the
# drive module's heading hold and the recorders integrate: a jump there would be a move of the robot. The heading
# stays continuous (offset added, not wrapped) so that the pose declared reads back exactly.
#
# Player headers carry two times, when a message is sent and when its data was produced, and Player 1.5 took both
# from one clock (GlobalTime: the wall clock, or the simulator's). A module that follows the wall clock while the
# data is stamped on the simulated time (no use_sim_time beside `pluto sim`) must not mix them: the header times
# are put on the clock the data is stamped with, found as the candidate (the module's clock, or the ``Clock``
# interface's simulated time) nearest to the newest stamp.

from __future__ import annotations

import math
from dataclasses import dataclass

from pluto import msgs
from pluto.geometry import Pose2D

__all__ = ["OdometryFrame", "stamp_clock_offset"]


@dataclass(frozen=True, slots=True)
class OdometryFrame:
    """Where the base's odometry frame sits in the frame the clients declared.

    Attributes:
        origin: (x m, y m, θ rad) of the base's odometry origin in the declared frame; (0, 0, 0) until a client
            declares a pose.
    """

    origin: Pose2D = (0.0, 0.0, 0.0)

    @classmethod
    def declaring(cls, pose: Pose2D, base_pose: Pose2D) -> OdometryFrame:
        """The frame in which the base's current odometry pose ``base_pose`` is ``pose`` (m, m, rad)."""
        theta = pose[2] - base_pose[2]
        c, s = math.cos(theta), math.sin(theta)
        x = pose[0] - (c * base_pose[0] - s * base_pose[1])
        y = pose[1] - (s * base_pose[0] + c * base_pose[1])
        return cls((x, y, theta))

    def to_client(self, odometry: msgs.Odometry) -> msgs.Odometry:
        """The base's odometry in the declared frame (velocities, in the robot's frame, are unchanged)."""
        ox, oy, oth = self.origin
        if ox == 0.0 and oy == 0.0 and oth == 0.0:
            return odometry
        c, s = math.cos(oth), math.sin(oth)
        x = ox + c * odometry.x - s * odometry.y
        y = oy + s * odometry.x + c * odometry.y
        return msgs.Odometry(
            stamp=odometry.stamp, x=x, y=y, theta=oth + odometry.theta, v=odometry.v, omega=odometry.omega
        )

    def to_base(self, pose: Pose2D) -> Pose2D:
        """A pose given in the declared frame (a position command's goal), in the base's odometry frame."""
        ox, oy, oth = self.origin
        c, s = math.cos(oth), math.sin(oth)
        dx, dy = pose[0] - ox, pose[1] - oy
        return c * dx + s * dy, -s * dx + c * dy, pose[2] - oth


def stamp_clock_offset(now: float, sim_now: float | None, newest_stamp: float | None) -> float:
    """The time on the clock the data is stamped with, less the module's time ``now``, s.

    Args:
        now: the module's clock, s.
        sim_now: the simulated time on the ``Clock`` interface, s, or None when nothing publishes one (or when the
            module follows it already).
        newest_stamp: the newest stamp of the data served, s, or None before any.

    Returns:
        ``sim_now - now`` when the data is stamped on the simulated time (its newest stamp is nearer to it than to
        the module's clock), else 0.
    """
    if sim_now is None or newest_stamp is None or not math.isfinite(newest_stamp):
        return 0.0
    if abs(newest_stamp - sim_now) < abs(newest_stamp - now):
        return sim_now - now
    return 0.0
