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
from pluto.hardware.base.p2os_module import P2osBase, P2osBaseParams
from pluto.hardware.emulated import (
    DmuEmulatorModule,
    DmuEmulatorParams,
    GpsEmulatorModule,
    GpsEmulatorParams,
    P2osEmulatorModule,
    P2osEmulatorParams,
    SickEmulatorParams,
)
from pluto.hardware.gps.emulator import SimTruthTrack
from pluto.hardware.gps.grid import LocalGrid
from pluto.hardware.gps.nmea_module import NmeaGps, NmeaGpsParams
from pluto.hardware.sick.emulator import WorldScan
from pluto.runtime.registry import available_modules
from pluto.sim.noise import REALISTIC
from pluto.sim.world import load_world
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
    for name in ("p2os-emulator", "sick-emulator", "dmu-emulator", "gps-emulator"):
        assert installed[name].startswith("pluto.hardware.emulated:")


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


def test_realistic_laser_and_gps_errors() -> None:
    world = load_world("office")
    exact = WorldScan(world, lambda: world.start)
    noisy = WorldScan(world, lambda: world.start, REALISTIC, np.random.default_rng(1))
    angles = np.radians(np.arange(-90.0, 90.5, 0.5))
    clean, measured = exact.scan(0.0, angles), noisy.scan(0.0, angles)
    both = np.isfinite(clean) & np.isfinite(measured)
    errors = measured[both] - clean[both]
    assert np.std(errors) == pytest.approx(REALISTIC.laser_range_std, rel=0.3)

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
