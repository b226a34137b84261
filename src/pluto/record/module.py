"""The ``record`` module: the recorder as a module, so a profile or ``pluto start record`` can run it in the
background (``pluto stop record`` closes the file cleanly).

Example profile entry::

    [modules.record]
    output = "runs/today.mcap"
    names = ["Sick/*", "Base/Drive/State", "DMU/*"]
    split_size = "500M"
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from pluto.errors import ConfigError
from pluto.record.recorder import Recorder
from pluto.record.units import parse_size
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Rate, Timeout, between

__all__ = ["RecordModule", "RecordParams"]


class RecordParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    output: the log file; empty: ``<robot>-<date>-<time>.mcap`` in the working folder.
    names: interfaces or globs to record; empty: all.
    exclude: interfaces or globs not to record.
    time_base: ``auto``, ``sim`` or ``wall``.
    force: overwrite an existing file.
    split_size: start a new part every this many bytes (``500M``, ``2G``; empty: never).
    split_duration: start a new part every this many log seconds (0: never).
    chunk_interval: wall seconds after which the chunk in progress is written (the most a crash loses).
    """

    rate_hz: Rate = 1.0
    output: str = ""
    names: list[str] = msgspec.field(default_factory=list)
    exclude: list[str] = msgspec.field(default_factory=list)
    time_base: str = "auto"
    force: bool = False
    split_size: str = ""
    split_duration: Annotated[float, between(0.0, 10000000.0)] = 0.0
    chunk_interval: Timeout = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.time_base not in ("auto", "sim", "wall"):
            raise ValueError(f"time_base must be auto, sim or wall, got {self.time_base!r}")
        if self.split_size:
            try:
                parse_size(self.split_size)
            except ConfigError as err:
                raise ValueError(str(err)) from None


class RecordModule(Module[RecordParams]):
    """Records interfaces of the robot to an MCAP log while it runs."""

    name = "record"
    description = "data collection: records interfaces to an MCAP log (see `pluto record`)"
    Params = RecordParams

    def on_configure(self) -> None:
        p = self.params
        output = p.output or f"{self.bus.robot}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.mcap"
        self.recorder = Recorder(
            self.bus,
            output,
            names=p.names,
            exclude=p.exclude,
            time_base=p.time_base,
            force=p.force,
            split_size=parse_size(p.split_size) if p.split_size else 0,
            split_duration=p.split_duration,
            chunk_interval=p.chunk_interval,
        )
        self.recorder.start()
        self._reported = False
        self.get_logger().info("recording to %s", output)

    def step(self, now: float) -> None:
        if self.recorder.failed.is_set() and not self._reported:
            self._reported = True
            self.get_logger().error("recording stopped: %s", self.recorder.status().error)

    def on_shutdown(self) -> None:
        status = self.recorder.stop()
        self.get_logger().info(
            "recorded %d messages, %.1f s of log, to %s", status.messages, status.duration, status.parts
        )
