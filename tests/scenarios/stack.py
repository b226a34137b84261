"""What the scenario tests share: a known room, the simulated stack in lock-step, scripts that act at simulated
times, and collectors of an interface's values.

In lock-step the simulated time advances one tick only after every module following it has finished its step, and
each step sees exactly the values written before its tick, so a seed gives the same run on any machine, under any
load. A test takes part through :class:`Script` modules: their steps run at simulated times, write commands and
check conditions; the test's main thread only waits for what a script signals (an event, a condition checked after
each of its steps), with a generous wall-clock limit that guards against a hang and nothing else.

A typical test::

    with Lockstep(bus) as sim:
        sim.start(world="office", seed=3)           # the sim profile, time held at 0
        truth = sim.collect("Sim/Truth", msgs.Odometry)
        drive = sim.add(DriveCommand(bus, 0.5, 0.0, until=2.0))
        sim.resume()                                # as fast as the modules go
        drive.wait()                                # until the script has finished
        ...                                         # the values collected up to drive.finished_at

Tests on the wall clock (a P2OS base and its emulator) use :class:`Collector` waits and a :class:`Commander`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Collection, Generator
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from pluto import msgs
from pluto.bus import Bus, StateReader, StateWriter
from pluto.runtime.config import Config
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.profiles import Profile, load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.helpers import wait_until

# A closed 10 m x 10 m room, the robot in its middle facing +x: the east wall is 5 m ahead of its centre.
ROOM = """<?xml version="1.0" encoding="UTF-8"?>
<world name="room" version="1">
  <start x="5" y="5" theta="0"/>
  <walls>
    <wall x1="0" y1="0" x2="10" y2="0" name="south"/>
    <wall x1="10" y1="0" x2="10" y2="10" name="east"/>
    <wall x1="10" y1="10" x2="0" y2="10" name="north"/>
    <wall x1="0" y1="10" x2="0" y2="0" name="west"/>
  </walls>
</world>
"""

INNER_START = (4.5, 4.0, 0.0)
"""Where the robot starts in :data:`INNER_ROOM` (x m, y m, θ rad)."""

# A 10 m x 10 m room with three short inner walls, so that no place looks like another (a kidnapped robot can be
# found, a map has more than a box); the robot starts at (4.5, 4) facing +x, and circles of 2 m radius around
# (4.5, 6) stay clear of every wall.
INNER_ROOM = f"""<?xml version="1.0" encoding="UTF-8"?>
<world name="inner-walls-room" version="1">
  <start x="{INNER_START[0]}" y="{INNER_START[1]}" theta="{INNER_START[2]}"/>
  <walls>
    <wall x1="0" y1="0" x2="10" y2="0" name="south"/>
    <wall x1="10" y1="0" x2="10" y2="10" name="east"/>
    <wall x1="10" y1="10" x2="0" y2="10" name="north"/>
    <wall x1="0" y1="10" x2="0" y2="0" name="west"/>
    <wall x1="8" y1="0" x2="8" y2="3" name="east-inner"/>
    <wall x1="0" y1="2" x2="2" y2="2" name="west-inner"/>
    <wall x1="7" y1="9" x2="7" y2="10" name="north-stub"/>
  </walls>
</world>
"""


def write_inner_room(folder: Path) -> Path:
    """Write :data:`INNER_ROOM` and, beside it, ``start.toml`` (a start-pose file for localization at
    :data:`INNER_START`); return the room's path."""
    path = folder / "inner-walls-room.xml"
    path.write_text(INNER_ROOM)
    x, y, theta = INNER_START
    (folder / "start.toml").write_text(f"x = {x}\ny = {y}\ntheta = {theta}\n")
    return path


HANG = 120.0
"""Wall seconds after which a wait gives up: only a hang takes that long (a scenario takes a few seconds)."""


def without(profile: Profile, *names: str) -> Profile:
    """The profile without some of its modules (a test starts its own, with its own parameters)."""
    return Profile(
        profile.name,
        profile.description,
        tuple(e for e in profile.entries if e.name not in names),
        profile.restart,
        profile.path,
    )


class Collector:
    """Every value of an interface, in the order they arrive (a subscription). In lock-step they arrive in the
    order of the ticks, and all those written before a tick have arrived when a script steps at that tick."""

    POLL = 0.05  # s of wall time between calls of ``while_waiting``

    def __init__(self, bus: Bus, name: str, cls: type[msgs.Message]) -> None:
        self.values: list[Any] = []
        self._cond = threading.Condition()
        self._sub = bus.create_subscription(name, self._add, cls, depth=4096)

    def _add(self, value: msgs.Message) -> None:
        with self._cond:
            self.values.append(value)
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[Any], bool], timeout: float = 20.0, while_waiting: Callable[[], None] | None = None
    ) -> Any:
        """The first value (already received or still to come) for which ``predicate`` holds.

        ``while_waiting``, if given, is called about every ``POLL`` s (to keep writing a command, say). For tests on
        the wall clock; in lock-step a :class:`Script` decides at simulated times instead.
        """
        deadline = time.monotonic() + timeout
        checked = 0
        while True:
            with self._cond:
                for value in self.values[checked:]:
                    if predicate(value):
                        return value
                checked = len(self.values)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching value on {self._sub.name} within {timeout} s")
                self._cond.wait(left if while_waiting is None else min(left, self.POLL))
            if while_waiting is not None:
                while_waiting()

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.values)

    def until(self, stamp: float) -> list[Any]:
        """The values stamped at or before ``stamp`` (s)."""
        return [v for v in self.snapshot() if v.stamp <= stamp]

    def close(self) -> None:
        self._sub.close()


class Commander:
    """Keeps writing a velocity command to the base every 20 ms of wall time (it stops on commands older than 1 s).

    For a base on the wall clock (the P2OS base and its emulator); in lock-step, use a :class:`DriveCommand`.
    """

    def __init__(self, bus: Bus, v: float, omega: float) -> None:
        self._writer = bus.create_publisher("Base/Drive/Command", msgs.ActuatorState)
        self._command = msgs.ActuatorState(velocity=[v, omega])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commander")

    def _run(self) -> None:
        while True:
            self._writer.write(self._command)
            if self._stop.wait(0.02):  # a pacing interval for the writer, not a wait for a result
                break

    def __enter__(self) -> Commander:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._writer.write(msgs.ActuatorState(velocity=[0.0, 0.0]))


# -- lock-step ------------------------------------------------------------------------------------------------------

_names = itertools.count(1)


class ScriptFailed(AssertionError):
    """A script's step failed (an assertion in it, say): the test fails with it."""


class Script(Module):
    """A part of the test that runs at simulated times: a module following simulated time, a member of the
    lock-step like any other, whose step is the test's logic (write commands with its own publishers, read values
    with its own readers, decide when the scenario is over).

    Give the logic as ``step`` (called at each step with the simulated time, s), as ``run`` (a generator function
    called at the first step with its time; each ``now = yield`` waits for the next step and gives its time; the
    script finishes when it returns), or override :meth:`act`. Steps fall on multiples of ``1 / rate_hz`` s, from
    the first one after 0 (at 0 the modules exchange their first values while the time is held). A step that raises
    ends the script: :meth:`wait` raises it in the test's thread.

    Readers and publishers are made before the time runs (a reader made during a step would fetch a value of the
    current tick); start the script with :meth:`Lockstep.add`; it is stopped with the stack. The members of one
    process step one after the other on one thread: a step must not wait for anything that needs the time to run
    or another member to step.
    """

    name: ClassVar[str] = "script"

    def __init__(
        self,
        bus: Bus,
        step: Callable[[float], Any] | None = None,
        *,
        run: Callable[[float], Generator[Any, float, Any]] | None = None,
        rate_hz: float = 10.0,
        name: str | None = None,
    ) -> None:
        super().__init__(bus, ModuleParams(rate_hz=rate_hz, use_sim_time=True), name=name or f"script-{next(_names)}")
        self.on_step = step
        """Called at each step with its time (may be set until the time runs)."""
        self.body = run
        """The generator function of the script (may be set until the time runs)."""
        self._body: Generator[Any, float, Any] | None = None
        self._cond = threading.Condition()
        self.failure: BaseException | None = None
        self.steps = 0
        self.now = 0.0
        """Simulated time of the last step, s."""
        self.finished = threading.Event()
        """Set at the step after :meth:`finish`: every value written up to then has reached the test's collectors."""
        self.finished_at: float | None = None
        """Simulated time at which the script called :meth:`finish`, s."""
        self._finishing = False

    # -- what a script uses in its steps

    def publisher(self, name: str, cls: type[msgs.Message]) -> StateWriter[Any]:
        return self.create_publisher(name, cls)

    def reader(self, name: str, cls: type[msgs.Message]) -> StateReader[Any]:
        return self.create_reader(name, cls)

    def finish(self) -> None:
        """The scenario is over (call it from a step): :attr:`finished` is set at the next step, when the values
        written up to now have all been delivered."""
        if not self._finishing:
            self._finishing = True
            self.finished_at = self.now

    def act(self, now: float) -> None:
        """One step of the script at simulated time ``now`` (s): calls ``step``, or goes on with ``run``."""
        if self.on_step is not None:
            self.on_step(now)
        if self.body is not None:
            try:
                if self._body is None:
                    self._body = self.body(now)
                    next(self._body)
                else:
                    self._body.send(now)
            except StopIteration:
                self.finish()

    # -- the module's side

    def step(self, now: float) -> None:
        if now <= 0.0 or self.failure is not None or self.finished.is_set():
            return
        self.now = now
        try:
            if self._finishing:
                self.finished.set()
            else:
                self.act(now)
                self.steps += 1
        except BaseException as err:
            self.failure = err
            raise
        finally:
            with self._cond:
                self._cond.notify_all()

    # -- what the test's main thread uses

    def wait(self, until: threading.Event | Callable[[], Any] | None = None, timeout: float = HANG) -> None:
        """Wait until ``until`` (an event, or a condition checked after each step; :attr:`finished` by default)
        holds. Raises what a step raised, or AssertionError if it did not hold within ``timeout`` wall seconds."""
        event = self.finished if until is None else until
        ready: Callable[[], Any] = event.is_set if isinstance(event, threading.Event) else event
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self.failure is not None:
                    raise ScriptFailed(f"{self.module_name} failed at {self.now:.3f} s: {self.failure!r}") from (
                        self.failure
                    )
                if ready():
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.module_name}: not done within {timeout:g} s of wall time (a hang?); simulated time "
                        f"{self.now:.3f} s, {self.steps} steps"
                    )
                self._cond.wait(left)


class DriveCommand(Script):
    """Writes a velocity command to the base (``Base/Drive/Command``) at every step from ``start`` to ``until``
    (simulated s), then finishes. ``velocity`` may be changed from another script's step."""

    def __init__(
        self,
        bus: Bus,
        v: float,
        omega: float,
        *,
        start: float = 0.0,
        until: float = float("inf"),
        rate_hz: float = 10.0,
        name: str | None = None,
    ) -> None:
        super().__init__(bus, rate_hz=rate_hz, name=name)
        self.velocity: tuple[float, float] | None = (v, omega)
        self.start_time = start
        self.until = until
        self.commands = 0

    def on_configure(self) -> None:
        self._writer = self.publisher("Base/Drive/Command", msgs.ActuatorState)

    def act(self, now: float) -> None:
        if now >= self.until:
            self.finish()
        elif now >= self.start_time and self.velocity is not None:
            self._writer.write(msgs.ActuatorState(velocity=list(self.velocity)))
            self.commands += 1


class _Runner(Protocol):
    """What runs the simulation: a :class:`~pluto.runtime.supervisor.Supervisor` or a
    :class:`~pluto.sim.fleet.Fleet`."""

    def resume(self) -> None: ...
    def shutdown(self) -> None: ...


class LockstepBase:
    """What the one-robot lock-step (:class:`Lockstep`) and the fleet's
    (:class:`~tests.scenarios.fleet_stack.FleetLockstep`) share: the test's modules and collectors, letting the time
    run once those modules take part, and stopping everything on :meth:`close`.

    A subclass starts its runner, says which runner it is (:meth:`_runner`), how it stops it (:meth:`_stop_runner`),
    which modules the simulator waits for (:meth:`members`) and the name a module of the test has among them
    (:meth:`_member`)."""

    _not_started: ClassVar[str] = "start it first"

    def __init__(self) -> None:
        self.modules: list[Module[Any]] = []
        self.collectors: list[Collector] = []

    def members(self) -> Collection[str]:
        """The modules the simulator waits for at each tick."""
        raise NotImplementedError

    def _member(self, module: Module[Any]) -> str:
        """The name ``module`` has among :meth:`members`."""
        return module.module_name

    def _runner(self) -> _Runner | None:
        """What runs the simulation, None before it starts."""
        raise NotImplementedError

    def _stop_runner(self) -> None:
        """Shut down what runs the simulation, if it runs, and forget it."""
        raise NotImplementedError

    def add(self, module: Module[Any]) -> Any:
        """Start a module of the test (a script, or a module not in the profile) on the bus it was made with."""
        self.modules.append(module)
        module.start()
        return module

    def _keep(self, collector: Collector) -> Collector:
        self.collectors.append(collector)
        return collector

    def resume(self) -> None:
        """Let the time run, once every module added here takes part in the lock-step."""
        runner = self._runner()
        assert runner is not None, self._not_started
        wanted = {self._member(m) for m in self.modules if m.params.use_sim_time}
        wait_until(
            lambda: wanted <= set(self.members()),
            timeout=HANG,
            message=f"{sorted(wanted)} join the lock-step",
        )
        runner.resume()

    def close(self) -> None:
        for module in reversed(self.modules):
            with contextlib.suppress(Exception):
                module.stop()
        self.modules = []
        for collector in self.collectors:
            collector.close()
        self.collectors = []
        self._stop_runner()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Lockstep(LockstepBase):
    """A profile in lock-step (the simulator as fast as the modules go, a seed), the test's scripts, modules and
    collectors; everything is stopped by :meth:`close`.

    :meth:`start` starts the profile with the time held at 0; the test then adds its modules, scripts and collectors,
    and :meth:`resume` lets the time run once they all take part.
    """

    _not_started = "start a profile first"

    def __init__(self, bus: Bus) -> None:
        super().__init__()
        self.bus = bus
        self.supervisor: Supervisor | None = None

    def start(
        self,
        profile: Profile | str = "sim",
        *,
        seed: int = 0,
        one_process: bool = True,
        rate: float | str = "max",
        **sim_params: Any,
    ) -> Supervisor:
        """Start ``profile`` (a name or a profile) in lock-step with ``seed`` and these parameters of its ``sim``
        module, its time held at 0; ``rate`` (simulated seconds per wall second) caps its speed."""
        if isinstance(profile, str):
            profile = load_profile(profile)
        profile = with_params(profile, "sim", lockstep=True, rate=rate, seed=seed, **sim_params)
        self.supervisor = Supervisor(self.bus, profile, Config(), one_process=one_process)
        self.supervisor.start(resume=False)
        return self.supervisor

    def collect(self, name: str, cls: type[msgs.Message]) -> Collector:
        """Collect every value of interface ``name`` (from before the time runs, when made before :meth:`resume`)."""
        return self._keep(Collector(self.bus, name, cls))

    def members(self) -> list[str]:
        """The modules the simulator waits for at each tick."""
        state: dict[str, Any] = self.bus.call("sim/lockstep", None, dict, timeout=5.0)
        return list(state["members"])

    def _runner(self) -> Supervisor | None:
        return self.supervisor

    def _stop_runner(self) -> None:
        if self.supervisor is not None:
            self.supervisor.shutdown()
            self.supervisor = None
