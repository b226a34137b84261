"""gpsd (Debian's ``gpsd`` and ``gpsd-clients``) reads the emulated receiver on a pty: one 3-D fix a second on whole
seconds, the geoid separation and the satellites in view as the emulator sends them. Skipped without gpsd."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from pluto.hardware.gps.emulate import CircleTrack, DeviceEmulator, NmeaReceiver
from pluto.hardware.gps.grid import LocalGrid
from tests.helpers import free_tcp_port, wait_until

GPSD, GPSPIPE = shutil.which("gpsd") or "/usr/sbin/gpsd", shutil.which("gpspipe")
ORIGIN = (59.3498, 18.0707)

pytestmark = pytest.mark.skipif(
    not (Path(GPSD).is_file() and GPSPIPE),
    reason="gpsd is not installed (Debian packages gpsd and gpsd-clients)",
)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_gpsd_reports_one_fix_per_epoch_on_whole_seconds(tmp_path: Path) -> None:
    grid = LocalGrid(*ORIGIN)
    port = free_tcp_port()
    with DeviceEmulator(NmeaReceiver(CircleTrack(grid, radius=20.0, period=60.0)), transport="pty") as gps:
        # -N foreground, -n poll the device at once, -b read only (never reconfigure the "receiver"); it listens on
        # loopback only (no -G)
        daemon = subprocess.Popen(
            [GPSD, "-N", "-n", "-b", "-S", str(port), "-F", str(tmp_path / "gpsd.sock"), gps.url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert GPSPIPE is not None
            wait_until(lambda: listening(port) or daemon.poll() is not None, timeout=30)
            assert daemon.poll() is None, "gpsd ended at start"
            run = subprocess.run(
                [GPSPIPE, "-w", "-n", "16", f"localhost:{port}"],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
    reports = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    tpv = [r for r in reports if r["class"] == "TPV" and r.get("mode") == 3 and "time" in r]
    sky = [r for r in reports if r["class"] == "SKY" and "satellites" in r]
    assert len(tpv) >= 3, run.stdout + run.stderr
    assert all(r["time"].endswith(".000Z") for r in tpv)  # the epochs are on whole seconds
    later = [r["time"] for r in tpv[-3:]]
    assert len(set(later)) == 3  # past gpsd's first cycle, one fix per epoch
    for r in tpv:
        assert r["status"] == 2 and r["geoidSep"] == pytest.approx(23.4)  # differential; the GGA's separation
        x, y = grid.to_grid(r["lat"], r["lon"])
        assert math.hypot(x, y) == pytest.approx(20.0, abs=0.1)
    assert sky and sky[-1]["uSat"] == 9 and sky[-1]["nSat"] == 11
