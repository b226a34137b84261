"""An emulated NMEA 0183 GPS receiver that real host programs read, over TCP or a pseudo-terminal; as a command
(``pluto gps-emulate``, :mod:`.command`) or as the ``gps-emulator`` module (:class:`GpsEmulatorModule`).

    with DeviceEmulator(NmeaReceiver(CircleTrack(LocalGrid(59.35, 18.07)))) as gps:
        port = serial.serial_for_url(gps.url)        # socket://127.0.0.1:PORT: RMC, VTG, GGA, GSA, GSV once a second

:class:`NmeaReceiver` synthesises RMC, VTG, GGA, GSA and GSV each epoch from a :class:`Track`, in the order u-blox
receivers send them: :class:`CircleTrack` (an
antenna driving a circle about the origin) or :class:`SimTruthTrack` (the simulated robot's true position on
``Sim/Truth`` taken through the origin's grid); :class:`NmeaReplay` sends the sentences of a recorded NMEA file
again, one epoch (from one GGA to the next) per period. Both are device cores for
:class:`pluto.hardware.link.DeviceEmulator`, which serves any such core.
"""

# Strategy: the receivers are sans-I/O cores stepped with a time, as the inertial unit's emulator is; serving, the
# links and the link noise are shared with it. A receiver ignores what a host sends (configuration sentences of real
# receivers are out of scope). A track answers None for "no fix now": the receiver then sends what a real one does
# without a fix: RMC void with mode N, VTG mode N, GGA quality 0 with empty position fields, GSA fix type 1, GSV of
# no satellite. An epoch's UTC time is on the receiver's grid (whole seconds at 1 Hz, tenths at 10 Hz), as a real
# receiver's measurement epochs are, whatever the wall clock's fraction when the epoch is sent; two epochs never
# share a time. RMC carries the NMEA 2.3 mode (D for a differential fix, A otherwise), GGA the geoid separation, and
# GSV the satellites used plus two more in view, each at a fixed elevation, azimuth and signal for its PRN.

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol

import numpy as np

from pluto import msgs, names
from pluto.bus import Bus
from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import DeviceEmulator, EmulatorError, LinkNoise
from pluto.runtime.module import Module
from pluto.runtime.ranges import Latitude, Longitude, Port, between
from pluto.sim.noise import IDEAL, NoiseProfile

from .codec import Gga, Gsa, Gsv, Rmc, SatelliteInView, Vtg, encode, gsv_sentences
from .grid import LocalGrid
from .sim import SimGps

__all__ = [
    "CircleTrack",
    "DeviceEmulator",
    "EmulatorError",
    "GpsEmulatorModule",
    "GpsEmulatorParams",
    "LinkNoise",
    "NmeaReceiver",
    "NmeaReplay",
    "SimTruthTrack",
    "Track",
    "TrackPoint",
]


@dataclass(frozen=True, slots=True)
class TrackPoint:
    """Where the antenna is: degrees, m above sea level, m/s over ground, course in degrees from north."""

    latitude: float
    longitude: float
    altitude: float = 10.0
    speed: float = 0.0
    course: float = 0.0
    quality: int = 2
    satellites: int = 9
    hdop: float = 0.8
    geoid_separation: float = 23.4
    """The geoid's height above the WGS-84 ellipsoid there, m (about 23 m around Stockholm)."""


class Track(Protocol):
    """Where the antenna is at time ``t`` (s), or None when the receiver has no fix."""

    def point(self, t: float) -> TrackPoint | None: ...


class CircleTrack:
    """An antenna driving a circle of ``radius`` m about the grid's origin, once per ``period`` s.

    Args:
        grid: the local grid.  radius: m.  period: s per lap.  outage: (start, end) s of each lap without a fix.
    """

    def __init__(
        self, grid: LocalGrid, radius: float = 20.0, period: float = 120.0, outage: tuple[float, float] | None = None
    ) -> None:
        self.grid, self.radius, self.period, self.outage = grid, radius, period, outage

    def point(self, t: float) -> TrackPoint | None:
        phase = t % self.period
        if self.outage is not None and self.outage[0] <= phase < self.outage[1]:
            return None
        a = 2.0 * math.pi * phase / self.period
        lat, lon = self.grid.to_geodetic(self.radius * math.cos(a), self.radius * math.sin(a))
        speed = 2.0 * math.pi * self.radius / self.period
        heading = a + math.pi / 2.0  # counter-clockwise, mathematical
        course = math.degrees(math.pi / 2.0 - heading) % 360.0  # from north, clockwise
        return TrackPoint(lat, lon, speed=speed, course=course)


class SimTruthTrack:
    """The simulated robot's true position (``Sim/Truth``) through the origin's grid; no fix before the first pose.

    With ``noise``, the simulator's receiver model (:class:`.sim.SimGps`) adds its position error and
    loses and regains the differential fix (quality 2 or 1, fewer satellites and a larger HDOP without it).

    Args:
        bus: an open bus of the running simulation's robot.  grid: the grid of the world's GPS origin.
        noise: the receiver's errors (ideal by default).  rng: their random generator.
    """

    def __init__(
        self, bus: Bus, grid: LocalGrid, noise: NoiseProfile = IDEAL, rng: np.random.Generator | None = None
    ) -> None:
        self.grid = grid
        self._receiver = SimGps(noise=noise, rng=rng or np.random.default_rng(0))
        self._last_t: float | None = None
        self._lock = threading.Lock()
        self._truth: msgs.Odometry | None = None
        self._subscription = bus.create_subscription(names.SIM_TRUTH, self._on_truth, msgs.Odometry)

    def _on_truth(self, truth: msgs.Odometry) -> None:
        with self._lock:
            self._truth = truth

    def point(self, t: float) -> TrackPoint | None:
        with self._lock:
            truth = self._truth
        if truth is None:
            return None
        dt = 0.0 if self._last_t is None else max(0.0, t - self._last_t)
        self._last_t = t
        fix = self._receiver.fix(dt, truth.x, truth.y)
        lat, lon = self.grid.to_geodetic(fix.x, fix.y)
        course = math.degrees(math.pi / 2.0 - truth.theta) % 360.0
        return TrackPoint(
            lat, lon, speed=abs(truth.v), course=course, quality=fix.quality, satellites=fix.satellites, hdop=fix.hdop
        )

    def close(self) -> None:
        """Stop listening to the simulation."""
        self._subscription.close()


PRNS = (2, 5, 7, 9, 13, 16, 20, 23, 27, 29, 30, 31)
"""The satellites an emulated receiver sees, in the order it uses them."""


def _in_view(prn: int, used: bool) -> SatelliteInView:
    """Where satellite ``prn`` stands (fixed for each PRN); one not used is received weakly."""
    return SatelliteInView(prn, 10 + prn * 7 % 75, prn * 37 % 360, 30 + prn % 17 if used else 18)


def _utc(wall: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(wall, tz=datetime.UTC)


class NmeaReceiver:
    """A receiver sending GGA, GSA and RMC each ``period`` s from a track.

    Args:
        track: where the antenna is.  period: s between epochs.  wall: the UTC time source (s since the epoch).
    """

    def __init__(self, track: Track, period: float = 1.0, wall: Callable[[], float] = time.time) -> None:
        if not (math.isfinite(period) and period > 0.0):
            raise ValueError(f"period must be > 0, got {period!r}")
        self.track, self.period, self._wall = track, period, wall
        self._next: float | None = None
        self._last_epoch: int | None = None  # the previous epoch's index on the period grid
        self._out = bytearray()
        self.epochs = 0

    def receive_data(self, data: bytes) -> None:
        """What a host sends is ignored."""

    def step(self, now: float) -> None:
        """Send the epoch due at ``now`` (s), if one is."""
        if self._next is not None and now < self._next:
            return
        self._next = (
            now + self.period if self._next is None or now - self._next > self.period else self._next + self.period
        )
        self._out += self.epoch(now)

    def epoch(self, now: float) -> bytes:
        """The sentences of one epoch at ``now``: RMC, VTG, GGA, GSA, GSV."""
        self.epochs += 1
        index = math.floor(self._wall() / self.period + 1e-6)
        if self._last_epoch is not None and index <= self._last_epoch:
            index = self._last_epoch + 1
        self._last_epoch = index
        utc = _utc(index * self.period)
        t = utc.time()
        p = self.track.point(now)
        if p is None:
            sentences: list[Gga | Rmc | Gsa | Vtg | Gsv] = [
                Rmc(t, False, None, None, None, None, utc.date(), mode="N"),
                Vtg(None, None, "N"),
                Gga(t, None, None, 0, 0, None, None),
                Gsa(1, (), None, None, None),
                *gsv_sentences(()),
            ]
        else:
            mode = "D" if p.quality == 2 else "A"
            used = PRNS[: min(len(PRNS), p.satellites)]
            in_view = PRNS[: min(len(PRNS), p.satellites + 2)]
            sentences = [
                Rmc(t, True, p.latitude, p.longitude, p.speed, p.course, utc.date(), mode=mode),
                Vtg(p.course, p.speed, mode),
                Gga(
                    t,
                    p.latitude,
                    p.longitude,
                    p.quality,
                    p.satellites,
                    p.hdop,
                    p.altitude,
                    geoid_separation=p.geoid_separation,
                ),
                Gsa(3, used, p.hdop * 1.6, p.hdop, p.hdop * 1.3),
                *gsv_sentences(tuple(_in_view(prn, prn in used) for prn in in_view)),
            ]
        return b"".join(encode(s) for s in sentences)

    def data_to_send(self) -> bytes:
        """What the receiver has to send now."""
        data = bytes(self._out)
        self._out.clear()
        return data


class NmeaReplay:
    """Sends a recorded NMEA file again, one epoch (from a GGA up to the next GGA) per ``period`` s, in a loop.

    Args:
        path: the file (one sentence a line; other lines are sent as they are).  period: s between epochs.

    Raises:
        OSError: the file cannot be read.  ValueError: it holds no line.
    """

    def __init__(self, path: str | Path, period: float = 1.0) -> None:
        lines = [line.rstrip(b"\r\n") + b"\r\n" for line in Path(path).read_bytes().splitlines() if line.strip()]
        if not lines:
            raise ValueError(f"{path}: no NMEA sentence to replay")
        epochs: list[bytes] = []
        current = bytearray()
        for line in lines:
            if line[3:6] == b"GGA" and current:
                epochs.append(bytes(current))
                current.clear()
            current += line
        epochs.append(bytes(current))
        self.epochs = epochs
        self.period = period
        self._index = 0
        self._next: float | None = None
        self._out = bytearray()
        self.laps = 0

    def receive_data(self, data: bytes) -> None:
        """What a host sends is ignored."""

    def step(self, now: float) -> None:
        """Send the epoch due at ``now``, if one is."""
        if self._next is not None and now < self._next:
            return
        self._next = now + self.period
        self._out += self.epochs[self._index]
        self._index += 1
        if self._index == len(self.epochs):
            self._index = 0
            self.laps += 1

    def data_to_send(self) -> bytes:
        """What the receiver has to send now."""
        data = bytes(self._out)
        self._out.clear()
        return data


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
