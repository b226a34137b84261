"""The host's start-up sequence against the emulated scanner, in memory with a stepped clock (no threads)."""

from __future__ import annotations

import numpy as np
import pytest

from pluto.codec import NEED_DATA
from pluto.hardware.sick.client import BaudRate, Fault, LmsClient, LmsError, LmsSettings, Ready, Scan, scan_timing
from pluto.hardware.sick.device import LmsDevice
from pluto.hardware.sick.emulate import FixedScan, SyntheticRoom
from pluto.hardware.sick.telegram import UNITS_CM, UNITS_MM, LmsConfig, Mode

DT = 0.002


class Bench:
    """A client and a device joined by a perfect line, both stepped every DT s."""

    def __init__(self, device: LmsDevice, settings: LmsSettings) -> None:
        self.device, self.client = device, LmsClient(settings)
        self.now = 0.0
        self.events: list[object] = []
        self.client.start(self.now)

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now += DT
            self.device.receive_data(self.client.data_to_send(), self.now)
            self.device.step(self.now)
            self.client.receive_data(self.device.data_to_send(self.now), self.now)
            self.client.step(self.now)
            while (event := self.client.next_event()) is not NEED_DATA:
                self.events.append(event)

    def scans(self) -> list[Scan]:
        return [e for e in self.events if isinstance(e, Scan)]


def test_start_up_sets_variant_units_and_baud_then_streams_at_line_rate() -> None:
    device = LmsDevice(SyntheticRoom(half=4.0))
    bench = Bench(device, LmsSettings(baud=38400, resolution=50, units="cm"))
    bench.run(3.0)
    assert (device.baud, device.angle, device.resolution, device.config.units) == (38400, 180, 50, UNITS_CM)
    assert BaudRate(38400) in bench.events and any(isinstance(e, Ready) for e in bench.events)
    scans = bench.scans()
    gaps = np.diff([s.arrival for s in scans])
    # 732 bytes at 3840 bytes/s = 190.6 ms; the next scan completes on the mirror's 26.7 ms grid: 213 ms apart
    assert gaps == pytest.approx(8 / 37.5, abs=2 * DT)
    transmission, sweep = scan_timing(361, 50, 180, 38400)
    assert transmission == pytest.approx(732 * 10 / 38400)
    assert scans[-1].arrival - scans[-1].centre == pytest.approx(transmission + sweep / 2)
    ranges = scans[-1].ranges
    assert ranges.size == 361 and ranges[0] == pytest.approx(4.0) and ranges[90] == pytest.approx(5.66, abs=0.01)


def test_mm_mode_is_written_to_the_configuration_and_used() -> None:
    device = LmsDevice(FixedScan([1.2345] * 181))
    bench = Bench(device, LmsSettings(baud=500000, resolution=100, units="mm", range_m=8))
    bench.run(1.0)
    assert device.config.units == UNITS_MM and device.baud == 500000
    scans = bench.scans()
    assert np.diff([s.arrival for s in scans]) == pytest.approx(1 / 75, abs=DT)  # 75 scans/s at 1°
    assert scans[-1].ranges.size == 181 and scans[-1].ranges[0] == pytest.approx(1.234, abs=0.0015)


def test_an_unchanged_configuration_is_not_rewritten() -> None:
    device = LmsDevice(SyntheticRoom())
    device.config = LmsConfig(units=UNITS_CM)
    bench = Bench(device, LmsSettings(baud=9600, resolution=100))
    bench.run(1.0)
    assert device.requests == 5  # status, stop, variant, configuration read, continuous: no password, no write
    assert bench.scans()


def test_a_scanner_at_another_rate_is_found_by_probing() -> None:
    device = LmsDevice(SyntheticRoom(), baud=19200)
    bench = Bench(device, LmsSettings(baud=38400, resolution=100))
    bench.client.baud = 9600
    bench.run(2.0)
    assert bench.client.streaming and bench.scans()


def test_a_fatal_error_is_reported_the_scanner_reset_and_data_comes_back() -> None:
    device = LmsDevice(SyntheticRoom(), reboot_time=2.0)
    bench = Bench(device, LmsSettings(baud=38400, resolution=100))
    bench.run(1.0)
    before = len(bench.scans())
    device.inject_fault()
    bench.run(1.0)
    assert [e for e in bench.events if isinstance(e, Fault)]
    assert device.rebooting and not device.failed  # the host reset it
    assert len(bench.scans()) <= before + 1  # the one on the line at the fault; none of the failed scanner
    bench.run(4.0)
    assert bench.client.streaming and len(bench.scans()) > before and bench.client.fault is None
    assert bench.client.faults == 1


def test_the_first_telegram_after_a_baud_change_waits_a_quarter_second() -> None:
    device = LmsDevice(SyntheticRoom())
    client = LmsClient(LmsSettings(baud=38400, resolution=100))
    now, switched, sent_after = 0.0, None, None
    client.start(now)
    while now < 3.0 and sent_after is None:
        now += DT
        out = client.data_to_send()
        if switched is not None and out:
            sent_after = now - switched
        device.receive_data(out, now)
        device.step(now)
        client.receive_data(device.data_to_send(now), now)
        client.step(now)
        while (event := client.next_event()) is not NEED_DATA:
            if isinstance(event, BaudRate):
                switched = now
    # on the bench's stepped clock: the continuous-output request leaves 250 ms after the switch, not at once
    assert sent_after is not None and sent_after == pytest.approx(0.25, abs=2 * DT)


def test_stopping_puts_the_scanner_back_at_its_start_rate() -> None:
    device = LmsDevice(SyntheticRoom())
    bench = Bench(device, LmsSettings(baud=38400, resolution=100))
    bench.run(2.0)
    assert device.streaming and device.baud == 38400
    bench.client.stop()
    bench.run(0.5)
    assert device.mode == Mode.REQUEST and device.baud == 9600
    assert bench.client.baud == 9600  # the next start probes 9600 first


def test_a_configuration_write_gets_fifteen_seconds() -> None:
    # a real scanner writes its EEPROM before it answers a 0x77; sicktoolbox allows 15 s
    assert LmsSettings().config_timeout == 15.0


def test_impossible_settings_are_refused() -> None:
    with pytest.raises(LmsError):
        LmsSettings(units="cm", range_m=8)
    with pytest.raises(LmsError):
        LmsSettings(baud=115200)
    with pytest.raises(LmsError):
        LmsSettings(resolution=25, angle=180)
