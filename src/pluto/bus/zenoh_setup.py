"""Zenoh as a Pluto process runs it: its runtime threads, its own log, and its errors in words a user reads.

Strategy: Zenoh is set up through its environment, once per process, before the first session opens (its runtime
threads through ``ZENOH_RUNTIME``, its Rust log through ``RUST_LOG`` or the level of Python's ``zenoh`` logger); what
a user sets wins. Zenoh's errors name places in its Rust sources and wrap endpoints in ``Single(...)``: a message
for a user says neither.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any

import zenoh

_zenoh_log_started = False

ZENOH_RUNTIME = (
    "(app: (worker_threads: 1, max_blocking_threads: 1), net: (worker_threads: 1, max_blocking_threads: 1),"
    " acc: (handover: net), rx: (handover: net), tx: (worker_threads: 1, max_blocking_threads: 1))"
)
"""Zenoh's runtime threads in a Pluto process (its ``ZENOH_RUNTIME`` variable; see
:meth:`pluto.bus.session.Bus._open`): one thread each for the application's tasks, for sending, and for the rest
of the network's work, receiving included (the receiving tasks on the network's thread: a sample no longer passes
from one thread to another on its way in, which took a tenth of a lock-step's time across processes). Sending
keeps a thread of its own: a callback that writes, on the receiving thread, may wait for room in the queue to a
peer, which only the sending thread makes (with sending on the same thread, it would wait for itself, and Zenoh
closes the link after 5 s: seen with ten robots of a process each starting at once)."""


ZENOH_QUIET = "error,zenoh::api::handlers=off"
"""Zenoh's own log unless asked for more: its errors, but not the one a reply handler logs when its receiver was
dropped before a late reply came ("sending on a closed channel": harmless, and printed before a command's output)."""


def zenoh_log_filter(level: int) -> str:
    """What Zenoh's own log (Rust's tracing, on stderr) shows in a process whose ``zenoh`` logger (Python's
    :mod:`logging`) has the effective level ``level``: Zenoh's debug lines at DEBUG (``pluto -vv``), its info at
    INFO, else only its errors (:data:`ZENOH_QUIET`). ``RUST_LOG`` set by the user wins."""
    if level <= logging.DEBUG:
        return "debug"
    if level <= logging.INFO:
        return "info"
    return ZENOH_QUIET


_RUST_SOURCE = re.compile(r"\s+at\s+\S+\.rs:\d+(:\d+)?\.?")
_SINGLE = re.compile(r"Single\(([^()]*)\)")


def zenoh_reason(err: BaseException) -> str:
    """Zenoh's error in words a user reads: without the places in Zenoh's Rust sources it names (``at
    /root/.cargo/.../orchestrator.rs:388``) and with its endpoint lists written plainly."""
    text = _SINGLE.sub(r"\1", _RUST_SOURCE.sub("", str(err))).strip()
    return text.rstrip(".") or type(err).__name__


def _start_zenoh_log() -> None:
    global _zenoh_log_started
    if not _zenoh_log_started:
        _zenoh_log_started = True
        with contextlib.suppress(Exception):
            zenoh.init_log_from_env_or(zenoh_log_filter(logging.getLogger("zenoh").getEffectiveLevel()))


def matching(status: Any) -> bool:
    """Whether a publisher's or a querier's matching status says that a subscriber or a queryable matches
    (zenoh-python's stubs call it a bool; it is a ``MatchingStatus``)."""
    return bool(getattr(status, "matching", status))
