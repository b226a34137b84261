"""Fixtures shared by every test: a leak check, an isolated bus per test, and buses opened on it.

Each test gets its own robot name (so keys never clash) and its own rendezvous port (so no test meets a bus of
another test or a real robot on this machine). Subprocesses started by a test inherit the same environment, so
they join the test's bus.

After every test, once its fixtures are torn down, :func:`leak_check` fails it if it left behind a thread, a
running child process or an open :class:`~pluto.bus.Bus` that was not there before it. A test that cannot help it
says so with ``@pytest.mark.allow_leaks(reason="...")``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from pluto.bus import Bus, BusConfig
from pluto.runtime import launcher
from tests.helpers import free_tcp_port

# Property tests check what comes out, not how fast: on a busy machine an example may take longer than the default
# deadline of 200 ms.
settings.register_profile("pluto", deadline=None)
settings.load_profile("pluto")

LEAK_GRACE = 2.0
"""s that threads and child processes a test started get, in all, to end after its teardown before they count as
leaked."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "allow_leaks(reason): the test may leave threads, child processes or open buses behind (say why)",
    )
    config.addinivalue_line("markers", "scenario: whole-stack runs in simulation")
    config.addinivalue_line("markers", "faults: modules killed or hung during a mission (fault injection)")
    config.addinivalue_line("markers", "slow: takes a minute or more of wall time (deselect with -m 'not slow')")


# ------------------------------------------------------------------------------------------------ leak check


def _record_open_buses() -> weakref.WeakSet[Bus]:
    """Make ``Bus.__init__`` add the bus to a weak registry and ``Bus.close`` remove it; return the registry
    (the same one if this module is imported twice)."""
    init, close = Bus.__init__, Bus.close
    registry: weakref.WeakSet[Bus] | None = getattr(init, "open_buses", None)
    if registry is not None:
        return registry
    registry = weakref.WeakSet()

    @functools.wraps(init)
    def recording_init(self: Bus, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        registry.add(self)

    @functools.wraps(close)
    def recording_close(self: Bus) -> None:
        try:
            close(self)
        finally:
            registry.discard(self)

    recording_init.open_buses = registry  # type: ignore[attr-defined]
    setattr(Bus, "__init__", recording_init)  # noqa: B010  (mypy refuses assigning to a method)
    setattr(Bus, "close", recording_close)  # noqa: B010
    return registry


open_buses = _record_open_buses()
"""Every :class:`~pluto.bus.Bus` opened in this process and not closed yet."""


def _ignored_thread(thread: threading.Thread) -> bool:
    """The interpreter's own threads and those of the Zenoh runtime (threads it made call into Python)."""
    return (
        thread is threading.main_thread()
        or isinstance(thread, threading._DummyThread)  # foreign threads seen by Python
        or "pyo3" in thread.name
    )


def _child_pids() -> set[int]:
    """The processes whose parent is this one (running or zombie)."""
    pids: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as file:
                pids.update(int(pid) for pid in file.read().split())
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process
        pids.clear()
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[1] == me:
                pids.add(int(entry))
    except OSError:
        pass
    return pids


def _stat(pid: int) -> tuple[str, int, str] | None:
    """State, parent pid and command name of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    name, _, rest = data.rpartition(b")")
    fields = rest.split()
    return fields[0].decode(), int(fields[1]), name.partition(b"(")[2].decode(errors="replace")


def _running_child(pid: int) -> bool:
    """The child is still running; a zombie is reaped and does not count."""
    stat = _stat(pid)
    if stat is None or stat[1] != os.getpid():
        return False
    if stat[0] == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def _leaked_threads(before: set[threading.Thread], deadline: float) -> list[threading.Thread]:
    new = [t for t in threading.enumerate() if t not in before and not _ignored_thread(t)]
    for thread in new:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t for t in new if t.is_alive()]


def _leaked_children(before: set[int], deadline: float) -> list[int]:
    new = [pid for pid in _child_pids() - before if _running_child(pid)]
    while new and time.monotonic() < deadline:
        time.sleep(0.01)
        new = [pid for pid in new if _running_child(pid)]
    return new


def _describe_child(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            command = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    if not command:
        stat = _stat(pid)
        command = stat[2] if stat is not None else "?"
    return f"{pid} ({command[:120]})"


# pytest registers a conftest's fixtures in the order of dir(), alphabetical: the leading underscore makes this
# the first autouse fixture, set up first and torn down last.
@pytest.fixture(autouse=True, name="leak_check")
def _leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if, after its fixtures are torn down, it left behind threads (given :data:`LEAK_GRACE` to
    end), running child processes (the same grace) or open buses that were not there before it.

    The first autouse fixture, so it is set up first and torn down last, and it depends on nothing torn down
    after it. Leaked buses are closed and leaked child processes killed after the report, so the next tests are
    not blamed for them.
    """
    if request.node.get_closest_marker("allow_leaks") is not None:
        yield
        return
    threads = set(threading.enumerate())
    children = _child_pids()
    buses = set(open_buses)
    yield
    problems = []
    leaked_buses = [bus for bus in list(open_buses) if bus not in buses]
    if leaked_buses:
        problems.append(f"{len(leaked_buses)} open bus(es) of robot(s) {sorted({b.robot for b in leaked_buses})}")
        for bus in leaked_buses:  # closed first, so that their own threads are not reported too
            with contextlib.suppress(Exception):
                bus.close()
    del buses, leaked_buses
    deadline = time.monotonic() + LEAK_GRACE
    leaked_threads = _leaked_threads(threads, deadline)
    del threads
    if leaked_threads:
        problems.append("threads " + ", ".join(sorted(repr(t.name) for t in leaked_threads)))
    leaked_children = _leaked_children(children, deadline)
    if leaked_children:
        problems.append("running child processes " + ", ".join(_describe_child(pid) for pid in leaked_children))
    if not problems:
        return
    for pid in leaked_children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    pytest.fail(f"the test left behind {'; '.join(problems)}", pytrace=False)


# ------------------------------------------------------------------------------------------------ the test's bus


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
    for name in (
        *("PLUTO_CONNECT", "PLUTO_MODE", "PLUTO_LISTEN", "PLUTO_CONFIG", "PLUTO_MULTICAST"),
        *("PLUTO_TLS", "PLUTO_TLS_CA", "PLUTO_TLS_CERT", "PLUTO_TLS_KEY"),
    ):
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
