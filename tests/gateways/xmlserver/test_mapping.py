"""The XML form of messages and generic values: every message type round-trips, bad values are refused."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto import msgs
from pluto.gateways.xmlserver.codec import parse_document
from pluto.gateways.xmlserver.events import ErrorCode, XmlRequestError
from pluto.gateways.xmlserver.mapping import (
    FieldKind,
    field_specs,
    message_from_element,
    message_xml,
    value_from_element,
    value_xml,
)


def sample(cls: type[msgspec.Struct], seed: int) -> Any:
    """A value of ``cls`` with every field set away from its default."""
    data: dict[str, Any] = {}
    for i, spec in enumerate(field_specs(cls)):
        k = seed + i
        if spec.kind is FieldKind.FLOAT:
            data[spec.name] = 0.1 * k - 1.7e-3
        elif spec.kind is FieldKind.INT:
            data[spec.name] = -k * 1000
        elif spec.kind is FieldKind.BOOL:
            data[spec.name] = True
        elif spec.kind is FieldKind.STR:
            data[spec.name] = f'text {k} <&> "quoted"\nnext line'
        elif spec.kind is FieldKind.FLOATS:
            data[spec.name] = [k * 0.25, -1e-9, 12345.678, 3e300]
        elif spec.kind is FieldKind.INTS:
            data[spec.name] = [k, -k, 2**62]
        elif spec.kind is FieldKind.STRS:
            data[spec.name] = ["a", "b c", ""]
        elif spec.kind in (FieldKind.STRUCT, FieldKind.STRUCTS):
            assert spec.record is not None
            record = msgspec.to_builtins(sample(spec.record, k))
            data[spec.name] = record if spec.kind is FieldKind.STRUCT else [record, record]
    return msgspec.convert(data, cls)


@pytest.mark.parametrize("name", sorted(msgs.message_types()))
def test_every_message_type_round_trips(name: str) -> None:
    cls = msgs.message_types()[name]
    for value in (cls() if name != "ModuleInfo" else cls(name="x"), sample(cls, 3)):
        text = message_xml(value)
        assert "\n" not in text and "\r" not in text
        back = message_from_element(parse_document(text.encode()))
        assert back == value


def test_fields_are_attributes_and_vectors_are_elements() -> None:
    text = message_xml(msgs.ActuatorState(stamp=2.5, cmd_flags=10, velocity=[0.3, -0.1]))
    assert text == (
        '<ActuatorState stamp="2.5" cmd_flags="10" lease="0.0"><position/><velocity>0.3 -0.1</velocity><force/>'
        "</ActuatorState>"
    )
    assert message_xml(msgs.Contact(front=True)) == '<Contact stamp="0.0" front="true" rear="false" stall="false"/>'


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_numbers_round_trip_exactly(values: list[float], stamp: float, flags: int) -> None:
    value = msgs.ActuatorState(stamp=stamp, cmd_flags=flags, position=values, force=values[::-1])
    assert message_from_element(parse_document(message_xml(value).encode())) == value


def test_non_finite_numbers_are_written_in_xsd_form_and_refused_from_clients() -> None:
    scan = msgs.LaserScan(ranges=[1.0, math.inf, -math.inf, math.nan], max_range=math.inf)
    text = message_xml(scan)
    assert "<ranges>1.0 INF -INF NaN</ranges>" in text and 'max_range="INF"' in text
    back = message_from_element(parse_document(text.encode()), finite=False)
    assert isinstance(back, msgs.LaserScan)
    assert back.ranges[:3] == [1.0, math.inf, -math.inf] and math.isnan(back.ranges[3])
    with pytest.raises(XmlRequestError) as err:
        message_from_element(parse_document(text.encode()))
    assert err.value.code is ErrorCode.BAD_VALUE


def test_strings_never_break_the_line_and_bad_characters_are_replaced() -> None:
    info = msgs.ModuleInfo(name="a\nb\r\tc\x00d", host='<"&>', requires=["x\ny"])
    text = message_xml(info)
    assert "\n" not in text and "\r" not in text and "\x00" not in text
    back = message_from_element(parse_document(text.encode()))
    assert isinstance(back, msgs.ModuleInfo)
    assert back.name == "a\nb\r\tc\ufffdd" and back.host == '<"&>' and back.requires == ["x\ny"]


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ('<Odometry x="fast"/>', "Odometry@x"),
        ('<Odometry x="NaN"/>', "Odometry@x"),
        ('<Odometry x="1e999"/>', "Odometry@x"),
        ('<Odometry x="1_0"/>', "Odometry@x"),
        ('<Odometry speed="1"/>', "unknown attribute 'speed'"),
        ("<Odometry><x>1</x></Odometry>", "unknown element <x>"),
        ("<Odometry>text</Odometry>", "unexpected text"),
        ("<ActuatorState><velocity>0.3 zero</velocity></ActuatorState>", "velocity[1]"),
        ("<ActuatorState><velocity>1</velocity><velocity>2</velocity></ActuatorState>", "given twice"),
        ("<ActuatorState><velocity><x/></velocity></ActuatorState>", "holds text only"),
        ('<ActuatorState cmd_flags="1.5"/>', "cmd_flags"),
        ('<ActuatorState cmd_flags="99999999999999999999"/>', "64-bit"),
        ('<Contact front="yes"/>', "boolean"),
        ("<ModuleInfo/>", "name"),
        ('<ModuleInfo name="m"><provides name="x"/></ModuleInfo>', "type"),
        ("<Nonsense/>", "not a message type"),
    ],
)
def test_bad_values_are_refused_with_the_field(document: str, where: str) -> None:
    with pytest.raises(XmlRequestError) as err:
        message_from_element(parse_document(document.encode()))
    assert err.value.code is ErrorCode.BAD_VALUE
    assert where in err.value.reason


def test_generic_values_round_trip() -> None:
    value = {
        "none": None,
        "flag": False,
        "count": -(2**40),
        "ratio": 0.125,
        "text": "two\nlines & <tags>",
        "raw": b"\x00\xff binary",
        "list": [1, [2.5, "x"], {}, []],
        "odometry": msgs.Odometry(x=1.0),
    }
    text = value_xml(value)
    assert "\n" not in text
    assert value_from_element(parse_document(text.encode())) == value


def test_a_map_tagged_with_a_message_type_is_that_message() -> None:
    as_decoded = msgspec.msgpack.decode(msgs.encode(msgs.Odometry(x=2.0)))
    assert value_xml(as_decoded) == message_xml(msgs.Odometry(x=2.0))


@pytest.mark.parametrize(
    "document",
    [
        "<map><entry key='a'><int>1</int></entry></map>",
        "<map><item key='a'><int>1</int></item><item key='a'><int>2</int></item></map>",
        "<map><item><int>1</int></item></map>",
        "<int>1.5</int>",
        "<bytes>***</bytes>",
        "<null>x</null>",
        "<str a='1'>x</str>",
        "<array>text</array>",
        "<item key='a'/>",
        "<set/>",
    ],
)
def test_bad_generic_values_are_refused(document: str) -> None:
    with pytest.raises(XmlRequestError) as err:
        value_from_element(parse_document(document.encode()))
    assert err.value.code is ErrorCode.BAD_VALUE
