"""The interface names of the robot, in one place.

Names and meanings follow the original robot software (its CORBA names; docs/design.md), except that the base is
``Base/`` whatever the robot is. Each interface has one message type; the bus refuses to write another type and counts
received bytes that do not decode as that type.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from pluto import msgs

M = TypeVar("M", bound=msgs.Message)


class Topic(str, Generic[M]):
    """An interface's name that also knows its message type: ``bus.create_reader(names.BASE_DRIVE_STATE)`` is a
    ``StateReader[Odometry]``. A ``Topic`` is a ``str`` (equal to and hashing as its name), so it goes wherever a
    name goes.

    Attributes:
        type: the message type the interface carries.
    """

    type: builtins.type[M]

    def __new__(cls, name: str, type_: builtins.type[M]) -> Topic[M]:
        topic = super().__new__(cls, name)
        topic.type = type_
        return topic

    def __reduce__(self) -> tuple[Any, ...]:
        return (Topic, (str(self), self.type))

    @property
    def name(self) -> str:
        """The interface name, a plain ``str``."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, {self.type.__name__})"


# -- the interfaces (names as in the original robot software, docs/design.md) -------------------------------------


@dataclass(frozen=True)
class Interface:
    """An interface: its topic (name and message type), and who writes and reads it."""

    topic: Topic[Any]
    writer: str
    readers: str
    description: str
    period: float | None = None
    """s between two values of a writer at its nominal rate (the slowest of its usual writers); None for an
    interface written only now and then (its readers set no deadline)."""
    latency: float = 0.0
    """s a value's stamp is already old when it is written (a scan stamped at the centre of its sweep, a pose that
    waits for the inertial unit)."""

    @property
    def name(self) -> str:
        return self.topic.name

    @property
    def type(self) -> type[msgs.Message]:
        return self.topic.type


def _table(*rows: Interface) -> dict[str, Interface]:
    return {row.name: row for row in rows}


BASE_DRIVE_COMMAND: Final = Topic("Base/Drive/Command", msgs.ActuatorState)
BASE_DRIVE_STATE: Final = Topic("Base/Drive/State", msgs.Odometry)
BASE_SONAR: Final = Topic("Base/Sonar", msgs.SonarScan)
BASE_CONTACT: Final = Topic("Base/Contact", msgs.Contact)
BASE_POWER: Final = Topic("Base/Power", msgs.Power)
BASE_STATUS: Final = Topic("base/status", msgs.FVectorState)
SICK_SCAN: Final = Topic("Sick/Scan", msgs.LaserScan)
SICK_SCAN_MM: Final = Topic("Sick/Scan_mm", msgs.LaserScan)
SICK_TIMING: Final = Topic("Sick/Timing", msgs.ScanTiming)
SICK_STATUS: Final = Topic("sick/status", msgs.FVectorState)
SICK_REAR_SCAN_MM: Final = Topic("Sick/Rear/Scan_mm", msgs.LaserScan)
DMU_RAW: Final = Topic("DMU/Raw", msgs.DmuRaw)
DMU_STATE: Final = Topic("DMU/State", msgs.DmuState)
DMU_STATUS: Final = Topic("dmu/status", msgs.FVectorState)
WRIST_COMMAND: Final = Topic("Wrist/Command", msgs.ActuatorState)
WRIST_STATE: Final = Topic("Wrist/State", msgs.ActuatorState)
WRIST_STATUS: Final = Topic("wrist/status", msgs.FVectorState)
GPS_STATE: Final = Topic("GPS/State", msgs.GpsFix)
GPS_STATUS: Final = Topic("gps/status", msgs.FVectorState)
LOCALIZATION_DEAD_RECKONING: Final = Topic("Localization/Dead-Reckoning", msgs.PoseEstimate)
LOCALIZATION_LASER_DEAD_RECKONING: Final = Topic("Localization/Laser_Dead-Reckoning", msgs.PoseEstimate)
LOCALIZATION_POST_POSE: Final = Topic("Localization/Post_Pose", msgs.PoseEstimate)
LOCALIZATION_POSE: Final = Topic("Localization/Pose", msgs.PoseEstimate)
LOCALIZATION_LASER_POSE: Final = Topic("Localization/Laser_Pose", msgs.PoseEstimate)
LOCALIZATION_STATUS: Final = Topic("localization/status", msgs.FVectorState)
DRIVE_COMMAND: Final = Topic("drive/command", msgs.ActuatorState)
DRIVE_STATUS: Final = Topic("drive/status", msgs.FVectorState)
AVOIDANCE_COMMAND: Final = Topic("avoidance/command", msgs.ActuatorState)
AVOIDANCE_STATUS: Final = Topic("avoidance/status", msgs.FVectorState)
MOTION_COMMAND: Final = Topic("motion/command", msgs.ActuatorState)
MOTION_STATUS: Final = Topic("motion/status", msgs.FVectorState)
FOLLOW_COMMAND: Final = Topic("follow/command", msgs.ActuatorState)
FOLLOW_STATUS: Final = Topic("follow/status", msgs.FVectorState)
POSE_STATUS: Final = Topic("pose/status", msgs.FVectorState)
SLAM_STATUS: Final = Topic("slam/status", msgs.FVectorState)
ARM_COMMAND: Final = Topic("Arm/Command", msgs.ActuatorState)
ARM_STATE: Final = Topic("Arm/State", msgs.ActuatorState)
NETMOTION_STATUS: Final = Topic("netmotion/status", msgs.FVectorState)
CLOCK: Final = Topic("Clock", msgs.SimTime)
SIM_TRUTH: Final = Topic("Sim/Truth", msgs.Odometry)
HEARTBEAT: Final = Topic("Heartbeat", msgs.Heartbeat)
HEARTBEAT_MONITOR: Final = Topic("Heartbeat/Monitor", msgs.FVectorState)

INTERFACES: dict[str, Interface] = _table(
    Interface(
        BASE_DRIVE_COMMAND,
        "drive",
        "base",
        "Velocity command: velocity[0] = v (m/s), velocity[1] = ω (rad/s); cmd_flags 0.",
        period=0.1,
    ),
    Interface(
        BASE_DRIVE_STATE,
        "base",
        "all",
        "Odometry: x, y, θ, v, ω.",
        period=0.1,
    ),
    Interface(
        BASE_SONAR,
        "base",
        "all",
        "Sonar ring ranges.",
        period=0.1,
    ),
    Interface(
        BASE_CONTACT,
        "base",
        "all",
        "Bumpers and motor stall.",
        period=0.1,
    ),
    Interface(
        BASE_POWER,
        "base",
        "all",
        "Battery.",
        period=0.1,
    ),
    Interface(
        BASE_STATUS,
        "base",
        "clients",
        "Link to the robot: data = [s since the robot last answered]; element = [link up 1/0, reconnects].",
    ),
    Interface(
        SICK_SCAN,
        "sick",
        "all",
        "181 points, stamped on arrival (old-compatible).",
        period=0.2,
    ),
    Interface(
        SICK_SCAN_MM,
        "sick",
        "all",
        "All points (361), stamped at the centre of the scan.",
        period=0.2,
        latency=0.2,
    ),
    Interface(
        SICK_TIMING,
        "sick",
        "localization",
        "Time the scan was taken, number of points.",
        period=0.2,
        latency=0.2,
    ),
    Interface(
        SICK_STATUS,
        "sick",
        "clients",
        "A real scanner's link: data = [s since it last answered]; element = [link up 1/0, reconnects, bytes "
        "dropped, faults].",
    ),
    Interface(
        SICK_REAR_SCAN_MM,
        "replay",
        "all",
        "A rear-facing scanner's scans (imported logs with a second laser), as Sick/Scan_mm.",
    ),
    Interface(
        DMU_RAW,
        "dmu",
        "localization",
        "Inertial unit data, z up.",
        period=0.05,
        latency=0.2,
    ),
    Interface(
        DMU_STATE,
        "dmu",
        "localization",
        "Integrated heading, pitch, roll, filtered rates.",
        period=0.05,
        latency=0.2,
    ),
    Interface(
        DMU_STATUS,
        "dmu",
        "clients",
        "A real inertial unit's link: data = [s since it last answered]; element = [link up 1/0, reconnects, bytes "
        "dropped].",
    ),
    Interface(
        WRIST_COMMAND,
        "clients",
        "wrist",
        "Pan/tilt command: position, velocity, force = (pan, tilt) in rad, rad/s, rad/s².",
    ),
    Interface(
        WRIST_STATE,
        "wrist",
        "all",
        "Pan/tilt state, as the command.",
        period=0.05,
    ),
    Interface(
        WRIST_STATUS,
        "wrist",
        "clients",
        "A real pan/tilt unit's link: data = [s since it last answered]; element = [link up 1/0, reconnects, "
        "malformed frames].",
    ),
    Interface(
        GPS_STATE,
        "gps",
        "all",
        "GPS fix on a local metric grid.",
        period=1.0,
    ),
    Interface(
        GPS_STATUS,
        "gps",
        "clients",
        "A real receiver's link: data = [s since its last good sentence]; element = [link up 1/0, reconnects, "
        "sentences with a bad checksum].",
    ),
    Interface(
        LOCALIZATION_DEAD_RECKONING,
        "localization",
        "all",
        "(0) Dead reckoning of the robot since start, 6-D; continuous.",
        period=0.05,
        latency=0.25,
    ),
    Interface(
        LOCALIZATION_LASER_DEAD_RECKONING,
        "localization",
        "pose, slam",
        "(1) Laser and wrist at the time of the latest scan, 8-D; incremental covariance.",
        period=0.2,
        latency=0.45,
    ),
    Interface(
        LOCALIZATION_POST_POSE,
        "pose, slam",
        "localization",
        "(2) Improved poses posted to the service; cmd_flags is the setter (< 0 robot pose); stamp 0: now.",
    ),
    Interface(
        LOCALIZATION_POSE,
        "localization",
        "all",
        "(3) Interface 0 adjusted by 2.",
        period=0.05,
        latency=0.25,
    ),
    Interface(
        LOCALIZATION_LASER_POSE,
        "localization",
        "pose, slam",
        "(4) Interface 1 adjusted by 2.",
        period=0.2,
        latency=0.45,
    ),
    Interface(
        LOCALIZATION_STATUS,
        "localization",
        "clients",
        "data = [dead-reckoning age s, inertial unit age s]; element = [setter, inertial unit ok 1/0].",
        period=0.05,
    ),
    Interface(
        DRIVE_COMMAND,
        "avoid",
        "drive",
        "Drive command (cmd_flags 0, 1, 10, 11).",
    ),
    Interface(
        DRIVE_STATUS,
        "drive",
        "avoid",
        "Commanded velocities and obstacle code.",
        period=0.05,
    ),
    Interface(
        AVOIDANCE_COMMAND,
        "motion",
        "avoid",
        "Avoid command (cmd_flags 10·A + T).",
    ),
    Interface(
        AVOIDANCE_STATUS,
        "avoid",
        "motion",
        "Avoid status.",
        period=0.1,
    ),
    Interface(
        MOTION_COMMAND,
        "clients",
        "motion",
        "Motion command (moveto, explore, ...).",
    ),
    Interface(
        MOTION_STATUS,
        "motion",
        "clients",
        "Motion status.",
        period=0.1,
    ),
    Interface(
        FOLLOW_COMMAND,
        "clients",
        "follow",
        "Follow command: cmd_flags 1 start (velocity[0] = distance m, optional), 0 stop, -1 release.",
    ),
    Interface(
        FOLLOW_STATUS,
        "follow",
        "clients",
        "element = [thread 0 / -10, code: 0 idle, 1 searching, 2 following, 3 too close, -1 lost, -2 no scan, "
        "-3 no pose]; data = [target x, y m, distance m, bearing rad, v m/s, ω rad/s].",
        period=0.1,
    ),
    Interface(
        POSE_STATUS,
        "pose",
        "clients",
        "Pose module command/status.",
        period=0.05,
    ),
    Interface(
        SLAM_STATUS,
        "slam",
        "clients",
        "SLAM module command/status.",
        period=0.05,
    ),
    Interface(
        ARM_COMMAND,
        "clients",
        "arm",
        "Joint command.",
    ),
    Interface(
        ARM_STATE,
        "arm",
        "all",
        "Joint values as commanded.",
    ),
    Interface(
        NETMOTION_STATUS,
        "netmotion",
        "clients",
        "data = [datagrams, oversized, rate-limited, refused, failures]; element = [motions, clients, UDP port].",
    ),
    Interface(
        CLOCK,
        "sim",
        "all",
        "Simulated time.",
    ),
    Interface(
        SIM_TRUTH,
        "base (simulated)",
        "tests, plots",
        "True pose of the simulated robot in the world frame; never for robot modules.",
    ),
    Interface(
        HEARTBEAT,
        "heartbeat",
        "heartbeat-monitor",
        "A counter, to check the bus.",
    ),
    Interface(
        HEARTBEAT_MONITOR,
        "heartbeat-monitor",
        "clients",
        "data = [rate Hz, age s] of Heartbeat; element = [beats received, lost (0/1)].",
    ),
)

STALE_PERIODS: Final = 4
"""A state is stale once its stamp is older than its latency plus this many periods of its writer (a few values
lost in a row): see :func:`stale_after`."""


def stale_after(name: str) -> float | None:
    """How old (s, stamp to the reader's clock) a value of state interface ``name`` may be before a reader that acts on
    it treats it as absent: the interface's latency plus :data:`STALE_PERIODS` periods of its writer. None for an
    interface without a declared period (a value written now and then, one not in the table). A command's receiver
    measures its age on arrival instead (:data:`COMMANDS`; the base's is this deadline of ``Base/Drive/Command``).

    This is the freshness contract of docs/design.md (principle 8), declared once here from the writers' rates; a
    module's readers take it as their deadline (:meth:`pluto.runtime.module.Module.create_reader`).
    """
    row = INTERFACES.get(name)
    if row is None or row.period is None:
        return None
    return round(row.latency + STALE_PERIODS * row.period, 6)


COMMANDS: dict[str, float] = {
    "Base/Drive/Command": 0.4,
    "drive/command": 4.0,
    "avoidance/command": 4.0,
    "motion/command": 4.0,
    "Wrist/Command": 1.0,
    "Arm/Command": 1.0,
}
"""The command interfaces, with how long (s, by the receiver's clock) a command stays good after it arrived.

Commands are not states (docs/design.md, principle 5): the bus never hands a command to a reader that joins after it was
written, and a reader returns nothing once the newest command is older than this. The ages are those of the
receivers' own timeouts (the base's 0.4 s: the deadline of ``Base/Drive/Command`` by
:func:`stale_after`, whose regular writers write at least every 0.1 s; the drive's 4 s, the spec's timeout of a
command given by hand); a receiver may keep a goal it was given for longer.
"""


def command_max_age(name: str) -> float | None:
    """How long a command on ``name`` stays good after it arrived (s), or None if ``name`` is not a command."""
    return COMMANDS.get(name)


LOCALIZATION_INTERFACES: tuple[str, ...] = (
    "Localization/Dead-Reckoning",
    "Localization/Laser_Dead-Reckoning",
    "Localization/Post_Pose",
    "Localization/Pose",
    "Localization/Laser_Pose",
)
"""The five pose interfaces in the numbering of the localization proxy (bit n of its mask selects number n)."""

_FORBIDDEN = set("*$?#")


def check_name(name: str) -> str:
    """Return ``name`` if it can name an interface on the bus.

    Raises:
        ValueError: empty, with empty chunks, or containing one of ``* $ ? #``.
    """
    if not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise ValueError(f"bad interface name {name!r}: empty or with empty parts")
    if _FORBIDDEN & set(name) or name.startswith("@") or "/@" in name:
        raise ValueError(f"bad interface name {name!r}: may not contain * $ ? # or start a part with @")
    return str(name)  # a plain str, also for a Topic


def interface(name: str) -> Interface:
    """Return the table entry of a known interface.

    Raises:
        KeyError: no interface of that name.
    """
    try:
        return INTERFACES[name]
    except KeyError:
        raise KeyError(f"unknown interface {name!r}; `pluto list --all` shows the known ones") from None


def message_type_of(name: str) -> type[msgs.Message] | None:
    """Return the message type of a known interface, or None for an interface not in the table."""
    if isinstance(name, Topic):
        return name.type
    row = INTERFACES.get(name)
    return row.type if row else None
