"""A simulator restarted under running gateways: the Player and the XML gateway (on simulated time, in this process)
serve the new run's data at once, not when the new run reaches the old run's time.

The ``sim`` profile runs free (``RATE`` times faster than real time) or in lock-step; a Player client and an XML client
read the odometry; the simulator is stopped at ``OLD_RUN`` s of simulated time and a new one starts from 0 (a new run
id). Each client must receive odometry stamped in the new run within ``DEADLINE`` s (wall) of the new simulator's
first ``Clock`` tick (the first one past 0: see :class:`FirstTicks`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.player.client import PlayerClient, PlayerClientError
from pluto.gateways.player.module import PlayerModule, PlayerParams
from pluto.gateways.xmlserver.module import XmlServerModule, XmlServerParams
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.gateways.xmlserver.client import XmlClient
from tests.helpers import wait_until

pytestmark = pytest.mark.scenario

RATE = 5.0
OLD_RUN = 20.0
"""s of simulated time the first run lasts."""
DEADLINE = 1.0
"""s (wall) after the new run's first tick by which each client must have received the new run's data."""


class Received:
    """What a client thread received: (wall time, stamp) of each odometry value."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[float, float]] = []
        self.error: BaseException | None = None

    def add(self, stamp: float) -> None:
        with self._lock:
            self._items.append((time.monotonic(), stamp))

    def items(self) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._items)

    def newest(self) -> float:
        items = self.items()
        return items[-1][1] if items else -1.0

    def first_after(self, wall: float, below: float) -> float | None:
        """Wall time of the first value received after ``wall`` and stamped below ``below`` s."""
        return next((w for w, stamp in self.items() if w >= wall and stamp < below), None)


def read_player(port: int, received: Received, stop: threading.Event, ready: threading.Event) -> None:
    try:
        with PlayerClient(port=port, timeout=10.0) as client:
            assert client.subscribe("position") == "r"
            ready.set()
            count = 0
            while not stop.is_set():
                with contextlib.suppress(PlayerClientError):  # no round while no simulator runs
                    client.read(timeout=0.2)
                if client.position.count != count:
                    count = client.position.count
                    received.add(client.position.timestamp)
    except BaseException as err:
        received.error = err
        ready.set()


def read_xml(address: tuple[str, int], received: Received, stop: threading.Event, ready: threading.Event) -> None:
    try:
        with XmlClient(address, timeout=0.2) as client:
            client.start()
            client.send('<subscribe name="Base/Drive/State" rate="20"/>')
            ready.set()
            while not stop.is_set():
                try:
                    doc = client.document()
                except TimeoutError:  # no update while no simulator runs
                    continue
                if doc.tag == "update" and doc.get("name") == "Base/Drive/State":
                    received.add(float(doc[0].get("stamp", "nan")))
    except BaseException as err:
        received.error = err
        ready.set()


class FirstTicks:
    """Wall time of the first ``Clock`` tick of each simulation run at which its time runs (past 0: a lock-stepped
    simulator holds its time at 0 until every module of its profile has joined, and modules that step on its ticks
    have nothing to step on before)."""

    def __init__(self, bus: Bus) -> None:
        self._lock = threading.Lock()
        self.runs: dict[int, float] = {}
        self.subscription = bus.create_subscription("Clock", self._on_tick, msgs.SimTime, depth=64)

    def _on_tick(self, tick: msgs.SimTime) -> None:
        wall = time.monotonic()
        if tick.stamp > 0.0:
            with self._lock:
                self.runs.setdefault(tick.run, wall)

    def first_of_another_run(self, old: set[int]) -> float | None:
        with self._lock:
            return next((wall for run, wall in self.runs.items() if run not in old), None)


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    started: list[Supervisor] = []
    yield started
    for supervisor in started:
        supervisor.shutdown()


@pytest.mark.parametrize("lockstep", [False, True], ids=["free-running", "lock-step"])
def test_gateways_serve_the_new_run_within_a_second(
    bus: Bus, room: Path, supervisors: list[Supervisor], lockstep: bool
) -> None:
    profile = with_params(load_profile("sim"), "sim", world=str(room), rate=RATE, lockstep=lockstep)
    ticks = FirstTicks(bus)

    def simulator() -> Supervisor:
        supervisor = Supervisor(bus, profile, Config(), one_process=True)
        supervisors.append(supervisor)
        supervisor.start()
        return supervisor

    first = simulator()
    player = PlayerModule(bus, PlayerParams(port=0, use_sim_time=True))
    xml = XmlServerModule(bus, XmlServerParams(port=0, use_sim_time=True))
    stop = threading.Event()
    clients: list[threading.Thread] = []
    received = {"player": Received(), "xmlserver": Received()}
    try:
        player.start()
        xml.start()
        for target, where, name in (
            (read_player, player.port, "player"),
            (read_xml, xml.server.address, "xmlserver"),
        ):
            ready = threading.Event()
            thread = threading.Thread(target=target, args=(where, received[name], stop, ready), name=f"{name}-client")
            thread.start()
            clients.append(thread)
            assert ready.wait(10)
            assert received[name].error is None, f"{name} client: {received[name].error!r}"

        deadline = time.monotonic() + OLD_RUN / RATE + 90.0  # a guard: a starved machine runs the old run slower
        while not all(r.newest() >= OLD_RUN for r in received.values()):
            assert time.monotonic() < deadline, {n: r.newest() for n, r in received.items()}
            time.sleep(0.05)

        old_runs = set(ticks.runs)
        first.shutdown()
        simulator()
        wait_until(lambda: ticks.first_of_another_run(old_runs), timeout=10, message="the new simulator's time runs")
        new_tick = ticks.first_of_another_run(old_runs)
        assert new_tick is not None
        below = OLD_RUN / 2  # stamps of the new run (the old one had passed OLD_RUN)
        waited = time.monotonic() + DEADLINE + 5.0  # wait past the deadline, to say how late it came
        while time.monotonic() < waited and not all(r.first_after(new_tick, below) for r in received.values()):
            time.sleep(0.02)
        delays = {name: r.first_after(new_tick, below) for name, r in received.items()}
        late = {
            name: "nothing" if wall is None else f"{wall - new_tick:.2f} s"
            for name, wall in delays.items()
            if wall is None or wall - new_tick > DEADLINE
        }
        assert not late, f"new run's odometry after the first tick of the new simulator: {late}"
    finally:
        stop.set()
        for thread in clients:
            thread.join(5)
        xml.stop()
        player.stop()
        bus.release(ticks.subscription)
    for name, r in received.items():
        assert r.error is None, f"{name} client: {r.error!r}"
