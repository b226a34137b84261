"""Subscription pacing and the request-rate limit, on times the test chooses."""

from __future__ import annotations

import numpy as np
import pytest

from pluto.gateways.xmlserver.pacing import Pacer, TokenBucket


def run(pacer: Pacer, arrivals: list[float], horizon: float) -> list[float]:
    """Send times of a subscription: a value arrives at each time in ``arrivals``; an update goes out when the
    pacer is ready and a value not yet sent is waiting (checked at each arrival and at the due time)."""
    sent: list[float] = []
    events = sorted(arrivals)
    waiting = False
    i = 0
    now = 0.0
    while now <= horizon:
        due = pacer.due if pacer.due is not None else now
        next_arrival = events[i] if i < len(events) else float("inf")
        now = min(next_arrival, due) if waiting else next_arrival
        if now > horizon:
            break
        if i < len(events) and events[i] == now:
            waiting = True
            i += 1
        if waiting and pacer.ready(now):
            pacer.sent(now)
            sent.append(now)
            waiting = False
    return sent


def test_a_faster_source_is_sent_at_the_requested_rate_exactly() -> None:
    arrivals = [k / 47 for k in range(1, 471)]  # 47 Hz for 10 s
    sent = run(Pacer(10.0), arrivals, 10.0)
    rate = (len(sent) - 1) / (sent[-1] - sent[0])
    # sending a period after each send (not on a grid) would wait for the 5th value each time: 47 / 5 = 9.4 Hz
    assert rate == pytest.approx(10.0, rel=0.01)
    assert all(gap > 0.1 - 1 / 47 for gap in np.diff(sent))  # never faster than the rate, but for the jitter


def test_a_source_at_the_requested_rate_loses_nothing_despite_jitter() -> None:
    rng = np.random.default_rng(1)
    arrivals = [0.2 * k + rng.uniform(-0.03, 0.03) for k in range(1, 101)]  # 5 Hz, ±30 ms of jitter
    sent = run(Pacer(5.0), arrivals, 25.0)
    assert len(sent) == 100


def test_a_slower_source_is_sent_as_it_comes() -> None:
    arrivals = [k * 0.5 for k in range(1, 21)]
    assert run(Pacer(10.0), arrivals, 11.0) == arrivals


def test_updates_held_up_by_a_busy_machine_are_caught_up() -> None:
    # 100 Hz values, held up now and then (a busy machine): each hold-up delivers those of the last 50 to 150 ms at once
    rng = np.random.default_rng(2)
    arrivals: list[float] = []
    held_until = 0.0
    for k in range(1, 1001):
        written = k / 100
        if written > held_until and rng.uniform() < 0.1:
            held_until = written + rng.uniform(0.05, 0.15)
        arrivals.append(max(written, held_until))
    sent = run(Pacer(25.0), arrivals, 10.0)
    # restarting the grid at each late update lost a part of a period each time (19.5 Hz here)
    assert (len(sent) - 1) / (sent[-1] - sent[0]) == pytest.approx(25.0, rel=0.02)
    assert min(np.diff(sent)) >= 0.02 - 1e-9  # caught up at twice the rate at most


def test_a_late_update_keeps_the_grid() -> None:
    pacer = Pacer(10.0)
    pacer.sent(0.0)
    pacer.sent(0.25)  # 0.15 s late: the next two (due at 0.2 and 0.3) go half a period apart, then the grid again
    assert not pacer.ready(0.29) and pacer.ready(0.3)
    pacer.sent(0.3)
    assert not pacer.ready(0.34) and pacer.ready(0.35)
    pacer.sent(0.35)
    assert pacer.due == pytest.approx(0.4)


def test_after_a_stall_there_is_no_burst() -> None:
    pacer = Pacer(10.0)
    assert pacer.ready(0.0)
    pacer.sent(0.0)
    assert not pacer.ready(0.05) and pacer.ready(0.1)
    pacer.sent(3.0)  # three seconds late
    assert not pacer.ready(3.05) and pacer.ready(3.1)


def test_pacer_refuses_bad_rates() -> None:
    for rate in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Pacer(rate)


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    bucket = TokenBucket(rate=10.0, burst=5)
    assert [bucket.take(0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    assert not bucket.take(0.05)
    assert bucket.take(0.1) and not bucket.take(0.1)
    allowed = sum(bucket.take(0.1 + k * 0.001) for k in range(1, 10_001))  # 10 s of requests at 1 kHz
    assert allowed == pytest.approx(100, abs=2)
    assert [bucket.take(100.0) for _ in range(6)] == [True] * 5 + [False]  # refills to the burst, no more
    with pytest.raises(ValueError):
        TokenBucket(rate=0.0, burst=5)


def test_a_clock_that_goes_back_does_not_wait_for_the_old_due_time() -> None:
    pacer = Pacer(10.0)
    pacer.sent(30.0)
    assert not pacer.ready(30.05)
    assert pacer.ready(0.0)  # the clock went back (a new simulation run): sent at once, not at 30.1 s
    pacer.sent(0.0)
    assert pacer.due == pytest.approx(0.1) and not pacer.ready(0.05)  # then at the rate again, on a new grid
    pacer.sent(0.1)
    pacer.restart()  # told of the jump: ready at once, even for a time the grid would have made wait
    assert pacer.due is None and pacer.ready(0.15)
