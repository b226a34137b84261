"""Range checks for values that enter the robot from outside: gateways, the command line, files.

Every number of a message must be finite and of a sane size, every vector no longer than its interface can use, and
the commands that move something within what the hardware can physically do. :func:`check` applies the rules of an
interface to a message and raises :class:`LimitError` naming the field, its value and the allowed range; the module
behind the interface still clamps to its own configured limits (this is the outer fence, not the controller's).

The limits are generous physical bounds, not tuning: a Pioneer drives at most ~1.5 m/s and an ATRV-2 ~2 m/s, so a
velocity command above 3 m/s is an error rather than something to clamp.

A covariance (a posted pose's, :func:`check_covariance`) must be one: finite, symmetric and positive semi-definite,
within :data:`COVARIANCE_TOLERANCE` of its largest entry (the rounding of a filter's arithmetic). A negative
variance, or a correlation larger than its two variances allow, would make every filter that takes it diverge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from pluto import msgs, names
from pluto.errors import PlutoError

__all__ = [
    "COVARIANCE_TOLERANCE",
    "MAX_ABS",
    "MAX_STAMP",
    "Bound",
    "LimitError",
    "check",
    "check_covariance",
    "check_number",
    "check_pose",
    "command_limits",
]

MAX_ABS = 1e9
"""Largest magnitude of any number in a message from outside (m, rad, s, ...): beyond it a value is a typo or an
attack, never a measurement."""

MAX_STAMP = 1e11
"""Largest time stamp, s (the year 5138 since the Unix epoch)."""

MAX_VECTOR = 4096
"""Longest vector of any message from outside (a 0.25° laser over 360° has 1,441 beams)."""

MAX_ACTUATOR_VECTOR = 32
"""Longest vector of an ``ActuatorState`` (an SSC-32 arm has 32 channels)."""


COVARIANCE_TOLERANCE = 1e-6
"""How far a covariance may be from symmetric and positive semi-definite, relative to its largest entry (and 1e-9
absolute, for one of zeros): the rounding of a filter's arithmetic, never a real asymmetry or a negative variance."""


class LimitError(PlutoError, ValueError):
    """A value is out of range; the message names the interface, the field, the value and the range."""


@dataclass(frozen=True)
class Bound:
    """An allowed closed range and its unit (for the message)."""

    low: float
    high: float
    unit: str = ""

    def check(self, where: str, value: float) -> float:
        if not math.isfinite(value) or not self.low <= value <= self.high:
            unit = f" {self.unit}" if self.unit else ""
            raise LimitError(f"{where} = {value:g}{unit} is out of range [{self.low:g}, {self.high:g}]{unit}")
        return value


_SPEED = Bound(-3.0, 3.0, "m/s")
_TURN_RATE = Bound(-2 * math.pi, 2 * math.pi, "rad/s")
_PLACE = Bound(-1e6, 1e6, "m")  # a goal or a rectangle: 1,000 km is already no building
_ANGLE = Bound(-4 * math.pi, 4 * math.pi, "rad")


@dataclass(frozen=True)
class _Rules:
    """Per-field limits of one command interface: vector length and a bound per element (the last repeats)."""

    lengths: dict[str, int]
    bounds: dict[str, tuple[Bound, ...]]


_COMMANDS: dict[str, _Rules] = {
    names.BASE_DRIVE_COMMAND: _Rules(
        lengths={"position": 0, "velocity": 2, "force": 0},
        bounds={"velocity": (_SPEED, _TURN_RATE)},
    ),
    # cmd_flags 0/10: velocity = (v, ω); 1/11: velocity[0] = v and position[1] = the heading to hold.
    names.DRIVE_COMMAND: _Rules(
        lengths={"position": 3, "velocity": 2, "force": 3},
        bounds={"velocity": (_SPEED, _TURN_RATE), "position": (_PLACE, _ANGLE, _ANGLE)},
    ),
    names.AVOIDANCE_COMMAND: _Rules(
        lengths={"position": 3, "velocity": 3, "force": 3},
        bounds={"position": (_PLACE, _PLACE, _ANGLE), "velocity": (_SPEED, _TURN_RATE, _SPEED)},
    ),
    # moveto (x, y), explore (rectangle b, h in velocity[0..1]), investigate: places, sizes and speeds.
    names.MOTION_COMMAND: _Rules(
        lengths={"position": 3, "velocity": 3, "force": 3},
        bounds={"position": (_PLACE, _PLACE, _ANGLE), "velocity": (_PLACE,), "force": (_PLACE,)},
    ),
    names.WRIST_COMMAND: _Rules(
        lengths={"position": 2, "velocity": 2, "force": 2},
        bounds={
            "position": (Bound(-math.pi, math.pi, "rad"), Bound(-math.pi / 2, math.pi / 2, "rad")),
            "velocity": (Bound(-2 * math.pi, 2 * math.pi, "rad/s"),),
            "force": (Bound(-100.0, 100.0, "rad/s²"),),
        },
    ),
    # joint targets (rad or m; NaN = leave the joint alone), speeds, and force[0] = move time (s).
    names.ARM_COMMAND: _Rules(
        lengths={"position": MAX_ACTUATOR_VECTOR, "velocity": MAX_ACTUATOR_VECTOR, "force": 1},
        bounds={
            "position": (Bound(-2 * math.pi, 2 * math.pi, "rad"),),
            "velocity": (Bound(0.0, 100.0, "rad/s"),),
            "force": (Bound(0.0, 3600.0, "s"),),
        },
    ),
}

_NAN_ALLOWED = {(names.ARM_COMMAND, "position")}
"""Fields where NaN has a meaning (an arm joint left where it is)."""


def command_limits(name: str) -> dict[str, tuple[Bound, ...]]:
    """The per-element bounds of a command interface's vectors ({} for an interface without specific rules)."""
    rules = _COMMANDS.get(name)
    return dict(rules.bounds) if rules else {}


def check_number(where: str, value: Any, limit: float = MAX_ABS) -> float:
    """Return ``value`` as a float if it is finite and within ±``limit``.

    Raises:
        LimitError: not a number, not finite, or too large; the message starts with ``where``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LimitError(f"{where} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or abs(number) > limit:
        raise LimitError(f"{where} = {number:g} is out of range [{-limit:g}, {limit:g}]")
    return number


def check_pose(where: str, pose: Iterable[Any], size: int = 3) -> list[float]:
    """Return a planar pose (x m, y m, θ rad) of ``size`` finite values within ±1,000 km and ±4π rad.

    Raises:
        LimitError: wrong length or a value out of range.
    """
    values = list(pose)
    if len(values) != size:
        raise LimitError(f"{where} takes {size} values (x m, y m, θ rad), got {len(values)}")
    bounds = (_PLACE, _PLACE, _ANGLE, *([_ANGLE] * (size - 3)))
    return [bounds[i].check(f"{where}[{i}]", check_number(f"{where}[{i}]", v)) for i, v in enumerate(values)]


def check_covariance(where: str, values: Sequence[Any], size: int = 3) -> list[float]:
    """Return a row-major ``size`` x ``size`` covariance (``size²`` values; empty: none given) if it can be one.

    Its numbers are finite within ±1e9; it is symmetric, its variances (the diagonal) are >= 0 and it is positive
    semi-definite (no direction with a negative variance: every eigenvalue >= 0), each within
    :data:`COVARIANCE_TOLERANCE`.

    Raises:
        LimitError: the wrong length, a value out of range, an asymmetric pair, a negative variance, or a negative
            eigenvalue; the message starts with ``where`` and names the entry.
    """
    if len(values) == 0:
        return []
    if len(values) != size * size:
        raise LimitError(f"{where} takes {size * size} values (a {size}x{size} matrix, row-major), got {len(values)}")
    numbers = [check_number(f"{where}[{i}]", v) for i, v in enumerate(values)]
    tolerance = 1e-9 + COVARIANCE_TOLERANCE * max(abs(v) for v in numbers)
    for i in range(size):
        variance = numbers[i * size + i]
        if variance < -tolerance:
            raise LimitError(
                f"{where}[{i * size + i}] = {variance:g} is a variance: it is out of range [0, {MAX_ABS:g}]"
            )
        for j in range(i + 1, size):
            upper, lower = numbers[i * size + j], numbers[j * size + i]
            if abs(upper - lower) > tolerance:
                raise LimitError(
                    f"{where} is not symmetric: [{i * size + j}] = {upper:g} but [{j * size + i}] = {lower:g} "
                    f"(they may differ by {tolerance:.3g} at most)"
                )
    import numpy as np  # here, not at the top: the command line starts without numpy

    lowest = float(np.linalg.eigvalsh(np.array(numbers).reshape(size, size))[0])
    if lowest < -tolerance:
        raise LimitError(
            f"{where} is not positive semi-definite: it has a negative variance ({lowest:g}) along an eigenvector; "
            "every eigenvalue must be >= 0 (a correlation cannot exceed the product of the standard deviations)"
        )
    return numbers


def check(name: str, msg: msgs.Message) -> msgs.Message:
    """Return ``msg`` if it may be written to interface ``name``.

    Every message: stamps finite within ±1e11 s, every other number finite within ±1e9, vectors at most 4,096 long (32
    for an ``ActuatorState``), a ``covariance`` that can be one (:func:`check_covariance`). Command interfaces
    (``Base/Drive/Command``, ``drive/command``, ``avoidance/command``, ``motion/command``, ``Wrist/Command``,
    ``Arm/Command``): the vector lengths and physical bounds of each element given in this module.

    Raises:
        LimitError: the first field out of range, named as ``interface field[index]``.
    """
    rules = _COMMANDS.get(name)
    for field in msg.__struct_fields__:
        value = getattr(msg, field)
        where = f"{name} {field}"
        if isinstance(value, list):
            _check_vector(name, field, value, rules, isinstance(msg, msgs.ActuatorState))
            if field == "covariance":
                check_covariance(where, value)
        elif isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
            check_number(where, value, MAX_STAMP if field == "stamp" else MAX_ABS)
        elif isinstance(value, msgspec.Struct):
            raise LimitError(f"{where}: nested values are not accepted from outside")
    return msg


def _check_vector(name: str, field: str, values: list[Any], rules: _Rules | None, actuator: bool) -> None:
    where = f"{name} {field}"
    longest = MAX_ACTUATOR_VECTOR if actuator else MAX_VECTOR
    if rules is not None and field in rules.lengths:
        longest = rules.lengths[field]
    if len(values) > longest:
        raise LimitError(f"{where} has {len(values)} values; at most {longest}")
    bounds = rules.bounds.get(field, ()) if rules is not None else ()
    nan_ok = (name, field) in _NAN_ALLOWED
    for i, value in enumerate(values):
        here = f"{where}[{i}]"
        if isinstance(value, float) and math.isnan(value) and nan_ok:
            continue
        if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
            bounds[min(i, len(bounds) - 1)].check(here, float(value))
        else:
            check_number(here, value)
