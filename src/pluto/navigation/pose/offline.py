"""The pose module over a recorded log, as fast as the processor allows: no bus, no clock, no threads.

Strategy: the pose module's own per-scan code (:class:`~pluto.navigation.pose.tracker.PoseTracker`: the lines of
the scan, the filter's predict and update, its lost rule and its searches of the map) is fed, scan after scan, what
its shell would give it live, against a map saved by ``pluto slam offline`` (a world file,
:mod:`pluto.navigation.slam.mapfile`: walls with their uncertainty). The log is read by the SLAM's reader
(:func:`pluto.navigation.slam.offline.read_log`: CARMEN logs whatever their stamps, and Pluto recordings), and its
odometry is perturbed with the SLAM's seeded noise model (:class:`~pluto.navigation.slam.offline.OdometryNoise`),
so that the same log, seed and model give the pose module and the SLAM the same noisy odometry.

What the localization service would give the module at each scan is made from the log:

- ``Localization/Laser_Dead-Reckoning``: the (noisy) odometry's laser pose at the scan, with the covariance of its
  increment since the previous scan as the noise model tells it (in the dead-reckoning frame, as the service
  gives it). The logs' poses are the laser's, so the filter's laser mount is (0, 0).
- ``Localization/Laser_Pose`` (read at the first scan only): the start, the log's first reference pose (or a pose
  given by the caller: a wrong start tests the search of the map), with no covariance of its own: the tracker
  adds its initial floor.

The estimate is the filter's laser pose after each scan. Against the log's reference trajectory (a "corrected"
Radish log's poses, which a SLAM run made; not ground truth), :func:`recovery` says when an estimate that started
wrong came back within a distance and an angle of the reference and stayed there.

Nothing here prints, reads a clock for anything but the processing time it reports, or writes a file.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from pluto import msgs
from pluto.geometry import wrap_angle
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.tracker import PoseModuleParams, PoseTracker, warm_up
from pluto.navigation.slam.offline import OdometryNoise, OfflineLog, perturb_odometry

__all__ = [
    "PoseOfflineResult",
    "Recovery",
    "offline_params",
    "recovery",
    "run_pose_offline",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

RECOVERY_DISTANCE = 0.3
"""m: an estimate within this of the reference (and :data:`RECOVERY_ANGLE`) is back."""
RECOVERY_ANGLE = math.radians(10.0)
"""rad: see :data:`RECOVERY_DISTANCE`."""


def offline_params(params: PoseModuleParams | None = None) -> PoseModuleParams:
    """The pose module's parameters for a log: ``params`` (default: the module's defaults) with the laser mount at
    the origin, as a log's poses are the laser's."""
    base = params or PoseModuleParams()
    told = msgspec.structs.replace(
        base.filter, laser_mount=(0.0, 0.0), distance_scale_std=0.0, heading_drift_std=0.0, turn_scale_std=0.0
    )
    return msgspec.structs.replace(base, filter=told)


@dataclass(frozen=True)
class Recovery:
    """When an estimate came back to the reference and stayed there.

    Attributes:
        index: the first scan from which every estimate is within the limits; None: never (the last scan is off).
        time: log time from the first scan to that one, s; None when the log's stamps cannot time it, or never.
        distance: travel along the reference from the first scan to that one, m; None: never.
        distance_limit: m.  angle_limit: rad.
    """

    index: int | None
    time: float | None
    distance: float | None
    distance_limit: float
    angle_limit: float

    @property
    def recovered(self) -> bool:
        return self.index is not None

    def describe(self) -> str:
        """In words: ``after 4.2 s of log (3 scans, 1.9 m)`` or ``never``."""
        limits = f"within {self.distance_limit:g} m / {math.degrees(self.angle_limit):g}° of the reference"
        if self.index is None or self.distance is None:
            return f"never {limits} to the end of the log"
        when = "no log time: the stamps cannot time the log" if self.time is None else f"{self.time:.1f} s of log"
        return f"back {limits} after {when} ({self.index} scans, {self.distance:.1f} m of travel) and stays there"


def _within(a: FloatArray, b: FloatArray, distance: float, angle: float) -> BoolArray:
    """Per row, whether the poses ``a`` and ``b`` are within ``distance`` (m) and ``angle`` (rad) of each other."""
    heading = np.abs(wrap_angle(a[:, 2] - b[:, 2]))
    out: BoolArray = (np.hypot(a[:, 0] - b[:, 0], a[:, 1] - b[:, 1]) <= distance) & (heading <= angle)
    return out


def recovery(
    estimate: npt.ArrayLike,
    reference: npt.ArrayLike,
    stamps: npt.ArrayLike | None,
    *,
    tracking: npt.ArrayLike | None = None,
    distance: float = RECOVERY_DISTANCE,
    angle: float = RECOVERY_ANGLE,
) -> Recovery:
    """The first scan from which ``estimate`` stays within ``distance`` (m) and ``angle`` (rad) of ``reference``.

    A filter on a map is only as good as the map: where the map is a few decimetres off the reference (a SLAM
    map's distortion), a filter that was never lost is off too. With ``tracking``, the estimate of the same filter
    started at the right pose, a scan where ``tracking`` is beyond the limits of the reference counts as within them
    when ``estimate`` is within the limits of ``tracking`` there: back means as good as a filter that was never lost.

    Args:
        estimate: ``(n, 3)`` laser poses (x, y, θ), m and rad.
        reference: ``(n, 3)`` the reference at the same scans.
        stamps: ``(n,)`` the scans' stamps, s, or None for a log whose stamps cannot time it.
        tracking: ``(n, 3)`` the estimate of the filter started at the right pose, or None.
        distance: m.  angle: rad.

    Raises:
        ValueError: trajectories that are not ``(n, 3)`` of one length.
    """
    est = np.asarray(estimate, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if est.ndim != 2 or est.shape[1] != 3 or est.shape != ref.shape:
        raise ValueError(f"estimate and reference must be (n, 3) of one shape, got {est.shape} and {ref.shape}")
    near = _within(est, ref, distance, angle)
    if tracking is not None:
        track = np.asarray(tracking, dtype=np.float64)
        if track.shape != ref.shape:
            raise ValueError(f"tracking must be (n, 3) as the reference, got {track.shape}")
        near |= ~_within(track, ref, distance, angle) & _within(est, track, distance, angle)
    off = np.flatnonzero(~near)
    n = est.shape[0]
    first = 0 if off.size == 0 else int(off[-1]) + 1
    if n == 0 or first >= n:
        return Recovery(None, None, None, distance, angle)
    travel = float(np.hypot(np.diff(ref[: first + 1, 0]), np.diff(ref[: first + 1, 1])).sum())
    when = None
    if stamps is not None:
        t = np.asarray(stamps, dtype=np.float64)
        when = float(t[first] - t[0])
    return Recovery(first, when, travel, distance, angle)


@dataclass
class PoseOfflineResult:
    """What an offline run of the pose module gives.

    Attributes:
        log: the log (its reference, if any, is ``log.reference``).
        estimate: ``(n, 3)`` the filter's laser pose after each scan, m and rad (θ continuous).
        odometry: ``(n, 3)`` the odometry the module was given (noisy when noise was asked for).
        start: the laser pose the filter started from, (x, y, θ).
        lost: ``(n,)`` whether the filter said it was lost after each scan.
        matches: ``(n,)`` walls matched by each scan.
        scan_times: ``(n,)`` processing time of each scan (the tracker's work), s of the process's CPU time.
        cpu_time: their sum, s.
        relocalizations: times a search of the map reset the filter.
        noise: the noise model used, or None.  seed: its seed.
    """

    log: OfflineLog
    estimate: FloatArray
    odometry: FloatArray
    start: tuple[float, float, float]
    lost: BoolArray
    matches: IntArray
    scan_times: FloatArray
    cpu_time: float
    relocalizations: int
    noise: OdometryNoise | None
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def lost_share(self) -> float:
        """The share of the scans after which the filter said it was lost (0 for no scan)."""
        return float(self.lost.mean()) if self.lost.size else 0.0

    @property
    def real_time_factor(self) -> float | None:
        """Log time per processing time (inf for a run too short to time); None when the log's stamps cannot time
        it."""
        duration = self.log.duration
        if duration is None:
            return None
        return duration / self.cpu_time if self.cpu_time > 0 else math.inf

    def recovery(
        self,
        tracking: PoseOfflineResult | None = None,
        distance: float = RECOVERY_DISTANCE,
        angle: float = RECOVERY_ANGLE,
    ) -> Recovery | None:
        """:func:`recovery` of the estimate against the log's reference (and ``tracking``, the run of the same log
        started at the right pose, see there); None without a reference."""
        if self.log.reference is None:
            return None
        stamps = None if self.log.duration is None else [scan.t for scan in self.log.scans]
        track = None if tracking is None else tracking.estimate
        return recovery(self.estimate, self.log.reference, stamps, tracking=track, distance=distance, angle=angle)


def _dead_reckoning_covariance(odometry: FloatArray, k: int, noise: OdometryNoise) -> list[float]:
    """The covariance of the increment from scan ``k - 1`` to ``k`` (9 values, dead-reckoning frame)."""
    if k == 0:
        return [0.0] * 9
    a, b = odometry[k - 1], odometry[k]
    c, s = math.cos(a[2]), math.sin(a[2])
    dx, dy = b[0] - a[0], b[1] - a[1]
    local = noise.covariance((c * dx + s * dy, -s * dx + c * dy, b[2] - a[2]))
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return [float(v) for v in (rot @ local @ rot.T).ravel()]


def _laser_pose(pose: FloatArray | tuple[float, float, float]) -> list[float]:
    """An 8-D laser pose (x, y, z, θ, φ, ψ, pan, tilt) of a planar one."""
    return [float(pose[0]), float(pose[1]), 0.0, float(pose[2]), 0.0, 0.0, 0.0, 0.0]


def run_pose_offline(
    log: OfflineLog,
    wall_map: WallMap,
    *,
    noise: OdometryNoise | None = None,
    seed: int = 1,
    start: tuple[float, float, float] | None = None,
    params: PoseModuleParams | None = None,
    warm: bool = True,
    log_to: logging.Logger | None = None,
) -> PoseOfflineResult:
    """The pose module over every scan of ``log`` against ``wall_map``.

    Args:
        log: the scans and their odometry.
        wall_map: the map (:meth:`WallMap.from_file` of a map ``pluto slam offline`` saved).
        noise: perturb the odometry's increments with this model (None: as logged).
        seed: the noise's seed.
        start: the laser pose (x, y, θ) the filter starts from; None: the log's first reference pose (its first
            odometry pose when it has no reference).
        params: the module's parameters (default :func:`offline_params`).
        warm: load the compiled kernels before the processing time starts.
        log_to: where the tracker reports lost and found (default: a logger that says nothing).

    Returns:
        The trajectory, lost flags, matches and processing times.

    Raises:
        ValueError: a start that is not three finite numbers.
    """
    prm = params or offline_params()
    odometry = log.odometry if noise is None else perturb_odometry(log.odometry, noise, np.random.default_rng(seed))
    model = noise or OdometryNoise(0.0, 0.0, 0.0, 0.0)
    if start is None:
        origin = log.reference[0] if log.reference is not None and len(log.reference) else odometry[0]
        start = (float(origin[0]), float(origin[1]), float(origin[2]))
    if len(start) != 3 or not all(math.isfinite(v) for v in start):
        raise ValueError(f"the start must be three finite numbers (x m, y m, θ rad), got {start}")
    if log_to is None:
        log_to = logging.getLogger("pluto.pose.offline")
        log_to.addHandler(logging.NullHandler())
        log_to.propagate = False
    if warm:
        warm_up()
    tracker = PoseTracker(wall_map, prm, log_to)
    n = len(log.scans)
    estimate = np.zeros((n, 3))
    lost = np.zeros(n, dtype=bool)
    matches = np.zeros(n, dtype=np.intp)
    times = np.zeros(n)
    corrected = msgs.PoseEstimate(stamp=0.0, pose=_laser_pose(start), covariance=[0.0] * 9)
    for k, scan in enumerate(log.scans):
        message = msgs.LaserScan(
            stamp=scan.t,
            ranges=scan.ranges.tolist(),
            angles=scan.angles.tolist(),
            count=int(scan.ranges.shape[0]),
            max_range=scan.max_range,
        )
        dr = msgs.PoseEstimate(
            stamp=scan.t, pose=_laser_pose(odometry[k]), covariance=_dead_reckoning_covariance(odometry, k, model)
        )
        begin = time.process_time()
        tracker.process(scan.t, message, dr, corrected if k == 0 else None)
        times[k] = time.process_time() - begin
        assert tracker.filter is not None
        estimate[k] = tracker.filter.pose
        lost[k] = tracker.filter.lost
        matches[k] = len(tracker.matched)
    if n:
        estimate[:, 2] = np.unwrap(estimate[:, 2])
    return PoseOfflineResult(
        log,
        estimate,
        odometry,
        start,
        lost,
        matches,
        times,
        float(times.sum()),
        tracker.relocalizations,
        noise,
        seed,
    )
