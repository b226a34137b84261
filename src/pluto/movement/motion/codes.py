"""The numbers of ``motion/command`` and ``motion/status``: a protocol (docs/design.md, "motion"), so each is written
here once, as an :class:`~enum.IntEnum`, and never changes.

    MotionCommand.MOVETO        # 42: cmd_flags of a moveto
    MovetoStatus.AT_GOAL        # 1: element[2] once the goal is reached
    MotionStatus.SCANNING       # 1: element[3] while the robot looks for a way

The members are ints: they compare, encode and print as the numbers.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from pluto.movement.avoid.codes import Avoidance, AvoidStatus, Mode
from pluto.movement.drive.core import DriveStatus

__all__ = [
    "FRONT_BUMPER",
    "LASER_GOTO",
    "LASER_SLOW",
    "LASER_VELOCITY",
    "PASS_LIMIT",
    "PLAIN_VELOCITY",
    "MotionCommand",
    "MotionStatus",
    "MovetoStatus",
]


class MotionCommand(IntEnum):
    """cmd_flags of ``motion/command`` (0 to 39 are passed through to avoid, see :data:`PASS_LIMIT`)."""

    RELEASE = -1
    """Passed to avoid (which stops too), and the motion thread stops."""
    MOVETO = 42
    """position[0..1] = (x, y) in the ``Localization/Pose`` frame."""
    INVESTIGATE = 43
    """Investigate the closest object."""
    EXPLORE = 44
    """The rectangle (b, h) = velocity[0..1] with home at the current pose, then explore (resumes a stopped
    motion)."""
    RESUME = 45
    """Start or resume."""
    SET_RECTANGLE = 46
    """Set the rectangle only: (b, h) = velocity[0..1], home (x, y) = position[0..1], θ = force[0]."""


PASS_LIMIT: Final = 40
"""cmd_flags below this (and >= 0) are passed through to avoid."""


class MovetoStatus(IntEnum):
    """element[2] of ``motion/status``."""

    IDLE = 0
    SET = -1
    """A moveto point is set."""
    NEARING = -2
    """Nearing the point: the simple goto took over."""
    AT_GOAL = 1
    INVESTIGATE_DONE = 2
    RESTART_LOST = -3
    """The module restarted and could not continue the job it had (or could not tell whether it had one)."""


class MotionStatus(IntEnum):
    """element[3] of ``motion/status``."""

    THREAD_STOPPED = -10
    IDLE_RECTANGLE = -1
    """Not moving, the rectangle set."""
    IDLE = 0
    """Not moving, no rectangle."""
    SCANNING = 1
    """Scanning for new paths."""
    FOLLOWING = 3
    """Following a path."""
    WAITING_SCAN = 7
    """A behaviour waits, the robot stopped, for fresh laser scans (they went stale)."""
    WAITING_POSE = 8
    """A behaviour waits, the robot stopped, for a fresh pose (stale or none), or at the goal for a pose certain
    enough to tell it is reached."""
    WAITING_AVOID = 9
    """A behaviour waits, the robot stopped, for avoid's status (it went stale: the avoid module silent)."""
    TOWARDS_OBJECT = 11
    """Investigate: moving towards the object."""
    CIRCLING = 12
    """Investigate: circling it."""


LASER_GOTO: Final = 10 * Avoidance.LASER + Mode.GOTO
"""The avoid command of a goto with laser avoidance (22)."""
LASER_VELOCITY: Final = 10 * Avoidance.LASER + Mode.VELOCITY
"""The avoid command of a velocity with laser protection (20)."""
PLAIN_VELOCITY: Final = 10 * Avoidance.NONE + Mode.VELOCITY
"""The avoid command of a velocity without protection (0): only for turning on the spot."""
FRONT_BUMPER: Final = DriveStatus.FRONT_BUMPER
"""element[0] of avoid's status passed on from the drive: the front bumper is pressed."""
LASER_SLOW: Final = AvoidStatus.LASER_SLOW
"""element[0] of avoid's status: the laser protection slowed or stopped the robot."""
