"""The P2OS robot core's link, sans I/O: the watchdog, pulses, sessions left open, ARIA on a serial line, and the
end of a session."""

from __future__ import annotations

import math

import pytest

from pluto.hardware.base.p2os import (
    Command,
    Sip,
    SyncReply,
)
from pluto.hardware.base.p2os.decoder import Event
from pluto.hardware.base.p2os.robot import P2osRobot
from tests.hardware.base.p2os.robot_bench import (
    CLOSE,
    DT,
    ENABLE_1,
    OPEN,
    SYNC0,
    SYNC1,
    SYNC2,
    VEL_300,
    Bench,
    state_of,
)

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
