"""pluto.hardware.serial_driver: the lifecycle, link and reconnections every serial device driver shares."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pluto.errors import PlutoError
from pluto.hardware.link import DeviceEmulator
from pluto.hardware.serial_driver import SerialDriver, SerialPort
from tests.helpers import free_tcp_port, wait_until


class BeeperError(PlutoError):
    """The beeper cannot be reached."""


class Beeper:
    """A device core: answers ``?`` with ``!`` and, once asked, sends ``.`` at every step (if ``talks``)."""

    def __init__(self, talks: bool = True) -> None:
        self.talks = talks
        self.asked = False
        self.out = bytearray()

    def receive_data(self, data: bytes) -> None:
        if self.talks and b"?" in data:
            self.asked = True
            self.out += b"!"

    def step(self, now: float) -> None:
        if self.asked:
            self.out += b"."

    def data_to_send(self) -> bytes:
        data = bytes(self.out)
        self.out.clear()
        return data


class BeeperDriver(SerialDriver):
    error = BeeperError
    device = "beeper"

    def __init__(self, url: str) -> None:
        super().__init__(url, baud=9600, read_timeout=0.01, link_timeout=0.3)
        self.dots = 0

    def _connect_timeout(self) -> float:
        return 5.0

    def _session(self, port: SerialPort) -> None:
        port.write(b"?")
        heard = self._clock()
        while not self._closing.is_set():
            data = port.read(port.in_waiting or 1)
            now = self._clock()
            if data:
                heard = now
                self._heard_at(now)
                if b"!" in data:
                    self._link_up()
                self.dots += data.count(b".")
            elif now - heard > self.link_timeout:
                return


@pytest.fixture
def beeper() -> Iterator[DeviceEmulator]:
    with DeviceEmulator(Beeper()) as emulator:
        yield emulator


def test_connect_waits_for_the_link_and_close_ends_it(beeper: DeviceEmulator) -> None:
    driver = BeeperDriver(beeper.url)
    assert not driver.connected and driver.silence() == float("inf")
    with driver:
        assert driver.connected
        assert wait_until(lambda: driver.dots > 3)
        assert driver.silence() < 1.0 and driver.reconnects == 0
    assert not driver.connected
    driver.close()  # idempotent
    with pytest.raises(BeeperError, match="was closed"):
        driver.connect()


def test_a_port_that_does_not_open_fails_connect_with_the_drivers_error() -> None:
    driver = BeeperDriver(f"socket://127.0.0.1:{free_tcp_port()}")
    try:
        with pytest.raises(BeeperError, match="cannot open"):
            driver.connect(timeout=5.0)
    finally:
        driver.close()


def test_a_device_that_never_answers_fails_connect() -> None:
    with DeviceEmulator(Beeper(talks=False)) as silent:
        driver = BeeperDriver(silent.url)
        try:
            with pytest.raises(BeeperError, match="no beeper answering"):
                driver.connect(timeout=0.3)
        finally:
            driver.close()


def test_the_port_is_opened_again_after_the_device_vanished() -> None:
    port = free_tcp_port()
    emulator = DeviceEmulator(Beeper(), port=port).start()
    driver = BeeperDriver(emulator.url)
    try:
        driver.connect()
        emulator.close()  # unplugged
        assert wait_until(lambda: not driver.connected, timeout=5.0)
        emulator = DeviceEmulator(Beeper(), port=port).start()  # plugged in again
        assert wait_until(lambda: driver.connected, timeout=5.0)
        assert driver.reconnects == 1
    finally:
        driver.close()
        emulator.close()
