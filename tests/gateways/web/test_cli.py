"""``pluto web`` as a user runs it, and the demo's hint on how to watch it live."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request

from pluto.cli.demo import watch_live_hint

WAIT = 60.0
"""Wall seconds the command may take to start or stop (only a hang takes that long)."""


def test_pluto_web_prints_the_address_serves_the_page_and_stops_on_ctrl_c() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "web", "--port", "0", "--map", "office", "--token", "t0ken"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"open (http://127\.0\.0\.1:\d+/)\?token=t0ken ", line)
        assert found, f"no address in {line!r}"
        with urllib.request.urlopen(found.group(1), timeout=WAIT) as page:
            assert b"<canvas" in page.read()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_pluto_web_refuses_a_map_that_does_not_exist() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pluto", "web", "--port", "0", "--map", "no-such-world"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 1
    assert "pluto web:" in done.stderr and "no-such-world" in done.stderr


def test_the_demo_tells_how_to_watch_it_live() -> None:
    fast = watch_live_hint("pluto", "max")
    assert "`pluto web`" in fast and "http://127.0.0.1:8080/" in fast and "--rate 1" in fast
    other = watch_live_hint("robot-7", 1.0)
    assert "`pluto web --robot robot-7`" in other and "--rate 1" not in other
