"""The lock-step barrier (pure): when the next tick may go out, at what time, and with which writes."""

from __future__ import annotations

import math

from pluto.bus.lockstep import LockstepAck
from pluto.sim.lockstep import MAX_TICK, Barrier

RUN = 7


def ack(barrier: Barrier, members: list[tuple[str, float]], writes: list[tuple[str, int, int]] | None = None) -> None:
    barrier.ack(LockstepAck(RUN, barrier.number, members, writes or []))


def test_the_next_tick_waits_for_every_member_and_comes_at_the_earliest_step_due() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("base")
    barrier.join("drive")
    barrier.first(wall=0.0)
    assert barrier.waiting_for() == ["base", "drive"]
    ack(barrier, [("base", 0.02)])
    assert not barrier.complete() and barrier.waiting_for() == ["drive"]
    ack(barrier, [("drive", 0.05)])
    assert barrier.complete()
    assert barrier.next_stamp() == 0.02
    tick = barrier.tick(0.02, wall=0.1)
    assert (tick.number, tick.stamp) == (1, 0.02)
    assert barrier.waiting_for() == ["base"]  # each tick waits for the members due at it; the drive sleeps
    ack(barrier, [("base", 0.04)])
    assert barrier.next_stamp() == 0.04
    barrier.tick(0.04, wall=0.2)
    ack(barrier, [("base", 0.06)])
    assert barrier.next_stamp() == 0.05
    barrier.tick(0.05, wall=0.3)
    assert barrier.waiting_for() == ["drive"]


def test_time_moves_at_most_max_tick_when_nothing_is_due() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("gateway")
    barrier.first(wall=0.0)
    ack(barrier, [("gateway", math.inf)])
    assert barrier.next_stamp() == MAX_TICK


def test_writes_of_a_tick_are_the_next_ticks_frontier_newest_per_writer() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("base")
    barrier.first(wall=0.0)
    ack(barrier, [("base", 0.02)], [("Base/Drive/State", 11, 4), ("Base/Drive/State", 11, 5), ("Base/Sonar", 12, 1)])
    tick = barrier.tick(0.02, wall=0.0)
    assert sorted(tick.frontier) == [("Base/Drive/State", 11, 5), ("Base/Sonar", 12, 1)]
    ack(barrier, [("base", 0.04)])
    assert barrier.tick(0.04, wall=0.0).frontier == []  # nothing new was written


def test_acknowledgements_of_another_run_or_an_old_tick_do_not_count() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("base")
    barrier.first(wall=0.0)
    barrier.ack(LockstepAck(RUN + 1, 0, [("base", 0.02)], []))
    assert not barrier.complete()
    ack(barrier, [("base", 0.02)])
    barrier.tick(0.02, wall=0.0)
    barrier.ack(LockstepAck(RUN, 0, [("base", 0.0)], []))  # the tick before, acknowledged again: changes nothing
    assert not barrier.complete() and barrier.members["base"].next_due == 0.0
    barrier.members["base"].next_due = 0.02
    barrier.ack(LockstepAck(RUN, 5, [("base", 0.1)], []))  # a tick not sent yet
    assert not barrier.complete()


def test_an_acknowledgement_of_an_earlier_tick_tells_when_the_member_is_due() -> None:
    # A member that joined while the barrier moved on stepped at the tick it saw first: not due before 0.02 s.
    barrier = Barrier(run=RUN)
    barrier.first(wall=0.0)
    barrier.tick(0.0, wall=0.0, paused=True)
    barrier.join("late")
    assert barrier.waiting_for() == ["late"]
    barrier.ack(LockstepAck(RUN, 0, [("late", 0.02)], []))
    assert barrier.complete()


def test_a_member_that_does_not_answer_is_dropped_then_rejoins() -> None:
    barrier = Barrier(run=RUN, timeout=2.0)
    barrier.join("base")
    barrier.join("hung")
    barrier.first(wall=100.0)
    ack(barrier, [("base", 0.02)])
    assert barrier.drop_late(wall=101.0) == []
    assert barrier.drop_late(wall=102.5) == ["hung"]
    assert barrier.complete() and barrier.dropped() == ["hung"]
    assert any("hung" in event and "dropped" in event for event in barrier.events)
    barrier.tick(barrier.next_stamp(), wall=102.5)
    assert barrier.waiting_for() == ["base"]  # time goes on without it
    ack(barrier, [("base", 0.04), ("hung", 0.04)])
    assert barrier.dropped() == [] and barrier.complete()


def test_a_member_that_leaves_is_not_waited_for() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("base")
    barrier.join("avoid")
    barrier.first(wall=0.0)
    ack(barrier, [("base", 0.02)])
    barrier.leave("avoid")
    assert barrier.complete()


def test_an_acknowledgement_before_the_liveliness_token_makes_a_member() -> None:
    barrier = Barrier(run=RUN)
    barrier.first(wall=0.0)
    ack(barrier, [("early", 0.1)])
    assert list(barrier.members) == ["early"] and barrier.complete()


def test_tick_times_are_later_and_rounded_to_the_microsecond() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("a")
    barrier.first(wall=0.0)
    ack(barrier, [("a", 0.01 + 0.02)])  # 0.030000000000000002
    assert barrier.next_stamp() == 0.03
    ack(barrier, [("a", 0.0)])  # a due time that is not later than now never stalls time
    barrier.members["a"].next_due = 0.0
    assert barrier.next_stamp() > 0.0


def test_a_late_acknowledgement_does_not_bring_back_a_member_that_left() -> None:
    barrier = Barrier(run=RUN)
    barrier.join("avoid")
    barrier.first(wall=0.0)
    barrier.leave("avoid")
    ack(barrier, [("avoid", 0.1)])  # sent just before it left, heard after
    assert "avoid" not in barrier.members and barrier.complete()
    barrier.join("avoid")  # started again: a new token
    assert barrier.waiting_for() == ["avoid"]
