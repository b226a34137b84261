"""NMEA 0183 as a pure codec (no I/O, no clock): GGA, RMC and GSA sentences in, typed fixes out, and back (with VTG
and GSV, which an emulated receiver writes and the decoder hands out as OtherSentence).

    decoder = NmeaDecoder()
    decoder.receive_data(port.read(256))
    while (event := decoder.next_event()) is not NEED_DATA:
        handle(event)                     # Gga, Rmc, Gsa, OtherSentence

A sentence is ``$<talker><type>,<fields>*<hh>\\r\\n``: at most 82 characters, ``hh`` the XOR of every character
between ``$`` and ``*`` in hexadecimal (NMEA 0183 v2/v3). Parsing and checksums are pynmea2's; this module frames the
byte stream, counts what it drops, and turns pynmea2's sentences into small typed events in degrees, metres and m/s.
"""

# Strategy: the receiver's stream is lines; the decoder splits it on "\n" (bytes.find), takes what follows the last
# "$" of a line (a sentence cut by noise is followed by the next one's "$" on the same line) and hands the text to
# pynmea2 with strict checksums: a sentence without a checksum or with a wrong one is counted and dropped, never
# guessed at. Anything before the "$" is garbage, counted. A line longer than MAX_LINE with no end is dropped as
# garbage (the buffer is capped); an unknown sentence type is handed out as OtherSentence, counted. Empty fields
# (a receiver without a fix sends "$GPGGA,,,,,,0,00,99.99,,,,,,*48") become None, never 0: "no position" must not
# read as a position at the equator.

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Final

import pynmea2  # type: ignore[import-untyped]

from pluto.codec import NEED_DATA, ConnectionClosed, NeedData, StreamDecoder
from pluto.errors import LocalProtocolError

__all__ = [
    "MAX_LINE",
    "NEED_DATA",
    "ConnectionClosed",
    "DecoderStatistics",
    "Event",
    "Gga",
    "Gsa",
    "Gsv",
    "LocalProtocolError",
    "NeedData",
    "NmeaDecoder",
    "OtherSentence",
    "Rmc",
    "SatelliteInView",
    "Vtg",
    "encode",
    "gsv_sentences",
]

MAX_LINE: Final = 128
"""Longest line kept, bytes (a sentence is at most 82; some receivers exceed it a little)."""
KNOT: Final = 1852.0 / 3600.0
"""m/s per knot."""


@dataclass(frozen=True, slots=True)
class Gga:
    """A GGA sentence: the fix.

    Attributes:
        time: UTC time of the fix, or None.  latitude, longitude: degrees (north, east positive), None without a fix.
        quality: 0 no fix, 1 GPS, 2 differential, 4/5 RTK, 6 estimated.  satellites: used in the fix.
        hdop: horizontal dilution of precision, or None.  altitude: above mean sea level, m, or None.
        talker: ``GP``, ``GN``, ...  geoid_separation: the geoid's height above the WGS-84 ellipsoid, m, or None
        (the height above the ellipsoid is altitude + geoid_separation).
    """

    time: datetime.time | None
    latitude: float | None
    longitude: float | None
    quality: int
    satellites: int
    hdop: float | None
    altitude: float | None
    talker: str = "GP"
    geoid_separation: float | None = None


@dataclass(frozen=True, slots=True)
class Rmc:
    """An RMC sentence: the recommended minimum (position, speed, course, date).

    Attributes:
        valid: status A (True) or V (void).  speed: over ground, m/s, or None.  course: true, degrees, or None.
        mode: the mode indicator of NMEA 0183 2.3 (A autonomous, D differential, E estimated, N no fix), or ""
        for a receiver of an older version, which sends none.
    """

    time: datetime.time | None
    valid: bool
    latitude: float | None
    longitude: float | None
    speed: float | None
    course: float | None
    date: datetime.date | None
    talker: str = "GP"
    mode: str = ""


@dataclass(frozen=True, slots=True)
class Gsa:
    """A GSA sentence: the satellites used and the dilutions of precision.

    Attributes:
        fix_type: 1 no fix, 2 2-D, 3 3-D.  satellites: the PRNs used.  pdop, hdop, vdop: or None.
    """

    fix_type: int
    satellites: tuple[int, ...]
    pdop: float | None
    hdop: float | None
    vdop: float | None
    automatic: bool = True
    talker: str = "GP"


@dataclass(frozen=True, slots=True)
class Vtg:
    """A VTG sentence (course and speed over ground), as an emulated receiver writes it.

    Attributes:
        course: true, degrees, or None.  speed: m/s, or None.  mode: A, D, E or N (no fix).
    """

    course: float | None
    speed: float | None
    mode: str = "A"
    talker: str = "GP"


@dataclass(frozen=True, slots=True)
class SatelliteInView:
    """One satellite of a GSV sentence: PRN, elevation and azimuth (degrees), signal-to-noise ratio (dB-Hz, None
    when not tracked)."""

    prn: int
    elevation: int
    azimuth: int
    snr: int | None


@dataclass(frozen=True, slots=True)
class Gsv:
    """One GSV sentence (satellites in view), as an emulated receiver writes it: sentence ``number`` of ``total``,
    ``in_view`` satellites in all, up to four of them in this sentence."""

    total: int
    number: int
    in_view: int
    satellites: tuple[SatelliteInView, ...] = ()
    talker: str = "GP"


def gsv_sentences(satellites: tuple[SatelliteInView, ...], talker: str = "GP") -> list[Gsv]:
    """The GSV sentences that list ``satellites``, four a sentence (one sentence saying 0 when there is none)."""
    groups = [satellites[i : i + 4] for i in range(0, len(satellites), 4)] or [()]
    return [Gsv(len(groups), n, len(satellites), group, talker) for n, group in enumerate(groups, 1)]


@dataclass(frozen=True, slots=True)
class OtherSentence:
    """A well-formed sentence of a type the codec does not decode (GSV, VTG, ...)."""

    talker: str
    sentence_type: str


Event = Gga | Rmc | Gsa | OtherSentence | ConnectionClosed
"""What :meth:`NmeaDecoder.next_event` returns besides NEED_DATA."""


@dataclass(frozen=True, slots=True)
class DecoderStatistics:
    """What the decoder has seen: sentences decoded, dropped for a bad or missing checksum, malformed (a good
    checksum but fields that do not parse), of unknown types, garbage bytes, bytes received."""

    sentences: int = 0
    bad_checksum: int = 0
    malformed: int = 0
    unknown: int = 0
    garbage_bytes: int = 0
    bytes: int = 0


def _float(field: str | float | None) -> float | None:
    """A field's value: pynmea2 gives some as text, some already as numbers; empty is None."""
    if field is None or field == "":
        return None
    value = float(field)
    return value if math.isfinite(value) else None


def _int(text: str | int | None) -> int:
    if text is None or text == "":
        return 0
    return int(text)


def _position(sentence: pynmea2.TalkerSentence) -> tuple[float | None, float | None]:
    if not sentence.lat or not sentence.lon:
        return None, None
    lat, lon = float(sentence.latitude), float(sentence.longitude)
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise ValueError(f"position out of range: {lat}, {lon}")
    return lat, lon


def _event(sentence: pynmea2.NMEASentence) -> Gga | Rmc | Gsa | OtherSentence:
    talker = getattr(sentence, "talker", "")
    if isinstance(sentence, pynmea2.GGA):
        lat, lon = _position(sentence)
        return Gga(
            time=sentence.timestamp or None,
            latitude=lat,
            longitude=lon,
            quality=_int(sentence.gps_qual),
            satellites=_int(sentence.num_sats),
            hdop=_float(sentence.horizontal_dil),
            altitude=_float(sentence.altitude),
            talker=talker,
            geoid_separation=_float(sentence.geo_sep),
        )
    if isinstance(sentence, pynmea2.RMC):
        lat, lon = _position(sentence)
        speed, course = _float(sentence.spd_over_grnd), _float(sentence.true_course)
        return Rmc(
            time=sentence.timestamp or None,
            valid=sentence.status == "A",
            latitude=lat,
            longitude=lon,
            speed=None if speed is None else speed * KNOT,
            course=course,
            date=sentence.datestamp or None,
            talker=talker,
            mode=getattr(sentence, "mode_indicator", None) or "",
        )
    if isinstance(sentence, pynmea2.GSA):
        prns = tuple(int(p) for p in (getattr(sentence, f"sv_id{i:02d}") for i in range(1, 13)) if p)
        return Gsa(
            fix_type=_int(sentence.mode_fix_type),
            satellites=prns,
            pdop=_float(sentence.pdop),
            hdop=_float(sentence.hdop),
            vdop=_float(sentence.vdop),
            automatic=sentence.mode != "M",
            talker=talker,
        )
    return OtherSentence(talker, getattr(sentence, "sentence_type", type(sentence).__name__))


class NmeaDecoder(StreamDecoder[Event]):
    """Streaming decoder of NMEA 0183 sentences (sans-I/O)."""

    def __init__(self) -> None:
        super().__init__()
        self._sentences = 0
        self._bad_checksum = 0
        self._malformed = 0
        self._unknown = 0
        self.last_error: str | None = None
        """Why the last sentence was dropped (for a log line), or None."""

    def statistics(self) -> DecoderStatistics:
        """A snapshot of the counters."""
        return DecoderStatistics(
            self._sentences, self._bad_checksum, self._malformed, self._unknown, self._garbage, self._bytes
        )

    def _process(self) -> None:
        buffer = self._buffer
        pos = 0
        while (end := buffer.find(b"\n", pos)) >= 0:
            self._line(bytes(buffer[pos:end]))
            pos = end + 1
        del buffer[:pos]
        if len(buffer) > MAX_LINE:  # no end of line in sight: keep only what may start a sentence
            start = buffer.rfind(b"$")
            drop = start if start > 0 else len(buffer)
            if len(buffer) - drop > MAX_LINE:
                drop = len(buffer)
            self._garbage += drop
            del buffer[:drop]

    def _line(self, line: bytes) -> None:
        start = line.rfind(b"$")
        if start < 0:
            self._garbage += len(line) + 1
            return
        self._garbage += start
        text = line[start:].rstrip(b"\r")
        try:
            sentence = pynmea2.parse(text.decode("ascii"), check=True)
        except pynmea2.ChecksumError as err:
            self._bad_checksum += 1
            self._garbage += len(text)
            self.last_error = f"checksum: {err.args[0] if err.args else err}"
            return
        except (pynmea2.ParseError, UnicodeDecodeError, ValueError) as err:
            self._malformed += 1
            self._garbage += len(text)
            self.last_error = f"malformed sentence: {err}"
            return
        try:
            event = _event(sentence)
        except (ValueError, TypeError, AttributeError) as err:
            self._malformed += 1
            self.last_error = f"bad fields in {text[:12]!r}: {err}"
            return
        self._sentences += 1
        if isinstance(event, OtherSentence):
            self._unknown += 1
        self._events.append(event)


def _time(t: datetime.time | None) -> str:
    if t is None:
        return ""
    return f"{t.hour:02d}{t.minute:02d}{t.second:02d}.{t.microsecond // 10000:02d}"


def _lat(lat: float | None) -> tuple[str, str]:
    if lat is None:
        return "", ""
    a = abs(lat)
    d = int(a)
    return f"{d:02d}{(a - d) * 60.0:08.5f}", "N" if lat >= 0 else "S"


def _lon(lon: float | None) -> tuple[str, str]:
    if lon is None:
        return "", ""
    a = abs(lon)
    d = int(a)
    return f"{d:03d}{(a - d) * 60.0:08.5f}", "E" if lon >= 0 else "W"


def _num(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def encode(event: Gga | Rmc | Gsa | Vtg | Gsv) -> bytes:
    """The sentence of ``event`` with its checksum and CR LF (for an emulated receiver).

    Raises:
        LocalProtocolError: a value that is not finite, more than 12 satellites in a GSA or 4 in a GSV.
    """
    _check_finite(event)
    sentence: pynmea2.NMEASentence
    if isinstance(event, Gga):
        sentence = pynmea2.GGA(event.talker, "GGA", _gga_fields(event))
    elif isinstance(event, Rmc):
        sentence = pynmea2.RMC(event.talker, "RMC", _rmc_fields(event))
    elif isinstance(event, Vtg):
        sentence = pynmea2.VTG(event.talker, "VTG", _vtg_fields(event))
    elif isinstance(event, Gsv):
        sentence = pynmea2.GSV(event.talker, "GSV", _gsv_fields(event))
    else:
        sentence = pynmea2.GSA(event.talker, "GSA", _gsa_fields(event))
    return (str(sentence) + "\r\n").encode("ascii")


def _check_finite(event: Gga | Rmc | Gsa | Vtg | Gsv) -> None:
    """Raise LocalProtocolError for a number of ``event`` that is not finite (a sentence cannot carry it)."""
    for name in ("latitude", "longitude", "hdop", "altitude", "speed", "course", "pdop", "vdop", "geoid_separation"):
        value = getattr(event, name, None)
        if value is not None and not math.isfinite(value):
            raise LocalProtocolError(f"cannot write {name}={value!r}")


def _gga_fields(event: Gga) -> tuple[str, ...]:
    return (
        _time(event.time),
        *_lat(event.latitude),
        *_lon(event.longitude),
        str(event.quality),
        f"{event.satellites:02d}",
        _num(event.hdop, 2),
        _num(event.altitude, 1),
        "M" if event.altitude is not None else "",
        _num(event.geoid_separation, 1),
        "M" if event.geoid_separation is not None else "",
        "",
        "",
    )


def _rmc_fields(event: Rmc) -> tuple[str, ...]:
    return (
        _time(event.time),
        "A" if event.valid else "V",
        *_lat(event.latitude),
        *_lon(event.longitude),
        _num(None if event.speed is None else event.speed / KNOT, 2),
        _num(event.course, 1),
        "" if event.date is None else event.date.strftime("%d%m%y"),
        "",
        "",
        *((event.mode,) if event.mode else ()),
    )


def _vtg_fields(event: Vtg) -> tuple[str, ...]:
    knots = None if event.speed is None else event.speed / KNOT
    kmh = None if event.speed is None else event.speed * 3.6
    return (_num(event.course, 1), "T", "", "M", _num(knots, 3), "N", _num(kmh, 3), "K", event.mode)


def _gsv_fields(event: Gsv) -> tuple[str, ...]:
    if len(event.satellites) > 4:
        raise LocalProtocolError(f"a GSV lists at most 4 satellites, not {len(event.satellites)}")
    views: list[str] = []
    for sat in event.satellites:
        snr = "" if sat.snr is None else f"{sat.snr:02d}"
        views += [f"{sat.prn:02d}", f"{sat.elevation:02d}", f"{sat.azimuth:03d}", snr]
    return (str(event.total), str(event.number), f"{event.in_view:02d}", *views)


def _gsa_fields(event: Gsa) -> tuple[str, ...]:
    if len(event.satellites) > 12:
        raise LocalProtocolError(f"a GSA lists at most 12 satellites, not {len(event.satellites)}")
    prns = [f"{p:02d}" for p in event.satellites] + [""] * (12 - len(event.satellites))
    return (
        "A" if event.automatic else "M",
        str(event.fix_type),
        *prns,
        _num(event.pdop, 1),
        _num(event.hdop, 2),
        _num(event.vdop, 1),
    )
