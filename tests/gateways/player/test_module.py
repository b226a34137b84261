"""The player module on the simulated robot (the ``sim`` profile, the drive and the gateway in this process, on
simulated time ``RATE`` times faster than the wall clock): a Player client drives it, reads its sensors, and
twenty clients share it.

Every wait is on data the client reads (rounds of the server) or on a bus value, never a fixed sleep.
"""

from __future__ import annotations

import itertools
import math
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pluto import limits, msgs
from pluto.bus import Bus
from pluto.gateways.player.module import PlayerModule, PlayerParams
from pluto.gateways.player.protocol import (
    NEED_DATA,
    ConnectionClosed,
    DeviceCode,
    Header,
    Message,
    MsgType,
    PlayerConnection,
    encode_message,
)
from pluto.gateways.player.structs import (
    DeviceList,
    DeviceRequest,
    LaserConfig,
    PidRequest,
    PositionCommand,
    RmpConfig,
    SetOdometry,
    SonarPower,
    SpeedProfile,
    VelocityMode,
)
from pluto.geometry import wrap_angle
from pluto.hardware.base.module import SimBase
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.movement.avoid.module import AvoidModule, AvoidModuleParams
from pluto.movement.drive.module import DriveModule, DriveModuleParams
from pluto.player.client import PlayerClient, RequestRefused
from pluto.runtime.config import Config
from pluto.runtime.module import Module
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from pluto.sim.world import load_world
from tests.scenarios.stack import ROOM, Collector

RATE = 4.0
START = (5.0, 5.0, 0.0)  # the robot's true start in ROOM (the east wall is 5 m ahead)


class Stack:
    """The simulated robot, the drive module and the player module; more modules can be added."""

    def __init__(self, bus: Bus, world: Path, profile_modules: tuple[str, ...] | None, rate: float) -> None:
        profile = load_profile("sim")
        if profile_modules is not None:
            entries = tuple(e for e in profile.entries if e.name in profile_modules)
            profile = type(profile)(**{**profile.__dict__, "entries": entries})
        profile = with_params(profile, "sim", world=str(world), rate=rate)
        self.bus = bus
        self.supervisor = Supervisor(bus, profile, Config(), one_process=True)
        self.modules: list[Module] = []
        self.supervisor.start()

    def add(self, module: Module) -> Module:
        module.start()
        self.modules.append(module)
        return module

    def stop(self) -> None:
        for module in reversed(self.modules):
            module.stop()
        self.supervisor.shutdown()


@pytest.fixture
def stack(bus: Bus, tmp_path: Path) -> Iterator[Callable[..., tuple[Stack, PlayerModule]]]:
    room = tmp_path / "room.xml"
    room.write_text(ROOM)
    started: list[Stack] = []

    def start(
        profile_modules: tuple[str, ...] | None = None,
        rate: float = RATE,
        use_sim_time: bool = True,
        command_timeout: float = 1.0,
    ) -> tuple[Stack, PlayerModule]:
        s = Stack(bus, room, profile_modules, rate)
        started.append(s)
        if profile_modules is None:
            s.add(DriveModule(bus, DriveModuleParams(use_sim_time=True)))
        params = PlayerParams(port=0, use_sim_time=use_sim_time, command_timeout=command_timeout)
        player = s.add(PlayerModule(bus, params))
        assert isinstance(player, PlayerModule)
        return s, player

    yield start
    for s in started:
        s.stop()


def read_until(client: PlayerClient, predicate: Callable[[], bool], rounds: int = 600) -> None:
    """Read rounds until ``predicate`` holds (at most ``rounds`` of them: 60 s of simulated time at 10 Hz)."""
    for _ in range(rounds):
        if predicate():
            return
        client.read()
    raise AssertionError(f"not reached within {rounds} rounds")


def drive_until(client: PlayerClient, vx: float, va: float, predicate: Callable[[], bool], rounds: int = 600) -> None:
    """Command (vx m/s, va rad/s) at every round read, as a libplayerc program does in its loop, until
    ``predicate`` holds (at most ``rounds`` rounds)."""
    for _ in range(rounds):
        if predicate():
            return
        client.set_speed(vx, va)
        client.read()
    raise AssertionError(f"not reached within {rounds} rounds")


def laser_range_to_room_wall(x: float, y: float, heading: float) -> float:
    """Distance from (x, y) along ``heading`` to the walls of the 10 m x 10 m ROOM."""
    c, s = math.cos(heading), math.sin(heading)
    candidates = []
    if c > 1e-9:
        candidates.append((10.0 - x) / c)
    if c < -1e-9:
        candidates.append(-x / c)
    if s > 1e-9:
        candidates.append((10.0 - y) / s)
    if s < -1e-9:
        candidates.append(-y / s)
    return min(candidates)


def test_drive_turn_and_read_back(bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]) -> None:
    _, player = stack()
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    poses = Collector(bus, "Localization/Pose", msgs.PoseEstimate)
    with PlayerClient(port=player.port, timeout=10.0) as client:
        assert client.subscribe("position", access="a") == "a"
        for device in ("laser", "sonar", "position3d"):
            assert client.subscribe(device) == "r"
        read_until(client, lambda: client.laser.count > 0 and client.sonar.count > 0 and client.position3d.count > 0)
        assert client.geometry().size == pytest.approx((0.8, 0.8))
        assert client.geometry("laser").pose == pytest.approx((0.25, 0.0, 0.0))
        assert len(client.sonar_geometry()) == 16

        # 1 m forward at 0.25 m/s, the command renewed at every round (the held command keeps the robot going
        # between them)
        drive_until(client, 0.25, 0.0, lambda: client.position.px >= 0.97)
        client.set_speed(0.0, 0.0)
        read_until(client, lambda: client.position.vx == 0.0 and client.position.va == 0.0)
        real = truth.wait_for_update(timeout=10)
        # it stops a little beyond 0.97 m: braking (4 cm at 0.8 m/s²) and the rounds' and steps' latency (the
        # stack runs on simulated time, so a busy machine makes the overshoot larger, never the agreement worse)
        assert 0.97 <= client.position.px < 1.5
        assert client.position.px == pytest.approx(real.x - START[0], abs=0.002)  # ideal odometry: the truth, in mm
        assert client.position.py == pytest.approx(0.0, abs=0.002) and real.y == pytest.approx(START[1], abs=0.002)

        # 90 degrees to the left
        drive_until(client, 0.0, 0.4, lambda: client.position.pa >= math.radians(87.0))
        client.set_speed(0.0, 0.0)
        read_until(client, lambda: client.position.va == 0.0)
        real = truth.wait_for_update(timeout=10)
        assert math.radians(87.0) <= real.theta < math.radians(120.0)
        assert client.position.pa == pytest.approx(wrap_angle(real.theta), abs=math.radians(0.6))

        # a scan and a sonar reading taken after the robot stopped agree with the room
        settled = client.position.timestamp
        read_until(client, lambda: client.laser.timestamp > settled + 0.3 and client.sonar.timestamp > settled)
        real = truth.wait_for_update(timeout=10)
        laser_x, laser_y = real.x + 0.25 * math.cos(real.theta), real.y + 0.25 * math.sin(real.theta)
        for i in (0, 90, 180, 270, 360):
            bearing = client.laser.bearings[i]
            expected = laser_range_to_room_wall(laser_x, laser_y, real.theta + bearing)
            assert client.laser.ranges[i] == pytest.approx(expected, abs=0.03), (i, bearing)
        assert client.laser.bearings[0] == pytest.approx(-math.pi / 2) and len(client.laser.ranges) == 361
        front = laser_range_to_room_wall(real.x, real.y, real.theta) - 0.4
        assert client.sonar.ranges[0] == pytest.approx(front, abs=0.1)
        assert len(client.sonar.ranges) == 16

        # position3d is the localization pose of the same instant
        read_until(client, lambda: client.position3d.timestamp > settled)
        stamp = client.position3d.timestamp
        pose = poses.wait_for(lambda p: abs(p.stamp - stamp) < 2e-6)
        assert client.position3d.position == pytest.approx(tuple(pose.pose[:3]), abs=0.0006)
        yaw = client.position3d.angles[2]
        assert yaw == pytest.approx(wrap_angle(pose.pose[3]), abs=1e-5)
        # localization starts where the simulated robot starts (the sim profile): it is the truth, in the world
        assert yaw == pytest.approx(real.theta, abs=math.radians(1.0))
        assert client.position3d.position[:2] == pytest.approx((real.x, real.y), abs=0.01)

        # set the odometry and read it back
        client.set_odometry(1.0, 2.0, math.radians(45.0))
        read_until(client, lambda: abs(client.position.px - 1.0) < 1e-3 and abs(client.position.py - 2.0) < 1e-3)
        assert client.position.pa == pytest.approx(math.radians(45.0))
    assert player.server.statistics().failures == 0


def test_the_last_writer_leaving_stops_the_robot(bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]) -> None:
    _, player = stack(command_timeout=0.0)  # Player 1.5's hold for ever: the command is held until the writer goes
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    watcher = PlayerClient(port=player.port, timeout=10.0)
    with watcher:
        watcher.subscribe("position")
        with PlayerClient(port=player.port, timeout=10.0) as reader:
            reader.subscribe("position")
            reader.set_speed(0.5, 0.0)  # without write access: ignored
            with PlayerClient(port=player.port, timeout=10.0) as driver:
                driver.subscribe("position", access="w")
                driver.set_speed(0.3, 0.0)
                read_until(watcher, lambda: watcher.position.vx >= 0.29)
                read_until(watcher, lambda: watcher.position.px > 0.3)  # held: on and on, past the 4 s timeout
            gone = watcher.position.timestamp
            stopped = odometry.wait_for(lambda o: o.stamp > gone and o.v == 0.0, timeout=20)
        # zero speed at once: braking from 0.3 m/s at 0.8 m/s² takes 0.4 s, far less than the commands' timeouts
        assert stopped.stamp - gone < 1.5
    assert player.ignored_commands == 0
    assert player.server.statistics().ignored >= 1  # the reader's command


def test_a_silent_writer_s_velocity_lapses_after_the_command_timeout(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    # A client with write access commands 0.3 rad/s and then sends nothing, its connection open: the held command
    # lapses after command_timeout (1 s of the simulated clock) and the robot stops, instead of turning for as long
    # as the connection stays open.
    _, player = stack()
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    with PlayerClient(port=player.port, timeout=10.0) as client:
        assert client.subscribe("position", access="w") == "w"  # write only: it reads nothing either
        before = odometry.wait_for(lambda o: True)  # the robot's time before the command
        client.set_speed(0.0, 0.3)
        turning = odometry.wait_for(lambda o: o.omega >= 0.29, timeout=20)
        stopped = odometry.wait_for(lambda o: o.stamp > turning.stamp and o.omega == 0.0, timeout=20)
        after = odometry.wait_for(lambda o: o.stamp >= stopped.stamp + 3.0, timeout=20)
        still = [o.omega for o in odometry.snapshot() if stopped.stamp <= o.stamp <= after.stamp]
        assert still and all(w == 0.0 for w in still)  # it stays stopped, the client still connected and silent
    # held for command_timeout after the command came, then stopped within the braking time and a step or two
    assert stopped.stamp - before.stamp >= 1.0
    assert stopped.stamp - turning.stamp <= 2.0
    assert player.lapsed_commands == 1 and player.server.statistics().failures == 0


def test_position_mode_is_a_goto_of_the_avoid_module(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    s, player = stack()
    with PlayerClient(port=player.port, timeout=10.0) as client:
        client.subscribe("position", access="a")
        with pytest.raises(RequestRefused, match="NACK"):
            client.set_position_mode(True)  # no avoid module
        s.add(AvoidModule(bus, AvoidModuleParams(use_sim_time=True)))
        bus.wait_for_module("avoid", 10)
        read_until(client, lambda: player.module_running("avoid"))
        client.set_position_mode(True)
        client.set_odometry(10.0, 0.0, 0.0)  # the goal is in the declared odometry frame, whatever it is
        read_until(client, lambda: client.position.px > 9.9)
        client.goto(12.0, 1.0)  # 2 m ahead, 1 m to the left
        read_until(client, lambda: math.hypot(client.position.px - 12.0, client.position.py - 1.0) < 0.35)
        client.set_speed(0.0, 0.0)  # a velocity command ends the goto (the avoid module is released)
        read_until(client, lambda: client.position.vx == 0.0)
    truth = bus.create_reader("Sim/Truth", msgs.Odometry).wait_for_update(timeout=10)
    assert math.hypot(truth.x - (START[0] + 2.0), truth.y - (START[1] + 1.0)) < 0.35


def test_twenty_clients_at_10_hz_for_30_simulated_seconds(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    _, player = stack(profile_modules=("sim", "base"), rate=3.0)
    results: dict[int, tuple[int, int, list[float]]] = {}
    errors: list[BaseException] = []
    ready = threading.Barrier(21)

    def run(n: int) -> None:
        try:
            with PlayerClient(port=player.port, timeout=10.0) as client:
                client.subscribe("position")
                client.read()
                ready.wait(timeout=30)
                client.read()
                start = client.round_time
                data_before = client.position.count
                times = [start]
                while client.round_time < start + 30.0 - 0.05:
                    client.read()
                    times.append(client.round_time)
                results[n] = (len(times) - 1, client.position.count - data_before, times)
        except BaseException as err:
            errors.append(err)
            ready.abort()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(20)]
    for thread in threads:
        thread.start()
    ready.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(results) == 20
    stats = player.server.statistics()
    assert stats.skipped == 0  # the server never gave up a round
    for rounds, data, times in results.values():
        # each round carries the time it was due: 300 rounds 0.1 s apart, none missing
        assert rounds == 300, (rounds, times[:5])
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) == pytest.approx(0.1, abs=1e-5) and max(gaps) == pytest.approx(0.1, abs=1e-5)
        # the base writes at 50 Hz, so most rounds have new position data (PUSH_NEW skips a round's only when the
        # base fell a round behind: on a quiet machine about none, on a starved one up to a fifth were seen)
        assert 0.5 * rounds <= data <= rounds
    assert (stats.nacks, stats.errors, stats.protocol_errors, stats.slow_clients, stats.failures) == (0, 0, 0, 0, 0)


def test_configuration_requests_reach_the_simulated_base(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    s, player = stack(profile_modules=("sim", "base", "wrist", "sick", "localization", "dmu"))
    base = next(m for m in s.supervisor.modules if m.module_name == "base")
    assert isinstance(base, SimBase)
    with PlayerClient(port=player.port, timeout=10.0) as client:
        client.subscribe("position", access="a")
        client.subscribe("position3d", access="a")
        client.subscribe("laser")
        client.subscribe("sonar")
        client.set_motor_power(False)
        assert not base.motors_on
        client.set_motor_power(True)
        position = DeviceCode.POSITION
        client.request(position, 0, VelocityMode(3, 0).pack())
        assert base.velocity_mode == "direct"
        client.request(position, 0, PidRequest(6, 10, 1, 2).pack())
        assert base.pid_gains["speed"] == {"kp": 10.0, "ki": 1.0, "kv": 2.0}
        client.request(position, 0, SpeedProfile(8, 400, 700).pack())
        assert (base.body.params.max_speed, base.body.params.max_accel) == (0.4, 0.7)
        client.reset_odometry()
        for refused in (RmpConfig(53, 1).pack(), SpeedProfile(8, 0, 100).pack()):
            with pytest.raises(RequestRefused, match="NACK"):
                client.request(position, 0, refused)
        with pytest.raises(RequestRefused, match="NACK"):
            client.request("sonar", 0, SonarPower(2, 0).pack())
        assert client.geometry("position3d").size == pytest.approx((0.8, 0.8))
        client.set_speed3d(0.2, 0.0)  # position3d commands drive too
        read_until(client, lambda: client.position.vx > 0.15)
        client.set_speed3d(0.0, 0.0)

        config = client.set_laser_config(math.radians(-45), math.radians(45), math.radians(1.0), range_res=1)
        assert (config.subtype, config.min_angle, config.max_angle, config.resolution, config.range_res) == (
            2,
            -4500,
            4500,
            100,
            1,
        )
        assert client.laser_config() == LaserConfig(3, -4500, 4500, 100, 1, 0)
        # intensities asked for: the rest is carried out, and the configuration in force says there are none
        config = client.set_laser_config(math.radians(-45), math.radians(45), math.radians(1.0), 1, intensity=True)
        assert (config.intensity, client.laser_config().intensity) == (0, 0)
        read_until(client, lambda: len(client.laser.ranges) == 91)
        assert set(client.laser.intensity) == {0}
        assert client.laser.min_angle == pytest.approx(math.radians(-45)) and client.laser.range_res == 1
        with pytest.raises(RequestRefused):
            client.set_laser_config(-1.0, 1.0, math.radians(0.25))  # finer than the scanner
    stats = player.server.statistics()
    assert stats.nacks == 4 and stats.failures == 0


def test_the_p2os_base_refuses_what_p2os_cannot_do(bus: Bus) -> None:
    with P2osEmulator(P2osRobot("p3dx", world=load_world("office"))) as emulator:
        base = P2osBase(bus, P2osBaseParams(port=emulator.url))
        player = PlayerModule(bus, PlayerParams(port=0))
        try:
            base.start()
            player.start()
            with PlayerClient(port=player.port, timeout=10.0) as client:
                assert client.subscribe("position", access="a") == "a"  # the base is alive once started
                assert client.geometry().size == pytest.approx((0.5, 0.5))  # a p3dx: 0.25 m radius
                with pytest.raises(RequestRefused, match="NACK"):
                    client.request("position", 0, PidRequest(6, 1, 2, 3).pack())  # P2OS has no command for it
                client.set_odometry(0.5, -0.25, math.radians(30.0))
                read_until(
                    client, lambda: abs(client.position.px - 0.5) < 2e-3 and abs(client.position.py + 0.25) < 2e-3
                )
                assert client.position.pa == pytest.approx(math.radians(30.0))
                client.set_motor_power(False)
                assert not emulator.robot.motors_enabled
                client.set_motor_power(True)
        finally:
            player.stop()
            base.stop()


def test_set_odom_declares_the_pose_and_the_robot_does_not_move(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    _, player = stack(profile_modules=("sim", "base", "wrist", "sick", "localization", "dmu"))
    base_odometry = bus.create_reader("Base/Drive/State", msgs.Odometry)
    truth = bus.create_reader("Sim/Truth", msgs.Odometry)
    with PlayerClient(port=player.port, timeout=10.0) as client:
        client.subscribe("position", access="a")
        client.subscribe("position3d")
        read_until(client, lambda: client.position.count > 0 and client.position3d.count > 0)
        on_the_bus, real = base_odometry.wait_for_update(timeout=10), truth.wait_for_update(timeout=10)
        localized = (client.position3d.position, client.position3d.angles)
        for pose in ((1.0, 2.0, math.radians(45.0)), (-3.5, 0.25, math.radians(180.0)), (0.0, 0.0, 0.0)):
            if pose == (0.0, 0.0, 0.0):
                client.reset_odometry()
            else:
                client.set_odometry(*pose)
            # the first position data after the ACK reads the pose declared, exactly (whole mm and degrees)
            count = client.position.count
            read_until(client, lambda: client.position.count > count)  # noqa: B023 (called at once)
            assert (client.position.px, client.position.py, client.position.pa) == pose
        for _ in range(5):
            client.read()
        assert (client.position.px, client.position.py, client.position.pa) == (0.0, 0.0, 0.0)
        # the robot did not move: not in the world, not on the base's odometry, not for the localization
        later, real_later = base_odometry.wait_for_update(timeout=10), truth.wait_for_update(timeout=10)
        assert (later.x, later.y, later.theta) == pytest.approx((on_the_bus.x, on_the_bus.y, on_the_bus.theta))
        assert (real_later.x, real_later.y) == pytest.approx((real.x, real.y), abs=1e-6)
        assert client.position3d.position == pytest.approx(localized[0], abs=0.01)  # it jumped metres before
        assert client.position3d.angles == pytest.approx(localized[1], abs=0.01)
    assert player.server.statistics().nacks == 0


def test_values_out_of_range_are_refused_and_the_session_goes_on(
    bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]
) -> None:
    _, player = stack(profile_modules=("sim", "base"))
    commands = Collector(bus, "Base/Drive/Command", msgs.ActuatorState)
    with PlayerClient(port=player.port, timeout=10.0) as client:
        client.subscribe("position", access="a")
        client.read()
        client.set_speed(5.0, 0.0)  # over 3 m/s
        client.set_speed(0.0, math.radians(720.0))  # two turns a second
        far = PositionCommand(2**31 - 1, 0, 0, 0, 0, 0, 1, 1)  # a goal 2,147 km away
        client.send(MsgType.CMD, DeviceCode.POSITION, 0, far.pack())
        for refused in (SetOdometry(9, 2**31 - 1, 0, 0), SetOdometry(9, 0, 0, 2**31 - 1), SpeedProfile(8, 20000, 500)):
            with pytest.raises(RequestRefused, match="NACK"):
                client.request("position", 0, refused.pack())
        client.set_speed(0.2, 0.0)  # a good one after them takes effect
        read_until(client, lambda: client.position.vx > 0.15)
        client.set_speed(0.0, 0.0)
        stats = player.server.statistics()
        assert (stats.refused_commands, stats.nacks, stats.failures) == (3, 3, 0), stats
    written = [tuple(c.velocity) for c in commands.values]
    assert (0.2, 0.0) in written
    for command in commands.values:
        limits.check("Base/Drive/Command", command)  # nothing out of range reached the bus


def test_header_times_are_on_the_clock_of_the_data(bus: Bus, stack: Callable[..., tuple[Stack, PlayerModule]]) -> None:
    # Without --use-sim-time the module runs on the wall clock, while the simulated base stamps on simulated time.
    _, player = stack(profile_modules=("sim", "base"), use_sim_time=False)
    with socket.create_connection(("127.0.0.1", player.port), timeout=10) as sock:
        conn = PlayerConnection("client")

        def read_data(count: int) -> list[Header]:
            headers: list[Header] = []
            while sum(h.type == MsgType.DATA for h in headers) < count:
                event = conn.next_event()
                if event is NEED_DATA:
                    conn.receive_data(sock.recv(65536))
                elif isinstance(event, ConnectionClosed):
                    raise AssertionError("the server closed the connection")
                elif isinstance(event, Message):
                    headers.append(event.header)
            return headers

        sock.sendall(encode_message(MsgType.REQ, 1, 0, DeviceRequest(4, 0, b"r").pack()))
        read_data(3)  # the module has data, and knows its clock
        sock.sendall(encode_message(MsgType.REQ, 1, 0, DeviceList().pack()[:2]))
        headers = read_data(5)
    stamped = [h for h in headers if h.type in (MsgType.DATA, MsgType.RESP_ACK, MsgType.SYNCH)]
    assert MsgType.RESP_ACK in [h.type for h in stamped]
    data = [h for h in headers if h.type == MsgType.DATA]
    assert data[-1].timestamp < 1e6  # simulated time, not seconds since 1970
    for header in stamped:
        # both times of every header on one clock: the data's (the simulated time, at RATE times the wall's pace)
        assert abs(header.time - data[-1].timestamp) < 60.0, (header, data[-1])
