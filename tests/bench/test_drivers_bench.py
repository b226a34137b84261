"""The drivers benchmark (bench/drivers.py) on a second of data: every path of every device decodes every frame."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.bench.loader import load_bench

bench: Any = load_bench("drivers")

EXPECTED = {"dmu_rows": 100, "gps_rows": 10, "wrist_rows": 20}
"""Items each path finds in one second of data: packets, epochs (fixes), complete polls (readings)."""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_path_decodes_every_frame(name: str) -> None:
    rows = getattr(bench, name)(1.0)
    assert len(rows) == 3 and len({r.device for r in rows}) == 1
    assert [r.items for r in rows] == [EXPECTED[name]] * 3
    assert all(math.isfinite(r.cpu_per_s) and r.cpu_per_s >= 0.0 for r in rows)


def test_every_device_is_measured() -> None:
    assert [m.__name__ for m in bench.MEASUREMENTS] == ["lms_rows", "dmu_rows", "gps_rows", "wrist_rows"]
