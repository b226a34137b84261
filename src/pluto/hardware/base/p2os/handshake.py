"""The P2OS handshake as data: each step, what it sends and awaits, for how long, and where it leads.

    table = handshake_table(timeout=0.5, tries=3)
    table["sync0"].sends      # ((Command.SYNC0, None),)
    table["sync0"].done       # "sync1"

:class:`.client.P2osClient` runs the table; this module holds the table itself, the phases the client can be in,
and the handshake's timing constants.
"""

# Strategy: the steps follow docs/protocols/p2os.md ("The session"): SYNC0, SYNC1, SYNC2, each with its own timeout
# and a few tries; a robot still open from an earlier session is sent CLOSE and drained until quiet; then OPEN,
# CONFIG until a CONFIGpac arrives (or CONFIG_WAIT), SETV/SETRV to the limits and ENABLE 1. The table is data so the
# order and the outcomes can be read (and tested) in one place, as h11's state machine is.

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from .packets import Command

__all__ = [
    "CONFIG_REPEAT",
    "CONFIG_WAIT",
    "DRAIN_LIMIT",
    "DRAIN_QUIET",
    "HANDSHAKE_PHASES",
    "MAX_STALE_SESSIONS",
    "SERIAL_BAUD_RATES",
    "Argument",
    "Awaited",
    "HandshakePhase",
    "HandshakeStep",
    "Outcome",
    "Phase",
    "handshake_table",
]

SERIAL_BAUD_RATES: tuple[int, ...] = (9600, 38400, 19200, 115200, 57600)
"""Baud rates tried, in this order, when a real serial port does not answer (as established clients do)."""
CONFIG_WAIT = 1.0
"""How long the handshake asks for a CONFIGpac before going on without it, s."""
CONFIG_REPEAT = 0.3
"""Time between two CONFIG requests while waiting for the CONFIGpac, s."""
DRAIN_QUIET = 0.15
"""After CLOSE to a stale session: quiet time (no packet) that ends the wait for the robot to stop sending, s."""
DRAIN_LIMIT = 1.0
"""After CLOSE to a stale session: the longest wait for the robot to stop sending, s."""
MAX_STALE_SESSIONS = 3
"""CLOSE-and-resync rounds at one baud rate before giving up on a robot that keeps sending SIPs."""

HandshakePhase = Literal["sync0", "sync1", "sync2", "drain", "open", "config", "enable"]
"""The steps of the handshake (see :func:`handshake_table`)."""
Phase = Literal[
    "idle", "sync0", "sync1", "sync2", "drain", "open", "config", "enable", "connected", "backoff", "closed"
]
"""Where the client is: idle (no link, nothing under way), a handshake step, connected, backoff (waiting to
reconnect after a link loss or a failed attempt) or closed (for good)."""
Awaited = Literal["echo", "quiet", "sip", "configpac", "motors"]
"""What ends a handshake step: the echo of the SYNC sent (a SIP or CONFIGpac instead means a session still open:
CLOSE and drain), the robot quiet for a try's time (each packet starts the try again), any SIP, a CONFIGpac, or a
SIP (the second of the try or later; at the end of the try the newest one) that shows the motors enabled or the
e-stop engaged."""
Outcome = Literal["sync0", "sync1", "sync2", "drain", "open", "config", "enable", "connected", "next_baud", "fail"]
"""Where a handshake step leads: a step, connected, the next baud rate (or failure after the last one), failure."""
Argument = int | None | Literal["max_velocity", "max_rot_velocity"]
"""A command's argument in the table: a number, none, or the speed limit (mm/s, deg/s) known at that point."""

HANDSHAKE_PHASES: frozenset[str] = frozenset(get_args(HandshakePhase))
"""The phases in which a handshake is under way."""


@dataclass(frozen=True, slots=True)
class HandshakeStep:
    """One step of the handshake.

    Attributes:
        sends: the commands sent on entering the step and again on each further try.
        awaits: what ends the step (see :data:`Awaited`).
        timeout: one try, s.
        tries: tries before the step is exhausted.
        limit: the longest the step may last, s, whatever the tries; None for no limit beyond them.
        done: where the step leads when what it awaits came.
        exhausted: where it leads when its tries (or its limit) are spent.
    """

    sends: tuple[tuple[Command, Argument], ...]
    awaits: Awaited
    timeout: float
    tries: int
    limit: float | None
    done: Outcome
    exhausted: Outcome


def handshake_table(timeout: float, tries: int) -> Mapping[HandshakePhase, HandshakeStep]:
    """The handshake as data: each step, what it sends and awaits, for how long, and where it leads.

    Args:
        timeout: time each SYNC, OPEN and ENABLE try waits for the robot's answer, s.
        tries: tries of each of them.

    Returns:
        A read-only mapping from the handshake's steps to their rules.
    """
    sync: Outcome = "next_baud"
    return MappingProxyType(
        {
            "sync0": HandshakeStep(((Command.SYNC0, None),), "echo", timeout, tries, None, "sync1", sync),
            "sync1": HandshakeStep(((Command.SYNC1, None),), "echo", timeout, tries, None, "sync2", sync),
            "sync2": HandshakeStep(((Command.SYNC2, None),), "echo", timeout, tries, None, "open", sync),
            "drain": HandshakeStep(((Command.CLOSE, 1),), "quiet", DRAIN_QUIET, 1, DRAIN_LIMIT, "sync0", "sync0"),
            "open": HandshakeStep(((Command.OPEN, 1),), "sip", timeout, tries, None, "config", "fail"),
            "config": HandshakeStep(
                ((Command.CONFIG, 1),),
                "configpac",
                CONFIG_REPEAT,
                math.ceil(CONFIG_WAIT / CONFIG_REPEAT),
                CONFIG_WAIT,
                "enable",
                "enable",
            ),
            "enable": HandshakeStep(
                ((Command.SETV, "max_velocity"), (Command.SETRV, "max_rot_velocity"), (Command.ENABLE, 1)),
                "motors",
                timeout,
                tries,
                None,
                "connected",
                "connected",
            ),
        }
    )
