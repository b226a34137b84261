"""The bus's executor: a bounded pool, strands that keep order, and waits that lend their place."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pluto.bus import Bus
from pluto.bus.executor import Executor, Strand, on_zenoh_thread
from tests.helpers import wait_until


@pytest.fixture
def executor() -> Iterator[Executor]:
    pool = Executor("test", core=1, max_workers=3, idle_timeout=0.2)
    yield pool
    pool.close()


def test_a_strand_runs_its_work_in_order_never_twice_at_once(executor: Executor) -> None:
    items: list[int] = []
    done: list[int] = []
    running = threading.Semaphore(1)
    overlaps = 0
    lock = threading.Lock()

    def drain() -> None:
        nonlocal overlaps
        if not running.acquire(blocking=False):
            overlaps += 1
            return
        try:
            while True:
                with lock:
                    if not items:
                        return
                    done.append(items.pop(0))
        finally:
            running.release()

    strand = Strand(executor, drain)
    for i in range(2000):
        with lock:
            items.append(i)
        strand.schedule()
    assert strand.wait_idle(5.0)
    assert done == list(range(2000))
    assert overlaps == 0
    assert executor.peak <= executor.max_workers


def test_workers_beyond_the_core_end_when_idle(executor: Executor) -> None:
    release = threading.Event()
    started = threading.Barrier(4)
    for _ in range(3):
        executor.submit(lambda: (started.wait(5.0), release.wait(5.0)))
    started.wait(5.0)  # three workers run at once
    assert executor.workers == 3
    release.set()
    wait_until(lambda: executor.workers == executor.core, timeout=5.0, message="idle workers end")


def test_a_chain_of_calls_deeper_than_the_pool_does_not_starve_it(make_bus: Callable[..., Bus]) -> None:
    bus = make_bus()
    depth = bus.executor.max_workers + 3

    def handler(level: int) -> int:
        # each level calls the next service of the same process from its handler, on a worker of the pool
        return level if level == depth else bus.call(f"chain/{level + 1}", level + 1, int, timeout=10.0)

    for level in range(depth + 1):
        bus.create_service(f"chain/{level}", handler, int)
    assert bus.call("chain/0", 0, int, timeout=20.0) == depth


def test_a_job_that_finds_the_pool_full_waits_for_a_worker() -> None:
    pool = Executor("full", core=1, max_workers=1)
    release = threading.Event()
    order: list[str] = []
    try:
        assert pool.submit(lambda: (release.wait(10.0), order.append("first")))
        assert pool.submit(order.append, "second")  # the one worker is busy and there is no room for another
        assert order == []
        release.set()
        wait_until(lambda: len(order) == 2, timeout=10.0, message="both jobs")
    finally:
        release.set()
        pool.close()
    assert order == ["first", "second"]
    assert pool.peak == 1


def test_a_closed_executor_takes_no_work() -> None:
    pool = Executor("closed")
    pool.close()
    assert pool.submit(print) is False
    strand = Strand(pool, lambda: None)
    strand.schedule()
    assert not strand.busy


def test_a_zenoh_thread_keeps_its_python_thread_state_from_one_callback_to_the_next(
    make_bus: Callable[..., Bus],
) -> None:
    # A thread-local value lives in the thread state: set in one callback, it is still there in the next one on the
    # same Zenoh thread only if that thread state was not dropped in between.
    bus, other = make_bus(), make_bus()
    local = threading.local()
    seen: list[tuple[int, bool]] = []  # (thread, whether the value set by an earlier callback was there)

    def on_sample(_sample: Any) -> None:
        seen.append((threading.get_ident(), hasattr(local, "mark")))
        local.mark = True

    key = bus.key_raw("test/thread-state")
    subscriber = bus.session.declare_subscriber(key, on_zenoh_thread(on_sample))
    try:
        # Puts from another session: the callbacks run on this session's Zenoh threads, not on the putting thread.
        wait_until(lambda: other.session.put(key, b"x") or len(seen) >= 10, timeout=10.0, message="10 callbacks")
    finally:
        subscriber.undeclare()
    assert threading.get_ident() not in {ident for ident, _ in seen}
    earlier: set[int] = set()
    for ident, had_mark in list(seen):
        assert had_mark == (ident in earlier)
        earlier.add(ident)


def test_a_zenoh_thread_does_not_wait_for_a_worker_to_start(
    make_bus: Callable[..., Bus], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new thread may free the last reference to a closed session, whose teardown needs Zenoh's runtime: a Zenoh
    # thread waiting for that new thread to start would hold it up. Here the worker's start is held up instead.
    gate = threading.Event()
    real_start = threading.Thread.start

    def held_start(thread: threading.Thread) -> None:
        if thread.name.startswith("pluto-exec:gated:"):
            assert gate.wait(30.0)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", held_start)
    pool = Executor("gated")  # no worker yet: the first job starts one
    ran = threading.Event()
    submitted = threading.Event()
    on_zenoh: list[bool] = []

    def on_sample(_sample: Any) -> None:
        if not submitted.is_set():
            python_thread = {t.ident: t for t in threading.enumerate()}.get(threading.get_ident())
            on_zenoh.append(python_thread is None or python_thread.name.startswith("Dummy-"))
            pool.submit(ran.set)
            submitted.set()

    bus, other = make_bus(), make_bus()
    key = bus.key_raw("test/held-start")
    subscriber = bus.session.declare_subscriber(key, on_zenoh_thread(on_sample))
    try:
        wait_until(lambda: other.session.put(key, b"x") or submitted.is_set(), timeout=10.0, message="the submit")
        assert not ran.is_set()  # the worker is still held up, yet the callback went on
    finally:
        gate.set()
        subscriber.undeclare()
    assert ran.wait(10.0)
    pool.close()
    assert on_zenoh == [True]  # the callback ran on a Zenoh thread (a thread Python did not start)
    assert not [t for t in threading.enumerate() if t.name.startswith("pluto-exec:gated:")]
