"""A module run in this process: liveliness, rate, start/stop_activity, errors in step, MOM info, bad input."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus, BusTimeout, StateReader
from pluto.runtime.heartbeat import HeartbeatModule, HeartbeatMonitor, HeartbeatMonitorParams
from pluto.runtime.module import Module, ModuleParams
from tests.helpers import wait_until
from tests.runtime.sample_modules import FLAKY, FlakyStep

MakeBus = Callable[..., Bus]


@pytest.fixture
def started() -> Iterator[list[Module]]:
    """Modules appended here are stopped after the test, even if it fails."""
    modules: list[Module] = []
    yield modules
    for module in reversed(modules):
        module.stop()


def measured_rate(reader: StateReader[msgs.Heartbeat], beats: int = 12, timeout: float = 5.0) -> float:
    """Rate (Hz) at which ``reader`` receives values, over ``beats`` new values."""
    reader.wait_for_update(timeout)
    first = reader.received
    t0 = time.monotonic()
    wait_until(lambda: reader.received - first >= beats, timeout=timeout)
    return (reader.received - first) / (time.monotonic() - t0)


def quiet_for(reader: StateReader[msgs.Heartbeat], seconds: float = 0.3) -> bool:
    """True if nothing new arrives on ``reader`` for ``seconds`` (proving an absence needs a bounded wait)."""
    reader.read()
    try:
        reader.wait_for_update(timeout=seconds)
    except BusTimeout:
        return True
    return False


def test_module_is_alive_and_publishes_at_its_rate(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=40.0))
    module.start()
    started.append(module)
    wait_until(lambda: "heartbeat" in watcher.live_modules(), timeout=2.0)
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    rate = measured_rate(reader, beats=16)
    assert 10.0 < rate < 60.0, rate  # a busy machine slows it down; never faster than asked
    beat = reader.read()
    assert beat is not None
    assert beat.source == "heartbeat"
    assert beat.seq > 0


def test_stop_activity_stops_writes_but_module_stays_alive(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=50.0))
    module.start()
    started.append(module)
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    reader.wait_for_update(timeout=2.0)

    assert watcher.call("heartbeat/stop_activity", timeout=2.0) is False  # reply: is it still active?
    written = module.out.count
    # The last beat written before the stop reaches the other bus; after it nothing more comes.
    wait_until(lambda: (beat := reader.read()) is not None and beat.seq == module.seq, timeout=2.0)
    assert quiet_for(reader, 0.3)
    assert module.out.count == written
    assert not module.active
    assert "heartbeat" in watcher.live_modules()
    assert watcher.call("mom/heartbeat", reply_type=msgs.ModuleInfo).active is False

    assert watcher.call("heartbeat/start_activity", timeout=2.0) is True
    beat = reader.wait_for_update(timeout=2.0)
    assert beat.seq > written
    assert module.active


def test_start_activity_twice_is_harmless(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=40.0))
    module.start()
    started.append(module)
    assert watcher.call("heartbeat/start_activity") is True
    assert watcher.call("heartbeat/start_activity") is True
    assert module.start_activity() is False  # already running: nothing started
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    rate = measured_rate(reader, beats=16)
    assert 10.0 < rate < 60.0, f"{rate} Hz: a second control thread would double the rate"


def test_start_twice_is_harmless_and_stop_withdraws_it(bus: Bus, make_bus: MakeBus) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=40.0))
    module.start()
    try:
        module.start()
        reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
        rate = measured_rate(reader, beats=16)
        assert 10.0 < rate < 60.0, rate  # a busy machine slows it down; never faster than asked
        infos = watcher.call_all("mom", msgs.ModuleInfo)
        assert len(infos) == 1, "the module answers MOM twice"
        assert [s.name for s in infos[0].provides] == ["Heartbeat"]
    finally:
        module.stop()
    watcher.wait_for_module("heartbeat", timeout=2.0, alive=False)
    assert "heartbeat" not in watcher.live_modules()


def test_stop_is_idempotent_and_withdraws_the_module_quickly(bus: Bus, make_bus: MakeBus) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=20.0))
    module.start()
    wait_until(lambda: "heartbeat" in watcher.live_modules(), timeout=2.0)
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    reader.wait_for_update(timeout=2.0)

    module.stop()
    module.stop()
    # withdrawn by the stop itself (its token undeclared), not by a lease running out
    wait_until(lambda: "heartbeat" not in watcher.live_modules(), timeout=10.0)
    assert not module.active
    assert quiet_for(reader, 0.3)
    with pytest.raises(BusTimeout):
        watcher.call("mom/heartbeat", timeout=0.3)
    module.stop()  # still harmless after everything is closed


def test_a_failing_step_is_counted_and_the_loop_goes_on(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = FlakyStep(bus, ModuleParams(rate_hz=100.0))
    module.start()
    started.append(module)
    wait_until(lambda: module.step_errors >= 3, timeout=3.0)
    reader = watcher.create_reader(FLAKY, msgs.FVectorState)
    first = reader.wait_for_update(timeout=2.0).element[0]
    later = reader.wait_for_update(timeout=2.0).element[0]
    assert later > first
    assert module.active
    assert module.step_errors >= 3
    # About half the steps raised (the even ones).
    assert abs(module.step_errors - module.calls // 2) <= 1


def test_autostart_false_waits_for_start_activity(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=50.0, autostart=False))
    module.start()
    started.append(module)
    wait_until(lambda: "heartbeat" in watcher.live_modules(), timeout=2.0)
    reader = watcher.create_reader("Heartbeat", msgs.Heartbeat)
    assert reader.read() is None
    assert quiet_for(reader, 0.3)
    assert not module.active
    info = watcher.call("mom/heartbeat", reply_type=msgs.ModuleInfo)
    assert info.active is False
    assert info.provides[0].count == 0

    assert watcher.call("heartbeat/start_activity") is True
    assert reader.wait_for_update(timeout=2.0).seq >= 1


def test_mom_service_describes_the_module(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatMonitor(bus, HeartbeatMonitorParams(rate_hz=20.0))
    module.start()
    started.append(module)
    wait_until(lambda: module.out.count >= 5, timeout=3.0)
    before = time.time()
    info = watcher.call("mom/heartbeat-monitor", reply_type=msgs.ModuleInfo)
    assert info.name == "heartbeat-monitor"
    assert info.pid == os.getpid()
    assert info.active is True
    assert info.requires == ["heartbeat"]
    assert 0 < info.started <= before
    assert info.dropped == 0
    [stats] = info.provides
    assert stats.name == "Heartbeat/Monitor"
    assert stats.type == "FVectorState"
    assert stats.count >= 5
    assert 10.0 < stats.rate_hz < 30.0
    assert before - 1.0 < stats.last_write <= time.time()


def test_module_takes_its_name_from_the_argument(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    watcher = make_bus()
    module = HeartbeatModule(bus, ModuleParams(rate_hz=20.0), name="beat2")
    module.start()
    started.append(module)
    wait_until(lambda: "beat2" in watcher.live_modules(), timeout=2.0)
    assert "heartbeat" not in watcher.live_modules()
    assert watcher.call("mom/beat2", reply_type=msgs.ModuleInfo).name == "beat2"
    assert watcher.create_reader("Heartbeat", msgs.Heartbeat).wait_for_value(2.0).source == "beat2"


def test_garbage_on_an_interface_is_counted_and_ignored(bus: Bus, make_bus: MakeBus, started: list[Module]) -> None:
    other = make_bus()
    monitor = HeartbeatMonitor(bus, HeartbeatMonitorParams(rate_hz=50.0))
    monitor.start()
    started.append(monitor)
    out = other.create_reader("Heartbeat/Monitor", msgs.FVectorState)
    out.wait_for_update(timeout=2.0)
    writer = other.create_publisher("Heartbeat", msgs.Heartbeat)

    def beat_received(seq: int) -> bool:
        beat = monitor.beats.read()
        if beat is not None and beat.seq == seq:
            return True
        writer.write(msgs.Heartbeat(stamp=time.time(), seq=seq, source="test"))
        return False

    wait_until(lambda: beat_received(1), timeout=2.0, interval=0.05)  # the path from `other` to the monitor works

    other.session.put(other.key("Heartbeat"), b"\x01junk")
    other.session.put(other.key("Heartbeat"), b"\xff\xfe")
    wait_until(lambda: monitor.info().dropped >= 2, timeout=2.0)
    assert monitor.info().dropped == 2
    assert watcher_dropped(other) == 2
    assert monitor.active
    out.wait_for_update(timeout=2.0)  # still writing
    beat = monitor.beats.read()
    assert beat is not None
    assert beat.seq == 1  # the garbage was not taken for a beat

    wait_until(lambda: beat_received(42), timeout=2.0, interval=0.05)
    assert monitor.info().dropped == 2


def watcher_dropped(bus: Bus) -> int:
    """What MOM shows as dropped for heartbeat-monitor."""
    return int(bus.call("mom/heartbeat-monitor", reply_type=msgs.ModuleInfo).dropped)
