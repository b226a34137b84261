"""Fair sharing of the server's budget, without sockets: the fair queue on its own, and the server core driven by an
injected clock with a synthetic flood (from 100 hosts, or from 2,000 ports of one host) beside a well-behaved client
on a host of its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from pluto.gateways.netmotion.fairness import FairQueue
from pluto.gateways.netmotion.module import NetMotionParams
from pluto.gateways.netmotion.server import Address, NetMotionService, ServerLimits
from tests.gateways.netmotion.test_service import FakeArm

UNLIMITED = 1e9  # a per-sender rate or burst that never drops anything


def fair_queue(**limits: float) -> FairQueue[str, int]:
    settings: dict[str, float] = {
        "budget": 10.0,
        "budget_burst": 10.0,
        "rate": UNLIMITED,
        "burst": UNLIMITED,
        "depth": 8,
        "max_senders": 64,
        **limits,
    }
    return FairQueue(
        budget=settings["budget"],
        budget_burst=settings["budget_burst"],
        rate=settings["rate"],
        burst=settings["burst"],
        depth=int(settings["depth"]),
        max_senders=int(settings["max_senders"]),
    )


def test_senders_are_served_in_turn() -> None:
    queue = fair_queue()
    for sender, count in (("a", 3), ("b", 2), ("c", 1)):
        for i in range(count):
            assert queue.offer(sender, i, 0.0)
    assert len(queue) == 6 and queue.backlogged == 3
    assert queue.take(0.0) == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1), ("a", 2)]
    assert len(queue) == 0 and queue.next_time() is None


def test_the_budget_refills_at_its_rate() -> None:
    queue = fair_queue(budget=8.0, budget_burst=2.0)  # times in eighths of a second: exact sums
    for i in range(5):
        queue.offer("a", i, 0.0)
    assert queue.take(0.0) == [("a", 0), ("a", 1)]
    assert queue.next_time() == 0.125
    assert queue.take(0.0625) == []
    assert queue.take(0.125) == [("a", 2)]
    assert queue.take(0.375, limit=1) == [("a", 3)]  # two tokens back, one taken
    assert queue.next_time() == 0.375
    assert queue.take(0.375) == [("a", 4)]
    assert queue.dropped == 0


def test_drops_over_a_senders_rate_or_queue_are_counted() -> None:
    queue = fair_queue(budget=1.0, budget_burst=1.0, rate=10.0, burst=3.0, depth=2)
    assert [queue.offer("a", i, 0.0) for i in range(4)] == [True, True, False, False]  # the queue holds 2
    assert queue.take(0.0) == [("a", 0)]
    assert queue.offer("a", 4, 0.0)  # the third token of the burst
    assert not queue.offer("a", 5, 0.0)  # no token left (nor room)
    assert queue.dropped == 3
    assert queue.take(1.0) == [("a", 1)]
    assert queue.offer("a", 6, 1.0)  # the rate gave tokens back
    assert queue.dropped == 3


def test_a_sender_within_its_share_is_never_dropped_while_others_flood() -> None:
    """10 senders offer all they can; one offers bursts of the queue's depth, within its share of the budget."""
    budget, depth, flooders = 100.0, 4, 10
    queue = fair_queue(budget=budget, budget_burst=5.0, depth=depth)
    share = budget / (flooders + 1)  # datagrams per second each sender gets while all have some waiting
    period = depth / share  # one burst of `depth` every `period` s is exactly the share
    served: dict[str, int] = {}
    offered_good = dropped_good = 0
    next_burst = 0.0
    for tick in range(20_000):  # 20 s in steps of 1 ms
        now = tick * 1e-3
        for f in range(flooders):
            for _ in range(5):
                queue.offer(f"flood{f}", tick, now)
        if now >= next_burst:
            next_burst += period
            for _ in range(depth):
                offered_good += 1
                dropped_good += not queue.offer("good", tick, now)
        for sender, _item in queue.take(now):
            served[sender] = served.get(sender, 0) + 1
    assert dropped_good == 0, f"{dropped_good} of {offered_good} dropped"
    assert served["good"] >= offered_good - depth  # all but the last burst, which may still wait
    flood = [served[f"flood{f}"] for f in range(flooders)]
    assert max(flood) - min(flood) <= 1, flood
    assert sum(served.values()) == pytest.approx(budget * 20.0, abs=10.0)  # the budget, all used


def test_forgotten_senders_drop_what_waits_and_the_round_stays_bounded() -> None:
    queue = fair_queue(budget=1.0, budget_burst=1.0, max_senders=4)
    queue.offer("first", 0, 0.0)
    assert queue.take(0.0) == [("first", 0)]  # the only token spent: everything offered now waits
    for n in range(1000):  # a flood from ever new addresses
        assert queue.offer(f"s{n}", n, 0.0)
    assert queue.senders == 4 and len(queue) == 4
    assert queue.dropped == 996
    assert queue.turns <= 2 * 4 + 1
    assert queue.take(1.0) == [("s996", 996)]  # a forgotten sender's turn is skipped without spending the budget


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("budget", math.nan),
        ("budget", math.inf),
        ("budget", 0.0),
        ("rate", -1.0),
        ("budget_burst", 0.5),
        ("burst", math.inf),
        ("depth", 0),
        ("max_senders", 0),
    ],
)
def test_limits_are_validated(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        fair_queue(**{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("budget", math.nan),
        ("budget", -5.0),
        ("budget_burst", 0.0),
        ("rate", math.inf),
        ("burst", 0.9),
        ("queue", 0),
    ],
)
def test_server_limits_are_validated(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        ServerLimits(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("budget_rate", math.nan),
        ("budget_rate", 0.0),
        ("budget_burst", math.inf),
        ("budget_burst", 0.5),
        ("client_rate", -math.inf),
        ("client_burst", 0.0),
        ("client_queue", 0),
        ("receive_buffer", -1),
    ],
)
def test_module_parameters_are_validated(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        NetMotionParams(**{name: value})  # type: ignore[arg-type]


# -- the server core under a synthetic flood --------------------------------------------------------------------


@dataclass
class Run:
    """What a simulated flood run saw."""

    asked: int = 0
    answered: int = 0
    worst: float = 0.0  # longest wait of the good client for its reply, s
    flooded: int = 0  # datagrams the flooders sent
    served: dict[Address, int] = field(default_factory=dict)  # replies per flooder
    waits: list[float] = field(default_factory=list)  # the good client's wait for each reply, s


def flood_hosts(count: int) -> list[Address]:
    """One address on each of ``count`` hosts (loopback addresses: 127.1.0.1, 127.1.0.2, ...)."""
    return [(f"127.1.{i // 250}.{i % 250 + 1}", 50000) for i in range(count)]


def flood_ports(count: int) -> list[Address]:
    """``count`` ports of one host, 127.0.0.1."""
    return [("127.0.0.1", 50000 + i) for i in range(count)]


def flood_run(
    service: NetMotionService,
    flooders: list[Address],
    flood_rate: float,
    duration: float,
    gap: float,
    tick: float = 1e-3,
) -> Run:
    """Drive ``service`` as the UDP shell does, on a simulated clock in steps of ``tick`` s: every flooder address
    sends ``flood_rate`` datagrams a second; the good client (127.0.0.2) sends PING, waits for PONG, waits ``gap`` s,
    sends again. Each datagram is offered as it arrives, admitted ones are served at once, and waiting ones when the
    service says the budget allows."""
    run = Run()
    good: Address = ("127.0.0.2", 40000)
    ports = flooders
    per_tick = flood_rate * tick
    owed = 0.0
    asked_at: float | None = None
    next_ask = 0.0

    def deliver(now: float) -> None:
        nonlocal asked_at, next_ask
        for address, reply in service.serve(now):
            if address == good:
                assert reply == b"PONG\n" and asked_at is not None
                run.answered += 1
                run.worst = max(run.worst, now - asked_at)
                run.waits.append(now - asked_at)
                asked_at, next_ask = None, now + gap
            else:
                run.served[address] = run.served.get(address, 0) + 1

    for step in range(round(duration / tick)):
        now = step * tick
        owed += per_tick
        for _ in range(int(owed)):
            owed -= 1.0
            for port in ports:
                run.flooded += 1
                if service.receive(b"PING", port, now):
                    deliver(now)
        if asked_at is None and now >= next_ask:
            run.asked += 1
            asked_at = now
            if service.receive(b"PING", good, now):
                deliver(now)
        due = service.next_serve_time()
        if due is not None and due <= now:
            deliver(now)
    return run


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(50.0, 100.0), (UNLIMITED, UNLIMITED)],
    ids=["per-client-limit", "budget-only"],
)
def test_a_flood_from_100_hosts_does_not_starve_a_well_behaved_client(rate: float, burst: float) -> None:
    """100 hosts at 5,000 datagrams/s each (500,000/s) for 2 s beside a client that asks, waits for the reply and
    asks again 20 ms later: every request is answered within one round of the hosts with datagrams waiting, the
    server handles no more than its budget, and the flooders share the rest equally."""
    budget, budget_burst, flooders, duration = 2000.0, 100.0, 100, 2.0
    limits = ServerLimits(rate=rate, burst=burst, budget=budget, budget_burst=budget_burst, queue=8)
    service = NetMotionService(FakeArm(), limits)
    run = flood_run(service, flood_hosts(flooders), flood_rate=5000.0, duration=duration, gap=0.02)
    stats = service.statistics()
    handled = sum(run.served.values()) + run.answered
    summary = (
        f"good client: {run.answered}/{run.asked} answered, longest wait {run.worst * 1000:.0f} ms; flood: "
        f"{run.flooded} sent, {sum(run.served.values())} answered, {stats.rate_limited} dropped; "
        f"{handled} handled in {duration:g} s of budget {budget:g}/s"
    )
    print(summary)
    assert run.asked >= 20, summary
    assert run.answered >= run.asked - 1, summary  # the last request may still wait when the run ends
    assert run.worst <= (flooders + 1) / budget + 2e-3, summary  # one datagram per sender ahead of it at most
    assert handled <= budget * duration + budget_burst, summary
    assert handled >= budget * duration * 0.99, summary  # the flood did saturate the budget
    flood = sorted(run.served.values())
    assert len(flood) == flooders and flood[-1] - flood[0] <= 1, summary
    assert stats.datagrams == run.flooded + run.asked, summary
    assert stats.rate_limited + stats.commands + stats.waiting == stats.datagrams, summary


def test_a_flood_from_2000_ports_of_one_host_is_one_sender() -> None:
    """2,000 ports of 127.0.0.1 at 50 datagrams/s each (100,000/s) for 2 s, with the default limits, beside a
    client on 127.0.0.2 that asks, waits for the reply and asks again 20 ms later: the flood is one host, held to
    its rate and to one share of the budget, so every request is answered as soon as it arrives or after one of the
    flood's datagrams at most; the server tracks two hosts."""
    limits = ServerLimits()
    service = NetMotionService(FakeArm(), limits)
    duration = 2.0
    run = flood_run(service, flood_ports(2000), flood_rate=50.0, duration=duration, gap=0.02)
    stats = service.statistics()
    flood = sum(run.served.values())
    summary = (
        f"good client: {run.answered}/{run.asked} answered, longest wait {run.worst * 1000:.1f} ms; flood: "
        f"{run.flooded} sent, {flood} answered, {stats.rate_limited} dropped"
    )
    print(summary)
    assert run.asked >= 50, summary
    assert run.answered >= run.asked - 1, summary  # the last request may still wait when the run ends
    assert run.worst <= 2.0 / limits.budget + 2e-3, summary  # one flood datagram ahead of it at most
    assert flood <= limits.rate * duration + limits.burst, summary  # the host's rate, whatever its ports
    assert service.clients == 2, summary
    assert stats.rate_limited + stats.commands + stats.waiting == stats.datagrams, summary
