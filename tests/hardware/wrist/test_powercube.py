"""The PowerCube codec byte by byte, against frames written from the protocol's tables (powercube.py's docstring).

float32 little-endian constants used below, from IEEE-754: 1.0 = 3F800000, 1.5 = 3FC00000, 0.5 = 3F000000,
0.25 = 3E800000, -0.5 = BF000000, 2.0 = 40000000, NaN = 7FC00000, +inf = 7F800000.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pluto.codec import NEED_DATA
from pluto.hardware.wrist import powercube as pc
from pluto.hardware.wrist.powercube import (
    Ack,
    BusError,
    Frame,
    GetParameter,
    Halt,
    Home,
    MotionAck,
    ParameterValue,
    PowerCubeCodec,
    PowerCubeError,
    Reset,
    SetMotion,
    SetParameter,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# -- requests a host sends ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "ident", "data"),
    [
        (Reset(1), 0x0E1, "00"),
        (Home(2), 0x0E2, "01"),
        (Halt(1), 0x0E1, "02"),
        (Halt(0), 0x100, "02"),  # to every module
        (Reset(0), 0x100, "00"),
        (SetParameter(2, pc.PARAM_TARGET_VEL, 1.0), 0x0E2, "08 4F 00 00 80 3F"),
        (SetParameter(1, pc.PARAM_TARGET_ACC, 2.0), 0x0E1, "08 50 00 00 00 40"),
        (GetParameter(1, pc.PARAM_ACT_POS), 0x0C1, "0A 3C"),
        (GetParameter(2, pc.PARAM_CUBE_STATE), 0x0C2, "0A 27"),
        (GetParameter(31, pc.PARAM_ACT_VEL), 0x0DF, "0A 41"),
        (SetMotion(1, pc.FRAMP_MODE, 0.5), 0x0E1, "0B 04 00 00 00 3F"),
        (SetMotion(2, pc.FVEL_MODE, -0.5), 0x0E2, "0B 07 00 00 00 BF"),
        (SetMotion(1, pc.FRAMP_ACK, 0.25), 0x0E1, "0B 0E 00 00 80 3E"),
    ],
)
def test_requests_are_encoded_as_the_protocol_lays_them_out(request_: pc.Request, ident: int, data: str) -> None:
    assert PowerCubeCodec("host").encode(request_) == Frame(ident, h(data))


@pytest.mark.parametrize(
    "request_",
    [
        SetParameter(0, pc.PARAM_TARGET_VEL, 1.0),  # no address 0 but for reset, home and halt
        SetParameter(32, pc.PARAM_TARGET_VEL, 1.0),
        SetParameter(1, pc.PARAM_ACT_POS, 1.0),  # read-only
        SetParameter(1, pc.PARAM_TARGET_VEL, math.nan),
        SetParameter(1, pc.PARAM_TARGET_VEL, 1e39),  # does not fit a float32
        SetMotion(1, 0x55, 0.0),
        SetMotion(1, pc.FRAMP_MODE, math.inf),
        GetParameter(1, 0x99),
        Halt(40),
    ],
)
def test_requests_out_of_the_protocol_are_refused(request_: pc.Request) -> None:
    with pytest.raises(PowerCubeError):
        PowerCubeCodec("host").encode(request_)


def test_a_host_does_not_send_replies_nor_a_module_requests() -> None:
    with pytest.raises(PowerCubeError):
        PowerCubeCodec("host").encode(Ack(1, pc.CMD_RESET))
    with pytest.raises(PowerCubeError):
        PowerCubeCodec("module").encode(Halt(1))


# -- replies a host decodes -----------------------------------------------------------------------------------------


def decode(ident: int, data: str, modules: tuple[int, ...] = (1, 2)) -> tuple[list[pc.Event], PowerCubeCodec]:
    codec = PowerCubeCodec("host", modules)
    codec.receive_frame(ident, h(data))
    return list(codec.events()), codec


@pytest.mark.parametrize(
    ("ident", "data", "event"),
    [
        (0x0A1, "0A 3C 00 00 C0 3F", ParameterValue(1, pc.PARAM_ACT_POS, 1.5)),
        (0x0A2, "0A 41 00 00 00 BF", ParameterValue(2, pc.PARAM_ACT_VEL, -0.5)),
        # HOME_OK | RAMP_END = 0x00008002, little-endian
        (0x0A1, "0A 27 02 80 00 00", ParameterValue(1, pc.PARAM_CUBE_STATE, 0x8002)),
        (0x0A1, "0B 0E 00 00 80 3E 30 81", MotionAck(1, pc.FRAMP_ACK, 0.25, 0x30, 0x81)),
        (0x0A2, "0B 04 64", Ack(2, pc.CMD_SET_MOTION, pc.FRAMP_MODE)),
        (0x0A1, "08 4F 64", Ack(1, pc.CMD_SET_EXTENDED, pc.PARAM_TARGET_VEL)),
        (0x0A1, "00 64", Ack(1, pc.CMD_RESET)),
        (0x0A2, "02", Ack(2, pc.CMD_HALT)),  # a bare command byte is accepted too
    ],
)
def test_replies_decode_to_their_events(ident: int, data: str, event: pc.Event) -> None:
    events, codec = decode(ident, data)
    assert events == [event]
    assert codec.statistics().events == 1 and codec.statistics().malformed == 0


@pytest.mark.parametrize(
    "data",
    [
        "",  # no data
        "0A 3C 00 00 C0",  # a value one byte short
        "0A 3C 00 00 C0 7F",  # NaN
        "0A 3C 00 00 80 7F",  # +inf
        "0A 99 00 00 00 00",  # unknown parameter
        "0B 0E 00 00 80 3E 30",  # extended acknowledge one byte short
        "0B 04 63",  # a simple acknowledge without 0x64
        "08 4F",
        "77 64",  # unknown command
    ],
)
def test_malformed_replies_are_counted_and_dropped(data: str) -> None:
    events, codec = decode(0x0A1, data)
    assert events == []
    stats = codec.statistics()
    assert (stats.frames, stats.malformed, stats.events) == (1, 1, 0)
    assert codec.last_error is not None and "0x0A1" in codec.last_error


def test_frames_of_other_identifiers_and_modules_are_foreign() -> None:
    codec = PowerCubeCodec("host", (1, 2))
    codec.receive_frame(0x0A3, h("0A 3C 00 00 C0 3F"))  # module 3 is not watched
    codec.receive_frame(0x0E1, h("02"))  # a request (another host's), not a reply
    codec.receive_frame(0x123, h("01 02 03"))
    assert codec.next_event() is NEED_DATA
    stats = codec.statistics()
    assert (stats.frames, stats.foreign, stats.malformed) == (3, 3, 0)


def test_an_error_frame_is_a_bus_error() -> None:
    codec = PowerCubeCodec("host")
    codec.receive_message(SimpleNamespace(arbitration_id=pc.CAN_ERR_BUSOFF, data=bytes(8), is_error_frame=True))
    codec.receive_message(None)  # a receive timeout
    event = codec.next_event()
    assert event == BusError(pc.CAN_ERR_BUSOFF)
    assert isinstance(event, BusError) and event.bus_off
    assert codec.statistics().error_frames == 1


def test_the_event_queue_is_bounded() -> None:
    codec = PowerCubeCodec("host", (1,))
    for _ in range(300):
        codec.receive_frame(0x0A1, h("0A 3C 00 00 C0 3F"))
    assert len(list(codec.events())) == 256
    assert codec.statistics().dropped_events == 44


# -- the module side (the emulator's) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        Reset(1),
        Home(2),
        Halt(1),
        Halt(0),
        SetParameter(2, pc.PARAM_TARGET_ACC, 2.0),
        GetParameter(1, pc.PARAM_CUBE_STATE),
        SetMotion(1, pc.FRAMP_MODE, 0.5),
        SetMotion(2, pc.FVEL_ACK, -0.5),
    ],
)
def test_a_module_decodes_what_a_host_encodes(request_: pc.Request) -> None:
    frame = PowerCubeCodec("host").encode(request_)
    module = PowerCubeCodec("module", (1, 2))
    module.receive_frame(frame.arbitration_id, frame.data)
    assert list(module.events()) == [request_]


@pytest.mark.parametrize(
    ("ident", "data"),
    [
        (0x0C1, "0B 04 00 00 00 3F"),  # motion on the GET identifier
        (0x0E1, "0A 3C"),  # GET_EXTENDED on the PUT identifier
        (0x0E1, "02 00"),  # halt with an argument
        (0x0E1, "08 3C 00 00 00 3F"),  # ACT_POS is not writable
        (0x0E1, "0B 04 00 00 C0 7F"),  # NaN target
        (0x100, "0B"),
    ],
)
def test_a_module_counts_malformed_requests(ident: int, data: str) -> None:
    module = PowerCubeCodec("module", (1, 2))
    module.receive_frame(ident, h(data))
    assert list(module.events()) == []
    assert module.statistics().malformed == 1


@pytest.mark.parametrize(
    ("reply", "ident", "data"),
    [
        (ParameterValue(1, pc.PARAM_ACT_POS, 1.5), 0x0A1, "0A 3C 00 00 C0 3F"),
        (ParameterValue(2, pc.PARAM_CUBE_STATE, 0x8002), 0x0A2, "0A 27 02 80 00 00"),
        (Ack(1, pc.CMD_HALT), 0x0A1, "02 64"),
        (Ack(1, pc.CMD_SET_EXTENDED, pc.PARAM_TARGET_VEL), 0x0A1, "08 4F 64"),
        (MotionAck(2, pc.FRAMP_ACK, 0.25, 0x30, 0), 0x0A2, "0B 0E 00 00 80 3E 30 00"),
    ],
)
def test_replies_are_encoded_as_the_protocol_lays_them_out(
    reply: Ack | ParameterValue | MotionAck, ident: int, data: str
) -> None:
    assert PowerCubeCodec("module").encode(reply) == Frame(ident, h(data))


def test_the_short_state_follows_the_state_word() -> None:
    assert pc.short_state(pc.STATE_HOME_OK | pc.STATE_RAMP_END) == pc.SHORT_RAMP_END
    assert pc.short_state(pc.STATE_HOME_OK | pc.STATE_MOTION) == pc.SHORT_MOTION
    assert pc.short_state(pc.STATE_RAMP_END) == pc.SHORT_NOT_OK | pc.SHORT_RAMP_END  # not homed
    assert pc.short_state(pc.STATE_HOME_OK | pc.STATE_HALTED) == pc.SHORT_NOT_OK
