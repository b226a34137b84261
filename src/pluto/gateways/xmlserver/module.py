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

import msgspec

from pluto import msgs, names
from pluto.bus import StateReader
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams

from .codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENT
from .server import DEFAULT_PORT, ServerSettings, XmlServer, command_interfaces

__all__ = ["TOKEN_ENV", "XmlServerModule", "XmlServerParams", "read_token", "token_from_environment"]

TOKEN_ENV = "PLUTO_XML_TOKEN"
"""The environment variable holding the secret when no ``token_file`` is given (the example clients read it too)."""
MAX_TOKEN = 4096
"""Longest secret, characters."""


class XmlServerParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    host: address to listen on (127.0.0.1: this computer only; 0.0.0.0: every network).
    port: TCP port (0: any free one, logged).
    token_file: file holding the shared secret a client must send before anything else; "" for none (then the
        environment variable PLUTO_XML_TOKEN, if set).
    max_clients, max_subscriptions: connections served at once; subscriptions per connection.
    max_clients_per_address: connections served at once from one address.
    idle_timeout: s after which a connection that sent nothing and took nothing is closed.
    auth_backoff, auth_backoff_max: s the token attempts from an address are refused after a wrong token (doubling
        with each wrong token), and the longest such back-off.
    max_rate_hz: largest subscription rate, Hz.
    request_rate, request_burst: requests a second per connection on average, and at once.
    max_document, max_depth: largest document (bytes) and deepest nesting accepted.
    max_bad_documents, max_auth_failures: bad documents, and failed token attempts, after which a connection is
        closed.
    write_buffer: bytes buffered for a slow client before its updates are skipped.
    send_buffer: kernel send buffer of each connection, bytes (0: the system's).
    call_timeout: default wait for a service's reply, s.
    writable: interfaces clients may write (default: every command interface of the table).
    """

    rate_hz: float = 1.0  # the control step does nothing: the server runs on its own thread
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token_file: str = ""
    max_clients: int = 100
    max_clients_per_address: int = 64
    idle_timeout: float = 60.0
    auth_backoff: float = 0.5
    auth_backoff_max: float = 30.0
    max_subscriptions: int = 16
    max_rate_hz: float = 1000.0
    request_rate: float = 50.0
    request_burst: int = 100
    max_document: int = DEFAULT_MAX_DOCUMENT
    max_depth: int = DEFAULT_MAX_DEPTH
    max_bad_documents: int = 32
    max_auth_failures: int = 3
    write_buffer: int = 64 * 1024
    send_buffer: int = 0
    call_timeout: float = 2.0
    writable: list[str] = msgspec.field(default_factory=lambda: sorted(command_interfaces()))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.settings(None)

    def settings(self, token: str | None) -> ServerSettings:
        """The server's settings, with the secret (read from ``token_file`` or the environment).

        Raises:
            ValueError: a limit out of range or a bad interface name in ``writable``.
        """
        return ServerSettings(
            host=self.host,
            port=self.port,
            token=token,
            max_clients=self.max_clients,
            max_clients_per_address=self.max_clients_per_address,
            idle_timeout=self.idle_timeout,
            auth_backoff=self.auth_backoff,
            auth_backoff_max=self.auth_backoff_max,
            max_subscriptions=self.max_subscriptions,
            max_rate_hz=self.max_rate_hz,
            request_rate=self.request_rate,
            request_burst=self.request_burst,
            max_document=self.max_document,
            max_depth=self.max_depth,
            max_bad_documents=self.max_bad_documents,
            max_auth_failures=self.max_auth_failures,
            write_buffer=self.write_buffer,
            send_buffer=self.send_buffer,
            call_timeout=self.call_timeout,
            writable=frozenset(self.writable),
        )


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
        self.server = XmlServer(self.bus, p.settings(token), self.clock, clock_rate=rate, logger=log)
        try:
            self.server.start()
        except OSError as err:
            raise ConfigError(f"xmlserver cannot listen on {p.host}:{p.port}: {err.strerror or err}") from None
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
