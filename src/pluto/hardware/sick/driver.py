"""The LMS 200/291 driver: a scanner (or an emulator of one) behind a serial port, a TCP socket or a pty.

    with LmsDriver("socket://127.0.0.1:8104", LmsSettings(baud=38400)) as lms:   # opens the port, starts up
        scan = lms.wait_for_scan(2.0)             # ranges in m, arrival and centre time (driver clock)
    # leaving the block stops the continuous output and closes the port

The port is opened with ``serial.serial_for_url``, so ``/dev/ttyUSB0``, ``socket://``, a pty path and ``loop://``
work alike (on socket:// and pty paths the baud rate is nominal).
"""

# Strategy: the shell of the sans-I/O LmsClient (client.py), which makes every protocol decision, on SerialDriver's
# reader thread (which owns the port and opens it again after a pause when it is lost). A session reads what is
# waiting (at most one tick's wait), feeds the client with the clock's time of the read, steps its timers, applies
# its events (BaudRate: set the port's rate; LinkLost: end the session, so the port is closed and reopened at the
# client's probe rate) and writes what it queued. Scans go to a bounded queue the module drains, and wake the
# waiters. The link is up while the port is open (the client restarts the scanner as often as it needs); the number
# of reopenings is counted. Closing stops the continuous output before the port is closed.

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import serial  # type: ignore[import-untyped]

from pluto.codec import NEED_DATA
from pluto.hardware.serial_driver import SerialDriver, SerialPort

from .client import BaudRate, Fault, LinkLost, LmsClient, LmsError, LmsSettings, Ready, Scan

__all__ = ["LmsDriver", "LmsError", "LmsSettings", "Scan"]

log = logging.getLogger("pluto.sick")

TICK = 0.01
"""s: longest wait of one read, the period of the client's timers."""
QUEUE = 32
"""Scans kept for the reader (older ones are dropped)."""


class LmsDriver(SerialDriver):
    """A host of one LMS: opens the port, sets the scanner up and collects its scans in a background thread.

    :meth:`start` starts the reader without waiting (it opens the port, and reopens it while it fails);
    :meth:`connect` (and a ``with`` block) waits until the port is open.

    Args:
        url: the port (a device, a pty path or a pyserial URL).
        settings: what to set the scanner to.
        clock: time source of every stamp and timer, s (monotonic).
    """

    error = LmsError
    device = "scanner"

    def __init__(
        self, url: str, settings: LmsSettings | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings or LmsSettings()
        self._client = LmsClient(self.settings)
        super().__init__(
            url,
            baud=self._client.baud,
            read_timeout=TICK,
            link_timeout=self.settings.link_timeout,
            clock=clock,
            log=log,
        )
        self._scans: deque[Scan] = deque(maxlen=QUEUE)
        self._port: SerialPort | None = None

    def _ready(self) -> bool:
        return self._opened > 0

    # -- what the module reads ------------------------------------------------------------------------------------

    @property
    def port_open(self) -> bool:
        """The scanner's port is open."""
        return self._connected

    @property
    def streaming(self) -> bool:
        """The scanner streams scans as set up."""
        return self._client.streaming and self.port_open

    @property
    def fault(self) -> str | None:
        """Why the scanner gives no valid data while its port is open (a fatal error, silence), or None."""
        return self._client.fault if self.port_open else None

    @property
    def faults(self) -> int:
        return self._client.faults

    def silence(self) -> float:
        """s since the scanner last sent a good telegram (inf before the first)."""
        return self._clock() - self._client.last_answer

    def statistics(self) -> dict[str, int]:
        """Counters: bytes, telegrams, dropped_bytes, bad_crc, malformed, scans, faults, restarts, reconnects."""
        with self._changed:
            counts = self._client.statistics()
        counts["reconnects"] = self.reconnects
        return counts

    def take_scans(self) -> list[Scan]:
        """The scans that arrived since the last call, oldest first."""
        with self._changed:
            scans = list(self._scans)
            self._scans.clear()
        return scans

    def wait_for_scan(self, timeout: float | None = None) -> Scan | None:
        """The next scan that arrives after this call, or None after ``timeout`` s (it stays in the queue too)."""
        with self._changed:
            seen = self._client.scans
            if not self._changed.wait_for(lambda: self._client.scans != seen or self._closing.is_set(), timeout):
                return None
            return self._scans[-1] if self._scans and self._client.scans != seen else None

    def wait_streaming(self, timeout: float) -> bool:
        """Wait until the scanner streams; False after ``timeout`` s."""
        with self._changed:
            ok = self._changed.wait_for(lambda: self.streaming or self._closing.is_set(), timeout)
            return ok and self.streaming

    # -- the reader thread ----------------------------------------------------------------------------------------

    def _open(self) -> SerialPort:
        try:
            port = serial.serial_for_url(self.url, baudrate=self._client.baud, timeout=TICK, write_timeout=1.0)
        except (serial.SerialException, OSError, ValueError) as err:
            raise LmsError(f"cannot open the scanner's port {self.url}: {str(err).rsplit('] ', 1)[-1]}") from err
        return cast(SerialPort, port)

    def _session(self, port: SerialPort) -> None:
        with self._changed:
            self._port = port
            self._link_up()
            self._client.start(self._clock())
            if not self._flush():
                return
        while not self._closing.is_set():
            failure = None
            try:
                data = port.read(port.in_waiting or 1)
            except Exception as err:  # a port closed under us, a socket reset: the link is gone
                data, failure = b"", f"{type(err).__name__}: {err}"
            if self._closing.is_set():
                return
            with self._changed:
                now = self._clock()
                if failure is not None:
                    self._client.port_failed(failure, now)
                elif data:
                    self._client.receive_data(data, now)
                self._client.step(now)
                if not self._flush():
                    return

    def _session_ended(self, port: SerialPort) -> None:
        with self._changed:
            self._port = None
            if self._closing.is_set():  # leave the scanner quiet
                self._client.stop()
                port.write(self._client.data_to_send())
                cast(Any, port).flush()

    def _flush(self) -> bool:
        """Apply the client's events and write its output (the lock is held); False when the link is lost."""
        up = self._apply_events()
        if up and not self._write():
            self._apply_events()  # the client's LinkLost for the failed write
            up = False
        self._changed.notify_all()
        return up

    def _apply_events(self) -> bool:
        client = self._client
        up = True
        while (event := client.next_event()) is not NEED_DATA:
            if isinstance(event, Scan):
                self._scans.append(event)
            elif isinstance(event, BaudRate):
                self._write()  # what was queued before the change goes at the old rate
                with contextlib.suppress(Exception):
                    cast(Any, self._port).baudrate = event.baud
            elif isinstance(event, LinkLost):
                self._lost(event.reason)
                up = False
            elif isinstance(event, Fault):
                log.warning("scanner on %s: %s; restarting it", self.url, event.reason)
            elif isinstance(event, Ready):
                log.info(
                    "scanner on %s streams (version %s, %d baud, %d points)",
                    self.url,
                    event.version or "?",
                    client.baud,
                    self.settings.points,
                )
        return up

    def _write(self) -> bool:
        """Write what the client queued; False if the write failed (the client is told)."""
        data = self._client.data_to_send()
        port = self._port
        if not data or port is None:
            return True
        try:
            port.write(data)
        except Exception as err:
            self._client.port_failed(f"write failed: {type(err).__name__}: {err}", self._clock())
            return False
        return True
