"""The real-log half of the pose benchmark (bench/pose_logs.py) end to end on the first 40 scans of the Intel lab's
log: the SLAM's map, the pose module, both particle filters and the odometry in one table, with the targets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.bench.loader import load_bench

bench: Any = load_bench("pose_logs")
INTEL = bench.DATASETS / bench.LOGS["intel"]
pytestmark = pytest.mark.skipif(not INTEL.exists(), reason="the Radish Intel log is not here")


@pytest.fixture(scope="module")
def intel() -> Any:
    return bench.evaluate("intel", INTEL, seed=1, scans=40)


def test_every_method_has_its_row_with_finite_figures(intel: Any) -> None:
    names = [row.name for row in intel.rows]
    configurations = [name for name, _ in bench.amcl_configurations(bench.OdometryNoise())]
    assert names == [bench.SLAM, bench.PLUTO, *configurations, bench.ODOMETRY]
    for row in intel.rows:
        assert row.rpe is not None and row.rpe.pairs > 0 and math.isfinite(row.rpe.translation_mean)
    pluto = intel.row(bench.PLUTO)
    assert pluto.lost is not None and pluto.cpu.size == 40 and np.all(pluto.cpu >= 0)
    assert len(pluto.recoveries) == 8 and all(len(intel.row(n).recoveries) == 8 for n in configurations)
    rows = [line for line in bench.table([intel]) if line.startswith("intel")]
    assert len(rows) == len(names) and all(name in row for name, row in zip(names, rows, strict=True))


def test_the_targets_are_each_judged(intel: Any) -> None:
    lines = bench.verdicts([intel])
    assert any("at or below the SLAM's" in line for line in lines)
    assert any("lost on under 1 %" in line for line in lines)
    assert sum("at under 1/5 of its CPU" in line for line in lines) == 2
    assert any("wrong start within 10 s" in line for line in lines)
    assert all(line.endswith(("met", "NOT met")) for line in lines)


def test_the_wrong_starts_are_5_m_from_the_first_pose_and_turned_by_90_degrees() -> None:
    first = np.array([1.0, 2.0, 0.3])
    for x, y, theta in bench.wrong_starts(first):
        assert math.hypot(x - 1.0, y - 2.0) == pytest.approx(5.0)
        assert abs(abs(theta - 0.3) - math.pi / 2) < 1e-12
    assert bench.log_names("intel, corridor") == ["intel", "corridor"] and bench.log_names("none") == []
    with pytest.raises(ValueError):
        bench.log_names("intel,mars")
