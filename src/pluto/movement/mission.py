"""The mission module: a route of goals driven through the motion module, one after the other, on the robot's time.

``pluto demo`` runs it on the office world (:data:`OFFICE_ROUTE`); a program can give it a route of its own. It takes
part in the lock-step like any module, so each goal goes out at an exact simulated time and the same seed gives the
same run. It prints its progress, and says when the route is done, failed, or took too long (:class:`MissionModule`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pluto import msgs, names
from pluto.bus import Bus
from pluto.errors import PlutoError
from pluto.movement.motion.core import AT_GOAL, MOVETO_SET, THREAD_STOPPED
from pluto.movement.motion.proxy import MotionProxy, describe_status
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Rate as StepRate
from pluto.runtime.ranges import between
from pluto.sim.device import TruthHistory

__all__ = [
    "FRESH_AFTER",
    "LOBBY_HOME",
    "OFFICE_ROUTE",
    "REPORT_EVERY",
    "SETTLE",
    "STATUS_TIMEOUT",
    "Leg",
    "MissionModule",
    "MissionParams",
]


@dataclass(frozen=True)
class Leg:
    """One goal of the mission: ``moveto`` (x, y) m, or ``explore`` the rectangle of half-width ``b`` and height
    ``h`` m whose home is (x, y) m facing ``theta`` rad (all in the ``Localization/Pose`` frame)."""

    kind: Literal["moveto", "explore"]
    x: float
    y: float
    b: float = 0.0
    h: float = 0.0
    theta: float = 0.0

    def describe(self) -> str:
        if self.kind == "moveto":
            return f"moveto ({self.x:.1f}, {self.y:.1f}) m"
        return f"explore {2 * self.b:.1f} m x {self.h:.1f} m from home ({self.x:.1f}, {self.y:.1f}) m, then come home"


# Through the office, in the world frame (m): from the corridor to the lobby, explore the lobby (3.3 m either side
# of its middle, 8 m north of home: the reception counter and a pillar inside) and come home, then into the south
# room S1 through its 0.9 m door.
LOBBY_HOME = (4.0, 1.5, math.pi / 2)
OFFICE_ROUTE = [
    Leg("moveto", LOBBY_HOME[0], LOBBY_HOME[1]),
    Leg("explore", *LOBBY_HOME[:2], b=3.3, h=8.0, theta=LOBBY_HOME[2]),
    Leg("moveto", 10.0, 6.5),
]
FRESH_AFTER = 0.5
"""Simulated seconds after a command before a status counts as describing it (earlier ones may describe the
previous goal)."""
STATUS_TIMEOUT = 5.0
"""Simulated seconds without a new status from the motion module after which the mission stops."""
REPORT_EVERY = 5.0
"""Simulated seconds between two progress lines."""
SETTLE = 1.0
"""Simulated seconds the mission lets pass after its end before it says it is done, so that every value stamped
before the end (a pose is written a little after its stamp) has reached the demo's collectors."""


class MissionParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    duration: simulated seconds after which the mission gives up.
    """

    rate_hz: StepRate = 10.0
    use_sim_time: bool = True
    duration: Annotated[float, between(0.0, 1000000.0, open_low=True)] = 900.0


class MissionModule(Module[MissionParams]):
    """Drives a route: one goal after the other through the motion module, each when the previous one is done.

    Its step follows the simulated time (in a lock-stepped simulation it is a member like the others), so each
    command goes out at an exact simulated time. It reads ``motion/status`` each step. A goal has started once a
    status newer than its command by :data:`FRESH_AFTER` shows the motion under way (element[3] > 0, or element[2]
    = -1 for a moveto); it is done when, after that, the motion is over (element[3] <= 0): reached if element[2] is
    1 (at the goal: an exploration ends with the moveto home), failed otherwise. A failed goal, no status for
    :data:`STATUS_TIMEOUT` or the route taking longer than ``duration`` ends the mission. It prints its progress and
    sets :attr:`done` :data:`SETTLE` after the end, with :attr:`outcome`, :attr:`reached`, :attr:`end_time` and the
    last laser scan it saw.

    Args:
        route: the goals, in the ``Localization/Pose`` frame.
        hold: lock-stepped simulators whose time the mission holds (``sim/pause``) in the step that sets
            :attr:`done`, so that what is done after the mission (saving the slam module's map) sees the world as it
            was at that simulated time, on every run.
    """

    name = "mission"
    description = "the demo's route: one moveto or exploration after the other through the motion module"
    requires = ("motion",)
    Params = MissionParams

    def __init__(
        self,
        bus: Bus,
        params: MissionParams | None = None,
        *,
        route: Sequence[Leg] = OFFICE_ROUTE,
        hold: Sequence[str] = (),
        name: str | None = None,
    ) -> None:
        super().__init__(bus, params, name=name)
        self.route = list(route)
        self.hold = list(hold)
        self.done = threading.Event()
        """Set when the mission is over (route done, stuck, timed out)."""
        self.stepped = threading.Event()
        """Set by the first step."""
        self.outcome = "NOT done"
        self.reached = 0
        self.start_time: float | None = None
        self.end_time: float | None = None
        """Simulated time of the step that ended the mission."""
        self.end_wall = math.nan
        """Wall-clock time (``time.monotonic``) of that step."""
        self.final_scan: msgs.LaserScan | None = None
        self._number = 0  # the goal under way, from 1; 0 before the first
        self._sent = 0.0
        self._started = False  # the motion module has taken up the goal under way
        self._next_report = 0.0

    def on_configure(self) -> None:
        # The proxy's writes are a put on a publisher, never a wait; mask 0: the status is read below.
        self.motion = MotionProxy(self.bus, mask=0, start=False)
        self.status_in = self.create_reader(names.MOTION_STATUS)
        self.pose_in = self.create_reader(names.LOCALIZATION_POSE)
        self.truth = TruthHistory(seconds=5.0)  # the estimate is compared with the truth of its own stamp
        self.create_subscription(names.SIM_TRUTH, self.truth.add, msgs.Odometry, depth=256)
        self.scan_in = self.create_reader(names.SICK_SCAN_MM)
        self.power_in = self.create_reader(names.BASE_POWER)

    def step(self, now: float) -> None:
        self.stepped.set()
        if self.end_time is not None:
            self._settle(now, self.end_time)
            return
        if self.start_time is None:
            self.start_time = now
        elapsed = now - self.start_time
        if self._number == 0:
            self._send(1, now)
            return
        status = self.status_in.read()
        if status is None or status.stamp < now - STATUS_TIMEOUT:
            print(f"  no status from the motion module for {STATUS_TIMEOUT:g} s; stopping the mission", flush=True)
            self._finish("NOT done", now)
            return
        moveto, motion = [*status.element, 0, 0, 0, 0][2:4]
        fresh = status.stamp > self._sent + FRESH_AFTER
        leg = self.route[self._number - 1]
        if fresh and not self._started:
            self._started = motion > 0 or (leg.kind == "moveto" and moveto == MOVETO_SET)
        finished = bool(fresh and self._started and motion <= 0)
        if elapsed >= self._next_report or finished:
            self._next_report = elapsed + REPORT_EVERY
            self._print_progress(elapsed, status)
        self._judge(
            leg, elapsed, now, finished=finished, stopped=fresh and motion == THREAD_STOPPED, at_goal=moveto == AT_GOAL
        )

    def _judge(self, leg: Leg, elapsed: float, now: float, *, finished: bool, stopped: bool, at_goal: bool) -> None:
        """What a step's status means for the goal under way: reached (the next one goes out, or the route is done),
        given up by the motion module (``finished`` elsewhere than at the goal, or its thread ``stopped``), or the
        route over its duration (the mission ends)."""
        if finished and at_goal:
            self._reached(elapsed, now)
        elif finished or stopped:
            print(
                f"  the motion module gave up goal {self._number} ({leg.describe()}); stopping the mission", flush=True
            )
            self._finish("NOT done", now)
        elif elapsed > self.duration:
            print(f"  the route took longer than {self.duration:g} s; giving up", flush=True)
            self._finish("NOT done", now)

    def _settle(self, now: float, end_time: float) -> None:
        """After the end: hold the simulators' time and set :attr:`done` once :data:`SETTLE` has passed."""
        if now >= end_time + SETTLE and not self.done.is_set():
            self._hold_time()
            self.done.set()

    def _print_progress(self, elapsed: float, status: msgs.FVectorState) -> None:
        """A progress line: where the robot is (and the error of that estimate), the nearest echo, the battery."""
        pose = self.pose_in.read()
        _report(
            elapsed,
            pose,
            self.truth.at(pose.stamp) if pose is not None else None,
            self.scan_in.read(),
            self.power_in.read(),
            status,
        )

    def _reached(self, elapsed: float, now: float) -> None:
        """The goal under way is reached: the next one goes out, or the route is done."""
        print(f"  goal {self._number} done after {elapsed:.1f} s", flush=True)
        self.reached = self._number
        if self._number == len(self.route):
            self._finish("done", now)
        else:
            self._send(self._number + 1, now)

    @property
    def duration(self) -> float:
        p = self.params
        return p.duration if isinstance(p, MissionParams) else MissionParams().duration

    def _send(self, number: int, now: float) -> None:
        leg = self.route[number - 1]
        if leg.kind == "moveto":
            # no rectangle: one left by an exploration would bound the moveto (and hold a goal outside it back)
            self.motion.set_rectangle(0.0, 0.0, leg.x, leg.y, 0.0)
            self.motion.moveto(leg.x, leg.y)
        else:  # the rectangle with its home, then start exploring it
            self.motion.set_rectangle(leg.b, leg.h, leg.x, leg.y, leg.theta)
            self.motion.resume()
        self._number, self._sent, self._started = number, now, False
        print(f"  goal {number}/{len(self.route)}: {leg.describe()}", flush=True)

    def _finish(self, outcome: str, now: float) -> None:
        self.motion.stop()
        self.outcome = outcome
        self.end_time, self.end_wall = now, time.monotonic()
        self.final_scan = self.scan_in.read()

    def _hold_time(self) -> None:
        for simulator in self.hold:
            try:
                self.bus.call(f"{simulator}/pause", None, bool, timeout=5.0)
            except PlutoError as err:
                print(f"  could not hold the time of {simulator}: {err}", flush=True)

    def on_shutdown(self) -> None:
        if self.end_time is None:  # interrupted: stop the robot
            self.motion.stop()
        self.motion.close()


def _report(
    elapsed: float,
    pose: msgs.PoseEstimate | None,
    true: msgs.Odometry | None,
    scan: msgs.LaserScan | None,
    battery: msgs.Power | None,
    status: msgs.FVectorState,
) -> None:
    if pose is None:
        where = "no pose yet"
    else:
        x, y, theta = pose.pose[0], pose.pose[1], pose.pose[3]
        error = f"{math.hypot(true.x - x, true.y - y):.3f} m" if true else "?"
        where = f"at ({x:5.1f}, {y:5.1f}) m  heading {math.degrees(theta) % 360:5.1f}°  pose error {error}"
    nearest = min((r for r in scan.ranges if r > 0), default=math.nan) if scan else math.nan
    print(
        f"  t={elapsed:6.1f} s  {where}  nearest echo {nearest:4.2f} m  "
        f"battery {battery.charge * 100 if battery else 0:5.1f} %  [{describe_status(status)}]",
        flush=True,
    )
