"""The XSD of the XML protocol, generated from the message definitions.

:func:`xsd_text` writes the schema of every document the server and its clients exchange: the requests, the
replies, the XML form of every bus message (from :func:`pluto.msgs.message_types`, with each field's description and
units as documentation) and the generic values of service calls. The package ships the result as ``pluto-xml.xsd``
(:data:`SCHEMA_PATH`); ``pluto xmlserver --xsd`` prints it afresh.
"""

# Strategy: the XSD is derived from the same FieldSpecs (mapping.field_specs) that the encoder and the parser use,
# so the three cannot drift apart; a test compares the shipped file with a fresh one. Elements are unqualified (no
# namespace), as a shell client writes them. A message type is a named complexType and a global element of the same
# name, so a message can be validated on its own; the "message" and "value" groups gather them for the documents
# that carry one. The output is deterministic: types in the registry's order, fields in declaration order.

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Final
from xml.etree.ElementTree import Element, SubElement, indent, register_namespace, tostring

import msgspec

from pluto import msgs

from .events import ERROR_MEANINGS
from .mapping import FieldKind, FieldSpec, field_specs, format_float

__all__ = ["SCHEMA_PATH", "xsd_text"]

SCHEMA_PATH: Final = Path(__file__).with_name("pluto-xml.xsd")
"""The shipped schema."""

_XS = "http://www.w3.org/2001/XMLSchema"
register_namespace("xs", _XS)

_SCALAR_TYPES = {
    FieldKind.FLOAT: "xs:double",
    FieldKind.INT: "xs:long",
    FieldKind.BOOL: "xs:boolean",
    FieldKind.STR: "xs:string",
}


def _q(tag: str) -> str:
    return f"{{{_XS}}}{tag}"


def _node(parent: Element, tag: str, **attrs: str) -> Element:
    return SubElement(parent, _q(tag), {k.rstrip("_"): v for k, v in attrs.items()})


def _document(parent: Element, text: str) -> None:
    text = " ".join(text.split())
    if text:
        _node(_node(parent, "annotation"), "documentation").text = text


def _default_text(spec: FieldSpec) -> str:
    if spec.kind is FieldKind.FLOAT:
        return format_float(spec.default)
    if spec.kind is FieldKind.BOOL:
        return "true" if spec.default else "false"
    return str(spec.default)


def _record_type(
    schema: Element, name: str, cls: type[msgspec.Struct], records: dict[str, type[msgspec.Struct]]
) -> None:
    ctype = _node(schema, "complexType", name=name)
    _document(ctype, inspect.getdoc(cls) or "")
    specs = field_specs(cls)
    children = [s for s in specs if not s.kind.is_attribute]
    if children:
        seq = _node(ctype, "sequence")
        for spec in children:
            _document(_child_element(seq, spec, records), spec.description)
    for spec in specs:
        if spec.kind.is_attribute:
            _document(_node(ctype, "attribute", **_attribute_of(spec)), spec.description)


def _child_element(seq: Element, spec: FieldSpec, records: dict[str, type[msgspec.Struct]]) -> Element:
    """The element of a field that is not an attribute (a vector, a record, a generic value); a record's type goes
    into ``records``."""
    if spec.kind is FieldKind.FLOATS:
        return _node(seq, "element", name=spec.name, type="doubles", minOccurs="0")
    if spec.kind is FieldKind.INTS:
        return _node(seq, "element", name=spec.name, type="longs", minOccurs="0")
    if spec.kind is FieldKind.STRS:
        return _node(seq, "element", name=spec.name, type="xs:string", minOccurs="0", maxOccurs="unbounded")
    if spec.kind in (FieldKind.STRUCT, FieldKind.STRUCTS):
        assert spec.record is not None
        records[spec.record.__name__] = spec.record
        many = "unbounded" if spec.kind is FieldKind.STRUCTS else "1"
        return _node(seq, "element", name=spec.name, type=spec.record.__name__, minOccurs="0", maxOccurs=many)
    return _node(seq, "element", name=spec.name, type="valueHolder", minOccurs="0")


def _attribute_of(spec: FieldSpec) -> dict[str, str]:
    """The XSD attributes of a scalar field: its name, type, and whether it is required or its default."""
    attrs = {"name": spec.name, "type": _SCALAR_TYPES[spec.kind]}
    if spec.required:
        attrs["use"] = "required"
    elif spec.default is not None:
        attrs["default"] = _default_text(spec)
    return attrs


def _empty_element(parent: Element, name: str, doc: str, attributes: list[tuple[str, str, bool, str]]) -> Element:
    """A global element with attributes only: (name, type, required, documentation) each."""
    el = _node(parent, "element", name=name)
    _document(el, doc)
    ctype = _node(el, "complexType")
    _attributes(ctype, attributes)
    return el


def _attributes(ctype: Element, attributes: list[tuple[str, str, bool, str]]) -> None:
    for attr, kind, required, doc in attributes:
        a = _node(ctype, "attribute", name=attr, type=kind, **({"use": "required"} if required else {}))
        _document(a, doc)


def _holder(
    parent: Element, name: str, doc: str, group: str, optional: bool, attrs: list[tuple[str, str, bool, str]]
) -> None:
    """A global element holding one member of ``group`` (or none, if ``optional``), with attributes."""
    el = _node(parent, "element", name=name)
    _document(el, doc)
    ctype = _node(el, "complexType")
    seq = _node(ctype, "sequence")
    _node(seq, "group", ref=group, **({"minOccurs": "0"} if optional else {}))
    _attributes(ctype, attrs)


_ID = ("id", "xs:string", False, "Any text of at most 64 characters; the reply to the request repeats it.")
_NAME = ("name", "interfaceName", True, "The interface.")


def xsd_text() -> str:
    """The XSD of the protocol and of every registered message type, as text."""
    schema = Element(_q("schema"), {"elementFormDefault": "unqualified"})
    _document(
        schema,
        "Pluto XML protocol, version 1: one document per line (newline-terminated, no raw newline inside), UTF-8. "
        "Generated from the message definitions of pluto.msgs by pluto.gateways.xmlserver.schema; do not edit: "
        "regenerate with `pluto xmlserver --xsd`. Units are SI (m, rad, s, m/s, rad/s) unless a field says "
        "otherwise.",
    )
    _simple_types(schema)
    _messages(schema)
    _generic_values(schema)
    _requests(schema)
    _replies(schema)
    indent(schema, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + tostring(schema, encoding="unicode") + "\n"


def _simple_types(schema: Element) -> None:
    """Number lists, interface names, positive numbers and the error codes."""
    for name, item in (("doubles", "xs:double"), ("longs", "xs:long")):
        st = _node(schema, "simpleType", name=name)
        _document(st, f"Numbers ({item}) separated by spaces.")
        _node(st, "list", itemType=item)
    st = _node(schema, "simpleType", name="interfaceName")
    _document(st, "An interface or service name: parts separated by '/', none empty, no * $ ? #.")
    _node(_node(st, "restriction", base="xs:string"), "pattern", value=r"[^/*$?#@][^/*$?#]*(/[^/*$?#@][^/*$?#]*)*")
    st = _node(schema, "simpleType", name="positiveDouble")
    _node(_node(st, "restriction", base="xs:double"), "minExclusive", value="0")
    st = _node(schema, "simpleType", name="errorCode")
    restriction = _node(st, "restriction", base="xs:string")
    for code, meaning in ERROR_MEANINGS.items():
        _document(_node(restriction, "enumeration", value=code.value), meaning)


def _messages(schema: Element) -> None:
    """Every message type and the records inside them, and the "message" group of them all."""
    types = msgs.message_types()
    records: dict[str, type[msgspec.Struct]] = {}
    for name, cls in types.items():
        _record_type(schema, name, cls, records)
        _node(schema, "element", name=name, type=name)
    for name, record in records.items():
        if name not in types:
            _record_type(schema, name, record, {})
    group = _node(schema, "group", name="message")
    _document(group, "Any bus message.")
    choice = _node(group, "choice")
    for name in types:
        _node(choice, "element", ref=name)


def _generic_values(schema: Element) -> None:
    """The "value" group (a service's request or reply) and the array, map and holder types made of it."""
    group = _node(schema, "group", name="value")
    _document(group, "A generic value: the request or reply of a service.")
    choice = _node(group, "choice")
    _node(_node(choice, "element", name="null"), "complexType")
    for name, kind in (("bool", "xs:boolean"), ("int", "xs:long"), ("float", "xs:double"), ("str", "xs:string")):
        _node(choice, "element", name=name, type=kind)
    _node(choice, "element", name="bytes", type="xs:base64Binary")
    _node(choice, "element", name="array", type="valueArray")
    _node(choice, "element", name="map", type="valueMap")
    _node(choice, "group", ref="message")
    ctype = _node(schema, "complexType", name="valueArray")
    _node(_node(ctype, "sequence"), "group", ref="value", minOccurs="0", maxOccurs="unbounded")
    ctype = _node(schema, "complexType", name="valueMap")
    map_item = _node(_node(ctype, "sequence"), "element", name="item", minOccurs="0", maxOccurs="unbounded")
    item_type = _node(map_item, "complexType")
    _node(_node(item_type, "sequence"), "group", ref="value")
    _node(item_type, "attribute", name="key", type="xs:string", use="required")
    ctype = _node(schema, "complexType", name="valueHolder")
    _node(_node(ctype, "sequence"), "group", ref="value", minOccurs="0")


def _requests(schema: Element) -> None:
    """The documents a client sends."""
    _empty_element(schema, "list", "Request: the live modules and the interfaces (reply: listing).", [_ID])
    type_attr = ("type", "xs:string", False, "Message type, for an interface that is not in the interface table.")
    _empty_element(schema, "read", "Request: the latest value of an interface (reply: value).", [_ID, _NAME, type_attr])
    rate = ("rate", "positiveDouble", True, "Largest rate of updates, Hz (the newest value wins).")
    _empty_element(
        schema,
        "subscribe",
        "Request: stream the values of an interface (reply: subscribed, then update documents). Subscribing again "
        "changes the rate.",
        [_ID, _NAME, rate, type_attr],
    )
    _empty_element(
        schema, "unsubscribe", "Request: stop the updates of an interface (reply: unsubscribed).", [_ID, _NAME]
    )
    _holder(
        schema,
        "write",
        "Request: write a new value of a command interface (reply: written). A stamp of 0 is set to the server's time.",
        "message",
        False,
        [_ID, _NAME],
    )
    service = ("service", "interfaceName", True, "The service: <module>/<service>, or mom/<module>.")
    timeout = ("timeout", "positiveDouble", False, "Seconds to wait for the reply.")
    _holder(
        schema,
        "call",
        "Request: call a service with a value, or none (reply: reply).",
        "value",
        True,
        [_ID, service, timeout],
    )
    _empty_element(
        schema,
        "auth",
        "Request: present the shared secret that writes and calls need (reply: authorized).",
        [_ID, ("token", "xs:string", True, "The secret.")],
    )


def _replies(schema: Element) -> None:
    """The documents the server sends."""
    _empty_element(
        schema,
        "hello",
        "The first document the server sends on a connection.",
        [
            ("server", "xs:string", True, "The server's name."),
            ("protocol", "xs:long", True, "Protocol version."),
            ("robot", "xs:string", True, "The robot the server is on."),
            ("auth", "xs:string", True, "'token' if writes and calls need <auth> first, else 'none'."),
            ("max_document", "xs:long", True, "Largest document accepted, bytes (newline included)."),
        ],
    )
    _listing(schema)
    _holder(schema, "value", "Reply to read.", "message", False, [_ID, ("name", "xs:string", True, "The interface.")])
    _empty_element(
        schema,
        "subscribed",
        "Reply to subscribe.",
        [_ID, ("name", "xs:string", True, "The interface."), ("rate", "xs:double", True, "Rate, Hz.")],
    )
    _holder(
        schema,
        "update",
        "A new value of a subscribed interface.",
        "message",
        False,
        [
            ("name", "xs:string", True, "The interface."),
            ("seq", "xs:long", True, "Values received on the interface so far; a gap means values were skipped."),
        ],
    )
    _empty_element(schema, "unsubscribed", "Reply to unsubscribe.", [_ID, ("name", "xs:string", True, "")])
    _empty_element(schema, "written", "Reply to write.", [_ID, ("name", "xs:string", True, "")])
    _holder(
        schema, "reply", "Reply to call (empty for none).", "value", True, [_ID, ("service", "xs:string", True, "")]
    )
    _empty_element(schema, "authorized", "Reply to a good auth.", [_ID])
    _empty_element(
        schema,
        "error",
        "A request refused or a bad document.",
        [_ID, ("code", "errorCode", True, "What kind of error."), ("reason", "xs:string", True, "What is wrong.")],
    )


def _listing(schema: Element) -> None:
    """The reply to ``<list/>``: the live modules and the interfaces, each with its type and state."""
    listing = _node(schema, "element", name="listing")
    _document(listing, "Reply to list.")
    ctype = _node(listing, "complexType")
    seq = _node(ctype, "sequence")
    module = _node(seq, "element", name="module", minOccurs="0", maxOccurs="unbounded")
    _attributes(_node(module, "complexType"), [("name", "xs:string", True, "A live module.")])
    interface = _node(seq, "element", name="interface", minOccurs="0", maxOccurs="unbounded")
    _attributes(
        _node(interface, "complexType"),
        [
            ("name", "xs:string", True, "The interface."),
            ("type", "xs:string", True, "Its message type ('' if unknown)."),
            ("live", "xs:boolean", True, "It has a value on the bus now."),
            ("writable", "xs:boolean", True, "Clients may write it through this server."),
            ("description", "xs:string", False, "What it carries."),
        ],
    )
    _attributes(ctype, [_ID])
