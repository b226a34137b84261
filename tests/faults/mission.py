"""What the fault-injection tests share: the mission profile in lock-step, one process per module, supervised (a
killed module is restarted as `pluto up` does), and a script that drives a moveto and injects one fault into it.

The script runs at simulated times like any module of the lock-step. It sends a moveto down the office's corridor,
lets the robot get going, then injects the fault (SIGKILL of one module's process, or SIGSTOP: a module that lives but
no longer steps) and watches what a user cares about, on the robot's own time:

- when the robot was commanded to stop (the last ``Base/Drive/Command`` that moved it, or the truth's speed when the
  process that commands the base is the one that died);
- when the module came back (the supervisor restarted it and it writes its interfaces again);
- how far the localization is from the truth once it is back;
- how the moveto ended: at the goal (and where the robot really was), or not (and which status said so).

While a killed module is being restarted the simulated time is held (``sim/pause``) once the robot has had time to
stop, so that the outage lasts the same simulated time whatever the machine's speed; the stop itself happens on
running time. The supervisor restarts on the wall clock, as it does for a real robot.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field

from pluto import msgs, names
from pluto.bus import Bus
from pluto.movement.motion.core import AT_GOAL, MOVETO, MOVETO_SET, NEARING
from pluto.runtime.profiles import Profile, load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.scenarios.stack import HANG, Lockstep, Script

GOAL_TOLERANCE = 0.3
"""m: the motion module's goal tolerance (its default); "at the goal" farther than this from the truth is false."""

STOP_WITHIN = 0.5
"""s of simulated time after an input went stale by which the base must be commanded to stop."""

RECOVERED_WITHIN = 0.2
"""m: the localization's error once the killed module is back."""

CORRIDOR_GOALS = ((24.0, 9.7), (12.0, 9.7))
"""Goals along the office's corridor (the robot starts at (10, 9.7) facing +x), taken in turn."""


@dataclass
class Outcome:
    """What one fault did (simulated times, s; distances, m)."""

    fault: str
    target: str
    injected_at: float = math.nan
    speed_at_injection: float = math.nan
    stale_at: float = math.nan
    """When the input the chain steers by went stale (the last value of the dead module plus its deadline)."""
    stop_commanded_at: float = math.nan
    stopped_at: float = math.nan
    """When the truth's speed fell to nothing."""
    back_at: float = math.nan
    """When the module wrote its interfaces again after its restart."""
    back_wall: float = math.nan
    """Wall seconds from the fault to the module's return."""
    pose_error: float = math.nan
    """Localization/Pose against the truth at the same stamp, 2 s after the module came back."""
    ended_at: float = math.nan
    status: int = 0
    """motion/status element[2] when the moveto ended (1 at the goal)."""
    distance_to_goal: float = math.nan
    """Of the truth when the moveto ended."""
    end_pose_error: float = math.nan
    """Localization/Pose against the truth when the moveto ended: "at the goal" is judged by that estimate."""
    notes: list[str] = field(default_factory=list)
    chain: str = ""
    """When each module of the movement chain first said it holds the robot for a stale input, after the fault."""
    back_before_stale: bool = False
    """The module was back, writing its interface, before that went stale: no stop was due."""

    @property
    def time_to_stop(self) -> float:
        """From the input going stale to the stop command, s (negative: it stopped before the deadline)."""
        return self.stop_commanded_at - self.stale_at

    @property
    def at_goal(self) -> bool:
        return self.status == AT_GOAL

    def describe(self) -> str:
        if self.at_goal:
            return f"at the goal ({self.distance_to_goal:.2f} m from it)"
        return f"not at the goal: status {self.status} ({self.distance_to_goal:.2f} m from it)"


PROVIDES = {
    "localization": names.LOCALIZATION_POSE,
    "pose": names.POSE_STATUS,
    "drive": names.DRIVE_STATUS,
    "avoid": names.AVOIDANCE_STATUS,
    "motion": names.MOTION_STATUS,
    "sick": names.SICK_SCAN_MM,
    "base": names.BASE_DRIVE_STATE,
    "sim": names.CLOCK,
}
"""An interface each module writes as it steps: a value of it stamped after the restart says the module is back."""


def mission_profile(noise: str = "ideal") -> Profile:
    """The mission profile with this noise."""
    return with_params(load_profile("mission"), "sim", noise=noise)


class FaultMission:
    """The mission profile running in separate processes under a supervisor, and the test's collectors.

    Use as a context manager; :meth:`inject` runs one fault during one moveto and returns its :class:`Outcome`.
    """

    def __init__(
        self,
        bus: Bus,
        *,
        noise: str = "ideal",
        seed: int = 1,
        lockstep_timeout: float = 10.0,
        rate: float | str = "max",
        hold: bool = True,
    ) -> None:
        self.bus = bus
        self.noise = noise
        self.seed = seed
        self.lockstep_timeout = lockstep_timeout
        self.rate = rate
        self.hold = hold
        """Hold the simulated time while a killed module restarts (else it runs on, at ``rate``)."""
        self.sim = Lockstep(bus)
        self.supervisor: Supervisor | None = None
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None
        self._goals = 0

    def __enter__(self) -> FaultMission:
        try:
            self.supervisor = self.sim.start(
                mission_profile(self.noise),
                seed=self.seed,
                one_process=False,
                rate=self.rate,
                lockstep_timeout=self.lockstep_timeout,
            )
            self.truth = self.sim.collect(names.SIM_TRUTH, msgs.Odometry)
            self.base_commands = self.sim.collect(names.BASE_DRIVE_COMMAND, msgs.ActuatorState)
            self.poses = self.sim.collect(names.LOCALIZATION_POSE, msgs.PoseEstimate)
            self.motion_status = self.sim.collect(names.MOTION_STATUS, msgs.FVectorState)
            self.avoid_status = self.sim.collect(names.AVOIDANCE_STATUS, msgs.FVectorState)
            self.drive_status = self.sim.collect(names.DRIVE_STATUS, msgs.FVectorState)
            self.written = {name: self.sim.collect(topic, topic.type) for name, topic in PROVIDES.items()}
            self.script = FaultScript(self)
            self.sim.add(self.script)
            self._watch = threading.Thread(target=self.supervisor.run, args=(self._stop,), daemon=True)
            self._watch.start()
            self.sim.resume()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.join(timeout=10)
        self.sim.close()

    def pid(self, module: str) -> int:
        assert self.supervisor is not None
        process = self.supervisor.children[module].process
        assert process is not None and process.poll() is None, f"{module} is not running"
        return process.pid

    def next_goal(self) -> tuple[float, float]:
        goal = CORRIDOR_GOALS[self._goals % len(CORRIDOR_GOALS)]
        self._goals += 1
        return goal

    def inject(self, target: str, fault: str = "kill", *, after: float = 4.0, limit: float = 240.0) -> Outcome:
        """Send a moveto, ``after`` simulated seconds later inject ``fault`` ("kill": SIGKILL, "hang": SIGSTOP) into
        ``target``'s process, and follow the robot until the moveto ends (or ``limit`` simulated seconds: while a
        hung member is waited for and then left out of the lock-step, the simulated time goes on with the robot
        stopped, the longer the busier the machine, until the supervisor has seen the hang and restarted it)."""
        outcome = Outcome(fault=fault, target=target)
        job = FaultJob(self, outcome, self.next_goal(), after, limit)
        self.script.start_job(job)
        job.wait_injected()
        if target != "sim" and self.hold:  # no time runs while the clock is dead: nothing to hold then
            job.wait_stopped()
            self._hold_until_back(job)
        job.wait_done()
        return outcome

    def _hold_until_back(self, job: FaultJob) -> None:
        """Hold the simulated time from now until the supervisor has brought ``job``'s module back."""
        assert self.supervisor is not None
        self.bus.call("sim/pause", timeout=10.0)
        try:
            child = self.supervisor.children[job.outcome.target]
            deadline = time.monotonic() + HANG
            while not (child.restarts > job.restarts_before and child.process is not None):
                assert time.monotonic() < deadline, f"{job.outcome.target} was not restarted"
                assert not child.given_up, f"the supervisor gave up {job.outcome.target}"
                time.sleep(0.05)  # polls the supervisor's own record of its children (no event to wait on)
            job.wait_member(deadline)
        finally:
            self.bus.call("sim/resume", timeout=10.0)


class FaultJob:
    """One fault during one moveto, carried out by the :class:`FaultScript` at simulated times."""

    def __init__(
        self, mission: FaultMission, outcome: Outcome, goal: tuple[float, float], after: float, limit: float
    ) -> None:
        self.mission = mission
        self.outcome = outcome
        self.goal = goal
        self.after = after
        self.limit = limit
        self.injected = threading.Event()
        self.stopped = threading.Event()
        self.done = threading.Event()
        self.restarts_before = 0
        self.wall_injected = math.nan

    def _wait(self, event: threading.Event, what: str) -> None:
        self.mission.script.wait(event)
        assert event.is_set(), what

    def wait_injected(self) -> None:
        self._wait(self.injected, "the fault was injected")

    def wait_stopped(self) -> None:
        self._wait(self.stopped, "the robot stopped")

    def wait_done(self) -> None:
        self._wait(self.done, "the moveto ended")

    def wait_member(self, deadline: float) -> None:
        """Wait until the restarted module takes part in the lock-step again."""
        name = self.outcome.target
        while name not in self.mission.sim.members():
            assert time.monotonic() < deadline, f"{name} did not rejoin the lock-step"
            time.sleep(0.05)  # the simulator's membership is read by a query; nothing pushes it

    def run(self, now: float, script: FaultScript) -> Generator[None, float, None]:
        out = self.outcome
        mission = self.mission
        script.command(msgs.ActuatorState(stamp=now, cmd_flags=MOVETO, position=list(self.goal)))
        start = now
        while now < start + self.after:
            now = yield
        truth = script.truth.read()
        out.speed_at_injection = abs(truth.v) if truth is not None else math.nan
        assert mission.supervisor is not None
        self.restarts_before = mission.supervisor.children[out.target].restarts
        out.injected_at = now
        self.wall_injected = time.monotonic()
        os.kill(mission.pid(out.target), signal.SIGKILL if out.fault == "kill" else signal.SIGSTOP)
        self.injected.set()
        # the robot must stop: unless the dead module is the clock (no time runs until it is back) or the pose
        # module (the chain steers by the localization, which goes on by dead reckoning)
        while steers(out.target):
            if self._stop_seen(now):
                out.stopped_at = now
                break
            if self._back_before_stale():
                break
            if now > out.injected_at + 10.0:
                out.notes.append("the robot did not stop within 10 s")
                break
            now = yield
        self.stopped.set()
        # back: the module writes its interface again
        written = mission.written[out.target]
        while True:
            values = [v for v in written.snapshot() if v.stamp > out.injected_at]
            if values and (out.target != "sim" or now > out.injected_at):
                out.back_at = values[0].stamp
                out.back_wall = time.monotonic() - self.wall_injected
                break
            now = yield
        while now < out.back_at + 2.0:
            now = yield
        out.pose_error = pose_error(mission.poses.snapshot(), mission.truth.snapshot(), now - 0.5)
        # how the moveto ends
        status = script.status.read()
        while now < start + self.limit:
            status = script.status.read()
            under_way = status is not None and len(status.element) > 2 and status.element[2] in (MOVETO_SET, NEARING)
            if status is not None and status.stamp > out.back_at and not under_way:
                break
            now = yield
        truth = script.truth.read()
        out.ended_at = now
        out.end_pose_error = pose_error(mission.poses.snapshot(), mission.truth.snapshot(), now)
        out.status = status.element[2] if status is not None and len(status.element) > 2 else 0
        if truth is not None:
            out.distance_to_goal = math.hypot(truth.x - self.goal[0], truth.y - self.goal[1])
        self._find_stop()
        self.done.set()

    def _last_before_fault(self) -> list[float]:
        out = self.outcome
        return [v.stamp for v in self.mission.written[out.target].snapshot() if v.stamp <= out.injected_at]

    def _stale_at(self) -> float:
        """When the input the dead module wrote went stale: its last value plus the readers' deadline. The last
        value is the last one collected, or, if its last values were lost with its process before they reached the
        test (a process frozen with values in its queues), the earliest its declared rate and latency allow (so the
        stop is never judged from a stale time earlier than the real one)."""
        out = self.outcome
        row = names.INTERFACES.get(PROVIDES[out.target])
        earliest = out.injected_at - (row.latency + (row.period or 0.0) if row is not None else 0.0)
        return max([earliest, *self._last_before_fault()]) + stale_after(out.target)

    def _back_before_stale(self) -> bool:
        """The module came back and wrote its interface before that went stale: its readers never lost it, so
        nothing had to stop (on a busy machine the simulated time can stand still while the lock-step waits to hear
        that the dead member left, and the supervisor restarts it meanwhile)."""
        out = self.outcome
        stale_at = self._stale_at()
        back = [v.stamp for v in self.mission.written[out.target].snapshot() if v.stamp > out.injected_at]
        out.back_before_stale = bool(back) and back[0] <= stale_at
        return out.back_before_stale

    def _stop_seen(self, now: float) -> bool:
        """The robot has been told to stop and is at rest (what can be seen of it: with the base dead, the stop
        command only, as nothing moves the body)."""
        out = self.outcome
        told = out.target == "drive" or any(
            c.stamp >= out.injected_at and stop_command(c) for c in self.mission.base_commands.snapshot()
        )
        if out.target == "base":
            return told
        truth = self.mission.truth.snapshot()
        return told and bool(truth) and truth[-1].stamp > out.injected_at and at_rest(truth[-1])

    def _find_stop(self) -> None:
        """The stale time of the input and the time the stop was commanded, from what was collected."""
        out = self.outcome
        mission = self.mission
        holds = []
        for module, collector, index, codes in (
            ("motion", mission.motion_status, 3, (7, 8, 9)),
            ("avoid", mission.avoid_status, 0, (7, 8, 9)),
            ("drive", mission.drive_status, 0, (-2,)),
        ):
            for status in collector.snapshot():
                if status.stamp > out.injected_at and len(status.element) > index and status.element[index] in codes:
                    holds.append(f"{module} {status.element[index]} at {status.stamp:.2f} s")
                    break
        out.chain = ", ".join(holds)
        out.stale_at = self._stale_at()
        if not self._last_before_fault():
            out.notes.append(f"no value of {PROVIDES[out.target]} before the fault")
        if out.target == "drive":
            # Nothing commands the base any more: it stops on its own once the command is stale. Its stop shows as
            # the first slowing of the body (the base's step before it) after the fault.
            for truth in mission.truth.snapshot():
                if truth.stamp > out.injected_at and abs(truth.v) < out.speed_at_injection - 0.02:
                    out.stop_commanded_at = truth.stamp - BASE_PERIOD
                    return
            return
        for command in mission.base_commands.snapshot():
            if command.stamp >= out.injected_at and stop_command(command):
                out.stop_commanded_at = command.stamp
                return


BASE_PERIOD = 0.05
"""s: the simulated base's step (20 Hz)."""


def steers(target: str) -> bool:
    """The movement chain steers by an input that ``target`` writes (directly or through the modules below)."""
    return target not in ("sim", "pose")


def stop_command(command: msgs.ActuatorState) -> bool:
    return len(command.velocity) >= 2 and abs(command.velocity[0]) < 1e-6 and abs(command.velocity[1]) < 1e-6


def at_rest(truth: msgs.Odometry) -> bool:
    return abs(truth.v) < 0.01 and abs(truth.omega) < 0.01


def stale_after(target: str) -> float:
    """How long after its last value the input written by ``target`` counts as stale, s (the readers' deadline)."""
    deadline = names.stale_after(PROVIDES[target])
    return deadline if deadline is not None else math.nan  # the clock: nothing goes stale while no time runs


def pose_error(poses: list[msgs.PoseEstimate], truth: list[msgs.Odometry], at: float) -> float:
    """Distance between the last pose stamped at or before ``at`` and the truth at its stamp (the nearest value)."""
    before = [p for p in poses if p.stamp <= at]
    if not before or not truth:
        return math.nan
    pose = before[-1]
    nearest = min(truth, key=lambda t: abs(t.stamp - pose.stamp))
    return math.hypot(pose.pose[0] - nearest.x, pose.pose[1] - nearest.y)


class FaultScript(Script):
    """The test's member of the lock-step: runs the fault jobs it is given, one after the other."""

    def __init__(self, mission: FaultMission) -> None:
        super().__init__(mission.bus, rate_hz=20.0, name="faults")
        self.mission = mission
        self._job: FaultJob | None = None
        self._gen: Generator[None, float, None] | None = None
        self._lock = threading.Lock()

    def on_configure(self) -> None:
        self.motion_out = self.publisher(names.MOTION_COMMAND, msgs.ActuatorState)
        self.truth = self.reader(names.SIM_TRUTH, msgs.Odometry)
        self.status = self.reader(names.MOTION_STATUS, msgs.FVectorState)

    def command(self, command: msgs.ActuatorState) -> None:
        self.motion_out.write(command)

    def start_job(self, job: FaultJob) -> None:
        with self._lock:
            assert self._job is None or self._job.done.is_set(), "one fault at a time"
            self._job, self._gen = job, None

    def act(self, now: float) -> None:
        with self._lock:
            job = self._job
            if job is None or job.done.is_set():
                return
            try:
                if self._gen is None:
                    self._gen = job.run(now, self)
                    next(self._gen)
                else:
                    self._gen.send(now)
            except StopIteration:
                job.done.set()
