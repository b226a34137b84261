"""The CAN wrist driver against the emulated PowerCube modules on a python-can virtual bus."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import can
import pytest

from pluto.hardware.wrist import powercube as pc
from pluto.hardware.wrist.can_driver import CanWristConnectError, CanWristDriver, CanWristLinkError, WristReading
from pluto.hardware.wrist.emulate import PowerCubeEmulator
from pluto.hardware.wrist.sim import WristParams
from tests.helpers import wait_until

GUARD = 5.0  # s: waits are for conditions; this only guards against a hang
LINK_TIMEOUT = 1.0  # s: a busy machine can hold the driver's threads up for 0.2 s, and the link would go down
UNIT = WristParams(pan_limits=(-0.5, 0.5), tilt_limits=(-0.4, 0.6), max_speed=(2.0, 2.0), max_accel=(6.0, 6.0))


@pytest.fixture
def channel() -> str:
    return f"wrist-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def emulator(channel: str) -> Iterator[PowerCubeEmulator]:
    with PowerCubeEmulator(channel, params=UNIT) as unit:
        yield unit


@pytest.fixture
def driver(channel: str, emulator: PowerCubeEmulator) -> Iterator[CanWristDriver]:
    # configured limits wider than the unit's: the driver narrows them to what the modules report
    with CanWristDriver("virtual", channel, poll_period=0.02, link_timeout=LINK_TIMEOUT) as wrist:
        yield wrist


def readings_until(driver: CanWristDriver, done: object, seconds: float = GUARD) -> list[WristReading]:
    """Every reading until ``done(reading)`` is true (or the guard runs out)."""
    out: list[WristReading] = []
    seq = driver.reading.seq if driver.reading else 0
    while True:
        reading = driver.wait_for_reading(1.0, seq)
        assert reading is not None, "no reading"
        seq = reading.seq
        out.append(reading)
        if done(reading) or len(out) > seconds / 0.02:  # type: ignore[operator]
            return out


def requests(unit: PowerCubeEmulator, kind: type) -> list[object]:
    return [r for r in unit.received if isinstance(r, kind)]


def test_limits_are_narrowed_to_the_modules_own(driver: CanWristDriver) -> None:
    (pan_low, pan_high), (tilt_low, tilt_high) = driver.position_limits
    assert (pan_low, pan_high) == pytest.approx((-0.5, 0.5))
    assert (tilt_low, tilt_high) == pytest.approx((-0.4, 0.6))


def test_moves_to_the_target_with_the_commanded_ramp(driver: CanWristDriver, emulator: PowerCubeEmulator) -> None:
    driver.command([0.45, -0.3], [1.0, 0.5], [4.0, 2.0])
    trace = readings_until(driver, lambda r: abs(r.position[0] - 0.45) < 1e-6 and abs(r.position[1] + 0.3) < 1e-6)
    final = trace[-1]
    assert final.position == pytest.approx((0.45, -0.3), abs=1e-6)
    pan_speeds = [r.velocity[0] for r in trace]
    tilt_speeds = [r.velocity[1] for r in trace]
    assert max(pan_speeds) == pytest.approx(1.0, abs=0.02)  # cruised at the commanded velocity, never faster
    assert min(tilt_speeds) == pytest.approx(-0.5, abs=0.02)
    # the speed ramps up at the commanded acceleration (0.9 rad/s more at 4 rad/s² takes 0.225 s), not in a step; the
    # readings are stamped when they arrive, late by however long the machine took, so only a span of several
    # readings is compared with it (readings 10 ms apart could be stamped 10 ms closer on a busy machine)
    moving = next(r.stamp for r in trace if r.velocity[0] > 0.05)
    cruising = next(r.stamp for r in trace if r.velocity[0] > 0.95)
    assert cruising - moving >= 0.5 * 0.9 / 4.0
    sent = requests(emulator, pc.SetParameter)
    assert pc.SetParameter(1, pc.PARAM_TARGET_VEL, 1.0) in sent
    assert pc.SetParameter(1, pc.PARAM_TARGET_ACC, 4.0) in sent
    assert pc.SetParameter(2, pc.PARAM_TARGET_VEL, 0.5) in sent
    assert final.state[0] & pc.STATE_RAMP_END and not final.state[0] & pc.STATE_MOTION


def test_zero_velocity_or_acceleration_does_not_move(driver: CanWristDriver, emulator: PowerCubeEmulator) -> None:
    driver.command([0.4, 0.4], [0.0, 1.0], [1.0, 0.0])
    wait_until(lambda: len(requests(emulator, pc.SetMotion)) >= 2, timeout=GUARD)
    trace = readings_until(driver, lambda r: False, seconds=0.3)
    assert all(r.position == (0.0, 0.0) for r in trace)
    assert requests(emulator, pc.SetMotion) == [pc.SetMotion(1, pc.FVEL_MODE, 0.0), pc.SetMotion(2, pc.FVEL_MODE, 0.0)]


def test_targets_beyond_the_limits_are_clamped(driver: CanWristDriver, emulator: PowerCubeEmulator) -> None:
    driver.command([10.0, -10.0], [2.0, 2.0], [6.0, 6.0])
    trace = readings_until(driver, lambda r: r.position == pytest.approx((0.5, -0.4), abs=1e-6))
    assert trace[-1].position == pytest.approx((0.5, -0.4), abs=1e-6)
    motions = requests(emulator, pc.SetMotion)
    assert [m.value for m in motions] == pytest.approx([0.5, -0.4])  # type: ignore[attr-defined]
    assert not any(s & pc.STATE_ERROR for s in trace[-1].state)


def test_the_emulator_refuses_a_target_beyond_its_limits(channel: str, emulator: PowerCubeEmulator) -> None:
    host = pc.PowerCubeCodec("host")
    with can.Bus(interface="virtual", channel=channel) as raw:
        for request in (pc.SetMotion(1, pc.FRAMP_MODE, 1.0),):
            frame = host.encode(request)
            raw.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False))
        wait_until(lambda: emulator.state_word(0) & pc.STATE_ERROR, timeout=GUARD)
        assert emulator.state_word(0) & pc.STATE_BEYOND_SOFT
        assert emulator.position() == (0.0, 0.0)
        frame = host.encode(pc.Reset(1))
        raw.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False))
        wait_until(lambda: not emulator.state_word(0) & pc.STATE_ERROR, timeout=GUARD)


def test_no_answer_takes_the_link_down_and_refuses_commands(
    driver: CanWristDriver, emulator: PowerCubeEmulator
) -> None:
    assert driver.connected
    emulator.mute()
    wait_until(lambda: not driver.connected, timeout=GUARD)
    assert driver.silence() > LINK_TIMEOUT
    before = len(requests(emulator, pc.SetMotion)) + len(requests(emulator, pc.SetParameter))
    with pytest.raises(CanWristLinkError):
        driver.command([0.3, 0.3], [1.0, 1.0], [1.0, 1.0])
    assert driver.statistics().refused == 1
    after = len(requests(emulator, pc.SetMotion)) + len(requests(emulator, pc.SetParameter))
    assert after == before  # nothing was sent
    # back: the driver halts the unit before anything else, then a new command resets and moves it
    emulator.mute(False)
    wait_until(lambda: driver.connected, timeout=GUARD)
    assert driver.statistics().reconnects == 1
    wait_until(lambda: emulator.state_word(0) & pc.STATE_HALTED, timeout=GUARD)
    assert requests(emulator, pc.Halt) == [pc.Halt(1), pc.Halt(2)]
    driver.command([0.2, 0.0], [2.0, 1.0], [6.0, 1.0])
    readings_until(driver, lambda r: abs(r.position[0] - 0.2) < 1e-6)
    assert pc.Reset(1) in emulator.received


def test_a_state_word_read_before_the_halt_took_effect_does_not_skip_the_reset(
    driver: CanWristDriver, emulator: PowerCubeEmulator
) -> None:
    driver.halt()
    wait_until(lambda: emulator.state_word(0) & pc.STATE_HALTED, timeout=GUARD)
    # the answer to a state poll sent before the HALT, late on a busy machine: "not halted" (handed to the driver
    # as its receive thread would, so that it is surely taken before the command: a race no public call can order,
    # hence the driver's private lock and hook)
    with driver._lock:
        driver._apply(pc.ParameterValue(1, pc.PARAM_CUBE_STATE, 0), driver._clock())
    driver.command([0.2, 0.0], [2.0, 1.0], [6.0, 1.0])
    assert pc.Reset(1) in emulator.received or wait_until(lambda: pc.Reset(1) in emulator.received, timeout=GUARD)
    readings_until(driver, lambda r: abs(r.position[0] - 0.2) < 1e-6)
    assert emulator.position()[0] == pytest.approx(0.2, abs=1e-6)  # reset, then moved


def test_a_unit_that_went_on_moving_during_an_outage_is_halted_when_the_link_comes_back(
    driver: CanWristDriver, emulator: PowerCubeEmulator
) -> None:
    driver.command([0.5, 0.0], [0.2, 0.0], [6.0, 0.0])  # 2.5 s to get there
    readings_until(driver, lambda r: r.velocity[0] > 0.1)
    emulator.mute()
    wait_until(lambda: not driver.connected, timeout=GUARD)
    emulator.mute(False)
    wait_until(lambda: emulator.state_word(0) & pc.STATE_HALTED, timeout=GUARD)
    stopped_at = emulator.position()[0]
    assert stopped_at < 0.45
    reading = readings_until(driver, lambda r: r.state[0] & pc.STATE_HALTED)[-1]
    assert reading.velocity[0] == 0.0 and reading.position[0] == pytest.approx(stopped_at, abs=1e-6)


def test_bus_off_takes_the_link_down_at_once(driver: CanWristDriver, emulator: PowerCubeEmulator) -> None:
    emulator.bus_off()
    wait_until(lambda: not driver.connected, timeout=GUARD)
    assert driver.silence() < LINK_TIMEOUT  # down from the error frame, before the link timeout
    assert driver.statistics().bus_errors >= 1
    emulator.bus_on()
    wait_until(lambda: driver.connected, timeout=GUARD)
    assert driver.statistics().reconnects == 1


def test_a_module_still_moving_without_a_fresh_command_is_halted(channel: str, emulator: PowerCubeEmulator) -> None:
    with CanWristDriver("virtual", channel, poll_period=0.02, command_timeout=0.3) as wrist:
        wrist.command([0.5, 0.0], [0.2, 0.0], [6.0, 0.0])
        wait_until(lambda: requests(emulator, pc.Halt), timeout=GUARD)
        assert wrist.statistics().halts == 1
        assert emulator.position()[0] < 0.45  # stopped on its way


def test_close_halts_the_unit(channel: str, emulator: PowerCubeEmulator) -> None:
    wrist = CanWristDriver("virtual", channel, poll_period=0.02)
    wrist.connect()
    wrist.command([-0.5, 0.5], [0.2, 0.2], [6.0, 6.0])
    readings_until(wrist, lambda r: r.velocity[0] < -0.1)
    wrist.close()
    wrist.close()  # idempotent
    wait_until(lambda: emulator.state_word(0) & emulator.state_word(1) & pc.STATE_HALTED, timeout=GUARD)
    assert not emulator.state_word(0) & pc.STATE_MOTION
    assert requests(emulator, pc.Halt) == [pc.Halt(1), pc.Halt(2)]


def test_malformed_frames_are_counted(channel: str, driver: CanWristDriver) -> None:
    with can.Bus(interface="virtual", channel=channel) as raw:
        for data in (b"\x0a\x3c\x00", b"\x77", b"\x0a\x3c\x00\x00\xc0\x7f"):
            raw.send(can.Message(arbitration_id=0x0A1, data=data, is_extended_id=False))
        raw.send(can.Message(arbitration_id=0x321, data=b"\x01", is_extended_id=False))
        wait_until(lambda: driver.statistics().codec.malformed == 3, timeout=GUARD)
    stats = driver.statistics().codec
    assert stats.foreign >= 1
    assert driver.connected  # the intact frames around them keep the link up


def test_no_unit_on_the_bus_fails_the_connection(channel: str) -> None:
    wrist = CanWristDriver("virtual", channel)
    with pytest.raises(CanWristConnectError, match="no PowerCube answered"):
        wrist.connect(timeout=0.2)


def test_an_interface_that_does_not_exist_fails_the_connection() -> None:
    with pytest.raises(CanWristConnectError, match="cannot open"):
        CanWristDriver("no-such-interface", "x").connect(timeout=0.2)
