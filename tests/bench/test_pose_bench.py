"""The pose benchmark (bench/pose.py) end to end on a short drive: its data, its three methods and its table.

A few seconds of the office route with realistic noise: the table has a row per method, every figure is finite, and
the pose module stays below the worst error of dead reckoning alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.bench.loader import load_bench

bench: Any = load_bench("pose")

SECONDS = 12.0


@pytest.fixture(scope="module")
def office() -> Any:
    return bench.evaluate("office", SECONDS, seed=1, passes=1)


def test_the_run_has_a_scan_every_200_ms_with_its_poses(office: Any) -> None:
    run = office.run
    assert run.seconds == pytest.approx(SECONDS)
    assert len(run.records) >= SECONDS / 0.2 - 3  # the last scans wait for the inertial unit's delayed state
    stamps = np.array([r.stamp for r in run.records])
    assert np.allclose(np.diff(stamps), 0.2)
    first = run.records[0]
    assert len(first.scan.ranges) == 361 and len(first.dr.pose) == 8 and len(first.dr.covariance) == 9
    assert run.distance > 3.0  # the robot drove down the corridor


def test_the_table_has_every_method_and_the_pose_module_beats_dead_reckoning(office: Any) -> None:
    names = [m.name for m in office.methods]
    assert names == [bench.PLUTO, *(name for name, _ in bench.AMCL_CONFIGURATIONS), bench.DEAD_RECKONING]
    lines = bench.table([office])
    rows = [line for line in lines if line.startswith("office")]
    assert len(rows) == len(names)
    for name, row in zip(names, rows, strict=True):
        assert name in row
    for m in office.methods:
        assert len(m.position) == len(office.run.records)
        assert np.all(np.isfinite(m.position)) and np.all(np.isfinite(m.heading))
    pluto = office.method(bench.PLUTO)
    dead_reckoning = office.method(bench.DEAD_RECKONING)
    assert float(np.max(pluto.position)) < float(np.max(dead_reckoning.position))
    assert float(np.mean(pluto.position)) < float(np.mean(dead_reckoning.position))
    assert pluto.cpu.size == len(office.run.records) and math.isfinite(pluto.lines_per_s)
    for name, _ in bench.AMCL_CONFIGURATIONS:
        assert office.method(name).updated.any()
    assert any("line extraction" in line for line in bench.verdicts([office]))
