"""UDP for a :class:`~.runner.ServerRunner`: an endpoint whose datagrams an ``asyncio.DatagramProtocol`` handles
(:class:`DatagramListener`, the ``loop.create_datagram_endpoint`` way).
"""

# Strategy: the owner's protocol is wrapped in one of ours (_Datagrams), which catches what it raises: asyncio
# would close the endpoint for an exception of datagram_received. What is caught goes to the runner's count and
# log, and the endpoint goes on with the next datagram. A UDP transport reads one datagram per turn of the loop;
# the wrapper reads up to read_batch - 1 more from the socket at once, so a flood is drained at the cost of a
# system call per datagram rather than of a turn of the loop.

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any, cast

from pluto.gateways.serving.runner import Address, Listener, ServerRunner

__all__ = ["DatagramListener"]


class _Datagrams(asyncio.DatagramProtocol):
    """The UDP endpoint's protocol: hands each datagram to the owner's protocol, counts what it raises and goes
    on, and reads up to ``read_batch`` datagrams per turn of the loop."""

    def __init__(self, listener: DatagramListener, inner: asyncio.DatagramProtocol) -> None:
        self.listener = listener
        self.inner = inner
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # (the selector loop's is not a subclass)
        self._guard("connection_made", self.inner.connection_made, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self._guard("datagram_received", self.inner.datagram_received, data, addr)
        sock = self.listener.socket
        transport = self.transport
        size = self.listener.read_size
        for _ in range(self.listener.read_batch - 1):
            if sock is None or transport is None or transport.is_closing():
                return
            try:
                data, addr = sock.recvfrom(size)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # an ICMP error reported on the socket
                self._guard("error_received", self.inner.error_received, err)
                continue
            self._guard("datagram_received", self.inner.datagram_received, data, addr)

    def error_received(self, exc: Exception) -> None:
        self._guard("error_received", self.inner.error_received, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard("connection_lost", self.inner.connection_lost, exc)
        self.listener.lost()

    def _guard(self, what: str, method: Callable[..., object], *args: object) -> None:
        try:
            method(*args)
        except Exception as err:
            self.listener.runner_report(f"{what} of the UDP endpoint", err)


class DatagramListener(Listener):
    """A UDP endpoint whose datagrams an ``asyncio.DatagramProtocol`` handles (``loop.create_datagram_endpoint``).

    Args:
        factory: makes the endpoint's protocol (once).
        host, port: where to bind (port 0 picks a free one); an address with a colon is IPv6.
        receive_buffer: kernel receive buffer to ask for, bytes (0 keeps the system's default; Linux grants at most
            ``net.core.rmem_max``): a large one rides out moments the loop does not run.
        read_batch: most datagrams handled per turn of the loop (others' callbacks get their turn in between).
        read_size: bytes read of each datagram beyond the first of a batch; a longer one is cut to this length
            (the first is read whole, up to 256 KiB).
    """

    def __init__(
        self,
        factory: Callable[[], asyncio.DatagramProtocol],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        receive_buffer: int = 0,
        read_batch: int = 1,
        read_size: int = 65536,
    ) -> None:
        super().__init__(host, port)
        if receive_buffer < 0 or read_batch < 1 or read_size < 1:
            raise ValueError(
                f"receive_buffer must be >= 0, read_batch and read_size >= 1; got {receive_buffer}, {read_batch}, "
                f"{read_size}"
            )
        self.factory = factory
        self.receive_buffer = receive_buffer
        self.read_batch = read_batch
        self.read_size = read_size
        self.granted_receive_buffer = 0
        """The kernel receive buffer the socket has, bytes (once open)."""
        self.socket: socket.socket | None = None
        self._runner: ServerRunner | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._lost: asyncio.Event | None = None

    async def open(self, runner: ServerRunner) -> Address:
        self._runner = runner
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if self.receive_buffer > 0:
                with contextlib.suppress(OSError):  # refused: the system's default will do
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            sock.bind((self.host, self.port))
            sock.setblocking(False)
            self.granted_receive_buffer = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            self._lost = asyncio.Event()
            self.socket = sock
            transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
                lambda: _Datagrams(self, self.factory()), sock=sock
            )
        except BaseException:
            self.socket = None
            sock.close()
            raise
        self._transport = transport
        host, port = sock.getsockname()[:2]
        return str(host), int(port)

    def runner_report(self, what: str, err: BaseException) -> None:
        if self._runner is not None:
            self._runner.report(what, err)

    def lost(self) -> None:
        self.socket = None
        if self._lost is not None:
            self._lost.set()

    def stop_listening(self) -> None:
        """Nothing to do: the socket receives until :meth:`close`."""

    async def close(self, deadline: float) -> None:
        transport, self._transport = self._transport, None
        if transport is None:
            return
        transport.close()
        if self._lost is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), max(deadline - asyncio.get_running_loop().time(), 0.0))

    @property
    def connections(self) -> int:
        return 0
