"""The recorder as a module: in a process of its own (``pluto start record``), stopped cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.cli.main import main
from pluto.record.logfile import LogFile
from pluto.record.module import RecordModule, RecordParams
from pluto.runtime import launcher
from tests.helpers import wait_until


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="time_base"):
        RecordParams(time_base="sometimes")
    with pytest.raises(ValueError, match="not a size"):
        RecordParams(split_size="big")
    assert RecordParams(split_size="500M").split_size == "500M"


def test_in_this_process(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "run.mcap"
    module = RecordModule(bus, RecordParams(output=str(path), names=["Heartbeat"]))
    module.start()
    beat = bus.create_publisher("Heartbeat", msgs.Heartbeat)
    power = bus.create_publisher("Base/Power", msgs.Power)
    try:
        for seq in range(1, 4):
            beat.write(msgs.Heartbeat(seq=seq))
            power.write(msgs.Power(voltage=12.0))
        wait_until(lambda: module.recorder.status().messages == 3, timeout=10)
    finally:
        module.stop()
    log = LogFile(path)
    assert log.closed and set(log.channels) == {"Heartbeat"}
    assert [m.message.seq for m in log.messages() if isinstance(m.message, msgs.Heartbeat)] == [1, 2, 3]


def test_as_a_daemon_stopped_by_pluto_stop(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "daemon.mcap"
    assert main(["start", "record", "-p", f'output="{path}"', "-p", 'names=["Heartbeat"]']) == 0
    beat = bus.create_publisher("Heartbeat", msgs.Heartbeat)
    try:
        seq = 0

        def recorded() -> bool:
            nonlocal seq
            seq += 1
            beat.write(msgs.Heartbeat(seq=seq))
            return path.exists() and LogFile(path).chunks >= 1

        wait_until(recorded, timeout=20, interval=0.05)
    finally:
        launcher.stop_daemon(bus.robot, "record")
    log = LogFile(path)
    assert log.closed and log.channels["Heartbeat"].count >= 1
