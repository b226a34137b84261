"""pluto.hardware.host_driver: the context manager, the reader thread and the close() every host driver shares."""

from __future__ import annotations

import threading

import pytest

from pluto.errors import PlutoError
from pluto.hardware.host_driver import HostDriver
from tests.helpers import wait_until


class TickerError(PlutoError):
    """The ticker cannot be reached."""


class Ticker(HostDriver):
    """A driver whose reader counts ticks until it is closed; it records what close() released, and when."""

    error = TickerError

    def __init__(self, *, close_from_reader: bool = False) -> None:
        super().__init__(reader_period=0.01)
        self.ticks = 0
        self.started = threading.Event()
        self.released: list[bool] = []  # per release: was the reader still running?
        self.close_from_reader = close_from_reader

    def connect(self) -> None:
        self._check_open("the ticker")
        self._start_reader("ticker-reader")
        assert self.started.wait(5.0)

    def _run(self) -> None:
        self.started.set()
        if self.close_from_reader:
            self.close()
            return
        while not self._closing.wait(0.01):
            self.ticks += 1

    def _release(self) -> None:
        reader = self._reader
        self.released.append(reader is not None and reader.is_alive() and reader is not threading.current_thread())


def test_close_stops_the_reader_before_it_releases_the_device_once() -> None:
    with Ticker() as ticker:
        assert ticker.reader_alive
    assert ticker.released == [False]  # released once, with the reader already stopped
    ticker.close()
    assert ticker.released == [False]
    with pytest.raises(TickerError, match="the ticker was closed; create a new one"):
        ticker.connect()


def test_close_from_several_threads_releases_once() -> None:
    ticker = Ticker()
    ticker.connect()
    closers = [threading.Thread(target=ticker.close) for _ in range(4)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(5.0)
    assert ticker.released == [False]


def test_the_reader_may_close_its_own_driver() -> None:
    ticker = Ticker(close_from_reader=True)
    ticker.connect()
    wait_until(lambda: not ticker.reader_alive, timeout=5.0, message="the reader did not return")
    assert ticker.released == [False]
    ticker.close()
    assert ticker.released == [False]
