"""Stopping on signals: the main thread's wait for SIGINT/SIGTERM ends even when the signal lands on another thread
or just before the wait begins. Modules run in this process say they are starting before they are imported."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from pluto.bus import Bus, BusTimeout
from pluto.errors import ConfigError
from pluto.runtime import runner
from pluto.runtime.config import Config
from pluto.runtime.module import STARTING_KEY, Module
from pluto.runtime.runner import SignalStop, stop_on_signals


def _signal_from_another_thread(signum: int, after: float) -> threading.Thread:
    def send() -> None:
        time.sleep(after)  # let the main thread block in its wait first (nothing to wait on for that)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send)
    thread.start()
    return thread


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_caught_by_another_thread_ends_the_main_threads_wait(signum: int) -> None:
    # The main thread blocks the signal, so the kernel hands it to another thread: CPython's handler then only marks
    # it, and a plain Event.wait() on the main thread would sleep through it (as it does when the signal lands just
    # before the wait begins). The wait wakes on the byte the signal wrote, and the Python handler sets the event.
    with stop_on_signals() as stop:
        assert isinstance(stop, SignalStop)
        sender = _signal_from_another_thread(signum, 0.2)  # started first: a new thread inherits the blocking
        signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
        try:
            assert stop.wait(timeout=10.0)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            sender.join()
    assert signal.getsignal(signum) is not None and signal.set_wakeup_fd(-1) == -1  # both put back


def test_set_from_another_thread_ends_the_wait_and_a_timeout_still_times_out() -> None:
    with stop_on_signals() as stop:
        assert not stop.wait(timeout=0.05)
        setter = threading.Timer(0.05, stop.set)
        setter.start()
        assert stop.wait(timeout=10.0)
        setter.join()
    stop.set()  # after the block: a plain event, its socket closed
    assert stop.wait()


def test_off_the_main_thread_the_event_is_a_plain_one() -> None:
    events: list[threading.Event] = []

    def enter() -> None:
        with stop_on_signals() as stop:
            events.append(stop)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert type(events[0]) is threading.Event


def test_an_installed_module_says_it_is_starting_before_its_classes_are_imported(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The imports (numba, scipy, a driver's libraries) take seconds on a busy machine: a starter waits for a module
    # that says it is starting, so the module says so first.
    said: list[bool] = []

    def instantiate(spec: runner.ModuleSpec, _bus: Bus, _config: Config) -> Module[Any]:
        bus.wait_for_token(f"{STARTING_KEY}/{spec.module}", timeout=30.0)  # raises BusTimeout if it was not said
        said.append(True)
        raise ConfigError("stopped before configuring")

    monkeypatch.setattr(runner, "instantiate", instantiate)
    with pytest.raises(ConfigError, match="stopped before configuring"):
        runner.run_in_process([runner.ModuleSpec("heartbeat")], Config(), threading.Event())
    assert said == [True]
    with pytest.raises(BusTimeout):  # and the token went with the failed start
        bus.wait_for_token(f"{STARTING_KEY}/heartbeat", timeout=0.5)


class _StartedWithoutToken:
    """A module whose start a signal interrupts inside a call into Zenoh: it runs, but its start ends in a SystemError
    (the signal's exception raised in a callback Zenoh ran within its call), before it holds its token."""

    module_name = "fake"

    def __init__(self, stop: threading.Event, signalled: bool) -> None:
        self._stop_event, self._signalled = stop, signalled
        self._token: Any = None
        self.stopped = False

    def start(self) -> None:
        if self._signalled:
            self._stop_event.set()  # what the signal's handler does first
        raise SystemError("error return without exception set")

    def stop(self) -> None:
        self.stopped = True


def test_a_signal_that_surfaces_as_a_system_error_in_a_modules_start_stops_it_as_an_interruption() -> None:
    stop = threading.Event()
    module = _StartedWithoutToken(stop, signalled=True)
    with pytest.raises(runner.Interrupted), runner.running([module], stop):  # type: ignore[list-item]
        pytest.fail("the block must not run")
    assert module.stopped  # it was running without its token: stopped all the same
    # without a signal, a SystemError is a fault of its own, and is not taken for a stop
    stop = threading.Event()
    module = _StartedWithoutToken(stop, signalled=False)
    with pytest.raises(SystemError), runner.running([module], stop):  # type: ignore[list-item]
        pytest.fail("the block must not run")
    assert not module.stopped
