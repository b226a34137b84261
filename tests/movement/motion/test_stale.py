"""Motion on stale inputs: a behaviour stops the robot at once (avoid's halt) and waits, saying for what (element[3]
7 scans, 8 pose, 9 avoid), its timers for giving up standing still; it goes on by itself when the input is fresh
again; the goal is reported reached only on a fresh pose certain enough."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.movement.avoid.core import HALT
from pluto.movement.motion.core import (
    AT_GOAL,
    FOLLOWING,
    MOVETO,
    MOVETO_SET,
    NEARING,
    SCANNING,
    WAITING_AVOID,
    WAITING_POSE,
    WAITING_SCAN,
    MotionController,
    MotionInputs,
    MotionOutput,
    MotionParams,
)
from pluto.movement.motion.module import MotionModule, MotionModuleParams
from tests.movement.motion.test_core import level_scan

WALL = [(-5.0, 8.0, 5.0, 8.0)]


def step(
    core: MotionController,
    t: float,
    pose: tuple[float, float, float] | None,
    *,
    pose_std: float = 0.0,
    scan_stale: bool = False,
    avoid_stale: bool = False,
    avoid_element: tuple[int, int] = (0, -1),
) -> MotionOutput:
    scan = None if scan_stale else level_scan(t, WALL)
    return core.step(
        MotionInputs(
            pose=pose,
            scan=scan,
            wrist=core.wrist_target,
            avoid_element=avoid_element,
            pose_std=pose_std,
            scan_stale=scan_stale,
            avoid_stale=avoid_stale,
        ),
        t,
    )


def turning_core() -> tuple[MotionController, float]:
    """A moveto whose way lies to the left: stepped until the robot turns on the spot (avoid velocity 0, ω > 0)."""
    core = MotionController(MotionParams(look_time=0.2, handover=0.0, near_reach=0.0))
    core.command(MOVETO, (0.0, 6.0), (), (), (0.0, 0.0, 0.0), 0.0)
    t = 0.0
    while t < 30.0:
        t = round(t + 0.1, 3)
        out = step(core, t, (0.0, 0.0, 0.0))
        if any(o.cmd_flags == 0 and o.velocity[1] > 0.0 for o in out.avoid):
            return core, t
    raise AssertionError("the robot never turned")


def test_a_stale_pose_halts_a_turn_on_the_spot_and_it_goes_on_when_fresh() -> None:
    core, t = turning_core()
    assert core.job is not None and core.job.nav is not None
    since = core.job.nav.phase_since
    t = round(t + 0.1, 3)
    out = step(core, t, None)
    assert [o.cmd_flags for o in out.avoid] == [HALT]  # at once, not the next turn command
    assert out.element[2:] == (MOVETO_SET, WAITING_POSE)
    for _ in range(50):  # 5 s without a pose: nothing more (the module renews the halt)
        t = round(t + 0.1, 3)
        out = step(core, t, None)
        assert out.avoid == () and out.element[3] == WAITING_POSE
    t = round(t + 0.1, 3)
    out = step(core, t, (0.0, 0.0, 0.0))
    assert out.element[3] == FOLLOWING
    assert any(o.cmd_flags == 0 and o.velocity[1] > 0.0 for o in out.avoid)  # turning again, by itself
    assert core.job.nav.phase_since == pytest.approx(since + 5.1)  # the turn's timer stood still


def test_an_avoid_goto_is_given_again_after_a_wait_and_its_progress_timer_stood_still() -> None:
    core, t = turning_core()
    theta, goto = 0.0, None
    while goto is None and t < 40.0:
        t = round(t + 0.1, 3)
        out = step(core, t, (0.0, 0.0, theta))
        for order in out.avoid:
            if order.cmd_flags == 0:
                theta += order.velocity[1] * 0.1
            if order.cmd_flags == 22:
                goto = order
    assert goto is not None and core.job is not None and core.job.nav is not None
    pose = (0.0, 0.0, theta)
    t = round(t + 0.1, 3)
    assert step(core, t, pose).avoid == ()  # avoid holds the goto
    t = round(t + 0.1, 3)
    assert [o.cmd_flags for o in step(core, t, pose, avoid_stale=True).avoid] == [HALT]
    for _ in range(200):  # 20 s: longer than progress_time, without a move
        t = round(t + 0.1, 3)
        assert step(core, t, pose, avoid_stale=True).element[3] == WAITING_AVOID
    t = round(t + 0.1, 3)
    out = step(core, t, pose)
    assert out.avoid == (goto,)  # the halt replaced it at avoid: given again
    assert core.job.nav.phase == "follow"  # not given up for want of progress while it waited
    for _ in range(20):
        t = round(t + 0.1, 3)
        step(core, t, pose)
    assert core.job.nav.phase == "follow"


def test_stale_scans_are_waited_for_too() -> None:
    core, t = turning_core()
    t = round(t + 0.1, 3)
    out = step(core, t, (0.0, 0.0, 0.0), scan_stale=True)
    assert [o.cmd_flags for o in out.avoid] == [HALT] and out.element[3] == WAITING_SCAN


def _near_the_goal() -> tuple[MotionController, float]:
    """A moveto to (4, 0) in the open, driven to 0.1 m short of the goal with a certain pose."""
    core = MotionController(MotionParams(look_time=0.2))
    core.command(MOVETO, (4.0, 0.0), (), (), (0.0, 0.0, 0.0), 0.0)
    t, x = 0.0, 0.0
    while t < 20.0 and x < 3.0:
        t = round(t + 0.1, 3)
        out = step(core, t, (x, 0.0, 0.0))
        if out.element[3] == FOLLOWING:
            x = min(x + 0.05, 3.0)
    assert out.element[2] == NEARING
    return core, t


def test_the_goal_is_reached_only_on_a_certain_pose() -> None:
    core, t = _near_the_goal()
    for _ in range(30):  # at the goal by the pose, but its position std (0.2 m) is above a third of 0.3 m
        t = round(t + 0.1, 3)
        out = step(core, t, (3.9, 0.0, 0.0), pose_std=0.2)
        assert out.element[2] == NEARING and out.element[3] == WAITING_POSE
        assert all(o.velocity == (0.0, 0.0) for o in out.avoid)  # held there, stopped
    t = round(t + 0.1, 3)
    out = step(core, t, (3.9, 0.0, 0.0), pose_std=0.05)
    assert out.element[2] == AT_GOAL and core.job is None


def test_a_stale_pose_never_reports_the_goal() -> None:
    core, t = _near_the_goal()
    for _ in range(30):
        t = round(t + 0.1, 3)
        out = step(core, t, None)
        assert out.element[2] == NEARING and out.element[3] == WAITING_POSE


def test_a_goal_told_on_an_uncertain_pose_is_looked_for_again_when_the_pose_is_certain() -> None:
    core, t = _near_the_goal()
    t = round(t + 0.1, 3)
    assert step(core, t, (3.9, 0.0, 0.0), pose_std=0.3).element[3] == WAITING_POSE
    # the pose, certain again, shows the robot 1.5 m from the goal: not reached; it scans for its way again
    t = round(t + 0.1, 3)
    out = step(core, t, (2.5, 0.0, 0.0), pose_std=0.02)
    assert out.element[2] == MOVETO_SET and out.element[3] == SCANNING
    assert core.job is not None and core.job.nav is not None and core.job.nav.phase == "scan"
    assert math.hypot(core.job.nav.goal[0] - 4.0, core.job.nav.goal[1]) < 1e-9


# -- the module ---------------------------------------------------------------------------------------------------


def _until(ready: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + 5.0
    while not ready():
        if time.monotonic() > end:
            raise AssertionError(f"no {what} within 5 s")
        time.sleep(0.002)


def test_the_module_reads_the_pose_by_the_freshness_contract(bus: Bus) -> None:
    """A pose older than its deadline (names.stale_after) is no pose: the module halts its moveto, with a lease, and
    says it waits for the pose; a fresh pose lets it go on. Time is the module's own (the steps' ``now``)."""
    module = MotionModule(bus, MotionModuleParams(autostart=False))
    module.start()
    pose_out = bus.create_publisher(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    status = bus.create_reader(names.MOTION_STATUS, msgs.FVectorState)
    sent: list[msgs.ActuatorState] = []
    orders = bus.create_subscription(names.AVOIDANCE_COMMAND, sent.append, msgs.ActuatorState, depth=64)
    deadline = names.stale_after(names.LOCALIZATION_POSE)
    assert deadline is not None

    def stepped(now: float, pose_stamp: float) -> msgs.FVectorState:
        pose_out.write(msgs.PoseEstimate(stamp=pose_stamp, pose=[1.0, 2.0, 0.0, 0.0, 0.0, 0.0], covariance=[0.0] * 9))
        _until(lambda: (p := module.pose_in.read()) is not None and p.stamp == pose_stamp, "pose")
        status.read()
        module.step(now)
        return status.wait_for_update(timeout=5.0)

    try:
        module.commands.put(msgs.ActuatorState(stamp=1.0, cmd_flags=MOVETO, position=[4.0, -1.0]))
        assert stepped(1.0, 1.0).element[3] == SCANNING
        late = stepped(2.0, 2.0 - deadline - 0.05)  # the pose stopped coming: its last one is stale
        assert late.element[2:4] == [MOVETO_SET, WAITING_POSE]
        _until(lambda: any(c.cmd_flags == HALT for c in sent), "halt")
        halt = next(c for c in sent if c.cmd_flags == HALT)
        assert halt.lease > 0.0  # renewed while the moveto runs: a killed module leaves a halt that lapses
        assert module.pose_in.stale_events == 1
        assert stepped(2.1, 2.1).element[3] == SCANNING  # fresh again: it goes on by itself
    finally:
        module.stop()
        bus.release(pose_out)
        bus.release(status)
        bus.release(orders)
