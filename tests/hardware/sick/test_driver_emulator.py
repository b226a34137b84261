"""The LMS driver against the emulated scanner over real transports: TCP (socket://) and a pseudo-terminal."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

from pluto.hardware.sick.device import LmsDevice
from pluto.hardware.sick.driver import LmsDriver, LmsSettings
from pluto.hardware.sick.emulate import LinkNoise, LmsEmulator, SyntheticRoom
from tests.helpers import free_tcp_port, wait_until

FAST = LmsSettings(baud=500000, resolution=100, probe_timeout=0.1, reply_timeout=0.3, pause=0.1)


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_scans_flow_over_the_transport(transport: Literal["tcp", "pty"]) -> None:
    with LmsEmulator(LmsDevice(SyntheticRoom(half=3.0)), transport=transport) as emulator:
        driver = LmsDriver(emulator.url, FAST)
        with driver:
            assert driver.wait_streaming(5.0)
            scan = driver.wait_for_scan(2.0)
            assert scan is not None and scan.ranges.size == 181
            assert scan.ranges[0] == pytest.approx(3.0) and scan.ranges[45] == pytest.approx(4.24, abs=0.01)
            assert emulator.device.baud == 500000 and driver.statistics()["bad_crc"] == 0


def test_corrupted_bytes_cost_only_the_telegrams_they_hit() -> None:
    noise = LinkNoise(0.0, 0.0005, np.random.default_rng(3))
    with LmsEmulator(LmsDevice(SyntheticRoom()), link_noise=noise) as emulator:
        driver = LmsDriver(emulator.url, FAST)
        with driver:
            assert driver.wait_streaming(10.0)
            wait_until(lambda: driver.statistics()["scans"] >= 40, timeout=10.0)
            stats = driver.statistics()
    assert noise.corrupted > 0 and stats["bad_crc"] + stats["malformed"] > 0
    assert all(s.ranges[0] == pytest.approx(4.0) for s in driver.take_scans())  # no corrupted scan handed out


def test_unplugged_and_replugged_the_driver_reconnects() -> None:
    port = free_tcp_port()
    device = LmsDevice(SyntheticRoom())
    emulator = LmsEmulator(device, port=port).start()
    driver = LmsDriver(emulator.url, FAST).start()
    try:
        assert driver.wait_streaming(5.0)
        emulator.stop()  # unplugged
        wait_until(lambda: not driver.port_open, timeout=5.0)
        assert driver.fault is None  # no port: nothing to report as scanner data
        emulator.start()  # replugged: the scanner kept its state (still streaming at 500 k)
        assert driver.wait_streaming(5.0)
        seen = driver.statistics()["scans"]
        wait_until(lambda: driver.statistics()["scans"] > seen + 5, timeout=5.0)
        assert driver.reconnects == 1
    finally:
        driver.close()
        emulator.stop()
