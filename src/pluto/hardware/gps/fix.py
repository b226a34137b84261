"""From NMEA sentences to ``GPS/State`` fixes: a pure core, fed decoded sentences with their arrival times.

Each epoch of the receiver (its burst of sentences for one instant: RMC, VTG, GGA, GSA, GSV, ... in the order the
receiver uses) gives one :class:`~pluto.msgs.GpsFix`, on the local grid of the configured origin
(:class:`.grid.LocalGrid`), stamped with the time the epoch's GGA arrived (its RMC's without a GGA). The fix is made
from all the sentences of that epoch: GGA's position, quality, satellites and altitude; RMC's position and validity
(a receiver that sends RMC without GGA gets quality 1 when valid); GSA's dilution of precision when GGA leaves it
empty, its satellites for an RMC-only receiver, and its fix type. Only the epoch's own sentences count: a GSA of the
previous epoch never decides the quality of this one.

Without a fix (quality 0, no position, a void RMC or a GSA fix type 1 of that epoch) the fix is published as such:
quality 0, its satellites and dilution, and NaN for the position, never the last position passed off as fresh.
"""

# Strategy: sentences are gathered into the current epoch. GGA and RMC carry the epoch's UTC time: one with another
# time, or a second GGA (or RMC) in the same epoch, starts a new epoch and completes the current one. GSA, VTG and GSV
# carry no time and join the epoch under way; those that come before any GGA or RMC of an epoch are the tail of an
# epoch whose start was missed (the host connected during it) and are left out. Waiting for the next epoch to start
# would publish every fix a whole period late, so the assembler learns which sentence ends the receiver's epochs
# (the last one before the time changed, the same at two changes in a row, as gpsd learns its cycle end) and from
# then on completes an epoch as soon as that sentence arrives. If that sentence is lost (noise) the epoch is completed
# by the next one's start, or by flush() once the line has been quiet for a while; what it learnt is kept.

from __future__ import annotations

import datetime
import math

from pluto import msgs

from .codec import Event, Gga, Gsa, OtherSentence, Rmc
from .grid import LocalGrid

__all__ = ["EPOCH_GAP", "FixAssembler"]

NAN = math.nan
EPOCH_GAP = 0.5
"""s of silence after which the epoch under way is taken as complete (see :meth:`FixAssembler.flush`)."""


def _kind(event: Event) -> str:
    if isinstance(event, OtherSentence):
        return event.sentence_type
    return type(event).__name__.upper()


class _Epoch:
    """The sentences of one epoch so far."""

    def __init__(self) -> None:
        self.time: datetime.time | None = None
        self.gga: Gga | None = None
        self.rmc: Rmc | None = None
        self.gsa: list[Gsa] = []
        self.stamp = NAN
        self.last = NAN  # arrival of its newest sentence

    @property
    def started(self) -> bool:
        return self.gga is not None or self.rmc is not None


class FixAssembler:
    """Turns the sentences of a receiver into one fix per epoch on the local grid.

    Args:
        grid: the local grid (its origin).
    """

    def __init__(self, grid: LocalGrid) -> None:
        self.grid = grid
        self.fixes = 0
        self.end_type: str | None = None
        """The sentence type that ends the receiver's epochs, once learnt (None before)."""
        self._candidate: str | None = None
        self._last_type: str | None = None
        self._epoch = _Epoch()

    def update(self, event: Event, stamp: float) -> list[msgs.GpsFix]:
        """Take one decoded sentence, arrived at ``stamp`` (s); return the fixes of the epochs it completes (none,
        one, or two while the end of an epoch is being learnt)."""
        if not isinstance(event, Gga | Rmc | Gsa | OtherSentence):
            return []
        fixes: list[msgs.GpsFix] = []
        epoch = self._epoch
        kind = _kind(event)
        if isinstance(event, Gga | Rmc):
            repeated = epoch.gga is not None if isinstance(event, Gga) else epoch.rmc is not None
            new_time = event.time is not None and epoch.time is not None and event.time != epoch.time
            if epoch.started and (repeated or new_time):
                self._learn()
                fixes += self._complete()
                epoch = self._epoch
            if epoch.time is None:
                epoch.time = event.time
            if isinstance(event, Gga):
                epoch.gga = event
                epoch.stamp = stamp
            else:
                epoch.rmc = event
                if epoch.gga is None:
                    epoch.stamp = stamp
        elif not epoch.started:
            self._last_type = kind
            return fixes  # the tail of an epoch whose start was missed
        elif isinstance(event, Gsa):
            epoch.gsa.append(event)
        epoch.last = stamp
        self._last_type = kind
        if kind == self.end_type:
            fixes += self._complete()
        return fixes

    def flush(self, now: float, gap: float = EPOCH_GAP) -> list[msgs.GpsFix]:
        """The fix of the epoch under way if nothing has arrived for ``gap`` s by ``now`` (its end was lost)."""
        epoch = self._epoch
        if epoch.started and now - epoch.last >= gap:
            return self._complete()
        return []

    def _learn(self) -> None:
        """The epoch under way ends because the next began: its last sentence may be the receiver's epoch end."""
        if self.end_type is not None or self._last_type is None:
            return
        if self._last_type == self._candidate:
            self.end_type = self._candidate
        else:
            self._candidate = self._last_type

    def _complete(self) -> list[msgs.GpsFix]:
        epoch, self._epoch = self._epoch, _Epoch()
        if not epoch.started:
            return []
        gga, rmc = epoch.gga, epoch.rmc
        no_fix = any(g.fix_type == 1 for g in epoch.gsa) or (rmc is not None and not rmc.valid)
        gsa_hdop = next((g.hdop for g in epoch.gsa if g.hdop is not None), None)
        if gga is not None:
            quality = 0 if no_fix else gga.quality
            hdop = gga.hdop if gga.hdop is not None else gsa_hdop
            lat, lon = gga.latitude, gga.longitude
            if (lat is None or lon is None) and rmc is not None:
                lat, lon = rmc.latitude, rmc.longitude
            return [self._fix(epoch.stamp, lat, lon, gga.altitude, quality, gga.satellites, hdop)]
        assert rmc is not None
        satellites = len({p for g in epoch.gsa for p in g.satellites})
        quality = 0 if no_fix else 1
        return [self._fix(epoch.stamp, rmc.latitude, rmc.longitude, None, quality, satellites, gsa_hdop)]

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
