"""Several robots in one simulated world, in lock-step, for scenario tests: a :class:`~pluto.sim.fleet.Fleet` (every
robot in this process), or :class:`~pluto.sim.robot_processes.RobotProcesses` (a process per robot), with the time
held while the test adds its modules, scripts and collectors to the robots it names (see :mod:`tests.scenarios.stack`
for the one-robot version and how scripts act at simulated times)."""

from __future__ import annotations

from typing import Any

import msgspec

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.config import Config
from pluto.runtime.module import Module
from pluto.runtime.profiles import Profile, load_profile, with_params, with_robots
from pluto.sim.fleet import Fleet
from pluto.sim.robot_processes import RobotProcesses
from tests.scenarios.stack import Collector, LockstepBase


class _RobotsLockstep(LockstepBase):
    """What the two share: a bus per robot (:meth:`bus`), collectors on them, and the lock-step's members named
    ``<robot>/<module>``, asked of the first robot's simulator."""

    def bus(self, robot: str) -> Bus:
        raise NotImplementedError

    def collect(self, robot: str, name: str, cls: type[msgs.Message]) -> Collector:
        """Every value of one robot's interface ``name`` (made before :meth:`resume`: from before the time runs)."""
        return self._keep(Collector(self.bus(robot), name, cls))

    def members(self) -> set[str]:
        """The modules the simulator waits for at each tick, as ``<robot>/<module>``."""
        runner: Any = self._runner()  # a Fleet or RobotProcesses: both name their robots
        assert runner is not None, self._not_started
        state: dict[str, Any] = self.bus(runner.names[0]).call("sim/lockstep", None, dict, timeout=5.0)
        return set(state["members"])

    def _member(self, module: Module[Any]) -> str:
        return f"{module.bus.robot}/{module.module_name}"


class FleetLockstep(_RobotsLockstep):
    """A profile run for several robots in lock-step (as fast as the modules go), with the test's modules and
    collectors; everything is stopped by :meth:`close` (the one-robot :class:`~tests.scenarios.stack.Lockstep`'s
    lifecycle, :class:`~tests.scenarios.stack.LockstepBase`, with a robot named where it matters)."""

    _not_started = "start the fleet first"

    def __init__(self) -> None:
        super().__init__()
        self.fleet: Fleet | None = None

    def start(self, profile: Profile, robots: int, *, seed: int = 0, rate: float | str = "max", **sim: Any) -> Fleet:
        """Start ``profile`` for ``robots`` robots of its world (``sim`` parameters replaced), the time held at 0."""
        profile = with_params(profile, "sim", lockstep=True, rate=rate, seed=seed, **sim)
        self.fleet = Fleet(profile, Config(), robots=robots)
        self.fleet.start(resume=False)
        return self.fleet

    def bus(self, robot: str) -> Bus:
        assert self.fleet is not None, self._not_started
        return self.fleet.buses[robot]

    def _runner(self) -> Fleet | None:
        return self.fleet

    def _stop_runner(self) -> None:
        if self.fleet is not None:
            self.fleet.shutdown()
            self.fleet = None


class ProcessesLockstep(_RobotsLockstep):
    """A profile run for several robots in lock-step, a process per robot
    (:class:`~pluto.sim.robot_processes.RobotProcesses`); the test's modules, scripts and collectors run in this
    process, on a bus per robot."""

    _not_started = "start the robots first"

    def __init__(self) -> None:
        super().__init__()
        self.processes: RobotProcesses | None = None
        self.buses: dict[str, Bus] = {}

    def start(
        self, profile: str, robots: int, *, seed: int = 0, rate: float | str = "max", **sim: Any
    ) -> RobotProcesses:
        """Start profile ``profile`` (a name or a ``.toml`` path) for ``robots`` robots of its world (``sim``
        parameters replaced), a process each, the time held at 0."""
        overrides = {"sim": {"lockstep": True, "rate": rate, "seed": seed, **sim}}
        config = Config()
        self.processes = RobotProcesses(
            with_robots(load_profile(profile, overrides), robots), config, overrides=overrides
        )
        self.processes.start(resume=False)
        for name in self.processes.names:
            self.buses[name] = Bus(msgspec.structs.replace(config.bus, robot=name))
        return self.processes

    def bus(self, robot: str) -> Bus:
        assert self.processes is not None, self._not_started
        return self.buses[robot]

    def _runner(self) -> RobotProcesses | None:
        return self.processes

    def _stop_runner(self) -> None:
        if self.processes is not None:
            self.processes.shutdown()
            self.processes = None
        for bus in self.buses.values():
            bus.close()
        self.buses = {}
