"""`pluto avoid goto --wait` and `pluto motion moveto --wait`: a live progress line until the goal is reached
(exit 0), the robot is stuck (exit 1) or --timeout passes (the goal cancelled, exit 1); against small stand-ins for
the avoid and motion modules on a real bus, which move a pose toward the goal they are given.

A goal counts as reached only when verified: the module says so and Localization/Pose, fresh (by its stamp against
the status's) and certain, shows the robot there; a module that restarted without its job, or idle after it was
under way, is a failure."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.cli.avoid_cmd import goto_outcome
from pluto.cli.main import main
from pluto.cli.motion_cmd import motion_outcome
from pluto.movement.avoid.core import GOTO_REACHED, GOTO_RUNNING, GOTO_STUCK
from pluto.movement.motion.core import (
    AT_GOAL,
    FOLLOWING,
    IDLE,
    MOVETO,
    MOVETO_SET,
    NEARING,
    RESTART_LOST,
    SCANNING,
    WAITING_POSE,
)
from pluto.runtime.module import Module, ModuleParams

Capture = pytest.CaptureFixture[str]


class GoalStandIn(Module[ModuleParams]):
    """Moves a pose from (0, 0) toward the goal of the last goal command at ``speed`` m/s and writes a status that
    says where it is; ``ending`` is the status code once there (or, with speed 0, after ``give_up`` s).

    The status is finished before any goal comes (the previous goal's), as a real module's may be.
    """

    status_name: ClassVar[str] = ""
    command_name: ClassVar[str] = ""

    def __init__(
        self,
        bus: Bus,
        speed: float,
        ending: int,
        give_up: float = math.inf,
        *,
        pose_std: float = 0.02,
        pose_lag: float = 0.0,
        short: float = 0.0,
    ) -> None:
        super().__init__(bus, ModuleParams(rate_hz=50.0))
        self.speed, self.ending, self.give_up = speed, ending, give_up
        self.pose_std = pose_std  # of the pose it writes, m
        self.pose_lag = pose_lag  # s the pose's stamp lags the status's (a stale pose beyond its deadline)
        self.short = short  # m the pose stops short of the goal
        self.commands: list[msgs.ActuatorState] = []
        self.goal: tuple[float, float] | None = None
        self.since = 0.0
        self.x = self.y = 0.0
        self.done = True

    def on_configure(self) -> None:
        self.status_out = self.create_publisher(self.status_name, msgs.FVectorState)
        self.pose_out = self.create_publisher(names.LOCALIZATION_POSE)
        self.create_subscription(self.command_name, self._command, msgs.ActuatorState, depth=64)

    def _command(self, command: msgs.ActuatorState) -> None:
        self.commands.append(command)
        if self.is_goal(command):
            self.goal, self.done, self.since = (command.position[0], command.position[1]), False, 0.0

    def is_goal(self, command: msgs.ActuatorState) -> bool:
        raise NotImplementedError

    def status(self, running: bool) -> msgs.FVectorState:
        raise NotImplementedError

    def step(self, now: float) -> None:
        dt = 1.0 / self.params.rate_hz
        if self.goal is not None and not self.done:
            self.since += dt
            gx, gy = self.goal
            distance = math.hypot(gx - self.x, gy - self.y)
            move = max(0.0, min(distance - self.short, self.speed * dt))
            if distance > 0:
                self.x += move * (gx - self.x) / distance
                self.y += move * (gy - self.y) / distance
            self.done = math.hypot(gx - self.x, gy - self.y) < self.short + 0.05 or self.since >= self.give_up
        var = self.pose_std**2
        self.pose_out.write(
            msgs.PoseEstimate(
                stamp=now - self.pose_lag,
                pose=[self.x, self.y, 0.0, 0.0, 0.0, 0.0],
                covariance=[var, 0.0, 0.0, 0.0, var, 0.0, 0.0, 0.0, 0.0],
            )
        )
        status = self.status(not self.done)
        self.status_out.write(msgs.FVectorState(stamp=now, data=status.data, element=status.element))


class StandInAvoid(GoalStandIn):
    name = "avoid"
    status_name = names.AVOIDANCE_STATUS
    command_name = names.AVOIDANCE_COMMAND

    def is_goal(self, command: msgs.ActuatorState) -> bool:
        return command.cmd_flags % 10 == 2

    def status(self, running: bool) -> msgs.FVectorState:
        return msgs.FVectorState(
            data=[0.3 if running else 0.0, 0.0], element=[0, GOTO_RUNNING if running else self.ending]
        )


class StandInMotion(GoalStandIn):
    name = "motion"
    status_name = names.MOTION_STATUS
    command_name = names.MOTION_COMMAND

    def is_goal(self, command: msgs.ActuatorState) -> bool:
        return command.cmd_flags == MOVETO

    def status(self, running: bool) -> msgs.FVectorState:
        element = [0, 0, NEARING, FOLLOWING] if running else [0, 0, self.ending, IDLE]
        return msgs.FVectorState(data=[0.0, 0.0], element=element)


@pytest.fixture
def started() -> Iterator[list[Module[Any]]]:
    modules: list[Module[Any]] = []
    yield modules
    for module in reversed(modules):
        module.stop()


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_goto_wait_until_the_goal_is_reached(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    avoid = StandInAvoid(bus, speed=2.0, ending=GOTO_REACHED)
    avoid.start()
    started.append(avoid)
    status, out, err = run(capsys, "avoid", "goto", "1.5", "0", "--wait", "--timeout", "30")
    assert status == 0, out + err
    assert "waiting for avoid to reach (1.5, 0)" in err
    running = [line for line in err.splitlines() if line.startswith("goto (1.5, 0): ") and "goto running" in line]
    assert running, err
    assert float(running[0].split()[3]) > 0.05  # the distance to go, before it was covered
    assert out.startswith("goal reached (1.5, 0), 0.0")  # not the stale "reached" of before the goto
    assert avoid.commands[-1].cmd_flags == 32  # the goto, and no stop after it


def test_goto_wait_when_the_robot_is_stuck(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    avoid = StandInAvoid(bus, speed=0.0, ending=GOTO_STUCK, give_up=0.3)
    avoid.start()
    started.append(avoid)
    status, out, _err = run(capsys, "avoid", "goto", "2", "1", "--wait", "--timeout", "30")
    assert status == 1
    assert out.startswith("goal not reached (2, 1), 2.24 m to go")
    assert "2 stuck" in out


def test_goto_wait_timeout_cancels_the_goal(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    avoid = StandInAvoid(bus, speed=0.0, ending=GOTO_STUCK)  # never arrives, never gives up
    avoid.start()
    started.append(avoid)
    status, out, _err = run(capsys, "avoid", "goto", "2", "0", "--wait", "--timeout", "1", "--avoid", "2")
    assert status == 1
    assert out.startswith("timed out after 1 s, 2.00 m to go: goal cancelled, robot stopped")
    stop = avoid.commands[-1]
    assert (stop.cmd_flags, stop.velocity) == (20, [0.0, 0.0])  # velocity 0, with the protection chosen


def test_goto_wait_without_the_avoid_module_is_one_line(bus: Bus, capsys: Capture) -> None:
    status, _out, err = run(capsys, "avoid", "goto", "1", "0", "--wait")
    assert status == 1
    assert err.strip() == f"pluto avoid: avoid is not running on robot {bus.robot} (`pluto start avoid`)"


def test_moveto_wait_until_at_the_goal(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    motion = StandInMotion(bus, speed=2.0, ending=AT_GOAL)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "0", "1.5", "--wait", "--timeout", "30")
    assert status == 0, out + err
    assert "waiting for the motion to (0, 1.5) to end (up to 30 s)" in err
    nearing = [line for line in err.splitlines() if line.startswith("motion to (0, 1.5): ") and "nearing" in line]
    assert nearing, err
    assert float(nearing[0].split()[4]) > 0.05  # the distance to go
    assert out.startswith("done: ")
    assert "at the goal" in out


def test_moveto_wait_timeout_stops_the_motion(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    motion = StandInMotion(bus, speed=0.0, ending=AT_GOAL)
    motion.start()
    started.append(motion)
    status, out, _err = run(capsys, "motion", "moveto", "3", "0", "--wait", "--timeout", "1")
    assert status == 1
    assert out.startswith("timed out after 1 s: motion stopped")
    assert motion.commands[-1].cmd_flags == 20  # the motion's stop


def test_what_counts_as_the_end_of_a_goto() -> None:
    assert goto_outcome(GOTO_RUNNING, running_seen=True, since_sent=5.0) is None
    assert goto_outcome(GOTO_REACHED, running_seen=False, since_sent=0.2) is None  # the previous goal's status
    assert goto_outcome(GOTO_REACHED, running_seen=False, since_sent=1.5) is True  # a goal already within reach
    assert goto_outcome(GOTO_REACHED, running_seen=True, since_sent=0.2) is True
    assert goto_outcome(GOTO_STUCK, running_seen=True, since_sent=0.2) is False
    assert goto_outcome(0, running_seen=True, since_sent=9.0) is False  # idle after running: restarted, or replaced
    assert goto_outcome(0, running_seen=False, since_sent=0.2) is None


def test_what_counts_as_the_end_of_a_motion() -> None:
    assert motion_outcome([0, 0, NEARING, FOLLOWING], started=True, since_sent=5.0) is None
    assert motion_outcome([0, 0, AT_GOAL, IDLE], started=False, since_sent=0.2) is None  # the previous goal's
    assert motion_outcome([0, 0, AT_GOAL, IDLE], started=False, since_sent=1.5) is True
    assert motion_outcome([0, 0, AT_GOAL, IDLE], started=True, since_sent=0.2) is True
    assert motion_outcome([0, 0, 0, IDLE], started=True, since_sent=0.2) is False
    assert motion_outcome([0, 0, NEARING, WAITING_POSE], started=True, since_sent=9.0) is None  # waits for the pose
    # a restart that lost the job: a failure, not an idle status that looks like the end
    assert motion_outcome([0, 0, RESTART_LOST, IDLE, -1], started=True, since_sent=3.0) is False
    assert motion_outcome([0, 0, RESTART_LOST, IDLE, -1], started=False, since_sent=0.2) is None  # the previous one's
    assert motion_outcome([0, 0, MOVETO_SET, SCANNING, 1], started=True, since_sent=3.0) is None  # continued
    assert motion_outcome([0, 0, 0, IDLE], started=False, since_sent=3.0) is None
    assert motion_outcome([0, 0, 0, IDLE], started=False, since_sent=7.0) is False  # never under way: not taken


def test_moveto_wait_fails_when_the_pose_does_not_show_the_goal(
    bus: Bus, started: list[Module[Any]], capsys: Capture
) -> None:
    """The motion says it is at the goal, but the pose stopped 1 m short: not verified, exit 1."""
    motion = StandInMotion(bus, speed=4.0, ending=AT_GOAL, short=1.0)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "2", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert out.startswith("the motion says it is at the goal, but the pose is 1.0"), out
    assert "not verified" in out


def test_moveto_wait_fails_on_a_stale_pose(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    deadline = names.stale_after(names.LOCALIZATION_POSE)
    assert deadline is not None
    motion = StandInMotion(bus, speed=4.0, ending=AT_GOAL, pose_lag=deadline + 0.3)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "1", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert "Localization/Pose is stale (0.7" in out and "not verified" in out


def test_moveto_wait_fails_on_a_pose_too_uncertain(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    motion = StandInMotion(bus, speed=4.0, ending=AT_GOAL, pose_std=0.3)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "1", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert "the pose is too uncertain (position std 0.30 m" in out


class RestartedMotion(StandInMotion):
    """Under way, then (a crash and a restart without a saved job) -3 with element[4] -1, idle."""

    def status(self, running: bool) -> msgs.FVectorState:
        if running:
            return super().status(running)
        return msgs.FVectorState(data=[0.0, 0.0], element=[0, 0, RESTART_LOST, IDLE, -1])


def test_moveto_wait_fails_when_the_module_restarted_without_its_job(
    bus: Bus, started: list[Module[Any]], capsys: Capture
) -> None:
    motion = RestartedMotion(bus, speed=0.0, ending=0, give_up=0.5)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "1", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert out.startswith("the motion module restarted and lost its job"), out


class WaitingMotion(StandInMotion):
    """Stopped, waiting for a fresh pose, for ever."""

    def status(self, running: bool) -> msgs.FVectorState:
        return msgs.FVectorState(data=[0.0, 0.0], element=[8, -1, NEARING, WAITING_POSE])


def test_moveto_wait_timeout_says_what_the_motion_waited_for(
    bus: Bus, started: list[Module[Any]], capsys: Capture
) -> None:
    motion = WaitingMotion(bus, speed=0.0, ending=0)
    motion.start()
    started.append(motion)
    status, out, err = run(capsys, "motion", "moveto", "3", "0", "--wait", "--timeout", "1")
    assert status == 1, out + err
    assert out.startswith("timed out after 1 s (waiting for a fresh, certain pose): motion stopped"), out


def test_goto_wait_fails_on_a_stale_pose(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    avoid = StandInAvoid(bus, speed=4.0, ending=GOTO_REACHED, pose_lag=1.0)
    avoid.start()
    started.append(avoid)
    status, out, err = run(capsys, "avoid", "goto", "1", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert out.startswith("goal not verified (1, 0): avoid says it is reached, but Localization/Pose is stale"), out


def test_goto_wait_fails_when_avoid_goes_idle(bus: Bus, started: list[Module[Any]], capsys: Capture) -> None:
    """Running, then idle (avoid restarted without the goto, or another command replaced it): a failure."""
    avoid = StandInAvoid(bus, speed=0.0, ending=0, give_up=0.5)
    avoid.start()
    started.append(avoid)
    status, out, err = run(capsys, "avoid", "goto", "2", "0", "--wait", "--timeout", "30")
    assert status == 1, out + err
    assert out.startswith("goal not reached (2, 0), 2.00 m to go (avoid restarted without it"), out
