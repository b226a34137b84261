"""The P2OS robot core, sans I/O: handshake bytes, SIP cycle, motion commands, e-stop, requested packets, bad
input, a body bumping into the walls of a corridor, and the configuration (the link's watchdog and sessions:
test_robot_link.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pluto.errors import ConfigError
from pluto.hardware.base.p2os import (
    Command,
    ConfigPacket,
    EncoderPacket,
    IoPacket,
    Sip,
    SyncReply,
    UnknownPacket,
    encode_command,
    frame,
    pack_byte_pair,
    robot_params,
    signed_15bit,
)
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot
from pluto.sim.noise import NoiseProfile
from tests.hardware.base.p2os.robot_bench import (
    CONFIG,
    DT,
    ENABLE_1,
    OPEN,
    RVEL_MINUS_20,
    SETV_2200,
    SYNC0,
    SYNC1,
    SYNC2,
    SYNC2_REPLY_AMRISIM,
    VEL_300,
    Bench,
    corridor,
    state_of,
)

# ------------------------------------------------------------------------------------------------ handshake


def test_handshake_echoes_match_the_reference_vectors() -> None:
    robot = P2osRobot(name="AMRISim")
    robot.receive_data(SYNC0)
    assert robot.data_to_send() == SYNC0
    assert state_of(robot) == "sync0"
    robot.receive_data(SYNC1)
    assert robot.data_to_send() == SYNC1
    assert state_of(robot) == "sync1"
    robot.receive_data(SYNC2)
    assert robot.data_to_send() == SYNC2_REPLY_AMRISIM
    assert state_of(robot) == "sync2"
    robot.receive_data(OPEN)
    assert state_of(robot) == "open"
    assert robot.data_to_send() == b""  # SIPs come with step()


@pytest.mark.parametrize(("model", "subclass"), [("p3dx", "p3dx"), ("P3AT", "p3at"), ("peoplebot-sh", "peoplebot-sh")])
def test_sync2_reply_carries_name_class_and_subclass(model: str, subclass: str) -> None:
    bench = Bench(P2osRobot(model))
    for packet in (SYNC0, SYNC1, SYNC2):
        bench.robot.receive_data(packet)
    replies = bench.packets()
    assert replies == [SyncReply(0), SyncReply(1), SyncReply(2, "Pluto", "Pioneer", subclass)]


def test_handshake_byte_by_byte_and_after_garbage() -> None:
    robot = P2osRobot()
    stream = b"\x00\xfa\x13garbage\xfa\xfb\xff" + SYNC0 + SYNC1 + SYNC2 + OPEN
    for byte in stream:
        robot.receive_data(bytes((byte,)))
    assert robot.state == "open"
    assert robot.data_to_send().startswith(SYNC0 + SYNC1)
    assert robot.counters.garbage_bytes > 0


def test_repeated_sync_echoes_again_out_of_order_is_ignored_sync0_restarts() -> None:
    robot = P2osRobot()
    robot.receive_data(SYNC1)  # out of order: nothing
    assert (robot.state, robot.data_to_send()) == ("closed", b"")
    robot.receive_data(SYNC0 + SYNC0)  # the client lost the first echo
    assert robot.data_to_send() == SYNC0 + SYNC0
    robot.receive_data(SYNC1 + SYNC1)
    assert (robot.state, robot.data_to_send()) == ("sync1", SYNC1 + SYNC1)
    robot.receive_data(SYNC0)  # a client starting over
    assert (robot.state, robot.data_to_send()) == ("sync0", SYNC0)
    robot.receive_data(SYNC2)  # out of order again
    assert robot.state == "sync0"
    assert robot.counters.ignored == 2


def test_commands_before_open_are_ignored() -> None:
    bench = Bench()
    for packet in (SYNC0, SYNC1, SYNC2):
        bench.robot.receive_data(packet)
    bench.robot.receive_data(ENABLE_1 + VEL_300 + CONFIG)
    bench.run(0.5)
    assert not bench.robot.motors_enabled
    assert bench.robot.truth_pose == (0.0, 0.0, 0.0)
    assert [p for p in bench.packets() if not isinstance(p, SyncReply)] == []
    assert bench.robot.counters.ignored == 3


# ------------------------------------------------------------------------------------------------ SIP cycle


def test_no_sip_before_open_then_one_every_100_ms() -> None:
    bench = Bench()
    bench.run(0.5)
    assert bench.packets() == []
    bench.open(enable=False)
    arrivals: list[float] = []
    for _ in range(100):  # one second in 10 ms steps
        bench.robot.step(bench.t)
        arrivals += [bench.t] * len(bench.sips())
        bench.t += DT
    assert len(arrivals) == 10
    assert np.allclose(np.diff(arrivals), 0.1)
    assert bench.robot.counters.sips == 10


def test_a_long_step_still_gives_every_sip() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.VEL, 300)
    bench.robot.step(1.05)
    sips = bench.sips()
    assert len(sips) == 11  # at 0.0, 0.1, ..., 1.0
    positions = [sip.x for sip in sips]
    assert positions == sorted(positions) and positions[-1] > positions[1]


def test_sip_fields_of_a_robot_at_rest() -> None:
    bench = Bench()
    bench.open()
    sip = bench.last_sip()
    assert not sip.moving
    assert (sip.x, sip.y, sip.theta, sip.left_velocity, sip.right_velocity) == (0, 0, 0, 0, 0)
    assert sip.motors_enabled and not sip.estop
    assert sip.sonar_arrays == 0b0011  # a p3dx has two arrays, both on at power-up
    assert 110 <= sip.battery <= 140
    assert sip.battery_x10 == sip.battery and sip.state_of_charge == 100
    assert sip.stall_bumpers == 0


# ------------------------------------------------------------------------------------------------ motion


def test_vel_300_moves_the_truth_at_0_3_m_s_after_accelerating() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(0.5)
    v_half, _ = bench.robot.truth_velocity
    assert v_half == pytest.approx(0.15, abs=0.01)  # 0.3 m/s² default acceleration
    bench.run(1.0, pulse=0.5)
    v, omega = bench.robot.truth_velocity
    assert v == pytest.approx(0.3, abs=1e-6) and omega == pytest.approx(0.0, abs=1e-9)
    sip = bench.last_sip()
    assert sip.moving
    assert (sip.left_velocity, sip.right_velocity) == (300, 300)
    params = robot_params("p3dx")
    x_sip = params.position_to_m(signed_15bit(sip.x))
    assert x_sip == pytest.approx(bench.robot.truth_pose[0], abs=0.002)


def test_vel_is_capped_by_setv_and_the_model_top() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.SETV, 200)
    bench.send(Command.VEL, 300)
    bench.run(1.5, pulse=0.5)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.2)
    bench.robot.receive_data(SETV_2200)
    bench.send(Command.SETV, 9000)
    assert bench.robot.max_speeds[0] == pytest.approx(2.2)  # the p3dx's top speed
    bench.send(Command.SETA, 2000)
    bench.send(Command.VEL, -3000)
    bench.run(2.5, pulse=0.5, repeat=((Command.VEL, -3000),))
    assert bench.robot.truth_velocity[0] == pytest.approx(-2.2)


def test_motion_commands_are_ignored_while_the_motors_are_disabled() -> None:
    bench = Bench()
    bench.open(enable=False)
    bench.robot.receive_data(VEL_300)
    bench.run(1.0)
    assert bench.robot.truth_pose == (0.0, 0.0, 0.0)
    assert bench.robot.counters.ignored == 1


def test_rvel_turns_at_the_commanded_rate() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(RVEL_MINUS_20)
    bench.run(1.5, pulse=0.5)
    assert bench.robot.truth_velocity[1] == pytest.approx(math.radians(-20))
    assert bench.robot.truth_velocity[0] == 0.0
    sip = bench.last_sip()
    params = robot_params("p3dx")
    _, omega = params.twist(sip.left_velocity, sip.right_velocity)
    assert omega == pytest.approx(math.radians(-20), abs=0.01)
    assert sip.rot_vel == -200  # ARCOS: 0.1 deg/s
    bench.send(Command.ROTATE, 30)
    bench.run(1.0, pulse=0.5)
    assert bench.robot.truth_velocity[1] == pytest.approx(math.radians(30))


def test_vel2_drives_each_wheel() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.VEL2, pack_byte_pair(10, 10))  # 10 x Vel2Divisor 20 = 200 mm/s each
    bench.run(1.5, pulse=0.5)
    assert bench.robot.truth_velocity == pytest.approx((0.2, 0.0))
    bench.send(Command.VEL2, pack_byte_pair(-5, 5))  # left back, right forward: turn left in place
    bench.run(2.0, pulse=0.5, repeat=((Command.VEL2, pack_byte_pair(-5, 5)),))
    v, omega = bench.robot.truth_velocity
    assert v == pytest.approx(0.0, abs=1e-9)
    assert omega == pytest.approx(100 * 0.0056)  # (R - L) / 2 * DiffConvFactor
    sip = bench.last_sip()
    assert (sip.left_velocity, sip.right_velocity) == (-100, 100)


def test_head_turns_to_an_absolute_heading_and_holds_it() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.HEAD, 90)
    bench.run(3.0, pulse=0.5)
    assert bench.robot.odometry_pose[2] == pytest.approx(math.pi / 2, abs=0.002)
    assert bench.robot.truth_velocity[1] == pytest.approx(0.0, abs=1e-3)
    sip = bench.last_sip()
    assert sip.theta == 1024 and sip.control == 1024  # 90 degrees in 4096ths of a turn
    bench.send(Command.HEAD, -90)  # the short way round is either way: ends at -90 all the same
    bench.run(4.0, pulse=0.5)
    assert bench.robot.odometry_pose[2] == pytest.approx(-math.pi / 2, abs=0.002)


def test_dhead_is_relative_to_the_heading_and_dchead_to_the_setpoint() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.DHEAD, 30)
    bench.run(2.0, pulse=0.5)
    assert bench.robot.odometry_pose[2] == pytest.approx(math.radians(30), abs=0.002)
    bench.send(Command.DHEAD, -45)
    bench.run(2.0, pulse=0.5)
    assert bench.robot.odometry_pose[2] == pytest.approx(math.radians(-15), abs=0.002)
    bench.send(Command.DCHEAD, 10)
    assert bench.robot.heading_setpoint == pytest.approx(math.radians(-5))
    bench.run(1.0, pulse=0.5)
    assert bench.robot.odometry_pose[2] == pytest.approx(math.radians(-5), abs=0.002)


@pytest.mark.parametrize("distance_mm", [500, -200])
def test_move_travels_the_distance_and_stops(distance_mm: int) -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.MOVE, distance_mm)
    bench.run(5.0, pulse=0.5)
    assert bench.robot.truth_pose[0] == pytest.approx(distance_mm / 1000, abs=0.002)
    assert bench.robot.truth_velocity[0] == 0.0
    sip = bench.last_sip()
    assert not sip.moving


def test_stop_decelerates_e_stop_stops_at_once() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.SETA, 1000)
    bench.send(Command.VEL, 600)
    bench.run(1.0, pulse=0.5)
    bench.send(Command.STOP)
    bench.run(0.5)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.45)  # 0.3 m/s² default deceleration
    bench.send(Command.VEL, 600)
    bench.run(1.0)
    bench.send(Command.E_STOP)
    bench.run(0.35)
    assert bench.robot.truth_velocity[0] == 0.0  # the top deceleration, 2 m/s²
    assert bench.robot.motors_enabled  # a software stop: motors stay on
    bench.send(Command.VEL, 100)
    bench.run(1.0)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.1)


def test_seta_and_setra_set_acceleration_and_deceleration() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.SETA, 1000)
    bench.send(Command.SETA, -100)
    bench.send(Command.SETRA, 200)
    bench.send(Command.SETRA, -50)
    assert bench.robot.accelerations == pytest.approx((1.0, 0.1, math.radians(200), math.radians(50)))
    bench.send(Command.VEL, 300)
    bench.run(0.3)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.3)
    bench.send(Command.VEL, 0)
    bench.run(1.0)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.2)


def test_seto_resets_the_sip_position() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.VEL, 300)
    bench.send(Command.RVEL, 10)
    bench.run(2.0, pulse=0.5, repeat=((Command.VEL, 300), (Command.RVEL, 10)))
    bench.send(Command.STOP)
    bench.run(2.0, pulse=0.5)
    sip = bench.last_sip()
    assert sip.x != 0 and sip.y != 0 and sip.theta != 0
    truth = bench.robot.truth_pose
    bench.send(Command.SETO)
    sip = bench.last_sip()
    assert (sip.x, sip.y, sip.theta) == (0, 0, 0)
    assert bench.robot.truth_pose == truth
    bench.send(Command.VEL, 300)
    bench.run(1.5, pulse=0.5)
    sip = bench.last_sip()
    assert signed_15bit(sip.x) > 0 and abs(signed_15bit(sip.y)) <= 1  # forward is +x again


def test_position_counters_wrap_at_15_bits() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.SETV, 2200)
    bench.send(Command.SETA, 2000)
    bench.send(Command.VEL, -2200)
    bench.run(2.0, pulse=0.5)
    sip = bench.last_sip()
    assert sip.x > 0x4000  # behind the origin: the 15-bit counter wrapped below 0
    params = robot_params("p3dx")
    assert params.position_to_m(signed_15bit(sip.x)) == pytest.approx(bench.robot.odometry_pose[0], abs=0.002)


# ------------------------------------------------------------------------------------------------ e-stop, enable


def test_enable_is_refused_while_the_estop_is_engaged() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.0)
    bench.robot.press_estop()
    bench.run(0.5)
    assert bench.robot.truth_velocity[0] == 0.0
    sip = bench.sips()[-1]
    assert sip.estop and not sip.motors_enabled
    bench.robot.receive_data(ENABLE_1)
    assert not bench.robot.motors_enabled
    assert bench.robot.counters.refused_enables == 1
    bench.robot.release_estop()
    sip = bench.last_sip()
    assert not sip.estop and not sip.motors_enabled  # releasing the button does not enable the motors
    bench.robot.receive_data(ENABLE_1)
    assert bench.robot.motors_enabled
    bench.send(Command.ENABLE, 0)
    assert not bench.robot.motors_enabled


# ------------------------------------------------------------------------------------------------ requested packets


def test_config_replies_a_configpac_the_client_decodes() -> None:
    bench = Bench(P2osRobot(watchdog=1.5))
    bench.open()
    bench.send(Command.SETV, 1000)
    bench.send(Command.SETRV, 90)
    bench.robot.receive_data(CONFIG)
    configs = [p for p in bench.packets() if isinstance(p, ConfigPacket)]
    assert len(configs) == 1
    config = configs[0]
    assert (config.robot_type, config.subtype, config.name) == ("Pioneer", "p3dx", "Pluto")
    assert config.watchdog == 1500 and config.sip_cycle == 100
    assert config.trans_vel_top == 2200 and config.rot_vel_top == 300
    assert config.trans_vel_max == 1000 and config.rot_vel_max == 90
    assert config.trans_acc == 300 and config.trans_decel == 300
    assert config.front_sonar == 1 and config.rear_sonar == 1
    assert config.four_mots == 0
    assert ConfigPacket.parse(config.payload()) == config


def test_config_of_a_four_wheel_model() -> None:
    bench = Bench(P2osRobot("p3at"))
    bench.open()
    bench.send(Command.CONFIG)
    config = next(p for p in bench.packets() if isinstance(p, ConfigPacket))
    assert config.subtype == "p3at" and config.four_mots == 1 and config.trans_vel_top == 1200


def test_encoder_packets_once_continuous_and_stop() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.ENCODER, 1)
    bench.run(0.5)
    assert sum(isinstance(p, EncoderPacket) for p in bench.packets()) == 1
    bench.send(Command.ENCODER, 2)
    bench.send(Command.VEL, 300)
    bench.run(1.0)
    packets = bench.packets()
    encoders = [p for p in packets if isinstance(p, EncoderPacket)]
    assert len(encoders) == sum(isinstance(p, Sip) for p in packets) == 10
    assert encoders[-1].left > encoders[0].left > 0 and encoders[-1].left == encoders[-1].right
    travelled = bench.robot.odometry_pose[0] * 1000 / robot_params("p3dx").dist_conv
    assert encoders[-1].left == pytest.approx(travelled, rel=0.05)
    bench.send(Command.ENCODER, 0)
    bench.run(0.5)
    assert not any(isinstance(p, EncoderPacket) for p in bench.packets())


def test_iorequest_replies_an_iopac_with_the_digital_outputs() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.DIGOUT, pack_byte_pair(0x0F, 0x05))
    bench.send(Command.IOREQUEST, 1)
    bench.run(0.3)
    ios = [p for p in bench.packets() if isinstance(p, IoPacket)]
    assert ios == [IoPacket((0,), (0x05,), (0,) * 8)]
    assert bench.last_sip().digout == 0x05


def test_sonar_command_enables_and_disables_arrays() -> None:
    bench = Bench()
    bench.open()
    bench.send(Command.SONAR, 0)  # all off
    bench.run(0.3)
    sips = bench.sips()
    assert all(not sip.sonars and sip.sonar_arrays == 0 for sip in sips[1:])
    bench.send(Command.SONAR, (2 << 1) | 1)  # array 2 (sonars 8-15) on
    bench.run(1.0)
    numbers = {reading.number for sip in bench.sips() for reading in sip.sonars}
    assert numbers == set(range(8, 16))
    assert bench.robot.sonar_arrays_enabled == (False, True)
    bench.send(Command.SONAR, 1)  # all on
    bench.run(1.0)
    sips = bench.sips()
    assert {reading.number for sip in sips for reading in sip.sonars} == set(range(16))
    assert 3 <= len(sips[-1].sonars) <= 6  # 25 firings per second per array: a few new readings per SIP


# ------------------------------------------------------------------------------------------------ bad input


def test_garbage_and_bad_checksums_are_counted_and_ignored() -> None:
    bench = Bench()
    bench.open()
    bad_checksum = VEL_300[:-1] + bytes((VEL_300[-1] ^ 0xFF,))
    bad_argument = frame(bytes((Command.VEL, 0x77, 1, 2)))  # unknown argument type: malformed
    string_for_int = frame(bytes((Command.VEL, 0x2B, 1, 65)))  # a string where VEL takes an integer
    bench.robot.receive_data(b"\xfa\xfb\xff\x00noise" + bad_checksum + bad_argument + string_for_int + ENABLE_1)
    counters = bench.robot.counters
    assert counters.bad_packets == 4  # the impossible length after FA FB, the checksum, two malformed arguments
    assert counters.garbage_bytes > 0
    bench.run(1.0)
    assert bench.robot.truth_velocity[0] == 0.0  # none of the damaged VELs was obeyed
    assert bench.robot.counters.packets == 6  # SYNC0-2, OPEN, ENABLE (from open()) and this ENABLE


def test_unknown_and_unsupported_commands_are_counted() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(UnknownPacket(200, b"\x01\x02").encode())
    bench.send(Command.GRIPPER, 1)
    bench.send(Command.PTUPOS, 3)
    bench.send(Command.SAY, None)
    bench.robot.receive_data(encode_command(Command.SAY, b"\x01\x02"))
    bench.robot.receive_data(encode_command(Command.POLLING, b"\x00\x01"))
    bench.send(Command.ENABLE)  # ENABLE needs its argument
    bench.send(Command.BUMP_STALL, 7)  # out of range
    counters = bench.robot.counters
    assert counters.unknown == 3
    assert counters.ignored == 5
    assert bench.robot.motors_enabled


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.lists(st.integers(0, 255), max_size=12))
def test_any_bytes_never_raise(chunks: list[bytes], commands: list[int]) -> None:
    robot = P2osRobot()
    robot.receive_data(SYNC0 + SYNC1 + SYNC2 + OPEN + ENABLE_1)
    t = 0.0
    for chunk, number in zip(chunks, commands + [0] * len(chunks), strict=False):
        robot.receive_data(chunk)
        robot.receive_data(frame(bytes((number, 0x3B)) + (chunk[:2] + b"\x00\x00")[:2]))  # any command, any value
        t += 0.05
        robot.step(t)
        robot.data_to_send()
    robot.receive_data(b"")
    robot.receive_data(SYNC0)


# ------------------------------------------------------------------------------------------------ the world


def test_driving_into_the_end_of_a_corridor_sets_the_bumper_and_stall_bits() -> None:
    bench = Bench(P2osRobot(world=corridor()))
    bench.open()
    assert bench.robot.truth_pose == (1.0, 0.0, 0.0)
    bench.send(Command.SETA, 1000)
    bench.send(Command.VEL, 500)
    bench.run(12.0, pulse=0.5, repeat=((Command.VEL, 500),))
    x, _, _ = bench.robot.truth_pose
    assert x == pytest.approx(6.0 - 0.25, abs=0.01)  # against the end wall, less the p3dx's radius
    sip = bench.last_sip()
    assert sip.left_stall and sip.right_stall
    assert sip.front_bumpers == 0x1F and sip.rear_bumpers == 0
    assert bench.robot.truth_velocity[0] == 0.0
    bench.send(Command.VEL, -300)  # backing away clears them
    bench.run(1.0, pulse=0.5)
    sip = bench.last_sip()
    assert sip.stall_bumpers == 0


def test_bump_stall_stops_the_robot_on_a_bump_and_lets_it_back_away() -> None:
    bench = Bench(P2osRobot(world=corridor()))
    bench.open()
    bench.send(Command.BUMP_STALL, 1)
    bench.send(Command.SETA, 1000)
    bench.send(Command.VEL, 500)
    bench.run(12.0, pulse=0.5, repeat=((Command.VEL, 500),), until=lambda: bench.robot.body_state.front_bumper)
    bench.run(0.5, pulse=0.5)  # the client heard the bumper: no more VEL
    sip = bench.last_sip()
    assert sip.left_stall and sip.front_bumpers
    bench.run(1.0, pulse=0.5)
    assert bench.robot.body_state.stalled is False  # the bump cleared the command: no more pushing
    bench.send(Command.VEL, -300)
    bench.run(1.5, pulse=0.5)
    assert bench.robot.truth_velocity[0] == pytest.approx(-0.3)


def test_sonar_ranges_come_from_the_transducer_poses() -> None:
    bench = Bench(P2osRobot(world=corridor(length=4.0)))
    bench.open()
    bench.run(1.0)
    latest: dict[int, int] = {}
    for sip in bench.sips():
        latest.update((reading.number, reading.range) for reading in sip.sonars)
    assert set(latest) == set(range(16))
    # p3dx ring: sonar 0 at (69, 136) facing left, the corridor's wall at y = 1 m; sonar 3 at (166, 27) facing
    # 10 degrees left, the end wall at x = 3 m from the robot; sonar 11 at (-255, -27) facing back; the rear
    # transducers are pulled inside the body's disc (radius 250 mm), so they read a few mm more.
    assert latest[0] == pytest.approx(1000 - 136, abs=5)
    assert latest[7] == pytest.approx(1000 - 136, abs=5)
    assert latest[3] == pytest.approx((3000 - 166) / math.cos(math.radians(10 - 7.45)), rel=0.02)
    assert latest[11] == pytest.approx(1000 - 249, abs=15)
    assert all(0 < value <= 5000 for value in latest.values())
    assert bench.robot.sonar_ranges[0] == pytest.approx(latest[0] / 1000, abs=0.001)


def test_sonar_is_clipped_to_5_m_and_converted_with_range_conv() -> None:
    bench = Bench(P2osRobot("p2dx"))  # RangeConvFactor 0.268 mm per unit
    bench.open()
    bench.run(1.0)
    ranges = {reading.range for sip in bench.sips() for reading in sip.sonars}
    assert ranges == {round(5000 / 0.268)}


def test_odometry_noise_makes_the_sip_drift_from_the_truth() -> None:
    noise = NoiseProfile(odometry_scale_error=0.05)
    bench = Bench(P2osRobot(noise=noise, rng=np.random.default_rng(3)))
    bench.open()
    bench.send(Command.VEL, 500)
    bench.run(3.0, pulse=0.5)
    assert abs(bench.robot.odometry_pose[0] - bench.robot.truth_pose[0]) > 0.005


# ------------------------------------------------------------------------------------------------ configuration


def test_unknown_model_and_bad_settings_raise_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown Pioneer model 'p9xx'"):
        P2osRobot("p9xx")
    with pytest.raises(ConfigError, match="watchdog"):
        P2osRobot(watchdog=-1.0)
    with pytest.raises(ConfigError, match="sip_cycle"):
        P2osRobot(sip_cycle=0.0)
    with pytest.raises(ConfigError, match="name"):
        P2osRobot(name="bad\x00name")
    with pytest.raises(ValueError, match="trans_vel_max"):
        MotionLimits(trans_vel_max=3.0)


def test_a_faster_sip_cycle_and_a_custom_model() -> None:
    bench = Bench(P2osRobot(robot_params("p3dx"), sip_cycle=0.05))
    bench.open()
    bench.run(1.0)
    assert len(bench.sips()) == 21  # at 0, 0.05, ..., 1.0
