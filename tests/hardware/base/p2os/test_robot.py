"""The P2OS robot core, sans I/O: handshake bytes, SIP cycle, motion commands, watchdog, e-stop, requested packets,
bad input, and a body bumping into the walls of a corridor."""

from __future__ import annotations

import math
from collections.abc import Callable

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
    P2osDecoder,
    Sip,
    SyncReply,
    UnknownPacket,
    encode_command,
    frame,
    pack_byte_pair,
    robot_params,
    signed_15bit,
)
from pluto.hardware.base.p2os.decoder import Event
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot
from pluto.sim.noise import NoiseProfile
from pluto.sim.world import World

# Byte vectors of docs/protocols/p2os.md.
SYNC0 = bytes.fromhex("FA FB 03 00 00 00")
SYNC1 = bytes.fromhex("FA FB 03 01 00 01")
SYNC2 = bytes.fromhex("FA FB 03 02 00 02")
OPEN = bytes.fromhex("FA FB 06 01 3B 01 00 02 3B")
CONFIG = bytes.fromhex("FA FB 06 12 3B 01 00 13 3B")
ENABLE_1 = bytes.fromhex("FA FB 06 04 3B 01 00 05 3B")
VEL_300 = bytes.fromhex("FA FB 06 0B 3B 2C 01 37 3C")
RVEL_MINUS_20 = bytes.fromhex("FA FB 06 15 1B 14 00 29 1B")
SETV_2200 = bytes.fromhex("FA FB 06 06 3B 98 08 9E 43")
CLOSE = bytes.fromhex("FA FB 06 02 3B 01 00 03 3B")
SYNC2_REPLY_AMRISIM = bytes.fromhex("FA FB 18 02") + b"AMRISim\x00Pioneer\x00p3dx\x00" + bytes.fromhex("EB BD")

DT = 0.01


def state_of(robot: P2osRobot) -> str:
    """The link state, read afresh (a plain comparison would let the type checker narrow it for good)."""
    return robot.state


class Bench:
    """A robot core, a client-side decoder and a hand-driven clock."""

    def __init__(self, robot: P2osRobot | None = None) -> None:
        self.robot = robot if robot is not None else P2osRobot()
        self.decoder = P2osDecoder("client")
        self.t = 0.0
        self.robot.step(self.t)

    def send(self, command: Command | int, argument: int | None = None) -> None:
        self.robot.receive_data(encode_command(command, argument))

    def run(
        self,
        seconds: float,
        *,
        pulse: float | None = None,
        repeat: tuple[tuple[Command, int], ...] = (),
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Step the robot for ``seconds`` in 10 ms steps, sending PULSE every ``pulse`` s if given; or, with
        ``repeat``, those commands instead (a live client renews its velocity commands, as ARIA does every 0.5 s);
        stop early once ``until`` is true."""
        next_pulse = self.t + pulse if pulse else math.inf
        for _ in range(round(seconds / DT)):
            self.t += DT
            self.robot.step(self.t)
            if until is not None and until():
                return
            if self.t >= next_pulse - 1e-9:
                for command, argument in repeat or ((Command.PULSE, None),):
                    self.send(command, argument)
                next_pulse += pulse or math.inf

    def packets(self) -> list[Event]:
        data = self.robot.data_to_send()
        if data:  # b"" would tell the decoder the stream ended
            self.decoder.receive_data(data)
        return list(self.decoder.events())

    def sips(self) -> list[Sip]:
        return [p for p in self.packets() if isinstance(p, Sip)]

    @staticmethod
    def sips_in(data: bytes) -> list[Sip]:
        """The SIPs in ``data`` (robot bytes), decoded by a decoder of their own."""
        decoder = P2osDecoder("client")
        decoder.receive_data(data)
        return [p for p in decoder.events() if isinstance(p, Sip)]

    def last_sip(self) -> Sip:
        self.run(0.1)
        sips = self.sips()
        assert sips, "no SIP"
        return sips[-1]

    def open(self, *, enable: bool = True) -> None:
        for packet in (SYNC0, SYNC1, SYNC2, OPEN):
            self.robot.receive_data(packet)
        if enable:
            self.robot.receive_data(ENABLE_1)
        self.robot.data_to_send()
        assert self.robot.state == "open"
        assert self.robot.motors_enabled == enable


def corridor(length: float = 6.0, width: float = 2.0) -> World:
    """A straight corridor along +x from x=0 to ``length``, closed at both ends, the robot at (1, 0) facing +x."""
    half = width / 2
    walls = [
        (0.0, -half, length, -half),
        (0.0, half, length, half),
        (0.0, -half, 0.0, half),
        (length, -half, length, half),
    ]
    return World(name="corridor", walls=np.array(walls), start=(1.0, 0.0, 0.0))


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


# ------------------------------------------------------------------------------------------------ watchdog


def test_watchdog_stops_and_disables_after_2_s_without_a_packet() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.9)
    assert bench.robot.motors_enabled and bench.robot.truth_velocity[0] > 0.25
    bench.run(0.2)
    assert not bench.robot.motors_enabled
    assert bench.robot.counters.watchdog_trips == 1
    bench.run(0.5)
    assert bench.robot.truth_velocity[0] == 0.0
    sips = bench.sips()
    assert not sips[-1].motors_enabled and not sips[-1].moving
    bench.run(5.0)
    assert bench.robot.counters.watchdog_trips == 1  # once per silence
    assert bench.robot.state == "open"  # the session stays open: SIPs keep coming
    assert bench.sips()


def test_pulse_never_keeps_a_velocity_going() -> None:
    # Decision (reference, "a keepalive must never keep an old motion command alive after the commanding program
    # has died"): PULSE (the same bytes as a new client's SYNC0) does not renew the watchdog under a velocity
    # command; commands do, as a live client renews them.
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.9, pulse=0.1)
    assert bench.robot.motors_enabled and bench.robot.truth_velocity[0] > 0.25
    bench.run(0.2, pulse=0.1)
    assert bench.robot.counters.watchdog_trips == 1 and not bench.robot.motors_enabled
    bench.run(0.5, pulse=0.1)
    assert bench.robot.truth_velocity == (0.0, 0.0)
    assert bench.robot.state == "open"  # SIPs go on
    # A client that renews its command keeps the robot going.
    bench.robot.receive_data(ENABLE_1 + VEL_300)
    bench.run(6.0, pulse=0.5, repeat=((Command.VEL, 300),))
    assert bench.robot.truth_velocity[0] == pytest.approx(0.3)
    assert bench.robot.counters.watchdog_trips == 1


def test_pulse_keeps_an_idle_robot_and_a_move_that_ends_by_itself() -> None:
    bench = Bench()
    bench.open()
    bench.run(6.0, pulse=0.5)  # idle: PULSEs alone keep the session and the motors
    assert bench.robot.motors_enabled and bench.robot.counters.watchdog_trips == 0
    bench.send(Command.SETV, 200)
    bench.send(Command.MOVE, 1000)  # 5 s at 0.2 m/s: longer than the watchdog time, but it ends by itself
    bench.run(7.0, pulse=0.5)
    assert bench.robot.truth_pose[0] == pytest.approx(1.0, abs=0.002)
    bench.send(Command.HEAD, 180)  # a heading too
    bench.run(4.0, pulse=0.5)
    assert abs(bench.robot.odometry_pose[2]) == pytest.approx(math.pi, abs=0.002)
    bench.send(Command.VEL, 300)
    bench.send(Command.STOP)  # a stop decelerating: PULSEs renew
    bench.run(3.0, pulse=0.5)
    assert bench.robot.motors_enabled and bench.robot.counters.watchdog_trips == 0
    bench.run(2.1)  # silence, even while idle
    assert bench.robot.counters.watchdog_trips == 1 and not bench.robot.motors_enabled


def test_after_the_watchdog_sync0_gets_stopped_sips_and_sync1_starts_a_new_handshake() -> None:
    # A client program died while the robot drove, and the next one on the same line (a serial port) keeps
    # sending SYNC0: before the watchdog it gets the SIPs of a moving robot, after it stopped SIPs (0x32) from the
    # moment the motors are disabled, and never an echo while the SIPs flow.
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(0.5)
    bench.packets()
    for _ in range(15):  # 1.5 s of SYNC0 from the new client, answered with moving SIPs only
        bench.robot.receive_data(SYNC0)
        bench.run(0.1)
    packets = bench.packets()
    assert packets and all(isinstance(p, Sip) and p.moving for p in packets)
    bench.run(0.1, until=lambda: bench.robot.counters.watchdog_trips == 1)  # the watchdog: 2 s after VEL
    bench.packets()
    for _ in range(5):
        bench.robot.receive_data(SYNC0)
        bench.run(0.1)
    packets = bench.packets()
    assert packets and all(isinstance(p, Sip) and not p.moving and not p.motors_enabled for p in packets)
    bench.robot.receive_data(SYNC1)  # unambiguous: the session ends, the handshake goes on
    assert bench.robot.state == "sync1"
    bench.robot.receive_data(SYNC2 + OPEN)
    bench.run(0.25)
    packets = bench.packets()
    assert packets[:2] == [SyncReply(1), SyncReply(2, "Pluto", "Pioneer", "p3dx")]
    assert [p.motors_enabled for p in packets if isinstance(p, Sip)] == [False] * 3
    bench.robot.receive_data(SYNC0)  # a renewed session: SYNC0 is a PULSE again
    assert bench.packets() == []


# ARIA's answers to its SYNCs, as bytes (the SYNC2 echo names the robot "Pluto", class Pioneer, subclass p3dx).
ECHO_SYNC0 = bytes.fromhex("FA FB 03 00 00 00")
ECHO_SYNC1 = bytes.fromhex("FA FB 03 01 00 01")
ECHO_SYNC2_PLUTO = bytes.fromhex("FA FB 16 02") + b"Pluto\x00Pioneer\x00p3dx\x00" + bytes.fromhex("CC 9E")
SIP_STOPPED, SIP_MOVING = 0x32, 0x33


def test_recorded_exchange_aria_closes_the_session_its_dead_predecessor_left_moving() -> None:
    # Bytes in and bytes out on a serial line, after a client died with the robot at 0.3 m/s: ARIA's SYNC0 gets
    # moving SIPs (0x33) until the watchdog disables the motors, stopped SIPs (0x32) from that moment, while the
    # wheels still slow down; its CLOSE ends the session (no more SIPs), and its SYNC0, SYNC1, SYNC2 then get their
    # echoes and nothing else.
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.0)
    bench.robot.data_to_send()
    sips: list[bytes] = []
    while not sips or sips[-1][3] == SIP_MOVING:
        bench.robot.receive_data(SYNC0)
        bench.run(0.1)
        out = bench.robot.data_to_send()
        assert out and ECHO_SYNC0 not in out  # SIPs, and no echo among them
        sips.append(out)
        assert len(sips) < 30, "the robot never said it stopped"
    last = bench.sips_in(sips[-1])
    assert bench.robot.counters.watchdog_trips == 1 and not bench.robot.motors_enabled
    assert last[0].left_velocity != 0 or last[0].right_velocity != 0  # the wheels still slow down: 0x32 all the same
    bench.robot.receive_data(CLOSE)
    assert bench.robot.data_to_send() == b""
    bench.run(0.5)
    assert bench.robot.data_to_send() == b"" and bench.robot.state == "closed"  # no SIP any more
    for sync, echo in ((SYNC0, ECHO_SYNC0), (SYNC1, ECHO_SYNC1), (SYNC2, ECHO_SYNC2_PLUTO)):
        bench.robot.receive_data(sync)
        assert bench.robot.data_to_send() == echo
        bench.run(0.1)
        assert bench.robot.data_to_send() == b""


class AriaOnSerial:
    """ARIA's connection loop (ArRobot::blockingConnect, asyncConnectHandler) on a serial line, against the core.

    The facts it follows: at the start it reads and drops what is waiting for 200 ms (its cycle time, 100 ms, times
    its connection cycle multiplier, 2). Each try sends SYNC<state> and reads *one* packet (waiting up to 1 s): a
    stopped SIP (0x32) makes it send CLOSE and read and drop packets until 200 ms after the try began, sending CLOSE
    again for each 0x32 among them, then start over at SYNC0; the echo of the SYNC sent moves it on; anything
    else starts it over. After the SYNC2 echo it sends OPEN. Between two tries it sleeps 80 ms (0.8 of its cycle
    time), and it gives up after 50 tries. Nothing tells the robot that the line changed hands: what the robot sent
    while ARIA was asleep waits in the line, in order.
    """

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.queue: list[Event] = []
        self.tries = 0
        self.closes = 0

    def _collect(self) -> None:
        self.queue += self.bench.packets()

    def _read_for(self, seconds: float) -> Event | None:
        """The first packet in the line, waiting up to ``seconds``."""
        end = self.bench.t + seconds
        while True:
            self._collect()
            if self.queue:
                return self.queue.pop(0)
            if self.bench.t >= end - 1e-9:
                return None
            self.bench.run(DT)

    def connect(self) -> SyncReply | None:
        """The SYNC2 echo once the session is open, or None if ARIA gave up."""
        start = self.bench.t
        while self.bench.t < start + 0.2 - 1e-9:  # the flush at the start
            self._read_for(start + 0.2 - self.bench.t)
        self.queue.clear()
        state = 0
        while self.tries < 50:
            self.tries += 1
            began = self.bench.t
            self.bench.send(state)
            packet = self._read_for(1.0)
            if isinstance(packet, Sip) and not packet.moving:
                self.bench.send(Command.CLOSE, 1)
                self.closes += 1
                while self.bench.t < began + 0.2 - 1e-9:
                    drained = self._read_for(began + 0.2 - self.bench.t)
                    if isinstance(drained, Sip) and not drained.moving:
                        self.bench.send(Command.CLOSE, 1)
                        self.closes += 1
                state = 0
            elif isinstance(packet, SyncReply) and packet.sync == state:
                state += 1
                if state == 3:
                    self.bench.send(Command.OPEN, 1)
                    return packet
            else:
                state = 0
            self.bench.run(0.08)
        return None


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.6, 1.0])
def test_aria_connects_on_a_serial_line_after_a_client_died_while_moving(delay: float) -> None:
    # A client turning the robot dies (nothing more from it, nothing tells the robot); ARIA opens the same line
    # 0 to 1 s later. It must synchronise, CLOSE the old session on a stopped SIP, and open a new one.
    bench = Bench()
    bench.open()
    for _ in range(3):  # ARIA's state reflector repeats its motion commands every 0.5 s
        bench.send(Command.VEL, 300)
        bench.send(Command.RVEL, 17)  # 0.3 rad/s
        bench.run(0.5)
    assert bench.robot.truth_velocity == pytest.approx((0.3, math.radians(17)))
    bench.run(delay)
    aria = AriaOnSerial(bench)
    reply = aria.connect()
    assert reply == SyncReply(2, "Pluto", "Pioneer", "p3dx"), f"ARIA gave up after {aria.tries} tries"
    assert aria.closes >= 1 and bench.robot.counters.watchdog_trips == 1
    bench.run(0.3)
    assert bench.robot.state == "open" and not bench.robot.motors_enabled
    assert any(isinstance(p, Sip) for p in bench.packets() + aria.queue)
    assert bench.robot.truth_velocity == (0.0, 0.0)


def test_sync1_ends_an_open_session_and_stops_the_robot() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.0)
    bench.packets()
    bench.robot.receive_data(SYNC1)
    assert bench.robot.state == "sync1" and not bench.robot.motors_enabled
    assert bench.packets() == [SyncReply(1)]
    bench.run(0.5)
    assert bench.robot.truth_velocity == (0.0, 0.0)
    assert bench.packets() == []  # no SIP outside a session
    bench.robot.receive_data(OPEN)  # OPEN in a session is ignored, and so is its repetition
    bench.robot.receive_data(OPEN)


def test_after_the_watchdog_motion_needs_enable_again() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(3.0)
    bench.robot.receive_data(VEL_300)  # ignored: the motors are off
    bench.run(1.0)
    assert bench.robot.truth_velocity[0] == 0.0
    bench.robot.receive_data(ENABLE_1 + VEL_300)
    bench.run(1.5, pulse=0.5)
    assert bench.robot.truth_velocity[0] == pytest.approx(0.3)


@pytest.mark.parametrize(("watchdog", "trips"), [(0.5, 1), (0.0, 0)])
def test_watchdog_time_is_configurable_and_zero_turns_it_off(watchdog: float, trips: int) -> None:
    bench = Bench(P2osRobot(watchdog=watchdog))
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(0.45)
    assert bench.robot.motors_enabled
    bench.run(0.1)
    assert bench.robot.counters.watchdog_trips == trips
    assert bench.robot.motors_enabled == (trips == 0)


def test_link_timeout_closes_a_silent_session() -> None:
    bench = Bench(P2osRobot(link_timeout=3.0))
    bench.open()
    bench.run(2.9)
    assert bench.robot.state == "open"
    bench.run(0.2)
    assert state_of(bench.robot) == "closed"
    bench.packets()
    bench.robot.receive_data(SYNC0)
    assert bench.packets() == [SyncReply(0)]


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


# ------------------------------------------------------------------------------------------------ session


def test_a_robot_still_open_answers_sync0_with_sips_until_close() -> None:
    # On a serial line nothing tells the robot that its client died: a new client's SYNC0 (a PULSE to the robot)
    # gets SIPs, and it must CLOSE and synchronise again.
    bench = Bench()
    bench.open()
    bench.run(0.3, pulse=0.1)
    bench.packets()
    bench.robot.receive_data(SYNC0)  # a new client
    bench.run(0.3)
    packets = bench.packets()
    assert packets and all(isinstance(p, Sip) for p in packets)
    assert bench.robot.state == "open"
    bench.robot.receive_data(CLOSE)
    assert state_of(bench.robot) == "closed"
    bench.run(0.3)
    assert bench.packets() == []
    bench.robot.receive_data(SYNC0 + SYNC1 + SYNC2 + OPEN)
    bench.run(0.25)
    packets = bench.packets()
    assert packets[:3] == [SyncReply(0), SyncReply(1), SyncReply(2, "Pluto", "Pioneer", "p3dx")]
    assert len([p for p in packets if isinstance(p, Sip)]) == 3


@pytest.mark.parametrize("state", ["sync2", "open"])
def test_end_of_stream_ends_the_session_and_stops_the_robot(state: str) -> None:
    # A TCP client that went away without CLOSE (its program died): the robot must not drive on.
    bench = Bench()
    if state == "open":
        bench.open()
        bench.robot.receive_data(VEL_300)
        bench.run(1.0)
        assert bench.robot.truth_velocity[0] > 0.25
    else:
        bench.robot.receive_data(SYNC0 + SYNC1 + SYNC2)
    bench.robot.receive_data(b"")
    assert bench.robot.state == "closed" and not bench.robot.motors_enabled
    bench.run(0.5)
    assert bench.robot.truth_velocity == (0.0, 0.0)
    assert bench.packets() == []
    bench.robot.receive_data(SYNC0)  # the next client synchronises at once
    assert bench.packets() == [SyncReply(0)]
    assert bench.robot.counters.sessions_ended == 1


def test_close_stops_the_robot_and_disables_the_motors() -> None:
    bench = Bench()
    bench.open()
    bench.robot.receive_data(VEL_300)
    bench.run(1.0)
    bench.robot.receive_data(CLOSE)
    bench.run(1.0)
    assert not bench.robot.motors_enabled
    assert bench.robot.truth_velocity == (0.0, 0.0)


def test_end_of_stream_drops_a_partial_packet_and_pending_output() -> None:
    bench = Bench()
    bench.open()
    bench.run(0.5)
    bench.robot.receive_data(VEL_300[:4])
    bench.robot.receive_data(b"")
    assert bench.robot.data_to_send() == b""
    bench.robot.receive_data(VEL_300[4:] + SYNC0)  # the rest of the old packet is garbage now
    assert bench.packets() == [SyncReply(0)]
    assert bench.robot.counters.sessions_ended == 1
    assert bench.robot.counters.garbage_bytes == len(VEL_300)  # the partial packet, then the rest of it


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
