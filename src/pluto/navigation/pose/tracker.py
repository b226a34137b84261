"""The pose module's work on each scan, without the bus: lines, the filter, find wall, lost and found.

:class:`PoseTracker` is what the module's shell (:mod:`pluto.navigation.pose.module`) feeds with each scan and the
localization service's laser poses of its time, and what benchmarks and tests run directly: the same code, whether
on the bus or not.

Continuing after a restart: :meth:`PoseTracker.snapshot` is what the module saves as it goes, and
:meth:`PoseTracker.resume` what a restarted module gives it. The first scan after that does not take the pose from
localization: the saved filter goes on, its covariance widened for the time between the saved scan and this one
(``filter.resume_*_per_s``), moved by the dead reckoning's laser motion since the saved scan, then updated with the
scan. If that scan does not match the map (or the widened filter is lost), the map is searched around the resumed
estimate at once, within ``search_radius`` plus three of its standard deviations, and the whole map only after
``global_after`` lost scans, as for any lost filter: a restart never starts from the world's start nor with a search
of the whole map. A pose set by hand while the module was away (localization's laser pose with a setter < 0) wins
over the saved state. Each of these is logged.

A start from localization's laser pose is a guess until a scan confirms it (a pose set by hand may be in the wrong
room): a scan confirms it when the walls it matched there hold ``relocalize_min_fraction`` of its lines' points and
as much of its beams agree with the map seen from there (:func:`~pluto.navigation.pose.core.scan_agreement`), the
test a search's answer passes, and two scans in a row confirm it (one may agree with a look-alike by chance). Until
then the map is searched around the start at every scan that has walls to search with, twice as far at each search
(``search_radius``, then 2, 4, 8... times it, then the whole map every ``relocalize_every`` scans), and a scan whose
beams do not agree says the filter is lost at once, not after ``lost_after`` scans. Since a guess says nothing of
where the robot is, the best place near it is taken only once it wins twice in a row where the dead reckoning says
the robot went in between (a look-alike of the true place does not keep winning as the view changes); a search of
the whole map may also take a place clearly better than any other at once. A lost filter's searches widen the same
way.
"""

from __future__ import annotations

import logging
import math
from typing import Annotated, Any

import msgspec
import numpy as np

from pluto import msgs, names
from pluto.geometry import wrap_angle
from pluto.navigation.pose.core import (
    PoseFilter,
    PoseFilterParams,
    PoseFilterState,
    can_relocalize,
    relocalize,
    scan_agreement,
)
from pluto.navigation.pose.features import LineFeature, LineTable, line_table
from pluto.navigation.pose.findwall import find_wall
from pluto.navigation.pose.map import WallMap
from pluto.runtime.module import ModuleParams
from pluto.runtime.ranges import Rate, between
from pluto.sim.raycast import RayCaster

__all__ = ["FIND_WALL", "SEARCHING", "SETTER", "PoseModuleParams", "PoseTracker", "PoseTrackerState", "warm_up"]

SETTER = 1
"""The pose module's setter on ``Localization/Post_Pose``."""

FIND_WALL = 2
"""element[1] of a client's ``pose/status`` that starts "find wall"."""

SEARCHING = -1
"""element[1] while "find wall" searches."""


class PoseModuleParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    map: a world/map file or a shipped world name; empty: the simulator's world.
    scan: the laser interface to read.
    range_sigma: std dev of a range reading at zero range, m (line fits and their covariances)...
    range_sigma_per_m: ...and its growth with the range, m/m: a laser's range noise grows with the range (0.001: the
        SICK LMS's 1 cm + 0.1 % of the range, as the simulator's realistic scanner).
    line_scatter: a line whose points scatter about it more than ``range_sigma`` explains (a scanner noisier than
        that, a wall that is not flat, clutter along it) has its covariance scaled up by that scatter.
    initial_std: std dev (m, and m as rad·1) added to the pose taken from localization at start, when it carries
        no covariance of its own.
    initial_heading_std: the same for the heading, rad.
    relocalize_every: scans between two searches of the map while lost (0: never search).
    relocalize_min_fraction: a search's answer is taken if this share of the scan's line points matches it...
    relocalize_margin: ...and its score is at least this many times the best other place's.
    max_tilt: a scan taken with the wrist tilted more than this (rad) does not cut the walls level: it only moves
        the filter with the dead reckoning.
    obstacles: the edges of the map's polygonal obstacles (buildings on a campus, boxes) are walls too.
    relocalize_range: walls farther than this from the searched area are not used by a search of the map, m (the
        filter itself matches every wall within its ``max_range``).
    search_radius: a lost filter first searches this far (m) around where it thinks it is, widened by three of its
        standard deviations...
    global_after: ...and the whole map only after this many lost scans (a robot carried far away).
    filter: settings of the filter (gate, lost rules, ...).
    """

    rate_hz: Rate = 20.0
    use_sim_time: bool = True
    map: str = ""
    scan: str = names.SICK_SCAN_MM.name
    range_sigma: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.01
    range_sigma_per_m: Annotated[float, between(0.0, 0.1)] = 0.001
    line_scatter: bool = True
    initial_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.05
    initial_heading_std: Annotated[float, between(0.0, math.pi, open_low=True)] = math.radians(2.0)
    relocalize_every: Annotated[int, between(0, 10_000)] = 5
    relocalize_min_fraction: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.6
    relocalize_margin: Annotated[float, between(0.0, 100.0, open_low=True)] = 1.25
    max_tilt: Annotated[float, between(0.0, math.pi / 2)] = math.radians(3.0)
    obstacles: bool = True
    relocalize_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 30.0
    search_radius: Annotated[float, between(0.0, 100.0)] = 3.0
    global_after: Annotated[int, between(0, 1_000_000)] = 50
    filter: PoseFilterParams = msgspec.field(default_factory=PoseFilterParams)


class PoseTrackerState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted pose module continues from (:meth:`PoseTracker.snapshot`).

    Attributes:
        stamp: the time of the last scan the filter took, s.
        filter: the filter's state after it.
        posts, relocalizations: the counters so far.
    """

    stamp: float
    filter: PoseFilterState
    posts: int = 0
    relocalizations: int = 0


class PoseTracker:
    """The pose module's state and its work on each scan.

    Args:
        wall_map: the map.
        params: the module's parameters.
        log: where to report lost and found.
    """

    def __init__(self, wall_map: WallMap, params: PoseModuleParams, log: logging.Logger | None = None) -> None:
        self.params = params
        self.wall_map = wall_map
        self.log = log or logging.getLogger("pluto.pose")
        self._caster = RayCaster(wall_map.segments)
        self.filter: PoseFilter | None = None
        self._lines = LineTable(np.zeros((0, 9)), np.zeros((0, 3), dtype=np.intp))  # the last scan's lines
        self._features: list[LineFeature] | None = []  # the same as objects, made when first asked for
        self.matched: list[int] = []  # indices of the last scan's lines that matched a wall
        self.posts = 0
        self.relocalizations = 0
        self.scans_used = 0
        self.tilted = 0  # scans not matched because the wrist was tilted
        self.find_wall_code = 0  # element[1] of the status
        self.wall_data: list[float] = []  # data of the status: the wall in front, (γ, ρ) and covariance
        self._lost_scans = 0
        self._searches = 0  # searches of the map since the filter was last found or started
        self._unconfirmed = False  # the start taken from localization: no scan has confirmed it yet
        self._confirming = 0  # scans in a row that confirmed it
        self._agreement = 1.0  # the share of the last scan the map explains at the filter's pose (while unconfirmed)
        self._candidate: tuple[tuple[float, float, float], tuple[float, ...]] | None = None
        self.stamp: float | None = None  # the last scan the filter took, s
        self._resumed: tuple[PoseFilter, float] | None = None  # a saved filter and its stamp, for the next scan
        self._check = False  # the first scan after a resume: search around the estimate if it does not match
        self.resumes = 0

    def restart(self) -> None:
        """Take the pose from localization again at the next scan (the thread started, or a new run)."""
        self.filter = None
        self._lost_scans = 0
        self._searches = 0
        self._unconfirmed = False
        self._confirming = 0
        self._candidate = None
        self.stamp = None
        self._resumed = None
        self._check = False

    # -- continuing after a restart ------------------------------------------------------------------------------

    def snapshot(self) -> PoseTrackerState | None:
        """The state to save (None before the filter has taken a scan)."""
        if self.filter is None or self.stamp is None:
            return None
        return PoseTrackerState(
            stamp=self.stamp,
            filter=self.filter.snapshot(),
            posts=self.posts,
            relocalizations=self.relocalizations,
        )

    def resume(self, state: PoseTrackerState) -> None:
        """Continue from a crashed instance's :meth:`snapshot` at the next scan (see the module docstring).

        Raises:
            ValueError: the state's pose or covariance is unusable (nothing is changed).
        """
        resumed = PoseFilter.resume(state.filter, self.params.filter)
        self.restart()
        self._resumed = (resumed, state.stamp)
        self.posts = max(self.posts, state.posts)
        self.relocalizations = max(self.relocalizations, state.relocalizations)

    @property
    def resuming(self) -> bool:
        """A resumed state waits for the next scan."""
        return self._resumed is not None

    def _start(self, t: float, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None) -> bool:
        """Start the filter at a scan: from a resumed state, else from localization's corrected laser pose.
        False: not yet (no corrected pose came with this scan)."""
        p = self.params
        resumed, self._resumed = self._resumed, None
        if resumed is not None and corrected is not None and corrected.cmd_flags < 0:
            self.log.warning(
                "the pose was set by hand (setter %d) while the module was away: starting from it at %.1f s, not "
                "from the saved filter",
                corrected.cmd_flags,
                t,
            )
            resumed = None
        if resumed is not None:
            kept, stamp = resumed
            saved = kept.pose
            before = kept.status.position_std
            kept.widen(t - stamp)
            kept.predict(dr.pose, dr.covariance)  # the dead reckoning's motion since the saved scan
            self.filter = kept
            self._check = True
            self.resumes += 1
            x, y, theta = kept.pose
            self.log.warning(
                "restarted: the filter continues from its state of t=%.3f s, laser at (%.3f, %.3f, %.1f°); moved "
                "by the dead reckoning to (%.3f, %.3f, %.1f°) at t=%.3f s; position σ widened from %.3f to %.3f m "
                "for the %.3f s lost",
                stamp,
                saved[0],
                saved[1],
                math.degrees(saved[2]),
                x,
                y,
                math.degrees(theta),
                t,
                before,
                kept.status.position_std,
                max(0.0, t - stamp),
            )
            return True
        if corrected is None:
            return False  # wait for a scan whose corrected laser pose came too
        cov = np.array(corrected.covariance, dtype=float).reshape(3, 3)
        floor = np.diag([p.initial_std**2, p.initial_std**2, p.initial_heading_std**2])
        self.filter = PoseFilter(corrected.pose, cov + floor, reference=dr.pose, params=p.filter)
        self._unconfirmed = True
        self._confirming = 0
        return True

    def request_find_wall(self) -> None:
        """Start "find wall": the next scan answers it."""
        self.find_wall_code = SEARCHING

    @property
    def features(self) -> list[LineFeature]:
        """The last scan's lines (laser frame)."""
        if self._features is None:
            self._features = self._lines.features()
        return self._features

    @property
    def lost(self) -> bool:
        return self.filter is not None and self.filter.lost

    def process(
        self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None
    ) -> msgs.PoseEstimate | None:
        """One scan with the laser poses of its time (``corrected``: interface 4, needed for the first scan only).

        Returns:
            The post for ``Localization/Post_Pose`` (setter 1), or None (no filter yet, or a tilted scan).
        """
        self._take_lines(scan)
        if not self._follow(t, dr, corrected):
            return None
        assert self.filter is not None
        self.stamp = t
        if len(dr.pose) >= 8 and abs(dr.pose[7]) > self.params.max_tilt:
            self.tilted += 1  # the laser looks up or down: its lines are not the walls' (the wrist's active scanning)
            return None
        pairs, _, _, _ = self.filter.update_lines(self._lines.values, self.wall_map)
        # the lines that matched: the pairs', and the other pieces of their walls that joined them
        self.matched = sorted([*pairs[:, 0].tolist(), *self.filter.joined[:, 0].tolist()])
        self._judge(t, scan, dr, pairs.shape[0] >= self.params.filter.min_matches)
        self.posts += 1
        return msgs.PoseEstimate(
            stamp=t,
            pose=self.filter.laser_post(dr.pose),
            covariance=self.filter.covariance.ravel().tolist(),
            cmd_flags=SETTER,
        )

    def _take_lines(self, scan: msgs.LaserScan) -> None:
        """The scan's lines, and the answer to a "find wall" that waits for them."""
        p = self.params
        self._lines = line_table(
            scan.ranges,
            scan.angles,
            max_range=scan.max_range,
            range_sigma=p.range_sigma,
            range_sigma_per_m=p.range_sigma_per_m,
            scatter=p.line_scatter,
        )
        self._features = None
        self.scans_used += 1
        if self.find_wall_code == SEARCHING:
            wall = find_wall(self.features)
            self.find_wall_code = wall.points if wall is not None else 0
            self.wall_data = wall.data() if wall is not None else []

    def _follow(self, t: float, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None) -> bool:
        """Move the filter to this scan by the dead reckoning, or start it; False: no filter yet."""
        if self.filter is None:
            return self._start(t, dr, corrected)
        self.filter.predict(dr.pose, dr.covariance)
        return True

    def _judge(self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate, matched: bool) -> None:
        """After the update: confirm an unconfirmed start, search the map when the filter is (or may be) lost, or
        note that it is found (``matched``: the scan had ``min_matches`` pairs)."""
        assert self.filter is not None
        p = self.params
        check, self._check = self._check, False
        confirms = False
        if self._unconfirmed:
            # two scans in a row: one may agree with a look-alike of the place by chance, as a search's answer may
            confirms = self._confirms(scan)
            self._confirming = self._confirming + 1 if confirms else 0
            self._unconfirmed = self._confirming < 2
        if self._unconfirmed and not confirms and self._informative():
            self._search_around_start(t, scan, dr)
        elif check and (self.filter.lost or not matched):
            # the resumed estimate does not explain this scan: search around it at once (never the whole map yet)
            self._lost_scans = 0
            self.log.warning(
                "restarted: the scan at %.1f s matches %d walls from the resumed estimate; searching around it, "
                "within %.2f m",
                t,
                len(self.matched),
                p.search_radius + 3.0 * self.filter.status.position_std,
            )
            self._try_relocalize(t, self.features, dr, scan)
        elif self.filter.lost:
            self._lost_scans += 1
            if p.relocalize_every and self._lost_scans % p.relocalize_every == 1 % p.relocalize_every:
                self._try_relocalize(t, self.features, dr, scan)
        else:
            self._lost_scans = 0
            self._searches = 0

    def _search_around_start(self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate) -> None:
        """A start no scan has confirmed yet is a guess (a pose set by hand, a robot carried to where localization
        does not know): the map is searched around it at every scan that has walls to search with, twice as far
        each time, until a scan confirms it or a search finds the robot; a scan whose beams the map there does not
        explain says the filter is lost now, not after lost_after scans."""
        assert self.filter is not None
        p = self.params
        if self._agreement < p.relocalize_min_fraction:
            self.filter.declare_lost()
        self._lost_scans += 1
        if self._lost_scans == 1:
            self.log.warning(
                "the start at %.1f s is not confirmed by the scan (%.0f%% of its beams agree with the map "
                "there): searching the map around it",
                t,
                100.0 * self._agreement,
            )
        every = p.relocalize_every
        if self._search_radius() is not None or (every and self._lost_scans % every == 1 % every):
            self._try_relocalize(t, self.features, dr, scan)  # the whole map only every relocalize_every scans

    def _confirms(self, scan: msgs.LaserScan) -> bool:
        """Whether the last scan confirms the filter's pose as a search's answer must be confirmed: the walls it
        matched hold ``relocalize_min_fraction`` of its lines' points, and as much of its beams agree with the map
        seen from there (:func:`scan_agreement`; kept in ``_agreement``)."""
        assert self.filter is not None
        share = self.params.relocalize_min_fraction
        points = self._lines.counts[:, 0]
        explained = float(points[self.matched].sum()) / max(float(points.sum()), 1.0)
        self._agreement = float(
            scan_agreement(self._caster, scan.ranges, scan.angles, [self.filter.pose], max_range=scan.max_range)[0]
        )
        return explained >= share and self._agreement >= share

    def _search_radius(self) -> float | None:
        """How far around the filter's pose the next search looks, m; None: the whole map. Near where the filter
        thinks it is first (it is lost, but most often by a metre, not across the map), twice as far at each search
        that did not find it (the best place of a small area may be a look-alike of one beyond it); the whole map
        once that is wider than the map or it has been lost for long."""
        assert self.filter is not None
        p = self.params
        radius = p.search_radius * 2.0 ** min(self._searches, 30) + 3.0 * self.filter.status.position_std
        x0, y0, x1, y1 = self.wall_map.bounds()
        if self._lost_scans > p.global_after or radius >= math.hypot(x1 - x0, y1 - y0):
            return None
        return radius

    def _informative(self) -> bool:
        """Whether the last scan has a line long enough to say where the laser is not (the filter's
        ``informative_length``)."""
        v = self._lines.values
        if v.shape[0] == 0:
            return False
        longest = float(np.hypot(v[:, 7] - v[:, 5], v[:, 8] - v[:, 6]).max())
        return longest >= self.params.filter.informative_length

    def _try_relocalize(
        self, t: float, features: list[LineFeature], dr: msgs.PoseEstimate, scan: msgs.LaserScan
    ) -> None:
        p = self.params
        assert self.filter is not None
        if not can_relocalize(features):
            return  # nothing to search with: the search is not counted (it would widen the next for nothing)

        def agreement(poses: Any) -> Any:
            return scan_agreement(self._caster, scan.ranges, scan.angles, poses, max_range=scan.max_range)

        radius = self._search_radius()
        near = radius is not None
        self._searches += 1
        found = relocalize(
            features,
            self.wall_map,
            self.filter.pose if near else None,
            radius=radius,
            max_range=p.relocalize_range,
            check=agreement,
        )
        if found is None:
            return
        enough = found.fraction >= p.relocalize_min_fraction
        # A place clearly better than the others searched is taken at once, unless the search was around a start
        # no scan has confirmed: a guess says nothing of where the robot is, and the best place near it may be a
        # look-alike of one beyond. A place that wins twice in a row where the dead reckoning says the robot went
        # in between is taken too: a look-alike does not keep winning as the view changes.
        trusted = not (near and self._unconfirmed)
        clear = enough and trusted and found.score >= p.relocalize_margin * found.runner_up
        previous, self._candidate = self._candidate, (found.pose, tuple(dr.pose[:4]))
        if enough and not clear and previous is not None:
            clear = _agrees(previous, found.pose, dr.pose)
        if not clear:
            self.log.info(
                "lost at %.1f s: the best place (%.2f, %.2f) explains %.0f%% of the scan, the next %.0f points "
                "against %.0f: not clear enough",
                t,
                found.pose[0],
                found.pose[1],
                100 * found.fraction,
                found.runner_up,
                found.score,
            )
            return
        old = self.filter.pose
        theta = found.pose[2]
        theta += round((old[2] - theta) / (2 * math.pi)) * 2 * math.pi  # keep the heading continuous
        floor = np.diag([p.initial_std**2, p.initial_std**2, p.initial_heading_std**2])
        self.filter.reset((found.pose[0], found.pose[1], theta), found.covariance + floor, reference=dr.pose)
        self.relocalizations += 1
        self._lost_scans = 0
        self._searches = 0
        self._unconfirmed = False
        self._confirming = 0
        self._candidate = None
        self.log.warning(
            "lost, then found again at %.1f s: laser at (%.2f, %.2f, %.1f°), %.2f m from where the filter was "
            "(%d of the scan's lines match; relocalization %d)",
            t,
            found.pose[0],
            found.pose[1],
            math.degrees(found.pose[2]),
            math.hypot(found.pose[0] - old[0], found.pose[1] - old[1]),
            found.matches,
            self.relocalizations,
        )

    def notes(self) -> list[str]:
        """Remarks for MOM."""
        if self.filter is None:
            return [f"map: {len(self.wall_map)} walls; no scan used yet"]
        s = self.filter.status
        return [
            f"map: {len(self.wall_map)} walls; scans used {self.scans_used}, posts {self.posts}",
            f"last scan: {s.last_matches} walls matched; position σ {s.position_std:.3f} m, heading σ "
            f"{math.degrees(s.heading_std):.2f}°{'; LOST' if s.lost else ''}; relocalizations {self.relocalizations}",
        ]


def _agrees(
    previous: tuple[tuple[float, float, float], tuple[float, ...]],
    found: tuple[float, float, float],
    dr_now: Any,
    distance: float = 0.3,
    angle: float = 0.15,
) -> bool:
    """``found`` is where the earlier candidate went by the dead reckoning's laser motion since (m, rad limits)."""
    (px, py, pt), (dx0, dy0, _dz0, dt0) = previous
    dx1, dy1, dt1 = float(dr_now[0]), float(dr_now[1]), float(dr_now[3])
    c, s = math.cos(dt0), math.sin(dt0)
    ux, uy = c * (dx1 - dx0) + s * (dy1 - dy0), -s * (dx1 - dx0) + c * (dy1 - dy0)  # in the earlier laser frame
    cp, sp = math.cos(pt), math.sin(pt)
    x, y, theta = px + cp * ux - sp * uy, py + sp * ux + cp * uy, pt + (dt1 - dt0)
    turn = wrap_angle(found[2] - theta)
    return math.hypot(found[0] - x, found[1] - y) <= distance and abs(turn) <= angle


def warm_up() -> None:
    """Have numba load (or compile) the pose module's kernels now: one scan of a square room through a throwaway
    tracker and its filter. Their first call in a process costs about half a second with numba's cache (seconds
    without it); a module pays it while it configures, not at its first scan, with time running."""
    half = 2.0  # m: the room is 4 x 4 m around the laser
    segments = [
        [-half, -half, half, -half],
        [half, -half, half, half],
        [half, half, -half, half],
        [-half, half, -half, -half],
    ]
    angles = np.linspace(-math.pi / 2, math.pi / 2, 361)
    with np.errstate(divide="ignore"):
        ranges = np.minimum(half / np.abs(np.cos(angles)), half / np.abs(np.sin(angles)))
    scan = msgs.LaserScan(stamp=0.0, ranges=ranges.tolist(), angles=angles.tolist(), count=361, max_range=80.0)
    pose = msgs.PoseEstimate(stamp=0.0, pose=[0.0] * 8, covariance=[1e-4, 0, 0, 0, 1e-4, 0, 0, 0, 1e-4])
    quiet = logging.getLogger("pluto.pose.warm_up")
    quiet.disabled = True
    tracker = PoseTracker(WallMap.from_segments(segments), PoseModuleParams(), quiet)
    for stamp in (0.0, 0.2):
        tracker.process(stamp, scan, pose, pose)
