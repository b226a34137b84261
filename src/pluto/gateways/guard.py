"""Defences of a gateway's server against clients that misbehave: pure bookkeeping on times the caller passes in.

:class:`AuthLimiter` slows down the guessing of the token: after a wrong token, the next attempts from the same
address are refused unchecked for a back-off that doubles with each wrong token, up to a cap. :class:`LogLimiter`
keeps a flood of events from flooding the log: at most ``burst`` lines per key (an address) per interval, the events
in between counted and reported with the next line. Neither touches a clock, a socket or a logger: the server
passes the time (its loop's monotonic clock) and writes the lines. The XML server and the web view use both.
"""

# Strategy: both keep one small record per address in an insertion-ordered dict, moved to the end when used, so the
# record used longest ago is the first one dropped when the table is full; a flood from many addresses costs a
# bounded amount of memory, and what it forgets is only a back-off or a count of lines not logged. The back-off
# refuses rather than delays: a refused attempt costs the server nothing and holds nothing, and the reply says when
# the next attempt will be checked. A wrong token is only ever checked once the back-off has passed, so the guesses
# checked in a time T number at most 1 + log2(1 + T / base) before the cap, and one per cap after it.

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["AuthLimiter", "LogLimiter"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Failures:
    count: int  # wrong tokens since the address last succeeded (or was forgotten)
    last: float  # time of the last wrong token, s
    until: float  # time before which attempts are refused unchecked, s


class AuthLimiter:
    """Back-off of token attempts per client address.

    Args:
        base: back-off after the first wrong token, s; it doubles with each further one.
        cap: longest back-off, s.
        forget: an address with no wrong token for this long starts afresh, s.
        max_addresses: addresses remembered at most (the one heard from longest ago is forgotten first).

    Raises:
        ValueError: limits that are not positive, or a cap below the base.
    """

    def __init__(self, base: float = 0.5, cap: float = 30.0, forget: float = 600.0, max_addresses: int = 4096) -> None:
        if not (0.0 < base <= cap and math.isfinite(cap) and forget > 0.0 and max_addresses >= 1):
            raise ValueError(f"need 0 < base <= cap, forget > 0 and max_addresses >= 1, got {base}, {cap}, {forget}")
        self.base = base
        self.cap = cap
        self.forget = forget
        self.max_addresses = max_addresses
        self._failures: dict[str, _Failures] = {}

    def __len__(self) -> int:
        """Addresses with a back-off in memory."""
        return len(self._failures)

    def wait(self, address: str, now: float) -> float:
        """Seconds before an attempt from ``address`` will be checked: 0 if one may be checked at ``now`` (s)."""
        record = self._record(address, now)
        return max(0.0, record.until - now) if record is not None else 0.0

    def failed(self, address: str, now: float) -> float:
        """Note a wrong token from ``address`` at ``now`` (s); return the back-off before its next attempt, s."""
        record = self._record(address, now)
        if record is None:
            record = self._failures[address] = _Failures(0, now, now)
            while len(self._failures) > self.max_addresses:
                del self._failures[next(iter(self._failures))]
        else:
            self._failures[address] = self._failures.pop(address)  # the most recently used goes last
        record.count += 1
        record.last = now
        delay = min(self.cap, self.base * 2.0 ** min(record.count - 1, 64))
        record.until = now + delay
        return delay

    def succeeded(self, address: str) -> None:
        """Note a right token from ``address``: its back-off starts afresh."""
        self._failures.pop(address, None)

    def failures(self, address: str, now: float) -> int:
        """Wrong tokens from ``address`` that its back-off counts."""
        record = self._record(address, now)
        return record.count if record is not None else 0

    def _record(self, address: str, now: float) -> _Failures | None:
        record = self._failures.get(address)
        if record is not None and now - record.last >= self.forget and now >= record.until:
            del self._failures[address]
            return None
        return record


@dataclass(slots=True)
class _Lines:
    tokens: float  # lines that may be written now
    last: float  # time tokens were last counted, s
    held: int  # events since the last line, not logged


class LogLimiter(Generic[K]):
    """At most ``burst`` log lines per key in any ``interval``; the events in between are counted, not logged.

    A key earns ``burst`` lines per interval (a token bucket of ``burst`` lines): with ``burst=1`` two lines of a
    key are always at least ``interval`` apart. The count of the events held back is given with the next line of
    the key (:meth:`note`), or by :meth:`flush` once a line is due and no event came to carry it.

    Args:
        interval: s.
        burst: lines per interval.
        max_keys: keys remembered at most (the one used longest ago is forgotten first, with its count).

    Raises:
        ValueError: limits that are not positive.
    """

    def __init__(self, interval: float = 10.0, burst: int = 1, max_keys: int = 1024) -> None:
        if not (interval > 0.0 and math.isfinite(interval) and burst >= 1 and max_keys >= 1):
            raise ValueError(f"need interval > 0, burst >= 1 and max_keys >= 1, got {interval}, {burst}, {max_keys}")
        self.interval = interval
        self.burst = burst
        self.max_keys = max_keys
        self._keys: dict[K, _Lines] = {}

    def __len__(self) -> int:
        """Keys in memory."""
        return len(self._keys)

    def note(self, key: K, now: float) -> int | None:
        """An event of ``key`` at ``now`` (s): None if it is not to be logged, else the number of events of the key
        held back since its last line (to say with this one)."""
        lines = self._keys.pop(key, None)
        if lines is None:
            lines = _Lines(float(self.burst), now, 0)
            while len(self._keys) >= self.max_keys:
                del self._keys[next(iter(self._keys))]
        self._keys[key] = lines  # the most recently used goes last
        self._refill(lines, now)
        if lines.tokens < 1.0:
            lines.held += 1
            return None
        lines.tokens -= 1.0
        held, lines.held = lines.held, 0
        return held

    def flush(self, now: float) -> list[tuple[K, int]]:
        """The keys whose held-back events may be reported now, with their counts (each as one line); keys quiet
        for a whole interval are forgotten."""
        due: list[tuple[K, int]] = []
        for key, lines in list(self._keys.items()):
            self._refill(lines, now)
            if lines.held and lines.tokens >= 1.0:
                lines.tokens -= 1.0
                due.append((key, lines.held))
                lines.held = 0
            elif not lines.held and lines.tokens >= self.burst:
                del self._keys[key]
        return due

    def _refill(self, lines: _Lines, now: float) -> None:
        if now > lines.last:
            lines.tokens = min(float(self.burst), lines.tokens + (now - lines.last) * self.burst / self.interval)
            lines.last = now
