"""The P2OS driver against the robot emulator (P2osEmulator), over TCP and over a pseudo-terminal.

The emulated robot runs in real time with ideal odometry, so its truth and the driver's odometry must agree to the
quantisation of the wire (a p3dx's position tick is 0.485 mm, its heading tick 0.09 degree). Every comparison is
made with the robot standing still, so the 100 ms SIP cycle does not show up as a lag. Waits are on SIPs
(``wait_for_sip``) or ``wait_until``, never on fixed sleeps.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pluto.geometry import compose, relative, wrap_angle
from pluto.hardware.base.p2os.driver import P2osDriver, P2osState
from pluto.hardware.base.p2os.emulate import LinkNoise, P2osEmulator
from pluto.hardware.base.p2os.robot import MotionLimits, P2osRobot
from tests.helpers import free_tcp_port, wait_until

Pose = tuple[float, float, float]

BRISK = MotionLimits(
    trans_acc_top=4.0,
    rot_acc_top=12.0,
    trans_acc=4.0,
    trans_decel=4.0,
    rot_acc=12.0,
    rot_decel=12.0,
    trans_vel_max=1.0,
    rot_vel_max=2.5,
)
"""A brisk robot for the squares (high accelerations), so that a square takes seconds."""
LAW_DECEL = 0.6
"""The approach to a goal plans with this fraction of the robot's deceleration (room for one SIP of delay)."""


@pytest.fixture
def emulators() -> Iterator[Callable[..., P2osEmulator]]:
    """Start emulators (``emulators(transport="pty", watchdog=0.5, ...)``); stopped after the test."""
    started: list[P2osEmulator] = []

    def start(
        *, transport: str = "tcp", port: int = 0, link_noise: LinkNoise | None = None, **robot: Any
    ) -> P2osEmulator:
        emulator = P2osEmulator(
            P2osRobot("p3dx", **robot),
            transport=transport,  # type: ignore[arg-type]
            port=port,
            link_noise=link_noise,
        )
        emulator.start()
        started.append(emulator)
        return emulator

    yield start
    for emulator in started:
        emulator.stop()


@pytest.fixture
def drivers() -> Iterator[Callable[..., P2osDriver]]:
    """Make drivers; each is closed after the test, and none may leave a thread behind."""
    made: list[P2osDriver] = []

    def make(url: str, **kwargs: Any) -> P2osDriver:
        driver = P2osDriver(url, **kwargs)
        made.append(driver)
        return driver

    yield make
    for driver in made:
        driver.close()
    leftovers = [t.name for t in threading.enumerate() if t.name.startswith(("p2os-reader", "p2os-keepalive"))]
    assert not leftovers, f"threads left running: {leftovers}"


def truth(emulator: P2osEmulator) -> Pose:
    with emulator.lock:
        return emulator.robot.truth_pose


def pose_of(state: P2osState) -> Pose:
    return state.x, state.y, state.theta


def next_sip(driver: P2osDriver) -> P2osState:
    state = driver.wait_for_sip(5.0)
    assert state is not None, "no SIP within 5 s"
    return state


def halt(driver: P2osDriver) -> P2osState:
    """Stop, and return the first state that shows the robot standing still after it."""
    driver.stop_motion()
    for _ in range(100):
        state = next_sip(driver)
        if state.v == 0.0 and state.omega == 0.0:
            return next_sip(driver)  # one more, sent while standing: the pose is final
        driver.stop_motion()  # the stop may have been lost on a noisy link
    raise AssertionError("the robot did not stop")


def approach(left: float, top: float, decel: float, gain: float, slowest: float) -> float:
    """Speed toward a goal ``left`` away (m or rad, signed): the top speed, then as fast as ``decel`` can still
    stop, and at the end ``gain`` x left (per s), so that one SIP cycle cannot overshoot; never below ``slowest``."""
    magnitude = min(top, math.sqrt(2.0 * decel * abs(left)), max(slowest, gain * abs(left)))
    return math.copysign(magnitude, left)


def drive_to(
    driver: P2osDriver, goal: tuple[float, float], heading: float, speed: float, gain: float, tolerance: float
) -> None:
    """Drive along ``heading`` (rad) until abreast of ``goal`` (x, y in m, odometry frame; within ``tolerance`` m)
    and nearly still,
    steering back onto the line through the goal; closing the loop on the driver's odometry (backing up if late
    SIPs let it overshoot).

    Raises:
        AssertionError: not there after 300 SIPs.
    """
    c, s = math.cos(heading), math.sin(heading)
    for _ in range(300):
        state = next_sip(driver)
        dx, dy = goal[0] - state.x, goal[1] - state.y
        left, lateral = c * dx + s * dy, -s * dx + c * dy
        if abs(left) < tolerance and abs(state.v) < 0.05:
            return
        v = approach(left, speed, LAW_DECEL * BRISK.trans_decel, gain, 0.02)
        steer = math.copysign(3.0 * lateral, v) if abs(state.v) > 0.05 else 0.0
        driver.set_velocity(v, 2.0 * (heading - state.theta) + steer)
    raise AssertionError(f"did not reach {goal} along {heading:.3f} rad: at {pose_of(state)}")


def turn_to(driver: P2osDriver, heading: float, turn_rate: float, gain: float, tolerance: float) -> None:
    """Turn on the spot to ``heading`` (rad, continuous odometry heading; within ``tolerance`` rad), ending nearly
    still.

    Raises:
        AssertionError: not there after 300 SIPs.
    """
    for _ in range(300):
        state = next_sip(driver)
        error = heading - state.theta
        if abs(error) < tolerance and abs(state.omega) < 0.1:
            return
        driver.set_velocity(0.0, approach(error, turn_rate, LAW_DECEL * BRISK.rot_decel, gain, 0.06))
    raise AssertionError(f"did not turn to {heading:.3f} rad: at {pose_of(state)}")


def drive_square(
    driver: P2osDriver,
    emulator: P2osEmulator,
    side: float = 1.0,
    speed: float = 1.0,
    gain: float = 5.0,
    tolerance: tuple[float, float] = (0.003, 0.004),
) -> list[tuple[Pose, Pose]]:
    """Drive a square, left turns, closing the loop on the driver's odometry.

    Args:
        gain: of the last approach to each goal (1/s); about 0.5 / the SIP cycle.
        tolerance: how close to each goal is there: m along a side, rad in a turn.

    Returns:
        At the start and at each corner (standing still): (the driver's pose, the emulator's truth), each relative
        to its own start.
    """
    first = halt(driver)
    odometry0, truth0 = pose_of(first), truth(emulator)
    samples = [(relative(odometry0, odometry0), relative(truth0, truth0))]
    for leg, corner in enumerate([(side, 0.0), (side, side), (0.0, side), (0.0, 0.0)]):
        heading = odometry0[2] + leg * math.pi / 2
        goal = compose(odometry0, (*corner, 0.0))[:2]
        drive_to(driver, goal, heading, speed, gain, tolerance[0])
        turn_to(driver, heading + math.pi / 2, 2.5, gain, tolerance[1])
        state = halt(driver)
        samples.append((relative(odometry0, pose_of(state)), relative(truth0, truth(emulator))))
    return samples


def assert_agree(samples: list[tuple[Pose, Pose]], distance: float, angle_deg: float) -> None:
    for odometry, true in samples:
        assert math.hypot(odometry[0] - true[0], odometry[1] - true[1]) < distance, (odometry, true)
        assert abs(wrap_angle(odometry[2] - true[2])) < math.radians(angle_deg), (odometry, true)


# --------------------------------------------------------------------------------------------------- handshake


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_handshake(transport: str, emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]) -> None:
    emulator = emulators(transport=transport)
    assert emulator.url.startswith("socket://" if transport == "tcp" else "/dev/")
    driver = drivers(emulator.url)
    driver.connect()
    assert (driver.robot_name, driver.robot_class, driver.robot_subclass) == ("Pluto", "Pioneer", "p3dx")
    assert driver.params.subclass == "p3dx"
    config = driver.config
    assert config is not None and config.watchdog == 2000
    assert driver.max_rot_velocity == pytest.approx(math.radians(config.rot_vel_top))
    wait_until(lambda: (s := driver.state) is not None and s.motors_enabled, timeout=2)
    with emulator.lock:
        assert emulator.robot.state == "open" and emulator.robot.motors_enabled
        assert emulator.robot.max_speeds[0] == pytest.approx(2.2)
    state = next_sip(driver)
    assert state.battery_voltage > 11.0 and len(state.sonar_ranges) == 16
    wait_until(lambda: all(math.isfinite(r) for r in (driver.state or state).sonar_ranges), timeout=3)
    driver.close()
    wait_until(lambda: emulator.robot.state == "closed", timeout=2)  # CLOSE was received
    assert not emulator.robot.motors_enabled


# --------------------------------------------------------------------------------------------------- driving


def test_square_odometry_agrees_with_truth(
    emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]
) -> None:
    emulator = emulators(limits=BRISK)
    driver = drivers(emulator.url)
    driver.connect()
    samples = drive_square(driver, emulator)
    assert_agree(samples, distance=0.01, angle_deg=1.0)
    end_odometry, end_truth = samples[-1]
    assert math.hypot(end_odometry[0], end_odometry[1]) < 0.01  # the loop closed on the odometry
    assert math.hypot(end_truth[0], end_truth[1]) < 0.015
    assert abs(end_truth[2]) < math.radians(1.0)
    corner = samples[1][1]
    assert corner == pytest.approx((1.0, 0.0, math.pi / 2), abs=0.01)
    assert driver.statistics().bad_checksum == 0 and driver.statistics().large_deltas == 0


def test_square_on_a_noisy_link(emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]) -> None:
    # 2% of the bytes lost or changed, both directions: two SIPs in three are lost (a SIP has about 60 bytes), so
    # the robot sends them every 25 ms (its SIPcycle) and the loop closes on the ones that get through
    noise = LinkNoise(drop_rate=0.01, corrupt_rate=0.01)
    emulator = emulators(transport="pty", link_noise=noise, sip_cycle=0.025, limits=BRISK)
    driver = drivers(emulator.url, link_timeout=5.0)
    driver.connect()
    samples = drive_square(driver, emulator, side=0.5, gain=6.0, tolerance=(0.01, 0.015))
    # what got through is decoded exactly (a damaged SIP whose checksum matched is held, then dropped)
    assert_agree(samples, distance=0.01, angle_deg=1.0)
    _, end_truth = samples[-1]
    assert math.hypot(end_truth[0], end_truth[1]) < 0.05
    assert abs(end_truth[2]) < math.radians(3.0)
    stats = driver.statistics()
    assert stats.bad_checksum > 100 and stats.garbage_bytes > 0  # the noise was there, counted, and survived
    assert noise.corrupted > 0 and noise.dropped > 0
    assert stats.link_losses == 0 and stats.handler_errors == 0


# --------------------------------------------------------------------------------------------------- safety


def test_robot_watchdog_stops_a_silent_client(
    emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]
) -> None:
    emulator = emulators(watchdog=0.5, limits=BRISK)
    driver = drivers(emulator.url)
    driver.connect()
    wait_until(lambda: (s := driver.state) is not None and s.motors_enabled, timeout=2)
    driver.set_velocity(0.4, 0.0)
    wait_until(lambda: (s := driver.state) is not None and s.v > 0.1, timeout=3)
    driver.pause_writer()  # the program hangs: no command, no PULSE
    wait_until(lambda: emulator.robot.counters.watchdog_trips == 1, timeout=3)
    wait_until(lambda: (s := driver.state) is not None and s.v == 0.0 and not s.motors_enabled, timeout=5)
    assert driver.statistics().command_timeouts == 0  # the robot stopped itself
    driver.resume_writer()
    assert driver.enable_motors(True) is True


def test_command_timeout_stops_the_robot_while_pulses_keep_the_link(
    emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]
) -> None:
    # The robot's watchdog (1 s) would stop it too, later: a PULSE does not renew it under a velocity command.
    emulator = emulators(watchdog=1.0, limits=BRISK)
    driver = drivers(emulator.url, command_timeout=0.3, keepalive=0.2)
    driver.connect()
    wait_until(lambda: (s := driver.state) is not None and s.motors_enabled, timeout=2)
    driver.set_velocity(0.4, 0.0)  # and then the commander dies
    wait_until(lambda: (s := driver.state) is not None and s.v > 0.1, timeout=3)
    wait_until(lambda: driver.statistics().command_timeouts == 1, timeout=3)
    state = halt(driver)
    assert state.motors_enabled  # stopped by the driver, not by the robot's watchdog: PULSEs kept it alive
    assert emulator.robot.counters.watchdog_trips == 0
    wait_until(lambda: driver.statistics().keepalives >= 3, timeout=3)
    assert emulator.robot.counters.watchdog_trips == 0 and driver.connected


# --------------------------------------------------------------------------------------------------- the link


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_after_a_driver_crashed_the_next_one_connects(
    transport: str, emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]
) -> None:
    # Over TCP the emulator sees the crashed client go: the session ends and the robot stops. A pty, like a serial
    # line, tells nothing: the robot stays open, and the next driver closes that stale session and synchronises.
    emulator = emulators(transport=transport, limits=BRISK)
    first = drivers(emulator.url)
    first.connect()
    first.set_velocity(0.3, 0.0)
    wait_until(lambda: (s := first.state) is not None and s.v > 0.1, timeout=3)
    first.pause_writer()
    first.close()  # crashed: the port is closed without CLOSE
    if transport == "tcp":
        wait_until(lambda: not emulator.client_connected, timeout=2)
        wait_until(lambda: emulator.robot.truth_velocity == (0.0, 0.0), timeout=2)
        assert emulator.robot.state == "closed" and not emulator.robot.motors_enabled
    else:
        assert emulator.robot.state == "open"
    second = drivers(emulator.url)
    second.connect()
    assert second.connected and second.statistics().stale_sessions == (1 if transport == "pty" else 0)
    assert next_sip(second).sips >= 1


def test_reconnects_after_the_link_drops(
    emulators: Callable[..., P2osEmulator], drivers: Callable[..., P2osDriver]
) -> None:
    emulator = emulators(port=free_tcp_port())
    driver = drivers(emulator.url)
    driver.connect()
    next_sip(driver)
    emulator.stop()  # the link goes away (the robot keeps its state: still open)
    wait_until(lambda: not driver.connected, timeout=2)
    assert driver.statistics().link_losses == 1
    emulator.start()  # on the same port
    wait_until(lambda: driver.connected, timeout=5)
    stats = driver.statistics()
    assert stats.reconnects == 1 and stats.connects == 2 and stats.stale_sessions == 1
    before = next_sip(driver)
    driver.set_velocity(0.3, 0.0)
    wait_until(lambda: (s := driver.state) is not None and s.x > before.x + 0.02, timeout=3)
