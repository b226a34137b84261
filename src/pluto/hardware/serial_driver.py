"""What every host driver of a serial device shares: a reader thread that owns the port, opens it again after the
device vanished, and tells when the link is up.

    class MyDriver(SerialDriver):
        error = MyError                      # what connect() raises
        device = "my unit"                   # how log lines and errors name it

        def _session(self, port):            # the handshake, then read and feed until the link is lost
            ...
            self._link_up()
            while not self._closing.is_set():
                data = port.read(port.in_waiting or 1)
                ...
                self._heard_at(now)          # good data: the link is alive

    with MyDriver("socket://127.0.0.1:8102", baud=38400, read_timeout=0.02, link_timeout=0.5) as driver:
        ...

The port is opened with ``serial.serial_for_url``, so a device path, ``socket://host:port``, a pty path and
``loop://`` all work.
"""

# Strategy: python-can's shape: the base owns the loop, the timeouts and the lifecycle (pluto.hardware.host_driver:
# the context manager, the reader thread and a close() that runs once); a driver fills a hook or two.
# One reader thread owns the port: it opens it, runs the driver's _session (handshake, then read and feed the
# sans-I/O codec) until the session returns (no data for link_timeout: the driver decides) or raises (a port error,
# or the port closed under it); then the port is closed, the link is down, and after a back-off the port is opened
# again, as long as ``reconnect`` holds. A failure (the port does not open, no answer to the handshake) is logged
# once per new reason and wakes connect(), which waits for _ready() (the link up, or for a device that only talks,
# the port open). Every time the link comes up after the first is a reconnection; the count is raised before the
# link shows up, so a reader that sees it up sees the count. close() is idempotent and ends the thread.

from __future__ import annotations

import abc
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import ClassVar, Protocol, Self, cast

import serial  # type: ignore[import-untyped]

from pluto.errors import PlutoError
from pluto.hardware.host_driver import HostDriver

__all__ = ["RECONNECT_BACKOFF", "SerialDriver", "SerialPort"]

RECONNECT_BACKOFF = 0.5
"""s between attempts to open the port again."""


class SerialPort(Protocol):
    """The part of a pyserial port the drivers use."""

    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...

    def write(self, data: bytes) -> int | None: ...

    def close(self) -> None: ...


class SerialDriver(HostDriver):
    """The base of a host driver of a device behind a serial port; a context manager (:class:`.HostDriver`).

    Subclasses set :attr:`error` and :attr:`device` and fill :meth:`_session` (and :meth:`_ready` or
    :meth:`_session_ended` where the device needs them).

    Args:
        url: the port (a device path, a pty path or a pyserial URL).
        baud: the device's baud rate.
        read_timeout: s that one read of the port blocks at most.
        link_timeout: s without data after which the link is lost (the session checks it).
        reconnect: open the port again after a lost link.
        clock: the time of stamps and timers, s (monotonic).
        log: where the link's news goes.

    Raises:
        ValueError: a timeout that is not positive.
    """

    error: ClassVar[type[PlutoError]] = PlutoError
    """What :meth:`connect` raises (the port does not open, the device does not answer)."""
    device: ClassVar[str] = "device"
    """How log lines and errors name the device ("Crossbow unit")."""

    def __init__(
        self,
        url: str,
        *,
        baud: int,
        read_timeout: float,
        link_timeout: float,
        reconnect: bool = True,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        for name, value in (("read_timeout", read_timeout), ("link_timeout", link_timeout)):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be > 0, got {value!r}")
        super().__init__(reader_period=read_timeout)
        self.url = url
        self.baud = baud
        self.read_timeout = read_timeout
        self.link_timeout = link_timeout
        self.reconnect = reconnect
        self._clock = clock
        self._log = log or logging.getLogger("pluto.hardware")
        self._changed = threading.Condition()
        """Notified whenever the link, a failure or what the driver hands out changes."""
        self._connected = False
        self._heard: float | None = None  # when the device last sent good data
        self._failure: str | None = None
        self._lost_reason: str | None = None  # why the session ended, if not for silence
        self._opened = 0  # times the port opened
        self._ups = 0  # times the link came up
        self._updates = 0  # what the driver handed out (samples, fixes): see _wait_for_update

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the reader without waiting (it opens the port, and opens it again while that fails); idempotent.

        Raises:
            PlutoError: (the driver's :attr:`error`) the driver was closed.
        """
        self._check_open(f"the driver for {self.url}")
        if self._reader is None:
            self._start_reader(f"{type(self).__name__.lower()}-reader:{self.url}")
        return self

    def connect(self, timeout: float | None = None) -> None:
        """Start the reader and wait until the driver is ready (:meth:`_ready`: by default, the link is up).

        Args:
            timeout: s to wait; default :meth:`_connect_timeout`.

        Raises:
            PlutoError: (the driver's :attr:`error`) closed, the port cannot be opened, or the device did not
                answer in time (the reader goes on trying if ``reconnect``; a later :attr:`connected` may be True).
        """
        self.start()
        wait = timeout if timeout is not None else self._connect_timeout()
        with self._changed:
            self._changed.wait_for(lambda: self._ready() or self._failure is not None, wait)
            if not self._ready():
                raise self.error(self._failure or f"no {self.device} answering on {self.url}")

    def _release(self) -> None:
        """close(): the reader has closed the port; the link is down."""
        with self._changed:
            self._connected = False
            self._changed.notify_all()

    # -- the link -------------------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """The link is up: the device answered and has sent data within ``link_timeout``."""
        return self._connected

    @property
    def reconnects(self) -> int:
        """Times the link came up again after it was lost."""
        return max(0, self._ups - 1)

    def silence(self) -> float:
        """s since the device last sent good data (inf before it ever did)."""
        heard = self._heard
        return math.inf if heard is None else max(0.0, self._clock() - heard)

    # -- hooks ----------------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def _session(self, port: SerialPort) -> None:
        """Talk to the device on a newly opened ``port`` until the link is lost (return) or the port fails (raise).

        Call :meth:`_link_up` once the device answered, :meth:`_heard_at` for every good data, :meth:`_fail` for
        a handshake that failed; return when :attr:`_closing` is set.
        """

    def _session_ended(self, port: SerialPort) -> None:
        """The session on ``port`` ended (the port is still open, maybe broken); e.g. leave the device quiet."""

    def _ready(self) -> bool:
        """What :meth:`connect` waits for (the condition's lock is held); default: the link is up."""
        return self._connected

    def _connect_timeout(self) -> float:
        """s that :meth:`connect` waits by default."""
        return 2.0

    # -- for the session ------------------------------------------------------------------------------------------

    def _link_up(self) -> None:
        """The device answered: the link is up (counted as a reconnection after the first time)."""
        with self._changed:
            self._failure = None
            self._ups += 1
            self._connected = True  # after the count: a reader that sees it up sees the count
            self._changed.notify_all()

    def _heard_at(self, now: float) -> None:
        """Good data came at ``now`` (s by the clock)."""
        self._heard = now

    def _lost(self, reason: str) -> None:
        """The session is ending because of ``reason`` (logged when the link goes down)."""
        self._lost_reason = reason

    def _wait_for_update(self, timeout: float | None) -> bool:
        """Wait until the session hands out something new (:attr:`_updates` moves on); False after ``timeout`` s or
        when the driver is closed."""
        with self._changed:
            seen = self._updates
            return self._changed.wait_for(lambda: self._updates != seen or self._closed, timeout) and not self._closed

    def _fail(self, reason: str) -> None:
        """Something failed (logged once per new reason); wakes :meth:`connect`."""
        with self._changed:
            if self._failure != reason:
                self._log.warning("%s", reason)
            self._failure = reason
            self._changed.notify_all()

    # -- the reader thread ----------------------------------------------------------------------------------------

    def _open(self) -> SerialPort:
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baud, timeout=self.read_timeout)
        except (serial.SerialException, OSError, ValueError) as err:
            reason = str(err).rsplit("] ", 1)[-1]
            raise self.error(f"cannot open {self.url}: {reason}") from err
        return cast(SerialPort, port)

    def _run(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    port = self._open()
                except PlutoError as err:
                    self._fail(str(err))
                else:
                    with self._changed:
                        self._opened += 1
                        self._changed.notify_all()
                    try:
                        self._session(port)
                    except Exception as err:  # a serial error, or a port closed under us: the link is gone
                        self._lost_reason = f"{type(err).__name__}: {err}"
                        self._fail(f"link to the {self.device} on {self.url} failed: {self._lost_reason}")
                    finally:
                        with contextlib.suppress(Exception):
                            self._session_ended(port)
                        with contextlib.suppress(Exception):
                            port.close()
                        self._link_down()
                if not self.reconnect:
                    return
                self._closing.wait(RECONNECT_BACKOFF)
        except Exception:  # pragma: no cover - a driver bug; never let it escape a thread silently
            self._log.exception("the reader thread of the %s on %s failed", self.device, self.url)

    def _link_down(self) -> None:
        with self._changed:
            reason, self._lost_reason = self._lost_reason, None
            if self._connected and not self._closing.is_set():
                why = reason or f"no data for {self.link_timeout:.1f} s"
                self._log.warning("%s on %s lost (%s)", self.device, self.url, why)
            self._connected = False
            self._changed.notify_all()
