"""Pacing of subscriptions and limiting of request rates: pure arithmetic on times the caller passes in.

:class:`Pacer` decides when a subscription may send its next update so that a client gets at most the rate it asked
for on average (and, when values come faster, that rate exactly); :class:`TokenBucket` decides whether a connection
may make one more request.
"""

# Strategy: the pacer keeps a grid of due times, one period apart, rather than "one period after the last send":
# an update can only go out when a value arrives, so sending a period after the last send would add the wait for the
# next value to every period and a 10 Hz subscription to a 50 Hz interface would get about 8 Hz. On a grid the delays
# do not accumulate, and when values come at the requested rate every one of them is sent (one that arrives a little
# early waits for its due time instead of being skipped). The grid keeps its absolute times when an update goes out
# late (a busy machine: the server's loop or the values held up): the ones missed are caught up as new values come,
# each at least half a period after the one before, so the client gets the rate it asked for on average and never
# more than twice that. Restarting the grid at each late send instead lost a part of a period every time: a 25 Hz
# subscription got 20 Hz on a loaded machine. What falls more than CATCH_UP s (or a period, if longer) behind is
# given up: the grid restarts from now, so a long stall does not end in a long burst; so it does when the clock goes
# back (a new simulation run or a replay started again: :meth:`Pacer.restart`, or a time before the last send), else
# the new run would wait for the old run's due times. Times are plain floats in seconds from the caller's clock (the
# server's clock, simulated or not, for the pacer; a monotonic clock for the bucket).

from __future__ import annotations

import math

__all__ = ["CATCH_UP", "Pacer", "TokenBucket"]

CATCH_UP = 1.0
"""How far (s) the updates of a subscription may fall behind its grid and still be caught up."""


class Pacer:
    """When the updates of one subscription may be sent.

    Args:
        rate_hz: largest rate of updates, Hz.

    Raises:
        ValueError: the rate is not a positive finite number.
    """

    __slots__ = ("due", "grid", "period")

    def __init__(self, rate_hz: float) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0.0):
            raise ValueError(f"rate must be a positive number of Hz, got {rate_hz}")
        self.period = 1.0 / rate_hz
        self.due: float | None = None
        """Earliest time of the next update, s; None before the first one."""
        self.grid: float | None = None
        """The next update's time on the grid, s (earlier than :attr:`due` while late updates are caught up)."""

    def ready(self, now: float) -> bool:
        """True if an update may be sent at ``now`` (s): it is due, or the clock went back (``now`` is before the
        last update was sent)."""
        return self.due is None or now >= self.due or self._went_back(now)

    def restart(self) -> None:
        """Forget the grid (the clock went back): the next update may be sent at once."""
        self.due = self.grid = None

    def sent(self, now: float) -> None:
        """Record that an update was sent at ``now`` (s): the next is due one period after this one's time on the
        grid, but not before half a period from ``now`` (catching up); the grid restarts from ``now`` if this one
        was more than :data:`CATCH_UP` s (or a period) late, or the clock went back."""
        if self.grid is None or now - self.grid > max(CATCH_UP, self.period) or self._went_back(now):
            self.grid = now
        self.grid += self.period
        self.due = max(self.grid, now + 0.5 * self.period)

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
