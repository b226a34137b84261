"""The interface names of the robot, in one place.

Names and meanings follow the original robot software (its CORBA names), except that the base is ``Base/`` whatever
the robot is. Each interface has one message type; the bus refuses to write another type and counts received bytes
that do not decode as that type.
"""

from __future__ import annotations

from dataclasses import dataclass

from pluto import msgs


@dataclass(frozen=True)
class Interface:
    """An interface: its name on the bus, its message type, and who writes and reads it."""

    name: str
    type: type[msgs.Message]
    writer: str
    readers: str
    description: str


def _table(*rows: Interface) -> dict[str, Interface]:
    return {row.name: row for row in rows}


INTERFACES: dict[str, Interface] = _table(
    Interface(
        "Base/Drive/Command",
        msgs.ActuatorState,
        "drive",
        "base",
        "Velocity command: velocity[0] = v (m/s), velocity[1] = ω (rad/s); cmd_flags 0.",
    ),
    Interface("Base/Drive/State", msgs.Odometry, "base", "all", "Odometry: x, y, θ, v, ω."),
    Interface("Base/Sonar", msgs.SonarScan, "base", "all", "Sonar ring ranges."),
    Interface("Base/Contact", msgs.Contact, "base", "all", "Bumpers and motor stall."),
    Interface("Base/Power", msgs.Power, "base", "all", "Battery."),
    Interface(
        "base/status",
        msgs.FVectorState,
        "base",
        "clients",
        "Link to the robot: data = [s since the robot last answered]; element = [link up 1/0, reconnects].",
    ),
    Interface("Sick/Scan", msgs.LaserScan, "sick", "all", "181 points, stamped on arrival (old-compatible)."),
    Interface("Sick/Scan_mm", msgs.LaserScan, "sick", "all", "All points (361), stamped at the centre of the scan."),
    Interface("Sick/Timing", msgs.ScanTiming, "sick", "localization", "Time the scan was taken, number of points."),
    Interface(
        "Sick/Rear/Scan_mm",
        msgs.LaserScan,
        "replay",
        "all",
        "A rear-facing scanner's scans (imported logs with a second laser), as Sick/Scan_mm.",
    ),
    Interface("DMU/Raw", msgs.DmuRaw, "dmu", "localization", "Inertial unit data, z up."),
    Interface("DMU/State", msgs.DmuState, "dmu", "localization", "Integrated heading, pitch, roll, filtered rates."),
    Interface(
        "Wrist/Command",
        msgs.ActuatorState,
        "clients",
        "wrist",
        "Pan/tilt command: position, velocity, force = (pan, tilt) in rad, rad/s, rad/s².",
    ),
    Interface("Wrist/State", msgs.ActuatorState, "wrist", "all", "Pan/tilt state, as the command."),
    Interface("GPS/State", msgs.GpsFix, "gps", "all", "GPS fix on a local metric grid."),
    Interface(
        "Localization/Dead-Reckoning",
        msgs.PoseEstimate,
        "localization",
        "all",
        "(0) Dead reckoning of the robot since start, 6-D; continuous.",
    ),
    Interface(
        "Localization/Laser_Dead-Reckoning",
        msgs.PoseEstimate,
        "localization",
        "pose, slam",
        "(1) Laser and wrist at the time of the latest scan, 8-D; incremental covariance.",
    ),
    Interface(
        "Localization/Post_Pose",
        msgs.PoseEstimate,
        "pose, slam",
        "localization",
        "(2) Improved poses posted to the service; cmd_flags is the setter (< 0 robot pose); stamp 0: now.",
    ),
    Interface("Localization/Pose", msgs.PoseEstimate, "localization", "all", "(3) Interface 0 adjusted by 2."),
    Interface(
        "Localization/Laser_Pose", msgs.PoseEstimate, "localization", "pose, slam", "(4) Interface 1 adjusted by 2."
    ),
    Interface(
        "localization/status",
        msgs.FVectorState,
        "localization",
        "clients",
        "data = [dead-reckoning age s, inertial unit age s]; element = [setter, inertial unit ok 1/0].",
    ),
    Interface("drive/command", msgs.ActuatorState, "avoid", "drive", "Drive command (cmd_flags 0, 1, 10, 11)."),
    Interface("drive/status", msgs.FVectorState, "drive", "avoid", "Commanded velocities and obstacle code."),
    Interface("avoidance/command", msgs.ActuatorState, "motion", "avoid", "Avoid command (cmd_flags 10·A + T)."),
    Interface("avoidance/status", msgs.FVectorState, "avoid", "motion", "Avoid status."),
    Interface("motion/command", msgs.ActuatorState, "clients", "motion", "Motion command (moveto, explore, ...)."),
    Interface("motion/status", msgs.FVectorState, "motion", "clients", "Motion status."),
    Interface("pose/status", msgs.FVectorState, "pose", "clients", "Pose module command/status."),
    Interface("slam/status", msgs.FVectorState, "slam", "clients", "SLAM module command/status."),
    Interface("Arm/Command", msgs.ActuatorState, "clients", "arm", "Joint command."),
    Interface("Arm/State", msgs.ActuatorState, "arm", "all", "Joint values as commanded."),
    Interface(
        "netmotion/status",
        msgs.FVectorState,
        "netmotion",
        "clients",
        "data = [datagrams, oversized, rate-limited, refused, failures]; element = [motions, clients, UDP port].",
    ),
    Interface("Clock", msgs.SimTime, "sim", "all", "Simulated time."),
    Interface(
        "Sim/Truth",
        msgs.Odometry,
        "base (simulated)",
        "tests, plots",
        "True pose of the simulated robot in the world frame; never for robot modules.",
    ),
    Interface("Heartbeat", msgs.Heartbeat, "heartbeat", "heartbeat-monitor", "A counter, to check the bus."),
    Interface(
        "Heartbeat/Monitor",
        msgs.FVectorState,
        "heartbeat-monitor",
        "clients",
        "data = [rate Hz, age s] of Heartbeat; element = [beats received, lost (0/1)].",
    ),
)

COMMANDS: dict[str, float] = {
    "Base/Drive/Command": 1.0,
    "drive/command": 4.0,
    "avoidance/command": 4.0,
    "motion/command": 4.0,
    "Wrist/Command": 1.0,
    "Arm/Command": 1.0,
}
"""The command interfaces, with how long (s, by the receiver's clock) a command stays good after it arrived.

Commands are not states (DESIGN.md, principle 5): the bus never hands a command to a reader that joins after it was
written, and a reader returns nothing once the newest command is older than this. The ages are those of the
receivers' own timeouts (the base's 1 s, the drive's 4 s); a receiver may keep a goal it was given for longer.
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
    return name


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
    row = INTERFACES.get(name)
    return row.type if row else None
