"""Value types carried on the bus.

Every message is a frozen msgspec Struct tagged with its type name, encoded as MessagePack. Units are SI (m, rad,
s, m/s, rad/s, V) and are stated in each field's description, which also lands in the JSON Schema that
:func:`schema_of` returns (so a recorder can store it beside the data).

The command and status vectors keep the shape of the original's CORBA types (docs/design.md): ``ActuatorState`` (time
stamp, ``cmdFlags``, position[], velocity[], force[]) and ``FVectorState`` (time stamp, data[], element[]), because the
meaning of their elements is defined per interface by the robot's documentation.

Decoding is strict: :func:`decode` raises :class:`~pluto.errors.DecodeError` with the reason for any bytes that are
not a valid message of the expected type.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar, Union

import msgspec

from pluto.errors import DecodeError

__all__ = [
    "ActuatorState",
    "Contact",
    "DmuRaw",
    "DmuState",
    "FVectorState",
    "GpsFix",
    "Heartbeat",
    "LaserScan",
    "Message",
    "ModuleInfo",
    "Odometry",
    "ParameterInfo",
    "PoseEstimate",
    "Power",
    "ReadStats",
    "ScanTiming",
    "SimTime",
    "SonarScan",
    "decode",
    "encode",
    "message_type",
    "message_types",
    "schema_of",
]


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


Stamp = Annotated[float, _doc("Time the value refers to, s since the epoch of the robot's Clock.")]
FloatVec = list[float]


class Message(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Base of every bus message; the MessagePack form carries the type name under ``type``."""


# ---------------------------------------------------------------------------------------------------------------
# Command and status vectors of the movement chain and of simple devices (shapes from the original, docs/design.md).


class ActuatorState(Message, frozen=True):
    """A command or the state of an actuator (base, wrist, arm, drive, avoid and motion links).

    The meaning of ``cmd_flags`` and of each vector element is defined by the interface it is written to.
    """

    stamp: Stamp = 0.0
    cmd_flags: Annotated[int, _doc("Command flags (the original cmdFlags); meaning set per interface.")] = 0
    position: Annotated[FloatVec, _doc("Positions: m or rad, per interface.")] = msgspec.field(default_factory=list)
    velocity: Annotated[FloatVec, _doc("Velocities: m/s or rad/s, per interface.")] = msgspec.field(
        default_factory=list
    )
    force: Annotated[FloatVec, _doc("Forces, accelerations or extra arguments, per interface.")] = msgspec.field(
        default_factory=list
    )
    lease: Annotated[
        float,
        _doc(
            "A command's lease, s: it holds only while its commander writes it again within this long (a module "
            "that renews its command every step); a receiver that hears nothing for longer stops the robot and "
            "waits for the renewal. 0: it holds until replaced (a command given once, by hand)."
        ),
    ] = 0.0


class FVectorState(Message, frozen=True):
    """A status vector: floating-point ``data`` and integer ``element`` codes, meaning set per interface."""

    stamp: Stamp = 0.0
    data: Annotated[FloatVec, _doc("Floating-point values, units per interface.")] = msgspec.field(default_factory=list)
    element: Annotated[list[int], _doc("Integer status codes, meaning per interface.")] = msgspec.field(
        default_factory=list
    )


# ---------------------------------------------------------------------------------------------------------------
# Pose and odometry.


class PoseEstimate(Message, frozen=True):
    """A pose with its covariance, as written by the localization service.

    The pose is (x, y, z, θ, φ, ψ), optionally followed by wrist pan and tilt (8-D): θ about z (up), then φ about
    y (left), then ψ about x (forward); (0, 0, 0) is the robot flat, facing +x.
    """

    stamp: Stamp = 0.0
    pose: Annotated[FloatVec, _doc("x, y, z in m; θ, φ, ψ in rad; optional wrist pan, tilt in rad.")] = msgspec.field(
        default_factory=lambda: [0.0] * 6
    )
    covariance: Annotated[FloatVec, _doc("Row-major covariance of (x, y, θ): 9 values, m², m·rad, rad².")] = (
        msgspec.field(default_factory=lambda: [0.0] * 9)
    )
    cmd_flags: Annotated[
        int, _doc("The setter: 0 nobody, 1 pose module, 2 and 3 SLAM; < 0 on a post means a robot pose.")
    ] = 0


class Odometry(Message, frozen=True):
    """Odometry of the base: planar pose integrated from the wheels and the current velocities."""

    stamp: Stamp = 0.0
    x: Annotated[float, _doc("Position along the odometry frame's x axis, m.")] = 0.0
    y: Annotated[float, _doc("Position along the odometry frame's y axis, m.")] = 0.0
    theta: Annotated[float, _doc("Heading, rad, counter-clockwise from x; continuous (not wrapped).")] = 0.0
    v: Annotated[float, _doc("Linear velocity, m/s, forward positive.")] = 0.0
    omega: Annotated[float, _doc("Angular velocity, rad/s, counter-clockwise positive.")] = 0.0


# ---------------------------------------------------------------------------------------------------------------
# Base sensors.


class SonarScan(Message, frozen=True):
    """One reading of the sonar ring."""

    stamp: Stamp = 0.0
    ranges: Annotated[FloatVec, _doc("Range per transducer, m; max_range when nothing is seen.")] = msgspec.field(
        default_factory=list
    )
    angles: Annotated[FloatVec, _doc("Bearing of each transducer in the robot frame, rad.")] = msgspec.field(
        default_factory=list
    )
    max_range: Annotated[float, _doc("Largest range the sonar reports, m.")] = 8.0


class Contact(Message, frozen=True):
    """Bumpers and motor stall of the base."""

    stamp: Stamp = 0.0
    front: Annotated[bool, _doc("A front bumper is pressed.")] = False
    rear: Annotated[bool, _doc("A rear bumper is pressed.")] = False
    stall: Annotated[bool, _doc("The motors are stalled.")] = False


class Power(Message, frozen=True):
    """Battery state."""

    stamp: Stamp = 0.0
    voltage: Annotated[float, _doc("Battery voltage, V.")] = 0.0
    charge: Annotated[float, _doc("Estimated charge left, fraction 0..1.")] = 1.0
    charging: Annotated[bool, _doc("The robot is on its charger.")] = False


# ---------------------------------------------------------------------------------------------------------------
# Laser.


class LaserScan(Message, frozen=True):
    """A laser range scan.

    ``stamp`` is when the scan was taken (the centre of the sweep on ``Sick/Scan_mm``; the arrival on the
    old-compatible ``Sick/Scan``), ``arrival`` is when its last byte arrived at the computer.
    """

    stamp: Stamp = 0.0
    arrival: Annotated[float, _doc("Time the scan arrived at the computer, s.")] = 0.0
    ranges: Annotated[FloatVec, _doc("Range per beam, m; -1 when the scanner reported an error.")] = msgspec.field(
        default_factory=list
    )
    angles: Annotated[FloatVec, _doc("Bearing of each beam in the laser frame, rad, counter-clockwise.")] = (
        msgspec.field(default_factory=list)
    )
    count: Annotated[int, _doc("Number of valid beams in this scan.")] = 0
    max_range: Annotated[float, _doc("Largest range the scanner measures, m.")] = 80.0


class ScanTiming(Message, frozen=True):
    """When the latest scan was taken, and how many points it has (``Sick/Timing``)."""

    stamp: Stamp = 0.0
    count: Annotated[int, _doc("Number of points in the scan.")] = 0


# ---------------------------------------------------------------------------------------------------------------
# Inertial unit and GPS.


class DmuRaw(Message, frozen=True):
    """Raw data of the inertial unit, z up, x forward, y left."""

    stamp: Stamp = 0.0
    phi: Annotated[float, _doc("Pitch about y, rad (filtered in the sensor to agree with gravity).")] = 0.0
    psi: Annotated[float, _doc("Roll about x, rad (filtered in the sensor to agree with gravity).")] = 0.0
    rates: Annotated[FloatVec, _doc("Angular rates about x, y, z, rad/s.")] = msgspec.field(
        default_factory=lambda: [0.0, 0.0, 0.0]
    )
    accelerations: Annotated[FloatVec, _doc("Accelerations along x, y, z, m/s².")] = msgspec.field(
        default_factory=lambda: [0.0, 0.0, 0.0]
    )


class DmuState(Message, frozen=True):
    """Filtered inertial state: heading integrated from the vertical rate, pitch and roll, filtered rates."""

    stamp: Stamp = 0.0
    theta: Annotated[float, _doc("Heading integrated about the vertical since start, rad (not wrapped).")] = 0.0
    phi: Annotated[float, _doc("Pitch about y, rad.")] = 0.0
    psi: Annotated[float, _doc("Roll about x, rad.")] = 0.0
    rates: Annotated[FloatVec, _doc("Low-pass filtered angular rates about x, y, z, rad/s.")] = msgspec.field(
        default_factory=lambda: [0.0, 0.0, 0.0]
    )
    accelerations: Annotated[FloatVec, _doc("Low-pass filtered accelerations, m/s².")] = msgspec.field(
        default_factory=lambda: [0.0, 0.0, 0.0]
    )


class GpsFix(Message, frozen=True):
    """A GPS fix, also projected on a local metric grid."""

    stamp: Stamp = 0.0
    latitude: Annotated[float, _doc("Latitude, degrees north (WGS84).")] = 0.0
    longitude: Annotated[float, _doc("Longitude, degrees east (WGS84).")] = 0.0
    altitude: Annotated[float, _doc("Altitude above mean sea level, m.")] = 0.0
    x: Annotated[float, _doc("East of the local grid origin, m.")] = 0.0
    y: Annotated[float, _doc("North of the local grid origin, m.")] = 0.0
    satellites: Annotated[int, _doc("Satellites used; > 5 wanted.")] = 0
    quality: Annotated[int, _doc("Fix quality: 0 none, 1 GPS, 2 differential (sub-metre).")] = 0
    hdop: Annotated[float, _doc("Horizontal dilution of precision.")] = 0.0


# ---------------------------------------------------------------------------------------------------------------
# Runtime.


class SimTime(Message, frozen=True):
    """The simulated time, published on ``Clock`` by a simulator or a log replay."""

    stamp: Stamp = 0.0
    rate: Annotated[float, _doc("Simulated seconds per wall-clock second (0: as fast as possible).")] = 1.0
    run: Annotated[int, _doc("Id of the simulation run; a new id means the clock restarted (0: unknown).")] = 0
    lockstep: Annotated[bool, _doc("Modules step in lock-step with the simulator's ticks.")] = False


class Heartbeat(Message, frozen=True):
    """A counter published by the heartbeat module (a liveness check of the whole bus)."""

    stamp: Stamp = 0.0
    seq: Annotated[int, _doc("Number of beats since the module started.")] = 0
    source: Annotated[str, _doc("Name of the module that beats.")] = ""


class InterfaceStats(msgspec.Struct, frozen=True, kw_only=True):
    """What a module has written to one interface."""

    name: str
    type: str
    count: int = 0
    rate_hz: Annotated[float, _doc("Recent write rate, Hz.")] = 0.0
    last_write: Annotated[float, _doc("Wall-clock time of the last write, s since 1970; 0 if never.")] = 0.0
    writer_id: Annotated[int, _doc("The writer's id, carried by each of its values (0: unknown).")] = 0


class ReadStats(msgspec.Struct, frozen=True, kw_only=True):
    """What a module has read from one interface."""

    name: str
    type: str
    count: Annotated[int, _doc("Values received.")] = 0
    writers: Annotated[list[int], _doc("Ids of the writers heard from in the last 10 s.")] = msgspec.field(
        default_factory=list
    )


class ParameterInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One parameter of a running module, as its ``list_parameters`` service describes it."""

    name: str
    type: Annotated[str, _doc("The parameter's Python type, as written in its Params class.")]
    value: Annotated[Any, _doc("The value in use now.")] = None
    default: Annotated[Any, _doc("The value when none is given.")] = None
    dynamic: Annotated[bool, _doc("It can be changed while the module runs (set_parameters).")] = False
    description: str = ""
    range: Annotated[
        str, _doc("The valid values of a number, as an interval ([0.1, 1000], (0, 3]; a list's: of each element).")
    ] = ""


class ModuleInfo(Message, frozen=True):
    """What MOM shows of a running module."""

    name: str
    pid: int = 0
    host: str = ""
    started: Annotated[float, _doc("Wall-clock start time, s since 1970.")] = 0.0
    active: Annotated[bool, _doc("The control thread is running (start_activity).")] = False
    provides: list[InterfaceStats] = msgspec.field(default_factory=list)
    requires: list[str] = msgspec.field(default_factory=list)
    dropped: Annotated[int, _doc("Messages received that could not be decoded, in all.")] = 0
    notes: Annotated[list[str], _doc("Remarks on the module's state (a lock-step's members, say).")] = msgspec.field(
        default_factory=list
    )
    reads: Annotated[list[ReadStats], _doc("The interfaces the module reads.")] = msgspec.field(default_factory=list)
    services: Annotated[list[str], _doc("The services the module serves (request/reply).")] = msgspec.field(
        default_factory=list
    )
    steps: Annotated[int, _doc("Control steps run since the module started.")] = 0
    step_running: Annotated[float, _doc("Wall seconds the current control step has been running; 0 between steps.")] = (
        0.0
    )
    step_overdue: Annotated[
        float,
        _doc(
            "Wall seconds a control step has been due without beginning (its clock reached the step's time or, in "
            "lock-step, a tick offered it); 0 when none waits."
        ),
    ] = 0.0
    step_age: Annotated[float, _doc("Wall seconds since the last control step ended; -1 before the first.")] = -1.0
    stopping: Annotated[bool, _doc("The module is stopping (pluto stop, shutdown): it is about to exit.")] = False


# ---------------------------------------------------------------------------------------------------------------
# Registry and codec.

M = TypeVar("M", bound=Message)

_TYPES: dict[str, type[Message]] = {
    cls.__name__: cls
    for cls in (
        ActuatorState,
        FVectorState,
        PoseEstimate,
        Odometry,
        SonarScan,
        Contact,
        Power,
        LaserScan,
        ScanTiming,
        DmuRaw,
        DmuState,
        GpsFix,
        SimTime,
        Heartbeat,
        ModuleInfo,
    )
}

_encoder = msgspec.msgpack.Encoder()
# One decoder for the union of every type: the tag is then required, and says which type it is.
_any_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(Union[tuple(_TYPES.values())])  # noqa: UP007


_any_list_decoder: msgspec.msgpack.Decoder[list[Any]] = msgspec.msgpack.Decoder(
    list[Union[tuple(_TYPES.values())]]  # type: ignore[misc]  # noqa: UP007
)


def message_types() -> dict[str, type[Message]]:
    """Return every registered message type by name."""
    return dict(_TYPES)


def message_type(name: str) -> type[Message]:
    """Return the message type called ``name``.

    Raises:
        KeyError: no message type has that name.
    """
    try:
        return _TYPES[name]
    except KeyError:
        raise KeyError(f"unknown message type {name!r}; known: {', '.join(sorted(_TYPES))}") from None


def schema_of(cls: type[Message]) -> dict[str, Any]:
    """Return the JSON Schema of a message type (units in the field descriptions)."""
    return msgspec.json.schema(cls)


def encode(msg: Message) -> bytes:
    """Encode a message as tagged MessagePack."""
    return _encoder.encode(msg)


def decode(data: bytes | memoryview, cls: type[M]) -> M:
    """Decode MessagePack bytes into a message of type ``cls``.

    The bytes must carry their type tag (so a message of another type, or an untagged map, is refused rather than
    read as a ``cls`` full of defaults).

    Raises:
        DecodeError: the bytes are not a valid ``cls`` (the message says why).
    """
    try:
        value = _any_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise DecodeError(f"not a valid {cls.__name__}: {err}") from err
    if not isinstance(value, cls):
        raise DecodeError(f"not a valid {cls.__name__}: got a {type(value).__name__}")
    return value


def decode_many(data: bytes | memoryview, cls: type[M]) -> list[M]:
    """Decode a MessagePack array of messages of type ``cls`` (a batch), each with its type tag.

    Raises:
        DecodeError: not an array, or one of its items is not a valid ``cls``.
    """
    try:
        values = _any_list_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise DecodeError(f"not a valid batch of {cls.__name__}: {err}") from err
    for value in values:
        if not isinstance(value, cls):
            raise DecodeError(f"not a valid batch of {cls.__name__}: holds a {type(value).__name__}")
    return values
