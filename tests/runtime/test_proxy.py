"""Proxies: interface masks, finding or starting their module, errors for what was not opened."""

from __future__ import annotations

import math
import os
import shlex
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import LaunchError
from pluto.limits import LimitError
from pluto.proxies import HeartbeatProxy, Proxy, interface_mask
from pluto.runtime import launcher
from pluto.runtime.heartbeat import HeartbeatModule
from pluto.runtime.module import ModuleParams
from tests.helpers import wait_until

MakeBus = Callable[..., Bus]


class FiveProxy(Proxy):
    """A proxy with five interfaces (like the localization proxy)."""

    module = "heartbeat"
    interfaces = names.LOCALIZATION_INTERFACES


def heartbeat_pids(bus: Bus) -> set[int]:
    """Pids of every process that answers as module heartbeat (two with one name would both answer)."""
    return {info.pid for info in bus.call_all("mom", msgs.ModuleInfo) if info.name == "heartbeat"}


def test_interface_mask() -> None:
    assert interface_mask(0, 3) == 9
    assert interface_mask() == 0
    assert interface_mask(4) == 16
    assert interface_mask(1, 1) == 2
    with pytest.raises(ValueError, match="start at 0"):
        interface_mask(-1)


@pytest.mark.parametrize("mask", [32, 33, -1])
def test_a_mask_beyond_the_interfaces_is_rejected(bus: Bus, mask: int) -> None:
    assert len(FiveProxy.interfaces) == 5
    with pytest.raises(ValueError, match=f"mask {mask}"):
        FiveProxy(bus, mask)
    assert launcher.running_daemons(bus.robot) == {}  # rejected before starting anything


def test_proxy_starts_its_module_when_nothing_runs(bus: Bus) -> None:
    assert "heartbeat" not in bus.live_modules()
    proxy = HeartbeatProxy(bus)
    try:
        pid_file = launcher.runtime_dir(bus.robot) / "heartbeat.pid"
        assert pid_file.is_file()
        pid = int(pid_file.read_text())
        assert launcher.pid_alive(pid)
        assert heartbeat_pids(bus) == {pid}
        beat = proxy.get(0)
        assert isinstance(beat, msgs.Heartbeat)
        assert proxy.beat() is not None
        assert proxy.selected(0)
        assert proxy.wait(0, timeout=2.0).seq > 0
    finally:
        proxy.close()
        launcher.stop_daemon(bus.robot, "heartbeat")


def test_proxy_uses_a_running_module_and_offers_activity_control(bus: Bus, make_bus: MakeBus) -> None:
    module = HeartbeatModule(make_bus(), ModuleParams(rate_hz=20.0))
    module.start()
    bus.wait_for_module("heartbeat", timeout=10.0)  # running = visible on the bus
    try:
        with HeartbeatProxy(bus, start=False) as proxy:
            assert isinstance(proxy.get(0), msgs.Heartbeat)
            assert proxy.stop_activity() is True
            assert not module.active
            assert proxy.start_activity() is True
            assert module.active
        assert launcher.running_daemons(bus.robot) == {}  # nothing was started
    finally:
        module.stop()


def test_reader_of_an_interface_not_in_the_mask_is_a_value_error(bus: Bus, make_bus: MakeBus) -> None:
    module = HeartbeatModule(make_bus(), ModuleParams(rate_hz=20.0))
    module.start()
    bus.wait_for_module("heartbeat", timeout=10.0)  # running = visible on the bus
    try:
        proxy = FiveProxy(bus, interface_mask(0, 3), start=False)
        assert proxy.selected(0)
        assert proxy.selected(3)
        assert not proxy.selected(1)
        proxy.reader(3)
        with pytest.raises(ValueError, match="mask 9") as err:
            proxy.reader(1)
        assert "add 2" in str(err.value)
        with pytest.raises(ValueError, match="mask 9"):
            proxy.get(4)
        proxy.close()
    finally:
        module.stop()


def test_start_false_with_nothing_running_is_a_launch_error(bus: Bus) -> None:
    with pytest.raises(LaunchError, match="heartbeat is not running"):
        HeartbeatProxy(bus, start=False)
    assert launcher.running_daemons(bus.robot) == {}


def module_processes(robot: str, module: str) -> set[int]:
    """Pids of the ``pluto run <module>`` processes of this robot (from /proc: what runs, not what answers)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[-3:-1] == [b"run", module.encode()] and f"PLUTO_ROBOT={robot}".encode() in environ:
            found.add(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_two_proxies_at_once_start_one_module(bus: Bus, make_bus: MakeBus) -> None:
    buses = [make_bus(), make_bus()]
    barrier = threading.Barrier(len(buses))
    proxies: list[HeartbeatProxy] = []
    errors: list[BaseException] = []

    def create(own_bus: Bus) -> None:
        barrier.wait()
        try:
            proxies.append(HeartbeatProxy(own_bus))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=create, args=(b,)) for b in buses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    pids = module_processes(bus.robot, "heartbeat")
    try:
        assert not errors, errors
        assert len(proxies) == 2
        assert all(isinstance(p.get(0), msgs.Heartbeat) for p in proxies)
        assert len(pids) == 1, f"{len(pids)} heartbeat modules started: pids {sorted(pids)}"
        assert heartbeat_pids(bus) == pids
    finally:
        for pid in pids:  # every one, not only the one in the pid file
            if launcher.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_proxy_waits_for_a_module_another_client_is_starting(bus: Bus) -> None:
    # What `pluto start heartbeat` in another terminal has just done: spawned the daemon and written its pid file.
    # The daemon is slow to come up (a loaded machine): it runs the module after 1 s, under the same pid.
    folder = launcher.runtime_dir(bus.robot)
    command = shlex.join(launcher.module_command("heartbeat"))
    process = launcher.spawn(["sh", "-c", f"sleep 1; exec {command}"], folder / "heartbeat.log")
    (folder / "heartbeat.pid").write_text(f"{process.pid}\n")
    try:
        proxy = HeartbeatProxy(bus)
        assert isinstance(proxy.get(0), msgs.Heartbeat)
        assert heartbeat_pids(bus) == {process.pid}
    finally:
        process.kill()
        process.wait()


def test_a_proxy_refuses_absurd_values_before_they_reach_the_bus(bus: Bus, make_bus: MakeBus) -> None:
    module = HeartbeatModule(make_bus(), ModuleParams(rate_hz=20.0))
    module.start()
    bus.wait_for_module("heartbeat", timeout=10.0)
    listener = make_bus().create_subscription("drive/command", lambda _v: None, msgs.ActuatorState)
    try:
        with HeartbeatProxy(bus, start=False) as proxy:
            for bad in ([1e308, 0.0], [0.1] * 60_000, [math.nan, 0.0]):
                with pytest.raises(LimitError, match=r"^drive/command velocity"):
                    proxy.write("drive/command", msgs.ActuatorState(velocity=bad))
            proxy.write("drive/command", msgs.ActuatorState(velocity=[0.2, 0.0]))
        wait_until(lambda: listener.received == 1, timeout=5.0, message="the good command arrived")
        assert listener.received == 1  # and none of the bad ones
    finally:
        module.stop()
