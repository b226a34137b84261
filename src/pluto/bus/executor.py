"""One executor per bus: a small pool of worker threads for every callback, service handler and deferred reply.

Strategy: as rclpy's executor, and unlike a thread per subscription or service, the number of threads does not grow
with the number of interfaces. Work that must stay in order (the values of one subscription, the requests of one
service) goes through a :class:`Strand`: at most one worker runs a strand's work at a time, and a strand with
nothing to do holds no thread. Workers are started when work is waiting and none is idle, up to ``max_workers``; a
worker that waits for something (a handler calling a service of the same process, say) lends its place for that
time (:meth:`Executor.blocking`), so a chain of such waits cannot starve the pool. Workers beyond ``core`` end after
``idle_timeout`` s without work. Zenoh's own threads run Pluto's callbacks in place (:func:`on_zenoh_thread`) and
keep their Python thread state from the first one on (:func:`keep_thread_state`).

A Zenoh thread never waits for a worker to start (``Thread.start`` waits for the new thread to run): a worker
needed by a callback is started by a short-lived helper thread instead. A new thread may run Python's garbage
collector, and that can free the last reference to a closed Zenoh session of the process, whose teardown waits for
tasks of Zenoh's runtime: were that runtime's thread waiting for the new one, both would wait until Zenoh gave up
(10 s per task), and nothing else on that runtime would run meanwhile.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, cast

import zenoh

log = logging.getLogger("pluto.bus")

__all__ = ["ZENOH_THREAD", "Executor", "Strand", "keep_thread_state", "on_zenoh_thread"]

_Job = tuple[Callable[..., Any], tuple[Any, ...]]
_NOTHING: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def _thread_state_keeper() -> Callable[[], object] | None:
    """``PyGILState_Ensure`` of the C API, or None where there is none to call (not CPython); why Pluto calls it:
    docs/design.md, "Where Pluto leans on CPython"."""
    try:
        ensure = ctypes.pythonapi.PyGILState_Ensure
    except (AttributeError, ValueError):  # pragma: no cover - CPython always has it
        return None
    ensure.argtypes = []
    ensure.restype = ctypes.c_int
    return cast("Callable[[], object]", ensure)


_ensure_thread_state = _thread_state_keeper()

ZENOH_THREAD = threading.local()
"""``ZENOH_THREAD.kept`` is set on a Zenoh thread once it keeps its Python thread state (:func:`keep_thread_state`)."""


def keep_thread_state() -> None:
    """Called on a Zenoh thread in a callback: have the thread keep its Python thread state from now on.

    A Zenoh thread is not a Python thread: each time it enters Python, CPython makes it a thread state, and drops
    it when the callback returns (``PyGILState_Ensure``/``Release``), while it holds the GIL that the thread it
    just woke needs. That cost 7 us on each side of bench/bus.py's round trip (from a subscription's Zenoh
    callback to its worker running: 16.5 us, 9 us with the thread state kept). So at its first callback a Zenoh
    thread takes one more hold on its thread state, never released: from then on it keeps it, as zenoh-python's
    own callback threads and every Python thread do. Zenoh's runtime threads are few and live as long as the
    process; one that ends leaves its thread state behind (a few hundred bytes).
    """
    if _ensure_thread_state is not None:
        _ensure_thread_state()
    ZENOH_THREAD.kept = True


def on_zenoh_thread(
    fn: Callable[[Any], Any], *, keeps_state: bool = False, drop: Callable[[], Any] | None = None
) -> Any:
    """A Zenoh handler that calls ``fn`` on the Zenoh thread that received the data.

    zenoh-python's default runs each Python callback on a thread of its own per subscriber or queryable (one thread
    per interface); Pluto's callbacks only decode, store and hand over to the executor, so they run in place, and
    the thread keeps its Python thread state from its first callback on (:func:`keep_thread_state`). With
    ``keeps_state`` ``fn`` sees to that itself, which saves a call on a hot path: it starts with ``if not
    hasattr(ZENOH_THREAD, "kept"): keep_thread_state()``. ``drop`` is called once Zenoh is done with the handler
    (the entity undeclared, a query ended: no call of ``fn`` follows).
    """
    if keeps_state:
        return zenoh.handlers.Callback(fn, drop, indirect=False)
    kept = ZENOH_THREAD

    def call(arg: Any) -> Any:
        if not hasattr(kept, "kept"):
            keep_thread_state()
        return fn(arg)

    return zenoh.handlers.Callback(call, drop, indirect=False)


class _Worker:
    def __init__(self, executor: Executor, name: str) -> None:
        self.inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=executor._work, args=(self,), name=name, daemon=True)
        self.started = threading.Event()
        """Set once ``thread.start()`` returned (it may be called on a helper thread: see :meth:`start`)."""

    def start(self) -> None:
        """Start the thread: here, or on a helper thread when called on a Zenoh thread (see the module's
        docstring)."""
        if hasattr(ZENOH_THREAD, "kept"):
            _thread.start_new_thread(self._start, ())
        else:
            self._start()

    def _start(self) -> None:
        try:
            self.thread.start()
        finally:
            self.started.set()


class Executor:
    """Runs jobs on a pool of daemon threads named ``pluto-exec:<bus>:<n>``.

    A job goes to the worker that became idle last (so a few busy workers take the load and the others end), or
    waits in a backlog for the next free one.

    Args:
        name: what the threads are named after.
        core: workers kept when idle.
        max_workers: most workers at once (besides those lending their place in :meth:`blocking`).
        idle_timeout: s after which an idle worker beyond ``core`` ends.
    """

    def __init__(self, name: str, *, core: int = 1, max_workers: int = 2, idle_timeout: float = 1.0) -> None:
        if not 0 <= core <= max_workers or max_workers < 1:
            raise ValueError(f"need 0 <= core <= max_workers and max_workers >= 1, got {core}, {max_workers}")
        self.name = name
        self.core = core
        self.max_workers = max_workers
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._workers: dict[threading.Thread, _Worker] = {}
        self._idle: list[_Worker] = []  # a stack: the last one to become idle takes the next job
        self._backlog: deque[_Job] = deque()
        self._blocked = 0  # workers waiting in a blocking() section
        self._serial = 0
        self._closed = False
        self.peak = 0
        """Most workers that ran at once."""

    @property
    def workers(self) -> int:
        """Workers alive now."""
        with self._lock:
            return len(self._workers)

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on a worker; an exception it raises is logged. False (nothing done) once closed."""
        return self.submit_job((fn, args))

    def submit_job(self, job: _Job) -> bool:
        """:meth:`submit` of a job made beforehand, ``(fn, args)``."""
        with self._lock:
            if self._closed:
                return False
            if self._idle:
                worker: _Worker | None = self._idle.pop()
            else:
                worker = None
                self._backlog.append(job)
                new = self._grow()
        if worker is not None:
            worker.inbox.put(job)  # wakes the worker: outside the lock, which it would wait for
        elif new is not None:
            new.start()  # outside the lock too: a thread's start waits for the thread to run
        return True

    def on_worker(self) -> bool:
        """Whether the calling thread is one of this executor's workers."""
        return threading.current_thread() in self._workers

    def _grow(self) -> _Worker | None:
        """A new worker, to be started by the caller once it released the lock, if jobs wait with no idle worker and
        there is room (lock held)."""
        if self._backlog and not self._idle and len(self._workers) - self._blocked < self.max_workers:
            self._serial += 1
            worker = _Worker(self, f"pluto-exec:{self.name}:{self._serial}")
            self._workers[worker.thread] = worker
            self.peak = max(self.peak, len(self._workers))
            return worker
        return None

    def blocking(self) -> contextlib.AbstractContextManager[None]:
        """Around a wait on a worker of this executor: the worker's place is lent to others meanwhile (on any other
        thread, nothing: the common case costs no generator)."""
        if threading.current_thread() not in self._workers:
            return _NOTHING
        return self._lend()

    @contextlib.contextmanager
    def _lend(self) -> Iterator[None]:
        with self._lock:
            self._blocked += 1
            new = self._grow()
        if new is not None:
            new.start()
        try:
            yield
        finally:
            with self._lock:
                self._blocked -= 1

    def _next(self, me: _Worker) -> _Job | None:
        """The next job for worker ``me``, or None when it is to end."""
        with self._lock:
            if self._backlog:
                return self._backlog.popleft()
            if self._closed:
                del self._workers[me.thread]
                return None
            self._idle.append(me)
        while True:
            try:
                return me.inbox.get(timeout=self.idle_timeout)
            except queue.Empty:
                with self._lock:
                    if me in self._idle and len(self._workers) > self.core:
                        self._idle.remove(me)
                        del self._workers[me.thread]
                        return None
                    # a core worker waits on; one that was just handed a job finds it in its inbox

    def _work(self, me: _Worker) -> None:
        while (job := self._next(me)) is not None:
            fn, args = job
            try:
                fn(*args)
            except Exception:
                log.exception("%s: a job failed", self.name)

    def close(self, timeout: float = 5.0) -> None:
        """End the workers once the jobs already submitted are done (idempotent; not from a worker)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers.values())
            for worker in self._idle:
                worker.inbox.put(None)
                self._workers.pop(worker.thread, None)
            self._idle.clear()
        me = threading.current_thread()
        deadline = time.monotonic() + timeout
        for worker in workers:
            if worker.thread is not me and worker.started.wait(max(0.0, deadline - time.monotonic())):
                with contextlib.suppress(RuntimeError):  # its start failed (no thread to be had)
                    worker.thread.join(max(0.0, deadline - time.monotonic()))


class Strand:
    """Work of one owner (a subscription, a service) run in order, one piece at a time, on an executor.

    ``drain`` is called on a worker after :meth:`schedule`; it does the pending work and returns. A schedule that
    comes while ``drain`` runs makes it run once more, so nothing is left behind and nothing runs twice at once.
    """

    def __init__(self, executor: Executor, drain: Callable[[], Any]) -> None:
        self._executor = executor
        self._drain = drain
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._scheduled = False  # a run is submitted or running
        self._again = False  # work came while running
        self._runner = 0  # ident of the thread running the work, 0 when none
        self._job: _Job = (self._run, ())  # made once: schedule is on the hot path of every subscription
        self._waiters = 0  # threads in wait_idle (a run that ends wakes them; with none, it skips the notify)

    @property
    def busy(self) -> bool:
        """A run is submitted or running."""
        return self._scheduled

    @property
    def in_strand(self) -> bool:
        """The calling thread is running this strand's work."""
        return self._runner == threading.get_ident()

    def schedule(self) -> None:
        """Make sure ``drain`` runs (again) soon."""
        with self._lock:
            if self._scheduled:
                self._again = True
                return
            self._scheduled = True
        if not self._executor.submit_job(self._job):
            with self._lock:  # the bus is closing: nothing will run
                self._scheduled = self._again = False
                self._idle.notify_all()

    def run_here(self) -> None:
        """Do the pending work now, on the calling thread, unless a run is already submitted or running (that run
        then does it). For a caller that would only wait for the work anyway: it saves the hand-over to a worker."""
        with self._lock:
            if self._scheduled:
                self._again = True
                return
            self._scheduled = True
        self._run()

    def _run(self) -> None:
        self._runner = threading.get_ident()
        while True:
            try:
                self._drain()
            except Exception:
                log.exception("%s: work failed", self._executor.name)
            with self._lock:
                if not self._again:
                    self._runner = 0
                    self._scheduled = False
                    if self._waiters:
                        self._idle.notify_all()
                    return
                self._again = False

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no run is submitted or running (True), or ``timeout`` s passed (False)."""
        if not self._scheduled or self.in_strand:
            return True
        with self._idle:
            self._waiters += 1
            try:
                return self._idle.wait_for(lambda: not self._scheduled, timeout)
            finally:
                self._waiters -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Wait for a run in progress to end (not when called from the strand itself)."""
        with contextlib.suppress(RuntimeError):
            self.wait_idle(timeout)
