"""What a browser may send to ``pluto web``, and how it becomes a ``motion/command``: the pure core of the commands.

Strategy: a browser sends one JSON object per WebSocket text message, tagged by ``op``:

- ``{"op": "auth", "token": "..."}``: unlocks the commands of this connection when the server wants a token;
- ``{"op": "teleop", "v": 0.3, "w": 0.0}``: drive at v m/s, ω rad/s; the page repeats it while a button is held
  (:data:`TELEOP_REPEAT`) and sends ``stop`` when it is released;
- ``{"op": "stop"}``: stop now;
- ``{"op": "moveto", "x": 3.5, "y": 2.0}``: go to (x, y) m in the ``Localization/Pose`` frame.

:func:`parse_request` decodes with msgspec into the tagged structs below, so a wrong shape gets an error that names
the field. :class:`CommandLimits` range-checks where the values enter (the teleop speeds against the view's own,
gentle, limits; a moveto inside the map, with a margin; then :func:`pluto.limits.check` of ``motion/command``).
Teleop and stop go to ``motion/command`` as a pass-through with laser protection (cmd_flags 20: the avoid module
slows and stops before obstacles) and moveto as cmd_flags 42.

The dead-man rule (:class:`DeadMan`): a teleop command lasts only while the page keeps repeating it. If the
repetitions stop for :data:`DEADMAN_TIMEOUT` s (the button was released and the ``stop`` was lost, the tab went to
the background, the network dropped) or the connection closes, the server sends the stop itself. The drive's own
command timeout stays as the last fence behind both.
"""

from __future__ import annotations

import math
from typing import Final, TypeAlias

import msgspec

from pluto import limits, msgs, names
from pluto.errors import PlutoError
from pluto.movement.motion.core import MOVETO
from pluto.runtime.params import Params
from pluto.runtime.ranges import Speed, TurnRate

__all__ = [
    "DEADMAN_TIMEOUT",
    "MAX_REQUEST",
    "TELEOP_FLAGS",
    "TELEOP_REPEAT",
    "Auth",
    "CommandError",
    "CommandLimits",
    "DeadMan",
    "MoveTo",
    "Request",
    "Stop",
    "Teleop",
    "parse_request",
]

MAX_REQUEST: Final = 1024
"""Longest request accepted, characters (a real one is under 100)."""

TELEOP_FLAGS: Final = 20
"""``motion/command`` pass-through to avoid: 10·A + T with A = 2 (laser avoidance), T = 0 (velocity)."""

TELEOP_REPEAT: Final = 0.1
"""s between two repetitions of a held teleop button (the page's timer)."""

DEADMAN_TIMEOUT: Final = 0.5
"""s without a repetition after which the server stops the robot itself."""


class CommandError(PlutoError, ValueError):
    """A request that cannot be carried out: malformed, out of range, or not allowed without the token."""


class Auth(msgspec.Struct, tag_field="op", tag="auth", forbid_unknown_fields=True):
    token: str


class Teleop(msgspec.Struct, tag_field="op", tag="teleop", forbid_unknown_fields=True):
    v: float
    w: float


class Stop(msgspec.Struct, tag_field="op", tag="stop", forbid_unknown_fields=True):
    pass


class MoveTo(msgspec.Struct, tag_field="op", tag="moveto", forbid_unknown_fields=True):
    x: float
    y: float


Request: TypeAlias = Auth | Teleop | Stop | MoveTo
"""Everything a browser may send."""

_decoder = msgspec.json.Decoder(Request)


def parse_request(data: str | bytes) -> Request:
    """Decode one request.

    Raises:
        CommandError: too long, not JSON, an unknown ``op``, a missing, extra or mistyped field.
    """
    if len(data) > MAX_REQUEST:
        raise CommandError(f"request of {len(data)} characters; at most {MAX_REQUEST}")
    try:
        request: Request = _decoder.decode(data)
    except msgspec.ValidationError as err:
        raise CommandError(f"bad request: {err}") from None
    except msgspec.DecodeError as err:
        raise CommandError(f"not JSON: {err}") from None
    return request


class CommandLimits(Params, kw_only=False, forbid_unknown_fields=True):
    """Where the browser's values must lie.

    Attributes:
        max_speed: largest |v| of teleop, m/s.
        max_turn_rate: largest |ω| of teleop, rad/s.
        area: (xmin, ymin, xmax, ymax) m a moveto must fall in (the map's bounds with a margin); None: anywhere
            :mod:`pluto.limits` allows.
    """

    max_speed: Speed = 0.5
    max_turn_rate: TurnRate = 1.0
    area: tuple[float, float, float, float] | None = None

    def command(self, request: Teleop | Stop | MoveTo, stamp: float) -> msgs.ActuatorState:
        """The ``motion/command`` for a request, stamped ``stamp`` (s, the robot's time).

        Raises:
            CommandError: a value is not finite or out of range (the message names it and the range).
        """
        if isinstance(request, Stop):
            msg = msgs.ActuatorState(stamp=stamp, cmd_flags=TELEOP_FLAGS, velocity=[0.0, 0.0])
        elif isinstance(request, Teleop):
            _within("v", request.v, self.max_speed, "m/s")
            _within("w", request.w, self.max_turn_rate, "rad/s")
            msg = msgs.ActuatorState(stamp=stamp, cmd_flags=TELEOP_FLAGS, velocity=[request.v, request.w])
        else:
            if not (math.isfinite(request.x) and math.isfinite(request.y)):
                raise CommandError(f"moveto ({request.x}, {request.y}) is not a finite point")
            if self.area is not None:
                xmin, ymin, xmax, ymax = self.area
                if not (xmin <= request.x <= xmax and ymin <= request.y <= ymax):
                    raise CommandError(
                        f"moveto ({request.x:g}, {request.y:g}) m is outside the map "
                        f"[{xmin:g}, {xmax:g}] x [{ymin:g}, {ymax:g}] m"
                    )
            msg = msgs.ActuatorState(stamp=stamp, cmd_flags=MOVETO, position=[request.x, request.y])
        try:
            limits.check(names.MOTION_COMMAND, msg)
        except limits.LimitError as err:
            raise CommandError(str(err)) from None
        return msg


def _within(what: str, value: float, bound: float, unit: str) -> None:
    if not (math.isfinite(value) and -bound <= value <= bound):
        raise CommandError(f"teleop {what} = {value:g} {unit} is out of range [{-bound:g}, {bound:g}] {unit}")


class DeadMan:
    """The dead-man rule of one connection's teleop.

    Args:
        timeout: s without a repetition after which :meth:`expired` asks for a stop.
    """

    def __init__(self, timeout: float = DEADMAN_TIMEOUT) -> None:
        self.timeout = timeout
        self._last: float | None = None  # when the last moving teleop came; None when stopped

    @property
    def moving(self) -> bool:
        """A moving teleop command is in force (no stop since)."""
        return self._last is not None

    def sent(self, request: Request, now: float) -> None:
        """Note a request that was carried out at ``now`` (s, monotonic)."""
        if isinstance(request, Teleop):
            self._last = now if (request.v != 0.0 or request.w != 0.0) else None
        elif isinstance(request, Stop | MoveTo):
            self._last = None

    def expired(self, now: float) -> bool:
        """Whether the robot must be stopped now (then the rule is reset: one stop per lapse)."""
        if self._last is not None and now - self._last > self.timeout:
            self._last = None
            return True
        return False

    def closed(self) -> bool:
        """The connection closed: whether a stop is needed (a teleop was in force)."""
        moving = self._last is not None
        self._last = None
        return moving
