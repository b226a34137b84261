"""The simulated GPS server: ``GPS/State`` fixes on the local metric grid (x east, y north of the world's GPS
origin, which is the world frame's origin), with the number of satellites and the quality (2: differential,
sub-metre; 1: plain fix)."""

from __future__ import annotations

from pluto import msgs, names
from pluto.hardware.gps.sim import SimGps
from pluto.runtime.ranges import Rate
from pluto.sim.device import SimDevice, SimDeviceParams


class SimGpsParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    rate_hz: Rate = 2.0


class SimGpsModule(SimDevice[SimGpsParams]):
    """The simulated GPS receiver."""

    name = "gps"
    description = "simulated GPS: fixes on the local grid, satellites and quality"
    provides = (names.GPS_STATE,)
    requires = ("sim", "base")
    Params = SimGpsParams

    def on_configure(self) -> None:
        self.load_simulation()
        origin = self.world.gps_origin
        self.gps = SimGps(origin, self.noise, self.rng) if origin else SimGps(noise=self.noise, rng=self.rng)
        self.truth = self.create_reader(names.SIM_TRUTH)
        self.out = self.create_publisher(names.GPS_STATE)
        self._last: float | None = None

    def step(self, now: float) -> None:
        truth = self.truth.read()
        if truth is None:
            return
        dt = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        f = self.gps.fix(dt, truth.x, truth.y)
        self.out.write(
            msgs.GpsFix(
                stamp=now,
                latitude=f.latitude,
                longitude=f.longitude,
                altitude=f.altitude,
                x=f.x,
                y=f.y,
                satellites=f.satellites,
                quality=f.quality,
                hdop=f.hdop,
            )
        )
