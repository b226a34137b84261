"""The NetworkMotionServer on a real socket under a flood from 100 source ports: a well-behaved client that asks,
waits for its reply and asks again is still served, and the server handles no more than its budget.

The flood is paced (200 datagrams/s from each of 100 ports: 20,000/s, four times what the per-client limits let
through and ten times the test's budget of 2,000/s) so that it saturates the budget on any machine, however busy,
without asking the server to read faster than a loaded machine can (the kernel's buffer holds half a second of it);
the client waits for each reply (2 s at most) instead of firing on a schedule. How the server shares its budget is
tested exactly, with an injected clock and 500,000 datagrams/s, in test_fairness.py.
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
def flood(address: tuple[str, int], sockets: int, rate: float) -> Iterator[list[int]]:
    """A flooder process sending PING from ``sockets`` ports, ``rate`` datagrams/s each, while the block runs; the
    list it yields holds the number of datagrams sent once the block has ended."""
    process = subprocess.Popen(
        [sys.executable, str(FLOODER), address[0], str(address[1]), str(sockets), str(rate)],
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


def test_a_flood_from_100_ports_leaves_a_well_behaved_client_served() -> None:
    budget, budget_burst = 2000.0, 100.0
    service = NetMotionService(StoppingArm(), ServerLimits(budget=budget, budget_burst=budget_burst))
    with UdpNetMotionServer(service, port=0) as server, Client(server.address, timeout=REPLY_WAIT) as client:
        start = time.monotonic()
        with flood(server.address, sockets=100, rate=200.0) as sent:
            wait_until(lambda: service.statistics().waiting > 0, timeout=30.0, message="the flood fills the queues")
            waits = []
            for i in range(REQUESTS):
                waits.append(ask(client, f"STOP {i}", f"STOPPED {i}\n", REPLY_WAIT))
                time.sleep(GAP)
        elapsed = time.monotonic() - start
    stats = service.statistics()
    served = [w for w in waits if w is not None]
    handled_flood = stats.commands - len(served)
    median = sorted(served)[len(served) // 2] if served else 0.0
    summary = (
        f"well-behaved client: {len(served)}/{REQUESTS} served ({len(served) / REQUESTS:.0%}), longest wait "
        f"{max(served, default=0.0) * 1000:.0f} ms, median {median * 1000:.0f} ms; flood: {sent[0]} datagrams "
        f"sent, {stats.datagrams} received by the server, {stats.rate_limited} dropped as rate-limited, "
        f"{handled_flood} handled; {stats.commands} commands in {elapsed:.1f} s with a budget of {budget:g}/s"
    )
    print(summary)
    assert len(served) >= 0.95 * REQUESTS, summary
    assert stats.commands <= budget * elapsed + budget_burst, summary
    assert stats.rate_limited > 0 and stats.failures == 0, summary
    assert handled_flood >= 0.25 * budget * elapsed, summary  # the flood did compete for the budget
