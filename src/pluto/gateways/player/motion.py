"""The motion the Player gateway keeps commanding for its clients: pure logic, no bus.

A Player client sets a speed once and expects the robot to keep it (a Player server holds the last command), while
the drive module and the base stop on commands that are not renewed. :class:`MotionHold` keeps the newest command
of the clients with write access and says, at each step, what the module must write. A held velocity lapses when
no new one has come for ``command_timeout`` s: the robot is then stopped, so a client that falls silent while
connected (hung, or cut off without its connection closing) does not keep the robot moving.
"""

# Strategy: velocity commands go to the drive module (``drive/command``, cmd_flags 0) when it runs, otherwise
# straight to the base (``Base/Drive/Command``); the held velocity is written again every ``resend_period`` s of
# the module clock, well inside both timeouts (4 s and 1 s). Re-sent that way the command would never time out
# downstream, so the hold has its own timeout: ``command_timeout`` s after the step that took in the newest velocity
# (every velocity command renews it, the same one again too), zero speed is written once and the velocity is
# dropped. 0 turns this off (Player 1.5's hold for ever: a client that hangs leaves the robot moving). A goal
# (position mode) goes once to the avoid module,
# which keeps driving towards it by itself; a velocity command or a stop while a goal is in force releases the avoid
# module first (cmd_flags -1), since it would otherwise keep writing drive/command, and the next goal then starts
# its control step again. A stop writes zero speed once and then nothing: the gateway must not hold the robot
# still against other commanders once its clients are gone. When the clock goes back (a new simulation run, a
# replay started again) every command is forgotten without a write: the old run's commands must not move the new
# run's robot, and the drive and avoid modules forget theirs too.

from __future__ import annotations

from dataclasses import dataclass

from pluto.gateways.player.devices import Goal, Velocity

__all__ = ["MotionAction", "MotionHold", "ReleaseAvoid", "SendGoal", "WriteVelocity"]


@dataclass(frozen=True, slots=True)
class WriteVelocity:
    """Write a velocity command: to the drive module if ``via_drive``, else to the base."""

    v: float
    omega: float
    via_drive: bool


@dataclass(frozen=True, slots=True)
class SendGoal:
    """Send a goto to the avoid module (in the ``Localization/Pose`` frame); ``restart`` its control step first."""

    goal: Goal
    restart: bool


@dataclass(frozen=True, slots=True)
class ReleaseAvoid:
    """Release the avoid module (it stops the robot and its control step)."""


MotionAction = WriteVelocity | SendGoal | ReleaseAvoid


class MotionHold:
    """The command in force for the Player clients.

    Args:
        resend_period: s between writes of a held velocity.
        command_timeout: s after which a held velocity not renewed lapses and the robot is stopped; 0: never
            (unsafe).
    """

    def __init__(self, resend_period: float = 0.1, command_timeout: float = 1.0) -> None:
        self.resend_period = resend_period
        self.command_timeout = command_timeout
        self.lapses = 0
        """Held velocities that lapsed (no new one for ``command_timeout`` s)."""
        self._velocity: Velocity | None = None
        self._fresh = False
        self._taken_at = 0.0
        self._last_write: float | None = None
        self._stop = False
        self._goal: Goal | None = None
        self._goal_sent: Goal | None = None
        self._release = False
        self._avoid_released = False

    @property
    def velocity(self) -> Velocity | None:
        """The velocity held, or None."""
        return self._velocity

    @property
    def goal(self) -> Goal | None:
        """The goal in force (sent or about to be), or None."""
        return self._goal or self._goal_sent

    def set_velocity(self, velocity: Velocity) -> None:
        """Hold ``velocity`` from now on (a goal in force is abandoned)."""
        self._end_goal()
        self._velocity = velocity
        self._fresh = True
        self._stop = False

    def set_goal(self, goal: Goal) -> None:
        """Go to ``goal`` (a held velocity is dropped); the same goal again changes nothing."""
        self._velocity = None
        self._stop = False
        if goal == self._goal_sent and self._goal is None:
            return
        self._goal = goal

    def stop(self) -> None:
        """Command zero speed once, then nothing (the last client with write access has gone)."""
        self._end_goal()
        self._velocity = None
        self._stop = True

    def forget(self) -> None:
        """Forget every command and when it was written, and write nothing for them (the clock went back: a new
        simulation run starts stopped, and the old run's commands must not move its robot)."""
        self._velocity = None
        self._fresh = False
        self._last_write = None
        self._stop = False
        self._goal = self._goal_sent = None
        self._release = False

    def _end_goal(self) -> None:
        if self._goal_sent is not None:
            self._release = True
            self._avoid_released = True
        self._goal = self._goal_sent = None

    def step(self, now: float, drive_running: bool) -> list[MotionAction]:
        """What to write now.

        Args:
            now: the module clock, s.
            drive_running: the drive module is alive (velocity commands go through it).
        """
        actions: list[MotionAction] = []
        if self._release:
            self._release = False
            actions.append(ReleaseAvoid())
        if self._stop:
            self._stop = False
            actions.append(WriteVelocity(0.0, 0.0, drive_running))
        if self._goal is not None:
            actions.append(SendGoal(self._goal, self._avoid_released))
            self._goal_sent, self._goal = self._goal, None
            self._avoid_released = False
        velocity = self._velocity
        if velocity is not None and self._fresh:
            self._taken_at = now
        elif velocity is not None and 0.0 < self.command_timeout <= now - self._taken_at + 1e-9:
            self._velocity = velocity = None
            self.lapses += 1
            actions.append(WriteVelocity(0.0, 0.0, drive_running))
        if velocity is not None:
            last = self._last_write
            if self._fresh or last is None or now - last >= self.resend_period or now < last:
                self._fresh = False
                self._last_write = now
                actions.append(WriteVelocity(velocity.v, velocity.omega, drive_running))
        return actions
