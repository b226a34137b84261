"""The inertial unit server on a Crossbow DMU/VG unit, interchangeable with the simulated one.

Writes what :class:`~pluto.hardware.dmu.module.SimDmuModule` writes: ``DMU/Raw`` (the unit's newest packet with z
up, x forward, y left: pitch φ, roll ψ, rates, accelerations) and ``DMU/State`` (low-pass filtered rates and
accelerations, the heading θ integrated from the vertical rate, stamped one filter delay earlier), from the same
filter (:class:`~pluto.hardware.dmu.filter.DmuFilter`). It also writes the link on ``dmu/status`` at every step:
data = [s since the unit last answered], element = [link up 1/0, reconnects, bytes dropped (garbage and packets
with a bad checksum)].

Run it with ``pluto run dmu --driver crossbow --port /dev/ttyUSB0`` (``pluto dmu-emulate`` serves an emulated unit on
``socket://127.0.0.1:8102``), or in a profile with ``driver = "crossbow"`` under ``[modules.dmu]``.
"""

# Strategy: a thin shell around CrossbowDriver (principle 1): the driver owns the port, the handshake, the
# reconnections and the filter, which runs on every packet as it arrives (the heading must integrate every packet,
# not one per step of the module). The step writes the newest packet and its state once; stamps are the module
# clock's time at which the packet's bytes were read (the driver's arrival time carried over to the module clock),
# not the time of the step. While the link is down nothing is written on DMU/*: a stale value must not look fresh;
# dmu/status says why. The driver connects in on_configure, so a missing unit fails the start with one clear line.

from __future__ import annotations

import time
from typing import Annotated, Literal

from pluto import msgs, names
from pluto.hardware.device_module import DeviceModule
from pluto.runtime.module import ModuleParams
from pluto.runtime.ranges import Baud, Rate, between

from .codec import DmuScale
from .driver import CrossbowDriver

__all__ = ["DMU_STATUS", "CrossbowDmu", "CrossbowDmuParams"]

DMU_STATUS = names.DMU_STATUS
"""The link to the unit (FVectorState): data = [s since it last answered], element = [up 1/0, reconnects,
bytes dropped]."""


class CrossbowDmuParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: where the unit is: a serial device, a pty path or ``socket://host:port`` (an emulator).
    baud: the unit's baud rate.
    mode: ``continuous`` (the unit streams) or ``polled`` (one packet asked for at a time).
    poll_hz: packets asked for per second in polled mode.
    measurement: ``angle`` (pitch and roll too) or ``scaled`` (rates and accelerations only).
    rate_range: the unit's full-scale rate, °/s.  g_range: its full-scale acceleration, g.
    time_constant: of the state's low-pass filter, s (also the delay of its stamp).
    link_timeout: s without a packet after which the link is taken as lost.
    """

    rate_hz: Rate = 20.0
    port: str = "socket://127.0.0.1:8102"
    baud: Baud = 38400
    mode: Literal["continuous", "polled"] = "continuous"
    poll_hz: Rate = 50.0
    measurement: Literal["angle", "scaled"] = "angle"
    rate_range: Annotated[float, between(0.0, 2000.0, open_low=True)] = 100.0
    g_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 2.0
    time_constant: Annotated[float, between(0.0, 100.0, open_low=True)] = 0.1
    link_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.port:
            raise ValueError("port must name a serial device, a pty or a socket:// URL")


class CrossbowDmu(DeviceModule[CrossbowDmuParams]):
    """The inertial unit server on a Crossbow DMU/VG (or anything speaking its protocol)."""

    name = "dmu"
    description = "Crossbow DMU/VG inertial unit: raw data and filtered state with integrated heading"
    provides = (names.DMU_RAW, names.DMU_STATE, DMU_STATUS)
    requires = ()
    Params = CrossbowDmuParams

    driver: CrossbowDriver

    def on_configure(self) -> None:
        p = self.params
        driver = CrossbowDriver(
            p.port,
            baud=p.baud,
            mode=p.mode,
            poll_hz=p.poll_hz,
            measurement=p.measurement,
            scale=DmuScale(p.rate_range, p.g_range),
            time_constant=p.time_constant,
            link_timeout=p.link_timeout,
        )
        self.open_driver(driver)  # raises CrossbowError with the reason: the module does not start
        self.raw = self.create_publisher(names.DMU_RAW)
        self.state_out = self.create_publisher(names.DMU_STATE)
        self.status = self.create_publisher(DMU_STATUS)
        self._last = 0

    def step(self, now: float) -> None:
        driver = self.driver
        up = driver.connected
        self.write_status(now, up, driver.statistics().garbage_bytes)
        sample = driver.sample
        if sample is None or sample.number == self._last or not up:
            return
        self._last = sample.number
        # the packet's arrival (driver clock: time.monotonic) on the module clock
        offset = now - time.monotonic()
        raw, state = sample.raw, sample.state
        self.raw.write(
            msgs.DmuRaw(
                stamp=raw.stamp + offset,
                phi=raw.phi,
                psi=raw.psi,
                rates=list(raw.rates),
                accelerations=list(raw.accelerations),
            )
        )
        self.state_out.write(
            msgs.DmuState(
                stamp=state.stamp + offset,
                theta=state.theta,
                phi=raw.phi,
                psi=raw.psi,
                rates=list(state.rates),
                accelerations=list(state.accelerations),
            )
        )
