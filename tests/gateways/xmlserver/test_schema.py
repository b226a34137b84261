"""The XSD: the shipped file is the generated one, and it accepts every document the codec writes."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from pluto import msgs
from pluto.gateways.xmlserver.codec import encode_event
from pluto.gateways.xmlserver.schema import SCHEMA_PATH, xsd_text
from tests.gateways.xmlserver.test_codec import REPLIES, REQUESTS
from tests.gateways.xmlserver.test_mapping import sample

xmlschema = pytest.importorskip("xmlschema")

README = Path(__file__).parents[3] / "README.md"


@pytest.fixture(scope="module")
def schema() -> object:
    return xmlschema.XMLSchema(str(SCHEMA_PATH))


def valid(schema: object, document: bytes | str) -> bool:
    text = document.decode() if isinstance(document, bytes) else document
    return bool(schema.is_valid(io.StringIO(text)))  # type: ignore[attr-defined]


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == xsd_text(), (
        "pluto-xml.xsd is out of date with the messages: regenerate it with "
        "`pluto xmlserver --xsd > src/pluto/gateways/xmlserver/pluto-xml.xsd`"
    )


def test_every_request_and_reply_is_valid(schema: object) -> None:
    for event in [*REQUESTS, *REPLIES]:
        document = encode_event(event)
        assert valid(schema, document), document


@pytest.mark.parametrize("name", sorted(msgs.message_types()))
def test_every_message_is_valid_in_a_value_and_a_write(schema: object, name: str) -> None:
    from pluto.gateways.xmlserver.events import Value, WriteRequest

    value = sample(msgs.message_types()[name], 5)
    assert valid(schema, encode_event(Value("some/interface", value, id="1")))
    assert valid(schema, encode_event(WriteRequest("some/interface", value)))
    schema.validate(io.StringIO(encode_event(Value("x", value)).decode()))  # type: ignore[attr-defined]


def test_field_descriptions_and_units_are_documented() -> None:
    text = xsd_text()
    assert 'name="Odometry"' in text and "Linear velocity, m/s, forward positive." in text
    assert '<xs:attribute name="theta" type="xs:double" default="0.0">' in text


@pytest.mark.parametrize(
    "document",
    [
        '<subscribe name="Sick/Scan"/>',  # no rate
        '<subscribe name="Sick/Scan" rate="-1"/>',
        '<read name="a*b"/>',
        '<write name="drive/command"><Velocity/></write>',
        '<Odometry x="fast"/>',
        "<ActuatorState><velocity>1 two</velocity></ActuatorState>",
        '<error code="oops" reason="x"/>',
    ],
)
def test_invalid_documents_are_invalid(schema: object, document: str) -> None:
    assert not valid(schema, document)


def test_the_readme_examples_are_valid(schema: object) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## XML gateway") :]
    block = re.search(r"```xml\n(.*?)```", section, re.S)
    assert block is not None
    documents = [line for line in block.group(1).splitlines() if line.startswith("<")]
    assert len(documents) >= 15
    for document in documents:
        assert valid(schema, document), document
