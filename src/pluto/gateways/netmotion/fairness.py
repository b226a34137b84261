"""Fair admission of datagrams, without I/O: a rate limit per sender, and a budget for the whole server that the
senders with datagrams waiting share equally.

    queue = FairQueue(budget=1000.0, budget_burst=200.0, rate=50.0, burst=100.0, depth=8, max_senders=1024)
    queue.offer(sender, datagram, now)          # False: dropped and counted, before anything parses it
    for sender, datagram in queue.take(now):    # what the budget allows now, one datagram per sender in turn
        handle(datagram, sender)
    queue.next_time()                           # when take() will have something again (None: nothing waits)

A sender (any hashable key: the host a datagram came from, so that a flood from many ports of one host is one sender)
may offer ``rate`` datagrams a second on average, ``burst`` at once; more are dropped at once. What it offers within
that waits in a queue of its own, at most ``depth`` datagrams (more are dropped). :meth:`FairQueue.take` hands out
``budget`` datagrams a second in all (``budget_burst`` at once), taking one datagram from each sender with datagrams
waiting in turn. So while ``n`` senders have datagrams waiting, each gets ``budget / n`` a second whatever the others
send: a sender within that share (and within its own rate), sending bursts of at most ``depth`` datagrams, is never
dropped, however hard the others flood. At most ``max_senders`` senders are tracked; the one heard from least recently
is forgotten first (its waiting datagrams are dropped).
"""

# Strategy: deficit round robin with a quantum of one datagram (every datagram costs the same share of the budget,
# so the deficit counters are always zero and DRR is plain round robin over the senders with datagrams waiting).
# The round is a deque of senders; a sender is in it exactly while its queue is not empty. Dropping is O(1) and
# happens in offer(), before the datagram is decoded: a flood costs the server a dictionary look-up and a
# comparison per datagram. A forgotten sender stays in the round until its turn comes (its queue is emptied at
# once, so its turn is skipped without spending budget); the round is compacted when such leftovers pile up, so a
# flood from ever new addresses cannot grow it without bound.

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class _Sender(Generic[T]):
    __slots__ = ("in_round", "last", "tokens", "waiting")

    def __init__(self, tokens: float, now: float) -> None:
        self.tokens = tokens
        self.last = now
        self.waiting: deque[T] = deque()
        self.in_round = False


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def _burst(name: str, value: float) -> float:
    if not (math.isfinite(value) and value >= 1.0):
        raise ValueError(f"{name} must be finite and >= 1 (a datagram), got {value}")
    return float(value)


class FairQueue(Generic[K, T]):
    """Per-sender rate limits and queues, and a global budget shared round robin (sans-I/O; not thread-safe).

    Args:
        budget: items per second :meth:`take` hands out in all, > 0.
        budget_burst: items :meth:`take` may hand out at once, >= 1.
        rate: items per second each sender may offer on average, > 0.
        burst: items a sender may offer at once, >= 1.
        depth: items that may wait per sender, >= 1.
        max_senders: senders tracked, >= 1.

    Raises:
        ValueError: a limit that is not finite or out of range.
    """

    def __init__(
        self,
        *,
        budget: float,
        budget_burst: float,
        rate: float,
        burst: float,
        depth: int,
        max_senders: int,
    ) -> None:
        self.budget = _positive("budget", budget)
        self.budget_burst = _burst("budget_burst", budget_burst)
        self.rate = _positive("rate", rate)
        self.burst = _burst("burst", burst)
        if depth < 1 or max_senders < 1:
            raise ValueError(f"depth and max_senders must be >= 1, got {depth} and {max_senders}")
        self.depth = depth
        self.max_senders = max_senders
        self._senders: OrderedDict[K, _Sender[T]] = OrderedDict()
        self._round: deque[tuple[K, _Sender[T]]] = deque()
        self._tokens = self.budget_burst
        self._last: float | None = None
        self._waiting = 0
        self.dropped = 0
        """Items dropped: over a sender's rate, over its queue's depth, or waiting when their sender was forgotten."""

    def __len__(self) -> int:
        """Items waiting."""
        return self._waiting

    @property
    def senders(self) -> int:
        """Senders tracked (heard from recently)."""
        return len(self._senders)

    @property
    def turns(self) -> int:
        """Turns in the round: one per sender with items waiting, and those of forgotten senders not skipped yet
        (the round's memory, bounded whatever comes)."""
        return len(self._round)

    @property
    def backlogged(self) -> int:
        """Senders with items waiting (the budget is shared between these)."""
        return sum(1 for _key, sender in self._round if sender.waiting)

    def offer(self, key: K, item: T, now: float) -> bool:
        """An item from sender ``key`` at ``now`` (s, any monotonic clock): True if it waits for :meth:`take`,
        False if it was dropped (over the sender's rate or queue; counted in :attr:`dropped`)."""
        sender = self._senders.get(key)
        if sender is None:
            sender = self._senders[key] = _Sender(self.burst, now)
            if len(self._senders) > self.max_senders:
                self._forget_oldest()
        else:
            self._senders.move_to_end(key)
            elapsed = now - sender.last
            sender.last = now
            if elapsed > 0.0:
                sender.tokens = min(self.burst, sender.tokens + elapsed * self.rate)
        if sender.tokens < 1.0 or len(sender.waiting) >= self.depth:
            self.dropped += 1
            return False
        sender.tokens -= 1.0
        sender.waiting.append(item)
        self._waiting += 1
        if not sender.in_round:
            sender.in_round = True
            self._round.append((key, sender))
        return True

    def take(self, now: float, limit: int | None = None) -> list[tuple[K, T]]:
        """The items the budget allows at ``now`` (at most ``limit``), one per sender in turn, oldest first."""
        self._refill(now)
        out: list[tuple[K, T]] = []
        round_ = self._round
        while round_ and self._tokens >= 1.0 and (limit is None or len(out) < limit):
            key, sender = round_.popleft()
            if not sender.waiting:  # forgotten while it waited
                sender.in_round = False
                continue
            out.append((key, sender.waiting.popleft()))
            self._waiting -= 1
            self._tokens -= 1.0
            if sender.waiting:
                round_.append((key, sender))
            else:
                sender.in_round = False
        return out

    def next_time(self) -> float | None:
        """When :meth:`take` will hand out an item (s, the clock of ``now``); None if nothing waits."""
        if not self._waiting:
            return None
        last = self._last if self._last is not None else -math.inf
        if self._tokens >= 1.0:
            return last
        return last + (1.0 - self._tokens) / self.budget

    def _refill(self, now: float) -> None:
        if self._last is None:
            self._last = now
            return
        elapsed = now - self._last
        self._last = now
        if elapsed > 0.0:
            self._tokens = min(self.budget_burst, self._tokens + elapsed * self.budget)

    def _forget_oldest(self) -> None:
        _key, sender = self._senders.popitem(last=False)
        if sender.waiting:
            self.dropped += len(sender.waiting)
            self._waiting -= len(sender.waiting)
            sender.waiting.clear()
        if len(self._round) > 2 * self.max_senders:
            kept = deque(entry for entry in self._round if entry[1].waiting)
            for _k, gone in self._round:
                if not gone.waiting:
                    gone.in_round = False
            self._round = kept
