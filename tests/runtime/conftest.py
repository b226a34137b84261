"""Fixtures of the runtime tests: subprocesses can import the sample modules, and no daemon outlives its test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto.runtime import launcher

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def sample_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let child processes (``python -m pluto run tests.runtime.sample_modules:X``) import the sample modules."""
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + old if old else ""))


@pytest.fixture(autouse=True)
def kill_leftovers(bus_env: dict[str, str]) -> Iterator[None]:
    """After the test, end every process that still has a pid file in the test's runtime directory."""
    yield
    for pid_file in Path(bus_env["PLUTO_RUNTIME_DIR"]).glob("*/*.pid"):
        pid = launcher.read_pid(pid_file)
        if pid is not None:
            launcher.terminate(pid, timeout=2.0)
        pid_file.unlink(missing_ok=True)
