"""From NMEA sentences to ``GPS/State`` fixes: a pure core, fed decoded sentences with their arrival times.

Each GGA (the receiver's fix of the epoch) gives one :class:`~pluto.msgs.GpsFix`, stamped with the time its bytes
arrived, on the local grid of the configured origin (:class:`.grid.LocalGrid`). GSA gives the dilution of precision
when GGA leaves it empty and says when the receiver has no fix; RMC's void status (V) of the same epoch does too. A
receiver that sends RMC without GGA gets its fixes from RMC (quality 1 when valid, satellites from GSA).

Without a fix (quality 0, no position, a void RMC or a GSA fix type 1 of that epoch) the fix is published as such:
quality 0, its satellites and dilution, and NaN for the position, never the last position passed off as fresh.
"""

from __future__ import annotations

import math

from pluto import msgs

from .codec import Event, Gga, Gsa, Rmc
from .grid import LocalGrid

__all__ = ["FixAssembler"]

NAN = math.nan


class FixAssembler:
    """Turns the sentences of a receiver into fixes on the local grid.

    Args:
        grid: the local grid (its origin).
    """

    def __init__(self, grid: LocalGrid) -> None:
        self.grid = grid
        self.fixes = 0
        self._gsa: Gsa | None = None
        self._void_time: object = None  # the UTC time of a void RMC (no fix in that epoch)
        self._seen_gga = False

    def update(self, event: Event, stamp: float) -> msgs.GpsFix | None:
        """Take one decoded sentence, arrived at ``stamp`` (s); return the fix it completes, or None."""
        if isinstance(event, Gsa):
            self._gsa = event
            return None
        if isinstance(event, Rmc):
            self._void_time = event.time if not event.valid else None
            if self._seen_gga:
                return None
            sats = len(self._gsa.satellites) if self._gsa is not None else 0
            hdop = self._gsa.hdop if self._gsa is not None else None
            return self._fix(stamp, event.latitude, event.longitude, None, 1 if event.valid else 0, sats, hdop)
        if isinstance(event, Gga):
            self._seen_gga = True
            quality = event.quality
            if event.time is not None and event.time == self._void_time:
                quality = 0  # the same epoch's RMC said void
            if self._gsa is not None and self._gsa.fix_type == 1:
                quality = 0
            hdop = event.hdop if event.hdop is not None else (self._gsa.hdop if self._gsa is not None else None)
            return self._fix(stamp, event.latitude, event.longitude, event.altitude, quality, event.satellites, hdop)
        return None

    def _fix(
        self,
        stamp: float,
        lat: float | None,
        lon: float | None,
        alt: float | None,
        quality: int,
        satellites: int,
        hdop: float | None,
    ) -> msgs.GpsFix:
        self.fixes += 1
        h = NAN if hdop is None else hdop
        if quality <= 0 or lat is None or lon is None:
            return msgs.GpsFix(
                stamp=stamp,
                latitude=NAN,
                longitude=NAN,
                altitude=NAN,
                x=NAN,
                y=NAN,
                satellites=satellites,
                quality=0,
                hdop=h,
            )
        x, y = self.grid.to_grid(lat, lon)
        return msgs.GpsFix(
            stamp=stamp,
            latitude=lat,
            longitude=lon,
            altitude=NAN if alt is None else alt,
            x=x,
            y=y,
            satellites=satellites,
            quality=quality,
            hdop=h,
        )
