"""What every host driver of a device shares: a context manager around one reader thread, closed exactly once.

    class MyDriver(HostDriver):
        error = MyError                          # what a closed driver's connect() raises

        def connect(self) -> None:
            self._check_open("the my-unit driver")
            ...                                  # open the port or bus
            self._start_reader("my-unit-reader")

        def _run(self) -> None:                  # the reader thread: until _closing is set
            while not self._closing.is_set():
                ...

        def _release(self) -> None:              # after the reader stopped: say goodbye, close the port
            ...

    with MyDriver(...) as driver:                # connect() on enter, close() on exit
        ...

The serial drivers (:class:`pluto.hardware.serial_driver.SerialDriver`), the P2OS driver and the CAN wrist driver
are built on it.
"""

# Strategy: python-can's BusABC shape: the base owns the lifecycle, a driver fills hooks. A driver's reader thread
# is the only one that reads its device; close() may be called from any thread, twice, or from the reader itself
# (a driver that gives up), so it is guarded by a lock of its own, sets _closing (which every wait of the reader
# watches), joins the reader unless it is the caller, and only then calls _release, so nothing reads the device
# while it is being shut down. The join waits one reader period (the longest a read or a poll blocks) and 2 s more.

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Self

from pluto.errors import PlutoError

__all__ = ["DriverStatistics", "HostDriver"]


@dataclass(frozen=True, slots=True)
class DriverStatistics:
    """A serial driver's link counters, the same for every device: messages decoded (sentences, packets), dropped
    for a bad checksum, malformed (a good checksum around fields that make no sense), garbage bytes skipped while
    hunting for the next message, and reconnections."""

    messages: int
    bad_checksum: int
    garbage_bytes: int
    reconnects: int
    malformed: int = 0


_JOIN_SLACK = 2.0
"""s that close() waits for the reader beyond one reader period."""


class HostDriver(abc.ABC):
    """The base of a host driver: one reader thread, :meth:`connect`, :meth:`close` once; a context manager.

    Subclasses set :attr:`error` and fill :meth:`connect`, :meth:`_run` and :meth:`_release`.

    Args:
        reader_period: the longest the reader blocks in one wait (a read, a poll), s; :meth:`close` waits that long
            (and 2 s more) for the reader to stop.
    """

    error: ClassVar[type[PlutoError]] = PlutoError
    """What :meth:`connect` raises once the driver is closed."""

    def __init__(self, *, reader_period: float) -> None:
        self._reader_period = reader_period
        self._closing = threading.Event()
        """Set by :meth:`close`: the reader returns and every wait ends."""
        self._closed = False
        self._close_lock = threading.Lock()
        self._reader: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the device and start the reader (:meth:`_start_reader`).

        Raises:
            PlutoError: (the driver's :attr:`error`) the driver was closed, or the device cannot be reached.
        """

    def close(self) -> None:
        """Stop the reader thread, then release the device (:meth:`_release`). Idempotent; safe from any thread."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=self._reader_period + _JOIN_SLACK)
        self._release()

    @property
    def reader_alive(self) -> bool:
        """The reader thread runs: started by :meth:`connect` and not yet returned."""
        reader = self._reader
        return reader is not None and reader.is_alive()

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- hooks ----------------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def _run(self) -> None:
        """The reader thread: read the device until :attr:`_closing` is set."""

    def _release(self) -> None:  # noqa: B027 (an optional hook)
        """The reader has stopped (or close() runs on it): leave the device quiet, close it, wake the waiters."""

    # -- for the driver -------------------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        """Raise :attr:`error` if the driver was closed (``what``: how the message names the driver)."""
        if self._closed:
            raise self.error(f"{what} was closed; create a new one")

    def _start_reader(self, name: str) -> threading.Thread:
        """Start the reader thread (:meth:`_run`, a daemon called ``name``)."""
        reader = threading.Thread(target=self._run, name=name, daemon=True)
        self._reader = reader
        reader.start()
        return reader
