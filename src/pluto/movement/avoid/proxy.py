"""AvoidProxy: the client API of the avoid module (the original's avoid proxy: docs/design.md, "avoid").

Interfaces: 0 ``avoidance/status``. Commands go to ``avoidance/command`` with cmd_flags = 10·A + T, A chosen by
the ``avoidance`` argument (0 none, 1 sonar, 2 laser, 3 both; default 3).
"""

from __future__ import annotations

import math
from typing import ClassVar

from pluto import msgs, names
from pluto.movement.avoid.codes import RELEASE, Avoidance, AvoidStatus, GotoStatus, Mode
from pluto.movement.drive.core import DriveStatus
from pluto.runtime.proxy import Proxy

__all__ = ["AvoidProxy", "describe_status"]

COMMAND = names.AVOIDANCE_COMMAND

_ELEMENT0: dict[int, str] = {
    DriveStatus.NORMAL: "normal",
    DriveStatus.TIMEOUT: "drive timeout",
    DriveStatus.STALE: "drive halted for a stale input",
    DriveStatus.STOPPED: "drive stopped",
    DriveStatus.FRONT_BUMPER: "front bumper",
    DriveStatus.BACK_BUMPER: "back bumper",
    DriveStatus.SONAR_FRONT: "sonar front",
    DriveStatus.SONAR_BACK: "sonar back",
    DriveStatus.SONAR_SIDES: "sonar sides",
    AvoidStatus.LASER_SLOW: "laser slow/stop",
    AvoidStatus.LASER_FAULT: "laser fatal error (rebooting) or stale scans: held",
    AvoidStatus.STALE_POSE: "stale pose or odometry: held",
    AvoidStatus.COMMANDER_SILENT: "the commander's lease ran out: held",
}
_ELEMENT1: dict[int, str] = {
    GotoStatus.NONE: "idle",
    GotoStatus.REACHED: "goal reached",
    GotoStatus.STUCK: "stuck",
    GotoStatus.UNVERIFIED: "stopped at the goal by a pose too uncertain to tell (unverified)",
    GotoStatus.RUNNING: "goto running",
    GotoStatus.THREAD_STOPPED: "avoid thread stopped",
}


def describe_status(status: msgs.FVectorState) -> str:
    """One line for a human: the commanded velocities and what element[0] and element[1] mean."""
    v, w = [*status.data, 0.0, 0.0][:2]
    e0, e1 = [*status.element, 0, 0][:2]
    return f"v {v:.2f} m/s, w {w:.2f} rad/s; {e0} {_ELEMENT0.get(e0, 'unknown')}; {e1} {_ELEMENT1.get(e1, 'unknown')}"


def _check(*values: float) -> None:
    if not all(math.isfinite(x) for x in values):
        raise ValueError(f"avoid command values must be finite, got {values}")


def _check_avoidance(avoidance: int) -> None:
    if avoidance not in (0, 1, 2, 3):
        raise ValueError(f"avoidance must be 0 (none), 1 (sonar), 2 (laser) or 3 (both), got {avoidance}")


class AvoidProxy(Proxy):
    """Client of the avoid module.

    Args:
        bus: the process's bus.
        mask: 1 opens the status (the only interface); None opens it.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "avoid"
    interfaces: ClassVar[tuple[str, ...]] = (names.AVOIDANCE_STATUS,)

    def _send(
        self, mode: int, avoidance: int, position: list[float], velocity: list[float], force: list[float]
    ) -> None:
        _check_avoidance(avoidance)
        self.write(
            COMMAND,
            msgs.ActuatorState(cmd_flags=10 * avoidance + mode, position=position, velocity=velocity, force=force),
        )

    def set_velocity(self, v: float, w: float, avoidance: int = Avoidance.BOTH) -> None:
        """Drive at v m/s and w rad/s (T = 0), slowed and stopped by the chosen protection.

        Raises:
            ValueError: a value is not finite or avoidance is not 0..3.
        """
        _check(v, w)
        self._send(Mode.VELOCITY, avoidance, [], [v, w], [])

    def hold_heading(self, heading: float, v: float, avoidance: int = Avoidance.BOTH) -> None:
        """Turn to ``heading`` rad (in the ``Localization/Pose`` frame) and drive along it at v m/s (T = 1).

        Raises:
            ValueError: a value is not finite or avoidance is not 0..3.
        """
        _check(heading, v)
        self._send(Mode.HEADING, avoidance, [0.0, heading], [v, 0.0], [])

    def goto(
        self,
        x: float,
        y: float,
        max_speed: float = 0.5,
        max_turn_rate: float = 1.0,
        weight: float = 1.0,
        avoidance: int = Avoidance.BOTH,
    ) -> None:
        """Go to (x, y) m in the ``Localization/Pose`` frame around obstacles (T = 2); watch :meth:`status`
        element[1] (1 reached, 2 stuck, 3 stopped at the goal unverified: the pose too uncertain to tell).

        Args:
            x, y: the goal, m.
            max_speed, max_turn_rate: m/s, rad/s.
            weight: goal weight (1 default; > 1 weaker avoidance, < 1 stronger).
            avoidance: 0 none, 1 sonar, 2 laser, 3 both.

        Raises:
            ValueError: a value is not finite, a limit or the weight not positive, or avoidance not 0..3.
        """
        _check(x, y, max_speed, max_turn_rate, weight)
        if max_speed <= 0 or max_turn_rate <= 0 or weight <= 0:
            raise ValueError("max_speed, max_turn_rate and weight must be > 0")
        self._send(Mode.GOTO, avoidance, [x, y], [max_speed, max_turn_rate], [weight])

    def wall_follow(self, distance: float = 0.0, speed: float = 0.0, avoidance: int = 2) -> None:
        """Follow the wall on the robot's left at ``distance`` m from the robot centre at ``speed`` m/s (T = 3; 0
        for the module's defaults). The module pans the laser left.

        Raises:
            ValueError: a value is not finite or negative, or avoidance not 0..3.
        """
        _check(distance, speed)
        if distance < 0 or speed < 0:
            raise ValueError("distance and speed must be >= 0")
        self._send(Mode.WALL_FOLLOW, avoidance, [distance], [speed], [])

    def release(self) -> None:
        """Stop the robot and the avoid thread (cmd_flags -1); :meth:`start_activity` starts it again."""
        self.write(COMMAND, msgs.ActuatorState(cmd_flags=RELEASE))

    def status(self) -> msgs.FVectorState | None:
        """The newest ``avoidance/status`` (None before the first)."""
        value = self.get(0)
        return value if isinstance(value, msgs.FVectorState) else None

    def wait_status(self, timeout: float | None = None) -> msgs.FVectorState:
        """Wait for the next status (``timeout`` in s)."""
        value: msgs.FVectorState = self.wait(0, timeout)
        return value
