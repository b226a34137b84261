"""Closing what a program forgot to close, before the interpreter waits for its threads."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Protocol

__all__ = ["Closeable", "close_at_exit"]


class Closeable(Protocol):
    def close(self) -> None: ...


def close_at_exit(thing: Closeable) -> None:
    """Close ``thing`` when the program ends even if its owner forgot to (an uncaught exception, say).

    Zenoh and asyncio run work on threads that end only when their owner closes, and the interpreter waits for
    threads that are not daemons *before* ordinary ``atexit`` handlers run, so the hook must run earlier: where
    concurrent.futures registers its own (``threading._register_atexit``, whose hooks run last registered first, so
    a server made on a bus closes before the bus; no public API runs that early: docs/design.md, "Where Pluto leans on
    CPython"). Only a weak reference is kept: ``thing`` may go away before.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        return
    ref = weakref.ref(thing)

    def close() -> None:
        alive = ref()
        if alive is not None:
            alive.close()

    with contextlib.suppress(RuntimeError):  # registering while the interpreter already shuts down
        register(close)
