"""Small helpers shared by the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(
    predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01, message: str = ""
) -> bool:
    """Poll ``predicate`` until it returns something true; return True, or raise AssertionError after ``timeout`` s.

    Prefer an event (``StateReader.wait_for_update``, ``threading.Event``) where there is one; this is for state
    that nothing signals (counters, lists of live modules).
    """
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", repr(predicate))
            raise AssertionError(f"condition not met within {timeout} s: {what}")
        time.sleep(interval)
