"""The slam module (the original's slamModule, docs/design.md): a map of walls built from the laser while the same
filter corrects the pose, saved as a map file.

Reads what the pose module reads: ``Sick/Scan_mm`` and, for each scan, the localization service's
``Localization/Laser_Dead-Reckoning`` (the laser and wrist pose at the scan's time and the covariance of the
odometry since the previous scan) and, for the first scan, ``Localization/Laser_Pose`` (where the map starts). Each
scan's points first refine the dead reckoning's motion since the previous scan (the scan-matching front end,
:class:`~pluto.navigation.slam.scanmatch.ScanMatcher`, as the offline runner does), then its lines go through
:meth:`WallSlam.step <pluto.navigation.slam.core.WallSlam.step>` (the compressed filter by default), and the
corrected laser pose is posted on ``Localization/Post_Pose`` with setter (cmd_flags) 2; the localization service
treats setters 2 and 3 like the pose module's 1.

Loop closing (``loop_closing``, on by default): every half metre or 20° the scan becomes a keyframe
(:class:`~pluto.navigation.slam.backend.LoopBackEnd`), handed to a thread of its own
(:class:`~pluto.navigation.slam.backend.LoopWorker`) that looks for the same place seen long before, checks it by
scan matching and optimises the pose graph of keyframes (:mod:`pluto.navigation.slam.loops`). No scan waits for it:
the scan loop only takes the newest optimisation, when there is one, before its next scan and moves the walls and
the pose to it (a cost in the number of walls, not in the time spent), and checks a few moved walls per scan for
copies of themselves across the closed loop. The saved map is the corrected one.

As in the original (docs/design.md), the thread does not start by itself (``autostart = false``): start it when the
robot is ready (``pluto slam start``, :meth:`SlamProxy.start <pluto.navigation.slam.proxy.SlamProxy.start>`), and make
sure the pose module's thread is stopped, since both would set the pose. The first scan after the start takes the pose
from localization; that pose is the map's frame. Stopping the thread saves the map and hands the setter back (0);
starting it again goes on with the same map, from where the dead reckoning says the robot went meanwhile. When the
simulated time jumps back (a new run), the map starts again, unsaved.

``slam/status`` (FVectorState, command and status, as the original's):
    element[0]: the thread, 1 running, 0 stopped.
    element[1]: a client writes 2 to save the map; the module writes -1 while saving (the setter is 3 meanwhile),
        then 0 once saved, or 1 if the save failed (the reason is logged; the old file is intact).
    element[2]: walls in the map.  element[3]: walls matched in the last scan.  element[4]: maps saved so far.
    element[5]: -1 after a restart that lost the map the crashed instance was building (see below), else 0.
    data: the laser pose (x m, y m, θ rad) of the last scan, empty before the first.

Restarts: the module saves whether its thread runs and how far its map got (:mod:`pluto.runtime.persist`). Started
again by the supervisor after a crash, it starts its thread again if it was running (``autostart`` is false: without
this the restarted module would sit idle). The map being built is not carried over: the filter of the walls and the
pose is not saved, so the restarted module starts a new map at its first scan, from localization's corrected laser
pose (which still holds the crashed instance's last correction, so the pose goes on). The log says so, with the
walls lost and the last map saved (the map file keeps it until the next save), and element[5] is -1.

The map file: ``map_file``, by default ``slam-map.xml`` in the runtime folder of the robot (beside the modules' logs,
:func:`pluto.runtime.launcher.runtime_dir`); the service ``slam/map`` tells where it is and how many walls it has.
It is a world file (:mod:`pluto.navigation.slam.mapfile`): the pose module and the simulator load it unchanged.
"""

from __future__ import annotations

import datetime
import math
import threading
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt

from pluto import kernels, msgs, names
from pluto.navigation.pose.core import PoseFilterParams
from pluto.navigation.pose.features import extract_lines
from pluto.navigation.pose.inputs import ScanInputs
from pluto.navigation.slam.association import AssociationParams
from pluto.navigation.slam.backend import LoopBackEnd, LoopWorker
from pluto.navigation.slam.compressed import AreaParams, CompressedWallEKF
from pluto.navigation.slam.core import SlamFilter, WallSlam
from pluto.navigation.slam.ekf import WallEKF
from pluto.navigation.slam.loops import LoopParams
from pluto.navigation.slam.mapfile import save_map
from pluto.navigation.slam.scanmatch import (
    ScanMatcher,
    ScanMatchParams,
    laser_increment_covariance,
    robot_increment_covariance,
    scan_points,
)
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.persist import Continuation, clock_run
from pluto.runtime.ranges import Rate, between

__all__ = [
    "DEFAULT_MAP_NAME",
    "SAVE",
    "SAVE_FAILED",
    "SAVING",
    "SETTER",
    "SETTER_SAVING",
    "SlamModule",
    "SlamModuleParams",
]

SETTER = 2
"""The slam module's setter on ``Localization/Post_Pose``."""

SETTER_SAVING = 3
"""The setter while the map is being saved."""

SAVE = 2
"""element[1] of a client's ``slam/status`` that asks for the map to be saved."""

SAVING = -1
"""element[1] while the map is being saved."""

SAVE_FAILED = 1
"""element[1] after a save that failed (0 after one that succeeded)."""

DEFAULT_MAP_NAME = "slam-map.xml"
"""The map file's name in the runtime folder when ``map_file`` is not given."""

_Array = npt.NDArray[np.float64]


class SlamModuleParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    map_file: where the map is saved; empty: ``slam-map.xml`` in the robot's runtime folder.
    map_name: the name of the saved world.
    scan: the laser interface to read.
    range_sigma: std dev of a range reading, m (line fits and their covariances).
    initial_std: std dev (m) added to the position taken from localization at the first scan: it sets how
        uncertain the map's frame is, and so the walls' uncertainty in the saved map.
    initial_heading_std: the same for the heading, rad.
    max_tilt: a scan taken with the wrist tilted more than this (rad) does not cut the walls level: it only moves
        the filter with the dead reckoning.
    compressed: use the compressed filter (its cost follows the walls near the robot; the same estimate as the
        full one, which is kept for checks).
    area_radius: walls within this distance of the local area's centre are in the area, m (compressed filter).
    area_switch: the area is chosen again when the laser is farther than this from its centre, m.
    confirm: sightings of a new line before it becomes a wall.
    min_wall_length: shorter lines do not start new walls, m.
    max_range: walls farther than this from the laser are not matched, m.
    filter: the pose filter's settings used for the odometry's noise and the gate.
    scan_match: refine the dead reckoning's motion between scans by registering each scan on the last ones
        (:mod:`pluto.navigation.slam.scanmatch`); false: the filter moves by the dead reckoning alone.
    loop_closing: keep keyframes, close loops and optimise a pose graph of them on a thread of its own, and move the
        walls and the pose to the optimised trajectory between two scans (:mod:`pluto.navigation.slam.loops`,
        :mod:`pluto.navigation.slam.backend`); false: the filter alone.
    """

    rate_hz: Rate = 20.0
    use_sim_time: bool = True
    autostart: bool = False
    map_file: str = ""
    map_name: str = "slam"
    scan: str = names.SICK_SCAN_MM.name
    range_sigma: Annotated[float, between(0.0, 1.0, open_low=True)] = 0.01
    initial_std: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.01
    initial_heading_std: Annotated[float, between(0.0, math.pi, open_low=True)] = math.radians(0.2)
    max_tilt: Annotated[float, between(0.0, math.pi / 2)] = math.radians(3.0)
    compressed: bool = True
    area_radius: Annotated[float, between(0.0, 1000.0, open_low=True)] = 12.0
    area_switch: Annotated[float, between(0.0, 1000.0, open_low=True)] = 4.0
    confirm: Annotated[int, between(1, 1000)] = 3
    min_wall_length: Annotated[float, between(0.0, 100.0)] = 0.6
    max_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 30.0
    filter: PoseFilterParams = msgspec.field(default_factory=PoseFilterParams)
    scan_match: bool = True
    loop_closing: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.map_name.strip():
            raise ValueError("map_name must not be empty")
        self.area()  # checks the area's settings
        self.association()  # and the association's

    def area(self) -> AreaParams:
        """The compressed filter's local area."""
        return AreaParams(radius=self.area_radius, switch_distance=self.area_switch)

    def association(self) -> AssociationParams:
        """The data association's settings (the gate is the pose filter's)."""
        return AssociationParams(
            gate=self.filter.gate,
            max_range=self.max_range,
            confirm=self.confirm,
            min_length=self.min_wall_length,
        )


class SlamState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted slam module continues from.

    Attributes:
        running: the thread was running.
        walls: walls in the map being built.
        scans_used: scans the map was built from.
        saves: maps saved so far, saved_walls: walls in the last one saved (-1: none saved).
        pose: the laser pose (x, y, θ) of the last scan, m and rad (empty before the first).
    """

    running: bool
    walls: int = 0
    scans_used: int = 0
    saves: int = 0
    saved_walls: int = -1
    pose: list[float] = msgspec.field(default_factory=list)


class SlamModule(Module[SlamModuleParams]):
    """A map of walls built with a filter that corrects the laser pose; posts it to localization with setter 2."""

    name = "slam"
    description = "slam module: a map of walls from the laser while the pose is corrected; saves the map file"
    provides = (names.SLAM_STATUS,)
    requires = ("localization", "sick")
    Params = SlamModuleParams

    def on_configure(self) -> None:
        p = self.params
        if p.scan_match:
            kernels.warm("slam", self.get_logger())  # the scan matcher's compiled kernels now, before the first scan
        self._start_again = False
        self.map_path = self._map_path()
        self.slam: WallSlam | None = None
        self.matcher: ScanMatcher | None = None
        self.backend: LoopBackEnd | None = None
        self.worker: LoopWorker | None = None
        self.closures_applied = 0
        self.scans_used = 0
        self.posts = 0
        self.saves = 0
        self.tilted = 0
        self.matched = 0
        self.save_code = 0
        self.saved_walls: int | None = None
        self._work = threading.Lock()  # the map: the step, a save and the services
        self._lock_q = threading.Lock()  # the queues and the requests
        self._save_requested = False
        self._restart = False
        self.post = self.create_publisher(names.LOCALIZATION_POST_POSE)
        self.status = self.create_publisher(names.SLAM_STATUS)
        self.inputs = ScanInputs(self, p.scan)
        # every value, not only the newest: the module's own status writes must not hide a client's request
        self.create_subscription(names.SLAM_STATUS, self._on_status, depth=16)
        self.create_service("map", self._srv_map)
        self.get_logger().info("the map will be saved to %s", self.map_path)
        self.map_lost = False  # element[5]
        self.continuation = Continuation.of(self, SlamState)
        self._start_again = self.continuation.resume and self._continue()
        self._write_status(0.0)

    def start(self) -> None:
        super().start()
        if self._start_again:  # the crashed instance's thread was running
            self._start_again = False
            self.start_activity()

    # -- continuing after a restart ---------------------------------------------------------------------------

    @property
    def progress(self) -> SlamState:
        """What a restarted module would go on from now: whether its thread runs, the map's walls, the scans used,
        the saves and the pose."""
        with self._work:
            return self._state(self.active)

    def _state(self, running: bool) -> SlamState:
        slam = self.slam
        return SlamState(
            running=running,
            walls=0 if slam is None else slam.segments.active_count,
            scans_used=self.scans_used,
            saves=self.saves,
            saved_walls=-1 if self.saved_walls is None else self.saved_walls,
            pose=[] if slam is None or self.scans_used == 0 else [float(v) for v in slam.filter.pose],
        )

    def _save_state(self, running: bool) -> None:
        self.continuation.save(self._state(running), self.clock.now(), clock_run(self.clock))

    def _continue(self) -> bool:
        """A restart: say what the crashed instance's map was and that it is lost; True if its thread ran.

        Loaded while configuring, before the clock's time and run are known: the supervised session is the guard.
        """
        log = self.get_logger()
        loaded = self.continuation.load(None, None)
        self.map_lost = True
        if loaded is None:
            log.warning(
                "restarted without a saved state: the map the crashed instance was building, if any, is lost, and "
                "its thread is not started again (start it with pluto slam start)"
            )
            return False
        state, stamp = loaded
        self.map_lost = state.scans_used > 0
        self.saves = state.saves
        self.saved_walls = state.saved_walls if state.saved_walls >= 0 else None
        where = "" if len(state.pose) < 3 else f", last at laser pose ({state.pose[0]:.2f}, {state.pose[1]:.2f})"
        saved = (
            f"the last map saved ({state.saved_walls} walls) stays in {self.map_path} until the next save"
            if state.saved_walls >= 0
            else "no map was saved"
        )
        log.warning(
            "restarted: the map the crashed instance was building (%d walls from %d scans, t=%.3f s%s) is lost; %s; "
            "a new map starts at the first scan from localization's corrected laser pose%s",
            state.walls,
            state.scans_used,
            stamp,
            where,
            saved,
            "; its thread was running: started again" if state.running else "",
        )
        return state.running

    def _map_path(self) -> Path:
        if self.params.map_file:
            return Path(self.params.map_file).expanduser().absolute()
        from pluto.runtime.launcher import runtime_dir

        return runtime_dir(self.bus.robot) / DEFAULT_MAP_NAME

    def _new_filter(self, pose: tuple[float, float, float], covariance: np.ndarray) -> SlamFilter:
        p = self.params
        if p.compressed:
            return CompressedWallEKF(pose, covariance, area=p.area(), params=p.filter)
        return WallEKF(pose, covariance, params=p.filter)

    def _on_status(self, status: msgs.FVectorState) -> None:
        if len(status.element) > 1 and status.element[1] == SAVE:
            if self.active:
                with self._lock_q:
                    self._save_requested = True  # the step saves, between two scans
            else:
                self.save(self.clock.now())  # no step to do it: at once

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def on_activate(self) -> None:
        # what came while stopped is not used: the dead reckoning carries the pose over the gap
        self.inputs.clear()
        with self._work:
            if self.matcher is not None:
                self.matcher.reset()  # the scans before the gap are no reference for the first one after it
            self._save_state(running=True)
        self._write_status(self.clock.now(), running=True)

    def on_deactivate(self) -> None:
        # the setter goes 3 while saving, then 0: nobody improves the pose any more, the service keeps its last
        # correction
        self.save(self.clock.now(), setter=0)
        with self._work:
            self._save_state(running=False)

    def on_shutdown(self) -> None:
        with self._work:
            self._stop_loop_closing()
        super().on_shutdown()

    def _stop_loop_closing(self) -> None:
        """Stop the back end's thread (the map it served is gone or the module stops)."""
        if self.worker is not None:
            self.worker.stop()
        self.worker = None
        self.backend = None

    def _on_loop_error(self, err: BaseException) -> None:
        self.get_logger().error(
            "loop closing stopped (%s: %s); the map goes on with the filter alone", type(err).__name__, err
        )

    def on_clock_jump(self, old: float, new: float) -> None:
        with self._lock_q:
            self._restart = True

    # -- saving ------------------------------------------------------------------------------------------------

    def save(self, now: float, *, setter: int | None = None) -> bool:
        """Save the map to :attr:`map_path`, element[1] = -1 meanwhile; returns whether it was saved.

        Args:
            now: the time of the status, s.
            setter: while the thread sets the pose, the setter to show once saved (2 while running, 0 when
                stopping): it is 3 while saving. None: the thread is stopped, the setter is someone else's.

        A module that has no map yet (no scan used) writes none: an empty map would replace a good one.
        """
        with self._work:
            slam = self.slam
            self.save_code = SAVING
            self._write_status(now)
            if setter is not None:
                self.post.write(msgs.PoseEstimate(stamp=0.0, pose=[], cmd_flags=SETTER_SAVING))
            ok = False
            if slam is None:
                self.get_logger().info("no map yet (no scan used): nothing saved to %s", self.map_path)
                ok = True
            else:
                try:
                    if self.backend is not None:
                        self.backend.tidy()  # every wall checked for its copies across closed loops
                    stamp = datetime.datetime.now(datetime.UTC).astimezone().isoformat(timespec="seconds")
                    path, walls = save_map(
                        slam,
                        self.map_path,
                        name=self.params.map_name,
                        description=f"Made by the slam module of robot {self.bus.robot} on {stamp}.",
                    )
                except (OSError, ValueError) as err:
                    self.get_logger().error("the map could not be saved to %s: %s", self.map_path, err)
                else:
                    ok = True
                    self.saves += 1
                    self.saved_walls = walls
                    self.get_logger().info("map saved to %s: %d walls", path, walls)
            self.save_code = 0 if ok else SAVE_FAILED
            if setter is not None:  # an empty pose: only the setter changes
                self.post.write(msgs.PoseEstimate(stamp=0.0, pose=[], cmd_flags=setter))
            self._write_status(now)
            return ok

    def _srv_map(self, _request: Any) -> dict[str, Any]:
        with self._work:
            walls = 0 if self.slam is None else self.slam.segments.active_count
        return {"path": str(self.map_path), "walls": walls, "saved_walls": self.saved_walls, "saves": self.saves}

    # -- the step ----------------------------------------------------------------------------------------------

    def step(self, now: float) -> None:
        with self._lock_q:
            restart, self._restart = self._restart, False
            save, self._save_requested = self._save_requested, False
        if restart:
            self.inputs.clear(new_run=True)
        pairs = self.inputs.take()
        if restart and self.slam is not None:
            self.get_logger().warning("a new run (the time went back): the map starts again, unsaved")
            with self._work:
                self.slam = None
                self.matcher = None
                self._stop_loop_closing()
        with self._work:
            for t, scan, dr, corrected in pairs:
                post = self._process(t, scan, dr, corrected)
                if post is not None:
                    self.post.write(post)
                    self.posts += 1
        if save:
            self.save(now, setter=SETTER)
        if pairs:
            with self._work:
                self.continuation.save_due(lambda: self._state(True), now, clock_run(self.clock))
        self._write_status(now)

    def process_scan(
        self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None
    ) -> msgs.PoseEstimate | None:
        """One scan at ``t`` (s) with its dead-reckoned laser pose and the corrected one (None if none came), as the
        step takes it, while the step may run: the post for ``Localization/Post_Pose`` (not written), or None."""
        with self._work:
            return self._process(t, scan, dr, corrected)

    def _process(
        self, t: float, scan: msgs.LaserScan, dr: msgs.PoseEstimate, corrected: msgs.PoseEstimate | None
    ) -> msgs.PoseEstimate | None:
        """One scan: the post for ``Localization/Post_Pose``, or None (no map yet and no corrected pose)."""
        if len(dr.pose) not in (6, 8):
            return None  # not a laser pose
        slam = self.slam
        if slam is None:
            if corrected is None or len(corrected.pose) not in (6, 8):
                return None  # wait for a scan whose corrected laser pose came too: it places the map
            slam = self._start_map(corrected)
        tilted = len(dr.pose) >= 8 and abs(dr.pose[7]) > self.params.max_tilt
        if tilted:
            self.tilted += 1  # the laser looks up or down: its lines are not the walls' (the wrist's active scanning)
            features = []
        else:
            features = extract_lines(
                scan.ranges, scan.angles, max_range=scan.max_range, range_sigma=self.params.range_sigma
            )
        self._apply_newest_correction()
        pose, covariance, laser, laser_increment, points = self._front_end(scan, dr, tilted)
        step = slam.step(pose, covariance, features)
        if self.backend is not None and self.worker is not None:
            keyframe = self.backend.observe(step, laser, laser_increment, points)
            if keyframe is not None:
                self.worker.submit(keyframe)  # searched and optimised on the worker's thread
        self.scans_used += 1
        self.matched = len(step.pairs)
        out = [float(v) for v in dr.pose]
        out[0], out[1], out[3] = step.pose
        return msgs.PoseEstimate(
            stamp=t,
            pose=out,
            covariance=[float(v) for v in step.covariance.ravel()],
            cmd_flags=SETTER,
        )

    def _start_map(self, corrected: msgs.PoseEstimate) -> WallSlam:
        """The map placed at the corrected laser pose (its covariance plus the initial floor), with the front end
        and the loop-closing back end the parameters ask for."""
        p = self.params
        cov = (
            np.array(corrected.covariance, dtype=float).reshape(3, 3)
            if len(corrected.covariance) == 9
            else np.zeros((3, 3))
        )
        floor = np.diag([p.initial_std**2, p.initial_std**2, p.initial_heading_std**2])
        start = (float(corrected.pose[0]), float(corrected.pose[1]), float(corrected.pose[3]))
        slam = self.slam = WallSlam(self._new_filter(start, cov + floor), p.association())
        self.matcher = ScanMatcher() if p.scan_match else None
        if p.loop_closing:
            # The chain of keyframes follows the filter's motion here, as before the offline runs changed: on
            # the live robot the front end has no points from the scans the wrist tilts, so its motion there is
            # the dead reckoning's, whose drift the chain took in (the room's saved map came out off its walls).
            self.backend = LoopBackEnd(slam, LoopParams(), front_end=False)
            self.worker = LoopWorker(self.backend.params, on_error=self._on_loop_error, name="slam-loops")
        self.get_logger().info(
            "the map starts at laser pose (%.2f, %.2f, %.1f°)", start[0], start[1], math.degrees(start[2])
        )
        return slam

    def _apply_newest_correction(self) -> None:
        """The loop-closing worker's newest optimisation applied to the map, if one finished since the last scan."""
        if self.backend is not None and self.worker is not None:
            correction = self.worker.poll()
            if correction is not None:
                self.backend.apply(correction)
                self.closures_applied = correction.closures

    def _front_end(
        self, scan: msgs.LaserScan, dr: msgs.PoseEstimate, tilted: bool
    ) -> tuple[list[float], _Array, tuple[float, float, float], _Array, _Array]:
        """The robot pose and increment covariance the filter moves by (the dead reckoning's, refined by the
        scan-matching front end when it runs), the laser's pose and increment covariance the back end's chain
        takes, and the scan's points (none for a tilted scan or when neither end needs them)."""
        pose, covariance = list(dr.pose), np.array(dr.covariance, dtype=float)
        laser = (float(dr.pose[0]), float(dr.pose[1]), float(dr.pose[3]))
        laser_increment = np.zeros((3, 3))
        points = np.zeros((0, 2))
        if covariance.size == 9 and (self.matcher is not None or self.backend is not None):
            pan = float(dr.pose[6]) if len(dr.pose) >= 8 else 0.0
            laser_increment = laser_increment_covariance(covariance, self.params.filter.laser_mount, laser[2] - pan)
            if not tilted:
                points = scan_points(scan.ranges, scan.angles, scan.max_range, ScanMatchParams())
        if self.matcher is not None and covariance.size == 9:
            # the front end works on the laser's motion: the robot's increment covariance is carried to the laser
            # by the mount's lever, and the refined one back, so the filter's predict takes it as it takes the
            # dead reckoning's
            mount, pan = self.params.filter.laser_mount, (float(dr.pose[6]) if len(dr.pose) >= 8 else 0.0)
            front = self.matcher.step(laser, laser_increment, points)
            pose[0], pose[1], pose[3] = front.pose
            covariance = robot_increment_covariance(front.covariance, mount, front.pose[2] - pan)
            laser, laser_increment = front.pose, front.covariance
        return pose, covariance, laser, laser_increment, points

    def _write_status(self, now: float, running: bool | None = None) -> None:
        slam = self.slam
        walls = 0 if slam is None else slam.segments.active_count
        pose = [] if slam is None or self.scans_used == 0 else [float(v) for v in slam.filter.pose]
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=pose,
                element=[
                    int(self.active if running is None else running),
                    self.save_code,
                    walls,
                    self.matched,
                    self.saves,
                    -1 if self.map_lost else 0,
                ],
            )
        )

    def notes(self) -> list[str]:
        slam = self.slam
        saved = (
            "not saved yet" if self.saved_walls is None else f"saved {self.saves}x, last with {self.saved_walls} walls"
        )
        if slam is None:
            return [f"map file {self.map_path} ({saved}); no scan used yet"]
        walls = slam.segments.active_count
        sx, sy = (math.sqrt(max(v, 0.0)) for v in np.diag(slam.filter.pose_covariance)[:2])
        notes = [
            f"map file {self.map_path} ({saved})",
            f"{walls} walls; scans used {self.scans_used}, posts {self.posts}, tilted {self.tilted}; last scan: "
            f"{self.matched} walls matched; position σ ({sx:.3f}, {sy:.3f}) m",
        ]
        if self.backend is not None:
            notes.append(
                f"loop closing: {self.backend.keyframes} keyframes, {self.closures_applied} closures in the last "
                f"correction applied ({self.backend.corrections} corrections), {self.backend.merged} walls merged"
            )
        return notes
