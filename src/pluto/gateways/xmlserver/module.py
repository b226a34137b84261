"""The ``xmlserver`` module: the XML gateway (:class:`.server.XmlServer`) as a module the launcher runs.

``pluto run xmlserver`` (or ``pluto xmlserver``) serves the protocol of :mod:`.codec` on ``host:port`` (the
loopback unless configured) until the module stops. With ``token_file`` set, a connection must present the secret
in that file (``<auth token="..."/>``) before it may write or call. Besides the standard module services it serves
``xmlserver/clients``: the open connections and their counters (:class:`.server.ServerStats`).
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import ClassVar

import msgspec

from pluto import msgs
from pluto.bus import StateReader
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams

from .codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENT
from .server import DEFAULT_PORT, ServerSettings, XmlServer, command_interfaces

__all__ = ["XmlServerModule", "XmlServerParams", "read_token"]


class XmlServerParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    host: address to listen on (127.0.0.1: this computer only; 0.0.0.0: every network).
    port: TCP port (0: any free one, logged).
    token_file: file holding the shared secret that writes and calls need; "" for none.
    max_clients, max_subscriptions: connections served at once; subscriptions per connection.
    max_rate_hz: largest subscription rate, Hz.
    request_rate, request_burst: requests a second per connection on average, and at once.
    max_document, max_depth: largest document (bytes) and deepest nesting accepted.
    max_bad_documents, max_auth_failures: bad documents, and wrong tokens, after which a connection is closed.
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
        """The server's settings, with the secret read from ``token_file``.

        Raises:
            ValueError: a limit out of range or a bad interface name in ``writable``.
        """
        return ServerSettings(
            host=self.host,
            port=self.port,
            token=token,
            max_clients=self.max_clients,
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
    if "\n" in token or len(token) > 4096:
        raise ConfigError(f"token file {file}: the secret must be one line of at most 4096 characters")
    return token, bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


class _ClockRate:
    """The rate of the simulated clock (simulated seconds per wall-clock second), from the ``Clock`` interface."""

    def __init__(self, reader: StateReader[msgs.SimTime]) -> None:
        self._reader = reader

    def __call__(self) -> float:
        tick = self._reader.read()
        return tick.rate if tick is not None and tick.rate > 0.0 else 1.0


class XmlServerModule(Module):
    """The XML gateway: clients in any language list, read, subscribe to, write and call over TCP."""

    name = "xmlserver"
    description = "XML over TCP gateway: list, read, subscribe, write and call from any language"
    Params: ClassVar[type[ModuleParams]] = XmlServerParams

    server: XmlServer

    def on_configure(self) -> None:
        p = self.params
        assert isinstance(p, XmlServerParams)
        token = None
        if p.token_file:
            token, shared = read_token(p.token_file)
            if shared:
                self.get_logger().warning("token file %s can be read by other users (chmod 600 it)", p.token_file)
        rate = self._clock_rate() if p.use_sim_time else None
        self.server = XmlServer(self.bus, p.settings(token), self.clock, clock_rate=rate, logger=self.get_logger())
        try:
            self.server.start()
        except OSError as err:
            raise ConfigError(f"xmlserver cannot listen on {p.host}:{p.port}: {err.strerror or err}") from None
        self.create_service("clients", lambda _request: self.server.stats())

    def _clock_rate(self) -> _ClockRate:
        return _ClockRate(self.create_reader("Clock", msgs.SimTime))

    def on_clock_jump(self, old: float, new: float) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.clock_jumped(old, new)

    def on_shutdown(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
