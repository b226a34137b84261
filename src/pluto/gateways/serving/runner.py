"""The runner of a gateway's network server, and the listener interface it runs.

:class:`ServerRunner` owns the asyncio side of a server: the loop (its own, on a thread, or the caller's), the
opening and the one shutdown, the server's tasks, and the count and log of everything raised on that loop.
:class:`Listener` is what it runs: the TCP servers of :mod:`.tcp` and the UDP endpoint of :mod:`.udp` implement it.
The package docstring (:mod:`pluto.gateways.serving`) shows how a gateway uses them.
"""

# Strategy: one code path for both ways of running: open() listens in the running loop and starts a watcher task
# that waits for the close request and then shuts the server down, so a loop of the runner's own (on a thread)
# just runs open() and then that task. close() only sets a flag and hands the request to the loop
# (call_soon_threadsafe), so it is safe from any thread, the server's own included; from another thread it then
# waits for the shutdown, at most close_timeout. The shutdown stops listening, lets the owner say goodbye
# (on_close), cancels the owner's tasks, then has the listener cancel the connections' handlers and abort every
# connection still open, each wait bounded by one deadline.

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

__all__ = ["ERROR_LOG_INTERVAL", "LOGGED_ERRORS", "Address", "Listener", "ServerRunner"]

T = TypeVar("T")

Address = tuple[str, int]
"""A host and a port."""

LOGGED_ERRORS = 10
"""Errors logged with their traceback before the log is rate-limited."""
ERROR_LOG_INTERVAL = 5.0
"""s between two log lines about errors once :data:`LOGGED_ERRORS` have been logged."""


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
