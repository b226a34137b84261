"""The file layout: JSON Schemas that standard validators accept, JSON messages that match them, times in ns."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from pluto import msgs
from pluto.record.format import (
    LogError,
    decode_message,
    encode_message,
    from_ns,
    schema_bytes,
    schema_name,
    to_ns,
    type_of_schema,
)

SAMPLES: list[msgs.Message] = [
    msgs.Odometry(stamp=1.5, x=1.0, y=-2.0, theta=7.0, v=0.3, omega=-0.1),
    msgs.LaserScan(stamp=2.0, arrival=2.2, ranges=[1.0, -1.0, 80.0], angles=[-0.1, 0.0, 0.1], count=3),
    msgs.PoseEstimate(stamp=3.0, pose=[1.0] * 8, covariance=[0.0] * 9, cmd_flags=-1),
    msgs.ModuleInfo(name="x", provides=[msgs.InterfaceStats(name="A", type="Odometry", count=3)]),
    msgs.GpsFix(stamp=4.0, latitude=59.3, longitude=18.1, satellites=7, quality=2),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_validates_against_its_stored_schema(message: msgs.Message) -> None:
    schema = json.loads(schema_bytes(type(message)))
    jsonschema.Draft202012Validator.check_schema(schema)
    document = json.loads(encode_message(message))
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    assert document["type"] == type(message).__name__
    assert schema["title"] == type(message).__name__  # the type itself at the top, not a $ref
    assert decode_message(encode_message(message), type(message)) == message


def test_a_message_of_another_type_does_not_validate() -> None:
    schema = json.loads(schema_bytes(msgs.Odometry))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(encode_message(msgs.Power(voltage=12.0))), schema)


def test_every_message_type_has_a_schema_name_that_maps_back() -> None:
    for cls in msgs.message_types().values():
        assert type_of_schema(schema_name(cls)) is cls
    assert type_of_schema("geometry_msgs/Pose") is None
    assert type_of_schema("pluto.msgs.NoSuchType") is None


def test_non_finite_numbers_come_back_as_nan() -> None:
    data = encode_message(msgs.LaserScan(stamp=1.0, ranges=[1.0, math.nan, math.inf]))
    assert b"null" in data  # JSON has no NaN
    back = decode_message(data, msgs.LaserScan)
    assert isinstance(back, msgs.LaserScan)
    assert back.ranges[0] == 1.0 and math.isnan(back.ranges[1]) and math.isnan(back.ranges[2])


@pytest.mark.parametrize("data", [b"", b"{", b'{"type":"Odometry","x":"far"}', b'{"type":"Power"}', b"[1,2]"])
def test_bad_json_is_a_log_error(data: bytes) -> None:
    with pytest.raises(LogError, match="not a valid Odometry"):
        decode_message(data, msgs.Odometry)


def test_times_in_nanoseconds() -> None:
    assert to_ns(1.5) == 1_500_000_000
    assert from_ns(to_ns(1234.000000001)) == pytest.approx(1234.000000001, abs=1e-9)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(LogError):
            to_ns(bad)
