"""Whether the robot moved as a command asked, and if it did not, why: what ``pluto drive``, ``pluto avoid`` and
``pluto pub`` on a velocity command say once the command is over (and their exit status: 1 if it did not move).

Strategy: a command line cannot look inside the modules, but it sees what they write. The base's odometry
(``Base/Drive/State``) tells whether the robot moved; the statuses of the modules between the command and the wheels
tell why not: the drive's (``drive/status`` element[0]: sonar protection, a bumper, a stale input, its step
stopped) and, for a command through avoid, avoid's (``avoidance/status``: the laser, a stale pose, released). What
no status tells (nobody reads the command, no drive, no base, a drive that sends the base nothing) is found from
what was not heard and from MOM. The verdict is a pure function of what was seen (:func:`judge`), tested without a
bus; :class:`MotionCheck` gathers it while the command is in force.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pluto.geometry import wrap_angle

if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus

__all__ = [
    "MOVED_DISTANCE",
    "MOVED_TURN",
    "Asked",
    "MotionCheck",
    "Seen",
    "Verdict",
    "asked_by",
    "judge",
]

MOVED_DISTANCE = 0.02
"""m the odometry must move for a command that asks for a linear velocity to count as carried out."""
MOVED_TURN = math.radians(2.0)
"""rad the odometry must turn for a command that asks for a turn alone."""
MOVED_SHARE = 0.25
"""Share of the distance (or turn) asked for over a command's whole time that must be covered for a command kept up
for a while (``--for``, ``-n``) to count as carried out: slowed down by the sonar's ramp, it is; fought by another
commander, it is not."""
WATCH_ROBOT_TIME = 1.0
"""s of the robot's time (its statuses' stamps) a command given once is watched for the robot to start moving."""
WATCH_WALL_LIMIT = 5.0
"""Wall s after which a command given once is judged however little of the robot's time went by (a paused or
stalled simulation)."""
SILENT_LIMIT = 1.5
"""Wall s after which a command given once is judged when no module has written anything it reads (no status, no
odometry: nothing runs that would move the robot)."""

# drive/status element[0] (pluto.movement.drive.core.DriveStatus), in words
_SONAR = {3: "ahead", 4: "behind", 5: "at its side"}
_DRIVE = {
    1: "its front bumper is pressed: the drive stopped it (only motion straight back is allowed)",
    2: "its back bumper is pressed: the drive stopped it (only motion straight ahead is allowed)",
    -1: "the drive's command timed out (no new command within its timeout)",
    -2: "the drive stopped it at once for a stale input (the command's lease ran out, a halt, or the base's odometry "
    "went stale)",
    -10: "the drive's control step is stopped (`pluto call drive/start_activity` starts it)",
}
# avoidance/status element[0] of avoid's own (pluto.movement.avoid.core), in words
_AVOID = {
    6: "avoid's laser protection stopped it: an obstacle ahead in the laser's scan",
    7: "avoid holds it for the laser: rebooting, or its scans are stale",
    8: "avoid holds it for a fresh, certain pose (Localization/Pose or the odometry is stale)",
    9: "avoid holds it: its commander's lease ran out",
}
_RELEASED = -10
"""avoidance/status element[1] when avoid's thread is stopped (``pluto avoid release``)."""


@dataclass(frozen=True)
class Asked:
    """What a command asks of the robot: ``v`` m/s and ``w`` rad/s (a heading or a goal: ``turn_only`` False and
    ``v`` its speed, ``w`` 0)."""

    v: float
    w: float

    @property
    def turn_only(self) -> bool:
        """It asks for a turn on the spot."""
        return self.v == 0.0 and self.w != 0.0

    def describe(self) -> str:
        return f"v {self.v:g} m/s, w {self.w:g} rad/s"


def asked_by(name: str, value: Any) -> Asked | None:
    """The motion a command ``value`` on interface ``name`` asks for; None for one that asks for none (a stop, a
    release, a halt) or an interface this module does not judge (motion/command: its moves take their own time).

    ``Base/Drive/Command`` and ``drive/command`` (cmd_flags 0/10 velocity, 1/11 heading) and ``avoidance/command``
    (cmd_flags 10·A + T: T 0 velocity, 1 heading, 2 goto, 3 wall following) are judged.
    """
    velocity = [float(x) for x in getattr(value, "velocity", []) if math.isfinite(float(x))]
    v, w = [*velocity, 0.0, 0.0][:2]
    flags = int(getattr(value, "cmd_flags", 0))
    asked: Asked | None
    if name == "Base/Drive/Command":
        asked = Asked(v, w)
    elif name == "drive/command":
        if flags in (0, 10):
            asked = Asked(v, w)
        elif flags in (1, 11):
            asked = Asked(v, 0.0) if v else None  # a heading at 0 m/s only turns: how far is not known here
        else:
            return None
    elif name == "avoidance/command":
        kind = flags % 10 if flags >= 0 else -1
        if kind == 0:
            asked = Asked(v, w)
        elif kind in (1, 2):
            asked = Asked(v or 0.5, 0.0)  # heading at v; a goto at up to v (0.5 m/s without a speed)
        elif kind == 3:
            asked = Asked(v or 0.3, 0.0)  # wall following, at the module's speed without one
        else:
            return None
    else:
        return None
    return asked if (asked is not None and (asked.v or asked.w)) else None


@dataclass
class Seen:
    """What the robot did while a command was in force (see :class:`MotionCheck`).

    Attributes:
        start, end: the first and the last odometry (x, y, θ; m, rad) heard, None if none.
        drive_codes: drive/status element[0] of each status heard, in order.
        drive_sent: the largest |v| (m/s) and |w| (rad/s) the drive sent the base meanwhile.
        avoid_codes: avoidance/status (element[0], element[1]) of each status heard, in order (through avoid).
        sonar: the newest sonar scan's (range m, bearing rad) pairs.
        stop_distance: the drive's sonar stop distance, m.
        readers: the modules that read the command's interface (None: not asked).
        rivals: the modules that also write the command's interface lately (None: not asked).
        robot_time: s of the robot's time the statuses spanned.
    """

    start: tuple[float, float, float] | None = None
    end: tuple[float, float, float] | None = None
    drive_codes: list[int] = field(default_factory=list)
    drive_sent: tuple[float, float] = (0.0, 0.0)
    avoid_codes: list[tuple[int, int]] = field(default_factory=list)
    sonar: list[tuple[float, float]] = field(default_factory=list)
    stop_distance: float = 0.4
    readers: list[str] | None = None
    rivals: list[str] | None = None
    robot_time: float = 0.0

    def moved(self) -> tuple[float, float]:
        """(distance m, turn rad, signed) between the first and the last odometry."""
        if self.start is None or self.end is None:
            return 0.0, 0.0
        turn = wrap_angle(self.end[2] - self.start[2])
        return math.hypot(self.end[0] - self.start[0], self.end[1] - self.start[1]), turn


@dataclass(frozen=True)
class Verdict:
    """Whether the robot moved as asked, and the line that says so (or why not)."""

    moved: bool
    words: str


def _sonar_words(code: int, seen: Seen) -> str:
    where = _SONAR[code]
    echoes = [r for r, b in seen.sonar if _sector(b) == code and 0.0 <= r <= seen.stop_distance]
    nearest = f" {min(echoes):.2f} m away" if echoes else ""  # the newest scan's, if it still holds the robot
    return (
        f"the drive's sonar protection stopped it: an echo {where}{nearest}, within its stop distance "
        f"({seen.stop_distance:.2f} m from the body)"
    )


def _sector(bearing: float) -> int:
    """The drive's sonar sector of a bearing (rad): 3 front (< 60°), 4 back (> 120°), 5 the sides."""
    b = abs(wrap_angle(bearing))
    return 3 if b < math.radians(60.0) else 4 if b > math.radians(120.0) else 5


def judge(asked: Asked, seen: Seen, name: str, sonar_hint: str = "", duration: float | None = None) -> Verdict:
    """The verdict on a command on interface ``name`` that asked for ``asked``, from what was ``seen``.

    Args:
        sonar_hint: what to add when the drive's sonar protection held the robot (how to do without it).
        duration: s the command was kept up (``--for``, ``-n``): the robot must then cover :data:`MOVED_SHARE` of
            what it asked for; None: a command given once, judged on whether the robot started moving.
    """
    distance, turn = seen.moved()
    need_distance, need_turn = MOVED_DISTANCE, MOVED_TURN
    if duration is not None:
        need_distance = max(need_distance, MOVED_SHARE * abs(asked.v) * duration)
        need_turn = max(need_turn, MOVED_SHARE * abs(asked.w) * duration)
    turned = abs(turn) >= need_turn
    moved = turned if asked.turn_only else distance >= need_distance
    odometry = f"odometry: {distance:.2f} m, {math.degrees(turn):+.0f}°"
    if moved:
        words = f"the robot moved ({odometry})" if duration is not None else f"the robot is moving ({odometry} so far)"
        later = _cause(seen, name, sonar_hint, since_motion=True)
        return Verdict(True, words + (f"; then {later}" if later else ""))
    cause = _cause(seen, name, sonar_hint)
    if distance >= MOVED_DISTANCE or (asked.turn_only and abs(turn) >= MOVED_TURN):
        short = f"about {need_distance / MOVED_SHARE:.2f} m" if not asked.turn_only else "the turn"
        what = f"the robot moved only a little of {short} asked ({asked.describe()} for {duration:g} s; {odometry})"
        return Verdict(False, f"{what}: {cause}")
    partly = " (it turned, but did not drive)" if abs(turn) >= MOVED_TURN else ""
    return Verdict(False, f"the robot did not move as asked ({asked.describe()}; {odometry}){partly}: {cause}")


def _cause(seen: Seen, name: str, sonar_hint: str, since_motion: bool = False) -> str:
    """Why the robot did not move (``since_motion``: what stopped it after it moved; "" if nothing did)."""
    if seen.avoid_codes:
        e0, e1 = seen.avoid_codes[-1]
        if e1 == _RELEASED:
            return (
                "avoid is released (its control step stopped: `pluto avoid release`); `pluto call "
                "avoid/start_activity` starts it again"
            )
        if e0 in _AVOID:
            return _AVOID[e0]
    code = seen.drive_codes[-1] if seen.drive_codes else 0  # what holds the robot now, not what held it once
    if code in _SONAR:
        return _sonar_words(code, seen) + (f"; {sonar_hint}" if sonar_hint else "")
    if code in _DRIVE:
        return _DRIVE[code]
    if since_motion:
        return ""
    if seen.rivals:
        return (
            f"{', '.join(seen.rivals)} also {'writes' if len(seen.rivals) == 1 else 'write'} {name}: the commands "
            f"fight, the newest winning each time (release or stop {seen.rivals[0]} first)"
        )
    if seen.readers is not None and not seen.readers:
        return (
            f"no running module reads {name} (is the {'drive' if name != 'avoidance/command' else 'avoid module'} "
            "running? `pluto mom`; `pluto up mission --detach` starts the simulated robot with it)"
        )
    if not seen.drive_codes and name != "Base/Drive/Command":
        return "the drive wrote no status meanwhile (is it running? `pluto mom`)"
    if seen.start is None:
        return "there is no odometry (Base/Drive/State): is the base running? (`pluto mom`)"
    if seen.drive_sent == (0.0, 0.0) and name != "Base/Drive/Command":
        return (
            "the drive sent the base no velocity, with status 0 (normal): another commander's stop? "
            "(`pluto info drive/command`)"
        )
    if seen.robot_time <= 0.0:
        return "the robot's clock did not run meanwhile (a paused or stalled simulation?)"
    return "the base did not follow its commands (stalled? `pluto echo Base/Contact`)"


class MotionCheck:
    """Gathers what the robot does while a command is in force (create it before sending the command, then
    :meth:`verdict`).

    Args:
        bus: the command line's bus.
        name: the command's interface.
        sonar_hint: see :func:`judge`.
    """

    def __init__(self, bus: Bus, name: str, sonar_hint: str = "") -> None:
        from pluto import names
        from pluto.cli.progress import parameter

        self.bus = bus
        self.name = name
        self.sonar_hint = sonar_hint
        self.seen = Seen(stop_distance=parameter(bus, "drive", "stop_distance", 0.4))
        self._changed = threading.Condition()
        self._first_stamp: float | None = None
        self._began = time.monotonic()
        self._subscriptions = [
            bus.create_subscription(names.BASE_DRIVE_STATE, self._on_odometry, depth=64),
            # the current statuses too: a drive or avoid whose step is stopped writes no more
            bus.create_subscription(names.DRIVE_STATUS, self._on_drive, depth=64),
            bus.create_subscription(names.BASE_SONAR, self._on_sonar),
        ]
        if name == names.AVOIDANCE_COMMAND:
            self._subscriptions.append(bus.create_subscription(names.AVOIDANCE_STATUS, self._on_avoid, depth=64))

    def _tick(self, stamp: float) -> None:
        if self._first_stamp is None:
            self._first_stamp = stamp
        self.seen.robot_time = max(self.seen.robot_time, stamp - self._first_stamp)

    def _on_odometry(self, odometry: msgs.Odometry) -> None:
        with self._changed:
            pose = (odometry.x, odometry.y, odometry.theta)
            if self.seen.start is None:
                self.seen.start = pose
            self.seen.end = pose
            self._changed.notify_all()

    def _on_drive(self, status: msgs.FVectorState) -> None:
        with self._changed:
            self._tick(status.stamp)
            self.seen.drive_codes.append(int(status.element[0]) if status.element else 0)
            v, w = [*status.data, 0.0, 0.0][:2]
            sent = self.seen.drive_sent
            self.seen.drive_sent = (max(sent[0], abs(v)), max(sent[1], abs(w)))
            self._changed.notify_all()

    def _on_avoid(self, status: msgs.FVectorState) -> None:
        with self._changed:
            self._tick(status.stamp)
            e0, e1 = [*status.element, 0, 0][:2]
            self.seen.avoid_codes.append((int(e0), int(e1)))
            self._changed.notify_all()

    def _on_sonar(self, scan: msgs.SonarScan) -> None:
        with self._changed:
            self.seen.sonar = list(zip(scan.ranges, scan.angles, strict=False))

    def wait_for_motion(self, asked: Asked) -> None:
        """For a command given once: wait until the robot moves as asked, or :data:`WATCH_ROBOT_TIME` s of its
        time went by without (at most :data:`WATCH_WALL_LIMIT` wall s, or :data:`SILENT_LIMIT` if nothing is
        heard at all)."""
        deadline = self._began + WATCH_WALL_LIMIT
        with self._changed:
            while True:
                seen = self.seen
                distance, turn = seen.moved()
                if (abs(turn) >= MOVED_TURN) if asked.turn_only else (distance >= MOVED_DISTANCE):
                    return
                now = time.monotonic()
                silent = seen.start is None and not seen.drive_codes and not seen.avoid_codes
                if (
                    seen.robot_time >= WATCH_ROBOT_TIME
                    or now >= deadline
                    or (silent and now >= self._began + SILENT_LIMIT)
                ):
                    return
                left = deadline - now
                self._changed.wait(min(left, 0.25))

    def verdict(self, asked: Asked, duration: float | None = None) -> Verdict:
        """The verdict on what was seen since the check began (see :func:`judge`, which ``duration`` is passed
        on to); stops gathering."""
        for subscription in self._subscriptions:
            self.bus.release(subscription)
        self._subscriptions = []
        with self._changed:
            seen = self.seen
        if not judge(asked, seen, self.name, duration=duration).moved:  # what MOM tells: readers, rivals
            seen.readers, seen.rivals = _readers(self.bus, self.name)
        return judge(asked, seen, self.name, self.sonar_hint, duration)


def _readers(bus: Bus, name: str) -> tuple[list[str] | None, list[str] | None]:
    """The live modules that read ``name``, and those that write it lately (None if MOM cannot tell)."""
    from pluto.errors import PlutoError
    from pluto.runtime import mom

    try:
        use = mom.interface_uses(mom.snapshot(bus, timeout=0.5)).get(name)
    except PlutoError:
        return None, None
    if use is None:
        return [], []
    return list(use.readers), [w.module for w in use.rivals() if w.module is not None]
