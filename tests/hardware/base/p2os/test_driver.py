"""The P2OS client driver against a scripted fake robot injected where the port is opened (``serial_for_url``).

The fake robot is a serial-port double: what the driver writes is decoded as commands (the codec's robot side) and
answered at once (SYNC echoes, CONFIGpac); while a session is open it sends a SIP every few milliseconds. Its
script says how it misbehaves: silent, still open from an earlier session, noisy, e-stop engaged, deaf at all baud
rates but one. Waits are on conditions (``wait_until``, ``wait_for_sip``), never on fixed sleeps.
"""

from __future__ import annotations

import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import serial  # type: ignore[import-untyped]

from pluto.errors import PlutoError
from pluto.hardware.base.p2os import (
    Command,
    CommandPacket,
    ConfigPacket,
    P2osDecoder,
    Sip,
    SonarReading,
    SyncReply,
    UnknownRobotWarning,
    robot_params,
)
from pluto.hardware.base.p2os.driver import (
    P2osConnectError,
    P2osDriver,
    P2osError,
    P2osLinkError,
    P2osState,
)
from tests.helpers import free_tcp_port, wait_until

FAST = {"handshake_timeout": 0.1, "handshake_retries": 2}


class FakeRobot:
    """A scripted Pioneer behind a fake serial port.

    Args:
        subclass, name, robot_class: what the SYNC2 echo says.
        silent: never answer anything.
        start_open: a session is still open from an earlier client (SIPs flow before any handshake).
        estop: the e-stop is engaged: ENABLE 1 does not enable the motors.
        garbage: put garbage and packets with bad checksums between the SIPs.
        baud: the only baud rate it answers at (None: any).
        sip_period: s between SIPs.
        trans_vel_top, rot_vel_top: what its CONFIGpac says (mm/s, deg/s).
    """

    def __init__(
        self,
        *,
        subclass: str = "p3dx",
        name: str = "Fakey",
        robot_class: str = "Pioneer",
        silent: bool = False,
        start_open: bool = False,
        estop: bool = False,
        garbage: bool = False,
        baud: int | None = None,
        sip_period: float = 0.02,
        trans_vel_top: int = 1500,
        rot_vel_top: int = 300,
    ) -> None:
        self.subclass, self.name, self.robot_class = subclass, name, robot_class
        self.silent = silent
        self.estop = estop
        self.garbage = garbage
        self.answer_baud = baud
        self.sip_period = sip_period
        self.trans_vel_top, self.rot_vel_top = trans_vel_top, rot_vel_top
        self.params = robot_params(subclass) if subclass in ("p3dx", "p3at", "p2dx") else robot_params("p3dx")
        self.session_open = start_open
        self.synced = 0
        self.motors = False
        self.mute = False
        self.vel = 0  # mm/s
        self.rvel = 0  # deg/s
        self.x_mm = 0.0
        self.theta_rad = 0.0
        self.received: list[tuple[float, CommandPacket]] = []
        self.open_kwargs: list[dict[str, Any]] = []
        self.baudrate = 9600
        self.timeout: float | None = None
        self.is_open = False
        self._decoder = P2osDecoder("robot")
        self._out = bytearray()
        self._cond = threading.Condition()
        self._rng = random.Random(7)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- the serial side (what the driver sees) -----------------------------------------------------------------

    def open_port(self, url: str, **kwargs: Any) -> FakeRobot:
        self.open_kwargs.append({"url": url, **kwargs})
        self.baudrate = kwargs.get("baudrate", 9600)
        self.timeout = kwargs.get("timeout")
        self.mute = False
        self._decoder = P2osDecoder("robot")
        with self._cond:
            self._out.clear()
            self.is_open = True
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="fake-robot")
            self._thread.start()
        return self

    @property
    def in_waiting(self) -> int:
        if not self.is_open:
            raise serial.PortNotOpenError()
        return len(self._out)

    def read(self, size: int = 1) -> bytes:
        deadline = time.monotonic() + (self.timeout if self.timeout is not None else 1.0)
        with self._cond:
            while not self._out and self.is_open:
                left = deadline - time.monotonic()
                if left <= 0:
                    return b""
                self._cond.wait(left)
            if not self.is_open:
                raise serial.SerialException("device disconnected")
            data = bytes(self._out[:size])
            del self._out[:size]
            return data

    def write(self, data: bytes) -> int:
        if not self.is_open:
            raise serial.SerialException("write to a closed port")
        if self.answer_baud is not None and self.baudrate != self.answer_baud:
            return len(data)  # line noise at the wrong baud rate: nothing understood
        self._decoder.receive_data(data)
        for event in self._decoder.events():
            if isinstance(event, CommandPacket):
                self.received.append((time.monotonic(), event))
                self._on_command(event)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with self._cond:
            self.is_open = False
            self._cond.notify_all()

    # -- the robot side -----------------------------------------------------------------------------------------

    def drop_link(self) -> None:
        """The cable is pulled: the driver's next read fails."""
        self.close()

    def shutdown(self) -> None:
        self._stop.set()
        self.close()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _send(self, packet: bytes) -> None:
        if self.silent or self.mute:
            return
        with self._cond:
            if self.is_open:
                self._out += packet
                self._cond.notify_all()

    def _on_command(self, packet: CommandPacket) -> None:
        command, argument = packet.command, packet.argument
        if command == 0:
            if not self.session_open:
                self.synced = 0
                self._send(SyncReply(0).encode())
        elif command == 1:
            if not self.session_open and self.synced == 2:
                self.session_open = True
            elif not self.session_open:
                self.synced = 1
                self._send(SyncReply(1).encode())
        elif command == 2:
            if self.session_open:
                self.session_open, self.synced, self.motors = False, 0, False
            else:
                self.synced = 2
                self._send(SyncReply(2, self.name, self.robot_class, self.subclass).encode())
        elif command == Command.CONFIG:
            self._send(
                ConfigPacket(
                    robot_type=self.robot_class,
                    subtype=self.subclass,
                    name=self.name,
                    rot_vel_top=self.rot_vel_top,
                    trans_vel_top=self.trans_vel_top,
                    watchdog=2000,
                ).encode()
            )
        elif command == Command.ENABLE:
            self.motors = bool(argument) and not self.estop
        elif command == Command.VEL:
            assert isinstance(argument, int)
            self.vel = argument
        elif command == Command.RVEL:
            assert isinstance(argument, int)
            self.rvel = argument
        elif command == Command.SETO:
            self.x_mm, self.theta_rad = 0.0, 0.0

    def _run(self) -> None:
        while not self._stop.wait(self.sip_period):  # the robot's own SIP cycle
            if not (self.session_open and self.is_open):
                continue
            self.x_mm += self.vel * self.sip_period if self.motors else 0.0
            self.theta_rad += math.radians(self.rvel) * self.sip_period if self.motors else 0.0
            sip = Sip(
                moving=self.motors and (self.vel != 0 or self.rvel != 0),
                x=self.params.m_to_position(self.x_mm / 1000.0) & 0x7FFF,
                theta=self.params.rad_to_heading(self.theta_rad),
                left_velocity=self.vel if self.motors else 0,
                right_velocity=self.vel if self.motors else 0,
                battery=124,
                stall_bumpers=0x0200,  # the first front bumper switch
                flags=(Sip.MOTORS_ENABLED if self.motors else 0) | (Sip.ESTOP if self.estop else 0),
                sonars=(SonarReading(3, 1000), SonarReading(40, 7)),  # sonar 40 does not exist on a p3dx
            )
            packet = sip.encode()
            if self.garbage:
                corrupted = bytearray(packet)
                corrupted[5] ^= 0xFF
                noise = bytes(self._rng.randrange(256) for _ in range(7))
                packet = noise + bytes(corrupted) + b"\xfa\xfb\xff" + packet
            self._send(packet)

    # -- what it received ---------------------------------------------------------------------------------------

    def commands(self) -> list[tuple[Command, int | bytes | None]]:
        return [(p.command, p.argument) for _, p in list(self.received)]


@pytest.fixture
def robots(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeRobot]]:
    """Make a fake robot and inject it where the driver opens its port."""
    made: list[FakeRobot] = []

    def make(**kwargs: Any) -> FakeRobot:
        robot = FakeRobot(**kwargs)
        made.append(robot)
        monkeypatch.setattr(serial, "serial_for_url", robot.open_port)
        return robot

    yield make
    for robot in made:
        robot.shutdown()


@pytest.fixture
def drivers() -> Iterator[Callable[..., P2osDriver]]:
    """Make drivers; every one is closed after the test, and none may leave a thread behind."""
    made: list[P2osDriver] = []

    def make(url: str = "socket://127.0.0.1:8101", **kwargs: Any) -> P2osDriver:
        driver = P2osDriver(url, **{**FAST, **kwargs})
        made.append(driver)
        return driver

    yield make
    for driver in made:
        driver.close()
    leftovers = [t.name for t in threading.enumerate() if t.name.startswith("p2os-")]
    assert not leftovers, f"threads left running: {leftovers}"


def first_index(commands: list[tuple[Command, Any]], wanted: tuple[Command, Any], start: int = 0) -> int:
    return commands.index(wanted, start)


# --------------------------------------------------------------------------------------------------- handshake


def test_handshake_and_model_from_sync2(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots(subclass="p3at", name="Atty")
    driver = drivers("socket://127.0.0.1:8101")
    driver.connect()
    assert driver.connected
    assert robot.open_kwargs[0]["url"] == "socket://127.0.0.1:8101"
    assert robot.open_kwargs[0]["baudrate"] == 9600 and robot.open_kwargs[0]["timeout"] > 0
    assert (driver.robot_name, driver.robot_class, driver.robot_subclass) == ("Atty", "Pioneer", "p3at")
    assert driver.params.subclass == "p3at"
    assert driver.max_velocity == pytest.approx(1.2)
    assert driver.max_rot_velocity == pytest.approx(math.radians(300))  # the CONFIGpac's RotVelTop
    assert driver.config is not None and driver.config.watchdog == 2000
    assert robot.commands()[:8] == [
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
        (Command.OPEN, 1),
        (Command.CONFIG, 1),
        (Command.SETV, 1200),
        (Command.SETRV, 300),
        (Command.ENABLE, 1),
    ]
    state = driver.wait_for_sip(1.0)
    assert isinstance(state, P2osState)
    wait_until(lambda: (s := driver.state) is not None and s.motors_enabled, timeout=2)
    state = driver.state
    assert state is not None
    assert state.battery_voltage == pytest.approx(12.4)
    assert state.front_bumper and not state.rear_bumper and not state.stalled
    assert len(state.sonar_ranges) == 16  # the p3at's ring; reading 40 was out of range and ignored
    assert state.sonar_ranges[3] == pytest.approx(1.0)  # RangeConvFactor 1.0 on a p3at
    assert math.isinf(state.sonar_ranges[0])
    assert driver.statistics().connects == 1


def test_explicit_model_overrides_the_robot(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robots(subclass="p3at")
    driver = drivers(model="p2dx")
    driver.connect()
    assert driver.params.subclass == "p2dx"
    assert driver.robot_subclass == "p3at"


def test_unknown_subclass_falls_back_to_defaults_with_a_warning(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver], caplog: pytest.LogCaptureFixture
) -> None:
    robots(subclass="r2d2")
    driver = drivers()
    with caplog.at_level(logging.WARNING, logger="pluto.p2os"), pytest.warns(UnknownRobotWarning):
        driver.connect()
    assert driver.params.subclass == "p3dx" and not driver.params.known
    assert any("unknown robot subclass 'r2d2'" in r.getMessage() for r in caplog.records)


def test_stale_session_is_closed_and_resynchronised(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robot = robots(start_open=True)
    driver = drivers()
    driver.connect()
    commands = robot.commands()
    close = first_index(commands, (Command.CLOSE, 1))
    assert commands[0] == (Command.SYNC0, None)  # answered with SIPs: the robot was still open
    assert commands[close + 1 : close + 5] == [
        (Command.SYNC0, None),
        (Command.SYNC1, None),
        (Command.SYNC2, None),
        (Command.OPEN, 1),
    ]
    assert driver.connected and driver.statistics().stale_sessions == 1
    assert driver.wait_for_sip(1.0) is not None


def test_silent_robot_fails_with_a_clear_error_and_no_hang(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robot = robots(silent=True)
    driver = drivers()
    with pytest.raises(P2osConnectError, match=re.escape("no robot responding on socket://127.0.0.1:8101")) as info:
        driver.connect()  # gives up after its tries (a hang would meet the test's time limit)
    assert isinstance(info.value, PlutoError)
    assert not driver.connected and not robot.is_open  # the port was closed again
    assert [c for c, _ in robot.commands()] == [Command.SYNC0, Command.SYNC0]  # two tries, no baud cycling
    assert robot.baudrate == 9600


def test_nothing_listening_fails_with_a_clear_error(drivers: Callable[..., P2osDriver]) -> None:
    url = f"socket://127.0.0.1:{free_tcp_port()}"
    driver = drivers(url)
    with pytest.raises(P2osConnectError, match=re.escape(f"cannot open {url}")):
        driver.connect()


def test_serial_device_cycles_baud_rates(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots(baud=19200)
    driver = drivers("/dev/ttyFAKE0")
    driver.connect()
    assert driver.connected and robot.baudrate == 19200  # 9600 and 38400 got no answer first


# --------------------------------------------------------------------------------------------------- robustness


def test_garbage_and_bad_checksums_are_counted_not_raised(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robots(garbage=True)
    driver = drivers()
    driver.connect()
    first = driver.wait_for_sip(1.0)
    assert first is not None
    wait_until(lambda: driver.statistics().sips >= first.sips + 10, timeout=3)
    stats = driver.statistics()
    assert stats.bad_checksum >= 10 and stats.garbage_bytes > 0
    assert stats.handler_errors == 0
    assert driver.connected
    state = driver.state
    assert state is not None and state.battery_voltage == pytest.approx(12.4)


def test_link_loss_is_noticed_and_the_driver_reconnects(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver], caplog: pytest.LogCaptureFixture
) -> None:
    robot = robots()
    driver = drivers(link_timeout=0.3)
    driver.connect()
    with caplog.at_level(logging.INFO, logger="pluto.p2os"):
        robot.drop_link()  # a serial error on the next read; the robot itself stays open (SIPs answer SYNC0)
        wait_until(lambda: driver.statistics().reconnects == 1, timeout=3)
        assert driver.connected
        # a robot that stops talking (but stays open): the link timeout notices it
        robot.mute = True
        wait_until(lambda: driver.statistics().reconnects == 2, timeout=5)
    stats = driver.statistics()
    assert stats.link_losses == 2 and stats.stale_sessions == 2 and stats.connects == 3
    lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert len(lost) == 2 and "no packet for" in lost[1]
    assert driver.wait_for_sip(1.0) is not None


def test_commands_while_disconnected_raise(drivers: Callable[..., P2osDriver]) -> None:
    driver = drivers()
    with pytest.raises(P2osLinkError):
        driver.stop_motion()
    with pytest.raises(P2osLinkError):
        driver.set_velocity(0.1, 0.0)


# --------------------------------------------------------------------------------------------------- commands


def test_velocity_commands_are_clamped(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots()
    driver = drivers()
    driver.connect()
    robot.received.clear()
    driver.set_velocity(10.0, -100.0)
    driver.set_velocity(0.25, 0.5)
    driver.set_wheel_velocities(0.2, -5.0)
    assert robot.commands()[:5] == [
        (Command.VEL, 1500),
        (Command.RVEL, -300),  # the CONFIGpac's 1500 mm/s (less than the p3dx's 2.2 m/s) and 300 deg/s
        (Command.VEL, 250),
        (Command.RVEL, 29),
        (Command.VEL2, robot.params.vel2_argument(0.2, -1.5)),
    ]
    with pytest.raises(ValueError, match="finite"):
        driver.set_velocity(math.nan, 0.0)


@pytest.mark.parametrize(
    ("subclass", "config_top", "expected"),
    [
        ("p3dx", (9999, 9999), (2200, 360)),  # AMRISim reports 9999 for both: the model's and the driver's own
        ("p3dx", (500, 100), (500, 100)),  # a robot configured slower than its model: the CONFIGpac's
        ("p3at", (1500, 720), (1200, 360)),  # each limit taken from whichever is lower
        ("p3at", (0, 0), (1200, 360)),  # zero is no limit: ignored
    ],
)
def test_limits_are_the_lower_of_the_model_and_the_configpac(
    robots: Callable[..., FakeRobot],
    drivers: Callable[..., P2osDriver],
    subclass: str,
    config_top: tuple[int, int],
    expected: tuple[int, int],
) -> None:
    # Translation and rotation alike: the model table (the driver's 360 deg/s for rotation, which the table does
    # not give) and the robot's CONFIGpac TransVelTop / RotVelTop, the lower of the two.
    robot = robots(subclass=subclass, trans_vel_top=config_top[0], rot_vel_top=config_top[1])
    driver = drivers()
    driver.connect()
    speed, turn = expected
    assert (Command.SETV, speed) in robot.commands() and (Command.SETRV, turn) in robot.commands()
    assert driver.max_velocity == pytest.approx(speed / 1000.0)
    assert driver.max_rot_velocity == pytest.approx(math.radians(turn))
    robot.received.clear()
    driver.set_velocity(100.0, -100.0)
    driver.set_speed_profile(max_speed=100.0, max_turn_rate=100.0)  # never above the limits either
    assert robot.commands()[:4] == [
        (Command.VEL, speed),
        (Command.RVEL, -turn),
        (Command.SETV, speed),
        (Command.SETRV, turn),
    ]
    assert driver.max_velocity == pytest.approx(speed / 1000.0)
    assert driver.max_rot_velocity == pytest.approx(math.radians(turn))


def test_speed_profile_sends_setv_seta_setrv_setra(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robot = robots()
    driver = drivers()
    driver.connect()
    robot.received.clear()
    driver.set_speed_profile(
        max_speed=0.5, max_accel=0.3, max_decel=0.6, max_turn_rate=1.0, max_turn_accel=2.0, max_turn_decel=3.0
    )
    assert robot.commands()[:6] == [
        (Command.SETV, 500),
        (Command.SETA, 300),
        (Command.SETA, -600),
        (Command.SETRV, 57),
        (Command.SETRA, 115),
        (Command.SETRA, -172),
    ]
    assert driver.max_velocity == 0.5
    robot.received.clear()
    driver.set_velocity(2.0, 0.0)
    assert robot.commands()[0] == (Command.VEL, 500)


def test_command_timeout_stops_once_while_pulses_go_on(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robot = robots()
    driver = drivers(command_timeout=0.2, keepalive=0.05)
    driver.connect()
    robot.received.clear()
    driver.set_velocity(0.3, 0.1)
    # (not before the timeout, judged on the driver's clock: test_renewed_commands_do_not_time_out)
    wait_until(lambda: (Command.VEL, 0) in robot.commands(), timeout=10)
    commands = robot.commands()
    stop = commands.index((Command.VEL, 0))
    assert commands[stop + 1] == (Command.RVEL, 0)
    # PULSEs keep the link alive after the stop, and the stop is not repeated
    wait_until(lambda: robot.commands()[stop:].count((Command.PULSE, None)) >= 3, timeout=2)
    assert robot.commands().count((Command.VEL, 0)) == 1
    assert driver.statistics().command_timeouts == 1
    assert driver.statistics().keepalives >= 3


class ManualClock:
    """A driver's clock that moves only when the test says so."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_renewed_commands_do_not_time_out(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    # The command timeout is judged on the driver's clock, which the test moves: how late the test's own thread
    # runs on a busy machine does not count. Each wait for a SIP that arrives after the clock moved is a step of the
    # driver's timers at the new time (the reader steps them after every read).
    robot = robots()
    clock = ManualClock()
    driver = drivers(command_timeout=0.2, keepalive=0.05, clock=clock)
    driver.connect()
    robot.received.clear()
    for _ in range(8):  # a live commander renews its command well within the timeout: 1.2 s in all
        driver.set_velocity(0.3, 0.0)
        clock.t += 0.15
        assert driver.wait_for_sip(5.0) is not None
    assert (Command.VEL, 0) not in robot.commands()
    assert driver.statistics().command_timeouts == 0
    # a commander that is late (0.2 s since its last command) is stopped, once
    clock.t += 0.05
    assert driver.wait_for_sip(5.0) is not None
    commands = robot.commands()
    assert commands.count((Command.VEL, 0)) == 1
    assert commands[commands.index((Command.VEL, 0)) + 1] == (Command.RVEL, 0)
    assert driver.statistics().command_timeouts == 1


def test_close_says_goodbye_in_order_once(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots()
    driver = drivers()
    driver.connect()
    driver.set_velocity(0.2, 0.0)
    robot.received.clear()
    driver.close()
    assert robot.commands()[-4:] == [(Command.VEL, 0), (Command.RVEL, 0), (Command.ENABLE, 0), (Command.CLOSE, 1)]
    assert not robot.is_open and not driver.connected
    count = len(robot.received)
    driver.close()  # idempotent
    assert len(robot.received) == count
    assert driver.wait_for_sip(0.1) is None
    with pytest.raises(P2osError, match="was closed"):
        driver.connect()


def test_context_manager_connects_and_closes(robots: Callable[..., FakeRobot]) -> None:
    robot = robots()
    with P2osDriver("socket://127.0.0.1:8101", handshake_timeout=0.1, handshake_retries=2) as driver:
        assert driver.connected
    assert robot.commands()[-1] == (Command.CLOSE, 1)


def test_estop_makes_enable_motors_fail(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver], caplog: pytest.LogCaptureFixture
) -> None:
    robots(estop=True)
    driver = drivers()
    driver.connect()
    assert driver.wait_for_sip(1.0) is not None
    with caplog.at_level(logging.WARNING, logger="pluto.p2os"):
        assert driver.enable_motors(True) is False
    assert any("e-stop is engaged" in r.getMessage() for r in caplog.records)
    state = driver.state
    assert state is not None and state.estop and not state.motors_enabled


def test_enable_motors_reports_the_outcome(
    robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]
) -> None:
    robot = robots()
    driver = drivers()
    driver.connect()
    assert driver.enable_motors(False) is True
    assert not robot.motors
    assert driver.enable_motors(True) is True
    state = driver.state
    assert state is not None and state.motors_enabled


def test_odometry_reset_and_set(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots()
    driver = drivers()
    driver.connect()
    wait_until(lambda: (s := driver.state) is not None and s.motors_enabled, timeout=2)
    driver.set_velocity(0.5, 0.0)
    wait_until(lambda: (s := driver.state) is not None and s.x > 0.1, timeout=3)
    driver.stop_motion()
    wait_until(lambda: robot.vel == 0, timeout=1)
    state = driver.wait_for_sip(1.0)
    assert state is not None
    driver.set_odometry(1.0, 2.0, math.pi / 2)
    state = driver.wait_for_sip(1.0)
    assert state is not None
    assert (state.x, state.y, state.theta) == pytest.approx((1.0, 2.0, math.pi / 2), abs=0.01)
    driver.reset_odometry()
    assert (Command.SETO, None) in robot.commands()
    wait_until(lambda: driver.statistics().sips >= state.sips + 3, timeout=2)
    after = driver.state
    assert after is not None
    assert (after.x, after.y, after.theta) == pytest.approx((0.0, 0.0, 0.0), abs=0.01)
    # the frame set by set_odometry moves with the robot
    driver.set_odometry(1.0, 0.0, math.pi / 2)
    driver.set_velocity(0.5, 0.0)
    wait_until(lambda: (s := driver.state) is not None and s.y > 0.1, timeout=3)
    driver.stop_motion()
    moved = driver.state
    assert moved is not None and moved.x == pytest.approx(1.0, abs=0.01)


def test_request_config(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robots()
    driver = drivers()
    driver.connect()
    config = driver.request_config(1.0)
    assert config is not None and config.rot_vel_top == 300
    assert driver.statistics().configs >= 2


def test_pause_writer_sends_nothing(robots: Callable[..., FakeRobot], drivers: Callable[..., P2osDriver]) -> None:
    robot = robots()
    driver = drivers(keepalive=0.05)
    driver.connect()
    wait_until(lambda: (Command.PULSE, None) in robot.commands(), timeout=2)
    driver.pause_writer()
    count = len(robot.received)
    driver.set_velocity(0.1, 0.0)
    for _ in range(5):
        assert driver.wait_for_sip(1.0) is not None
    assert len(robot.received) == count
    driver.close()  # a hung program says no goodbye
    assert len(robot.received) == count
