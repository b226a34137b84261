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

Logs are read by :mod:`pluto.navigation.slam.offline_log` (:func:`read_log`: CARMEN logs, Pluto recordings, ROS
bags); its names are importable from here too.

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
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec
import numpy as np
import numpy.typing as npt

from pluto.navigation.pose.core import PoseFilterParams
from pluto.navigation.pose.features import LineFeature, extract_lines
from pluto.navigation.slam.association import AssociationParams
from pluto.navigation.slam.backend import LoopBackEnd
from pluto.navigation.slam.compressed import AreaParams, CompressedWallEKF
from pluto.navigation.slam.core import WallSlam
from pluto.navigation.slam.loops import Keyframe, LoopParams, LoopSearch
from pluto.navigation.slam.mapcheck import parallel_copies
from pluto.navigation.slam.offline_log import (
    OfflineLog,
    OfflineScan,
    read_carmen,
    read_log,
    read_recording,
    read_relations,
)
from pluto.navigation.slam.scanmatch import ScanMatcher, ScanMatchParams, scan_points
from pluto.runtime.params import Params
from pluto.runtime.ranges import between

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
    extract = features or _line_extractor(prm)
    slam_filter, slam, matcher, backend, search = _pipeline(prm, odometry[0])
    n = len(log.scans)
    estimate = np.zeros((n, 3))
    times = np.zeros(n)
    candidates = np.zeros(n, dtype=np.intp)
    area_sizes = np.zeros(n, dtype=np.intp)
    increments = _increments(odometry)
    point_params = prm.scan_match or ScanMatchParams()
    back_times = np.zeros(n)
    if n and warm:
        warm_up()  # every kernel of the run loaded (or compiled) before the clock starts
        extract(log.scans[0])  # and a line extractor of the caller's
    total_start = time.process_time()
    for k, scan in enumerate(log.scans):
        begin = time.process_time()
        covariance = (
            np.zeros((3, 3)) if k == 0 else _dead_reckoning_covariance(model, increments[k - 1], odometry[k - 1])
        )
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
            back_times[k], applied = _search_in_line(search, backend, keyframe)
            times[k] += applied
        candidates[k] = step.candidates
        area_sizes[k] = slam_filter.area_size
    cpu = time.process_time() - total_start
    if n:
        estimate[:, 2] = np.unwrap(estimate[:, 2])
    causal = estimate
    if backend is not None and search is not None and n:
        estimate = _optimised_trajectory(search, backend)
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


def _pipeline(
    prm: OfflineParams, start: FloatArray
) -> tuple[CompressedWallEKF, WallSlam, ScanMatcher | None, LoopBackEnd | None, LoopSearch | None]:
    """The filter (at ``start``, the first odometry pose), the wall SLAM over it, the scan-matching front end and
    the loop-closing back end's two sides (None where ``prm`` has them off)."""
    floor = np.diag([prm.initial_std**2, prm.initial_std**2, prm.initial_heading_std**2])
    slam_filter = CompressedWallEKF(tuple(float(v) for v in start), floor, area=prm.area, params=prm.filter)
    slam = WallSlam(slam_filter, prm.association)
    matcher = None if prm.scan_match is None else ScanMatcher(prm.scan_match)
    if prm.loops is None:
        return slam_filter, slam, matcher, None, None
    backend = LoopBackEnd(slam, prm.loops, keep_trajectory=True, front_end=prm.scan_match is not None)
    return slam_filter, slam, matcher, backend, LoopSearch(prm.loops)


def _line_extractor(prm: OfflineParams) -> Callable[[OfflineScan], list[LineFeature]]:
    """The lines of a scan as ``prm`` says: no-echo readings at the usable range, each line's variances widened by
    the extra standard deviations."""

    def lines(scan: OfflineScan) -> list[LineFeature]:
        top = min(scan.max_range, prm.usable_range)
        ranges = np.where(scan.ranges >= scan.max_range, top, scan.ranges)
        found = extract_lines(ranges, scan.angles, max_range=top, range_sigma=prm.range_sigma)
        if prm.extra_alpha_std > 0.0 or prm.extra_r_std > 0.0:
            va, vr = prm.extra_alpha_std**2, prm.extra_r_std**2
            found = [dataclasses.replace(f, var_alpha=f.var_alpha + va, var_r=f.var_r + vr) for f in found]
        return found

    return lines


def _dead_reckoning_covariance(model: OdometryNoise, increment: Sequence[float], previous: FloatArray) -> FloatArray:
    """The covariance of an increment (in the frame of the pose ``previous`` it starts from) turned to the
    dead-reckoning frame, as the localization service gives it."""
    local = model.covariance(increment)
    c, s = math.cos(previous[2]), math.sin(previous[2])
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    out: FloatArray = rot @ local @ rot.T
    return out


def _search_in_line(search: LoopSearch, backend: LoopBackEnd, keyframe: Keyframe) -> tuple[float, float]:
    """The back end's search on a new keyframe, in line (the slam module runs it on a thread of its own), and its
    correction applied when it has one: (the search's CPU time, the application's), s. The application is applied
    between this scan and the next, so its time is the scan loop's."""
    begin = time.process_time()
    correction = search.add(keyframe)
    searched = time.process_time() - begin
    applied = 0.0
    if correction is not None:
        begin = time.process_time()
        backend.apply(correction)
        applied = time.process_time() - begin
    return searched, applied


def _optimised_trajectory(search: LoopSearch, backend: LoopBackEnd) -> FloatArray:
    """Every scan's pose on its optimised keyframe, after the last optimisation's change has been applied (so the
    map is the optimised one) and the walls it moved checked for copies."""
    if search.unpublished:  # the last optimisation's small change, so the map is the optimised one
        backend.apply(search.correction())
    backend.tidy()  # the walls the last corrections moved, and those mapped since, checked for copies
    return backend.trajectory(search.graph.poses)


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
