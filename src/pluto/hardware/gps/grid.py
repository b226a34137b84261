"""The local metric grid of GPS fixes ("gpsmeter"): x east and y north of an origin, in metres.

A transverse Mercator projection of the WGS84 ellipsoid centred on the origin (PROJ's ``tmerc`` through pyproj, scale
1 on the origin's meridian): within a few kilometres of the origin its scale error is below 10⁻⁶ (a millimetre per
kilometre), and grid north is true north along the origin's meridian.
"""

from __future__ import annotations

import math

from pyproj import Transformer

__all__ = ["LocalGrid"]


class LocalGrid:
    """Conversions between latitude/longitude (WGS84, degrees) and the local grid (m) of ``origin``.

    Args:
        latitude, longitude: of the grid's origin, degrees.

    Raises:
        ValueError: an origin outside [-90, 90] x [-180, 180] or not finite.
    """

    def __init__(self, latitude: float, longitude: float) -> None:
        if not (math.isfinite(latitude) and math.isfinite(longitude)):
            raise ValueError(f"the origin must be finite, got {latitude}, {longitude}")
        if not (-90.0 < latitude < 90.0 and -180.0 <= longitude <= 180.0):
            raise ValueError(
                f"the origin must be a latitude in (-90, 90) and a longitude in [-180, 180]: {latitude}, {longitude}"
            )
        self.origin = (latitude, longitude)
        proj = f"+proj=tmerc +lat_0={latitude!r} +lon_0={longitude!r} +k_0=1 +x_0=0 +y_0=0 +ellps=WGS84 +units=m"
        self._forward = Transformer.from_crs("EPSG:4326", proj, always_xy=True)
        self._inverse = Transformer.from_crs(proj, "EPSG:4326", always_xy=True)

    def to_grid(self, latitude: float, longitude: float) -> tuple[float, float]:
        """(x east, y north) in m of a point given in degrees."""
        x, y = self._forward.transform(longitude, latitude)
        return float(x), float(y)

    def to_geodetic(self, x: float, y: float) -> tuple[float, float]:
        """(latitude, longitude) in degrees of the grid point (x east, y north) in m."""
        lon, lat = self._inverse.transform(x, y)
        return float(lat), float(lon)
