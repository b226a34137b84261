"""Small helpers shared by the tests."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01, message: str = "") -> bool:
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


def free_tcp_port() -> int:
    """A loopback TCP port that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
