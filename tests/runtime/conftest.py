"""Fixtures of the runtime tests: subprocesses can import the sample modules, and no daemon outlives its test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def sample_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let child processes (``python -m pluto run tests.runtime.sample_modules:X``) import the sample modules."""
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + old if old else ""))
