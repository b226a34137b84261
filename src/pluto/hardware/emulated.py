"""The device emulators as modules, so a profile can put every device of the robot behind its real protocol.

``p2os-emulator`` serves a Pioneer (:class:`~pluto.hardware.base.p2os.robot.P2osRobot`) in a world over TCP and
publishes its true pose as ``Sim/Truth``; ``sick-emulator``, ``dmu-emulator`` and ``gps-emulator`` serve a SICK
LMS, a Crossbow DMU and an NMEA receiver that measure the robot of ``Sim/Truth`` (this one, or a simulator's); the
laser turns with the pan/tilt wrist it sits on, as that reports itself on ``Wrist/State``. The
real drivers (``base --driver p2os``, ``sick --driver lms``, ``dmu --driver crossbow``, ``gps --driver nmea``) then
connect to ``socket://127.0.0.1:PORT``. The wrist needs no module here: its ``can`` driver runs its emulator itself
(``emulate = true`` on a python-can ``virtual`` bus). Everything runs on the wall clock, as a real robot does.

Each emulator adds the errors of a noise profile of the simulator (``noise = "realistic"``): the Pioneer's odometry
(wheel scale, slip) and sonar, the laser's range noise and dropouts, the inertial unit's gyro bias, drift and noise
and its tilt and acceleration noise, and the GPS position error with losses of the differential fix; ``seed`` makes
the errors the same from run to run. The Pioneer and the laser live in the world as built
(:func:`pluto.sim.site.build_site`, from the world, the profile and the seed: the same for both): with
``realistic`` noise walls a few cm off the map, glass and unmapped clutter. ``link_noise`` drops and corrupts that
fraction of the bytes on the line.
"""

# Strategy: the emulators already run in threads of their own (P2osEmulator, LmsEmulator, DeviceEmulator); a module
# only starts one in on_configure, so the port is listening before the module announces itself and the supervisor
# starts the driver after it, and stops it in on_shutdown. The modules' step does nothing but the Pioneer's, which
# publishes the true pose (under the emulator's lock, so a pose is never read half-stepped), stamped with the time of
# the physics step it comes from, once per step.

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Annotated

from pluto import msgs, names
from pluto.hardware.base.p2os.emulator import P2osEmulator
from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import DeviceEmulator
from pluto.runtime.module import Module
from pluto.runtime.ranges import Latitude, Longitude, Port, Rate, Timeout, between

__all__ = [
    "DmuEmulatorModule",
    "DmuEmulatorParams",
    "EmulatorParams",
    "GpsEmulatorModule",
    "GpsEmulatorParams",
    "P2osEmulatorModule",
    "P2osEmulatorParams",
    "true_pose",
]


def true_pose(emulator: P2osEmulator, now: float, clock: Callable[[], float] = time.monotonic) -> msgs.Odometry:
    """The emulated Pioneer's true pose and velocities as a ``Sim/Truth`` value (read under the emulator's lock, so
    never half a physics step), stamped with the time of the robot's step that reached them: ``now`` (the stamp's
    clock, s) less how long ago by ``clock`` (the emulator's) that step was. On a busy computer the emulator's thread
    may wait a while for its turn: a pose stamped with the time it is read would be dated late."""
    with emulator.lock:
        x, y, theta = emulator.robot.truth_pose
        v, omega = emulator.robot.truth_velocity
        stepped = emulator.stepped_at
    age = 0.0 if stepped is None else max(0.0, clock() - stepped)
    return msgs.Odometry(stamp=now - age, x=x, y=y, theta=theta, v=v, omega=omega)


class P2osEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    rate_hz: rate of ``Sim/Truth``, Hz.
    port: TCP port (8101 by default, as MobileSim's).
    model: the Pioneer model (``p3dx``, ``p3at``, ...).
    world: a shipped world (``office``, ``campus``, ``clutter``) or a map file.
    watchdog: s without a command after which the robot stops by itself (as set in its flash).
    max_step: s of time one step of the robot simulates at most: after a longer wait for the CPU the emulator
        catches up that much and skips the rest (the robot's time then trails the wall clock). A robot does not stop
        while its computer is busy, and the other emulators (the DMU's gyro) measure it as moving all along: it
        catches up a second by default, where ``pluto p2os-sim`` skips all but 0.1 s.
    """

    rate_hz: Rate = 50.0
    port: Port = 8101
    model: str = "p3dx"
    world: str = "office"
    watchdog: Timeout = 2.0
    max_step: Annotated[float, between(0.01, 10.0)] = 1.0


class P2osEmulatorModule(Module[P2osEmulatorParams]):
    """A Pioneer in a world served over P2OS, its true pose on ``Sim/Truth``."""

    name = "p2os-emulator"
    description = "an emulated Pioneer robot in a world, served over P2OS on TCP; its true pose on Sim/Truth"
    provides = (names.SIM_TRUTH,)
    Params = P2osEmulatorParams

    def on_configure(self) -> None:
        from pluto.hardware.base.p2os.robot import P2osRobot
        from pluto.sim.world import load_world

        p = self.params
        world = p.site(load_world(p.world)).world
        robot = P2osRobot(p.model, world=world, watchdog=p.watchdog, noise=p.profile(), rng=p.rng("base"))
        self.emulator = P2osEmulator(robot, port=p.port, link_noise=p.line_noise("base"), max_step=p.max_step).start()
        self.truth = self.create_publisher(names.SIM_TRUTH)
        self._last_stamp = -math.inf
        self.get_logger().info("Pioneer %s in world %s on %s", p.model, p.world, self.emulator.url)

    def step(self, now: float) -> None:
        # the time now, not the step's (this thread may have waited for its turn since), and each step's pose once
        truth = true_pose(self.emulator, self.clock.now())
        if truth.stamp > self._last_stamp:
            self._last_stamp = truth.stamp
            self.truth.write(truth)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()


class DmuEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: TCP port (8102 by default).
    packet_hz: packets per second when the unit streams.
    """

    port: Port = 8102
    packet_hz: Rate = 100.0


class DmuEmulatorModule(Module[DmuEmulatorParams]):
    """A Crossbow DMU on the robot of ``Sim/Truth``, served over its serial protocol."""

    name = "dmu-emulator"
    description = "an emulated Crossbow DMU inertial unit on the robot of Sim/Truth, served on TCP"
    Params = DmuEmulatorParams

    def on_configure(self) -> None:
        from pluto.hardware.dmu.emulator import CrossbowDevice, SimTruthSource

        p = self.params
        self.source = SimTruthSource(self.bus, p.profile(), p.rng("dmu"))
        device = CrossbowDevice(self.source, rate_hz=p.packet_hz)
        self.emulator = DeviceEmulator(device, port=p.port, link_noise=p.line_noise("dmu"))
        self.emulator.start()
        self.get_logger().info("Crossbow DMU on %s", self.emulator.url)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
        source = getattr(self, "source", None)
        if source is not None:
            source.close()


class GpsEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: TCP port (8103 by default).
    epoch_hz: fixes per second (1 to 10 on most receivers).
    origin_lat, origin_lon: the world frame's origin, degrees (the simulated worlds' by default).
    """

    port: Port = 8103
    epoch_hz: Annotated[float, between(0.0, 50.0, open_low=True)] = 1.0
    origin_lat: Latitude = 59.3498
    origin_lon: Longitude = 18.0707


class GpsEmulatorModule(Module[GpsEmulatorParams]):
    """An NMEA 0183 receiver on the robot of ``Sim/Truth``, served on TCP."""

    name = "gps-emulator"
    description = "an emulated NMEA 0183 GPS receiver on the robot of Sim/Truth, served on TCP"
    Params = GpsEmulatorParams

    def on_configure(self) -> None:
        from pluto.hardware.gps.emulator import NmeaReceiver, SimTruthTrack
        from pluto.hardware.gps.grid import LocalGrid

        p = self.params
        self.track = SimTruthTrack(self.bus, LocalGrid(p.origin_lat, p.origin_lon), p.profile(), p.rng("gps"))
        device = NmeaReceiver(self.track, period=1.0 / p.epoch_hz)
        self.emulator = DeviceEmulator(device, port=p.port, link_noise=p.line_noise("gps"))
        self.emulator.start()
        self.get_logger().info("NMEA receiver on %s", self.emulator.url)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
        track = getattr(self, "track", None)
        if track is not None:
            track.close()
