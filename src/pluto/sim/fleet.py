"""Several robots in one simulated world: one process simulates them all in one lock-step, each under its own name.

``pluto sim --robots N``, ``pluto up PROFILE --robots N`` and a profile with ``robots = N`` (the ``fleet`` profile)
run a profile that has the ``sim`` module for the first N robots the world file places (``<robots>``, see
:mod:`pluto.sim.world`): an unnamed robot is ``<robot>-<i>`` after the robot name of the command's bus (``pluto-1``,
``pluto-2``, ...).

Design:

- **One bus per robot, all on one Zenoh session** ("one device-server per robot"). A robot's modules live under its
  name (``pluto/<robot>/...``) exactly as a lone robot's do, so every module, proxy, tool and gateway works unchanged
  on any robot of the fleet (``PLUTO_ROBOT=pluto-2 pluto mom``). This process opens one :class:`~pluto.bus.Bus` per
  robot and runs that robot's modules of the profile on it, in the profile's order, robot by robot for each module.
  The buses share the first one's session (``share``): a robot's values reach the others' readers from the writer
  itself (:class:`~pluto.bus.receivers.LocalDelivery`), not through Zenoh between ten sessions, which cost each
  ``Sim/Truth`` a put to nine links and each reader a hand-over between threads.
- **One simulator per robot, one of them leading** (:mod:`pluto.sim.module`). Each robot's ``sim`` serves its
  ``Clock`` and its ``sim/world`` (with its own start and the fleet's names, starts and radii), so its devices find
  their world and place as a lone robot's do. The first robot's leads: its lock-step coordinator ticks every robot's
  bus and hears every robot's members, so **one clock covers every module of every robot**: a tick goes out only
  when all of them have finished their step, whatever robot they belong to.
- **The robots meet through the bus** (:mod:`pluto.sim.others`). Each robot's devices read the others' true poses
  (``pluto/<other>/Sim/Truth``) and see their bodies as discs: the laser and the sonar hit them, a base is blocked by
  them (bumper, stall) and counts each collision. In lock-step the frontier of a tick names keys, robot included
  (:mod:`pluto.bus.lockstep`), so a device waits for another robot's pose of the previous tick exactly as for one
  of its own robot's, and a seed gives the same run of every robot under any load.

The modules of all the robots share this process (no restarts after a crash: a profile of one robot under
``pluto up`` without ``--one-process`` is the way to crash isolation); a bench or a test builds a :class:`Fleet`
directly::

    fleet = Fleet(load_profile("fleet"), config, robots=3)
    fleet.start()            # every robot's modules, then the time runs
    ...                      # fleet.buses["pluto-1"], fleet.modules["pluto-2"]
    fleet.shutdown()
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from pluto.bus import Bus
from pluto.errors import LaunchError
from pluto.runtime.config import Config, build_params
from pluto.runtime.launcher import wait_publishing
from pluto.runtime.module import Module
from pluto.runtime.profiles import Profile, ProfileEntry
from pluto.runtime.runner import instantiate
from pluto.sim.module import SimModule, SimParams
from pluto.sim.world import RobotPlacement, load_world

__all__ = ["Fleet", "fleet_robots"]

log = logging.getLogger("pluto.fleet")


def _sim_entry(profile: Profile) -> ProfileEntry:
    for entry in profile.entries:
        if entry.name == "sim":
            return entry
    raise LaunchError(f"profile {profile.name} has no sim module: several robots need a simulated world")


def fleet_robots(profile: Profile, count: int, prefix: str) -> list[RobotPlacement]:
    """The robots a profile runs: the first ``count`` of its simulator's world, named (see :meth:`World.fleet`).

    Raises:
        LaunchError: the profile has no ``sim`` module.
        MapError: the world cannot be read, or places fewer robots.
    """
    world = load_world(str(_sim_entry(profile).spec.params.get("world", SimParams().world)))
    return world.fleet(count, prefix)


class Fleet:
    """Runs a profile for several robots of its simulator's world, in this process.

    Args:
        profile: what each robot runs; its ``sim`` module is the world's (one per robot, the first leading).
        config: the configuration (its bus settings, with each robot's name, and the modules' tables).
        robots: how many (the profile's ``robots`` if None).
        startup_timeout: s each module has to start publishing.
        progress: told ``(name, number, total)`` as each module starts (``<robot>/<module>``, from 1).
        notice: told a line now and then while a slow module starts.
        only: the robots (names) this process runs, the others running in other processes (one process per robot:
            :class:`RobotProcesses`); None: every robot. The process that runs the first robot leads the lock-step;
            start it first.

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
        startup_timeout: float = 20.0,
        progress: Callable[[str, int, int], None] | None = None,
        notice: Callable[[str], None] | None = None,
        only: Sequence[str] | None = None,
    ) -> None:
        self.profile = profile
        self.config = config
        self.startup_timeout = startup_timeout
        self.progress = progress
        self.notice = notice
        self.sim_entry = _sim_entry(profile)
        self.robots = fleet_robots(profile, robots or profile.robots, config.bus.robot)
        """The robots of the simulation, in order: names, starts and radii."""
        every = [str(r.name) for r in self.robots]
        if only is not None and (unknown := [r for r in only if r not in every]):
            raise LaunchError(f"robot {unknown[0]} is not one of the simulation's ({', '.join(every)})")
        self.names = [r for r in every if only is None or r in only]
        """The names of the robots this process runs, in order."""
        self.buses: dict[str, Bus] = {}
        """Each robot's bus, by robot name."""
        self.sims: list[SimModule] = []
        """Each robot's simulator, the leader first."""
        self.modules: dict[str, list[Module[Any]]] = {r.name or "": [] for r in self.robots}
        """Each robot's other modules, by robot name, in start order."""
        params = {**config.module_table("sim"), **self.sim_entry.spec.params}
        self.sim_params = build_params(SimParams, params, where="parameters of sim")
        if self.sim_params.lockstepped:
            # The time is held while the modules start, also in a leader started again after its process died: its
            # modules come back one by one, and one that came back late would find the time gone on without it (a
            # localization dead-reckoning over the gap, no longer certain enough for a moveto to end). Whoever
            # started the process lets the time go on once they are all up (RobotProcesses does after a restart).
            self.sim_params = msgspec.structs.replace(self.sim_params, paused=True)

    @property
    def leads(self) -> bool:
        """This process runs the first robot, whose simulator leads the lock-step."""
        return self.names[:1] == [str(self.robots[0].name)]

    @property
    def leader(self) -> SimModule | None:
        """The first robot's simulator, which runs the lock-step; None if it runs in another process."""
        return self.sims[0] if self.sims and self.leads else None

    def start(self, resume: bool = True) -> None:
        """Start every robot's simulator, then each module of the profile for every robot in turn, each after its
        robot's modules it requires publish; then let the time run.

        Args:
            resume: in lock-step, let the time run once everything is up (else call :meth:`resume`).

        Raises:
            LaunchError: a module failed to start (everything started is stopped again).
        """
        try:
            first: Bus | None = None
            for robot in self.names:
                config = msgspec.structs.replace(self.config.bus, robot=robot)
                bus = self.buses[robot] = Bus(config, share=first, deliver_locally=True)
                first = first or bus
            entries = [e for e in self.profile.entries if e.name != "sim"]
            total = len(self.robots) * (len(entries) + 1)
            number = 0
            first_robot = str(self.robots[0].name)
            remote = [str(r.name) for r in self.robots if str(r.name) not in self.names]
            for robot in self.names:
                number += 1
                self._tell(f"{robot}/sim", number, total)
                leader: SimModule | str | None = self.leader if self.leads else first_robot
                sim = SimModule(
                    self.buses[robot],
                    self.sim_params,
                    fleet=self.robots,
                    leader=leader,
                    remote=remote if leader is None else (),
                )
                sim.start()
                self.sims.append(sim)
                self._wait(robot, self.sim_entry)
            for entry in entries:
                for robot in self.names:
                    number += 1
                    self._tell(f"{robot}/{entry.name}", number, total)
                    module = instantiate(entry.spec, self.buses[robot], self.config)
                    self.modules[robot].append(module)
                    module.start()
                    self._wait(robot, entry)
            if resume:
                self.resume()
        except BaseException:
            self.shutdown()
            raise

    def _tell(self, name: str, number: int, total: int) -> None:
        if self.progress is not None:
            self.progress(name, number, total)

    def _wait(self, robot: str, entry: ProfileEntry) -> None:
        wait_publishing(
            self.buses[robot],
            entry.spec.module,
            self.startup_timeout,
            name=entry.name,
            params=entry.spec.params,
            held=self.sim_params.lockstepped,
            notice=self.notice,
        )
        log.info("%s of %s is up", entry.name, robot)

    def resume(self) -> None:
        """Let the time run (in lock-step it is held while the modules start; in the leader's process)."""
        leader = self.leader
        if leader is not None and leader.lockstep is not None:
            leader.lockstep.resume()

    def shutdown(self) -> None:
        """Hold the time, stop every module, then the simulators, and close the buses (idempotent).

        The time is held first: a tick while the robots' modules go one by one would wait for the values of
        writers already gone (each wait bounded by the lock-step's frontier timeout)."""
        leader = self.leader
        if leader is not None and leader.lockstep is not None:
            leader.lockstep.pause()
        for robot in reversed(self.names):
            for module in reversed(self.modules.get(robot, [])):
                try:
                    module.stop()
                except Exception:
                    log.exception("stopping %s of %s failed", module.module_name, robot)
            self.modules[robot] = []
        for sim in reversed(self.sims):
            try:
                sim.stop()
            except Exception:
                log.exception("stopping the simulator of %s failed", sim.bus.robot)
        self.sims = []
        for bus in reversed(list(self.buses.values())):
            with contextlib.suppress(Exception):
                bus.close()
        self.buses = {}

    def status(self) -> dict[str, str]:
        """Each robot's modules and whether they run."""
        return {
            f"{robot}/{module.module_name}": "running (in process)" if module.active else "stopped"
            for robot in self.names
            for module in self.modules.get(robot, [])
        }

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()
