"""The defences' bookkeeping on a clock the test sets: the back-off of token attempts and the limit of log lines."""

from __future__ import annotations

import itertools
import math

import pytest

from pluto.gateways.guard import AuthLimiter, LogLimiter


def test_the_back_off_doubles_up_to_its_cap_and_a_right_token_resets_it() -> None:
    limiter = AuthLimiter(base=0.5, cap=4.0)
    assert limiter.wait("10.0.0.1", 0.0) == 0.0
    delays = []
    now = 0.0
    for _ in range(6):
        assert limiter.wait("10.0.0.1", now) == 0.0
        delays.append(limiter.failed("10.0.0.1", now))
        assert limiter.wait("10.0.0.1", now) == delays[-1]
        assert limiter.wait("10.0.0.2", now) == 0.0  # another address is not slowed down
        now += delays[-1]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert limiter.failures("10.0.0.1", now) == 6
    limiter.succeeded("10.0.0.1")
    assert limiter.failures("10.0.0.1", now) == 0
    assert limiter.failed("10.0.0.1", now) == 0.5


def test_an_address_quiet_for_long_starts_afresh_and_memory_is_bounded() -> None:
    limiter = AuthLimiter(base=1.0, cap=8.0, forget=60.0, max_addresses=100)
    for _ in range(3):
        limiter.failed("a", 0.0)
    assert limiter.failures("a", 59.0) == 3
    assert limiter.failures("a", 60.0) == 0
    assert limiter.failed("a", 60.0) == 1.0
    for i in range(1000):
        limiter.failed(f"10.0.{i // 256}.{i % 256}", 61.0)
    assert len(limiter) == 100


def test_a_thousand_guesses_a_second_are_checked_a_handful_of_times_and_logged_once_per_interval() -> None:
    """An attacker reconnecting 2,000 times a second for a minute, each time with a wrong token."""
    limiter = AuthLimiter(base=0.5, cap=30.0)
    log: LogLimiter[str] = LogLimiter(interval=10.0, burst=1)
    checked: list[float] = []
    lines: list[tuple[float, int]] = []
    attempts = 120_000
    for i in range(attempts):
        now = i / 2000.0
        if limiter.wait("attacker", now) == 0.0:
            checked.append(now)
            limiter.failed("attacker", now)
        held = log.note("attacker", now)
        if held is not None:
            lines.append((now, held))
        if i % 200 == 0:  # the server flushes on a timer
            lines += [(now, count) for _, count in log.flush(now)]
    seconds = attempts / 2000.0
    # checks at 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s: then one every 30 s
    assert checked == [0.0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5], checked
    assert len(checked) <= 1 + math.log2(1 + seconds / 0.5)
    assert max(sum(1 for t in checked if start <= t < start + 1.0) for start in checked) <= 2  # in any second
    # one line a 10 s at most, carrying the count of what it did not log one by one
    assert len(lines) == 6, lines
    assert all(later - earlier >= 10.0 for (earlier, _), (later, _) in itertools.pairwise(lines))
    assert lines[0] == (0.0, 0)
    assert sum(count for _, count in lines) + len(lines) + sum(c for _, c in log.flush(1e9)) == attempts


def test_log_lines_come_in_bursts_then_once_in_a_while_with_a_count() -> None:
    log: LogLimiter[str] = LogLimiter(interval=10.0, burst=3)
    assert [log.note("a", 0.0) for _ in range(5)] == [0, 0, 0, None, None]
    assert log.note("b", 0.0) == 0  # keys are apart
    assert log.flush(1.0) == []  # no line is due yet
    assert log.flush(3.4) == [("a", 2)]  # a line is due every 10 / 3 s: the two held back
    assert log.note("a", 3.5) is None
    assert log.note("a", 7.0) == 1
    assert log.flush(100.0) == []
    assert len(log) == 0  # quiet keys are forgotten


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        AuthLimiter(base=0.0)
    with pytest.raises(ValueError):
        AuthLimiter(base=10.0, cap=1.0)
    with pytest.raises(ValueError):
        LogLimiter(interval=0.0)
    with pytest.raises(ValueError):
        LogLimiter(burst=0)
