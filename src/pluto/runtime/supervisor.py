"""The supervisor behind ``pluto up``: starts a profile in dependency order and keeps it running.

Strategy: each module starts only when the modules it requires are alive *and* have written every interface they
provide (the modules of the robot software Pluto follows, docs/design.md, raced each other during sensor initialisation;
here the order is decided, not hoped for). Modules run as separate processes by default so one crash cannot take the
others down; a module that exits with an error or is killed is restarted after a back-off that doubles at each crash, up
to a limit per time window, and continues where its crashed instance was: the child's environment says it is a restart
(``PLUTO_RESUME=1``) of which session (``PLUTO_SESSION``, new at every start, which also removes the state files an
earlier session left), and the module loads the state it saved (:mod:`pluto.runtime.persist`). A module that exits
cleanly (``pluto stop``) is left stopped.

A live process is not enough: the supervisor also watches that each module steps. It asks every module for its MOM
entry (``mom/<name>``) every ``poll_period`` s, and a module whose step has run longer than ``step_timeout`` s (a
hung step), whose next step has been due for more than ``due_timeout`` s without beginning (a stalled loop; in
lock-step a step is due only once a tick offers it, so a paused or waiting simulator stalls nobody), or that leaves
``missed_polls`` queries in a row unanswered (a stopped process) is killed (SIGKILL) and restarted like a crash, with
the reason in the log ("drive stopped stepping: its step has run for 10.2 s"). The thresholds are wall-clock seconds
of the profile's ``[restart]`` table (:class:`~pluto.runtime.profiles.RestartPolicy`). A module that is stopping is
left to exit. With ``one_process`` the modules share this
process and its bus instead (cheaper on a small computer, faster in tests); there is then nothing to restart.

A simulator in lock-step is started with its time held at 0, and let go once every module is up, so a run does not
depend on how long each module took to start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import BusError, DecodeError, LaunchError
from pluto.runtime.config import Config
from pluto.runtime.launcher import (
    bus_environment,
    module_command,
    quote_log,
    runtime_dir,
    spawn,
    terminate_all,
    wait_publishing,
)
from pluto.runtime.module import STARTING_KEY, Module
from pluto.runtime.persist import RESUME_ENV, SESSION_ENV, clear_states, new_session
from pluto.runtime.profiles import Profile, ProfileEntry, RestartPolicy
from pluto.runtime.runner import instantiate

log = logging.getLogger("pluto.supervisor")


@dataclass
class _Child:
    entry: ProfileEntry
    process: subprocess.Popen[bytes] | None = None
    crashes: list[float] = field(default_factory=list)
    restart_at: float | None = None
    given_up: bool = False
    restarts: int = 0
    hung: str | None = None
    """Why the supervisor killed the current process for not stepping, until its exit is handled."""


def stalled(name: str, info: msgs.ModuleInfo, policy: RestartPolicy) -> str | None:
    """Why module ``name``, whose MOM entry is ``info``, counts as hung under ``policy``, in words; None if it is
    stepping (or stopping, or not active and not in a step)."""
    if info.stopping:
        return None
    if info.step_running >= policy.step_timeout:
        return f"{name} stopped stepping: its step has run for {info.step_running:.1f} s"
    if info.active and info.step_overdue >= policy.due_timeout:
        return f"{name} stopped stepping: its next step has been due for {info.step_overdue:.1f} s and has not begun"
    return None


class Supervisor:
    """Runs the modules of a profile.

    Args:
        bus: the supervisor's own bus (used to watch the modules start).
        profile: what to run.
        config: the configuration file the modules read (its path is passed on to child processes).
        one_process: run the modules in this process, sharing ``bus``.
        startup_timeout: seconds each module has to start publishing, or to say it is starting (it is then waited
            for longer: see :func:`~pluto.runtime.launcher.wait_publishing`).
        progress: told ``(name, number, total)`` as each module starts (its number counts from 1), to show it.
        notice: told what a module that says it is starting does while it takes long (the last line of its log;
            see :func:`~pluto.runtime.launcher.wait_publishing`; by default it is logged).
    """

    def __init__(
        self,
        bus: Bus,
        profile: Profile,
        config: Config,
        *,
        one_process: bool = False,
        startup_timeout: float = 20.0,
        progress: Callable[[str, int, int], None] | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.bus = bus
        self.progress = progress
        self.notice = notice or log.warning
        self.profile = profile
        self.config = config
        self.one_process = one_process
        self.startup_timeout = startup_timeout
        self.held: list[str] = []
        """Lock-stepped simulators whose time is held until every module is up."""
        entries = []
        for entry in profile.entries:
            params = entry.spec.params
            if params.get("lockstep") or params.get("rate") == "max":
                self.held.append(entry.name)
                entry = replace(entry, spec=replace(entry.spec, params={**params, "paused": True}))
            entries.append(entry)
        self.profile = profile = replace(profile, entries=tuple(entries))
        self.children: dict[str, _Child] = {e.name: _Child(e) for e in profile.entries}
        self.modules: list[Module[Any]] = []
        self._exits: queue.SimpleQueue[tuple[str, subprocess.Popen[bytes]]] = queue.SimpleQueue()
        self._stopping = False
        self.log_dir = runtime_dir(bus.robot)
        self.session = new_session()
        """The id of this run of the profile: a restarted module resumes only a state saved in the same one."""

    # -- start --------------------------------------------------------------------------------------------------

    def start(self, resume: bool = True) -> None:
        """Start every module in order, each after the modules it requires publish.

        Args:
            resume: let a lock-stepped simulator's time run once all are up (else call :meth:`resume` later).

        Raises:
            LaunchError: a module failed to start (the ones already started are stopped again).
        """
        try:
            self._check_outside_requirements()
            stale = clear_states(self.bus.robot, self.children)  # a new session never resumes an old one's state
            if stale:
                log.info("removed the saved states of an earlier session: %s", ", ".join(stale))
            total = len(self.profile.entries)
            for number, entry in enumerate(self.profile.entries, 1):
                if self.progress is not None:
                    self.progress(entry.name, number, total)
                self._start_one(entry)
            if resume:
                self.resume()
        except BaseException:
            self.shutdown()
            raise

    def resume(self) -> None:
        """Let the time of the lock-stepped simulators run (they start held)."""
        for name in self.held:
            self.bus.call(f"{name}/resume", timeout=5.0)

    def _check_outside_requirements(self) -> None:
        inside = set(self.children)
        outside = {need for e in self.profile.entries for need in e.requires if need not in inside}
        if outside:
            alive = set(self.bus.live_modules())
            missing = sorted(outside - alive)
            if missing:
                raise LaunchError(
                    f"profile {self.profile.name} needs {', '.join(missing)}, which it does not start and which "
                    "is not running; start it first or add it to the profile"
                )

    def _start_one(self, entry: ProfileEntry) -> None:
        if self.one_process:
            module = instantiate(entry.spec, self.bus, self.config)
            module.start()
            self.modules.append(module)
            wait_publishing(
                self.bus,
                entry.spec.module,
                self.startup_timeout,
                name=entry.name,
                params=entry.spec.params,
                held=bool(self.held),
                notice=self.notice,
            )
        else:
            child = self.children[entry.name]
            self._spawn(child)
            assert child.process is not None
            log_file = self.log_dir / f"{entry.name}.log"
            try:
                wait_publishing(
                    self.bus,
                    entry.spec.module,
                    self.startup_timeout,
                    name=entry.name,
                    process=child.process,
                    params=entry.spec.params,
                    held=bool(self.held),
                    notice=self.notice,
                    log_path=log_file,
                )
            except LaunchError as err:
                raise LaunchError(f"{err}; {quote_log(log_file)}") from None
        log.info("%s is up", entry.name)

    def _spawn(self, child: _Child) -> None:
        spec = child.entry.spec
        config_path = str(self.config.path) if self.config.path else None
        params = spec.params
        if child.restarts and child.entry.name in self.held:
            # a restarted simulator goes on at once: from its saved run and time, or, without one, as a new run
            params = {**params, "paused": False}
        cmd = module_command(spec.module, spec.name, params, config_path)
        # The child joins the supervisor's bus, however the supervisor was told which one that is; a restart after
        # a crash continues from the state its crashed instance saved in this session (pluto.runtime.persist).
        env = {
            **bus_environment(self.bus.config),
            SESSION_ENV: self.session,
            RESUME_ENV: "1" if child.restarts else "0",
        }
        child.process = process = spawn(cmd, self.log_dir / f"{child.entry.name}.log", with_parent=True, env=env)
        (self.log_dir / f"{child.entry.name}.pid").write_text(f"{process.pid}\n")
        threading.Thread(
            target=self._wait_exit, args=(child.entry.name, process), daemon=True, name=f"wait-{child.entry.name}"
        ).start()

    def _wait_exit(self, name: str, process: subprocess.Popen[bytes]) -> None:
        process.wait()
        self._exits.put((name, process))

    # -- supervise ----------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Watch the modules until ``stop`` is set: restart crashed ones per the profile's restart policy, and kill
        (and so restart) the ones that stopped stepping."""
        policy = self.profile.restart
        watchers = [
            threading.Thread(target=self._watch, args=(child, stop), daemon=True, name=f"liveness-{name}")
            for name, child in self.children.items()
            if not self.one_process and policy.enabled and policy.liveness and child.entry.restart
        ]
        for watcher in watchers:
            watcher.start()
        try:
            self._supervise(stop)
        finally:
            stop.set()
            for watcher in watchers:
                watcher.join(timeout=5.0)

    def _supervise(self, stop: threading.Event) -> None:
        while not stop.is_set():
            timeout = 0.2
            now = time.monotonic()
            for child in self.children.values():
                if child.restart_at is not None:
                    if child.restart_at <= now:
                        self._restart(child)
                    else:
                        timeout = min(timeout, child.restart_at - now)
            try:
                name, process = self._exits.get(timeout=max(timeout, 0.01))
            except queue.Empty:
                continue
            self._on_exit(self.children[name], process)

    def _watch(self, child: _Child, stop: threading.Event) -> None:
        """Ask ``child``'s module how its steps go every ``poll_period`` s; kill it if it stopped stepping."""
        # A module that says it is starting (configuring, compiling its kernels) is not judged until it is up.
        starting = threading.Event()
        token = self.bus.watch_token(
            f"{STARTING_KEY}/{child.entry.name}", lambda present: starting.set() if present else starting.clear()
        )
        try:
            self._watch_steps(child, stop, starting)
        finally:
            self.bus.release(token)

    def _watch_steps(self, child: _Child, stop: threading.Event, starting: threading.Event) -> None:
        policy = self.profile.restart
        name = child.entry.name
        query_timeout = min(max(2.0 * policy.poll_period, 0.5), 5.0)
        watched: subprocess.Popen[bytes] | None = None
        since, missed = 0.0, 0
        answered = stopping = False
        while not stop.wait(policy.poll_period) and not self._stopping:
            process = child.process
            if process is None or process.poll() is not None or child.hung is not None:
                continue
            if process is not watched:  # a new instance: judged afresh, after it had time to start
                watched, since, missed, answered, stopping = process, time.monotonic(), 0, False, False
            if stopping:
                continue
            if starting.is_set():
                since, missed = time.monotonic(), 0
                continue
            try:
                info: msgs.ModuleInfo | None = self.bus.call(
                    f"mom/{name}", reply_type=msgs.ModuleInfo, timeout=query_timeout
                )
            except (BusError, DecodeError):
                info = None
            if process is not child.process or process.poll() is not None or self._stopping:
                continue
            if info is None or info.pid != process.pid:
                if answered or time.monotonic() - since > self.startup_timeout:
                    missed += 1
                if missed < policy.missed_polls:
                    continue
                silent = time.monotonic() - since
                reason = f"{name} does not answer: {missed} liveness queries in a row unanswered ({silent:.1f} s)"
            else:
                answered, missed = True, 0
                since = time.monotonic()
                if info.stopping:
                    stopping = True  # `pluto stop` or a shutdown: it exits by itself
                    continue
                found = stalled(name, info, policy)
                if found is None:
                    continue
                reason = found
            self._kill_hung(child, process, reason)

    def _kill_hung(self, child: _Child, process: subprocess.Popen[bytes], reason: str) -> None:
        if self._stopping or process is not child.process or process.poll() is not None:
            return
        child.hung = reason
        log.warning("%s; killing it (pid %d)", reason, process.pid)
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: its exit is handled as any other
            os.kill(process.pid, signal.SIGKILL)

    def _on_exit(self, child: _Child, process: subprocess.Popen[bytes]) -> None:
        if self._stopping or process is not child.process:
            return
        (self.log_dir / f"{child.entry.name}.pid").unlink(missing_ok=True)
        code = process.returncode
        hung, child.hung = child.hung, None
        if code == 0:
            log.info("%s exited cleanly; not restarting it", child.entry.name)
            return
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        if hung is not None:
            how = f"was killed for not stepping ({hung.removeprefix(child.entry.name + ' ')})"
        policy = self.profile.restart
        if not (policy.enabled and child.entry.restart):
            log.error("%s %s; restarts are off for it", child.entry.name, how)
            return
        now = time.monotonic()
        child.crashes = [t for t in child.crashes if now - t < policy.window] + [now]
        if len(child.crashes) > policy.max_restarts:
            child.given_up = True
            log.error(
                "%s %s; it crashed %d times within %g s, giving up",
                child.entry.name,
                how,
                len(child.crashes),
                policy.window,
            )
            return
        delay = min(policy.backoff * 2 ** (len(child.crashes) - 1), policy.backoff_max)
        child.restart_at = now + delay
        log.warning("%s %s; restarting it in %.1f s", child.entry.name, how, delay)

    def _restart(self, child: _Child) -> None:
        child.restart_at = None
        child.restarts += 1
        try:
            self._spawn(child)
        except OSError as err:
            log.error("cannot restart %s: %s", child.entry.name, err)

    # -- stop ---------------------------------------------------------------------------------------------------

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop every module, in the reverse of the start order (idempotent)."""
        self._stopping = True
        for module in reversed(self.modules):
            try:
                module.stop()
            except Exception:
                log.exception("stopping %s failed", module.module_name)
        self.modules = []
        # Every process is told at once (in the reverse of the start order) and they stop side by side: one after
        # the other, their stopping times would add up.
        processes = []
        for entry in reversed(self.profile.entries):
            child = self.children[entry.name]
            process, child.process = child.process, None
            child.restart_at = None
            if process is not None and process.poll() is None:
                processes.append(process)
        terminate_all([process.pid for process in processes], timeout)
        for process in processes:
            process.wait()
        for entry in reversed(self.profile.entries):
            (self.log_dir / f"{entry.name}.pid").unlink(missing_ok=True)

    def status(self) -> dict[str, str]:
        """Each module's state: running, restarting, stopped or failed."""
        result = {}
        for name, child in self.children.items():
            if self.one_process:
                result[name] = "running (in process)"
            elif child.given_up:
                result[name] = "failed"
            elif child.restart_at is not None:
                result[name] = "restarting"
            elif child.process is not None and child.process.poll() is None:
                result[name] = f"running (pid {child.process.pid})"
            else:
                result[name] = "stopped"
        return result


def profile_pid_file(robot: str, profile: str) -> str:
    """Where a running ``pluto up`` keeps its pid, so ``pluto down`` can find it."""
    return os.fspath(runtime_dir(robot) / f"profile-{profile}.pid")
