"""sicktoolbox (the LMS 2xx library under ROS ``sicklms``) initialises the emulated scanner, streams and stops it.

sicktoolbox is not packaged: with its ``lms2xx_simple_app`` example built outside this repository, point
``PLUTO_SICKTOOLBOX_APP`` at the program. Without it the test is skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pluto.hardware.sick.device import LmsDevice
from pluto.hardware.sick.emulate import LmsEmulator, SyntheticRoom

APP = os.environ.get("PLUTO_SICKTOOLBOX_APP", "")

pytestmark = pytest.mark.skipif(
    not (APP and Path(APP).is_file() and os.access(APP, os.X_OK)),
    reason="sicktoolbox's lms2xx_simple_app is not built (set PLUTO_SICKTOOLBOX_APP to the program)",
)


def test_sicktoolbox_initialises_streams_and_uninitialises_the_emulated_lms() -> None:
    device = LmsDevice(SyntheticRoom())
    with LmsEmulator(device, transport="pty") as emulator:
        # the app: Initialize at 38400 baud (set the rate, request mode, type, status, configuration), ten scans of
        # the continuous output, then Uninitialize (request mode, back to 9600 baud)
        run = subprocess.run(
            [APP, emulator.url, "38400"], capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL
        )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Sick Type: Sick LMS 200-30106" in out
    assert out.count("Num. Values: 181") == 10
    assert "Uninit. complete" in out and "Timeout" not in out
    assert device.baud == 9600 and device.mode == 0x25
