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

import math
import secrets
import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec

from pluto import msgs, names
from pluto.bus import Bus, StateWriter
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.persist import Continuation
from pluto.runtime.ranges import Rate, Seed, Timeout, between
from pluto.sim.coordinator import LockstepCoordinator
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
