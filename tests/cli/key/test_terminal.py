"""``pluto key drive`` in a real terminal: tmux runs it, the test types keys and reads the screen.

Skipped where tmux is not installed. The tmux server runs on a socket of the test's own and is killed at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from tests.cli.key.support import Commands, StandIn
from tests.helpers import wait_until

TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")


class Terminal:
    """A tmux session of its own, one window of 120 x 40."""

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        assert TMUX is not None
        self.base = [TMUX, "-S", str(socket)]
        self.env = env

    def tmux(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, env=self.env, timeout=10)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def start(self, command: list[str]) -> None:
        variables = [
            a
            for name in ("PLUTO_ROBOT", "PLUTO_RENDEZVOUS", "PLUTO_RUNTIME_DIR")
            for a in ("-e", f"{name}={self.env[name]}")
        ]
        self.tmux("new-session", "-d", "-s", "key", "-x", "120", "-y", "40", *variables, *command)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "key", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "key")

    def alive(self) -> bool:
        done = subprocess.run([*self.base, "has-session", "-t", "key"], capture_output=True, env=self.env, timeout=10)
        return done.returncode == 0

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, env=self.env, timeout=10)


@pytest.fixture
def terminal(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[Terminal]:
    env = {**os.environ, "TERM": "xterm-256color"}
    term = Terminal(tmp_path / "tmux.sock", env)
    try:
        yield term
    finally:
        term.close()


def test_pluto_key_drive_in_tmux(terminal: Terminal, make_bus: Callable[[], Bus]) -> None:
    """The page shows with its keys and the drive's status; ↑ writes a forward command, then a zero once no repeat
    follows; a heading typed key by key is sent; q quits."""
    module_bus = make_bus()
    StandIn(module_bus, "drive", {names.DRIVE_STATUS: msgs.FVectorState(data=[0.0, 0.0], element=[0])})
    commands = Commands(module_bus, names.DRIVE_COMMAND, msgs.ActuatorState)
    pluto = [sys.executable, "-m", "pluto", "key", "drive", "--release", "0.3"]
    terminal.start(pluto)

    wait_until(
        lambda: "status 0 (normal)" in terminal.screen(),
        timeout=30.0,
        interval=0.1,
        message="the drive page, connected",
    )
    screen = terminal.screen()
    assert "pluto key drive" in screen and "Space/Esc stop now" in screen and "forward (hold)" in screen

    terminal.keys("Up")
    wait_until(lambda: any(c.velocity[0] > 0 for c in commands.snapshot()), message="a forward command")
    first = next(i for i, c in enumerate(commands.snapshot()) if c.velocity[0] > 0)
    assert commands.snapshot()[first].cmd_flags == 10
    wait_until(
        lambda: any(c.velocity == [0.0, 0.0] for c in commands.snapshot()[first:]),
        message="the zero command after the key stopped",
    )
    stopped = len(commands.snapshot())

    terminal.keys("t")
    wait_until(lambda: "heading: θ rad" in terminal.screen(), interval=0.1, message="the heading question")
    terminal.keys("0", ".", "5", "Enter")
    wait_until(lambda: any(c.cmd_flags == 11 for c in commands.snapshot()[stopped:]), message="a heading command")
    heading = next(c for c in commands.snapshot()[stopped:] if c.cmd_flags == 11)
    assert heading.position[1] == 0.5

    terminal.keys("q")
    wait_until(lambda: not terminal.alive(), timeout=10.0, interval=0.1, message="pluto key quits on q")
    assert commands.snapshot()[-1].velocity == [0.0, 0.0]  # it stopped the robot on the way out
