"""Every server and long-running command ends cleanly on Ctrl-C (SIGINT): exit status 0, no traceback, also while
it is still starting. How long each takes on a busy machine is measured by bench/ctrl_c.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto.bus import Bus
from pluto.runtime.module import STARTING_KEY
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]

MODULE_UP = r"started \(pid \d+\)"
EMULATOR_UP = r"Ctrl-C stops it\."

COMMANDS: dict[str, tuple[list[str], str]] = {
    "run": (["run", "heartbeat"], MODULE_UP),
    "up": (["up", "heartbeat"], r"profile heartbeat is up"),
    "up --one-process": (["up", "heartbeat", "--one-process"], r"profile heartbeat is up"),
    "xmlserver": (["xmlserver", "--port", "0"], MODULE_UP),
    "player": (["player", "--port", "0"], MODULE_UP),
    "netmotion": (["netmotion", "--port", "0"], r"netmotion started \(pid"),
    "web": (["web", "--port", "0"], MODULE_UP),
    "foxglove": (["foxglove", "--port", "0"], MODULE_UP),
    "sick-sim": (["sick-sim", "--port", "0"], EMULATOR_UP),
    "p2os-sim": (["p2os-sim", "--port", "0"], EMULATOR_UP),
    "gps-sim": (["gps-sim", "--port", "0"], EMULATOR_UP),
    "dmu-sim": (["dmu-sim", "--port", "0"], EMULATOR_UP),
    "record": (["record", "-o", "{tmp}/run.mcap"], ""),
}
"""Each command: its arguments, and what it writes (stdout and stderr, with -v) once it serves ("": the recording's
file is there)."""


class Running:
    """A ``pluto`` command in a process of its own, its output (stdout and stderr together) collected by a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pluto", "-v", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        )
        self.output = ""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.output += line
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60.0) -> None:
        """Wait until the output matches ``pattern`` (fails if the process ends first)."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: re.search(pattern, self.output) is not None or not self._reader.is_alive(), timeout
            )
        assert found and re.search(pattern, self.output), f"no {pattern!r} in:\n{self.output}"

    def interrupt(self) -> int:
        """Ctrl-C; the exit status once the process ended."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=30)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def running(bus_env: dict[str, str]) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for command in started:
        command.kill()


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_a_server_ends_cleanly_on_ctrl_c(
    kind: str, running: list[Running], bus_env: dict[str, str], tmp_path: Path
) -> None:
    args, ready = COMMANDS[kind]
    command = Running([arg.format(tmp=tmp_path) for arg in args], bus_env)
    running.append(command)
    if ready:
        command.wait_for(ready)
    else:
        wait_until(lambda: (tmp_path / "run.mcap").exists(), timeout=60.0, message=command.output)
    assert command.interrupt() == 0, command.output
    assert "Traceback" not in command.output


GATED = "tests.runtime.sample_modules:GatedProvider"


def test_run_ends_on_ctrl_c_while_the_module_configures(
    running: list[Running], bus_env: dict[str, str], bus: Bus, tmp_path: Path
) -> None:
    command = Running(["run", GATED, "--gate", str(tmp_path / "never")], bus_env)
    running.append(command)
    bus.wait_for_token(f"{STARTING_KEY}/gated-provider", timeout=60.0)
    assert command.interrupt() == 0, command.output
    assert "Traceback" not in command.output


def test_up_ends_on_ctrl_c_while_a_module_is_still_starting(
    running: list[Running], bus_env: dict[str, str], bus: Bus, tmp_path: Path
) -> None:
    profile = tmp_path / "gated.toml"
    profile.write_text(f'[modules.gated-provider]\nmodule = "{GATED}"\ngate = "{tmp_path / "never"}"\n')
    command = Running(["up", str(profile), "--timeout", "10"], bus_env)
    running.append(command)
    bus.wait_for_token(f"{STARTING_KEY}/gated-provider", timeout=60.0)
    command.wait_for("gated-provider is still starting after")  # past its 10 s, waited for since it says so
    module_pid = int((Path(bus_env["PLUTO_RUNTIME_DIR"]) / bus.robot / "gated-provider.pid").read_text())
    assert command.interrupt() == 0, command.output
    assert "Traceback" not in command.output
    assert "profile gated is down" in command.output
    with pytest.raises(ProcessLookupError):
        os.kill(module_pid, 0)  # its module was stopped too
