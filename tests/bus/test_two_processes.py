"""Two processes on one bus: this test and ``peer_process.py``, started with the same environment."""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from tests.helpers import wait_until

PEER_SCRIPT = Path(__file__).with_name("peer_process.py")
STARTUP_TIMEOUT = 20.0


class Peer:
    """A running ``peer_process.py``: its process, its stdout lines as they come, its stderr in a file."""

    def __init__(self, proc: subprocess.Popen[str], stderr_path: Path) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_line(self, expected: str, timeout: float = STARTUP_TIMEOUT) -> None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the peer printed nothing in {timeout} s; stderr:\n{self.stderr()}") from None
        if line != expected:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"the peer printed {line!r}, not {expected!r}; stderr:\n{self.stderr()}")

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def start_peer(tmp_path: Path) -> Iterator[Callable[[], Peer]]:
    """Start ``peer_process.py`` (killed at teardown whatever happens)."""
    peers: list[Peer] = []

    def start() -> Peer:
        stderr_path = tmp_path / f"peer-{len(peers)}.stderr"
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(PEER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        peer = Peer(proc, stderr_path)
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.stop()


@pytest.mark.parametrize("first", ["test", "peer"], ids=["test-owns-rendezvous", "peer-owns-rendezvous"])
def test_state_service_command_and_liveliness_across_processes(
    start_peer: Callable[[], Peer], make_bus: Callable[..., Bus], first: str
) -> None:
    bus = make_bus() if first == "test" else None
    peer = start_peer()
    peer.wait_for_line("ready")
    if bus is None:
        bus = make_bus()  # a newcomer: the peer owns the rendezvous
        assert "peer" in bus.live_modules()  # seen at once
    else:
        bus.wait_for_module("peer", timeout=5.0)  # the token is the peer's last declaration

    # Late joiner: the peer wrote its state before this reader existed.
    state = bus.create_reader("Base/Drive/State")
    assert state.read() == msgs.Odometry(x=1.5)

    assert bus.call("peer/add", [1, 2, 3.5], timeout=5.0) == 6.5

    command = bus.create_publisher("Base/Drive/Command")
    command.write(msgs.ActuatorState(velocity=[0.7, 0.1]))
    assert state.wait_for_update(timeout=5.0) == msgs.Odometry(x=1.5, v=0.7)
    command.write(msgs.ActuatorState(velocity=[-0.2, 0.0]))
    assert state.wait_for_update(timeout=5.0) == msgs.Odometry(x=1.5, v=-0.2)

    peer.proc.terminate()
    peer.proc.wait(5)
    wait_until(
        lambda: "peer" not in bus.live_modules(timeout=0.5),
        timeout=2.0,
        message="the module was still live 2 s after its process ended",
    )


def test_peer_that_quits_closes_its_bus_and_exits(start_peer: Callable[[], Peer], bus: Bus) -> None:
    peer = start_peer()
    peer.wait_for_line("ready")
    bus.wait_for_module("peer", timeout=5.0)
    peer.send("quit")
    assert peer.proc.wait(10) == 0, peer.stderr()
    bus.wait_for_module("peer", timeout=2.0, alive=False)
    with pytest.raises(BusTimeout):
        bus.call("peer/add", [1], timeout=0.3)


def test_killed_peer_disappears(start_peer: Callable[[], Peer], bus: Bus) -> None:
    seen: queue.Queue[tuple[str, bool]] = queue.Queue()
    bus.watch_modules(lambda name, alive: seen.put((name, alive)))
    peer = start_peer()
    peer.wait_for_line("ready")
    assert seen.get(timeout=5.0) == ("peer", True)
    peer.proc.kill()
    peer.proc.wait(5)
    assert seen.get(timeout=2.0) == ("peer", False)


CRASHING_MODULE = """
from pluto.bus import Bus

bus = Bus()  # no `with`, no close(): the module fails before it could clean up
bus.create_reader("Base/Drive/State")
raise RuntimeError("module crashed")
"""


def test_process_that_crashes_with_its_bus_open_still_exits() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MODULE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _, err = proc.communicate(timeout=4.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the process hung at exit after its traceback")
    assert proc.returncode == 1
    assert "module crashed" in err


@pytest.mark.parametrize("first", ["test", "peer"], ids=["test-owns-rendezvous", "peer-owns-rendezvous"])
def test_links_closed_by_a_frozen_peer_are_opened_again(
    start_peer: Callable[[], Peer], make_bus: Callable[..., Bus], monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """A process held still past the lease (SIGSTOP: as a starved process that reads its links late) has its links
    closed; once it runs again they are opened again, and values, services and its module token flow both ways."""
    monkeypatch.setenv("PLUTO_LEASE", "1")  # both processes
    bus = make_bus() if first == "test" else None
    peer = start_peer()
    peer.wait_for_line("ready")
    if bus is None:
        bus = make_bus()
    bus.wait_for_module("peer", timeout=5.0)
    state = bus.create_reader("Base/Drive/State")
    assert state.read() == msgs.Odometry(x=1.5)
    command = bus.create_publisher("Base/Drive/Command")
    command.write(msgs.ActuatorState(velocity=[0.3, 0.0]))
    assert state.wait_for_update(timeout=5.0).v == 0.3

    peer.proc.send_signal(signal.SIGSTOP)
    try:
        bus.wait_for_module("peer", timeout=10.0, alive=False)  # the lease ran out: the links are closed
    finally:
        peer.proc.send_signal(signal.SIGCONT)
    bus.wait_for_module("peer", timeout=20.0)  # linked again: its token is declared again

    def echoed(velocity: float) -> bool:
        command.write(msgs.ActuatorState(velocity=[velocity, 0.0]))
        with contextlib.suppress(BusTimeout):
            return state.wait_for_update(timeout=0.5).v == velocity
        return False

    wait_until(lambda: echoed(-0.4), timeout=20.0, message="no command echoed after the links came back")
    assert bus.call("peer/add", [1, 2], timeout=5.0) == 3
    assert bus.create_reader("Base/Drive/State").read() == msgs.Odometry(x=1.5, v=-0.4)  # a late joiner too
    assert peer.proc.poll() is None, peer.stderr()
