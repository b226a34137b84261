"""`pluto xmlserver`: the XSD, a server in the foreground that logs its connections and stops on a signal, and
one-line errors."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pluto.cli.main import main
from pluto.gateways.xmlserver.schema import SCHEMA_PATH
from tests.gateways.xmlserver.client import XmlClient, error_code


def test_xsd_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["xmlserver", "--xsd"]) == 0
    assert capsys.readouterr().out == SCHEMA_PATH.read_text(encoding="utf-8")


def test_serves_in_the_foreground_until_a_signal(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("letmein\n")
    token.chmod(0o600)
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "xmlserver", "--port", "0", "--token-file", str(token)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", banner)
        assert found, banner
        with XmlClient(("127.0.0.1", int(found.group(1)))) as client:
            assert client.start().get("auth") == "token"
            write = '<write name="drive/command"><ActuatorState/></write>'
            assert error_code(client.request(write)) == "unauthorized"
            assert client.request('<auth token="letmein"/>').tag == "authorized"
            assert client.request(write).tag == "written"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert re.search(r"client 127\.0\.0\.1:\d+ connected", err) and "disconnected" in err


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["xmlserver", "--port", "0", "--token-file", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert "token file" in err and "Traceback" not in err
    assert main(["xmlserver", "-p", "max_clients=0"]) == 1
    assert "max_clients" in capsys.readouterr().err
