"""The NMEA driver and the GPS module against the emulated receiver: TCP, pty, replay, outages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.gps.driver import GpsError, NmeaDriver
from pluto.hardware.gps.emulate import CircleTrack, DeviceEmulator, NmeaReceiver, NmeaReplay
from pluto.hardware.gps.grid import LocalGrid
from pluto.hardware.gps.module import SimGpsModule
from pluto.hardware.gps.nmea_module import NmeaGps, NmeaGpsParams
from pluto.runtime.registry import load_driver_class
from tests.helpers import free_tcp_port, wait_until
from tests.scenarios.stack import Collector

GUARD = 5.0
ORIGIN = (59.3498, 18.0707)
FAST = 0.05  # s between epochs: the tests do not wait a second per fix


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_fixes_on_the_grid_from_the_emulated_receiver(transport: str) -> None:
    grid = LocalGrid(*ORIGIN)
    track = CircleTrack(grid, radius=20.0, period=10.0)
    with (
        DeviceEmulator(NmeaReceiver(track, period=FAST), transport=transport) as gps,  # type: ignore[arg-type]
        NmeaDriver(gps.url, grid) as driver,
    ):
        fixes = [driver.wait_for_fix(GUARD) for _ in range(5)]
        stats = driver.statistics()
    assert all(f is not None for f in fixes)
    for f in fixes:
        assert f is not None and f.quality == 2 and f.satellites == 9 and f.hdop == 0.8
        assert math.hypot(f.x, f.y) == pytest.approx(20.0, abs=0.05)  # on the circle, to 1e-5 minute (2 cm)
    assert stats.bad_checksum == 0 and stats.messages >= 5 + 4 * 2  # GGA, GSA, RMC; ends on the fifth GGA


def test_no_fix_comes_through_as_quality_zero() -> None:
    grid = LocalGrid(*ORIGIN)
    with (
        DeviceEmulator(NmeaReceiver(CircleTrack(grid, period=10.0, outage=(0.0, 10.0)), period=FAST)) as gps,
        NmeaDriver(gps.url, grid) as driver,
    ):
        fix = driver.wait_for_fix(GUARD)
    assert fix is not None and fix.quality == 0 and math.isnan(fix.x)


def test_replay_of_a_file(tmp_path: Path) -> None:
    log = tmp_path / "drive.nmea"
    log.write_bytes(
        b"$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\r\n"
        b"$GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1*39\r\n"
        b"$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A\r\n"
        b"$GPGGA,,,,,,0,00,99.99,,,,,,*48\r\n"
    )
    replay = NmeaReplay(log, period=FAST)
    assert len(replay.epochs) == 2
    grid = LocalGrid(48.1173, 11.5166667)
    with DeviceEmulator(replay) as gps, NmeaDriver(gps.url, grid) as driver:
        fixes = [driver.wait_for_fix(GUARD) for _ in range(4)]
    qualities = [f.quality for f in fixes if f is not None]
    assert sorted(set(qualities)) == [0, 1]
    first = next(f for f in fixes if f is not None and f.quality == 1)
    assert (first.x, first.y) == pytest.approx((0.0, 0.0), abs=0.05) and first.satellites == 8


def test_a_port_that_does_not_open() -> None:
    driver = NmeaDriver(f"socket://127.0.0.1:{free_tcp_port()}", LocalGrid(*ORIGIN), reconnect=False)
    with pytest.raises(GpsError, match="cannot open"):
        driver.connect()
    driver.close()


def test_drivers_are_installed() -> None:
    assert load_driver_class("gps", "nmea") is NmeaGps
    assert load_driver_class("gps", "sim") is SimGpsModule


def test_module_writes_fixes_and_status_through_unplug_and_replug(bus: Bus) -> None:
    grid = LocalGrid(*ORIGIN)
    port = free_tcp_port()
    gps = DeviceEmulator(NmeaReceiver(CircleTrack(grid, period=10.0), period=FAST), port=port).start()
    module = NmeaGps(bus, NmeaGpsParams(port=gps.url, link_timeout=0.3, origin_lat=ORIGIN[0], origin_lon=ORIGIN[1]))
    fixes = Collector(bus, "GPS/State", msgs.GpsFix)
    status = Collector(bus, "gps/status", msgs.FVectorState)
    try:
        module.start()
        fix = fixes.wait_for(lambda f: True)
        assert fix.quality == 2 and math.hypot(fix.x, fix.y) == pytest.approx(20.0, abs=0.05)
        up = status.wait_for(lambda s: s.element[0] == 1)
        assert up.element == [1, 0, 0]
        gps.stop()  # unplugged
        down = status.wait_for(lambda s: s.element[0] == 0 and s.stamp > up.stamp)
        n = len(fixes.snapshot())
        status.wait_for(lambda s: s.stamp > down.stamp + 0.2)
        assert len(fixes.snapshot()) == n  # nothing stale written while the link is down
        gps.start()  # plugged back in
        back = status.wait_for(lambda s: s.element[0] == 1 and s.stamp > down.stamp)
        assert back.element[1] == 1
        fixes.wait_for(lambda f: f.stamp > back.stamp - 0.1)
        wait_until(lambda: module.step_errors == 0, timeout=GUARD)
    finally:
        module.stop()
        gps.stop()
        fixes.close()
        status.close()
