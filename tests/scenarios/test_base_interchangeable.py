"""The two bases are interchangeable: the same scenario, run on the simulated base and on the P2OS base.

(a) the ``sim`` profile in this process (simulated time, ``RATE`` times faster than the wall clock);
(b) :class:`~pluto.hardware.base.p2os_module.P2osBase` in this process, talking P2OS over TCP to a
    :class:`~pluto.hardware.base.p2os.emulator.P2osEmulator` in the office world (wall-clock time).

The scenario only knows the interfaces: it writes velocity commands on ``Base/Drive/Command`` and checks that
``Base/Drive/State`` advances by v·Δt and turns by ω·Δt (measured between stamps, at steady speed, so the bases'
different accelerations do not matter), and that ``Base/Contact``, ``Base/Power`` and ``Base/Sonar`` carry values of
the right types and shapes. Every wait is on an event or a collected value, never a fixed sleep.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest

from pluto import msgs
from pluto.bus import Bus, RemoteError
from pluto.hardware.base.p2os import Command, CommandPacket
from pluto.hardware.base.p2os.driver import P2osConnectError
from pluto.hardware.base.p2os.emulator import P2osEmulator
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from pluto.sim.world import load_world
from tests.helpers import free_tcp_port, wait_until
from tests.scenarios.stack import Collector, Commander

RATE = 10.0
SPEED = 0.4  # m/s
TURN_RATE = 0.5  # rad/s


def wait_still(odometry: Collector, after: float = -math.inf) -> msgs.Odometry:
    """The first state after the stamp ``after`` in which the base stands still."""
    value = odometry.wait_for(lambda o: o.stamp > after and abs(o.v) < 1e-3 and abs(o.omega) < 1e-3)
    assert isinstance(value, msgs.Odometry)
    return value


def steady_motion(
    bus: Bus,
    odometry: Collector,
    v: float,
    omega: float,
    seconds: float = 1.0,
) -> tuple[msgs.Odometry, msgs.Odometry]:
    """Command (v, omega) until the base moves steadily at it, then ``seconds`` (of the base's time) more.

    Returns the first steady state and the one ``seconds`` later; stops the base at the end.
    """
    with Commander(bus, v, omega):

        def steady(o: msgs.Odometry) -> bool:
            return abs(o.v - v) < 0.02 and abs(o.omega - omega) < 0.03

        first = odometry.wait_for(steady)
        last = odometry.wait_for(lambda o: o.stamp >= first.stamp + seconds)
        assert steady(last), f"the base did not keep its speed: {last}"  # type: ignore[arg-type]
    assert isinstance(first, msgs.Odometry) and isinstance(last, msgs.Odometry)
    return first, last


def base_scenario(bus: Bus) -> None:
    """Drive straight, then turn on the spot, on whatever base serves Base/*; check every interface."""
    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    contact = bus.create_reader("Base/Contact", msgs.Contact).wait_for_value(timeout=10)
    power = bus.create_reader("Base/Power", msgs.Power).wait_for_value(timeout=10)
    sonar = bus.create_reader("Base/Sonar", msgs.SonarScan).wait_for_value(timeout=10)

    assert isinstance(contact, msgs.Contact)
    assert isinstance(contact.front, bool) and isinstance(contact.rear, bool) and isinstance(contact.stall, bool)
    assert isinstance(power, msgs.Power)
    assert 0.0 < power.voltage < 30.0 and 0.0 <= power.charge <= 1.0
    assert isinstance(sonar, msgs.SonarScan)
    assert len(sonar.ranges) == len(sonar.angles) > 0
    assert sonar.max_range > 0.0
    assert all(0.0 <= r <= sonar.max_range for r in sonar.ranges)
    assert all(-math.pi - 1e-9 <= a <= math.pi + 1e-9 for a in sonar.angles)

    start = wait_still(odometry)
    # straight ahead: the position advances by v·Δt along the heading, the heading stays
    first, last = steady_motion(bus, odometry, SPEED, 0.0)
    elapsed = last.stamp - first.stamp
    along = (last.x - first.x) * math.cos(first.theta) + (last.y - first.y) * math.sin(first.theta)
    assert along == pytest.approx(SPEED * elapsed, rel=0.1)
    assert last.theta == pytest.approx(start.theta, abs=0.02)
    stopped = wait_still(odometry, after=last.stamp)
    assert stopped.x - start.x > 0.3  # it went forward, and it stopped when the commands stopped

    # on the spot: the heading turns by ω·Δt, the position stays
    first, last = steady_motion(bus, odometry, 0.0, TURN_RATE)
    elapsed = last.stamp - first.stamp
    assert last.theta - first.theta == pytest.approx(TURN_RATE * elapsed, rel=0.1)
    assert math.hypot(last.x - first.x, last.y - first.y) < 0.02
    end = wait_still(odometry, after=last.stamp)
    assert end.theta > start.theta + 0.3

    for name, cls in (("Base/Contact", msgs.Contact), ("Base/Power", msgs.Power), ("Base/Sonar", msgs.SonarScan)):
        fresh = bus.create_reader(name, cls).wait_for_value(timeout=5)
        assert isinstance(fresh, cls)
        assert fresh.stamp >= start.stamp  # still published while driving


# --------------------------------------------------------------------------------------------------- the bases


@pytest.fixture
def sim_base(bus: Bus) -> Iterator[Supervisor]:
    """The ``sim`` profile (world, base, laser, ...) in this process, on the test's bus."""
    profile = with_params(load_profile("sim"), "sim", world="office", rate=RATE)
    supervisor = Supervisor(bus, profile, Config(), one_process=True)
    try:
        supervisor.start()
        yield supervisor
    finally:
        supervisor.shutdown()


@pytest.fixture
def emulator() -> Iterator[P2osEmulator]:
    # accelerations near the simulated base's (1 m/s², 3 rad/s²), so both reach their speed quickly
    limits = MotionLimits(trans_acc=1.0, trans_decel=1.0, rot_acc=3.0, rot_decel=3.0)
    with P2osEmulator(P2osRobot("p3dx", world=load_world("office"), limits=limits)) as emu:
        yield emu


@pytest.fixture
def p2os_base(bus: Bus, emulator: P2osEmulator) -> Iterator[P2osBase]:
    """The P2OS base in this process, connected to the emulator."""
    module = P2osBase(bus, P2osBaseParams(port=emulator.url))
    try:
        module.start()
        yield module
    finally:
        module.stop()


def test_scenario_on_the_simulated_base(bus: Bus, sim_base: Supervisor) -> None:
    base_scenario(bus)


def test_scenario_on_the_p2os_base(bus: Bus, p2os_base: P2osBase, emulator: P2osEmulator) -> None:
    base_scenario(bus)
    assert p2os_base.driver.statistics().bad_checksum == 0
    assert p2os_base.step_errors == 0


# --------------------------------------------------------------------------------------------------- services


def test_p2os_base_services(bus: Bus, p2os_base: P2osBase, emulator: P2osEmulator) -> None:
    geometry = bus.call("base/geometry", None, dict, timeout=5)
    assert geometry["model"] == "p3dx" and geometry["radius"] == pytest.approx(0.25)
    assert len(geometry["sonar_poses"]) == 16 and geometry["sonar_poses"][0] == pytest.approx(
        [0.069, 0.136, math.pi / 2]
    )

    assert bus.call("base/motor_power", False, bool, timeout=5) is True  # the outcome: motors off as asked
    assert not emulator.robot.motors_enabled
    assert bus.call("base/motor_power", True, bool, timeout=5) is True
    assert emulator.robot.motors_enabled

    for service in ("speed_pid", "position_pid"):
        with pytest.raises(RemoteError, match="not supported by P2OS"):
            bus.call(f"base/{service}", {"kp": 1.0, "ki": 0.0, "kv": 0.5}, bool, timeout=5)

    assert bus.call("base/speed_profile", {"max_speed": 0.5, "max_accel": 0.5}, bool, timeout=5) is True
    wait_until(lambda: emulator.robot.max_speeds[0] == pytest.approx(0.5), timeout=2)
    wait_until(lambda: emulator.robot.accelerations[0] == pytest.approx(0.5), timeout=2)
    with pytest.raises(RemoteError, match="unknown field"):
        bus.call("base/speed_profile", {"top_speed": 1.0}, bool, timeout=5)

    assert bus.call("base/velocity_mode", "direct", str, timeout=5) == "direct"
    with pytest.raises(RemoteError, match="velocity_mode"):
        bus.call("base/velocity_mode", "diagonal", str, timeout=5)

    odometry = Collector(bus, "Base/Drive/State", msgs.Odometry)
    assert bus.call("base/set_odometry", [1.0, 2.0, 0.5], bool, timeout=5) is True
    placed = odometry.wait_for(
        lambda o: (
            o.x == pytest.approx(1.0, abs=1e-3)
            and o.y == pytest.approx(2.0, abs=1e-3)
            and o.theta == pytest.approx(0.5, abs=1e-3)
        )
    )
    # in direct mode the command becomes wheel velocities (VEL2), and the base still drives straight
    with Commander(bus, 0.2, 0.0):
        moved = odometry.wait_for(lambda o: o.stamp > placed.stamp and math.hypot(o.x - 1.0, o.y - 2.0) > 0.1)
    assert isinstance(moved, msgs.Odometry)
    assert moved.theta == pytest.approx(0.5, abs=0.01)
    assert (moved.x - 1.0) * math.sin(0.5) - (moved.y - 2.0) * math.cos(0.5) == pytest.approx(0.0, abs=0.01)
    with emulator.lock:
        recent = emulator.robot.recent_commands
    assert any(isinstance(packet, CommandPacket) and packet.command == Command.VEL2 for _, packet in recent)
    still = wait_still(odometry, after=moved.stamp)
    assert bus.call("base/reset_odometry", None, bool, timeout=5) is True
    odometry.wait_for(lambda o: o.stamp > still.stamp and abs(o.x) < 1e-3 and abs(o.y) < 1e-3 and abs(o.theta) < 1e-3)


def test_p2os_base_fails_to_start_without_a_robot(bus: Bus) -> None:
    url = f"socket://127.0.0.1:{free_tcp_port()}"
    module = P2osBase(bus, P2osBaseParams(port=url))
    with pytest.raises(P2osConnectError, match=re.escape(f"cannot open {url}")):
        module.start()
    module.stop()
