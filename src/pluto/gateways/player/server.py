"""The Player 1.5 TCP server: connections, rounds and replies on one asyncio thread, devices behind a backend.

    server = PlayerServer(backend, port=6665)
    server.start()                          # listening when it returns; server.port is the bound port
    server.tick(now, samples)               # from any thread, at the module's rate: pushes the rounds that are due
    server.close()

The backend (the module, or a fake in tests) says which devices can be opened, answers configuration requests
(on worker threads: it may block on the bus) and takes commands (on the server's thread: it must not block).

Connections are a shared resource, guarded beyond what the 1.5 server did:

- *Idle connections* are closed after ``idle_timeout`` s (60 by default). A connection is idle when it holds no
  device open and has sent no whole message for that long: a client that reads data, or holds write access, is
  never idle, however quiet it is; one that connected and does nothing (or never authenticates) is.
- *Caps*: at most ``max_clients`` connections in all and ``max_per_address`` from one address. A new connection
  over a cap first makes room by closing the connection (of that address, for the per-address cap) that holds no
  device and has been silent longest, so idle sockets can never lock a well-behaved client out; only when every
  connection in the way holds a device is the newcomer refused.
- *Failed authentication* (a wrong AUTH key) blocks the address for a growing time (``auth_backoff`` s, doubled at
  each failure up to ``auth_backoff_max``): meanwhile its new connections are refused and what its open
  connections send before authenticating is not even read as an attempt: they are closed. The back-off is the
  one the XML and web gateways use (:class:`pluto.gateways.guard.AuthLimiter`).

Player 1.5 has no message that says why a connection is refused: a refused connection gets the banner (so a client
sees a server, not a dead port) and is closed at once, and the reason goes to the log. Log lines about one address
and one kind of event (refused, evicted, idle, failed authentication, garbage, refused commands) are rate-limited:
the first at once, then one line per ``log_interval`` s with the count.
"""

# Strategy: one event loop on a thread of its own (pluto.gateways.serving.ServerRunner) does all socket I/O; each
# connection is a PlayerConnection (framing) and a ClientSession (protocol state), so the server adds only transport
# and scheduling. Requests of one client are handled in order: while the backend answers a configuration request,
# that connection stops reading (pause_reading) and its next messages wait, so its replies cannot overtake each
# other; other clients and the rounds go on. Garbage in a client's stream is skipped and counted by its
# PlayerConnection (as the 1.5 server resynchronises on the stx); a client that stops reading its data (more than
# ``write_limit`` bytes queued) or makes the server fail is disconnected alone, counted and logged; nothing it sends
# can stop the loop. A command the backend refuses (CommandRefused: a value out of range) is dropped and counted,
# and the session goes on. Data arrives with each tick as a mapping of ready-made payloads, built once for every
# client by the caller (never in a bus callback), and handed to the loop with the runner's call_soon. The rounds
# follow the time of the ticks (the module's clock, simulated or not); the header times are on the clock the data is
# stamped with, which the caller gives as an offset from the tick's time (0 when the module runs on that clock).
# Idle timeouts, back-off and log intervals are about sockets and people, so they run on the wall clock
# (``monotonic``, injectable for tests).

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

from pluto.errors import PlutoError
from pluto.gateways.guard import AuthLimiter, LogLimiter
from pluto.gateways.player.devices import DEVICES, DeviceKey, DeviceSpec
from pluto.gateways.player.protocol import BANNER, NEED_DATA, Access, ConnectionClosed, Message, PlayerConnection
from pluto.gateways.player.session import (
    ClientSession,
    Close,
    Command,
    Configure,
    Opened,
    Output,
    Sample,
    Send,
    SessionStatistics,
)
from pluto.gateways.player.structs import CommandStruct, ConfigStruct
from pluto.gateways.serving import ProtocolListener, ServerRunner

__all__ = ["CommandRefused", "ConfigRefused", "PlayerBackend", "PlayerServer", "RateLimitedLog", "ServerStatistics"]

log = logging.getLogger("pluto.player")


class ConfigRefused(PlutoError):
    """A backend cannot carry out a configuration request; the client gets RESP_NACK. The message says why."""


class CommandRefused(PlutoError):
    """A backend will not carry out a command (a value out of range, say); it is dropped and counted, the client
    stays connected. The message says why."""


class PlayerBackend(Protocol):
    """What the server needs of the robot behind it."""

    def available(self, device: DeviceSpec) -> bool:
        """The device can be opened now (its module is running). Called on the server's thread: must not block."""
        ...

    def configure(self, device: DeviceKey, request: ConfigStruct) -> bytes:
        """Carry out a configuration request; return the reply's payload (b"" for a zero-length ACK).

        Called on a worker thread: it may block (the bus). Raises ConfigRefused (or any PlutoError) for a NACK.
        """
        ...

    def command(self, client: int, device: DeviceKey, command: CommandStruct) -> None:
        """Take a command from a client with write access. Called on the server's thread: must not block.

        Raises CommandRefused to drop it.
        """
        ...

    def released(self, device: DeviceKey) -> None:
        """The last client with write access to ``device`` closed it. On the server's thread: must not block."""
        ...


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """What the server has seen.

    Attributes:
        accepted: connections admitted.  clients: connections open now.
        protocol_errors: connections whose stream ended inside a message.
        slow_clients: connections closed for not reading their data.
        failures: connections closed because handling them raised (a bug, logged with its traceback).
        refused: connections refused (over a cap with no room to make, or from an address blocked after failed
            authentication).
        evicted: silent connections without a device closed to make room for a new one.
        idle_closed: connections closed after ``idle_timeout``.
        auth_failures: wrong AUTH keys.
        refused_commands: commands the backend refused (dropped).
        garbage_bytes: bytes skipped while resynchronising on the stx.  oversized: headers dropped for their size.
        requests, nacks, errors, ignored, rounds, skipped: sums over the sessions (open and closed).
    """

    accepted: int
    clients: int
    protocol_errors: int
    slow_clients: int
    failures: int
    refused: int
    requests: int
    nacks: int
    errors: int
    ignored: int
    rounds: int
    skipped: int
    evicted: int = 0
    idle_closed: int = 0
    auth_failures: int = 0
    refused_commands: int = 0
    garbage_bytes: int = 0
    oversized: int = 0


_SESSION_TOTALS = ("requests", "nacks", "errors", "ignored", "rounds", "skipped")
_CONNECTION_TOTALS = ("garbage_bytes", "oversized")


def _totals(session: SessionStatistics, conn: PlayerConnection) -> list[int]:
    return [getattr(session, name) for name in _SESSION_TOTALS] + [getattr(conn, name) for name in _CONNECTION_TOTALS]


class RateLimitedLog:
    """Log lines rate-limited per address and kind (:class:`pluto.gateways.guard.LogLimiter`, one line per
    ``interval``): the first line is logged at once, the next ones within the interval only counted, and the count
    logged with the next line of that address and kind, or at :meth:`flush` once the interval is over.

    Args:
        logger: where the lines go.
        interval: s between two lines of one address and kind.
        monotonic: the clock, s.
        max_keys: (address, kind) pairs remembered at most (the one used longest ago is forgotten first).
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        max_keys: int = 4096,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.monotonic = monotonic
        self.lines = 0
        """Lines logged."""
        self._limiter: LogLimiter[tuple[str, str]] = LogLimiter(interval, 1, max_keys)

    def __call__(self, address: str, kind: str, message: str) -> None:
        """Note one event of ``kind`` (a few words: "refused", "wrong key") from ``address``."""
        held = self._limiter.note((address, kind), self.monotonic())
        if held is None:
            return
        self.lines += 1
        more = f" ({held} more since the last line)" if held else ""
        self.logger.warning("player: %s from %s: %s%s", kind, address, message, more)

    def flush(self) -> None:
        """Log the counts held back of the pairs whose interval is over."""
        for (address, kind), count in self._limiter.flush(self.monotonic()):
            self.lines += 1
            self.logger.warning("player: %s from %s: %d more in the last %g s", kind, address, count, self.interval)


class _Client(asyncio.Protocol):
    """One connection."""

    def __init__(self, server: PlayerServer, ident: int) -> None:
        self.server = server
        self.ident = ident
        self.conn = PlayerConnection("server")
        self.session = server.new_session()
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closing = False
        self.peer = "?"
        self.address = "?"
        self.last_heard = server.monotonic()

    # -- asyncio callbacks ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = str(peer)
        if isinstance(peer, tuple) and peer:
            self.address = str(peer[0])
        self.last_heard = self.server.monotonic()
        refusal = self.server.admit(self)
        if refusal:
            # Player 1.5 has no message for "go away": the banner, so the client sees a server, then the close.
            self.closing = True
            transport.write(BANNER)
            transport.close()
            return
        transport.write(BANNER)

    def data_received(self, data: bytes) -> None:
        if not self.closing:
            self.receive(data)

    def eof_received(self) -> bool:
        if not self.closing:
            self.receive(b"")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.forget(self)

    # -- work -----------------------------------------------------------------------------------------------------

    @property
    def holds_devices(self) -> bool:
        """The client has a device open (it reads data or may command): never idle, never evicted."""
        return bool(self.session.opened)

    def receive(self, data: bytes) -> None:
        """Decode what the client sent (``b""``: it closed its side; garbage is noted), then handle it."""
        conn = self.conn
        garbage, oversized = conn.garbage_bytes, conn.oversized
        conn.receive_data(data)
        if conn.garbage_bytes != garbage or conn.oversized != oversized:
            skipped, dropped = conn.garbage_bytes - garbage, conn.oversized - oversized
            what = f"skipped {skipped} bytes and {dropped} oversized headers ({conn.last_problem})"
            self.server.note(self.address, "garbage", what)
        self.process()

    def process(self) -> None:
        """Handle every message decoded and waiting, unless a request is with the backend."""
        server = self.server
        try:
            while not self.busy and not self.closing:
                event = self.conn.next_event()
                if event is NEED_DATA:
                    return
                if isinstance(event, ConnectionClosed):
                    if event.truncated:
                        server.count_protocol_error()
                        self.close(f"the stream ended inside a message ({event.truncated} bytes)")
                    else:
                        self.close("")
                    return
                if isinstance(event, Message):
                    self.last_heard = server.monotonic()
                    if not self.session.authenticated and server.auth_blocked(self.address):
                        self.close("a message before AUTH while the address is blocked after failed authentication")
                        return
                    was_authenticated = self.session.authenticated
                    self.apply(self.session.handle(event, server.header_time, server.backend.available, server.samples))
                    if self.session.authenticated and not was_authenticated and self.server.key:
                        server.auth_succeeded(self.address)
        except Exception:
            log.exception("player client %s: handling its messages failed; disconnecting it", self.peer)
            server.count_failure()
            self.close("server failure")

    def apply(self, outputs: Sequence[Output]) -> None:
        """Carry out a session's outputs in order."""
        for output in outputs:
            if isinstance(output, Send):
                self.write(output.data)
            elif isinstance(output, Command):
                self.server.command(self, output)
            elif isinstance(output, Opened):
                self.server.access_changed(self.ident, output.device, output.access)
            elif isinstance(output, Close):
                if output.auth_failed:
                    self.server.auth_failed(self.address)  # logged there
                    self.close("")
                else:
                    self.close(output.reason)
            elif isinstance(output, Configure):
                self.configure(output)
            if self.closing:
                return

    def configure(self, request: Configure) -> None:
        """Hand a configuration request to the backend; read no more until it has answered."""
        assert self.transport is not None
        self.busy = True
        with contextlib.suppress(RuntimeError):
            self.transport.pause_reading()
        future = self.server.run_in_worker(request)
        future.add_done_callback(lambda done: self.configured(request, done))

    def configured(self, request: Configure, done: asyncio.Future[bytes]) -> None:
        self.busy = False
        if self.closing or done.cancelled():
            return
        now = self.server.header_time
        try:
            payload = done.result()
            reply = self.session.reply(request.header, True, payload, now)
        except PlutoError as err:
            reply = self.session.reply(request.header, False, b"", now, str(err))
        except Exception as err:
            log.exception("player: the backend failed on %s", request.request)
            reply = self.session.reply(request.header, False, b"", now, f"{type(err).__name__}: {err}")
        self.write(reply)
        if self.transport is not None and not self.closing:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()
        self.process()

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or self.closing or transport.is_closing():
            return
        transport.write(data)
        if transport.get_write_buffer_size() > self.server.write_limit:
            self.server.count_slow()
            self.close(f"it does not read its data (over {self.server.write_limit} bytes queued)", abort=True)

    def tick(self, now: float, samples: Mapping[DeviceKey, Sample], offset: float) -> None:
        if self.closing:
            return
        data = self.session.tick(now, samples, offset)
        if data is not None:
            self.write(data)

    def close(self, reason: str, abort: bool = False) -> None:
        if self.closing:
            return
        self.closing = True
        if reason:
            self.server.note(self.address, "closed a connection", reason)
        if self.transport is not None:
            if abort:
                self.transport.abort()
            else:
                self.transport.close()
        self.server.forget(self)


class PlayerServer:
    """A Player 1.5 server on its own thread.

    Args:
        backend: the robot behind the devices.
        host: address to listen on (the loopback unless configured otherwise).
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        key: the AUTH key clients must send first; empty for none.
        robot: the robot's name (NAMESERVICE).
        devices: the devices offered.
        max_frequency: the largest data frequency honoured, Hz: the rate of :meth:`tick`.
        write_limit: bytes that may wait for a slow client before it is disconnected.
        max_clients: connections served at once.
        max_per_address: connections served at once from one address.
        idle_timeout: s after which a connection without a device that sends nothing is closed.
        auth_backoff: s an address is blocked after its first wrong AUTH key; doubled at each further one.
        auth_backoff_max: the longest block, s.
        log_interval: s between two log lines about one address and one kind of event.
        workers: threads answering configuration requests.
        monotonic: the wall clock of idle timeouts, back-off and log intervals, s.

    Raises:
        ValueError: a cap below 1, or a time that is not > 0.
    """

    def __init__(
        self,
        backend: PlayerBackend,
        *,
        host: str = "127.0.0.1",
        port: int = 6665,
        key: bytes = b"",
        robot: str = "",
        devices: Sequence[DeviceSpec] = DEVICES,
        max_frequency: float = 50.0,
        write_limit: int = 1 << 20,
        max_clients: int = 256,
        max_per_address: int = 128,
        idle_timeout: float = 60.0,
        auth_backoff: float = 1.0,
        auth_backoff_max: float = 60.0,
        log_interval: float = 10.0,
        workers: int = 4,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_clients < 1 or max_per_address < 1:
            raise ValueError(f"max_clients and max_per_address must be >= 1, got {max_clients}, {max_per_address}")
        for name, value in (
            ("idle_timeout", idle_timeout),
            ("auth_backoff", auth_backoff),
            ("auth_backoff_max", auth_backoff_max),
            ("log_interval", log_interval),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.backend = backend
        self.host = host
        self.port = port
        self.key = key
        self.robot = robot
        self.devices = tuple(devices)
        self.max_frequency = max_frequency
        self.write_limit = write_limit
        self.max_clients = max_clients
        self.max_per_address = max_per_address
        self.idle_timeout = idle_timeout
        self.auth_backoff = auth_backoff
        self.auth_backoff_max = auth_backoff_max
        self.monotonic = monotonic
        self.now = 0.0
        self.offset = 0.0
        self.samples: Mapping[DeviceKey, Sample] = {}
        self.note = RateLimitedLog(log, log_interval, monotonic)
        self._workers = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="player-config")
        listener = ProtocolListener(
            lambda: _Client(self, next(self._ids)), host, port, backlog=max(128, self.max_clients)
        )
        self._runner = ServerRunner(
            listener, name="player-server", logger=log, on_open=self._opened, on_close=self._closing
        )
        self._clients: dict[int, _Client] = {}
        self._clients_lock = threading.Lock()  # statistics() reads the clients from other threads
        self._writers: dict[DeviceKey, set[int]] = {}
        self._auth = AuthLimiter(auth_backoff, auth_backoff_max, forget=2.0 * auth_backoff_max)
        self._ids = itertools.count(1)
        self._counts = dict.fromkeys(
            (
                "accepted",
                "protocol_errors",
                "slow_clients",
                "failures",
                "refused",
                "evicted",
                "idle_closed",
                "auth_failures",
                "refused_commands",
            ),
            0,
        )
        self._closed_totals = [0] * (len(_SESSION_TOTALS) + len(_CONNECTION_TOTALS))

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self, timeout: float = 5.0) -> None:
        """Start listening on a thread of its own; returns once it listens (starting twice does nothing).

        Raises:
            OSError: the address cannot be bound (the port is taken, say).
            RuntimeError: the server was closed (a server serves once).
        """
        if self._runner.running:
            return
        self._runner.start(timeout)
        self.port = self._runner.address[1]

    def _opened(self, runner: ServerRunner) -> None:
        self.port = runner.address[1]  # before the first connection's session is made
        # Said here, on the server's loop before it serves anyone: a client served before the caller of start()
        # wakes (a busy machine) never comes ahead of it.
        log.info("Player 1.5 server listening on %s:%d", self.host, self.port)
        runner.spawn(self._housekeeping(), name="player-housekeeping")

    def _closing(self) -> None:
        for client in list(self._clients.values()):
            client.close("the server stops", abort=True)
        self.note.flush()

    def close(self) -> None:
        """Close every connection and stop listening (idempotent; safe from any thread)."""
        self._runner.close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    @property
    def errors(self) -> int:
        """Exceptions raised on the server's loop outside a client's handling (counted and logged; it goes on)."""
        return self._runner.errors

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- from other threads ---------------------------------------------------------------------------------------

    def tick(self, now: float, samples: Mapping[DeviceKey, Sample], stamp_offset: float = 0.0) -> None:
        """Advance the server's time to ``now`` (s) with the newest data of each device, and push the rounds that
        are due. Thread-safe; does not block.

        Args:
            now: the time the rounds follow, s (the module's clock).
            samples: the newest data of each device.
            stamp_offset: the clock the data is stamped with, less ``now``, s: the header times (time and
                timestamp alike) are on the data's clock. 0 when the module runs on that clock.
        """
        self._runner.call_soon(self._tick, now, samples, stamp_offset)

    def update_samples(self, samples: Mapping[DeviceKey, Sample]) -> None:
        """Replace the newest data without a round (a reading changed by a request: its reply must not overtake
        it). Thread-safe; does not block; handled before anything handed to the loop later (a reply among them)."""
        self._runner.call_soon(self._set_samples, samples)

    def restart(self, now: float) -> None:
        """The clock went back to ``now`` (s): forget the data of the old run, and let every client's rounds start
        again at the next tick rather than when the new run reaches the old run's due times. Thread-safe; call it
        before the first :meth:`tick` of the new run."""
        self._runner.call_soon(self._restart, now)

    def statistics(self) -> ServerStatistics:
        """A snapshot of the counters."""
        with self._clients_lock:
            totals = list(self._closed_totals)
            clients = list(self._clients.values())
        for client in clients:
            for i, value in enumerate(_totals(client.session.statistics(), client.conn)):
                totals[i] += value
        names = _SESSION_TOTALS + _CONNECTION_TOTALS
        return ServerStatistics(clients=len(clients), **self._counts, **dict(zip(names, totals, strict=True)))

    @property
    def clients(self) -> int:
        """Connections open now."""
        return len(self._clients)

    @property
    def header_time(self) -> float:
        """The time of a reply's header: now on the clock the data is stamped with, s."""
        return self.now + self.offset

    def writers(self, device: DeviceKey) -> int:
        """Clients holding write access to ``device`` (exact on the server's thread, as in the backend's calls)."""
        return len(self._writers.get(device, ()))

    # -- on the loop ----------------------------------------------------------------------------------------------

    def new_session(self) -> ClientSession:
        return ClientSession(
            self.devices, port=self.port, key=self.key, robot=self.robot, max_frequency=self.max_frequency
        )

    def admit(self, client: _Client) -> str:
        """Take a new connection in, making room if a cap is reached; return why it is refused, or ""."""
        address = client.address
        if self.auth_blocked(address):
            return self._refuse(client, "the address is blocked after failed authentication")
        from_address = [c for c in self._clients.values() if c.address == address]
        per_address = f"{self.max_per_address} connections from {address}"
        if len(from_address) >= self.max_per_address and not self._evict(from_address, per_address):
            return self._refuse(client, f"already {len(from_address)} connections from this address, all busy")
        in_all = f"{self.max_clients} connections in all"
        if len(self._clients) >= self.max_clients and not self._evict(list(self._clients.values()), in_all):
            return self._refuse(client, f"already {len(self._clients)} connections, all busy")
        self._counts["accepted"] += 1
        with self._clients_lock:
            self._clients[client.ident] = client
        return ""

    def _refuse(self, client: _Client, reason: str) -> str:
        self._counts["refused"] += 1
        self.note(client.address, "refused a connection", reason)
        return reason

    def _evict(self, candidates: list[_Client], cap: str) -> bool:
        """Close the candidate without a device that has been silent longest; False if every one holds a device."""
        silent = [c for c in candidates if not c.holds_devices and not c.busy and not c.closing]
        if not silent:
            return False
        victim = min(silent, key=lambda c: c.last_heard)
        self._counts["evicted"] += 1
        quiet = self.monotonic() - victim.last_heard
        self.note(victim.address, "closed a silent connection", f"{cap}: made room after {quiet:.1f} s of silence")
        victim.close("")
        return True

    def forget(self, client: _Client) -> None:
        with self._clients_lock:
            if self._clients.pop(client.ident, None) is None:
                return
            for i, value in enumerate(_totals(client.session.statistics(), client.conn)):
                self._closed_totals[i] += value
        for output in client.session.closed():
            if isinstance(output, Opened):
                self.access_changed(client.ident, output.device, output.access)

    def access_changed(self, ident: int, device: DeviceKey, access: Access | None) -> None:
        holders = self._writers.setdefault(device, set())
        had = bool(holders)
        if access is not None and access.writes:
            holders.add(ident)
        else:
            holders.discard(ident)
        if had and not holders:
            try:
                self.backend.released(device)
            except Exception:
                log.exception("player: the backend failed to release %s", device)

    def command(self, client: _Client, command: Command) -> None:
        try:
            self.backend.command(client.ident, command.device, command.command)
        except CommandRefused as err:
            self._counts["refused_commands"] += 1
            self.note(client.address, "refused a command", str(err))

    def auth_blocked(self, address: str) -> bool:
        """Connections from ``address`` are refused for now (it sent wrong keys)."""
        return self._auth.wait(address, self.monotonic()) > 0.0

    def auth_failed(self, address: str) -> None:
        """``address`` sent a wrong key: block it for a time that doubles with each failure."""
        now = self.monotonic()
        delay = self._auth.failed(address, now)
        self._counts["auth_failures"] += 1
        failures = self._auth.failures(address, now)
        self.note(address, "wrong AUTH key", f"failure {failures}; the address is blocked for {delay:g} s")

    def auth_succeeded(self, address: str) -> None:
        """``address`` sent the right key: its failures are forgotten."""
        self._auth.succeeded(address)

    def run_in_worker(self, request: Configure) -> asyncio.Future[bytes]:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._workers, self.backend.configure, request.device, request.request)

    def count_protocol_error(self) -> None:
        self._counts["protocol_errors"] += 1

    def count_slow(self) -> None:
        self._counts["slow_clients"] += 1

    def count_failure(self) -> None:
        self._counts["failures"] += 1

    async def _housekeeping(self) -> None:
        period = min(1.0, self.idle_timeout / 4.0)
        while True:
            await asyncio.sleep(period)
            try:
                self._close_idle()
                self.note.flush()
            except Exception:
                log.exception("player: housekeeping failed")

    def _close_idle(self) -> None:
        now = self.monotonic()
        for client in list(self._clients.values()):
            if client.holds_devices or client.busy or client.closing:
                continue
            quiet = now - client.last_heard
            if quiet >= self.idle_timeout:
                self._counts["idle_closed"] += 1
                self.note(client.address, "closed an idle connection", f"no device and nothing sent for {quiet:.1f} s")
                client.close("")

    def _restart(self, now: float) -> None:
        self.now = now
        self.samples = {}
        for client in list(self._clients.values()):
            client.session.restart()

    def _set_samples(self, samples: Mapping[DeviceKey, Sample]) -> None:
        self.samples = samples

    def _tick(self, now: float, samples: Mapping[DeviceKey, Sample], offset: float) -> None:
        self.now = now
        self.offset = offset
        self.samples = samples
        for client in list(self._clients.values()):
            try:
                client.tick(now, samples, offset)
            except Exception:
                log.exception("player client %s: a round failed; disconnecting it", client.peer)
                self._counts["failures"] += 1
                client.close("server failure", abort=True)
