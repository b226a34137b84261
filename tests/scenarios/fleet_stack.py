"""Several robots in one simulated world, in lock-step, for scenario tests: a :class:`~pluto.sim.fleet.Fleet` with the
time held while the test adds its modules, scripts and collectors to the robots it names (see
:mod:`tests.scenarios.stack` for the one-robot version and how scripts act at simulated times)."""

from __future__ import annotations

import contextlib
from typing import Any

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.config import Config
from pluto.runtime.module import Module
from pluto.runtime.profiles import Profile, with_params
from pluto.sim.fleet import Fleet
from tests.helpers import wait_until
from tests.scenarios.stack import HANG, Collector


class FleetLockstep:
    """A profile run for several robots in lock-step (as fast as the modules go), with the test's modules and
    collectors; everything is stopped by :meth:`close`."""

    def __init__(self) -> None:
        self.fleet: Fleet | None = None
        self.modules: list[Module[Any]] = []
        self.collectors: list[Collector] = []

    def start(self, profile: Profile, robots: int, *, seed: int = 0, rate: float | str = "max", **sim: Any) -> Fleet:
        """Start ``profile`` for ``robots`` robots of its world (``sim`` parameters replaced), the time held at 0."""
        profile = with_params(profile, "sim", lockstep=True, rate=rate, seed=seed, **sim)
        self.fleet = Fleet(profile, Config(), robots=robots)
        self.fleet.start(resume=False)
        return self.fleet

    def bus(self, robot: str) -> Bus:
        assert self.fleet is not None, "start the fleet first"
        return self.fleet.buses[robot]

    def add(self, module: Module[Any]) -> Any:
        """Start a module of the test on one robot's bus (the bus it was made with)."""
        self.modules.append(module)
        module.start()
        return module

    def collect(self, robot: str, name: str, cls: type[msgs.Message]) -> Collector:
        """Every value of one robot's interface ``name`` (made before :meth:`resume`: from before the time runs)."""
        collector = Collector(self.bus(robot), name, cls)
        self.collectors.append(collector)
        return collector

    def members(self) -> set[str]:
        """The modules the simulator waits for at each tick, as ``<robot>/<module>``."""
        assert self.fleet is not None
        state: dict[str, Any] = self.fleet.buses[self.fleet.names[0]].call("sim/lockstep", None, dict, timeout=5.0)
        return set(state["members"])

    def resume(self) -> None:
        """Let the time run once every module added here takes part in the lock-step."""
        assert self.fleet is not None
        wanted = {f"{m.bus.robot}/{m.module_name}" for m in self.modules if m.params.use_sim_time}
        wait_until(lambda: wanted <= self.members(), timeout=HANG, message=f"{sorted(wanted)} join the lock-step")
        self.fleet.resume()

    def close(self) -> None:
        for module in reversed(self.modules):
            with contextlib.suppress(Exception):
                module.stop()
        self.modules = []
        for collector in self.collectors:
            collector.close()
        self.collectors = []
        if self.fleet is not None:
            self.fleet.shutdown()
            self.fleet = None

    def __enter__(self) -> FleetLockstep:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
