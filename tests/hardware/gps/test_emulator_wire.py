"""What the emulated receiver sends, byte for byte: one epoch in the order and with the fields of a u-blox receiver
(RMC with its NMEA 2.3 mode, VTG, GGA with the geoid separation, GSA, GSV), timed on whole seconds."""

from __future__ import annotations

import datetime

import pynmea2  # type: ignore[import-untyped]

from pluto.hardware.gps.emulate import NmeaReceiver, TrackPoint

WALL = 1764417601.37  # 2025-11-29 12:00:01.37 UTC


class Fixed:
    def __init__(self, point: TrackPoint | None) -> None:
        self.p = point

    def point(self, t: float) -> TrackPoint | None:
        return self.p


HERE = TrackPoint(59.3498, 18.0707, altitude=12.5, speed=1.0, course=90.0, quality=2, satellites=5, hdop=0.9)


def test_an_epoch_with_a_differential_fix() -> None:
    sent = NmeaReceiver(Fixed(HERE), wall=lambda: WALL).epoch(0.0)
    assert sent.decode().splitlines() == [
        "$GPRMC,120001.00,A,5920.98800,N,01804.24200,E,1.94,90.0,291125,,,D*5E",
        "$GPVTG,90.0,T,,M,1.944,N,3.600,K,D*3C",
        "$GPGGA,120001.00,5920.98800,N,01804.24200,E,2,05,0.90,12.5,M,23.4,M,,*6C",
        "$GPGSA,A,3,02,05,07,09,13,,,,,,,,1.4,0.90,1.2*06",
        "$GPGSV,2,1,07,02,24,074,32,05,45,185,35,07,59,259,37,09,73,333,39*70",
        "$GPGSV,2,2,07,13,26,121,43,16,47,232,18,20,75,020,18*48",
    ]


def test_an_epoch_without_a_fix() -> None:
    sent = NmeaReceiver(Fixed(None), wall=lambda: WALL).epoch(0.0)
    assert sent.decode().splitlines() == [
        "$GPRMC,120001.00,V,,,,,,,291125,,,N*73",
        "$GPVTG,,T,,M,,N,,K,N*2C",
        "$GPGGA,120001.00,,,,,0,00,,,,,,,*4A",
        "$GPGSA,A,1,,,,,,,,,,,,,,,*1E",
        "$GPGSV,1,1,00*79",
    ]


def test_epochs_are_on_whole_seconds_and_never_share_one() -> None:
    walls = iter([WALL, WALL + 0.98, WALL + 1.02, WALL + 2.6])
    receiver = NmeaReceiver(Fixed(HERE), wall=lambda: next(walls))
    times = []
    for _ in range(4):
        gga = next(line for line in receiver.epoch(0.0).decode().splitlines() if line[3:6] == "GGA")
        times.append(pynmea2.parse(gga, check=True).timestamp.replace(tzinfo=None))
    # 01.37 -> 01; 02.35 -> 02; 02.39 is the same second again, so the next one; 03.97 -> 03 would go back: 04
    assert times == [datetime.time(12, 0, s) for s in (1, 2, 3, 4)]
