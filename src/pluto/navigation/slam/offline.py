"""The slam core over a recorded log, as fast as the processor allows: no bus, no clock, no threads.

Strategy: a log gives, for every scan, the scan and the odometry at its stamp (and, where the log has one, a
reference trajectory to judge the estimate against). The runner feeds them to :class:`WallSlam` over the compressed
filter, one scan after the other, exactly as the slam module does live, except that the dead-reckoned laser pose and
the covariance of each increment come from the log's odometry and the noise model below instead of the localization
service. Between the two, as in the slam module, the scan-matching front end (:mod:`pluto.navigation.slam.scanmatch`,
:attr:`OfflineParams.scan_match`) refines each odometry increment by registering the scan's points on the last
scans, so the filter moves by the refined increment and its covariance. On the Radish logs (seed 1, default noise)
that brings the mean relative pose error over pairs 5 m apart (E = (δ*)⁻¹·δ, :mod:`pluto.navigation.slam.metrics`)
from 0.188 m to 0.054 m (Intel) and from 0.065 m to 0.044 m (Freiburg 079), at 2.0 and 2.2 ms a scan
(``bench/slam.py``). Behind the filter, the loop-closing back end (:attr:`OfflineParams.loops`,
:mod:`pluto.navigation.slam.loops`) keeps keyframes, closes loops and optimises their pose graph, and the walls and
the filter move to the optimised trajectory; the estimate returned is every scan's pose put on its optimised
keyframe (the filter's own, as it went, is :attr:`OfflineResult.filter_estimate`). The slam module runs the search
and the optimisation on a thread of its own; here they run in line, between two scans, so that a run gives the same
result every time, and their time is reported apart (:attr:`OfflineResult.backend_times`).

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

Odometry noise (:class:`OdometryNoise`): the "corrected" logs' odometry is the reference itself, so an estimator is
tested by perturbing the odometry's increments with seeded noise (:func:`perturb_odometry`) and comparing its
estimate with the reference (:mod:`pluto.navigation.slam.metrics`). An increment between two scans, in the first's
frame, is a travel Δd in the direction φ and a turn Δθ. Its noisy version is a travel Δd + ε_d in the direction
φ + ε_θ/2 (the heading error builds up over the step) and a turn Δθ + ε_θ, with ε_d ~ N(0, σ_d²) and
ε_θ ~ N(0, σ_θ²) independent and

    σ_d = a1·|Δd| + a2·|Δθ|,    σ_θ = a3·|Δθ| + a4·|Δd|

(m and rad). The filter is told the same model (:meth:`OdometryNoise.covariance`: J·diag(σ_d², σ_θ²)·Jᵀ with J the
Jacobian of the noisy increment) as the covariance of each increment, as the localization service tells the slam
module its own. Without noise (``none``) the filter gets a small floor (:data:`NOISE_FLOOR`).

Nothing here prints, reads a clock for anything but the processing time it reports, or writes a file.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import math
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import msgspec
import numpy as np
import numpy.typing as npt

from pluto import msgs, names
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.pose.core import PoseFilterParams
from pluto.navigation.pose.features import LineFeature, extract_lines
from pluto.navigation.slam.association import AssociationParams
from pluto.navigation.slam.backend import LoopBackEnd
from pluto.navigation.slam.compressed import AreaParams, CompressedWallEKF
from pluto.navigation.slam.core import WallSlam
from pluto.navigation.slam.loops import LoopParams, LoopSearch
from pluto.navigation.slam.mapcheck import parallel_copies
from pluto.navigation.slam.metrics import Relations, parse_relations
from pluto.navigation.slam.scanmatch import ScanMatcher, ScanMatchParams, scan_points
from pluto.record.carmen import (
    CarmenLaser,
    CarmenLineError,
    CarmenOdometry,
    CarmenParam,
    CarmenRawLaser,
    parse_line,
)
from pluto.record.format import LogError
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

if TYPE_CHECKING:
    from pluto.record.logfile import LogFile

__all__ = [
    "NOISE_FLOOR",
    "OdometryNoise",
    "OfflineLog",
    "OfflineParams",
    "OfflineResult",
    "OfflineScan",
    "perturb_odometry",
    "read_carmen",
    "read_log",
    "read_recording",
    "read_relations",
    "run_offline",
    "warm_up",
]

FloatArray = npt.NDArray[np.float64]

NOISE_FLOOR = (1e-6, 1e-6)
"""Variances (m², rad²) added to every increment's covariance, so that a filter told "no noise" is not told that
the odometry is exact."""


_NoiseRate = Annotated[float, between(0.0, 10.0)]
"""An error of the odometry per metre or radian, m/m, m/rad, rad/rad or rad/m."""


class OdometryNoise(Params, kw_only=False, forbid_unknown_fields=True):
    """The odometry's noise per increment: σ_d = a1·|Δd| + a2·|Δθ| (m), σ_θ = a3·|Δθ| + a4·|Δd| (rad).

    Attributes:
        a1: travel error per metre travelled, m/m.
        a2: travel error per radian turned, m/rad.
        a3: turn error per radian turned, rad/rad.
        a4: turn error per metre travelled, rad/m.

    The defaults (5 % of the travel, 5 % of the turn, 1 cm per radian and 1° per metre) are those of a wheeled
    indoor robot's odometry that has not been calibrated.
    """

    a1: _NoiseRate = 0.05
    a2: _NoiseRate = 0.01
    a3: _NoiseRate = 0.05
    a4: _NoiseRate = math.radians(1.0)

    @classmethod
    def parse(cls, text: str) -> OdometryNoise | None:
        """``default``, ``none`` (None: the odometry as logged) or ``a1,a2,a3,a4``.

        Raises:
            ValueError: anything else, with the reason.
        """
        word = text.strip().lower()
        if word == "default":
            return cls()
        if word == "none":
            return None
        parts = [p.strip() for p in word.split(",")]
        if len(parts) != 4:
            raise ValueError(f"odometry noise is 'default', 'none' or a1,a2,a3,a4 (4 numbers), got {text!r}")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"odometry noise: not a number in {text!r}") from None
        return cls(*values)

    def sigmas(self, travel: float, turn: float) -> tuple[float, float]:
        """(σ_d m, σ_θ rad) of an increment of ``travel`` m and ``turn`` rad."""
        d, t = abs(travel), abs(turn)
        return self.a1 * d + self.a2 * t, self.a3 * t + self.a4 * d

    def covariance(self, increment: Sequence[float]) -> FloatArray:
        """3x3 covariance of an increment (Δx, Δy, Δθ) in the frame of its first pose (m, rad), plus the floor."""
        ux, uy, turn = (float(v) for v in increment)
        travel = math.hypot(ux, uy)
        sd, st = self.sigmas(travel, turn)
        phi = math.atan2(uy, ux) if travel > 0.0 else 0.0
        c, s = math.cos(phi), math.sin(phi)
        j = np.array([[c, -0.5 * travel * s], [s, 0.5 * travel * c], [0.0, 1.0]])
        q: FloatArray = j @ np.diag([sd * sd, st * st]) @ j.T
        q += np.diag([NOISE_FLOOR[0], NOISE_FLOOR[0], NOISE_FLOOR[1]])
        return q


def _increments(poses: FloatArray) -> FloatArray:
    """``(n - 1, 3)`` the motion between consecutive poses in the first one's frame."""
    d = np.diff(poses, axis=0)
    c, s = np.cos(poses[:-1, 2]), np.sin(poses[:-1, 2])
    return np.column_stack((c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], d[:, 2]))


def perturb_odometry(poses: npt.ArrayLike, noise: OdometryNoise, rng: np.random.Generator) -> FloatArray:
    """The odometry with noisy increments (see the module docstring), from the same first pose.

    Args:
        poses: ``(n, 3)`` the odometry at the scans, (x m, y m, θ rad; θ continuous).
        noise: the model.
        rng: the source of the noise (seeded by the caller).

    Returns:
        ``(n, 3)`` the noisy odometry, θ continuous.

    Raises:
        ValueError: poses that are not ``(n, 3)`` and finite.
    """
    p = np.asarray(poses, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or not np.all(np.isfinite(p)):
        raise ValueError(f"poses must be an (n, 3) array of finite values, got shape {p.shape}")
    out = p.copy()
    if p.shape[0] < 2:
        return out
    inc = _increments(p)
    travel = np.hypot(inc[:, 0], inc[:, 1])
    direction = np.arctan2(inc[:, 1], inc[:, 0])
    sd = noise.a1 * travel + noise.a2 * np.abs(inc[:, 2])
    st = noise.a3 * np.abs(inc[:, 2]) + noise.a4 * travel
    eps = rng.standard_normal((inc.shape[0], 2))
    noisy_travel = travel + sd * eps[:, 0]
    noisy_direction = direction + 0.5 * st * eps[:, 1]
    noisy_turn = inc[:, 2] + st * eps[:, 1]
    x, y, theta = out[0]
    for k in range(inc.shape[0]):
        heading = theta + noisy_direction[k]
        x += noisy_travel[k] * math.cos(heading)
        y += noisy_travel[k] * math.sin(heading)
        theta += noisy_turn[k]
        out[k + 1] = (x, y, theta)
    return out


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


class OfflineParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Settings of an offline run.

    Attributes:
        range_sigma: std dev of a range reading, m (line fits).
        usable_range: readings beyond this are left out of the line fits, m (far walls are seen with few points).
        extra_alpha_std: std dev added to every line's angle, rad: a fit's own covariance counts the range noise
            only, not walls that are not flat or clutter along them.
        extra_r_std: the same for its distance, m.
        initial_std: std dev of the map frame's position (the first pose), m.
        initial_heading_std: the same for its heading, rad.
        association: the data association and new walls (walls within 12 m: farther ones are seen with few
            points at a grazing angle, and matching them costs time and brings wrong pairs; a gate of 3, not the
            pose module's 9.2: the scan-matched motion keeps the pose close, and a wider gate lets parallel walls
            of the Intel lab's rooms pair; each sighting counts as 1/16 of an independent one).
        area: the compressed filter's local area.
        filter: the pose filter's settings (the gate, the extra odometry noise; the laser mount is not used: the
            log's poses are the laser's).
        scan_match: the scan-matching front end that refines each odometry increment before the filter's predict
            (:mod:`pluto.navigation.slam.scanmatch`); None: the filter moves by the odometry alone.
        loops: the loop-closing back end (:mod:`pluto.navigation.slam.loops`): keyframes, closures, the pose graph,
            the walls moved to the optimised trajectory; None: the filter alone.
    """

    range_sigma: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.02
    usable_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 40.0
    extra_alpha_std: Annotated[float, between(0.0, math.pi)] = 0.01
    extra_r_std: Annotated[float, between(0.0, 10.0)] = 0.02
    initial_std: Annotated[float, between(0.0, 10.0)] = 0.01
    initial_heading_std: Annotated[float, between(0.0, math.pi)] = math.radians(0.2)
    association: AssociationParams = msgspec.field(
        default_factory=lambda: AssociationParams(gate=3.0, max_range=12.0, sighting_inflation=16.0)
    )
    area: AreaParams = msgspec.field(default_factory=AreaParams)
    filter: PoseFilterParams = msgspec.field(
        default_factory=lambda: PoseFilterParams(
            laser_mount=(0.0, 0.0), distance_scale_std=0.0, heading_drift_std=0.0, turn_scale_std=0.0
        )
    )
    scan_match: ScanMatchParams | None = msgspec.field(default_factory=ScanMatchParams)
    loops: LoopParams | None = msgspec.field(default_factory=LoopParams)


@dataclass
class OfflineResult:
    """What an offline run gives.

    Attributes:
        log: the log (its reference, if any, is ``log.reference``).
        estimate: ``(n, 3)`` the slam laser pose after each scan, m and rad (θ continuous).
        odometry: ``(n, 3)`` the odometry the filter was given (noisy when noise was asked for).
        slam: the map (the filter and the walls' ends).
        cpu_time: processing time of the scans (line extraction and the filter), s of the process's CPU time.
        scan_times: ``(n,)`` processing time of each scan, s.
        noise: the noise model used, or None.
        seed: the noise's seed.
        candidates: ``(n,)`` mapped walls each scan was matched against (the walls around the laser).
        area_sizes: ``(n,)`` entries of the compressed filter's local state after each scan (N_A).
        filter_estimate: ``(n, 3)`` the filter's pose after each scan, as it was then (``estimate`` is the same
            put on the optimised keyframes when the loop-closing back end runs).
        backend_times: ``(n,)`` the back end's search and optimisation at each scan, s of CPU time (in line here;
            the slam module runs them on a thread of their own, off the scan loop, so they are not in
            ``scan_times``).
        backend: the back end's scan-loop side (keyframes, corrections), None without it.
        search: the back end's search (the graph, the closures), None without it.
    """

    log: OfflineLog
    estimate: FloatArray
    odometry: FloatArray
    slam: WallSlam
    cpu_time: float
    scan_times: FloatArray
    noise: OdometryNoise | None
    seed: int
    candidates: npt.NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    area_sizes: npt.NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    filter_estimate: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    backend_times: FloatArray = field(default_factory=lambda: np.zeros(0))
    backend: LoopBackEnd | None = None
    search: LoopSearch | None = None

    def closure_places(self) -> FloatArray:
        """``(k, 2)`` where loops closed: the positions of the keyframes each loop closure joins, in the map's frame,
        m (none without the loop-closing back end)."""
        if self.search is None:
            return np.zeros((0, 2))
        graph = self.search.graph
        poses = graph.poses
        joined = sorted({i for edge in graph.edges() if edge.robust for i in (edge.first, edge.second)})
        return poses[joined, :2] if joined else np.zeros((0, 2))

    def wall_copies(self, *, where_loops_closed: bool = True) -> list[tuple[int, int]]:
        """The walls of the map mapped twice (:func:`~pluto.navigation.slam.mapcheck.parallel_copies`: facing the
        same way, parallel, overlapping and within 10 cm of each other), as pairs of the map's wall indices.

        Args:
            where_loops_closed: only the pairs with a wall within 5 m of where a loop closed
                (:meth:`closure_places`); False: the whole map.
        """
        segments = self.slam.segments
        active = np.flatnonzero(segments.active)
        near = self.closure_places() if where_loops_closed else None
        pairs = parallel_copies(segments.segments[active], segments.facing(active), near=near)
        return [(int(active[i]), int(active[j])) for i, j in pairs]

    @property
    def real_time_factor(self) -> float | None:
        """Log time per processing time (inf for a run too short to time); None when the log's stamps cannot time
        it (:attr:`OfflineLog.untimed`)."""
        duration = self.log.duration
        if duration is None:
            return None
        return duration / self.cpu_time if self.cpu_time > 0 else math.inf


def run_offline(
    log: OfflineLog,
    *,
    noise: OdometryNoise | None = None,
    seed: int = 1,
    params: OfflineParams | None = None,
    features: Callable[[OfflineScan], list[LineFeature]] | None = None,
    warm: bool = True,
) -> OfflineResult:
    """The compressed wall SLAM over every scan of ``log``.

    Args:
        log: the scans and their odometry.
        noise: perturb the odometry's increments with this model (None: as logged).
        seed: the noise's seed.
        params: settings.
        features: the lines of a scan (default :func:`extract_lines` with ``params``); for tests.
        warm: load every compiled kernel of the run (:func:`warm_up`) before the processing time starts; False:
            the first scans' time includes what numba's loading (or compiling) costs.

    Returns:
        The trajectory, the odometry used, the map and the processing time.
    """
    prm = params or OfflineParams()
    odometry = log.odometry if noise is None else perturb_odometry(log.odometry, noise, np.random.default_rng(seed))
    model = noise or OdometryNoise(0.0, 0.0, 0.0, 0.0)

    def lines(scan: OfflineScan) -> list[LineFeature]:
        top = min(scan.max_range, prm.usable_range)
        ranges = np.where(scan.ranges >= scan.max_range, top, scan.ranges)
        found = extract_lines(ranges, scan.angles, max_range=top, range_sigma=prm.range_sigma)
        if prm.extra_alpha_std > 0.0 or prm.extra_r_std > 0.0:
            va, vr = prm.extra_alpha_std**2, prm.extra_r_std**2
            found = [dataclasses.replace(f, var_alpha=f.var_alpha + va, var_r=f.var_r + vr) for f in found]
        return found

    extract = features or lines
    start = odometry[0]
    floor = np.diag([prm.initial_std**2, prm.initial_std**2, prm.initial_heading_std**2])
    slam_filter = CompressedWallEKF(tuple(float(v) for v in start), floor, area=prm.area, params=prm.filter)
    slam = WallSlam(slam_filter, prm.association)
    n = len(log.scans)
    estimate = np.zeros((n, 3))
    times = np.zeros(n)
    candidates = np.zeros(n, dtype=np.intp)
    area_sizes = np.zeros(n, dtype=np.intp)
    increments = _increments(odometry)
    matcher = None if prm.scan_match is None else ScanMatcher(prm.scan_match)
    point_params = prm.scan_match or ScanMatchParams()
    backend = (
        None
        if prm.loops is None
        else LoopBackEnd(slam, prm.loops, keep_trajectory=True, front_end=prm.scan_match is not None)
    )
    search = None if prm.loops is None else LoopSearch(prm.loops)
    back_times = np.zeros(n)
    if n and warm:
        warm_up()  # every kernel of the run loaded (or compiled) before the clock starts
        extract(log.scans[0])  # and a line extractor of the caller's
    total_start = time.process_time()
    for k, scan in enumerate(log.scans):
        begin = time.process_time()
        if k == 0:
            covariance = np.zeros((3, 3))
        else:
            local = model.covariance(increments[k - 1])
            c, s = math.cos(odometry[k - 1, 2]), math.sin(odometry[k - 1, 2])
            rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
            covariance = rot @ local @ rot.T  # the dead-reckoning frame, as the localization service gives it
        dr_pose: tuple[float, float, float] | FloatArray = odometry[k]
        points = scan_points(scan.ranges, scan.angles, scan.max_range, point_params)
        if matcher is not None:
            front = matcher.step(odometry[k], covariance, points)
            dr_pose, covariance = front.pose, front.covariance
        step = slam.step(dr_pose, covariance, extract(scan))
        estimate[k] = step.pose
        keyframe = None if backend is None else backend.observe(step, dr_pose, covariance, points)
        times[k] = time.process_time() - begin
        if keyframe is not None and search is not None and backend is not None:
            # the search in line (the slam module runs it on a thread of its own): its time is the back end's
            begin = time.process_time()
            correction = search.add(keyframe)
            back_times[k] = time.process_time() - begin
            if correction is not None:  # applied between this scan and the next: the scan loop's work
                begin = time.process_time()
                backend.apply(correction)
                times[k] += time.process_time() - begin
        candidates[k] = step.candidates
        area_sizes[k] = slam_filter.area_size
    cpu = time.process_time() - total_start
    if n:
        estimate[:, 2] = np.unwrap(estimate[:, 2])
    causal = estimate
    if backend is not None and search is not None and n:
        if search.unpublished:  # the last optimisation's small change, so the map is the optimised one
            backend.apply(search.correction())
        backend.tidy()  # the walls the last corrections moved, and those mapped since, checked for copies
        estimate = backend.trajectory(search.graph.poses)
    return OfflineResult(
        log,
        estimate,
        odometry,
        slam,
        cpu,
        times,
        noise,
        seed,
        candidates,
        area_sizes,
        filter_estimate=causal,
        backend_times=back_times,
        backend=backend,
        search=search,
    )


def _room_ranges(pose: tuple[float, float, float], angles: FloatArray, half: tuple[float, float]) -> FloatArray:
    """Ranges from a laser at ``pose`` to the walls of the box [-half[0], half[0]] x [-half[1], half[1]], m."""
    x, y, theta = pose
    dx, dy = np.cos(theta + angles), np.sin(theta + angles)
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(dx > 0, (half[0] - x) / dx, (-half[0] - x) / dx)
        ty = np.where(dy > 0, (half[1] - y) / dy, (-half[1] - y) / dy)
    out: FloatArray = np.minimum(np.where(np.isfinite(tx), tx, np.inf), np.where(np.isfinite(ty), ty, np.inf))
    return out


@functools.cache
def warm_up() -> None:
    """Have numba load (or compile) every kernel the wall SLAM and its scan-matching front end call, with the
    argument types they get, before a run's (or the slam module's) first scan: a short run over a synthetic room.

    A kernel's first call in a process costs a fraction of a second when numba's cache holds it and seconds when it
    does not (after a fresh install, before ``pluto warm``); without this the first scans of a timed run paid for it
    (4.5 s of CPU time in the first scan of a fresh install). Warming each module's kernels on its own misses some:
    the filter's predict, the association's greedy pairing, the line extractor's comparison of a scan's layout with
    the last one's are first called at the second scan of a run. So this runs the run itself: four scans of a 10 x 8
    m room as the laser drives 0.3 m and turns 0.1 rad, with noisy odometry, scan matching and the filter; the
    walls the first scan maps are seen again by the next. Once per process.
    """
    angles = np.radians(np.arange(-90.0, 90.5, 1.0))
    poses = [(-1.0 + 0.1 * k, 0.5, 0.033 * k) for k in range(4)]
    scans = [
        OfflineScan(0.2 * k, _room_ranges(p, angles, (5.0, 4.0)), angles.copy(), 80.0) for k, p in enumerate(poses)
    ]
    room = np.array(poses, dtype=np.float64)
    run_offline(OfflineLog(Path("warm-up"), scans, room, room.copy()), noise=OdometryNoise(), seed=1, warm=False)
