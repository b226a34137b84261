"""Threads of the module processes of the mission profile: a few, whatever the number of interfaces and services."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

from pluto.bus import Bus
from pluto.runtime.profiles import load_profile
from tests.scenarios.stack import Lockstep, Script

pytestmark = [
    pytest.mark.scenario,
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)"),
]

MOST_THREADS = 12
"""Per module process: Zenoh's runtimes (about 8), the main thread, the module's step thread, the executor's worker
(the lock-step executor of a module following simulated time), the parent watch."""


def threads_of(pid: int) -> dict[str, int]:
    names: dict[str, int] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
        names[name] = names.get(name, 0) + 1
    return names


def test_a_module_process_runs_a_dozen_threads_at_most(bus: Bus) -> None:
    counts: dict[str, dict[str, int]] = {}
    with Lockstep(bus) as sim:
        supervisor = sim.start(load_profile("mission"), world="office", one_process=False)

        def run(now: float) -> Generator[None, float, None]:
            while now < 3.0:  # every module has stepped, served its queries and answered the lock-step
                now = yield
            for name, child in supervisor.children.items():
                assert child.process is not None
                counts[name] = threads_of(child.process.pid)

        script = Script(bus, run=run)
        sim.add(script)
        sim.resume()
        script.wait()
    assert set(counts) >= {"sim", "base", "sick", "localization", "drive", "avoid", "pose"}
    too_many = {name: threads for name, threads in counts.items() if sum(threads.values()) > MOST_THREADS}
    assert not too_many, f"more than {MOST_THREADS} threads: {too_many}"
