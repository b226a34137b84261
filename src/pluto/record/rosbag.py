"""ROS bags both ways: a Pluto log exported as a ROS 2 bag, and ROS 1 and ROS 2 bags read as Pluto logs.

Both use ``rosbags`` (pure Python: no ROS installation), with the standard types ``sensor_msgs/LaserScan``,
``nav_msgs/Odometry``, ``tf2_msgs/TFMessage`` and ``geometry_msgs/Twist`` (``TwistStamped`` read too).

Strategy, export (:func:`export_rosbag2`, ``pluto log export --rosbag2 DIR LOG``): a ROS 2 bag folder with MCAP
storage and CDR messages, as ``ros2 bag record`` writes it, so ``ros2 bag play``, Foxglove and ``rosbags`` read it.
Its frames are the tree ROS users know (REP 105), the same tree as the Foxglove translation
(:mod:`pluto.gateways.foxglove.translate`)::

    map -> odom -> base_link -> laser

each frame with one parent for the whole bag:

- ``/scan`` (``LaserScan``, frame ``laser``): ``Sick/Scan_mm`` (else ``Sick/Scan``), its beams from the first
  angle at a fixed increment; an error (range < 0) is NaN and no echo (>= ``max_range``) is +inf (REP 117);
  ``range_max`` is the scanner's ``max_range``. A scan whose beams are not evenly spaced cannot be a
  ``LaserScan``: it is left out and counted.
- ``/odom`` (``Odometry``, ``odom`` -> ``base_link``) and the ``odom -> base_link`` transform on ``/tf``:
  ``Base/Drive/State``, its velocities as the twist in ``base_link``.
- ``map -> odom`` on ``/tf``: the pose (``Localization/Pose``, else ``Sim/Truth``) composed with the inverse of
  the odometry at the pose's stamp (interpolated), so that ``map -> base_link`` is the pose. Without a pose,
  ``map -> odom`` is the identity on ``/tf_static``; without odometry, ``odom -> base_link`` is the pose.
- ``base_link -> laser``: the laser's mount, on ``/tf_static``; where the log has ``Wrist/State``, the wrist turns
  the laser, and the transform goes on ``/tf`` at each wrist state.
- ``/cmd_vel`` (``Twist``): ``Base/Drive/Command`` (v, ω).

Every message is written at its log time (the robot's time: the simulated clock of a simulated run) and stamped
with the stamp of the Pluto message it comes from, so a bag of a simulated run plays with ``use_sim_time``.

Strategy, reading (:func:`read_rosbag`): the bag's messages become Pluto messages on Pluto's interfaces, held in a
:class:`~pluto.record.logfile.LogFile` in memory, so everything that reads a Pluto log (``pluto replay``,
``pluto slam offline``, ``pluto log info``, the readers) reads a bag. Topics are chosen by type (one ``LaserScan``
topic, one ``Odometry``, one ``Twist``; of several, ``/scan``, ``/odom``, ``/cmd_vel`` or the busiest), or named.
``LaserScan`` becomes ``Sick/Scan_mm`` and ``Sick/Timing``, ``Odometry`` ``Base/Drive/State`` (its heading
continuous), ``Twist`` ``Base/Drive/Command``; without an ``Odometry`` topic the ``odom ->`` transforms of ``/tf``
are the odometry. The laser's mount is the chain of transforms from the odometry's frame to the scan's frame
(``/tf_static``, else the first value of ``/tf``): its position goes in the log's metadata (``laser_mount``) and
its heading (and a laser mounted upside down) into the beams' bearings, which Pluto keeps in a laser frame
aligned with the robot's.

A ``LaserScan`` holds 32-bit floats. A range is read back as the shortest decimal that rounds to its float (a
range logged as 2.34 m comes back as 2.34, not 2.3399999); an angle increment that is a whole fraction of a half
turn to within the float's precision (1°, 0.5°, 0.25°, 360/1024...) is taken as that fraction, and a first angle
that is a whole number of increments as that number, so the beams' bearings are those the scanner had.

Bad input raises :class:`BagError` (a :class:`~pluto.record.format.LogError`) naming the bag and the reason: a
folder or file that is not a bag, a bag of other types, a topic named that it does not have; the command line exits
with status 2 on it.
"""

from __future__ import annotations

import math
import os
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pluto import __version__, msgs, names
from pluto.record.format import LogError, to_ns
from pluto.record.logfile import LogFile, LoggedMessage

__all__ = [
    "FRAME_BASE",
    "FRAME_LASER",
    "FRAME_MAP",
    "FRAME_ODOM",
    "LASER_SCAN",
    "ODOMETRY",
    "TF_MESSAGE",
    "TOPIC_CMD_VEL",
    "TOPIC_ODOM",
    "TOPIC_SCAN",
    "TOPIC_TF",
    "TOPIC_TF_STATIC",
    "TWIST",
    "TWIST_STAMPED",
    "BagError",
    "BagExport",
    "bag_kind",
    "beam_angles",
    "export_rosbag2",
    "float32_decimals",
    "open_log",
    "read_rosbag",
]

FloatArray = npt.NDArray[np.float64]

FRAME_MAP = "map"
FRAME_ODOM = "odom"
FRAME_BASE = "base_link"
FRAME_LASER = "laser"

TOPIC_SCAN = "/scan"
TOPIC_ODOM = "/odom"
TOPIC_TF = "/tf"
TOPIC_TF_STATIC = "/tf_static"
TOPIC_CMD_VEL = "/cmd_vel"

LASER_SCAN = "sensor_msgs/msg/LaserScan"
ODOMETRY = "nav_msgs/msg/Odometry"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
TWIST = "geometry_msgs/msg/Twist"
TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
READ_TYPES = (LASER_SCAN, ODOMETRY, TF_MESSAGE, TWIST, TWIST_STAMPED)

_MCAP_MAGIC = b"\x89MCAP0\r\n"
_ROS1_MAGIC = b"#ROSBAG V2.0"


class BagError(LogError):
    """A ROS bag cannot be written or read as Pluto reads it; the message says which bag and why. Commands exit
    with status 2 on it."""

    exit_status = 2


# -- numbers -----------------------------------------------------------------------------------------------------------

_POWERS = np.array([float(10**k) for k in range(23)])
"""10^0 .. 10^22, each exact in a float64."""


def float32_decimals(values: npt.ArrayLike) -> FloatArray:
    """32-bit floats as the shortest decimals (at most 9 significant digits) that round to them, as 64-bit floats.

    A value that was a decimal before it was stored in 32 bits (a range of 2.34 m) comes back as that decimal;
    0, infinities and NaN stay as they are.
    """
    stored = np.asarray(values, dtype=np.float32)
    out = stored.astype(np.float64)
    flat = out.reshape(-1)
    pick = np.flatnonzero(np.isfinite(flat) & (flat != 0.0))
    if pick.size == 0:
        return out
    x = flat[pick]
    target = stored.reshape(-1)[pick]
    exponent = np.floor(np.log10(np.abs(x))).astype(np.int64)
    result = x.copy()
    pending = np.ones(x.size, dtype=bool)
    for digits in range(1, 10):
        power = digits - 1 - exponent  # x rounded to `digits` significant digits is rint(x·10^power)/10^power
        usable = pending & (np.abs(power) <= 22)
        if not usable.any():
            break
        scale = _POWERS[np.abs(power)]
        up = power >= 0  # divide by an exact power of ten, or multiply by one: the decimal correctly rounded
        candidate = np.where(up, np.rint(x * scale) / scale, np.rint(x / scale) * scale)
        found = usable & (candidate.astype(np.float32) == target)
        result[found] = candidate[found]
        pending &= ~found
        if not pending.any():
            break
    flat[pick] = result
    return out


def _whole_fraction(value: float) -> float:
    """``value`` (a 32-bit float read as 64 bits) as π/k when it is within the 32-bit float's precision of that,
    for a whole k; else as it is."""
    if value == 0.0 or not math.isfinite(value):
        return value
    k = round(math.pi / value)
    if k == 0:
        return value
    exact = math.pi / k
    return exact if abs(exact - value) <= 2.0**-23 * abs(value) else value


def beam_angles(angle_min: float, increment: float, count: int) -> FloatArray:
    """The bearings of a ``LaserScan``'s ``count`` beams, rad, from its 32-bit ``angle_min`` and
    ``angle_increment``: the increment as a whole fraction of a half turn and the first angle as a whole number
    of increments where the 32-bit values are those numbers rounded (see the module docstring)."""
    step = _whole_fraction(float(increment))
    first = float(angle_min)
    if step != 0.0:
        m = round(first / step)
        if abs(m * step - first) <= 2.0**-23 * max(abs(first), abs(step)):
            first = m * step
    angles: FloatArray = first + np.arange(count, dtype=np.float64) * step
    return angles


# -- rotations ---------------------------------------------------------------------------------------------------------

Quaternion = tuple[float, float, float, float]
"""(x, y, z, w)."""


def _quaternion(yaw: float, pitch: float = 0.0) -> Quaternion:
    """The rotation Rz(yaw)·Ry(pitch) as a unit quaternion."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    return (-sy * sp, cy * sp, sy * cp, cy * cp)


def _yaw(q: Quaternion) -> float:
    x, y, z, w = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _multiply(a: Quaternion, b: Quaternion) -> Quaternion:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def _rotate(q: Quaternion, v: tuple[float, float, float]) -> tuple[float, float, float]:
    moved = _multiply(_multiply(q, (v[0], v[1], v[2], 0.0)), (-q[0], -q[1], -q[2], q[3]))
    return (moved[0], moved[1], moved[2])


@dataclass(frozen=True)
class _Transform:
    translation: tuple[float, float, float]
    rotation: Quaternion

    def then(self, inner: _Transform) -> _Transform:
        """This transform followed by ``inner`` (a child's pose in this frame's child)."""
        moved = _rotate(self.rotation, inner.translation)
        t = self.translation
        return _Transform((t[0] + moved[0], t[1] + moved[1], t[2] + moved[2]), _multiply(self.rotation, inner.rotation))


_IDENTITY = _Transform((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))


def _compose_inverse(pose: tuple[float, float, float], odom: tuple[float, float, float]) -> tuple[float, float, float]:
    """``pose ∘ odom⁻¹``: the ``map -> odom`` transform that puts ``base_link`` (at ``odom`` in ``odom``) at ``pose``
    in ``map``."""
    turn = pose[2] - odom[2]
    c, s = math.cos(turn), math.sin(turn)
    return pose[0] - (c * odom[0] - s * odom[1]), pose[1] - (s * odom[0] + c * odom[1]), turn


# -- export ------------------------------------------------------------------------------------------------------------


@dataclass
class BagExport:
    """What :func:`export_rosbag2` wrote.

    Attributes:
        output: the bag's folder.
        counts: messages per topic.
        start, end: log times of the first and last message, s.
        skipped: Pluto messages left out, with the reason.
        notes: what the export did that a user should know (the frames it made up, ...).
    """

    output: Path
    counts: dict[str, int] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


class _RosTypes:
    """The ROS message classes of a typestore, and builders of the messages Pluto writes."""

    def __init__(self, store: Any) -> None:
        t = store.types
        self.store = store
        self.Time = t["builtin_interfaces/msg/Time"]
        self.Header = t["std_msgs/msg/Header"]
        self.Vector3 = t["geometry_msgs/msg/Vector3"]
        self.Point = t["geometry_msgs/msg/Point"]
        self.Quaternion = t["geometry_msgs/msg/Quaternion"]
        self.Pose = t["geometry_msgs/msg/Pose"]
        self.PoseWithCovariance = t["geometry_msgs/msg/PoseWithCovariance"]
        self.Twist = t[TWIST]
        self.TwistWithCovariance = t["geometry_msgs/msg/TwistWithCovariance"]
        self.Transform = t["geometry_msgs/msg/Transform"]
        self.TransformStamped = t["geometry_msgs/msg/TransformStamped"]
        self.TFMessage = t[TF_MESSAGE]
        self.LaserScan = t[LASER_SCAN]
        self.Odometry = t[ODOMETRY]

    def header(self, stamp: float, frame: str) -> Any:
        ns = round(max(stamp, 0.0) * 1e9) if math.isfinite(stamp) else 0
        return self.Header(stamp=self.Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000), frame_id=frame)

    def quaternion(self, yaw: float, pitch: float = 0.0) -> Any:
        x, y, z, w = _quaternion(yaw, pitch)
        return self.Quaternion(x=x, y=y, z=z, w=w)

    def transform(
        self, stamp: float, parent: str, child: str, xyz: tuple[float, float, float], yaw: float, pitch: float = 0.0
    ) -> Any:
        return self.TransformStamped(
            header=self.header(stamp, parent),
            child_frame_id=child,
            transform=self.Transform(
                translation=self.Vector3(x=xyz[0], y=xyz[1], z=xyz[2]), rotation=self.quaternion(yaw, pitch)
            ),
        )

    def twist(self, v: float, omega: float) -> Any:
        return self.Twist(linear=self.Vector3(x=v, y=0.0, z=0.0), angular=self.Vector3(x=0.0, y=0.0, z=omega))

    def odometry(self, odom: msgs.Odometry) -> Any:
        pose = self.Pose(position=self.Point(x=odom.x, y=odom.y, z=0.0), orientation=self.quaternion(odom.theta))
        return self.Odometry(
            header=self.header(odom.stamp, FRAME_ODOM),
            child_frame_id=FRAME_BASE,
            pose=self.PoseWithCovariance(pose=pose, covariance=np.zeros(36)),
            twist=self.TwistWithCovariance(twist=self.twist(odom.v, odom.omega), covariance=np.zeros(36)),
        )

    def scan(self, scan: msgs.LaserScan) -> Any | None:
        """The ``LaserScan`` of a Pluto scan, or None when its beams are not evenly spaced."""
        n = len(scan.ranges)
        if n == 0 or len(scan.angles) != n:
            return None
        angles = np.asarray(scan.angles, dtype=np.float64)
        step = (angles[-1] - angles[0]) / (n - 1) if n > 1 else 0.0
        if n > 2 and float(np.max(np.abs(angles - (angles[0] + np.arange(n) * step)))) > 1e-6:
            return None
        ranges = np.asarray(scan.ranges, dtype=np.float64)
        out = ranges.astype(np.float32)
        out[~np.isfinite(ranges) | (ranges < 0.0)] = np.nan
        out[ranges >= scan.max_range] = np.inf
        return self.LaserScan(
            header=self.header(scan.stamp, FRAME_LASER),
            angle_min=float(angles[0]),
            angle_max=float(angles[-1]),
            angle_increment=float(step),
            time_increment=0.0,
            scan_time=0.0,
            range_min=0.0,
            range_max=float(scan.max_range),
            ranges=out,
            intensities=np.zeros(0, dtype=np.float32),
        )


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _interpolate_odometry(table: FloatArray, stamp: float) -> tuple[float, float, float]:
    """The odometry (x, y, θ continuous) at ``stamp`` from ``table`` rows (stamp, x, y, θ), clamped at its ends."""
    times = table[:, 0]
    return (
        float(np.interp(stamp, times, table[:, 1])),
        float(np.interp(stamp, times, table[:, 2])),
        float(np.interp(stamp, times, table[:, 3])),
    )


def _clear(folder: Path, force: bool) -> None:
    """Make way for a new bag at ``folder``: nothing there, or (with ``force``) a bag written before.

    Raises:
        BagError: something is there and not ``force``, or it is not a bag folder (nothing is removed then).
    """
    if not folder.exists():
        return
    if not force:
        raise BagError(f"{folder} exists; choose another folder, or overwrite a bag there with --force")
    if not folder.is_dir() or not (folder / "metadata.yaml").exists():
        raise BagError(f"{folder} exists and is not a ROS 2 bag folder: not overwritten")
    others = [p.name for p in folder.iterdir() if p.name != "metadata.yaml" and p.suffix not in (".mcap", ".db3")]
    if others:
        raise BagError(
            f"{folder} holds files that are not the bag's ({', '.join(sorted(others)[:3])}): not overwritten"
        )
    try:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    except OSError as err:
        raise BagError(f"cannot remove the bag at {folder}: {err.strerror or err}") from None


def _static_qos() -> list[Any]:
    """The QoS ``/tf_static`` is offered with (latched: a player joining later gets it)."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(sec=0, nsec=0)
    return [
        Qos(
            QosHistory.KEEP_LAST,
            1,
            QosReliability.RELIABLE,
            QosDurability.TRANSIENT_LOCAL,
            zero,
            zero,
            QosLiveliness.AUTOMATIC,
            zero,
            False,
        )
    ]


@dataclass
class _Exported:
    """What of a log goes into a bag, each series in log order.

    Attributes:
        scan_name: the laser interface taken (None: none has scans).
        scans, odometry, commands, wrist: the log's laser scans, odometry with a finite pose, velocity commands
            and wrist states.
        pose_name: the interface the map poses come from (None: none has any).
        poses: the map poses: (entry, stamp s, (x m, y m, theta rad)).
    """

    scan_name: str | None
    scans: list[LoggedMessage]
    odometry: list[LoggedMessage]
    pose_name: str | None
    poses: list[tuple[LoggedMessage, float, tuple[float, float, float]]]
    commands: list[LoggedMessage]
    wrist: list[LoggedMessage]

    def empty(self) -> bool:
        """Nothing a bag could carry (the wrist alone moves no frame anyone reads)."""
        return not (self.scans or self.odometry or self.poses or self.commands)

    def start(self, default: float) -> float:
        """The log time of the first message exported, s (``default`` if there is none)."""
        entries = [*self.scans, *self.odometry, *self.commands, *self.wrist, *(p[0] for p in self.poses)]
        return min((e.log_time for e in entries), default=default)


_SCAN_ROWS = (names.SICK_SCAN_MM.name, names.SICK_SCAN.name)


def _exported(log: LogFile) -> _Exported:
    """The series of ``log`` a bag carries, without the values it cannot (non-finite poses, short commands)."""
    scan_name = next((n for n in _SCAN_ROWS if n in log.channels and log.channels[n].count), None)
    odometry = [
        e
        for e in log.series(names.BASE_DRIVE_STATE.name)
        if isinstance(e.message, msgs.Odometry) and _finite(e.message.x, e.message.y, e.message.theta)
    ]
    pose_name, poses = _map_poses(log)
    commands = [
        e
        for e in log.series(names.BASE_DRIVE_COMMAND.name)
        if isinstance(e.message, msgs.ActuatorState) and len(e.message.velocity) >= 2
    ]
    wrist = [e for e in log.series(names.WRIST_STATE.name) if isinstance(e.message, msgs.ActuatorState)]
    scans = log.series(scan_name) if scan_name else []
    return _Exported(scan_name, scans, odometry, pose_name, poses, commands, wrist)


def _map_poses(log: LogFile) -> tuple[str | None, list[tuple[LoggedMessage, float, tuple[float, float, float]]]]:
    """The interface the map poses come from (the localization's, else the simulator's truth; None if neither has
    any) and its finite poses: (entry, stamp s, (x m, y m, theta rad))."""
    pose_name = next(
        (n for n in (names.LOCALIZATION_POSE.name, names.SIM_TRUTH.name) if log.channels.get(n) and log.series(n)),
        None,
    )
    poses: list[tuple[LoggedMessage, float, tuple[float, float, float]]] = []
    for entry in log.series(pose_name) if pose_name else []:
        m = entry.message
        if isinstance(m, msgs.PoseEstimate) and len(m.pose) >= 4 and _finite(m.pose[0], m.pose[1], m.pose[3]):
            poses.append((entry, m.stamp, (m.pose[0], m.pose[1], m.pose[3])))
        elif isinstance(m, msgs.Odometry) and _finite(m.x, m.y, m.theta):
            poses.append((entry, m.stamp, (m.x, m.y, m.theta)))
    return pose_name, poses


def export_rosbag2(
    log: LogFile,
    folder: str | os.PathLike[str],
    *,
    laser_mount: tuple[float, float, float],
    force: bool = False,
) -> BagExport:
    """Write a Pluto log as a ROS 2 bag (MCAP storage, CDR; see the module docstring).

    Args:
        log: the log.
        folder: the bag's folder (created; it must not exist).
        laser_mount: the laser's position on the robot (x forward, y left, z up), m: ``base_link -> laser``.
        force: overwrite a bag written before at ``folder``.

    Returns:
        What was written.

    Raises:
        BagError: ``folder`` exists (and not ``force``), the log has nothing to export, or the bag cannot be
            written.
    """
    out = Path(folder)
    exported = _exported(log)
    if exported.empty():
        raise BagError(
            f"{log.path} has nothing to export as a ROS bag: no laser scans ({', '.join(_SCAN_ROWS)}), odometry "
            f"({names.BASE_DRIVE_STATE}), poses ({names.LOCALIZATION_POSE}, {names.SIM_TRUTH}) or velocity "
            f"commands ({names.BASE_DRIVE_COMMAND})"
        )
    _clear(out, force)
    types = _RosTypes(_typestore())
    report = BagExport(out)
    start = exported.start(log.start)
    items: list[tuple[float, str, Any]] = []  # (log time, topic, message)
    items += _scan_items(exported, types, report)
    table = _odometry_table(exported.odometry)
    items += _odometry_items(exported.odometry, types)
    static: list[Any] = []
    items += _pose_items(exported, table, start, types, static, report)
    items += _wrist_items(exported.wrist, laser_mount, start, types, static, report)
    items += [
        (entry.log_time, TOPIC_CMD_VEL, types.twist(command.velocity[0], command.velocity[1]))
        for entry in exported.commands
        if isinstance(command := entry.message, msgs.ActuatorState)
    ]
    items.insert(0, (start, TOPIC_TF_STATIC, types.TFMessage(transforms=static)))
    items.sort(key=lambda item: item[0])  # stable: equal times keep the order above
    _write_bag(out, items, types, log, report)
    return report


def _scan_items(exported: _Exported, types: _RosTypes, report: BagExport) -> list[tuple[float, str, Any]]:
    """``/scan``: every scan whose beams are evenly spaced (the others are reported skipped)."""
    items: list[tuple[float, str, Any]] = []
    for entry in exported.scans:
        message = entry.message
        ros = types.scan(message) if isinstance(message, msgs.LaserScan) else None
        if ros is None:
            report.skipped.append(f"{exported.scan_name} at {entry.log_time:.3f} s: its beams are not evenly spaced")
            continue
        items.append((entry.log_time, TOPIC_SCAN, ros))
    return items


def _odometry_table(odometry: list[LoggedMessage]) -> npt.NDArray[np.float64]:
    """``(N, 4)`` stamp, x, y, theta of the odometry, by stamp (for :func:`_interpolate_odometry`)."""
    rows = [(m.stamp, m.x, m.y, m.theta) for m in (e.message for e in odometry) if isinstance(m, msgs.Odometry)]
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return table[np.argsort(table[:, 0], kind="stable")]


def _odometry_items(odometry: list[LoggedMessage], types: _RosTypes) -> list[tuple[float, str, Any]]:
    """``/odom`` and its ``odom -> base_link`` on ``/tf``, for each odometry message."""
    items: list[tuple[float, str, Any]] = []
    for entry in odometry:
        odom = entry.message
        assert isinstance(odom, msgs.Odometry)
        items.append((entry.log_time, TOPIC_ODOM, types.odometry(odom)))
        base = types.transform(odom.stamp, FRAME_ODOM, FRAME_BASE, (odom.x, odom.y, 0.0), odom.theta)
        items.append((entry.log_time, TOPIC_TF, types.TFMessage(transforms=[base])))
    return items


def _pose_items(
    exported: _Exported,
    table: npt.NDArray[np.float64],
    start: float,
    types: _RosTypes,
    static: list[Any],
    report: BagExport,
) -> list[tuple[float, str, Any]]:
    """``map -> odom`` on ``/tf`` from the poses and the odometry at their stamps; without odometry the poses are
    ``odom -> base_link`` and ``map -> odom`` the identity, and without poses ``map -> odom`` is the identity (on
    ``static``, with a note)."""
    items: list[tuple[float, str, Any]] = []
    if not exported.poses:
        static.append(types.transform(start, FRAME_MAP, FRAME_ODOM, (0.0, 0.0, 0.0), 0.0))
        report.notes.append(
            f"no pose ({names.LOCALIZATION_POSE} or {names.SIM_TRUTH}): map -> odom is the identity on /tf_static"
        )
        return items
    for entry, stamp, pose in exported.poses:
        if table.shape[0]:
            moved = _compose_inverse(pose, _interpolate_odometry(table, stamp))
            tf = types.transform(stamp, FRAME_MAP, FRAME_ODOM, (moved[0], moved[1], 0.0), moved[2])
        else:
            tf = types.transform(stamp, FRAME_ODOM, FRAME_BASE, (pose[0], pose[1], 0.0), pose[2])
        items.append((entry.log_time, TOPIC_TF, types.TFMessage(transforms=[tf])))
    if not table.shape[0]:
        static.append(types.transform(start, FRAME_MAP, FRAME_ODOM, (0.0, 0.0, 0.0), 0.0))
        report.notes.append(
            f"no odometry: odom -> base_link is the pose ({exported.pose_name}), map -> odom the identity"
        )
    return items


def _wrist_items(
    wrist: list[LoggedMessage],
    laser_mount: tuple[float, float, float],
    start: float,
    types: _RosTypes,
    static: list[Any],
    report: BagExport,
) -> list[tuple[float, str, Any]]:
    """``base_link -> laser``: on ``/tf``, turned by the wrist's pan and tilt, when the wrist is in the log;
    else fixed at ``laser_mount`` on ``static``."""
    if not wrist:
        static.append(types.transform(start, FRAME_BASE, FRAME_LASER, laser_mount, 0.0))
        return []
    items: list[tuple[float, str, Any]] = []
    for entry in wrist:
        state = entry.message
        assert isinstance(state, msgs.ActuatorState)
        pan = state.position[0] if state.position else 0.0
        tilt = state.position[1] if len(state.position) > 1 else 0.0
        tf = types.transform(state.stamp, FRAME_BASE, FRAME_LASER, laser_mount, pan, tilt)
        items.append((entry.log_time, TOPIC_TF, types.TFMessage(transforms=[tf])))
    report.notes.append(f"the laser turns with the wrist ({names.WRIST_STATE}): base_link -> laser is on /tf")
    return items


_TOPIC_TYPES = {
    TOPIC_SCAN: LASER_SCAN,
    TOPIC_ODOM: ODOMETRY,
    TOPIC_TF: TF_MESSAGE,
    TOPIC_TF_STATIC: TF_MESSAGE,
    TOPIC_CMD_VEL: TWIST,
}


def _write_bag(
    out: Path, items: list[tuple[float, str, Any]], types: _RosTypes, log: LogFile, report: BagExport
) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer

    try:
        with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
            connections: dict[str, Any] = {}
            for _t, topic, _m in items:
                if topic not in connections:
                    qos = _static_qos() if topic == TOPIC_TF_STATIC else []
                    connections[topic] = writer.add_connection(
                        topic, _TOPIC_TYPES[topic], typestore=types.store, offered_qos_profiles=qos
                    )
            for key, value in (
                ("pluto_version", __version__),
                ("source_file", log.path.name),
                ("time_base", log.info.get("time_base", "")),
                ("robot", log.info.get("robot", "")),
            ):
                writer.set_custom_data(key, value)
            for t, topic, message in items:
                data = types.store.serialize_cdr(message, _TOPIC_TYPES[topic])
                writer.write(connections[topic], to_ns(max(t, 0.0)), data)
                report.counts[topic] = report.counts.get(topic, 0) + 1
    except OSError as err:
        raise BagError(f"cannot write the bag {out}: {err.strerror or err}") from None
    except Exception as err:  # rosbags' own errors (WriterError...): the bag could not be written
        raise BagError(f"cannot write the bag {out}: {err}") from None
    if items:
        report.start, report.end = items[0][0], items[-1][0]


# -- reading -----------------------------------------------------------------------------------------------------------


def bag_kind(path: str | os.PathLike[str]) -> str | None:
    """``"ROS 2"`` for a ROS 2 bag (a folder with ``metadata.yaml``, an MCAP file of the ``ros2`` profile, an
    SQLite ``.db3``), ``"ROS 1"`` for a ROS 1 bag, None for anything else (a Pluto log, a CARMEN log...)."""
    source = Path(path)
    if source.is_dir():
        return "ROS 2" if (source / "metadata.yaml").is_file() else None
    try:
        with open(source, "rb") as file:
            head = file.read(64)
    except OSError:
        return None
    if head.startswith(_ROS1_MAGIC):
        return "ROS 1"
    if head.startswith(b"SQLite format 3\x00") and source.suffix == ".db3":
        return "ROS 2"
    if head.startswith(_MCAP_MAGIC) and len(head) >= 8 + 9 + 4:
        opcode = head[8]
        (size,) = struct.unpack_from("<I", head, 17)
        if opcode == 0x01 and size <= len(head) - 21 and head[21 : 21 + size] == b"ros2":
            return "ROS 2"
    return None


@dataclass
class _TopicInfo:
    name: str
    type: str
    count: int


def _topics(reader: Any) -> dict[str, _TopicInfo]:
    topics: dict[str, _TopicInfo] = {}
    for connection in reader.connections:
        info = topics.setdefault(connection.topic, _TopicInfo(connection.topic, connection.msgtype, 0))
        info.count += connection.msgcount
    return topics


def _describe(topics: dict[str, _TopicInfo]) -> str:
    if not topics:
        return "no topic"
    shown = [f"{t.name} ({t.type})" for t in sorted(topics.values(), key=lambda t: t.name)]
    return ", ".join(shown[:8]) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")


def _choose(
    source: Path,
    topics: dict[str, _TopicInfo],
    kinds: Sequence[str],
    named: str | None,
    option: str,
    preferred: Sequence[str],
    notes: list[str],
) -> _TopicInfo | None:
    """The topic of one of ``kinds`` to read: the one named, else the only one, else a preferred name, else the
    busiest (with a note)."""
    if named is not None:
        chosen = topics.get(named) or topics.get("/" + named.lstrip("/"))
        if chosen is None:
            raise BagError(f"{source} has no topic {named} ({option}); it has {_describe(topics)}")
        if chosen.type not in kinds:
            raise BagError(f"{source}: {chosen.name} is a {chosen.type}, not a {' or '.join(kinds)} ({option})")
        return chosen
    candidates = [t for t in topics.values() if t.type in kinds]
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    chosen = next((t for name in preferred for t in candidates if t.name == name), None)
    if chosen is None:
        chosen = max(candidates, key=lambda t: (t.count, t.name))
    others = ", ".join(t.name for t in candidates if t is not chosen)
    notes.append(f"{len(candidates)} {kinds[0]} topics: {chosen.name} is read ({others} not; {option} picks one)")
    return chosen


def _stamp(header: Any) -> float:
    return float(header.stamp.sec) + float(header.stamp.nanosec) * 1e-9


def _transform_of(ros: Any) -> _Transform:
    t, r = ros.transform.translation, ros.transform.rotation
    return _Transform((float(t.x), float(t.y), float(t.z)), (float(r.x), float(r.y), float(r.z), float(r.w)))


@dataclass
class _Mount:
    """The laser's mount in the odometry's frame: position (m), heading (rad), upside down."""

    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw: float = 0.0
    flipped: bool = False


def _mount(edges: dict[str, tuple[str, _Transform]], base: str, laser: str, notes: list[str], source: Path) -> _Mount:
    """The laser's mount from the chain of transforms ``base -> ... -> laser``."""
    if laser == base or not laser:
        return _Mount()
    chain = _IDENTITY
    frame = laser
    seen = {laser}
    while frame != base:
        step = edges.get(frame)
        if step is None or step[0] in seen:
            notes.append(
                f"no transform from {base} to the scans' frame {laser} in {source.name}: the laser is taken at "
                f"{base}'s origin, facing forward"
            )
            return _Mount()
        parent, transform = step
        chain = transform.then(chain)
        seen.add(parent)
        frame = parent
    x, y = chain.rotation[0], chain.rotation[1]
    flipped = 1.0 - 2.0 * (x * x + y * y) < 0.0  # the laser's z axis points down
    return _Mount(chain.translation, _yaw(chain.rotation), flipped)


def _pluto_scan(ros: Any, arrival: float, mount: _Mount) -> msgs.LaserScan:
    """A ``LaserScan`` as Pluto's (see the module docstring)."""
    count = len(ros.ranges)
    ranges = float32_decimals(ros.ranges)
    top = float(float32_decimals(np.float32(ros.range_max)))
    bottom = float(float32_decimals(np.float32(ros.range_min)))
    angles = beam_angles(ros.angle_min, ros.angle_increment, count)
    error = np.isnan(ranges) | (ranges < bottom)
    ranges[np.isposinf(ranges)] = top  # no echo; a finite range beyond range_max says the same to Pluto
    ranges[error] = -1.0
    if mount.flipped:
        angles, ranges = -angles[::-1], ranges[::-1]
    if mount.yaw != 0.0:
        angles = angles + mount.yaw
    valid = int(np.count_nonzero((ranges >= 0.0) & (ranges < top)))
    return msgs.LaserScan(
        stamp=_stamp(ros.header),
        arrival=arrival,
        ranges=ranges.tolist(),
        angles=angles.tolist(),
        count=valid,
        max_range=top,
    )


def _chosen_topics(
    reader: Any, source: Path, named: tuple[str | None, str | None, str | None], notes: list[str]
) -> tuple[_TopicInfo, _TopicInfo | None, _TopicInfo | None, set[str]]:
    """The scan, odometry and command topics to read (``named``: as given, None to choose by type) and the names of
    every topic read (those and the transforms); a note names the topics left.

    Raises:
        BagError: no LaserScan topic, or a named topic the bag does not have or of another type.
    """
    scan_topic, odom_topic, cmd_topic = named
    topics = _topics(reader)
    scan = _choose(source, topics, (LASER_SCAN,), scan_topic, "--scan-topic", (TOPIC_SCAN, "scan"), notes)
    if scan is None:
        raise BagError(
            f"{source} has no {LASER_SCAN} topic, which Pluto reads the laser from; it has {_describe(topics)}"
        )
    odom = _choose(source, topics, (ODOMETRY,), odom_topic, "--odom-topic", (TOPIC_ODOM, "odom"), notes)
    cmd = _choose(source, topics, (TWIST, TWIST_STAMPED), cmd_topic, "--cmd-topic", (TOPIC_CMD_VEL, "cmd_vel"), notes)
    tf_topics = [t for t in topics.values() if t.type == TF_MESSAGE]
    read = [t for t in (scan, odom, cmd) if t is not None] + tf_topics
    left = sorted(t.name for t in topics.values() if t not in read)
    if left:
        notes.append(f"topics not read: {', '.join(left)}")
    return scan, odom, cmd, {t.name for t in read}


def read_rosbag(
    path: str | os.PathLike[str],
    *,
    scan_topic: str | None = None,
    odom_topic: str | None = None,
    cmd_topic: str | None = None,
) -> LogFile:
    """A ROS 1 or ROS 2 bag as a Pluto log in memory (see the module docstring).

    Args:
        path: the bag: a ROS 2 bag's folder (or its ``.mcap`` or ``.db3`` file), or a ROS 1 ``.bag`` file.
        scan_topic, odom_topic, cmd_topic: the topics to read (default: chosen by type).

    Returns:
        The log: ``Sick/Scan_mm``, ``Sick/Timing``, ``Base/Drive/State``, ``Base/Drive/Command`` at the bag's
        times; its ``pluto`` metadata names the topics read and the laser's mount (``laser_mount``, "x y z" in m).

    Raises:
        BagError: not a bag, a bag that cannot be read, no ``LaserScan`` topic, a named topic that the bag does
            not have or of another type.
    """
    source = Path(path)
    kind = bag_kind(source)
    if kind is None:
        raise BagError(
            f"{source} is not a ROS bag (a ROS 2 bag's folder with metadata.yaml or its .mcap or .db3 file, or a "
            "ROS 1 .bag file)"
        )
    if kind == "ROS 1" and source.suffix != ".bag":
        raise BagError(f"{source} is a ROS 1 bag: its name must end in .bag to be read")
    from rosbags.highlevel import AnyReader

    notes: list[str] = []
    try:
        with AnyReader([source]) as reader:
            scan, odom, cmd, wanted = _chosen_topics(reader, source, (scan_topic, odom_topic, cmd_topic), notes)
            connections = [c for c in reader.connections if c.topic in wanted]
            converted = _convert(reader, connections, scan.name, odom, cmd, source, notes)
    except BagError:
        raise
    except Exception as err:  # the bag library's errors on a damaged or unreadable bag
        reason = " ".join(str(err).split()) or type(err).__name__  # one line, whatever the library said
        raise BagError(f"cannot read the ROS bag {source}: {reason}") from None
    messages, mount, odom_name = converted
    metadata = {
        "robot": source.stem,
        "start_time": "",
        "time_base": "log",
        "source": "rosbag2" if kind == "ROS 2" else "rosbag1",
        "source_file": source.name,
        "scan_topic": scan.name,
        "odom_topic": odom_name,
        "cmd_topic": cmd.name if cmd is not None else "",
        "laser_mount": " ".join(repr(v) for v in mount.position),
        "pluto_version": __version__,
    }
    return LogFile.from_messages(source, messages, metadata=metadata, notes=notes)


def _convert(
    reader: Any,
    connections: list[Any],
    scan_name: str,
    odom: _TopicInfo | None,
    cmd: _TopicInfo | None,
    source: Path,
    notes: list[str],
) -> tuple[list[tuple[str, msgs.Message, float]], _Mount, str]:
    """The Pluto messages of the chosen topics, the laser's mount, and where the odometry came from."""
    read = _BagRead()
    bad = Counter[str]()
    for connection, timestamp, raw in reader.messages(connections=connections):
        t = timestamp * 1e-9
        try:
            message = reader.deserialize(raw, connection.msgtype)
        except Exception:  # a message that does not decode as its type: counted, the rest is read
            bad[connection.topic] += 1
            continue
        kind = connection.msgtype
        if connection.topic == scan_name:
            read.add_scan(t, message)
        elif odom is not None and connection.topic == odom.name:
            read.add_odometry(t, message)
        elif cmd is not None and connection.topic == cmd.name:
            read.add_command(t, message, stamped=kind == TWIST_STAMPED)
        elif kind == TF_MESSAGE:
            read.add_transforms(t, message, latched=connection.topic.endswith("tf_static"))
    for topic, count in bad.items():
        notes.append(f"{count} messages of {topic} did not decode as their type and were left out")
    odom_name = read.settle_odometry(odom.name if odom is not None else "", notes)
    edges = {**{k: v for k, v in read.dynamic.items() if v[0] != FRAME_ODOM}, **read.static}
    mount = _mount(edges, read.base, read.scan_frame.lstrip("/"), notes, source)
    return _pluto_messages(read, mount), mount, odom_name


@dataclass
class _BagRead:
    """What the chosen topics of a bag hold, in bag order (times ``t`` are the bag's, s).

    Attributes:
        scans: (t, ROS LaserScan).
        odometry: (t, stamp, x, y, yaw, v, ω) of the odometry topic.
        tf_odometry: per child frame, (t, stamp, x, y, yaw) of ``odom -> child`` on ``/tf``.
        commands: (t, stamp, v, ω).
        static, dynamic: per child frame, its parent and the transform (latched; the first one on ``/tf``).
        base: the robot's frame (the odometry's child frame).
        scan_frame: the scans' frame.
    """

    scans: list[tuple[float, Any]] = field(default_factory=list)
    odometry: list[tuple[float, float, float, float, float, float, float]] = field(default_factory=list)
    tf_odometry: dict[str, list[tuple[float, float, float, float, float]]] = field(default_factory=dict)
    commands: list[tuple[float, float, float, float]] = field(default_factory=list)
    static: dict[str, tuple[str, _Transform]] = field(default_factory=dict)
    dynamic: dict[str, tuple[str, _Transform]] = field(default_factory=dict)
    base: str = FRAME_BASE
    scan_frame: str = ""

    def add_scan(self, t: float, message: Any) -> None:
        self.scans.append((t, message))
        self.scan_frame = self.scan_frame or str(message.header.frame_id)

    def add_odometry(self, t: float, message: Any) -> None:
        p, q = message.pose.pose.position, message.pose.pose.orientation
        yaw = _yaw((float(q.x), float(q.y), float(q.z), float(q.w)))
        twist = message.twist.twist
        self.odometry.append(
            (t, _stamp(message.header), float(p.x), float(p.y), yaw, float(twist.linear.x), float(twist.angular.z))
        )
        self.base = str(message.child_frame_id) or self.base

    def add_command(self, t: float, message: Any, *, stamped: bool) -> None:
        twist = message.twist if stamped else message
        stamp = _stamp(message.header) if stamped else t
        self.commands.append((t, stamp, float(twist.linear.x), float(twist.angular.z)))

    def add_transforms(self, t: float, message: Any, *, latched: bool) -> None:
        for ros in message.transforms:
            parent, child = str(ros.header.frame_id).lstrip("/"), str(ros.child_frame_id).lstrip("/")
            edge = (parent, _transform_of(ros))
            if latched:
                self.static[child] = edge
                continue
            self.dynamic.setdefault(child, edge)
            if parent == FRAME_ODOM:
                tr = edge[1]
                self.tf_odometry.setdefault(child, []).append(
                    (t, _stamp(ros.header), tr.translation[0], tr.translation[1], _yaw(tr.rotation))
                )

    def settle_odometry(self, odom_name: str, notes: list[str]) -> str:
        """Without an odometry topic, the busiest ``odom -> child`` of ``/tf`` is the odometry (with a note).
        Returns where the odometry came from (``""``: nowhere)."""
        if not self.odometry and self.tf_odometry:
            child, rows = max(self.tf_odometry.items(), key=lambda item: len(item[1]))
            self.odometry = [(t, stamp, x, y, yaw, 0.0, 0.0) for t, stamp, x, y, yaw in rows]
            self.base, odom_name = child, f"{TOPIC_TF} ({FRAME_ODOM} -> {child})"
            notes.append(f"no {ODOMETRY} topic: the odometry is the {FRAME_ODOM} -> {child} transforms of {TOPIC_TF}")
        elif not self.odometry:
            notes.append(
                f"no odometry: the bag has no {ODOMETRY} topic and no {FRAME_ODOM} -> transforms on {TOPIC_TF}"
            )
        return odom_name


def _pluto_messages(read: _BagRead, mount: _Mount) -> list[tuple[str, msgs.Message, float]]:
    """The Pluto messages of what was read, (interface, message, t) by time."""
    out: list[tuple[str, msgs.Message, float]] = []
    for t, ros in read.scans:
        scan = _pluto_scan(ros, t, mount)
        out.append((names.SICK_SCAN_MM.name, scan, t))
        out.append((names.SICK_TIMING.name, msgs.ScanTiming(stamp=scan.stamp, count=len(scan.ranges)), t))
    if read.odometry:
        headings = np.unwrap(np.array([row[4] for row in read.odometry]))  # continuous, as Pluto's odometry is
        for row, theta in zip(read.odometry, headings.tolist(), strict=True):
            t, stamp, x, y, _, v, omega = row
            out.append(
                (names.BASE_DRIVE_STATE.name, msgs.Odometry(stamp=stamp, x=x, y=y, theta=theta, v=v, omega=omega), t)
            )
    for t, stamp, v, omega in read.commands:
        out.append((names.BASE_DRIVE_COMMAND.name, msgs.ActuatorState(stamp=stamp, velocity=[v, omega]), t))
    out.sort(key=lambda item: item[2])
    return out


def open_log(
    path: str | os.PathLike[str],
    *,
    scan_topic: str | None = None,
    odom_topic: str | None = None,
    cmd_topic: str | None = None,
) -> LogFile:
    """A Pluto log, or a ROS bag read as one (:func:`read_rosbag`).

    Raises:
        LogError: the log cannot be read; :class:`BagError` for a bag, or for topics named for a file that is not
            a bag.
    """
    if bag_kind(path) is not None:
        return read_rosbag(path, scan_topic=scan_topic, odom_topic=odom_topic, cmd_topic=cmd_topic)
    named = [
        option
        for option, value in (("--scan-topic", scan_topic), ("--odom-topic", odom_topic), ("--cmd-topic", cmd_topic))
        if value is not None
    ]
    if named:
        raise BagError(f"{path} is not a ROS bag: {', '.join(named)} name topics of a bag only")
    return LogFile(path)
