"""Running modules in this process: one (``pluto run``) or several sharing one bus (``pluto up --one-process``).

Modules never know whether they share a process: each gets the same :class:`~pluto.bus.Bus` it would have had
alone, and the runner starts them in dependency order and stops them in reverse.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from pluto.bus import Bus
from pluto.runtime.config import Config, build_params
from pluto.runtime.module import Module
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
def running(modules: Sequence[Module[Any]]) -> Iterator[Sequence[Module[Any]]]:
    """Start modules in order; stop them in reverse order when the block ends (even on error)."""
    started: list[Module[Any]] = []
    try:
        for module in modules:
            module.start()
            started.append(module)
        yield modules
    finally:
        for module in reversed(started):
            try:
                module.stop()
            except Exception:
                log.exception("stopping %s failed", module.module_name)


@contextlib.contextmanager
def stop_on_signals(interrupt: type[BaseException] | None = None) -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs (main thread only); handlers restored after.

    Args:
        interrupt: also raise this in the main thread at the first signal, for a block that must stop at once
            rather than at its next look at the event.
    """
    stop = threading.Event()

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = not stop.is_set()
        log.info("received %s, stopping", name)
        stop.set()
        if first and interrupt is not None:
            raise interrupt(name)

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_in_process(specs: Sequence[ModuleSpec], config: Config, stop: threading.Event) -> None:
    """Run modules in this process on one bus until ``stop`` is set, then stop them cleanly."""
    with Bus(config.bus) as bus:
        modules = [instantiate(spec, bus, config) for spec in specs]
        with running(modules):
            stop.wait()
