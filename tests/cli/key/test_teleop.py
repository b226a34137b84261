"""The dead-man rule of the movement keys, on a clock the test moves."""

from __future__ import annotations

import math

import pytest

from pluto.cli.key.teleop import ZERO, Movement, Teleop, TeleopParams
from pluto.geometry import wrap_angle

PARAMS = TeleopParams(speed=0.2, turn_rate=0.5, release_after=0.4, resend_every=0.1)


def test_a_held_key_moves_and_its_release_sends_one_zero() -> None:
    teleop = Teleop(PARAMS)
    assert teleop.tick(0.0) is None  # nothing held, nothing sent
    assert teleop.key("forward", 10.0) == Movement(0.2, 0.0)
    assert teleop.key("forward", 10.03) is None  # a key repeat soon after: already sent
    assert teleop.tick(10.05) is None
    assert teleop.tick(10.11) == Movement(0.2, 0.0)  # re-sent while held
    assert teleop.key("forward", 10.3) == Movement(0.2, 0.0)
    assert teleop.tick(10.68) == Movement(0.2, 0.0)  # 0.38 s after the last repeat: still held, re-sent
    assert teleop.holding == "forward"
    assert teleop.tick(10.71) == ZERO  # 0.4 s without a repeat: released
    assert teleop.tick(10.8) is None and teleop.tick(20.0) is None  # one zero only
    assert teleop.holding == ""


def test_a_tap_waits_for_the_first_repeat_then_the_repeats_keep_it() -> None:
    teleop = Teleop(TeleopParams(release_after=0.4, first_repeat=0.7, resend_every=0.1))
    assert teleop.key("back", 0.0) == Movement(-0.2, 0.0)
    assert teleop.tick(0.65) == Movement(-0.2, 0.0)  # the terminal's first repeat may take this long
    assert teleop.tick(0.71) == ZERO  # no repeat came: it was a tap
    assert teleop.key("back", 1.0) == Movement(-0.2, 0.0)
    assert teleop.key("back", 1.6) == Movement(-0.2, 0.0)  # the first repeat, 0.6 s later
    assert teleop.tick(1.95) == Movement(-0.2, 0.0)
    assert teleop.tick(2.01) == ZERO  # repeats stopped 0.4 s ago
    with pytest.raises(ValueError, match="first_repeat"):
        TeleopParams(first_repeat=0.0)


def test_a_new_direction_is_sent_at_once_and_stop_forgets_it() -> None:
    teleop = Teleop(PARAMS)
    assert teleop.key("left", 1.0) == Movement(0.0, 0.5)
    assert teleop.key("right", 1.01) == Movement(0.0, -0.5)
    assert teleop.key("back", 1.02) == Movement(-0.2, 0.0)
    assert teleop.stop() == ZERO and ZERO.is_stop
    assert teleop.tick(5.0) is None  # stopped: no zero again at the release time
    with pytest.raises(ValueError, match="not a movement"):
        teleop.key("jump", 6.0)


def test_speed_keys_step_within_their_caps() -> None:
    teleop = Teleop(TeleopParams(speed=0.9, turn_rate=0.1, speed_step=0.05, turn_step=0.1, max_speed=1.0))
    for _ in range(5):
        assert teleop.adjust("faster")
    assert teleop.speed == 1.0
    assert teleop.adjust("turn_slower") and teleop.adjust("turn_slower")
    assert teleop.turn_rate == 0.0
    assert not teleop.adjust("forward")
    assert teleop.key("forward", 0.0) == Movement(1.0, 0.0)


def test_heading_mode_turns_the_held_heading_and_drives_along_it() -> None:
    step = math.radians(3.0)
    teleop = Teleop(PARAMS)
    teleop.set_heading_mode(3.1)
    assert teleop.key("left", 0.0) == Movement(0.0, 0.0, wrap_angle(3.1 + step, positive_pi=True))
    assert teleop.heading is not None and teleop.heading < 0  # wrapped past π
    teleop.set_heading_mode(0.0)
    teleop.key("right", 1.0)
    teleop.key("right", 1.05)
    assert teleop.heading == pytest.approx(-2 * step)
    assert teleop.key("forward", 1.1) == Movement(0.2, 0.0, teleop.heading)
    assert teleop.tick(1.9) == ZERO  # the dead-man rule holds in heading mode too
    teleop.set_heading_mode(None)
    assert teleop.key("forward", 2.0) == Movement(0.2, 0.0)


def test_the_held_heading_is_wrapped_to_minus_pi_exclusive_pi_inclusive() -> None:
    teleop = Teleop(PARAMS)
    teleop.set_heading_mode(-math.pi)
    assert teleop.heading == math.pi
    teleop.set_heading_mode(3 * math.pi / 2)
    assert teleop.heading == pytest.approx(-math.pi / 2)
    teleop.set_heading_mode(0.25)
    assert teleop.heading == 0.25


def test_params_are_checked() -> None:
    with pytest.raises(ValueError, match="speed"):
        TeleopParams(speed=-1.0)
    with pytest.raises(ValueError, match="resend_every"):
        TeleopParams(release_after=0.05, resend_every=0.1)
    with pytest.raises(ValueError, match="turn_rate"):
        TeleopParams(turn_rate=math.inf)
