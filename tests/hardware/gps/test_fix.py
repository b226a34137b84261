"""The local grid (pyproj's transverse Mercator about the origin) and the assembly of fixes from sentences."""

from __future__ import annotations

import datetime
import math

import pytest

from pluto import msgs
from pluto.hardware.gps.codec import Gga, Gsa, NmeaDecoder, Rmc
from pluto.hardware.gps.fix import EPOCH_GAP, FixAssembler
from pluto.hardware.gps.grid import LocalGrid
from pluto.hardware.gps.sim import grid_to_geodetic

ORIGIN = (59.3498, 18.0707)
T = datetime.time(12, 0, 0)


def test_grid_origin_axes_and_round_trip() -> None:
    grid = LocalGrid(*ORIGIN)
    assert grid.to_grid(*ORIGIN) == pytest.approx((0.0, 0.0), abs=1e-6)
    # one arc-minute of latitude north: the meridian radius M = a(1-e²)/(1-e² sin²φ)^1.5 = 6 382 822 m at 59.35°,
    # times π/10800 = 1856.7 m
    x, y = grid.to_grid(ORIGIN[0] + 1 / 60, ORIGIN[1])
    assert x == pytest.approx(0.0, abs=1e-6) and y == pytest.approx(1856.7, abs=0.1)
    x, y = grid.to_grid(ORIGIN[0], ORIGIN[1] + 0.01)
    assert x > 0 and abs(y) < 0.1  # east is +x
    assert grid.to_grid(*grid.to_geodetic(1234.5, -987.6)) == pytest.approx((1234.5, -987.6), abs=1e-6)
    with pytest.raises(ValueError):
        LocalGrid(91.0, 0.0)


def test_grid_agrees_with_the_simulators_tangent_plane() -> None:
    grid = LocalGrid(*ORIGIN)
    for x, y in ((100.0, 200.0), (-500.0, 50.0), (0.0, -1000.0)):
        lat, lon = grid_to_geodetic(x, y, (*ORIGIN, 0.0))
        gx, gy = grid.to_grid(lat, lon)
        assert (gx, gy) == pytest.approx((x, y), abs=0.05)  # centimetres within a kilometre


def test_a_fix_per_epoch_on_the_grid() -> None:
    grid = LocalGrid(*ORIGIN)
    lat, lon = grid.to_geodetic(30.0, -40.0)
    assembler = FixAssembler(grid)
    assert assembler.update(Gga(T, lat, lon, 2, 7, None, 12.0), 10.0) == []
    assert assembler.update(Gsa(3, (1, 2, 3, 4, 5, 6, 7), 1.9, 1.2, 1.5), 10.1) == []
    assert assembler.flush(10.2) == []  # the line is not quiet yet
    [fix] = assembler.flush(10.1 + EPOCH_GAP)
    assert (fix.x, fix.y) == pytest.approx((30.0, -40.0), abs=1e-6)
    assert (fix.stamp, fix.quality, fix.satellites, fix.altitude) == (10.0, 2, 7, 12.0)
    assert fix.hdop == 1.2  # GGA's empty: from the GSA of its epoch


def test_no_fix_is_published_as_such_never_as_a_stale_position() -> None:
    grid = LocalGrid(*ORIGIN)
    assembler = FixAssembler(grid)
    t2, t3 = datetime.time(12, 0, 1), datetime.time(12, 0, 2)
    assert assembler.update(Gga(T, *grid.to_geodetic(1.0, 2.0), 1, 6, 1.0, 5.0), 1.0) == []
    # a receiver without a fix may leave the time empty: a second GGA is a new epoch all the same
    [good] = assembler.update(Gga(None, None, None, 0, 2, 99.99, None), 2.0)
    assert good.quality == 1
    [lost] = assembler.flush(5.0)
    assert lost.quality == 0 and lost.stamp == 2.0 and lost.satellites == 2
    assert math.isnan(lost.x) and math.isnan(lost.y) and math.isnan(lost.latitude)
    # a void RMC of the same epoch overrules a GGA that still carries a position
    assembler.update(Rmc(t2, False, None, None, None, None, None), 5.5)
    assembler.update(Gga(t2, *grid.to_geodetic(1.0, 2.0), 1, 4, 3.0, 5.0), 6.0)
    # the next epoch completes it; GGA was the last sentence of two epochs in a row, so it ends this one at once
    void, fix = assembler.update(Gga(t3, *grid.to_geodetic(1.0, 2.0), 1, 4, 3.0, 5.0), 7.0)
    assert void.quality == 0 and math.isnan(void.x) and void.stamp == 6.0
    assert fix.quality == 1 and assembler.end_type == "GGA"
    # a GSA of its epoch saying "no fix" too
    assembler = FixAssembler(grid)
    assembler.update(Gga(T, *grid.to_geodetic(1.0, 2.0), 1, 4, 3.0, 5.0), 8.0)
    assembler.update(Gsa(1, (), None, None, None), 8.5)
    [nofix] = assembler.flush(9.0)
    assert nofix.quality == 0


def test_rmc_only_receivers() -> None:
    grid = LocalGrid(*ORIGIN)
    assembler = FixAssembler(grid)
    assert assembler.update(Rmc(T, True, *grid.to_geodetic(-3.0, 4.0), 1.0, 90.0, None), 1.0) == []
    assembler.update(Gsa(3, (4, 5, 6), 2.0, 1.1, 1.5), 1.1)
    [fix] = assembler.update(Rmc(datetime.time(12, 0, 1), False, None, None, None, None, None), 2.0)
    assert fix.quality == 1 and (fix.x, fix.y) == pytest.approx((-3.0, 4.0), abs=1e-6)
    assert (fix.satellites, fix.hdop) == (3, 1.1)
    [void] = assembler.flush(3.0)
    assert void.quality == 0


# Recorded from a receiver of the u-blox kind, one epoch a second in its order: RMC, VTG, GGA, GSA, GSV, GLL. The
# first epoch has no fix, the second is the first with one.
UBLOX_EPOCHS = (
    (
        b"$GPRMC,120000.00,V,,,,,,,291126,,,N*71\r\n"
        b"$GPVTG,,,,,,,,,N*30\r\n"
        b"$GPGGA,120000.00,,,,,0,03,4.50,,,,,,*57\r\n"
        b"$GPGSA,A,1,,,,,,,,,,,,,99.99,99.99,99.99*30\r\n"
        b"$GPGSV,1,1,03,05,45,120,30,13,60,200,28,20,30,300,25*47\r\n"
        b"$GPGLL,,,,,120000.00,V,N*49\r\n"
    ),
    (
        b"$GPRMC,120001.00,A,5920.98800,N,01804.24200,E,0.004,,291126,,,A*77\r\n"
        b"$GPVTG,,T,,M,0.004,N,0.007,K,A*20\r\n"
        b"$GPGGA,120001.00,5920.98800,N,01804.24200,E,1,05,2.10,25.3,M,23.4,M,,*67\r\n"
        b"$GPGSA,A,3,05,13,20,23,27,,,,,,,,3.20,2.10,2.40*07\r\n"
        b"$GPGSV,2,1,05,05,45,120,40,13,60,200,38,20,30,300,35,23,20,050,33*73\r\n"
        b"$GPGSV,2,2,05,27,10,010,30*4A\r\n"
        b"$GPGLL,5920.98800,N,01804.24200,E,120001.00,A,A*65\r\n"
    ),
    (
        b"$GPRMC,120002.00,A,5920.98810,N,01804.24220,E,0.004,,291126,,,A*77\r\n"
        b"$GPVTG,,T,,M,0.004,N,0.007,K,A*20\r\n"
        b"$GPGGA,120002.00,5920.98810,N,01804.24220,E,1,05,2.10,25.3,M,23.4,M,,*67\r\n"
        b"$GPGSA,A,3,05,13,20,23,27,,,,,,,,3.20,2.10,2.40*07\r\n"
        b"$GPGSV,2,1,05,05,45,120,40,13,60,200,38,20,30,300,35,23,20,050,33*73\r\n"
        b"$GPGSV,2,2,05,27,10,010,30*4A\r\n"
        b"$GPGLL,5920.98810,N,01804.24220,E,120002.00,A,A*65\r\n"
    ),
    (
        b"$GPRMC,120003.00,A,5920.98820,N,01804.24240,E,0.004,,291126,,,A*73\r\n"
        b"$GPVTG,,T,,M,0.004,N,0.007,K,A*20\r\n"
        b"$GPGGA,120003.00,5920.98820,N,01804.24240,E,1,05,2.10,25.3,M,23.4,M,,*63\r\n"
        b"$GPGSA,A,3,05,13,20,23,27,,,,,,,,3.20,2.10,2.40*07\r\n"
        b"$GPGSV,2,1,05,05,45,120,40,13,60,200,38,20,30,300,35,23,20,050,33*73\r\n"
        b"$GPGSV,2,2,05,27,10,010,30*4A\r\n"
        b"$GPGLL,5920.98820,N,01804.24240,E,120003.00,A,A*61\r\n"
    ),
)


def _fixes_of(epochs: tuple[bytes, ...]) -> list[tuple[float, msgs.GpsFix]]:
    """(epoch index + sentence index / 10, fix) for each fix, the sentences fed one by one as the driver does."""
    decoder, assembler = NmeaDecoder(), FixAssembler(LocalGrid(59.3498, 18.0707))
    out = []
    for e, epoch in enumerate(epochs):
        decoder.receive_data(epoch)
        for i, event in enumerate(decoder.events()):
            t = e + i / 10
            out += [(t, fix) for fix in assembler.update(event, t)]
    return out


def test_the_first_fix_after_no_fix_is_published_with_its_position() -> None:
    fixes = _fixes_of(UBLOX_EPOCHS)
    qualities = [f.quality for _, f in fixes]
    assert qualities[:2] == [0, 1]  # the GSA that said "no fix" was the first epoch's, not the second's
    first = fixes[1][1]
    assert (first.latitude, first.longitude) == pytest.approx((59 + 20.988 / 60, 18 + 4.242 / 60), abs=1e-9)
    assert (first.satellites, first.hdop, first.altitude) == (5, 2.1, 25.3)


def test_one_fix_per_epoch_completed_by_its_last_sentence_once_learnt() -> None:
    fixes = _fixes_of(UBLOX_EPOCHS)
    assert [f.quality for _, f in fixes] == [0, 1, 1, 1]  # one per epoch: never one from RMC and one from GGA
    assert [f.stamp for _, f in fixes] == [0.2, 1.2, 2.2, 3.2]  # each stamped with its GGA's arrival
    # the first two are completed by the next epoch's RMC; once the GLL is known to end an epoch, by the GLL
    assert [t for t, _ in fixes] == [1.0, 2.0, 2.6, 3.6]
