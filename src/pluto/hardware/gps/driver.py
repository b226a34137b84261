"""The NMEA 0183 GPS driver: a receiver behind a serial port, a TCP socket or a pty, as fixes on the local grid.

    with NmeaDriver("/dev/ttyUSB0", LocalGrid(59.3498, 18.0707)) as gps:
        fix = gps.wait_for_fix(2.0)           # msgs.GpsFix: lat/lon, x east / y north (m), satellites, quality
        print(fix.x, fix.y, fix.quality)

The port is opened with ``serial.serial_for_url`` (``/dev/ttyUSB0``, ``socket://host:port``, a pty path, ``loop://``).
"""

# Strategy: one reader thread owns the port: it reads, feeds the decoder, stamps every sentence with the driver's
# clock when its bytes were read and hands it to the FixAssembler (fix.py), which makes the fixes. A receiver only
# talks, so there is no handshake: the link is up while sentences with good checksums come, and lost when none came
# for ``link_timeout`` s or the port fails; then the port is closed and opened again after a back-off while
# ``reconnect`` holds. Nothing is handed out as fresh while the link is down.

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, cast

import serial  # type: ignore[import-untyped]

from pluto import msgs
from pluto.errors import PlutoError

from .codec import ConnectionClosed, NmeaDecoder
from .fix import FixAssembler
from .grid import LocalGrid

__all__ = ["DriverStatistics", "GpsError", "NmeaDriver"]

log = logging.getLogger("pluto.gps")

READ_TIMEOUT = 0.05
RECONNECT_BACKOFF = 0.5


class GpsError(PlutoError):
    """The receiver's port cannot be opened."""


class _Port(Protocol):
    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class DriverStatistics:
    """Sentences decoded, dropped for a bad checksum, malformed, garbage bytes, fixes made, reconnections."""

    sentences: int
    bad_checksum: int
    malformed: int
    garbage_bytes: int
    fixes: int
    reconnects: int


class NmeaDriver:
    """A host of an NMEA 0183 GPS receiver (or of its emulator).

    Args:
        url: the port.  grid: the local grid fixes are projected on.  baud: the receiver's rate (4800 by NMEA 0183).
        link_timeout: s without a sentence after which the link is lost.  reconnect: open the port again then.
        clock: the time of stamps and timers, s (monotonic).

    Raises:
        ValueError: a link timeout that is not positive.
    """

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
        if not (math.isfinite(link_timeout) and link_timeout > 0.0):
            raise ValueError(f"link_timeout must be > 0, got {link_timeout!r}")
        self.url = url
        self.baud = baud
        self.link_timeout = link_timeout
        self.reconnect = reconnect
        self._clock = clock
        self._decoder = NmeaDecoder()
        self._assembler = FixAssembler(grid)
        self._changed = threading.Condition()
        self._fix: msgs.GpsFix | None = None
        self._count = 0
        self._heard: float | None = None
        self._connected = False
        self._opened = threading.Event()  # the port opened once (or failed: see _failure)
        self._failure: str | None = None
        self._sessions = 0
        self._reconnects = 0
        self._ups = 0  # times the link came up
        self._closing = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def connect(self, timeout: float = 2.0) -> None:
        """Start the reader and wait until the port is open (not for a fix: a receiver may take minutes).

        Raises:
            GpsError: the port cannot be opened.
        """
        if self._closed:
            raise GpsError(f"the driver for {self.url} was closed; create a new one")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"nmea-reader:{self.url}", daemon=True)
            self._thread.start()
        self._opened.wait(timeout)
        if self._failure is not None and self._sessions == 0:
            raise GpsError(self._failure)

    def close(self) -> None:
        """Stop the reader and close the port; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        with self._changed:
            self._connected = False
            self._changed.notify_all()

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """Sentences have come within ``link_timeout``."""
        return self._connected

    @property
    def fix(self) -> msgs.GpsFix | None:
        """The newest fix (None before the first); check :attr:`connected` before taking it as fresh."""
        return self._fix

    @property
    def fix_count(self) -> int:
        """Fixes made so far."""
        return self._count

    def silence(self) -> float:
        """s since the receiver last sent a good sentence (inf before it ever did)."""
        heard = self._heard
        return math.inf if heard is None else max(0.0, self._clock() - heard)

    def statistics(self) -> DriverStatistics:
        """A snapshot of the counters."""
        s = self._decoder.statistics()
        return DriverStatistics(
            s.sentences, s.bad_checksum, s.malformed, s.garbage_bytes, self._assembler.fixes, self._reconnects
        )

    def wait_for_fix(self, timeout: float | None = None) -> msgs.GpsFix | None:
        """Wait for the next fix (one after this call); None if none came within ``timeout`` s."""
        with self._changed:
            seen = self._count
            if not self._changed.wait_for(lambda: self._count != seen or self._closed, timeout):
                return None
            return None if self._closed else self._fix

    def _open(self) -> _Port:
        try:
            return cast(_Port, serial.serial_for_url(self.url, baudrate=self.baud, timeout=READ_TIMEOUT))
        except (serial.SerialException, OSError, ValueError) as err:
            raise GpsError(f"cannot open {self.url}: {str(err).rsplit('] ', 1)[-1]}") from err

    def _run(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    port = self._open()
                except GpsError as err:
                    if self._failure != str(err):
                        log.warning("%s", err)
                    self._failure = str(err)
                    self._opened.set()
                else:
                    self._sessions += 1
                    self._opened.set()
                    try:
                        self._session(port)
                    except Exception as err:  # the port failed or was closed under us: the link is gone
                        log.warning("link to the GPS on %s failed: %s: %s", self.url, type(err).__name__, err)
                    finally:
                        with contextlib.suppress(Exception):
                            port.close()
                        with self._changed:
                            if self._connected and not self._closing.is_set():
                                log.warning("GPS on %s silent for %.1f s: link lost", self.url, self.link_timeout)
                            self._connected = False
                            self._changed.notify_all()
                if not self.reconnect:
                    return
                self._closing.wait(RECONNECT_BACKOFF)
        except Exception:  # pragma: no cover - a driver bug; never let it escape a thread silently
            log.exception("the NMEA reader thread of %s failed", self.url)

    def _session(self, port: _Port) -> None:
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
                    fix = self._assembler.update(event, now)
                    if fix is not None:
                        with self._changed:
                            self._fix = fix
                            self._count += 1
                            self._changed.notify_all()
                if self._decoder.statistics().sentences != before:
                    self._heard = now
                    if not self._connected:
                        with self._changed:
                            self._ups += 1
                            self._reconnects = self._ups - 1
                            self._connected = True  # after the count: a reader that sees it up sees the count
                            self._changed.notify_all()
            heard = self._heard if self._heard is not None and self._heard >= opened else opened
            if now - heard > self.link_timeout:
                return
