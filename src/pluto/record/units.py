"""Sizes and durations as people write them on a command line or in a profile (``500M``, ``10m``)."""

from __future__ import annotations

import re

from pluto.errors import ConfigError

__all__ = ["parse_duration", "parse_size"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``500k``, ``100M``, ``2G`` or a number of bytes, as bytes (powers of 1024).

    Raises:
        ConfigError: not a size.
    """
    match = _SIZE.match(text)
    if not match:
        raise ConfigError(f"not a size: {text!r} (examples: 1000000, 500k, 100M, 2G)")
    value, unit = float(match.group(1)), match.group(2).lower()
    return int(value * 1024 ** " kmgt".index(unit or " "))


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``2h`` as seconds.

    Raises:
        ConfigError: not a duration.
    """
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"not a duration: {text!r} (examples: 90, 90s, 10m, 2h)")
    value, unit = float(match.group(1)), (match.group(2) or "s").lower()
    return value * {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[unit]
