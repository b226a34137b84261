"""The Module base class: the shell that binds a module's pure logic to the bus.

A module (the original's ``xxxModule`` + ``xxx_control``, docs/design.md) declares its name, the interfaces it provides,
the modules it requires and its parameters; it creates its publishers and readers in :meth:`Module.on_configure`, and
its control step runs at ``rate_hz`` on a thread of its own while the module is *active* (the original's
``start_activity``; ``stop_activity`` stops the thread but leaves the module's interfaces up).

With ``use_sim_time`` the steps follow the simulated time. When the simulator runs in lock-step, the module takes part
in it while it is active: its steps fall on multiples of its period, each at the tick of its time, and it tells the
simulator when it has finished a tick and when its next step is due (see :mod:`pluto.bus.lockstep`). When the
simulated time jumps back (a new run), the schedule restarts at the new time and :meth:`Module.on_clock_jump` is
called, so a module forgets commands and states of the old run.

Every module also announces itself with a liveliness token (so MOM lists it and proxies find it) and serves:
``<name>/start_activity``, ``<name>/stop_activity``, ``mom/<name>`` (its :class:`~pluto.msgs.ModuleInfo`), and its
parameters (rclpy's names): ``<name>/list_parameters``, ``<name>/get_parameters`` and ``<name>/set_parameters``.
A parameter changes while the module runs only if the module says it can (:attr:`Module.dynamic_params`); the new
set is validated against the module's ``Params`` as a whole before it replaces ``self.params``.

Every number among the parameters declares its valid range once, in its Params class, as msgspec constraints
(:mod:`pluto.runtime.params`: a module with a core takes its parameters from the core's class)::

    max_speed: Annotated[float, msgspec.Meta(gt=0.0, le=3.0)] = 1.0

(or with the shorthands of :mod:`pluto.runtime.ranges`). The range is enforced wherever parameters enter: a
configuration file, ``-p``, a profile, ``set_parameters`` (``pluto param set``), a Params built in Python; a value
outside it (nan and ±inf included, since every range is finite) is refused with the range in the message, and
``list_parameters`` shows it. A cross-field rule (a slow-down distance beyond the stop distance) stays in the class's
``__post_init__``.

Liveness: the module counts its steps and knows whether one is running, since when, and whether one is due but has
not begun (its clock reached the step's time, or, in lock-step, a tick offered it); its MOM entry says so
(:class:`~pluto.msgs.ModuleInfo` ``steps``, ``step_running``, ``step_overdue``, ``step_age``), and the supervisor kills
and restarts a module whose step hangs or whose steps stopped coming (:mod:`pluto.runtime.supervisor`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Generic, TypeVar, Union, cast, get_args, get_origin, overload

import msgspec

from pluto import msgs, names
from pluto.bus import Bus, Service, StateReader, StateWriter, Subscription
from pluto.bus.lockstep import LockstepTick
from pluto.names import Topic
from pluto.runtime.clock import Clock, SimClock, WallClock
from pluto.runtime.params import ModuleParams as ModuleParams  # the base of every module's Params, imported from here
from pluto.runtime.ranges import check_ranges, parameter_ranges

M = TypeVar("M", bound=msgs.Message)

WRITERS_WINDOW = 10.0
"""s: a module's MOM entry lists the writers of each interface it reads heard from in this long."""

STARTING_KEY = "@starting"
"""Key of the liveliness token ``pluto/<robot>/@starting/<module>`` a module holds while it configures."""

_DUE_SLACK = 1e-6
"""s: a step due this close after a tick's time runs at that tick (rounding of multiples of periods)."""


def _next_multiple(t: float, period: float) -> float:
    """The first multiple of ``period`` at or after ``t`` (to the µs, so that periods line up across modules)."""
    return round(math.ceil(t / period - _DUE_SLACK / period) * period, 6)


def _type_name(kind: Any) -> str:
    """``float``, ``list[float]``, ``str | None``: a parameter's type as written, without its constraints."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _type_name(get_args(kind)[0])
    if origin is Union or type(kind).__name__ == "UnionType":
        return " | ".join("None" if a is type(None) else _type_name(a) for a in get_args(kind))
    if origin is not None and get_args(kind) and isinstance(origin, type):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in get_args(kind))}]"
    if isinstance(kind, type):
        return kind.__name__
    return str(kind).replace("typing.", "")


def _attribute_docs(cls: type, fields: list[str]) -> dict[str, str]:
    """Descriptions of the parameters ``fields`` from the ``Attributes:`` sections of a Params class and its bases
    (the subclass's win). An entry starts with its name, or names separated by commas, and a colon, at the start of
    a line or after two spaces; it runs to the next entry."""
    docs: dict[str, str] = {}
    names = "|".join(re.escape(field) for field in fields) or "(?!)"
    start = re.compile(rf"(?:^|\n|  )[ \t]*((?:{names})(?:,[ \t]*(?:{names}))*)(?:[ \t]*\([^)\n]*\))?:[ \t]")
    for klass in reversed(cls.__mro__):
        text = klass.__dict__.get("__doc__") or ""
        _, found, section = text.partition("Attributes:")
        if not found:
            continue
        section = re.split(r"\n\s*\n", section.strip("\n"), maxsplit=1)[0]  # up to the first blank line
        matches = list(start.finditer(section))
        for match, following in zip(matches, [*matches[1:], None], strict=True):
            body = section[match.end() : following.start() if following is not None else len(section)]
            description = " ".join(body.split())
            for name in re.split(r",\s*", match.group(1)):
                docs[name] = description
    return docs


P = TypeVar("P", bound=ModuleParams)


class Module(Generic[P]):
    """Base of every Pluto module, generic in its parameters' type.

    Subclasses name their parameters twice, once for the type checker and once for the runtime, and then use
    ``self.params`` with its own type::

        class DriveModule(Module[DriveModuleParams]):
            Params = DriveModuleParams

    Subclasses set the class attributes and override the hooks; the runtime calls :meth:`start` and :meth:`stop`.

    Args:
        bus: the process's bus (modules of one process share it).
        params: validated parameters (an instance of ``Params``); defaults if None.
        name: the name on the bus (defaults to the class's ``name``).
        clock: time source; by default the wall clock, or the ``Clock`` interface with ``use_sim_time``.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    provides: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    Params: ClassVar[type[ModuleParams]] = ModuleParams
    dynamic_params: ClassVar[tuple[str, ...]] = ()
    """Parameters that ``set_parameters`` may change while the module runs, because the module reads them from
    ``self.params`` each time it needs them (or applies a change in :meth:`on_parameters_changed`); any other is
    read-only at run time. ``rate_hz`` may be among them: the control loop reads it at each step, but a module that
    derived something from it at configuration must not list it."""

    def __init__(
        self,
        bus: Bus,
        params: P | None = None,
        *,
        name: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.bus = bus
        if params is not None and not isinstance(params, self.Params):
            raise TypeError(f"{type(self).__name__} takes {self.Params.__name__}, not {type(params).__name__}")
        if params is not None:
            check_ranges(type(params), {name: getattr(params, name) for name in params.__struct_fields__})
        self.params: P = params if params is not None else cast(P, self.Params())
        self.module_name = name or self.name or type(self).__name__.lower()
        self._logger = logging.getLogger(f"pluto.{self.module_name}")
        if clock is None:
            clock = SimClock(bus) if self.params.use_sim_time else WallClock()
        self.clock: Clock = clock
        self._jump_lock = threading.Lock()
        self._jumped_from: float | None = None  # the clock jumped back from this time since the last step
        self._last_step_now: float | None = None
        clock.create_jump_callback(self._clock_jumped)
        self._writers: list[StateWriter[Any]] = []
        self._readers: list[StateReader[Any] | Subscription[Any]] = []
        self._services: list[Service] = []
        self._token: Any = None
        self._stop_step = threading.Event()
        self._wake = threading.Event()  # set to stop the control loop's wait: stopping, or a new rate
        self._thread: threading.Thread | None = None
        # liveness (wall-clock times from time.monotonic), read by info() on another thread under _live_lock
        self._live_lock = threading.Lock()
        self.steps = 0
        """Control steps run (finished, failed or not) since the module started."""
        self._step_began: float | None = None
        self._step_ended: float | None = None
        self._overdue_since: float | None = None
        self._free_due: float | None = None  # the free loop's next step time (clock time), while it waits for it
        self._in_lockstep = False
        self._stopping = False
        self._tick_run: int | None = None
        self._tick_due = math.inf
        self._lock = threading.Lock()
        self._started = 0.0
        self.step_errors = 0
        self._last_error_log = 0.0

    # -- rclpy-style factory methods (used in on_configure) ---------------------------------------------------

    @overload
    def create_publisher(self, name: Topic[M]) -> StateWriter[M]: ...
    @overload
    def create_publisher(self, name: str, cls: type[M]) -> StateWriter[M]: ...
    def create_publisher(self, name: str, cls: type[M] | None = None) -> StateWriter[M]:
        """A writer of interface ``name`` (a :class:`~pluto.names.Topic`, or a name and its type), counted in this
        module's MOM entry."""
        writer: StateWriter[M] = self.bus.create_publisher(name, self.bus._type_for(name, cls))
        self._writers.append(writer)
        return writer

    @overload
    def create_reader(
        self,
        name: Topic[M],
        *,
        max_age: float | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    @overload
    def create_reader(
        self,
        name: str,
        cls: type[M],
        *,
        max_age: float | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    def create_reader(
        self,
        name: str,
        cls: type[M] | None = None,
        *,
        max_age: float | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]:
        """A reader of interface ``name`` holding its newest value.

        A command's age is measured by this module's clock (``max_age`` s, default the interface table's).

        A state's freshness (docs/design.md, principle 8): the reader's ``deadline`` is how old (s) a value's stamp may
        be at the module's time before ``reader.fresh(now)`` treats it as absent; by default the interface table's
        (:func:`pluto.names.stale_after`: the writer's latency plus a few of its periods), else the ``deadline``
        given. The module's MOM entry notes the inputs that are stale.

        ``robot`` reads the interface of another robot (``pluto/<robot>/<name>``), this module's by default.
        """
        if deadline is None and max_age is None and names.command_max_age(name) is None:
            deadline = names.stale_after(name)
        reader: StateReader[M] = self.bus.create_reader(
            name, self.bus._type_for(name, cls), max_age=max_age, clock=self.clock.now, deadline=deadline, robot=robot
        )
        self._readers.append(reader)
        return reader

    def create_subscription(
        self,
        name: str | Topic[M],
        callback: Callable[[M], Any],
        cls: type[M] | None = None,
        *,
        depth: int = 1,
        robot: str | None = None,
    ) -> Subscription[M]:
        """Call ``callback`` with every new value of ``name`` (on the subscription's own thread); of robot ``robot``
        if given (``pluto/<robot>/<name>``), else of this module's."""
        sub = self.bus.create_subscription(name, callback, cls, depth=depth, clock=self.clock.now, robot=robot)
        self._readers.append(sub)
        return sub

    def create_service(self, name: str, handler: Callable[[Any], Any], request_type: Any = Any) -> Service:
        """Serve requests on ``<module name>/<name>``."""
        service = self.bus.create_service(f"{self.module_name}/{name}", handler, request_type)
        self._services.append(service)
        return service

    @property
    def services(self) -> tuple[Service, ...]:
        """The services the module serves now (each counts the requests it served and those that failed)."""
        return tuple(self._services)

    def get_logger(self) -> logging.Logger:
        return self._logger

    def get_clock(self) -> Clock:
        return self.clock

    # -- hooks --------------------------------------------------------------------------------------------------

    def on_configure(self) -> None:
        """Create publishers, readers and services. Called once by :meth:`start`."""

    def on_activate(self) -> None:
        """Called when the control step starts (``start_activity``)."""

    def on_deactivate(self) -> None:
        """Called when the control step stops (``stop_activity`` or shutdown)."""

    def step(self, now: float) -> None:
        """One control step at time ``now`` (s, from the module's clock). Override it."""

    def on_shutdown(self) -> None:
        """Called last, when the module stops."""

    def on_parameters_changed(self, old: P, new: P) -> None:
        """Called after ``set_parameters`` replaced ``self.params`` (``old``) with ``new``: apply the change where
        the module keeps a copy (a core built from the parameters). Raising undoes the change; the caller gets the
        error."""

    def on_clock_jump(self, old: float, new: float) -> None:
        """Called when the simulated time jumps back from ``old`` to ``new`` (s): a new simulation run or a replay
        that starts again. Forget what belongs to the old run's time (commands, watchdogs, histories)."""

    def clock_jumped_back(self, now: float) -> float | None:
        """Call at the start of :meth:`step`: the time (s) the clock jumped back from since the previous step, or
        None. Seen by the clock's jump callback or, if that comes late (it runs on another thread), by ``now`` being
        earlier than the previous step's; the step thread then resets what it owns."""
        with self._jump_lock:
            old, self._jumped_from = self._jumped_from, None
            last, self._last_step_now = self._last_step_now, now
        if last is not None and now < last - 1e-9:
            old = max(last, old if old is not None else -math.inf)
        return old

    def _clock_jumped(self, old: float, new: float) -> None:
        with self._jump_lock:
            self._jumped_from = old if self._jumped_from is None else max(self._jumped_from, old)
        if self._token is None:
            return
        try:
            self.on_clock_jump(old, new)
        except Exception:
            self._logger.exception("resetting after the clock jump failed")

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Configure, announce the module on the bus, and start the control step if ``autostart``.

        Starting a started module does nothing.
        """
        if self._token is not None:
            return
        self._started = time.time()
        self._stopping = False
        # Said before the configuration, which may take long (a driver's handshake, kernels compiled on a first
        # run): a starter waits for a module that says it is starting (see pluto.runtime.launcher.wait_publishing).
        starting = self.bus.declare_token(f"{STARTING_KEY}/{self.module_name}")
        self.on_configure()
        self._services.append(self.bus.create_service(f"{self.module_name}/start_activity", self._srv_start))
        self._services.append(self.bus.create_service(f"{self.module_name}/stop_activity", self._srv_stop))
        self._services.append(self.bus.create_service(f"mom/{self.module_name}", lambda _req: self.info()))
        self._services.append(
            self.bus.create_service(f"{self.module_name}/list_parameters", lambda _req: self.describe_parameters())
        )
        self._services.append(
            self.bus.create_service(f"{self.module_name}/get_parameters", self._srv_get_parameters, list[str] | None)
        )
        self._services.append(
            self.bus.create_service(f"{self.module_name}/set_parameters", self.set_parameters, dict[str, Any])
        )
        if self.params.autostart:
            self.start_activity()
        self._token = self.bus.declare_module(self.module_name)
        self.bus.release(starting)
        self._logger.info("%s started (pid %d)", self.module_name, os.getpid())

    def start_activity(self) -> bool:
        """Start the control step; starting it twice does nothing. Returns True if it was started now."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._stop_step.clear()
            self._wake.clear()
            self.on_activate()
            self._thread = threading.Thread(target=self._loop, name=f"{self.module_name}-control", daemon=True)
            self._thread.start()
            return True

    def stop_activity(self) -> bool:
        """Stop the control step (the module stays up). Returns True if it was running."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return False
            self._stop_step.set()
            self._wake.set()
            self._thread = None
        gate = self.bus.gate
        if gate is not None and gate.on_executor():
            # Stopped from a step (its own or another module's of this process): leave the lock-step here, since
            # the control thread's own leaving would wait for the round this step is part of.
            gate.unregister(self.module_name)
        if thread is not threading.current_thread():
            thread.join(timeout=5)
        self.on_deactivate()
        return True

    @property
    def active(self) -> bool:
        """The control step is running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _loop(self) -> None:
        while not self._stop_step.is_set():
            if isinstance(self.clock, SimClock) and self.clock.lockstep:
                self._lockstep_loop(self.clock)
            else:
                self._free_loop()

    def _safe_step(self, now: float) -> None:
        with self._live_lock:
            self._step_began = time.monotonic()
            self._overdue_since = None
            self._free_due = None
        try:
            self.step(now)
        except Exception as err:
            self.step_errors += 1
            self._report_step_error(err)
        finally:
            with self._live_lock:
                self.steps += 1
                self._step_began = None
                self._step_ended = time.monotonic()

    def _free_loop(self) -> None:
        """Steps every period of the clock, as it comes (the wall clock, or a free-running simulated time)."""
        next_time = self.clock.now()
        lockstep = isinstance(self.clock, SimClock)
        while not self._stop_step.is_set():
            began = self.clock.now()
            self._safe_step(began)
            period = 1.0 / self.params.rate_hz  # each time: set_parameters may change it
            next_time += period
            now = self.clock.now()
            if not now - period <= next_time <= now + period:  # fell behind (a long step) or time jumped: re-align
                next_time = now
            while True:
                with self._live_lock:
                    self._free_due = next_time
                if not self.clock.sleep_until(next_time, self._wake):
                    break  # the step's time came (or the clock jumped back)
                self._wake.clear()
                if self._stop_step.is_set():
                    return
                # a new rate: the next step comes one new period after the last one, if that is sooner
                next_time = min(next_time, began + 1.0 / self.params.rate_hz)
            if lockstep and self.clock.lockstep:  # type: ignore[attr-defined]
                return

    def _lockstep_loop(self, clock: SimClock) -> None:
        """Takes part in the lock-step while it lasts: the bus's lock-step executor calls :meth:`_on_tick`."""
        gate = self.bus.lockstep()
        self._tick_run = None
        self._tick_due = math.inf
        gate.register(self.module_name, self._on_tick)
        self._in_lockstep = True
        try:
            while not self._stop_step.wait(0.5):
                clock.source.watch()  # ticks stopped: hear from Clock whether the lock-step still runs
                if not clock.lockstep:
                    return  # the simulator no longer runs in lock-step
        finally:
            self._in_lockstep = False
            gate.unregister(self.module_name)
            clock.source.watch()

    def _on_tick(self, tick: LockstepTick) -> float:
        """Run the step due by ``tick``, if any; return when the next one is due (s)."""
        if self._stop_step.is_set():
            return math.inf
        assert isinstance(self.clock, SimClock)
        self.clock.source.advance(tick.stamp, tick.run)
        period = 1.0 / self.params.rate_hz
        if tick.run != self._tick_run or self._tick_due > tick.stamp + period + _DUE_SLACK:  # first tick, new run
            self._tick_run = tick.run
            self._tick_due = _next_multiple(tick.stamp, period)
        if self._tick_due <= tick.stamp + _DUE_SLACK:
            self._safe_step(tick.stamp)
            # one step per tick even if several were due (a module that joined late does not burst)
            self._tick_due = _next_multiple(tick.stamp + 2 * _DUE_SLACK, period)
        return self._tick_due

    def _report_step_error(self, err: Exception) -> None:
        """Log the first failure with its traceback, then at most one line every 5 s (a step that keeps failing
        must not flood the log)."""
        now = time.monotonic()
        if self.step_errors == 1:
            self._logger.exception("step failed; it keeps running (errors are counted, logged every 5 s)")
            self._last_error_log = now
        elif now - self._last_error_log >= 5.0:
            self._logger.error("step failed %d times so far; last: %s: %s", self.step_errors, type(err).__name__, err)
            self._last_error_log = now

    def _reschedule(self) -> None:
        """The rate changed: plan the next step at the new rate now, not after a step of the old one."""
        self._wake.set()
        gate = self.bus.gate
        if self._in_lockstep and gate is not None:
            gate.reschedule(self.module_name)

    def _liveness(self) -> tuple[float, float, float]:
        """(s the current step has run, s a due step has waited to begin, s since the last step ended or -1), in
        wall-clock time."""
        now = time.monotonic()
        due = self.active and self._step_due()
        with self._live_lock:
            began, ended = self._step_began, self._step_ended
            if began is not None or not due:
                self._overdue_since = None
            elif self._overdue_since is None:
                self._overdue_since = now
            overdue = now - self._overdue_since if self._overdue_since is not None else 0.0
        running = now - began if began is not None else 0.0
        return running, overdue, now - ended if ended is not None else -1.0

    def _step_due(self) -> bool:
        """A step is due and has not begun: in lock-step, a tick this process heard of offers it; else the clock
        reached the time the loop waits for."""
        if self._in_lockstep:
            gate = self.bus.gate
            tick = gate.latest if gate is not None else None
            if tick is None:
                return False
            return tick.run != self._tick_run or self._tick_due <= tick.stamp + _DUE_SLACK
        due = self._free_due
        return due is not None and self.clock.now() >= due

    def stop(self) -> None:
        """Stop the control step, withdraw from the bus and close what the module created (idempotent)."""
        if self._token is None and not self._writers and not self._services:
            return
        self._stopping = True
        self.stop_activity()
        try:
            self.on_shutdown()
        finally:
            things: list[Any] = [self._token, *self._services, *self._readers, *self._writers]
            self._token = None
            self._services, self._readers, self._writers = [], [], []
            for thing in things:
                if thing is not None:
                    self.bus.release(thing)
            self._logger.info("%s stopped", self.module_name)

    # -- MOM ----------------------------------------------------------------------------------------------------

    def info(self) -> msgs.ModuleInfo:
        """What MOM shows of this module."""
        running, overdue, since = self._liveness()
        now = time.time()
        return msgs.ModuleInfo(
            name=self.module_name,
            pid=os.getpid(),
            host=socket.gethostname(),
            started=self._started,
            active=self.active,
            provides=[
                msgs.InterfaceStats(
                    name=w.name,
                    type=w.type.__name__,
                    count=w.meter.count,
                    rate_hz=round(w.meter.current_rate(now), 3),
                    last_write=w.meter.last,
                    writer_id=w.writer_id,
                )
                for w in self._writers
            ],
            requires=list(self.requires),
            dropped=sum(r.dropped for r in self._readers),
            notes=[*self.notes(), *self.stale_notes()],
            reads=[
                msgs.ReadStats(
                    name=r.name, type=r.type.__name__, count=r.received, writers=r.writers_heard(WRITERS_WINDOW, now)
                )
                for r in self._readers
            ],
            services=[service.name for service in self._services],
            steps=self.steps,
            step_running=round(running, 3),
            step_overdue=round(overdue, 3),
            step_age=round(since, 3),
            stopping=self._stopping,
        )

    def notes(self) -> list[str]:
        """Remarks MOM shows under the module's interfaces (override to add some)."""
        return []

    def stale_notes(self) -> list[str]:
        """One remark per input that is stale now (its newest value older than its reader's deadline, by the module's
        clock), with its age and how often it went stale."""
        now = self.clock.now()
        out = []
        for reader in self._readers:
            deadline = getattr(reader, "deadline", None)
            if deadline is None:
                continue
            assert isinstance(reader, StateReader)
            age = reader.stamp_age(now)
            if age is not None and age > deadline:
                times = f"; stale {reader.stale_events} times so far" if reader.stale_events else ""
                out.append(f"stale input {reader.name}: {age:.2f} s old (deadline {deadline:g} s{times})")
        return out

    # -- parameters -----------------------------------------------------------------------------------------------

    def describe_parameters(self) -> list[msgs.ParameterInfo]:
        """Every parameter of the module: its type, value, default, whether it can change at run time, its valid
        range (a number's), and the description from the ``Attributes:`` section of its Params docstrings."""
        docs = _attribute_docs(type(self.params), [field.name for field in msgspec.structs.fields(self.params)])
        ranges = parameter_ranges(type(self.params))
        current = msgspec.to_builtins(self.params)
        out = []
        for field in msgspec.structs.fields(self.params):
            if field.default is not msgspec.NODEFAULT:
                default: Any = msgspec.to_builtins(field.default)
            elif field.default_factory is not msgspec.NODEFAULT:
                default = msgspec.to_builtins(field.default_factory())
            else:
                default = None
            out.append(
                msgs.ParameterInfo(
                    name=field.name,
                    type=_type_name(field.type),
                    value=current.get(field.name),
                    default=default,
                    dynamic=field.name in self.dynamic_params,
                    description=docs.get(field.name, ""),
                    range=ranges.get(field.name, ""),
                )
            )
        return out

    def get_parameters(self, wanted: list[str] | None = None) -> dict[str, Any]:
        """The values of the parameters named (all if None), as plain values (JSON-like).

        Raises:
            KeyError: a name is not a parameter of this module.
        """
        current: dict[str, Any] = msgspec.to_builtins(self.params)
        if wanted is None:
            return current
        self._check_parameter_names(wanted)
        return {key: current[key] for key in wanted}

    def _srv_get_parameters(self, wanted: list[str] | None) -> dict[str, Any]:
        return self.get_parameters(wanted)

    def set_parameters(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Change parameters while the module runs; return the new values of those changed.

        The whole new set is validated against ``Params`` (types, the declared ranges, the rules of its
        ``__post_init__``) before anything changes; then ``self.params`` is replaced and
        :meth:`on_parameters_changed` applies it (if that fails, the old parameters are put back). A refused change
        changes nothing.

        Raises:
            KeyError: a name is not a parameter of this module.
            ValueError: a parameter is read-only at run time, or a value is not valid (out of its range: the
                message gives the range).
        """
        self._check_parameter_names(list(changes))
        fixed = sorted(key for key in changes if key not in self.dynamic_params)
        if fixed:
            can = ", ".join(self.dynamic_params) or "none"
            raise ValueError(
                f"{', '.join(fixed)} {'is' if len(fixed) == 1 else 'are'} read-only at run time "
                f"(restart the module with -p NAME=VALUE; changeable now: {can})"
            )
        with self._lock:
            old = self.params
            merged = {**msgspec.to_builtins(old), **changes}
            try:
                check_ranges(type(old), changes)
                new = msgspec.convert(merged, type=type(old), strict=False)
            except (ValueError, msgspec.ValidationError) as err:
                raise ValueError(f"bad value: {err}") from None
            self.params = new
            try:
                self.on_parameters_changed(old, new)
            except Exception:
                self.params = old
                raise
        self._logger.info("parameters changed: %s", ", ".join(f"{k}={v!r}" for k, v in changes.items()))
        if new.rate_hz != old.rate_hz:
            self._reschedule()
        values: dict[str, Any] = msgspec.to_builtins(new)
        return {key: values[key] for key in changes}

    def _check_parameter_names(self, keys: list[str]) -> None:
        known = [field.name for field in msgspec.structs.fields(self.params)]
        unknown = [key for key in keys if key not in known]
        if unknown:
            raise KeyError(f"no parameter {', '.join(unknown)} (the parameters are: {', '.join(known)})")

    def _srv_start(self, _request: Any) -> bool:
        self.start_activity()
        return self.active

    def _srv_stop(self, _request: Any) -> bool:
        self.stop_activity()
        return self.active
