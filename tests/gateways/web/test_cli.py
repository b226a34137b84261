"""``pluto web`` as a user runs it, and the demo's hint on how to watch it live."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from pluto.cli.demo import watch_live_hint
from pluto.cli.main import main

WAIT = 60.0
"""Wall seconds the command may take to start or stop (only a hang takes that long)."""


def test_pluto_web_prints_the_address_serves_the_page_and_stops_on_ctrl_c() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "web", "--port", "0", "--map", "office", "--allow-host", "robot.local"],
        env={**os.environ, "PLUTO_WEB_TOKEN": "t0ken"},
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
        port = found.group(1).rsplit(":", 1)[1].strip("/")
        allowed = urllib.request.Request(found.group(1), headers={"Host": f"robot.local:{port}"})
        with urllib.request.urlopen(allowed, timeout=WAIT) as page:
            assert b"<canvas" in page.read()
        other = urllib.request.Request(found.group(1), headers={"Host": f"evil.example:{port}"})
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(other, timeout=WAIT)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=WAIT)  # read on: a full pipe would block the process
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--map", "no-such-world"], "no-such-world"),
        (["--token", "visible-in-ps"], "--token-file"),
        (["-p", "token=visible-in-ps"], "PLUTO_WEB_TOKEN"),
        (["--allow-host", "http://robot.local:8080"], "allowed host 'http://robot.local:8080' is not a host name"),
        (["-p", "auth_backoff=10", "-p", "auth_backoff_max=1"], "auth_backoff_max"),
    ],
)
def test_pluto_web_refuses_a_missing_map_a_token_on_the_command_line_and_bad_defences(
    args: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--port", "0", *args]) == 1
    err = capsys.readouterr().err
    assert "pluto web:" in err and reason in err


def test_the_demo_tells_how_to_watch_it_live() -> None:
    fast = watch_live_hint("pluto", "max")
    assert "`pluto web`" in fast and "http://127.0.0.1:8080/" in fast and "--rate 1" in fast
    other = watch_live_hint("robot-7", 1.0)
    assert "`pluto web --robot robot-7`" in other and "--rate 1" not in other
