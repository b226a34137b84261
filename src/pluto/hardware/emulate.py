"""What every device's emulator shares as a module (``p2os-emulator``, ``sick-emulator``, ``dmu-emulator``,
``gps-emulator``): its port, the noise profile and seed its errors come from, and the noise on its line.

The emulators as modules put every device of the robot behind its real protocol in a profile (``pluto up
emulated``): ``p2os-emulator`` (:mod:`pluto.hardware.base.p2os.emulate`) serves a Pioneer in a world over TCP and
publishes its true pose as ``Sim/Truth``; ``sick-emulator`` (:mod:`pluto.hardware.sick.emulate`), ``dmu-emulator``
(:mod:`pluto.hardware.dmu.emulate`) and ``gps-emulator`` (:mod:`pluto.hardware.gps.emulate`) serve a SICK LMS, a
Crossbow DMU and an NMEA receiver that measure the robot of ``Sim/Truth`` (this one, or a simulator's); the laser
turns with the pan/tilt wrist it sits on, as that reports itself on ``Wrist/State``. The real drivers (``base
--driver p2os``, ``sick --driver lms``, ``dmu --driver crossbow``, ``gps --driver nmea``) then connect to
``socket://127.0.0.1:PORT``. The wrist needs no module here: its ``can`` driver runs its emulator itself (``emulate =
true`` on a python-can ``virtual`` bus). Everything runs on the wall clock, as a real robot does.

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
# starts the driver after it, and stops it in on_shutdown.

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import numpy as np

from pluto.hardware.link import LinkNoise
from pluto.runtime.module import ModuleParams
from pluto.runtime.ranges import Port, Rate, Seed
from pluto.sim.noise import NoiseProfile, device_rng, noise_profile
from pluto.sim.site import Site, build_site
from pluto.sim.world import World

__all__ = ["EmulatorParams"]


class EmulatorParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """What every emulator module has.

    Attributes:
        port: TCP port served on 127.0.0.1 (0 picks a free one; the driver must then be told it).
        noise: the simulator's noise profile the device's errors come from: ``ideal``, ``basic`` or ``realistic``.
        seed: seed of the errors (each device draws from its own generator).
        link_noise: fraction of the bytes dropped and of those corrupted, in both directions, in [0, 1).
    """

    rate_hz: Rate = 1.0
    port: Port = 0
    noise: Literal["ideal", "basic", "realistic"] = "ideal"
    seed: Seed = 0
    link_noise: Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)] = 0.0

    def profile(self) -> NoiseProfile:
        """The device errors."""
        return noise_profile(self.noise)

    def rng(self, device: str) -> np.random.Generator:
        """The random generator of ``device``'s errors."""
        return device_rng(self.seed, device)

    def site(self, world: World) -> Site:
        """``world`` as built under the noise profile and seed (every emulator of the robot builds the same)."""
        return build_site(world, self.profile(), self.seed)

    def line_noise(self, device: str) -> LinkNoise | None:
        """The noise on the line, or None for a clean one."""
        if not self.link_noise:
            return None
        return LinkNoise(self.link_noise, self.link_noise, device_rng(self.seed, f"{device}-link"))
