"""A heartbeat and its monitor: the smallest useful pair of modules, to check that the bus works end to end.

``heartbeat`` writes a counter on ``Heartbeat``; ``heartbeat-monitor`` requires it, measures the rate and the age
of the beats it receives and writes them on ``Heartbeat/Monitor``.
"""

from __future__ import annotations

import time

from pluto import msgs, names
from pluto.bus import StateReader, StateWriter
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.proxy import Proxy
from pluto.runtime.ranges import Timeout


class HeartbeatModule(Module[ModuleParams]):
    """Writes a counter on ``Heartbeat`` at ``rate_hz``."""

    name = "heartbeat"
    description = "writes a counter on Heartbeat (a check of the bus)"
    provides = (names.HEARTBEAT,)
    dynamic_params = ("rate_hz",)  # the step keeps no copy of it

    def on_configure(self) -> None:
        self.seq = 0
        self.out: StateWriter[msgs.Heartbeat] = self.create_publisher(names.HEARTBEAT)

    def step(self, now: float) -> None:
        self.seq += 1
        self.out.write(msgs.Heartbeat(stamp=now, seq=self.seq, source=self.module_name))


class HeartbeatMonitorParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    stale_after: seconds without a beat after which the heartbeat counts as lost.
    """

    stale_after: Timeout = 1.0


class HeartbeatMonitor(Module[HeartbeatMonitorParams]):
    """Watches ``Heartbeat``; writes ``Heartbeat/Monitor``: data = [rate Hz, age s], element = [beats, lost]."""

    name = "heartbeat-monitor"
    description = "measures the rate and age of Heartbeat"
    provides = (names.HEARTBEAT_MONITOR,)
    requires = ("heartbeat",)
    Params = HeartbeatMonitorParams

    def on_configure(self) -> None:
        self.beats: StateReader[msgs.Heartbeat] = self.create_reader(names.HEARTBEAT)
        self.out: StateWriter[msgs.FVectorState] = self.create_publisher(names.HEARTBEAT_MONITOR)

    def step(self, now: float) -> None:
        age = self.beats.age
        lost = age is None or age > self.params.stale_after
        self.out.write(
            msgs.FVectorState(
                stamp=now,
                data=[self.beats.meter.current_rate(time.time()), -1.0 if age is None else age],
                element=[self.beats.received, int(lost)],
            )
        )


class HeartbeatProxy(Proxy):
    """Client of the heartbeat module: interface 0 is ``Heartbeat``."""

    module = "heartbeat"
    interfaces = (names.HEARTBEAT,)

    def beat(self) -> msgs.Heartbeat | None:
        """The newest beat."""
        value: msgs.Heartbeat | None = self.get(0)
        return value
