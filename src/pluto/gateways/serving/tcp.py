"""TCP for a :class:`~.runner.ServerRunner`: connections handled by an ``asyncio.Protocol`` each
(:class:`ProtocolListener`, the ``loop.create_server`` way) or by a coroutine given a reader and a writer
(:class:`StreamListener`, the ``asyncio.start_server`` way).
"""

# Strategy: every connection's protocol is wrapped in one of ours (_Connection), so the listener knows the
# connections open (to abort them when the server closes, and to wait until they are gone) and catches what the
# owner's protocol raises: asyncio itself would log an exception of data_received as a fatal error of the
# transport. What is caught goes to the runner's count and log, and the connection is closed. A StreamListener's
# handlers are tasks of their own: the server's close cancels them first, so each may clean up, then aborts the
# connections left.

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from pluto.gateways.serving.runner import Address, Listener, ServerRunner

__all__ = ["ProtocolListener", "StreamHandler", "StreamListener"]


StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""The coroutine function that handles one TCP connection (as for ``asyncio.start_server``)."""


class _Connection(asyncio.Protocol):
    """One TCP connection: hands each event to the owner's protocol, counts what it raises (and closes the
    connection then), and is known to its listener until it is lost."""

    def __init__(self, listener: _TcpListener, inner: asyncio.Protocol) -> None:
        self.listener = listener
        self.inner = inner
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.listener.attach(self)
        self._guard("connection_made", self.inner.connection_made, transport)

    def data_received(self, data: bytes) -> None:
        self._guard("data_received", self.inner.data_received, data)

    def eof_received(self) -> bool | None:
        try:
            return self.inner.eof_received()
        except Exception as err:
            self._failed("eof_received", err)
            return None

    def pause_writing(self) -> None:
        self._guard("pause_writing", self.inner.pause_writing)

    def resume_writing(self) -> None:
        self._guard("resume_writing", self.inner.resume_writing)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.detach(self)
        try:
            self.inner.connection_lost(exc)
        except Exception as err:
            self.listener.runner_report(f"connection_lost of {self.peer}", err)

    @property
    def peer(self) -> str:
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)

    def abort(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _guard(self, what: str, method: Callable[..., object], *args: object) -> None:
        try:
            method(*args)
        except Exception as err:
            self._failed(what, err)

    def _failed(self, what: str, err: Exception) -> None:
        self.listener.runner_report(f"{what} of the connection from {self.peer} (closed)", err)
        if self.transport is not None:
            self.transport.abort()


class _TcpListener(Listener):
    """A TCP server whose connections are :class:`_Connection`\\ s."""

    def __init__(self, host: str, port: int, options: dict[str, Any]) -> None:
        super().__init__(host, port)
        self.options = options
        self._runner: ServerRunner | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._all_lost: asyncio.Event | None = None

    @abstractmethod
    def _protocol(self) -> asyncio.Protocol:
        """The owner's protocol for a new connection."""

    async def open(self, runner: ServerRunner) -> Address:
        self._runner = runner
        self._all_lost = asyncio.Event()
        self._all_lost.set()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self, self._protocol()), self.host, self.port, **self.options
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    def attach(self, connection: _Connection) -> None:
        self._connections.add(connection)
        if self._all_lost is not None:
            self._all_lost.clear()

    def detach(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        if not self._connections and self._all_lost is not None:
            self._all_lost.set()

    def runner_report(self, what: str, err: BaseException) -> None:
        if self._runner is not None:
            self._runner.report(what, err)

    def stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        self.stop_listening()
        for connection in list(self._connections):
            connection.abort()
        if self._all_lost is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_lost.wait(), max(deadline - loop.time(), 0.0))
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), max(deadline - loop.time(), 0.0))

    @property
    def connections(self) -> int:
        return len(self._connections)


class ProtocolListener(_TcpListener):
    """TCP connections, each handled by a new ``asyncio.Protocol`` (as ``loop.create_server`` does).

    Args:
        factory: makes the protocol of a new connection.
        host, port: where to listen (port 0 picks a free one).
        options: more keyword arguments of ``loop.create_server`` (``backlog``, ``reuse_address``, ...).
    """

    def __init__(
        self, factory: Callable[[], asyncio.Protocol], host: str = "127.0.0.1", port: int = 0, **options: Any
    ) -> None:
        super().__init__(host, port, options)
        self.factory = factory

    def _protocol(self) -> asyncio.Protocol:
        return self.factory()


class StreamListener(_TcpListener):
    """TCP connections, each handled by a coroutine given a reader and a writer (as ``asyncio.start_server`` does).

    A connection is closed when its handler returns. When the server closes, the handlers are cancelled (each may
    clean up, within the runner's ``close_timeout``) and the connections still open are aborted.

    Args:
        handler: ``async def handler(reader, writer)``.
        host, port: where to listen (port 0 picks a free one).
        limit: the readers' buffer limit, bytes (as for ``asyncio.start_server``).
        options: more keyword arguments of ``loop.create_server`` (``backlog``, ``reuse_address``, ...).
    """

    def __init__(
        self,
        handler: StreamHandler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limit: int = 2**16,
        **options: Any,
    ) -> None:
        super().__init__(host, port, options)
        self.handler = handler
        self.limit = limit
        self._handlers: set[asyncio.Task[Any]] = set()

    def _protocol(self) -> asyncio.Protocol:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=self.limit, loop=loop)
        return asyncio.StreamReaderProtocol(reader, self._handle, loop=loop)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self.handler(reader, writer)
        except asyncio.CancelledError:
            pass  # the server closes; the task ends as if the handler had returned (asyncio would log it otherwise)
        except Exception as err:
            peer = writer.get_extra_info("peername")
            self.runner_report(f"the handler of the connection from {peer}", err)
        finally:
            self._handlers.discard(task)
            writer.close()

    async def close(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        self.stop_listening()
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.wait(handlers, timeout=max(deadline - loop.time(), 0.0))
        await super().close(deadline)
