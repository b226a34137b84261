"""The NetworkMotionServer: UDP clients in, the arm's motion service behind, replies to the client that asked.

:class:`NetMotionService` is the server without sockets: :meth:`~NetMotionService.receive` takes a datagram (or
drops it at once), :meth:`~NetMotionService.serve` handles what the budget allows and returns the datagrams to send,
and :meth:`NetMotionService.motion_response` turns a motion-manager event into the datagram for the client that owns
the motion. :class:`UdpNetMotionServer` runs it on a UDP socket served by an asyncio loop in a thread of its own
(:class:`pluto.gateways.serving.ServerRunner`).

Limits against hostile clients (:class:`ServerLimits`) are kept per client *host* (its IP address, whatever the
source port: ports cost an attacker nothing, addresses do): datagrams over ``max_datagram`` bytes are dropped; each
host may send ``rate`` datagrams per second (bursts of ``burst``) from all its ports together; the server handles
``budget`` datagrams per second in all (bursts of ``budget_burst``), shared equally by the hosts with datagrams
waiting: each host's datagrams wait in a queue of their own (at most ``queue``) and the hosts are served in turn,
one datagram each, and every reply goes to the port that asked. So a flood from one host, from however many ports,
gets one share of the budget and ``rate`` datagrams a second, and cannot starve a client on another host that stays
within its share (``budget`` / hosts sending); what is over a limit is dropped before it is parsed and counted as
rate-limited. Clients behind one address (one computer, or a NAT) share its rate and its share. At most
``max_clients`` hosts are tracked (the longest idle is forgotten first). Nothing a client sends can stop the
server: a failure while handling a command is answered with ``ERR``, counted and logged.
"""

# Strategy: the reference server used an epoll service thread; asyncio's event loop is its modern form, and the loop
# runs in its own thread so that the module's control step (the motion manager, on the module's clock) never waits on
# the network. The socket is read in batches until it is empty (DatagramListener's read_batch), and each datagram goes
# through the fair queue (fairness.py) at once, keyed by its source host and carrying its source port along for the
# reply: a datagram over its host's share is dropped for the price of a dictionary look-up, so the server drains the
# kernel's buffer faster than a flood fills it, and the buffer is made large (SO_RCVBUF) to ride out the moments the
# thread does not run. Datagrams within the budget are handled as they are read, so `MOTMANREG <id>` is sent before the
# next datagram is handled (reference: "dispatched before the server reenters the command loop"); datagrams that wait
# for the budget are handled by a timer when it allows. Motion events come from the control thread through the runner's
# call_soon, which queues them behind the callback that is running: a motion's MOTMANRESP can never overtake its
# MOTMANREG. Replies the socket cannot take at once wait in order in the transport, bounded, for the socket to be
# writable.

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, cast

import numpy as np
from numpy.typing import NDArray

from pluto.errors import PlutoError
from pluto.gateways.netmotion.codec import (
    MAX_COORDINATE_MM,
    MAX_DATAGRAM,
    NEED_DATA,
    BadCommand,
    Command,
    CommandDecoder,
    ErrorReply,
    ForwardKinematics,
    ForwardKinematicsReply,
    GetJoints,
    JointValues,
    ListMotions,
    MotionList,
    MotionRegistered,
    MotionResponse,
    Ping,
    PointIK,
    Pong,
    Reply,
    RunMotion,
    StopMotion,
    Stopped,
    encode,
)
from pluto.gateways.netmotion.fairness import FairQueue
from pluto.gateways.serving import DatagramListener, ServerRunner

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_RECEIVE_BUFFER",
    "Address",
    "MotionService",
    "NetMotionService",
    "ServerLimits",
    "ServerStatistics",
    "UdpNetMotionServer",
]

log = logging.getLogger("pluto.netmotion")

DEFAULT_PORT = 15000
"""The NetworkMotionServer's UDP port."""
DEFAULT_RECEIVE_BUFFER = 4 * 1024 * 1024
"""Kernel receive buffer asked for the socket, bytes (Linux grants at most ``net.core.rmem_max``)."""
READ_BATCH = 256
"""Most datagrams read from the socket per turn of the loop (then other callbacks get their turn)."""
SERVE_BATCH = 64
"""Most waiting datagrams handled per callback of the timer."""
MAX_TARGET = MAX_COORDINATE_MM * 1e-3
"""Largest IKP coordinate handed to the arm, m (the decoder refuses larger ones; checked again where it leaves)."""
MAX_SEND_BACKLOG = 256 * 1024
"""Most bytes of replies kept waiting for the socket to be writable; more are dropped (and counted)."""

Address = tuple[Any, ...]
"""A client's address as the socket gives it ((host, port) for IPv4); its host (``address[0]``) is what the limits
count by."""


class MotionService(Protocol):
    """What the server asks of the arm (the netmotion module implements it; every method is thread-safe)."""

    def forward_kinematics(self, link: int) -> NDArray[np.float64]:
        """The pose of ``link`` in the base frame now, (4, 4), m. Raises KeyError for no such link."""
        ...

    def run_motion(self, filename: str, owner: Address) -> int:
        """Start a motion file of the motion directory; its id. Raises PlutoError with the reason."""
        ...

    def point_ik(self, link: int, target: tuple[float, float, float], owner: Address) -> int:
        """Start a posture putting ``link``'s origin at ``target`` (m); its id. Raises PlutoError, KeyError."""
        ...

    def stop_motion(self, motion_id: int) -> bool:
        """Stop a motion; False if none has that id."""
        ...

    def motions(self) -> list[tuple[int, str]]:
        """The running motions: (id, description)."""
        ...

    def joints(self) -> tuple[NDArray[np.float64], Sequence[bool]]:
        """The current joint values (rad or m) and which joints are prismatic."""
        ...


def check_limits(owner: object, positive: tuple[str, ...], at_least_one: tuple[str, ...]) -> None:
    """Check attributes of ``owner``: rates and times finite and > 0, bursts (datagrams) finite and >= 1.

    Raises:
        ValueError: naming the first attribute out of range.
    """
    for name in positive:
        value = getattr(owner, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0, got {value}")
    for name in at_least_one:
        value = getattr(owner, name)
        if not (math.isfinite(value) and value >= 1):
            raise ValueError(f"{name} must be finite and >= 1 (a datagram), got {value}")


@dataclass(frozen=True)
class ServerLimits:
    """Attributes:
    max_datagram: larger datagrams are dropped, bytes.
    rate: datagrams per second each client host (IP address, all its ports together) may send on average.
    burst: datagrams a host may send at once.
    budget: datagrams per second the server handles in all, shared equally by the hosts with datagrams waiting.
    budget_burst: datagrams the server may handle at once.
    queue: datagrams of one host that may wait for the budget; more are dropped.
    max_clients: hosts tracked for rate limiting.

    Raises:
        ValueError: a rate or burst that is not finite, a rate <= 0, a burst < 1, or a size < 1.
    """

    max_datagram: int = MAX_DATAGRAM
    rate: float = 50.0
    burst: float = 100.0
    budget: float = 1000.0
    budget_burst: float = 200.0
    queue: int = 8
    max_clients: int = 1024

    def __post_init__(self) -> None:
        check_limits(self, positive=("rate", "budget"), at_least_one=("burst", "budget_burst"))
        for name in ("max_datagram", "queue", "max_clients"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ServerStatistics:
    """Counters of the server: datagrams received, dropped (oversized; rate-limited: over a client's rate, over its
    queue, or over the budget for longer than its queue holds), commands, refused commands (``ERR`` replies),
    replies sent, failures while handling a command, and datagrams waiting for the budget now."""

    datagrams: int = 0
    oversized: int = 0
    rate_limited: int = 0
    commands: int = 0
    refused: int = 0
    replies: int = 0
    failures: int = 0
    waiting: int = 0


class NetMotionService:
    """The server's logic, without sockets.

    Args:
        arm: the motion service behind the server.
        limits: the limits against hostile clients.
    """

    def __init__(self, arm: MotionService, limits: ServerLimits | None = None) -> None:
        self.arm = arm
        self.limits = limits = limits or ServerLimits()
        self._decoder = CommandDecoder(limits.max_datagram)
        self._queue: FairQueue[Any, tuple[Address, bytes]] = FairQueue(  # keyed by host
            budget=limits.budget,
            budget_burst=limits.budget_burst,
            rate=limits.rate,
            burst=limits.burst,
            depth=limits.queue,
            max_senders=limits.max_clients,
        )
        self._outbox: list[tuple[Address, bytes]] = []
        self._received = 0
        self._oversized = 0
        self._refused = 0
        self._replies = 0
        self._failures = 0

    def statistics(self) -> ServerStatistics:
        """A snapshot of the counters."""
        d = self._decoder.statistics()
        return ServerStatistics(
            datagrams=self._received,
            oversized=self._oversized + d.oversized,
            rate_limited=self._queue.dropped,
            commands=d.commands,
            refused=self._refused,
            replies=self._replies,
            failures=self._failures,
            waiting=len(self._queue),
        )

    @property
    def clients(self) -> int:
        """Client hosts seen recently (tracked for rate limiting)."""
        return self._queue.senders

    def receive(self, data: bytes, address: Address, now: float) -> bool:
        """Take one datagram from ``address`` at ``now`` (s, any monotonic clock) without parsing it: True if it
        waits for :meth:`serve`, False if it was dropped (oversized, or over its host's rate or queue; counted)."""
        self._received += 1
        if len(data) > self.limits.max_datagram:
            self._oversized += 1
            return False
        return self._queue.offer(address[0], (address, data), now)

    def serve(self, now: float, limit: int | None = None) -> list[tuple[Address, bytes]]:
        """Handle the waiting datagrams the budget allows at ``now`` (at most ``limit``), the hosts in turn; the
        datagrams to send, with their addresses, in order."""
        out, self._outbox = self._outbox, []
        for _host, (address, data) in self._queue.take(now, limit):
            out.extend((address, reply) for reply in self._handle_datagram(data, address))
        return out

    def next_serve_time(self) -> float | None:
        """When :meth:`serve` will have a datagram to handle (s, the clock of ``now``); None if none waits."""
        return self._queue.next_time()

    def datagram_received(self, data: bytes, address: Address, now: float) -> list[bytes]:
        """:meth:`receive` then :meth:`serve`, for a caller that serves one client at a time: the datagrams to send
        back to ``address`` (replies to other clients whose datagrams were waiting come with the next serve)."""
        self.receive(data, address, now)
        out = []
        for to, reply in self.serve(now):
            if to == address:
                out.append(reply)
            else:
                self._outbox.append((to, reply))
        return out

    def _handle_datagram(self, data: bytes, address: Address) -> list[bytes]:
        self._decoder.receive_data(data)
        out = []
        while (command := self._decoder.next_event()) is not NEED_DATA:
            reply = self.handle(command, address)
            if isinstance(reply, ErrorReply):
                self._refused += 1
            out.append(encode(reply))
        self._replies += len(out)
        return out

    def handle(self, command: Command, address: Address) -> Reply:
        """The reply to one command (errors become ``ERR`` replies; nothing raises)."""
        try:
            return self._dispatch(command, address)
        except (PlutoError, KeyError, ValueError) as err:
            reason = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            return ErrorReply(str(reason))
        except Exception:
            self._failures += 1
            log.exception("handling %r from %s failed", command, address)
            return ErrorReply("internal error (logged by the server)")

    def _dispatch(self, command: Command, address: Address) -> Reply:
        match command:
            case Ping():
                return Pong()
            case ForwardKinematics(link=link):
                matrix = self.arm.forward_kinematics(link)
                rows = tuple((float(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in matrix)
                return ForwardKinematicsReply(link, rows)
            case RunMotion(filename=filename):
                return MotionRegistered(self.arm.run_motion(filename, address))
            case PointIK(link=link, target=target):
                if not all(math.isfinite(c) and abs(c) <= MAX_TARGET for c in target):
                    return ErrorReply(
                        f"IKP coordinates must be between -{MAX_COORDINATE_MM:g} and {MAX_COORDINATE_MM:g} mm"
                    )
                return MotionRegistered(self.arm.point_ik(link, target, address))
            case StopMotion(id=motion_id):
                if not self.arm.stop_motion(motion_id):
                    return ErrorReply(f"no running motion has id {motion_id}")
                return Stopped(motion_id)
            case ListMotions():
                return MotionList(tuple(self.arm.motions()))
            case GetJoints():
                values, prismatic = self.arm.joints()
                return JointValues(tuple(float(v) for v in values), tuple(bool(p) for p in prismatic))
            case BadCommand(reason=reason):
                return ErrorReply(reason)
        return ErrorReply("unsupported command")  # pragma: no cover - every Command is matched above

    def motion_response(self, motion_id: int, kind: str) -> bytes:
        """The datagram of a motion's STATUS or DEACTIVATE event."""
        if kind not in ("STATUS", "DEACTIVATE"):
            raise ValueError(f"no MOTMANRESP for a {kind} event")
        self._replies += 1
        return encode(MotionResponse(motion_id, "STATUS" if kind == "STATUS" else "DEACTIVATE"))


class _Datagrams(asyncio.DatagramProtocol):
    """The UDP endpoint's protocol: hands datagrams and socket errors to the server (on its loop)."""

    def __init__(self, server: UdpNetMotionServer) -> None:
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Address) -> None:
        self.server._datagram_received(data, addr)

    def error_received(self, exc: Exception) -> None:
        self.server.socket_errors += 1  # an ICMP error for a client that went away, a reply the kernel refused

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._transport = None


class UdpNetMotionServer:
    """The server on a UDP socket, served by an asyncio loop in its own thread (a context manager).

    Args:
        service: the server's logic.
        host: address to bind (127.0.0.1 unless a wider one is wanted).
        port: UDP port (0 picks a free one; see :attr:`address`).
        receive_buffer: kernel receive buffer to ask for, bytes (0 keeps the system's default); a large one lets
            the server catch up on a burst instead of the kernel dropping datagrams of every client alike.

    Raises:
        OSError: the socket cannot be bound (raised by :meth:`start`).
    """

    def __init__(
        self,
        service: NetMotionService,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        receive_buffer: int = DEFAULT_RECEIVE_BUFFER,
    ) -> None:
        self.service = service
        self.host, self.port = host, port
        self.receive_buffer = receive_buffer
        self.socket_errors = 0
        """Errors of the socket (an ICMP error for a client that went away, a reply the kernel refused)."""
        self.send_dropped = 0
        """Replies dropped because too many bytes were already waiting for the socket to be writable."""
        self._transport: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._listener = DatagramListener(
            lambda: _Datagrams(self),
            host,
            port,
            receive_buffer=receive_buffer,
            read_batch=READ_BATCH,
            read_size=service.limits.max_datagram + 1,  # a longer datagram is cut to this: still oversized, dropped
        )
        self._runner = ServerRunner(self._listener, name="netmotion-udp", logger=log, on_close=self._cancel_timer)
        self.address: tuple[str, int] = (host, port)

    @property
    def errors(self) -> int:
        """Exceptions raised on the server's loop (counted and logged; the server goes on)."""
        return self._runner.errors

    def start(self) -> None:
        """Bind the socket and start serving (returns once the socket is bound; starting twice does nothing).

        Raises:
            OSError: the address is in use or cannot be bound.
            RuntimeError: the server was closed (a server serves once).
        """
        if self._runner.running:
            return
        self._runner.start()
        self.address = self._runner.address
        granted = self._listener.granted_receive_buffer
        log.info("NetworkMotionServer listening on udp %s:%d (receive buffer %d bytes)", *self.address, granted)

    # -- on the loop's thread -----------------------------------------------------------------------------------

    def _datagram_received(self, data: bytes, address: Address) -> None:
        now = asyncio.get_running_loop().time()
        if self.service.receive(data, address, now):
            self._serve(now)
            self._schedule()

    def _serve(self, now: float, limit: int | None = None) -> None:
        for address, datagram in self.service.serve(now, limit):
            self._send_now(datagram, address)

    def _schedule(self) -> None:
        when = self.service.next_serve_time()
        if when is None or self._timer is not None or self._transport is None:
            return
        self._timer = asyncio.get_running_loop().call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._serve(asyncio.get_running_loop().time(), SERVE_BATCH)
        self._schedule()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _send_now(self, datagram: bytes, address: Address) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        waiting = transport.get_write_buffer_size()  # type: ignore[attr-defined]  # asyncio's have it, typeshed not
        if waiting >= MAX_SEND_BACKLOG:
            self.send_dropped += 1
            return
        transport.sendto(datagram, address)  # queued in order behind replies waiting for the socket, if any

    # -- from any thread ----------------------------------------------------------------------------------------

    def send(self, datagram: bytes, address: Address) -> None:
        """Send a datagram to a client from any thread (queued behind the datagram being handled, if any)."""
        self._runner.call_soon(self._send_now, datagram, address)

    def close(self) -> None:
        """Close the socket and end the thread (idempotent; safe from any thread)."""
        self._runner.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
