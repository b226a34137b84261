"""Several robots in one simulated world, in lock-step, for scenario tests: a :class:`~pluto.sim.fleet.Fleet` with the
time held while the test adds its modules, scripts and collectors to the robots it names (see
:mod:`tests.scenarios.stack` for the one-robot version and how scripts act at simulated times)."""

from __future__ import annotations

from typing import Any

from pluto import msgs
from pluto.bus import Bus
from pluto.runtime.config import Config
from pluto.runtime.module import Module
from pluto.runtime.profiles import Profile, with_params
from pluto.sim.fleet import Fleet
from tests.scenarios.stack import Collector, LockstepBase


class FleetLockstep(LockstepBase):
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

    def collect(self, robot: str, name: str, cls: type[msgs.Message]) -> Collector:
        """Every value of one robot's interface ``name`` (made before :meth:`resume`: from before the time runs)."""
        return self._keep(Collector(self.bus(robot), name, cls))

    def members(self) -> set[str]:
        """The modules the simulator waits for at each tick, as ``<robot>/<module>``."""
        assert self.fleet is not None
        state: dict[str, Any] = self.fleet.buses[self.fleet.names[0]].call("sim/lockstep", None, dict, timeout=5.0)
        return set(state["members"])

    def _member(self, module: Module[Any]) -> str:
        return f"{module.bus.robot}/{module.module_name}"

    def _runner(self) -> Fleet | None:
        return self.fleet

    def _stop_runner(self) -> None:
        if self.fleet is not None:
            self.fleet.shutdown()
            self.fleet = None
