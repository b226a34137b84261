"""Two emulated PowerCube modules (a pan/tilt wrist) on a python-can bus, for the driver and its tests (the ``can``
driver of the wrist module runs one in its own process with ``emulate = true``).

    with PowerCubeEmulator("wrist-test") as unit:          # joins the virtual CAN channel "wrist-test"
        with CanWristDriver("virtual", "wrist-test") as wrist:
            ...
        unit.mute(True)                                    # fault injection: the modules stop answering
        unit.bus_off()                                     # an error frame (bus-off), then silence until bus_on()

Each module answers GET_EXTENDED (actual position, velocity, state word, limits, targets), takes SET_EXTENDED of
its target velocity and acceleration (clamped to its maxima) and SET_MOTION in ramp mode (a trapezoidal profile
with those, toward a target within its limits) or velocity mode, and RESET, HOME and HALT. A ramp target outside
the limits is refused: the module sets ERROR and BEYOND_SOFT and stays where it is until a RESET. HALT stops it at
once and latches HALTED: motion commands are ignored until a RESET. A module that is not homed (``homed=False``)
moves only after HOME.
"""

# Strategy: the motion is the simulated wrist's (pluto.hardware.wrist.sim.SimWrist: each axis accelerates, cruises
# and brakes to stop on its target, within the limits), stepped by the emulator's clock before each frame is handled
# and on every receive timeout, so a reply always tells where the axis is now. One SimWrist carries both modules: the
# pan module is its axis 0 and the tilt module its axis 1; a command to one axis hands SimWrist the other axis's goal
# unchanged. The state word is derived from the motion (MOTION while it moves, RAMP_ACC/STEADY/DEC from the sign of
# the acceleration, RAMP_END when it stands at its ramp's target). The protocol is the codec's, in the module role.

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import can
import numpy as np

from pluto.codec import NEED_DATA
from pluto.hardware.wrist.sim import SimWrist, WristParams

from .powercube import (
    CAN_ERR_BUSOFF,
    CAN_ERR_RESTARTED,
    CMD_HALT,
    CMD_HOME,
    CMD_RESET,
    CMD_SET_EXTENDED,
    CMD_SET_MOTION,
    EXTENDED_ACK_MODES,
    FRAMP_ACK,
    FRAMP_MODE,
    FVEL_ACK,
    FVEL_MODE,
    PARAM_ACT_POS,
    PARAM_ACT_VEL,
    PARAM_CUBE_STATE,
    PARAM_MAX_ACC,
    PARAM_MAX_POS,
    PARAM_MAX_VEL,
    PARAM_MIN_POS,
    PARAM_TARGET_ACC,
    PARAM_TARGET_VEL,
    STATE_BEYOND_SOFT,
    STATE_ERROR,
    STATE_HALTED,
    STATE_HOME_OK,
    STATE_MOTION,
    STATE_RAMP_ACC,
    STATE_RAMP_DEC,
    STATE_RAMP_END,
    STATE_RAMP_STEADY,
    Ack,
    Frame,
    GetParameter,
    Halt,
    Home,
    MotionAck,
    ParameterValue,
    PowerCubeCodec,
    Reset,
    SetMotion,
    SetParameter,
    short_state,
)

__all__ = ["PowerCubeEmulator"]

log = logging.getLogger("pluto.wrist.emulator")

TICK = 0.005
"""s: the longest the emulator waits for a frame before it steps the motion anyway."""


class PowerCubeEmulator:
    """A pan/tilt unit of two PowerCube modules on a python-can bus.

    Args:
        channel: the bus channel (a virtual channel's name by default).
        interface: the python-can interface (``virtual`` by default).
        pan_id, tilt_id: the modules' addresses.
        params: limits and maxima of the unit (rad, rad/s, rad/s²).
        homed: the modules start homed (else they move only after HOME).
        clock: the time source of the motion, s.
    """

    def __init__(
        self,
        channel: str,
        *,
        interface: str = "virtual",
        pan_id: int = 1,
        tilt_id: int = 2,
        params: WristParams | None = None,
        homed: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channel, self.interface = channel, interface
        self.ids = (pan_id, tilt_id)
        self.wrist = SimWrist(params or WristParams())
        self._codec = PowerCubeCodec("module", self.ids)
        self._clock = clock
        self._lock = threading.Lock()
        self._flags = [STATE_HOME_OK if homed else 0, STATE_HOME_OK if homed else 0]  # latched bits per axis
        self._ramp = [True, True]  # the axis runs a ramp (else velocity mode)
        # TARGET_VEL and TARGET_ACC of each module, rad/s and rad/s² (the maxima until set)
        self._targets = (list(self.wrist.params.max_speed), list(self.wrist.params.max_accel))
        self._muted = False
        self._bus_off = False
        self._last = clock()
        self._bus: can.BusABC | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.received: list[Any] = []
        """Every request decoded, in order (for tests)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the bus and answer; starting twice does nothing."""
        if self._thread is not None:
            return
        self._bus = can.Bus(interface=self.interface, channel=self.channel)
        self._stop.clear()
        self._last = self._clock()
        self._thread = threading.Thread(target=self._run, name=f"powercube-emulator:{self.channel}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Leave the bus (the modules go on moving in the emulator's memory, as a unit unplugged from the bus)."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=2.0)
        bus, self._bus = self._bus, None
        if bus is not None:
            bus.shutdown()

    # -- fault injection ------------------------------------------------------------------------------------------

    def mute(self, on: bool = True) -> None:
        """Stop answering (``on``) or answer again; requests are still carried out."""
        with self._lock:
            self._muted = on

    def bus_off(self) -> None:
        """Send a bus-off error frame (as SocketCAN reports one), then neither answer nor act until :meth:`bus_on`."""
        with self._lock:
            self._bus_off = True
        self._send_error(CAN_ERR_BUSOFF)

    def bus_on(self) -> None:
        """Back on the bus after :meth:`bus_off` (a restarted-controller error frame, then answers again)."""
        self._send_error(CAN_ERR_RESTARTED)
        with self._lock:
            self._bus_off = False

    def _send_error(self, flags: int) -> None:
        bus = self._bus
        if bus is not None:
            bus.send(can.Message(arbitration_id=flags, is_error_frame=True, is_extended_id=False, dlc=8, data=bytes(8)))

    # -- the modules' state ---------------------------------------------------------------------------------------

    def state_word(self, axis: int) -> int:
        """The state word of module ``axis`` (0 pan, 1 tilt)."""
        with self._lock:
            return self._state_word(axis)

    def position(self) -> tuple[float, float]:
        """(pan, tilt) now, rad."""
        with self._lock:
            self._advance()
            return (float(self.wrist.position[0]), float(self.wrist.position[1]))

    def _state_word(self, axis: int) -> int:
        w = self.wrist
        state = self._flags[axis]
        v, a = w.velocity[axis], w.acceleration[axis]
        if abs(v) > 1e-9:
            state |= STATE_MOTION
            if self._ramp[axis]:
                if v * a > 1e-9:
                    state |= STATE_RAMP_ACC
                elif v * a < -1e-9:
                    state |= STATE_RAMP_DEC
                else:
                    state |= STATE_RAMP_STEADY
        elif self._ramp[axis] and w.position[axis] == w.target[axis]:
            state |= STATE_RAMP_END
        return state

    def _advance(self) -> None:
        now = self._clock()
        dt = now - self._last
        self._last = now
        if dt > 0:
            self.wrist.step(dt)

    def _goal(
        self, axis: int, target: float | None = None, speed: float | None = None, accel: float | None = None
    ) -> None:
        """Hand SimWrist a goal for ``axis``, the other axis's unchanged."""
        w = self.wrist
        position, velocity, acceleration = w.target.tolist(), w.speed.tolist(), w.accel.tolist()
        if target is not None:
            position[axis] = target
        if speed is not None:
            velocity[axis] = speed
        if accel is not None:
            acceleration[axis] = accel
        w.command(position, velocity, acceleration)

    def _stop_axis(self, axis: int) -> None:
        """Stand still at once where the axis is (HALT)."""
        w = self.wrist
        w.velocity[axis] = w.acceleration[axis] = 0.0
        w.target[axis] = w.position[axis]
        w.speed[axis] = w.accel[axis] = 0.0

    # -- the thread -----------------------------------------------------------------------------------------------

    def _run(self) -> None:
        bus = self._bus
        assert bus is not None
        while not self._stop.is_set():
            try:
                message = bus.recv(timeout=TICK)
            except can.CanError as err:  # pragma: no cover - a virtual bus does not fail
                log.warning("emulator: receive failed: %s", err)
                continue
            with self._lock:
                self._advance()
                if message is None or self._bus_off:
                    continue
                self._codec.receive_message(message)
                replies = []
                while (event := self._codec.next_event()) is not NEED_DATA:
                    self.received.append(event)
                    replies += self._handle(event)
                muted = self._muted
            if not muted:
                for frame in replies:
                    bus.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False))

    def _handle(self, event: object) -> list[Frame]:
        """Carry out one request (the lock is held); the replies to send."""
        if isinstance(event, Reset | Home | Halt) and event.module == 0:
            for address in self.ids:  # a request to all modules is carried out, not acknowledged
                self._handle(type(event)(address))
            return []
        module = getattr(event, "module", None)
        if module not in self.ids:
            return []
        axis = self.ids.index(module)
        encode = self._codec.encode
        if isinstance(event, GetParameter):
            return [encode(ParameterValue(module, event.param, self._parameter(axis, event.param)))]
        if isinstance(event, Reset):
            self._flags[axis] &= ~(STATE_ERROR | STATE_HALTED | STATE_BEYOND_SOFT)
            return [encode(Ack(module, CMD_RESET))]
        if isinstance(event, Halt):
            self._stop_axis(axis)
            self._flags[axis] |= STATE_HALTED
            return [encode(Ack(module, CMD_HALT))]
        if isinstance(event, Home):
            if not self._flags[axis] & (STATE_ERROR | STATE_HALTED):
                self._flags[axis] |= STATE_HOME_OK
                self._ramp[axis] = True
                self._goal(axis, 0.0, self._targets[0][axis], self._targets[1][axis])
            return [encode(Ack(module, CMD_HOME))]
        if isinstance(event, SetParameter):
            p = self.wrist.params
            if event.param == PARAM_TARGET_VEL:
                self._targets[0][axis] = min(abs(event.value), p.max_speed[axis])
            elif event.param == PARAM_TARGET_ACC:
                self._targets[1][axis] = min(abs(event.value), p.max_accel[axis])
            # the limits are the unit's: other writable parameters are acknowledged and kept as they are
            return [encode(Ack(module, CMD_SET_EXTENDED, event.param))]
        if isinstance(event, SetMotion):
            self._motion(axis, event)
            if event.mode in EXTENDED_ACK_MODES:
                state = short_state(self._state_word(axis))
                return [encode(MotionAck(module, event.mode, float(self.wrist.position[axis]), state, 0))]
            return [encode(Ack(module, CMD_SET_MOTION, event.mode))]
        return []

    def _motion(self, axis: int, event: SetMotion) -> None:
        flags = self._flags[axis]
        if flags & (STATE_ERROR | STATE_HALTED) or not flags & STATE_HOME_OK:
            return  # refused: the module does not move until reset (and homed)
        speed, accel = self._targets[0][axis], self._targets[1][axis]
        if event.mode in (FRAMP_MODE, FRAMP_ACK):
            low, high = self._float32_limits()
            if not low[axis] <= event.value <= high[axis]:
                self._flags[axis] |= STATE_ERROR | STATE_BEYOND_SOFT
                self._stop_axis(axis)
                log.info(
                    "emulator: module %d refused target %.3f rad (outside its limits)", self.ids[axis], event.value
                )
                return
            self._ramp[axis] = True
            self._goal(axis, event.value, speed, accel)
        elif event.mode in (FVEL_MODE, FVEL_ACK):
            self._ramp[axis] = False
            low, high = self._float32_limits()
            if event.value == 0.0:
                self._goal(axis, None, 0.0, 0.0)  # brakes with the unit's deceleration
            else:
                bound = high[axis] if event.value > 0 else low[axis]
                self._goal(axis, float(bound), min(abs(event.value), self.wrist.params.max_speed[axis]), accel)

    def _float32_limits(self) -> tuple[list[float], list[float]]:
        """The position limits as a module holds them: float32 (so a target equal to MIN_POS or MAX_POS as read
        back is within them)."""
        low, high = self.wrist.limits()
        return (
            [float(v) for v in low.astype(np.float32)],
            [float(v) for v in high.astype(np.float32)],
        )

    def _parameter(self, axis: int, param: int) -> float | int:
        w, p = self.wrist, self.wrist.params
        low, high = w.limits()
        values: dict[int, float | int] = {
            PARAM_ACT_POS: float(w.position[axis]),
            PARAM_ACT_VEL: float(w.velocity[axis]),
            PARAM_CUBE_STATE: self._state_word(axis),
            PARAM_MIN_POS: float(low[axis]),
            PARAM_MAX_POS: float(high[axis]),
            PARAM_MAX_VEL: p.max_speed[axis],
            PARAM_MAX_ACC: p.max_accel[axis],
            PARAM_TARGET_VEL: self._targets[0][axis],
            PARAM_TARGET_ACC: self._targets[1][axis],
        }
        return values.get(param, math.nan)
