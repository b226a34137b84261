"""The streaming codec of the XML protocol: bytes in, requests (or replies) out, and the reverse.

Framing: one XML document per line. Every document ends with a newline (LF, byte 0x0A) and holds no raw newline
itself: a newline inside a string is written as the character reference ``&#10;`` (and CR as ``&#13;``). A CR
before the LF is ignored, and so are empty lines. Documents are UTF-8. So a client needs nothing but "read a line,
parse it; write a document, then a newline", which even a shell script can do.

    codec = XmlCodec(role="server")            # a server decodes requests and encodes replies
    codec.receive_data(sock.recv(65536))        # b"" at the end of the stream
    while (event := codec.next_event()) is not NEED_DATA:
        handle(event)
    sock.sendall(codec.encode(Value(name, message)))

``role="client"`` decodes what a server sends and encodes requests.

Limits: a document longer than ``max_document`` bytes (its newline included) is refused without being buffered
(:class:`.events.BadDocument` with TOO_LARGE, then the rest of its line is skipped); elements nested deeper than
``max_depth`` are refused while parsing (TOO_DEEP); DTDs, entity declarations and external references are refused
(FORBIDDEN) by parsing with defusedxml. In a request, a vector longer than :mod:`pluto.limits` allows any message
(32 numbers in an ``ActuatorState``, 4,096 in others) is refused (BAD_VALUE, ``out_of_range``) before its numbers are
read. A refused document becomes a BadDocument event and the codec carries on with the next line: nothing the peer
sends makes it raise.
"""

# Strategy: a line is a document, so resynchronising after garbage is free: whatever a line holds, the next line
# starts afresh. The byte buffer holds at most the start of one line (< max_document bytes): past that the line is
# reported at once and its remaining bytes are counted and dropped as they arrive, so a 10 MB document costs no
# memory. Complete lines wait (as bytes) for next_event, which parses them one at a time; the queue is bounded by
# what one receive_data call delivered, so a transport feeds a chunk and drains the events before reading more.
# Parsing uses defusedxml's expat parser with DTDs forbidden as well as entities and external references (the
# billion-laughs and external-entity attacks need one of those), and a tree builder that refuses an element as soon
# as the nesting passes the limit, before the tree grows. Every byte received is accounted for:
# bytes = bytes of the lines delivered + skipped_bytes + buffered_bytes.

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final, Literal
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

from pluto import limits, msgs, names
from pluto.errors import LocalProtocolError

from .events import (
    MAX_ID_LENGTH,
    NEED_DATA,
    REQUEST_TAGS,
    Authorized,
    AuthRequest,
    BadDocument,
    CallRequest,
    ConnectionClosed,
    ErrorCode,
    ErrorReply,
    Event,
    Hello,
    InterfaceEntry,
    Listing,
    ListRequest,
    NeedData,
    ReadRequest,
    Reply,
    Request,
    ServerReply,
    Subscribed,
    SubscribeRequest,
    Unsubscribed,
    UnsubscribeRequest,
    Update,
    Value,
    WriteRequest,
    Written,
    XmlRequestError,
)
from .mapping import (
    escape_attribute,
    format_float,
    message_from_element,
    message_xml,
    parse_bool,
    parse_float,
    parse_int,
    value_from_element,
    value_xml,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_DOCUMENT",
    "CodecStatistics",
    "Role",
    "XmlCodec",
    "encode_event",
    "parse_document",
]

DEFAULT_MAX_DOCUMENT: Final = 256 * 1024
"""Default largest document, bytes (a 361-beam laser scan is about 16 kB)."""
DEFAULT_MAX_DEPTH: Final = 16
"""Default deepest element nesting (the deepest valid request nests 5 elements)."""

Role = Literal["server", "client"]
"""Which side the codec is on: 'server' decodes requests and encodes replies, 'client' the reverse."""


class _TooDeep(Exception):
    pass


class _DepthLimitedBuilder(TreeBuilder):
    """A tree builder that refuses elements nested deeper than a limit, as soon as the parser reaches them."""

    def __init__(self, max_depth: int) -> None:
        super().__init__()
        self._depth = 0
        self._max_depth = max_depth

    def start(self, tag: Any, attrs: Any) -> Element:
        self._depth += 1
        if self._depth > self._max_depth:
            raise _TooDeep
        return super().start(tag, attrs)

    def end(self, tag: Any) -> Element:
        self._depth -= 1
        return super().end(tag)


def parse_document(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Element:
    """Parse one XML document with the hardened parser.

    Args:
        data: the document (UTF-8 unless its declaration says otherwise).
        max_depth: deepest nesting of elements allowed.

    Returns:
        The root element.

    Raises:
        XmlRequestError: MALFORMED (not well-formed), FORBIDDEN (a DTD, an entity declaration or an external
            reference) or TOO_DEEP.
    """
    parser = DefusedXMLParser(target=_DepthLimitedBuilder(max_depth), forbid_dtd=True)
    try:
        parser.feed(data)
        root: Element = parser.close()
    except _TooDeep:
        raise XmlRequestError(ErrorCode.TOO_DEEP, f"elements nest deeper than {max_depth}") from None
    except DTDForbidden:
        raise XmlRequestError(ErrorCode.FORBIDDEN, "a DTD (<!DOCTYPE ...>) is not allowed") from None
    except EntitiesForbidden:
        raise XmlRequestError(ErrorCode.FORBIDDEN, "entity declarations are not allowed") from None
    except ExternalReferenceForbidden:
        raise XmlRequestError(ErrorCode.FORBIDDEN, "external references are not allowed") from None
    except DefusedXmlException as err:
        raise XmlRequestError(ErrorCode.FORBIDDEN, f"forbidden XML construct: {type(err).__name__}") from None
    except (ParseError, ValueError, UnicodeError) as err:
        raise XmlRequestError(ErrorCode.MALFORMED, f"not a well-formed XML document: {err}") from None
    return root


@dataclass(frozen=True, slots=True)
class CodecStatistics:
    """What a codec has seen so far.

    Attributes:
        bytes: bytes received.
        documents: documents decoded into events.
        bad_documents: documents refused (BadDocument events), the oversized and truncated ones included.
        oversized: documents refused for their size.
        skipped_bytes: bytes dropped without parsing (the rest of oversized documents).
    """

    bytes: int = 0
    documents: int = 0
    bad_documents: int = 0
    oversized: int = 0
    skipped_bytes: int = 0


class XmlCodec:
    """Streaming codec of the XML protocol (sans-I/O: it never touches a socket or a clock).

    Args:
        role: 'server' to decode requests and encode replies, 'client' to decode replies and encode requests.
        max_document: largest document accepted, bytes, its newline included.
        max_depth: deepest nesting of elements accepted.

    Raises:
        LocalProtocolError: an unknown role, or limits that are not positive.
    """

    def __init__(
        self, role: Role = "server", *, max_document: int = DEFAULT_MAX_DOCUMENT, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> None:
        if role not in ("server", "client"):
            raise LocalProtocolError(f"role must be 'server' or 'client', not {role!r}")
        if max_document < 16 or max_depth < 2:
            raise LocalProtocolError("max_document must be at least 16 bytes and max_depth at least 2")
        self._role: Role = role
        self.max_document = max_document
        self.max_depth = max_depth
        self._buffer = bytearray()
        self._lines: deque[bytes | BadDocument | ConnectionClosed] = deque()
        self._skipping = False
        self._closed = False
        self._bytes = 0
        self._documents = 0
        self._bad = 0
        self._oversized = 0
        self._skipped = 0

    @property
    def role(self) -> Role:
        """The side this codec is on."""
        return self._role

    @property
    def buffered_bytes(self) -> int:
        """Bytes held as the start of an incomplete document; always < ``max_document``."""
        return len(self._buffer)

    @property
    def statistics(self) -> CodecStatistics:
        """Counts of what was received so far."""
        return CodecStatistics(self._bytes, self._documents, self._bad, self._oversized, self._skipped)

    # -- bytes in -------------------------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Feed bytes received from the peer; ``b""`` means the end of the stream.

        Raises:
            LocalProtocolError: data after the end of the stream.
        """
        if self._closed:
            raise LocalProtocolError("receive_data after the end of the stream")
        if not data:
            self._closed = True
            if self._buffer and self._buffer.strip():
                self._refuse(ErrorCode.TRUNCATED, "the stream ended inside a document (no newline after it)")
            self._buffer.clear()
            self._lines.append(ConnectionClosed())
            return
        self._bytes += len(data)
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipped += end + 1 - start
                self._skipping = False
            elif len(self._buffer) + end - start + 1 > self.max_document:
                self._skipped += len(self._buffer) + end + 1 - start
                self._buffer.clear()
                self._too_large()
            else:
                self._buffer += data[start:end]
                self._lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = end + 1
        if self._skipping:
            self._skipped += len(data) - start
        else:
            self._buffer += data[start:]
            if len(self._buffer) >= self.max_document:  # it cannot end in time: refuse it now, keep nothing
                self._skipped += len(self._buffer)
                self._buffer.clear()
                self._too_large()
                self._skipping = True

    def _too_large(self) -> None:
        self._oversized += 1
        self._refuse(ErrorCode.TOO_LARGE, f"document longer than {self.max_document} bytes")

    def _refuse(self, code: ErrorCode, reason: str) -> None:
        self._lines.append(BadDocument(code, reason))

    # -- events out -----------------------------------------------------------------------------------------------

    def next_event(self) -> Event | NeedData:
        """The next request (server role) or reply (client role), a BadDocument, ConnectionClosed, or NEED_DATA."""
        while self._lines:
            item = self._lines.popleft()
            if isinstance(item, ConnectionClosed):
                return item
            if isinstance(item, BadDocument):
                self._bad += 1
                return item
            line = item[:-1] if item.endswith(b"\r") else item
            if not line.strip():
                continue
            try:
                root = parse_document(line, self.max_depth)
                event: Event = _request_from(root) if self._role == "server" else _reply_from(root)
            except XmlRequestError as err:
                self._bad += 1
                return BadDocument(err.code, err.reason, err.id, size=len(item) + 1, out_of_range=err.out_of_range)
            self._documents += 1
            return event
        return NEED_DATA

    # -- events in, bytes out -------------------------------------------------------------------------------------

    def encode(self, event: Request | ServerReply) -> bytes:
        """The document for an event, newline included.

        Raises:
            LocalProtocolError: the event is not one this role sends (a server sends replies, a client requests).
        """
        is_request = type(event) in REQUEST_TAGS
        if is_request != (self._role == "client"):
            raise LocalProtocolError(f"a {self._role} does not send {type(event).__name__}")
        return encode_event(event)


# -- encoding ---------------------------------------------------------------------------------------------------------


def _attrs(**values: Any) -> str:
    out = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            text = format_float(value)
        else:
            text = escape_attribute(str(value))
        out.append(f' {name}="{text}"')
    return "".join(out)


def _element(tag: str, content: str = "", **attrs: Any) -> str:
    head = f"<{tag}{_attrs(**attrs)}"
    return f"{head}>{content}</{tag}>" if content else f"{head}/>"


def encode_event(event: Request | ServerReply) -> bytes:
    """The document for any request or reply, newline included (for either role; see :meth:`XmlCodec.encode`)."""
    text = _request_text(event) if isinstance(event, _REQUEST_TYPES) else _reply_text(event)
    return (text + "\n").encode("utf-8")


_REQUEST_TYPES = (
    ListRequest,
    ReadRequest,
    SubscribeRequest,
    UnsubscribeRequest,
    WriteRequest,
    CallRequest,
    AuthRequest,
)


def _request_text(event: Request) -> str:
    """The element of a request (a client's document)."""
    match event:
        case ListRequest(id=id):
            return _element("list", id=id)
        case ReadRequest(name=name, type=type_name, id=id):
            return _element("read", id=id, name=name, type=type_name)
        case SubscribeRequest(name=name, rate=rate, type=type_name, id=id):
            return _element("subscribe", id=id, name=name, rate=float(rate), type=type_name)
        case UnsubscribeRequest(name=name, id=id):
            return _element("unsubscribe", id=id, name=name)
        case WriteRequest(name=name, value=value, id=id):
            return _element("write", message_xml(value), id=id, name=name)
        case CallRequest(service=service, request=request, timeout=timeout, id=id):
            content = value_xml(request) if request is not None else ""
            return _element("call", content, id=id, service=service, timeout=timeout)
        case AuthRequest(token=token, id=id):
            return _element("auth", id=id, token=token)
    raise LocalProtocolError(f"cannot encode {type(event).__name__}")


def _reply_text(event: object) -> str:
    """The element of a reply or update (a server's document).

    Raises:
        LocalProtocolError: ``event`` is neither a request nor a reply.
    """
    match event:
        case Update(name=name, seq=seq, value=value):
            return _element("update", message_xml(value), name=name, seq=seq)
        case Value(name=name, value=value, id=id):
            return _element("value", message_xml(value), id=id, name=name)
        case ErrorReply(code=code, reason=reason, id=id):
            return _element("error", id=id, code=ErrorCode(code).value, reason=reason)
        case Written(name=name, id=id):
            return _element("written", id=id, name=name)
        case Subscribed(name=name, rate=rate, id=id):
            return _element("subscribed", id=id, name=name, rate=float(rate))
        case Unsubscribed(name=name, id=id):
            return _element("unsubscribed", id=id, name=name)
        case Reply(service=service, value=value, id=id):
            return _element("reply", value_xml(value) if value is not None else "", id=id, service=service)
        case Authorized(id=id):
            return _element("authorized", id=id)
        case Hello():
            auth = "token" if event.auth else "none"
            return _element(
                "hello",
                server=event.server,
                protocol=event.protocol,
                robot=event.robot,
                auth=auth,
                max_document=event.max_document,
            )
        case Listing(modules=modules, interfaces=interfaces, id=id):
            parts = [_element("module", name=m) for m in modules]
            parts += [
                _element(
                    "interface",
                    name=i.name,
                    type=i.type,
                    live=i.live,
                    writable=i.writable,
                    description=i.description or None,
                )
                for i in interfaces
            ]
            return _element("listing", "".join(parts), id=id)
    raise LocalProtocolError(f"cannot encode {type(event).__name__}")


# -- decoding ---------------------------------------------------------------------------------------------------------


class _Reader:
    """Reads the attributes and children of one request or reply element, refusing anything unexpected."""

    def __init__(self, element: Element, allowed: frozenset[str]) -> None:
        self.element = element
        self.tag = element.tag
        raw_id = element.attrib.get("id")
        self.id = raw_id if raw_id is not None and len(raw_id) <= MAX_ID_LENGTH else None
        if raw_id is not None and self.id is None:
            raise XmlRequestError(ErrorCode.BAD_REQUEST, f"<{self.tag}>: id longer than {MAX_ID_LENGTH} characters")
        unknown = sorted(set(element.attrib) - allowed - {"id"})
        if unknown:
            raise self.error(f"unknown attribute {unknown[0][:40]!r} (allowed: {', '.join(sorted(allowed))})")
        if element.text and element.text.strip():
            raise self.error("unexpected text")
        for child in element:
            if child.tail and child.tail.strip():
                raise self.error("unexpected text")

    def error(self, reason: str, code: ErrorCode = ErrorCode.BAD_REQUEST) -> XmlRequestError:
        return XmlRequestError(code, f"<{self.tag}>: {reason}", self.id)

    def get(self, name: str) -> str | None:
        return self.element.attrib.get(name)

    def required(self, name: str) -> str:
        value = self.element.attrib.get(name)
        if value is None:
            raise self.error(f"the attribute {name!r} is required")
        return value

    def interface_name(self, attribute: str = "name") -> str:
        value = self.required(attribute)
        try:
            return names.check_name(value)
        except ValueError as err:
            raise self.error(str(err)) from None

    def message_type(self) -> str | None:
        value = self.get("type")
        if value is not None and value not in msgs.message_types():
            raise self.error(f"unknown message type {value[:40]!r}")
        return value

    def number(self, name: str, *, required: bool = True) -> float | None:
        text = self.required(name) if required else self.get(name)
        if text is None:
            return None
        try:
            value = parse_float(text, f"<{self.tag}>@{name}")
        except XmlRequestError as err:
            raise self.error(err.reason.split(": ", 1)[-1]) from None
        if value <= 0.0:
            raise self.error(f"{name} must be positive")
        return value

    def no_children(self) -> None:
        if len(self.element):
            raise self.error("takes no child elements")

    def children(self, at_most: int) -> list[Element]:
        kids = list(self.element)
        if len(kids) > at_most:
            raise self.error(f"holds at most {at_most} element{'s' if at_most != 1 else ''}")
        return kids

    def content(self, parse: Any) -> Any:
        """Parse the one child with ``parse``, attaching this element's id to a BAD_VALUE error."""
        kids = self.children(1)
        if not kids:
            raise self.error("needs a message element")
        try:
            return parse(kids[0])
        except XmlRequestError as err:
            raise XmlRequestError(
                err.code, f"<{self.tag}>: {err.reason}", self.id, out_of_range=err.out_of_range
            ) from None


def _vector_cap(element: Element) -> int:
    """The longest vector a client may send in a message (:mod:`pluto.limits`): a longer one is refused before its
    numbers are read."""
    return limits.MAX_ACTUATOR_VECTOR if element.tag == "ActuatorState" else limits.MAX_VECTOR


def _request_from(root: Element) -> Request:
    tag = root.tag
    if tag == "list":
        r = _Reader(root, frozenset())
        r.no_children()
        return ListRequest(id=r.id)
    if tag == "read":
        r = _Reader(root, frozenset({"name", "type"}))
        r.no_children()
        return ReadRequest(r.interface_name(), r.message_type(), id=r.id)
    if tag == "subscribe":
        r = _Reader(root, frozenset({"name", "rate", "type"}))
        r.no_children()
        name, kind = r.interface_name(), r.message_type()
        rate = r.number("rate")
        assert rate is not None
        return SubscribeRequest(name, rate, kind, id=r.id)
    if tag == "unsubscribe":
        r = _Reader(root, frozenset({"name"}))
        r.no_children()
        return UnsubscribeRequest(r.interface_name(), id=r.id)
    if tag == "write":
        r = _Reader(root, frozenset({"name"}))
        name = r.interface_name()
        return WriteRequest(name, r.content(lambda e: message_from_element(e, max_vector=_vector_cap(e))), id=r.id)
    if tag == "call":
        r = _Reader(root, frozenset({"service", "timeout"}))
        service = r.interface_name("service")
        timeout = r.number("timeout", required=False)
        kids = r.children(1)
        request = r.content(lambda e: value_from_element(e, max_vector=_vector_cap(e))) if kids else None
        return CallRequest(service, request, timeout, id=r.id)
    if tag == "auth":
        r = _Reader(root, frozenset({"token"}))
        r.no_children()
        return AuthRequest(r.required("token"), id=r.id)
    raw_id = root.attrib.get("id")
    raise XmlRequestError(
        ErrorCode.UNKNOWN_OPERATION,
        f"unknown request <{tag[:40]}> (requests: {', '.join(REQUEST_TAGS.values())})",
        raw_id if raw_id is not None and len(raw_id) <= MAX_ID_LENGTH else None,
    )


def _reply_from(root: Element) -> ServerReply:
    tag = root.tag
    finite = False  # a server may send infinite ranges and NaN
    if tag == "update":
        r = _Reader(root, frozenset({"name", "seq"}))
        seq = parse_int(r.required("seq"), "<update>@seq")
        return Update(r.required("name"), seq, r.content(lambda e: message_from_element(e, finite=finite)))
    if tag == "value":
        r = _Reader(root, frozenset({"name"}))
        return Value(r.required("name"), r.content(lambda e: message_from_element(e, finite=finite)), id=r.id)
    if tag == "error":
        r = _Reader(root, frozenset({"code", "reason"}))
        r.no_children()
        code = r.required("code")
        try:
            error_code = ErrorCode(code)
        except ValueError:
            raise r.error(f"unknown error code {code[:40]!r}") from None
        return ErrorReply(error_code, r.required("reason"), id=r.id)
    if tag in ("written", "unsubscribed"):
        r = _Reader(root, frozenset({"name"}))
        r.no_children()
        return (Written if tag == "written" else Unsubscribed)(r.required("name"), id=r.id)
    if tag == "subscribed":
        r = _Reader(root, frozenset({"name", "rate"}))
        r.no_children()
        rate = r.number("rate")
        assert rate is not None
        return Subscribed(r.required("name"), rate, id=r.id)
    if tag == "reply":
        r = _Reader(root, frozenset({"service"}))
        kids = r.children(1)
        value = r.content(lambda e: value_from_element(e, finite=finite)) if kids else None
        return Reply(r.required("service"), value, id=r.id)
    if tag == "authorized":
        r = _Reader(root, frozenset())
        r.no_children()
        return Authorized(id=r.id)
    if tag == "hello":
        r = _Reader(root, frozenset({"server", "protocol", "robot", "auth", "max_document"}))
        r.no_children()
        return Hello(
            robot=r.required("robot"),
            auth=r.required("auth") == "token",
            max_document=parse_int(r.required("max_document"), "<hello>@max_document"),
            protocol=parse_int(r.required("protocol"), "<hello>@protocol"),
            server=r.required("server"),
        )
    if tag == "listing":
        r = _Reader(root, frozenset())
        modules: list[str] = []
        interfaces: list[InterfaceEntry] = []
        for child in root:
            if child.tag == "module":
                modules.append(_Reader(child, frozenset({"name"})).required("name"))
            elif child.tag == "interface":
                c = _Reader(child, frozenset({"name", "type", "live", "writable", "description"}))
                interfaces.append(
                    InterfaceEntry(
                        c.required("name"),
                        c.required("type"),
                        parse_bool(c.required("live"), "<interface>@live"),
                        parse_bool(c.required("writable"), "<interface>@writable"),
                        c.get("description") or "",
                    )
                )
            else:
                raise r.error(f"unexpected <{child.tag[:40]}>")
        return Listing(tuple(modules), tuple(interfaces), id=r.id)
    raise XmlRequestError(ErrorCode.UNKNOWN_OPERATION, f"unknown reply <{tag[:40]}>")
