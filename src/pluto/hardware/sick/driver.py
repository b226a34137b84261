"""The LMS 200/291 driver: a scanner (or an emulator of one) behind a serial port, a TCP socket or a pty.

    with LmsDriver("socket://127.0.0.1:8104", LmsSettings(baud=38400)) as lms:   # opens the port, starts up
        scan = lms.wait_for_scan(2.0)             # ranges in m, arrival and centre time (driver clock)
    # leaving the block stops the continuous output and closes the port

The port is opened with ``serial.serial_for_url``, so ``/dev/ttyUSB0``, ``socket://``, a pty path and ``loop://``
work alike (on socket:// and pty paths the baud rate is nominal).
"""

# Strategy: the shell of the sans-I/O LmsClient (client.py), which makes every protocol decision. One reader thread
# owns the port: it reads what is waiting (at most one tick's wait), feeds the client with the clock's time of the
# read, steps its timers, applies its events (BaudRate: set the port's rate; LinkLost: close the port, reopen it
# after a pause and start again) and writes what it queued. Scans go to a bounded queue the module drains, and wake
# the waiters. A port that cannot be opened is retried every RECONNECT_PAUSE s; the number of reopenings is counted.

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, cast

import serial  # type: ignore[import-untyped]

from pluto.codec import NEED_DATA

from .client import BaudRate, Fault, LinkLost, LmsClient, LmsError, LmsSettings, Ready, Scan

__all__ = ["LmsDriver", "LmsError", "LmsSettings", "Scan"]

log = logging.getLogger("pluto.sick")

TICK = 0.01
"""s: longest wait of one read, the period of the client's timers."""
RECONNECT_PAUSE = 0.5
"""s between two attempts to open a port that failed."""
QUEUE = 32
"""Scans kept for the reader (older ones are dropped)."""


class LmsDriver:
    """A host of one LMS: opens the port, sets the scanner up and collects its scans in a background thread.

    Args:
        url: the port (a device, a pty path or a pyserial URL).
        settings: what to set the scanner to.
        clock: time source of every stamp and timer, s (monotonic).
    """

    def __init__(
        self, url: str, settings: LmsSettings | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.url = url
        self.settings = settings or LmsSettings()
        self._clock = clock
        self._client = LmsClient(self.settings)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._scans: deque[Scan] = deque(maxlen=QUEUE)
        self._port: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._reopen_at: float | None = None
        self.reconnects = 0
        """Times the port was opened again after it was lost."""
        self._lost = False
        self.port_open = False
        self.failed_opens = 0

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the reader thread (it opens the port, and reopens it while it fails). Idempotent."""
        if self._thread is None:
            self._stop.clear()
            self._reopen_at = self._clock()
            self._thread = threading.Thread(target=self._run, name=f"lms-reader:{self.url}", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the continuous output, stop the reader and close the port. Idempotent."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        with self._lock:
            port, self._port = self._port, None
            if port is not None:
                self._client.stop()
                with contextlib.suppress(Exception):
                    port.write(self._client.data_to_send())
                    port.flush()
                with contextlib.suppress(Exception):
                    port.close()
            self.port_open = False
            self._changed.notify_all()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- what the module reads ------------------------------------------------------------------------------------

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
        with self._lock:
            counts = self._client.statistics()
        counts["reconnects"] = self.reconnects
        return counts

    def take_scans(self) -> list[Scan]:
        """The scans that arrived since the last call, oldest first."""
        with self._lock:
            scans = list(self._scans)
            self._scans.clear()
        return scans

    def wait_for_scan(self, timeout: float | None = None) -> Scan | None:
        """The next scan that arrives after this call, or None after ``timeout`` s (it stays in the queue too)."""
        with self._changed:
            seen = self._client.scans
            if not self._changed.wait_for(lambda: self._client.scans != seen or self._stop.is_set(), timeout):
                return None
            return self._scans[-1] if self._scans and self._client.scans != seen else None

    def wait_streaming(self, timeout: float) -> bool:
        """Wait until the scanner streams; False after ``timeout`` s."""
        with self._changed:
            return self._changed.wait_for(lambda: self.streaming or self._stop.is_set(), timeout) and self.streaming

    # -- the reader thread ----------------------------------------------------------------------------------------

    def _open(self, baud: int) -> bool:
        try:
            port = serial.serial_for_url(self.url, baudrate=baud, timeout=TICK, write_timeout=1.0)
        except (serial.SerialException, OSError, ValueError) as err:
            self.failed_opens += 1
            if self.failed_opens in (1, 10) or self.failed_opens % 100 == 0:
                log.warning("cannot open the scanner's port %s (%d tries): %s", self.url, self.failed_opens, err)
            return False
        with self._lock:
            self._port = port
            self.port_open = True
            if self._lost:
                self._lost = False
                self.reconnects += 1
                log.info("scanner port %s open again", self.url)
            self.failed_opens = 0
            self._client.start(self._clock())
            self._flush()
        return True

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                port = self._port
                if port is None:
                    reopen = self._reopen_at
                    if reopen is not None and self._clock() >= reopen and self._open(self._client.baud):
                        self._reopen_at = None
                        continue
                    if reopen is not None and self._port is None and self._clock() >= reopen:
                        self._reopen_at = self._clock() + RECONNECT_PAUSE
                    self._stop.wait(TICK)
                    continue
                failure = None
                try:
                    data = port.read(port.in_waiting or 1)
                except Exception as err:  # a port closed under us, a socket reset: the link is gone
                    data, failure = b"", f"{type(err).__name__}: {err}"
                if self._stop.is_set():
                    return
                with self._lock:
                    now = self._clock()
                    if failure is not None:
                        self._client.port_failed(failure, now)
                    elif data:
                        self._client.receive_data(data, now)
                    self._client.step(now)
                    self._flush()
        except Exception:  # pragma: no cover - a driver bug; never lost silently in a thread
            log.exception("the LMS reader thread of %s failed", self.url)

    def _flush(self) -> None:
        """Apply the client's events and write its output (the lock is held)."""
        client = self._client
        while (event := client.next_event()) is not NEED_DATA:
            if isinstance(event, Scan):
                self._scans.append(event)
            elif isinstance(event, BaudRate):
                self._write()  # what was queued before the change goes at the old rate
                with contextlib.suppress(Exception):
                    self._port.baudrate = event.baud
            elif isinstance(event, LinkLost):
                self._drop_port(event.reason)
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
        self._write()
        self._changed.notify_all()

    def _write(self) -> None:
        data = self._client.data_to_send()
        port = self._port
        if not data or port is None:
            return
        try:
            port.write(data)
        except Exception as err:
            self._client.port_failed(f"write failed: {type(err).__name__}: {err}", self._clock())
            self._drop_port(str(err))

    def _drop_port(self, reason: str) -> None:
        port, self._port = self._port, None
        if port is not None:
            log.warning("lost the scanner's port %s: %s", self.url, reason)
            with contextlib.suppress(Exception):
                cast(Any, port).close()
            self._lost = True
        self.port_open = False
        self._reopen_at = self._clock() + RECONNECT_PAUSE
