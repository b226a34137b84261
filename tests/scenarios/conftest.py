"""Fixtures of the scenario tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.stack import ROOM


@pytest.fixture
def room(tmp_path: Path) -> Path:
    """The known room of :data:`tests.scenarios.stack.ROOM` as a map file."""
    path = tmp_path / "room.xml"
    path.write_text(ROOM)
    return path
