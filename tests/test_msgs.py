"""Messages: the codec round trip, strict decoding, the registry and the JSON schemas (with units)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto import msgs
from pluto.errors import DecodeError, PlutoError

# One instance of every registered type, with non-default values where that is easy.
SAMPLES: dict[str, msgs.Message] = {
    "ActuatorState": msgs.ActuatorState(stamp=1.0, cmd_flags=11, position=[1.0], velocity=[0.5, -0.1], force=[2.0]),
    "FVectorState": msgs.FVectorState(stamp=2.0, data=[0.1, -3.5], element=[7, -1]),
    "PoseEstimate": msgs.PoseEstimate(stamp=3.0, pose=[1, 2, 0, 0.5, 0, 0, 0.1, -0.2], cmd_flags=-1),
    "Odometry": msgs.Odometry(stamp=4.0, x=1.5, y=-2.0, theta=7.0, v=0.3, omega=-0.2),
    "SonarScan": msgs.SonarScan(stamp=5.0, ranges=[0.5, 8.0], angles=[0.0, 1.57], max_range=8.0),
    "Contact": msgs.Contact(stamp=6.0, front=True, stall=True),
    "Power": msgs.Power(stamp=7.0, voltage=24.5, charge=0.75, charging=True),
    "LaserScan": msgs.LaserScan(stamp=8.0, arrival=8.01, ranges=[1.0, -1.0], angles=[-1.57, 1.57], count=1),
    "ScanTiming": msgs.ScanTiming(stamp=9.0, count=361),
    "DmuRaw": msgs.DmuRaw(stamp=10.0, phi=0.1, psi=-0.1, rates=[0.0, 0.1, 0.2], accelerations=[0.0, 0.0, 9.81]),
    "DmuState": msgs.DmuState(stamp=11.0, theta=12.0, rates=[1.0, 2.0, 3.0]),
    "GpsFix": msgs.GpsFix(stamp=12.0, latitude=47.4, longitude=8.5, x=10.0, y=-3.0, satellites=7, quality=2),
    "SimTime": msgs.SimTime(stamp=13.0, rate=10.0),
    "Heartbeat": msgs.Heartbeat(stamp=14.0, seq=42, source="heartbeat"),
    "ModuleInfo": msgs.ModuleInfo(
        name="base",
        pid=1234,
        host="robot",
        active=True,
        provides=[msgs.InterfaceStats(name="Base/Drive/State", type="Odometry", count=3, rate_hz=10.0)],
        requires=["Base/Drive/Command"],
        dropped=2,
    ),
}


def test_every_registered_type_has_a_sample() -> None:
    assert set(msgs.message_types()) == set(SAMPLES)
    for name, cls in msgs.message_types().items():
        assert cls.__name__ == name
        assert issubclass(cls, msgs.Message)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip_of_every_registered_type(name: str) -> None:
    msg = SAMPLES[name]
    cls = msgs.message_type(name)
    assert type(msg) is cls
    data = msgs.encode(msg)
    assert isinstance(data, bytes)
    assert msgs.decode(data, cls) == msg
    assert msgs.decode(memoryview(data), cls) == msg
    # The MessagePack form names its type.
    assert msgspec.msgpack.decode(data)["type"] == name


def test_default_pose_and_covariance_have_their_documented_sizes() -> None:
    pose = msgs.PoseEstimate()
    assert pose.pose == [0.0] * 6
    assert pose.covariance == [0.0] * 9


def test_messages_are_frozen() -> None:
    odom = msgs.Odometry(x=1.0)
    with pytest.raises(AttributeError):
        odom.x = 2.0  # type: ignore[misc]


finite_or_infinite = st.floats(allow_nan=False, width=64)
float_lists = st.lists(finite_or_infinite, max_size=50)
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(
    stamp=finite_or_infinite,
    cmd_flags=int64,
    position=float_lists,
    velocity=float_lists,
    force=float_lists,
)
def test_actuator_state_round_trip(
    stamp: float, cmd_flags: int, position: list[float], velocity: list[float], force: list[float]
) -> None:
    msg = msgs.ActuatorState(stamp=stamp, cmd_flags=cmd_flags, position=position, velocity=velocity, force=force)
    assert msgs.decode(msgs.encode(msg), msgs.ActuatorState) == msg


@given(stamp=finite_or_infinite, data=float_lists, element=st.lists(int64, max_size=50))
def test_fvector_state_round_trip(stamp: float, data: list[float], element: list[int]) -> None:
    msg = msgs.FVectorState(stamp=stamp, data=data, element=element)
    back = msgs.decode(msgs.encode(msg), msgs.FVectorState)
    assert back == msg
    assert all(type(e) is int for e in back.element)


@given(
    stamp=finite_or_infinite,
    arrival=finite_or_infinite,
    ranges=st.lists(st.one_of(finite_or_infinite, st.just(-1.0), st.just(1e300), st.just(-0.0)), max_size=400),
    angles=float_lists,
    count=st.integers(min_value=0, max_value=10_000),
    max_range=finite_or_infinite,
)
def test_laser_scan_round_trip(
    stamp: float, arrival: float, ranges: list[float], angles: list[float], count: int, max_range: float
) -> None:
    msg = msgs.LaserScan(stamp=stamp, arrival=arrival, ranges=ranges, angles=angles, count=count, max_range=max_range)
    back = msgs.decode(msgs.encode(msg), msgs.LaserScan)
    assert back == msg
    # bit for bit, sign of zero included
    assert [math.copysign(1.0, r) for r in back.ranges] == [math.copysign(1.0, r) for r in ranges]


def test_nan_round_trips_as_nan() -> None:
    msg = msgs.LaserScan(ranges=[1.0, math.nan, -1.0], max_range=math.nan)
    back = msgs.decode(msgs.encode(msg), msgs.LaserScan)
    assert back.ranges[0] == 1.0 and back.ranges[2] == -1.0
    assert math.isnan(back.ranges[1])
    assert math.isnan(back.max_range)


@given(data=st.binary(max_size=200))
def test_decoding_arbitrary_bytes_raises_only_decode_error(data: bytes) -> None:
    try:
        value = msgs.decode(data, msgs.LaserScan)
    except DecodeError as err:
        assert "LaserScan" in str(err)
    else:
        assert type(value) is msgs.LaserScan


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"\x00garbage", "Expected `object`"),
        (b"\xc1", "malformed"),
        (msgs.encode(msgs.Odometry(x=2.0)) + b"junk", "trailing"),
        (msgspec.msgpack.encode({"type": "Odometry", "x": "far"}), "$.x"),
        (msgspec.msgpack.encode({"type": "Odometry", "v": [1.0]}), "$.v"),
    ],
    ids=["empty", "garbage", "bad-opcode", "trailing-bytes", "string-for-float", "list-for-float"],
)
def test_garbage_raises_decode_error_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        msgs.decode(data, msgs.Odometry)
    text = str(info.value)
    assert "Odometry" in text
    assert reason in text
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, PlutoError)


def test_a_message_of_another_type_raises_decode_error_naming_both() -> None:
    data = msgs.encode(msgs.Odometry(x=1.0))
    with pytest.raises(DecodeError) as info:
        msgs.decode(data, msgs.LaserScan)
    assert "LaserScan" in str(info.value)
    assert "Odometry" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [b"\x80", msgspec.msgpack.encode({"data": [1.0, 2.0], "element": [3]})],
    ids=["empty-map", "untagged-fvector"],
)
def test_bytes_without_the_type_tag_are_rejected(data: bytes) -> None:
    # Regression: decoding into one concrete tagged Struct treats the tag as optional, so these once decoded as an
    # all-default Odometry.
    with pytest.raises(DecodeError):
        msgs.decode(data, msgs.Odometry)


def _properties(cls: type[msgs.Message]) -> dict[str, Any]:
    schema = msgs.schema_of(cls)
    ref = schema["$ref"].rsplit("/", 1)[1]
    assert ref == cls.__name__
    return schema["$defs"][ref]["properties"]  # type: ignore[no-any-return]


def _mentions_unit(text: str, unit: str) -> bool:
    return re.search(rf"(?<![\w/·]){re.escape(unit)}(?![\w/²])", text) is not None


@pytest.mark.parametrize(
    ("cls", "field", "unit"),
    [
        (msgs.LaserScan, "ranges", "m"),
        (msgs.LaserScan, "angles", "rad"),
        (msgs.LaserScan, "stamp", "s"),
        (msgs.Odometry, "x", "m"),
        (msgs.Odometry, "v", "m/s"),
        (msgs.Odometry, "omega", "rad/s"),
        (msgs.Power, "voltage", "V"),
        (msgs.DmuRaw, "accelerations", "m/s²"),
        (msgs.SonarScan, "max_range", "m"),
        (msgs.PoseEstimate, "pose", "rad"),
    ],
)
def test_schema_field_descriptions_state_units(cls: type[msgs.Message], field: str, unit: str) -> None:
    description = _properties(cls)[field]["description"]
    assert _mentions_unit(description, unit), description


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_schema_is_json_with_the_type_tag_and_described_float_fields(name: str) -> None:
    cls = msgs.message_type(name)
    schema = msgs.schema_of(cls)
    json.dumps(schema)  # storable beside the data
    props = _properties(cls)
    assert props["type"] == {"enum": [name]}
    assert set(props) == {"type", *cls.__struct_fields__}
    for field, prop in props.items():
        is_float = prop.get("type") == "number" or prop.get("items", {}).get("type") == "number"
        if is_float:
            assert prop.get("description"), f"{name}.{field} has no description (and so no unit)"


def test_message_type_returns_the_class() -> None:
    assert msgs.message_type("LaserScan") is msgs.LaserScan
    assert msgs.message_types()["Odometry"] is msgs.Odometry


def test_message_types_is_a_copy() -> None:
    msgs.message_types().clear()
    assert "Odometry" in msgs.message_types()


def test_unknown_message_type_raises_key_error_naming_the_known_ones() -> None:
    with pytest.raises(KeyError) as info:
        msgs.message_type("Nope")
    text = str(info.value)
    assert "Nope" in text
    for known in msgs.message_types():
        assert known in text
