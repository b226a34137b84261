"""The movement keys of ``pluto key`` and their dead-man rule, on an injected clock.

Strategy: a terminal does not report key releases, only the repeats of a held key (after a first delay of a
quarter to two thirds of a second, then some 30 a second). So a movement key counts as held while its repeats keep
coming: :meth:`Teleop.key` starts or renews the movement, :meth:`Teleop.tick` (called about every 50 ms) re-sends it
every ``resend_every`` s while it is held, and once no repeat came for ``release_after`` s it forgets the movement
and returns one zero command. Before the first repeat the wait is ``first_repeat`` instead, so a held key does not
stutter through the terminal's first delay (a single tap moves the robot that long). Nothing here sends anything:
the caller sends what these methods return. The module's own command timeout (the drive's 4 s) still stops the
robot if this program dies or the link breaks.

In heading mode (the drive's and avoid's "hold a heading"), left and right turn the heading to hold by a step per
key event, and forward and back drive along it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from pluto.geometry import wrap_angle
from pluto.runtime.params import Params
from pluto.runtime.ranges import MAX_SPEED, MAX_TURN_RATE, between

__all__ = ["ZERO", "Movement", "Teleop", "TeleopParams"]


@dataclass(frozen=True)
class Movement:
    """A movement command: linear velocity ``v`` (m/s) and turn rate ``w`` (rad/s), or, with ``heading`` (rad),
    hold that heading and drive along it at ``v``."""

    v: float = 0.0
    w: float = 0.0
    heading: float | None = None

    @property
    def is_stop(self) -> bool:
        """True for a zero-velocity command with no heading to hold."""
        return self.v == 0.0 and self.w == 0.0 and self.heading is None


ZERO = Movement()
"""The stop command."""


_KeyTime = Annotated[float, between(0.0, 5.0, open_low=True)]
"""A time of the key repeat, s."""


class TeleopParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Speeds and timing of the movement keys.

    Attributes:
        speed, turn_rate: the starting speed (m/s) and turn rate (rad/s) of a movement key.
        speed_step, turn_step: how much ``faster``/``slower`` and ``turn_faster``/``turn_slower`` change them.
        max_speed, max_turn_rate: their caps (m/s, rad/s).
        heading_step: rad the held heading turns per left/right key event in heading mode.
        release_after: s without a repeat of the held key after which it counts as released (0.3 to 0.5 suits the
            key repeat of most terminals).
        first_repeat: the same after the first press of a key, before its repeats start (the terminal's repeat
            delay, 0.25 to 0.66 s; at least ``release_after``).
        resend_every: s between two sends of a held movement.
    """

    speed: Annotated[float, between(0.0, MAX_SPEED)] = 0.2
    turn_rate: Annotated[float, between(0.0, MAX_TURN_RATE)] = 0.5
    speed_step: Annotated[float, between(0.0, MAX_SPEED)] = 0.05
    turn_step: Annotated[float, between(0.0, MAX_TURN_RATE)] = 0.1
    max_speed: Annotated[float, between(0.0, MAX_SPEED)] = 1.0
    max_turn_rate: Annotated[float, between(0.0, MAX_TURN_RATE)] = 2.0
    heading_step: Annotated[float, between(0.0, math.pi)] = math.radians(3.0)
    release_after: _KeyTime = 0.4
    first_repeat: _KeyTime = 0.7
    resend_every: _KeyTime = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.resend_every > self.release_after:
            raise ValueError(
                f"resend_every ({self.resend_every} s) must be at most release_after ({self.release_after} s)"
            )


class Teleop:
    """The state of the movement keys of one page.

    Args:
        params: speeds and timing.
    """

    def __init__(self, params: TeleopParams | None = None) -> None:
        self.params = params or TeleopParams()
        self.speed = min(self.params.speed, self.params.max_speed)
        self.turn_rate = min(self.params.turn_rate, self.params.max_turn_rate)
        self.heading: float | None = None
        self.held: Movement | None = None
        self._held_action = ""
        self._repeating = False
        self._last_key = -math.inf
        self._last_sent = -math.inf

    # -- settings -----------------------------------------------------------------------------------------------

    def adjust(self, action: str) -> bool:
        """Apply a speed key (``faster``, ``slower``, ``turn_faster``, ``turn_slower``); False for another action.

        A movement held now keeps its direction at the new speed from its next key repeat.
        """
        p = self.params
        if action == "faster":
            self.speed = min(p.max_speed, round(self.speed + p.speed_step, 6))
        elif action == "slower":
            self.speed = max(0.0, round(self.speed - p.speed_step, 6))
        elif action == "turn_faster":
            self.turn_rate = min(p.max_turn_rate, round(self.turn_rate + p.turn_step, 6))
        elif action == "turn_slower":
            self.turn_rate = max(0.0, round(self.turn_rate - p.turn_step, 6))
        else:
            return False
        return True

    def set_heading_mode(self, heading: float | None) -> None:
        """Enter heading mode holding ``heading`` (rad), or leave it with None."""
        self.heading = None if heading is None else wrap_angle(heading, positive_pi=True)

    # -- the dead-man rule --------------------------------------------------------------------------------------

    def key(self, action: str, now: float) -> Movement | None:
        """A movement key (``forward``, ``back``, ``left``, ``right``) came at ``now`` (s): the movement to send
        now, or None when the same movement was sent less than ``resend_every`` ago (a key repeat).

        Raises:
            ValueError: ``action`` is not a movement.
        """
        if self.heading is not None:
            if action in ("left", "right"):
                step = self.params.heading_step if action == "left" else -self.params.heading_step
                self.heading = wrap_angle(self.heading + step, positive_pi=True)
            movement = {
                "forward": Movement(self.speed, 0.0, self.heading),
                "back": Movement(-self.speed, 0.0, self.heading),
                "left": Movement(0.0, 0.0, self.heading),
                "right": Movement(0.0, 0.0, self.heading),
            }.get(action)
        else:
            movement = {
                "forward": Movement(self.speed, 0.0),
                "back": Movement(-self.speed, 0.0),
                "left": Movement(0.0, self.turn_rate),
                "right": Movement(0.0, -self.turn_rate),
            }.get(action)
        if movement is None:
            raise ValueError(f"not a movement: {action!r}")
        self._repeating = action == self._held_action and now - self._last_key < self._grace()
        self._last_key = now
        if movement == self.held and now - self._last_sent < self.params.resend_every:
            return None
        self.held = movement
        self._held_action = action
        self._last_sent = now
        return movement

    def tick(self, now: float) -> Movement | None:
        """What to send at ``now`` (s) without a key: the held movement again when it is due, :data:`ZERO` once when
        its key stopped repeating ``release_after`` ago, else None."""
        if self.held is None:
            return None
        if now - self._last_key >= self._grace():
            self.held = None
            self._held_action = ""
            self._repeating = False
            self._last_sent = now
            return ZERO
        if now - self._last_sent >= self.params.resend_every:
            self._last_sent = now
            return self.held
        return None

    def _grace(self) -> float:
        """s without a key event after which the held key counts as released."""
        if self._repeating:
            return self.params.release_after
        return max(self.params.first_repeat, self.params.release_after)

    def stop(self) -> Movement:
        """Forget any held movement and return :data:`ZERO` (the Space and Esc keys)."""
        self.held = None
        self._held_action = ""
        self._repeating = False
        return ZERO

    @property
    def holding(self) -> str:
        """The movement action held now ("" when none)."""
        return self._held_action
