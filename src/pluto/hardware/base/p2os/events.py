"""What the P2OS client tells its shell: its errors, its events and its counters.

The events are what :meth:`.client.P2osClient.next_event` hands out besides NEED_DATA, each a small frozen value that
says what the shell should do with its port (:class:`BaudRate`: change the rate; :class:`LinkLost` and
:class:`ConnectFailed`: close it; :class:`Reconnecting`: open it again) or that the link is up (:class:`Connected`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pluto.errors import PlutoError

__all__ = [
    "BaudRate",
    "ClientEvent",
    "ConnectFailed",
    "Connected",
    "LinkLost",
    "P2osConnectError",
    "P2osError",
    "P2osLinkError",
    "P2osStatistics",
    "P2osTimeout",
    "Reconnecting",
]


# --------------------------------------------------------------------------------------------------- errors


class P2osError(PlutoError):
    """Base of the P2OS client's and driver's errors."""


class P2osConnectError(P2osError):
    """The port could not be opened, or no robot completed the handshake on it."""


class P2osLinkError(P2osError):
    """Not connected to the robot (the link is down or being re-established), or a write to the port failed."""


class P2osTimeout(P2osError, TimeoutError):
    """The robot did not answer within the time allowed."""


# --------------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Connected:
    """The handshake is done: the link is up.

    Attributes:
        name, robot_class, subclass: what the robot's SYNC2 echo says.
        model: the subclass whose parameters are used.
        reconnection: True when this ends a reconnection after a link loss.
    """

    name: str
    robot_class: str
    subclass: str
    model: str
    reconnection: bool


@dataclass(frozen=True, slots=True)
class LinkLost:
    """The link is down: close the port (queued output was dropped).

    Attributes:
        reason: why, for a log line (``"no packet for 3.1 s"``, ``"read failed: ..."``).
        reconnecting: a :class:`Reconnecting` follows after a back-off.
    """

    reason: str
    reconnecting: bool


@dataclass(frozen=True, slots=True)
class ConnectFailed:
    """The handshake failed: close the port.

    Attributes:
        reason: a sentence for the user (``"no robot responding on ...: ..."``).
        reconnecting: this was a reconnection attempt; another follows after a longer back-off.
    """

    reason: str
    reconnecting: bool


@dataclass(frozen=True, slots=True)
class BaudRate:
    """Set the port to this baud rate before writing :meth:`P2osClient.data_to_send` (the robot did not answer at
    the previous one).

    Attributes:
        baud: bit/s.
    """

    baud: int


@dataclass(frozen=True, slots=True)
class Reconnecting:
    """Time for a reconnection attempt: open the port at ``baud``, then write :meth:`P2osClient.data_to_send` (the
    handshake's SYNC0 waits there); report a port that cannot be opened with :meth:`P2osClient.port_failed`.

    Attributes:
        attempt: 1 for the first attempt after the link loss.
        baud: bit/s to open the port at.
    """

    attempt: int
    baud: int


ClientEvent = Connected | LinkLost | ConnectFailed | BaudRate | Reconnecting
"""What :meth:`P2osClient.next_event` returns besides NEED_DATA."""


# --------------------------------------------------------------------------------------------------- counters


@dataclass(frozen=True, slots=True)
class P2osStatistics:
    """What the client has seen and done since it was created.

    Attributes:
        packets, bytes, bad_checksum, bad_length, garbage_bytes, unknown_type, malformed: the decoder's counters
            (see :class:`.decoder.DecoderStatistics`), summed over every connection attempt.
        sips: SIPs received.
        configs: CONFIGpacs received.
        connects: handshakes completed (the first connection and every reconnection).
        reconnects: reconnections after a link loss.
        link_losses: times the link was found dead (port error or `link_timeout` without a packet).
        stale_sessions: robots found still open from an earlier session (answered with CLOSE and a new handshake).
        command_timeouts: times the command timeout stopped the robot.
        keepalives: PULSEs sent.
        large_deltas: odometry steps longer than the robot could have travelled that the next SIP confirmed
            (applied: the counters did jump).
        dropped_sips: SIPs whose step was impossible and that the next SIP contradicted (damaged packets whose
            checksum happened to match; not used).
        handler_errors: packets whose handling failed (a client bug; logged with a traceback).
    """

    packets: int = 0
    bytes: int = 0
    bad_checksum: int = 0
    bad_length: int = 0
    garbage_bytes: int = 0
    unknown_type: int = 0
    malformed: int = 0
    sips: int = 0
    configs: int = 0
    connects: int = 0
    reconnects: int = 0
    link_losses: int = 0
    stale_sessions: int = 0
    command_timeouts: int = 0
    keepalives: int = 0
    large_deltas: int = 0
    dropped_sips: int = 0
    handler_errors: int = 0
