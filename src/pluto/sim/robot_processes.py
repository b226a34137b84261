"""Several robots in one simulated world, one process per robot: ``pluto up PROFILE --robots N``.

Each robot runs in a process of its own (``pluto up PROFILE --robots N --only <robot>``: a
:class:`~pluto.sim.fleet.Fleet` of that one robot), so a robot whose process crashes takes no other robot with it,
and the robots' modules use every core of the machine. The first robot's process leads: its simulator's lock-step
ticks every robot's modules, those of the other processes through Zenoh (each of their simulators mirrors the
leader's ``Clock`` on its robot's). So the run is the same as with every robot in one process (``--one-process``):
the same seed gives the same poses, however the processes are scheduled.

:class:`RobotProcesses` starts the processes, the leader's first, each after the one before it has every module
publishing; holds the time until all are up; watches them: a robot process that ends is started again, and its
modules go on from the state they saved (:mod:`pluto.runtime.persist`), its simulated body where it was; one that
crashes too often is given up, and the others go on. While the leader's process is away the time stands still (no
tick comes); started again, its simulator holds the time until its own modules are all up again, then goes on with
the same run from the time it saved, and the others' modules with it. Stopping holds the time first, then ends the
processes, the leader's last.

Robots of one world may also run on several machines: ``pluto up fleet --robots 3 --only pluto-2`` on one,
``--only pluto-1,pluto-3`` on another, all on one Zenoh network; start the first robot's first.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from pluto.bus import Bus
from pluto.errors import BusError, LaunchError
from pluto.runtime.config import Config
from pluto.runtime.launcher import (
    bus_environment,
    quote_log,
    runtime_dir,
    spawn,
    terminate_all,
    toml_value,
    wait_publishing,
)
from pluto.runtime.persist import RESUME_ENV, SESSION_ENV, new_session
from pluto.runtime.profiles import Profile
from pluto.sim.fleet import fleet_robots

__all__ = ["RobotProcesses"]

log = logging.getLogger("pluto.fleet")

MAX_RESTARTS = 3
"""Restarts of one robot's process within :data:`RESTART_WINDOW` s before it is given up."""
RESTART_WINDOW = 60.0


@dataclass
class _Robot:
    name: str
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    crashes: list[float] = field(default_factory=list)
    given_up: bool = False


class RobotProcesses:
    """Runs a profile for several robots of its simulator's world, a process per robot.

    Args:
        profile: what each robot runs (a profile with the ``sim`` module); it is given to each process by its name
            (or ``.toml`` path) and ``overrides``.
        config: the configuration (its bus: the robots' names come from its robot name).
        robots: how many (the profile's ``robots`` if None).
        overrides: parameters changed for this run, by module (as ``--set`` gives them).
        startup_timeout: s each module has to start publishing.
        progress: told ``(name, number, total)`` as each module starts (``<robot>/<module>``, from 1).
        notice: told a line now and then while a slow module starts.

    Raises:
        LaunchError: the profile has no ``sim`` module.
        MapError: its world places fewer robots than asked for.
    """

    def __init__(
        self,
        profile: Profile,
        config: Config,
        *,
        robots: int | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        startup_timeout: float = 20.0,
        progress: Callable[[str, int, int], None] | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.profile = profile
        self.config = config
        self.count = robots or profile.robots
        self.overrides = {module: dict(params) for module, params in (overrides or {}).items()}
        self.startup_timeout = startup_timeout
        self.progress = progress
        self.notice = notice
        self.names = [str(r.name) for r in fleet_robots(profile, self.count, config.bus.robot)]
        """The robots, in order (the first one's process leads the lock-step)."""
        self.robots = {name: _Robot(name) for name in self.names}
        self.session = new_session()
        self.log_dir = runtime_dir(config.bus.robot)
        self._bus: Bus | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    # -- start --------------------------------------------------------------------------------------------------

    def command(self, robot: str) -> list[str]:
        """The command line of ``robot``'s process."""
        source = str(self.profile.path) if self.profile.path else self.profile.name
        cmd = [sys.executable, "-m", "pluto", "up", source, "--robots", str(self.count)]
        # the time is held until every robot is up (resume)
        cmd += ["--only", robot, "--one-process", "--paused", "--timeout", f"{self.startup_timeout:g}"]
        if self.config.path:
            cmd += ["--config", str(self.config.path)]
        for module, params in self.overrides.items():
            for key, value in params.items():
                cmd += ["--set", f"{module}.{key}={toml_value(value)}"]
        return cmd

    def log_path(self, robot: str) -> Path:
        """Where ``robot``'s process writes its output."""
        return self.log_dir / f"robot-{robot}.log"

    @property
    def bus(self) -> Bus:
        """A bus of the first robot (the leader), to hold and let go the time."""
        if self._bus is None:
            self._bus = Bus(msgspec.structs.replace(self.config.bus, robot=self.names[0]))
        return self._bus

    def start(self, resume: bool = True) -> None:
        """Start every robot's process, the leader's first, each once the one before has every module publishing;
        then let the time run (unless ``resume`` is False: call :meth:`resume`).

        Raises:
            LaunchError: a robot's process failed to start (every process started is stopped again).
        """
        total, number = len(self.names) * len(self.profile.entries), 0
        try:
            for name in self.names:
                robot = self.robots[name]
                self._spawn(robot)
                for entry in self._wait_up(robot):
                    number += 1
                    if self.progress is not None:
                        self.progress(f"{name}/{entry.name}", number, total)
            if resume:
                self.resume()
        except BaseException:
            self.shutdown()
            raise

    def _wait_up(self, robot: _Robot) -> Iterator[Any]:
        """Wait until each module of ``robot``'s process publishes, in the profile's order; yields each entry as its
        wait begins (for progress, or to stop waiting)."""
        with Bus(msgspec.structs.replace(self.config.bus, robot=robot.name), share=self.bus) as bus:
            for entry in self.profile.entries:
                yield entry
                self._wait(bus, robot, entry)

    def _wait(self, bus: Bus, robot: _Robot, entry: Any) -> None:
        try:
            wait_publishing(
                bus,
                entry.spec.module,
                self.startup_timeout,
                name=entry.name,
                process=robot.process,
                params=entry.spec.params,
                held=True,
                notice=self.notice,
                log_path=self.log_path(robot.name),
            )
        except LaunchError as err:
            raise LaunchError(f"{robot.name}: {err}; {quote_log(self.log_path(robot.name), 8)}") from None

    def _spawn(self, robot: _Robot) -> None:
        env = {
            **bus_environment(self.config.bus),
            SESSION_ENV: self.session,
            RESUME_ENV: "1" if robot.restarts else "0",
        }
        robot.process = process = spawn(self.command(robot.name), self.log_path(robot.name), with_parent=True, env=env)
        threading.Thread(target=self._watch, args=(robot, process), daemon=True, name=f"watch-{robot.name}").start()

    # -- time ---------------------------------------------------------------------------------------------------

    def resume(self) -> None:
        """Let the time run (held while the robots start)."""
        self.bus.call("sim/resume", timeout=5.0)

    def pause(self) -> None:
        """Hold the time."""
        self.bus.call("sim/pause", timeout=5.0)

    # -- watch --------------------------------------------------------------------------------------------------

    def _watch(self, robot: _Robot, process: subprocess.Popen[bytes]) -> None:
        """Start ``robot``'s process again when it ends by itself (given up after too many crashes)."""
        code = process.wait()
        with self._lock:
            if self._stopping.is_set() or process is not robot.process:
                return
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            now = time.monotonic()
            robot.crashes = [t for t in robot.crashes if now - t < RESTART_WINDOW] + [now]
            if len(robot.crashes) > MAX_RESTARTS:
                robot.given_up = True
                log.error(
                    "the process of %s %s; it ended %d times within %g s, giving it up (%s)",
                    robot.name,
                    how,
                    len(robot.crashes),
                    RESTART_WINDOW,
                    self.log_path(robot.name),
                )
                return
            log.warning("the process of %s %s; starting it again (%s)", robot.name, how, self.log_path(robot.name))
            robot.restarts += 1
            try:
                self._spawn(robot)
            except OSError as err:
                robot.given_up = True
                log.error("cannot start the process of %s again: %s", robot.name, err)
                return
        if robot.name == self.names[0]:
            self._resume_when_up(robot)

    def _resume_when_up(self, robot: _Robot) -> None:
        """The leader's process was started again: its simulator holds the time while its modules start (the others
        stalled since it died); let the time go on once every one of them publishes again."""
        try:
            for _entry in self._wait_up(robot):
                if self._stopping.is_set():
                    return
            if not self._stopping.is_set():
                self.resume()
                log.warning("%s is back: the time goes on", robot.name)
        except (LaunchError, BusError) as err:  # the process died again (its watcher starts it again) or is stopping
            log.error("%s did not come back: %s", robot.name, err)

    def status(self) -> dict[str, str]:
        """Each robot's process: running (its pid), or given up."""
        out = {}
        for name, robot in self.robots.items():
            process = robot.process
            if robot.given_up:
                out[name] = "given up (crashed too often)"
            elif process is not None and process.poll() is None:
                restarts = f", restarted {robot.restarts} times" if robot.restarts else ""
                out[name] = f"running (pid {process.pid}{restarts})"
            else:
                out[name] = "not running"
        return out

    # -- stop ---------------------------------------------------------------------------------------------------

    def shutdown(self, timeout: float = 10.0) -> None:
        """Hold the time, end the robots' processes (the leader's last) and close the bus (idempotent)."""
        with self._lock:
            self._stopping.set()
        if self._bus is not None:
            with contextlib.suppress(BusError):  # the leader is gone: nothing ticks
                self.pause()
        # the others side by side, then the leader, whose lock-step they take part in
        for names in (self.names[1:], self.names[:1]):
            processes = [p for p in (self.robots[n].process for n in names) if p is not None and p.poll() is None]
            terminate_all([p.pid for p in processes], timeout)
            for process in processes:
                process.wait()
        if self._bus is not None:
            self._bus.close()
            self._bus = None

    def __enter__(self) -> RobotProcesses:
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()
