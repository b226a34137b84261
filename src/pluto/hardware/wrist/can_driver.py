"""The pan/tilt wrist on CAN: two Amtec/Schunk PowerCube modules (pan and tilt) behind any python-can interface.

    with CanWristDriver("socketcan", "can0", pan_id=1, tilt_id=2) as wrist:   # connects: both modules answer
        wrist.command([0.5, 0.2], [1.0, 1.0], [3.0, 3.0])                      # rad, rad/s, rad/s²
        reading = wrist.wait_for_reading(1.0)                                  # positions, velocities in SI
    # leaving the block sends HALT to both modules and shuts the bus down

The interface is any of python-can's (``socketcan``, ``virtual``, ``slcan``, ``pcan``, ...), with its channel and
bit rate. A command follows the wrist's rule (docs/protocols/powercube.md): an axis moves only when its velocity and
acceleration are both > 0; the target is clamped to the limits (the configured ones, narrowed to the modules' own
MIN_POS/MAX_POS), the velocity and acceleration to the unit's maxima. An axis told not to move is stopped (velocity
mode, 0 rad/s).
"""

# Strategy: the wire format is the sans-I/O codec's (powercube.py); this shell owns the bus, one reader thread and
# the timers, as the P2OS driver owns its port. The reader polls both modules every poll period (GET_EXTENDED of
# the actual position, velocity and state word), feeds what it receives to the codec and keeps the newest values.
# The link is up while both modules answered within link_timeout; it goes down when one is silent that long, or at
# once on a bus-off error frame, and comes back only when both have answered again. While it is down a command is
# refused (CanWristLinkError), never queued: a command must never be replayed after an outage. When it comes back
# the driver sends HALT to both modules, since a module may have gone on toward a target its commander has long
# given up; the next command RESETs a halted module first (HALT is latched on a PowerCube). The same HALT is sent
# when no command came for command_timeout s while a module is still moving, and at close. A bus that fails
# (python-can raises on send or receive: the interface went away) is shut down and opened again every second; the
# count of times the link came back is the 'reconnects' of the status. One lock covers the codec, the state and
# every send, so a command never interleaves with a poll; the reader does not hold it while it waits for frames.

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import can

from pluto.errors import PlutoError
from pluto.hardware.host_driver import HostDriver
from pluto.hardware.wrist.sim import WristParams

from .powercube import (
    FRAMP_MODE,
    FVEL_MODE,
    PARAM_ACT_POS,
    PARAM_ACT_VEL,
    PARAM_CUBE_STATE,
    PARAM_MAX_POS,
    PARAM_MIN_POS,
    PARAM_TARGET_ACC,
    PARAM_TARGET_VEL,
    STATE_ERROR,
    STATE_HALTED,
    STATE_MOTION,
    Ack,
    BusError,
    CodecStatistics,
    GetParameter,
    Halt,
    MotionAck,
    ParameterValue,
    PowerCubeCodec,
    Request,
    Reset,
    SetMotion,
    SetParameter,
)

__all__ = [
    "CanWristConnectError",
    "CanWristDriver",
    "CanWristError",
    "CanWristLinkError",
    "WristReading",
    "WristStatistics",
]

log = logging.getLogger("pluto.wrist.can")

REOPEN_BACKOFF = 1.0
"""s between attempts to open a bus that failed."""
POLLED = (PARAM_ACT_VEL, PARAM_CUBE_STATE, PARAM_ACT_POS)
"""What each poll asks each module, the position last: a reading is made when it arrives, with the velocity and
state word of the same poll."""


class CanWristError(PlutoError):
    """Base of the driver's errors."""


class CanWristConnectError(CanWristError):
    """The bus cannot be opened, or the modules did not answer."""


class CanWristLinkError(CanWristError):
    """The link is down (a module is silent, or the bus is off): the command was not sent."""


@dataclass(frozen=True)
class WristReading:
    """The wrist as the modules last reported it.

    Attributes:
        position: (pan, tilt), rad; tilt positive downward.
        velocity: (pan, tilt), rad/s.
        state: (pan, tilt) state words (powercube.STATE_* bits).
        stamp: arrival of the newest value, s by the driver's clock.
        seq: counts the readings (a new one once both positions have been read again).
    """

    position: tuple[float, float]
    velocity: tuple[float, float]
    state: tuple[int, int]
    stamp: float
    seq: int


@dataclass(frozen=True)
class WristStatistics:
    """Counters of the link.

    Attributes:
        codec: the decoder's counters (malformed frames among them).
        reconnects: times the link came back after it went down.
        bus_errors: error frames and failures of the bus itself.
        commands: commands sent; refused: commands refused while the link was down.
        halts: HALTs sent (link back, command timeout, close).
    """

    codec: CodecStatistics
    reconnects: int = 0
    bus_errors: int = 0
    commands: int = 0
    refused: int = 0
    halts: int = 0


@dataclass
class _Module:
    """What the driver knows of one module."""

    address: int
    last_answer: float = -math.inf
    answered_since_down: bool = False
    position: float = math.nan
    velocity: float = 0.0
    state: int = 0
    fresh: bool = False
    reset_due: bool = False  # HALT sent, no RESET since: a status read before the HALT took effect cannot clear it
    params: dict[int, float | int] = field(default_factory=dict)


class CanWristDriver(HostDriver):
    """A client of the two PowerCube modules of a pan/tilt wrist; a context manager (:class:`.HostDriver`).

    Args:
        interface: the python-can interface (``socketcan``, ``virtual``, ``slcan``, ...).
        channel: its channel (``can0``, a virtual channel's name, a serial port for slcan).
        bitrate: bit/s, or None to leave the interface's own.
        pan_id, tilt_id: the modules' bus addresses (1..31, different).
        limits: position limits and maxima of the unit (rad, rad/s, rad/s²).
        poll_period: s between two polls of the modules.
        link_timeout: s of silence of a module after which the link is down.
        command_timeout: s without a command after which a module still moving is halted.
        clock: the time source of every timer and stamp, s (monotonic).
        bus_factory: opens the bus (tests); default ``can.Bus(interface=..., channel=..., bitrate=...)``.

    Raises:
        ValueError: bad addresses or times.
    """

    error = CanWristError

    def __init__(
        self,
        interface: str,
        channel: str,
        *,
        bitrate: int | None = None,
        pan_id: int = 1,
        tilt_id: int = 2,
        limits: WristParams | None = None,
        poll_period: float = 0.05,
        link_timeout: float = 0.5,
        command_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        bus_factory: Callable[[], can.BusABC] | None = None,
    ) -> None:
        if not (1 <= pan_id <= 31 and 1 <= tilt_id <= 31 and pan_id != tilt_id):
            raise ValueError(f"pan_id and tilt_id must be different addresses 1..31, got {pan_id}, {tilt_id}")
        for name, value in (
            ("poll_period", poll_period),
            ("link_timeout", link_timeout),
            ("command_timeout", command_timeout),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0 s, got {value}")
        super().__init__(reader_period=poll_period)
        self.interface, self.channel, self.bitrate = interface, channel, bitrate
        self.limits = limits or WristParams()
        self.poll_period, self.link_timeout, self.command_timeout = poll_period, link_timeout, command_timeout
        self._clock = clock
        self._bus_factory = bus_factory or self._open_bus
        self._modules = (_Module(pan_id), _Module(tilt_id))
        self._codec = PowerCubeCodec("host", (pan_id, tilt_id))
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._bus: can.BusABC | None = None
        self._link_up = False
        self._ever_up = False
        self._last_command = -math.inf
        self._last_halt = -math.inf
        self._reading: WristReading | None = None
        self._seq = 0
        self._position_limits = self._configured_limits()
        self._reconnects = self._bus_errors = self._commands = self._refused = self._halts = 0

    def __repr__(self) -> str:
        return f"<CanWristDriver {self.interface}:{self.channel} {'up' if self.connected else 'down'}>"

    # -- state ----------------------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Both modules answered within link_timeout (and no bus-off since)."""
        with self._lock:
            return self._link_up

    @property
    def reading(self) -> WristReading | None:
        """The newest reading (None before the first)."""
        with self._lock:
            return self._reading

    @property
    def position_limits(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The (low, high) limits of pan and tilt commands are clamped to, rad."""
        with self._lock:
            return self._position_limits

    def silence(self) -> float:
        """s since the slower of the two modules last answered (inf before any answer)."""
        with self._lock:
            return self._clock() - min(m.last_answer for m in self._modules)

    def statistics(self) -> WristStatistics:
        """A snapshot of the counters."""
        with self._lock:
            return WristStatistics(
                codec=self._codec.statistics(),
                reconnects=self._reconnects,
                bus_errors=self._bus_errors,
                commands=self._commands,
                refused=self._refused,
                halts=self._halts,
            )

    def wait_for_reading(self, timeout: float, after: int = 0) -> WristReading | None:
        """Wait at most ``timeout`` s for a reading with ``seq > after``; None if none came."""
        with self._changed:
            self._changed.wait_for(
                lambda: (self._reading is not None and self._reading.seq > after) or self._closed, timeout
            )
            reading = self._reading
        return reading if reading is not None and reading.seq > after else None

    # -- connection -----------------------------------------------------------------------------------------------

    def _open_bus(self) -> can.BusABC:
        kwargs: dict[str, Any] = {"interface": self.interface, "channel": self.channel}
        if self.bitrate:
            kwargs["bitrate"] = self.bitrate
        return can.Bus(**kwargs)

    def connect(self, timeout: float = 2.0) -> None:
        """Open the bus, start the reader, and wait for both modules to answer and report their limits.

        Raises:
            CanWristConnectError: the bus cannot be opened, or a module did not answer within ``timeout`` s.
            CanWristError: the driver was closed.
        """
        self._check_open("the wrist driver")
        if self._reader is not None:
            return
        try:
            bus = self._bus_factory()
        except (can.CanError, OSError, ValueError, ImportError) as err:
            raise CanWristConnectError(f"cannot open CAN {self.interface}:{self.channel}: {err}") from err
        with self._lock:
            self._bus = bus
        self._start_reader(f"wrist-can:{self.channel}")
        ids = ", ".join(str(m.address) for m in self._modules)
        with self._changed:
            for module in self._modules:
                for param in (PARAM_MIN_POS, PARAM_MAX_POS):
                    self._send(GetParameter(module.address, param))
            ok = self._changed.wait_for(
                lambda: self._link_up and all(PARAM_MAX_POS in m.params for m in self._modules), timeout
            )
        if not ok:
            self.close()
            raise CanWristConnectError(
                f"no PowerCube answered on CAN {self.interface}:{self.channel} (modules {ids}) within {timeout:g} s"
            )
        with self._lock:
            self._position_limits = self._narrowed_limits()
            log.info(
                "wrist on CAN %s:%s, modules %s, limits %s rad",
                self.interface,
                self.channel,
                ids,
                self._position_limits,
            )

    def _configured_limits(self) -> tuple[tuple[float, float], tuple[float, float]]:
        p = self.limits
        return (p.pan_limits, p.tilt_limits)

    def _narrowed_limits(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The configured limits, narrowed to each module's own MIN_POS/MAX_POS."""
        out = []
        for (low, high), module in zip(self._configured_limits(), self._modules, strict=True):
            own_low = float(module.params.get(PARAM_MIN_POS, -math.inf))
            own_high = float(module.params.get(PARAM_MAX_POS, math.inf))
            if max(low, own_low) < min(high, own_high):
                low, high = max(low, own_low), min(high, own_high)
            out.append((low, high))
        return (out[0], out[1])

    # -- commands -------------------------------------------------------------------------------------------------

    def command(self, position: Sequence[float], velocity: Sequence[float], acceleration: Sequence[float]) -> None:
        """Move the wrist: (pan, tilt) targets in rad, velocities in rad/s, accelerations in rad/s².

        An axis moves only when its velocity and acceleration are both > 0 (and finite, and it has a finite target);
        otherwise it is stopped. Targets are clamped to :attr:`position_limits`, velocities and accelerations to the
        unit's maxima.

        Raises:
            CanWristLinkError: the link is down (nothing was sent), or the send failed.
        """
        with self._lock:
            if not self._link_up or self._bus is None:
                self._refused += 1
                raise CanWristLinkError(
                    f"the wrist on CAN {self.interface}:{self.channel} is not answering: command refused"
                )
            requests: list[Request] = []
            for axis, module in enumerate(self._modules):
                v = float(velocity[axis]) if axis < len(velocity) else 0.0
                a = float(acceleration[axis]) if axis < len(acceleration) else 0.0
                target = float(position[axis]) if axis < len(position) else math.nan
                moving = v > 0 and a > 0 and math.isfinite(v) and math.isfinite(a) and math.isfinite(target)
                if module.reset_due or module.state & (STATE_ERROR | STATE_HALTED):
                    if not moving:
                        continue  # halted: it stands still already
                    requests.append(Reset(module.address))
                    module.state &= ~(STATE_ERROR | STATE_HALTED)
                    module.reset_due = False
                if not moving:
                    requests.append(SetMotion(module.address, FVEL_MODE, 0.0))
                    continue
                low, high = self._position_limits[axis]
                requests += [
                    SetParameter(module.address, PARAM_TARGET_VEL, min(v, self.limits.max_speed[axis])),
                    SetParameter(module.address, PARAM_TARGET_ACC, min(a, self.limits.max_accel[axis])),
                    SetMotion(module.address, FRAMP_MODE, min(max(target, low), high)),
                ]
            for request in requests:
                self._send(request)
            self._commands += 1
            self._last_command = self._clock()

    def halt(self) -> None:
        """Stop both modules at once (HALT); the next command resets them first.

        Raises:
            CanWristLinkError: the bus is not open, or the send failed.
        """
        with self._lock:
            if self._bus is None:
                raise CanWristLinkError(f"CAN {self.interface}:{self.channel} is not open")
            self._halt("halt asked")

    def _halt(self, why: str) -> None:
        """Send HALT to both modules (the lock is held)."""
        log.info("wrist: HALT (%s)", why)
        self._halts += 1
        self._last_halt = self._clock()
        for module in self._modules:
            self._send(Halt(module.address))
            module.state |= STATE_HALTED
            module.reset_due = True
        self._last_command = -math.inf

    def _send(self, request: Request) -> None:
        """Encode and send (the lock is held).

        Raises:
            CanWristLinkError: the bus is not open or the send failed (the bus will be opened again).
        """
        bus = self._bus
        if bus is None:
            raise CanWristLinkError(f"CAN {self.interface}:{self.channel} is not open")
        frame = self._codec.encode(request)
        message = can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False)
        try:
            bus.send(message, timeout=0.1)
        except (can.CanError, OSError, ValueError) as err:
            self._bus_failed(f"send failed: {err}")
            raise CanWristLinkError(f"cannot send to the wrist on CAN {self.interface}:{self.channel}: {err}") from err

    # -- the reader thread ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        next_poll = self._clock()
        next_open = -math.inf
        while not self._closing.is_set():
            now = self._clock()
            with self._lock:
                bus = self._bus
                if bus is None:
                    if now >= next_open:
                        next_open = now + REOPEN_BACKOFF
                        self._reopen()
                    bus = self._bus
                if bus is not None and now >= next_poll:
                    next_poll = max(next_poll + self.poll_period, now)
                    with contextlib.suppress(CanWristLinkError):
                        for module in self._modules:
                            for param in POLLED:
                                self._send(GetParameter(module.address, param))
                self._check_timers(now)
            if bus is None:
                self._closing.wait(min(self.poll_period, REOPEN_BACKOFF))
                continue
            try:
                message = bus.recv(timeout=max(0.0, min(next_poll - self._clock(), self.poll_period)))
            except (can.CanError, OSError, ValueError) as err:
                if self._closing.is_set():
                    return
                with self._lock:
                    self._bus_failed(f"receive failed: {err}")
                continue
            if message is None:
                continue
            with self._changed:
                self._codec.receive_message(message)
                for event in self._codec.events():
                    self._apply(event, self._clock())
                self._changed.notify_all()

    def _reopen(self) -> None:
        try:
            self._bus = self._bus_factory()
            log.info("wrist: CAN %s:%s open again", self.interface, self.channel)
        except (can.CanError, OSError, ValueError, ImportError) as err:
            log.debug("wrist: cannot open CAN %s:%s yet: %s", self.interface, self.channel, err)

    def _bus_failed(self, reason: str) -> None:
        """The bus itself failed: shut it down (the reader opens it again) and take the link down."""
        self._bus_errors += 1
        bus, self._bus = self._bus, None
        if bus is not None:
            with contextlib.suppress(Exception):
                bus.shutdown()
        self._link_down(reason)

    def _link_down(self, reason: str) -> None:
        for module in self._modules:
            module.answered_since_down = False
        if self._link_up:
            self._link_up = False
            log.warning("wrist: link down (%s)", reason)
        self._changed.notify_all()

    def _check_timers(self, now: float) -> None:
        if self._link_up:
            silent = [m.address for m in self._modules if now - m.last_answer > self.link_timeout]
            if silent:
                self._link_down(f"module {', '.join(map(str, silent))} silent for more than {self.link_timeout:g} s")
        if (
            self._link_up
            and now - self._last_command > self.command_timeout
            and now - self._last_halt > self.link_timeout  # a state word sent before the HALT may still come
            and any(m.state & STATE_MOTION and not m.state & STATE_HALTED for m in self._modules)
        ):
            with contextlib.suppress(CanWristLinkError):
                self._halt(f"no command for {self.command_timeout:g} s while moving")

    def _apply(self, event: object, now: float) -> None:
        """Take one decoded event in (the lock is held)."""
        if isinstance(event, BusError):
            self._bus_errors += 1
            if event.bus_off:
                self._link_down("bus-off")
            return
        if not isinstance(event, Ack | ParameterValue | MotionAck):
            return
        module = next(m for m in self._modules if m.address == event.module)
        module.last_answer = now
        module.answered_since_down = True
        if isinstance(event, ParameterValue):
            if event.param == PARAM_ACT_POS:
                module.position = float(event.value)
                module.fresh = True
            elif event.param == PARAM_ACT_VEL:
                module.velocity = float(event.value)
            elif event.param == PARAM_CUBE_STATE:
                module.state = int(event.value)
            else:
                module.params[event.param] = event.value
        elif isinstance(event, MotionAck):
            module.position = event.position
        if not self._link_up and all(m.answered_since_down for m in self._modules):
            self._link_up = True
            if self._ever_up:
                self._reconnects += 1
                log.warning("wrist: link back")
                with contextlib.suppress(CanWristLinkError):
                    self._halt("link back: a target from before the outage must not be pursued")
            self._ever_up = True
        if all(m.fresh for m in self._modules):
            pan, tilt = self._modules
            self._seq += 1
            self._reading = WristReading(
                position=(pan.position, tilt.position),
                velocity=(pan.velocity, tilt.velocity),
                state=(pan.state, tilt.state),
                stamp=now,
                seq=self._seq,
            )
            pan.fresh = tilt.fresh = False

    # -- close ----------------------------------------------------------------------------------------------------

    def _release(self) -> None:
        """close(), once the reader has stopped: HALT both modules and shut the bus down."""
        with self._changed:
            if self._bus is not None:
                try:
                    self._halt("closing")
                except CanWristLinkError as err:
                    log.warning("wrist: could not halt the modules at close: %s", err)
            bus, self._bus = self._bus, None
            self._link_up = False
            self._changed.notify_all()
        if bus is not None:
            with contextlib.suppress(Exception):
                bus.shutdown()
