"""The device emulators as modules: the Pioneer's true pose on Sim/Truth, the sensors measuring it with the
simulator's device errors, and their parameters."""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.hardware.base.p2os.emulate import P2osEmulator, P2osEmulatorModule, P2osEmulatorParams, true_pose
from pluto.hardware.base.p2os.robot import P2osRobot
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.hardware.dmu.emulate import DmuEmulatorModule, DmuEmulatorParams
from pluto.hardware.gps.emulate import GpsEmulatorModule, GpsEmulatorParams, SimTruthTrack
from pluto.hardware.gps.grid import LocalGrid
from pluto.hardware.gps.nmea_module import NmeaGps, NmeaGpsParams
from pluto.hardware.sick.emulate import WRIST_LEAD, SickEmulatorParams, WorldScan, follow_wrist
from pluto.hardware.sick.sim import LaserParams, SimLaser
from pluto.runtime.registry import available_modules
from pluto.sim.noise import BASIC, REALISTIC
from pluto.sim.raycast import RayCaster
from pluto.sim.site import build_site
from pluto.sim.world import load_world
from tests.helpers import wait_until
from tests.scenarios.stack import Collector, Commander


@pytest.fixture
def pioneer(bus: Bus) -> Iterator[P2osEmulatorModule]:
    module = P2osEmulatorModule(bus, P2osEmulatorParams(port=0, noise="realistic"))
    module.start()
    try:
        yield module
    finally:
        module.stop()


def test_the_emulators_are_installed_modules() -> None:
    installed = available_modules()
    assert installed["gps-emulator"] == "pluto.hardware.gps.emulate:GpsEmulatorModule"
    assert installed["dmu-emulator"] == "pluto.hardware.dmu.emulate:DmuEmulatorModule"
    assert installed["p2os-emulator"] == "pluto.hardware.base.p2os.emulate:P2osEmulatorModule"
    assert installed["sick-emulator"] == "pluto.hardware.sick.emulate:SickEmulatorModule"


def test_the_pioneer_publishes_its_true_pose_as_it_drives(bus: Bus, pioneer: P2osEmulatorModule) -> None:
    truth = Collector(bus, "Sim/Truth", msgs.Odometry)
    base = P2osBase(bus, P2osBaseParams(port=pioneer.emulator.url))
    try:
        start = truth.wait_for(lambda _: True)
        world = load_world("office")
        assert (start.x, start.y, start.theta) == pytest.approx(world.start, abs=1e-6)
        base.start()
        with Commander(bus, 0.4, 0.0):
            moved = truth.wait_for(lambda t: t.x > start.x + 0.2 and t.v > 0.1)
        assert moved.y == pytest.approx(start.y, abs=0.05)
        # the odometry the driver reports starts at 0 where the robot stands, and counts the same way
        odometry = bus.create_reader("Base/Drive/State", msgs.Odometry).wait_for_value(timeout=5)
        assert odometry.x > 0.1 and abs(odometry.y) < 0.05
    finally:
        base.stop()
        truth.close()


def test_the_gps_emulator_follows_sim_truth_through_its_protocol(bus: Bus) -> None:
    truth_out = bus.create_publisher("Sim/Truth", msgs.Odometry)
    truth_out.write(msgs.Odometry(x=12.0, y=-3.0, theta=0.5))
    emulator = GpsEmulatorModule(bus, GpsEmulatorParams(port=0, epoch_hz=10.0))
    emulator.start()
    gps = NmeaGps(bus, NmeaGpsParams(port=emulator.emulator.url, rate_hz=20.0))
    fixes = Collector(bus, "GPS/State", msgs.GpsFix)
    try:
        gps.start()
        fix = fixes.wait_for(lambda f: f.quality == 2)
        assert (fix.x, fix.y) == pytest.approx((12.0, -3.0), abs=0.01)  # ideal noise: the grid, to the NMEA digits
    finally:
        gps.stop()
        emulator.stop()
        fixes.close()
        bus.release(truth_out)


def test_the_inertial_emulator_streams_to_its_driver(bus: Bus, pioneer: P2osEmulatorModule) -> None:
    from pluto.hardware.dmu.crossbow_module import CrossbowDmu, CrossbowDmuParams

    emulator = DmuEmulatorModule(bus, DmuEmulatorParams(port=0, noise="realistic"))
    emulator.start()
    dmu = CrossbowDmu(bus, CrossbowDmuParams(port=emulator.emulator.url))
    raw = Collector(bus, "DMU/Raw", msgs.DmuRaw)
    try:
        dmu.start()
        # the Pioneer stands still: gravity on z (up), and the realistic gyro errors on the rates
        count = itertools.count(1)
        raw.wait_for(lambda _: next(count) >= 50)
        readings = raw.snapshot()[:50]
        z = np.array([r.accelerations[2] for r in readings])
        assert np.mean(z) == pytest.approx(9.81, abs=0.2)
        rates = np.array([r.rates[2] for r in readings])
        assert 0.0 < np.std(rates) < 0.05  # noisy, as a real gyro
    finally:
        dmu.stop()
        emulator.stop()
        raw.close()


def test_the_scanner_turns_and_tilts_with_the_wrist_it_sits_on() -> None:
    world = load_world("office")
    pose = (4.0, 1.5, 0.3)
    angles = np.radians(np.arange(-90.0, 90.5, 0.5))
    level = WorldScan(world, lambda: pose).scan(0.0, angles)
    for pan, tilt in ((0.0, 0.0), (1.2, 0.0), (-0.7, 0.0), (0.0, 0.35)):
        on_wrist = WorldScan(world, lambda: pose, wrist=lambda p=pan, t=tilt: (p, t)).scan(0.0, angles)
        # what the simulator's laser on a wrist at (pan, tilt) sees, no echo as inf
        expected = SimLaser(RayCaster(world.segments(), world.circles), LaserParams(resolution=0.001)).scan(
            0.0, pose, pan, tilt
        )
        assert np.array_equal(on_wrist, np.where(expected >= 80.0, np.inf, expected)), (pan, tilt)
        if (pan, tilt) != (0.0, 0.0):
            assert not np.array_equal(on_wrist, level)
    tilted = WorldScan(world, lambda: pose, wrist=lambda: (0.0, 0.35)).scan(0.0, angles)
    assert tilted[180] < min(level[180], 3.0)  # looking down: the floor ahead, nearer than the walls


def test_the_wrist_followed_is_carried_forward_by_its_velocity(bus: Bus) -> None:
    now = [100.0]
    wrist = follow_wrist(bus, clock=lambda: now[0])
    assert wrist() == (0.0, 0.0)  # before any Wrist/State
    state = bus.create_publisher("Wrist/State", msgs.ActuatorState)
    state.write(msgs.ActuatorState(stamp=99.95, position=[0.5, 0.1], velocity=[1.0, -0.2]))
    wait_until(lambda: wrist() != (0.0, 0.0))
    assert wrist() == pytest.approx((0.55, 0.09))  # 50 ms on at its velocity
    now[0] = 101.0
    assert wrist() == pytest.approx((0.5 + WRIST_LEAD, 0.1 - 0.2 * WRIST_LEAD))  # an old reading: no further
    now[0] = 99.0
    assert wrist() == pytest.approx((0.5, 0.1))  # a reading from the future is taken as it is


def test_the_true_pose_is_stamped_with_the_time_of_the_step_that_reached_it() -> None:
    fake = [5.0]  # the emulator's clock, held still: one step, at 5.0
    emulator = P2osEmulator(P2osRobot("p3dx", world=load_world("office")), clock=lambda: fake[0]).start()
    try:
        wait_until(lambda: emulator.stepped_at == 5.0)
        # read 0.4 s after that step (by the emulator's clock), at 1000.0 by the stamps' clock
        truth = true_pose(emulator, 1000.0, clock=lambda: 5.4)
        assert truth.stamp == pytest.approx(999.6)
        assert (truth.x, truth.y, truth.theta) == pytest.approx(load_world("office").start)
    finally:
        emulator.stop()


def test_realistic_laser_and_gps_errors() -> None:
    world = load_world("office")
    exact = WorldScan(world, lambda: world.start)
    noisy = WorldScan(world, lambda: world.start, BASIC, np.random.default_rng(1))  # the range noise alone
    angles = np.radians(np.arange(-90.0, 90.5, 0.5))
    clean, measured = exact.scan(0.0, angles), noisy.scan(0.0, angles)
    both = np.isfinite(clean) & np.isfinite(measured)
    errors = measured[both] - clean[both]
    assert np.std(errors) == pytest.approx(BASIC.laser_range_std, rel=0.3)
    # the rough world's: as built (walls off the map, glass, clutter) and with its scanner's errors, the same
    # site for the same seed, a scan that differs from the map's
    site = build_site(world, REALISTIC, 3)
    rough = WorldScan(site.world, lambda: world.start, REALISTIC, np.random.default_rng(1), surfaces=site.surfaces)
    assert np.any(np.abs(rough.scan(0.0, angles) - clean) > 0.05)
    with pytest.raises(TypeError, match="Surfaces"):
        WorldScan(world, lambda: world.start, surfaces=object())

    class Truth:  # the newest Sim/Truth, without a bus
        def create_subscription(self, name: str, callback: object, cls: object, **_: object) -> Truth:
            self.callback = callback
            return self

        def close(self) -> None:
            pass

    grid = LocalGrid(59.3498, 18.0707)
    source = Truth()
    track = SimTruthTrack(source, grid, REALISTIC, np.random.default_rng(2))  # type: ignore[arg-type]
    source.callback(msgs.Odometry(x=5.0, y=5.0))  # type: ignore[operator]
    points = [track.point(0.1 * i) for i in range(400)]
    xy = np.array([grid.to_grid(p.latitude, p.longitude) for p in points if p is not None and p.quality == 2])
    assert len(xy) > 100
    spread = float(np.std(xy[:, 0]))
    assert spread == pytest.approx(REALISTIC.gps_std, rel=0.3)
    assert math.hypot(*(np.mean(xy, axis=0) - (5.0, 5.0))) < 0.15


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (P2osEmulatorParams, {"port": 70000}),
        (P2osEmulatorParams, {"max_step": 0.001}),
        (SickEmulatorParams, {"link_noise": 1.0}),
        (DmuEmulatorParams, {"packet_hz": 0.0}),
        (GpsEmulatorParams, {"epoch_hz": 100.0}),
    ],
)
def test_bad_parameters_are_refused(cls: type, values: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        cls(**values)


def test_p2os_sim_publishes_the_true_pose_when_asked(bus: Bus) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "p2os-sim", "--port", "0", "--world", "office", "--publish-truth"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        truth = bus.create_reader("Sim/Truth", msgs.Odometry).wait_for_value(timeout=30)
        assert (truth.x, truth.y, truth.theta) == pytest.approx(load_world("office").start, abs=1e-6)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "connect a client to: socket://127.0.0.1:" in out and "Sim/Truth" in out and "stopped" in out
