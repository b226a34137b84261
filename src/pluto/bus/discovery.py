"""Who is on the bus: the other sessions (settling before a query), the live modules, liveliness tokens, the
writers that programs named, and the interfaces that have a value.

Strategy: a query reaches every writer and service only once this session has heard of every other session
(:meth:`Discovery.settle`, no fixed wait): a newcomer is linked to the rendezvous owner when Zenoh's open returns
(with its declarations: ``open/return_conditions``); it then asks the owner which sessions it knows (:data:`ROSTER`;
a process that took the rendezvous over reads the sessions listed in the rendezvous's folder instead) and waits for
each one's liveliness token ``pluto/@session/<zid>``. Zenoh sends what a session has declared to a new link in a
fixed order, subscribers, queryables, then liveliness tokens, so once the token is in, that session's writers and
services are known. Modules announce themselves with a token ``pluto/<robot>/@module/<name>``; what the bus has
watched and what a query of the tokens finds together say which are alive, with a short doubt about a module just
seen to go (a late answer is not a restart).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import zenoh

from pluto.bus.config import BusConfig, registered_sessions, rendezvous_used
from pluto.bus.executor import Executor, Strand, on_zenoh_thread
from pluto.bus.wire import write_time
from pluto.errors import BusTimeout

if TYPE_CHECKING:
    from pluto.bus.receivers import Listening
    from pluto.bus.services import Replies

T = TypeVar("T")

SESSIONS = "pluto/@session"
"""Liveliness key prefix of every bus session, ``pluto/@session/<zid>`` (all robots: they share the rendezvous)."""
ROSTER = "pluto/@roster"
"""Served by the rendezvous owner: the zids of the sessions it knows (a MessagePack list of str)."""


def _reply_roster(query: zenoh.Query, payload: bytes) -> None:
    with query:
        query.reply(ROSTER, payload)


class Discovery:
    """The discovery methods of :class:`pluto.bus.session.Bus` (sessions, modules, tokens): a part of the bus, which
    provides what is declared here for the type checker and calls :meth:`_start_discovery` once its session is
    open."""

    if TYPE_CHECKING:
        config: BusConfig
        session: zenoh.Session
        executor: Executor
        owner: bool
        prefix: str
        _lock: threading.Lock

        def key(self, name: str, robot: str | None = None) -> str: ...

        def key_raw(self, suffix: str) -> str: ...

        def module_key(self, name: str) -> str: ...

        def query(
            self,
            selector: str,
            *,
            timeout: float,
            payload: bytes | None = None,
            consolidation: zenoh.ConsolidationMode | None = None,
        ) -> Replies: ...

        def query_tokens(self, key: str, *, timeout: float) -> Replies: ...

        def _check_open(self) -> None: ...

        def _own(self, thing: T) -> T: ...

        def declare_subscriber(self, expr: str, callback: Callable[[Any], Any]) -> Listening: ...

        def release(self, thing: Any) -> None: ...

        def _defer(self, fn: Callable[..., None], *args: Any) -> None: ...

    def _start_discovery(self, announce: bool) -> None:
        """Watch the modules and the sessions; with ``announce`` (the first bus on its session), announce the session,
        and serve the roster if this is the owner."""
        self._settled = False
        self._modules: set[str] = set()
        self._gone: dict[str, float] = {}  # module -> when it was last seen to go (monotonic s)
        self._module_watch = self.session.liveliness().declare_subscriber(
            f"{self.prefix}/@module/**", on_zenoh_thread(self._on_module_token), history=True
        )
        # Every session announces itself; the rendezvous owner lists the sessions it knows (see settle()).
        self.zid = str(self.session.info.zid())
        self._sessions: set[str] = set()
        self._sessions_heard: set[str] = set()  # also those that went since (a roster may still list them)
        self._sessions_changed = threading.Condition()
        self._session_watch = self.session.liveliness().declare_subscriber(
            f"{SESSIONS}/*", on_zenoh_thread(self._on_session_token), history=True
        )
        self._session_token: Any = None
        self._roster: Any = None
        if announce:
            self._session_token = self.session.liveliness().declare_token(f"{SESSIONS}/{self.zid}")
            if self.owner:
                self._roster = self.session.declare_queryable(ROSTER, on_zenoh_thread(self._on_roster_query))

    def _stop_discovery(self) -> None:
        """Undeclare what :meth:`_start_discovery` declared (a bus that leaves a session others still use)."""
        for entity in (self._module_watch, self._session_watch, self._session_token, self._roster):
            if entity is not None:
                with contextlib.suppress(Exception):
                    entity.undeclare()

    GONE_DOUBT = 1.0
    """s after a module was seen to go during which news of it alive is doubted (see :meth:`_note_module`)."""
    SETTLE_TIMEOUT = 10.0
    """s :meth:`settle` waits at most for the sessions it expects (one may be closing). Generous: it is waited out only
    for a session that goes meanwhile, while on a starved machine the others may take seconds to reconnect to a
    process that took the rendezvous over."""

    def _on_session_token(self, sample: zenoh.Sample) -> None:
        zid = str(sample.key_expr).rpartition("/")[2]
        with self._sessions_changed:
            self._sessions_heard.add(zid)
            if sample.kind == zenoh.SampleKind.PUT:
                self._sessions.add(zid)
            else:
                self._sessions.discard(zid)
            self._sessions_changed.notify_all()

    def _on_roster_query(self, query: zenoh.Query) -> None:
        with self._sessions_changed:
            roster = sorted(self._sessions)
        self._defer(_reply_roster, query, msgspec.msgpack.encode(roster))

    def settle(self) -> None:
        """Before asking who is on the bus, wait until this session has heard of every other session.

        A newcomer is linked to the rendezvous owner when it opens (and has its declarations: Zenoh's
        ``open/return_conditions``), but it learns of the other sessions through links of its own that gossip sets
        up after that; over a new link Zenoh sends the other side's subscribers, then its queryables, then its
        liveliness tokens, ``pluto/@session/<zid>`` among them. So: ask the owner which sessions it knows, and wait
        for each one's token (an event; at most :attr:`SETTLE_TIMEOUT` s for one that closes meanwhile): from then
        on the writers and services of those sessions are known, and a query reaches them. Once per bus. A process
        that took the rendezvous over after its owner died knows nobody until the others reconnect to it (within
        their retry period): it expects the sessions listed in the rendezvous's folder instead
        (:func:`~pluto.bus.config.registered_sessions`). A client of a router does not wait: the router knows."""
        if self._settled:
            return
        self._settled = True
        if not rendezvous_used(self.config):
            return
        expected: set[str] = set()
        if self.owner:
            expected = registered_sessions(self.config) - {self.zid}
        for reply in [] if self.owner else self.query(ROSTER, timeout=self.SETTLE_TIMEOUT):
            if reply.ok is None:
                continue
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                expected.update(msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=list[str]))
        with self._sessions_changed, self.executor.blocking():
            self._sessions_changed.wait_for(lambda: expected <= self._sessions_heard, timeout=self.SETTLE_TIMEOUT)

    # -- liveliness --------------------------------------------------------------------------------------------

    def declare_module(self, name: str) -> zenoh.LivelinessToken:
        """Announce that module ``name`` is alive until the returned token is undeclared or the process ends."""
        self._check_open()
        return self._own(self.session.liveliness().declare_token(self.module_key(name)))

    def declare_token(self, suffix: str) -> zenoh.LivelinessToken:
        """Declare the liveliness token ``pluto/<robot>/<suffix>`` until it is released or the process ends."""
        self._check_open()
        return self._own(self.session.liveliness().declare_token(self.key_raw(suffix)))

    def watch_token(self, suffix: str, callback: Callable[[bool], Any]) -> Any:
        """Call ``callback(present)`` on a Zenoh thread (keep it short) when the liveliness token
        ``pluto/<robot>/<suffix>`` is declared (True, also at once if it is already) or goes (False: released, or
        its process ended). Returns the Zenoh subscriber (release it with :meth:`release`)."""
        self._check_open()

        def on_sample(sample: zenoh.Sample) -> None:
            callback(sample.kind == zenoh.SampleKind.PUT)

        return self._own(
            self.session.liveliness().declare_subscriber(self.key_raw(suffix), on_zenoh_thread(on_sample), history=True)
        )

    def _on_module_token(self, sample: zenoh.Sample) -> None:
        self._note_module(
            str(sample.key_expr).removeprefix(f"{self.prefix}/@module/"), sample.kind == zenoh.SampleKind.PUT
        )

    def _note_module(self, name: str, alive: bool) -> None:
        """What :meth:`live_modules` knows of module ``name`` (from any watcher of this bus: whichever hears first).

        An announcement heard within ``GONE_DOUBT`` s after the module was seen to go may be a late answer to a
        watcher's query of the tokens, sent before the module went, rather than a restart: it is not taken as
        news; until then only a query of the tokens that finds the module counts."""
        now = time.monotonic()
        with self._lock:
            if alive:
                if now - self._gone.get(name, -math.inf) >= self.GONE_DOUBT:
                    self._modules.add(name)
            else:
                self._modules.discard(name)
                self._gone[name] = now

    def writer_labels(self, timeout: float = 1.0) -> dict[int, str]:
        """The writers that programs other than modules named (:attr:`writer_label`), alive now: id -> label."""
        self.settle()
        prefix = f"{self.prefix}/@writer/"
        found: dict[int, str] = {}
        for reply in self.query_tokens(f"{prefix}**", timeout=timeout):
            if reply.ok is None:
                continue
            wid, _, label = str(reply.ok.key_expr).removeprefix(prefix).partition("/")
            with contextlib.suppress(ValueError):
                found[int(wid, 16)] = label
        return found

    def live_modules(self, timeout: float = 1.0) -> list[str]:
        """Names of the modules alive now, sorted.

        Both what this bus has watched since it opened and what a query finds count: right after joining, either
        alone can miss a module whose announcement is still on its way.
        """
        self.settle()
        found: set[str] = set()
        for reply in self.query_tokens(f"{self.prefix}/@module/**", timeout=timeout):
            if reply.ok is not None:
                found.add(str(reply.ok.key_expr).removeprefix(f"{self.prefix}/@module/"))
        with self._lock:
            # A module seen to go may still answer the query for a moment (its removal on its way): it is gone.
            now = time.monotonic()
            recent = {name for name, when in self._gone.items() if now - when < self.GONE_DOUBT}
            return sorted((found - recent) | self._modules)

    def watch_modules(self, callback: Callable[[str, bool], Any]) -> Any:
        """Call ``callback(name, alive)`` on this bus's executor (in order) when a module appears or disappears.

        Modules already alive are reported first. Returns the Zenoh subscriber (undeclared on close).
        """
        prefix = f"{self.prefix}/@module/"
        events: deque[tuple[str, bool]] = deque()

        def drain() -> None:  # in order: a module that came and went is reported in that order
            while events:
                callback(*events.popleft())

        strand = Strand(self.executor, drain)

        def on_sample(sample: zenoh.Sample) -> None:
            alive = sample.kind == zenoh.SampleKind.PUT
            if not alive:  # the bus's own list knows it too before anyone hears it (live_modules agrees)
                self._on_module_token(sample)
            events.append((str(sample.key_expr).removeprefix(prefix), alive))
            strand.schedule()

        key = f"{prefix}**"
        return self._own(self.session.liveliness().declare_subscriber(key, on_zenoh_thread(on_sample), history=True))

    def wait_for_token(self, suffix: str, timeout: float) -> None:
        """Wait until the liveliness token ``pluto/<robot>/<suffix>`` is declared.

        Raises:
            BusTimeout: it was not within ``timeout`` seconds.
        """
        event = threading.Event()
        key = self.key_raw(suffix)
        sub = self.session.liveliness().declare_subscriber(
            key,
            on_zenoh_thread(lambda sample: event.set() if sample.kind == zenoh.SampleKind.PUT else None),
            history=True,
        )
        try:
            if not event.wait(timeout):
                raise BusTimeout(f"{suffix} was not declared within {timeout} s")
        finally:
            with contextlib.suppress(Exception):
                sub.undeclare()  # type: ignore[no-untyped-call]

    def wait_for_module(self, name: str, timeout: float, alive: bool = True) -> None:
        """Wait until module ``name`` is alive (or gone, with ``alive=False``).

        Raises:
            BusTimeout: it did not happen within ``timeout`` seconds.
        """
        event = threading.Event()

        def seen(module: str, is_alive: bool) -> None:
            # Once only: a token declared as the watch starts can be reported twice (history and live), and the
            # second report may be drained after the module went; noting it again would bring the module back.
            if module == name and is_alive == alive and not event.is_set():
                self._note_module(module, is_alive)  # so that live_modules() agrees at once
                event.set()

        sub = self.watch_modules(seen)
        try:
            if not alive and name not in self.live_modules():
                return
            if not event.wait(timeout):
                state = "alive" if alive else "gone"
                raise BusTimeout(f"module {name!r} was not {state} within {timeout} s")
        finally:
            event.set()  # reports drained after the wait no longer touch what live_modules() knows
            self.release(sub)

    # -- interfaces --------------------------------------------------------------------------------------------

    def interface_keys(self, timeout: float = 3.0) -> dict[str, float]:
        """Interfaces that have a current value on this robot, with the wall-clock time of their last write."""
        self.settle()  # then every writer is known: one query reaches them all
        found: dict[str, float] = {}
        replies = self.query(f"{self.prefix}/**", timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE)
        for reply in replies:
            if reply.ok is None:
                continue
            name = str(reply.ok.key_expr).removeprefix(f"{self.prefix}/")
            found[name] = max(found.get(name, 0.0), write_time(reply.ok.attachment))
        return found

    def wait_published(self, name: str, timeout: float) -> None:
        """Wait until interface ``name`` has a value (of any type) on the bus.

        Raises:
            BusTimeout: nobody wrote it within ``timeout`` seconds.
        """
        key = self.key(name)
        written = threading.Event()
        sub = self.declare_subscriber(key, lambda _sample: written.set())
        deadline = time.monotonic() + timeout
        try:
            # Ask too: the value may have been written before the subscriber existed. A writer that answers the query
            # has had the subscriber's declaration first (the same link, in order), so a later value reaches it.
            self.settle()
            replies = self.query(key, timeout=max(deadline - time.monotonic(), 0.001))
            if written.is_set() or any(reply.ok is not None for reply in replies):
                return
            with self.executor.blocking():
                if not written.wait(max(deadline - time.monotonic(), 0.0)):
                    raise BusTimeout(f"nobody wrote {name} within {timeout:g} s")
        finally:
            self.release(sub)
