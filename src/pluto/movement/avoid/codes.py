"""The numbers of ``avoidance/command`` and ``avoidance/status``: a protocol (docs/design.md, "avoid"), so each is
written here once, as an :class:`~enum.IntEnum`, and never changes.

    cmd_flags = 10 * Avoidance.LASER + Mode.GOTO    # 22: a goto with laser avoidance
    AvoidStatus.LASER_SLOW                          # 6: element[0] while the laser slows the robot
    GotoStatus.REACHED                              # 1: element[1] once a goto is at its goal

The members are ints: they compare, encode and print as the numbers.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["DRIVE_HALT", "RELEASE", "AvoidStatus", "Avoidance", "GotoStatus", "Mode"]


class Avoidance(IntEnum):
    """The avoidance A of a command (the tens digit of cmd_flags)."""

    NONE = 0
    SONAR = 1
    """Sonar only (also the drive's sonar protection, drive cmd_flags + 10)."""
    LASER = 2
    BOTH = 3


class Mode(IntEnum):
    """Command types T (the ones digit of cmd_flags)."""

    VELOCITY = 0
    HEADING = 1
    GOTO = 2
    WALL_FOLLOW = 3
    HALT = 4
    """Stop at once (a commander whose own input went stale), the drive told cmd_flags 2."""


class AvoidStatus(IntEnum):
    """The avoid module's own codes of element[0] of ``avoidance/status`` (the others are the drive's,
    :class:`pluto.movement.drive.core.DriveStatus`)."""

    LASER_SLOW = 6
    """The laser slowed or stopped the robot."""
    LASER_FAULT = 7
    """The laser had a fatal error and is rebooting (every range -1), or its scans are stale: the robot is stopped
    at once (laser avoidance on) until a fresh scan."""
    STALE_POSE = 8
    """The pose (or the odometry) a goto or a heading command steers by is stale, or too uncertain to tell that the
    goal is reached: the robot is stopped at once; the command goes on when the pose is fresh (and certain)."""
    COMMANDER_SILENT = 9
    """The command's lease ran out (its commander, which renews it every step, went silent): the robot is stopped at
    once; the command goes on when it is renewed."""


class GotoStatus(IntEnum):
    """element[1] of ``avoidance/status``."""

    NONE = 0
    """No goto (or another command) in force."""
    REACHED = 1
    STUCK = 2
    UNVERIFIED = 3
    """The goto ended within the tolerance of its goal by a pose too uncertain to tell it is there."""
    RUNNING = -1
    THREAD_STOPPED = -10
    """The avoid thread is stopped."""


RELEASE = -1
"""cmd_flags that releases the robot (stops the avoid thread)."""
DRIVE_HALT = 2
"""The drive's cmd_flags of a halt (stop at once, no acceleration ramp)."""
