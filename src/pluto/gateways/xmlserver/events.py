"""The events of the XML protocol: what a client asks (requests) and what the server says (replies).

Each event is one XML document on the wire; :mod:`.codec` turns bytes into these events and back. Events are small
frozen value types named as nouns, validated where they are made. Every request may carry an ``id`` (at most
:data:`MAX_ID_LENGTH` characters) that the reply to it repeats, so a client can match replies to requests among
the updates its subscriptions stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from pluto import msgs
from pluto.codec import NEED_DATA, ConnectionClosed, NeedData
from pluto.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ERROR_MEANINGS",
    "MAX_ID_LENGTH",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "REQUEST_TAGS",
    "AuthRequest",
    "Authorized",
    "BadDocument",
    "CallRequest",
    "ConnectionClosed",
    "ErrorCode",
    "ErrorReply",
    "Event",
    "Hello",
    "InterfaceEntry",
    "ListRequest",
    "Listing",
    "NeedData",
    "ReadRequest",
    "Reply",
    "Request",
    "ServerReply",
    "SubscribeRequest",
    "Subscribed",
    "UnsubscribeRequest",
    "Unsubscribed",
    "Update",
    "Value",
    "WriteRequest",
    "Written",
    "XmlRequestError",
]

PROTOCOL_VERSION: Final = 1
"""Version of the document set below; the server says it in its ``<hello>``."""

MAX_ID_LENGTH: Final = 64
"""Longest ``id`` a request may carry, characters."""


class ErrorCode(StrEnum):
    """The ``code`` of an ``<error>`` reply (:data:`ERROR_MEANINGS` says what each means)."""

    MALFORMED = "malformed"
    TRUNCATED = "truncated"
    TOO_LARGE = "too-large"
    TOO_DEEP = "too-deep"
    FORBIDDEN = "forbidden"
    UNKNOWN_OPERATION = "unknown-operation"
    BAD_REQUEST = "bad-request"
    BAD_VALUE = "bad-value"
    UNKNOWN_INTERFACE = "unknown-interface"
    NOT_WRITABLE = "not-writable"
    NO_VALUE = "no-value"
    NOT_SUBSCRIBED = "not-subscribed"
    TOO_MANY_SUBSCRIPTIONS = "too-many-subscriptions"
    RATE_LIMITED = "rate-limited"
    UNAUTHORIZED = "unauthorized"
    TIMEOUT = "timeout"
    REMOTE_ERROR = "remote-error"
    TOO_MANY_CLIENTS = "too-many-clients"
    TOO_MANY_ERRORS = "too-many-errors"
    IDLE = "idle"
    INTERNAL = "internal"


ERROR_MEANINGS: Final[dict[ErrorCode, str]] = {
    ErrorCode.MALFORMED: "Not a well-formed XML document (binary garbage, a bad character, an unclosed element).",
    ErrorCode.TRUNCATED: "The stream ended in the middle of a document.",
    ErrorCode.TOO_LARGE: "The document is longer than the server's limit (max_document in its hello).",
    ErrorCode.TOO_DEEP: "Elements nest deeper than the server's limit.",
    ErrorCode.FORBIDDEN: "A DTD, an entity declaration or an external reference: never accepted.",
    ErrorCode.UNKNOWN_OPERATION: "The root element is not one of the requests.",
    ErrorCode.BAD_REQUEST: "A request's attributes or children are missing, unknown or invalid.",
    ErrorCode.BAD_VALUE: (
        "A message or value does not fit its type (not a number, NaN, an unknown field) or is out of range (a speed "
        "beyond the robot's, a number beyond 1e9, a vector too long); the reason names the field."
    ),
    ErrorCode.UNKNOWN_INTERFACE: "No interface of that name (or its type is unknown: give its type).",
    ErrorCode.NOT_WRITABLE: "The interface may not be written through this server.",
    ErrorCode.NO_VALUE: "Nobody has written the interface yet.",
    ErrorCode.NOT_SUBSCRIBED: "Unsubscribing from an interface this connection is not subscribed to.",
    ErrorCode.TOO_MANY_SUBSCRIPTIONS: "The connection has as many subscriptions as the server allows.",
    ErrorCode.RATE_LIMITED: (
        "Requests come faster than the server allows, or a token comes during the back-off after a wrong one from "
        "the same address; this one was not carried out (the reason says when to try again)."
    ),
    ErrorCode.UNAUTHORIZED: "A request before the token the server requires (<auth> comes first), or a wrong token.",
    ErrorCode.TIMEOUT: "The service called did not reply in time.",
    ErrorCode.REMOTE_ERROR: "The service called replied with an error.",
    ErrorCode.TOO_MANY_CLIENTS: (
        "The server has as many connections as it allows, in all or from the client's address, and closes this one: "
        "a new connection when every one in the way is authenticated and subscribed, else the one of those in the "
        "way that is not and has been silent longest, to make room for a new one."
    ),
    ErrorCode.TOO_MANY_ERRORS: "The connection sent too many bad documents; the server closes it.",
    ErrorCode.IDLE: (
        "The connection sent nothing, and took nothing it was sent, for the server's idle timeout; the server "
        "closes it."
    ),
    ErrorCode.INTERNAL: "The server failed to carry out the request (see its log).",
}
"""What each error code means (the XSD documents the codes with these)."""


class XmlRequestError(RemoteProtocolError):
    """A document from the peer is not a valid request or reply; ``code`` says which kind of problem it is.

    Args:
        code: the error code to reply with.
        reason: what is wrong, and where.
        id: the ``id`` of the request, if it could be read.
        out_of_range: a value is beyond the limits of what it is for (a vector too long), not malformed.
    """

    def __init__(self, code: ErrorCode, reason: str, id: str | None = None, *, out_of_range: bool = False) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.id = id
        self.out_of_range = out_of_range


def _check_id(id: str | None) -> None:
    if id is not None and len(id) > MAX_ID_LENGTH:
        raise LocalProtocolError(f"id longer than {MAX_ID_LENGTH} characters")


def _check_rate(rate_hz: float) -> None:
    if not (math.isfinite(rate_hz) and rate_hz > 0.0):
        raise LocalProtocolError(f"rate must be a positive number of Hz, got {rate_hz}")


# -- requests (client -> server) ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListRequest:
    """``<list/>``: the live modules and the interfaces."""

    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """``<read name="..."/>``: the latest value of an interface.

    Attributes:
        name: the interface.
        type: its message type, for an interface that is not in the interface table.
    """

    name: str
    type: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    """``<subscribe name="..." rate="..."/>``: stream the values of an interface, at most ``rate`` a second.

    Attributes:
        name: the interface.
        rate: the largest rate of updates wanted, Hz; the newest value is sent, older ones are skipped.
        type: its message type, for an interface that is not in the interface table.
    """

    name: str
    rate: float
    type: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)
        _check_rate(self.rate)


@dataclass(frozen=True, slots=True)
class UnsubscribeRequest:
    """``<unsubscribe name="..."/>``: stop the updates of an interface."""

    name: str
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """``<write name="..."><ActuatorState .../></write>``: write a new value of a command interface."""

    name: str
    value: msgs.Message
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)


@dataclass(frozen=True, slots=True)
class CallRequest:
    """``<call service="..." timeout="...">VALUE</call>``: a request to a service; its reply comes back.

    Attributes:
        service: the service (``sim/world``, ``mom/base``, ``base/geometry``).
        request: the request value (None when the element is empty): a message, or a generic value.
        timeout: seconds to wait for the reply (None: the server's default).
    """

    service: str
    request: Any = None
    timeout: float | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0.0):
            raise LocalProtocolError(f"timeout must be a positive number of seconds, got {self.timeout}")


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """``<auth token="..."/>``: present the shared secret that writes and calls need."""

    token: str
    id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)


Request = ListRequest | ReadRequest | SubscribeRequest | UnsubscribeRequest | WriteRequest | CallRequest | AuthRequest
"""Every request a client can send."""

REQUEST_TAGS: Final[dict[type[Request], str]] = {
    ListRequest: "list",
    ReadRequest: "read",
    SubscribeRequest: "subscribe",
    UnsubscribeRequest: "unsubscribe",
    WriteRequest: "write",
    CallRequest: "call",
    AuthRequest: "auth",
}
"""The element of each request."""


# -- replies (server -> client) -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """``<hello .../>``: the first document on every connection.

    Attributes:
        robot: the robot the server is on.
        auth: True if writes and calls need ``<auth>`` first.
        max_document: the longest document the server accepts, bytes (the newline included).
        protocol: the protocol version.
        server: the server's name.
    """

    robot: str
    auth: bool
    max_document: int
    protocol: int = PROTOCOL_VERSION
    server: str = "pluto-xmlserver"


@dataclass(frozen=True, slots=True)
class InterfaceEntry:
    """One interface of a ``<listing>``.

    Attributes:
        name: the interface.
        type: its message type's name ("" if unknown).
        live: it has a value on the bus now.
        writable: this server lets clients write it.
        description: what it carries (from the interface table).
    """

    name: str
    type: str
    live: bool
    writable: bool
    description: str = ""


@dataclass(frozen=True, slots=True)
class Listing:
    """``<listing>``: the reply to ``<list/>``."""

    modules: tuple[str, ...] = ()
    interfaces: tuple[InterfaceEntry, ...] = ()
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Value:
    """``<value name="...">MESSAGE</value>``: the reply to ``<read>``."""

    name: str
    value: msgs.Message
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Subscribed:
    """``<subscribed name="..." rate="..."/>``: the reply to ``<subscribe>``; updates follow."""

    name: str
    rate: float
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Update:
    """``<update name="..." seq="...">MESSAGE</update>``: a new value of a subscribed interface.

    Attributes:
        seq: number of values the server has received on the interface; a gap means values were skipped (the
            newest value wins when they come faster than the rate asked for or than the client reads).
    """

    name: str
    seq: int
    value: msgs.Message


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """``<unsubscribed name="..."/>``: the reply to ``<unsubscribe>``; no update of it follows."""

    name: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """``<written name="..."/>``: the reply to ``<write>``: the value is on the bus."""

    name: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """``<reply service="...">VALUE</reply>``: the reply to ``<call>`` (an empty element for None)."""

    service: str
    value: Any = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Authorized:
    """``<authorized/>``: the reply to a good ``<auth>``."""

    id: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """``<error code="..." reason="..."/>``: a request was refused or a document was bad."""

    code: ErrorCode
    reason: str
    id: str | None = None


ServerReply = Hello | Listing | Value | Subscribed | Update | Unsubscribed | Written | Reply | Authorized | ErrorReply
"""Every document a server sends."""


# -- what a decoder reports besides documents ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BadDocument:
    """A document that was refused; the server answers it with an ``<error>`` of the same code and reason."""

    code: ErrorCode
    reason: str
    id: str | None = None
    size: int = field(default=0, compare=False)
    out_of_range: bool = field(default=False, compare=False)
    """A well-formed request refused for a value beyond its limits (a vector too long), not a malformed one."""


Event = Request | ServerReply | BadDocument | ConnectionClosed
"""What :meth:`.codec.XmlCodec.next_event` returns besides NEED_DATA."""
