"""The ``sim`` module: simulated time and the world every simulated device lives in.

It publishes ``Clock`` (the simulated time, advancing ``rate`` times faster than the wall clock) and serves
``sim/world``: which world, noise profile and seed the simulated devices use, so they are set in one place. The
devices (``base``, ``sick``, ``wrist``, ``dmu``, ``gps``) run on the simulated time and ask for these settings when
they start.

With ``lockstep`` (or ``rate = "max"``) time advances one tick at a time, each only after every module that follows
simulated time has finished its step (:mod:`pluto.sim.lockstep`): the same seed and profile then give the same run on
any machine, and with ``rate = "max"`` it runs as fast as the modules can go. ``paused`` holds the time at 0 (ticks
keep coming at that time, so modules can start and exchange their first values) until ``sim/resume``.

Services: ``sim/world`` (the settings), ``sim/pause``, ``sim/resume`` (-> paused or not), ``sim/lockstep`` (-> the
barrier's state: tick, time, members, dropped members).

Several robots in one world (:mod:`pluto.sim.fleet`): each robot has its own robot name on the bus, and so its own
``sim`` module, which publishes that robot's ``Clock`` and serves its ``sim/world`` (the settings, with the robot's
start pose and the names, starts and sizes of all the robots: :class:`SimSettings`), so its devices and modules find
the simulator as a lone robot's do. One of them, the *leader* (the first robot's), coordinates the lock-step of all:
it publishes each tick on every robot's ``@lockstep/tick`` and hears the acknowledgements and members of every
robot, so one clock covers every module of every robot, and the frontier of a tick names the keys written
(``pluto/<robot>/<interface>``, :mod:`pluto.bus.lockstep`): a module that reads another robot's value (the bodies
see each other through the others' ``Sim/Truth``) waits for it like one of its own robot's. In the barrier a member
is ``<robot>/<module>``. The others, *followers*, share the leader's run, time and coordinator; on the free-running
clock they publish the leader's time. The services ``sim/pause``, ``sim/resume`` and ``sim/lockstep`` of any robot
act on the one lock-step.

Restarts: a simulator started again by the supervisor after a crash goes on with the same run, from where its time
was (:mod:`pluto.runtime.persist`): the other modules see the time stall, then go on, not a new run. Before its time
passes the time it last saved, it saves a time :data:`HORIZON` ahead (and a tick number :data:`HORIZON_TICKS` ahead),
so that the time it restarts at is never earlier than one the modules have seen: the time jumps forward by less than
:data:`HORIZON` at a restart. The simulated devices keep their own state the same way (the body's pose and odometry,
the inertial unit's heading).
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec
import zenoh

from pluto import msgs, names
from pluto.bus import Bus, StateWriter
from pluto.bus.executor import on_zenoh_thread
from pluto.bus.lockstep import (
    ACK_KEY,
    DUE_SLACK,
    MEMBER_KEY,
    TICK_KEY,
    LockstepAck,
    LockstepTick,
    WriteMark,
    process_tick_key,
)
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.persist import Continuation
from pluto.runtime.ranges import Rate, Seed, Timeout, between
from pluto.sim.lockstep import Barrier
from pluto.sim.noise import NoiseProfile, device_rng, noise_profile
from pluto.sim.world import RobotPlacement, World, load_world

HORIZON = 1.0
"""s of simulated time: the time a simulator saves is this far ahead of the one it publishes."""

HORIZON_TICKS = 100_000
"""Lock-step ticks: the tick number a simulator saves is this far ahead of the one it publishes."""


class SimState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted simulator goes on from: its run, and a time and a tick number it had not reached yet."""

    run: int
    stamp: float
    tick: int = 0


class FleetMember(msgspec.Struct, frozen=True, kw_only=True):
    """One robot of a simulation of several: its robot name, start pose (x m, y m, θ rad) and radius (m)."""

    name: str
    start: tuple[float, float, float]
    radius: float


class SimSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the simulated devices share (the reply of ``sim/world``).

    Attributes:
        robot: the robot these settings are for, "" when the simulation has one robot.
        start: that robot's start pose (x m, y m, θ rad); None: the world's ``<start>``.
        fleet: every robot of the simulation, in order; empty when it has one robot.
    """

    world: str
    noise: str = "ideal"
    noise_overrides: dict[str, float | bool] = msgspec.field(default_factory=dict)
    seed: int = 0
    rate: float = 1.0
    lockstep: bool = False
    robot: str = ""
    start: tuple[float, float, float] | None = None
    fleet: list[FleetMember] = msgspec.field(default_factory=list)

    def load_world(self) -> World:
        """The world (loaded from its file)."""
        return load_world(self.world)

    def start_pose(self, world: World) -> tuple[float, float, float]:
        """Where this robot starts in ``world`` (x m, y m, θ rad)."""
        return self.start if self.start is not None else world.start

    def others(self) -> list[FleetMember]:
        """The other robots of the simulation (none for a lone robot)."""
        return [member for member in self.fleet if member.name != self.robot]

    def noise_profile(self) -> NoiseProfile:
        return noise_profile(self.noise, dict(self.noise_overrides))

    def rng(self, device: str) -> Any:
        """The random generator of one device."""
        return device_rng(self.seed, device)


def fetch_settings(bus: Bus, timeout: float = 5.0) -> SimSettings:
    """Ask the ``sim`` module for the simulation settings.

    Raises:
        BusTimeout: no ``sim`` module answers (start it first, or use the ``sim`` profile).
    """
    settings: SimSettings = bus.call("sim/world", None, SimSettings, timeout=timeout)
    return settings


class SimParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    world: a shipped world (office, campus, clutter) or a map file.
    rate: simulated seconds per wall-clock second (10 runs the stack ten times faster than real time), or "max":
        as fast as the modules can go (lock-step without waiting).
    noise: "ideal" (the default, like the original's dummies, docs/design.md), "basic" (the devices' errors in a
        world as mapped) or "realistic" (also a rough world: pluto.sim.noise, pluto.sim.site).
    noise_overrides: settings of the noise profile to replace, e.g. {laser_range_std = 0.02}.
    seed: seed of every random generator of the simulation.
    lockstep: advance time only when every module following it has finished its step (repeatable runs).
    paused: in lock-step, hold the time at 0 until ``sim/resume`` (profiles start this way, then resume).
    lockstep_timeout: wall seconds a module may take over one tick before it is dropped from the lock-step.
    """

    rate_hz: Rate = 200.0
    world: str = "office"
    rate: Annotated[float, between(0.0, 1000.0, open_low=True)] | Literal["max"] = 1.0
    noise: str = "ideal"
    noise_overrides: dict[str, float | bool] = msgspec.field(default_factory=dict)
    seed: Seed = 0
    lockstep: bool = False
    paused: bool = False
    lockstep_timeout: Timeout = 10.0

    @property
    def lockstepped(self) -> bool:
        """Time advances in lock-step with the modules."""
        return self.lockstep or self.rate == "max"

    @property
    def speed(self) -> float:
        """Simulated seconds per wall second; 0 for as fast as possible."""
        return 0.0 if self.rate == "max" else float(self.rate)


class SimModule(Module[SimParams]):
    """Publishes the simulated time on ``Clock`` and serves the simulation settings; coordinates the lock-step.

    Args (besides :class:`~pluto.runtime.module.Module`'s):
        fleet: the robots of a simulation of several (:mod:`pluto.sim.fleet`), this bus's robot among them; empty
            for a lone robot.
        leader: the first robot's simulator, for another robot's (a follower: it shares the leader's run, time and
            lock-step; start the leader first); or the first robot's name, for another robot's simulator in another
            process (a remote follower: it mirrors the leader's ``Clock`` on its own robot's, and passes the
            lock-step services on to the leader's).
        remote: for the leader, the robots whose simulators run in other processes (remote followers): its
            lock-step ticks their modules through Zenoh.
    """

    name = "sim"
    description = "simulated time (Clock) and the world of the simulated devices"
    provides = (names.CLOCK,)
    Params = SimParams

    def __init__(
        self,
        bus: Bus,
        params: SimParams | None = None,
        *,
        name: str | None = None,
        clock: Any = None,
        fleet: Sequence[RobotPlacement] = (),
        leader: SimModule | str | None = None,
        remote: Sequence[str] = (),
    ) -> None:
        super().__init__(bus, params, name=name, clock=clock)
        every = [str(r.name) for r in fleet]
        named = [*([bus.robot] if fleet else []), *remote, *([leader] if isinstance(leader, str) else [])]
        if strangers := [r for r in named if r not in every]:
            raise ConfigError(f"robot {strangers[0]} is not one of the simulation's ({', '.join(every)})")
        if remote and leader is not None:
            raise ConfigError("only the leading simulator ticks the robots of other processes")
        self.fleet = tuple(fleet)
        self.leader = leader
        self.remote = tuple(remote)

    def on_configure(self) -> None:
        p = self.params
        self.world = load_world(p.world)
        noise_profile(p.noise, dict(p.noise_overrides))
        own = next((r for r in self.fleet if r.name == self.bus.robot), None)
        self.settings = SimSettings(
            world=str(self.world.source or p.world),
            noise=p.noise,
            noise_overrides=dict(p.noise_overrides),
            seed=p.seed,
            rate=p.speed,
            lockstep=p.lockstepped,
            robot=self.bus.robot if self.fleet else "",
            start=own.pose if own is not None else None,
            fleet=[FleetMember(name=str(r.name), start=r.pose, radius=r.radius) for r in self.fleet],
        )
        self.clock_out: StateWriter[msgs.SimTime] = self.create_publisher(names.CLOCK)
        self.create_service("world", lambda _req: self.settings)
        self.lockstep: LockstepCoordinator | None = None
        if isinstance(self.leader, str):
            self._follow_remote(self.leader)
            return
        if self.leader is not None:
            self._follow(self.leader)
            return
        self.run_id = secrets.randbits(63) | 1
        self.sim_time = 0.0
        self.start_tick = 0
        self.continuation = Continuation.of(self, SimState)
        loaded = self.continuation.load(None, None)  # the simulator is the clock: no time to check it against
        if loaded is not None:
            state = loaded[0]
            self.run_id, self.sim_time, self.start_tick = state.run, state.stamp, state.tick
            self.get_logger().warning(
                "restarted: the simulation goes on, run %d from %.3f s (tick %d): the modules saw the time stall",
                self.run_id,
                self.sim_time,
                self.start_tick,
            )
        elif self.continuation.resume:
            self.get_logger().warning("restarted without a saved time: a new run from 0 s")
        self._time_offset = self.sim_time
        self._promised = (-math.inf, -1)  # the time and tick saved: not to be passed before a new save
        self._wall_start: float | None = None
        if p.lockstepped:
            self.lockstep = LockstepCoordinator(self, p, fleet=bool(self.fleet))
            for robot in self.remote:
                self.lockstep.add_remote(robot)
            self._lockstep_services()

    def _follow(self, leader: SimModule) -> None:
        """Take part in the leader's simulation: its run and time, and its lock-step, under this bus's robot."""
        if leader.params.lockstepped != self.params.lockstepped:
            raise ConfigError("the simulators of one simulation must all run in lock-step or none")
        self.run_id = leader.run_id
        self.sim_time = leader.sim_time
        self.lockstep = leader.lockstep
        if self.lockstep is not None:
            self.lockstep.add(self)
            self._lockstep_services()

    def _follow_remote(self, leader: str) -> None:
        """Take part in the simulation led by robot ``leader``'s simulator in another process: its ``Clock`` is this
        robot's, and the lock-step services are its (its coordinator ticks this robot's modules through Zenoh)."""
        self.run_id = 0
        self.sim_time = 0.0
        self.create_subscription(names.CLOCK, self._mirror_clock, msgs.SimTime, robot=leader)
        if self.params.lockstepped:
            for service in ("pause", "resume", "lockstep"):
                self.create_service(service, self._pass_on(service, leader))

    def _mirror_clock(self, clock: msgs.SimTime) -> None:
        self.run_id, self.sim_time = clock.run, clock.stamp
        self.clock_out.write(clock)

    def _pass_on(self, service: str, leader: str) -> Any:
        """A handler that calls robot ``leader``'s ``sim/<service>`` and replies with its answer."""
        return lambda _req: self.bus.call(f"sim/{service}", None, Any, timeout=5.0, robot=leader)

    def _lockstep_services(self) -> None:
        self.create_service("pause", lambda _req: self.lockstep.pause() if self.lockstep else False)
        self.create_service("resume", lambda _req: self.lockstep.resume() if self.lockstep else False)
        self.create_service("lockstep", lambda _req: self.lockstep.state() if self.lockstep else None)

    def step(self, now: float) -> None:
        p = self.params
        if isinstance(self.leader, str):
            return  # a remote follower mirrors the leader's Clock as it comes
        if self.leader is not None:  # a follower on the free-running clock: the leader's time
            self.sim_time = self.leader.sim_time
            self.clock_out.write(msgs.SimTime(stamp=self.sim_time, rate=p.speed, run=self.run_id))
            return
        # Simulated time follows the wall clock times the rate, measured from the first step, so a late step
        # does not slow the simulation down.
        wall = time.monotonic()
        if self._wall_start is None:
            self._wall_start = wall
        self.sim_time = self._time_offset + (wall - self._wall_start) * p.speed
        self.promise(self.sim_time)
        self.clock_out.write(msgs.SimTime(stamp=self.sim_time, rate=p.speed, run=self.run_id))

    def promise(self, stamp: float, tick: int = 0) -> None:
        """Before publishing time ``stamp`` (s) and tick ``tick``: if they pass what was saved, save a time and a
        tick ahead of them, so that a restart never goes back to a time the modules have seen."""
        if stamp < self._promised[0] and tick < self._promised[1]:
            return
        self._promised = (stamp + HORIZON, tick + HORIZON_TICKS)
        state = SimState(run=self.run_id, stamp=self._promised[0], tick=self._promised[1])
        self.continuation.save(state, state.stamp, self.run_id)

    def _loop(self) -> None:
        if isinstance(self.leader, str):
            self._stop_step.wait()  # the leader's Clock comes to _mirror_clock
        elif self.lockstep is None:
            super()._loop()
        elif self.leader is None:
            self.lockstep.run(self._stop_step)
        else:
            self._stop_step.wait()  # the leader's loop ticks for every robot

    def on_shutdown(self) -> None:
        if self.lockstep is None:
            return
        if self.leader is None:
            self.lockstep.close()
        else:
            self.lockstep.remove(self)

    def notes(self) -> list[str]:
        if self.lockstep is None:
            return []
        return self.lockstep.notes()


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
    sim: SimModule | None
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
    key: str
    """Its key suffix for ticks (:func:`~pluto.bus.lockstep.process_tick_key`)."""
    members: set[str] = field(default_factory=set)
    owed: dict[tuple[str, int], int] = field(default_factory=dict)
    """(key, writer id) -> newest sequence number of the writes of the ticks not sent to it."""
    publisher: Any = None

    def owe(self, marks: Sequence[WriteMark]) -> None:
        owed = self.owed
        for key, wid, seq in marks:
            if seq > owed.get((key, wid), 0):
                owed[(key, wid)] = seq

    def frontier(self, tick: LockstepTick) -> list[WriteMark]:
        """The frontier of ``tick`` for this process: with what it is owed (which it is then no longer)."""
        if not self.owed:
            return tick.frontier
        self.owe(tick.frontier)
        marks = [(key, wid, seq) for (key, wid), seq in self.owed.items()]
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

    def __init__(self, sim: SimModule, params: SimParams, fleet: bool = False) -> None:
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

    def add(self, sim: SimModule) -> None:
        """Tick the modules of ``sim``'s robot too (a robot of a simulation of several; its ``Clock`` follows)."""
        self._attach(sim.bus.robot, sim.bus, sim)

    def add_remote(self, robot: str) -> None:
        """Tick the modules of ``robot`` too, whose simulator runs in another process (a follower there, which
        mirrors the leader's ``Clock``): its ticks, acknowledgements and members go through Zenoh only."""
        self._attach(robot, self.sim.bus, None)

    def _attach(self, robot: str, bus: Bus, sim: SimModule | None) -> None:
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

    def remove(self, sim: SimModule) -> None:
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
            if (current is not None and (current.robot, current.key) == key) or name not in self.barrier.members:
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
            del self._processes[(process.robot, process.key)]
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
        owed = _Process("", "")  # what any process is owed, with this tick's writes: one frontier for all
        for process in self._processes.values():
            if process.owed:
                owed.owe([(key, wid, seq) for (key, wid), seq in process.owed.items()])
                process.owed = {}
        sent = msgspec.structs.replace(tick, frontier=owed.frontier(tick)) if owed.owed else tick
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
                process.owe(tick.frontier)
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
                link.bus.key_raw(process_tick_key(process.key), process.robot),
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
