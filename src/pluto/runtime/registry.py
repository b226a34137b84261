"""Finding module classes by name.

Installed modules are registered under the ``pluto.modules`` entry-point group (see pyproject.toml), so a separate
package can add modules without touching Pluto. A name of the form ``package.module:Class`` imports that class
directly, which is how tests and one-off modules are run.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from pluto.errors import ModuleNotFound
from pluto.runtime.module import Module

GROUP = "pluto.modules"


def available_modules() -> dict[str, str]:
    """Installed module names and the ``package.module:Class`` each stands for."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def load_module_class(name: str, params: Mapping[str, object] | None = None) -> type[Module[Any]]:
    """Return the module class called ``name`` (an installed name or ``package.module:Class``).

    A module with several drivers (the base: simulated or a real Pioneer) names them in its ``drivers`` class
    attribute; the ``driver`` parameter picks one (``pluto run base --driver p2os``).

    Raises:
        ModuleNotFound: no such module (with the closest installed names), or no such driver of it.
    """
    cls = _load(name)
    driver = (params or {}).get("driver")
    if driver is None or driver == getattr(cls, "driver", None):
        return cls
    drivers: dict[str, str] = getattr(cls, "drivers", {})
    if driver not in drivers:
        known = ", ".join([getattr(cls, "driver", "default"), *drivers])
        raise ModuleNotFound(f"module {name!r} has no driver {driver!r} (drivers: {known})")
    return _load(drivers[str(driver)])


def without_driver(params: Mapping[str, object]) -> dict[str, object]:
    """The parameters, less the ``driver`` that chose the class."""
    return {key: value for key, value in params.items() if key != "driver"}


def _load(name: str) -> type[Module[Any]]:
    target = available_modules().get(name, name if ":" in name else None)
    if target is None:
        close = difflib.get_close_matches(name, available_modules(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `pluto modules` lists them"
        raise ModuleNotFound(f"no module named {name!r}{hint}")
    module_path, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_path), attr)
    except (ImportError, AttributeError) as err:
        raise ModuleNotFound(f"module {name!r}: cannot load {target}: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise ModuleNotFound(f"module {name!r}: {target} is not a pluto Module class")
    return cls


def module_name_of(spec: str) -> str:
    """The bus name of a module given by an installed name or ``package.module:Class``."""
    if ":" not in spec:
        return spec
    cls = load_module_class(spec)
    return cls.name or cls.__name__.lower()
