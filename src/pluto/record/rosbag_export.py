"""A Pluto log exported as a ROS 2 bag (:func:`export_rosbag2`), with ``rosbags`` (pure Python: no ROS
installation) and the standard types ``sensor_msgs/LaserScan``, ``nav_msgs/Odometry``, ``tf2_msgs/TFMessage`` and
``geometry_msgs/Twist``. Imported from :mod:`.rosbag` too.

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

A bag that cannot be written raises :class:`~.ros.BagError` naming it and the reason.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pluto import __version__, msgs, names
from pluto.record.format import to_ns
from pluto.record.logfile import LogFile, LoggedMessage
from pluto.record.ros import (
    FRAME_BASE,
    FRAME_LASER,
    FRAME_MAP,
    FRAME_ODOM,
    LASER_SCAN,
    ODOMETRY,
    TF_MESSAGE,
    TOPIC_CMD_VEL,
    TOPIC_ODOM,
    TOPIC_SCAN,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TWIST,
    BagError,
    compose_inverse,
    quaternion,
)

__all__ = ["BagExport", "export_rosbag2"]

FloatArray = npt.NDArray[np.float64]


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
        x, y, z, w = quaternion(yaw, pitch)
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
            moved = compose_inverse(pose, _interpolate_odometry(table, stamp))
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
