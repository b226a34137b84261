"""pynmeagps (a third-party NMEA parser, validating checksums and every field) reads the emulated receiver's epochs.
Skipped when pynmeagps is not installed (it is not one of Pluto's dependencies)."""

from __future__ import annotations

import io

import pytest

from pluto.hardware.gps.emulate import CircleTrack, NmeaReceiver
from pluto.hardware.gps.grid import LocalGrid

pynmeagps = pytest.importorskip("pynmeagps", reason="pynmeagps is not installed (pip install pynmeagps)")


def test_pynmeagps_parses_every_sentence_of_fix_and_no_fix_epochs() -> None:
    grid = LocalGrid(59.3498, 18.0707)
    walls = iter([1764417601.37, 1764417602.37, 1764417603.37])
    fix = NmeaReceiver(CircleTrack(grid), wall=lambda: next(walls))
    none = NmeaReceiver(CircleTrack(grid, outage=(0.0, 120.0)), wall=lambda: 1764417604.37)
    stream = fix.epoch(0.0) + fix.epoch(1.0) + none.epoch(2.0)
    reader = pynmeagps.NMEAReader(io.BytesIO(stream), validate=pynmeagps.VALCKSUM, quitonerror=pynmeagps.ERR_RAISE)
    messages = [parsed for _, parsed in reader]
    assert [m.msgID for m in messages[:5]] == ["RMC", "VTG", "GGA", "GSA", "GSV"]
    gga = [m for m in messages if m.msgID == "GGA"]
    assert [g.quality for g in gga] == [2, 2, 0] and gga[0].sep == pytest.approx(23.4)
    assert [str(g.time) for g in gga] == ["12:00:01", "12:00:02", "12:00:04"]
    assert [m.posMode for m in messages if m.msgID == "RMC"] == ["D", "D", "N"]
    gsv = [m for m in messages if m.msgID == "GSV"]
    assert gsv[0].numSV == 11 and gsv[-1].numSV == 0
