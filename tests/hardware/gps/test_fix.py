"""The local grid (pyproj's transverse Mercator about the origin) and the assembly of fixes from sentences."""

from __future__ import annotations

import datetime
import math

import pytest

from pluto.hardware.gps.codec import Gga, Gsa, Rmc
from pluto.hardware.gps.fix import FixAssembler
from pluto.hardware.gps.grid import LocalGrid
from pluto.sim.gps import grid_to_geodetic

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


def test_a_fix_per_gga_on_the_grid() -> None:
    grid = LocalGrid(*ORIGIN)
    lat, lon = grid.to_geodetic(30.0, -40.0)
    assembler = FixAssembler(grid)
    assert assembler.update(Gsa(3, (1, 2, 3, 4, 5, 6, 7), 1.9, 1.2, 1.5), 9.0) is None
    fix = assembler.update(Gga(T, lat, lon, 2, 7, None, 12.0), 10.0)
    assert fix is not None
    assert (fix.x, fix.y) == pytest.approx((30.0, -40.0), abs=1e-6)
    assert (fix.stamp, fix.quality, fix.satellites, fix.altitude) == (10.0, 2, 7, 12.0)
    assert fix.hdop == 1.2  # GGA's empty: from the GSA


def test_no_fix_is_published_as_such_never_as_a_stale_position() -> None:
    grid = LocalGrid(*ORIGIN)
    assembler = FixAssembler(grid)
    good = assembler.update(Gga(T, *grid.to_geodetic(1.0, 2.0), 1, 6, 1.0, 5.0), 1.0)
    assert good is not None and good.quality == 1
    lost = assembler.update(Gga(T, None, None, 0, 2, 99.99, None), 2.0)
    assert lost is not None and lost.quality == 0 and lost.stamp == 2.0 and lost.satellites == 2
    assert math.isnan(lost.x) and math.isnan(lost.y) and math.isnan(lost.latitude)
    # a void RMC of the same epoch overrules a GGA that still carries a position
    t2 = datetime.time(12, 0, 1)
    assembler.update(Rmc(t2, False, None, None, None, None, None), 2.5)
    void = assembler.update(Gga(t2, *grid.to_geodetic(1.0, 2.0), 1, 4, 3.0, 5.0), 3.0)
    assert void is not None and void.quality == 0 and math.isnan(void.x)
    # a GSA saying "no fix" too
    assembler.update(Gsa(1, (), None, None, None), 3.5)
    nofix = assembler.update(Gga(datetime.time(12, 0, 2), *grid.to_geodetic(1.0, 2.0), 1, 4, 3.0, 5.0), 4.0)
    assert nofix is not None and nofix.quality == 0


def test_rmc_only_receivers() -> None:
    grid = LocalGrid(*ORIGIN)
    assembler = FixAssembler(grid)
    fix = assembler.update(Rmc(T, True, *grid.to_geodetic(-3.0, 4.0), 1.0, 90.0, None), 1.0)
    assert fix is not None and fix.quality == 1 and (fix.x, fix.y) == pytest.approx((-3.0, 4.0), abs=1e-6)
    void = assembler.update(Rmc(T, False, None, None, None, None, None), 2.0)
    assert void is not None and void.quality == 0
