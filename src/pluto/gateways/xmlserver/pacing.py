"""Pacing of subscriptions and limiting of request rates: pure arithmetic on times the caller passes in.

:class:`Pacer` decides when a subscription may send its next update so that a client gets at most the rate it asked
for (and, when values come faster, that rate exactly); :class:`TokenBucket` decides whether a connection may make
one more request.
"""

# Strategy: the pacer keeps a grid of due times, one period apart, rather than "one period after the last send":
# an update can only go out when a value arrives, so sending a period after the last send would add the wait for the
# next value to every period and a 10 Hz subscription to a 50 Hz interface would get about 8 Hz. On a grid the delays
# do not accumulate, and when values come at the requested rate every one of them is sent (one that arrives a little
# early waits for its due time instead of being skipped). After a stall of more than a period the grid restarts from
# now, so a client never receives a burst to catch up; so it does when the clock goes back (a new simulation run or a
# replay started again: :meth:`Pacer.restart`, or a time before the last send), else the new run would wait for the
# old run's due times. Times are plain floats in seconds from the caller's clock (the server's clock, simulated or
# not, for the pacer; a monotonic clock for the bucket).

from __future__ import annotations

import math

__all__ = ["Pacer", "TokenBucket"]


class Pacer:
    """When the updates of one subscription may be sent.

    Args:
        rate_hz: largest rate of updates, Hz.

    Raises:
        ValueError: the rate is not a positive finite number.
    """

    __slots__ = ("due", "period")

    def __init__(self, rate_hz: float) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0.0):
            raise ValueError(f"rate must be a positive number of Hz, got {rate_hz}")
        self.period = 1.0 / rate_hz
        self.due: float | None = None
        """Earliest time of the next update, s; None before the first one."""

    def ready(self, now: float) -> bool:
        """True if an update may be sent at ``now`` (s): it is due, or the clock went back (``now`` is before the
        last update was sent)."""
        return self.due is None or now >= self.due or self._went_back(now)

    def restart(self) -> None:
        """Forget the grid (the clock went back): the next update may be sent at once."""
        self.due = None

    def sent(self, now: float) -> None:
        """Record that an update was sent at ``now`` (s): the next is due one period after this one's due time, or
        one period after ``now`` if that is more than a period late (or the clock went back)."""
        if self.due is None or now - self.due > self.period or self._went_back(now):
            self.due = now
        self.due += self.period

    def _went_back(self, now: float) -> bool:
        # The due time is at most a period after the last send: a time more than two periods before it is earlier
        # than that send, so the clock went back (a new simulation run, a replay started again).
        return self.due is not None and now < self.due - 2.0 * self.period


class TokenBucket:
    """A request-rate limit: ``rate`` requests a second on average, bursts of up to ``burst``.

    Args:
        rate: sustained requests a second.
        burst: requests allowed at once (the bucket's size).

    Raises:
        ValueError: a limit that is not positive.
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        if not (rate > 0.0 and burst >= 1.0):
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate} and {burst}")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last: float | None = None

    def take(self, now: float) -> bool:
        """Spend one token at ``now`` (s); False (and nothing spent) if the bucket is empty."""
        if self._last is not None and now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        if self._last is None or now > self._last:
            self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
