"""The SSC-32 serial servo controller: its move command, joint value <-> pulse width, and the arm backend on it.

A move is ``#<channel>P<pulse µs>[S<speed µs/s>]`` for each servo, then ``T<time ms>`` for the whole group and a
carriage return: ``#0P1500#1P1600S500T32\\r``. Pulses are 500..2500 µs, 1500 the centre. The controller answers
nothing to a move and knows nothing of where the servos are: the arm's state is what was commanded.
"""

# Strategy: the codec (move_command, pulse conversions) is pure and knows the protocol's units (µs, µs/s, ms); the
# backend keeps SI. The state is the JointRamps model of what the controller does with a group move, on the values
# the pulses actually stand for (a pulse is a whole µs, about 0.1° on a 180° servo), so the state never claims a
# precision the controller did not get. The port is opened with serial.serial_for_url, so loop://, socket:// (a
# simulator) and spy:// (a traffic dump) work as well as a device. A write that fails raises Ssc32Error; the module
# counts and logs it and the next command is tried again.

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import serial  # type: ignore[import-untyped]

from pluto.errors import LocalProtocolError, PlutoError
from pluto.hardware.arm.kinematics import ArmModel, Link
from pluto.hardware.arm.servo import FloatArray, JointRamps

__all__ = [
    "PULSE_MAX",
    "PULSE_MIN",
    "Ssc32Arm",
    "Ssc32Error",
    "move_command",
    "pulse_of",
    "speed_of",
    "value_of",
]

PULSE_MIN = 500
"""Shortest pulse the controller sends, µs."""
PULSE_MAX = 2500
"""Longest pulse the controller sends, µs."""
DEFAULT_BAUDRATE = 115200


class Ssc32Error(PlutoError):
    """The controller's serial link failed (could not open or write)."""


def move_command(moves: Sequence[tuple[int, int, int | None]], time_ms: int | None = None) -> bytes:
    """The bytes of one group move.

    Args:
        moves: (channel 0..31, pulse µs 500..2500, speed µs/s or None) per servo.
        time_ms: time for the whole move, ms, or None for as fast as the speeds allow.

    Returns:
        ``#<ch>P<pulse>[S<speed>]...[T<time>]\\r`` as ASCII.

    Raises:
        LocalProtocolError: no moves, or a channel, pulse, speed or time out of range.
    """
    if not moves:
        raise LocalProtocolError("a move needs at least one servo")
    parts = []
    for channel, pulse, speed in moves:
        if not 0 <= channel <= 31:
            raise LocalProtocolError(f"SSC-32 channels are 0..31, not {channel}")
        if not PULSE_MIN <= pulse <= PULSE_MAX:
            raise LocalProtocolError(f"pulses are {PULSE_MIN}..{PULSE_MAX} µs, not {pulse}")
        if speed is not None and not 1 <= speed <= 65535:
            raise LocalProtocolError(f"speeds are 1..65535 µs/s, not {speed}")
        parts.append(f"#{channel}P{pulse}" + (f"S{speed}" if speed is not None else ""))
    if time_ms is not None:
        if not 0 <= time_ms <= 65535:
            raise LocalProtocolError(f"move times are 0..65535 ms, not {time_ms}")
        parts.append(f"T{time_ms}")
    return ("".join(parts) + "\r").encode("ascii")


def _span(link: Link) -> tuple[float, float]:
    if link.ssc32 is None:
        raise LocalProtocolError(f"joint {link.name} has no SSC-32 channel")
    return link.ssc32.pulse_at_min, link.ssc32.pulse_at_max


def pulse_of(link: Link, value: float) -> int:
    """The pulse (µs, whole, within 500..2500) that puts ``link`` at ``value`` (rad or m, held within its limits).

    Raises:
        LocalProtocolError: the joint has no channel.
    """
    at_min, at_max = _span(link)
    value = min(max(value, link.lower), link.upper)
    f = (value - link.lower) / (link.upper - link.lower) if link.upper > link.lower else 0.0
    return min(PULSE_MAX, max(PULSE_MIN, round(at_min + f * (at_max - at_min))))


def value_of(link: Link, pulse: float) -> float:
    """The joint value (rad or m) a pulse (µs) stands for: the inverse of :func:`pulse_of`."""
    at_min, at_max = _span(link)
    if at_max == at_min:
        return link.lower
    return link.lower + (pulse - at_min) / (at_max - at_min) * (link.upper - link.lower)


def speed_of(link: Link, speed: float) -> int | None:
    """The S argument (µs/s, at least 1) for a joint speed (rad/s or m/s); None for no limit (0, NaN, inf)."""
    if not (math.isfinite(speed) and speed > 0.0) or link.upper <= link.lower:
        return None
    at_min, at_max = _span(link)
    per_unit = abs(at_max - at_min) / (link.upper - link.lower)
    return min(65535, max(1, round(speed * per_unit)))


class Ssc32Arm:
    """An arm on an SSC-32 controller (a backend of the arm module).

    Args:
        model: the arm; every joint needs an ``ssc32`` channel.
        port: a serial device or any ``serial_for_url`` URL (``loop://``, ``socket://host:port``, ``spy://...``).
        baudrate: the controller's baud rate (jumpers: 2400, 9600, 38400 or 115200).
        opener: opens the port (``serial.serial_for_url``; tests pass a fake device).
        now: the time of the start, s.

    Raises:
        Ssc32Error: the port cannot be opened.
        LocalProtocolError: a joint has no channel.
    """

    def __init__(
        self,
        model: ArmModel,
        port: str,
        baudrate: int = DEFAULT_BAUDRATE,
        *,
        opener: Callable[..., Any] = serial.serial_for_url,
        now: float = 0.0,
    ) -> None:
        self.model = model
        self.joints = model.links[: model.num_outputs]
        for link in self.joints:
            _span(link)
        home = np.array([value_of(j, pulse_of(j, h)) for j, h in zip(self.joints, model.home, strict=True)])
        self.ramps = JointRamps(home, np.full(model.num_outputs, math.inf), model.lower, model.upper)
        self._pulses: list[int | None] = [None] * model.num_outputs
        self.writes = 0
        self.write_errors = 0
        try:
            self._port = opener(port, baudrate=baudrate, timeout=0.1, write_timeout=1.0)
        except (serial.SerialException, OSError, ValueError) as err:
            raise Ssc32Error(f"cannot open the SSC-32 port {port}: {err}") from err

    def command(self, targets: FloatArray, speeds: FloatArray | None, move_time: float, now: float) -> None:
        """Send a group move of the joints whose target is not NaN (see :class:`~.servo.ArmBackend`).

        Raises:
            Ssc32Error: the write failed.
        """
        moves: list[tuple[int, int, int | None]] = []
        quantized = np.full(self.model.num_outputs, math.nan)
        for i, link in enumerate(self.joints):
            value = float(targets[i]) if i < len(targets) else math.nan
            if math.isnan(value):
                continue
            pulse = pulse_of(link, value)
            speed = speed_of(link, float(speeds[i])) if speeds is not None and i < len(speeds) else None
            assert link.ssc32 is not None
            moves.append((link.ssc32.channel, pulse, speed))
            quantized[i] = value_of(link, pulse)
            self._pulses[i] = pulse
        if not moves:
            return
        time_ms = round(move_time * 1000.0) if math.isfinite(move_time) and move_time > 0 else None
        data = move_command(moves, None if time_ms is None else min(time_ms, 65535))
        try:
            self._port.write(data)
        except (serial.SerialException, OSError) as err:
            self.write_errors += 1
            raise Ssc32Error(f"writing to the SSC-32 failed: {err}") from err
        self.writes += 1
        self.ramps.command(quantized, speeds, move_time, now)

    def position(self, now: float) -> FloatArray:
        return self.ramps.position(now)

    def velocity(self, now: float) -> FloatArray:
        return self.ramps.velocity(now)

    def pulses(self) -> list[int | None]:
        """The last pulse sent to each joint, µs (None before the first)."""
        return list(self._pulses)

    def close(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            port.close()
