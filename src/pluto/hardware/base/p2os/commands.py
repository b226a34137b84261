"""The P2OS client's commands in robot units: SI wishes become VEL, RVEL, VEL2, SETV, SETA, SETRV and SETRA
arguments, clamped to the speed limits.

    limits = SpeedLimits()
    limits.adopt(params, config)                 # the handshake: the lower of the model's and the CONFIGpac's
    commands, moving = limits.velocity(0.3, 0.1) # ((Command.VEL, 300), (Command.RVEL, 6)), True

This is the sending half of the client's codec, as :mod:`.state` is the receiving half: nothing here sends, times
out or knows the link; :class:`.client.P2osClient` emits what it returns.
"""

# Strategy: the limits, translation and rotation alike, are the lower of the model's (the parameter table's top
# speed; for rotation, which the table does not give, DEFAULT_MAX_ROT_VELOCITY) and the robot's own (the
# CONFIGpac's TransVelTop and RotVelTop, docs/protocols/p2os.md): a robot configured slower than its model is
# respected, and a simulator that reports 9999 for both (AMRISim) is not believed. A zero in the CONFIGpac says
# nothing and is ignored. Every command, SETV and SETRV included, is clamped to these limits; a speed profile may
# lower them (never raise them above the robot's). Accelerations are not limited here (the robot caps SETA and
# SETRA at its own tops).

from __future__ import annotations

import math
from collections.abc import Mapping

from .models import RobotParams, to_deg, to_mm
from .packets import Command
from .sip import ConfigPacket

__all__ = ["DEFAULT_MAX_ROT_VELOCITY", "Commands", "SpeedLimits", "check_profile", "clamp", "speed_limits"]

DEFAULT_MAX_ROT_VELOCITY = math.radians(360.0)
"""Rotational speed limit of every model, rad/s (the parameter table gives none); a CONFIGpac's RotVelTop lowers
it."""

Commands = tuple[tuple[Command, int], ...]
"""Commands with their arguments, in the order to send them."""


def clamp(value: float, limit: float, what: str) -> float:
    """``value`` within ``[-limit, limit]``.

    Raises:
        ValueError: ``value`` is not finite (``what`` names it).
    """
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return max(-limit, min(limit, value))


def speed_limits(params: RobotParams, config: ConfigPacket | None) -> tuple[float, float]:
    """The translational and rotational speed limits (m/s, rad/s): the lower of the model's and the CONFIGpac's
    TransVelTop and RotVelTop; a zero there (nothing configured) is ignored, and so is a missing CONFIGpac."""
    speed, turn_rate = params.max_velocity, DEFAULT_MAX_ROT_VELOCITY
    if config is not None:
        if config.trans_vel_top > 0:
            speed = min(speed, config.trans_vel_top / 1000.0)
        if config.rot_vel_top > 0:
            turn_rate = min(turn_rate, math.radians(config.rot_vel_top))
    return speed, turn_rate


def check_profile(values: Mapping[str, float | None]) -> None:
    """Check a speed profile's values: each None or a positive finite number.

    Raises:
        ValueError: one that is not (named).
    """
    for name, value in values.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")


class SpeedLimits:
    """The robot's speed limits and the (possibly lower) ones commands are clamped to.

    Attributes:
        top_velocity, top_rot_velocity: the limits themselves, m/s and rad/s (0 m/s before :meth:`adopt`).
        max_velocity, max_rot_velocity: what commands are clamped to, m/s and rad/s: the limits, or less after
            :meth:`profile`.
    """

    def __init__(self) -> None:
        self.top_velocity = 0.0
        self.top_rot_velocity = DEFAULT_MAX_ROT_VELOCITY
        self.max_velocity = 0.0
        self.max_rot_velocity = DEFAULT_MAX_ROT_VELOCITY

    def adopt(self, params: RobotParams, config: ConfigPacket | None) -> None:
        """Take the limits of ``params`` and ``config`` (see :func:`speed_limits`); the clamps go back up to them."""
        self.top_velocity, self.top_rot_velocity = speed_limits(params, config)
        self.max_velocity, self.max_rot_velocity = self.top_velocity, self.top_rot_velocity

    def velocity(self, v: float, omega: float) -> tuple[Commands, bool]:
        """VEL and RVEL for ``v`` m/s and ``omega`` rad/s, clamped, and whether they move the robot.

        Raises:
            ValueError: a value that is not finite.
        """
        v = clamp(v, self.max_velocity, "v")
        omega = clamp(omega, self.max_rot_velocity, "omega")
        return ((Command.VEL, to_mm(v)), (Command.RVEL, to_deg(omega))), v != 0.0 or omega != 0.0

    def profile(
        self,
        *,
        max_speed: float | None,
        max_accel: float | None,
        max_decel: float | None,
        max_turn_rate: float | None,
        max_turn_accel: float | None,
        max_turn_decel: float | None,
    ) -> Commands:
        """SETV, SETA, SETRV and SETRA for a speed profile (checked by :func:`check_profile`), the speeds capped
        by the limits; the clamps become the speeds set. None leaves a value as it is."""
        speed = min(max_speed, self.top_velocity) if max_speed is not None else None
        turn_rate = min(max_turn_rate, self.top_rot_velocity) if max_turn_rate is not None else None
        commands: list[tuple[Command, int]] = []
        if speed is not None:
            commands.append((Command.SETV, to_mm(speed)))
        if max_accel is not None:
            commands.append((Command.SETA, to_mm(max_accel)))
        if max_decel is not None:
            commands.append((Command.SETA, -to_mm(max_decel)))
        if turn_rate is not None:
            commands.append((Command.SETRV, to_deg(turn_rate)))
        if max_turn_accel is not None:
            commands.append((Command.SETRA, to_deg(max_turn_accel)))
        if max_turn_decel is not None:
            commands.append((Command.SETRA, -to_deg(max_turn_decel)))
        if speed is not None:
            self.max_velocity = speed
        if turn_rate is not None:
            self.max_rot_velocity = turn_rate
        return tuple(commands)
