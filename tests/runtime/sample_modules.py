"""Small modules used by the runtime and CLI tests, run as ``tests.runtime.sample_modules:ClassName``.

Subprocesses find them through PYTHONPATH (set to the repository root by ``tests/runtime/conftest.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from pluto import msgs
from pluto.bus import StateWriter
from pluto.runtime.module import Module, ModuleParams

SLOW = "Test/Slow"
CONSUMER = "Test/Consumer"
FLAKY = "Test/Flaky"


class SlowProviderParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    delay: seconds spent in on_configure before the module publishes anything.
    """

    delay: float = 1.0


class SlowProvider(Module):
    """Takes ``delay`` seconds to configure (a sensor that initialises), then writes a counter on Test/Slow."""

    name = "slow-provider"
    description = "test: slow to start, then writes Test/Slow"
    provides = (SLOW,)
    Params: ClassVar[type[ModuleParams]] = SlowProviderParams

    def on_configure(self) -> None:
        assert isinstance(self.params, SlowProviderParams)
        time.sleep(self.params.delay)
        self.seq = 0
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(SLOW, msgs.FVectorState)

    def step(self, now: float) -> None:
        self.seq += 1
        self.out.write(msgs.FVectorState(stamp=now, element=[self.seq]))


class GatedProviderParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    gate: a file; the module configures until it exists.
    """

    gate: str = ""


class GatedProvider(Module):
    """Configures until the file ``gate`` exists (a first run compiling its kernels, at the test's pace), then
    writes a counter on Test/Slow."""

    name = "gated-provider"
    description = "test: configures until a file exists, then writes Test/Slow"
    provides = (SLOW,)
    Params: ClassVar[type[ModuleParams]] = GatedProviderParams

    def on_configure(self) -> None:
        assert isinstance(self.params, GatedProviderParams)
        print("waiting for the gate", flush=True)
        while not Path(self.params.gate).exists():
            time.sleep(0.01)  # a file has no event to wait on
        self.seq = 0
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(SLOW, msgs.FVectorState)

    def step(self, now: float) -> None:
        self.seq += 1
        self.out.write(msgs.FVectorState(stamp=now, element=[self.seq]))


class LateConsumer(Module):
    """Requires slow-provider; writes on Test/Consumer element=[1] if Test/Slow had a value when it configured."""

    name = "late-consumer"
    description = "test: reports whether its requirement published before it started"
    provides = (CONSUMER,)
    requires = ("slow-provider",)

    def on_configure(self) -> None:
        reader = self.create_reader(SLOW, msgs.FVectorState)
        self.saw = 1 if reader.read() is not None else 0
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(CONSUMER, msgs.FVectorState)

    def step(self, now: float) -> None:
        self.out.write(msgs.FVectorState(stamp=now, element=[self.saw]))


class FlakyStep(Module):
    """Every other step raises; the others write the step number on Test/Flaky."""

    name = "flaky"
    provides = (FLAKY,)

    def on_configure(self) -> None:
        self.calls = 0
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(FLAKY, msgs.FVectorState)

    def step(self, now: float) -> None:
        self.calls += 1
        if self.calls % 2 == 0:
            raise RuntimeError(f"flaky step {self.calls}")
        self.out.write(msgs.FVectorState(stamp=now, element=[self.calls]))


class CrashOnConfigure(Module):
    """Fails while configuring, as a module whose device is missing."""

    name = "crasher"
    provides = ("Test/Never",)

    def on_configure(self) -> None:
        raise RuntimeError("boom: the test device is missing")


class CycleA(Module):
    name = "cycle-a"
    requires = ("cycle-b",)


class CycleB(Module):
    name = "cycle-b"
    requires = ("cycle-a",)
