"""What a browser may send: decoding, range checks, the motion/command each request becomes, the dead-man rule and
the newest-wins mailbox."""

from __future__ import annotations

import math

import pytest

from pluto.gateways.web.commands import (
    TELEOP_FLAGS,
    Auth,
    CommandError,
    CommandLimits,
    DeadMan,
    MoveTo,
    Stop,
    Teleop,
    parse_request,
)
from pluto.gateways.web.mailbox import Mailbox


def test_requests_decode_to_their_structs() -> None:
    assert parse_request('{"op": "teleop", "v": 0.2, "w": -0.5}') == Teleop(0.2, -0.5)
    assert parse_request('{"op": "stop"}') == Stop()
    assert parse_request(b'{"op": "moveto", "x": 3, "y": 4.5}') == MoveTo(3.0, 4.5)
    assert parse_request('{"op": "auth", "token": "abc"}') == Auth("abc")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "bad request"),
        ('{"op": "fly"}', "bad request"),
        ('{"op": "teleop", "v": 0.2}', "`w`"),
        ('{"op": "teleop", "v": "fast", "w": 0}', r"\$\.v"),
        ('{"op": "moveto", "x": 1, "y": 2, "z": 3}', "z"),
        ('{"op": "stop", "pad": "' + "x" * 2000 + '"}', "at most"),
        ("\xff\xfe", "not JSON"),
    ],
)
def test_bad_requests_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(CommandError, match=reason):
        parse_request(text)


def test_teleop_and_stop_are_a_velocity_pass_through_with_laser_protection() -> None:
    limits = CommandLimits(max_speed=0.5, max_turn_rate=1.0)
    cmd = limits.command(Teleop(0.4, -0.3), stamp=7.0)
    assert (cmd.cmd_flags, cmd.velocity, cmd.stamp) == (TELEOP_FLAGS, [0.4, -0.3], 7.0)
    stop = limits.command(Stop(), stamp=8.0)
    assert (stop.cmd_flags, stop.velocity) == (TELEOP_FLAGS, [0.0, 0.0])


@pytest.mark.parametrize(("v", "w"), [(0.51, 0.0), (-0.6, 0.0), (0.0, 1.2), (math.nan, 0.0), (0.0, math.inf)])
def test_teleop_beyond_the_limits_is_refused_naming_the_value(v: float, w: float) -> None:
    with pytest.raises(CommandError, match="out of range"):
        CommandLimits(max_speed=0.5, max_turn_rate=1.0).command(Teleop(v, w), stamp=0.0)


def test_moveto_is_42_with_the_point_and_must_fall_on_the_map() -> None:
    limits = CommandLimits(area=(-1.0, -1.0, 20.0, 10.0))
    cmd = limits.command(MoveTo(3.0, 4.0), stamp=1.0)
    assert (cmd.cmd_flags, cmd.position) == (42, [3.0, 4.0])
    with pytest.raises(CommandError, match="outside the map"):
        limits.command(MoveTo(30.0, 4.0), stamp=1.0)
    with pytest.raises(CommandError, match="finite"):
        limits.command(MoveTo(math.nan, 4.0), stamp=1.0)
    with pytest.raises(CommandError, match="out of range"):  # no map: pluto.limits still fences it
        CommandLimits().command(MoveTo(1e7, 0.0), stamp=1.0)


def test_limits_themselves_are_checked() -> None:
    with pytest.raises(ValueError, match=r"max_speed = 5.0 is out of range: it must be in \(0, 3\]"):
        CommandLimits(max_speed=5.0)


def test_deadman_stops_once_when_the_repetitions_stop() -> None:
    dm = DeadMan(timeout=0.5)
    dm.sent(Teleop(0.3, 0.0), now=10.0)
    assert dm.moving and not dm.expired(10.4)
    dm.sent(Teleop(0.3, 0.0), now=10.4)  # repeated: still held
    assert not dm.expired(10.8)
    assert dm.expired(10.95)
    assert not dm.expired(12.0)  # one stop per lapse
    dm.sent(Teleop(0.0, 0.0), now=13.0)  # a zero teleop is a stop: nothing to watch
    assert not dm.moving and not dm.expired(20.0)


def test_deadman_released_by_stop_and_moveto_and_stops_on_close_only_if_moving() -> None:
    dm = DeadMan(timeout=0.5)
    dm.sent(Teleop(0.0, 0.5), now=1.0)
    dm.sent(Stop(), now=1.1)
    assert not dm.expired(5.0) and not dm.closed()
    dm.sent(Teleop(0.2, 0.0), now=6.0)
    dm.sent(MoveTo(1.0, 1.0), now=6.1)
    assert not dm.moving
    dm.sent(Teleop(0.2, 0.0), now=7.0)
    assert dm.closed() and not dm.closed()


def test_mailbox_keeps_the_newest_of_each_kind_and_counts_the_skipped() -> None:
    box = Mailbox()
    box.post("map", "m")
    for k in range(5):
        box.post("frame", f"f{k}")
    box.post("mom", "t")
    assert len(box) == 3
    assert box.take() == ["m", "f4", "t"]
    assert (box.posted, box.skipped) == (7, 4)
    assert box.take() == [] and len(box) == 0
    box.post("frame", "f5")
    assert box.take() == ["f5"] and box.skipped == 4
