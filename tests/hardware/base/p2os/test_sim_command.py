"""``pluto p2os-sim`` as a user runs it: a process that stops cleanly on Ctrl-C, however slow its world.

How long the stop takes is measured by bench/ctrl_c.py, not here: on a busy machine any wall-clock bound is the
machine's, not the program's. Here the outcome is checked (it ends, with status 0, says so, and has no traceback);
that a slow step is cut short when asked is checked on the robot itself, by its own time.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from pluto.hardware.base.p2os.robot import P2osRobot

GUARD = 30.0  # s: a hang guard for starting and ending the process, not a measure
CROWD = 10_000  # people walking in the world: each costs the physics a little at every 10 ms step


def crowd_world(path: Path, people: int) -> Path:
    """A world whose physics is slow: an empty room full of people walking back and forth (the simulation moves
    every one of them at every 10 ms physics step: 10 000 people take about 0.15 s a step here)."""
    walkers = "\n".join(
        f'<person name="p{i}" radius="0.2" speed="1"><waypoint x="{10 + i % 100}" y="{10 + i // 100}"/>'
        f'<waypoint x="{10.5 + i % 100}" y="{10 + i // 100}"/></person>'
        for i in range(people)
    )
    path.write_text(
        f'<?xml version="1.0"?>\n<world name="crowd" version="1"><walls/><movers>\n{walkers}\n</movers></world>\n'
    )
    return path


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """The lines of a process's output as they come ("" at its end), read by a thread so a wait can time out."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True, name="p2os-sim-output").start()
    return lines


def wait_for_line(lines: queue.Queue[str], text: str) -> str:
    while text not in (line := lines.get(timeout=GUARD)):
        assert line, f"p2os-sim ended before it printed {text!r}"
    return line


def drain(lines: queue.Queue[str]) -> str:
    """The rest of a process's output, up to its end."""
    text = []
    while line := lines.get(timeout=GUARD):
        text.append(line)
    return "".join(text)


def test_p2os_sim_stops_cleanly_on_sigint_even_in_a_slow_world(tmp_path: Path) -> None:
    world = crowd_world(tmp_path / "crowd.xml", CROWD)
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "p2os-sim", "--port", "0", "--world", str(world)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        out, err = lines_of(process.stdout), lines_of(process.stderr)
        wait_for_line(out, "connect a client to: socket://")
        # Its first step of the longest simulated time (a tenth of a second, ten physics steps of a slow world)
        # begins as it says it fell behind the wall clock: SIGINT comes at the start of that step, not by luck near
        # its end.
        wait_for_line(err, "fell behind")
        process.send_signal(signal.SIGINT)
        process.wait(timeout=GUARD)  # a hang guard: it ends
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    wait_for_line(out, "stopped")
    errors = drain(err)
    assert "Traceback" not in errors, errors


def test_a_slow_step_is_cut_short_when_asked() -> None:
    """What lets p2os-sim stop at once in a slow world: the robot's step ends between two 10 ms physics steps when
    asked, and says how much of its time it did not simulate."""
    robot = P2osRobot("p3dx")
    robot.step(10.0)  # the time base
    asked = 0

    def interrupt() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2  # two physics steps, then stop

    left = robot.step(10.1, interrupt=interrupt)
    assert left == pytest.approx(0.08)
    assert robot.step(10.1) == 0.0  # the rest, when not asked to stop
