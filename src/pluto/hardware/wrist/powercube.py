"""The Amtec/Schunk PowerCube "M5" protocol over CAN, sans-I/O: the subset a pan/tilt unit (PW-70) needs.

    codec = PowerCubeCodec(role="host")               # the host decodes what the modules answer
    bus.send(to_message(codec.encode(SetMotion(1, FRAMP_MODE, 0.5))))
    codec.receive_message(bus.recv(0.01))             # anything with arbitration_id, data, is_error_frame
    while (event := codec.next_event()) is not NEED_DATA:
        handle(event)                                 # ParameterValue, Ack, MotionAck, BusError

``role="module"`` decodes what a host sends (:class:`Reset`, :class:`Home`, :class:`Halt`, :class:`SetParameter`,
:class:`GetParameter`, :class:`SetMotion`), for an emulator of the modules.

The subset implemented (every frame a CAN 2.0A frame with an 11-bit identifier; ``id`` is the module's bus address,
1..31):

===================  ==================  ===============================================================
identifier           direction           data bytes
===================  ==================  ===============================================================
0x0E0 + id (PUT)     host -> module      ``00`` RESET (clears the error and halted states),
                                         ``01`` HOME, ``02`` HALT (emergency stop, latched until RESET);
                                         ``08 pp ff ff ff ff`` SET_EXTENDED parameter pp = float32;
                                         ``0B mm ff ff ff ff`` SET_MOTION, motion mode mm, float32 argument
0x0C0 + id (GET)     host -> module      ``0A pp`` GET_EXTENDED parameter pp
0x100 (ALL)          host -> all         ``00`` / ``01`` / ``02`` reset, home, halt every module (a module
                                         also takes them with a second byte, ``02 00``, as libm5api sends them)
0x0A0 + id (ACK)     module -> host      ``cc 64`` acknowledge of RESET/HOME/HALT cc (``cc`` alone accepted);
                                         ``08 pp 64`` SET_EXTENDED acknowledged;
                                         ``0A pp vv vv vv vv`` the parameter's value (float32 or uint32);
                                         ``0B mm 64`` SET_MOTION acknowledged (modes 4..13);
                                         ``0B mm ff ff ff ff ss dd`` extended acknowledge (modes 14..23):
                                         actual position float32, short state ss, digital I/O dd
===================  ==================  ===============================================================

Multi-byte values are little-endian (IEEE-754 float32 for positions in rad, velocities in rad/s, accelerations in
rad/s²; uint32 for the state word). Parameters used here: CUBE_STATE 0x27 (uint32 state word), ACT_POS 0x3C,
ACT_VEL 0x41, MIN_POS 0x45, MAX_POS 0x46, MAX_VEL 0x48, MAX_ACC 0x4A, TARGET_VEL 0x4F, TARGET_ACC 0x50 (float32).
Motion modes: FRAMP_MODE 4 (ramp to a position with TARGET_VEL and TARGET_ACC), FVEL_MODE 7 (velocity),
FRAMP_ACK 14 and FVEL_ACK 17 (the same, with the extended acknowledge). State word bits: ERROR 0x1, HOME_OK 0x2,
HALTED 0x4, POWERFAULT 0x8, TOW_ERROR 0x10, COMM_ERROR 0x20, BRAKE_ACTIVE 0x200, MOTION 0x800, RAMP_ACC 0x1000,
RAMP_STEADY 0x2000, RAMP_DEC 0x4000, RAMP_END 0x8000, BEYOND_HARD 0x2000000, BEYOND_SOFT 0x4000000. Short state of
an extended acknowledge: NOT_OK 0x01 (error, or not homed, or halted), SWR 0x02, SW1 0x04, SW2 0x08, MOTION 0x10,
RAMP_END 0x20.

Where the facts come from: the identifiers, command, parameter and motion-mode numbers, the state bits and the frame
layouts are those of Amtec's PowerCube documentation as transcribed in the public headers of the users of these
modules: the ``PCubeProtocol.hpp`` and ``Cube.cpp`` of RobWork's hardware layer (University of Southern Denmark),
whose acknowledges are ``[cmd]``, ``[0x0B, mode, 0x64]`` and ``[0x0B, mode, position, state, dio]``, and the
``powercube_defines.h`` and ``powercube_commands.c`` of KTH's ``dumbo_powercube_chain`` (requests to 0x0C0 + id for
GET_EXTENDED, to 0x0E0 + id for the rest, replies on 0x0A0 + id, ``0A pp value`` for a read). The ``0x64`` after a
SET_EXTENDED acknowledge follows the simple motion acknowledge (RobWork checks only its first two bytes). The
sources name no error identifier of their own: a module reports errors in its state word, which the host polls.

Errors on the bus itself come as SocketCAN error frames (``is_error_frame``; the class bits of ``linux/can/error.h``
in the identifier, e.g. CAN_ERR_BUSOFF 0x40): they are decoded as :class:`BusError`.
"""

# Strategy: CAN frames arrive whole and delimited, so unlike a byte-stream codec there is nothing to resynchronise:
# each frame is checked on its own (identifier, command byte, length, parameter, finite floats) and either becomes
# one event or is counted as malformed and dropped, with the reason kept for a log line. Frames with identifiers
# that belong neither to this role nor to one of the watched modules (other devices sharing the bus) are counted as
# foreign and skipped without a look at their data. The decode path is one dictionary look-up and one
# struct.unpack_from per frame. Events wait in a bounded queue; if the reader falls behind, the oldest are dropped
# and counted (the newest state matters, not history).

from __future__ import annotations

import math
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from pluto.codec import NEED_DATA, NeedData
from pluto.errors import PlutoError

__all__ = [
    "ACK_BASE",
    "ALL_ID",
    "GET_BASE",
    "NEED_DATA",
    "PUT_BASE",
    "Ack",
    "BusError",
    "CodecStatistics",
    "Frame",
    "GetParameter",
    "Halt",
    "Home",
    "MotionAck",
    "ParameterValue",
    "PowerCubeCodec",
    "PowerCubeError",
    "Reset",
    "SetMotion",
    "SetParameter",
]

# -- identifiers, commands, parameters, modes and state bits ---------------------------------------------------------

ACK_BASE: Final = 0x0A0
"""Replies of module ``id`` come on ``ACK_BASE + id``."""
GET_BASE: Final = 0x0C0
"""GET_EXTENDED requests to module ``id`` go to ``GET_BASE + id``."""
PUT_BASE: Final = 0x0E0
"""Every other request to module ``id`` goes to ``PUT_BASE + id``."""
ALL_ID: Final = 0x100
"""Requests to every module on the bus (reset, home, halt)."""
MAX_MODULE_ID: Final = 31
"""Module addresses are 1..31."""

CMD_RESET: Final = 0x00
CMD_HOME: Final = 0x01
CMD_HALT: Final = 0x02
CMD_SET_EXTENDED: Final = 0x08
CMD_GET_EXTENDED: Final = 0x0A
CMD_SET_MOTION: Final = 0x0B
ACK_OK: Final = 0x64
"""The byte that ends a simple acknowledge."""

PARAM_CUBE_STATE: Final = 0x27
PARAM_ACT_POS: Final = 0x3C
PARAM_ACT_VEL: Final = 0x41
PARAM_MIN_POS: Final = 0x45
PARAM_MAX_POS: Final = 0x46
PARAM_MAX_VEL: Final = 0x48
PARAM_MAX_ACC: Final = 0x4A
PARAM_TARGET_VEL: Final = 0x4F
PARAM_TARGET_ACC: Final = 0x50
FLOAT_PARAMS: Final = frozenset(
    {
        PARAM_ACT_POS,
        PARAM_ACT_VEL,
        PARAM_MIN_POS,
        PARAM_MAX_POS,
        PARAM_MAX_VEL,
        PARAM_MAX_ACC,
        PARAM_TARGET_VEL,
        PARAM_TARGET_ACC,
    }
)
"""The float32 parameters of the subset."""
UINT32_PARAMS: Final = frozenset({PARAM_CUBE_STATE})
"""The uint32 parameters of the subset."""
WRITABLE_PARAMS: Final = frozenset(
    {PARAM_MIN_POS, PARAM_MAX_POS, PARAM_MAX_VEL, PARAM_MAX_ACC, PARAM_TARGET_VEL, PARAM_TARGET_ACC}
)
"""The parameters SET_EXTENDED may set."""

FRAMP_MODE: Final = 0x04
FVEL_MODE: Final = 0x07
FRAMP_ACK: Final = 0x0E
FVEL_ACK: Final = 0x11
MOTION_MODES: Final = frozenset({FRAMP_MODE, FVEL_MODE, FRAMP_ACK, FVEL_ACK})
"""The motion modes of the subset."""
EXTENDED_ACK_MODES: Final = frozenset({FRAMP_ACK, FVEL_ACK})
"""Motion modes acknowledged with the position and the short state."""

STATE_ERROR: Final = 0x00000001
STATE_HOME_OK: Final = 0x00000002
STATE_HALTED: Final = 0x00000004
STATE_POWERFAULT: Final = 0x00000008
STATE_TOW_ERROR: Final = 0x00000010
STATE_COMM_ERROR: Final = 0x00000020
STATE_BRAKE_ACTIVE: Final = 0x00000200
STATE_MOTION: Final = 0x00000800
STATE_RAMP_ACC: Final = 0x00001000
STATE_RAMP_STEADY: Final = 0x00002000
STATE_RAMP_DEC: Final = 0x00004000
STATE_RAMP_END: Final = 0x00008000
STATE_BEYOND_HARD: Final = 0x02000000
STATE_BEYOND_SOFT: Final = 0x04000000

SHORT_NOT_OK: Final = 0x01
SHORT_MOTION: Final = 0x10
SHORT_RAMP_END: Final = 0x20

CAN_ERR_BUSOFF: Final = 0x00000040
"""SocketCAN error class: the controller went bus-off (``linux/can/error.h``)."""
CAN_ERR_RESTARTED: Final = 0x00000100
"""SocketCAN error class: the controller restarted after bus-off."""

_FLOAT = struct.Struct("<f")
_UINT32 = struct.Struct("<I")
_POS_STATE = struct.Struct("<fBB")
_MAX_EVENTS = 256


class PowerCubeError(PlutoError, ValueError):
    """A request the codec refuses to encode (a module address, parameter or value out of the protocol)."""


# -- frames and events ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One CAN frame: an 11-bit identifier and 0..8 data bytes."""

    arbitration_id: int
    data: bytes


class CanFrameLike(Protocol):
    """What the codec reads of a received frame (a ``can.Message`` is one)."""

    @property
    def arbitration_id(self) -> int: ...
    @property
    def data(self) -> bytes | bytearray: ...
    @property
    def is_error_frame(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Reset:
    """RESET: clear the error and halted states (module ``module``; 0 = every module, on ALL_ID)."""

    module: int


@dataclass(frozen=True, slots=True)
class Home:
    """HOME: run the homing procedure."""

    module: int


@dataclass(frozen=True, slots=True)
class Halt:
    """HALT: stop at once; the module stays halted until a RESET."""

    module: int


@dataclass(frozen=True, slots=True)
class SetParameter:
    """SET_EXTENDED: set a float32 parameter (rad, rad/s, rad/s²)."""

    module: int
    param: int
    value: float


@dataclass(frozen=True, slots=True)
class GetParameter:
    """GET_EXTENDED: ask for a parameter."""

    module: int
    param: int


@dataclass(frozen=True, slots=True)
class SetMotion:
    """SET_MOTION: ``mode`` with its float32 argument (FRAMP: target position rad; FVEL: velocity rad/s)."""

    module: int
    mode: int
    value: float


Request = Reset | Home | Halt | SetParameter | GetParameter | SetMotion
"""What a host sends."""


@dataclass(frozen=True, slots=True)
class Ack:
    """A simple acknowledge: of RESET/HOME/HALT (``param`` 0), of SET_EXTENDED (``param`` the parameter) or of a
    SET_MOTION with a simple acknowledge (``param`` the motion mode)."""

    module: int
    command: int
    param: int = 0


@dataclass(frozen=True, slots=True)
class ParameterValue:
    """A GET_EXTENDED reply: float for the float parameters, int for the state word."""

    module: int
    param: int
    value: float | int


@dataclass(frozen=True, slots=True)
class MotionAck:
    """The extended acknowledge of a SET_MOTION: the actual position (rad), the short state and the digital I/O."""

    module: int
    mode: int
    position: float
    short_state: int
    dio: int


@dataclass(frozen=True, slots=True)
class BusError:
    """A SocketCAN error frame: ``flags`` are its error-class bits (CAN_ERR_BUSOFF, ...)."""

    flags: int

    @property
    def bus_off(self) -> bool:
        return bool(self.flags & CAN_ERR_BUSOFF)


Reply = Ack | ParameterValue | MotionAck | BusError
"""What a module (or the bus) sends to a host."""
Event = Request | Reply


@dataclass(frozen=True, slots=True)
class CodecStatistics:
    """Counters of the frames seen.

    Attributes:
        frames: frames received (error frames included).
        events: frames decoded into events.
        malformed: frames for a watched identifier that did not decode (bad length, command, parameter, value).
        foreign: frames of other identifiers (other devices), skipped.
        error_frames: SocketCAN error frames.
        dropped_events: events dropped because nobody read them (the queue holds 256).
    """

    frames: int = 0
    events: int = 0
    malformed: int = 0
    foreign: int = 0
    error_frames: int = 0
    dropped_events: int = 0


# -- encoding ------------------------------------------------------------------------------------------------------


def _check_module(module: int, *, allow_all: bool = False) -> None:
    if not (1 <= module <= MAX_MODULE_ID or (allow_all and module == 0)):
        raise PowerCubeError(f"module address must be 1..{MAX_MODULE_ID}, got {module}")


def _float(value: float, what: str) -> bytes:
    if not math.isfinite(value):
        raise PowerCubeError(f"{what} must be finite, got {value}")
    try:
        return _FLOAT.pack(value)
    except OverflowError as err:
        raise PowerCubeError(f"{what} does not fit a float32: {value}") from err


def encode_request(request: Request) -> Frame:
    """The frame of a host's request.

    Raises:
        PowerCubeError: a module address outside 1..31 (0 = all, for reset, home and halt only), a parameter or
            motion mode outside the subset, or a value that is not a finite float32.
    """
    if isinstance(request, Reset | Home | Halt):
        command = {Reset: CMD_RESET, Home: CMD_HOME, Halt: CMD_HALT}[type(request)]
        _check_module(request.module, allow_all=True)
        ident = ALL_ID if request.module == 0 else PUT_BASE + request.module
        return Frame(ident, bytes((command,)))
    _check_module(request.module)
    if isinstance(request, SetParameter):
        if request.param not in WRITABLE_PARAMS:
            raise PowerCubeError(f"parameter 0x{request.param:02X} cannot be set (not in the subset)")
        value = _float(request.value, f"parameter 0x{request.param:02X}")
        return Frame(PUT_BASE + request.module, bytes((CMD_SET_EXTENDED, request.param)) + value)
    if isinstance(request, GetParameter):
        if request.param not in FLOAT_PARAMS and request.param not in UINT32_PARAMS:
            raise PowerCubeError(f"parameter 0x{request.param:02X} is not in the subset")
        return Frame(GET_BASE + request.module, bytes((CMD_GET_EXTENDED, request.param)))
    if request.mode not in MOTION_MODES:
        raise PowerCubeError(f"motion mode {request.mode} is not in the subset")
    value = _float(request.value, "motion argument")
    return Frame(PUT_BASE + request.module, bytes((CMD_SET_MOTION, request.mode)) + value)


def encode_reply(reply: Ack | ParameterValue | MotionAck) -> Frame:
    """The frame of a module's reply (for an emulator).

    Raises:
        PowerCubeError: a module address, parameter or mode outside the subset, or a value that does not fit.
    """
    _check_module(reply.module)
    ident = ACK_BASE + reply.module
    if isinstance(reply, Ack):
        if reply.command in (CMD_RESET, CMD_HOME, CMD_HALT):
            return Frame(ident, bytes((reply.command, ACK_OK)))
        if reply.command not in (CMD_SET_EXTENDED, CMD_SET_MOTION):
            raise PowerCubeError(f"command 0x{reply.command:02X} has no simple acknowledge")
        return Frame(ident, bytes((reply.command, reply.param, ACK_OK)))
    if isinstance(reply, ParameterValue):
        if reply.param in UINT32_PARAMS:
            if not isinstance(reply.value, int) or not 0 <= reply.value <= 0xFFFFFFFF:
                raise PowerCubeError(f"parameter 0x{reply.param:02X} is a uint32, got {reply.value!r}")
            data = _UINT32.pack(reply.value)
        elif reply.param in FLOAT_PARAMS:
            data = _float(float(reply.value), f"parameter 0x{reply.param:02X}")
        else:
            raise PowerCubeError(f"parameter 0x{reply.param:02X} is not in the subset")
        return Frame(ident, bytes((CMD_GET_EXTENDED, reply.param)) + data)
    if reply.mode not in EXTENDED_ACK_MODES:
        raise PowerCubeError(f"motion mode {reply.mode} has no extended acknowledge")
    data = _float(reply.position, "position") + bytes((reply.short_state & 0xFF, reply.dio & 0xFF))
    return Frame(ident, bytes((CMD_SET_MOTION, reply.mode)) + data)


def short_state(state: int) -> int:
    """The short state of an extended acknowledge for the state word ``state``."""
    short = 0
    if state & (STATE_ERROR | STATE_HALTED) or not state & STATE_HOME_OK:
        short |= SHORT_NOT_OK
    if state & STATE_MOTION:
        short |= SHORT_MOTION
    if state & STATE_RAMP_END:
        short |= SHORT_RAMP_END
    return short


# -- decoding ------------------------------------------------------------------------------------------------------


class _Malformed(Exception):
    """A frame that does not decode (internal: counted, never raised out of the codec)."""


class PowerCubeCodec:
    """Decoder of PowerCube frames and encoder of the other side's, for the modules at ``modules``.

    Args:
        role: 'host' decodes the modules' replies (and error frames); 'module' decodes a host's requests.
        modules: the module addresses to watch; frames of other identifiers are counted as foreign. None: all 1..31.

    Raises:
        PowerCubeError: an unknown role or a module address outside 1..31.
    """

    def __init__(self, role: Literal["host", "module"] = "host", modules: Iterable[int] | None = None) -> None:
        if role not in ("host", "module"):
            raise PowerCubeError(f"role must be 'host' or 'module', not {role!r}")
        watched = tuple(modules) if modules is not None else tuple(range(1, MAX_MODULE_ID + 1))
        for module in watched:
            _check_module(module)
        self.role = role
        self.modules = watched
        # identifier -> (module, kind): one look-up tells whether a frame is ours and how to read it
        self._routes: dict[int, tuple[int, str]] = {}
        for module in watched:
            if role == "host":
                self._routes[ACK_BASE + module] = (module, "ack")
            else:
                self._routes[PUT_BASE + module] = (module, "put")
                self._routes[GET_BASE + module] = (module, "get")
        if role == "module":
            self._routes[ALL_ID] = (0, "all")
        self._events: deque[Event] = deque()
        self.last_error: str | None = None
        self._frames = self._decoded = self._malformed = self._foreign = self._error_frames = self._dropped = 0

    def statistics(self) -> CodecStatistics:
        """A snapshot of the counters."""
        return CodecStatistics(
            frames=self._frames,
            events=self._decoded,
            malformed=self._malformed,
            foreign=self._foreign,
            error_frames=self._error_frames,
            dropped_events=self._dropped,
        )

    def encode(self, message: Request | Ack | ParameterValue | MotionAck) -> Frame:
        """The frame of a request (host role) or of a reply (module role).

        Raises:
            PowerCubeError: as :func:`encode_request` / :func:`encode_reply`, or a message of the other role.
        """
        if self.role == "host":
            if isinstance(message, Ack | ParameterValue | MotionAck):
                raise PowerCubeError(f"a host does not send {type(message).__name__}")
            return encode_request(message)
        if not isinstance(message, Ack | ParameterValue | MotionAck):
            raise PowerCubeError(f"a module does not send {type(message).__name__}")
        return encode_reply(message)

    def receive_message(self, message: CanFrameLike | None) -> None:
        """Feed one received frame (a ``can.Message`` or alike); None (a receive timeout) is ignored."""
        if message is None:
            return
        if message.is_error_frame:
            self._frames += 1
            self._error_frames += 1
            if self.role == "host":
                self._push(BusError(message.arbitration_id))
            return
        self.receive_frame(message.arbitration_id, bytes(message.data))

    def receive_frame(self, arbitration_id: int, data: bytes) -> None:
        """Feed one data frame: it becomes one event, or is counted (malformed or foreign) and dropped."""
        self._frames += 1
        route = self._routes.get(arbitration_id)
        if route is None:
            self._foreign += 1
            return
        module, kind = route
        try:
            event = self._decode(module, kind, data)
        except _Malformed as err:
            self._malformed += 1
            self.last_error = f"frame 0x{arbitration_id:03X} [{data.hex(' ')}]: {err}"
            return
        self._push(event)

    def _push(self, event: Event) -> None:
        self._decoded += 1
        if len(self._events) >= _MAX_EVENTS:
            self._events.popleft()
            self._dropped += 1
        self._events.append(event)

    def next_event(self) -> Event | Literal[NeedData.NEED_DATA]:
        """The next decoded event, or NEED_DATA."""
        return self._events.popleft() if self._events else NEED_DATA

    def events(self) -> Iterator[Event]:
        """Every event waiting now."""
        while self._events:
            yield self._events.popleft()

    def _decode(self, module: int, kind: str, data: bytes) -> Event:
        size = len(data)
        if size == 0:
            raise _Malformed("no data")
        command = data[0]
        if kind == "ack":
            return self._decode_reply(module, command, data, size)
        if kind == "all":  # one byte, or two as Schunk's M5 library sends them (the second byte 0)
            if size > 2 or command not in (CMD_RESET, CMD_HOME, CMD_HALT):
                raise _Malformed("not a reset, home or halt to all modules")
            return (Reset, Home, Halt)[command](0)
        if kind == "get":
            if command != CMD_GET_EXTENDED or size != 2:
                raise _Malformed("a GET identifier carries GET_EXTENDED with a parameter only")
            if data[1] not in FLOAT_PARAMS and data[1] not in UINT32_PARAMS:
                raise _Malformed(f"unknown parameter 0x{data[1]:02X}")
            return GetParameter(module, data[1])
        if command in (CMD_RESET, CMD_HOME, CMD_HALT):
            if size != 1:
                raise _Malformed(f"command 0x{command:02X} takes no argument")
            return (Reset, Home, Halt)[command](module)
        if command == CMD_SET_EXTENDED:
            if size != 6 or data[1] not in WRITABLE_PARAMS:
                raise _Malformed("SET_EXTENDED needs a writable parameter and a float32")
            return SetParameter(module, data[1], self._finite(data, 2))
        if command == CMD_SET_MOTION:
            if size != 6 or data[1] not in MOTION_MODES:
                raise _Malformed("SET_MOTION needs a known mode and a float32")
            return SetMotion(module, data[1], self._finite(data, 2))
        raise _Malformed(f"unknown command 0x{command:02X}")

    def _decode_reply(self, module: int, command: int, data: bytes, size: int) -> Reply:
        if command == CMD_GET_EXTENDED:
            if size != 6:
                raise _Malformed(f"a parameter value has 6 bytes, not {size}")
            param = data[1]
            if param in FLOAT_PARAMS:
                return ParameterValue(module, param, self._finite(data, 2))
            if param in UINT32_PARAMS:
                return ParameterValue(module, param, _UINT32.unpack_from(data, 2)[0])
            raise _Malformed(f"unknown parameter 0x{param:02X}")
        if command == CMD_SET_MOTION:
            if size == 8 and data[1] in EXTENDED_ACK_MODES:
                position, state, dio = _POS_STATE.unpack_from(data, 2)
                if not math.isfinite(position):
                    raise _Malformed("position is not finite")
                return MotionAck(module, data[1], position, state, dio)
            if size == 3 and data[1] in MOTION_MODES and data[2] == ACK_OK:
                return Ack(module, command, data[1])
            raise _Malformed("not a motion acknowledge")
        if command == CMD_SET_EXTENDED:
            if size == 3 and data[1] in WRITABLE_PARAMS and data[2] == ACK_OK:
                return Ack(module, command, data[1])
            raise _Malformed("not a SET_EXTENDED acknowledge")
        if command in (CMD_RESET, CMD_HOME, CMD_HALT) and (size == 1 or (size == 2 and data[1] == ACK_OK)):
            return Ack(module, command)
        raise _Malformed(f"unknown reply 0x{command:02X} of {size} bytes")

    @staticmethod
    def _finite(data: bytes, offset: int) -> float:
        value: float = _FLOAT.unpack_from(data, offset)[0]
        if not math.isfinite(value):
            raise _Malformed("value is not finite")
        return value
