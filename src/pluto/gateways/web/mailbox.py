"""Newest wins, per browser: what the server has for one browser and has not sent yet.

Strategy: a browser that reads slowly (a phone on Wi-Fi, a tab in the background) must neither hold up the others
nor make the server queue frames it will never catch up with. Each browser has a :class:`Mailbox` with one slot per
kind of message (``frame``, ``path``, ``mom``, ...): a new message replaces the one of its kind still waiting, and the
replaced one is counted as skipped. The browser's own sender takes the whole mailbox whenever it is free to send, so
a slow browser just gets fewer, newer frames, and its memory stays one message per kind. Messages are sent in the
order of their posting (the newest post of a kind counts).
"""

from __future__ import annotations

__all__ = ["Mailbox"]


class Mailbox:
    """One browser's waiting messages, the newest of each kind."""

    def __init__(self) -> None:
        self._slots: dict[str, str] = {}
        self.posted = 0
        """Messages posted."""
        self.skipped = 0
        """Messages replaced by a newer one of their kind before they were sent."""

    def post(self, kind: str, data: str) -> None:
        """Leave ``data`` for the browser, replacing a waiting message of the same kind."""
        if kind in self._slots:
            self.skipped += 1
            del self._slots[kind]  # re-insert: the order is that of the newest posts
        self._slots[kind] = data
        self.posted += 1

    def take(self) -> list[str]:
        """Every waiting message (oldest kind first), leaving the mailbox empty."""
        out = list(self._slots.values())
        self._slots.clear()
        return out

    def __len__(self) -> int:
        return len(self._slots)
