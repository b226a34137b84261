"""The NetworkMotionServer codec: every command, refused lines, datagram limits, and the exact bytes of replies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluto.errors import LocalProtocolError
from pluto.gateways.netmotion.codec import (
    MAX_COMMANDS_PER_DATAGRAM,
    NEED_DATA,
    BadCommand,
    Command,
    CommandDecoder,
    ErrorReply,
    ForwardKinematics,
    ForwardKinematicsReply,
    GetJoints,
    JointValues,
    ListMotions,
    MotionList,
    MotionRegistered,
    MotionResponse,
    Ping,
    PointIK,
    Pong,
    RunMotion,
    StopMotion,
    Stopped,
    encode,
    format_number,
)


def decode(datagram: bytes, decoder: CommandDecoder | None = None) -> list[Command]:
    decoder = decoder or CommandDecoder()
    decoder.receive_data(datagram)
    out = []
    while (event := decoder.next_event()) is not NEED_DATA:
        assert not isinstance(event, type(NEED_DATA))
        out.append(event)
    return out


@pytest.mark.parametrize(
    ("datagram", "command"),
    [
        (b"PING", Ping()),
        (b"PING\n", Ping()),
        (b"PING\r\n", Ping()),
        (b"FK 3", ForwardKinematics(3)),
        (b"FK\t7", ForwardKinematics(7)),
        (b"RUNMS arm_pickup_move.mot", RunMotion("arm_pickup_move.mot")),
        (b"IKP 4 1.0 1.0 1.0", PointIK(4, (0.001, 0.001, 0.001))),
        (b"IKP 7 -150 2.5e1 .5", PointIK(7, (-0.15, 0.025, 0.0005))),
        (b"STOP 12", StopMotion(12)),
        (b"LIST", ListMotions()),
        (b"JOINTS", GetJoints()),
    ],
)
def test_commands(datagram: bytes, command: Command) -> None:
    assert decode(datagram) == [command]


@pytest.mark.parametrize(
    ("datagram", "reason"),
    [
        (b"ping", "unknown command 'ping'"),
        (b"HELLO world", "unknown command 'HELLO'"),
        (b"FK", "usage: FK <link number>"),
        (b"FK -1", "usage: FK"),
        (b"FK 3 4", "usage: FK"),
        (b"FK 1e3", "usage: FK"),
        (b"PING now", "PING takes no argument"),
        (b"RUNMS", "usage: RUNMS"),
        (b"RUNMS a b", "usage: RUNMS"),
        (b"IKP 4 1 1", "usage: IKP"),
        (b"IKP 4 1 1 x", "usage: IKP"),
        (b"IKP 4 nan 1 1", "usage: IKP"),
        (b"IKP 4 1e300 1 1", "between -100000 and 100000 mm"),
        (b"STOP", "usage: STOP"),
        (b"LIST 2", "LIST takes no argument"),
        (b"JOINTS x", "JOINTS takes no argument"),
        (b"PI\x00NG", "not a text command"),
        (b"\xff\xfe\x00garbage", "not a text command"),
        (b"FK " + b"9" * 300, "longer than 256 bytes"),
    ],
)
def test_refused_lines(datagram: bytes, reason: str) -> None:
    [event] = decode(datagram)
    assert isinstance(event, BadCommand)
    assert reason in event.reason


def test_several_commands_in_one_datagram_and_the_cap() -> None:
    decoder = CommandDecoder()
    assert decode(b"PING\r\n\nFK 1\nbogus\n", decoder) == [
        Ping(),
        ForwardKinematics(1),
        BadCommand("unknown command 'bogus' (PING, FK, RUNMS, IKP, STOP, LIST, JOINTS)"),
    ]
    events = decode(b"PING\n" * 20, decoder)
    assert events[:MAX_COMMANDS_PER_DATAGRAM] == [Ping()] * MAX_COMMANDS_PER_DATAGRAM
    assert len(events) == MAX_COMMANDS_PER_DATAGRAM + 1 and isinstance(events[-1], BadCommand)
    stats = decoder.statistics()
    assert (stats.datagrams, stats.commands, stats.bad) == (2, 10, 2)


def test_oversized_datagrams_are_dropped_whole() -> None:
    decoder = CommandDecoder(max_datagram=512)
    assert decode(b"PING\n" + b" " * 600, decoder) == []
    assert decode(b"P" * 65507, decoder) == []
    assert decode(b"PING", decoder) == [Ping()]
    assert decoder.statistics().oversized == 2


def test_the_echoed_text_of_a_refused_line_is_safe_and_short() -> None:
    [event] = decode(b"X" * 200)
    assert isinstance(event, BadCommand) and len(event.reason) < 120
    reply = encode(ErrorReply("bad\nthing\x07" + "y" * 500))
    assert reply.count(b"\n") == 1 and reply.startswith(b"ERR bad thing?") and len(reply) <= 206


@given(st.binary(max_size=700))
def test_any_bytes_decode_without_raising(data: bytes) -> None:
    decoder = CommandDecoder()
    for event in decode(data, decoder):
        reply = encode(ErrorReply(event.reason)) if isinstance(event, BadCommand) else b""
        assert reply.decode("ascii").count("\n") <= 1


def test_number_format_is_c_percent_e() -> None:
    assert format_number(1.0) == "1.000000E+00"
    assert format_number(-4.371139e-08) == "-4.371139E-08"
    assert format_number(153.247) == "1.532470E+02"
    assert format_number(6.123233995736766e-17) == "6.123234E-17"
    assert format_number(1e-300) == "1.000000E-300"
    assert format_number(math.nan) == "NAN"


def test_reply_bytes() -> None:
    matrix = (
        (1.0, 0.0, 0.0, 0.125),
        (0.0, 6.123233995736766e-17, -1.0, 5.616536e-18),
        (0.0, 1.0, 6.123233995736766e-17, 0.153247),
        (0.0, 0.0, 0.0, 1.0),
    )
    assert encode(ForwardKinematicsReply(3, matrix)) == (
        b"FK 3 ROW 0 : 1.000000E+00 0.000000E+00 0.000000E+00 1.250000E+02\n"
        b"FK 3 ROW 1 : 0.000000E+00 6.123234E-17 -1.000000E+00 5.616536E-15\n"
        b"FK 3 ROW 2 : 0.000000E+00 1.000000E+00 6.123234E-17 1.532470E+02\n"
        b"FK 3 ROW 3 : 0.000000E+00 0.000000E+00 0.000000E+00 1.000000E+00\n"
    )
    assert encode(Pong()) == b"PONG\n"
    assert encode(MotionRegistered(3)) == b"MOTMANREG 3\n"
    assert encode(MotionResponse(3, "STATUS")) == b"MOTMANRESP 3 STATUS\n"
    assert encode(MotionResponse(4, "DEACTIVATE")) == b"MOTMANRESP 4 DEACTIVATE\n"
    assert encode(Stopped(9)) == b"STOPPED 9\n"
    assert encode(MotionList(())) == b"LIST 0\n"
    assert encode(MotionList(((2, "SEQUENCE wave.mot"), (5, "POSTURE IKP 7 1 2 3")))) == (
        b"LIST 2\nMOTION 2 SEQUENCE wave.mot\nMOTION 5 POSTURE IKP 7 1 2 3\n"
    )
    assert encode(JointValues((0.5, -1.0, 0.04), (False, False, True))) == (
        b"JOINTS 5.000000E-01 -1.000000E+00 4.000000E+01\n"
    )
    assert encode(ErrorReply("no running motion has id 3")) == b"ERR no running motion has id 3\n"


def test_replies_refuse_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        encode(MotionRegistered(-1))
    with pytest.raises(LocalProtocolError):
        ForwardKinematicsReply(1, ((1.0, 0.0, 0.0, 0.0),))
    with pytest.raises(LocalProtocolError):
        JointValues((1.0,), ())
    with pytest.raises(LocalProtocolError):
        encode(Ping())  # type: ignore[arg-type]
