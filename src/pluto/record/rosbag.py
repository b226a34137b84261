"""ROS bags both ways: a Pluto log exported as a ROS 2 bag, and ROS 1 and ROS 2 bags read as Pluto logs.

Both use ``rosbags`` (pure Python: no ROS installation), with the standard types ``sensor_msgs/LaserScan``,
``nav_msgs/Odometry``, ``tf2_msgs/TFMessage`` and ``geometry_msgs/Twist`` (``TwistStamped`` read too).

Export (:func:`export_rosbag2`, ``pluto log export --rosbag2 DIR LOG``) is :mod:`.rosbag_export`; what both
sides share (frames, topics, types, 32-bit floats, rotations) is :mod:`.ros`. Both are imported from here.

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

import os
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pluto import __version__, msgs, names
from pluto.record.logfile import LogFile
from pluto.record.ros import (
    FRAME_BASE,
    FRAME_LASER,
    FRAME_MAP,
    FRAME_ODOM,
    IDENTITY,
    LASER_SCAN,
    ODOMETRY,
    TF_MESSAGE,
    TOPIC_CMD_VEL,
    TOPIC_ODOM,
    TOPIC_SCAN,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TWIST,
    TWIST_STAMPED,
    BagError,
    Transform,
    beam_angles,
    float32_decimals,
    yaw,
)
from pluto.record.rosbag_export import BagExport, export_rosbag2

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

_MCAP_MAGIC = b"\x89MCAP0\r\n"
_ROS1_MAGIC = b"#ROSBAG V2.0"


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


def _transform_of(ros: Any) -> Transform:
    t, r = ros.transform.translation, ros.transform.rotation
    return Transform((float(t.x), float(t.y), float(t.z)), (float(r.x), float(r.y), float(r.z), float(r.w)))


@dataclass
class _Mount:
    """The laser's mount in the odometry's frame: position (m), heading (rad), upside down."""

    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw: float = 0.0
    flipped: bool = False


def _mount(edges: dict[str, tuple[str, Transform]], base: str, laser: str, notes: list[str], source: Path) -> _Mount:
    """The laser's mount from the chain of transforms ``base -> ... -> laser``."""
    if laser == base or not laser:
        return _Mount()
    chain = IDENTITY
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
    return _Mount(chain.translation, yaw(chain.rotation), flipped)


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
    static: dict[str, tuple[str, Transform]] = field(default_factory=dict)
    dynamic: dict[str, tuple[str, Transform]] = field(default_factory=dict)
    base: str = FRAME_BASE
    scan_frame: str = ""

    def add_scan(self, t: float, message: Any) -> None:
        self.scans.append((t, message))
        self.scan_frame = self.scan_frame or str(message.header.frame_id)

    def add_odometry(self, t: float, message: Any) -> None:
        p, q = message.pose.pose.position, message.pose.pose.orientation
        heading = yaw((float(q.x), float(q.y), float(q.z), float(q.w)))
        twist = message.twist.twist
        self.odometry.append(
            (t, _stamp(message.header), float(p.x), float(p.y), heading, float(twist.linear.x), float(twist.angular.z))
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
                    (t, _stamp(ros.header), tr.translation[0], tr.translation[1], yaw(tr.rotation))
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
