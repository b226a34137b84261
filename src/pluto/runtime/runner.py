"""Running modules in this process: one (``pluto run``) or several sharing one bus (``pluto up --one-process``).

Modules never know whether they share a process: each gets the same :class:`~pluto.bus.Bus` it would have had
alone, and the runner starts them in dependency order and stops them in reverse.
"""

from __future__ import annotations

import contextlib
import logging
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from pluto.bus import Bus
from pluto.runtime.config import Config, build_params
from pluto.runtime.module import STARTING_KEY, Module
from pluto.runtime.registry import load_module_class, without_driver

log = logging.getLogger("pluto.runtime")


@dataclass(frozen=True)
class ModuleSpec:
    """A module to run: which class, under what name, with which parameters.

    Attributes:
        module: an installed module name or ``package.module:Class``.
        name: the name on the bus (defaults to the class's name).
        params: parameter values, over the configuration file's ``[modules.<name>]`` table.
    """

    module: str
    name: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


def instantiate(spec: ModuleSpec, bus: Bus, config: Config) -> Module[Any]:
    """Create (not start) the module a spec describes, with validated parameters.

    Raises:
        ModuleNotFound: unknown module.
        ConfigError: bad parameters (saying which and where).
    """
    default = load_module_class(spec.module)
    name = spec.name or default.name or default.__name__.lower()
    merged = {**config.module_table(name), **spec.params}
    cls = load_module_class(spec.module, merged)
    where = f"parameters of {name}" + (f" ({config.path})" if config.path else "")
    params = build_params(cls.Params, without_driver(merged), where=where)
    return cls(bus, params, name=name)


@contextlib.contextmanager
def running(modules: Sequence[Module[Any]], stop: threading.Event | None = None) -> Iterator[Sequence[Module[Any]]]:
    """Start modules in order; stop them in reverse order when the block ends (even on error).

    With ``stop``, the event of :func:`stop_on_signals`, a signal that comes while a module configures (which may
    take long: kernels compiled on a first run, a driver's handshake) ends its start at once (:class:`Interrupted`).
    """
    started: list[Module[Any]] = []
    try:
        for module in modules:
            try:
                with interruptible(stop) if stop is not None else contextlib.nullcontext():
                    module.start()
            except SystemError:
                # The signal's Interrupted, raised in a callback that Zenoh ran on this thread within one of its calls
                # (a liveliness token declared, say), comes out of that call as a SystemError: it is the interruption.
                # The module may be running by then without its token: it is stopped too.
                if stop is None or not stop.is_set():
                    raise
                started.append(module)
                raise Interrupted("stopped") from None
            finally:
                if module._token is not None and module not in started:  # started, even if the signal came just after
                    started.append(module)
        yield modules
    finally:
        for module in reversed(started):
            try:
                module.stop()
            except Exception:
                log.exception("stopping %s failed", module.module_name)


class Interrupted(BaseException):
    """SIGINT or SIGTERM within :func:`interruptible` (a BaseException, as KeyboardInterrupt, so that no handler
    swallows it)."""


class SignalStop(threading.Event):
    """The event :func:`stop_on_signals` sets: its :meth:`wait` on the main thread never misses a signal.

    CPython runs a signal's Python handler on the main thread between two bytecodes; a signal that lands while the
    main thread is on its way into a blocking wait (past its last look at pending signals, before the wait begins:
    a busy machine can hold it there for milliseconds) would otherwise have its handler wait until the main thread
    wakes for something else, so ``stop.wait()`` would never return. Here the signal also writes a byte to a socket
    (:func:`signal.set_wakeup_fd`) and the main thread waits on that socket, which holds the byte until it is read:
    the wait returns, the handler runs, and the event is set. :meth:`set` from another thread writes a byte too.
    """

    LONGEST_WAIT = 1.0
    """s of one wait on the socket: a bound, should some other code take the wakeup socket over meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupt = False
        """Set within :func:`interruptible`: the first signal also raises :class:`Interrupted`."""
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)

    @property
    def wakeup_fd(self) -> int:
        """The descriptor for :func:`signal.set_wakeup_fd`."""
        return self._writer.fileno()

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # full (a byte is there already) or closed (the block has ended)
            self._writer.send(b"\0")

    def wait(self, timeout: float | None = None) -> bool:
        if threading.current_thread() is not threading.main_thread() or self._reader.fileno() < 0:
            return super().wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = self.LONGEST_WAIT if deadline is None else min(self.LONGEST_WAIT, deadline - time.monotonic())
            if left <= 0:
                return False
            readable, _, _ = select.select([self._reader], [], [], left)  # a handler due runs as this returns
            if readable:
                with contextlib.suppress(OSError):
                    self._reader.recv(4096)
        return True

    def close(self) -> None:
        """Close the socket (the event stays usable: its waits are then plain ones)."""
        self._reader.close()
        self._writer.close()


@contextlib.contextmanager
def stop_on_signals(interrupt: type[BaseException] | None = None) -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs (main thread only); handlers restored after.

    On the main thread the event is a :class:`SignalStop`, whose wait cannot miss a signal that comes just as it
    begins.

    Args:
        interrupt: also raise this in the main thread at the first signal, for a block that must stop at once
            rather than at its next look at the event.
    """
    if threading.current_thread() is not threading.main_thread():
        yield threading.Event()
        return
    stop = SignalStop()

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = not stop.is_set()
        log.info("received %s, stopping", name)
        stop.set()
        if first and interrupt is not None:
            raise interrupt(name)
        if first and stop.interrupt:
            raise Interrupted(name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous_fd = signal.set_wakeup_fd(stop.wakeup_fd, warn_on_full_buffer=False)
    try:
        yield stop
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, old in previous.items():
            signal.signal(sig, old)
        stop.close()


@contextlib.contextmanager
def interruptible(stop: threading.Event) -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM that sets ``stop`` (the event of :func:`stop_on_signals`) also
    raises :class:`Interrupted` in the main thread, for code that cannot look at the event (a module configuring, a
    wait for modules to start); if ``stop`` is set already, the block does not run. Any other event: nothing."""
    if not isinstance(stop, SignalStop):
        yield
        return
    stop.interrupt = True
    try:
        if stop.is_set():  # a signal before the block (checked after arming, so none falls in between)
            raise Interrupted("stopped")
        yield
    finally:
        stop.interrupt = False


def run_in_process(specs: Sequence[ModuleSpec], config: Config, stop: threading.Event) -> None:
    """Run modules in this process on one bus until ``stop`` is set, then stop them cleanly (also when it is set by
    a signal while they start).

    Each module whose name is known without importing it says it is starting (``@starting/<name>``) as soon as the
    bus is open, before its classes are imported: importing numba, scipy or a driver's libraries takes seconds on a
    busy machine, and a starter waits for a module that says it is starting (see
    :func:`pluto.runtime.launcher.wait_publishing`), not for one that is silent. The module's own token takes over
    while it configures (Zenoh keeps one token of a key alive while either is declared).
    """
    with Bus(config.bus) as bus:
        early = [bus.declare_token(f"{STARTING_KEY}/{name}") for name in _names_known_early(specs)]
        try:
            modules = [instantiate(spec, bus, config) for spec in specs]
            with contextlib.suppress(Interrupted), running(modules, stop):
                for token in early:
                    bus.release(token)
                early = []
                stop.wait()
        finally:
            for token in early:
                bus.release(token)


def _names_known_early(specs: Sequence[ModuleSpec]) -> list[str]:
    """The bus names of the modules that are known before their classes are imported: a name given, or an
    installed module's name (which is its bus name)."""
    return [spec.name or spec.module for spec in specs if spec.name or ":" not in spec.module]
