"""The NetworkMotionServer on a real socket under a flood: a well-behaved client on a host of its own (127.0.0.2)
that asks, waits for its reply and asks again is still served, whether the flood comes from 100 hosts (which share
the budget with it) or from 2,000 ports of one host (which count as one client), and the server handles no more than
its budget.

The floods are paced (20,000 datagrams/s: 200/s from each of 100 hosts, or 10/s from each of 2,000 ports) so that
they exceed what the limits let through on any machine, however busy, without asking the server to read faster than
a loaded machine can (the kernel's buffer holds a good part of a second of it); the client waits for each reply
(2 s at most) instead of firing on a schedule. The tests print the client's median and 95th-percentile waits; they
assert shares, not times. How the server shares its budget is tested exactly, with an injected clock and 500,000
datagrams/s, in test_fairness.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pluto.gateways.netmotion.server import NetMotionService, ServerLimits, UdpNetMotionServer
from tests.gateways.netmotion.test_service import FakeArm
from tests.gateways.netmotion.udp import Client
from tests.helpers import wait_until

FLOODER = Path(__file__).with_name("flooder.py")
REQUESTS = 100
REPLY_WAIT = 2.0
"""s the client waits for a reply before it counts the request as not served (one round of the budget is 50 ms)."""
GAP = 0.01
"""s between a reply and the next request."""


class StoppingArm(FakeArm):
    """Every STOP succeeds: ``STOP <n>`` is answered ``STOPPED <n>``, so a late reply cannot pass for another's."""

    def stop_motion(self, motion_id: int) -> bool:
        return True


@contextmanager
def flood(address: tuple[str, int], sockets: int, rate: float, hosts: int = 1) -> Iterator[list[int]]:
    """A flooder process sending PING from ``sockets`` ports spread over ``hosts`` source hosts (127.0.0.1 alone,
    or 127.1.0.1, 127.1.0.2, ...), ``rate`` datagrams/s each, while the block runs; the list it yields holds the
    number of datagrams sent once the block has ended."""
    process = subprocess.Popen(
        [sys.executable, str(FLOODER), address[0], str(address[1]), str(sockets), str(rate), str(hosts)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    sent: list[int] = []
    try:
        assert process.stdout.readline() == "ready\n"
        yield sent
    finally:
        process.stdin.close()
        try:
            out = process.stdout.read()
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        sent.append(int(out.split()[-1]) if out.startswith("sent ") else 0)


def ask(client: Client, request: str, expected: str, wait: float) -> float | None:
    """Send ``request`` and wait for ``expected`` (other datagrams, late replies, are skipped): the time it took,
    or None if it did not come within ``wait`` s."""
    start = time.monotonic()
    client.send(request)
    deadline = start + wait
    try:
        while (left := deadline - time.monotonic()) > 0:
            client.sock.settimeout(left)
            if client.recv() == expected:
                return time.monotonic() - start
    except TimeoutError:
        pass
    finally:
        client.sock.settimeout(REPLY_WAIT)
    return None


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (0 for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def served_while_flooded(
    service: NetMotionService, server: UdpNetMotionServer, sockets: int, rate: float, hosts: int
) -> tuple[list[float | None], list[int], float]:
    """Flood ``server`` (``sockets`` ports over ``hosts`` hosts, ``rate`` datagrams/s each) while a client on
    127.0.0.2 asks REQUESTS times (or until more than 5 % are not answered): its waits (None: not answered within
    REPLY_WAIT), the datagrams the flooder sent, and the seconds the flood lasted."""
    with Client(server.address, timeout=REPLY_WAIT, source="127.0.0.2") as client:
        start = time.monotonic()
        with flood(server.address, sockets=sockets, rate=rate, hosts=hosts) as sent:
            wait_until(
                lambda: service.statistics().rate_limited > sockets,
                timeout=30.0,
                message="the flood goes over the limits",
            )
            waits = []
            for i in range(REQUESTS):
                waits.append(ask(client, f"STOP {i}", f"STOPPED {i}\n", REPLY_WAIT))
                if waits.count(None) > REQUESTS // 20:  # more than 5 % unanswered: the verdict is in
                    break
                time.sleep(GAP)
        elapsed = time.monotonic() - start
    return waits, sent, elapsed


def summary(waits: list[float | None], sent: list[int], elapsed: float, service: NetMotionService) -> str:
    stats = service.statistics()
    served = [w for w in waits if w is not None]
    return (
        f"well-behaved client: {len(served)} of {REQUESTS} requests served ({len(served) / REQUESTS:.0%}; "
        f"{len(waits)} asked), median wait "
        f"{percentile(served, 0.5) * 1000:.1f} ms, 95th percentile {percentile(served, 0.95) * 1000:.1f} ms, "
        f"longest {max(served, default=0.0) * 1000:.0f} ms; flood: {sent[0]} datagrams sent, {stats.datagrams} "
        f"received by the server, {stats.rate_limited} dropped as rate-limited, {stats.commands - len(served)} "
        f"handled; {stats.commands} commands in {elapsed:.1f} s with a budget of {service.limits.budget:g}/s"
    )


def test_a_flood_from_100_hosts_leaves_a_well_behaved_client_served() -> None:
    budget, budget_burst = 2000.0, 100.0
    service = NetMotionService(StoppingArm(), ServerLimits(budget=budget, budget_burst=budget_burst))
    with UdpNetMotionServer(service, port=0) as server:
        waits, sent, elapsed = served_while_flooded(service, server, sockets=100, rate=200.0, hosts=100)
    stats = service.statistics()
    served = [w for w in waits if w is not None]
    handled_flood = stats.commands - len(served)
    report = summary(waits, sent, elapsed, service)
    print(report)
    assert len(served) >= 0.95 * REQUESTS, report
    assert stats.commands <= budget * elapsed + budget_burst, report
    assert stats.rate_limited > 0 and stats.failures == 0, report
    assert handled_flood >= 0.25 * budget * elapsed, report  # the flood did compete for the budget


def test_a_flood_from_2000_ports_of_one_host_leaves_a_client_on_another_host_served() -> None:
    """The flood's 2,000 ports are one client host: it gets its host's rate (50 datagrams/s) and one share of the
    budget, and the client on 127.0.0.2 is answered (the default limits)."""
    limits = ServerLimits()
    service = NetMotionService(StoppingArm(), limits)
    with UdpNetMotionServer(service, port=0) as server:
        waits, sent, elapsed = served_while_flooded(service, server, sockets=2000, rate=10.0, hosts=1)
    stats = service.statistics()
    served = [w for w in waits if w is not None]
    report = summary(waits, sent, elapsed, service)
    print(report)
    assert len(served) >= 0.95 * REQUESTS, report
    assert stats.commands - len(served) <= limits.rate * elapsed + limits.burst, report  # one host's rate
    assert stats.rate_limited > 0 and stats.failures == 0, report
