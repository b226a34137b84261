"""Running a gateway's network server: an asyncio server on a loop of its own on a thread, or in the caller's loop.

On a thread of its own (what module shells do)::

    runner = ServerRunner(StreamListener(handle, "127.0.0.1", 0), name="xmlserver")
    runner.start()                  # returns once it listens
    host, port = runner.address     # the bound address (the real port when 0 was asked for)
    runner.call_soon(work, value)   # from any thread: work(value) runs on the server's loop
    runner.close()                  # from any thread, as often as you like: stops listening, closes every
                                    # connection, and ends the thread (waiting close_timeout s at most)

In the caller's asyncio loop::

    async with ServerRunner(DatagramListener(Echo, "127.0.0.1", 0), name="echo") as runner:
        ...                         # it serves while the block runs; every connection is closed at its end
    await ServerRunner(...).serve() # serves until close() (from any thread) or until the task is cancelled

A listener says what is served: TCP connections handled by a coroutine (:class:`StreamListener`, the
``asyncio.start_server`` way), TCP connections handled by an ``asyncio.Protocol`` (:class:`ProtocolListener`, the
``loop.create_server`` way) or UDP datagrams handled by an ``asyncio.DatagramProtocol`` (:class:`DatagramListener`,
``loop.create_datagram_endpoint``).

Nothing raised on the server's loop is lost: an exception of a connection's handler or protocol, of a datagram
protocol, of a task started with :meth:`ServerRunner.spawn`, of a call handed over with
:meth:`ServerRunner.call_soon`, or one the loop reports itself (on a loop of the runner's own), is counted in
:attr:`ServerRunner.errors` and logged: the first few with their traceback, then one line every few seconds with the
number held back. A TCP connection whose protocol raised is closed; a UDP endpoint goes on with the next datagram.
"""

# Strategy: one code path for both ways of running: open() listens in the running loop and starts a watcher task
# that waits for the close request and then shuts the server down, so a loop of the runner's own (on a thread)
# just runs open() and then that task. close() only sets a flag and hands the request to the loop
# (call_soon_threadsafe), so it is safe from any thread, the server's own included; from another thread it then
# waits for the shutdown, at most close_timeout. The shutdown stops listening, lets the owner say goodbye
# (on_close), cancels the owner's tasks, cancels the connections' handlers and aborts every connection still open,
# each wait bounded by one deadline. Connections are known because every protocol is wrapped in one of ours, which
# also catches what the owner's protocol raises; asyncio itself would log an exception of data_received as a fatal
# error of the transport, and close a UDP endpoint for one of datagram_received. A UDP transport reads one
# datagram per turn of the loop; the wrapper reads up to read_batch - 1 more from the socket at once, so a flood
# is drained at the cost of a system call per datagram rather than of a turn of the loop.

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Self, TypeVar, cast

__all__ = [
    "Address",
    "DatagramListener",
    "Listener",
    "ProtocolListener",
    "ServerRunner",
    "StreamListener",
]

T = TypeVar("T")

Address = tuple[str, int]
"""A host and a port."""

LOGGED_ERRORS = 10
"""Errors logged with their traceback before the log is rate-limited."""
ERROR_LOG_INTERVAL = 5.0
"""s between two log lines about errors once :data:`LOGGED_ERRORS` have been logged."""

StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""The coroutine function that handles one TCP connection (as for ``asyncio.start_server``)."""


class Listener(ABC):
    """What a :class:`ServerRunner` serves: a TCP server or a UDP endpoint, and the connections it has.

    Args:
        host: address to listen on.
        port: port to listen on; 0 picks a free one.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    @abstractmethod
    async def open(self, runner: ServerRunner) -> Address:
        """Start listening in the running loop; the address bound.

        Raises:
            OSError: the address cannot be bound.
        """

    @abstractmethod
    def stop_listening(self) -> None:
        """Take no new connection (a UDP endpoint goes on receiving until :meth:`close`)."""

    @abstractmethod
    async def close(self, deadline: float) -> None:
        """Close every connection and the socket, waiting for them until ``deadline`` (the loop's time, s) at most."""

    @property
    @abstractmethod
    def connections(self) -> int:
        """Connections open now (0 for UDP)."""


class ServerRunner:
    """Runs one listener: on an asyncio loop of its own on a thread (:meth:`start`), or in the caller's loop
    (``async with``, :meth:`serve`). A runner serves once: it cannot be started again after :meth:`close`.

    Args:
        listener: what to serve.
        name: the name of the server in log lines, and of its thread.
        logger: where errors go (``pluto.gateways`` by default).
        on_open: called on the loop once the server listens, with the runner (a coroutine function may be given):
            start the server's own tasks there with :meth:`spawn`. If it raises, the server closes and the error
            goes to :meth:`start` (or :meth:`open`).
        on_close: called on the loop when the server closes, after it has stopped listening and before its tasks
            are cancelled and its connections closed (a coroutine function may be given): say goodbye to clients.
        close_timeout: the longest :meth:`close` waits for the server to shut down, s.
        daemon: whether the thread of :meth:`start` is a daemon (threads it starts inherit it).
    """

    def __init__(
        self,
        listener: Listener,
        *,
        name: str,
        logger: logging.Logger | None = None,
        on_open: Callable[[ServerRunner], object] | None = None,
        on_close: Callable[[], object] | None = None,
        close_timeout: float = 5.0,
        daemon: bool = True,
    ) -> None:
        if not close_timeout > 0:
            raise ValueError(f"close_timeout must be > 0, got {close_timeout}")
        self.listener = listener
        self.name = name
        self.log = logger or logging.getLogger("pluto.gateways")
        self.close_timeout = close_timeout
        self.daemon = daemon
        self._on_open = on_open
        self._on_close = on_close
        self._state_lock = threading.Lock()
        self._opened = False  # open() or start() was called
        self._closing = False  # close() was called
        self._done = threading.Event()  # shut down (or never opened)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._address: Address | None = None
        self._close_requested: asyncio.Event | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._error_lock = threading.Lock()
        self._errors = 0
        self._held_errors = 0
        self._last_error_log = -float("inf")

    # -- what every owner reads -----------------------------------------------------------------------------------

    @property
    def address(self) -> Address:
        """The host and port the server listens on (or listened on, once closed).

        Raises:
            RuntimeError: it has not listened yet.
        """
        address = self._address
        if address is None:
            raise RuntimeError(f"{self.name} is not listening")
        return address

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the server runs on (None before it runs)."""
        return self._loop

    @property
    def running(self) -> bool:
        """It listens and has not been asked to close."""
        return self._address is not None and not self._closing and not self._done.is_set()

    @property
    def closing(self) -> bool:
        """:meth:`close` has been called (the server may still be shutting down)."""
        return self._closing

    @property
    def errors(self) -> int:
        """Exceptions raised on the server's loop so far (each one logged, or counted in a later log line)."""
        return self._errors

    # -- on a thread of its own -----------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> None:
        """Run the server on a loop of its own on a thread; return once it listens (starting twice does nothing).

        Raises:
            OSError: the address cannot be bound (the port is taken, say).
            TimeoutError: it did not listen within ``timeout`` s (it is then closed).
            RuntimeError: the runner was closed, or it already serves in another loop.
        """
        with self._state_lock:
            if self._closing:
                raise RuntimeError(f"{self.name} is closed; a runner serves once")
            if self._opened:
                if self._thread is None:
                    raise RuntimeError(f"{self.name} already serves in the caller's loop")
                return
            self._opened = True
            ready: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._thread = threading.Thread(target=self._thread_main, args=(ready,), name=self.name, daemon=self.daemon)
            self._thread.start()
        try:
            ready.result(timeout)
        except BaseException:
            self.close()
            raise

    def _thread_main(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._loop_exception)
        try:
            loop.run_until_complete(self._run_own_loop(ready))
        except BaseException as err:  # before listening, it goes to start(); after, to the log
            if not ready.done():
                ready.set_exception(err)
            else:
                self.report("the server's loop failed", err)
        finally:
            self._end_loop(loop)
            self._done.set()

    async def _run_own_loop(self, ready: concurrent.futures.Future[None]) -> None:
        await self.open()
        ready.set_result(None)
        watcher = self._watcher
        assert watcher is not None
        await watcher

    def _end_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel what is left on the loop (a task that ignores cancellation is given close_timeout), then close it."""
        try:
            left = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=self.close_timeout))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception as err:
            self.report("closing the server's loop", err)
        finally:
            loop.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- in the caller's loop -------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Listen in the running loop; return once it listens. The server then serves in the background of that
        loop until :meth:`close`.

        Raises:
            OSError: the address cannot be bound.
            RuntimeError: the runner was closed, or already serves.
        """
        with self._state_lock:
            if self._closing:
                raise RuntimeError(f"{self.name} is closed; a runner serves once")
            if self._opened and self._thread is not threading.current_thread():
                raise RuntimeError(f"{self.name} already serves")
            self._opened = True
            self._loop = asyncio.get_running_loop()
        self._close_requested = asyncio.Event()
        try:
            self._address = await self.listener.open(self)
        except BaseException:
            self._done.set()
            raise
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name=f"{self.name}-watcher")
        try:
            if self._on_open is not None:
                await _maybe_await(self._on_open(self))
        except BaseException:
            self.close()
            await self.wait_closed()
            raise
        if self._closing:  # close() came from another thread before the loop was known
            self._close_requested.set()

    async def serve(self) -> None:
        """Listen (unless :meth:`open` did already) and serve until :meth:`close` is called, from any thread, or
        until this task is cancelled; the server is shut down when it returns.

        Raises:
            OSError: the address cannot be bound.
        """
        if not self._opened:
            await self.open()
        try:
            await self.wait_closed()
        except asyncio.CancelledError:
            self.close()
            await self.wait_closed()
            raise

    async def wait_closed(self) -> None:
        """Wait until the server has shut down (at once if it never listened)."""
        watcher = self._watcher
        if watcher is not None and not watcher.done():
            await asyncio.shield(watcher)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        await self.wait_closed()

    # -- ending ---------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, close every connection and stop the server (idempotent; safe from any thread).

        From a thread other than the server's loop it returns once the server has shut down, or after
        ``close_timeout`` s (logged); on the server's loop it only asks (``await wait_closed()`` there).
        """
        with self._state_lock:
            self._closing = True
            loop, thread = self._loop, self._thread
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server is down already
                loop.call_soon_threadsafe(self._request_close)
        if self._on_server_loop():
            return
        if thread is not None:
            thread.join(self.close_timeout + 1.0)
            if thread.is_alive():
                self.log.warning("%s did not stop within %g s", self.name, self.close_timeout)
        elif loop is not None and not self._done.wait(self.close_timeout + 1.0):
            self.log.warning("%s did not stop within %g s", self.name, self.close_timeout)

    def _on_server_loop(self) -> bool:
        loop = self._loop
        if loop is None:
            return False
        try:
            return asyncio.get_running_loop() is loop
        except RuntimeError:
            return False

    def _request_close(self) -> None:
        if self._close_requested is not None:
            self._close_requested.set()

    async def _watch(self) -> None:
        """Wait for the close request, then shut down (also when cancelled: the caller's loop ends)."""
        assert self._close_requested is not None
        try:
            await self._close_requested.wait()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.close_timeout
        self._closing = True
        try:
            self.listener.stop_listening()
            if self._on_close is not None:
                try:
                    await asyncio.wait_for(_maybe_await(self._on_close()), max(deadline - loop.time(), 0.0))
                except Exception as err:
                    self.report("saying goodbye to the clients (on_close)", err)
            tasks = [task for task in self._tasks if not task.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=max(deadline - loop.time(), 0.0))
            await self.listener.close(deadline)
        finally:
            with self._error_lock:
                held, self._held_errors = self._held_errors, 0
            if held:
                self.log.error("%s: %d more errors not logged (%d in all)", self.name, held, self._errors)
            self._done.set()

    # -- work on the server's loop --------------------------------------------------------------------------------

    def call_soon(self, callback: Callable[..., object], *args: object) -> bool:
        """Run ``callback(*args)`` on the server's loop (from any thread, in the order of the calls; what it raises
        is counted and logged). False if the server is not running (it is dropped)."""
        loop = self._loop
        if loop is None or self._done.is_set():
            return False
        try:
            loop.call_soon_threadsafe(self._call, callback, args)
        except RuntimeError:  # the loop has closed
            return False
        return True

    def _call(self, callback: Callable[..., object], args: tuple[object, ...]) -> None:
        try:
            callback(*args)
        except Exception as err:
            self.report(f"{getattr(callback, '__qualname__', callback)!s} on the server's loop", err)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 5.0) -> T:
        """Run ``coroutine`` on the server's loop and return its result (from another thread).

        Raises:
            RuntimeError: the server is not running, or this is the server's own loop (it would wait for itself).
            TimeoutError: no result within ``timeout`` s.
        """
        loop = self._loop
        if loop is None or self._done.is_set() or loop.is_closed():
            coroutine.close()
            raise RuntimeError(f"{self.name} is not running")
        if self._on_server_loop():
            coroutine.close()
            raise RuntimeError(f"{self.name}: run() from the server's own loop; await the coroutine instead")
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except RuntimeError:
            coroutine.close()
            raise RuntimeError(f"{self.name} is not running") from None
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{self.name}: no result within {timeout:g} s") from None

    def spawn(self, coroutine: Coroutine[Any, Any, object], name: str | None = None) -> asyncio.Task[Any]:
        """Start a task of the server (on its loop): it is cancelled when the server closes, and what it raises is
        counted and logged."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (err := task.exception()) is not None:
            self.report(f"task {task.get_name()}", err)

    # -- errors ---------------------------------------------------------------------------------------------------

    def report(self, what: str, error: BaseException | None) -> None:
        """Count an exception raised while serving and log it (rate-limited once :data:`LOGGED_ERRORS` have been
        logged). Thread-safe."""
        now = time.monotonic()
        with self._error_lock:
            self._errors += 1
            log_it = self._errors <= LOGGED_ERRORS or now - self._last_error_log >= ERROR_LOG_INTERVAL
            held = self._held_errors
            if log_it:
                self._last_error_log = now
                self._held_errors = 0
            else:
                self._held_errors += 1
        if log_it:
            more = f" ({held} more errors since the last line)" if held else ""
            self.log.error("%s: %s failed%s", self.name, what, more, exc_info=error)

    def _loop_exception(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        self.report(str(context.get("message", "the loop")), error if isinstance(error, BaseException) else None)


async def _maybe_await(result: object) -> None:
    if inspect.isawaitable(result):
        await result


# -- TCP --------------------------------------------------------------------------------------------------------


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


# -- UDP --------------------------------------------------------------------------------------------------------


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
