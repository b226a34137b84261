"""Valid ranges of parameters, declared once in each Params class and checked wherever parameters enter.

A number among a module's parameters says what values it takes with msgspec constraints on its type::

    max_speed: Annotated[float, msgspec.Meta(gt=0.0, le=3.0)] = 1.0     # m/s
    rate_hz: Rate = 10.0                                                 # [0.1, 1000] Hz
    laser_pose: list[Annotated[float, between(-10.0, 10.0)]]            # each element

msgspec enforces them when it converts plain values (a configuration file, ``-p``, a profile, ``set_parameters``);
:func:`check_ranges` checks them first with a message that names the parameter and its range, and also checks a
Params built in Python. Every range is finite, so nan and ±inf are refused. :func:`parameter_ranges` gives them as
text for ``list_parameters`` (``pluto param list``).

A service's request struct declares its ranges the same way (``duration: Timeout | None``); the service takes the
request as plain values and :func:`convert_request` checks and converts it, so a refused request names the field and
its range, and the bus counts it as a bad request (no traceback in the module's log).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, TypeVar

import msgspec

MIN_RATE_HZ = 0.1
"""Hz: the slowest control step a module may be set to (one step every 10 s)."""
MAX_RATE_HZ = 1000.0
"""Hz: the fastest."""

Rate = Annotated[float, msgspec.Meta(ge=MIN_RATE_HZ, le=MAX_RATE_HZ)]
"""A control step's rate, Hz: within [:data:`MIN_RATE_HZ`, :data:`MAX_RATE_HZ`]."""

# The common kinds of parameters. A field whose meaning asks for another range writes its own constraint.
MAX_SPEED = 3.0
"""m/s: faster than any base Pluto drives (a Pioneer's top speed is under 2 m/s)."""
MAX_TURN_RATE = 6.0
"""rad/s: faster than any base or wrist turns."""

Speed = Annotated[float, msgspec.Meta(gt=0.0, le=MAX_SPEED)]
"""A speed limit, m/s: in (0, 3]."""
TurnRate = Annotated[float, msgspec.Meta(gt=0.0, le=MAX_TURN_RATE)]
"""A turn-rate limit (of the base or a joint), rad/s: in (0, 6]."""
Accel = Annotated[float, msgspec.Meta(gt=0.0, le=10.0)]
"""An acceleration limit, m/s²: in (0, 10]."""
TurnAccel = Annotated[float, msgspec.Meta(gt=0.0, le=30.0)]
"""An angular acceleration limit, rad/s²: in (0, 30]."""
Timeout = Annotated[float, msgspec.Meta(gt=0.0, le=3600.0)]
"""A positive duration, s: in (0, 3600]."""
CommandTimeout = Annotated[float, msgspec.Meta(gt=0.0, le=60.0)]
"""How old a command or an input the robot moves by may get before it counts as absent, s: in (0, 60] (longer
would keep the robot moving on a stale one)."""
Radius = Annotated[float, msgspec.Meta(gt=0.0, le=5.0)]
"""The radius of the robot's footprint, m: in (0, 5]."""
Distance = Annotated[float, msgspec.Meta(ge=0.0, le=100.0)]
"""A distance, m: in [0, 100]."""
Offset = Annotated[float, msgspec.Meta(ge=-5.0, le=5.0)]
"""A position on the robot (a sensor's mount), m: in [-5, 5]."""
Angle = Annotated[float, msgspec.Meta(ge=-math.pi, le=math.pi)]
"""An angle, rad: in [-π, π]."""
Latitude = Annotated[float, msgspec.Meta(ge=-90.0, le=90.0)]
"""A latitude, degrees north."""
Longitude = Annotated[float, msgspec.Meta(ge=-180.0, le=180.0)]
"""A longitude, degrees east."""
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
"""A TCP or UDP port (0: any free one)."""
Baud = Annotated[int, msgspec.Meta(ge=300, le=4_000_000)]
"""A serial line's speed, bit/s."""
Seed = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
"""A random generator's seed."""


def between(low: float, high: float, *, open_low: bool = False) -> msgspec.Meta:
    """The constraint of a number in ``[low, high]`` (``(low, high]`` with ``open_low``), for ``Annotated``."""
    return msgspec.Meta(gt=low, le=high) if open_low else msgspec.Meta(ge=low, le=high)


_Numeric = msgspec.inspect.FloatType | msgspec.inspect.IntType
_Request = TypeVar("_Request", bound=msgspec.Struct)


def _g(x: float) -> str:
    return f"{x:g}"


def range_text(kind: _Numeric) -> str:
    """A number type's range as an interval: ``[0.1, 1000]``, ``(0, 3]``; ``(-inf, inf)`` if it declares none."""
    low = f"({_g(kind.gt)}" if kind.gt is not None else f"[{_g(kind.ge)}" if kind.ge is not None else "(-inf"
    high = f"{_g(kind.lt)})" if kind.lt is not None else f"{_g(kind.le)}]" if kind.le is not None else "inf)"
    return f"{low}, {high}"


def _in_range(kind: _Numeric, value: float) -> bool:
    if math.isnan(value):
        return False
    return not (
        (kind.ge is not None and not value >= kind.ge)
        or (kind.gt is not None and not value > kind.gt)
        or (kind.le is not None and not value <= kind.le)
        or (kind.lt is not None and not value < kind.lt)
    )


def _bare(kind: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """The type without its description (a number described by ``msgspec.Meta(description=...)`` is wrapped)."""
    while isinstance(kind, msgspec.inspect.Metadata):
        kind = kind.type
    return kind


def _numbers_in(kind: msgspec.inspect.Type) -> list[_Numeric]:
    """The number types a parameter's type holds directly: itself, the members of a union, a list's items."""
    kind = _bare(kind)
    if isinstance(kind, _Numeric):
        return [kind]
    if isinstance(kind, msgspec.inspect.UnionType):
        return [t for member in kind.types for t in _numbers_in(member)]
    if isinstance(kind, msgspec.inspect.ListType | msgspec.inspect.VarTupleType | msgspec.inspect.SetType):
        return _numbers_in(kind.item_type)
    if isinstance(kind, msgspec.inspect.TupleType):
        return [t for item in kind.item_types for t in _numbers_in(item)]
    return []


@cache
def _fields(cls: type[msgspec.Struct]) -> dict[str, msgspec.inspect.Type]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.name: _bare(field.type) for field in info.fields}


def parameter_ranges(cls: type[msgspec.Struct]) -> dict[str, str]:
    """The declared range of each numeric parameter of ``cls`` (a list's applies to each element; a struct's
    parameters show theirs as ``name.field``)."""
    out: dict[str, str] = {}
    for name, kind in _fields(cls).items():
        numbers = _numbers_in(kind)
        if numbers:
            out[name] = " or ".join(dict.fromkeys(range_text(t) for t in numbers))
        elif isinstance(kind, msgspec.inspect.StructType):
            for sub, text in parameter_ranges(kind.cls).items():
                out[f"{name}.{sub}"] = text
    return out


def _check_number(kind: msgspec.inspect.Type, value: float, label: str) -> None:
    """A number against the number types ``kind`` allows (itself, or the members of a union); a number where no
    number belongs (a list's place, say) is left to the type check."""
    members = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    numbers = [t for t in members if isinstance(t, _Numeric)]
    if numbers and not any(_in_range(t, float(value)) for t in numbers):
        ranges = " or ".join(dict.fromkeys(range_text(t) for t in numbers))
        raise ValueError(f"{label} = {value!r} is out of range: it must be in {ranges}")


def _check_items(kind: msgspec.inspect.Type, value: list[Any] | tuple[Any, ...], label: str) -> None:
    """Each element of a list or tuple against its item type (``label[i]``)."""
    if isinstance(kind, msgspec.inspect.ListType | msgspec.inspect.VarTupleType | msgspec.inspect.SetType):
        for i, item in enumerate(value):
            _check_value(kind.item_type, item, f"{label}[{i}]")
    elif isinstance(kind, msgspec.inspect.TupleType):
        for i, (item_kind, item) in enumerate(zip(kind.item_types, value, strict=False)):
            _check_value(item_kind, item, f"{label}[{i}]")


def _check_value(kind: msgspec.inspect.Type, value: Any, label: str) -> None:
    kind = _bare(kind)
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        _check_number(kind, value, label)
        return
    if isinstance(kind, msgspec.inspect.UnionType):
        for member in kind.types:
            if isinstance(member, msgspec.inspect.ListType | msgspec.inspect.TupleType | msgspec.inspect.StructType):
                _check_value(member, value, label)
        return
    if isinstance(value, list | tuple):
        _check_items(kind, value, label)
        return
    if isinstance(kind, msgspec.inspect.StructType):
        if isinstance(value, msgspec.Struct):
            value = {name: getattr(value, name) for name in value.__struct_fields__}
        if isinstance(value, Mapping):
            check_ranges(kind.cls, value, prefix=f"{label}.")


def check_ranges(cls: type[msgspec.Struct], values: Mapping[str, Any], *, prefix: str = "") -> None:
    """Check the numbers among ``values`` (parameters of ``cls`` by name, plain or already typed) against the ranges
    ``cls`` declares; names it does not have and values of other types are left to its type check.

    Raises:
        ValueError: a number out of its range (nan always is, and ±inf unless the range is open there), with the
            parameter's name and its range.
    """
    fields = _fields(cls)
    for name, value in values.items():
        kind = fields.get(name)
        if kind is not None:
            _check_value(kind, value, f"{prefix}{name}")


def convert_request(cls: type[_Request], values: Mapping[str, Any] | None) -> _Request:
    """A service's request, taken as plain values (``dict[str, Any] | None``), as a ``cls``: its numbers checked
    against the ranges ``cls`` declares first, then converted (None: every field's default).

    Raises:
        msgspec.ValidationError: a number out of its range (the message names the field and the range), or a value
            of the wrong type. The bus answers a service's handler that raises it as a bad request and counts it.
    """
    plain: Mapping[str, Any] = {} if values is None else values
    try:
        check_ranges(cls, plain)
    except ValueError as err:
        raise msgspec.ValidationError(str(err)) from None
    return msgspec.convert(plain, cls)
