"""ARIA (AriaCoda's example programs) connects to the emulated Pioneer on its pty right after an ARIA program was
killed while the robot drove: on a serial line nothing tells the robot that its client died, so the next program
must close the old session and synchronise.

ARIA is not packaged: with AriaCoda's examples built outside this repository, point ``PLUTO_ARIA_EXAMPLES`` at the
folder that holds the ``simpleMotionCommands`` and ``simpleConnect`` programs (with ``libAria`` where the loader
finds it, ``LD_LIBRARY_PATH`` for a build tree). Without them the test is skipped.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO

import pytest

from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot
from tests.helpers import free_tcp_port, wait_until

EXAMPLES = Path(os.environ.get("PLUTO_ARIA_EXAMPLES", "/nonexistent"))
MOVER, CONNECTOR = EXAMPLES / "simpleMotionCommands", EXAMPLES / "simpleConnect"

pytestmark = pytest.mark.skipif(
    not all(p.is_file() and os.access(p, os.X_OK) for p in (MOVER, CONNECTOR)),
    reason="AriaCoda's examples are not built (set PLUTO_ARIA_EXAMPLES to the folder with simpleMotionCommands "
    "and simpleConnect)",
)


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """The lines a program writes, as they come (a reader thread of their own)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True, name="aria-output").start()
    return lines


def wait_for_line(lines: queue.Queue[str], text: str, timeout: float = 60.0) -> None:
    """Wait until a line holding ``text`` comes (a guard against a hang, not a measure)."""
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line with {text!r} within {timeout} s; got {''.join(seen)}") from None
        seen.append(line)
        if text in line:
            return


def test_aria_connects_on_the_pty_right_after_a_moving_aria_program_was_killed() -> None:
    with P2osEmulator(P2osRobot("p3dx", watchdog=2.0), transport="pty") as emulator:
        # ARIA first tries a simulator on TCP (localhost:8101); a port nothing listens on sends it to the pty
        serial = ["-robotPort", emulator.pty_path, "-remoteRobotTcpPort", str(free_tcp_port())]
        mover = subprocess.Popen(
            [str(MOVER), *serial],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for_line(lines_of(mover.stdout), "Driving forward at 250 mm/s")  # type: ignore[arg-type]

            def moving() -> bool:
                with emulator.lock:
                    return emulator.robot.truth_velocity[0] > 0.2

            wait_until(moving, timeout=30)
        finally:
            mover.send_signal(signal.SIGKILL)  # dies while the robot drives: no CLOSE, and the pty stays open
            mover.wait(timeout=10)
        # The next program, at once: it must close the old session on a stopped SIP and synchronise.
        run = subprocess.run(
            [str(CONNECTOR), *serial],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
        with emulator.lock:
            counters = emulator.robot.counters
            velocity = emulator.robot.truth_velocity
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "simpleConnect: Connected to robot." in out, out
    assert counters.watchdog_trips >= 1  # the dead program's motion was stopped by the watchdog
    assert velocity == (0.0, 0.0)
