"""DriveProxy: the client API of the drive module (the original's drive proxy: docs/design.md, "drive").

Interface 0 is ``drive/status``. Commands are written to ``drive/command``; the drive stops by itself when no new
command came for its timeout (4 s), so a caller that wants to keep moving re-sends its command.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pluto import msgs, names
from pluto.movement.drive.core import DriveStatus
from pluto.runtime.proxy import Proxy

__all__ = ["COMMAND", "DriveProxy", "describe_status"]

COMMAND = names.DRIVE_COMMAND
"""The drive's command interface."""


def describe_status(status: msgs.FVectorState) -> str:
    """A one-line description of a drive status: commanded velocities and the meaning of element[0]."""
    v = status.data[0] if len(status.data) > 0 else math.nan
    w = status.data[1] if len(status.data) > 1 else math.nan
    code = status.element[0] if status.element else None
    try:
        meaning = DriveStatus(code).name.lower().replace("_", " ") if code is not None else "no code"
    except ValueError:
        meaning = "unknown"
    return f"v {v:.3f} m/s, w {w:.3f} rad/s, status {code} ({meaning})"


class DriveProxy(Proxy):
    """Client of the drive module.

    Args:
        bus: the process's bus.
        mask: which interfaces to open (1: ``drive/status``); None opens all.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "drive"
    interfaces: ClassVar[tuple[str, ...]] = (names.DRIVE_STATUS,)

    def _command(self, flags: int, position: float, v: float, w: float) -> None:
        values = (position, v, w)
        if not all(math.isfinite(x) for x in values):
            raise ValueError(f"drive command values must be finite, got {values}")
        self.write(COMMAND, msgs.ActuatorState(cmd_flags=flags, position=[0.0, position], velocity=[v, w]))

    def set_velocity(self, v: float, w: float, protect: bool = True) -> None:
        """Drive at linear velocity ``v`` (m/s) and angular velocity ``w`` (rad/s); cmd_flags 10 (0 without sonar
        protection). The drive limits speeds and accelerations.

        Raises:
            ValueError: a value is not finite.
        """
        self._command(10 if protect else 0, 0.0, float(v), float(w))

    def hold_heading(self, heading: float, v: float, protect: bool = True) -> None:
        """Turn smoothly to ``heading`` (rad, in the frame of the base's odometry heading) and drive straight along
        it at ``v`` (m/s); cmd_flags 11 (1 without sonar protection).

        Raises:
            ValueError: a value is not finite.
        """
        self._command(11 if protect else 1, float(heading), float(v), 0.0)

    def stop(self) -> None:
        """Stop: command zero velocities (the drive brakes within its acceleration limits)."""
        self._command(0, 0.0, 0.0, 0.0)

    def status(self) -> msgs.FVectorState | None:
        """The newest ``drive/status`` (data[0..1] commanded v m/s and ω rad/s, element[0] a
        :class:`~pluto.movement.drive.core.DriveStatus` code); None before the first one.

        Raises:
            ValueError: the status interface was not opened.
        """
        value = self.get(0)
        return value if isinstance(value, msgs.FVectorState) else None

    def wait_status(self, timeout: float | None = None) -> msgs.FVectorState:
        """Wait for the next ``drive/status`` and return it (``timeout`` in s)."""
        value: msgs.FVectorState = self.wait(0, timeout)
        return value
