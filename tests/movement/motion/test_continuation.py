"""A restarted motion module continues the job it was doing (a moveto to its goal, an exploration in its rectangle),
and says so in its status; one that cannot says that too, with a failure code rather than an idle status."""

from __future__ import annotations

import logging

import msgspec
import pytest

from pluto import msgs, names
from pluto.bus import Bus
from pluto.movement.motion.core import (
    EXPLORE,
    MOVETO,
    MOVETO_IDLE,
    MOVETO_SET,
    RESTART_LOST,
    RESUME,
    SCANNING,
    JobState,
    MotionController,
    MotionInputs,
    MotionState,
)
from pluto.movement.motion.module import MotionModule, MotionModuleParams
from pluto.runtime import persist

POSE = (1.0, 2.0, 0.3)


def inputs(pose: tuple[float, float, float] | None = POSE) -> MotionInputs:
    return MotionInputs(pose=pose, scan=None, wrist=None, avoid_data=(0.0, 0.0), avoid_element=(0, 0), has_arm=False)


def through_a_file(state: MotionState) -> MotionState:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=MotionState)


def test_a_resumed_controller_goes_on_with_its_moveto() -> None:
    first = MotionController()
    first.command(MOVETO, (4.0, -1.0), (), (), POSE, 1.0)
    first.step(inputs(), 1.0)
    second = MotionController()
    second.resume(through_a_file(first.snapshot()), 5.0)
    assert second.job is not None and second.job.kind == "moveto"
    assert second.job.nav is not None and second.job.nav.goal == (4.0, -1.0)
    out = second.step(inputs(), 5.0)
    assert out.element[2] == MOVETO_SET and out.element[3] == SCANNING  # deciding its way again


def test_a_resumed_controller_goes_on_exploring_its_rectangle_from_the_same_home() -> None:
    first = MotionController()
    first.command(EXPLORE, (), (3.0, 6.0), (), POSE, 1.0)
    assert first.job is not None
    first.job.tried.append((2.0, 3.0))
    second = MotionController()
    second.resume(through_a_file(first.snapshot()), 5.0)
    assert second.rect == first.rect and second.rect.set
    assert second.job is not None and second.job.kind == "explore" and second.job.grid is not None
    assert second.job.tried == [(2.0, 3.0)] and second.job.phase == "look"


def test_a_stopped_job_is_still_there_to_resume() -> None:
    first = MotionController()
    first.command(MOVETO, (4.0, -1.0), (), (), POSE, 1.0)
    first.command(0, (), (0.1, 0.0), (), POSE, 1.5)  # a command passed through to avoid stops the moveto
    assert first.job is None and first.stopped is not None
    second = MotionController()
    second.resume(through_a_file(first.snapshot()), 5.0)
    assert second.job is None and second.stopped is not None
    second.command(RESUME, (), (), (), POSE, 6.0)
    assert second.job is not None and second.job.nav is not None and second.job.nav.goal == (4.0, -1.0)


def test_a_job_that_cannot_go_on_is_refused_and_changes_nothing() -> None:
    controller = MotionController()
    for state in (
        MotionState(rect=(0.0, 0.0, 0.0, 0.0, 0.0), job=JobState(kind="moveto")),
        MotionState(rect=(0.0, 0.0, 0.0, 0.0, 0.0), job=JobState(kind="explore")),
        MotionState(rect=(0.0, 0.0, 0.0, 0.0, 0.0), job=JobState(kind="dance")),
    ):
        with pytest.raises(ValueError):
            controller.resume(state, 1.0)
    assert controller.job is None and controller.moveto_status == MOVETO_IDLE


# -- the module ---------------------------------------------------------------------------------------------------


def stepped(bus: Bus, module: MotionModule, now: float, command: msgs.ActuatorState | None = None) -> msgs.FVectorState:
    """Publish a pose at ``now``, give the module ``command``, step it; return its status."""
    pose = bus.create_publisher(names.LOCALIZATION_POSE, msgs.PoseEstimate)
    status = bus.create_reader(names.MOTION_STATUS, msgs.FVectorState)
    reader = module.pose_in
    pose.write(msgs.PoseEstimate(stamp=now, pose=[POSE[0], POSE[1], 0.0, POSE[2], 0.0, 0.0], covariance=[0.0] * 9))
    reader.wait_for_value(timeout=5.0)
    if command is not None:
        module.commands.put(command)
    status.read()
    module.step(now)
    value = status.wait_for_update(timeout=5.0)
    bus.release(pose)
    bus.release(status)
    return value


def test_a_restarted_module_goes_on_with_its_moveto(
    bus: Bus, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    params = MotionModuleParams(autostart=False)
    first = MotionModule(bus, params)
    first.start()
    try:
        status = stepped(bus, first, 1.0, msgs.ActuatorState(stamp=1.0, cmd_flags=MOVETO, position=[4.0, -1.0]))
        assert status.element[2] == MOVETO_SET and status.element[4] == 0
    finally:
        first.stop()  # a clean stop saves too

    monkeypatch.setenv(persist.RESUME_ENV, "1")  # what the supervisor sets in a restarted process
    second = MotionModule(bus, params)
    second.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.motion"):
            status = stepped(bus, second, 3.0)
        assert "restarted: the moveto to (4.00, -1.00) saved at t=1.000 s goes on" in caplog.text
        assert status.element[2] == MOVETO_SET and status.element[3] == SCANNING
        assert status.element[4] == 1  # the job went on after a restart
        assert second.core.job is not None and second.core.job.nav is not None
        assert second.core.job.nav.goal == (4.0, -1.0)
        # a new command: the restart is no longer the news
        status = stepped(bus, second, 3.5, msgs.ActuatorState(stamp=3.5, cmd_flags=MOVETO, position=[2.0, 2.0]))
        assert status.element[4] == 0
    finally:
        second.stop()


def test_a_restart_without_a_usable_job_says_it_lost_it(
    bus: Bus, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    persist.state_path(bus.robot, "motion").write_bytes(b"not a state")
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    module = MotionModule(bus, MotionModuleParams(autostart=False))
    module.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pluto.motion"):
            status = stepped(bus, module, 3.0)
        assert module.continuation.corrupt == 1 and "a job in progress is lost" in caplog.text
        assert status.element[2] == RESTART_LOST and status.element[4] == -1  # not an idle that looks like success
    finally:
        module.stop()


def test_a_command_taken_is_saved_at_once_not_at_the_next_periodic_save(bus: Bus) -> None:
    # Killed between a command and the next periodic save, the module would come back to the job before the command
    # (and could tell that job's end, "at the goal" of the goal before, as the new one's).
    module = MotionModule(bus, MotionModuleParams(autostart=False))
    module.start()
    try:
        module.continuation.period = 3600.0  # no periodic save after the first
        stepped(bus, module, 1.0)
        stepped(bus, module, 1.5, msgs.ActuatorState(stamp=1.5, cmd_flags=MOVETO, position=[4.0, -1.0]))
        assert module.continuation.flush()
        saved = persist.Continuation(persist.state_path(bus.robot, "motion"), MotionState, "motion", resume=True)
        loaded = saved.load(now=2.0, run=0)
        assert loaded is not None
        state, stamp = loaded
        assert stamp == 1.5 and state.job is not None and state.job.kind == "moveto"
        assert state.job.goal == (4.0, -1.0)
    finally:
        module.stop()
