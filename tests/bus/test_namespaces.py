"""Several machines for real: Linux network namespaces, a router in one, modules in two others that reach only it.

Namespace ``r`` holds ``pluto router``; ``a`` and ``b`` each have a virtual Ethernet link to ``r`` on a subnet of its
own and no route to each other (``r`` does not forward), as two machines that can reach only the router. Every
process joins with ``PLUTO_CONNECT`` set to the router's address on its side and nothing else, as the README says.
Checked across the router: ``pluto mom`` in ``b`` lists the module of ``a``, a probe in ``b`` reads a state of
``a`` after it was written (a late joiner), calls a service of the module in ``a``, and sees it go and come back
when it restarts; the module in ``b`` gets the beats of ``a``.

Needs root and ``ip`` (iproute2); skipped with the reason otherwise. The namespaces (:class:`tests.bus.netns.Net`)
are deleted however it ends.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from tests.bus.netns import PROBE, ROUTER_PORT, SUBNETS, TIMEOUT, Net
from tests.helpers import wait_until


@pytest.fixture
def net(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[Net]:
    yield from Net.running(tmp_path, bus_env["PLUTO_ROBOT"])


def test_modules_see_each_other_only_through_the_router(net: Net) -> None:
    # The two sides cannot reach each other: no route from a to b.
    unreachable = subprocess.run(
        ["ip", "-n", net.names["a"], "route", "get", f"{SUBNETS['b']}.2"], capture_output=True, check=False
    )
    assert unreachable.returncode != 0

    router = net.start("r", "-m", "pluto", "router", "--listen", f"tcp/0.0.0.0:{ROUTER_PORT}")
    line = router.lines.get(timeout=TIMEOUT)
    assert line is not None and line.startswith("router listening"), router.stderr()

    watcher = net.start("b", str(PROBE), "watch", "heartbeat")
    heart = net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")
    watcher.wait_for_line("up", TIMEOUT)

    # A module in b that needs the one in a gets its beats across the router.
    net.start("b", "-m", "pluto", "run", "heartbeat-monitor")

    # A late joiner in b reads the newest beat of a.
    beat = msgspec.json.decode(net.run("b", str(PROBE), "read", "Heartbeat"))
    assert beat["source"] == "heartbeat"
    assert beat["seq"] >= 1

    # A module service of a answers a call from b.
    info = msgspec.json.decode(net.run("b", str(PROBE), "call", "mom/heartbeat"))
    assert info["name"] == "heartbeat"

    # pluto mom in b lists the modules of both sides.
    table = net.run("b", "-m", "pluto", "mom")
    modules = {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:] if line and not line[0].isspace()}
    assert {"heartbeat", "heartbeat-monitor"} <= set(modules), table
    assert modules["heartbeat"][2] == "Heartbeat", table  # what the module of a writes (PID, ACTIVE, INTERFACE)

    # And a probe in a reads what the module in b writes: it has counted beats of a.
    def monitor_counted_beats() -> bool:
        monitor = msgspec.json.decode(net.run("a", str(PROBE), "read", "Heartbeat/Monitor"))
        return bool(monitor["element"][0] > 0)

    wait_until(monitor_counted_beats, timeout=TIMEOUT, interval=0.2, message="the monitor in b counts beats of a")

    # A restart in a is seen in b: gone, then back.
    heart.proc.terminate()
    heart.proc.wait(TIMEOUT)
    watcher.wait_for_line("down", TIMEOUT)
    net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")
    watcher.wait_for_line("up", TIMEOUT)
    assert watcher.proc.wait(TIMEOUT) == 0, watcher.stderr()
