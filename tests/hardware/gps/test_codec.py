"""The NMEA 0183 codec against published example sentences, with checksums computed here by the standard's rule."""

from __future__ import annotations

import datetime
import functools
import operator

import numpy as np
import pytest

from pluto.codec import NEED_DATA, ConnectionClosed
from pluto.hardware.gps.codec import (
    KNOT,
    MAX_LINE,
    Gga,
    Gsa,
    LocalProtocolError,
    NmeaDecoder,
    OtherSentence,
    Rmc,
    encode,
)

# The classic examples of the NMEA 0183 reference pages (gpsinformation.org, Trimble's and NovAtel's manuals).
GGA = b"$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\r\n"
RMC = b"$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A\r\n"
GSA = b"$GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1*39\r\n"
NO_FIX = b"$GPGGA,,,,,,0,00,99.99,,,,,,*48\r\n"  # what a u-blox receiver sends before its first fix


def nmea_checksum(sentence: bytes) -> int:
    """XOR of the characters between '$' and '*' (NMEA 0183)."""
    body = sentence[1 : sentence.index(b"*")]
    return functools.reduce(operator.xor, body, 0)


@pytest.mark.parametrize("sentence", [GGA, RMC, GSA, NO_FIX])
def test_the_examples_checksums_follow_the_rule(sentence: bytes) -> None:
    assert f"{nmea_checksum(sentence):02X}".encode() == sentence[sentence.index(b"*") + 1 : -2]


def test_gga_rmc_gsa_decode_to_degrees_and_si() -> None:
    decoder = NmeaDecoder()
    decoder.receive_data(GGA + RMC + GSA)
    gga, rmc, gsa = list(decoder.events())
    assert isinstance(gga, Gga) and isinstance(rmc, Rmc) and isinstance(gsa, Gsa)
    assert gga.latitude == pytest.approx(48 + 7.038 / 60) and gga.longitude == pytest.approx(11 + 31.0 / 60)
    assert (gga.quality, gga.satellites, gga.hdop, gga.altitude) == (1, 8, 0.9, 545.4)
    assert gga.time is not None and (gga.time.hour, gga.time.minute, gga.time.second) == (12, 35, 19)
    assert rmc.valid and rmc.speed == pytest.approx(22.4 * 1852 / 3600) and rmc.course == 84.4
    assert rmc.date == datetime.date(1994, 3, 23) and rmc.mode == ""  # NMEA 0183 2.1: no mode field
    assert gga.geoid_separation == 46.9
    assert gsa.fix_type == 3 and gsa.satellites == (4, 5, 9, 12, 24)
    assert (gsa.pdop, gsa.hdop, gsa.vdop) == (2.5, 1.3, 2.1)


def test_no_fix_has_no_position() -> None:
    decoder = NmeaDecoder()
    decoder.receive_data(NO_FIX)
    [gga] = list(decoder.events())
    assert isinstance(gga, Gga)
    assert gga.quality == 0 and gga.latitude is None and gga.longitude is None and gga.altitude is None


def test_bad_and_missing_checksums_are_counted_and_skipped() -> None:
    decoder = NmeaDecoder()
    bad = GGA.replace(b"*47", b"*46")
    missing = GGA.replace(b"*47", b"")
    decoder.receive_data(bad + missing + RMC)
    events = list(decoder.events())
    assert [type(e) for e in events] == [Rmc]
    stats = decoder.statistics()
    assert stats.bad_checksum == 2 and stats.sentences == 1 and decoder.last_error is not None


def test_garbage_between_sentences_and_byte_by_byte() -> None:
    decoder = NmeaDecoder()
    stream = b"\x00\xff junk" + GGA + b"noise\r\n" + b"$GPG" + RMC  # a sentence cut by noise, then a whole one
    events = []
    for byte in stream:
        decoder.receive_data(bytes([byte]))
        events += list(decoder.events())
    assert [type(e) for e in events] == [Gga, Rmc]
    assert decoder.statistics().garbage_bytes == len(b"\x00\xff junk") + len(b"noise\r\n") + len(b"$GPG")


def test_unknown_sentences_and_malformed_fields() -> None:
    decoder = NmeaDecoder()
    gsv = b"$GPGSV,1,1,00*79\r\n"
    broken = b"$GPGGA,123519,48x7.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"
    broken += f"*{functools.reduce(operator.xor, broken[1:], 0):02X}\r\n".encode()
    decoder.receive_data(gsv + broken + GGA)
    events = list(decoder.events())
    assert events[0] == OtherSentence("GP", "GSV") and isinstance(events[1], Gga)
    assert decoder.statistics().malformed == 1 and decoder.statistics().unknown == 1


def test_the_buffer_is_capped() -> None:
    decoder = NmeaDecoder()
    decoder.receive_data(b"x" * 10_000)
    assert decoder.buffered_bytes <= MAX_LINE
    decoder.receive_data(b"\n" + GGA)
    assert [type(e) for e in decoder.events()] == [Gga]
    decoder.receive_data(GGA[:20])
    decoder.receive_data(b"")
    assert decoder.next_event() == ConnectionClosed(truncated=20)
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")


def test_encode_round_trip() -> None:
    t = datetime.time(8, 9, 10, 500000)
    for event in (
        Gga(t, -33.8568, 151.2153, 2, 11, 0.7, 12.3),
        Gga(t, None, None, 0, 3, 99.99, None),
        Rmc(t, True, 59.3498, -18.0707, 1.5, 271.0, datetime.date(2026, 1, 2)),
        Rmc(t, False, None, None, None, None, None),
        Gsa(3, (1, 2, 30), 1.9, 1.1, 1.5),
    ):
        data = encode(event)
        assert data.endswith(b"\r\n") and int(data[-4:-2], 16) == nmea_checksum(data)
        decoder = NmeaDecoder()
        decoder.receive_data(data)
        [back] = list(decoder.events())
        if isinstance(event, Gga | Rmc) and event.latitude is not None:
            assert isinstance(back, Gga | Rmc)
            assert back.latitude == pytest.approx(event.latitude, abs=1e-6)
            assert back.longitude == pytest.approx(event.longitude, abs=1e-6)
        if isinstance(event, Rmc) and event.speed is not None:
            assert isinstance(back, Rmc) and back.speed == pytest.approx(event.speed, abs=0.01 * KNOT)
        assert type(back) is type(event)
    with pytest.raises(LocalProtocolError):
        encode(Gsa(3, tuple(range(13)), None, None, None))


def test_every_intact_sentence_survives_one_percent_corrupted_bytes() -> None:
    rng = np.random.default_rng(11)
    t = datetime.time(1, 2, 3)
    sentences = [bytearray(encode(Gga(t, 59.0 + k * 1e-5, 18.0, 1, k % 13, 0.9, 10.0))) for k in range(1000)]
    intact = []
    for k, s in enumerate(sentences):
        hits = rng.random(len(s)) < 0.01
        for i in np.flatnonzero(hits):
            s[i] ^= int(rng.integers(1, 256))
        if not hits.any():
            intact.append(round((59.0 + k * 1e-5 - 59.0) * 1e5))
    decoder = NmeaDecoder()
    stream = b"".join(sentences)
    got = []
    for start in range(0, len(stream), 61):
        decoder.receive_data(stream[start : start + 61])
        got += [round((e.latitude - 59.0) * 1e5) for e in decoder.events() if isinstance(e, Gga) and e.latitude]
    assert 0 < len(intact) < len(sentences)
    assert set(intact) <= set(got)
    assert decoder.statistics().bad_checksum + decoder.statistics().malformed > 0


def test_need_data() -> None:
    assert NmeaDecoder().next_event() is NEED_DATA
