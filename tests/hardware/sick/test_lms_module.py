"""The LMS laser module on the bus against the emulated scanner: the three Sick interfaces, faults, sick/status."""

from __future__ import annotations

import math

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.hardware.sick.device import LmsDevice
from pluto.hardware.sick.emulate import LmsEmulator, SyntheticRoom
from pluto.hardware.sick.lms_module import LmsSick, LmsSickParams
from tests.helpers import wait_until

GUARD = 10.0


def test_module_writes_the_sick_interfaces_and_minus_one_while_the_scanner_reboots(bus: Bus) -> None:
    device = LmsDevice(SyntheticRoom(half=2.5), reboot_time=1.0)
    with LmsEmulator(device) as emulator:
        sick = LmsSick(bus, LmsSickParams(port=emulator.url, baud=500000, resolution=0.5, link_timeout=0.5))
        scan = bus.create_reader(names.SICK_SCAN)
        scan_mm = bus.create_reader(names.SICK_SCAN_MM)
        timing = bus.create_reader(names.SICK_TIMING)
        status = bus.create_reader("sick/status", msgs.FVectorState)
        try:
            sick.start()
            wait_until(lambda: (s := scan_mm.read()) is not None and s.count == 361, timeout=GUARD)
            mm, old, t = scan_mm.read(), scan.read(), timing.read()
            assert mm is not None and old is not None and t is not None
            assert len(mm.ranges) == 361 and mm.ranges[0] == pytest.approx(2.5)
            assert mm.angles[0] == pytest.approx(-math.pi / 2) and mm.angles[-1] == pytest.approx(math.pi / 2)
            assert len(old.ranges) == 181 and old.ranges == mm.ranges[::2]
            # centre = arrival - 361-point telegram at 500 k (14.6 ms) - half a 0.5° sweep (10 ms)
            assert mm.arrival - mm.stamp == pytest.approx(732 * 10 / 500000 + 0.01, abs=1e-6)
            assert t.stamp <= mm.arrival and t.count in (0, 361)
            up = status.read()
            assert up is not None and up.element[0] == 1
            emulator.inject_fault()
            wait_until(lambda: (s := scan_mm.read()) is not None and s.ranges[0] == -1.0, timeout=GUARD)
            failed = scan_mm.read()
            assert failed is not None and set(failed.ranges) == {-1.0} and failed.count == 0
            wait_until(lambda: (s := scan_mm.read()) is not None and s.count == 361, timeout=GUARD)
            wait_until(lambda: (s := status.read()) is not None and s.element[0] == 1 and s.element[3] == 1)
            assert sick.step_errors == 0
        finally:
            sick.stop()
