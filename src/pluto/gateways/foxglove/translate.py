"""Pluto's interfaces as Foxglove's well-known messages: the pure core shared by the live server and the recorder.

Strategy: Foxglove's 3-D panel draws what sits in a tree of coordinate frames, so the translation is mostly about
frames. The tree is the one ROS users know (REP 105)::

    map -> odom -> base_link -> laser

- ``odom -> base_link`` is the base's odometry (``Base/Drive/State``), at its stamps.
- ``map -> odom`` is what makes the robot's pose in the map come out right: the pose (``Localization/Pose``, or
  ``Sim/Truth`` while no localization writes one) composed with the inverse of the odometry of the same time (the
  newest odometry at or before the pose's stamp). Before any odometry arrives, ``map -> odom`` is the pose itself
  and ``odom -> base_link`` the identity, so every frame has one parent from the first message on (a viewer that
  saw ``map -> base_link`` first and ``odom -> base_link`` later would have two parents for ``base_link``). With
  ``map_pose="truth"`` the true pose alone places the robot: the map is then the simulated world's frame exactly,
  which a localization started without the world's start pose (``pluto up sim``) does not share.
- ``base_link -> laser`` is the laser's mount on the pan/tilt wrist (``Wrist/State`` turns it).

The laser scan (``Sick/Scan_mm``, every point, stamped at the centre of the scan) is a ``foxglove.LaserScan`` in the
``laser`` frame; the pose and the true pose are ``PoseInFrame`` in ``map``; the path of the pose is a
``PosesInFrame``; the world's walls are a ``SceneUpdate`` of boxes; log lines are ``foxglove.Log``. Every message is
stamped with the stamp of the Pluto message it comes from, and logged at that time, so a live view and a recording
agree with the robot's clock (the simulated one in simulation).

Several robots in one view (a simulation of several, robots sharing a network): each robot has a translator of its
own, made with its name (``robot``), whose frames are ``<robot>/odom``, ``<robot>/base_link`` and ``<robot>/laser``
under the one ``map``, and whose topics are ``/<robot>/scan``, ``/<robot>/pose``, ``/<robot>/truth`` and
``/<robot>/path`` (:func:`robot_topics`); ``/tf``, ``/map`` and ``/log`` are shared. Without a name, the frames and
topics are the lone robot's above.

Nothing here does I/O: :class:`FoxgloveTranslator` takes Pluto messages and returns Foxglove messages with their
topics and times; :mod:`.module` logs them to a WebSocket server and :mod:`pluto.record.recorder` to an MCAP file.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from foxglove.messages import (
    Color,
    CubePrimitive,
    FrameTransform,
    LaserScan,
    Log,
    LogLevel,
    Pose,
    PoseInFrame,
    PosesInFrame,
    Quaternion,
    SceneEntity,
    SceneUpdate,
    Timestamp,
    Vector3,
)

from pluto import msgs, names
from pluto.sim.world import World

__all__ = [
    "FOXGLOVE_TOPICS",
    "FRAME_BASE",
    "FRAME_LASER",
    "FRAME_MAP",
    "FRAME_ODOM",
    "INPUTS",
    "MAP_POSES",
    "TOPIC_LOG",
    "TOPIC_MAP",
    "TOPIC_PATH",
    "TOPIC_POSE",
    "TOPIC_SCAN",
    "TOPIC_TF",
    "TOPIC_TRUTH",
    "FoxgloveMessage",
    "FoxgloveTranslator",
    "Output",
    "log_message",
    "quaternion",
    "robot_topics",
    "timestamp",
    "walls_scene",
]

FRAME_MAP: Final = "map"
FRAME_ODOM: Final = "odom"
FRAME_BASE: Final = "base_link"
FRAME_LASER: Final = "laser"

TOPIC_SCAN: Final = "/scan"
TOPIC_TF: Final = "/tf"
TOPIC_POSE: Final = "/pose"
TOPIC_TRUTH: Final = "/truth"
TOPIC_PATH: Final = "/path"
TOPIC_MAP: Final = "/map"
TOPIC_LOG: Final = "/log"

FoxgloveMessage: TypeAlias = FrameTransform | LaserScan | Log | PoseInFrame | PosesInFrame | SceneUpdate
"""The Foxglove message types Pluto writes."""

FOXGLOVE_TOPICS: Final[dict[str, type[FoxgloveMessage]]] = {
    TOPIC_SCAN: LaserScan,
    TOPIC_TF: FrameTransform,
    TOPIC_POSE: PoseInFrame,
    TOPIC_TRUTH: PoseInFrame,
    TOPIC_PATH: PosesInFrame,
    TOPIC_MAP: SceneUpdate,
    TOPIC_LOG: Log,
}
"""Every Foxglove topic and the type of its messages (its schema is the type's ``get_schema()``)."""

ROBOT_TOPICS: Final = (TOPIC_SCAN, TOPIC_POSE, TOPIC_TRUTH, TOPIC_PATH)
"""The topics of each robot (under ``/<robot>`` when there are several); the others are shared."""


def robot_topics(robot: str) -> dict[str, type[FoxgloveMessage]]:
    """The topics of robot ``robot`` among several (``/<robot>/scan``, ...) and the type of their messages."""
    return {f"/{robot}{topic}": FOXGLOVE_TOPICS[topic] for topic in ROBOT_TOPICS}


MAP_POSES: Final = ("localization", "truth")
"""The poses that can place the robot in the map (see :class:`FoxgloveTranslator`)."""

INPUTS: Final = (
    names.SICK_SCAN_MM.name,
    names.BASE_DRIVE_STATE.name,
    names.LOCALIZATION_POSE.name,
    names.SIM_TRUTH.name,
    names.WRIST_STATE.name,
)
"""The Pluto interfaces :meth:`FoxgloveTranslator.feed` turns into Foxglove messages."""

_LEVELS: Final = ((40, LogLevel.Error), (30, LogLevel.Warning), (20, LogLevel.Info), (1, LogLevel.Debug))
_WALL_COLOR: Final = Color(r=0.55, g=0.6, b=0.7, a=0.8)


@dataclass(frozen=True)
class Output:
    """A Foxglove message to log: its topic, the message, its log time (s, the robot's clock), and what it is about
    within its topic (the child frame of a transform; "" for the others), for a viewer that thins a stream out.
    ``keep`` marks one a thinned stream must still send: it corrects a stand-in sent just before, and the next
    message about the same thing may be a long time coming."""

    topic: str
    message: FoxgloveMessage
    log_time: float
    about: str = ""
    keep: bool = False


def timestamp(t: float) -> Timestamp:
    """A Foxglove time stamp of ``t`` s (clamped at 0: Foxglove times are unsigned)."""
    ns = round(max(t, 0.0) * 1e9) if math.isfinite(t) else 0
    return Timestamp(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)


def quaternion(yaw: float, pitch: float = 0.0, roll: float = 0.0) -> Quaternion:
    """The rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` (Pluto's θ, φ, ψ; rad) as a unit quaternion."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    return Quaternion(
        x=cy * cp * sr - sy * sp * cr,
        y=cy * sp * cr + sy * cp * sr,
        z=sy * cp * cr - cy * sp * sr,
        w=cy * cp * cr + sy * sp * sr,
    )


def _pose(x: float, y: float, theta: float, z: float = 0.0) -> Pose:
    return Pose(position=Vector3(x=x, y=y, z=z), orientation=quaternion(theta))


def _pose_in_map(stamp: float, pose: tuple[float, float, float]) -> PoseInFrame:
    return PoseInFrame(timestamp=timestamp(stamp), frame_id=FRAME_MAP, pose=_pose(*pose))


def _transform(stamp: float, parent: str, child: str, x: float, y: float, theta: float) -> FrameTransform:
    return FrameTransform(
        timestamp=timestamp(stamp),
        parent_frame_id=parent,
        child_frame_id=child,
        translation=Vector3(x=x, y=y, z=0.0),
        rotation=quaternion(theta),
    )


def _compose_inverse(pose: tuple[float, float, float], odom: tuple[float, float, float]) -> tuple[float, float, float]:
    """``pose ∘ odom⁻¹``: the ``map -> odom`` transform that puts ``base_link`` (at ``odom`` in ``odom``) at ``pose``
    in ``map``. Poses are (x m, y m, θ rad)."""
    dtheta = pose[2] - odom[2]
    c, s = math.cos(dtheta), math.sin(dtheta)
    return pose[0] - (c * odom[0] - s * odom[1]), pose[1] - (s * odom[0] + c * odom[1]), dtheta


def walls_scene(world: World, stamp: float, height: float = 0.6, thickness: float = 0.05) -> SceneUpdate:
    """The world's walls and obstacle edges as boxes standing on the floor of the ``map`` frame.

    Args:
        world: the world (its walls and polygon edges; circles become square posts).
        stamp: the time stamp of the scene, s.
        height, thickness: of the walls, m.
    """
    cubes: list[CubePrimitive] = []
    for x1, y1, x2, y2 in world.segments().tolist():
        length = math.hypot(x2 - x1, y2 - y1)
        cubes.append(
            CubePrimitive(
                pose=_pose((x1 + x2) / 2, (y1 + y2) / 2, math.atan2(y2 - y1, x2 - x1), height / 2),
                size=Vector3(x=max(length, thickness), y=thickness, z=height),
                color=_WALL_COLOR,
            )
        )
    for x, y, r in world.circles.tolist():
        cubes.append(
            CubePrimitive(
                pose=_pose(x, y, 0.0, height / 2), size=Vector3(x=2 * r, y=2 * r, z=height), color=_WALL_COLOR
            )
        )
    entity = SceneEntity(timestamp=timestamp(stamp), frame_id=FRAME_MAP, id=f"walls:{world.name}", cubes=cubes)
    return SceneUpdate(entities=[entity])


def log_message(stamp: float, level: int, name: str, message: str) -> Log:
    """A Foxglove log line.

    Args:
        stamp: its time, s.
        level: a :mod:`logging` level (``logging.INFO``...).
        name: who says it (a logger or module name).
        message: the text.
    """
    fox_level = next((fl for threshold, fl in _LEVELS if level >= threshold), LogLevel.Unknown)
    if level >= 50:
        fox_level = LogLevel.Fatal
    return Log(timestamp=timestamp(stamp), level=fox_level, message=message, name=name)


class FoxgloveTranslator:
    """Turns Pluto messages into Foxglove messages, keeping what the frame tree and the path need.

    Args:
        laser_mount: the laser's pan/tilt centre in the robot frame (x forward, y left, z up), m.
        path_step: distance (m) the pose moves before the path gets a new point.
        max_path: most points kept in the path (then every other old point is dropped).
        odometry_history: odometry values kept to find the one of a pose's time.
        map_pose: which pose places ``base_link`` in ``map``: ``localization`` (``Localization/Pose``; the true pose
            until one comes) or ``truth`` (``Sim/Truth`` only).
        robot: the robot's name, one of several in the view: its frames are ``<robot>/odom``, ... and its topics
            ``/<robot>/scan``, ...; "" for a lone robot.

    Raises:
        ValueError: an unknown ``map_pose``.
    """

    def __init__(
        self,
        laser_mount: tuple[float, float, float] = (0.25, 0.0, 0.9),
        *,
        path_step: float = 0.1,
        max_path: int = 2000,
        odometry_history: int = 200,
        map_pose: str = "localization",
        robot: str = "",
    ) -> None:
        if map_pose not in MAP_POSES:
            raise ValueError(f"map_pose must be one of {', '.join(MAP_POSES)}, not {map_pose!r}")
        self.map_pose = map_pose
        self.robot = robot
        prefix = f"{robot}/" if robot else ""
        self.frame_odom, self.frame_base, self.frame_laser = (
            f"{prefix}{f}" for f in (FRAME_ODOM, FRAME_BASE, FRAME_LASER)
        )
        """This robot's frames."""
        topic = f"/{robot}" if robot else ""
        self.topic_scan, self.topic_pose, self.topic_truth, self.topic_path = (f"{topic}{t}" for t in ROBOT_TOPICS)
        """This robot's topics."""
        self.laser_mount = laser_mount
        self.path_step = path_step
        self.max_path = max(max_path, 2)
        self._odometry: deque[tuple[float, float, float, float]] = deque(maxlen=odometry_history)
        self._odometry_stamps: deque[float] = deque(maxlen=odometry_history)
        self._have_localization = False
        self._path: list[Pose] = []
        self._path_end: tuple[float, float] | None = None
        self._wrist = False  # a Wrist/State came: it turns the laser
        self._stand_in: tuple[float, tuple[float, float, float]] | None = None  # a pose placed before any odometry
        self.rejected = 0
        """Messages that could not be translated (a scan whose angles and ranges disagree, a short pose...)."""

    def reset(self) -> None:
        """Forget the odometry and the path (the robot's clock jumped back: a new run)."""
        self._odometry.clear()
        self._odometry_stamps.clear()
        self._have_localization = False
        self._path = []
        self._path_end = None
        self._wrist = False  # a Wrist/State came: it turns the laser
        self._stand_in = None

    @property
    def path_length(self) -> int:
        """Points in the path now."""
        return len(self._path)

    def feed(self, name: str, msg: msgs.Message) -> list[Output]:
        """The Foxglove messages a new value of interface ``name`` gives (none for other interfaces).

        Args:
            name: the Pluto interface (one of :data:`INPUTS`).
            msg: its new value.
        """
        if name == names.SICK_SCAN_MM.name and isinstance(msg, msgs.LaserScan):
            return self._scan(msg)
        if name == names.BASE_DRIVE_STATE.name and isinstance(msg, msgs.Odometry):
            return self._odom(msg)
        if name == names.LOCALIZATION_POSE.name and isinstance(msg, msgs.PoseEstimate):
            # The pose vector is (x, y, z, θ, φ, ψ, ...): the map frame is about x, y and θ.
            if len(msg.pose) < 4 or not all(math.isfinite(msg.pose[i]) for i in (0, 1, 3)):
                self.rejected += 1
                return []
            self._have_localization = self.map_pose == "localization"
            pose = (msg.pose[0], msg.pose[1], msg.pose[3])
            if not self._have_localization:
                return [Output(self.topic_pose, _pose_in_map(msg.stamp, pose), msg.stamp)]
            return self._pose(msg.stamp, pose, self.topic_pose)
        if name == names.SIM_TRUTH.name and isinstance(msg, msgs.Odometry):
            truth = (msg.x, msg.y, msg.theta)
            out = [Output(self.topic_truth, _pose_in_map(msg.stamp, truth), msg.stamp)]
            if not self._have_localization:  # the map frame from the true pose until a localization writes one
                out += self._pose(msg.stamp, truth, None)
            return out
        if name == names.WRIST_STATE.name and isinstance(msg, msgs.ActuatorState):
            self._wrist = True
            pan = msg.position[0] if msg.position else 0.0
            tilt = msg.position[1] if len(msg.position) > 1 else 0.0
            return [Output(TOPIC_TF, self._laser_transform(msg.stamp, pan, tilt), msg.stamp, self.frame_laser)]
        return []

    def _laser_transform(self, stamp: float, pan: float, tilt: float) -> FrameTransform:
        mx, my, mz = self.laser_mount
        return FrameTransform(
            timestamp=timestamp(stamp),
            parent_frame_id=self.frame_base,
            child_frame_id=self.frame_laser,
            translation=Vector3(x=mx, y=my, z=mz),
            rotation=quaternion(pan, tilt),
        )

    def _scan(self, scan: msgs.LaserScan) -> list[Output]:
        n = len(scan.ranges)
        if n == 0 or len(scan.angles) != n:
            self.rejected += 1
            return []
        # Foxglove spaces the beams evenly from start to end; an error (< 0) or nothing seen (>= max_range) is not a
        # point to draw.
        ranges = [r if 0.0 <= r < scan.max_range else math.inf for r in scan.ranges]
        fox = LaserScan(
            timestamp=timestamp(scan.stamp),
            frame_id=self.frame_laser,
            pose=Pose(position=Vector3(), orientation=Quaternion(w=1.0)),
            start_angle=scan.angles[0],
            end_angle=scan.angles[-1],
            ranges=ranges,
        )
        out = [Output(self.topic_scan, fox, scan.stamp)]
        if not self._wrist:  # the fixed mount, with each scan: a viewer that joins later needs it too
            out.insert(0, Output(TOPIC_TF, self._laser_transform(scan.stamp, 0.0, 0.0), scan.stamp, self.frame_laser))
        return out

    def _odom(self, odom: msgs.Odometry) -> list[Output]:
        if not all(math.isfinite(v) for v in (odom.x, odom.y, odom.theta)):
            self.rejected += 1
            return []
        if self._odometry_stamps and odom.stamp < self._odometry_stamps[-1]:
            self.reset()  # time went back: a new run
        self._odometry.append((odom.stamp, odom.x, odom.y, odom.theta))
        self._odometry_stamps.append(odom.stamp)
        out: list[Output] = []
        if self._stand_in is not None:  # the first odometry after a pose: map -> odom made true for it at once
            pose_stamp, pose = self._stand_in
            self._stand_in = None
            correction = self._map_odom(odom.stamp, pose, self._odometry_at(pose_stamp) or (0.0, 0.0, 0.0))
            out.append(replace(correction, keep=True))
        base = _transform(odom.stamp, self.frame_odom, self.frame_base, odom.x, odom.y, odom.theta)
        out.append(Output(TOPIC_TF, base, odom.stamp, self.frame_base))
        return out

    def _odometry_at(self, stamp: float) -> tuple[float, float, float] | None:
        if not self._odometry:
            return None
        i = bisect.bisect_right(self._odometry_stamps, stamp) - 1
        _, x, y, theta = self._odometry[max(i, 0)]
        return x, y, theta

    def _map_odom(self, stamp: float, pose: tuple[float, float, float], odom: tuple[float, float, float]) -> Output:
        """The ``map -> odom`` transform, at ``stamp``, that puts the robot at ``odom`` in ``odom`` at ``pose``."""
        transform = _transform(stamp, FRAME_MAP, self.frame_odom, *_compose_inverse(pose, odom))
        return Output(TOPIC_TF, transform, stamp, self.frame_odom)

    def _pose(self, stamp: float, pose: tuple[float, float, float], topic: str | None) -> list[Output]:
        out: list[Output] = []
        if topic is not None:
            out.append(Output(topic, _pose_in_map(stamp, pose), stamp))
        odom = self._odometry_at(stamp)
        self._stand_in = (stamp, pose) if odom is None else None
        if odom is None:  # no odometry yet: odom where the robot is, base_link at its origin
            odom_tf = _transform(stamp, FRAME_MAP, self.frame_odom, *pose)
            base_tf = _transform(stamp, self.frame_odom, self.frame_base, 0.0, 0.0, 0.0)
            out.append(Output(TOPIC_TF, odom_tf, stamp, self.frame_odom))
            out.append(Output(TOPIC_TF, base_tf, stamp, self.frame_base))
        else:
            out.append(self._map_odom(stamp, pose, odom))
        end = self._path_end
        if end is None or math.hypot(pose[0] - end[0], pose[1] - end[1]) >= self.path_step:
            self._path_end = (pose[0], pose[1])
            self._path.append(_pose(*pose))
            if len(self._path) > self.max_path:
                self._path = self._path[::2]
            out.append(
                Output(
                    self.topic_path,
                    PosesInFrame(timestamp=timestamp(stamp), frame_id=FRAME_MAP, poses=list(self._path)),
                    stamp,
                )
            )
        return out
