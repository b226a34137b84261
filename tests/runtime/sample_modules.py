"""Small modules used by the runtime and CLI tests, run as ``tests.runtime.sample_modules:ClassName``.

Subprocesses find them through PYTHONPATH (set to the repository root by ``tests/runtime/conftest.py``).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Annotated, ClassVar

import msgspec

from pluto import msgs
from pluto.bus import StateWriter
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.persist import RESUME_ENV

SLOW = "Test/Slow"
CONSUMER = "Test/Consumer"
FLAKY = "Test/Flaky"
HANGING = "Test/Hanging"


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


class HangingStepParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    hang_at: the step (counted from 1) that never returns; 0 for none.
    work: seconds of work each step does.
    """

    hang_at: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 0
    work: Annotated[float, msgspec.Meta(ge=0.0, le=60.0)] = 0.0


class HangingStep(Module):
    """Writes its step count on Test/Hanging; each step works ``work`` s, and step ``hang_at`` of a first start
    (not of a restart after a crash: ``PLUTO_RESUME=1``) waits for an event nobody sets, as a step stuck on a device
    that stopped answering."""

    name = "hanging"
    provides = (HANGING,)
    Params: ClassVar[type[ModuleParams]] = HangingStepParams

    def on_configure(self) -> None:
        self.count = 0
        self.never = threading.Event()
        self.resumed = os.environ.get(RESUME_ENV) == "1"
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(HANGING, msgs.FVectorState)

    def step(self, now: float) -> None:
        assert isinstance(self.params, HangingStepParams)
        self.count += 1
        if self.params.work:
            time.sleep(self.params.work)  # the step's work: a slow computation
        if self.count == self.params.hang_at and not self.resumed:
            self.never.wait()
        self.out.write(msgs.FVectorState(stamp=now, element=[self.count, 1 if self.resumed else 0]))


class ExitsSilently(Module):
    """Ends its process as it configures, before printing a line (a crash that leaves nothing in its log)."""

    name = "exits-silently"
    description = "test: ends its process with status 3 as it configures, printing nothing"

    def on_configure(self) -> None:
        os._exit(3)
