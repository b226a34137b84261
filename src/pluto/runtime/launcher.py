"""Starting and stopping modules as daemons (the original's ``xxx_server`` scripts and ``xxx_server -k``).

A daemon is ``python -m pluto run MODULE`` in a session of its own, with its output in ``<module>.log`` and its pid
in ``<module>.pid`` under the runtime directory (``PLUTO_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/pluto``, else
``~/.cache/pluto/run``), one subdirectory per robot. Starting returns once the module is alive on the bus, so the
next command can rely on it; that, and profiles started in dependency order, replace the original's advice to start
the low-level servers first and check by hand that they send data.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pluto.bus import Bus, BusConfig, BusTimeout
from pluto.bus.lockstep import MEMBER_KEY
from pluto.errors import LaunchError
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
        cmd += ["-p", f"{key}={_toml_value(value)}"]
    return cmd


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


PARENT_ENV = "PLUTO_PARENT_PID"
"""Set in a module process that must end with the process that started it (see :func:`end_with_parent`)."""


def bus_environment(cfg: BusConfig) -> dict[str, str]:
    """The ``PLUTO_*`` environment variables that put a child process on the bus ``cfg`` describes.

    A module started by another process joins its starter's bus (robot, router, rendezvous, discovery), whether the
    starter took those settings from its command line, its environment or its configuration file. The rest of the
    ``[bus]`` table, and what each process listens on, the child reads from the configuration file as usual.
    """
    return {
        "PLUTO_ROBOT": cfg.robot,
        "PLUTO_CONNECT": ",".join(cfg.connect),  # empty: none, or the file's
        # A router's children are not routers themselves (they would want its endpoints): they choose as usual.
        "PLUTO_MODE": "auto" if cfg.mode == "router" else cfg.mode,
        "PLUTO_RENDEZVOUS": cfg.rendezvous,  # empty: no local rendezvous
        "PLUTO_MULTICAST": "1" if cfg.multicast else "0",
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
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=variables,
        )


def end_with_parent() -> None:
    """In a process started with ``spawn(..., with_parent=True)``: stop (as on SIGTERM) when the parent ends, so a
    supervisor that is killed leaves no modules running. A watcher thread checks the parent twice a second."""
    parent = os.environ.pop(PARENT_ENV, "")
    if not parent.isdigit():
        return
    pid = int(parent)

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(0.5)  # nothing signals a parent's end portably; polling the parent id is cheap
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log file (for error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_publishing(
    bus: Bus,
    module: str,
    timeout: float,
    name: str | None = None,
    process: subprocess.Popen[bytes] | None = None,
    params: dict[str, object] | None = None,
    held: bool = False,
) -> None:
    """Wait until a module is alive and every interface it provides has a value.

    Args:
        module: installed module name or ``package.module:Class``.
        name: its bus name, if not the class's.
        process: if given, fail at once when this process exits.
        params: its parameters (a ``driver`` among them picks the class, and so what it provides).
        held: a lock-stepped simulator holds the time: a module that follows simulated time is ready when it has
            joined the lock-step (its first values may need time to pass).

    Raises:
        LaunchError: the process exited, or the module did not publish within ``timeout`` seconds.
    """
    cls = load_module_class(module, params)
    bus_name = name or cls.name or cls.__name__.lower()
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        if process is not None and process.poll() is not None:
            raise LaunchError(f"{bus_name} exited with status {process.returncode} while starting")
        left = deadline - time.monotonic()
        if left <= 0:
            raise LaunchError(f"{bus_name} did not start publishing within {timeout:g} s")
        return min(left, 0.25)

    while True:
        try:
            bus.wait_for_module(bus_name, remaining())
            break
        except BusTimeout:
            continue
    if held and (params or {}).get("use_sim_time", cls.Params().use_sim_time):
        while True:
            try:
                bus.wait_for_token(f"{MEMBER_KEY}/{bus_name}", remaining())
                return
            except BusTimeout:
                continue
    for interface in cls.provides:
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
) -> int:
    """Start a module as a daemon and wait until it publishes; return its pid.

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
            raise LaunchError(f"{bus_name} is already running (pid {pid}); `pluto stop {bus_name}` first")
        if bus_name in bus.live_modules(timeout=0.5):
            raise LaunchError(f"a module named {bus_name} is already alive on robot {bus.robot}")
        process = spawn(module_command(module, name, params, config), log_file, env=bus_environment(bus.config))
        pid_file.write_text(f"{process.pid}\n")
    try:
        wait_publishing(bus, module, timeout, name=name, process=process, params=params)
    except LaunchError as err:
        if process.poll() is None:
            process.kill()
            process.wait()
        pid_file.unlink(missing_ok=True)
        raise LaunchError(f"{err}; end of {log_file}:\n{tail(log_file)}") from None
    return process.pid


def terminate(pid: int, timeout: float = 5.0) -> bool:
    """SIGTERM a process, then SIGKILL it if it is still there after ``timeout``; True if it had to be killed."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def stop_daemon(robot: str, name: str, timeout: float = 5.0) -> int:
    """Stop a daemon by name; return its pid.

    Raises:
        LaunchError: no daemon of that name is running for this robot.
    """
    pid_file = runtime_dir(robot) / f"{name}.pid"
    pid = read_pid(pid_file)
    if pid is None:
        running = ", ".join(running_daemons(robot)) or "none"
        raise LaunchError(f"{name} is not running as a daemon of robot {robot} (running: {running})")
    terminate(pid, timeout)
    pid_file.unlink(missing_ok=True)
    return pid
