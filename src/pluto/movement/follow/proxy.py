"""FollowProxy: the client API of the follow module.

Interfaces: 0 ``follow/status``. Commands go to ``follow/command``; the codes are in
:mod:`pluto.movement.follow.core`.
"""

from __future__ import annotations

from typing import ClassVar

from pluto import msgs, names
from pluto.movement.follow.core import RELEASE, START, STOP, FollowStatus, FollowThread, parse_distance
from pluto.runtime.proxy import Proxy

__all__ = ["FollowProxy", "describe_status"]

COMMAND = names.FOLLOW_COMMAND

_CODES: dict[int, str] = {
    FollowStatus.IDLE: "idle",
    FollowStatus.SEARCHING: "searching for a person",
    FollowStatus.FOLLOWING: "following",
    FollowStatus.TOO_CLOSE: "too close: waiting",
    FollowStatus.LOST: "person lost: stopped",
    FollowStatus.NO_SCAN: "no recent scan: stopped",
    FollowStatus.NO_POSE: "no recent pose: stopped",
}


def describe_status(status: msgs.FVectorState) -> str:
    """One line for a human: what the follow module does and where the person is."""
    e = [*status.element, 0, 0][:2]
    x, y, d, b, v, w = [*status.data, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0][:6]
    thread = "follow thread stopped; " if e[0] == FollowThread.STOPPED else ""
    where = f"; person at ({x:.2f}, {y:.2f}) m, {d:.2f} m away, bearing {b:.2f} rad" if d > 0.0 else ""
    return f"{thread}{e[1]} {_CODES.get(e[1], 'unknown')}{where}; v {v:.2f} m/s, w {w:.2f} rad/s"


class FollowProxy(Proxy):
    """Client of the follow module.

    Args:
        bus: the process's bus.
        mask: 1 opens the status (the only interface); None opens it.
        start, timeout: as for :class:`~pluto.runtime.proxy.Proxy`.
    """

    module: ClassVar[str] = "follow"
    interfaces: ClassVar[tuple[str, ...]] = (names.FOLLOW_STATUS,)

    def _send(self, flags: int, velocity: list[float] | None = None) -> None:
        self.write(COMMAND, msgs.ActuatorState(cmd_flags=flags, velocity=velocity or []))

    def follow(self, distance: float | None = None) -> None:
        """Start following the nearest moving person in front (1), at ``distance`` m (the module's default if
        None); watch :meth:`status` element[1] (1 searching, 2 following, 3 too close, -1 lost).

        Raises:
            ValueError: the distance is not finite or out of range.
        """
        if distance is None:
            self._send(START)
            return
        self._send(START, [parse_distance([distance], distance)])

    def stop(self) -> None:
        """Stop following (0): the robot stops."""
        self._send(STOP)

    def release(self) -> None:
        """Stop the robot, the avoid thread and the follow thread (-1); :meth:`start_activity` starts follow
        again."""
        self._send(RELEASE)

    def status(self) -> msgs.FVectorState | None:
        """The newest ``follow/status`` (None before the first)."""
        value = self.get(0)
        return value if isinstance(value, msgs.FVectorState) else None

    def wait_status(self, timeout: float | None = None) -> msgs.FVectorState:
        """Wait for the next status (``timeout`` in s)."""
        value: msgs.FVectorState = self.wait(0, timeout)
        return value
