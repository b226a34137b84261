"""The configuration file, and module parameters validated against each module's ``Params``.

The file is TOML. It is found, in order: the ``--config`` option, ``PLUTO_CONFIG``, ``./pluto.toml``,
``~/.config/pluto/config.toml``; none at all is fine (defaults everywhere)::

    [bus]
    robot = "pluto"
    connect = ["tcp/192.168.1.10:7447"]   # a `pluto router` on another machine

    [modules.heartbeat]
    rate_hz = 5.0

Command-line overrides (``-p rate_hz=2``) take TOML values; a bare word is a string.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from pluto.bus.config import BusConfig, bus_config
from pluto.errors import ConfigError
from pluto.runtime.ranges import check_ranges

P = TypeVar("P", bound=msgspec.Struct)


@dataclass(frozen=True)
class Config:
    """A loaded configuration file (or the defaults)."""

    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def bus(self) -> BusConfig:
        """The bus settings, environment variables applied."""
        section = self.data.get("bus", {})
        if not isinstance(section, dict):
            raise ConfigError(f"{self._where()}: [bus] must be a table")
        try:
            return bus_config(section)
        except ConfigError as err:
            raise ConfigError(f"{self._where()}: {err}") from None

    def module_table(self, name: str) -> dict[str, Any]:
        """The ``[modules.<name>]`` table, or an empty one."""
        modules = self.data.get("modules", {})
        table = modules.get(name, {}) if isinstance(modules, dict) else {}
        if not isinstance(table, dict):
            raise ConfigError(f"{self._where()}: modules.{name} must be a table")
        return dict(table)

    def _where(self) -> str:
        return str(self.path) if self.path else "configuration"


def find_config_file(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """Return the configuration file to use, or None if there is none.

    Raises:
        ConfigError: a file named explicitly (option or ``PLUTO_CONFIG``) does not exist.
    """
    named = explicit or os.environ.get("PLUTO_CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"configuration file {path} does not exist")
        return path
    for candidate in (Path("pluto.toml"), Path.home() / ".config" / "pluto" / "config.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Load the configuration file (see the module docstring for where it is looked for).

    Raises:
        ConfigError: the file cannot be read or is not valid TOML (with the line and the reason).
    """
    path = find_config_file(explicit)
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    return Config(path, data)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a ``name=value`` override; the value is TOML (``2``, ``true``, ``"x"``, ``[1, 2]``) or a bare string.

    Raises:
        ConfigError: no ``=`` or no name.
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(f"parameter {text!r}: expected name=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return name, value


def build_params(cls: type[P], *layers: dict[str, Any], where: str = "parameters") -> P:
    """Merge parameter tables (later ones win) and validate them as ``cls``.

    Raises:
        ConfigError: an unknown parameter, a value of the wrong type or out of its declared range (the message gives
            the range), with where it came from.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    try:
        check_ranges(cls, merged)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    try:
        return msgspec.convert(merged, cls)
    except msgspec.ValidationError as err:
        known = ", ".join(f.name for f in msgspec.structs.fields(cls)) or "none"
        raise ConfigError(f"{where}: {err} (parameters: {known})") from None
