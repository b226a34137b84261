"""The sans-I/O P2OS client, driven with byte strings and chosen times: no port, no thread, no clock.

Most tests join the client to the sans-I/O robot (:class:`.robot.P2osRobot`) by a :class:`Wire` the test holds: it
carries the client's bytes to the robot and the robot's back, can lose either direction or chosen commands, and
hears the robot only at one baud rate if asked. The others feed the client hand-made packets.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from typing import Any

import pytest

from pluto.hardware.base.p2os import (
    NEED_DATA,
    Command,
    CommandPacket,
    ConfigPacket,
    LocalProtocolError,
    P2osDecoder,
    Sip,
    SyncReply,
    encode_command,
)
from pluto.hardware.base.p2os.client import (
    CONFIG_REPEAT,
    CONFIG_WAIT,
    DEFAULT_MAX_ROT_VELOCITY,
    DRAIN_QUIET,
    RECONNECT_BACKOFF,
    SERIAL_BAUD_RATES,
    BaudRate,
    ClientEvent,
    Connected,
    ConnectFailed,
    LinkLost,
    P2osClient,
    P2osLinkError,
    Reconnecting,
    handshake_table,
)
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot

T0 = 128.0
DT = 1 / 128  # s; it, T0 and most timeouts here are binary fractions, so sums of times are exact
FAST = {"handshake_timeout": 0.125, "handshake_retries": 2}
Sent = tuple[float, Command, int | bytes | None]


class Wire:
    """The client and a robot joined by a wire in the test's hands, on the test's clock.

    Args:
        client: the client under test.
        robot: the robot at the other end.
        robot_baud: the only baud rate at which the robot understands the client (None: any).
    """

    def __init__(self, client: P2osClient, robot: P2osRobot, *, robot_baud: int | None = None) -> None:
        self.client = client
        self.robot = robot
        self.now = T0
        self.baud = client.baud
        self.robot_baud = robot_baud
        self.deaf = False  # the robot hears nothing
        self.mute = False  # the client hears nothing
        self.drop: Callable[[CommandPacket], bool] = lambda packet: False  # commands lost on the way
        self.sent: list[Sent] = []  # every command the client wrote, decoded
        self.events: list[tuple[float, ClientEvent]] = []
        self.phases: list[str] = []
        self._decoder = P2osDecoder("robot")
        robot.step(self.now)

    def collect(self) -> None:
        """The client's events (a BaudRate applies to the wire), then its output to the robot."""
        for event in self.client.events():
            self.events.append((self.now, event))
            if isinstance(event, BaudRate):
                self.baud = event.baud
        data = self.client.data_to_send()
        if not data:
            return
        self._decoder.receive_data(data)
        heard = bytearray()
        for packet in self._decoder.events():
            assert isinstance(packet, CommandPacket)
            self.sent.append((self.now, packet.command, packet.argument))
            if not self.drop(packet):
                heard += packet.encode()
        if heard and not self.deaf and self.robot_baud in (None, self.baud):
            self.robot.receive_data(bytes(heard))

    def exchange(self) -> None:
        """Everything at ``now``: the client's output to the robot, the robot's to the client, the client's timers."""
        self.collect()
        self.robot.step(self.now)
        answer = self.robot.data_to_send()
        if answer and not self.mute:
            self.client.receive_data(answer, self.now)
        self.client.step(self.now)
        self.collect()
        if not self.phases or self.phases[-1] != self.client.phase:
            self.phases.append(self.client.phase)

    def command(self, action: Callable[[float], Any]) -> Any:
        """A call of the client's at ``now``, its output on the wire at once."""
        result = action(self.now)
        self.collect()
        return result

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / DT)):
            self.now += DT
            self.exchange()

    def run_until(self, predicate: Callable[[], bool], limit: float = 10.0) -> float:
        """Exchange every DT until ``predicate``; the time it became true."""
        end = self.now + limit
        while not predicate():
            assert self.now < end, f"not within {limit} s (phase {self.client.phase})"
            self.now += DT
            self.exchange()
        return self.now

    def connect(self) -> None:
        self.client.connect(self.now)
        self.phases.append(self.client.phase)
        self.exchange()
        self.run_until(lambda: self.client.connected)

    def commands(self, since: float = -math.inf) -> list[tuple[Command, int | bytes | None]]:
        return [(command, argument) for t, command, argument in self.sent if t >= since]

    def times_of(self, command: Command, argument: int | bytes | None = None) -> list[float]:
        return [t for t, c, a in self.sent if (c, a) == (command, argument)]

    def events_of(self, kind: type[Any]) -> list[tuple[float, Any]]:
        return [(t, e) for t, e in self.events if isinstance(e, kind)]


def fast_client(**kwargs: Any) -> P2osClient:
    """A client with short handshake steps (0.125 s, two tries)."""
    return P2osClient("test-port", **{**FAST, **kwargs})


def wire(robot: P2osRobot | None = None, *, robot_baud: int | None = None, **kwargs: Any) -> Wire:
    return Wire(fast_client(**kwargs), robot or P2osRobot("p3dx"), robot_baud=robot_baud)


def lose_first(command: Command) -> Callable[[CommandPacket], bool]:
    """A wire filter that loses the first ``command`` (one without an argument for SYNC1: not OPEN)."""
    lost: list[CommandPacket] = []

    def drop(packet: CommandPacket) -> bool:
        if packet.command == command and not lost and (command != Command.SYNC1 or packet.argument is None):
            lost.append(packet)
            return True
        return False

    return drop


def packets(data: bytes) -> list[tuple[Command, int | bytes | None]]:
    if not data:
        return []
    decoder = P2osDecoder("robot")
    decoder.receive_data(data)
    found = []
    for packet in decoder.events():
        assert isinstance(packet, CommandPacket)
        found.append((packet.command, packet.argument))
    return found


ENABLED_SIP = Sip(flags=Sip.MOTORS_ENABLED, battery=125).encode()


def connect_by_hand(client: P2osClient, now: float, config: ConfigPacket | None, subclass: str = "p3dx") -> bytes:
    """Run the handshake with hand-made answers; what the client sent."""
    sent = bytearray()
    client.connect(now)
    for answer in (
        SyncReply(0).encode(),
        SyncReply(1).encode(),
        SyncReply(2, "Hand", "Pioneer", subclass).encode(),
        Sip(battery=125).encode(),
    ):
        sent += client.data_to_send()
        client.receive_data(answer, now)
    sent += client.data_to_send()
    if config is not None:
        client.receive_data(config.encode(), now)
    else:
        client.step(now + CONFIG_WAIT)
    client.receive_data(ENABLED_SIP + ENABLED_SIP, now + CONFIG_WAIT)
    sent += client.data_to_send()
    assert client.connected
    assert isinstance([*client.events()][-1], Connected)
    return bytes(sent)


# --------------------------------------------------------------------------------------------------- the table


def test_the_handshake_table_chains_sync_open_config_enable() -> None:
    table = handshake_table(0.5, 3)
    phase, path = "sync0", []
    while phase in table:
        path.append(phase)
        phase = table[phase].done  # type: ignore[assignment]
    assert path == ["sync0", "sync1", "sync2", "open", "config", "enable"] and phase == "connected"
    assert table["sync0"].exhausted == "next_baud" and table["open"].exhausted == "fail"
    assert table["config"].exhausted == "enable" and table["config"].limit == CONFIG_WAIT
    assert table["drain"].sends == ((Command.CLOSE, 1),) and table["drain"].done == "sync0"
    assert table["enable"].sends[-1] == (Command.ENABLE, 1)


# --------------------------------------------------------------------------------------------------- handshake


def test_handshake_happy_path() -> None:
    w = wire()
    assert w.client.phase == "idle" and not w.client.busy
    w.connect()
    assert w.commands()[:8] == [
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
        (Command.OPEN, 1),
        (Command.CONFIG, 1),
        (Command.SETV, 2200),  # the emulated p3dx reports the model's 2.2 m/s
        (Command.SETRV, 300),  # and 300 deg/s, below the client's 360
        (Command.ENABLE, 1),
    ]
    assert w.phases == ["sync0", "sync1", "sync2", "open", "config", "enable", "connected"]
    [(_, connected)] = w.events_of(Connected)
    assert connected == Connected("Pluto", "Pioneer", "p3dx", "p3dx", reconnection=False)
    assert w.robot.state == "open" and w.robot.motors_enabled
    assert w.robot.max_speeds == pytest.approx((2.2, math.radians(300)))
    state = w.client.state
    assert state is not None and state.motors_enabled and state.sips == w.client.sips
    stats = w.client.statistics()
    assert (stats.connects, stats.stale_sessions, stats.bad_checksum) == (1, 0, 0)
    assert w.client.silence(w.now) == 0.0


def test_robot_bytes_one_at_a_time_and_with_garbage() -> None:
    client = P2osClient("test-port")
    client.connect(T0)
    answer = b"\x00\xfa\x13garbage" + SyncReply(0).encode()
    for byte in answer:
        assert client.phase == "sync0"
        client.receive_data(bytes([byte]), T0)
    assert client.phase == "sync1"
    assert client.statistics().garbage_bytes == 10
    assert packets(client.data_to_send()) == [(Command.SYNC0, None), (Command.SYNC1, None)]


def test_a_lost_sync1_is_sent_again_after_the_step_timeout() -> None:
    w = wire()
    w.drop = lose_first(Command.SYNC1)
    w.connect()
    first, second = w.times_of(Command.SYNC1)
    assert second - first == 0.125  # handshake_timeout
    assert w.commands()[:4] == [
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
    ]


def test_a_late_echo_of_an_earlier_try_is_ignored() -> None:
    client = fast_client()
    client.connect(T0)
    client.receive_data(SyncReply(0).encode(), T0)
    client.receive_data(SyncReply(0).encode(), T0 + DT)  # the echo of a SYNC0 sent twice
    assert client.phase == "sync1"


def test_a_robot_still_open_gets_close_and_a_new_handshake() -> None:
    robot = P2osRobot("p3dx")
    earlier = wire(robot)
    earlier.connect()  # and then that program goes away without CLOSE
    w = Wire(fast_client(), robot)
    w.now = earlier.now
    w.connect()
    commands = w.commands()
    assert commands[:6] == [
        (Command.SYNC0, None),  # answered with SIPs: the robot was still open
        (Command.CLOSE, 1),
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
        (Command.OPEN, 1),
    ]
    assert w.phases[:3] == ["sync0", "drain", "sync0"]
    [close] = w.times_of(Command.CLOSE, 1)
    assert w.times_of(Command.SYNC0)[1] - close >= DRAIN_QUIET  # after the robot was quiet that long
    assert w.client.statistics().stale_sessions == 1 and w.client.connected


def test_a_robot_that_keeps_sending_sips_is_given_up_on() -> None:
    client = fast_client()
    client.connect(T0)
    now = T0
    closes = 0
    while client.busy:
        now += 0.0625
        client.receive_data(Sip().encode(), now)  # another client keeps the robot open
        client.step(now)
        closes += packets(client.data_to_send()).count((Command.CLOSE, 1))
        assert now < T0 + 30
    [failed] = [e for e in client.events() if isinstance(e, ConnectFailed)]
    assert "keeps sending SIPs although told to CLOSE 3 times" in failed.reason and not failed.reconnecting
    assert closes == 3 and client.phase == "idle"


def test_silence_fails_after_the_tries_with_the_reason() -> None:
    client = fast_client()
    client.connect(T0)
    client.step(T0 + 0.12)
    assert packets(client.data_to_send()) == [(Command.SYNC0, None)]
    client.step(T0 + 0.125)
    assert packets(client.data_to_send()) == [(Command.SYNC0, None)]
    client.step(T0 + 0.25)
    assert client.phase == "idle" and client.data_to_send() == b""
    event = client.next_event()
    assert isinstance(event, ConnectFailed)
    assert event.reason.startswith("no robot responding on test-port: no answer to SYNC0 within 0.125 s, 2 tries")
    assert client.next_event() is NEED_DATA


def test_a_serial_line_tries_each_baud_rate_and_names_them_when_it_fails() -> None:
    w = wire(serial=True, robot_baud=19200)
    w.connect()
    assert [e.baud for _, e in w.events_of(BaudRate)] == [38400, 19200]
    assert w.client.baud == 19200 and w.client.connected
    deaf = fast_client(serial=True)
    deaf.connect(T0)
    now, seen = T0, []
    while deaf.busy:
        now += 0.0625
        deaf.step(now)
        seen += [e for e in deaf.events()]
    assert [e.baud for e in seen if isinstance(e, BaudRate)] == list(SERIAL_BAUD_RATES[1:])
    assert isinstance(seen[-1], ConnectFailed) and "(baud 9600, 38400, 19200, 115200, 57600)" in seen[-1].reason


def test_no_sip_after_open_fails() -> None:
    client = fast_client()
    client.connect(T0)
    for sync in (SyncReply(0), SyncReply(1), SyncReply(2, "Mute", "Pioneer", "p3at")):
        client.receive_data(sync.encode(), T0)
    assert client.phase == "open" and client.params.subclass == "p3at"
    client.step(T0 + 0.125)
    assert packets(client.data_to_send())[-2:] == [(Command.OPEN, 1), (Command.OPEN, 1)]
    client.step(T0 + 0.25)
    [failed] = client.events()
    assert isinstance(failed, ConnectFailed) and "sent no SIP after OPEN (2 tries of 0.125 s)" in failed.reason


def test_config_timeout_goes_on_with_the_model_limits(caplog: pytest.LogCaptureFixture) -> None:
    w = wire()
    w.drop = lambda packet: packet.command == Command.CONFIG  # the robot never hears CONFIG
    with caplog.at_level(logging.INFO, logger="pluto.p2os"):
        w.connect()
    configs = w.times_of(Command.CONFIG, 1)
    assert len(configs) == 4
    assert [b - a for a, b in itertools.pairwise(configs)] == pytest.approx([CONFIG_REPEAT] * 3, abs=DT)
    [setv] = w.times_of(Command.SETV, 2200)
    assert setv - configs[0] == pytest.approx(CONFIG_WAIT, abs=DT)
    assert (Command.SETRV, 360) in w.commands()  # the client's own rotational limit: no CONFIGpac lowered it
    assert w.client.config is None and w.client.max_rot_velocity == DEFAULT_MAX_ROT_VELOCITY
    assert any("no CONFIGpac" in r.getMessage() for r in caplog.records)


def test_enable_is_sent_again_until_a_sip_shows_the_motors_enabled() -> None:
    w = wire(handshake_timeout=0.5)  # a try long enough for the robot's SIPs (every 0.1 s)
    w.drop = lose_first(Command.ENABLE)
    w.connect()
    assert len(w.times_of(Command.ENABLE, 1)) == 2 and w.robot.motors_enabled


def test_an_estop_ends_the_handshake_and_refuses_enable() -> None:
    robot = P2osRobot("p3dx")
    robot.press_estop()
    w = wire(robot)
    w.connect()
    assert len(w.times_of(Command.ENABLE, 1)) == 1  # the e-stop answers the ENABLE: no retry
    assert w.client.enable_motors(True, w.now) is False
    assert w.client.motors_outcome(False) is True


# --------------------------------------------------------------------------------------------------- timers


def test_keepalive_pulses_after_silence_and_never_renew_a_velocity() -> None:
    w = wire(command_timeout=1.0, keepalive=0.25)
    w.connect()
    w.command(lambda now: w.client.set_velocity(0.3, 0.0, now))
    commanded = w.now
    w.run(0.875)  # short of the command timeout
    since = w.commands(since=commanded + DT)
    assert set(since) == {(Command.PULSE, None)}  # PULSEs only: the command is not repeated
    pulses = [t - commanded for t in w.times_of(Command.PULSE) if t > commanded]
    assert pulses == [0.25, 0.5, 0.75]
    assert w.client.statistics().keepalives == len(pulses)


def test_a_command_renews_the_keepalive() -> None:
    client = P2osClient("test-port", keepalive=0.5)
    connect_by_hand(client, T0, None)
    start = T0 + CONFIG_WAIT
    client.stop_motion(start + 0.375)
    client.data_to_send()
    client.step(start + 0.75)
    assert client.data_to_send() == b""  # 0.375 s since the last write
    client.step(start + 0.875)
    assert packets(client.data_to_send()) == [(Command.PULSE, None)]


def test_the_command_timeout_stops_exactly_once() -> None:
    w = wire(command_timeout=0.5, keepalive=0.25)
    w.connect()
    w.command(lambda now: w.client.set_velocity(0.3, 0.1, now))
    commanded = w.now
    w.run(2.0)
    [stop] = w.times_of(Command.VEL, 0)
    assert stop - commanded == 0.5
    assert w.times_of(Command.RVEL, 0) == [stop]
    assert set(w.commands(since=stop + DT)) == {(Command.PULSE, None)}
    assert len(w.commands(since=stop + DT)) == 6  # every 0.25 s
    assert w.client.statistics().command_timeouts == 1
    # a renewed command is not stopped, and a stop is not a motion to time out
    renewed = w.now
    for _ in range(4):
        w.command(lambda now: w.client.set_velocity(0.3, 0.0, now))
        w.run(0.375)
    stopped = w.now
    w.command(w.client.stop_motion)
    w.run(1.0)
    assert [t for t in w.times_of(Command.VEL, 0) if t > renewed] == [stopped]
    assert w.client.statistics().command_timeouts == 1


def test_paused_output_writes_nothing_and_holds_the_timers() -> None:
    client = P2osClient("test-port", command_timeout=0.2, keepalive=0.1)
    connect_by_hand(client, T0, None)
    now = T0 + CONFIG_WAIT
    client.pause_output()
    client.set_velocity(0.2, 0.0, now)  # returns normally
    for k in range(1, 20):
        client.receive_data(ENABLED_SIP, now + k * 0.05)
        client.step(now + k * 0.05)
    client.close(now + 1.0)
    assert client.data_to_send() == b"" and client.statistics().command_timeouts == 0


def test_link_timeout_then_reconnection_with_a_doubling_back_off() -> None:
    w = wire(link_timeout=0.5)
    w.connect()
    w.mute = True  # the robot's answers stop arriving
    heard = w.now  # the last packet (the one that completed the handshake)
    w.run_until(lambda: bool(w.events_of(LinkLost)))
    [(lost_at, lost)] = w.events_of(LinkLost)
    assert lost_at - heard == 0.5 + DT  # more than link_timeout
    assert lost.reason.startswith("no packet for") and lost.reconnecting and w.client.phase == "backoff"
    assert w.client.reconnect_delay == RECONNECT_BACKOFF[0]
    w.run_until(lambda: len(w.events_of(Reconnecting)) == 8, limit=20.0)
    attempts = w.events_of(Reconnecting)
    assert [e.attempt for _, e in attempts] == list(range(1, 9))
    failures = [t for t, e in w.events_of(ConnectFailed) if e.reconnecting]
    delays = [attempts[0][0] - lost_at] + [r - f for (r, _), f in zip(attempts[1:], failures, strict=False)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0], abs=DT)
    w.mute = False  # the robot is heard again: it kept its session open, so CLOSE and a new handshake
    w.run_until(lambda: w.client.connected)
    [(_, connected)] = w.events_of(Connected)[1:]
    assert connected.reconnection
    stats = w.client.statistics()
    assert (stats.link_losses, stats.reconnects, stats.connects) == (1, 1, 2)


def test_a_port_error_loses_the_link_and_a_failed_reopen_backs_off() -> None:
    client = P2osClient("test-port")
    connect_by_hand(client, T0, None)
    client.receive_data(ENABLED_SIP, T0 + 1.5)
    client.port_failed("read failed: SerialException: device disconnected", T0 + 1.5)
    client.receive_data(ENABLED_SIP, T0 + 1.5)  # left-overs of the dead port: ignored
    [lost] = client.events()
    assert lost == LinkLost("read failed: SerialException: device disconnected", reconnecting=True)
    with pytest.raises(P2osLinkError, match="not connected"):
        client.set_velocity(0.1, 0.0, T0 + 1.55)
    client.step(T0 + 1.5625)
    assert client.next_event() is NEED_DATA  # the first back-off is 0.1 s
    client.step(T0 + 1.625)
    assert client.next_event() == Reconnecting(1, 9600)
    assert packets(client.data_to_send()) == [(Command.SYNC0, None)]  # for the port to be opened
    client.port_failed("cannot open test-port: Connection refused", T0 + 1.625)
    [failed] = client.events()
    assert isinstance(failed, ConnectFailed) and failed.reconnecting and "Connection refused" in failed.reason
    assert client.reconnect_delay == pytest.approx(0.2) and client.data_to_send() == b""
    client.step(T0 + 1.8125)
    assert client.next_event() is NEED_DATA
    client.step(T0 + 1.84375)
    assert client.next_event() == Reconnecting(2, 9600)


def test_without_reconnect_a_lost_link_stays_down() -> None:
    client = P2osClient("test-port", reconnect=False, link_timeout=0.5)
    connect_by_hand(client, T0, None)
    client.step(T0 + CONFIG_WAIT + 0.6)
    assert list(client.events()) == [LinkLost("no packet for 0.6 s", reconnecting=False)]
    client.step(T0 + 10.0)
    assert client.phase == "idle" and client.next_event() is NEED_DATA and not client.busy


# --------------------------------------------------------------------------------------------------- limits


@pytest.mark.parametrize(
    ("subclass", "config_top", "expected"),
    [
        ("p3dx", (9999, 9999), (2200, 360)),  # AMRISim reports 9999 for both: the model's and the client's own
        ("p3dx", (500, 100), (500, 100)),  # a robot configured slower than its model: the CONFIGpac's
        ("p3at", (1500, 720), (1200, 360)),  # each limit taken from whichever is lower
        ("p3at", (0, 0), (1200, 360)),  # zero is no limit: ignored
    ],
)
def test_limits_are_the_lower_of_the_model_and_the_configpac(
    subclass: str, config_top: tuple[int, int], expected: tuple[int, int]
) -> None:
    client = P2osClient("test-port")
    config = ConfigPacket(subtype=subclass, trans_vel_top=config_top[0], rot_vel_top=config_top[1])
    sent = packets(connect_by_hand(client, T0, config, subclass))
    speed, turn = expected
    assert sent[-3:] == [(Command.SETV, speed), (Command.SETRV, turn), (Command.ENABLE, 1)]
    client.set_velocity(100.0, -100.0, T0 + 2)
    client.set_wheel_velocities(-100.0, 0.25, T0 + 2)
    client.set_speed_profile(T0 + 2, max_speed=100.0, max_turn_rate=100.0)  # never above the limits either
    assert packets(client.data_to_send()) == [
        (Command.VEL, speed),
        (Command.RVEL, -turn),
        (Command.VEL2, client.params.vel2_argument(-speed / 1000.0, 0.25)),
        (Command.SETV, speed),
        (Command.SETRV, turn),
    ]
    assert client.max_velocity == pytest.approx(speed / 1000.0)
    assert client.max_rot_velocity == pytest.approx(math.radians(turn))


def test_a_speed_profile_lowers_the_clamp() -> None:
    client = P2osClient("test-port")
    connect_by_hand(client, T0, None)
    client.set_speed_profile(T0 + 2, max_speed=0.5, max_decel=0.6, max_turn_rate=1.0)
    client.set_velocity(2.0, 2.0, T0 + 2)
    assert packets(client.data_to_send()) == [
        (Command.SETV, 500),
        (Command.SETA, -600),
        (Command.SETRV, 57),
        (Command.VEL, 500),
        (Command.RVEL, 57),
    ]
    with pytest.raises(ValueError, match="positive"):
        client.set_speed_profile(T0 + 2, max_accel=0.0)
    with pytest.raises(ValueError, match="finite"):
        client.set_velocity(math.inf, 0.0, T0 + 2)


# --------------------------------------------------------------------------------------------------- commands


def test_commands_need_the_link() -> None:
    client = P2osClient("test-port")
    for command in (
        lambda: client.set_velocity(0.1, 0.0, T0),
        lambda: client.set_wheel_velocities(0.1, 0.1, T0),
        lambda: client.stop_motion(T0),
        lambda: client.enable_motors(True, T0),
        lambda: client.reset_odometry(T0),
        lambda: client.request_config(T0),
        lambda: client.set_speed_profile(T0, max_speed=0.1),
    ):
        with pytest.raises(P2osLinkError, match="not connected to the robot on test-port"):
            command()
    client.set_odometry(1.0, 2.0, 0.5)  # client side only: no link needed
    assert client.data_to_send() == b""


def test_close_says_goodbye_once_and_is_final() -> None:
    client = P2osClient("test-port")
    connect_by_hand(client, T0, None)
    client.close(T0 + 2)
    client.close(T0 + 3)
    assert client.data_to_send() == b"".join(
        encode_command(c, a) for c, a in ((Command.VEL, 0), (Command.RVEL, 0), (Command.ENABLE, 0), (Command.CLOSE, 1))
    )
    assert client.phase == "closed" and not client.connected
    client.receive_data(ENABLED_SIP, T0 + 4)
    client.step(T0 + 10)
    assert client.data_to_send() == b"" and client.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError, match="closed"):
        client.connect(T0 + 11)


def test_enable_motors_outcome_comes_with_the_sips() -> None:
    w = wire()
    w.connect()
    assert w.command(lambda now: w.client.enable_motors(False, now)) is None
    assert w.client.motors_outcome(False) is None  # the newest SIP still shows them enabled
    w.run_until(lambda: w.client.motors_outcome(False) is True)
    assert not w.robot.motors_enabled


def test_odometry_follows_the_robot_and_its_frames() -> None:
    brisk = MotionLimits(trans_acc=2.0, trans_decel=2.0, trans_acc_top=2.0)
    w = wire(robot=P2osRobot("p3dx", limits=brisk))
    w.connect()
    for _ in range(8):  # a live commander renews its command
        w.command(lambda now: w.client.set_velocity(0.5, 0.0, now))
        w.run(0.125)
    w.command(w.client.stop_motion)
    w.run(1.0)
    state = w.client.state
    assert state is not None and state.v == 0.0
    assert state.x == pytest.approx(w.robot.odometry_pose[0], abs=1e-3) and state.x > 0.3
    w.client.set_odometry(1.0, 2.0, math.pi / 2)
    w.command(w.client.reset_odometry)
    assert (Command.SETO, None) in w.commands(since=w.now)
    w.run(0.5)
    state = w.client.state
    assert state is not None and (state.x, state.y, state.theta) == pytest.approx((0.0, 0.0, 0.0), abs=1e-3)
    w.client.set_odometry(1.0, 2.0, math.pi / 2)
    w.run(0.2)
    state = w.client.state
    assert state is not None and (state.x, state.y, state.theta) == pytest.approx((1.0, 2.0, math.pi / 2), abs=1e-3)


def test_a_damaged_sip_whose_checksum_matches_does_not_move_the_odometry() -> None:
    # A 16-bit checksum passes about one damaged packet in 65,536: on a noisy link that happens. Such a SIP moves the
    # robot farther than it could go; the next one goes on from the pose before it, so it is dropped and counted.
    client = P2osClient("test-port")
    connect_by_hand(client, T0, None)
    now = T0 + CONFIG_WAIT
    for i in range(1, 4):
        client.receive_data(Sip(flags=Sip.MOTORS_ENABLED, x=20 * i, battery=125).encode(), now + i * 0.1)
    before = client.state
    assert before is not None
    damaged = Sip(flags=Sip.MOTORS_ENABLED, x=60 + 1536, theta=900, left_velocity=700, battery=125)  # its own sum
    client.receive_data(damaged.encode(), now + 0.4)
    assert client.state == before  # nothing of it used yet
    client.receive_data(Sip(flags=Sip.MOTORS_ENABLED, x=80, battery=125).encode(), now + 0.5)
    state = client.state
    assert state is not None and state.x == pytest.approx(80 * 0.485 / 1000) and state.theta == 0.0
    statistics = client.statistics()
    assert statistics.dropped_sips == 1 and statistics.large_deltas == 0


def test_request_config_is_answered() -> None:
    w = wire()
    w.connect()
    before = w.client.config
    w.command(w.client.request_config)
    w.exchange()
    assert w.client.config is not None and w.client.config is not before
    assert w.client.statistics().configs == 2


def test_unknown_subclass_falls_back_to_defaults_with_a_warning() -> None:
    from pluto.hardware.base.p2os import UnknownRobotWarning

    client = P2osClient("test-port")
    with pytest.warns(UnknownRobotWarning):
        connect_by_hand(client, T0, None, subclass="r2d2")
    assert client.params.subclass == "p3dx" and not client.params.known
    assert client.robot_subclass == "r2d2"
