"""The GPS server on an NMEA 0183 receiver, interchangeable with the simulated one.

Writes what :class:`~pluto.hardware.gps.module.SimGpsModule` writes: ``GPS/State`` fixes (latitude, longitude,
altitude, x east and y north of the configured origin in m, satellites used, quality 0 none / 1 GPS / 2
differential, hdop), one per epoch of the receiver, stamped when its GGA arrived. A fix of quality 0 is written as
such, with NaN for the position. It also writes the link on ``gps/status`` at every step: data = [s since the
receiver last sent a good sentence], element = [link up 1/0, reconnects, sentences dropped for a bad checksum].

Run it with ``pluto run gps --driver nmea --port /dev/ttyUSB0 --origin_lat 59.3498 --origin_lon 18.0707``
(``pluto gps-emulate`` serves an emulated receiver on ``socket://127.0.0.1:8103``).
"""

# Strategy: a thin shell around NmeaDriver (principle 1): the driver owns the port, the reconnections and the
# assembly of fixes. The step writes each new fix once, its stamp carried over from the driver's clock to the
# module clock; while the link is down nothing is written on GPS/State, and gps/status says why. The origin is a
# parameter: the simulated world's GPS origin by default, so a stack that ran on the simulator reads the same grid.

from __future__ import annotations

import time
from typing import Annotated

from pluto import msgs, names
from pluto.hardware.device_module import DeviceModule
from pluto.runtime.module import ModuleParams
from pluto.runtime.ranges import Baud, Latitude, Longitude, Rate, between

from .driver import NmeaDriver
from .grid import LocalGrid

__all__ = ["GPS_STATUS", "NmeaGps", "NmeaGpsParams"]

GPS_STATUS = names.GPS_STATUS
"""The link to the receiver (FVectorState): data = [s since it last sent a good sentence], element = [up 1/0,
reconnects, sentences dropped for a bad checksum]."""


class NmeaGpsParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: where the receiver is: a serial device, a pty path or ``socket://host:port``.
    baud: its baud rate (4800 by NMEA 0183; many receivers use 9600 or more).
    origin_lat, origin_lon: the origin of the local grid, degrees.
    link_timeout: s without a sentence after which the link is taken as lost.
    """

    rate_hz: Rate = 10.0
    port: str = "socket://127.0.0.1:8103"
    baud: Baud = 4800
    origin_lat: Latitude = 59.3498
    origin_lon: Longitude = 18.0707
    link_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 3.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.port:
            raise ValueError("port must name a serial device, a pty or a socket:// URL")
        LocalGrid(self.origin_lat, self.origin_lon)  # raises ValueError for an impossible origin


class NmeaGps(DeviceModule[NmeaGpsParams]):
    """The GPS server on an NMEA 0183 receiver."""

    name = "gps"
    description = "NMEA 0183 GPS receiver: fixes on the local grid, satellites and quality"
    provides = (names.GPS_STATE, GPS_STATUS)
    requires = ()
    Params = NmeaGpsParams

    driver: NmeaDriver

    def on_configure(self) -> None:
        p = self.params
        grid = LocalGrid(p.origin_lat, p.origin_lon)
        self.open_driver(NmeaDriver(p.port, grid, baud=p.baud, link_timeout=p.link_timeout))  # GpsError: no port
        self.out = self.create_publisher(names.GPS_STATE)
        self.status = self.create_publisher(GPS_STATUS)
        self._last = 0

    def step(self, now: float) -> None:
        driver = self.driver
        up = driver.connected
        self.write_status(now, up, driver.statistics().bad_checksum)
        count = driver.fix_count
        fix = driver.fix  # read after the count: at least as new as it
        if fix is None or count == self._last or not up:
            return
        self._last = count
        offset = now - time.monotonic()  # the driver's clock (time.monotonic) on the module clock
        self.out.write(
            msgs.GpsFix(
                stamp=fix.stamp + offset,
                latitude=fix.latitude,
                longitude=fix.longitude,
                altitude=fix.altitude,
                x=fix.x,
                y=fix.y,
                satellites=fix.satellites,
                quality=fix.quality,
                hdop=fix.hdop,
            )
        )
