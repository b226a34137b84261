"""The drive module: the first link of the movement chain above the base.

It passes velocity commands to the base, holds a heading on request (``cmd_flags`` 1), protects the robot with the
sonar ring on request (+10), and always stops on a bumper, limits accelerations and times out a silent commander.
:mod:`.core` holds the pure control law, :mod:`.module` the bus shell and :mod:`.proxy` the client API.
"""

from pluto.movement.drive.core import (
    DriveController,
    DriveOutput,
    DriveParams,
    DriveStatus,
    OdometryCalibration,
)

__all__ = ["DriveController", "DriveOutput", "DriveParams", "DriveStatus", "OdometryCalibration"]
