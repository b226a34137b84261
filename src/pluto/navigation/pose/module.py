"""The pose module (the original's poseModule, docs/design.md): walls in each laser scan matched to a map, in a Kalman
filter.

Reads ``Sick/Scan_mm`` and, for each scan, the localization service's ``Localization/Laser_Dead-Reckoning`` (the
laser and wrist pose at the scan's time, with the covariance of the odometry since the previous scan) and
``Localization/Laser_Pose`` (the same, corrected). Extracts the scan's lines, matches them to the map's walls and
updates an EKF of the laser pose (:mod:`pluto.navigation.pose.core`), then posts the improved laser pose on
``Localization/Post_Pose`` with setter (cmd_flags) 1; the service turns it into ``Localization/Pose``.

The thread starts active by default. On start it takes the pose from localization (interface 4 at the first scan);
on stop it posts the setter 0 (an empty pose). Setting the pose by hand follows the original: stop the thread, post a
robot pose with setter -1, wait for the service to show -1, start the thread (:meth:`PoseProxy.set_pose`).

``pose/status`` (FVectorState, command and status, as the original's):
    element[0]: the thread, 1 running, 0 stopped.
    element[1]: a client writes 2 to start "find wall"; the module writes -1 while searching, then the number of
        scan points of the longest wall in front (0 if there is none); data = (γ rad, ρ m) of that wall and its
        2x2 covariance, row-major.
    element[2]: 1 while the filter is lost (too few walls matched for too long, or too uncertain), else 0.
    element[3]: walls matched in the last scan.  element[4]: relocalizations so far.
A lost filter searches the whole map for the pose that explains the scan (a robot moved by hand); a clear answer
resets the filter and is logged and counted (element[4]), never a silent jump.

Restarts: the module saves its filter's state as it goes (:mod:`pluto.runtime.persist`; the pose, its covariance,
the dead-reckoned laser pose it was last moved to). Started again by the supervisor after a crash, it continues
from that state at its first scan instead of taking the pose from localization: widened for the time lost, moved by
the dead reckoning since, and searched for around that estimate if the scan does not match there (see
:mod:`pluto.navigation.pose.tracker`); the log says which. Without a usable state it says so and starts from
localization's corrected laser pose, which still holds the crashed instance's last correction.

Map: ``map`` names a world file or a shipped world (``office``, ``campus``): the same XML format as the simulator's
worlds and the SLAM module's saved maps; empty: the simulator's world (asked from ``sim``).
"""

from __future__ import annotations

import math
import threading

from pluto import kernels, msgs, names
from pluto.errors import ConfigError
from pluto.navigation.pose.inputs import ScanInputs
from pluto.navigation.pose.map import WallMap
from pluto.navigation.pose.tracker import (
    FIND_WALL,
    SEARCHING,
    SETTER,
    PoseModuleParams,
    PoseTracker,
    PoseTrackerState,
)
from pluto.runtime.module import Module
from pluto.runtime.persist import Continuation, clock_run

__all__ = ["FIND_WALL", "SEARCHING", "SETTER", "PoseModule", "PoseModuleParams"]


class PoseModule(Module[PoseModuleParams]):
    """Laser walls matched to a map in an EKF; posts the laser pose to localization with setter 1."""

    name = "pose"
    description = "pose module: laser walls matched to the map in a Kalman filter, posted to localization"
    provides = (names.POSE_STATUS,)
    requires = ("localization", "sick")
    Params = PoseModuleParams

    def on_configure(self) -> None:
        p = self.params
        kernels.warm("pose", self.get_logger())  # the compiled kernels now, before the first scan
        self.tracker = PoseTracker(self._load_map(p.map), p, self.get_logger())
        self._find_requested = False
        self._lock_q = threading.Lock()
        self._restart = False
        self.post = self.create_publisher(names.LOCALIZATION_POST_POSE)
        self.status = self.create_publisher(names.POSE_STATUS)
        self.inputs = ScanInputs(self, p.scan)
        # every value, not only the newest: the module's own status writes must not hide a client's request
        self.create_subscription(names.POSE_STATUS, self._on_status, depth=16)
        self.continuation = Continuation.of(self, PoseTrackerState)
        self._resume = self.continuation.resume  # at the first step, when the clock's time and run are known
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

    @property
    def find_wall_pending(self) -> bool:
        """A find wall request came (element[1] = FIND_WALL on ``pose/status``): the next step answers it."""
        with self._lock_q:
            return self._find_requested

    def _on_status(self, status: msgs.FVectorState) -> None:
        if len(status.element) > 1 and status.element[1] == FIND_WALL:
            with self._lock_q:
                self._find_requested = True

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def on_activate(self) -> None:
        self.tracker.restart()  # the pose comes from localization at the first scan

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
            restart, self._restart = self._restart, False
            find, self._find_requested = self._find_requested, False
        if restart:
            self.inputs.clear(new_run=True)
            self.tracker.restart()
        if self._resume:
            self._resume = False
            self._continue(now)
        pairs = self.inputs.take()
        if find:
            self.tracker.request_find_wall()
            self._write_status(now)  # -1 (searching) is seen before the answer, even one of this very step
        for t, scan, dr, corrected in pairs:
            post = self.tracker.process(t, scan, dr, corrected)
            if post is not None:
                self.post.write(post)
        if pairs and self.tracker.stamp is not None:
            self.continuation.save_due(self._state, self.tracker.stamp, clock_run(self.clock))
        self._write_status(now)

    # -- continuing after a restart ---------------------------------------------------------------------------

    def _state(self) -> PoseTrackerState:
        state = self.tracker.snapshot()
        assert state is not None  # saved only once the filter has taken a scan
        return state

    def _continue(self, now: float) -> None:
        """A restart: continue from the filter state the crashed instance saved, if there is a usable one."""
        loaded = self.continuation.load(now, clock_run(self.clock))
        if loaded is None:
            self.get_logger().warning(
                "restarted without a saved filter state: the filter starts from localization's corrected laser pose "
                "at the first scan (it holds the last correction posted)"
            )
            return
        state, stamp = loaded
        try:
            self.tracker.resume(state)
        except ValueError as err:
            self.continuation.corrupt += 1
            self.get_logger().error(
                "restarted, but the saved filter state is unusable (%s): starting from localization's laser pose", err
            )
            return
        x, y, theta = state.filter.pose
        self.get_logger().warning(
            "restarted: resuming the filter saved at t=%.3f s, laser at (%.3f, %.3f, %.1f°) (%d posts, %d "
            "relocalizations so far); it goes on at the first scan",
            stamp,
            x,
            y,
            math.degrees(theta),
            state.posts,
            state.relocalizations,
        )

    def on_shutdown(self) -> None:
        tracker = getattr(self, "tracker", None)  # None if the configuration failed
        if tracker is not None and tracker.stamp is not None and hasattr(self, "continuation"):
            self.continuation.save(self._state(), tracker.stamp, clock_run(self.clock))

    def _write_status(self, now: float) -> None:
        k = self.tracker
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=list(k.wall_data),
                element=[int(self.active), k.find_wall_code, int(k.lost), len(k.matched), k.relocalizations],
            )
        )

    def notes(self) -> list[str]:
        return self.tracker.notes()
