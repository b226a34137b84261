"""MotionProxy: the client API of the motion module (the original's motion proxy: docs/design.md, "motion").

Interfaces: 0 ``motion/status``. Commands go to ``motion/command``; the codes are in
:mod:`pluto.movement.motion.core`.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pluto import msgs, names
from pluto.movement.motion.codes import MotionCommand, MotionStatus, MovetoStatus
from pluto.runtime.proxy import Proxy

__all__ = ["MotionProxy", "describe_status"]

COMMAND = names.MOTION_COMMAND

_ELEMENT2: dict[int, str] = {
    MovetoStatus.IDLE: "no moveto",
    MovetoStatus.SET: "moveto point set",
    MovetoStatus.NEARING: "nearing the moveto point",
    MovetoStatus.AT_GOAL: "at the goal",
    MovetoStatus.INVESTIGATE_DONE: "investigate done",
    MovetoStatus.RESTART_LOST: "restarted without its job",
}
_ELEMENT3: dict[int, str] = {
    MotionStatus.THREAD_STOPPED: "motion thread stopped",
    MotionStatus.IDLE_RECTANGLE: "not in motion, rectangle set",
    MotionStatus.IDLE: "not in motion",
    MotionStatus.SCANNING: "scanning for new paths",
    MotionStatus.FOLLOWING: "following a path",
    MotionStatus.TOWARDS_OBJECT: "moving towards the object",
    MotionStatus.CIRCLING: "circling the object",
    MotionStatus.WAITING_SCAN: "stopped, waiting for fresh laser scans",
    MotionStatus.WAITING_POSE: "stopped, waiting for a fresh, certain pose",
    MotionStatus.WAITING_AVOID: "stopped, waiting for avoid (its status stale)",
}


def describe_status(status: msgs.FVectorState) -> str:
    """One line for a human: the commanded velocities and what element[2] and element[3] mean."""
    v, w = [*status.data, 0.0, 0.0][:2]
    e = [*status.element, 0, 0, 0, 0][:4]
    return (
        f"v {v:.2f} m/s, w {w:.2f} rad/s; moveto {e[2]} {_ELEMENT2.get(e[2], 'unknown')}; "
        f"motion {e[3]} {_ELEMENT3.get(e[3], 'unknown')}; avoid {e[0]} {e[1]}"
    )


def _check(*values: float) -> None:
    if not all(math.isfinite(x) for x in values):
        raise ValueError(f"motion command values must be finite, got {values}")


class MotionProxy(Proxy):
    """Client of the motion module.

    Args:
        bus: the process's bus.
        mask: 1 opens the status (the only interface); None opens it.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "motion"
    interfaces: ClassVar[tuple[str, ...]] = (names.MOTION_STATUS,)

    def _send(
        self,
        flags: int,
        position: list[float] | None = None,
        velocity: list[float] | None = None,
        force: list[float] | None = None,
    ) -> None:
        self.write(
            COMMAND,
            msgs.ActuatorState(cmd_flags=flags, position=position or [], velocity=velocity or [], force=force or []),
        )

    def moveto(self, x: float, y: float) -> None:
        """Move to (x, y) m in the ``Localization/Pose`` frame by ray following (42); watch :meth:`status`
        element[2] (-1 set, -2 nearing, 1 at the goal).

        Raises:
            ValueError: a value is not finite.
        """
        _check(x, y)
        self._send(MotionCommand.MOVETO, [x, y])

    def investigate(self) -> None:
        """Go to the closest object and circle it (43); element[2] = 2 when done."""
        self._send(MotionCommand.INVESTIGATE)

    def explore(self, b: float, h: float) -> None:
        """Explore the rectangle of half-width ``b`` and height ``h`` m ahead of the robot, home where it stands,
        then come home (44).

        Raises:
            ValueError: a value is not finite or not positive.
        """
        _check(b, h)
        if b <= 0 or h <= 0:
            raise ValueError("the rectangle's b and h must be > 0")
        self._send(MotionCommand.EXPLORE, velocity=[b, h])

    def set_rectangle(self, b: float, h: float, x: float, y: float, theta: float) -> None:
        """Just set the rectangle (46): half-width ``b``, height ``h`` m, home (x, y) m, heading ``theta`` rad;
        b = 0 removes it.

        Raises:
            ValueError: a value is not finite or negative.
        """
        _check(b, h, x, y, theta)
        if b < 0 or h < 0:
            raise ValueError("the rectangle's b and h must be >= 0")
        self._send(MotionCommand.SET_RECTANGLE, [x, y], [b, h], [theta])

    def resume(self) -> None:
        """Resume the stopped motion, or start exploring the rectangle set (45)."""
        self._send(MotionCommand.RESUME)

    def stop(self) -> None:
        """Stop the motion (a pass-through velocity 0 with laser protection, cmd_flags 20); :meth:`resume` goes on."""
        self._send(20, velocity=[0.0, 0.0])

    def pass_through(
        self,
        cmd_flags: int,
        position: list[float] | None = None,
        velocity: list[float] | None = None,
        force: list[float] | None = None,
    ) -> None:
        """Send an avoid command through the motion module (0 <= cmd_flags < 40); a motion in progress stops.

        Raises:
            ValueError: cmd_flags is not in 0..39.
        """
        if not 0 <= cmd_flags < 40:
            raise ValueError(f"pass-through cmd_flags must be in 0..39, got {cmd_flags}")
        self._send(cmd_flags, position, velocity, force)

    def release(self) -> None:
        """Stop the robot, the avoid thread and the motion thread (cmd_flags -1); :meth:`start_activity` starts
        motion (and avoid) again."""
        self._send(MotionCommand.RELEASE)

    def status(self) -> msgs.FVectorState | None:
        """The newest ``motion/status`` (None before the first)."""
        value = self.get(0)
        return value if isinstance(value, msgs.FVectorState) else None

    def wait_status(self, timeout: float | None = None) -> msgs.FVectorState:
        """Wait for the next status (``timeout`` in s)."""
        value: msgs.FVectorState = self.wait(0, timeout)
        return value
