"""What the web view shows, as JSON-ready frames: the pure core of ``pluto web``.

Strategy: :class:`ViewState` keeps the newest value of each interface the page draws (it is fed from the bus by
:mod:`.module`, under the module's lock) and turns them, when asked, into small dictionaries the server encodes
once and hands to every browser:

- ``frame`` (at the view's rate, 20 Hz by default): the true pose (``Sim/Truth``), the estimated pose
  (``Localization/Pose``) with the 2-σ ellipse of its (x, y) covariance, the odometry's speeds, the latest laser scan
  (``Sick/Scan_mm``) as points in the map frame, placed with the laser's pose (``Localization/Laser_Pose`` with its
  wrist pan, else the pose, else the true pose, each moved forward by the wrist's mount), the sonar echoes
  (``Base/Sonar``) likewise from the robot's centre, the goals (the latest moveto on ``motion/command`` until the
  motion module's status says it is over, the latest goto on ``avoidance/command`` until avoid is given another
  command), the motion module's status in words and the simulated time;
- ``path`` (a few times a second, when it changed): the path travelled, a point every ``spacing`` m; when it holds
  ``max_points`` it keeps every other point and doubles the spacing, so a long run stays a bounded drawing;
- ``map`` (once per browser): the walls and round obstacles of the world (:func:`map_message`).

Several robots (a simulation of several, robots sharing a network): the frame's own robot is the one the view runs
for; each other robot has a :class:`ViewState` of its own, fed from its interfaces (``pluto/<robot>/...``), and the
frame lists them under ``robots`` (:meth:`ViewState.robot_view`: its name, true and estimated pose, scan, goals and
the motion module's status in words), which the page draws with their names.

Everything is in the map frame, m and rad; coordinates are rounded to the millimetre (the page draws pixels, and
shorter numbers are cheaper to send twenty times a second to every browser).
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from pluto import msgs, names
from pluto.movement.motion.core import MOVETO, MOVETO_IDLE, MOVETO_SET, NEARING, RELEASE
from pluto.movement.motion.proxy import describe_status
from pluto.sim.world import World

__all__ = [
    "INPUTS",
    "OTHER_INPUTS",
    "Path",
    "ViewState",
    "covariance_ellipse",
    "map_message",
]

INPUTS: Final = (
    names.SIM_TRUTH.name,
    names.LOCALIZATION_POSE.name,
    names.LOCALIZATION_LASER_POSE.name,
    names.BASE_DRIVE_STATE.name,
    names.SICK_SCAN_MM.name,
    names.BASE_SONAR.name,
    names.MOTION_COMMAND.name,
    names.AVOIDANCE_COMMAND.name,
    names.MOTION_STATUS.name,
    names.CLOCK.name,
)
"""The interfaces the view reads."""

OTHER_INPUTS: Final = tuple(
    name for name in INPUTS if name not in (names.CLOCK.name, names.BASE_SONAR.name, names.BASE_DRIVE_STATE.name)
)
"""The interfaces the view reads of each other robot: the clock is shared, and the page draws no other robot's sonar
or speed."""

_GOTO = 2
"""``avoidance/command`` cmd_flags = 10·A + T: T = 2 is a goto."""

ELLIPSE_SIGMAS: Final = 2.0
"""The covariance ellipse is drawn at this many standard deviations (about 86 % of the probability in 2-D)."""


def _r(value: float) -> float:
    return round(float(value), 3)


def covariance_ellipse(covariance: list[float], sigmas: float = ELLIPSE_SIGMAS) -> tuple[float, float, float] | None:
    """The ellipse of the (x, y) block of a row-major 3×3 covariance of (x, y, θ).

    Args:
        covariance: 9 values, m², m·rad, rad² (a longer one is read as the 3×3 block of its first rows).
        sigmas: size of the ellipse in standard deviations.

    Returns:
        (semi-major axis m, semi-minor axis m, angle of the major axis rad), or None if the covariance is missing,
        not finite or not positive semi-definite.
    """
    if len(covariance) < 5:
        return None
    sxx, sxy, syy = covariance[0], covariance[1], covariance[4]
    if not all(math.isfinite(v) for v in (sxx, sxy, syy)):
        return None
    mean = (sxx + syy) / 2.0
    spread = math.hypot((sxx - syy) / 2.0, sxy)
    big, small = mean + spread, mean - spread
    if small < -1e-12 or big < 0.0:
        return None
    angle = 0.5 * math.atan2(2.0 * sxy, sxx - syy)
    return sigmas * math.sqrt(big), sigmas * math.sqrt(max(small, 0.0)), angle


class Path:
    """The path travelled: points at least ``spacing`` m apart, thinned to at most ``max_points``.

    Args:
        spacing: least distance between two kept points, m (doubles each time the path is thinned).
        max_points: most points kept.
    """

    def __init__(self, spacing: float = 0.05, max_points: int = 1000) -> None:
        if not spacing > 0.0 or max_points < 4:
            raise ValueError("a path needs spacing > 0 m and max_points >= 4")
        self.initial_spacing = spacing
        self.spacing = spacing
        self.max_points = max_points
        self.points: list[tuple[float, float]] = []
        self.version = 0
        """Grows with every change (the server sends the path again only when it changed)."""

    def add(self, x: float, y: float) -> None:
        """Add the robot's position (m) if it moved ``spacing`` from the last kept point."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        if self.points:
            lx, ly = self.points[-1]
            if math.hypot(x - lx, y - ly) < self.spacing:
                return
        self.points.append((x, y))
        if len(self.points) > self.max_points:
            self.points = self.points[::2] if len(self.points) % 2 else [*self.points[:-1:2], self.points[-1]]
            self.spacing *= 2.0
        self.version += 1

    def clear(self) -> None:
        self.points = []
        self.spacing = self.initial_spacing
        self.version += 1

    def message(self) -> dict[str, Any]:
        """``{"type": "path", "points": [x0, y0, x1, y1, ...]}``, m."""
        return {"type": "path", "points": [_r(c) for p in self.points for c in p]}


def map_message(world: World | None, source: str = "") -> dict[str, Any]:
    """``{"type": "map", ...}``: the world's static segments ``[x1, y1, x2, y2]`` and circles ``[x, y, r]`` (m), its
    bounds and start pose; no walls when there is no world."""
    if world is None:
        return {"type": "map", "name": "", "source": source, "walls": [], "circles": [], "bounds": None}
    walls = np.round(world.segments(), 3).tolist()
    circles = np.round(world.circles, 3).tolist()
    return {
        "type": "map",
        "name": world.name,
        "source": source,
        "walls": walls,
        "circles": circles,
        "bounds": [_r(b) for b in world.bounds()],
        "start": [_r(s) for s in world.start],
    }


def _echo_points(
    origin: tuple[float, float, float], ranges: list[float], angles: list[float], max_range: float
) -> list[float]:
    """The echoes of a sensor at ``origin`` (x, y, heading) as flat map points ``[x0, y0, x1, y1, ...]`` (mm
    rounded): each range along its angle from the sensor's heading, leaving out the non-finite, the zero and those at
    or beyond ``max_range`` (no echo)."""
    r = np.asarray(ranges, dtype=float)
    a = np.asarray(angles, dtype=float) + origin[2]
    seen = np.isfinite(r) & np.isfinite(a) & (r > 0.0) & (r < max_range)
    xs = origin[0] + r[seen] * np.cos(a[seen])
    ys = origin[1] + r[seen] * np.sin(a[seen])
    points: list[float] = np.round(np.column_stack((xs, ys)), 3).ravel().tolist()
    return points


def _xyt(pose: list[float]) -> tuple[float, float, float] | None:
    if len(pose) < 4 or not all(math.isfinite(v) for v in pose[:4]):
        return None
    return pose[0], pose[1], pose[3]


class ViewState:
    """The newest value of everything the page draws; :meth:`frame` turns it into a frame.

    Not thread-safe: the module feeds it and asks for frames under one lock.

    Args:
        laser_mount_x: forward offset of the wrist (and laser) axis from the robot's centre, m.
        path: where the path travelled is kept (a new :class:`Path` by default).
    """

    def __init__(self, laser_mount_x: float = 0.25, path: Path | None = None) -> None:
        self.laser_mount_x = laser_mount_x
        self.path = path if path is not None else Path()
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new simulation run)."""
        self.truth: msgs.Odometry | None = None
        self.pose: msgs.PoseEstimate | None = None
        self.laser_pose: msgs.PoseEstimate | None = None
        self.odometry: msgs.Odometry | None = None
        self.scan: msgs.LaserScan | None = None
        self.sonar: msgs.SonarScan | None = None
        self.moveto: tuple[float, float] | None = None
        self._moveto_taken = False  # the motion module's status showed the moveto under way
        self.goto: tuple[float, float] | None = None
        self.motion_status: msgs.FVectorState | None = None
        self.clock: msgs.SimTime | None = None
        self.seq = 0
        self.path.clear()

    def feed(self, name: str, msg: msgs.Message) -> None:
        """Take a new value of interface ``name`` (one of :data:`INPUTS`; others are ignored)."""
        if self._feed_robot(name, msg) or self._feed_goals(name, msg):
            return
        if name == names.CLOCK and isinstance(msg, msgs.SimTime):
            if self.clock is not None and msg.run != self.clock.run and msg.run != 0:
                self.reset()  # a new simulation run: the old run's robot, path and goals are gone
            self.clock = msg

    def _feed_robot(self, name: str, msg: msgs.Message) -> bool:
        """Take a value of the robot's poses and sensors; False if ``msg`` is none of them."""
        if name == names.SIM_TRUTH and isinstance(msg, msgs.Odometry):
            self.truth = msg
            self.path.add(msg.x, msg.y)
        elif name == names.LOCALIZATION_POSE and isinstance(msg, msgs.PoseEstimate):
            self.pose = msg
            xyt = _xyt(msg.pose)
            if self.truth is None and xyt is not None:  # no true pose (a real robot): the path is the estimate's
                self.path.add(xyt[0], xyt[1])
        elif name == names.LOCALIZATION_LASER_POSE and isinstance(msg, msgs.PoseEstimate):
            self.laser_pose = msg
        elif name == names.BASE_DRIVE_STATE and isinstance(msg, msgs.Odometry):
            self.odometry = msg
        elif name == names.SICK_SCAN_MM and isinstance(msg, msgs.LaserScan):
            self.scan = msg
        elif name == names.BASE_SONAR and isinstance(msg, msgs.SonarScan):
            self.sonar = msg
        else:
            return False
        return True

    def _feed_goals(self, name: str, msg: msgs.Message) -> bool:
        """Take a command or status that sets or ends a goal (a moveto, an avoid goto); False if ``msg`` is none."""
        if name == names.MOTION_COMMAND and isinstance(msg, msgs.ActuatorState):
            if msg.cmd_flags == MOVETO and len(msg.position) >= 2:
                self.moveto = (msg.position[0], msg.position[1])
                self._moveto_taken = False
            elif msg.cmd_flags == RELEASE:
                self.moveto = None
        elif name == names.AVOIDANCE_COMMAND and isinstance(msg, msgs.ActuatorState):
            if msg.cmd_flags >= 0 and msg.cmd_flags % 10 == _GOTO and len(msg.position) >= 2:
                self.goto = (msg.position[0], msg.position[1])
            else:
                self.goto = None
        elif name == names.MOTION_STATUS and isinstance(msg, msgs.FVectorState):
            self.motion_status = msg
            moveto = msg.element[2] if len(msg.element) > 2 else None
            if moveto in (MOVETO_SET, NEARING):
                self._moveto_taken = True
            elif moveto == MOVETO_IDLE and self._moveto_taken:  # done, stopped or replaced: no goal any more
                self.moveto = None
                self._moveto_taken = False
        else:
            return False
        return True

    # -- the frame ---------------------------------------------------------------------------------------------

    def robot_pose(self) -> tuple[float, float, float] | None:
        """Where the robot's sensors are drawn from: the estimate, else the true pose, else the odometry."""
        if self.pose is not None and (xyt := _xyt(self.pose.pose)) is not None:
            return xyt
        if self.truth is not None:
            return self.truth.x, self.truth.y, self.truth.theta
        if self.odometry is not None:
            return self.odometry.x, self.odometry.y, self.odometry.theta
        return None

    def laser_origin(self) -> tuple[float, float, float] | None:
        """The laser's pose in the map (x m, y m, heading rad), or None when no pose is known."""
        pan = 0.0
        base: tuple[float, float, float] | None = None
        if self.laser_pose is not None and (xyt := _xyt(self.laser_pose.pose)) is not None:
            base = xyt
            if len(self.laser_pose.pose) >= 7 and math.isfinite(self.laser_pose.pose[6]):
                pan = self.laser_pose.pose[6]
        else:
            base = self.robot_pose()
        if base is None:
            return None
        x, y, theta = base
        m = self.laser_mount_x
        return x + m * math.cos(theta), y + m * math.sin(theta), theta + pan

    def _scan(self) -> dict[str, Any] | None:
        scan, origin = self.scan, self.laser_origin()
        if scan is None or origin is None or not scan.ranges or len(scan.ranges) != len(scan.angles):
            return None
        points = _echo_points(origin, scan.ranges, scan.angles, scan.max_range)
        return {"stamp": _r(scan.stamp), "origin": [_r(v) for v in origin], "points": points}

    def _sonar(self) -> dict[str, Any] | None:
        sonar, robot = self.sonar, self.robot_pose()
        if sonar is None or robot is None or len(sonar.ranges) != len(sonar.angles) or not sonar.ranges:
            return None
        points = _echo_points(robot, sonar.ranges, sonar.angles, sonar.max_range)
        return {"origin": [_r(robot[0]), _r(robot[1])], "points": points}

    def _add_goals(self, out: dict[str, Any]) -> None:
        """Put the goals (always, maybe empty) and the motion module's status in words (when known) into ``out``."""
        goals: dict[str, list[float]] = {}
        if self.moveto is not None:
            goals["moveto"] = [_r(v) for v in self.moveto]
        if self.goto is not None:
            goals["goto"] = [_r(v) for v in self.goto]
        out["goals"] = goals
        if self.motion_status is not None:
            out["motion"] = describe_status(self.motion_status)

    def robot_view(self, name: str) -> dict[str, Any]:
        """What the page draws of another robot, called ``name``: ``{"name", "truth", "pose", "scan", "goals",
        "motion"}`` (each but the name and the goals only when known)."""
        out: dict[str, Any] = {"name": name}
        if self.truth is not None:
            out["truth"] = [_r(self.truth.x), _r(self.truth.y), _r(self.truth.theta)]
        if self.pose is not None and (xyt := _xyt(self.pose.pose)) is not None:
            out["pose"] = {"x": _r(xyt[0]), "y": _r(xyt[1]), "theta": _r(xyt[2])}
        if (scan := self._scan()) is not None:
            out["scan"] = scan
        self._add_goals(out)
        return out

    def frame(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The frame of now: ``{"type": "frame", "seq": n, ...}`` (``extra`` items are added as they are)."""
        self.seq += 1
        out: dict[str, Any] = {"type": "frame", "seq": self.seq}
        if self.clock is not None:
            out["time"] = _r(self.clock.stamp)
            out["rate"] = _r(self.clock.rate)
        if self.truth is not None:
            out["truth"] = [_r(self.truth.x), _r(self.truth.y), _r(self.truth.theta)]
        if self.pose is not None and (xyt := _xyt(self.pose.pose)) is not None:
            pose: dict[str, Any] = {"x": _r(xyt[0]), "y": _r(xyt[1]), "theta": _r(xyt[2])}
            ellipse = covariance_ellipse(self.pose.covariance)
            if ellipse is not None:
                pose["ellipse"] = [_r(v) for v in ellipse]
            out["pose"] = pose
        elif self.truth is None and self.odometry is not None:  # nothing better: draw the robot at its odometry
            out["odometry_pose"] = [_r(self.odometry.x), _r(self.odometry.y), _r(self.odometry.theta)]
        if self.odometry is not None:
            out["speed"] = [_r(self.odometry.v), _r(self.odometry.omega)]
        if (scan := self._scan()) is not None:
            out["scan"] = scan
        if (sonar := self._sonar()) is not None:
            out["sonar"] = sonar
        self._add_goals(out)
        if extra:
            out.update(extra)
        return out
