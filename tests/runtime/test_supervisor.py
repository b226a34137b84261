"""The supervisor behind `pluto up`: dependency order, restarts of crashed modules, giving up, shutdown."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.errors import LaunchError
from pluto.runtime import launcher
from pluto.runtime.config import Config
from pluto.runtime.profiles import Profile, parse_profile
from pluto.runtime.supervisor import Supervisor
from tests.helpers import wait_until
from tests.runtime.sample_modules import CONSUMER, HANGING, SLOW

SAMPLES = "tests.runtime.sample_modules"

PAIR = {
    "modules": {
        # Listed first on purpose: the order must come from `requires`.
        "late-consumer": {"module": f"{SAMPLES}:LateConsumer", "rate_hz": 20.0},
        "slow-provider": {"module": f"{SAMPLES}:SlowProvider", "delay": 1.0, "rate_hz": 20.0},
    }
}


def profile_of(data: dict[str, Any], name: str = "test") -> Profile:
    return parse_profile(name, data, f"{name} profile")


class Running:
    """A supervisor whose run() loop is on a thread; stopped and shut down by the fixture."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.supervisor: Supervisor | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(
        self, profile: Profile, *, one_process: bool = False, run: bool = False, startup_timeout: float = 15.0
    ) -> Supervisor:
        self.supervisor = Supervisor(
            self.bus, profile, Config(), one_process=one_process, startup_timeout=startup_timeout
        )
        self.supervisor.start()
        if run:
            self.thread = threading.Thread(target=self.supervisor.run, args=(self.stop,), daemon=True)
            self.thread.start()
        return self.supervisor

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
            assert not self.thread.is_alive(), "Supervisor.run did not return after stop was set"
        if self.supervisor is not None:
            self.supervisor.shutdown()


@pytest.fixture
def running(bus: Bus) -> Iterator[Running]:
    holder = Running(bus)
    try:
        yield holder
    finally:
        holder.close()


def child_pid(supervisor: Supervisor, name: str) -> int | None:
    process = supervisor.children[name].process
    return None if process is None or process.poll() is not None else process.pid


def mom_pid(bus: Bus, name: str) -> int | None:
    """The pid the module ``name`` reports over MOM, or None if it does not answer."""
    try:
        return bus.call(f"mom/{name}", reply_type=msgs.ModuleInfo, timeout=0.5).pid
    except BusTimeout:
        return None


def test_a_consumer_starts_after_its_slow_provider_publishes(bus: Bus, running: Running) -> None:
    supervisor = running.start(profile_of(PAIR))
    assert [e.name for e in supervisor.profile.entries] == ["slow-provider", "late-consumer"]
    seen = bus.create_reader(CONSUMER, msgs.FVectorState).wait_for_value(5.0)
    assert seen.element == [1], "late-consumer started before slow-provider had written Test/Slow"
    pids = {child_pid(supervisor, "slow-provider"), child_pid(supervisor, "late-consumer")}
    assert None not in pids
    assert os.getpid() not in pids
    assert len(pids) == 2
    assert set(bus.live_modules()) >= {"slow-provider", "late-consumer"}
    assert supervisor.status()["slow-provider"].startswith("running (pid")


def test_one_process_also_starts_in_dependency_order(bus: Bus, make_bus: Any, running: Running) -> None:
    supervisor = running.start(profile_of(PAIR), one_process=True)
    assert [m.module_name for m in supervisor.modules] == ["slow-provider", "late-consumer"]
    watcher = make_bus()
    seen = watcher.create_reader(CONSUMER, msgs.FVectorState).wait_for_value(5.0)
    assert seen.element == [1]
    assert watcher.call("mom/late-consumer", reply_type=msgs.ModuleInfo).pid == os.getpid()
    assert supervisor.status() == {"slow-provider": "running (in process)", "late-consumer": "running (in process)"}
    supervisor.shutdown()
    wait_until(lambda: not {"slow-provider", "late-consumer"} & set(watcher.live_modules()), timeout=2.0)


RESTARTING = {
    "restart": {"max_restarts": 2, "window": 60.0, "backoff": 0.05, "backoff_max": 0.1},
    "modules": {"heartbeat": {"rate_hz": 20.0}},
}


def test_a_killed_module_is_restarted(bus: Bus, running: Running) -> None:
    supervisor = running.start(profile_of(RESTARTING), run=True)
    first = child_pid(supervisor, "heartbeat")
    assert first is not None
    assert mom_pid(bus, "heartbeat") == first

    os.kill(first, signal.SIGKILL)
    wait_until(lambda: (pid := child_pid(supervisor, "heartbeat")) is not None and pid != first, timeout=30.0)
    second = child_pid(supervisor, "heartbeat")
    assert second is not None
    wait_until(lambda: mom_pid(bus, "heartbeat") == second, timeout=30.0)
    beat = bus.create_reader("Heartbeat", msgs.Heartbeat).wait_for_update(timeout=2.0)
    assert beat.source == "heartbeat"
    assert supervisor.children["heartbeat"].restarts == 1
    assert launcher.running_daemons(bus.robot) == {"heartbeat": second}
    assert not launcher.pid_alive(first)


def test_a_module_that_exits_cleanly_is_not_restarted(bus: Bus, running: Running) -> None:
    supervisor = running.start(profile_of(RESTARTING), run=True)
    pid = child_pid(supervisor, "heartbeat")
    assert pid is not None
    os.kill(pid, signal.SIGTERM)  # what `pluto stop` does: the module stops cleanly, status 0
    wait_until(lambda: supervisor.status()["heartbeat"] == "stopped", timeout=30.0)
    process = supervisor.children["heartbeat"].process
    assert process is not None
    assert process.returncode == 0
    wait_until(lambda: "heartbeat" not in bus.live_modules(), timeout=2.0)
    # The back-off is 0.05 s: a restart would be visible well within this bounded wait.
    with pytest.raises(BusTimeout):
        bus.wait_for_module("heartbeat", timeout=0.5)
    assert supervisor.status()["heartbeat"] == "stopped"
    assert supervisor.children["heartbeat"].restarts == 0


def test_it_gives_up_after_max_restarts_within_the_window(bus: Bus, running: Running) -> None:
    supervisor = running.start(profile_of(RESTARTING), run=True)
    pids = []
    for _crash in range(3):  # max_restarts = 2: the third crash within the window is one too many
        wait_until(lambda: (pid := child_pid(supervisor, "heartbeat")) is not None and pid not in pids, timeout=30.0)
        pid = child_pid(supervisor, "heartbeat")
        assert pid is not None
        wait_until(lambda pid=pid: mom_pid(bus, "heartbeat") == pid, timeout=30.0)
        pids.append(pid)
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: supervisor.status()["heartbeat"] == "failed", timeout=30.0)
    assert supervisor.children["heartbeat"].restarts == 2
    wait_until(lambda: "heartbeat" not in bus.live_modules(), timeout=10.0)
    # not started again: no new process, and nothing answers for the module (the bus's news of a killed process's
    # token can come late on a busy machine, so its answer, not its token, is what tells)
    assert child_pid(supervisor, "heartbeat") is None
    assert mom_pid(bus, "heartbeat") is None
    assert supervisor.status()["heartbeat"] == "failed"


def test_restarts_off_leaves_a_crashed_module_stopped(bus: Bus, running: Running) -> None:
    data = {"restart": {"backoff": 0.05}, "modules": {"heartbeat": {"restart": False}}}
    supervisor = running.start(profile_of(data), run=True)
    pid = child_pid(supervisor, "heartbeat")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: supervisor.status()["heartbeat"] == "stopped", timeout=30.0)
    # The killed process's token lingers until the bus notices its link closed; then it must not come back.
    bus.wait_for_module("heartbeat", timeout=10.0, alive=False)
    with pytest.raises(BusTimeout):
        bus.wait_for_module("heartbeat", timeout=0.5)
    assert supervisor.children["heartbeat"].restarts == 0


def test_shutdown_stops_every_child(bus: Bus, running: Running) -> None:
    supervisor = running.start(profile_of({"modules": {"heartbeat": {}, "heartbeat-monitor": {}}}), run=True)
    pids = [child_pid(supervisor, name) for name in ("heartbeat", "heartbeat-monitor")]
    assert None not in pids
    assert set(launcher.running_daemons(bus.robot)) == {"heartbeat", "heartbeat-monitor"}
    running.stop.set()
    assert running.thread is not None
    running.thread.join(timeout=5)
    supervisor.shutdown()
    for pid in pids:
        assert pid is not None
        assert not launcher.pid_alive(pid)
    assert launcher.running_daemons(bus.robot) == {}
    wait_until(lambda: not {"heartbeat", "heartbeat-monitor"} & set(bus.live_modules()), timeout=2.0)
    assert set(supervisor.status().values()) == {"stopped"}
    supervisor.shutdown()  # idempotent


def test_a_module_failing_at_start_stops_the_ones_already_started(bus: Bus, running: Running) -> None:
    data = {"modules": {"heartbeat": {}, "crasher": {"module": f"{SAMPLES}:CrashOnConfigure"}}}
    profile = profile_of(data)
    with pytest.raises(LaunchError) as err:
        running.start(profile)
    assert "crasher" in str(err.value)
    assert "boom: the test device is missing" in str(err.value)
    supervisor = running.supervisor
    assert supervisor is not None
    assert launcher.running_daemons(bus.robot) == {}
    wait_until(lambda: "heartbeat" not in bus.live_modules(), timeout=2.0)


def test_a_requirement_outside_the_profile_must_be_running(bus: Bus, running: Running) -> None:
    with pytest.raises(LaunchError, match="needs heartbeat"):
        running.start(profile_of({"modules": {"heartbeat-monitor": {}}}))
    assert launcher.running_daemons(bus.robot) == {}


# -- liveness: steps, not only processes ----------------------------------------------------------------------------


def hanging_profile(params: dict[str, Any], **restart: Any) -> Profile:
    """A profile of the HangingStep sample with a quick liveness watch (``restart`` overrides its policy)."""
    policy = {"max_restarts": 3, "backoff": 0.05, "backoff_max": 0.1, "poll_period": 0.1, **restart}
    return profile_of({"restart": policy, "modules": {"hanging": {"module": f"{SAMPLES}:HangingStep", **params}}})


def steps_of(bus: Bus, name: str) -> int:
    try:
        return bus.call(f"mom/{name}", reply_type=msgs.ModuleInfo, timeout=2.0).steps
    except BusTimeout:
        return -1


def test_a_module_whose_step_hangs_is_killed_and_restarted(
    bus: Bus, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pluto.supervisor")
    reader = bus.create_reader(HANGING, msgs.FVectorState)
    supervisor = running.start(hanging_profile({"rate_hz": 20.0, "hang_at": 3}, step_timeout=0.5), run=True)
    first = child_pid(supervisor, "hanging")
    assert first is not None
    # The first instance hangs in its third step; the restarted one (resumed) does not, and writes that it resumed.
    while (value := reader.wait_for_update(timeout=60.0)).element[1] != 1:
        pass
    assert value.element[0] >= 1
    assert supervisor.children["hanging"].restarts == 1
    assert not launcher.pid_alive(first)
    assert "hanging stopped stepping: its step has run for" in caplog.text
    assert "hanging was killed for not stepping (stopped stepping: its step has run for" in caplog.text


def test_a_stopped_process_is_killed_and_restarted(
    bus: Bus, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pluto.supervisor")
    supervisor = running.start(
        profile_of({**RESTARTING, "restart": {**RESTARTING["restart"], "poll_period": 0.1, "missed_polls": 3}}),
        run=True,
    )
    first = child_pid(supervisor, "heartbeat")
    assert first is not None
    assert mom_pid(bus, "heartbeat") == first
    os.kill(first, signal.SIGSTOP)  # alive, but frozen: it steps no more and answers nothing
    try:
        wait_until(lambda: (pid := child_pid(supervisor, "heartbeat")) is not None and pid != first, timeout=60.0)
    finally:
        if launcher.pid_alive(first):
            os.kill(first, signal.SIGKILL)
    second = child_pid(supervisor, "heartbeat")
    wait_until(lambda: mom_pid(bus, "heartbeat") == second, timeout=30.0)
    beat = bus.create_reader("Heartbeat", msgs.Heartbeat).wait_for_update(timeout=10.0)
    assert beat.source == "heartbeat"
    assert supervisor.children["heartbeat"].restarts == 1
    assert "heartbeat does not answer: 3 liveness queries in a row unanswered" in caplog.text


def test_a_slow_step_that_progresses_is_left_alone(
    bus: Bus, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pluto.supervisor")
    # Each step works 0.2 s at a rate that asks for one every 0.05 s: always late, never hung.
    supervisor = running.start(
        hanging_profile({"rate_hz": 20.0, "work": 0.2}, step_timeout=5.0, due_timeout=5.0, missed_polls=50), run=True
    )
    pid = child_pid(supervisor, "hanging")
    reader = bus.create_reader(HANGING, msgs.FVectorState)
    reader.wait_for_value(timeout=10.0)
    start = reader.read()
    assert start is not None
    while reader.wait_for_update(timeout=30.0).element[0] < start.element[0] + 25:
        pass
    assert child_pid(supervisor, "hanging") == pid
    assert supervisor.children["hanging"].restarts == 0
    assert "stopped stepping" not in caplog.text and "does not answer" not in caplog.text


def test_a_hung_module_that_is_told_to_stop_is_not_restarted(bus: Bus, running: Running) -> None:
    supervisor = running.start(hanging_profile({"rate_hz": 20.0, "hang_at": 2}, step_timeout=3.0), run=True)
    pid = child_pid(supervisor, "hanging")
    assert pid is not None
    wait_until(lambda: steps_of(bus, "hanging") >= 1, timeout=30.0)
    # `pluto stop`: it stops cleanly even with its step stuck (it waits 5 s for the step, then leaves its thread),
    # and the supervisor, told by its MOM entry that it is stopping, does not take it for hung meanwhile
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: supervisor.status()["hanging"] == "stopped", timeout=30.0)
    process = supervisor.children["hanging"].process
    assert process is not None and process.returncode == 0
    assert supervisor.children["hanging"].restarts == 0


def test_a_restarted_module_that_says_it_is_starting_is_not_taken_for_hung(
    bus: Bus, running: Running, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A restarted module that configures for longer than the start-up timeout (a first run compiling its kernels)
    says so, and the liveness watch waits for it instead of killing it as silent."""
    caplog.set_level(logging.INFO, logger="pluto.supervisor")
    gate = tmp_path / "gate"
    gate.touch()
    policy = {"backoff": 0.05, "backoff_max": 0.1, "poll_period": 0.1, "missed_polls": 3}
    profile = profile_of(
        {"restart": policy, "modules": {"gated-provider": {"module": f"{SAMPLES}:GatedProvider", "gate": str(gate)}}}
    )
    supervisor = running.start(profile, run=True, startup_timeout=30.0)  # a busy machine's first start is slow
    reader = bus.create_reader(SLOW, msgs.FVectorState)
    reader.wait_for_value(timeout=30.0)
    first = child_pid(supervisor, "gated-provider")
    assert first is not None
    gate.unlink()  # the restarted process configures until the gate is back
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: (pid := child_pid(supervisor, "gated-provider")) is not None and pid != first, timeout=30.0)
    bus.wait_for_token("@starting/gated-provider", timeout=30.0)
    process = supervisor.children["gated-provider"].process
    assert process is not None
    # Once it said it is starting, what the liveness watch gives a restarted module before it polls is long over (a
    # busy machine can take seconds to start a process, so it is shortened only now: the watch reads it each poll).
    supervisor.startup_timeout = 0.5
    # The old watch judged it silent after the start-up timeout and three unanswered polls (0.8 s): it must live.
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=3.0)
    gate.touch()
    before = reader.read()
    assert before is not None
    reader.wait_for_update(timeout=30.0)
    assert supervisor.children["gated-provider"].restarts == 1
    assert "does not answer" not in caplog.text
