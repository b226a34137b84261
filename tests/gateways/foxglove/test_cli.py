"""``pluto foxglove`` in the foreground: it serves the walls of the map it is given to a protocol client, Ctrl-C
stops it, a bad map is one clear line, and ``--layout`` prints the shipped layout."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pluto.cli.main import main
from pluto.gateways.foxglove.layout import layout_json
from pluto.gateways.foxglove.module import LAYOUT_PATH
from pluto.sim.world import load_world
from tests.gateways.foxglove.client import FoxgloveClient

WAIT = 60.0
"""Wall seconds the server may take to start or stop (only a hang takes that long)."""


def test_pluto_foxglove_serves_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "foxglove.log"
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "pluto", "foxglove", "--port", "0", "--map", "campus", "-p", "map_period=0.2"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the first line tells the address (blocks until the server listens)
        found = re.search(r"listening on ws://127\.0\.0\.1:(\d+)", line)
        assert found, (line, log.read_text())
        with FoxgloveClient(f"ws://127.0.0.1:{found.group(1)}") as client:
            client.wait_for_channels(["/map", "/scan", "/tf"], WAIT)
            client.subscribe("/map")
            received = client.receive(WAIT)
        assert received is not None and received.topic == "/map"
        world = load_world("campus")
        assert len(received.message.entities[0].cubes) == len(world.segments()) + len(world.circles)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0, log.read_text()
        assert f"drawing the walls of campus ({len(world.segments())} segments)" in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_bad_map_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["foxglove", "--port", "0", "--map", "no-such-world"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pluto foxglove:") and "no-such-world" in err


def test_the_shipped_layout_is_the_one_built_and_names_the_topics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["foxglove", "--layout"]) == 0
    printed = capsys.readouterr().out
    assert printed == LAYOUT_PATH.read_text(encoding="utf-8") == layout_json()
    layout = json.loads(printed)
    text = json.dumps(layout)
    for topic in ("/scan", "/map", "/pose", "/path", "/log", "Base/Drive/State.v"):
        assert f'"{topic}' in text, topic
    assert '"fixedFrame": "map"' in text and '"panelType": "ThreeDee"' in text
