"""Fixtures of the XML server tests: a server on the test's bus, and a publisher of test values."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.module import TOKEN_ENV, XmlServerModule, XmlServerParams


class Publisher:
    """Writes a message on an interface ``rate`` times a second (wall clock), stamped with the wall clock."""

    def __init__(self, bus: Bus, name: str, rate: float, make: Callable[[int, float], msgs.Message]) -> None:
        self._writer = bus.create_publisher(name)
        self._make = make
        self._period = 1.0 / rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"publisher:{name}")
        self.count = 0

    def _run(self) -> None:
        next_time = time.monotonic()
        while True:
            self.count += 1
            self._writer.write(self._make(self.count, time.time()))
            next_time += self._period
            if self._stop.wait(max(0.0, next_time - time.monotonic())):  # pacing the writes, not a wait for a result
                break

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def odometry(i: int, now: float) -> msgs.Message:
    return msgs.Odometry(stamp=now, x=0.01 * i)


@pytest.fixture
def start_server(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., XmlServerModule]]:
    """Start an xmlserver module on the test's bus on a free port, with parameters; stop it after the test.

    The secret of the environment (``PLUTO_XML_TOKEN``) is not used: a test gives a token file if it wants one.
    """
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    started: list[XmlServerModule] = []

    def start(**params: Any) -> XmlServerModule:
        module = XmlServerModule(bus, XmlServerParams(port=0, **params))
        module.start()
        started.append(module)
        return module

    yield start
    for module in started:
        module.stop()
