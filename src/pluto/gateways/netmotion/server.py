"""The NetworkMotionServer: UDP clients in, the arm's motion service behind, replies to the client that asked.

:class:`NetMotionService` is the server without sockets: ``datagram_received(data, address, now)`` returns the
datagrams to send, and :meth:`NetMotionService.motion_event` turns a motion-manager event into the datagram for the
client that owns the motion. :class:`UdpNetMotionServer` runs it on an asyncio UDP endpoint in a thread of its own.

Limits against hostile clients: datagrams over ``max_datagram`` bytes are dropped; each client address may send
``rate`` datagrams per second (bursts of ``burst``), the rest are dropped; at most ``max_clients`` addresses are
tracked (the longest idle is forgotten first). Nothing a client sends can stop the server: a failure while handling a
command is answered with ``ERR``, counted and logged.
"""

# Strategy: the reference server used an epoll service thread; asyncio's event loop is its modern form, and the
# loop runs in its own thread so that the module's control step (the motion manager, on the module's clock) never
# waits on the network. Commands are handled on the loop thread as they arrive, so `MOTMANREG <id>` is sent before
# the next datagram is read (reference: "dispatched before the server reenters the command loop"). Motion events
# come from the control thread through `call_soon_threadsafe`, which queues them behind the callback that is
# running: a motion's MOTMANRESP can never overtake its MOTMANREG. Rate limiting is a token bucket per address,
# kept in an LRU table so a flood from many spoofed addresses cannot grow memory without bound.

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from pluto.errors import PlutoError
from pluto.gateways.netmotion.codec import (
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

__all__ = [
    "DEFAULT_PORT",
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

Address = tuple[Any, ...]
"""A client's address as the socket gives it ((host, port) for IPv4)."""


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


@dataclass(frozen=True)
class ServerLimits:
    """Attributes:
    max_datagram: larger datagrams are dropped, bytes.
    rate: datagrams per second each client may send on average.
    burst: datagrams a client may send at once.
    max_clients: client addresses tracked for rate limiting.
    """

    max_datagram: int = MAX_DATAGRAM
    rate: float = 50.0
    burst: float = 100.0
    max_clients: int = 1024


@dataclass(frozen=True)
class ServerStatistics:
    """Counters of the server: datagrams received, dropped (oversized, rate-limited), commands, refused commands
    (``ERR`` replies), replies sent, and failures while handling a command."""

    datagrams: int = 0
    oversized: int = 0
    rate_limited: int = 0
    commands: int = 0
    refused: int = 0
    replies: int = 0
    failures: int = 0


class NetMotionService:
    """The server's logic, without sockets.

    Args:
        arm: the motion service behind the server.
        limits: the limits against hostile clients.
    """

    def __init__(self, arm: MotionService, limits: ServerLimits | None = None) -> None:
        self.arm = arm
        self.limits = limits or ServerLimits()
        self._decoder = CommandDecoder(self.limits.max_datagram)
        self._buckets: OrderedDict[Address, tuple[float, float]] = OrderedDict()
        self._rate_limited = 0
        self._refused = 0
        self._replies = 0
        self._failures = 0

    def statistics(self) -> ServerStatistics:
        """A snapshot of the counters."""
        d = self._decoder.statistics()
        return ServerStatistics(
            datagrams=d.datagrams + self._rate_limited,
            oversized=d.oversized,
            rate_limited=self._rate_limited,
            commands=d.commands,
            refused=self._refused,
            replies=self._replies,
            failures=self._failures,
        )

    @property
    def clients(self) -> int:
        """Client addresses seen recently (tracked for rate limiting)."""
        return len(self._buckets)

    def _admit(self, address: Address, now: float) -> bool:
        limits = self.limits
        tokens, last = self._buckets.pop(address, (limits.burst, now))
        tokens = min(limits.burst, tokens + max(0.0, now - last) * limits.rate)
        admitted = tokens >= 1.0
        self._buckets[address] = (tokens - 1.0 if admitted else tokens, now)
        while len(self._buckets) > limits.max_clients:
            self._buckets.popitem(last=False)
        return admitted

    def datagram_received(self, data: bytes, address: Address, now: float) -> list[bytes]:
        """Handle one datagram from ``address`` at ``now`` (s, any monotonic clock); the datagrams to send back."""
        if not self._admit(address, now):
            self._rate_limited += 1
            return []
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


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: UdpNetMotionServer) -> None:
        self.server = server

    def datagram_received(self, data: bytes, addr: Address) -> None:
        self.server._on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable for a client that went away, and the like: nothing to do but count it.
        self.server.socket_errors += 1


class UdpNetMotionServer:
    """The server on a UDP socket, served by an asyncio loop in its own thread (a context manager).

    Args:
        service: the server's logic.
        host: address to bind (127.0.0.1 unless a wider one is wanted).
        port: UDP port (0 picks a free one; see :attr:`address`).

    Raises:
        OSError: the socket cannot be bound (raised by :meth:`start`).
    """

    def __init__(self, service: NetMotionService, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        self.service = service
        self.host, self.port = host, port
        self.socket_errors = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._thread: threading.Thread | None = None
        self.address: tuple[str, int] = (host, port)

    def start(self) -> None:
        """Bind the socket and start serving (returns once the socket is bound).

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        if self._thread is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.address = sock.getsockname()[:2]
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                transport, _ = loop.run_until_complete(
                    loop.create_datagram_endpoint(lambda: _Protocol(self), sock=sock)
                )
                self._transport = transport
            except BaseException as err:  # handed to start()
                failure.append(err)
                ready.set()
                sock.close()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                transport.close()
                loop.run_until_complete(asyncio.sleep(0))
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="netmotion-udp", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        log.info("NetworkMotionServer listening on udp %s:%d", *self.address)

    def _on_datagram(self, data: bytes, address: Address) -> None:
        loop, transport = self._loop, self._transport
        if loop is None or transport is None:
            return
        for datagram in self.service.datagram_received(data, address, loop.time()):
            transport.sendto(datagram, address)

    def send(self, datagram: bytes, address: Address) -> None:
        """Send a datagram to a client from any thread (queued behind the datagram being handled, if any)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def send_now() -> None:
            if self._transport is not None and not self._transport.is_closing():
                self._transport.sendto(datagram, address)

        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(send_now)

    def stop(self) -> None:
        """Close the socket and end the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = None
        self._transport = None

    def __enter__(self) -> UdpNetMotionServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
