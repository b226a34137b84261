"""libplayerc 1.5 (the C client library of Player 1.5) asks the Player server for its device list, fifteen times.

libplayerc 1.5 sends the whole 388-byte device-list struct with only its subtype filled in; the count is whatever
its stack held, so a server that read it refused about one request in three. The program run here is libplayerc's
own test client (``client_libs/libplayerc/test/test`` of Player's release-1-5), built outside this repository:
point ``PLUTO_LIBPLAYERC_TEST`` at it. Without it the test is skipped.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest

from pluto.gateways.player.server import PlayerServer
from tests.gateways.player.test_server import FakeBackend

PROGRAM = os.environ.get("PLUTO_LIBPLAYERC_TEST", "")

pytestmark = pytest.mark.skipif(
    not (PROGRAM and Path(PROGRAM).is_file() and os.access(PROGRAM, os.X_OK)),
    reason="libplayerc 1.5's test client is not built (set PLUTO_LIBPLAYERC_TEST to the program)",
)


def devlist_line(port: int, timeout: float = 30.0) -> str:
    """Run the test client until it has said how its device-list request went; that line."""
    process = subprocess.Popen(
        [PROGRAM, "-h", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="libplayerc-output").start()
    try:
        while (line := lines.get(timeout=timeout)) is not None:
            if "querying interface list" in line:
                return line
        raise AssertionError("the test client ended without querying the interface list")
    finally:
        process.kill()  # the device tests that follow are not this test's business
        process.wait(timeout=10)


def test_libplayerc_gets_the_device_list_every_time() -> None:
    with PlayerServer(FakeBackend(), port=0) as server:
        results = [devlist_line(server.port) for _ in range(15)]
        nacks = server.statistics().nacks
    assert all(line.rstrip().endswith("pass") for line in results), results
    assert nacks == 0
