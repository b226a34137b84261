"""The bus: one Zenoh session per process, and the interfaces, services and liveliness built on it.

Strategy: interfaces are *states* (the CORBA state objects of the robot software Pluto follows, docs/design.md). A
writer publishes each new value and keeps the newest one in a queryable on the interface's key (the shape of Zenoh's
AdvancedPublisher cache, with Pluto's write stamp in the attachment); a reader that joins late asks for it when it is
created, with no consolidation (every writer answers, the newest write wins), and has it at once; from then on it keeps
the newest published value. The query reaches every writer because the session has heard of every other session first
(:meth:`Bus.settle`, no fixed wait): a newcomer is linked to the rendezvous owner when Zenoh's open returns (with
its declarations: ``open/return_conditions``); it then asks the owner which sessions it knows (a process that
took the rendezvous over reads the sessions listed in the rendezvous's folder instead) and waits for each one's
liveliness token ``pluto/@session/<zid>``. Zenoh sends what a session has declared to a new link in a fixed
order, subscribers, queryables, then liveliness tokens, so once the token is in, that session's writers and
services are known. Service calls that find nobody wait on Zenoh's matching status of the service key, not on a
timer. Commands are the exception to late delivery (docs/design.md, principle 5; the table in
:data:`pluto.names.COMMANDS`): a command writer marks its values, readers never take a marked value from a query (a
command is never handed to a reader that joins later), and a command reader forgets a command once it is older
than its ``max_age`` by the reader's own clock. The rule lives here, so no module can forget it.
Zenoh callbacks do as little as possible (decode, store, notify); user callbacks and service handlers run on the
bus's executor, so a slow callback can never stall Zenoh, and a slow subscriber only skips to the newest value.

The per-message path is short, because on a round trip (bench/bus.py) every Python step between a wake-up and the next
one shows: a writer that is neither batching nor lock-stepped stamps and publishes under its lock and does its
bookkeeping while the value travels; on a session that delivers locally (a fleet's, whose robots share it), a writer
hands its value to the readers of its own session itself, on its own thread, and puts it to other sessions only (on a
router, only while one reads the key: :class:`~pluto.bus.receivers.LocalDelivery`); the one Zenoh subscriber of an
interface (:class:`_Tap`) parses the attachment and decodes the payload once, in place on Zenoh's thread, which keeps
its Python thread state from one callback to the next (:func:`~pluto.bus.executor.keep_thread_state`); a reader stores
the value and wakes its waiting threads as the last thing; a subscription queues it and hands its strand to an idle
worker, woken outside the executor's lock; :meth:`StateReader.wait_for_update` takes the reader's lock once after its
wake-up.

The parts live by idea: the mark of a sample in :mod:`pluto.bus.wire`, writers in :mod:`pluto.bus.writer`, readers,
subscriptions and the interface's one subscriber in :mod:`pluto.bus.receivers`, services and calls in
:mod:`pluto.bus.services`, sessions, modules and tokens in :mod:`pluto.bus.discovery`, Zenoh's set-up in
:mod:`pluto.bus.zenoh_setup`; this module ties them into :class:`Bus`, and every name stays importable from here.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar, overload

import msgspec
import zenoh

from pluto import msgs, names
from pluto.bus.config import (
    BusConfig,
    bus_config,
    check_robot_name,
    register_session,
    rendezvous_free,
    unregister_session,
    zenoh_config_json,
)
from pluto.bus.counters import _DropCounter
from pluto.bus.discovery import ROSTER, SESSIONS, Discovery
from pluto.bus.executor import Executor, on_zenoh_thread
from pluto.bus.lockstep import LockstepAck, LockstepGate
from pluto.bus.receivers import Listening, LocalDelivery, StateReader, Subscription, _Receiver, _Tap
from pluto.bus.services import Replies, RequestReply, Service
from pluto.bus.wire import _ATTACHMENT as _ATTACHMENT  # the layout of an attachment, which tests build
from pluto.bus.wire import BATCH, COMMAND, LOCKSTEPPED, write_mark, write_stamp, write_time
from pluto.bus.writer import StateWriter, _Batcher
from pluto.bus.zenoh_setup import ZENOH_QUIET, ZENOH_RUNTIME, _start_zenoh_log, zenoh_log_filter, zenoh_reason
from pluto.closing import close_at_exit
from pluto.errors import BusError
from pluto.names import Topic

__all__ = [
    "BATCH",
    "COMMAND",
    "LOCKSTEPPED",
    "ROSTER",
    "SESSIONS",
    "ZENOH_QUIET",
    "ZENOH_RUNTIME",
    "Bus",
    "Replies",
    "Service",
    "StateReader",
    "StateWriter",
    "Subscription",
    "open_bus",
    "write_mark",
    "write_stamp",
    "write_time",
    "zenoh_log_filter",
    "zenoh_reason",
]

M = TypeVar("M", bound=msgs.Message)
T = TypeVar("T")


class Bus(RequestReply, Discovery):
    """A process's connection to the robot's bus (one Zenoh session).

    Use as a context manager, or call :meth:`close`. Interface names are the robot's (``Base/Drive/State``); the
    key on the wire is ``pluto/<robot>/<name>``.

    Args:
        config: bus settings; by default from the environment (``PLUTO_ROBOT``, ``PLUTO_CONNECT``, ...).
        share: another bus of this process whose Zenoh session this one uses too, for a robot of its own
            (``config.robot``; the other settings are the other bus's): the robots of a fleet simulated in one
            process (:mod:`pluto.sim.fleet`). A writer hands its values to the readers of its session itself
            (:class:`~pluto.bus.receivers.LocalDelivery`), so the robots' values to each other skip Zenoh's threads;
            the session closes with the last bus on it.
        deliver_locally: the writers of this session hand their values to its readers themselves
            (:class:`~pluto.bus.receivers.LocalDelivery`; the buses that share it do too). For a process that hosts
            many modules on one session in lock-step (a fleet); elsewhere Zenoh delivers within the session.

    Raises:
        BusError: the session could not be opened (for instance the router in ``connect`` is unreachable, or it
            refused this machine's certificate: the message says why).
        ConfigError: a TLS file of ``config.tls`` is missing, damaged, expired or not from its CA.
    """

    def __init__(
        self, config: BusConfig | None = None, *, share: Bus | None = None, deliver_locally: bool = False
    ) -> None:
        self.config = config or bus_config()
        self.machine = ""
        """The name in this machine's certificate (``config.tls``), "" without one."""
        self.role = ""
        """The role in this machine's certificate: "robot", "viewer" (the router lets it read only, see
        :mod:`pluto.bus.access`) or "" without one."""
        if self.config.tls is not None:
            from pluto.bus.tls import check_files

            identity = check_files(self.config.tls)
            self.machine, self.role = identity.name, identity.role
        self.robot = self.config.robot
        self.prefix = f"pluto/{self.robot}"
        self.drops = _DropCounter()
        self._closed = False
        self._owned: list[Any] = []
        self._lock = threading.Lock()
        self.gate: LockstepGate | None = None
        self._by_name: dict[str, list[_Receiver[Any]]] | None = None
        """The lock-step state, once a module following simulated time uses this bus (see :meth:`lockstep`)."""
        self.lockstep_coordinator: Callable[[LockstepAck], None] | None = None
        """Set by a lock-step coordinator running on this bus (the simulator): the gate hands it its
        acknowledgements directly instead of through Zenoh (see :mod:`pluto.bus.lockstep`)."""
        self.executor = Executor(self.robot)
        """Runs every callback, service handler and deferred reply of this bus (see pluto.bus.executor)."""
        self._batcher: _Batcher | None = None
        self.writer_label = ""
        """Set by a program that is not a module (a command line) before it creates writers: each then announces
        ``<writer id>/<label>`` while it lives, and MOM names it so (see :meth:`writer_labels`). A key chunk: no
        ``/``, ``*``, ``?``, ``#`` or ``$``."""
        self._taps: dict[tuple[str, type[Any]], _Tap] = {}
        self._taps_lock = threading.Lock()
        self.routes = False
        """The session is a Zenoh router (the rendezvous owner, or ``pluto router``): it hears every subscriber
        declared by the sessions linked to it, so its writers may trust Zenoh's matching status (a peer's need not
        hear of them: see :class:`~pluto.bus.writer.StateWriter`)."""
        if share is not None:
            if share.closed:
                raise BusError("cannot share the session of a closed bus")
            self.owner = False
            self.routes = share.routes
            self.session = share.session
            self.local: LocalDelivery = share.local
            """What the writers of this bus's session hand their values to themselves (see :class:`LocalDelivery`)."""
            self._use: _SessionUse = share._use
            with self._use.lock:
                self._use.buses += 1
            self._start_discovery(announce=False)
            close_at_exit(self)
            return
        self.local = LocalDelivery(active=deliver_locally)
        _start_zenoh_log()
        self.owner = rendezvous_free(self.config)
        try:
            self.session = self._open(owner=self.owner)
        except zenoh.ZError as err:
            if not self.owner:
                raise self._open_error(err) from None
            try:  # another process took the rendezvous in the meantime: join it instead
                self.owner = False
                self.session = self._open(owner=False)
            except zenoh.ZError as err2:
                raise self._open_error(err2) from None
        self._start_discovery(announce=True)
        self._use = _SessionUse(register_session(self.config, self.zid))
        close_at_exit(self)

    def _open_error(self, err: Exception) -> BusError:
        where = ", ".join(self.config.connect) or ", ".join(self.config.listen)
        if self.config.tls is not None:
            # Zenoh only says it could not connect: a handshake of our own tells why.
            from pluto.bus.tls import diagnose

            reasons = [reason for reason in (diagnose(e, self.config.tls) for e in self.config.connect) if reason]
            if reasons:
                return BusError(f"cannot open the bus at {where}: {'; '.join(reasons)}")
        hint = " (is `pluto router` running there?)" if self.config.connect else ""
        return BusError(f"cannot open the bus at {where}{hint}: {zenoh_reason(err)}")

    def _open(self, owner: bool) -> zenoh.Session:
        # Zenoh's runtimes start on the first session; Pluto's processes hold one session with little traffic, so
        # each runtime gets one worker instead of a pool per core: about 5 threads rather than 15-25 in a module
        # process. ZENOH_RUNTIME set by the user wins.
        os.environ.setdefault("ZENOH_RUNTIME", ZENOH_RUNTIME)
        conf = zenoh.Config()
        entries = zenoh_config_json(self.config, owner)
        self.routes = entries.get("mode") == "router"
        for path, value in entries.items():
            conf.insert_json5(path, msgspec.json.encode(value).decode())
        return zenoh.open(conf)

    # -- keys --------------------------------------------------------------------------------------------------

    def _prefix(self, robot: str | None) -> str:
        """``pluto/<robot>``: of this bus's robot, or of robot ``robot``."""
        return self.prefix if robot is None or robot == self.robot else f"pluto/{check_robot_name(robot, 'robot ')}"

    def key(self, name: str, robot: str | None = None) -> str:
        """The Zenoh key of interface ``name`` of this bus's robot, or of robot ``robot``."""
        return f"{self._prefix(robot)}/{names.check_name(name)}"

    def key_raw(self, suffix: str, robot: str | None = None) -> str:
        """The Zenoh key ``pluto/<robot>/<suffix>`` (this bus's robot, or ``robot``), the suffix unchecked (for the
        bus's own protocols)."""
        return f"{self._prefix(robot)}/{suffix}"

    @property
    def subscribers(self) -> dict[str, int]:
        """The Zenoh subscribers this bus holds, by key: how many readers and subscriptions each serves (the
        receivers of one interface share one subscriber, which goes with the last of them)."""
        out: dict[str, int] = {}
        with self._taps_lock:
            for (key, _cls), tap in self._taps.items():
                out[key] = out.get(key, 0) + len(tap.receivers)
        return out

    def _attach(self, receiver: _Receiver[Any]) -> None:
        """Let ``receiver`` see its interface's samples (through the interface's one subscriber in this process)."""
        key = (receiver.key, receiver.type)
        with self._taps_lock:
            tap = self._taps.get(key)
            if tap is None:
                tap = self._taps[key] = _Tap(self, receiver.key, receiver.type)
                self.local.add(receiver.key, tap)
            tap.receivers = (*tap.receivers, receiver)

    def _detach(self, receiver: _Receiver[Any]) -> None:
        key = (receiver.key, receiver.type)
        with self._taps_lock:
            tap = self._taps.get(key)
            if tap is None or receiver not in tap.receivers:
                return
            tap.receivers = tuple(r for r in tap.receivers if r is not receiver)
            if tap.receivers:
                return
            del self._taps[key]
            self.local.remove(receiver.key, tap)
        tap.undeclare()

    def declare_subscriber(self, expr: str, callback: Callable[[Any], Any]) -> Listening:
        """Call ``callback`` with every sample written on a key of ``expr`` (a Zenoh key expression), from other
        sessions on a Zenoh thread, from this session's writers on the writer's thread (a
        :class:`~pluto.bus.receivers.LocalSample`: ``key_expr``, ``payload``, ``attachment``, ``kind``). The
        callback must be quick (store and hand over). Stop with :meth:`release` or its ``undeclare``.

        On a session that delivers locally a plain Zenoh subscriber would not hear this session's writers: they put
        to other sessions only, and hand their values to their own session's readers themselves
        (:class:`~pluto.bus.receivers.LocalDelivery`)."""
        self._check_open()
        subscriber = self.session.declare_subscriber(expr, on_zenoh_thread(callback))
        listener = self.local.listen(expr, callback) if self.local.active else None
        return self._own(Listening(self.local, subscriber, listener))

    def batcher(self) -> _Batcher:
        """The thread that sends batching writers' values when their delay is up (started at the first call)."""
        with self._lock:
            if self._batcher is None:
                self._batcher = _Batcher(f"pluto-{self.robot}")
            return self._batcher

    def lockstep(self) -> LockstepGate:
        """This bus's lock-step state (created at the first call)."""
        with self._lock:
            if self._closed:
                raise BusError("the bus is closed")
            if self.gate is None:
                self.gate = LockstepGate(self)
            return self.gate

    def receivers_by_key(self) -> dict[str, list[_Receiver[Any]]]:
        """The open readers and subscriptions of this bus, by the key they read (``pluto/<robot>/<interface>``: a
        reader of another robot's interface is apart from one of this robot's)."""
        with self._lock:
            by_key = self._by_name
            if by_key is None:
                by_key = {}
                for thing in self._owned:
                    if isinstance(thing, _Receiver):
                        by_key.setdefault(thing.key, []).append(thing)
                self._by_name = by_key
        if any(r.closed for receivers in by_key.values() for r in receivers):
            with self._lock:
                self._by_name = None
            return {k: [r for r in rs if not r.closed] for k, rs in by_key.items()}
        return by_key

    def service_key(self, name: str, robot: str | None = None) -> str:
        """The Zenoh key of service ``name`` of this bus's robot, or of robot ``robot``."""
        return f"{self._prefix(robot)}/@srv/{names.check_name(name)}"

    def module_key(self, name: str) -> str:
        """The Zenoh liveliness key of module ``name``."""
        return f"{self.prefix}/@module/{names.check_name(name)}"

    # -- interfaces --------------------------------------------------------------------------------------------

    def _type_for(self, name: str | Topic[M], cls: type[M] | None) -> type[M]:
        known = names.message_type_of(name)
        if cls is None:
            if known is None:
                raise KeyError(f"interface {name!r} is not in the table; pass its message type")
            return known  # type: ignore[return-value]
        if known is not None and known is not cls:
            raise TypeError(f"{name} carries {known.__name__}, not {cls.__name__}")
        return cls

    def _check_open(self) -> None:
        if self._closed:
            raise BusError("the bus is closed")

    def _own(self, thing: T) -> T:
        with self._lock:
            if self._closed:
                raise BusError("the bus is closed")
            self._owned.append(thing)
            if isinstance(thing, _Receiver):
                self._by_name = None
        return thing

    @overload
    def create_publisher(
        self,
        name: Topic[M],
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[M]: ...
    @overload
    def create_publisher(
        self,
        name: str,
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[Any]: ...
    @overload
    def create_publisher(
        self,
        name: str,
        cls: type[M],
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[M]: ...
    def create_publisher(
        self,
        name: str,
        cls: type[M] | None = None,
        *,
        reliable: bool = False,
        command: bool | None = None,
        batch: int = 0,
        batch_delay: float = 0.002,
    ) -> StateWriter[Any]:
        """Return a writer of interface ``name`` (its type from the interface table unless given).

        Args:
            reliable: under congestion, wait rather than drop values (for streams where every value counts).
            command: the values are commands (never handed to late readers); None: as the interface table says.
            batch: for high-rate streams: send up to this many values in one message, once that many are
                waiting or the oldest has waited ``batch_delay`` s (or at :meth:`StateWriter.flush`). Readers
                get every value, in order (a :class:`StateReader` keeps the newest); 0 sends each value at once.
                Never for commands; in lock-step every value goes out at once.
            batch_delay: the longest a value waits for its batch, s (0 < delay <= 1).
        """
        self._check_open()
        writer = StateWriter(
            self,
            name,
            self._type_for(name, cls),
            reliable=reliable,
            command=command,
            batch=batch,
            batch_delay=batch_delay,
        )
        return self._own(writer)

    @overload
    def create_reader(
        self,
        name: Topic[M],
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    @overload
    def create_reader(
        self,
        name: str,
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[Any]: ...
    @overload
    def create_reader(
        self,
        name: str,
        cls: type[M],
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[M]: ...
    def create_reader(
        self,
        name: str,
        cls: type[M] | None = None,
        *,
        fetch_timeout: float = 3.0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        deadline: float | None = None,
        robot: str | None = None,
    ) -> StateReader[Any]:
        """Return a reader of interface ``name`` that already holds its current value, if any.

        A reader of a command interface (:data:`pluto.names.COMMANDS`, or any with ``max_age``) starts empty and
        returns None once the newest command is older than ``max_age`` s by ``clock`` (default: the table's age and
        a monotonic clock). ``deadline`` (s) is how old a state's stamp may be for :meth:`StateReader.fresh`.
        ``robot`` reads another robot's interface (``pluto/<robot>/<name>``; this bus's robot by default): in
        lock-step its values are held back and waited for like this robot's.
        """
        self._check_open()
        cls = self._type_for(name, cls)
        return self._own(
            StateReader(
                self,
                name,
                cls,
                fetch_timeout=fetch_timeout,
                max_age=max_age,
                clock=clock,
                deadline=deadline,
                robot=robot,
            )
        )

    def create_subscription(
        self,
        name: str | Topic[M],
        callback: Callable[[M], Any],
        cls: type[M] | None = None,
        *,
        depth: int = 1,
        current: bool = True,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        robot: str | None = None,
    ) -> Subscription[M]:
        """Call ``callback`` with every new value of ``name`` (on a thread of the subscription's own).

        Args:
            depth: values queued for a slow callback; 1 keeps only the newest.
            current: also deliver the value the interface had when subscribing (never for a command).
            max_age, clock: for a command, a value that waited longer than ``max_age`` s by ``clock`` is skipped.
            robot: the robot whose interface it is (``pluto/<robot>/<name>``); this bus's robot by default.
        """
        self._check_open()
        sub = Subscription(
            self,
            name,
            self._type_for(name, cls),
            callback,
            depth=depth,
            current=current,
            max_age=max_age,
            clock=clock,
            robot=robot,
        )
        return self._own(sub)

    def _defer(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` off the Zenoh thread that called (on the executor)."""
        self.executor.submit(fn, *args)

    def release(self, thing: Any) -> None:
        """Close one reader, writer, subscription, service or token created on this bus, before the bus closes."""
        with self._lock:
            if thing in self._owned:
                self._owned.remove(thing)
            if isinstance(thing, _Receiver):
                self._by_name = None
        _close_entity(thing)

    def close(self) -> None:
        """Close everything created on this bus, then the session (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            owned, self._owned = self._owned, []
        for thing in reversed(owned):
            _close_entity(thing)
        if self.gate is not None:
            self.gate.close()
        if self._batcher is not None:
            self._batcher.close()
        self.executor.close()
        with self._use.lock:
            self._use.buses -= 1
            last = self._use.buses == 0
        if not last:
            self._stop_discovery()  # the session stays, for the other buses on it
            return
        with contextlib.suppress(Exception):
            self.session.close()  # type: ignore[no-untyped-call]
        unregister_session(self._use.registered)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SessionUse:
    """How many buses use a Zenoh session (see ``share`` of :class:`Bus`), and its entry at the rendezvous."""

    def __init__(self, registered: Path | None) -> None:
        self.buses = 1
        self.registered = registered
        self.lock = threading.Lock()


def _close_entity(thing: Any) -> None:
    closer = getattr(thing, "close", None) or getattr(thing, "undeclare", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            closer()


@contextlib.contextmanager
def open_bus(config: BusConfig | None = None) -> Iterator[Bus]:
    """Open a bus for the duration of a ``with`` block."""
    bus = Bus(config)
    try:
        yield bus
    finally:
        bus.close()
