"""The command the gateway holds for its clients."""

from __future__ import annotations

from pluto.gateways.player.devices import Goal, Velocity
from pluto.gateways.player.motion import MotionHold, ReleaseAvoid, SendGoal, WriteVelocity


def test_a_velocity_is_held_and_resent() -> None:
    hold = MotionHold(resend_period=0.1)
    assert hold.step(0.0, drive_running=True) == []
    hold.set_velocity(Velocity(0.3, 0.1))
    assert hold.step(0.0, True) == [WriteVelocity(0.3, 0.1, True)]
    assert hold.step(0.05, True) == []
    assert hold.step(0.1, False) == [WriteVelocity(0.3, 0.1, False)]  # the drive went away: straight to the base
    hold.set_velocity(Velocity(0.0, 0.5))
    assert hold.step(0.12, True) == [WriteVelocity(0.0, 0.5, True)]  # a new command goes at once


def test_stop_writes_zero_once() -> None:
    hold = MotionHold()
    hold.set_velocity(Velocity(0.3, 0.0))
    hold.step(0.0, True)
    hold.stop()
    assert hold.step(0.01, True) == [WriteVelocity(0.0, 0.0, True)]
    assert hold.step(1.0, True) == [] and hold.velocity is None


def test_goals_go_once_and_velocity_releases_the_avoid_module() -> None:
    hold = MotionHold()
    goal = Goal(2.0, 1.0, 0.0)
    hold.set_velocity(Velocity(0.2, 0.0))
    hold.set_goal(goal)
    assert hold.step(0.0, True) == [SendGoal(goal, restart=False)]
    hold.set_goal(goal)  # clients repeat their commands: the same goal is not sent again
    assert hold.step(0.1, True) == [] and hold.goal == goal
    hold.set_velocity(Velocity(0.1, 0.0))
    assert hold.step(0.2, True) == [ReleaseAvoid(), WriteVelocity(0.1, 0.0, True)]
    hold.set_goal(goal)
    assert hold.step(0.3, True) == [SendGoal(goal, restart=True)]  # its control step was stopped by the release
    hold.stop()
    assert hold.step(0.4, True) == [ReleaseAvoid(), WriteVelocity(0.0, 0.0, True)]


def test_a_clock_jump_forgets_every_command_without_a_write() -> None:
    hold = MotionHold(resend_period=0.1)
    hold.set_velocity(Velocity(0.3, 0.0))
    assert hold.step(30.0, True) == [WriteVelocity(0.3, 0.0, True)]
    hold.forget()  # a new run: the old run's velocity must not move its robot
    assert [hold.step(t, True) for t in (0.0, 0.1, 0.2, 30.2)] == [[], [], [], []]
    assert hold.velocity is None
    goal = Goal(2.0, 1.0, 0.0)
    hold.set_goal(goal)
    assert hold.step(0.3, True) == [SendGoal(goal, restart=False)]
    hold.forget()
    assert hold.step(0.0, True) == [] and hold.goal is None  # nothing released: the avoid module forgets it itself
    hold.set_goal(goal)  # the same goal again is a goal of the new run: it is sent
    assert hold.step(0.1, True) == [SendGoal(goal, restart=False)]


def test_a_held_velocity_lapses_after_the_command_timeout_and_the_robot_stops() -> None:
    # A writer that commands 0.3 rad/s and falls silent: the velocity is written again until 1 s after the step
    # that took it in, then zero speed once, then nothing (the downstream timeouts are free to act again).
    hold = MotionHold(resend_period=0.25, command_timeout=1.0)
    hold.set_velocity(Velocity(0.0, 0.3))
    writes = {t / 8: hold.step(t / 8, True) for t in range(24)}  # 3 s in steps of 1/8 s
    turning = [WriteVelocity(0.0, 0.3, True)]
    assert [t for t, actions in writes.items() if actions == turning] == [0.0, 0.25, 0.5, 0.75]
    assert writes[1.0] == [WriteVelocity(0.0, 0.0, True)] and hold.velocity is None and hold.lapses == 1
    assert all(actions == [] for t, actions in writes.items() if t > 1.0)
    for t in (3.0, 3.5, 4.0, 4.5):  # a writer that renews its command (the same one) keeps it held
        hold.set_velocity(Velocity(0.2, 0.0))
        assert hold.step(t, False) == [WriteVelocity(0.2, 0.0, False)]
    assert hold.step(5.25, False) == [WriteVelocity(0.2, 0.0, False)] and hold.lapses == 1  # 0.75 s after 4.5
    assert hold.step(5.5, False) == [WriteVelocity(0.0, 0.0, False)] and hold.lapses == 2


def test_a_command_timeout_of_0_holds_a_velocity_for_ever() -> None:
    hold = MotionHold(resend_period=0.1, command_timeout=0.0)  # Player 1.5's behaviour, unsafe
    hold.set_velocity(Velocity(0.0, 0.3))
    assert hold.step(0.0, True) == [WriteVelocity(0.0, 0.3, True)]
    assert hold.step(127.0, True) == [WriteVelocity(0.0, 0.3, True)] and hold.lapses == 0
