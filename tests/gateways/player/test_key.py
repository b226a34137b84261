"""The AUTH key comes from a file or the environment, never from the command line or a parameter."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pluto.bus import Bus
from pluto.cli import player_cmd
from pluto.errors import ConfigError
from pluto.gateways.player.module import KEY_ENVIRONMENT, PlayerModule, PlayerParams, load_key
from pluto.player.client import PlayerClient, PlayerClientError
from tests.helpers import free_tcp_port


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    player_cmd.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["player", *argv])


def key_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "player.key"
    path.write_bytes(content)
    path.chmod(0o600)
    return path


def test_the_key_is_the_first_line_of_the_file_or_the_environment(tmp_path: Path) -> None:
    assert load_key(str(key_file(tmp_path, b"s3cret\n")), {}) == (b"s3cret", f"the file {tmp_path / 'player.key'}")
    assert load_key(str(key_file(tmp_path, b"s3cret\r\nsecond line\n")), {})[0] == b"s3cret"
    assert load_key("", {KEY_ENVIRONMENT: "fromenv"}) == (b"fromenv", f"the environment variable {KEY_ENVIRONMENT}")
    assert load_key(str(key_file(tmp_path, b"file")), {KEY_ENVIRONMENT: "env"})[0] == b"file"  # the file wins
    assert load_key("", {}) == (b"", "none")
    for content, reason in ((b"\n", "empty"), (b"x" * 33, "at most 32 bytes"), (b"a\0b", "NUL")):
        with pytest.raises(ConfigError, match=reason):
            load_key(str(key_file(tmp_path, content)), {})
    with pytest.raises(ConfigError, match="cannot read the key file"):
        load_key(str(tmp_path / "missing"), {})
    with pytest.raises(ConfigError, match="empty"):
        load_key("", {KEY_ENVIRONMENT: ""})


def test_the_key_is_not_a_parameter_nor_an_argument() -> None:
    with pytest.raises(ValueError, match=r"key_file.*PLUTO_PLAYER_KEY"):
        PlayerParams(key="s3cret")
    with pytest.raises(ConfigError, match="--key-file FILE, or set the environment variable PLUTO_PLAYER_KEY"):
        player_cmd.module_params(parse("--key", "s3cret"))
    with pytest.raises(ConfigError, match=re.escape("-p key=... would show the key")):
        player_cmd.module_params(parse("-p", 'key="s3cret"'))
    params = player_cmd.module_params(parse("--key-file", "player.key", "--port", "7000"))
    assert params == {"key_file": str(Path("player.key").absolute()), "port": 7000}


def test_the_module_asks_for_the_key_of_the_file_or_the_environment(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = key_file(tmp_path, b"fromfile\n")
    monkeypatch.setenv(KEY_ENVIRONMENT, "fromenv")
    for params, key in ((PlayerParams(port=0, key_file=str(path)), "fromfile"), (PlayerParams(port=0), "fromenv")):
        player = PlayerModule(bus, params)
        player.start()
        try:
            with PlayerClient(port=player.port) as client:
                client.authenticate(key)
                assert client.device_list()
        finally:
            player.stop()
    monkeypatch.delenv(KEY_ENVIRONMENT)
    with pytest.raises(ConfigError, match="cannot read the key file"):
        PlayerModule(bus, PlayerParams(port=0, key_file=str(tmp_path / "missing"))).start()


def test_pluto_player_takes_the_key_from_a_file_and_ps_does_not_show_it(tmp_path: Path) -> None:
    secret = "k" + os.urandom(8).hex()
    path = key_file(tmp_path, secret.encode() + b"\n")
    port = free_tcp_port()
    command = [sys.executable, "-m", "pluto", "player", "--port", str(port), "--key-file", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60.0  # a guard against a hang: Python and the bus start in a second or two
        while True:
            try:
                client = PlayerClient(port=port, timeout=10.0)
                client.connect()
                break
            except PlayerClientError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "pluto player did not listen"
                time.sleep(0.1)  # polling a port that is not open yet: nothing signals it
        # read once the server runs (right after exec, /proc may show an empty command line)
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert secret.encode() not in cmdline and str(path).encode() in cmdline
        with client:
            client.authenticate(secret)
            assert client.device_list()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    out, err = process.communicate()
    assert code == 0, err
    assert secret.encode() not in out + err  # not in the log either
