"""The wrist server of a pan/tilt unit of two PowerCube modules on CAN, interchangeable with the simulated wrist.

Reads ``Wrist/Command`` and writes ``Wrist/State``, ActuatorStates whose position, velocity and force (acceleration)
vectors are (pan, tilt) in rad, rad/s and rad/s², as the simulated wrist (module.py) does: an axis moves only when
its commanded velocity and acceleration are both > 0; targets are held within the limits; tilt is positive
downward. It also writes the link on ``wrist/status`` at every step: data = [s since the unit last answered],
element = [link up 1/0, reconnects, malformed frames].

Run it with ``pluto run wrist --driver can --interface socketcan --channel can0`` on a robot (any python-can
interface: ``--interface slcan --channel /dev/ttyACM0 --bitrate 500000``, ...), or against the emulator on a virtual
bus with ``--interface virtual --channel NAME`` in the emulator's process; in a profile, ``driver = "can"`` under
``[modules.wrist]``.
"""

# Strategy: the module is a thin shell around CanWristDriver (principle 1 of docs/design.md): the driver owns the bus,
# the polling, the link and its timers; this shell forwards each new command once and publishes each new reading.
# The driver connects in on_configure, so that a unit that does not answer fails the start with one clear line. A
# reading is stamped with the module clock's time at which its last value arrived (the driver's arrival time carried
# over to the module clock), not with the time of the step. The acceleration published (force) is the change of the
# reported velocity between two readings over their stamps, as the modules report no acceleration. While the link is
# down nothing is published on Wrist/State (a stale value must not look fresh) and a command is dropped, never
# replayed; wrist/status says whether the link is up. When the module stops, the driver halts both modules: a
# wrist must not go on toward a target after its server went.

from __future__ import annotations

import logging
import math
import time
from typing import Annotated

from pluto import msgs, names
from pluto.hardware.wrist.sim import WristParams
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Angle, Rate, TurnAccel, TurnRate, between

from .can_driver import CanWristDriver, CanWristLinkError, WristReading
from .emulate import PowerCubeEmulator

__all__ = ["WRIST_STATUS", "CanWristModule", "CanWristParams"]

log = logging.getLogger("pluto.wrist.can")

WRIST_STATUS = names.WRIST_STATUS
"""The link to the unit: data = [s since it last answered]; element = [link up 1/0, reconnects, malformed frames]."""

_DEFAULT = WristParams()


class CanWristParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    interface: the python-can interface (socketcan, virtual, slcan, pcan, kvaser, ...).
    channel: its channel (can0, a virtual channel's name, a serial port for slcan).
    bitrate: bit/s; 0 leaves the interface's own.
    pan_id, tilt_id: the modules' CAN addresses (1..31).
    pan_min, pan_max, tilt_min, tilt_max: position limits, rad (narrowed to the modules' own at connection).
    max_speed, max_accel: the largest velocity (rad/s) and acceleration (rad/s²) passed on, both axes.
    link_timeout: s of silence after which the link is down.
    command_timeout: s without a new command after which a module still moving is halted.
    connect_timeout: s the modules have to answer at start.
    emulate: run an emulated unit (emulate.py) on the same interface and channel in this process, to try the
        module without hardware (``--interface virtual --channel NAME --emulate true``).
    """

    rate_hz: Rate = 20.0
    interface: str = "socketcan"
    channel: str = "can0"
    bitrate: Annotated[int, between(0, 10_000_000)] = 0
    pan_id: Annotated[int, between(1, 31)] = 1
    tilt_id: Annotated[int, between(1, 31)] = 2
    pan_min: Angle = _DEFAULT.pan_limits[0]
    pan_max: Angle = _DEFAULT.pan_limits[1]
    tilt_min: Angle = _DEFAULT.tilt_limits[0]
    tilt_max: Angle = _DEFAULT.tilt_limits[1]
    max_speed: TurnRate = _DEFAULT.max_speed[0]
    max_accel: TurnAccel = _DEFAULT.max_accel[0]
    link_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 0.5
    command_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 5.0
    connect_timeout: Annotated[float, between(0.0, 60.0, open_low=True)] = 2.0
    emulate: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.interface or not self.channel:
            raise ValueError("interface and channel must name a python-can interface and its channel")
        if self.pan_id == self.tilt_id:
            raise ValueError(f"pan_id and tilt_id must be different addresses, got {self.pan_id} for both")
        for low, high, axis in ((self.pan_min, self.pan_max, "pan"), (self.tilt_min, self.tilt_max, "tilt")):
            if not low < high:
                raise ValueError(f"{axis} limits must have min < max, got {low}, {high}")


class CanWristModule(Module[CanWristParams]):
    """The wrist on CAN (two PowerCube modules)."""

    name = "wrist"
    description = "pan/tilt wrist of two PowerCube modules on CAN (python-can)"
    provides = (names.WRIST_STATE, WRIST_STATUS)
    Params = CanWristParams

    driver: CanWristDriver

    def on_configure(self) -> None:
        p = self.params
        limits = WristParams(
            pan_limits=(p.pan_min, p.pan_max),
            tilt_limits=(p.tilt_min, p.tilt_max),
            max_speed=(p.max_speed, p.max_speed),
            max_accel=(p.max_accel, p.max_accel),
        )
        self.emulator: PowerCubeEmulator | None = None
        if p.emulate:
            self.emulator = PowerCubeEmulator(
                p.channel, interface=p.interface, pan_id=p.pan_id, tilt_id=p.tilt_id, params=limits
            )
            self.emulator.start()
        self.driver = CanWristDriver(
            p.interface,
            p.channel,
            bitrate=p.bitrate or None,
            pan_id=p.pan_id,
            tilt_id=p.tilt_id,
            limits=limits,
            poll_period=1.0 / p.rate_hz,
            link_timeout=p.link_timeout,
            command_timeout=p.command_timeout,
            clock=time.monotonic,
        )
        try:
            self.driver.connect(p.connect_timeout)  # raises CanWristConnectError with the reason: no start
        except Exception:
            if self.emulator is not None:
                self.emulator.stop()
            raise
        self.commands = self.create_reader(names.WRIST_COMMAND)
        self.state_out = self.create_publisher(names.WRIST_STATE)
        self.status = self.create_publisher(WRIST_STATUS)
        self._seen = self.commands.received
        self._last_seq = 0
        self._previous: WristReading | None = None
        self.dropped_commands = 0
        self._last_drop_log = -math.inf

    def step(self, now: float) -> None:
        driver = self.driver
        command = self.commands.read()
        if command is not None and self.commands.received != self._seen:
            self._seen = self.commands.received
            try:
                driver.command(command.position, command.velocity, command.force)
            except CanWristLinkError as err:
                self._dropped(err)
        self.publish_status(now)
        reading = driver.reading
        if reading is None or reading.seq == self._last_seq or not driver.connected:
            return
        self._last_seq = reading.seq
        stamp = now - max(0.0, time.monotonic() - reading.stamp)
        acceleration = [0.0, 0.0]
        previous, self._previous = self._previous, reading
        if previous is not None and reading.stamp > previous.stamp:
            dt = reading.stamp - previous.stamp
            acceleration = [(reading.velocity[i] - previous.velocity[i]) / dt for i in range(2)]
        self.state_out.write(
            msgs.ActuatorState(
                stamp=stamp, position=list(reading.position), velocity=list(reading.velocity), force=acceleration
            )
        )

    def publish_status(self, now: float) -> None:
        """Write ``wrist/status``: s since the unit last answered; link up, reconnects, malformed frames."""
        driver = self.driver
        stats = driver.statistics()
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=[driver.silence()],
                element=[1 if driver.connected else 0, stats.reconnects, stats.codec.malformed],
            )
        )

    def _dropped(self, err: Exception) -> None:
        # The command is dropped, not kept for later: a live commander sends a new one after the outage.
        self.dropped_commands += 1
        now = time.monotonic()
        if now - self._last_drop_log >= 5.0:
            self._last_drop_log = now
            log.warning("wrist command dropped (%d so far): %s", self.dropped_commands, err)

    def on_shutdown(self) -> None:
        driver = getattr(self, "driver", None)
        if driver is not None:
            driver.close()
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
