"""The commands of a movement module's ``.../command`` interface, queued as they come for its control step."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from pluto import msgs


class CommandQueue:
    """Commands in the order they came: :meth:`put` on the bus's executor (the subscription's callback), :meth:`take`
    by the control step, which handles each one there, never on a bus thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[msgs.ActuatorState] = []

    def put(self, command: msgs.ActuatorState) -> None:
        with self._lock:
            self._items.append(command)

    def take(self) -> list[msgs.ActuatorState]:
        """Every command not taken yet, oldest first."""
        with self._lock:
            items, self._items = self._items, []
        return items

    def put_back(self, commands: Iterable[msgs.ActuatorState]) -> None:
        """Return commands that must wait to the front of the queue, before any that came meanwhile."""
        with self._lock:
            self._items[:0] = commands

    def clear(self) -> None:
        """Forget the commands not taken yet (the module starts again, or the time went back)."""
        with self._lock:
            self._items.clear()
