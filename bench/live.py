"""What the benchmarks of the live views share (``bench/web.py``, ``bench/web_foxglove.py``): the simulated robot in
processes of its own, a gateway process's CPU time, and the table's row."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SIM_RATE = 5.0
"""Simulated seconds per wall-clock second."""


@dataclass(frozen=True)
class Row:
    server: str
    clients: int
    what: str
    mean_hz: float
    """Messages a second delivered to one client, on average over the clients."""
    min_hz: float
    """... to the slowest client."""
    cpu_percent: float
    """The gateway process's CPU over the measurement, % of one core."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_line(process: subprocess.Popen[str], pattern: str, timeout: float) -> re.Match[str]:
    """The first line of the process's output matching ``pattern``."""
    assert process.stdout is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        if found := re.search(pattern, line):
            return found
    raise RuntimeError(f"no line matching {pattern!r} from {process.args}")


def stop(process: subprocess.Popen[str]) -> None:
    """Ctrl-C, then kill if it does not end."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def simulated_robot(name: str) -> Iterator[dict[str, str]]:
    """``pluto sim --rate 5`` on a robot of its own; yields the environment that reaches it."""
    with tempfile.TemporaryDirectory() as runtime:
        env = {**os.environ, "PLUTO_ROBOT": f"bench-{name}-{uuid.uuid4().hex[:6]}", "PLUTO_RUNTIME_DIR": runtime}
        sim = subprocess.Popen(
            [sys.executable, "-m", "pluto", "sim", "--rate", str(SIM_RATE)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            time.sleep(5.0)  # the simulated robot up before the gateway asks it for its world
            yield env
        finally:
            stop(sim)


# -- pluto web -----------------------------------------------------------------------------------------------------
