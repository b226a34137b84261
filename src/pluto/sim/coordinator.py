"""The simulator's lock-step coordinator: it sends the ticks, hears the acknowledgements and the members, and decides
with its :class:`~pluto.sim.lockstep.Barrier` when time moves on (for one robot, or for every robot of a simulation of
several). The :class:`~pluto.sim.module.SimModule` that leads a simulation runs it; the members' side is
:mod:`pluto.bus.lockstep`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import zenoh

from pluto import msgs
from pluto.bus import Bus, StateWriter
from pluto.bus.executor import on_zenoh_thread
from pluto.bus.lockstep import (
    ACK_KEY,
    DUE_SLACK,
    MEMBER_KEY,
    TICK_KEY,
    LockstepAck,
    LockstepTick,
    NewestWrites,
    WriteMark,
    keep_newest,
    marks_of,
    process_tick_key,
)
from pluto.sim.lockstep import Barrier


class Simulator(Protocol):
    """What the coordinator uses of a robot's simulator (:class:`~pluto.sim.module.SimModule`)."""

    bus: Bus
    run_id: int
    start_tick: int
    sim_time: float
    """The simulated time, s (the coordinator sets it at each tick)."""
    clock_out: StateWriter[msgs.SimTime]

    def promise(self, stamp: float, tick: int = 0) -> None:
        """Called before time ``stamp`` and tick ``tick`` are published (the simulator saves a time ahead)."""
        ...


class LockstepParams(Protocol):
    """What the coordinator uses of the simulator's parameters (:class:`~pluto.sim.module.SimParams`)."""

    @property
    def lockstep_timeout(self) -> float: ...

    @property
    def paused(self) -> bool: ...

    @property
    def speed(self) -> float: ...


class LockstepState(msgspec.Struct, frozen=True, kw_only=True):
    """The reply of ``sim/lockstep``."""

    tick: int
    stamp: float
    paused: bool
    members: list[str]
    dropped: list[str]
    waiting_for: list[str]


@dataclass
class _Link:
    """The lock-step's entities on one robot's bus: where its ticks go and its members answer."""

    robot: str
    ticks: Any
    acks: Any
    members: Any
    bus: Bus
    sim: Simulator | None
    """The robot's simulator in this process; None for a robot whose simulator runs in another process."""

    def close(self) -> None:
        if self.sim is not None and self.bus.lockstep_coordinator is not None:
            self.bus.lockstep_coordinator = None
        for entity in (self.members, self.acks, self.ticks):
            with contextlib.suppress(Exception):  # already gone with the session
                entity.undeclare()


@dataclass
class _Process:
    """A process of a robot's members that answers through Zenoh: the ticks at which none of its members is due are
    not sent to it, and the writes those ticks carried are owed to it (sent with the next tick it gets)."""

    robot: str
    process: str
    """Its id (its Zenoh session's: :attr:`LockstepAck.process`), which names its key for ticks
    (:func:`~pluto.bus.lockstep.process_tick_key`)."""
    members: set[str] = field(default_factory=set)
    owed: NewestWrites = field(default_factory=dict)
    """The writes of the ticks not sent to it."""
    publisher: Any = None

    def frontier(self, tick: LockstepTick) -> list[WriteMark]:
        """The frontier of ``tick`` for this process: with what it is owed (which it is then no longer)."""
        if not self.owed:
            return tick.frontier
        keep_newest(self.owed, tick.frontier)
        marks = marks_of(self.owed)
        self.owed = {}
        return marks

    def close(self) -> None:
        if self.publisher is not None:
            with contextlib.suppress(Exception):  # already gone with the session
                self.publisher.undeclare()
            self.publisher = None


class LockstepCoordinator:
    """The simulator's lock-step loop: publishes ticks and ``Clock``, collects acknowledgements (a :class:`Barrier`).

    Acknowledgements and membership changes arrive on Zenoh threads and only update the barrier under a lock; the
    loop, on the module's control thread, decides and publishes. Members on a robot's bus in this process are
    reached without Zenoh (ticks go to other processes only, and this process's gate gets them by a call); their
    acknowledgements come by a call too, on the gate's thread, and when one completes a tick of a simulation as fast as
    possible, the next tick goes out from that call: a simulation in one process runs its ticks on one thread.

    With ``fleet`` it serves the robots of a simulation of several: each robot's simulator is added (:meth:`add`), the
    ticks go to every robot's bus, and a member is known to the barrier as ``<robot>/<module>``.

    A tick at which none of a process's members is due is not sent to that process (once every member has answered
    once, so that the coordinator knows its process): a module at 1 Hz among modules at 20 Hz hears one tick in
    twenty. The writes of the ticks it did not get go with the next one it gets. Ticks while time is held, and ticks
    sent again, go to every process.
    """

    REPEAT_AFTER = 1.0
    """Wall seconds after which a tick that is still not finished is sent again (a lost tick or acknowledgement)."""
    PAUSED_TICK = 0.05
    """Wall seconds between ticks while time is held and nothing changes."""
    CLOCK_PERIOD = 0.05
    """Simulated seconds between two ``Clock`` values at most (in lock-step, ``Clock`` is for non-members)."""

    def __init__(self, sim: Simulator, params: LockstepParams, fleet: bool = False) -> None:
        self.sim = sim
        self.params = params
        self.fleet = fleet
        self.log = logging.getLogger("pluto.sim.lockstep")
        # a restarted simulator goes on with the run's tick numbers and time (members ignore older ticks of a run)
        self.barrier = Barrier(
            run=sim.run_id, timeout=params.lockstep_timeout, number=sim.start_tick, stamp=sim.sim_time
        )
        self.paused = params.paused
        self._cond = threading.Condition()
        self._changed = False  # membership changed: the current tick goes out again
        self._last = LockstepTick(self.barrier.run, self.barrier.number, self.barrier.stamp)
        self._next_clock = self.barrier.stamp
        self._links: dict[str, _Link] = {}  # by robot
        self._processes: dict[tuple[str, str], _Process] = {}  # by robot and process id: those answering through Zenoh
        self._process_of: dict[str, _Process] = {}  # member -> its process
        self._direct: set[str] = set()  # members that answer by a call (on a bus of this process)
        self._retired: list[_Process] = []  # processes without members, whose publisher is to be undeclared
        self._stop: threading.Event | None = None  # set by run() once its first tick is out: the loop runs
        self.add(sim)

    def add(self, sim: Simulator) -> None:
        """Tick the modules of ``sim``'s robot too (a robot of a simulation of several; its ``Clock`` follows)."""
        self._attach(sim.bus.robot, sim.bus, sim)

    def add_remote(self, robot: str) -> None:
        """Tick the modules of ``robot`` too, whose simulator runs in another process (a follower there, which
        mirrors the leader's ``Clock``): its ticks, acknowledgements and members go through Zenoh only."""
        self._attach(robot, self.sim.bus, None)

    def _attach(self, robot: str, bus: Bus, sim: Simulator | None) -> None:
        # Zenoh carries the ticks to other processes; this process's gate on the bus gets them by a call (_put).
        ticks = bus.session.declare_publisher(
            bus.key_raw(TICK_KEY, robot),
            congestion_control=zenoh.CongestionControl.BLOCK,
            express=True,
            allowed_destination=zenoh.Locality.REMOTE,
        )
        acks = bus.session.declare_subscriber(
            bus.key_raw(ACK_KEY, robot), on_zenoh_thread(lambda sample: self._on_ack(sample, robot))
        )
        members = bus.session.liveliness().declare_subscriber(
            bus.key_raw(f"{MEMBER_KEY}/**", robot),
            on_zenoh_thread(lambda sample: self._on_member(sample, robot)),
            history=True,
        )
        with self._cond:
            self._links[robot] = _Link(robot, ticks, acks, members, bus, sim)
            if sim is not None:
                bus.lockstep_coordinator = lambda ack: self._take_ack(ack, robot, direct=True)
            self._changed = True  # the current tick goes out again, to this robot too
            self._cond.notify_all()

    def remove(self, sim: Simulator) -> None:
        """Stop ticking the modules of ``sim``'s robot (its simulator stops)."""
        with self._cond:
            link = self._links.get(sim.bus.robot)
            if link is None or link.sim is not sim:
                return
            del self._links[sim.bus.robot]
            if self.fleet:
                for member in [m for m in self.barrier.members if m.startswith(f"{link.robot}/")]:
                    self.barrier.leave(member)
                    self._unplace(member)
                self._changed = True
                self._cond.notify_all()
            gone = [key for key in self._processes if key[0] == link.robot]
            retired = [self._processes.pop(key) for key in gone]
        for process in retired:
            process.close()
        link.close()

    def _member(self, robot: str, name: str) -> str:
        """The barrier's name of module ``name`` of ``robot``."""
        return f"{robot}/{name}" if self.fleet else name

    # -- from Zenoh threads -------------------------------------------------------------------------------------

    def _on_ack(self, sample: Any, robot: str) -> None:
        try:
            ack = msgspec.msgpack.decode(sample.payload.to_bytes(), type=LockstepAck)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            self.sim.bus.drops.drop(ACK_KEY, err)
            return
        self._take_ack(ack, robot, direct=False)

    def _take_ack(self, ack: LockstepAck, robot: str, direct: bool) -> None:
        """An acknowledgement of the members of one process of ``robot``: from Zenoh, or ``direct``ly from the gate of
        a bus of this process, on the gate's thread (which may then send the next tick itself: see the class)."""
        if self.fleet:
            members = [(self._member(robot, name), due) for name, due in ack.members]
            ack = LockstepAck(ack.run, ack.number, members, ack.writes, ack.process)
        with self._cond:
            self.barrier.ack(ack)
            self._place(ack, robot, direct)
            if not self.barrier.complete():
                return
            stop = self._stop
            if direct and stop is not None and not stop.is_set() and self._free_to_advance():
                self._advance()
            else:
                self._cond.notify_all()  # the loop wakes once per tick, not at every process's acknowledgement

    def _free_to_advance(self) -> bool:
        """The next tick may go out as soon as the current one is finished: as fast as possible, not paused, no
        membership change to handle first (lock held)."""
        return self.params.speed == 0 and not self.paused and not self._changed

    def _advance(self) -> None:
        """Send the next tick, at the earliest step due (lock held; the current tick is finished)."""
        self._publish(self.barrier.tick(self.barrier.next_stamp(), time.monotonic()))

    def _on_member(self, sample: Any, robot: str) -> None:
        name = self._member(robot, str(sample.key_expr).rsplit("/", 1)[-1])
        with self._cond:
            if sample.kind == zenoh.SampleKind.PUT:
                self.barrier.join(name)
            else:
                self.barrier.leave(name)
                self._unplace(name)
            self._changed = True
            self._cond.notify_all()

    def _place(self, ack: LockstepAck, robot: str, direct: bool) -> None:
        """Note which process the answering members are in (lock held)."""
        if direct:
            for name, _due in ack.members:
                if name in self.barrier.members:
                    self._direct.add(name)
            return
        if not ack.process:
            return  # a process of an older version, which only hears the ticks sent to all
        key = (robot, ack.process)
        for name, _due in ack.members:
            current = self._process_of.get(name)
            if (current is not None and (current.robot, current.process) == key) or name not in self.barrier.members:
                continue
            self._unplace(name)
            process = self._processes.get(key)
            if process is None:
                process = self._processes[key] = _Process(robot, ack.process)
            process.members.add(name)
            self._process_of[name] = process

    def _unplace(self, name: str) -> None:
        """Forget where member ``name`` is (it left, or answers from another process now; lock held)."""
        self._direct.discard(name)
        process = self._process_of.pop(name, None)
        if process is None:
            return
        process.members.discard(name)
        if not process.members:
            del self._processes[(process.robot, process.process)]
            self._retired.append(process)  # undeclared by the loop (not on the Zenoh thread that told us)

    # -- services -----------------------------------------------------------------------------------------------

    def pause(self) -> bool:
        with self._cond:
            self.paused = True
            self._cond.notify_all()
        return True

    def resume(self) -> bool:
        with self._cond:
            self.paused = False
            self._cond.notify_all()
        return False

    def state(self) -> LockstepState:
        with self._cond:
            b = self.barrier
            return LockstepState(
                tick=b.number,
                stamp=b.stamp,
                paused=self.paused,
                members=sorted(b.members),
                dropped=b.dropped(),
                waiting_for=b.waiting_for(),
            )

    def notes(self) -> list[str]:
        state = self.state()
        speed = "as fast as possible" if self.params.speed == 0 else f"at most {self.params.speed:g}x real time"
        notes = [
            f"lock-step {speed}{', paused' if state.paused else ''}: tick {state.tick} at {state.stamp:.3f} s, "
            f"{len(state.members)} members"
        ]
        if state.dropped:
            notes.append(f"dropped from the lock-step (not answering): {', '.join(state.dropped)}")
        return notes

    # -- the loop -----------------------------------------------------------------------------------------------

    def _put(self, tick: LockstepTick) -> None:
        """Send ``tick`` to every robot's modules (lock held): through Zenoh to other processes (with the writes they
        are owed), by a call to this process's gate of each robot's bus."""
        self._retire()
        owed: NewestWrites = {}  # what any process is owed: with this tick's writes, one frontier for all
        for process in self._processes.values():
            if process.owed:
                keep_newest(owed, marks_of(process.owed))
                process.owed = {}
        sent = tick
        if owed:
            keep_newest(owed, tick.frontier)
            sent = msgspec.structs.replace(tick, frontier=marks_of(owed))
        data = msgspec.msgpack.encode(sent)
        for link in self._links.values():
            link.ticks.put(data)
        self._put_here(tick)

    def _put_due(self, tick: LockstepTick) -> None:
        """Send ``tick`` to the processes with a member due at its time, and to this process's gates (lock held); the
        others are owed its writes. To every process while a member's process is not known yet."""
        members = self.barrier.members
        if any(name not in self._process_of and name not in self._direct for name in members):
            self._put(tick)
            return
        self._retire()
        due = tick.stamp + DUE_SLACK
        shared: bytes | None = None  # the tick as it is, for the processes owed nothing more
        for process in self._processes.values():
            if not any(members[name].next_due <= due for name in process.members if name in members):
                keep_newest(process.owed, tick.frontier)
                continue
            if process.owed:
                data = msgspec.msgpack.encode(msgspec.structs.replace(tick, frontier=process.frontier(tick)))
            else:
                if shared is None:
                    shared = msgspec.msgpack.encode(tick)
                data = shared
            self._publisher(process).put(data)
        self._put_here(tick)

    def _publisher(self, process: _Process) -> Any:
        """The publisher of the ticks of one process (declared at its first tick; lock held)."""
        if process.publisher is None:
            link = self._links[process.robot]
            process.publisher = link.bus.session.declare_publisher(
                link.bus.key_raw(process_tick_key(process.process), process.robot),
                congestion_control=zenoh.CongestionControl.BLOCK,
                express=True,
                allowed_destination=zenoh.Locality.REMOTE,
            )
        return process.publisher

    def _put_here(self, tick: LockstepTick) -> None:
        """Hand ``tick`` to this process's gate of each robot's bus (lock held)."""
        for link in list(self._links.values()):
            gate = link.bus.gate if link.sim is not None else None
            if gate is not None:
                gate.take_tick(tick)

    def _retire(self) -> None:
        """Undeclare the publishers of processes left without members (lock held)."""
        retired, self._retired = self._retired, []
        for process in retired:
            process.close()

    def _publish(self, tick: LockstepTick) -> None:
        self.sim.promise(tick.stamp, tick.number)
        sims = [link.sim for link in self._links.values() if link.sim is not None]
        for sim in sims:
            sim.sim_time = tick.stamp
        # Members follow the ticks; ``Clock`` is for everyone else (tools, logs), so it need not come at every tick.
        if tick.stamp >= self._next_clock or tick.paused or tick.number == 0:
            clock = msgs.SimTime(stamp=tick.stamp, rate=self.params.speed, run=self.barrier.run, lockstep=True)
            for sim in sims:
                sim.clock_out.write(clock)
            self._next_clock = tick.stamp + self.CLOCK_PERIOD
        if tick.paused:
            self._put(tick)  # to everyone: modules still joining
        else:
            self._put_due(tick)
        self._last = tick

    def _report(self) -> None:
        """Log what happened to members (lock held)."""
        for event in self.barrier.events:
            if "dropped" in event:
                self.log.warning(event)
            else:
                self.log.info(event)
        self.barrier.events.clear()

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set."""
        speed = self.params.speed
        with self._cond:
            self._publish(self.barrier.first(time.monotonic()))
            self._stop = stop
        origin: tuple[float, float] | None = None  # (wall, stamp) that paces the time at a finite speed
        while not stop.is_set():
            with self._cond:
                # wait until every member has finished the current tick
                while not stop.is_set():
                    wall = time.monotonic()
                    self._report()
                    self.barrier.drop_late(wall)
                    self._report()
                    if self._changed:
                        self._changed = False
                        self.barrier.restart_wait(wall)
                        self._put(self._last)  # newcomers need it
                        continue
                    if self.barrier.complete():
                        break
                    if wall - self.barrier.sent_at >= self.REPEAT_AFTER:
                        self._put(self._last)
                    self._cond.wait(0.1)
                if stop.is_set():
                    break
                if self.paused:
                    origin = None
                    if not self.barrier.pending_writes():
                        # nothing to pass on: tick again after a while, or at once when something changes
                        self._cond.wait(self.PAUSED_TICK)
                        if stop.is_set():
                            break
                        if not self.paused:
                            continue
                    self._publish(self.barrier.tick(self.barrier.stamp, time.monotonic(), paused=True))
                    continue
                if speed <= 0:
                    self._advance()  # in the same hold of the lock: an acknowledgement cannot advance it meanwhile
                    continue
                stamp, number = self.barrier.next_stamp(), self.barrier.number
            if origin is None:
                origin = (time.monotonic(), self.barrier.stamp)
            delay = origin[0] + (stamp - origin[1]) / speed - time.monotonic()
            if delay > 0 and stop.wait(delay):
                break
            with self._cond:
                if self.barrier.number == number:
                    self._publish(self.barrier.tick(stamp, time.monotonic()))

    def close(self) -> None:
        with self._cond:
            links, self._links = list(self._links.values()), {}
            processes = [*self._processes.values(), *self._retired]
            self._processes, self._process_of, self._retired = {}, {}, []
        for process in processes:
            process.close()
        for link in links:
            link.close()
