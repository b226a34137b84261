"""MOM: the live modules of a robot, their interfaces, rates and ages; dead modules vanish at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus, BusConfig, bus_config
from pluto.bus.config import rendezvous_free
from pluto.runtime import launcher, mom
from tests.conftest import free_tcp_port
from tests.helpers import wait_until

LINK_NOT_LEASE = 0.5 * BusConfig().lease
"""s: a killed module's entry goes with its link, which closes at once; the lease (10 s by default) ends only a link
that went silent. Gone within half the lease is gone by the link (it takes a fraction of a second); the wait is
otherwise a generous limit, not a measure of speed."""


def rows_by_name(bus: Bus) -> dict[str, mom.MomRow]:
    return {row.name: row for row in mom.snapshot(bus)}


def test_snapshot_of_a_running_pair_and_its_disappearance_when_killed(bus: Bus) -> None:
    beat_pid = launcher.start_daemon(bus, "heartbeat", timeout=15)
    monitor_pid = launcher.start_daemon(bus, "heartbeat-monitor", params={"rate_hz": 10.0}, timeout=15)

    def both_rated() -> bool:
        rows = rows_by_name(bus)
        return all(
            (row := rows.get(name)) is not None
            and row.info is not None
            and row.info.provides
            and row.info.provides[0].rate_hz > 0
            for name in ("heartbeat", "heartbeat-monitor")
        )

    wait_until(both_rated, timeout=5.0)
    before = time.time()
    rows = mom.snapshot(bus)
    after = time.time()  # the modules answer during the snapshot: their newest write may come after `before`
    assert [row.name for row in rows] == ["heartbeat", "heartbeat-monitor"]  # sorted by name
    by_name = {row.name: row.info for row in rows}
    beat, monitor = by_name["heartbeat"], by_name["heartbeat-monitor"]
    assert beat is not None
    assert monitor is not None
    assert (beat.pid, monitor.pid) == (beat_pid, monitor_pid)
    assert beat.active
    assert monitor.requires == ["heartbeat"]
    for info, interface, kind in ((beat, "Heartbeat", "Heartbeat"), (monitor, "Heartbeat/Monitor", "FVectorState")):
        [stats] = info.provides
        assert (stats.name, stats.type) == (interface, kind)
        assert 5.0 < stats.rate_hz < 20.0, stats
        assert stats.count > 0
        assert before - 1.0 < stats.last_write <= after  # age: written within the last period or so
        assert info.dropped == 0

    table = mom.render(rows, bus.robot)
    assert f"robot {bus.robot}: 2 modules" in table
    for text in ("heartbeat", "heartbeat-monitor", "Heartbeat", "Heartbeat/Monitor", "FVectorState", str(beat_pid)):
        assert text in table
    assert " Hz" in table
    assert " ms" in table

    os.kill(beat_pid, signal.SIGKILL)
    # gone with its link (the kernel closes a killed process's sockets), long before the 10 s lease would end it
    wait_until(lambda: "heartbeat" not in rows_by_name(bus), timeout=LINK_NOT_LEASE, interval=0.05)
    assert list(rows_by_name(bus)) == ["heartbeat-monitor"]


def test_render_of_nothing_and_of_a_module_that_does_not_answer() -> None:
    assert mom.render([], "r2") == "robot r2: no modules running"
    info = msgs.ModuleInfo(
        name="quiet",
        pid=12,
        active=False,
        provides=[
            msgs.InterfaceStats(name="Heartbeat", type="Heartbeat", count=0, rate_hz=0.0, last_write=0.0),
            msgs.InterfaceStats(name="Other", type="FVectorState", count=3, rate_hz=2.0, last_write=95.0),
        ],
    )
    table = mom.render([mom.MomRow("mute", None), mom.MomRow("quiet", info)], "r2", now=100.0)
    lines = table.splitlines()
    assert lines[0] == "robot r2: 2 modules"
    assert "MODULE" in lines[1]
    assert "mute" in lines[2]
    assert "(no answer)" in lines[2]
    assert lines[3].split()[:3] == ["quiet", "12", "no"]
    assert "never" in lines[3]
    assert "5.0 s" in lines[4]
    assert "2.0 Hz" in lines[4]
    assert lines[4].split()[0] == "Other"  # continuation line: module columns left blank


def test_snapshot_of_an_empty_robot(bus: Bus) -> None:
    assert mom.snapshot(bus) == []


def test_a_module_that_answers_is_listed_before_its_token_is_known(bus: Bus) -> None:
    # Over a new link a session's services come before its liveliness tokens: `pluto mom` run just after a module
    # started may hear the module answer before it knows its token. No token is declared here at all.
    info = msgs.ModuleInfo(name="early", pid=os.getpid(), active=True)
    bus.create_service("mom/early", lambda _request: info)
    assert "early" not in bus.live_modules()
    [row] = mom.snapshot(bus)
    assert row == mom.MomRow("early", info)


def test_a_killed_module_that_held_the_rendezvous_also_vanishes_quickly(make_bus: Callable[..., Bus]) -> None:
    """The first process on the machine owns the rendezvous (a router); its death must not hide or freeze MOM."""
    robot = os.environ["PLUTO_ROBOT"]
    folder = launcher.runtime_dir(robot)
    owner = launcher.spawn(launcher.module_command("heartbeat"), folder / "heartbeat.log")
    (folder / "heartbeat.pid").write_text(f"{owner.pid}\n")  # so the fixture cleans it up
    wait_until(lambda: not rendezvous_free(bus_config()), timeout=10.0, interval=0.02)
    bus = make_bus()
    launcher.wait_publishing(bus, "heartbeat", 15, process=owner)
    assert not bus.owner, "the heartbeat process, started first, should hold the rendezvous"
    launcher.start_daemon(bus, "heartbeat-monitor", timeout=15)
    assert list(rows_by_name(bus)) == ["heartbeat", "heartbeat-monitor"]

    owner.kill()
    wait_until(lambda: "heartbeat" not in rows_by_name(bus), timeout=LINK_NOT_LEASE, interval=0.05)
    owner.wait()
    rows = rows_by_name(bus)
    assert list(rows) == ["heartbeat-monitor"]
    assert rows["heartbeat-monitor"].info is not None  # the survivor still answers


@pytest.fixture(params=["rendezvous", "router"])
def newcomer_setup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """How a process that starts later joins: the local rendezvous (held by another process), or a router."""
    if request.param == "rendezvous":
        yield "rendezvous"
        return
    endpoint = f"tcp/127.0.0.1:{free_tcp_port()}"
    router = subprocess.Popen(
        [sys.executable, "-m", "pluto", "router", "--listen", endpoint],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert router.stdout is not None
        assert router.stdout.readline().startswith("router listening")
        monkeypatch.setenv("PLUTO_CONNECT", endpoint)
        yield "router"
    finally:
        router.terminate()
        router.wait(timeout=10)


def test_a_newcomer_sees_the_running_modules_at_once(newcomer_setup: str) -> None:
    with Bus() as first:
        launcher.start_daemon(first, "heartbeat", timeout=15)
        wait_until(lambda: [row.name for row in mom.snapshot(first)] == ["heartbeat"], timeout=5.0)
        for attempt in range(15):  # the miss is a race: try often (it stops at the first miss)
            with Bus() as newcomer:
                assert not newcomer.owner
                seen = [row.name for row in mom.snapshot(newcomer)]
                keys = list(newcomer.interface_keys())
            assert (seen, keys) == (["heartbeat"], ["Heartbeat"]), f"newcomer {attempt} ({newcomer_setup})"
