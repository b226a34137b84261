"""Reading an arm model file: the TOML text of a model (``models/LynxArm6.toml``) into its links.

    name, links, num_outputs = links_from_toml(text, where="LynxArm6.toml")

Model files give lengths in mm (the convention of the arms' documentation) and angles in degrees or radians, as their
header says; the links come out in m and rad. Each ``[[joint]]`` is an output (link index 0, 1, ... in file order),
each ``[[frame]]`` an extra frame whose index follows the joints.
"""

# Strategy: one function per field group (name, type, parent, limits, servo channel), each raising ValueError or
# TypeError with the field and the reason; links_from_toml prefixes the file and the table, so that every mistake in
# a file is reported as ``file: joint 2: min (90) is above max (-90)``. Checks run in file order of the fields, so
# the first mistake of a table is the one reported.

from __future__ import annotations

import math
import tomllib
from typing import Any, cast

from pluto.errors import ConfigError
from pluto.hardware.arm.links import JointType, Link, ServoChannel

__all__ = ["MM", "links_from_toml"]

MM = 1e-3
"""One millimetre in metres (the unit of lengths in model files)."""

_LINK_KEYS = {"name", "type", "parent", "theta", "d", "alpha", "r", "q_offset", "min", "max", "max_speed", "home"}


def links_from_toml(text: str, where: str = "<model>") -> tuple[str, list[Link], int]:
    """The model's name, its links (joints, then frames) and its number of joints, from a model file's text.

    Raises:
        ConfigError: the text is not valid TOML or describes an invalid arm; the message names ``where``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{where}: {err}") from err
    angle_unit = data.get("angle_unit", "radians")
    if angle_unit not in ("radians", "degrees"):
        raise ConfigError(f"{where}: angle_unit is 'radians' or 'degrees', not {angle_unit!r}")
    if data.get("length_unit", "mm") != "mm":
        raise ConfigError(f"{where}: length_unit must be 'mm'")
    angle = math.pi / 180.0 if angle_unit == "degrees" else 1.0
    joints, frames = data.get("joint", []), data.get("frame", [])
    if not isinstance(joints, list) or not isinstance(frames, list) or not joints:
        raise ConfigError(f"{where}: a model needs [[joint]] tables (and may have [[frame]] tables)")
    names: dict[str, int] = {}
    links: list[Link] = []
    for i, table in enumerate([*joints, *frames]):
        is_joint = i < len(joints)
        what = f"{where}: {'joint' if is_joint else 'frame'} {i if is_joint else i - len(joints)}"
        try:
            link = _link_from_table(table, i, is_joint, names, angle)
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{what}: {err}") from None
        names[link.name] = i
        links.append(link)
    return str(data.get("name", "arm")), links, len(joints)


def _link_from_table(table: Any, index: int, is_joint: bool, names: dict[str, int], angle: float) -> Link:
    """One ``[[joint]]`` or ``[[frame]]`` table as a link; ``names`` are the links before it, ``angle`` the angle
    unit in rad."""
    if not isinstance(table, dict):
        raise TypeError("must be a table")
    unknown = set(table) - _LINK_KEYS - {"ssc32"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}")
    name = _link_name(table, names)
    kind = _link_type(table, is_joint)
    parent = _parent_index(table, index, is_joint, names)
    value_unit = MM if kind == "prismatic" else angle
    lower, upper, home, max_speed = _joint_range(table, value_unit)
    servo = _servo_channel(table)
    return Link(
        name=name,
        index=index,
        type=kind,
        parent=parent,
        theta=_number(table, "theta", angle),
        d=_number(table, "d", MM),
        alpha=_number(table, "alpha", angle),
        r=_number(table, "r", MM),
        q_offset=_number(table, "q_offset", value_unit),
        lower=lower,
        upper=upper,
        max_speed=max_speed,
        home=home,
        ssc32=servo,
    )


def _link_name(table: dict[str, Any], names: dict[str, int]) -> str:
    name = table["name"]
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValueError(f"name must be a non-empty word, not {name!r}")
    if name in names:
        raise ValueError(f"link name {name!r} appears twice")
    return name


def _link_type(table: dict[str, Any], is_joint: bool) -> JointType:
    kind = table.get("type", "revolute" if is_joint else "fixed")
    if kind not in (("revolute", "prismatic") if is_joint else ("fixed",)):
        raise ValueError(f"type {kind!r} is not allowed here (joints: revolute or prismatic; frames: fixed)")
    return cast("JointType", kind)


def _parent_index(table: dict[str, Any], index: int, is_joint: bool, names: dict[str, int]) -> int:
    """The parent's link index: the joint before by default (the base for a frame), -1 for "" (the base)."""
    parent_name = table.get("parent")
    if parent_name is None:
        return index - 1 if is_joint else -1
    if parent_name == "":
        return -1
    if parent_name in names:
        return names[parent_name]
    raise ValueError(f"parent {parent_name!r} is not a link defined before it")


def _number(table: dict[str, Any], key: str, scale: float, default: float = 0.0) -> float:
    """A finite number of the table (or ``default``) times ``scale``; ``max_speed`` may also be inf."""
    raw = table.get(key, default)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        if key == "max_speed" and raw == math.inf:
            return math.inf
        raise ValueError(f"{key} must be a finite number, not {raw!r}")
    return float(raw) * scale


def _joint_range(table: dict[str, Any], unit: float) -> tuple[float, float, float, float]:
    """The joint's limits, home value and top speed, in m or rad (``unit``: the file's unit in those)."""
    lower, upper = _number(table, "min", unit), _number(table, "max", unit)
    if lower > upper:
        raise ValueError(f"min ({table.get('min')}) is above max ({table.get('max')})")
    home = _number(table, "home", unit, 0.0 if lower <= 0.0 <= upper else table.get("min", 0.0))
    if not lower <= home <= upper:
        raise ValueError("home is outside [min, max]")
    max_speed = _number(table, "max_speed", unit, math.inf)
    if max_speed <= 0:
        raise ValueError("max_speed must be > 0")
    return lower, upper, home, max_speed


def _servo_channel(table: dict[str, Any]) -> ServoChannel | None:
    if "ssc32" not in table:
        return None
    s = table["ssc32"]
    if not isinstance(s, dict) or set(s) != {"channel", "pulse_at_min", "pulse_at_max"}:
        raise ValueError("ssc32 needs exactly channel, pulse_at_min, pulse_at_max")
    channel = s["channel"]
    if not isinstance(channel, int) or not 0 <= channel <= 31:
        raise ValueError(f"ssc32 channel must be 0..31, not {channel!r}")
    pulses = (float(s["pulse_at_min"]), float(s["pulse_at_max"]))
    if not all(500.0 <= p <= 2500.0 for p in pulses):
        raise ValueError("ssc32 pulses must be within 500..2500 µs")
    return ServoChannel(channel, *pulses)
