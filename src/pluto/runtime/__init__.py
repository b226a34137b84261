"""The module runtime: Module base class, clocks, configuration, launcher, supervisor, profiles and MOM."""

from pluto.runtime.clock import Clock, SimClock, WallClock
from pluto.runtime.module import Module, ModuleParams

__all__ = ["Clock", "Module", "ModuleParams", "SimClock", "WallClock"]
