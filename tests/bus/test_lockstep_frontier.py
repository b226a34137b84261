"""A tick's frontier as the lock-step gates read it: digested once per tick, newest write by writer and by key."""

from __future__ import annotations

from pluto.bus.lockstep import Frontier, LockstepTick, frontier_of

A, B = "pluto/r1/Base/Drive/State", "pluto/r2/Base/Drive/State"


def test_a_frontier_keeps_the_newest_write_of_each_writer_and_of_each_key() -> None:
    frontier = Frontier([(A, 7, 3), (A, 7, 5), (A, 7, 4), (A, 9, 1), (B, 11, 2)])
    assert frontier.writers == {7: 5, 9: 1, 11: 2}
    assert frontier.by_key == {A: {7: 5, 9: 1}, B: {11: 2}}


def test_the_gates_of_one_process_share_the_digest_of_the_tick_they_are_handed() -> None:
    tick = LockstepTick(1, 4, 0.2, [(A, 7, 5), (B, 11, 2)])
    digest = frontier_of(tick)
    assert frontier_of(tick) is digest  # the next gate handed the same tick reads the same digest
    again = LockstepTick(1, 4, 0.2, [(A, 7, 5), (B, 11, 2)])  # the same tick decoded anew (from another process)
    other = frontier_of(again)
    assert other is not digest and other.by_key == digest.by_key
    empty = frontier_of(LockstepTick(1, 5, 0.25))
    assert empty.writers == {} and empty.by_key == {}
