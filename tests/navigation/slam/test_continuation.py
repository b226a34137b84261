"""A restarted slam module starts its thread again if it was running, and says (log and status) that the map the
crashed instance was building is lost."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pluto import names
from pluto.bus import Bus
from pluto.navigation.slam.module import SlamModule, SlamModuleParams
from pluto.runtime import persist
from tests.helpers import wait_until
from tests.navigation.slam.test_module import feed


def killed(bus: Bus, params: SlamModuleParams) -> bytes:
    """Run a slam module with its thread, build a map of 5 scans and save a map; return the state file as it was
    before the module stopped (as a killed process leaves it: a clean stop would note the thread stopped)."""
    module = SlamModule(bus, params)
    module.start()
    try:
        module.start_activity()
        feed(module, [(3.0 + 0.1 * k, 2.0, 0.2) for k in range(5)])
        assert module.save(1.5, setter=2)
        module.continuation.save(module.progress, 2.0)  # what the step saves as it goes
        return persist.state_path(bus.robot, "slam").read_bytes()
    finally:
        module.stop()


def test_a_restarted_module_starts_its_thread_again_and_says_its_map_is_lost(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    params = SlamModuleParams(map_file=str(tmp_path / "slam.xml"), use_sim_time=False)
    state = killed(bus, params)
    persist.state_path(bus.robot, "slam").write_bytes(state)
    monkeypatch.setenv(persist.RESUME_ENV, "1")  # what the supervisor sets in a restarted process
    status = bus.create_reader(names.SLAM_STATUS)
    module = SlamModule(bus, params)
    with caplog.at_level(logging.WARNING, logger="pluto.slam"):
        module.start()
    try:
        assert module.active  # autostart is false: started again because it was running
        assert "is lost" in caplog.text and "walls from 5 scans" in caplog.text
        assert "its thread was running: started again" in caplog.text
        wait_until(lambda: (v := status.read()) is not None and v.element[0] == 1, message="the running status")
        value = status.read()
        assert value is not None and value.element[5] == -1  # the map is lost
        assert value.element[4] == 1  # the saves so far are kept
    finally:
        module.stop()
        bus.release(status)


def test_a_restart_without_a_state_says_so_and_waits_to_be_started(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    module = SlamModule(bus, SlamModuleParams(map_file=str(tmp_path / "slam.xml"), use_sim_time=False))
    with caplog.at_level(logging.WARNING, logger="pluto.slam"):
        module.start()
    try:
        assert not module.active
        assert "restarted without a saved state" in caplog.text and module.map_lost
    finally:
        module.stop()


def test_a_first_start_does_not_start_the_thread(bus: Bus, tmp_path: Path) -> None:
    params = SlamModuleParams(map_file=str(tmp_path / "slam.xml"), use_sim_time=False)
    persist.state_path(bus.robot, "slam").write_bytes(killed(bus, params))
    module = SlamModule(bus, params)  # no PLUTO_RESUME: a fresh start
    module.start()
    try:
        assert not module.active and not module.map_lost
    finally:
        module.stop()
