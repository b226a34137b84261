"""Sizes and durations as people write them."""

from __future__ import annotations

import pytest

from pluto.errors import ConfigError
from pluto.record.units import parse_duration, parse_size


def test_sizes() -> None:
    assert parse_size("1000") == 1000 and parse_size("500k") == 500 * 1024
    assert parse_size("100M") == 100 * 1024**2 and parse_size("2GB") == 2 * 1024**3 and parse_size("1.5 GiB") > 0
    for bad in ("", "lots", "-5", "5x"):
        with pytest.raises(ConfigError, match="not a size"):
            parse_size(bad)


def test_durations() -> None:
    assert parse_duration("90") == 90.0 and parse_duration("90s") == 90.0
    assert parse_duration("10m") == 600.0 and parse_duration("1.5h") == 5400.0
    for bad in ("", "soon", "-5", "5d"):
        with pytest.raises(ConfigError, match="not a duration"):
            parse_duration(bad)
