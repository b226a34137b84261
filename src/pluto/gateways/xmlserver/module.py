"""The ``xmlserver`` module: the XML gateway (:class:`.server.XmlServer`) as a module the launcher runs.

``pluto run xmlserver`` (or ``pluto xmlserver``) serves the protocol of :mod:`.codec` on ``host:port`` (127.0.0.1,
this computer only, unless configured) until the module stops. Besides the standard module services it serves
``xmlserver/clients``: the open connections and their counters (:class:`.server.ServerStats`).

The secret: with ``token_file`` set, the secret is the first line of that file; without it, the value of the
environment variable ``PLUTO_XML_TOKEN``, if set and not empty; else there is none. The secret is never a parameter
or an option of its own (a command line can be read by every user of the computer). With a secret, a connection
gets nothing but its ``<hello>`` until it sends ``<auth token="..."/>`` with it: no read, listing, subscription,
write or call (see :mod:`.server` for this and the other defences: the back-off after wrong tokens, the range checks
of values, the connection caps and the idle timeout).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from pluto import msgs, names
from pluto.bus import StateReader
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Rate

from .server import ServerSettings, XmlServer, command_interfaces

__all__ = ["TOKEN_ENV", "XmlServerModule", "XmlServerParams", "read_token", "token_from_environment"]

TOKEN_ENV = "PLUTO_XML_TOKEN"
"""The environment variable holding the secret when no ``token_file`` is given (the example clients read it too)."""
MAX_TOKEN = 4096
"""Longest secret, characters."""


_NOT_PARAMETERS: Final = frozenset({"token", "writable"})
"""Settings of the server that are no parameter as they are: the secret never is one, and ``writable`` is a sorted
list of names among the parameters (a set has no order to show)."""


def _server_parameters() -> type[msgspec.Struct]:
    """The module's parameters with one for each setting of :class:`.server.ServerSettings` (but
    :data:`_NOT_PARAMETERS`), of its name, type and default, described by its docstring: the server's settings are
    declared once, there, and what users set (``-p``, profiles, ``pluto param``) is checked as the server checks it."""
    fields = [
        (
            f.name,
            f.type,
            f.default if f.default is not msgspec.NODEFAULT else msgspec.field(default_factory=f.default_factory),
        )
        for f in msgspec.structs.fields(ServerSettings)
        if f.name not in _NOT_PARAMETERS
    ]
    namespace = {"__doc__": ServerSettings.__doc__}
    return msgspec.defstruct(
        "ServerParams", fields, bases=(ModuleParams,), module=__name__, namespace=namespace, kw_only=True
    )


# The type checker sees ModuleParams: the module reads the server's settings through settings() only.
if TYPE_CHECKING:
    _ServerParams = ModuleParams
else:
    _ServerParams = _server_parameters()


class XmlServerParams(_ServerParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    token_file: file holding the shared secret a client must send before anything else; "" for none (then the
        environment variable PLUTO_XML_TOKEN, if set).
    writable: interfaces clients may write (default: every command interface of the table).

    The others are the settings of the server (:class:`.server.ServerSettings`), under the same names.
    """

    rate_hz: Rate = 1.0  # the control step does nothing: the server runs on its own thread
    token_file: str = ""
    writable: list[str] = msgspec.field(default_factory=lambda: sorted(command_interfaces()))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.settings(None)

    def settings(self, token: str | None) -> ServerSettings:
        """The server's settings, with the secret (read from ``token_file`` or the environment).

        Raises:
            ValueError: a limit out of range or a bad interface name in ``writable``.
        """
        shared = {
            f.name: getattr(self, f.name)
            for f in msgspec.structs.fields(ServerSettings)
            if f.name not in _NOT_PARAMETERS
        }
        return ServerSettings(token=token, writable=frozenset(self.writable), **shared)


def read_token(path: str | Path) -> tuple[str, bool]:
    """Read the shared secret from a file (surrounding whitespace removed).

    Returns:
        The secret, and whether other users may read the file (worth a warning).

    Raises:
        ConfigError: the file cannot be read or holds no secret.
    """
    file = Path(path).expanduser()
    try:
        token = file.read_text(encoding="utf-8").strip()
        mode = file.stat().st_mode
    except (OSError, UnicodeError) as err:
        raise ConfigError(f"token file {file}: {err}") from None
    if not token:
        raise ConfigError(f"token file {file} is empty")
    if "\n" in token or len(token) > MAX_TOKEN:
        raise ConfigError(f"token file {file}: the secret must be one line of at most {MAX_TOKEN} characters")
    return token, bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


def token_from_environment() -> str | None:
    """The secret in the environment variable ``PLUTO_XML_TOKEN`` (surrounding whitespace removed); None if it is
    not set or empty.

    Raises:
        ConfigError: the secret is not one line of at most 4096 characters.
    """
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        return None
    if "\n" in token or "\r" in token or len(token) > MAX_TOKEN:
        raise ConfigError(f"{TOKEN_ENV}: the secret must be one line of at most {MAX_TOKEN} characters")
    return token


class _ClockRate:
    """The rate of the simulated clock (simulated seconds per wall-clock second), from the ``Clock`` interface."""

    def __init__(self, reader: StateReader[msgs.SimTime]) -> None:
        self._reader = reader

    def __call__(self) -> float:
        tick = self._reader.read()
        return tick.rate if tick is not None and tick.rate > 0.0 else 1.0


class XmlServerModule(Module[XmlServerParams]):
    """The XML gateway: clients in any language list, read, subscribe to, write and call over TCP."""

    name = "xmlserver"
    description = "XML over TCP gateway: list, read, subscribe, write and call from any language"
    Params = XmlServerParams

    server: XmlServer

    def on_configure(self) -> None:
        p = self.params
        log = self.get_logger()
        token = None
        if p.token_file:
            token, shared = read_token(p.token_file)
            if shared:
                log.warning("token file %s can be read by other users (chmod 600 it)", p.token_file)
            if os.environ.get(TOKEN_ENV, "").strip():
                log.info("the secret is read from %s; %s is not used", p.token_file, TOKEN_ENV)
        else:
            token = token_from_environment()
            if token is not None:
                log.info("the secret is read from the environment variable %s", TOKEN_ENV)
        rate = self._clock_rate() if p.use_sim_time else None
        settings = p.settings(token)
        self.server = XmlServer(self.bus, settings, self.clock, clock_rate=rate, logger=log)
        try:
            self.server.start()
        except OSError as err:
            where = f"{settings.host}:{settings.port}"
            raise ConfigError(f"xmlserver cannot listen on {where}: {err.strerror or err}") from None
        self.create_service("clients", lambda _request: self.server.stats())

    def _clock_rate(self) -> _ClockRate:
        return _ClockRate(self.create_reader(names.CLOCK))

    def on_clock_jump(self, old: float, new: float) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.clock_jumped(old, new)

    def on_shutdown(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
