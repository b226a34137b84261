"""The XML server's settings and the counters it reports: what it listens on and allows (:class:`ServerSettings`),
and what it has seen (:class:`ServerStats`, one :class:`ClientStats` per connection).

:class:`ServerSettings` is the one declaration of these settings, their defaults and their meaning: the
``xmlserver`` module makes a parameter of each but the secret (:mod:`.module`), and the server's defences read
them (:mod:`.server`).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from pluto import names
from pluto.runtime.ranges import Port, Timeout, between, check_ranges

from .codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENT

__all__ = ["DEFAULT_PORT", "ClientStats", "ServerSettings", "ServerStats", "command_interfaces"]

DEFAULT_PORT: Final = 7650
"""The TCP port the server listens on unless configured."""


def command_interfaces() -> frozenset[str]:
    """The command interfaces of the interface table (the last part of the name is ``command`` or ``Command``)."""
    return frozenset(name for name in names.INTERFACES if name.rsplit("/", 1)[-1].lower() == "command")


class ServerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a server listens on and what it allows: the one declaration of these settings, their defaults and their
    meaning (the ``xmlserver`` module has a parameter for each but the secret, :mod:`.module`).

    Attributes:
        host: address to listen on (127.0.0.1: this computer only; 0.0.0.0: every network).
        port: TCP port (0: any free one, logged; see :attr:`XmlServer.address`).
        max_clients: connections served at once; past it a newcomer evicts the connection silent longest that has
            not authenticated or holds no subscription, and is refused with TOO_MANY_CLIENTS if there is none.
        max_clients_per_address: connections served at once from one address; past it likewise, among that
            address's connections.
        idle_timeout: s after which a connection that sent nothing and took nothing is closed.
        auth_backoff: s during which the token attempts from an address are refused after its first wrong token; it
            doubles with each further wrong token.
        auth_backoff_max: the longest back-off, s.
        max_subscriptions: subscriptions per connection.
        max_rate_hz: largest subscription rate, Hz.
        request_rate: requests a second a connection may make on average.
        request_burst: requests a connection may make at once.
        max_document: largest document accepted, bytes.
        max_depth: deepest element nesting accepted.
        max_bad_documents: bad documents after which a connection is closed.
        max_auth_failures: failed token attempts (wrong, or refused during a back-off) after which a connection is
            closed.
        write_buffer: bytes buffered for a connection before the server waits for the client (high-water mark)
            and skips its updates.
        send_buffer: kernel send buffer of each connection (SO_SNDBUF), bytes (0: the system's).
        call_timeout: default wait for a service's reply, s.
        max_call_timeout: longest wait for a service's reply a client may ask for, s.
        writable: interfaces clients may write (default: every command interface of the table).
        token: shared secret a connection must present (``<auth>``) before any other request; None: no secret (never
            a parameter of the module: it comes from a file or the environment).

    Raises:
        ValueError: a limit out of range.
    """

    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    token: str | None = None
    max_clients: Annotated[int, between(1, 100000)] = 100
    max_clients_per_address: Annotated[int, between(1, 100000)] = 64
    idle_timeout: Timeout = 60.0
    auth_backoff: Timeout = 0.5
    auth_backoff_max: Timeout = 30.0
    max_subscriptions: Annotated[int, between(1, 10000)] = 16
    max_rate_hz: Annotated[float, between(0.0, 10000.0, open_low=True)] = 1000.0
    request_rate: Annotated[float, between(0.0, 100000.0, open_low=True)] = 50.0
    request_burst: Annotated[int, between(1, 1000000)] = 100
    max_document: Annotated[int, between(1024, 1073741824)] = DEFAULT_MAX_DOCUMENT
    max_depth: Annotated[int, between(8, 10000)] = DEFAULT_MAX_DEPTH
    max_bad_documents: Annotated[int, between(1, 1000000)] = 32
    max_auth_failures: Annotated[int, between(1, 1000000)] = 3
    write_buffer: Annotated[int, between(1024, 1073741824)] = 64 * 1024
    send_buffer: Annotated[int, between(0, 1073741824)] = 0
    call_timeout: Timeout = 2.0
    max_call_timeout: Timeout = 10.0
    writable: frozenset[str] = msgspec.field(default_factory=command_interfaces)

    def __post_init__(self) -> None:
        check_ranges(type(self), {name: getattr(self, name) for name in self.__struct_fields__})
        if self.auth_backoff_max < self.auth_backoff:
            raise ValueError(f"auth_backoff_max ({self.auth_backoff_max}) is below auth_backoff ({self.auth_backoff})")
        if self.token is not None and not self.token:
            raise ValueError("an empty token")
        for name in self.writable:
            names.check_name(name)


class ClientStats(msgspec.Struct, frozen=True, kw_only=True):
    """One connection as the server sees it.

    Attributes:
        peer: the client's address and port.
        connected: s since it connected.
        requests: documents received (good and bad).
        bad_documents: documents refused as malformed, too large, forbidden or invalid.
        out_of_range: requests refused for a value out of range (:func:`pluto.limits.check`).
        rate_limited: requests refused for the request-rate limit.
        auth_failures: its failed token attempts: wrong, or refused during a back-off.
        updates_sent: subscription updates written.
        updates_skipped: updates replaced by a newer value before they could be written (a slow client).
        bytes_sent: bytes written.
        queued_bytes: bytes waiting to be sent now: transport buffer, pending updates and replies.
        max_queued_bytes: the largest ``queued_bytes`` seen.
        subscriptions: the interfaces it is subscribed to.
        authorized: it presented the token (or none is needed).
        idle: s since it was last active (a document received, or something it was sent taken).
    """

    peer: str
    connected: float
    requests: int
    bad_documents: int
    out_of_range: int
    rate_limited: int
    auth_failures: int
    updates_sent: int
    updates_skipped: int
    bytes_sent: int
    queued_bytes: int
    max_queued_bytes: int
    subscriptions: list[str]
    authorized: bool
    idle: float


class ServerStats(msgspec.Struct, frozen=True, kw_only=True):
    """The server as a whole (the reply of the module's ``xmlserver/clients`` service).

    Attributes:
        address: host and port it listens on.
        clients: the open connections.
        connections: connections accepted since it started.
        refused: connections refused because there were ``max_clients`` already, or ``max_clients_per_address``
            from the same address, every one of them authenticated and subscribed.
        evicted: connections closed to make room for a newcomer (past a cap, the one silent longest that had not
            authenticated or held no subscription).
        idle_closed: connections closed for being idle.
        out_of_range: requests refused for a value out of range, on every connection since it started.
        auth_failures: wrong tokens checked since it started.
        auth_refused: token attempts refused unchecked during a back-off.
        topics: interfaces it is subscribed to on the bus.
    """

    address: str
    clients: list[ClientStats]
    connections: int
    refused: int
    evicted: int
    idle_closed: int
    out_of_range: int
    auth_failures: int
    auth_refused: int
    topics: list[str]
