"""The laser server of a SICK LMS 200/291: the LMS driver on the bus, interchangeable with the simulated laser.

It writes the three interfaces of the original's sick module (docs/design.md), as
:class:`~pluto.hardware.sick.module.SimSick` does:

- ``Sick/Scan``: 181 points (one per degree), stamped when the scan arrived (old-compatible);
- ``Sick/Scan_mm``: every point (361 at 0.5°), stamped at the centre of the scan's sweep;
- ``Sick/Timing``: that centre time and the number of valid points;

and ``sick/status`` at every step: data = [s since the scanner last answered], element = [link up 1/0, reconnects,
bytes dropped by the decoder, faults]. The settings (port, baud, resolution, units, range) are parameters.

Run it with ``pluto run sick --driver lms --port /dev/ttyUSB0`` (``pluto sick-emulate`` serves an emulated scanner on
``socket://127.0.0.1:8104``), or in a profile with ``driver = "lms"`` under ``[modules.sick]``.
"""

# Strategy: a thin shell around LmsDriver, which owns the port, the start-up sequence and the timing of each scan.
# The driver stamps a scan with its clock (time.monotonic) at the arrival of its last byte; the module carries that
# over to its own clock (now - (monotonic now - arrival)), and the centre the same way: centre = arrival -
# transmission (telegram bytes x 10 / baud) - half the sweep (6.7 ms at 1°, 20 ms at 0.5°: see client.py). A fatal
# error or a silent scanner (its port still open) is what the original's sick server called a fatal error: every range
# is -1 on all three interfaces, written once per scan period, while the driver resets the scanner and sets it up again
# (a real one needs about 20 s); the data comes back by itself. While the port itself is gone (unplugged), nothing
# is written on Sick/*: a stale scan must not look fresh; sick/status says so.

from __future__ import annotations

import math
import time
from typing import Annotated

from pluto import msgs, names
from pluto.hardware.device_module import DeviceModule
from pluto.runtime.module import ModuleParams
from pluto.runtime.ranges import Baud, Rate, between

from .client import LmsSettings, Scan
from .driver import LmsDriver

__all__ = ["LmsSick", "LmsSickParams"]

SICK_STATUS = names.SICK_STATUS


class LmsSickParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: the scanner's port: a serial device, a pty path or ``socket://host:port`` (an emulator).
    baud: the streaming rate: 9600, 19200, 38400 or 500000.
    resolution: angular resolution, ° (0.5: 361 points; 1: 181 points).
    units: "cm" (80 m range) or "mm" (8, 16 or 32 m, see range_m).
    range_m: the measuring range, m.
    link_timeout: s without a scan before the scanner is taken as failed and restarted.
    """

    rate_hz: Rate = 20.0
    port: str = "socket://127.0.0.1:8104"
    baud: Baud = 38400
    resolution: Annotated[float, between(0.5, 1.0)] = 0.5
    units: str = "cm"
    range_m: Annotated[int, between(1, 1000)] = 80
    link_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.port:
            raise ValueError("port must name a serial device, a pty or a socket:// URL")
        if self.resolution not in (0.5, 1.0):
            raise ValueError(f"resolution must be 0.5 or 1 (°), not {self.resolution}")
        self.settings()  # raises LmsError (a ValueError's sibling) with the reason

    def settings(self) -> LmsSettings:
        """The driver's settings."""
        try:
            return LmsSettings(
                baud=self.baud,
                resolution=round(self.resolution * 100),
                units=self.units,
                range_m=self.range_m,
                link_timeout=self.link_timeout,
            )
        except Exception as err:
            raise ValueError(str(err)) from None


class LmsSick(DeviceModule[LmsSickParams]):
    """The laser server of a SICK LMS 200/291 (or of anything that speaks its telegrams)."""

    name = "sick"
    description = "SICK LMS 200/291 laser over RS-232/422: 361 beams over 180°, a scan every 200 ms at 38400 baud"
    provides = (names.SICK_SCAN, names.SICK_SCAN_MM, names.SICK_TIMING, SICK_STATUS)
    requires = ()
    Params = LmsSickParams

    driver: LmsDriver

    def on_configure(self) -> None:
        p = self.params
        self.lms_settings = p.settings()
        self.angles = self.lms_settings.angles()
        self.step_181 = max(1, 100 // self.lms_settings.resolution)
        self.max_range = float(self.lms_settings.range_m)
        self.scan_181 = self.create_publisher(names.SICK_SCAN)
        self.scan_mm = self.create_publisher(names.SICK_SCAN_MM)
        self.timing = self.create_publisher(names.SICK_TIMING)
        self.status = self.create_publisher(SICK_STATUS)
        self._last_failed_write = -math.inf
        self.open_driver(LmsDriver(p.port, self.lms_settings, clock=time.monotonic), wait=False)  # may come later

    def step(self, now: float) -> None:
        driver = self.driver
        offset = now - time.monotonic()  # driver clock -> module clock
        for scan in driver.take_scans():
            self._publish(scan.ranges.tolist(), scan.arrival + offset, scan.centre + offset, self._valid(scan))
        if driver.fault is not None and driver.port_open:
            period = 0.2
            if now - self._last_failed_write >= period:
                self._last_failed_write = now
                self._publish([-1.0] * self.angles.size, now, now, 0)
        stats = driver.statistics()
        self.write_status(now, driver.streaming, stats["dropped_bytes"], stats["faults"])

    def _valid(self, scan: Scan) -> int:
        return int(scan.ranges.size)

    def _publish(self, ranges: list[float], arrival: float, centre: float, valid: int) -> None:
        angles = self.angles
        every = self.step_181
        self.scan_mm.write(
            msgs.LaserScan(
                stamp=centre,
                arrival=arrival,
                ranges=ranges,
                angles=angles.tolist(),
                count=valid,
                max_range=self.max_range,
            )
        )
        self.scan_181.write(
            msgs.LaserScan(
                stamp=arrival,
                arrival=arrival,
                ranges=ranges[::every],
                angles=angles[::every].tolist(),
                count=(valid + every - 1) // every,
                max_range=self.max_range,
            )
        )
        self.timing.write(msgs.ScanTiming(stamp=centre, count=valid))
