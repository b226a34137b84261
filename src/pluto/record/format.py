"""How Pluto logs lay bus messages out in an MCAP file.

Strategy: a log must open in the standard MCAP tools and viewers, so every channel carries its message type as a
JSON Schema (schema encoding ``jsonschema``, from :func:`pluto.msgs.schema_of`) and every message is JSON (message
encoding ``json``) with the message's fields and its ``type`` tag, the same fields as on the bus. One channel per
interface, its topic the interface name (``Sick/Scan_mm``); the schema is named ``pluto.msgs.<Type>``.

Times in the file are integer nanoseconds (MCAP's unit); inside Pluto they are float seconds. Each message has two:
the *robot's time* when the value was written on the bus (the simulated ``Clock`` when the robot ran on simulated
time, else the wall clock), which replay publishes as the ``Clock``, and the *wall-clock time* of the write (s since
1970), so a log of a simulated run also keeps its real pace. In the file:

- a recording (metadata ``log_time = "wall"``): MCAP's ``log_time`` is the wall-clock time, so viewers (Foxglove,
  ``mcap cat``) show the real date of a simulated run rather than 1970, and ``publish_time`` is the robot's time;
- a log without that entry (imports, and recordings of earlier versions): ``log_time`` is the robot's time and
  ``publish_time`` the wall-clock time.

Readers (:class:`~pluto.record.logfile.LogFile`) give both the same way whatever the file: ``log_time`` the robot's,
``publish_time`` the wall clock's. On the wall clock the two are the same. The message keeps its own ``stamp`` (the
robot's time of its data) as on the bus.

A metadata record named ``pluto`` holds the robot's name, the Pluto version, the start time and the time base.
JSON has no NaN or infinity: msgspec writes them as ``null``, and :func:`decode_message` reads a ``null`` number
back as NaN.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import msgspec

from pluto import msgs
from pluto.errors import PlutoError

__all__ = [
    "MESSAGE_ENCODING",
    "METADATA_NAME",
    "SCHEMA_ENCODING",
    "SCHEMA_PREFIX",
    "WALL_LOG_TIME",
    "LogError",
    "decode_message",
    "encode_message",
    "from_ns",
    "schema_bytes",
    "schema_name",
    "to_ns",
    "type_of_schema",
    "wall_log_time",
]

SCHEMA_ENCODING = "jsonschema"
MESSAGE_ENCODING = "json"
SCHEMA_PREFIX = "pluto.msgs."
METADATA_NAME = "pluto"
"""Name of the metadata record with the robot, Pluto version, start time and time base."""

WALL_LOG_TIME = {"log_time": "wall", "publish_time": "robot"}
"""Entries of the ``pluto`` metadata record of a file whose MCAP ``log_time`` is the wall clock and ``publish_time``
the robot's time (see the module docstring)."""


def wall_log_time(info: dict[str, str]) -> bool:
    """True if a file with this ``pluto`` metadata record has the wall clock as MCAP ``log_time``."""
    return info.get("log_time") == "wall"


class LogError(PlutoError):
    """A log file cannot be written or read; the message says which file and why."""


def to_ns(t: float) -> int:
    """Seconds to MCAP's integer nanoseconds.

    Raises:
        LogError: ``t`` is negative or not finite (MCAP times are unsigned).
    """
    if not math.isfinite(t) or t < 0.0:
        raise LogError(f"log times must be finite and >= 0 s, got {t}")
    return round(t * 1e9)


def from_ns(ns: int) -> float:
    """MCAP's integer nanoseconds to seconds."""
    return ns / 1e9


def schema_name(cls: type[msgs.Message]) -> str:
    """The MCAP schema name of a message type (``pluto.msgs.Odometry``)."""
    return SCHEMA_PREFIX + cls.__name__


def type_of_schema(name: str) -> type[msgs.Message] | None:
    """The message type a schema name stands for, or None for a schema Pluto does not know."""
    if not name.startswith(SCHEMA_PREFIX):
        return None
    return msgs.message_types().get(name.removeprefix(SCHEMA_PREFIX))


@functools.cache
def schema_bytes(cls: type[msgs.Message]) -> bytes:
    """The JSON Schema of a message type as stored in the file.

    The top level is the type's own object schema (rather than a ``$ref`` to it), which more viewers understand;
    definitions of nested types stay under ``$defs``.
    """
    schema: dict[str, Any] = dict(msgs.schema_of(cls))
    defs: dict[str, Any] = dict(schema.pop("$defs", {}))
    ref = schema.pop("$ref", None)
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**defs.pop(ref.removeprefix("#/$defs/")), **schema}
    if defs:
        schema["$defs"] = defs
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return msgspec.json.encode(schema)


_json_encoder = msgspec.json.Encoder()


def encode_message(msg: msgs.Message) -> bytes:
    """A message as the JSON stored in the file (its fields and its ``type`` tag)."""
    return _json_encoder.encode(msg)


@functools.cache
def _decoder(cls: type[msgs.Message]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(cls)


def _nulls_to_nan(value: Any) -> Any:
    if value is None:
        return math.nan
    if isinstance(value, list):
        return [_nulls_to_nan(v) for v in value]
    if isinstance(value, dict):
        return {k: _nulls_to_nan(v) for k, v in value.items()}
    return value


def decode_message(data: bytes | memoryview, cls: type[msgs.Message]) -> msgs.Message:
    """The message of type ``cls`` stored as ``data``.

    Raises:
        LogError: ``data`` is not a valid ``cls`` in JSON (the message says why).
    """
    try:
        value: msgs.Message = _decoder(cls).decode(data)
        return value
    except msgspec.ValidationError as err:
        # A non-finite float was written as null (no Pluto message has an optional field): read it back as NaN.
        try:
            raw = msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise LogError(f"not a valid {cls.__name__}: {err}") from err
        try:
            converted: msgs.Message = msgspec.convert(_nulls_to_nan(raw), cls)
            return converted
        except msgspec.ValidationError:
            raise LogError(f"not a valid {cls.__name__}: {err}") from err
    except msgspec.DecodeError as err:
        raise LogError(f"not a valid {cls.__name__}: {err}") from err
