"""``pluto player``: the Player server in the foreground, and the ``player`` module under the launcher."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pluto.bus import Bus
from pluto.cli import player_cmd
from pluto.errors import ConfigError
from pluto.player.client import PlayerClient, PlayerClientError, RequestRefused
from pluto.runtime import launcher
from tests.helpers import free_tcp_port


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    player_cmd.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["player", *argv])


def test_options_become_module_parameters() -> None:
    assert player_cmd.module_params(parse()) == {}
    argv = ("--port", "7000", "--key-file", "player.key", "--use-sim-time", "-p", "protect=true")
    params = player_cmd.module_params(parse(*argv))
    key_file = str(Path("player.key").absolute())
    assert params == {"port": 7000, "key_file": key_file, "use_sim_time": True, "protect": True}
    with pytest.raises(ConfigError, match="PLUTO_PLAYER_KEY"):  # a secret on the command line shows in `ps`
        player_cmd.module_params(parse("--key", "k"))
    assert player_cmd.module_params(parse("--host", "0.0.0.0"))["host"] == "0.0.0.0"
    with pytest.raises(ConfigError, match="--port"):
        player_cmd.module_params(parse("--port", "70000"))


def connect(port: int, process: subprocess.Popen[str] | None = None, timeout: float = 20.0) -> PlayerClient:
    """A client connected to the server on ``port``, once it listens."""
    deadline = time.monotonic() + timeout
    while True:
        client = PlayerClient(port=port, timeout=5.0)
        try:
            client.connect()
            return client
        except PlayerClientError:
            if process is not None and process.poll() is not None:
                raise AssertionError(f"pluto player exited: {process.communicate()}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # polling a port that is not open yet: nothing signals it


def test_pluto_player_serves_in_the_foreground_until_interrupted() -> None:
    port = free_tcp_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "player", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        with connect(port, process) as client:
            assert client.banner == "Player v.1.5"
            assert client.device_list() == [(4, 0), (30, 0), (6, 0), (5, 0)]
            assert client.driver_info("position") == "pluto-base"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    _, err = process.communicate()
    assert code == 0, err
    assert f"listening on 127.0.0.1:{port}" in err and "Traceback" not in err


def test_player_is_a_module_of_the_launcher(bus: Bus) -> None:
    port = free_tcp_port()
    pid = launcher.start_daemon(bus, "player", params={"port": port}, timeout=20)
    try:
        assert "player" in bus.live_modules()
        with connect(port) as client:
            assert client.device_list() == [(4, 0), (30, 0), (6, 0), (5, 0)]
            with pytest.raises(RequestRefused, match="granted 'e'"):
                client.subscribe("position")  # no base is running
    finally:
        launcher.terminate(pid, timeout=5)
