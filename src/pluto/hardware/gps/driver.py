"""The NMEA 0183 GPS driver: a receiver behind a serial port, a TCP socket or a pty, as fixes on the local grid.

    with NmeaDriver("/dev/ttyUSB0", LocalGrid(59.3498, 18.0707)) as gps:
        fix = gps.wait_for_fix(2.0)           # msgs.GpsFix: lat/lon, x east / y north (m), satellites, quality
        print(fix.x, fix.y, fix.quality)

The port is opened with ``serial.serial_for_url`` (``/dev/ttyUSB0``, ``socket://host:port``, a pty path, ``loop://``).
"""

# Strategy: one reader thread owns the port (SerialDriver's): it reads, feeds the decoder, stamps every sentence
# with the driver's clock when its bytes were read and hands it to the FixAssembler (fix.py), which makes one fix per
# epoch of the receiver from all its sentences; a read that brings nothing lets it complete an epoch whose last
# sentence was lost.
# A receiver only talks, so there is no handshake: the link is up while sentences with good checksums come, and lost
# when none came for ``link_timeout`` s or the port fails; then the port is closed and opened again after a back-off
# while ``reconnect`` holds. Nothing is handed out as fresh while the link is down.

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pluto import msgs
from pluto.errors import PlutoError
from pluto.hardware.host_driver import DriverStatistics
from pluto.hardware.serial_driver import SerialDriver, SerialPort

from .codec import ConnectionClosed, NmeaDecoder
from .fix import FixAssembler
from .grid import LocalGrid

__all__ = ["DriverStatistics", "GpsError", "NmeaDriver"]

log = logging.getLogger("pluto.gps")

READ_TIMEOUT = 0.05


class GpsError(PlutoError):
    """The receiver's port cannot be opened."""


class NmeaDriver(SerialDriver):
    """A host of an NMEA 0183 GPS receiver (or of its emulator).

    Args:
        url: the port.  grid: the local grid fixes are projected on.  baud: the receiver's rate (4800 by NMEA 0183).
        link_timeout: s without a sentence after which the link is lost.  reconnect: open the port again then.
        clock: the time of stamps and timers, s (monotonic).

    Raises:
        ValueError: a link timeout that is not positive.
    """

    error = GpsError
    device = "GPS"

    def __init__(
        self,
        url: str,
        grid: LocalGrid,
        *,
        baud: int = 4800,
        link_timeout: float = 3.0,
        reconnect: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            url,
            baud=baud,
            read_timeout=READ_TIMEOUT,
            link_timeout=link_timeout,
            reconnect=reconnect,
            clock=clock,
            log=log,
        )
        self._decoder = NmeaDecoder()
        self._assembler = FixAssembler(grid)
        self._fix: msgs.GpsFix | None = None

    def _ready(self) -> bool:  # the port is open: a receiver may take minutes to its first fix
        return self._opened > 0

    @property
    def fix(self) -> msgs.GpsFix | None:
        """The newest fix (None before the first); check :attr:`connected` before taking it as fresh."""
        return self._fix

    @property
    def fix_count(self) -> int:
        """Fixes made so far."""
        return self._updates

    def statistics(self) -> DriverStatistics:
        """A snapshot of the counters."""
        s = self._decoder.statistics()
        return DriverStatistics(s.sentences, s.bad_checksum, s.garbage_bytes, self.reconnects, s.malformed)

    @property
    def fixes(self) -> int:
        """Fixes made since the driver started."""
        return self._assembler.fixes

    def wait_for_fix(self, timeout: float | None = None) -> msgs.GpsFix | None:
        """Wait for the next fix (one after this call); None if none came within ``timeout`` s."""
        return self._fix if self._wait_for_update(timeout) else None

    def _session(self, port: SerialPort) -> None:
        opened = self._clock()
        while not self._closing.is_set():
            data = port.read(port.in_waiting or 1)
            now = self._clock()
            if data:
                before = self._decoder.statistics().sentences
                self._decoder.receive_data(data)
                for event in self._decoder.events():
                    if isinstance(event, ConnectionClosed):  # pragma: no cover - the driver never ends the stream
                        continue
                    self._publish(self._assembler.update(event, now))
                if self._decoder.statistics().sentences != before:
                    self._heard_at(now)
                    if not self._connected:
                        self._link_up()
            else:
                self._publish(self._assembler.flush(now))
            heard = self._heard if self._heard is not None and self._heard >= opened else opened
            if now - heard > self.link_timeout:
                return

    def _publish(self, fixes: list[msgs.GpsFix]) -> None:
        for fix in fixes:
            with self._changed:
                self._fix = fix
                self._updates += 1
                self._changed.notify_all()
