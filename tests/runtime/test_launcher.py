"""Daemons in real subprocesses: start, pid and log files, refusing doubles, stop, failures at start."""

from __future__ import annotations

import os
import subprocess
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import LaunchError
from pluto.runtime import launcher
from pluto.runtime.heartbeat import HeartbeatModule
from pluto.runtime.module import STARTING_KEY
from tests.helpers import wait_until

CRASHER = "tests.runtime.sample_modules:CrashOnConfigure"


def test_start_daemon_runs_the_module_and_stop_daemon_ends_it(bus: Bus, bus_env: dict[str, str]) -> None:
    folder = Path(bus_env["PLUTO_RUNTIME_DIR"]) / bus.robot
    pid = launcher.start_daemon(bus, "heartbeat", timeout=15)
    assert pid != os.getpid()
    assert launcher.pid_alive(pid)
    assert (folder / "heartbeat.pid").read_text().strip() == str(pid)
    assert (folder / "heartbeat.log").is_file()
    assert launcher.running_daemons(bus.robot) == {"heartbeat": pid}

    # Alive and publishing, and it is that process.
    assert "heartbeat" in bus.live_modules()
    reader = bus.create_reader("Heartbeat", msgs.Heartbeat)
    assert reader.wait_for_update(timeout=2.0).source == "heartbeat"
    assert bus.call("mom/heartbeat", reply_type=msgs.ModuleInfo).pid == pid

    with pytest.raises(LaunchError, match="already running"):
        launcher.start_daemon(bus, "heartbeat", timeout=15)
    assert launcher.running_daemons(bus.robot) == {"heartbeat": pid}

    assert launcher.stop_daemon(bus.robot, "heartbeat") == pid
    assert not launcher.pid_alive(pid)
    assert not (folder / "heartbeat.pid").exists()
    wait_until(lambda: "heartbeat" not in bus.live_modules(), timeout=10.0)
    assert launcher.running_daemons(bus.robot) == {}
    # The module logged its start (at INFO) in its log.
    assert "heartbeat started" in (folder / "heartbeat.log").read_text()


def test_stopping_a_daemon_that_is_not_running_is_an_error(bus: Bus) -> None:
    with pytest.raises(LaunchError, match="not running"):
        launcher.stop_daemon(bus.robot, "heartbeat")


def test_a_stale_pid_file_does_not_count_as_running(bus: Bus, bus_env: dict[str, str]) -> None:
    folder = launcher.runtime_dir(bus.robot)
    assert folder == Path(bus_env["PLUTO_RUNTIME_DIR"]) / bus.robot
    dead = launcher.spawn(["true"], folder / "x.log")
    dead.wait()
    (folder / "heartbeat.pid").write_text(f"{dead.pid}\n")
    assert launcher.running_daemons(bus.robot) == {}
    assert not (folder / "heartbeat.pid").exists()
    with pytest.raises(LaunchError, match="not running"):
        launcher.stop_daemon(bus.robot, "heartbeat")


def test_a_module_alive_outside_the_launcher_is_not_started_again(bus: Bus, make_bus: Callable[..., Bus]) -> None:
    module = HeartbeatModule(make_bus())
    module.start()
    bus.wait_for_module("heartbeat", timeout=10.0)
    try:
        with pytest.raises(LaunchError, match="already alive"):
            launcher.start_daemon(bus, "heartbeat", timeout=15)
        assert launcher.running_daemons(bus.robot) == {}
    finally:
        module.stop()


def test_a_module_that_crashes_at_start_reports_the_end_of_its_log(bus: Bus) -> None:
    with pytest.raises(LaunchError) as err:
        launcher.start_daemon(bus, CRASHER, timeout=15)
    text = str(err.value)
    assert "crasher" in text
    assert "exited" in text  # the launcher noticed the exit: a wait to the timeout would say it timed out
    assert "boom: the test device is missing" in text  # the end of its log
    folder = launcher.runtime_dir(bus.robot)
    assert not (folder / "crasher.pid").exists()
    assert (folder / "crasher.log").is_file()


def test_a_module_that_never_publishes_times_out(bus: Bus) -> None:
    params: dict[str, object] = {"delay": 0.0, "autostart": False}  # up, but it never steps, so never writes
    # 5 s: the process has that long to say it is starting (a busy machine's imports), then to publish once up.
    with pytest.raises(LaunchError, match=r"did not start publishing within 5 s of being up"):
        launcher.start_daemon(bus, "tests.runtime.sample_modules:SlowProvider", params=params, timeout=5.0)
    assert launcher.running_daemons(bus.robot) == {}


def test_a_process_that_neither_says_it_is_starting_nor_is_up_times_out(bus: Bus, tmp_path: Path) -> None:
    silent = launcher.spawn(["sleep", "60"], tmp_path / "silent.log")
    try:
        with pytest.raises(
            LaunchError,
            match=rf"gated-provider did not start publishing within 0\.5 s: its process \(pid {silent.pid}\) runs but "
            "has not joined the bus to say it is starting",
        ):
            launcher.wait_publishing(bus, "tests.runtime.sample_modules:GatedProvider", 0.5, process=silent)
    finally:
        silent.kill()
        silent.wait()


def test_module_command_passes_parameters_as_toml() -> None:
    cmd = launcher.module_command(
        "heartbeat", "hb", {"rate_hz": 2.5, "autostart": False, "label": 'a "b"'}, "/etc/pluto.toml"
    )
    assert cmd[1:5] == ["-m", "pluto", "run", "heartbeat"]
    assert cmd[5:] == [
        "--name",
        "hb",
        "--config",
        "/etc/pluto.toml",
        "-p",
        "rate_hz=2.5",
        "-p",
        "autostart=false",
        "-p",
        'label="a \\"b\\""',
    ]


@pytest.mark.parametrize(
    "value",
    [
        True,
        -3,
        0.1,
        1e-300,
        float("inf"),
        "",
        'a "quoted" \\ back\nslash\ttab\x00nul\x7fdel é',
        [1, "x", [2.5]],
        {"laser_range_std": 0.02, "a key with spaces": "v", "nested": {"k": [True]}},
    ],
)
def test_a_parameter_written_as_toml_reads_back_the_same(value: object) -> None:
    assert tomllib.loads(f"v = {launcher.toml_value(value)}")["v"] == value


def test_a_spawned_module_process_gets_one_thread_per_numerical_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a user's own setting is kept
    shown = tmp_path / "env.txt"
    command = ["sh", "-c", f'echo "$OPENBLAS_NUM_THREADS $OMP_NUM_THREADS $MKL_NUM_THREADS" > {shown}']
    assert launcher.spawn(command, tmp_path / "x.log").wait(timeout=30) == 0
    assert shown.read_text().split() == ["1", "3", "1"]


GATED = "tests.runtime.sample_modules:GatedProvider"


def _start_gated(bus: Bus, gate: Path) -> subprocess.Popen[bytes]:
    """A gated provider's process, once it says it is starting (its configuration waits for ``gate``)."""
    process = launcher.spawn(
        launcher.module_command(GATED, params={"gate": str(gate)}),
        launcher.runtime_dir(bus.robot) / "gated-provider.log",
        env=launcher.bus_environment(bus.config),
    )
    bus.wait_for_token(f"{STARTING_KEY}/gated-provider", timeout=60.0)
    return process


def test_a_module_that_says_it_is_starting_is_waited_for_beyond_the_timeout(bus: Bus, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    process = _start_gated(bus, gate)
    notices: list[str] = []
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            launcher.wait_publishing(
                bus,
                GATED,
                0.2,
                process=process,
                notice=notices.append,
                log_path=launcher.runtime_dir(bus.robot) / "gated-provider.log",
            )
            outcome.append(None)
        except BaseException as err:
            outcome.append(err)

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        waiter.join(timeout=1.5)  # well past its 0.2 s: a waiter that gave up has ended by now
        assert outcome == [], outcome
        assert waiter.is_alive()
    finally:
        gate.touch()
        waiter.join(timeout=60.0)
        process.terminate()
        process.wait()
    assert outcome == [None]
    assert notices, "the wait beyond the timeout is told"
    assert notices[0].startswith("gated-provider is still starting after ")
    assert notices[0].endswith(": waiting for the gate")  # the last line of its log


def test_a_module_still_starting_at_the_limit_fails(bus: Bus, tmp_path: Path) -> None:
    process = _start_gated(bus, tmp_path / "never")
    try:
        with pytest.raises(LaunchError, match=r"gated-provider was still starting after 1\.5 s"):
            launcher.wait_publishing(bus, GATED, 0.2, process=process, starting_limit=1.5)
    finally:
        process.terminate()
        process.wait()


def test_a_module_that_ends_while_it_says_it_is_starting_fails_at_once(bus: Bus, tmp_path: Path) -> None:
    process = _start_gated(bus, tmp_path / "never")
    process.kill()
    process.wait()
    with pytest.raises(LaunchError, match="gated-provider exited with status -9 while starting"):
        launcher.wait_publishing(bus, GATED, 0.2, process=process, starting_limit=600.0)


def test_a_failed_start_quotes_only_this_run_s_lines_of_the_log(bus: Bus) -> None:
    log = launcher.runtime_dir(bus.robot) / "crasher.log"
    log.write_text("an earlier run's line\n" * 10)
    with pytest.raises(LaunchError) as err:
        launcher.start_daemon(bus, CRASHER, timeout=15)
    assert "boom: the test device is missing" in str(err.value)
    assert "an earlier run's line" not in str(err.value)


def test_tail_reads_the_last_section_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    for word in ("first", "second"):
        assert launcher.spawn(["sh", "-c", f"echo {word} 1; echo {word} 2"], log).wait(timeout=30) == 0
    assert launcher.tail(log) == "second 1\nsecond 2"
    assert launcher.last_line(log) == "second 2"
    assert log.read_text().count(launcher.SECTION_MARK) == 2
    plain = tmp_path / "plain.log"  # a log that spawn did not write
    plain.write_text("a\nb\nc\n")
    assert launcher.tail(plain, 2) == "b\nc"


def test_a_failed_start_whose_run_printed_nothing_says_so_and_quotes_no_earlier_run(bus: Bus) -> None:
    log = launcher.runtime_dir(bus.robot) / "exits-silently.log"
    log.write_text("an earlier run's line\n" * 10)
    with pytest.raises(LaunchError) as err:
        launcher.start_daemon(bus, "tests.runtime.sample_modules:ExitsSilently", timeout=15)
    text = str(err.value)
    assert text.startswith("exits-silently exited with status 3 while starting; ")
    assert text.endswith(f"nothing in {log} from this run (its process has printed no line)")
    assert "an earlier run's line" not in text


def test_the_starter_tells_each_new_line_of_a_starting_module_s_log(
    bus: Bus, make_bus: Callable[..., Bus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "NOTICE_PERIOD", 1000.0)  # a new line is told as it comes, not at the next period
    log = tmp_path / "gated-provider.log"
    log.write_text(f"an earlier run's line\n{launcher.SECTION_MARK} now: pluto run gated-provider\n")
    module_bus = make_bus()  # the module's process, as the starter sees it: it says it is starting
    token = module_bus.declare_token(f"{STARTING_KEY}/gated-provider")
    notices: list[str] = []
    said = threading.Event()

    def notice(text: str) -> None:
        notices.append(text)
        said.set()

    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            launcher.wait_publishing(bus, GATED, 0.3, notice=notice, log_path=log, starting_limit=60.0)
        except BaseException as err:
            outcome.append(err)

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        for number in (1, 2):
            assert said.wait(timeout=30.0), notices
            said.clear()
            line = f"compiling numba kernel {number} of 2: features.extract_lines"
            with open(log, "a") as out:
                out.write(f"2026-11-29 08:19:06,647 pluto.gated-provider INFO: {line}\n")
            wait_until(lambda line=line: any(n.endswith(f": {line}") for n in notices), timeout=30.0)
    finally:
        module_bus.release(token)  # it stops saying so, and is not up: the wait fails after its timeout
        waiter.join(timeout=60.0)
    # the first notice before the module's first line: this run's section has none yet
    assert notices[0].startswith("gated-provider is still starting after ") and "earlier" not in notices[0]
    assert notices[0].endswith(" s")
    told = [n.split(": ", 1)[1] for n in notices[1:]]
    assert told == [f"compiling numba kernel {n} of 2: features.extract_lines" for n in (1, 2)]
    [error] = outcome
    assert "it had said it was starting, then stopped saying so without being up" in str(error)


def test_a_module_a_profile_supervises_is_not_stopped_or_started_again_by_hand(bus: Bus, tmp_path: Path) -> None:
    # This process stands in for `pluto up heartbeat`: its pid file is the profile's, and it is the module's parent.
    folder = launcher.runtime_dir(bus.robot)
    (folder / "profile-heartbeat.pid").write_text(f"{os.getpid()}\n")
    module = launcher.spawn(["sleep", "60"], tmp_path / "heartbeat.log")
    (folder / "heartbeat.pid").write_text(f"{module.pid}\n")
    try:
        assert launcher.supervising_profile(bus.robot, module.pid) == ("heartbeat", os.getpid())
        with pytest.raises(LaunchError, match=r"runs in profile heartbeat, whose supervisor .* `pluto down heartbeat`"):
            launcher.stop_daemon(bus.robot, "heartbeat")
        assert module.poll() is None  # left running
        with pytest.raises(LaunchError, match=r"already running .* in profile heartbeat.* `pluto down heartbeat`"):
            launcher.start_daemon(bus, "heartbeat", timeout=5.0)
        (folder / "profile-heartbeat.pid").unlink()  # no supervisor: a daemon as any other
        assert launcher.supervising_profile(bus.robot, module.pid) is None
        assert launcher.stop_daemon(bus.robot, "heartbeat") == module.pid
    finally:
        module.kill()
        module.wait()
