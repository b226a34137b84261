"""Starting and stopping modules as daemons (the original's ``xxx_server`` scripts and ``-k``: docs/design.md).

A daemon is ``python -m pluto run MODULE`` in a session of its own, with its output in ``<module>.log`` and its pid
in ``<module>.pid`` under the runtime directory (``PLUTO_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/pluto``, else
``~/.cache/pluto/run``), one subdirectory per robot. Starting returns once the module is alive on the bus, so the
next command can rely on it; that, and profiles started in dependency order, replace the original's advice to start
the low-level servers first and check by hand that they send data.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pluto.bus import Bus, BusConfig, BusTimeout
from pluto.bus.lockstep import MEMBER_KEY
from pluto.errors import LaunchError
from pluto.runtime.module import STARTING_KEY, Module
from pluto.runtime.registry import load_module_class


def runtime_dir(robot: str) -> Path:
    """The directory holding this robot's pid and log files (created if needed)."""
    base = os.environ.get("PLUTO_RUNTIME_DIR")
    if base:
        root = Path(base)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        root = Path(os.environ["XDG_RUNTIME_DIR"]) / "pluto"
    else:
        root = Path.home() / ".cache" / "pluto" / "run"
    path = root / robot
    path.mkdir(parents=True, exist_ok=True)
    return path


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (and is not a zombie of ours)."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_pid(path: Path) -> int | None:
    """The pid in a pid file if that process is still running; a stale file is removed."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    if pid_alive(pid):
        return pid
    path.unlink(missing_ok=True)
    return None


def parent_pid(pid: int) -> int | None:
    """The parent of process ``pid`` (from ``/proc``), or None where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command's name, which may hold spaces and brackets
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def supervising_profile(robot: str, pid: int) -> tuple[str, int] | None:
    """The profile whose supervisor (``pluto up``) runs process ``pid`` and that supervisor's pid, or None for a
    process no running supervisor started (``pluto start``)."""
    parent = parent_pid(pid)
    for name, daemon in running_daemons(robot).items():
        if name.startswith(PROFILE_PREFIX) and daemon == parent:
            return name.removeprefix(PROFILE_PREFIX), daemon
    return None


PROFILE_PREFIX = "profile-"
"""The pid file of a running ``pluto up PROFILE`` is ``profile-PROFILE.pid``, beside its modules' own."""


def running_daemons(robot: str) -> dict[str, int]:
    """Daemons of this robot started by ``pluto start`` or ``pluto up --detach``: name -> pid."""
    found = {}
    for pid_file in sorted(runtime_dir(robot).glob("*.pid")):
        pid = read_pid(pid_file)
        if pid is not None:
            found[pid_file.stem] = pid
    return found


def module_command(
    module: str, name: str | None = None, params: dict[str, object] | None = None, config: str | None = None
) -> list[str]:
    """The command line that runs one module in the foreground."""
    cmd = [sys.executable, "-m", "pluto", "run", module]
    if name:
        cmd += ["--name", name]
    if config:
        cmd += ["--config", config]
    for key, value in (params or {}).items():
        cmd += ["-p", f"{key}={toml_value(value)}"]
    return cmd


def toml_value(value: object) -> str:
    """``value`` (a parameter's) written as a TOML value, as a command line's ``-p`` or ``--set`` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # a JSON string is a TOML basic string, escapes included, once DEL (which TOML wants escaped) is
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


PARENT_ENV = "PLUTO_PARENT_PID"
"""Set in a module process that must end with the process that started it (see :func:`end_with_parent`)."""


def bus_environment(cfg: BusConfig) -> dict[str, str]:
    """The ``PLUTO_*`` environment variables that put a child process on the bus ``cfg`` describes.

    A module started by another process joins its starter's bus (robot, router, certificate, rendezvous, discovery),
    whether the starter took those settings from its command line, its environment or its configuration file. The
    rest of the ``[bus]`` table, and what each process listens on, the child reads from the configuration file as
    usual.
    """
    return {
        "PLUTO_ROBOT": cfg.robot,
        "PLUTO_CONNECT": ",".join(cfg.connect),  # empty: none, or the file's
        # A router's children are not routers themselves (they would want its endpoints): they choose as usual.
        "PLUTO_MODE": "auto" if cfg.mode == "router" else cfg.mode,
        "PLUTO_RENDEZVOUS": cfg.rendezvous,  # empty: no local rendezvous
        "PLUTO_MULTICAST": "1" if cfg.multicast else "0",
        "PLUTO_LEASE": f"{cfg.lease:g}",
        # The machine's certificate for a secure router (empty: none, or the file's).
        "PLUTO_TLS_CA": cfg.tls.ca if cfg.tls else "",
        "PLUTO_TLS_CERT": cfg.tls.cert if cfg.tls else "",
        "PLUTO_TLS_KEY": cfg.tls.key if cfg.tls else "",
    }


ONE_THREAD_LIBRARIES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread counts of numerical libraries that :func:`spawn` sets to 1 where the environment does not set them."""


def spawn(
    cmd: Sequence[str], log_path: Path, *, with_parent: bool = False, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a command detached from the terminal's signals, its output appended to ``log_path``.

    Args:
        with_parent: the command ends when this process ends, even if it is killed (a supervisor's modules);
            without it the command outlives it (``pluto start``).
        env: environment variables to set in the command's environment, over this process's own (see
            :func:`bus_environment`).

    Numerical libraries get one thread each (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``),
    unless the environment says otherwise: a module's matrices are small, and a robot runs a process per module,
    so a pool of one thread per core in each would only fight over the cores (and make a module process's
    threads grow with the machine's cores).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    variables = {**{name: "1" for name in ONE_THREAD_LIBRARIES}, **os.environ, **(env or {})}
    if with_parent:
        variables[PARENT_ENV] = str(os.getpid())
    with open(log_path, "ab") as log_file:
        # Each run's lines start a section of their own: what :func:`tail` quotes of a failed start is this run's.
        log_file.write(f"{SECTION_MARK} {time.strftime('%Y-%m-%d %H:%M:%S')}: {shlex.join(cmd)}\n".encode())
        log_file.flush()
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=variables,
        )


_parent: int | None = None


def ends_with_parent() -> bool:
    """This process ends with the process that started it (:func:`end_with_parent` found it told so)."""
    return _parent is not None


def end_with_parent() -> None:
    """In a process started with ``spawn(..., with_parent=True)``: stop (as on SIGTERM) when the parent ends, so a
    supervisor that is killed leaves no modules running. A watcher thread checks the parent twice a second."""
    global _parent
    parent = os.environ.pop(PARENT_ENV, "")
    if not parent.isdigit():
        return
    _parent = pid = int(parent)

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(0.5)  # nothing signals a parent's end portably; polling the parent id is cheap
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


SECTION_MARK = "==== pluto start"
"""Start of the line :func:`spawn` writes in a log before the command's own lines (logs are appended to)."""

TAIL_BYTES = 1 << 20
"""A log's last bytes that :func:`tail` reads (its last section, unless a run wrote more than this)."""


def tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log file's last section (the lines of the last run :func:`spawn` started), for error
    messages."""
    try:
        with open(path, "rb") as log_file:
            size = log_file.seek(0, os.SEEK_END)
            log_file.seek(max(0, size - TAIL_BYTES))
            text = log_file.read().decode(errors="replace")
    except OSError:
        return ""
    found = text.rfind(SECTION_MARK)
    if found >= 0:
        text = text[found:].partition("\n")[2]
    return "\n".join(text.splitlines()[-lines:])


def last_line(path: Path) -> str:
    """The last line of a log file's last section ("" if none)."""
    return tail(path, 1).strip()


def quote_log(path: Path, lines: int = 5) -> str:
    """What an error quotes of a module's log: the last lines of this run's section (:func:`tail`), or that this run
    has written nothing there yet (its process printed no line: still importing, say), never an earlier run's."""
    found = tail(path, lines)
    if not found.strip():
        return f"nothing in {path} from this run (its process has printed no line)"
    return f"end of {path}:\n{found}"


_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ [A-Z]+: ")


NEWS_BYTES = 8192
"""A log's last bytes :func:`log_news` reads: a starter reads it four times a second."""


def log_news(path: Path) -> str:
    """The last line of this run of a module's log, without the time and logger name logging puts before it; ""
    when this run has written none (the last line is then the one :func:`spawn` wrote before the run)."""
    try:
        with open(path, "rb") as log_file:
            size = log_file.seek(0, os.SEEK_END)
            log_file.seek(max(0, size - NEWS_BYTES))
            lines = log_file.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    line = lines[-1].strip() if lines else ""
    return "" if line.startswith(SECTION_MARK) else _LOG_PREFIX.sub("", line)


STARTING_LIMIT = 600.0
"""s a module that says it is starting may take to be up, whatever the starter's own timeout (a first run may
compile the navigation kernels: about a minute on a busy machine; a driver may search a device's baud rates)."""

NOTICE_AFTER = 3.0
"""s a module may say it is starting before its starter tells what it does (the last line of its log)."""

NOTICE_PERIOD = 10.0
"""s between two notices of a module that is still starting and whose log has no new line."""


def wait_publishing(
    bus: Bus,
    module: str,
    timeout: float,
    name: str | None = None,
    process: subprocess.Popen[bytes] | None = None,
    params: dict[str, object] | None = None,
    held: bool = False,
    *,
    starting_limit: float = STARTING_LIMIT,
    notice: Callable[[str], None] | None = None,
    log_path: Path | None = None,
) -> None:
    """Wait until a module is alive and every interface it provides has a value.

    A module says it is starting (a liveliness token, ``@starting/<name>``) as soon as its process has joined the
    bus, before it imports its libraries and configures, which may take long (kernels compiled on a first run, a
    driver's handshake). While it says so it is waited for up to ``starting_limit`` s, however short ``timeout``;
    one that neither says so nor is alive within ``timeout`` s fails, as does one whose process ends (at once). Once
    alive, it has ``timeout`` s more to write its interfaces. Each failure says which of these waits it was.

    Args:
        module: installed module name or ``package.module:Class``.
        name: its bus name, if not the class's.
        process: if given, fail at once when this process exits.
        params: its parameters (a ``driver`` among them picks the class, and so what it provides).
        held: a lock-stepped simulator holds the time: a module that follows simulated time is ready when it has
            joined the lock-step (its first values may need time to pass).
        starting_limit: s a module that says it is starting has to be alive.
        notice: told what a module that says it is starting does, once it has taken :data:`NOTICE_AFTER` s (or
            ``timeout``, if shorter): the last line of ``log_path``, its log, if given (compiling numba kernel 3 of
            7, ...), each time it changes, and every :data:`NOTICE_PERIOD` s otherwise.
        log_path: the module's log.

    Raises:
        LaunchError: the process exited, or the module did not publish in time.
    """
    cls = load_module_class(module, params)
    bus_name = name or cls.name or cls.__name__.lower()
    starts = _StartWatch(bus_name, timeout, process, starting_limit, notice, log_path)
    watch = bus.watch_token(f"{STARTING_KEY}/{bus_name}", starts.on_starting)
    try:
        while True:
            _check_process(bus_name, process)
            try:
                bus.wait_for_module(bus_name, 0.25)
                break
            except BusTimeout:
                pass
            starts.check()
    finally:
        bus.release(watch)
    _wait_values(bus, cls, bus_name, timeout, process, params, held)


def _check_process(bus_name: str, process: subprocess.Popen[bytes] | None) -> None:
    """Fail at once if the module's process (when given) has ended."""
    if process is not None and process.poll() is not None:
        raise LaunchError(f"{bus_name} exited with status {process.returncode} while starting")


class _StartWatch:
    """The first wait of :func:`wait_publishing`, until the module is alive, with what its ``@starting`` token says.

    While the module says it is starting it has up to ``starting_limit`` s from the start, and a starter given a
    ``notice`` is told what it does; otherwise it has ``timeout`` s, from the start or from when it last stopped
    saying so, and the error says which of these it was (it never said so, or said so and then stopped).
    """

    def __init__(
        self,
        bus_name: str,
        timeout: float,
        process: subprocess.Popen[bytes] | None,
        starting_limit: float,
        notice: Callable[[str], None] | None,
        log_path: Path | None,
    ) -> None:
        self.bus_name = bus_name
        self.timeout = timeout
        self.process = process
        self.notice = notice
        self.log_path = log_path
        self.began = time.monotonic()
        self.deadline = self.began + timeout
        self.limit = self.began + max(timeout, starting_limit)
        self.next_notice = self.began + min(timeout, NOTICE_AFTER)
        self.told = ""  # the log's line last told
        self.starting = threading.Event()  # the module says it is starting now
        self.said = threading.Event()  # it said so at some point
        self.stopped_saying = 0.0  # when it last stopped saying so (monotonic s)

    def on_starting(self, present: bool) -> None:
        """The module's ``@starting`` token appeared (``present``) or went away (from the bus's thread)."""
        if present:
            self.starting.set()
            self.said.set()
        else:
            self.stopped_saying = time.monotonic()
            self.starting.clear()

    def check(self) -> None:
        """After a wait in which the module did not come up: fail if it has had its time, tell what it does if due.

        Raises:
            LaunchError: still starting after the starting limit, or not up within ``timeout`` s while not starting.
        """
        now = time.monotonic()
        if self.starting.is_set():
            self.deadline = max(self.deadline, now + self.timeout)  # had it stopped saying so, time from then
            if now >= self.limit:
                raise LaunchError(f"{self.bus_name} was still starting after {self.limit - self.began:g} s")
            self._tell(now)
        elif now >= max(self.deadline, self.stopped_saying + self.timeout):  # time from when it stopped saying so
            raise LaunchError(f"{self.bus_name} did not start publishing within {self.timeout:g} s: {self._why()}")

    def _tell(self, now: float) -> None:
        """Tell what the starting module does (its log's last line), once it is due and when that line changes."""
        if self.notice is None:
            return
        line = log_news(self.log_path) if self.log_path is not None else ""
        if now >= self.began + min(self.timeout, NOTICE_AFTER) and (now >= self.next_notice or line != self.told):
            self.notice(
                f"{self.bus_name} is still starting after {now - self.began:.0f} s" + (f": {line}" if line else "")
            )
            self.told, self.next_notice = line, now + NOTICE_PERIOD

    def _why(self) -> str:
        """Why a module that is not starting is not up, in words for the error."""
        if self.said.is_set():
            return "it had said it was starting, then stopped saying so without being up"
        if self.process is not None:
            return (
                f"its process (pid {self.process.pid}) runs but has not joined the bus to say it is starting "
                "(Python still starting on a busy machine? --timeout gives it longer)"
            )
        return "it has not joined the bus to say it is starting"


def _wait_values(
    bus: Bus,
    cls: type[Module[Any]],
    bus_name: str,
    timeout: float,
    process: subprocess.Popen[bytes] | None,
    params: dict[str, object] | None,
    held: bool,
) -> None:
    """The second wait of :func:`wait_publishing`: the module is alive, and has ``timeout`` s more to write a value
    on each interface it provides (or, held by a lock-stepped simulator and following its time, to join the
    lock-step)."""
    deadline = time.monotonic() + timeout

    waited = ["it has not joined the lock-step yet"]  # what it waits for now, in words for the error

    def remaining() -> float:
        _check_process(bus_name, process)
        left = deadline - time.monotonic()
        if left <= 0:
            raise LaunchError(f"{bus_name} did not start publishing within {timeout:g} s of being up: {waited[0]}")
        return min(left, 0.25)

    if held and (params or {}).get("use_sim_time", cls.Params().use_sim_time):
        while True:
            try:
                bus.wait_for_token(f"{MEMBER_KEY}/{bus_name}", remaining())
                return
            except BusTimeout:
                continue
    for interface in cls.provides:
        waited[0] = f"no value on {interface} yet"
        while True:
            try:
                bus.wait_published(interface, remaining())
                break
            except BusTimeout:
                continue


def start_daemon(
    bus: Bus,
    module: str,
    *,
    name: str | None = None,
    params: dict[str, object] | None = None,
    config: str | None = None,
    timeout: float = 15.0,
    notice: Callable[[str], None] | None = None,
) -> int:
    """Start a module as a daemon and wait until it publishes (see :func:`wait_publishing`, which ``notice`` is
    passed on to); return its pid.

    Raises:
        LaunchError: it is already running, or it failed to start (with the end of its log).
    """
    cls = load_module_class(module, params)
    bus_name = name or cls.name or cls.__name__.lower()
    folder = runtime_dir(bus.robot)
    pid_file, log_file = folder / f"{bus_name}.pid", folder / f"{bus_name}.log"
    # One starter at a time per module: checking for a running one and recording the new one is one step.
    with open(folder / f"{bus_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pid = read_pid(pid_file)
        if pid is not None:
            supervised = supervising_profile(bus.robot, pid)
            if supervised is not None:
                raise LaunchError(
                    f"{bus_name} is already running (pid {pid}) in profile {supervised[0]}, which `pluto up` keeps "
                    f"running; `pluto down {supervised[0]}` stops the profile"
                )
            raise LaunchError(f"{bus_name} is already running (pid {pid}); `pluto stop {bus_name}` first")
        if bus_name in bus.live_modules(timeout=0.5):
            raise LaunchError(f"a module named {bus_name} is already alive on robot {bus.robot}")
        process = spawn(module_command(module, name, params, config), log_file, env=bus_environment(bus.config))
        pid_file.write_text(f"{process.pid}\n")
    try:
        wait_publishing(
            bus, module, timeout, name=name, process=process, params=params, notice=notice, log_path=log_file
        )
    except LaunchError as err:
        if process.poll() is None:
            process.kill()
            process.wait()
        pid_file.unlink(missing_ok=True)
        raise LaunchError(f"{err}; {quote_log(log_file)}") from None
    return process.pid


def terminate(pid: int, timeout: float = 5.0) -> bool:
    """SIGTERM a process, then SIGKILL it if it is still there after ``timeout``; True if it had to be killed."""
    return bool(terminate_all([pid], timeout))


def terminate_all(pids: Sequence[int], timeout: float = 5.0) -> list[int]:
    """SIGTERM every process at once (in the order given), then SIGKILL those still there after ``timeout``;
    return the pids that had to be killed.

    The processes stop side by side: stopping them one after the other would add their stopping times up (a
    profile of eight modules on a busy machine took 2-3 s to go down that way).
    """
    waiting = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            waiting.append(pid)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while waiting and time.monotonic() < deadline:
        waiting = [pid for pid in waiting if pid_alive(pid)]
        if waiting:
            time.sleep(delay)  # nothing tells the end of a process that is not our child but polling
            delay = min(delay * 2, 0.05)
    killed = []
    for pid in waiting:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def stop_daemon(robot: str, name: str, timeout: float = 5.0) -> int:
    """Stop a daemon by name; return its pid.

    A module that a running ``pluto up`` supervises is not stopped: its supervisor keeps the profile as it was
    started (it would leave a module that stopped cleanly stopped, and the profile quietly short of it), so the
    message says how to stop the profile instead.

    Raises:
        LaunchError: no daemon of that name is running for this robot, or it runs in a profile.
    """
    pid_file = runtime_dir(robot) / f"{name}.pid"
    pid = read_pid(pid_file)
    if pid is None:
        running = ", ".join(running_daemons(robot)) or "none"
        raise LaunchError(f"{name} is not running as a daemon of robot {robot} (running: {running})")
    supervised = supervising_profile(robot, pid)
    if supervised is not None:
        profile, supervisor = supervised
        raise LaunchError(
            f"{name} (pid {pid}) runs in profile {profile}, whose supervisor (pid {supervisor}) keeps it running: "
            f"`pluto down {profile}` stops the profile"
        )
    terminate(pid, timeout)
    pid_file.unlink(missing_ok=True)
    return pid
