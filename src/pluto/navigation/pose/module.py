"""The pose module (the original's poseModule): walls in each laser scan matched to a map, in a Kalman filter.

Reads ``Sick/Scan_mm`` and, for each scan, the localization service's ``Localization/Laser_Dead-Reckoning`` (the
laser and wrist pose at the scan's time, with the covariance of the odometry since the previous scan) and
``Localization/Laser_Pose`` (the same, corrected). Extracts the scan's lines, matches them to the map's walls and
updates an EKF of the laser pose (:mod:`pluto.navigation.pose.core`), then posts the improved laser pose on
``Localization/Post_Pose`` with setter (cmd_flags) 1; the service turns it into ``Localization/Pose``.

The thread starts active by default. On start it takes the pose from localization (interface 4 at the first scan);
on stop it posts the setter 0 (an empty pose). Setting the pose by hand follows the seed: stop the thread, post a
robot pose with setter -1, wait for the service to show -1, start the thread (:meth:`PoseProxy.set_pose`).

``pose/status`` (FVectorState, command and status, as the seed):
    element[0]: the thread, 1 running, 0 stopped.
    element[1]: a client writes 2 to start "find wall"; the module writes -1 while searching, then the number of
        scan points of the longest wall in front (0 if there is none); data = (γ rad, ρ m) of that wall and its
        2x2 covariance, row-major.
    element[2]: 1 while the filter is lost (too few walls matched for too long, or too uncertain), else 0.
    element[3]: walls matched in the last scan.  element[4]: relocalizations so far.
A lost filter searches the whole map for the pose that explains the scan (a robot moved by hand); a clear answer
resets the filter and is logged and counted (element[4]), never a silent jump.

Map: ``map`` names a world file or a shipped world (``office``, ``campus``): the same XML format as the simulator's
worlds and the SLAM module's saved maps; empty: the simulator's world (asked from ``sim``).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from pluto import msgs, names
from pluto.errors import ConfigError
from pluto.navigation.pose.core import PoseFilter, PoseFilterParams, relocalize, scan_agreement
from pluto.navigation.pose.features import LineFeature, extract_lines
from pluto.navigation.pose.findwall import find_wall
from pluto.navigation.pose.map import WallMap
from pluto.runtime.module import Module, ModuleParams
from pluto.sim.raycast import RayCaster

__all__ = ["FIND_WALL", "SETTER", "PoseModule", "PoseModuleParams"]

SETTER = 1
"""The pose module's setter on ``Localization/Post_Pose``."""

FIND_WALL = 2
"""element[1] of a client's ``pose/status`` that starts "find wall"."""

SEARCHING = -1
"""element[1] while "find wall" searches."""

_KEEP = 64
"""Scans and laser poses kept while waiting for their partner (a few seconds of them)."""


class PoseModuleParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    map: a world/map file or a shipped world name; empty: the simulator's world.
    scan: the laser interface to read.
    range_sigma: std dev of a range reading, m (line fits and their covariances).
    initial_std: std dev (m, and m as rad·1) added to the pose taken from localization at start, when it carries
        no covariance of its own.
    initial_heading_std: the same for the heading, rad.
    relocalize_every: scans between two searches of the map while lost (0: never search).
    relocalize_min_fraction: a search's answer is taken if this share of the scan's line points matches it...
    relocalize_margin: ...and its score is at least this many times the best other place's.
    max_tilt: a scan taken with the wrist tilted more than this (rad) does not cut the walls level: it only moves
        the filter with the dead reckoning.
    obstacles: the edges of the map's polygonal obstacles (buildings on a campus, boxes) are walls too.
    search_radius: a lost filter first searches this far (m) around where it thinks it is, widened by three of its
        standard deviations...
    global_after: ...and the whole map only after this many lost scans (a robot carried far away).
    filter: settings of the filter (gate, lost rules, ...).
    """

    rate_hz: float = 20.0
    use_sim_time: bool = True
    map: str = ""
    scan: str = names.SICK_SCAN_MM
    range_sigma: float = 0.01
    initial_std: float = 0.05
    initial_heading_std: float = math.radians(2.0)
    relocalize_every: int = 5
    relocalize_min_fraction: float = 0.6
    relocalize_margin: float = 1.25
    max_tilt: float = math.radians(3.0)
    obstacles: bool = True
    search_radius: float = 3.0
    global_after: int = 50
    filter: PoseFilterParams = PoseFilterParams()

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("range_sigma", "initial_std", "initial_heading_std", "relocalize_margin"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0 and finite, got {value}")
        if self.relocalize_every < 0 or not 0.0 < self.relocalize_min_fraction <= 1.0:
            raise ValueError("relocalize_every must be >= 0 and relocalize_min_fraction in (0, 1]")


class PoseModule(Module[PoseModuleParams]):
    """Laser walls matched to a map in an EKF; posts the laser pose to localization with setter 1."""

    name = "pose"
    description = "pose module: laser walls matched to the map in a Kalman filter, posted to localization"
    provides = (names.POSE_STATUS,)
    requires = ("localization", "sick")
    Params = PoseModuleParams

    def on_configure(self) -> None:
        p = self.params
        self.wall_map = self._load_map(p.map)
        self._caster = RayCaster(self.wall_map.segments)
        self.filter: PoseFilter | None = None
        self.features: list[LineFeature] = []  # the last scan's lines (laser frame)
        self.matched: list[int] = []  # indices of the last scan's lines that matched a wall
        self.posts = 0
        self.relocalizations = 0
        self.scans_used = 0
        self.tilted = 0  # scans not matched because the wrist was tilted
        self._find_wall = 0  # element[1] of the status
        self._wall_data: list[float] = []
        self._find_requested = False
        self._lost_scans = 0
        self._candidate: tuple[tuple[float, float, float], tuple[float, ...]] | None = None
        self._lock_q = threading.Lock()
        self._scans: dict[float, msgs.LaserScan] = {}
        self._dr: dict[float, msgs.PoseEstimate] = {}
        self._corrected: dict[float, msgs.PoseEstimate] = {}
        self._done_until = -math.inf
        self._restart = False
        self.post = self.create_publisher(names.LOCALIZATION_POST_POSE)
        self.status = self.create_publisher(names.POSE_STATUS)
        self.create_subscription(p.scan, self._keep(self._scans), msgs.LaserScan, depth=_KEEP)
        self.create_subscription(names.LOCALIZATION_LASER_DEAD_RECKONING, self._keep(self._dr), depth=_KEEP)
        self.create_subscription(names.LOCALIZATION_LASER_POSE, self._keep(self._corrected), depth=_KEEP)
        self.create_subscription(names.POSE_STATUS, self._on_status)
        self._write_status(0.0)

    def _load_map(self, source: str) -> WallMap:
        if not source:
            from pluto.sim.module import fetch_settings  # the simulator's world: only when no map is given

            try:
                source = fetch_settings(self.bus).world
            except Exception as err:
                raise ConfigError(
                    f"pose: no map given (map = ...) and no simulator to ask for its world: {err}"
                ) from err
        try:
            wall_map = WallMap.from_file(source, include_obstacles=self.params.obstacles)
        except (OSError, ValueError) as err:
            raise ConfigError(f"pose: cannot read the map {source!r}: {err}") from err
        self.get_logger().info("map %s: %d walls", source, len(wall_map))
        return wall_map

    def _keep(self, store: dict[float, Any]) -> Any:
        def keep(message: Any) -> None:
            with self._lock_q:
                if message.stamp > self._done_until:
                    store[message.stamp] = message
                    while len(store) > _KEEP:
                        del store[min(store)]

        return keep

    def _on_status(self, status: msgs.FVectorState) -> None:
        if len(status.element) > 1 and status.element[1] == FIND_WALL:
            with self._lock_q:
                self._find_requested = True

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def on_activate(self) -> None:
        self.filter = None  # the pose comes from localization at the first scan

    def on_deactivate(self) -> None:
        # nobody improves the pose any more: the service keeps its last correction
        self.post.write(msgs.PoseEstimate(stamp=0.0, pose=[], cmd_flags=0))
        self._write_status(self.clock.now())

    def on_clock_jump(self, old: float, new: float) -> None:
        with self._lock_q:
            self._restart = True

    # -- the step ----------------------------------------------------------------------------------------------

    def step(self, now: float) -> None:
        with self._lock_q:
            if self._restart:
                self._restart = False
                self._scans.clear()
                self._dr.clear()
                self._corrected.clear()
                self._done_until = -math.inf
                self.filter = None
            ready = sorted(t for t in self._scans if t in self._dr)
            pairs = [(t, self._scans.pop(t), self._dr.pop(t), self._corrected.get(t)) for t in ready]
            if ready:
                self._done_until = ready[-1]
                for store in (self._scans, self._dr, self._corrected):
                    for t in [t for t in store if t <= self._done_until]:
                        del store[t]
            find, self._find_requested = self._find_requested, False
        if find:
            self._find_wall = SEARCHING
        for t, scan, dr, corrected in pairs:
            self._process(t, scan, dr, corrected)
        self._write_status(now)

    def _process(
        self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None
    ) -> None:
        p = self.params
        features = extract_lines(scan.ranges, scan.angles, max_range=scan.max_range, range_sigma=p.range_sigma)
        self.features = features
        self.scans_used += 1
        if self._find_wall == SEARCHING:
            wall = find_wall(features)
            self._find_wall = wall.points if wall is not None else 0
            self._wall_data = wall.data() if wall is not None else []
        if self.filter is None:
            if corrected is None:
                return  # wait for a scan whose corrected laser pose came too
            cov = np.array(corrected.covariance, dtype=float).reshape(3, 3)
            floor = np.diag([p.initial_std**2, p.initial_std**2, p.initial_heading_std**2])
            self.filter = PoseFilter(corrected.pose, cov + floor, reference=dr.pose, params=p.filter)
        else:
            self.filter.predict(dr.pose, dr.covariance)
        if len(dr.pose) >= 8 and abs(dr.pose[7]) > p.max_tilt:
            self.tilted += 1  # the laser looks up or down: its lines are not the walls' (the seed's active scanning)
            return
        result = self.filter.update(features, self.wall_map)
        self.matched = [m.feature for m in result.matches]
        if result.lost:
            self._lost_scans += 1
            if p.relocalize_every and self._lost_scans % p.relocalize_every == 1 % p.relocalize_every:
                self._try_relocalize(t, features, dr, scan)
        else:
            self._lost_scans = 0
        cov = self.filter.covariance
        self.post.write(
            msgs.PoseEstimate(
                stamp=t,
                pose=self.filter.laser_post(dr.pose),
                covariance=[float(v) for v in cov.ravel()],
                cmd_flags=SETTER,
            )
        )
        self.posts += 1

    def _try_relocalize(
        self, t: float, features: list[LineFeature], dr: msgs.PoseEstimate, scan: msgs.LaserScan
    ) -> None:
        p = self.params
        assert self.filter is not None

        def agreement(poses: Any) -> Any:
            return scan_agreement(self._caster, scan.ranges, scan.angles, poses, max_range=scan.max_range)

        # Near where the filter thinks it is first (it is lost, but most often by a metre, not across the map);
        # the whole map once it has been lost for long.
        near = self._lost_scans <= p.global_after
        radius = p.search_radius + 3.0 * self.filter.status.position_std
        found = relocalize(
            features,
            self.wall_map,
            self.filter.pose if near else None,
            radius=radius if near else None,
            max_range=p.filter.max_range,
            check=agreement,
        )
        if found is None:
            return
        enough = found.fraction >= p.relocalize_min_fraction
        clear = enough and found.score >= p.relocalize_margin * found.runner_up
        # A place that wins twice in a row where the dead reckoning says the robot went in between is taken too:
        # a look-alike place does not keep winning as the view changes.
        previous, self._candidate = self._candidate, (found.pose, tuple(dr.pose[:4]))
        if enough and not clear and previous is not None:
            clear = _agrees(previous, found.pose, dr.pose)
        if not clear:
            self.get_logger().info(
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
        self._candidate = None
        self.get_logger().warning(
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

    def _write_status(self, now: float) -> None:
        lost = int(self.filter.lost) if self.filter is not None else 0
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=list(self._wall_data),
                element=[int(self.active), self._find_wall, lost, len(self.matched), self.relocalizations],
            )
        )

    def notes(self) -> list[str]:
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
    turn = (found[2] - theta + math.pi) % (2 * math.pi) - math.pi
    return math.hypot(found[0] - x, found[1] - y) <= distance and abs(turn) <= angle
