"""Fixtures of the recording tests: the CARMEN excerpts imported as Pluto logs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pluto.record.carmen import import_carmen

DATA = Path(__file__).parent / "data"
EXCERPTS = {"intel": DATA / "intel-excerpt.log.gz", "freiburg": DATA / "freiburg-excerpt.log.gz"}


@pytest.fixture
def carmen_log(tmp_path: Path) -> Callable[[str], Path]:
    """``carmen_log("intel")``: the excerpt of that data set imported into a log in the test's folder."""

    def make(name: str) -> Path:
        output = tmp_path / f"{name}.mcap"
        if not output.exists():
            import_carmen(EXCERPTS[name], output)
        return output

    return make
