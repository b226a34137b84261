"""The XML form of bus messages and of the generic values services take and return.

A message is an element named after its type. Its scalar fields are attributes, its vectors child elements holding
the numbers separated by spaces, its lists of strings or of records repeated child elements, in field order::

    <Odometry stamp="12.5" x="1.25" y="-0.5" theta="0.3" v="0.3" omega="0"/>
    <ActuatorState stamp="0" cmd_flags="0"><position/><velocity>0.3 0</velocity><force/></ActuatorState>

Numbers are in the units of the message definitions (SI). Floats are written as the shortest text that reads back to
the same value, infinity and not-a-number as ``INF``, ``-INF`` and ``NaN`` (the XSD forms); booleans as ``true`` and
``false``. A field left out when a message is sent takes its default. The same rules are what the XSD of
:mod:`.schema` says, generated from the same field descriptions.

A generic value (the request and reply of a service call) is one of ``<null/>``, ``<bool>``, ``<int>``,
``<float>``, ``<str>``, ``<bytes>`` (base64), ``<array>`` (of values), ``<map>`` (of ``<item key="...">`` values)
or a message element.
"""

# Strategy: the mapping is derived from the message Structs through msgspec.inspect, so a message type added to
# pluto.msgs has an XML form (and an XSD entry) without code here; a field type the mapping does not know holds a
# generic value. Output is written as text directly (faster than building elements, and it guarantees that no raw
# newline ever lands in a document: newlines in strings become character references, which keeps the one-document-
# per-line framing of the codec intact). Input arrives as elements from the hardened parser of the codec; every
# problem raises XmlRequestError(BAD_VALUE) naming the field, and msgspec.convert gives the final validation.

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final
from xml.etree.ElementTree import Element

import msgspec

from pluto import msgs

from .events import ErrorCode, XmlRequestError

__all__ = [
    "MAX_VECTOR",
    "FieldKind",
    "FieldSpec",
    "escape_attribute",
    "escape_text",
    "field_specs",
    "format_float",
    "message_from_element",
    "message_xml",
    "parse_bool",
    "parse_float",
    "parse_int",
    "value_from_element",
    "value_xml",
]

MAX_VECTOR: Final = 100_000
"""Most numbers a vector field may hold in a document received, unless the reader asks for fewer (a server reads
requests with the limits of :mod:`pluto.limits`)."""

_INT64 = (-(2**63), 2**63 - 1)


class FieldKind(Enum):
    """How a field is written in XML."""

    FLOAT = "float"
    """An attribute, xs:double."""
    INT = "int"
    """An attribute, xs:long."""
    BOOL = "bool"
    """An attribute, xs:boolean."""
    STR = "str"
    """An attribute, xs:string."""
    FLOATS = "floats"
    """A child element holding numbers separated by spaces."""
    INTS = "ints"
    """A child element holding integers separated by spaces."""
    STRS = "strs"
    """A child element per string."""
    STRUCT = "struct"
    """A child element with the record's fields."""
    STRUCTS = "structs"
    """A child element per record."""
    ANY = "any"
    """A child element holding one generic value."""

    @property
    def is_attribute(self) -> bool:
        return self in (FieldKind.FLOAT, FieldKind.INT, FieldKind.BOOL, FieldKind.STR)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a message (or of a record inside one) as XML sees it.

    Attributes:
        name: the attribute or element name (the field's encoded name).
        attr: the Python attribute holding it.
        kind: how it is written.
        record: the record type, for STRUCT and STRUCTS.
        description: the field's description (with units), "" if none.
        required: it has no default.
        default: the default of a scalar field, None otherwise.
    """

    name: str
    attr: str
    kind: FieldKind
    record: type[msgspec.Struct] | None = None
    description: str = ""
    required: bool = False
    default: Any = None


def _unwrap(t: Any) -> tuple[Any, str]:
    description = ""
    while isinstance(t, msgspec.inspect.Metadata):
        extra = t.extra_json_schema or {}
        description = str(extra.get("description", description))
        t = t.type
    return t, description


_SCALAR_KINDS: tuple[tuple[type[Any], FieldKind], ...] = (
    (msgspec.inspect.FloatType, FieldKind.FLOAT),
    (msgspec.inspect.IntType, FieldKind.INT),
    (msgspec.inspect.BoolType, FieldKind.BOOL),
    (msgspec.inspect.StrType, FieldKind.STR),
)
_LIST_KINDS: tuple[tuple[type[Any], FieldKind], ...] = (
    (msgspec.inspect.FloatType, FieldKind.FLOATS),
    (msgspec.inspect.IntType, FieldKind.INTS),
    (msgspec.inspect.StrType, FieldKind.STRS),
)


def _kind_of(t: Any) -> tuple[FieldKind, type[msgspec.Struct] | None]:
    for cls, kind in _SCALAR_KINDS:
        if isinstance(t, cls):
            return kind, None
    if isinstance(t, msgspec.inspect.StructType):
        return FieldKind.STRUCT, t.cls
    if isinstance(t, msgspec.inspect.ListType):
        item, _ = _unwrap(t.item_type)
        for cls, kind in _LIST_KINDS:
            if isinstance(item, cls):
                return kind, None
        if isinstance(item, msgspec.inspect.StructType):
            return FieldKind.STRUCTS, item.cls
    return FieldKind.ANY, None


@functools.cache
def field_specs(cls: type[msgspec.Struct]) -> tuple[FieldSpec, ...]:
    """The fields of a message or record type, in order, as XML sees them."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    specs = []
    for f in info.fields:
        t, description = _unwrap(f.type)
        kind, record = _kind_of(t)
        default = f.default if kind.is_attribute and f.default is not msgspec.NODEFAULT else None
        specs.append(FieldSpec(f.encode_name, f.name, kind, record, description, f.required, default))
    return tuple(specs)


# -- text ---------------------------------------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all (even as references) become U+FFFD.
_INVALID_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
)
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": "&#10;", "\r": "&#13;"})


def escape_attribute(text: str) -> str:
    """``text`` as the value of an attribute between double quotes (newlines as character references)."""
    return _INVALID_CHARS.sub("\ufffd", text).translate(_ATTRIBUTE_ESCAPES)


def escape_text(text: str) -> str:
    """``text`` as the content of an element (newlines as character references)."""
    return _INVALID_CHARS.sub("\ufffd", text).translate(_TEXT_ESCAPES)


def format_float(x: float) -> str:
    """The shortest text that reads back as ``x``; ``INF``, ``-INF`` and ``NaN`` as in XSD."""
    x = float(x)
    if math.isfinite(x):
        return repr(x)
    if math.isnan(x):
        return "NaN"
    return "INF" if x > 0 else "-INF"


def _floats_text(values: list[float]) -> str:
    try:
        text = " ".join(map(float.__repr__, values))
    except TypeError:  # ints (or numpy numbers) in a list built by hand rather than decoded from the bus
        return " ".join(map(format_float, values))
    # The repr of a finite float has no letter n; inf and nan have one.
    return " ".join(map(format_float, values)) if "n" in text else text


_FLOAT = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
_NONFINITE = {"INF": math.inf, "+INF": math.inf, "-INF": -math.inf, "NaN": math.nan}
_INT = re.compile(r"\s*[+-]?\d+\s*")


def _bad(where: str, reason: str) -> XmlRequestError:
    return XmlRequestError(ErrorCode.BAD_VALUE, f"{where}: {reason}")


def parse_float(text: str, where: str, *, finite: bool = True) -> float:
    """Read an xs:double.

    Args:
        text: the text.
        where: what holds it, for the error message.
        finite: refuse ``INF`` and ``NaN`` (and numbers too large for a double).

    Raises:
        XmlRequestError: BAD_VALUE, not a number (or not finite).
    """
    stripped = text.strip()
    if stripped in _NONFINITE and not finite:
        return _NONFINITE[stripped]
    if _FLOAT.fullmatch(text) is None:
        raise _bad(where, f"{_shorten(text)!r} is not a number")
    value = float(text)
    if finite and not math.isfinite(value):
        raise _bad(where, f"{_shorten(text)} is not a finite number")
    return value


def parse_int(text: str, where: str) -> int:
    """Read an xs:long.

    Raises:
        XmlRequestError: BAD_VALUE, not an integer or out of the 64-bit range.
    """
    if _INT.fullmatch(text) is None or len(text) > 40:
        raise _bad(where, f"{_shorten(text)!r} is not an integer")
    value = int(text)
    if not _INT64[0] <= value <= _INT64[1]:
        raise _bad(where, f"{text.strip()} is out of the 64-bit range")
    return value


def parse_bool(text: str, where: str) -> bool:
    """Read an xs:boolean (``true``, ``false``, ``1``, ``0``).

    Raises:
        XmlRequestError: BAD_VALUE, anything else.
    """
    value = text.strip()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise _bad(where, f"{_shorten(text)!r} is not a boolean (true or false)")


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# -- messages out ---------------------------------------------------------------------------------------------------


def message_xml(msg: msgs.Message) -> str:
    """The XML element of a message (no newline anywhere in it)."""
    parts: list[str] = []
    _record_xml(type(msg).__name__, msg, field_specs(type(msg)), parts)
    return "".join(parts)


def _record_xml(tag: str, obj: Any, specs: tuple[FieldSpec, ...], out: list[str]) -> None:
    out.append("<" + tag)
    children: list[str] = []
    for spec in specs:
        value = getattr(obj, spec.attr)
        kind = spec.kind
        if kind is FieldKind.FLOAT:
            out.append(f' {spec.name}="{format_float(value)}"')
        elif kind is FieldKind.INT:
            out.append(f' {spec.name}="{int(value)}"')
        elif kind is FieldKind.BOOL:
            out.append(f' {spec.name}="{"true" if value else "false"}"')
        elif kind is FieldKind.STR:
            out.append(f' {spec.name}="{escape_attribute(str(value))}"')
        elif kind is FieldKind.FLOATS:
            children.append(f"<{spec.name}>{_floats_text(value)}</{spec.name}>" if value else f"<{spec.name}/>")
        elif kind is FieldKind.INTS:
            text = " ".join(str(int(v)) for v in value)
            children.append(f"<{spec.name}>{text}</{spec.name}>" if value else f"<{spec.name}/>")
        elif kind is FieldKind.STRS:
            children.extend(f"<{spec.name}>{escape_text(str(v))}</{spec.name}>" for v in value)
        elif kind is FieldKind.STRUCT or kind is FieldKind.STRUCTS:
            assert spec.record is not None
            for record in [value] if kind is FieldKind.STRUCT else value:
                _record_xml(spec.name, record, field_specs(spec.record), children)
        else:
            children.append(f"<{spec.name}>{value_xml(value)}</{spec.name}>")
    if children:
        out.append(">")
        out.extend(children)
        out.append(f"</{tag}>")
    else:
        out.append("/>")


# -- generic values out ---------------------------------------------------------------------------------------------


def value_xml(value: Any) -> str:
    """The XML element of a generic value: a service's request or reply.

    A map that carries the ``type`` tag of a message type (a message decoded without its type) is written as that
    message.
    """
    if value is None:
        return "<null/>"
    if isinstance(value, bool):
        return f"<bool>{'true' if value else 'false'}</bool>"
    if isinstance(value, int):
        return f"<int>{value}</int>"
    if isinstance(value, float):
        return f"<float>{format_float(value)}</float>"
    if isinstance(value, str):
        return f"<str>{escape_text(value)}</str>"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<bytes>{base64.b64encode(bytes(value)).decode('ascii')}</bytes>"
    if isinstance(value, msgs.Message):
        return message_xml(value)
    if isinstance(value, list | tuple):
        return "<array>" + "".join(value_xml(v) for v in value) + "</array>" if value else "<array/>"
    if isinstance(value, dict):
        message = _as_message(value)
        if message is not None:
            return message_xml(message)
        items = "".join(f'<item key="{escape_attribute(str(k))}">{value_xml(v)}</item>' for k, v in value.items())
        return f"<map>{items}</map>" if items else "<map/>"
    if isinstance(value, msgspec.Struct):
        return value_xml(msgspec.to_builtins(value))
    return f"<str>{escape_text(str(value))}</str>"


def _as_message(value: dict[Any, Any]) -> msgs.Message | None:
    tag = value.get("type")
    cls = msgs.message_types().get(tag) if isinstance(tag, str) else None
    if cls is None:
        return None
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError:
        return None


# -- messages in ----------------------------------------------------------------------------------------------------


def message_from_element(element: Element, *, finite: bool = True, max_vector: int = MAX_VECTOR) -> msgs.Message:
    """The message an element stands for.

    Args:
        element: a message element (its tag names the type).
        finite: refuse ``INF`` and ``NaN`` in numbers (what a client sends); False to read what a server sends.
        max_vector: most numbers a vector field may hold; a longer one is refused before its numbers are read.

    Raises:
        XmlRequestError: BAD_VALUE, with the field and the reason (``out_of_range`` for a vector too long).
    """
    cls = msgs.message_types().get(element.tag)
    if cls is None:
        raise _bad(f"<{_shorten(element.tag)}>", "not a message type")
    data = _record_data(element, cls, element.tag, finite, max_vector)
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as err:
        raise _bad(f"<{element.tag}>", str(err)) from None


def _check_no_text(element: Element, where: str) -> None:
    if element.text and element.text.strip():
        raise _bad(where, f"unexpected text {_shorten(element.text.strip())!r}")
    for child in element:
        if child.tail and child.tail.strip():
            raise _bad(where, f"unexpected text {_shorten(child.tail.strip())!r}")


def _record_data(
    element: Element, cls: type[msgspec.Struct], where: str, finite: bool, max_vector: int
) -> dict[str, Any]:
    specs = {spec.name: spec for spec in field_specs(cls)}
    data: dict[str, Any] = {}
    for name, text in element.attrib.items():
        spec = specs.get(name)
        if spec is None or not spec.kind.is_attribute:
            raise _bad(f"<{where}>", f"unknown attribute {_shorten(name)!r}")
        data[name] = _scalar(spec.kind, text, f"{where}@{name}", finite)
    _check_no_text(element, f"<{where}>")
    for child in element:
        spec = specs.get(child.tag)
        if spec is None or spec.kind.is_attribute:
            raise _bad(f"<{where}>", f"unknown element <{_shorten(child.tag)}>")
        _child_data(data, child, spec, f"{where}/{child.tag}", finite, max_vector)
    return data


def _child_data(data: dict[str, Any], child: Element, spec: FieldSpec, at: str, finite: bool, max_vector: int) -> None:
    """Put the value of a field given as an element (a vector, a record, a generic value) into ``data``; the
    repeated ones (strings, records) append."""
    repeated = spec.kind in (FieldKind.STRS, FieldKind.STRUCTS)
    if not repeated and spec.name in data:
        raise _bad(f"<{at}>", "given twice")
    if spec.kind in (FieldKind.FLOATS, FieldKind.INTS, FieldKind.STRS) and (len(child) or child.attrib):
        raise _bad(f"<{at}>", "holds text only")
    if spec.kind is FieldKind.FLOATS:
        data[spec.name] = _vector(child.text or "", at, lambda t, w: parse_float(t, w, finite=finite), max_vector)
    elif spec.kind is FieldKind.INTS:
        data[spec.name] = _vector(child.text or "", at, parse_int, max_vector)
    elif spec.kind is FieldKind.STRS:
        data.setdefault(spec.name, []).append(child.text or "")
    elif spec.kind is FieldKind.STRUCT:
        assert spec.record is not None
        data[spec.name] = _record_data(child, spec.record, at, finite, max_vector)
    elif spec.kind is FieldKind.STRUCTS:
        assert spec.record is not None
        data.setdefault(spec.name, []).append(_record_data(child, spec.record, at, finite, max_vector))
    else:
        data[spec.name] = _single_value(child, at, finite, max_vector)


def _scalar(kind: FieldKind, text: str, where: str, finite: bool) -> Any:
    if kind is FieldKind.FLOAT:
        return parse_float(text, where, finite=finite)
    if kind is FieldKind.INT:
        return parse_int(text, where)
    if kind is FieldKind.BOOL:
        return parse_bool(text, where)
    return text


def _vector(text: str, where: str, parse: Any, max_vector: int) -> list[Any]:
    words = text.split(None, max_vector)  # at most max_vector + 1 words, whatever the text holds
    if len(words) > max_vector:
        raise XmlRequestError(ErrorCode.BAD_VALUE, f"<{where}>: more than {max_vector} numbers", out_of_range=True)
    return [parse(word, f"{where}[{i}]") for i, word in enumerate(words)]


def _single_value(element: Element, where: str, finite: bool, max_vector: int, *, keyed: bool = False) -> Any:
    _check_no_text(element, f"<{where}>")
    if element.attrib and not keyed:
        raise _bad(f"<{where}>", "takes no attributes")
    if len(element) > 1:
        raise _bad(f"<{where}>", "holds one value")
    return value_from_element(element[0], finite=finite, max_vector=max_vector) if len(element) else None


# -- generic values in ----------------------------------------------------------------------------------------------


_SCALAR_TAGS = frozenset(("null", "bool", "int", "float", "str", "bytes"))


def value_from_element(element: Element, *, finite: bool = True, max_vector: int = MAX_VECTOR) -> Any:
    """The generic value an element stands for (a message element gives the message).

    Args:
        element: the value's element.
        finite: refuse ``INF`` and ``NaN`` (see :func:`message_from_element`).
        max_vector: most numbers a vector field of a message inside may hold.

    Raises:
        XmlRequestError: BAD_VALUE, with the reason.
    """
    tag = element.tag
    where = f"<{_shorten(tag)}>"
    if tag in msgs.message_types():
        return message_from_element(element, finite=finite, max_vector=max_vector)
    if tag in _SCALAR_TAGS:
        if element.attrib or len(element):
            raise _bad(where, "holds text only")
        return _scalar_value(tag, element.text or "", where, finite)
    if tag == "array":
        if element.attrib:
            raise _bad(where, "takes no attributes")
        _check_no_text(element, where)
        return [value_from_element(child, finite=finite, max_vector=max_vector) for child in element]
    if tag == "map":
        return _map_value(element, where, finite, max_vector)
    raise _bad(where, "not a value (null, bool, int, float, str, bytes, array, map or a message)")


def _scalar_value(tag: str, text: str, where: str, finite: bool) -> Any:
    """The value of a ``<null>``, ``<bool>``, ``<int>``, ``<float>``, ``<str>`` or ``<bytes>`` holding ``text``."""
    if tag == "null":
        if text.strip():
            raise _bad(where, "must be empty")
        return None
    if tag == "bool":
        return parse_bool(text, where)
    if tag == "int":
        return parse_int(text, where)
    if tag == "float":
        return parse_float(text, where, finite=finite)
    if tag == "str":
        return text
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise _bad(where, "not base64") from None


def _map_value(element: Element, where: str, finite: bool, max_vector: int) -> dict[str, Any]:
    """The value of a ``<map>``: its ``<item key="...">`` elements, each key once."""
    if element.attrib:
        raise _bad(where, "takes no attributes")
    _check_no_text(element, where)
    result: dict[str, Any] = {}
    for item in element:
        if item.tag != "item" or set(item.attrib) != {"key"}:
            raise _bad(where, 'holds only <item key="..."> elements')
        key = item.attrib["key"]
        if key in result:
            raise _bad(where, f"key {_shorten(key)!r} given twice")
        result[key] = _single_value(item, f"map/item[{_shorten(key)}]", finite, max_vector, keyed=True)
    return result
