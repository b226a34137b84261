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

from typing import Annotated

from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import DeviceEmulator
from pluto.runtime.module import Module
from pluto.runtime.ranges import Latitude, Longitude, Port, between

__all__ = [
    "EmulatorParams",
    "GpsEmulatorModule",
    "GpsEmulatorParams",
]


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
