"""``pluto netmotion`` in the foreground: it serves, the example client works against it, and Ctrl-C stops it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.gateways.netmotion.udp import Client
from tests.helpers import wait_until

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "netmotion_client.py"
WAIT = 60.0
"""Wall seconds the server may take to answer, or to stop (only a hang takes that long; on a busy machine the first
IKP waits seconds for the server's solver)."""


def test_pluto_netmotion_serves_until_interrupted(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "netmotion.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pluto", "netmotion", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        with Client(("127.0.0.1", port), timeout=0.5) as client:

            def answers() -> bool:
                assert process.poll() is None, log.read_text()
                try:
                    return client.ask("PING") == "PONG\n"
                except TimeoutError:
                    return False

            wait_until(answers, timeout=WAIT, interval=0.1, message="pluto netmotion answers PING")
        example = subprocess.run(
            [sys.executable, str(EXAMPLE), "127.0.0.1", str(port), str(WAIT)],
            capture_output=True,
            text=True,
            timeout=3 * WAIT,
        )
        assert example.returncode == 0, example.stderr
        lines = example.stdout.splitlines()
        assert lines[0] == "PONG"
        assert any(line.strip().startswith("MOTMANRESP") and line.endswith("DEACTIVATE") for line in lines)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
