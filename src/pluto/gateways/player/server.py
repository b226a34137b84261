"""The Player 1.5 TCP server: connections, rounds and replies on one asyncio thread, devices behind a backend.

    server = PlayerServer(backend, port=6665)
    server.start()                          # listening when it returns; server.port is the bound port
    server.tick(now, samples)               # from any thread, at the module's rate: pushes the rounds that are due
    server.stop()

The backend (the module, or a fake in tests) says which devices can be opened, answers configuration requests
(on worker threads: it may block on the bus) and takes commands (on the server's thread: it must not block).
"""

# Strategy: one event loop on a thread of its own does all socket I/O; each connection is a PlayerConnection
# (framing) and a ClientSession (protocol state), so the server adds only transport and scheduling. Requests of one
# client are handled in order: while the backend answers a configuration request, that connection stops reading
# (pause_reading) and its next messages wait, so its replies cannot overtake each other; other clients and the
# rounds go on. A client that breaks the framing (bad stx, oversized message), stops reading its data (more than
# ``write_limit`` bytes queued), or makes the server fail is disconnected alone, counted and logged; nothing it
# sends can stop the loop. Data arrives with each tick as a mapping of ready-made payloads, built once for every
# client by the caller (never in a bus callback), and handed to the loop with call_soon_threadsafe. The server's
# time is the time of the latest tick, so replies and rounds carry the module's clock, simulated or not.

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pluto.errors import PlutoError, RemoteProtocolError
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

__all__ = ["ConfigRefused", "PlayerBackend", "PlayerServer", "ServerStatistics"]

log = logging.getLogger("pluto.player")


class ConfigRefused(PlutoError):
    """A backend cannot carry out a configuration request; the client gets RESP_NACK. The message says why."""


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
        """Take a command from a client with write access. Called on the server's thread: must not block."""
        ...

    def released(self, device: DeviceKey) -> None:
        """The last client with write access to ``device`` closed it. On the server's thread: must not block."""
        ...


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """What the server has seen.

    Attributes:
        accepted: connections accepted.  clients: connections open now.
        protocol_errors: connections closed for breaking the framing (bad stx, oversized, truncated at the end).
        slow_clients: connections closed for not reading their data.
        failures: connections closed because handling them raised (a bug, logged with its traceback).
        refused: connections refused over ``max_clients``.
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


def _totals(s: SessionStatistics) -> tuple[int, ...]:
    return (s.requests, s.nacks, s.errors, s.ignored, s.rounds, s.skipped)


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

    # -- asyncio callbacks ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = str(transport.get_extra_info("peername"))
        if not self.server.admit(self):
            transport.abort()
            return
        transport.write(BANNER)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.conn.receive_data(data)
        self.process()

    def eof_received(self) -> bool:
        if not self.closing:
            self.conn.receive_data(b"")
            self.process()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.forget(self)

    # -- work -----------------------------------------------------------------------------------------------------

    def process(self) -> None:
        """Handle every complete message waiting, unless a request is with the backend."""
        try:
            while not self.busy and not self.closing:
                try:
                    event = self.conn.next_event()
                except RemoteProtocolError as err:
                    self.server.count_protocol_error()
                    self.close(f"protocol error: {err}")
                    return
                if event is NEED_DATA:
                    return
                if isinstance(event, ConnectionClosed):
                    if event.truncated:
                        self.server.count_protocol_error()
                        self.close(f"the stream ended inside a message ({event.truncated} bytes)")
                    else:
                        self.close("")
                    return
                if isinstance(event, Message):
                    server = self.server
                    self.apply(self.session.handle(event, server.now, server.backend.available, server.samples))
        except Exception:
            log.exception("player client %s: handling its messages failed; disconnecting it", self.peer)
            self.server.count_failure()
            self.close("server failure")

    def apply(self, outputs: Sequence[Output]) -> None:
        """Carry out a session's outputs in order."""
        for output in outputs:
            if isinstance(output, Send):
                self.write(output.data)
            elif isinstance(output, Command):
                self.server.backend.command(self.ident, output.device, output.command)
            elif isinstance(output, Opened):
                self.server.access_changed(self.ident, output.device, output.access)
            elif isinstance(output, Close):
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
        try:
            payload = done.result()
            reply = self.session.reply(request.header, True, payload, self.server.now)
        except PlutoError as err:
            reply = self.session.reply(request.header, False, b"", self.server.now, str(err))
        except Exception as err:
            log.exception("player: the backend failed on %s", request.request)
            reply = self.session.reply(request.header, False, b"", self.server.now, f"{type(err).__name__}: {err}")
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

    def tick(self, now: float, samples: Mapping[DeviceKey, Sample]) -> None:
        if self.closing:
            return
        data = self.session.tick(now, samples)
        if data is not None:
            self.write(data)

    def close(self, reason: str, abort: bool = False) -> None:
        if self.closing:
            return
        self.closing = True
        if reason:
            log.info("player client %s disconnected: %s", self.peer, reason)
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
        max_clients: connections served at once; more are refused.
        workers: threads answering configuration requests.
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
        workers: int = 4,
    ) -> None:
        self.backend = backend
        self.host = host
        self.port = port
        self.key = key
        self.robot = robot
        self.devices = tuple(devices)
        self.max_frequency = max_frequency
        self.write_limit = write_limit
        self.max_clients = max_clients
        self.now = 0.0
        self.samples: Mapping[DeviceKey, Sample] = {}
        self._workers = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="player-config")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._clients: dict[int, _Client] = {}
        self._writers: dict[DeviceKey, set[int]] = {}
        self._ids = itertools.count(1)
        self._accepted = self._protocol_errors = self._slow = self._failures = self._refused = 0
        self._closed_totals = [0] * 6  # requests, nacks, errors, ignored, rounds, skipped of closed sessions

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self, timeout: float = 5.0) -> None:
        """Start listening on a thread of its own; returns once it listens.

        Raises:
            OSError: the address cannot be bound (the port is taken, say).
        """
        if self._thread is not None:
            return
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="player-server", daemon=True)
        self._thread.start()
        try:
            self.port = started.result(timeout)
        except BaseException:
            self._thread.join(timeout)
            self._thread = None
            raise
        log.info("Player 1.5 server listening on %s:%d", self.host, self.port)

    def _run(self, started: concurrent.futures.Future[int]) -> None:
        try:
            asyncio.run(self._serve(started))
        except BaseException as err:
            if not started.done():
                started.set_exception(err)
            else:
                log.exception("the Player server stopped on an error")

    async def _serve(self, started: concurrent.futures.Future[int]) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop = asyncio.Event()
        server = await loop.create_server(lambda: _Client(self, next(self._ids)), self.host, self.port)
        started.set_result(int(server.sockets[0].getsockname()[1]))
        try:
            await self._stop.wait()
        finally:
            server.close()
            for client in list(self._clients.values()):
                client.close("the server stops", abort=True)
            await server.wait_closed()

    def stop(self) -> None:
        """Close every connection and stop listening (idempotent)."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        self._thread = None
        self._workers.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PlayerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- from other threads ---------------------------------------------------------------------------------------

    def tick(self, now: float, samples: Mapping[DeviceKey, Sample]) -> None:
        """Advance the server's time to ``now`` (s) with the newest data of each device, and push the rounds that
        are due. Thread-safe; does not block."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._tick, now, samples)

    def restart(self, now: float) -> None:
        """The clock went back to ``now`` (s): forget the data of the old run, and let every client's rounds start
        again at the next tick rather than when the new run reaches the old run's due times. Thread-safe; call it
        before the first :meth:`tick` of the new run."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._restart, now)

    def statistics(self) -> ServerStatistics:
        """A snapshot of the counters."""
        totals = list(self._closed_totals)
        for client in list(self._clients.values()):
            s = client.session.statistics()
            for i, value in enumerate(_totals(s)):
                totals[i] += value
        return ServerStatistics(
            self._accepted,
            len(self._clients),
            self._protocol_errors,
            self._slow,
            self._failures,
            self._refused,
            *totals,
        )

    @property
    def clients(self) -> int:
        """Connections open now."""
        return len(self._clients)

    def writers(self, device: DeviceKey) -> int:
        """Clients holding write access to ``device`` (exact on the server's thread, as in the backend's calls)."""
        return len(self._writers.get(device, ()))

    # -- on the loop ----------------------------------------------------------------------------------------------

    def new_session(self) -> ClientSession:
        return ClientSession(
            self.devices, port=self.port, key=self.key, robot=self.robot, max_frequency=self.max_frequency
        )

    def admit(self, client: _Client) -> bool:
        if len(self._clients) >= self.max_clients:
            self._refused += 1
            log.warning("player: refused %s: already %d clients", client.peer, len(self._clients))
            return False
        self._accepted += 1
        self._clients[client.ident] = client
        return True

    def forget(self, client: _Client) -> None:
        if self._clients.pop(client.ident, None) is None:
            return
        s = client.session.statistics()
        for i, value in enumerate(_totals(s)):
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

    def run_in_worker(self, request: Configure) -> asyncio.Future[bytes]:
        assert self._loop is not None
        return self._loop.run_in_executor(self._workers, self.backend.configure, request.device, request.request)

    def count_protocol_error(self) -> None:
        self._protocol_errors += 1

    def count_slow(self) -> None:
        self._slow += 1

    def count_failure(self) -> None:
        self._failures += 1

    def _restart(self, now: float) -> None:
        self.now = now
        self.samples = {}
        for client in list(self._clients.values()):
            client.session.restart()

    def _tick(self, now: float, samples: Mapping[DeviceKey, Sample]) -> None:
        self.now = now
        self.samples = samples
        for client in list(self._clients.values()):
            try:
                client.tick(now, samples)
            except Exception:
                log.exception("player client %s: a round failed; disconnecting it", client.peer)
                self._failures += 1
                client.close("server failure", abort=True)
