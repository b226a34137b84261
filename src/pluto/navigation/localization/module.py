"""The localization service on the bus (the original's localModule: docs/design.md, "Interfaces").

Reads ``Base/Drive/State`` (required), ``DMU/State``, ``Wrist/State`` and ``Sick/Timing`` (optional) and
``Localization/Post_Pose``; writes the five pose interfaces and ``localization/status``
(FVectorState: data = [dead-reckoning age s, inertial age s], element = [setter, inertial unit ok 1/0]).

A post that cannot be applied (a pose that is not 3-, 6- or 8-D and finite, a covariance that cannot be one:
negative variances, asymmetric, not positive semi-definite) is refused whole, logged, counted (``refused_posts``,
shown by ``pluto mom``), and changes nothing, not even the setter; the service goes on.

Subscriptions only queue what arrives (they run on the bus's threads); the control step drains the queues into the
pure core in stamp order and writes the results, so the core never sees two threads.

The inputs are fused by their stamps, so late or bunched messages change nothing: an odometry sample waits in the
core for the inertial state at or after its stamp, and a pose (interfaces 0 and 3) goes out in the step in which
odometry steps are integrated. Without the inertial unit (absent, or stopped) the odometry goes on alone once it is
``model.dmu_wait`` ahead of the newest inertial state, in stamps; a scan likewise waits for the wrist's angles at its
centre time. If the odometry itself stops (the end of a replay) while samples still wait, they are integrated with
what there is after ``flush_wait``.

Restarts: the service saves its newest estimate as it goes (the dead reckoning's step with the base's raw odometry
of its stamp, and the posted correction; :mod:`pluto.runtime.persist`). Started again by the supervisor after a
crash, it continues from that estimate, never from the start pose: the pose is the saved one composed with the
odometry's motion since, its covariance widened for the time lost (``model.resume_*``), and the log says so. A base
whose odometry starts again is seen as a reset (see :mod:`pluto.navigation.localization.core`): the pose is kept.
"""

from __future__ import annotations

import json
import math
import threading
import tomllib
from pathlib import Path
from typing import Annotated, Any

import msgspec

from pluto import msgs, names
from pluto.errors import ConfigError
from pluto.limits import LimitError, check_number
from pluto.navigation.localization.core import (
    DeadReckoning,
    DeadReckoningState,
    LocalizationParams,
    PoseAdjustment,
    flat,
)
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.persist import Continuation, clock_run
from pluto.runtime.ranges import Rate, between
from pluto.sim.module import fetch_settings

STATUS = names.LOCALIZATION_STATUS


class LocalizationModuleParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    start_pose_file: TOML or JSON file with ``x``, ``y`` (m), ``theta`` (rad) and optionally ``z``, ``phi``,
        ``psi``; empty: ``start_pose``.
    start_pose: the starting pose in the profile itself, ``[x, y, theta]`` (m, m, rad), when there is no
        ``start_pose_file``; empty: the origin (where a robot's odometry starts), or the simulated world's start.
    start_from_sim: with neither of the two above, start where the simulated robot starts: the start pose of the
        ``sim`` module's world (the ``sim`` and ``mission`` profiles; in a simulation of several robots, this
        robot's place in it), so the estimate is in the world's frame.
    model: the dead reckoning's noise model and laser mount. The service waits up to 2 s of stamps for a late
        inertial unit (``dmu_wait``; a busy computer delays its messages, and a heading extrapolated over a turn
        stays wrong), then goes on without it.
    scan_wait: how long a scan waits for odometry to arrive past its centre time before it is dropped, s (once it
        has, the scan waits for its fusion, which the waits for the inertial unit and the wrist bound).
    flush_wait: how long after the last odometry message (module clock, s) odometry samples still waiting for the
        inertial unit are integrated without it.
    """

    rate_hz: Rate = 20.0
    start_pose_file: str = ""
    start_pose: list[Annotated[float, between(-1e5, 1e5)]] = msgspec.field(default_factory=list)
    start_from_sim: bool = False
    model: LocalizationParams = msgspec.field(default_factory=lambda: LocalizationParams(dmu_wait=2.0))
    scan_wait: Annotated[float, between(0.0, 60.0)] = 1.0
    flush_wait: Annotated[float, between(0.0, 60.0)] = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.start_pose and len(self.start_pose) != 3:
            raise ValueError(f"start_pose must be [x, y, theta] (or empty), got {self.start_pose}")

    def initial_pose(self) -> tuple[float, float, float, float, float, float]:
        """The starting pose (x, y, z, θ, φ, ψ): from ``start_pose_file``, else ``start_pose``, else the origin.

        Raises:
            ConfigError: the file is missing or malformed.
        """
        if self.start_pose_file or not self.start_pose:
            return read_start_pose(self.start_pose_file)
        x, y, theta = self.start_pose
        return (x, y, 0.0, theta, 0.0, 0.0)


def read_start_pose(path: str) -> tuple[float, float, float, float, float, float]:
    """The starting pose (x, y, z, θ, φ, ψ) from a TOML or JSON file; the origin if ``path`` is empty.

    Raises:
        ConfigError: the file is missing, malformed, or holds a value that is not a finite number.
    """
    if not path:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    file = Path(path)
    try:
        text = file.read_text()
        data: Any = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as err:
        raise ConfigError(f"start pose file {path}: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"start pose file {path}: expected a table of x, y, theta")
    values = []
    for key in ("x", "y", "z", "theta", "phi", "psi"):
        value = data.get(key, 0.0)
        try:
            values.append(check_number(key, value, 1e6))
        except LimitError as err:
            raise ConfigError(f"start pose file {path}: {err}") from None
    return (values[0], values[1], values[2], values[3], values[4], values[5])


class LocalizationState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted localization service continues from.

    Attributes:
        dead_reckoning: the newest step, with the base's raw odometry of its stamp.
        setter, dx, dy, alpha, posts: the posted correction (:class:`PoseAdjustment`).
    """

    dead_reckoning: DeadReckoningState
    setter: int = 0
    dx: float = 0.0
    dy: float = 0.0
    alpha: float = 0.0
    posts: int = 0


class LocalizationModule(Module[LocalizationModuleParams]):
    """The localization service: dead reckoning and the five pose interfaces."""

    name = "localization"
    description = "localization service: dead reckoning, laser poses at scan time, posted pose adjustment"
    provides = names.LOCALIZATION_INTERFACES
    requires = ("base",)
    Params = LocalizationModuleParams

    def on_configure(self) -> None:
        p = self.params
        self._start_pose = p.initial_pose()  # kept for a restarted simulation (the world stays)
        if p.start_from_sim and not (p.start_pose_file or p.start_pose):
            settings = fetch_settings(self.bus)
            x, y, theta = settings.start_pose(settings.load_world())
            self._start_pose = (x, y, 0.0, theta, 0.0, 0.0)
            self.get_logger().info(f"starting at the simulated world's start: ({x:.3f}, {y:.3f}) m, {theta:.3f} rad")
        self.core = DeadReckoning(p.model, self._start_pose)
        self.adjustment = PoseAdjustment()
        self._queue: list[tuple[int, float, msgs.Message]] = []
        self._queue_lock = threading.Lock()
        self._restart = False
        self._scans: list[float] = []
        self._seq = 0
        out = names.LOCALIZATION_INTERFACES
        self.dead_reckoning = self.create_publisher(out[0], msgs.PoseEstimate)
        self.laser_dead_reckoning = self.create_publisher(out[1], msgs.PoseEstimate)
        self.post_out = self.create_publisher(out[2], msgs.PoseEstimate)
        self.pose_out = self.create_publisher(out[3], msgs.PoseEstimate)
        self.laser_pose_out = self.create_publisher(out[4], msgs.PoseEstimate)
        self.status = self.create_publisher(STATUS, msgs.FVectorState)
        self.continuation = Continuation.of(self, LocalizationState)
        self._resume = self.continuation.resume  # at the first step, when the clock's time and run are known
        if not self._resume:
            self.post_out.write(msgs.PoseEstimate(pose=[], cmd_flags=0))  # nobody sets the pose yet
        self._inputs: tuple[tuple[str, type[msgs.Message]], ...] = (
            (names.LOCALIZATION_INTERFACES[2], msgs.PoseEstimate),
            (names.DMU_STATE, msgs.DmuState),
            (names.WRIST_STATE, msgs.ActuatorState),
            (names.BASE_DRIVE_STATE, msgs.Odometry),
            (names.SICK_TIMING, msgs.ScanTiming),
        )
        for order, (name, cls) in enumerate(self._inputs):
            self.create_subscription(name, self._enqueuer(order), cls, depth=1024)
        self._published_laser = False
        self._odometry_arrived: float | None = None  # module clock at the newest odometry message, s
        self.errors = 0
        self.refused_posts = 0
        """Posts on ``Localization/Post_Pose`` refused (a pose or covariance that cannot be one); counted in
        :attr:`errors` too."""
        self._refusal = ""
        self._resumed_from: DeadReckoningState | None = None  # logged once the odometry since is integrated
        self._resets_logged = 0

    @property
    def queued(self) -> dict[str, int]:
        """The inputs heard and not taken yet (the next step takes them), by interface."""
        with self._queue_lock:
            orders = [order for order, _stamp, _message in self._queue]
        return {str(name): orders.count(i) for i, (name, _cls) in enumerate(self._inputs) if i in orders}

    def _enqueuer(self, order: int) -> Any:
        def enqueue(message: msgs.Message) -> None:
            with self._queue_lock:
                self._queue.append((order, getattr(message, "stamp", 0.0), message))

        return enqueue

    def on_clock_jump(self, old: float, new: float) -> None:
        # A new run: odometry starts again from its beginning, which the old history would refuse as late.
        with self._queue_lock:
            self._restart = True
            self._queue = []  # the old run's

    def _start_again(self) -> None:
        """Forget the old run: dead reckoning from the start pose, no posted correction, nothing queued."""
        p = self.params_()
        self.core = DeadReckoning(p.model, self._start_pose if p.start_from_sim else p.initial_pose())
        self.adjustment = PoseAdjustment()
        self._scans = []
        self._published_laser = False
        self._odometry_arrived = None
        self.get_logger().info("simulated time restarted: dead reckoning starts again from the start pose")

    def step(self, now: float) -> None:
        batch = self._drain(now)
        integrated = self.core.latest_stamp
        self._take_all(batch, now)
        if not self.core.started:
            return
        self._report_continuity()
        if self.core.latest_stamp != integrated:
            self._publish_robot()
            self.continuation.save_due(self._state, self.core.latest_stamp, clock_run(self.clock))
        self._publish_scans(now)
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=[max(0.0, now - self.core.latest_stamp), self.core.dmu_age(now)],
                element=[
                    self.adjustment.setter,
                    int(self.core.dmu_ok and self.core.dmu_age(now) <= self.core.params.dmu_timeout),
                ],
            )
        )

    def _drain(self, now: float) -> list[tuple[int, float, msgs.Message]]:
        """Start again after a clock jump, or continue after a restart, as due; then the queued messages, in the
        order the core takes them."""
        with self._queue_lock:
            restart, self._restart = self._restart, False
            if restart:  # values of the old run still on their way when time jumped carry its later stamps
                self._queue = [item for item in self._queue if item[1] <= now + 1.0]
        if restart:
            self._start_again()
        if self._resume:
            self._resume = False
            self._continue(now)
        with self._queue_lock:
            batch, self._queue = self._queue, []
        # inertial and wrist data first, then odometry, each in stamp order; posts and scans after (the core fuses
        # by stamp whatever the order: this only keeps odometry from waiting for inertial data in the same batch)
        batch.sort(key=lambda item: (item[0] in (0, 4), item[1], item[0]))
        return batch

    def _take_all(self, batch: list[tuple[int, float, msgs.Message]], now: float) -> None:
        """Give the core every message of ``batch``; a bad one is counted and logged. Flush the samples still
        waiting if the odometry stopped."""
        for _order, _stamp, message in batch:
            if isinstance(message, msgs.Odometry):
                self._odometry_arrived = now
            try:
                self._take(message)
            except (ValueError, LookupError) as err:
                self.errors += 1
                self.get_logger().warning("dropped %s: %s", type(message).__name__, err)
        arrived = self._odometry_arrived
        if self.core.waiting and arrived is not None and now - arrived > self.params_().flush_wait:
            self.core.flush()  # the odometry stopped: nothing more will settle the samples still waiting

    def _publish_scans(self, now: float) -> None:
        """Write interfaces 1 and 4 for each scan whose time the fused odometry has reached (the oldest step's once
        at the start); a scan waits while its odometry may still come."""
        if not self._published_laser:
            # so that interfaces 1 and 4 hold a value from the start; at the oldest step, not the newest, as the first
            # steps may come all at once (after the wait for an absent inertial unit) and scans among them still come
            self._publish_laser(self.core.earliest_stamp)
        self._scans.sort()
        while self._scans:
            t = self._scans[0]
            try:
                done = self._publish_laser(t)
            except LookupError:
                done = True  # out of order or too old: counted in the core
            if not done:
                if self.core.received_stamp >= t or now - t <= self.params_().scan_wait:
                    # wait for the fused odometry (and the wrist) to reach the scan's centre time; odometry received
                    # past it is fused in the end (the core bounds its waits for the inertial unit and the wrist)
                    break
                self.errors += 1  # odometry stopped: the scan cannot be placed
            self._scans.pop(0)

    # -- continuing after a restart ---------------------------------------------------------------------------

    def _state(self) -> LocalizationState:
        snapshot = self.core.snapshot()
        assert snapshot is not None  # saved only once the core has started
        a = self.adjustment
        return LocalizationState(
            dead_reckoning=snapshot, setter=a.setter, dx=a.dx, dy=a.dy, alpha=a.alpha, posts=a.posts
        )

    def _continue(self, now: float) -> None:
        """A restart: continue from the estimate the crashed instance saved, if there is a usable one."""
        loaded = self.continuation.load(now, clock_run(self.clock))
        if loaded is None:
            self.get_logger().warning(
                "restarted without a saved estimate to continue from: dead reckoning starts at the start pose"
            )
            self.post_out.write(msgs.PoseEstimate(pose=[], cmd_flags=0))  # nobody sets the pose yet
            return
        state, stamp = loaded
        core = DeadReckoning(self.params_().model, self._start_pose)
        try:
            core.resume(state.dead_reckoning)
        except ValueError as err:
            self.continuation.corrupt += 1
            self.get_logger().error("restarted, but the saved estimate is unusable (%s): starting fresh", err)
            self.post_out.write(msgs.PoseEstimate(pose=[], cmd_flags=0))
            return
        self.core = core
        self.adjustment = PoseAdjustment(state.setter, state.dx, state.dy, state.alpha, state.posts)
        self._resumed_from = state.dead_reckoning
        # the setter in force goes on (an empty post changes only the setter)
        self.post_out.write(msgs.PoseEstimate(pose=[], cmd_flags=state.setter))
        pose = self.adjustment.apply(state.dead_reckoning.pose)
        self.get_logger().warning(
            "restarted: resumed from the estimate of t=%.3f s, pose (%.3f, %.3f, %.1f°) (setter %d); the odometry "
            "since then (from its reading (%.3f, %.3f, %.1f°)) is composed onto it",
            stamp,
            pose[0],
            pose[1],
            math.degrees(pose[3]),
            state.setter,
            state.dead_reckoning.odometry[0],
            state.dead_reckoning.odometry[1],
            math.degrees(state.dead_reckoning.odometry[2]),
        )

    def _report_continuity(self) -> None:
        """Log the first step after a resume, and every odometry reset the core detected."""
        core = self.core
        saved = self._resumed_from
        if saved is not None and not core.resuming:
            self._resumed_from = None
            pose = core.pose()
            moved = math.hypot(pose.pose[0] - saved.pose[0], pose.pose[1] - saved.pose[1])
            std = math.sqrt(max(pose.absolute[0, 0], pose.absolute[1, 1], 0.0))
            self.get_logger().warning(
                "odometry since t=%.3f s integrated up to t=%.3f s: moved %.3f m and turned %.1f° meanwhile; "
                "position σ widened to %.3f m",
                saved.stamp,
                pose.stamp,
                moved,
                math.degrees(pose.pose[3] - saved.pose[3]),
                std,
            )
        resets = core.counters.odometry_resets
        if resets != self._resets_logged:
            self._resets_logged = resets
            self.get_logger().warning(
                "the base's odometry was reset (%d so far): pose kept at t=%.3f s, odometry re-anchored",
                resets,
                core.latest_stamp,
            )

    def on_shutdown(self) -> None:
        core = getattr(self, "core", None)  # None if the configuration failed
        if core is not None and core.started:
            self.continuation.save(self._state(), self.core.latest_stamp, clock_run(self.clock))

    def notes(self) -> list[str]:
        if not self.refused_posts:
            return []
        return [f"{self.refused_posts} posted poses refused; the last: {self._refusal}"]

    def params_(self) -> LocalizationModuleParams:
        p = self.params
        return p

    def _take(self, message: msgs.Message) -> None:
        core = self.core
        if isinstance(message, msgs.Odometry):
            core.add_odometry(message.stamp, message.x, message.y, message.theta)
        elif isinstance(message, msgs.DmuState):
            rate = message.rates[2] if len(message.rates) >= 3 else 0.0
            core.add_dmu(message.stamp, message.theta, message.phi, message.psi, rate)
        elif isinstance(message, msgs.ActuatorState):
            if len(message.position) >= 2:
                core.add_wrist(message.stamp, message.position[0], message.position[1])
        elif isinstance(message, msgs.ScanTiming):
            self._scans.append(message.stamp)
        elif isinstance(message, msgs.PoseEstimate):
            # a post stamped 0 holds for the newest odometry (a pose set by hand: "the robot is here now")
            stamp = message.stamp if message.stamp > 0.0 else math.inf
            try:
                self.adjustment.post(core, stamp, message.pose, message.cmd_flags, message.covariance)
            except ValueError as err:
                self.refused_posts += 1
                self._refusal = str(err)
                raise
            if core.started:
                self._publish_robot()  # the new correction, or just the new setter, shows on 3 at once

    def _publish_robot(self) -> None:
        pose = self.core.pose()
        setter = self.adjustment.setter
        self.dead_reckoning.write(
            msgs.PoseEstimate(stamp=pose.stamp, pose=list(pose.pose), covariance=flat(pose.covariance), cmd_flags=0)
        )
        self.pose_out.write(
            msgs.PoseEstimate(
                stamp=pose.stamp,
                pose=self.adjustment.apply(pose.pose),
                covariance=self.adjustment.covariance(pose.absolute),
                cmd_flags=setter,
            )
        )

    def _publish_laser(self, t: float) -> bool:
        """Write interfaces 1 and 4 for a scan at ``t``; False if odometry has not reached ``t`` yet."""
        laser = self.core.scan(t)
        if laser is None:
            return False
        self._published_laser = True
        self.laser_dead_reckoning.write(
            msgs.PoseEstimate(stamp=t, pose=list(laser.pose), covariance=flat(laser.increment), cmd_flags=0)
        )
        self.laser_pose_out.write(
            msgs.PoseEstimate(
                stamp=t,
                pose=self.adjustment.apply(laser.pose),
                covariance=self.adjustment.covariance(laser.absolute),
                cmd_flags=self.adjustment.setter,
            )
        )
        return True
