"""The compiled kernels of the navigation modules and the arm: whether numba's on-disk cache holds them, and compiling
them into it.

The pose and slam modules' inner loops, the arm's closed-form inverse kinematics and the simulated base's geometry
(its clearance, bumpers and sonar rays) are numba functions compiled
with ``cache=True``: the first process that calls them compiles them (about 10 s on a quiet machine, nearer a
minute on a busy one) and leaves the machine code in numba's cache (``__pycache__`` beside the sources, or
``NUMBA_CACHE_DIR``); later processes load it in half a second. ``make`` compiles them once the package is installed
(``pluto warm``); after a plain ``pip install`` the first module to need them compiles them as it configures and
says so in its log, a line per kernel as numba begins it (numba's compile events), and the starters wait for it,
telling the log's last line as it changes (a module says it is starting before it configures: see
:func:`pluto.runtime.launcher.wait_publishing`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import time
from collections.abc import Callable, Iterator

import numba
import numba.core.event

__all__ = ["KERNELS", "missing", "warm", "warm_all"]

KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "pose": (
        "pluto.navigation.pose.tracker:warm_up",
        (
            "pluto.navigation.pose.core",
            "pluto.navigation.pose.update",
            "pluto.navigation.pose.features",
            "pluto.navigation.pose.map",
        ),
    ),
    "slam": (
        "pluto.navigation.slam.offline:warm_up",
        (
            "pluto.navigation.slam.scanmatch",
            "pluto.navigation.pose.core",
            "pluto.navigation.pose.update",
            "pluto.navigation.pose.features",
        ),
    ),
    "arm": (
        "pluto.hardware.arm.closed_form_kernels:warm_up",
        ("pluto.hardware.arm.closed_form_kernels",),
    ),
    "body": (
        "pluto.hardware.base.body_kernels:warm_up",
        ("pluto.hardware.base.body_kernels",),
    ),
}
"""Each set of kernels: the function that runs them all once (so that numba loads or compiles each), and the modules
that define them. The slam set's is a short SLAM run over a synthetic room: the wall filter and the line extractor
share the pose module's kernels, and some are first called at a run's second scan."""


def _dispatchers(module_name: str) -> list[numba.core.dispatcher.Dispatcher]:
    """The kernels a module defines that have machine code of their own (one with ``inline="always"`` is compiled
    into each caller's code, and cached with it)."""
    module = importlib.import_module(module_name)
    return [
        value
        for value in vars(module).values()
        if isinstance(value, numba.core.dispatcher.Dispatcher)
        and value.__module__ == module_name
        and value.targetoptions.get("inline") != "always"
    ]


def _cached(dispatcher: numba.core.dispatcher.Dispatcher) -> bool:
    """Whether numba's cache holds machine code of this function for its current source (an index of entries that
    numba would load: it drops one written for another version of the source or of numba)."""
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    load_index = getattr(cache_file, "_load_index", None)
    if load_index is None:  # another numba: say cached (a wrong "missing" would only cost a message)
        return True
    try:
        return bool(load_index())
    except Exception:
        return False


def missing(name: str) -> list[str]:
    """The kernels of set ``name`` (a key of :data:`KERNELS`) that numba's cache lacks, as ``module.function``."""
    _warm_up, modules = KERNELS[name]
    return [
        f"{module}.{dispatcher.py_func.__name__}"
        for module in modules
        for dispatcher in _dispatchers(module)
        if not _cached(dispatcher)
    ]


class _CompileProgress(numba.core.event.Listener):
    """Tells ``say`` of each kernel of ``lacking`` (``module.function``) as numba begins compiling it: ``compiling
    numba kernel 3 of 7: features.extract_lines``. Numba compiles a kernel's callees within its own compilation, so
    each is counted at its first event."""

    def __init__(self, lacking: list[str], say: Callable[[str], None]) -> None:
        self.lacking = set(lacking)
        self.say = say
        self.seen: set[str] = set()

    def on_start(self, event: numba.core.event.Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        function = getattr(data.get("dispatcher"), "py_func", None)
        name = f"{getattr(function, '__module__', '')}.{getattr(function, '__name__', '')}"
        if name in self.lacking and name not in self.seen:
            self.seen.add(name)
            short = ".".join(name.rsplit(".", 2)[-2:])
            self.say(f"compiling numba kernel {len(self.seen)} of {len(self.lacking)}: {short}")

    def on_end(self, event: numba.core.event.Event) -> None:
        pass


@contextlib.contextmanager
def _compile_progress(lacking: list[str], say: Callable[[str], None] | None) -> Iterator[None]:
    if not lacking or say is None:
        yield
        return
    with numba.core.event.install_listener("numba:compile", _CompileProgress(lacking, say)):
        yield


def warm(name: str, log: logging.Logger | None = None, say: Callable[[str], None] | None = None) -> float:
    """Run the kernels of set ``name`` once, so that numba loads them, or compiles them into its cache if it lacks
    them: then a warning goes to ``log`` first, saying why the start takes long, and a line per kernel as its
    compilation begins to ``say`` (default: ``log`` at INFO), the progress its starter shows. Returns the seconds
    it took."""
    where, _modules = KERNELS[name]
    lacking = missing(name) if log is not None or say is not None else []
    if log is not None and lacking:
        log.warning(
            "compiling the %s module's %d numba kernels into numba's cache (once after an install: `pluto warm` "
            "does it beforehand; up to a minute on a busy machine) ...",
            name,
            len(lacking),
        )
    module_name, _, function = where.partition(":")
    warm_up: Callable[[], None] = getattr(importlib.import_module(module_name), function)
    began = time.monotonic()
    with _compile_progress(lacking, say or (log.info if log is not None else None)):
        warm_up()
    return time.monotonic() - began


def _said_of(say: Callable[[str], None], name: str, line: str) -> None:
    say(f"{name}: {line}")


def warm_all(say: Callable[[str], None] = print) -> dict[str, float]:
    """Compile (or load) every set of kernels, telling ``say`` about each; return the seconds each took."""
    took = {}
    for name in KERNELS:
        lacking = missing(name)
        doing = f"compiling {len(lacking)} kernels ..." if lacking else "loading its kernels from the cache"
        say(f"{name}: {doing}")
        took[name] = warm(name, say=functools.partial(_said_of, say, name))
        say(f"{name}: ready in {took[name]:.1f} s")
    return took
