"""Finding module classes by name.

Installed modules are registered under the ``pluto.modules`` entry-point group (see pyproject.toml), so a separate
package can add modules without touching Pluto. A name of the form ``package.module:Class`` imports that class
directly, which is how tests and one-off modules are run; the current directory is searched after the installed
packages, so ``pluto run mypkg.counter:Counter`` finds ``./mypkg/counter.py`` with no ``PYTHONPATH``. A name of the
form ``path/to/file.py:Class`` loads that file, as ``python path/to/file.py`` would (its folder first on the path,
so it imports the files beside it, and the current directory after the installed packages, as above).

A module that can stand on several devices (the base: simulated or a Pioneer over P2OS; the laser: simulated or a
SICK LMS) has drivers: module classes registered under the ``pluto.drivers.<module>`` group, one entry point per
driver (``[project.entry-points."pluto.drivers.base"]``, ``p2os = "pluto.hardware.base.p2os_module:P2osBase"``).
The ``driver`` parameter picks one (``pluto run base --driver p2os``, or ``driver = "p2os"`` in a profile); without
it, the module's own class runs.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pluto.errors import ModuleNotFound
from pluto.extras import missing_extra
from pluto.runtime.module import Module

GROUP = "pluto.modules"
DRIVER_GROUP = "pluto.drivers"
"""Drivers of module ``m`` are registered under the group ``pluto.drivers.m``."""


def available_modules() -> dict[str, str]:
    """Installed module names and the ``package.module:Class`` each stands for."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def available_drivers(module: str) -> dict[str, str]:
    """Installed drivers of ``module`` (an installed module name) and the ``package.module:Class`` of each."""
    return {ep.name: ep.value for ep in entry_points(group=f"{DRIVER_GROUP}.{module}")}


def load_module_class(name: str, params: Mapping[str, object] | None = None) -> type[Module[Any]]:
    """Return the module class called ``name`` (an installed name or ``package.module:Class``).

    A ``driver`` among ``params`` picks one of the module's drivers instead (see :func:`load_driver_class`).

    Raises:
        ModuleNotFound: no such module (with the closest installed names), or no such driver of it.
        MissingExtra: the module needs a library of an extra that is not installed (the message names the extra).
    """
    cls = _load(name)
    driver = (params or {}).get("driver")
    if driver is None:
        return cls
    module = name if ":" not in name else cls.name or cls.__name__.lower()
    return load_driver_class(module, driver)


def load_driver_class(module: str, driver: object) -> type[Module[Any]]:
    """Return the class of driver ``driver`` of module ``module``, from the group ``pluto.drivers.<module>``.

    Raises:
        ModuleNotFound: no such driver (the message lists the installed ones), or it cannot be loaded.
        MissingExtra: the driver needs a library of an extra that is not installed (the message names the extra).
    """
    drivers = available_drivers(module)
    if not isinstance(driver, str) or driver not in drivers:
        known = f"installed drivers: {', '.join(sorted(drivers))}" if drivers else "it has no drivers installed"
        raise ModuleNotFound(f"module {module!r} has no driver {driver!r} ({known})")
    return _load(drivers[driver], what=f"driver {driver!r} of module {module!r}")


def without_driver(params: Mapping[str, object]) -> dict[str, object]:
    """The parameters, less the ``driver`` that chose the class."""
    return {key: value for key, value in params.items() if key != "driver"}


def _load(name: str, what: str | None = None) -> type[Module[Any]]:
    """The class ``name`` stands for (an installed module name or ``package.module:Class``); ``what`` names it in
    errors (default: ``module <name>``)."""
    target = available_modules().get(name, name if ":" in name else None)
    if target is None:
        close = difflib.get_close_matches(name, available_modules(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `pluto modules` lists them"
        raise ModuleNotFound(f"no module named {name!r}{hint}")
    what = what or f"module {name!r}"
    module_path, _, attr = target.rpartition(":")
    try:
        cls = getattr(_import(module_path), attr)
    except (ImportError, AttributeError, OSError, SyntaxError) as err:
        missing = missing_extra(err, what)  # a library of an extra: say which to install
        if missing is not None:
            raise missing from None
        raise ModuleNotFound(f"{what}: cannot load {target}: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise ModuleNotFound(f"{what}: {target} is not a pluto Module class")
    return cls


def is_file_spec(module_path: str) -> bool:
    """True if the part before ``:Class`` names a Python file rather than a dotted module."""
    return module_path.endswith(".py") or "/" in module_path or os.sep in module_path


def _import(module_path: str) -> ModuleType:
    """The module ``module_path`` names: a file (see :func:`is_file_spec`) or a dotted name, searched on the path
    and then in the current directory."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)  # after the installed packages: a local folder never hides one of them
    if is_file_spec(module_path):
        return _import_file(Path(module_path))
    return importlib.import_module(module_path)


def _import_file(path: Path) -> ModuleType:
    """Load a Python file as a module once (the same module object on a second call)."""
    path = path.expanduser().resolve()
    if not path.is_file():
        raise ImportError(f"no file {path}")
    digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:10]
    name = f"_pluto_file_{digest}_{path.stem if path.stem.isidentifier() else 'module'}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as `python path/to/file.py`: the files beside it can be imported
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def module_name_of(spec: str) -> str:
    """The bus name of a module given by an installed name or ``package.module:Class``."""
    if ":" not in spec:
        return spec
    cls = load_module_class(spec)
    return cls.name or cls.__name__.lower()
