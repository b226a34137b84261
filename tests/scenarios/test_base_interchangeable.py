"""The two bases are interchangeable: the same scenario, run on the simulated base and on the P2OS base.

(a) the ``sim`` profile in this process, in lock-step: the scenario runs as a script that takes part in it, one
    step at each step of the base;
(b) :class:`~pluto.hardware.base.p2os_module.P2osBase` in this process, talking P2OS over TCP to a
    :class:`~pluto.hardware.base.p2os.emulate.P2osEmulator` in the office world (wall-clock time): the scenario's
    steps run every 20 ms of wall time.

The scenario only knows the interfaces: it writes velocity commands on ``Base/Drive/Command`` and checks that
``Base/Drive/State`` advances by v·Δt and turns by ω·Δt (measured between stamps, at steady speed, so the bases'
different accelerations do not matter), and that ``Base/Contact``, ``Base/Power`` and ``Base/Sonar`` carry values of
the right types and shapes. Every wait is on an event or a collected value, never a fixed sleep.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, RemoteError, StateReader, StateWriter
from pluto.hardware.base.p2os import Command, CommandPacket
from pluto.hardware.base.p2os.driver import P2osConnectError
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.sim.world import load_world
from tests.helpers import free_tcp_port, wait_until
from tests.scenarios.stack import HANG, Collector, Commander, Lockstep, Script

pytestmark = pytest.mark.scenario

SPEED = 0.4  # m/s
TURN_RATE = 0.5  # rad/s
PACE = 0.02  # s of wall time between the scenario's steps on the wall clock


@dataclass
class BaseIo:
    """What the scenario uses of a base: its command and its newest state; and what it found.

    ``lag`` says how far the base's own time trails the clock its states are stamped with (s): an emulator starved
    of CPU skips time rather than catch up (0 for the simulated base in lock-step). ``stops`` counts the stops the
    base was given that the scenario did not ask for: on the wall clock a commander or a base starved of CPU renews
    its command late, and the command rule then stops the robot, as it must (0 for the simulated base in lock-step).
    A measure of steady motion over which the robot was stopped so is taken again.
    """

    command_out: StateWriter[msgs.ActuatorState]
    state_in: StateReader[msgs.Odometry]
    lag: Callable[[], float] = lambda: 0.0
    stops: Callable[[], int] = lambda: 0
    found: dict[str, msgs.Odometry] = field(default_factory=dict)
    lags: dict[str, float] = field(default_factory=dict)
    remeasured: int = 0

    def command(self, v: float, omega: float) -> None:
        self.command_out.write(msgs.ActuatorState(velocity=[v, omega]))

    def state(self) -> msgs.Odometry | None:
        return self.state_in.read()

    def note(self, name: str, state: msgs.Odometry) -> None:
        """Keep a state the scenario found, with the base's lag then."""
        self.found[name] = state
        self.lags[name] = self.lag()

    def moved_at(self, amount: float, rate: float, first: str, last: str) -> None:
        """Check that ``amount`` is ``rate`` times the base's own time between two states it found, within 10 %: that
        time is the difference of their stamps, less at most what the base skipped meanwhile."""
        elapsed = self.found[last].stamp - self.found[first].stamp
        skipped = self.lags[last] - self.lags[first]
        low, high = 0.9 * rate * (elapsed - skipped), 1.1 * rate * elapsed
        assert low <= amount <= high, (
            f"{amount} not in [{low}, {high}] ({elapsed} s, {skipped} s skipped, {self.remeasured} times measured "
            "again after a stop)"
        )

    def elapsed_since(self, first: str, state: msgs.Odometry) -> float:
        """The base's time from a state it found to ``state`` (the newest), s."""
        return state.stamp - self.found[first].stamp - (self.lag() - self.lags[first])


def still(base: BaseIo, after: float = -math.inf) -> Generator[None, Any, msgs.Odometry]:
    """Command a stop until a state after the stamp ``after`` in which the base stands still; return it."""
    while (o := base.state()) is None or o.stamp <= after or abs(o.v) >= 1e-3 or abs(o.omega) >= 1e-3:
        base.command(0.0, 0.0)
        yield
    return o


def steady(o: msgs.Odometry, v: float, omega: float) -> bool:
    return abs(o.v - v) < 0.02 and abs(o.omega - omega) < 0.03


def steady_motion(
    base: BaseIo, name: str, v: float, omega: float, seconds: float = 1.0
) -> Generator[None, Any, msgs.Odometry]:
    """Command (v, omega) until the base moves steadily at it (``name``_first), then ``seconds`` (of the base's
    time) more (``name``_last, returned); again from the start when the base was stopped meanwhile (``stops``)."""
    while True:
        while (first := base.state()) is None or not steady(first, v, omega):
            base.command(v, omega)
            yield
        base.note(f"{name}_first", first)
        stops = base.stops()  # the scenario's own stops before this motion have all come: the base is steady
        while (last := base.state()) is None or base.elapsed_since(f"{name}_first", last) < seconds:
            base.command(v, omega)
            yield
        if base.stops() == stops:
            base.note(f"{name}_last", last)
            return last
        base.remeasured += 1


def drive_and_turn(base: BaseIo) -> Generator[None, Any, None]:
    """The scenario, a step at a time (each ``yield`` waits for the next step): drive straight, then turn on the
    spot, stopping in between; the states it found go into ``base.found``."""
    base.note("start", (yield from still(base)))
    last = yield from steady_motion(base, "straight", SPEED, 0.0)
    base.note("stopped", (yield from still(base, after=last.stamp)))
    last = yield from steady_motion(base, "turn", 0.0, TURN_RATE)
    base.note("end", (yield from still(base, after=last.stamp)))


def wait_still(odometry: Collector, after: float = -math.inf) -> msgs.Odometry:
    """The first state collected after the stamp ``after`` in which the base stands still (on the wall clock)."""
    value = odometry.wait_for(lambda o: o.stamp > after and abs(o.v) < 1e-3 and abs(o.omega) < 1e-3)
    assert isinstance(value, msgs.Odometry)
    return value


def check_interfaces(bus: Bus, since: float | None = None) -> None:
    """Base/Contact, Base/Power and Base/Sonar carry values of the right types and shapes (stamped at or after
    ``since``, if given)."""
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
    if since is not None:
        for value in (contact, power, sonar):
            assert value.stamp >= since  # still published while driving


def check_scenario(base: BaseIo) -> None:
    """What the scenario found: it drove v·Δt straight, turned ω·Δt on the spot, and stopped when told."""
    found = base.found
    start, first, last = found["start"], found["straight_first"], found["straight_last"]
    # straight ahead: the position advances by v·Δt along the heading, the heading stays
    assert steady(last, SPEED, 0.0), f"the base did not keep its speed: {last}"
    along = (last.x - first.x) * math.cos(first.theta) + (last.y - first.y) * math.sin(first.theta)
    base.moved_at(along, SPEED, "straight_first", "straight_last")
    assert last.theta == pytest.approx(start.theta, abs=0.02)
    assert found["stopped"].x - start.x > 0.3  # it went forward, and it stopped when the commands stopped
    # on the spot: the heading turns by ω·Δt, the position stays
    first, last = found["turn_first"], found["turn_last"]
    assert steady(last, 0.0, TURN_RATE), f"the base did not keep its turn rate: {last}"
    base.moved_at(last.theta - first.theta, TURN_RATE, "turn_first", "turn_last")
    assert math.hypot(last.x - first.x, last.y - first.y) < 0.02
    assert found["end"].theta > start.theta + 0.3


class StopCounter:
    """Counts the stops (VEL 0 then RVEL 0: a command that expired, in the base or in its driver) the emulated
    robot received, from its recent commands, read at every step of the scenario."""

    def __init__(self, emulator: P2osEmulator) -> None:
        self.emulator = emulator
        self.count = 0
        self._packets = 0  # the robot's packets looked at
        self._previous: tuple[Command, int | bytes | None] | None = None

    def __call__(self) -> int:
        with self.emulator.lock:
            recent = self.emulator.robot.recent_commands
            packets = self.emulator.robot.counters.packets
        new, self._packets = packets - self._packets, packets
        if new > len(recent):
            self.count += 1  # packets left the window before they were looked at: take them for a stop
        for _, packet in recent[len(recent) - min(new, len(recent)) :]:
            current = (packet.command, packet.argument) if isinstance(packet, CommandPacket) else None
            if self._previous == (Command.VEL, 0) and current == (Command.RVEL, 0):
                self.count += 1
            self._previous = current
        return self.count


def run_on_the_wall_clock(body: Generator[None, Any, None], timeout: float = HANG) -> None:
    """Run a scenario's steps every ``PACE`` s of wall time (a pacing interval, not a wait for a result)."""
    deadline = time.monotonic() + timeout
    pace = threading.Event()
    for _ in body:
        assert time.monotonic() < deadline, f"the scenario did not end within {timeout:g} s"
        pace.wait(PACE)


# --------------------------------------------------------------------------------------------------- the bases


@pytest.fixture
def sim(bus: Bus) -> Iterator[Lockstep]:
    with Lockstep(bus) as stack:
        yield stack


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


def test_scenario_on_the_simulated_base(bus: Bus, sim: Lockstep) -> None:
    sim.start(world="office")
    script = Script(bus, rate_hz=50.0)  # a step at each step of the base
    base = BaseIo(
        script.publisher("Base/Drive/Command", msgs.ActuatorState),
        script.reader("Base/Drive/State", msgs.Odometry),
    )
    script.body = lambda _now: drive_and_turn(base)
    sim.add(script)
    sim.resume()
    script.wait()
    check_scenario(base)
    check_interfaces(bus, since=base.found["start"].stamp)
    # in lock-step, with the ideal profile, the simulated base is exact: v·Δt and ω·Δt to the rounding
    found = base.found
    first, last = found["straight_first"], found["straight_last"]
    assert last.x - first.x == pytest.approx(SPEED * (last.stamp - first.stamp), abs=1e-9)
    first, last = found["turn_first"], found["turn_last"]
    assert last.theta - first.theta == pytest.approx(TURN_RATE * (last.stamp - first.stamp), abs=1e-9)


def test_scenario_on_the_p2os_base(bus: Bus, p2os_base: P2osBase, emulator: P2osEmulator) -> None:
    base = BaseIo(
        bus.create_publisher("Base/Drive/Command", msgs.ActuatorState),
        bus.create_reader("Base/Drive/State", msgs.Odometry),
        lag=lambda: emulator.skipped_time,
        stops=StopCounter(emulator),
    )
    check_interfaces(bus)
    run_on_the_wall_clock(drive_and_turn(base))
    check_scenario(base)
    check_interfaces(bus, since=base.found["start"].stamp)
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
