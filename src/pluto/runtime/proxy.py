"""The base of every proxy: the client-side API of a module.

A proxy finds the module it needs on the bus, or starts it as a daemon (the original's proxies did the same:
docs/design.md) and waits until it publishes; then it turns simple method calls into reads, writes and requests on the
module's interfaces, so users need not know the module's protocol.

The interfaces a proxy can open are numbered, and which ones to open is chosen with a bit mask (the sum of 2^n for
each interface n), the convention of the original localization proxy: ``LocProxy(bus, 9)`` opens interfaces 0 and 3.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pluto import limits, msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.errors import BusTimeout, LaunchError
from pluto.runtime import launcher
from pluto.runtime.registry import load_module_class


def interface_mask(*numbers: int) -> int:
    """The mask that selects interfaces ``numbers`` (sum of 2^n): ``interface_mask(0, 3) == 9``."""
    mask = 0
    for n in numbers:
        if n < 0:
            raise ValueError(f"interface numbers start at 0, got {n}")
        mask |= 1 << n
    return mask


LATE_TOKEN = 1.5
"""s a proxy waits for the token of a module its bus does not list yet before it counts the module as not running."""


class Proxy:
    """Client-side access to one module.

    Subclasses set ``module`` (the module to find or start) and ``interfaces`` (the interfaces it can read, numbered
    from 0), and add the methods users call.

    Args:
        bus: the process's bus.
        mask: which interfaces to open (sum of 2^n); None opens all of them.
        start: start the module as a daemon if it is not running.
        timeout: seconds to wait for the module to publish.

    Raises:
        ValueError: the mask selects an interface the proxy does not have.
        LaunchError: the module is not running and could not be started (or ``start`` is False).
    """

    module: ClassVar[str] = ""
    interfaces: ClassVar[tuple[str, ...]] = ()

    def __init__(self, bus: Bus, mask: int | None = None, *, start: bool = True, timeout: float = 15.0) -> None:
        full = (1 << len(self.interfaces)) - 1
        if mask is None:
            mask = full
        if mask < 0 or mask & ~full:
            raise ValueError(
                f"{type(self).__name__}: mask {mask} selects interfaces it does not have "
                f"(numbers 0..{len(self.interfaces) - 1}, so at most {full})"
            )
        self.bus = bus
        self.mask = mask
        self.module_name = self._bus_name()
        self._find_or_start(start, timeout)
        self._readers: dict[int, StateReader[Any]] = {
            n: bus.create_reader(name) for n, name in enumerate(self.interfaces) if mask & (1 << n)
        }
        self._writers: dict[str, StateWriter[Any]] = {}

    def _bus_name(self) -> str:
        cls = load_module_class(self.module)
        return cls.name or cls.__name__.lower()

    def _alive(self) -> bool:
        """Whether the module is alive: the bus lists it, or its token comes within :data:`LATE_TOKEN` s.

        A process whose bus has just taken the local rendezvous over (the process that held it ended: a command
        line that started a profile in the background) hears the other sessions announce themselves before it has
        heard all their module tokens, which come over the same links a moment later."""
        if self.module_name in self.bus.live_modules():
            return True
        try:
            self.bus.wait_for_module(self.module_name, LATE_TOKEN)
        except BusTimeout:
            return False
        return True

    def _find_or_start(self, start: bool, timeout: float) -> None:
        if self._alive():
            launcher.wait_publishing(self.bus, self.module, timeout)
            return
        if not start:
            raise LaunchError(
                f"{self.module_name} is not running on robot {self.bus.robot} (`pluto start {self.module_name}`)"
            )
        try:
            launcher.start_daemon(self.bus, self.module, timeout=timeout)
        except LaunchError:
            # Someone else (another proxy, a profile) may have started it meanwhile, or be starting it: that is as
            # good, once it publishes.
            pid_file = launcher.runtime_dir(self.bus.robot) / f"{self.module_name}.pid"
            if self.module_name not in self.bus.live_modules() and launcher.read_pid(pid_file) is None:
                raise
            launcher.wait_publishing(self.bus, self.module, timeout)

    # -- interfaces by number -----------------------------------------------------------------------------------

    def selected(self, n: int) -> bool:
        """True if interface ``n`` was opened."""
        return n in self._readers

    def reader(self, n: int) -> StateReader[Any]:
        """The reader of interface ``n``.

        Raises:
            ValueError: interface ``n`` was not selected by the mask.
        """
        try:
            return self._readers[n]
        except KeyError:
            raise ValueError(
                f"{type(self).__name__}: interface {n} was not opened (mask {self.mask}; add {1 << n} to it)"
            ) from None

    def get(self, n: int) -> Any:
        """The newest value of interface ``n`` (None if it has none yet)."""
        return self.reader(n).read()

    def wait(self, n: int, timeout: float | None = None) -> Any:
        """Wait for the next value of interface ``n`` and return it."""
        return self.reader(n).wait_for_update(timeout)

    # -- commands -----------------------------------------------------------------------------------------------

    def write(self, name: str, value: msgs.Message) -> None:
        """Write ``value`` to interface ``name`` (the writer is created on first use).

        A proxy is where a program's values enter the robot: they are range-checked first (:func:`pluto.limits.check`).

        Raises:
            LimitError: a value is not finite, too large, or beyond what the interface physically allows.
        """
        limits.check(name, value)
        writer = self._writers.get(name)
        if writer is None:
            writer = self._writers[name] = self.bus.create_publisher(name, type(value))
        writer.write(value)

    def call(self, method: str, request: Any = None, reply_type: Any = Any, timeout: float = 2.0) -> Any:
        """Call the module's service ``method``."""
        return self.bus.call(f"{self.module_name}/{method}", request, reply_type, timeout=timeout)

    def start_activity(self) -> bool:
        """Start the module's control thread (harmless if it runs already)."""
        return bool(self.call("start_activity"))

    def stop_activity(self) -> bool:
        """Stop the module's control thread; the module stays up."""
        return not self.call("stop_activity")

    def close(self) -> None:
        """Close this proxy's readers and writers (the module keeps running)."""
        for thing in [*self._readers.values(), *self._writers.values()]:
            self.bus.release(thing)
        self._readers.clear()
        self._writers.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
