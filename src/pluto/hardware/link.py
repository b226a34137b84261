"""The wire of every emulated device: a TCP or pseudo-terminal link, its noise, and a serving loop on a thread.

    with DeviceEmulator(CrossbowDevice(SyntheticMotion())) as unit:      # TCP on 127.0.0.1, a free port
        port = serial.serial_for_url(unit.url)                           # socket://127.0.0.1:PORT

    with DeviceEmulator(NmeaReceiver(track), transport="pty") as gps:    # a pseudo-terminal: a serial port
        port = serial.serial_for_url(gps.url)                            # /dev/pts/N

A device core is sans-I/O (:class:`DeviceCore`: bytes in, a time step, bytes out); :class:`DeviceEmulator` serves
one, stepped every tick (:class:`SteppedServer`'s loop, whose hooks the SICK emulator fills for its scanner).
:class:`LinkServer` is what every emulator shares (the P2OS robot's and the SICK scanner's too): the link is
opened by :meth:`~LinkServer.start` and served on a thread, or opened by :meth:`~LinkServer.open_link` and served in
the caller's thread (:meth:`~LinkServer.serve`, or :meth:`~LinkServer.run` for both); :meth:`~LinkServer.close`
ends it and reports a failure of the loop. :class:`LinkNoise` drops and corrupts bytes in both directions, like a
radio modem.
"""

# Strategy: one link behaves like a serial line whatever carries it, so every emulated device behaves alike on the
# wire: writes never block (bytes nobody reads are dropped beyond a cap), and a second TCP client is refused while
# one is connected. Unlike a serial line, TCP tells when the client goes (on_readable returns b""). The pty keeps
# its slave end open itself, so the master never sees a hang-up while no client has the port open; pyserial
# flushes what accumulated when a client opens it. A LinkServer owns the lifecycle (the thread, the link, a failure
# of the loop re-raised by close()); subclasses fill _serve(link, stop). SteppedServer's loop: select() on the link
# with a timeout up to the next tick (or sooner if the device says bytes are due), feed what arrived to the core
# with the clock's time, step it and write what it has; the hooks (_receive, _output, _due, _new_client) are where a
# core with another shape (the SICK scanner's, which models the line's rate) plugs in. All calls into the core hold
# ``lock``, which tests may take to read the device consistently while the loop runs.

from __future__ import annotations

import abc
import contextlib
import errno
import math
import os
import select
import socket
import threading
import time
import tty
from collections.abc import Callable
from types import TracebackType
from typing import Final, Literal, Protocol, Self

import numpy as np

from pluto.errors import PlutoError

__all__ = [
    "DeviceCore",
    "DeviceEmulator",
    "EmulatorError",
    "Link",
    "LinkNoise",
    "LinkServer",
    "PtyLink",
    "SteppedServer",
    "TcpLink",
    "Transport",
    "open_link",
]

Transport = Literal["tcp", "pty"]

MAX_PENDING: Final = 64 * 1024
"""Bytes waiting for a slow TCP client before older ones are dropped."""
_READ_SIZE = 4096


class EmulatorError(PlutoError):
    """The emulator could not open its transport (port in use, no pseudo-terminal) or its loop failed."""


class LinkNoise:
    """Drops and corrupts bytes at given per-byte rates, as a noisy serial or radio link does.

    Args:
        drop_rate: probability that a byte is lost, 0..1.
        corrupt_rate: probability that a byte that gets through has its value changed (XOR with 1..255), 0..1.
        rng: random generator; a fixed seed gives the same noise again.

    Raises:
        ValueError: a rate outside 0..1.
    """

    def __init__(self, drop_rate: float, corrupt_rate: float, rng: np.random.Generator | None = None) -> None:
        for name, rate in (("drop_rate", drop_rate), ("corrupt_rate", corrupt_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be in 0..1, got {rate!r}")
        self.drop_rate = drop_rate
        self.corrupt_rate = corrupt_rate
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.dropped = 0
        self.corrupted = 0

    def apply(self, data: bytes) -> bytes:
        """The bytes as they come out of the link.

        Args:
            data: bytes put into the link.

        Returns:
            The bytes that got through, some of them changed.
        """
        if not data or (self.drop_rate == 0.0 and self.corrupt_rate == 0.0):
            return data
        values = np.frombuffer(data, dtype=np.uint8).copy()
        keep = self._rng.random(values.size) >= self.drop_rate
        corrupt = self._rng.random(values.size) < self.corrupt_rate
        corrupt &= keep
        flips = self._rng.integers(1, 256, size=values.size, dtype=np.uint8)
        values[corrupt] ^= flips[corrupt]
        self.dropped += int(values.size - np.count_nonzero(keep))
        self.corrupted += int(np.count_nonzero(corrupt))
        return values[keep].tobytes()


# ------------------------------------------------------------------------------------------------ links


class TcpLink:
    """A listening socket serving one client at a time; a second one is closed at once (and counted).

    Args:
        host: the address to listen on.  port: the TCP port (0 picks a free one, see :attr:`port`).

    Raises:
        EmulatorError: the port cannot be listened on.
    """

    def __init__(self, host: str, port: int) -> None:
        server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((host, port))
            server.listen(4)
        except OSError as err:
            server.close()
            reason = err.strerror or str(err)
            busy = err.errno in (errno.EADDRINUSE, errno.EACCES)
            hint = " (another emulator or robot server on it? choose another port)" if busy else ""
            raise EmulatorError(f"cannot listen on {host}:{port}: {reason}{hint}") from None
        server.setblocking(False)
        self._server = server
        self._client: socket.socket | None = None
        self._pending = bytearray()
        self.host = host
        self.port = int(server.getsockname()[1])
        """The TCP port listened on."""
        self.url = f"socket://{host}:{self.port}" if ":" not in host else f"socket://[{host}]:{self.port}"
        """What a client opens with ``serial.serial_for_url``."""
        self.connections = 0
        """Clients accepted so far."""
        self.refused = 0
        """Clients refused because another one was connected."""

    @property
    def connected(self) -> bool:
        """A client is connected."""
        return self._client is not None

    def handles(self) -> list[int]:
        """The file descriptors to wait on for reading."""
        handles = [self._server.fileno()]
        if self._client is not None:
            handles.append(self._client.fileno())
        return handles

    def on_readable(self, handle: int) -> bytes | None:
        """Take what ``handle`` has: the client's bytes, b"" when it went, None for nothing (or a new client)."""
        if handle == self._server.fileno():
            try:
                conn, _addr = self._server.accept()
            except OSError:
                return None
            if self._client is not None:  # one client at a time, like a device's serial port
                self.refused += 1
                conn.close()
                return None
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._client = conn
            self._pending.clear()
            self.connections += 1
            return None
        if self._client is None:
            return None
        try:
            data = self._client.recv(_READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self._drop_client()
        return data

    def _drop_client(self) -> None:
        if self._client is not None:
            with contextlib.suppress(OSError):
                self._client.close()
        self._client = None
        self._pending.clear()

    def write(self, data: bytes) -> bool:
        """Send without blocking (what the client does not take in time waits, up to :data:`MAX_PENDING`).

        Returns:
            False if the client went away while writing.
        """
        if self._client is None:
            return True
        self._pending += data
        if len(self._pending) > MAX_PENDING:
            del self._pending[: len(self._pending) - MAX_PENDING]
        try:
            sent = self._client.send(self._pending)
        except BlockingIOError:
            return True
        except OSError:
            self._drop_client()
            return False
        del self._pending[:sent]
        return True

    def close(self) -> None:
        """Drop the client and stop listening."""
        self._drop_client()
        self._server.close()


class PtyLink:
    """A pseudo-terminal: the device on the master side; the client opens the slave like a serial port.

    Raises:
        EmulatorError: no pseudo-terminal could be created.
    """

    connections: Final = 0
    """A pty cannot tell clients apart: none are counted."""
    refused: Final = 0
    connected: Final = True
    """A pty cannot tell whether a client has it open."""

    def __init__(self) -> None:
        try:
            master, slave = os.openpty()
        except OSError as err:
            raise EmulatorError(f"cannot create a pseudo-terminal: {err.strerror or err}") from None
        tty.setraw(slave)  # no echo, no line editing: bytes go through unchanged
        os.set_blocking(master, False)
        self._master = master
        self._slave = slave  # kept open so the master never reads a hang-up while no client has the port
        self.url = os.ttyname(slave)
        """The path of the slave end (e.g. ``/dev/pts/5``)."""

    def handles(self) -> list[int]:
        """The file descriptors to wait on for reading."""
        return [self._master]

    def on_readable(self, handle: int) -> bytes | None:
        """The client's bytes, or None for nothing (a pty never tells that the client went)."""
        try:
            return os.read(self._master, _READ_SIZE) or None
        except OSError:
            return None

    def write(self, data: bytes) -> bool:
        """Write what the pty takes; the rest is lost, as on a serial line nobody reads. Always True."""
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._master, view)
            except OSError:
                return True
            view = view[written:]
        return True

    def close(self) -> None:
        """Close both ends."""
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)


Link = TcpLink | PtyLink


def open_link(transport: Transport, host: str = "127.0.0.1", port: int = 0) -> Link:
    """A new link: a TCP listener on ``host:port`` or a pseudo-terminal.

    Raises:
        EmulatorError: the port cannot be listened on, or no pty.
        ValueError: an unknown transport.
    """
    if transport == "tcp":
        return TcpLink(host, port)
    if transport == "pty":
        return PtyLink()
    raise ValueError(f"transport must be 'tcp' or 'pty', not {transport!r}")


# ------------------------------------------------------------------------------------------------ serving


class LinkServer(abc.ABC):
    """A device served on a link in a background thread (or the caller's); a context manager.

    Subclasses fill :meth:`_serve`. The link noise may be changed while serving.

    Args:
        transport: ``"tcp"`` or ``"pty"``.  host: TCP address to listen on.  port: TCP port (0: a free one).
        link_noise: drops and corrupts bytes in both directions, or None.
        name: the thread's name (the link's URL is added).

    Raises:
        ValueError: an unknown transport.
    """

    def __init__(
        self,
        *,
        transport: Transport = "tcp",
        host: str = "127.0.0.1",
        port: int = 0,
        link_noise: LinkNoise | None = None,
        name: str = "emulator",
    ) -> None:
        if transport not in ("tcp", "pty"):
            raise ValueError(f"transport must be 'tcp' or 'pty', not {transport!r}")
        self.transport: Transport = transport
        self.link_noise = link_noise
        self.lock = threading.RLock()
        """Held whenever the loop calls the device; take it to read or change the device consistently."""
        self._host, self._requested_port, self._name = host, port, name
        self._link: Link | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle

    def start(self) -> Self:
        """Open the link and serve in a background thread.

        Raises:
            EmulatorError: the port cannot be listened on, no pty, or already running.
        """
        if self._thread is not None:
            raise EmulatorError("the emulator is already running")
        url = self.open_link()
        self._stop.clear()
        self._thread = threading.Thread(target=self._guarded, name=f"{self._name}-{url}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the link; safe to call twice.

        Raises:
            EmulatorError: the serving loop had failed (the cause is chained).
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        self.close_link()
        error, self._error = self._error, None
        if error is not None:
            raise EmulatorError(f"the emulator's loop failed: {error!r}") from error

    stop = close
    """The older name of :meth:`close`."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open_link(self) -> str:
        """Open the link without serving (for :meth:`serve` in the caller's thread); idempotent.

        Returns:
            The link's URL.

        Raises:
            EmulatorError: the port cannot be listened on, or no pty.
        """
        if self._link is None:
            self._link = open_link(self.transport, self._host, self._requested_port)
            self._on_open(self._link)
        return self._link.url

    def close_link(self) -> None:
        """Close the link opened by :meth:`open_link` (or :meth:`start`); idempotent."""
        link, self._link = self._link, None
        if link is not None:
            link.close()

    def serve(self, stop: threading.Event) -> None:
        """Serve in this thread until ``stop`` is set; the link must be open (:meth:`open_link`).

        Raises:
            EmulatorError: the link is not open.
        """
        self._serve(self._started_link(), stop)

    def run(self, stop: threading.Event, on_ready: Callable[[str], None] | None = None) -> None:
        """Open the link, serve in this thread until ``stop`` is set, and close it (a command's loop).

        Args:
            stop: serving ends when it is set.
            on_ready: called with the link's URL once it is open; default: print it.

        Raises:
            EmulatorError: the port cannot be listened on, or no pty.
        """
        url = self.open_link()
        try:
            (on_ready or print)(url)
            self.serve(stop)
        finally:
            self.close_link()

    def _guarded(self) -> None:
        try:
            self.serve(self._stop)
        except BaseException as err:  # reported by close(), never lost in a thread
            self._error = err

    # -- where to connect

    @property
    def running(self) -> bool:
        """The loop is serving on its thread."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def url(self) -> str:
        """What a client opens with ``serial.serial_for_url``: ``socket://127.0.0.1:PORT`` or the pty's path.

        Raises:
            EmulatorError: not started.
        """
        return self._started_link().url

    @property
    def port(self) -> int:
        """The TCP port listened on.

        Raises:
            EmulatorError: not started, or serving a pty.
        """
        link = self._started_link()
        if not isinstance(link, TcpLink):
            raise EmulatorError("a pty emulator has no TCP port; use pty_path")
        return link.port

    @property
    def pty_path(self) -> str:
        """The path of the pseudo-terminal's slave end (e.g. ``/dev/pts/5``).

        Raises:
            EmulatorError: not started, or serving TCP.
        """
        link = self._started_link()
        if not isinstance(link, PtyLink):
            raise EmulatorError("a TCP emulator has no pty; use url or port")
        return link.url

    @property
    def client_connected(self) -> bool:
        """A TCP client is connected (always True for a pty, which cannot tell)."""
        link = self._link
        return link is not None and link.connected

    @property
    def connections(self) -> int:
        """TCP clients accepted so far (by the link open now)."""
        link = self._link
        return link.connections if link is not None else 0

    @property
    def refused_connections(self) -> int:
        """TCP clients refused because another one was connected."""
        link = self._link
        return link.refused if link is not None else 0

    def _started_link(self) -> Link:
        if self._link is None:
            raise EmulatorError("the emulator is not started (use start() or a with block)")
        return self._link

    # -- for subclasses

    def _noisy(self, data: bytes) -> bytes:
        """``data`` through the link noise (as it is now)."""
        noise = self.link_noise
        return noise.apply(data) if data and noise is not None else data

    def _on_open(self, link: Link) -> None:  # noqa: B027 (an optional hook)
        """A hook: the link was just opened (before any serving)."""

    @abc.abstractmethod
    def _serve(self, link: Link, stop: threading.Event) -> None:
        """The serving loop: move bytes between ``link`` and the device until ``stop`` is set."""


class SteppedServer(LinkServer):
    """A link server whose device is stepped every ``tick`` s and answers between steps.

    Subclasses fill :meth:`_receive` and :meth:`_output` (and, for a device with another timing, :meth:`_due` and
    :meth:`_new_client`). Every hook is called with :attr:`lock` held.

    Args:
        tick: s between steps of the device.  clock: the device's time, s (monotonic).
        transport, host, port, link_noise, name: as for :class:`LinkServer`.

    Raises:
        ValueError: an unknown transport or a tick that is not positive.
    """

    def __init__(
        self,
        *,
        tick: float,
        clock: Callable[[], float] = time.monotonic,
        transport: Transport = "tcp",
        host: str = "127.0.0.1",
        port: int = 0,
        link_noise: LinkNoise | None = None,
        name: str = "emulator",
    ) -> None:
        if not (math.isfinite(tick) and tick > 0.0):
            raise ValueError(f"tick must be > 0 s, got {tick!r}")
        super().__init__(transport=transport, host=host, port=port, link_noise=link_noise, name=name)
        self.tick = tick
        self._clock = clock

    @abc.abstractmethod
    def _receive(self, data: bytes, now: float) -> None:
        """Hand the host's bytes, read at ``now``, to the device."""

    @abc.abstractmethod
    def _output(self, now: float) -> bytes:
        """Step the device to ``now`` and take what it has to send."""

    def _due(self) -> float:
        """When the device has bytes due before its next tick, by the clock (inf: none)."""
        return math.inf

    def _new_client(self) -> None:
        """A new TCP client connected."""

    def _serve(self, link: Link, stop: threading.Event) -> None:
        clock, lock = self._clock, self.lock
        connections = link.connections
        next_tick = clock()
        while not stop.is_set():
            with lock:
                wake = min(next_tick, self._due())
            try:
                readable, _, _ = select.select(link.handles(), [], [], max(0.0, wake - clock()))
            except InterruptedError:
                continue
            for handle in readable:
                data = self._noisy(link.on_readable(handle) or b"")
                if data:
                    with lock:
                        self._receive(data, clock())
            if link.connections != connections:  # a new host on the line
                connections = link.connections
                with lock:
                    self._new_client()
            now = clock()
            with lock:
                out = self._output(now)
            if out and link.connected:
                link.write(self._noisy(out))
            if now >= next_tick:
                next_tick = max(next_tick + self.tick, now)


class DeviceCore(Protocol):
    """A sans-I/O device a :class:`DeviceEmulator` can serve: bytes in, a time step, bytes out."""

    def receive_data(self, data: bytes) -> None: ...

    def step(self, now: float) -> None: ...

    def data_to_send(self) -> bytes: ...


class DeviceEmulator(SteppedServer):
    """Serves a device core over TCP or a pseudo-terminal, stepped every ``tick`` s; a context manager.

    Args:
        device: the device core.
        transport: ``"tcp"`` or ``"pty"``.
        host: TCP address to listen on (the loopback by default).
        port: TCP port; 0 picks a free one.
        tick: s between steps of the device.
        link_noise: drops and corrupts bytes in both directions (settable while running), or None.
        clock: the device's time, s (monotonic).

    Raises:
        ValueError: an unknown transport or a tick that is not positive.
    """

    def __init__(
        self,
        device: DeviceCore,
        *,
        transport: Transport = "tcp",
        host: str = "127.0.0.1",
        port: int = 0,
        tick: float = 0.005,
        link_noise: LinkNoise | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            tick=tick,
            clock=clock,
            transport=transport,
            host=host,
            port=port,
            link_noise=link_noise,
            name="device-emulator",
        )
        self.device = device

    def _receive(self, data: bytes, now: float) -> None:
        self.device.receive_data(data)

    def _output(self, now: float) -> bytes:
        self.device.step(now)
        return self.device.data_to_send()
