"""The simulated arm: servos that move to their commanded targets no faster than their top speeds.

It stands in for the SSC-32 arm with the same interfaces; like the real arm, its state is what was commanded
(the ramps of :class:`~pluto.hardware.arm.servo.JointRamps`), here also limited by each joint's ``max_speed``.
"""

from __future__ import annotations

from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.servo import FloatArray, JointRamps

__all__ = ["SimulatedArm"]


class SimulatedArm:
    """A simulated arm (a backend of the arm module).

    Args:
        model: the arm (limits, top speeds, home posture).
        now: the time of the start, s.
    """

    def __init__(self, model: ArmModel, now: float = 0.0) -> None:
        self.model = model
        self.ramps = JointRamps(model.home, model.max_speed, model.lower, model.upper)
        self.commands = 0

    def command(self, targets: FloatArray, speeds: FloatArray | None, move_time: float, now: float) -> None:
        """Move toward ``targets`` (NaN: keep) as the servos can (see :class:`~.servo.ArmBackend`)."""
        self.commands += 1
        self.ramps.command(targets, speeds, move_time, now)

    def position(self, now: float) -> FloatArray:
        return self.ramps.position(now)

    def velocity(self, now: float) -> FloatArray:
        return self.ramps.velocity(now)

    def close(self) -> None:
        """Nothing to release."""
