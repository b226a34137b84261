"""Import of CARMEN logs (the Radish data sets' text format) as Pluto logs.

Strategy: the parser is pure: :class:`CarmenImport` takes the log one text line at a time and collects the
messages, so it is tested on strings; :func:`import_carmen` only opens the files. The CARMEN log format, one
message per line, fields separated by blanks:

- ``ODOM x y theta tv rv accel ipc_timestamp ipc_hostname logger_timestamp`` (m, rad, m/s, rad/s, m/s², s)
- ``FLASER n r_1 .. r_n x y theta odom_x odom_y odom_theta ipc_timestamp ipc_hostname logger_timestamp``, the
  front laser: ``n`` ranges (m) from -90° to +90° (1° apart for 180 or 181 beams, 0.5° for 360 or 361, else
  evenly over 180°), then the laser's pose and the odometry at the scan; ``RLASER`` the same for a rear laser.
- ``ROBOTLASER1 laser_type start_angle field_of_view angular_resolution maximum_range accuracy remission_mode n
  r_1 .. r_n m e_1 .. e_m laser_x laser_y laser_theta robot_x robot_y robot_theta tv rv forward_safety_dist
  side_safety_dist turn_axis ipc_timestamp ipc_hostname logger_timestamp``, the newer loggers' laser with its pose
  (``ROBOTLASER2`` the second laser): the beams from ``start_angle`` every ``angular_resolution`` (rad), ``m``
  remission values, the laser's pose and the robot's (odometry) pose at the scan.
- ``RAWLASER1 laser_type start_angle field_of_view angular_resolution maximum_range accuracy remission_mode n
  r_1 .. r_n m e_1 .. e_m ipc_timestamp ipc_hostname logger_timestamp`` (``RAWLASER2`` to ``4`` the other
  lasers): the same scan without a pose; its odometry comes from the ``ODOM`` lines.
- ``PARAM name value ...``, ``# comments``; other message types (``SYNC``, ``TRUEPOS``, ``NEFF``...) are counted
  and left out.

:func:`parse_line` reads all of these (the SLAM's offline reader takes the front laser of any of the three
kinds); the import takes ``ODOM``, ``FLASER`` and ``RLASER`` and counts the other lasers' lines as left out.
``ODOM`` becomes ``Base/Drive/State`` (an :class:`~pluto.msgs.Odometry` whose heading is unwrapped, as Pluto's
odometry is continuous); ``FLASER`` becomes ``Sick/Scan_mm`` and ``Sick/Timing``, so the localization service
places each scan; ``RLASER`` becomes ``Sick/Rear/Scan_mm`` (two scanners on one interface would mix). Times are the
``ipc_timestamp``; the log's time is the messages' time.

Bad lines never stop an import: a line that does not parse is reported with its number and the reason, and
skipped. So is a line whose timestamp is missing (0 or negative) or lies more than ``max_backstep`` seconds
before the newest one taken: the "corrected" Radish logs hold a copy of each scan's odometry with a garbage
timestamp. Smaller steps back (jitter between the robot's processes) are kept, and the messages are put in time
order.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pluto import __version__, msgs, names
from pluto.errors import PlutoError
from pluto.geometry import angle_difference
from pluto.record.format import LogError
from pluto.record.writer import LogWriter

__all__ = [
    "FRONT_LASER",
    "ODOMETRY",
    "REAR_LASER",
    "TIMING",
    "CarmenImport",
    "CarmenLaser",
    "CarmenOdometry",
    "CarmenRawLaser",
    "ImportReport",
    "LineProblem",
    "beam_angles",
    "import_carmen",
    "parse_line",
]

ODOMETRY = names.BASE_DRIVE_STATE
FRONT_LASER = names.SICK_SCAN_MM
TIMING = names.SICK_TIMING
REAR_LASER = names.SICK_REAR_SCAN_MM
MAX_BEAMS = 10_000


class CarmenLineError(PlutoError, ValueError):
    """A line of a CARMEN log that does not parse; the message says why."""


@dataclass(frozen=True)
class CarmenOdometry:
    """An ``ODOM`` line: pose (m, rad), velocities (m/s, rad/s) at ``t`` (s)."""

    line: int
    t: float
    x: float
    y: float
    theta: float
    tv: float
    rv: float


@dataclass(frozen=True)
class CarmenLaser:
    """A ``FLASER``, ``RLASER`` or ``ROBOTLASER1``/``2`` line: the ranges (m) and the laser's and odometry's poses
    at ``t`` (s).

    Attributes:
        rear: an ``RLASER`` or a ``ROBOTLASER2`` (not the front laser).
        kind: the line's message type.
        start_angle, resolution: bearing of the first beam and between beams, rad (a ``ROBOTLASER``'s); None: the
            ``FLASER`` convention of :func:`beam_angles`.
        max_range: the scanner's largest range as the line gives it, m (a ``ROBOTLASER``'s), else None.
    """

    line: int
    t: float
    rear: bool
    ranges: tuple[float, ...]
    pose: tuple[float, float, float]
    odometry: tuple[float, float, float]
    kind: str = "FLASER"
    start_angle: float | None = None
    resolution: float | None = None
    max_range: float | None = None

    def angles(self) -> list[float]:
        """Bearing of each beam, laser frame, rad."""
        if self.start_angle is None or self.resolution is None:
            return beam_angles(len(self.ranges))
        return [self.start_angle + i * self.resolution for i in range(len(self.ranges))]


@dataclass(frozen=True)
class CarmenRawLaser:
    """A ``RAWLASER1`` to ``RAWLASER4`` line: a scan at ``t`` (s) without a pose.

    Attributes:
        number: which laser (1 is the front one).
        ranges: range per beam, m.
        start_angle, resolution: bearing of the first beam and between beams, rad.
        max_range: the scanner's largest range, m.
    """

    line: int
    t: float
    kind: str
    number: int
    ranges: tuple[float, ...]
    start_angle: float
    resolution: float
    max_range: float

    def angles(self) -> list[float]:
        """Bearing of each beam, laser frame, rad."""
        return [self.start_angle + i * self.resolution for i in range(len(self.ranges))]


@dataclass(frozen=True)
class CarmenParam:
    """A ``PARAM name value`` line."""

    line: int
    name: str
    value: str


@dataclass(frozen=True)
class LineProblem:
    """A line left out of the import: its number (from 1), why, and its start."""

    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.text}"


def beam_angles(n: int) -> list[float]:
    """Bearings of ``n`` beams of a CARMEN laser from -90°, rad (see the module docstring)."""
    if n <= 0:
        return []
    if n in (180, 181):
        step = math.pi / 180
    elif n in (360, 361):
        step = math.pi / 360
    elif n in (720, 721):
        step = math.pi / 720
    else:
        step = math.pi / (n - 1) if n > 1 else 0.0
    return [-math.pi / 2 + i * step for i in range(n)]


def _number(token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise CarmenLineError(f"{what} is not a number: {token!r}") from None
    if not math.isfinite(value):
        raise CarmenLineError(f"{what} is not finite: {token!r}")
    return value


_SCAN_HEADER = ("laser_type", "start_angle", "field_of_view", "angular_resolution", "maximum_range", "accuracy")
_ROBOTLASER_POSES = ("laser_x", "laser_y", "laser_theta", "robot_x", "robot_y", "robot_theta")
_ROBOTLASER_MOTION = ("tv", "rv", "forward_safety_dist", "side_safety_dist", "turn_axis")
RAWLASER_KINDS = {f"RAWLASER{k}": k for k in range(1, 5)}
ROBOTLASER_KINDS = {"ROBOTLASER1": 1, "ROBOTLASER2": 2}


def _count(fields: list[str], at: int, kind: str, what: str) -> int:
    """The count at ``fields[at]`` (0 to :data:`MAX_BEAMS`)."""
    if at >= len(fields):
        raise CarmenLineError(f"{kind} cut short before the number of {what}")
    try:
        n = int(fields[at])
    except ValueError:
        raise CarmenLineError(f"{kind}: the number of {what} is not an integer: {fields[at]!r}") from None
    if not 0 <= n <= MAX_BEAMS:
        raise CarmenLineError(f"{kind}: {n} {what} (expected 0 to {MAX_BEAMS})")
    return n


def _parse_scan(
    kind: str, fields: list[str], tail: tuple[str, ...]
) -> tuple[list[float], tuple[float, ...], tuple[float, ...]]:
    """A ``ROBOTLASER`` or ``RAWLASER`` line's numbers: the 6 of its header (``laser_type`` to ``accuracy``), the
    ranges, and the values named in ``tail`` (those between the remission values and the timestamp) followed by the
    ``ipc_timestamp``. The remission mode and values are checked for their count only."""
    if len(fields) < 9:
        raise CarmenLineError(f"{kind} has {len(fields) - 1} values, cut short before its ranges")
    header = [_number(tok, what) for tok, what in zip(fields[1:7], _SCAN_HEADER, strict=True)]
    n = _count(fields, 8, kind, "ranges")
    if n == 0:
        raise CarmenLineError(f"{kind} with no range")
    m = _count(fields, 9 + n, kind, "remission values")
    expected = 9 + n + 1 + m + len(tail) + 3
    if len(fields) != expected:
        raise CarmenLineError(
            f"{kind} with {n} ranges and {m} remission values has {expected - 1} values after its name, "
            f"got {len(fields) - 1} (cut short?)"
        )
    ranges = tuple(_number(tok, f"range {i + 1}") for i, tok in enumerate(fields[9 : 9 + n]))
    start = 10 + n + m
    rest = tuple(
        _number(tok, what)
        for tok, what in zip(fields[start : start + len(tail) + 1], (*tail, "timestamp"), strict=True)
    )
    return header, ranges, rest


def parse_line(text: str, line: int) -> CarmenOdometry | CarmenLaser | CarmenRawLaser | CarmenParam | str | None:
    """Parse one line of a CARMEN log.

    Args:
        text: the line (with or without its newline).
        line: its number, for the result.

    Returns:
        The message; for another message type its name (``"SYNC"``); None for a blank line or a comment.

    Raises:
        CarmenLineError: the line is an ``ODOM``, ``FLASER``, ``RLASER``, ``ROBOTLASER1``/``2``, ``RAWLASER1`` to
            ``4`` or ``PARAM`` that does not parse.
    """
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    kind = fields[0]
    if kind == "ODOM":
        if len(fields) != 10:
            raise CarmenLineError(f"ODOM has 9 values (x y theta tv rv accel t host t_logger), got {len(fields) - 1}")
        x, y, theta, tv, rv, _accel, t = (
            _number(tok, what)
            for tok, what in zip(fields[1:8], ("x", "y", "theta", "tv", "rv", "accel", "timestamp"), strict=True)
        )
        return CarmenOdometry(line, t, x, y, theta, tv, rv)
    if kind in ("FLASER", "RLASER"):
        if len(fields) < 2:
            raise CarmenLineError(f"{kind} without the number of ranges")
        try:
            n = int(fields[1])
        except ValueError:
            raise CarmenLineError(f"{kind}: the number of ranges is not an integer: {fields[1]!r}") from None
        if not 0 < n <= MAX_BEAMS:
            raise CarmenLineError(f"{kind}: {n} ranges (expected 1 to {MAX_BEAMS})")
        if len(fields) != n + 11:
            raise CarmenLineError(
                f"{kind} with {n} ranges has {n + 10} values after its name, got {len(fields) - 1} (cut short?)"
            )
        ranges = tuple(_number(tok, f"range {i + 1}") for i, tok in enumerate(fields[2 : 2 + n]))
        rest = [
            _number(tok, what)
            for tok, what in zip(
                fields[2 + n : 9 + n], ("x", "y", "theta", "odom_x", "odom_y", "odom_theta", "timestamp"), strict=True
            )
        ]
        return CarmenLaser(
            line, rest[6], kind == "RLASER", ranges, (rest[0], rest[1], rest[2]), (rest[3], rest[4], rest[5])
        )
    if kind in ROBOTLASER_KINDS:
        header, ranges, values = _parse_scan(kind, fields, (*_ROBOTLASER_POSES, *_ROBOTLASER_MOTION))
        return CarmenLaser(
            line,
            values[-1],
            ROBOTLASER_KINDS[kind] != 1,
            ranges,
            (values[0], values[1], values[2]),
            (values[3], values[4], values[5]),
            kind,
            header[1],
            header[3],
            header[4],
        )
    if kind in RAWLASER_KINDS:
        header, ranges, values = _parse_scan(kind, fields, ())
        return CarmenRawLaser(line, values[-1], kind, RAWLASER_KINDS[kind], ranges, header[1], header[3], header[4])
    if kind == "PARAM":
        if len(fields) < 3:
            raise CarmenLineError("PARAM without a name and a value")
        return CarmenParam(line, fields[1], fields[2])
    return kind


@dataclass
class ImportReport:
    """What an import took and what it left out.

    Attributes:
        lines: lines read.
        counts: messages per interface.
        malformed: lines that did not parse.
        out_of_order: lines skipped for a missing or backward timestamp.
        ignored: lines of other message types, per type.
        params: the ``PARAM`` values.
        start, end: time of the first and last message, s.
        output: the log written (None until written).
    """

    lines: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    malformed: list[LineProblem] = field(default_factory=list)
    out_of_order: list[LineProblem] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    output: Path | None = None

    @property
    def skipped(self) -> int:
        return len(self.malformed) + len(self.out_of_order)


def _excerpt(text: str, width: int = 60) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 3] + "..."


class CarmenImport:
    """Turns the lines of a CARMEN log into Pluto messages (pure: no files).

    Args:
        max_backstep: a message more than this many seconds before the newest one taken is skipped, s.
        max_range: the lasers' ``max_range``, m (ranges at or beyond it mean no return).

    Feed it with :meth:`feed`, then :meth:`messages` gives (interface, message, time) in time order and
    :attr:`report` what was taken and left out.
    """

    def __init__(self, max_backstep: float = 1.0, max_range: float = 80.0) -> None:
        if not max_backstep >= 0:
            raise ValueError("max_backstep must be >= 0")
        self.max_backstep = max_backstep
        self.max_range = max_range
        self.report = ImportReport()
        self._taken: list[CarmenOdometry | CarmenLaser] = []
        self._latest = -math.inf
        self._ignored: Counter[str] = Counter()

    def feed(self, text: str) -> None:
        """Take the next line of the log."""
        self.report.lines += 1
        number = self.report.lines
        try:
            item = parse_line(text, number)
        except CarmenLineError as err:
            self.report.malformed.append(LineProblem(number, str(err), _excerpt(text)))
            return
        if item is None:
            return
        if isinstance(item, str):
            self._ignored[item] += 1
            return
        if isinstance(item, CarmenRawLaser) or (
            isinstance(item, CarmenLaser) and item.kind not in ("FLASER", "RLASER")
        ):
            self._ignored[item.kind] += 1
            return
        if isinstance(item, CarmenParam):
            self.report.params[item.name] = item.value
            return
        if item.t <= 0.0:
            self.report.out_of_order.append(LineProblem(number, f"no timestamp ({item.t:g})", _excerpt(text)))
            return
        if item.t < self._latest - self.max_backstep:
            self.report.out_of_order.append(
                LineProblem(
                    number, f"timestamp {item.t:g} s is before the newest one, {self._latest:g} s", _excerpt(text)
                )
            )
            return
        self._latest = max(self._latest, item.t)
        self._taken.append(item)

    def feed_lines(self, lines: Iterable[str]) -> None:
        """Take every line of ``lines``."""
        for text in lines:
            self.feed(text)

    def messages(self) -> list[tuple[str, msgs.Message, float]]:
        """The messages taken so far, in time order: (interface, message, time in s)."""
        taken = sorted(self._taken, key=lambda item: item.t)  # stable: equal times keep the file's order
        out: list[tuple[str, msgs.Message, float]] = []
        theta: float | None = None
        for item in taken:
            if isinstance(item, CarmenOdometry):
                if theta is None:
                    theta = item.theta
                else:  # continuous heading: add the wrapped difference
                    theta += angle_difference(item.theta, theta)
                out.append(
                    (
                        ODOMETRY,
                        msgs.Odometry(stamp=item.t, x=item.x, y=item.y, theta=theta, v=item.tv, omega=item.rv),
                        item.t,
                    )
                )
            else:
                n = len(item.ranges)
                scan = msgs.LaserScan(
                    stamp=item.t,
                    arrival=item.t,
                    ranges=list(item.ranges),
                    angles=beam_angles(n),
                    count=n,
                    max_range=self.max_range,
                )
                if item.rear:
                    out.append((REAR_LASER, scan, item.t))
                else:
                    out.append((FRONT_LASER, scan, item.t))
                    out.append((TIMING, msgs.ScanTiming(stamp=item.t, count=n), item.t))
        counts = Counter(name for name, _msg, _t in out)
        self.report.counts = dict(sorted(counts.items()))
        self.report.ignored = dict(sorted(self._ignored.items()))
        if out:
            self.report.start, self.report.end = out[0][2], out[-1][2]
        return out


def _open_text(path: Path) -> io.TextIOWrapper:
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def import_carmen(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    force: bool = False,
    robot: str = "",
    max_backstep: float = 1.0,
    max_range: float = 80.0,
) -> ImportReport:
    """Import a CARMEN log (plain or gzipped) as a Pluto log.

    Args:
        source: the ``.log`` or ``.log.gz`` file.
        output: the MCAP file to write.
        force: overwrite ``output`` if it exists.
        robot: the robot's name in the log's metadata (default: the source's name).
        max_backstep, max_range: as for :class:`CarmenImport`.

    Returns:
        The report (the malformed and skipped lines with their numbers).

    Raises:
        LogError: the source cannot be read (or is not text), or the output cannot be written.
    """
    source = Path(source)
    converter = CarmenImport(max_backstep, max_range)
    try:
        with _open_text(source) as text:
            converter.feed_lines(text)
    except (OSError, EOFError, zlib.error) as err:
        raise LogError(f"cannot read {source}: {getattr(err, 'strerror', None) or err}") from None
    messages = converter.messages()
    report = converter.report
    name = robot or source.name.removesuffix(".gz").removesuffix(".log")
    metadata = {
        "robot": name,
        "start_time": "",
        "imported": datetime.now(UTC).isoformat(),
        "time_base": "log",
        "source": "carmen",
        "source_file": source.name,
        "laser_offset_x": report.params.get("robot_frontlaser_offset", ""),
        "rear_laser_offset_x": report.params.get("robot_rearlaser_offset", ""),
        "pluto_version": __version__,
    }
    with LogWriter(output, metadata=metadata, force=force) as writer:
        for interface, message, t in messages:
            writer.add(interface, message, t)
    report.output = Path(output)
    return report
