"""The simulator's side of the lock-step: a barrier that lets time advance only when every member has finished.

Strategy (as Gazebo's lock-step and CARLA's synchronous mode): the simulator publishes tick ``k`` at time ``t_k``;
each member (a module following simulated time) runs the steps that are due by ``t_k`` and acknowledges the tick with
the writes it made and the time its next step is due. When every member has acknowledged, tick ``k+1`` goes out at
the earliest due time (at most :data:`MAX_TICK` later), carrying the writes of tick ``k`` as its frontier (see
:mod:`pluto.bus.lockstep` for what members do with it). So time moves in the exact steps the modules need, as fast as
the slowest of them allows, and the same run gives the same messages however busy the machine is.

A member that stops answering (hung, or far too slow) is dropped from the barrier after ``timeout`` wall seconds,
logged and listed; it rejoins when it acknowledges a current tick again. A member whose process ends leaves at once
(its liveliness token goes). This class is pure: the simulator module feeds it and publishes what it decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pluto.bus.lockstep import DUE_SLACK, LockstepAck, LockstepTick, NewestWrites, keep_newest, marks_of

MAX_TICK = 0.1
"""Longest simulated time between two ticks, s (when no member has a step due sooner)."""


@dataclass
class MemberState:
    """What the barrier knows of one member."""

    next_due: float = 0.0
    acked: int = -1
    dropped: bool = False


@dataclass
class Barrier:
    """Decides when the next tick may go out, and at what time.

    Args:
        run: id of this simulation run (acknowledgements of other runs are ignored).
        timeout: wall seconds a member may take over one tick before it is dropped.
    """

    run: int
    timeout: float = 10.0
    members: dict[str, MemberState] = field(default_factory=dict)
    number: int = 0
    stamp: float = 0.0
    _frontier: NewestWrites = field(default_factory=dict)
    sent_at: float = 0.0
    """Wall-clock time the current tick went out, s."""
    left: set[str] = field(default_factory=set)
    """Members that left (a late acknowledgement of theirs does not bring them back; a new token does)."""
    events: list[str] = field(default_factory=list)
    """What happened to members (joined, left, dropped, rejoined), for the log; the caller empties it."""

    def join(self, name: str) -> None:
        self.left.discard(name)
        if name not in self.members:
            self.members[name] = MemberState(next_due=-math.inf)  # due at once: it steps at the first tick it sees
            self.events.append(f"{name} joined the lock-step at {self.stamp:.3f} s")

    def leave(self, name: str) -> None:
        self.left.add(name)
        if self.members.pop(name, None) is not None:
            self.events.append(f"{name} left the lock-step")

    def ack(self, ack: LockstepAck) -> None:
        """Take a process's acknowledgement for its members (of any tick; only the current one counts)."""
        if ack.run != self.run:
            return
        keep_newest(self._frontier, ack.writes)
        if ack.number > self.number:
            return
        for member, next_due in ack.members:
            state = self.members.get(member)
            if state is None:
                if member in self.left:
                    continue  # its last acknowledgement, heard after it left: it is gone
                # An acknowledgement before its liveliness token arrived: it is a member all the same.
                self.join(member)
                state = self.members[member]
            if ack.number < state.acked:
                continue  # older than what it already said
            # An acknowledgement of an earlier tick still says when the member's next step is due: a member that
            # joined while time was held, say, and stepped at the tick it saw first.
            state.acked = ack.number
            state.next_due = next_due
            if state.dropped and ack.number == self.number:
                state.dropped = False
                self.events.append(f"{member} answers again and rejoins the lock-step")

    def waiting_for(self) -> list[str]:
        """Members due at the current tick that have not acknowledged it (dropped ones aside). A member whose next
        step comes later sleeps through the tick: its process does not even wake."""
        return sorted(
            n
            for n, s in self.members.items()
            if not s.dropped and s.acked < self.number and s.next_due <= self.stamp + DUE_SLACK
        )

    def complete(self) -> bool:
        """Every member has finished the current tick (:meth:`waiting_for` is empty; asked at every acknowledgement,
        so without building the list)."""
        number, due = self.number, self.stamp + DUE_SLACK
        return not any(not s.dropped and s.acked < number and s.next_due <= due for s in self.members.values())

    def drop_late(self, wall: float) -> list[str]:
        """Drop the members that took longer than ``timeout`` over the current tick; return their names."""
        if wall - self.sent_at < self.timeout:
            return []
        late = self.waiting_for()
        for name in late:
            self.members[name].dropped = True
            self.events.append(
                f"{name} did not finish the tick at {self.stamp:.3f} s within {self.timeout:g} s: dropped from the "
                "lock-step (time goes on without it)"
            )
        return late

    def pending_writes(self) -> bool:
        """Members wrote something during the current tick (the next tick has a frontier to pass on)."""
        return bool(self._frontier)

    def dropped(self) -> list[str]:
        return sorted(n for n, s in self.members.items() if s.dropped)

    def next_stamp(self) -> float:
        """The time of the next tick: the earliest step due, at most :data:`MAX_TICK` ahead, always later."""
        dues = [s.next_due for s in self.members.values() if not s.dropped and s.next_due > self.stamp]
        target = min([*dues, self.stamp + MAX_TICK])
        return max(round(target, 6), math.nextafter(self.stamp, math.inf))

    def tick(self, stamp: float, wall: float, paused: bool = False) -> LockstepTick:
        """Start the next tick at ``stamp`` (s); ``wall`` is the wall-clock time it goes out (s)."""
        frontier = marks_of(self._frontier)
        self._frontier = {}
        self.number += 1
        self.stamp = stamp
        self.sent_at = wall
        return LockstepTick(self.run, self.number, stamp, frontier, paused)

    def first(self, wall: float) -> LockstepTick:
        """The first tick: of the run (time 0, tick 0), or of a restarted simulator going on with its run (the tick
        number and time it was created with)."""
        self.sent_at = wall
        return LockstepTick(self.run, self.number, self.stamp, [], True)

    def restart_wait(self, wall: float) -> None:
        """The current tick was sent again: its members get the full timeout from now."""
        self.sent_at = wall
