"""Fixtures shared by every test: an isolated bus per test, and buses opened on it.

Each test gets its own robot name (so keys never clash) and its own rendezvous port (so no test meets a bus of
another test or a real robot on this machine). Subprocesses started by a test inherit the same environment, so
they join the test's bus.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pluto.bus import Bus, BusConfig
from pluto.runtime import launcher
from tests.helpers import free_tcp_port


@pytest.fixture(autouse=True)
def bus_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Give the test a robot of its own and a rendezvous of its own; return the variables set."""
    runtime_dir = tmp_path / "runtime"
    runtime_dir.mkdir()
    values = {
        "PLUTO_ROBOT": f"test-{uuid.uuid4().hex[:8]}",
        "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{free_tcp_port()}",
        "PLUTO_RUNTIME_DIR": str(runtime_dir),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    for name in ("PLUTO_CONNECT", "PLUTO_LISTEN", "PLUTO_CONFIG", "PLUTO_MULTICAST"):
        monkeypatch.delenv(name, raising=False)
    return values


@pytest.fixture(autouse=True)
def stop_leftovers(bus_env: dict[str, str]) -> Iterator[None]:
    """After the test, end every process that still has a pid file in the test's runtime directory (daemons and
    detached profiles a failing test left behind)."""
    yield
    for pid_file in Path(bus_env["PLUTO_RUNTIME_DIR"]).glob("*/*.pid"):
        pid = launcher.read_pid(pid_file)
        if pid is not None:
            launcher.terminate(pid, timeout=2.0)
        pid_file.unlink(missing_ok=True)


@pytest.fixture
def make_bus() -> Iterator[Callable[..., Bus]]:
    """A factory of opened buses (``make_bus()`` or ``make_bus(config)``), each closed at teardown."""
    opened: list[Bus] = []

    def make(config: BusConfig | None = None) -> Bus:
        bus = Bus(config)
        opened.append(bus)
        return bus

    yield make
    for bus in reversed(opened):
        bus.close()


@pytest.fixture
def bus() -> Iterator[Bus]:
    """An opened bus (the first one of the test owns the rendezvous), closed after the test."""
    with Bus() as opened:
        yield opened
