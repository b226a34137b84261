"""The simulated GPS receiver: fixes on a local metric grid and in latitude/longitude.

The local grid is east (x) / north (y) of the world's GPS origin, which is the world frame's origin. Quality follows
the original's reading of its receiver (docs/design.md): 2 is a differential (sub-metre) fix, 1 a plain fix; more than 5
satellites are wanted. The noise profile can make the receiver lose and regain the differential fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pluto.sim.noise import IDEAL, NoiseProfile

WGS84_A = 6_378_137.0  # semi-major axis, m
WGS84_E2 = 6.694379990141316e-3  # first eccentricity squared


@dataclass(frozen=True)
class Fix:
    """One fix."""

    x: float
    y: float
    latitude: float
    longitude: float
    altitude: float
    satellites: int
    quality: int
    hdop: float


def grid_to_geodetic(x: float, y: float, origin: tuple[float, float, float]) -> tuple[float, float]:
    """Latitude and longitude (degrees) of a point x m east and y m north of ``origin`` (lat, lon, alt).

    The local tangent plane on the WGS84 ellipsoid, with the meridian radius M = a(1-e²)/(1-e² sin²φ)^1.5 north and
    the prime-vertical radius N = a/sqrt(1-e² sin²φ) (times cos φ) east: about a centimetre of error within a few
    kilometres.
    """
    lat0, lon0, _ = origin
    phi = math.radians(lat0)
    w = 1.0 - WGS84_E2 * math.sin(phi) ** 2
    meridian = WGS84_A * (1.0 - WGS84_E2) / w**1.5
    prime = WGS84_A / math.sqrt(w)
    lat = lat0 + math.degrees(y / meridian)
    lon = lon0 + math.degrees(x / (prime * math.cos(phi)))
    return lat, lon


class SimGps:
    """Produces fixes from the true position.

    Args:
        origin: geodetic origin (lat °, lon °, alt m) of the world frame.
        noise: error model.  rng: random generator.  satellites: visible satellites with a good sky.
    """

    def __init__(
        self,
        origin: tuple[float, float, float] = (59.3498, 18.0707, 10.0),
        noise: NoiseProfile = IDEAL,
        rng: np.random.Generator | None = None,
        satellites: int = 9,
    ) -> None:
        self.origin = origin
        self.noise = noise
        self.rng = rng or np.random.default_rng(0)
        self.satellites = satellites
        self.differential = True

    def fix(self, dt: float, x: float, y: float) -> Fix:
        """A fix ``dt`` seconds after the previous one with the antenna truly at (x, y)."""
        n = self.noise
        if self.differential and n.gps_degrade_rate and self.rng.random() < n.gps_degrade_rate * dt:
            self.differential = False
        elif not self.differential and self.rng.random() < n.gps_recover_rate * dt:
            self.differential = True
        std = n.gps_std if self.differential else n.gps_degraded_std
        if std:
            x, y = x + float(self.rng.normal(0.0, std)), y + float(self.rng.normal(0.0, std))
        sats = self.satellites if self.differential else max(3, self.satellites - 4)
        lat, lon = grid_to_geodetic(x, y, self.origin)
        return Fix(
            x=x,
            y=y,
            latitude=lat,
            longitude=lon,
            altitude=self.origin[2],
            satellites=sats,
            quality=2 if self.differential else 1,
            hdop=0.8 if self.differential else 2.5,
        )
