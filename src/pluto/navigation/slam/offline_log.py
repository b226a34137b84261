"""The logs an offline SLAM run reads: each scan with the odometry (and the reference, if any) at it.

Strategy: every kind of log is read into the same :class:`OfflineLog` (the scans in the order of their poses, the
odometry and the reference as ``(n, 3)`` arrays of laser poses, what was left out and why), so that the runner
(:mod:`pluto.navigation.slam.offline`) and the pose module's offline runner never see where a log came from.

Logs (:func:`read_log`):

- a CARMEN log (``.log`` or ``.log.gz``, the Radish data sets): each ``FLASER`` line holds the scan, the laser's
  pose and the odometry at the scan. The "corrected" Radish logs hold a trajectory corrected by a SLAM run in both;
  that trajectory is the reference. Poses are taken as the laser's (the logs' laser offsets are 0 and 4 cm). A log
  without ``FLASER`` lines is read from its ``ROBOTLASER1`` lines (the same fields, the beams' bearings and the
  largest range given by the line), else from its ``RAWLASER1`` lines with the ``ODOM`` lines' odometry (no
  reference). The scans are taken in the file's order, which is the order of their poses (a line carries its own
  odometry), whatever their stamps say: the Intel log has four scans stamped up to 0.9 s before the one before them,
  whose poses follow on in the file's order, and logs whose stamps are all 0, constant or cut to six digits (the
  Infinite Corridor's are 4.29497e+09) still hold every scan. The stamps only time the log (its duration, the real
  time factor) and name scans for a relations file; where they cannot (stamps 0 or less, or many steps between scans
  that do not go forward), the log says so once (:attr:`OfflineLog.untimed`) and has no duration.
- a Pluto recording (MCAP): ``Sick/Scan_mm`` (else ``Sick/Scan``), with the odometry of ``Base/Drive/State`` (else
  ``Localization/Dead-Reckoning``) interpolated at each scan's stamp and carried to the laser by the localization
  service's laser mount; the reference is ``Sim/Truth`` when the recording has it (a simulated run), else there is
  none and no error can be computed.
- a ROS 1 or ROS 2 bag, read as a recording by :func:`pluto.record.rosbag.read_rosbag`: its ``LaserScan`` and
  ``Odometry`` topics (by type, or named), the laser at the mount its transforms give; no reference.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pluto import msgs, names
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.slam.metrics import Relations, parse_relations
from pluto.record.carmen import (
    CarmenLaser,
    CarmenLineError,
    CarmenOdometry,
    CarmenParam,
    CarmenRawLaser,
    parse_line,
)
from pluto.record.format import LogError

if TYPE_CHECKING:
    from pluto.record.logfile import LogFile

__all__ = [
    "FRONT_LASERS",
    "MAX_UNTIMED_STEPS",
    "OfflineLog",
    "OfflineScan",
    "read_carmen",
    "read_log",
    "read_recording",
    "read_relations",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class OfflineScan:
    """A scan of a log.

    Attributes:
        t: its stamp, s.
        ranges: range per beam, m (-1 an error).
        angles: bearing per beam, laser frame, rad.
        max_range: the scanner's largest range, m (no echo).
    """

    t: float
    ranges: FloatArray = field(repr=False)
    angles: FloatArray = field(repr=False)
    max_range: float


@dataclass
class OfflineLog:
    """The scans of a log with the odometry (and the reference, if any) at each.

    Attributes:
        path: where it was read.
        scans: the scans in the order of their poses (a CARMEN log's file order, a recording's stamps).
        odometry: ``(n, 3)`` the laser's odometry pose at each scan (x, y, θ continuous), m and rad.
        reference: ``(n, 3)`` the reference laser pose at each scan, or None.
        skipped: lines or messages left out, with the reason (malformed, no odometry at the stamp...).
        notes: what the reader noticed and did about it, for the user (scans out of time order taken in the file's
            order, other lasers' lines left out...).
        untimed: why the scans' stamps cannot time the log (then it has no duration), or "" when they can.
    """

    path: Path
    scans: list[OfflineScan]
    odometry: FloatArray
    reference: FloatArray | None
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    untimed: str = ""

    @property
    def duration(self) -> float | None:
        """Time from the earliest scan to the latest, s; None when the stamps cannot time the log."""
        if self.untimed:
            return None
        stamps = [scan.t for scan in self.scans]
        return max(stamps) - min(stamps) if len(stamps) > 1 else 0.0

    def head(self, count: int) -> OfflineLog:
        """The first ``count`` scans only."""
        ref = None if self.reference is None else self.reference[:count]
        head = OfflineLog(self.path, self.scans[:count], self.odometry[:count], ref, self.skipped, self.notes)
        head.untimed = self.untimed or _untimed(np.array([scan.t for scan in head.scans]))
        return head


def _unwrap(poses: FloatArray) -> FloatArray:
    out = poses.copy()
    if out.shape[0]:
        out[:, 2] = np.unwrap(out[:, 2])
    return out


def _open_text(path: Path) -> IO[str]:
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


MAX_UNTIMED_STEPS = 0.1
"""Above this share of the steps between consecutive scans that do not go forward in time (or of scans stamped 0 or
less), a log's stamps do not time it."""

FRONT_LASERS = ("FLASER", "ROBOTLASER1", "RAWLASER1")
"""The lines a CARMEN log's front laser is read from, the first kind the log holds."""


def _untimed(stamps: FloatArray) -> str:
    """Why ``stamps`` (the scans' in the file's order, s) cannot time a log, or "" when they can."""
    n = stamps.size
    if n < 2:
        return ""
    unstamped = int(np.count_nonzero(stamps <= 0.0))
    if unstamped > MAX_UNTIMED_STEPS * n:
        return f"{unstamped} of its {n} scans are stamped 0 or less"
    steps = np.diff(stamps[stamps > 0.0])
    still = int(np.count_nonzero(steps == 0.0))
    back = int(np.count_nonzero(steps < 0.0))
    if steps.size == 0 or still + back > MAX_UNTIMED_STEPS * steps.size:
        return (
            f"{still + back} of the {steps.size} steps between its scans' stamps do not go forward, {still} of them "
            "0 s (stamps all alike, or cut to too few digits)"
        )
    return ""


def _time_order_note(stamps: FloatArray, kind: str) -> str:
    """A note on the scans stamped before the scan before them, "" if none is."""
    steps = np.diff(stamps[stamps > 0.0])
    back = steps[steps < 0.0]
    if back.size == 0:
        return ""
    return (
        f"{back.size} {kind} scans are stamped before the scan before them (by up to {float(-back.min()):.3g} s): "
        "they are taken in the file's order, which is the order of their poses"
    )


def _odometry_at(
    scans: list[CarmenRawLaser], odometry: list[CarmenOdometry], timed: bool
) -> tuple[list[int], FloatArray, list[str]]:
    """The odometry at each ``RAWLASER`` scan: interpolated at its stamp between the ``ODOM`` lines' (in time
    order) when both time the log, else the last ``ODOM`` line before it in the file. Returns the indices of the
    scans that have one, their odometry ``(k, 3)`` (θ continuous), and why the others have none."""
    table = np.array([(o.t, o.x, o.y, o.theta, o.line) for o in odometry], dtype=np.float64).reshape(-1, 5)
    lost: list[str] = []
    keep: list[int] = []
    rows: list[FloatArray] = []
    odometry_timed = timed and not _untimed(table[:, 0])
    if odometry_timed:
        table = table[table[:, 0] > 0.0]
        table = table[np.argsort(table[:, 0], kind="stable")]
        table[:, 3] = np.unwrap(table[:, 3])
        for k, scan in enumerate(scans):
            if table.shape[0] < 2 or not table[0, 0] <= scan.t <= table[-1, 0]:
                lost.append(f"line {scan.line}: a {scan.kind} scan stamped {scan.t:g} s, no odometry around it")
                continue
            keep.append(k)
            rows.append(np.array([np.interp(scan.t, table[:, 0], table[:, c]) for c in (1, 2, 3)]))
    else:
        lines = table[:, 4]
        for k, scan in enumerate(scans):
            before = int(np.searchsorted(lines, scan.line)) - 1
            if before < 0:
                lost.append(f"line {scan.line}: a {scan.kind} scan before the first ODOM line, no odometry for it")
                continue
            keep.append(k)
            rows.append(table[before, 1:4].copy())
    poses = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return keep, _unwrap(poses), lost


def read_carmen(path: str | os.PathLike[str], *, max_range: float | None = None) -> OfflineLog:
    """The front laser's scans of a CARMEN log (plain or gzipped), with their odometry and laser poses, in the file's
    order (see the module docstring).

    Args:
        path: the log.
        max_range: the scanner's largest range, m (no echo); None: the line's (``ROBOTLASER1``, ``RAWLASER1``),
            else the log's ``robot_front_laser_max``, else 80.

    Returns:
        The log; lines that do not parse, and ``RAWLASER1`` scans without odometry, are in ``skipped``; the notes
        and ``untimed`` say what was made of the stamps.

    Raises:
        LogError: the file cannot be read, or holds no front laser scan, or only ``RAWLASER1`` scans and no
            ``ODOM`` line.
    """
    source = Path(path)
    lasers, odometry_lines, skipped, params = _carmen_lines(source)
    kind = next((k for k in FRONT_LASERS if lasers[k]), None)
    if kind is None:
        raise LogError(f"{source} holds no front laser scan ({', '.join(FRONT_LASERS)})")
    chosen = lasers[kind]
    notes = [
        f"{len(lasers[other])} {other} lines left out: the {kind} lines are the front laser's scans"
        for other in FRONT_LASERS
        if other != kind and lasers[other]
    ]
    untimed = _untimed(np.array([item.t for item in chosen], dtype=np.float64))
    notes[:0] = _timing_notes(chosen, kind, untimed)
    chosen, odometry, reference = _carmen_poses(source, kind, chosen, odometry_lines, untimed, skipped)
    try:
        logged = float(params.get("robot_front_laser_max", "80"))
    except ValueError:
        logged = 80.0
    scans = []
    for item in chosen:
        top = max_range if max_range is not None else (item.max_range or logged)
        scans.append(OfflineScan(item.t, np.array(item.ranges), np.array(item.angles()), top))
    log = OfflineLog(source, scans, odometry, reference, skipped, notes)
    log.untimed = untimed if kind != "RAWLASER1" else _untimed(np.array([scan.t for scan in scans]))
    return log


def _carmen_lines(
    source: Path,
) -> tuple[dict[str, list[CarmenLaser | CarmenRawLaser]], list[CarmenOdometry], list[str], dict[str, str]]:
    """The lines of a CARMEN log: the front lasers' scans by kind, the ODOM lines, the lines left out (with why) and
    the PARAM lines.

    Raises:
        LogError: the file cannot be read.
    """
    lasers: dict[str, list[CarmenLaser | CarmenRawLaser]] = {kind: [] for kind in FRONT_LASERS}
    odometry_lines: list[CarmenOdometry] = []
    skipped: list[str] = []
    params: dict[str, str] = {}
    try:
        with _open_text(source) as text:
            for number, line in enumerate(text, 1):
                try:
                    item = parse_line(line, number)
                except CarmenLineError as err:
                    skipped.append(f"line {number}: {err}")
                    continue
                if isinstance(item, (CarmenLaser, CarmenRawLaser)) and item.kind in lasers:
                    lasers[item.kind].append(item)
                elif isinstance(item, CarmenOdometry):
                    odometry_lines.append(item)
                elif isinstance(item, CarmenParam):
                    params[item.name] = item.value
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise LogError(f"cannot read {source}: {getattr(err, 'strerror', None) or err}") from None
    return lasers, odometry_lines, skipped, params


def _timing_notes(chosen: list[CarmenLaser | CarmenRawLaser], kind: str, untimed: str) -> list[str]:
    """What was made of the scans' stamps: why they cannot time the log (``untimed``), or how their order was
    kept; none when they are in order."""
    if untimed:
        return [
            f"the scans' stamps cannot time the log: {untimed}; its {len(chosen)} {kind} scans are taken in the "
            "file's order, and it has no duration and no real-time factor"
        ]
    order_note = _time_order_note(np.array([item.t for item in chosen], dtype=np.float64), kind)
    return [order_note] if order_note else []


def _carmen_poses(
    source: Path,
    kind: str,
    chosen: list[CarmenLaser | CarmenRawLaser],
    odometry_lines: list[CarmenOdometry],
    untimed: str,
    skipped: list[str],
) -> tuple[list[CarmenLaser | CarmenRawLaser], FloatArray, FloatArray | None]:
    """The scans kept, their odometry and their reference poses (None for ``RAWLASER1``, whose odometry comes from
    the ODOM lines: a scan without one is left out, in ``skipped``).

    Raises:
        LogError: ``RAWLASER1`` scans and no ODOM line, or none with odometry.
    """
    if kind != "RAWLASER1":
        with_pose = [item for item in chosen if isinstance(item, CarmenLaser)]
        odometry = _unwrap(np.array([item.odometry for item in with_pose], dtype=np.float64))
        return chosen, odometry, _unwrap(np.array([item.pose for item in with_pose], dtype=np.float64))
    if not odometry_lines:
        raise LogError(f"{source} holds {len(chosen)} RAWLASER1 scans but no ODOM line: no odometry for them")
    raw = [item for item in chosen if isinstance(item, CarmenRawLaser)]
    keep, odometry, lost = _odometry_at(raw, odometry_lines, not untimed)
    skipped.extend(lost)
    if not keep:
        raise LogError(f"{source}: no RAWLASER1 scan has odometry ({len(lost)} without)")
    return [raw[k] for k in keep], odometry, None


def read_relations(path: str | os.PathLike[str]) -> Relations:
    """A Kümmerle ``.relations`` file (plain or gzipped; see :func:`pluto.navigation.slam.metrics.parse_relations`).

    Raises:
        LogError: the file cannot be read, or holds no relation (with the first reason a line was left out).
    """
    source = Path(path)
    try:
        with _open_text(source) as text:
            relations = parse_relations(text)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise LogError(f"cannot read {source}: {getattr(err, 'strerror', None) or err}") from None
    if len(relations) == 0:
        first = f": {relations.skipped[0]}" if relations.skipped else ""
        raise LogError(f"{source} holds no relation (lines of t1 t2 x y z roll pitch yaw){first}")
    return relations


def _laser_of(robot: FloatArray, mount: tuple[float, float]) -> FloatArray:
    """Laser poses ``(n, 3)`` of robot poses, the laser at ``mount`` (x, y) in the robot frame (no pan)."""
    c, s = np.cos(robot[:, 2]), np.sin(robot[:, 2])
    return np.column_stack(
        (robot[:, 0] + c * mount[0] - s * mount[1], robot[:, 1] + s * mount[0] + c * mount[1], robot[:, 2])
    )


def _interpolate(times: FloatArray, poses: FloatArray, at: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Poses at the times ``at`` (linear between the neighbours, θ continuous) and which lay within the series."""
    inside = (at >= times[0]) & (at <= times[-1])
    out = np.column_stack([np.interp(at, times, poses[:, k]) for k in range(3)])
    return out, inside


def read_recording(path: str | os.PathLike[str] | LogFile) -> OfflineLog:
    """The scans of a Pluto recording (MCAP), or of a log read from elsewhere (a ROS bag), with the odometry at their
    stamps (see the module docstring). The laser is at the localization service's mount, or at the one the log's
    metadata gives (``laser_mount``: "x y z", m; a ROS bag's transforms).

    Raises:
        LogError: the file cannot be read, or has no scans or no odometry.
    """
    from pluto.record.logfile import LogFile

    log = path if isinstance(path, LogFile) else LogFile(path)
    scan_name = next((n for n in (names.SICK_SCAN_MM, names.SICK_SCAN) if log.series(n)), None)
    if scan_name is None:
        raise LogError(f"{log.path} has no laser scans ({names.SICK_SCAN_MM} or {names.SICK_SCAN})")
    skipped: list[str] = []
    raw: list[msgs.LaserScan] = []
    for entry in log.series(scan_name):
        message = entry.message
        if isinstance(message, msgs.LaserScan) and len(message.ranges) == len(message.angles) and message.ranges:
            raw.append(message)
        else:
            skipped.append(f"{scan_name} at {entry.log_time:.3f} s: not a laser scan with one angle per range")
    raw.sort(key=lambda m: m.stamp)

    def series(name: str, pose: Callable[[msgs.Message], tuple[float, float, float] | None]) -> FloatArray | None:
        rows = []
        for entry in log.series(name):
            p = pose(entry.message)
            if p is not None and all(math.isfinite(v) for v in p):
                rows.append((entry.message.stamp if hasattr(entry.message, "stamp") else entry.log_time, *p))
        if len(rows) < 2:
            return None
        table = np.array(sorted(rows), dtype=np.float64)
        table[:, 3] = np.unwrap(table[:, 3])
        return table

    def of_odometry(m: msgs.Message) -> tuple[float, float, float] | None:
        return (m.x, m.y, m.theta) if isinstance(m, msgs.Odometry) else None

    def of_estimate(m: msgs.Message) -> tuple[float, float, float] | None:
        if isinstance(m, msgs.PoseEstimate) and len(m.pose) >= 4:
            return (m.pose[0], m.pose[1], m.pose[3])
        return None

    odometry = series(names.BASE_DRIVE_STATE, of_odometry)
    if odometry is None:
        odometry = series(names.LOCALIZATION_DEAD_RECKONING, of_estimate)
    if odometry is None:
        raise LogError(f"{log.path} has no odometry ({names.BASE_DRIVE_STATE} or {names.LOCALIZATION_DEAD_RECKONING})")
    truth = series(names.SIM_TRUTH, of_odometry)
    stamps = np.array([m.stamp for m in raw], dtype=np.float64)
    odom, inside = _interpolate(odometry[:, 0], odometry[:, 1:], stamps)
    keep = inside
    reference = None
    if truth is not None:
        ref, ref_inside = _interpolate(truth[:, 0], truth[:, 1:], stamps)
        keep = keep & ref_inside
        reference = ref
    for k in np.flatnonzero(~keep).tolist():
        skipped.append(f"the scan at {stamps[k]:.3f} s: no odometry (or reference) around its stamp")
    mount = _logged_mount(log.info) or LocalizationParams().laser_mount
    lever = (float(mount[0]), float(mount[1]))
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        raise LogError(f"{log.path}: no scan has odometry around its stamp")
    scans = [
        OfflineScan(float(stamps[k]), np.array(raw[k].ranges), np.array(raw[k].angles), float(raw[k].max_range))
        for k in idx.tolist()
    ]
    ref_out = None if reference is None else _laser_of(reference[idx], lever)
    return OfflineLog(log.path, scans, _laser_of(odom[idx], lever), ref_out, skipped)


def _logged_mount(info: dict[str, str]) -> tuple[float, ...] | None:
    """The laser mount a log's metadata gives (``laser_mount``: "x y z", m), or None."""
    try:
        mount = tuple(float(v) for v in info.get("laser_mount", "").split())
    except ValueError:
        return None
    return mount if len(mount) == 3 and all(math.isfinite(v) for v in mount) else None


def read_log(
    path: str | os.PathLike[str], *, scan_topic: str | None = None, odom_topic: str | None = None
) -> OfflineLog:
    """A CARMEN log, a Pluto recording or a ROS bag (:mod:`pluto.record.rosbag`), told apart by the file's first
    bytes (MCAP's magic, and the profile of a ROS 2 bag's MCAP) or a bag's folder.

    Args:
        path: the log.
        scan_topic, odom_topic: a ROS bag's topics to read (default: chosen by their types).

    Raises:
        LogError: the file cannot be read or holds no usable scans; a ROS bag's
            :class:`~pluto.record.rosbag.BagError`.
    """
    from pluto.record.rosbag import bag_kind, open_log

    source = Path(path)
    if bag_kind(source) is not None or scan_topic is not None or odom_topic is not None:
        bag = open_log(source, scan_topic=scan_topic, odom_topic=odom_topic)
        read = read_recording(bag)
        read.notes[:0] = bag.notes
        return read
    try:
        with open(source, "rb") as file:
            magic = file.read(8)
    except OSError as err:
        raise LogError(f"cannot read {source}: {err.strerror or err}") from None
    if magic.startswith(b"\x89MCAP"):
        return read_recording(source)
    return read_carmen(source)
