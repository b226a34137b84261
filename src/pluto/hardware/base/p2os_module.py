"""The base server of a Pioneer robot: the P2OS driver on the bus, interchangeable with the simulated base.

A :class:`~pluto.hardware.base.server.BaseServer` (its docstring describes the interfaces, the command rule and the
services) on :class:`~pluto.hardware.base.p2os.driver.P2osDriver`: each new command is forwarded to the robot, and
odometry, sonar, bumpers, stall and battery are written each time the robot sends a SIP. It also writes the link to
the robot on ``base/status`` at every step: data = [s since the robot last answered], element = [link up 1/0,
reconnects]. Besides the shell's rule (an expired command is followed by a stop), the driver stops the robot when
no command renewed it within ``command_timeout`` s (its own timer, separate from its keepalive).

Run it with ``pluto run base --driver p2os --port socket://127.0.0.1:8101`` (``--port /dev/ttyUSB0`` on a robot;
``pluto p2os-emulate`` serves an emulated one), or in a profile with ``driver = "p2os"`` under ``[modules.base]``.

How the services are carried out here: geometry is the robot model's; motor_power answers the outcome read from
the robot's flags (False with the e-stop engaged); velocity_mode 'direct' sends wheel velocities (VEL2), 'separate'
translation and rotation (VEL/RVEL); reset_odometry is SETO; set_odometry declares the pose in the driver;
speed_pid and position_pid answer an error: P2OS has no command to set them; speed_profile is SETV, SETA, SETRV,
SETRA.
"""

# Strategy: the module is a thin shell around P2osDriver (principle 1 of docs/design.md): the driver owns the link,
# the timers and the units; BaseServer owns the bus side shared with the simulated base (hardware/base/module.py),
# so either base can stand behind Base/* unchanged. The driver connects in open_base so that a missing robot fails
# the start with one clear line instead of a module that publishes nothing. Stamps are the module clock's time at
# which the SIP arrived (the driver's arrival time carried over to the module clock), not the time of the control
# step, so that v·Δt computed from two stamps is not blurred by the step's phase. While the link is down (the
# driver reconnects by itself) nothing is published on Base/*: a stale value must not look fresh, and a command is
# dropped, never replayed after the outage; base/status, written at every step, says whether the link is up and how
# long the robot has been silent. The PID services: docs/protocols/p2os.md lists no command that sets the
# PID gains (only the CONFIGpac reports them), so they answer with an error that says so.

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping

from pluto import msgs, names
from pluto.hardware.base.p2os.driver import P2osDriver, P2osError, P2osState
from pluto.hardware.base.server import BaseGeometry, BaseServer, BaseServerParams, BaseState
from pluto.runtime.ranges import Rate

log = logging.getLogger("pluto.p2os")

SONAR_MAX_RANGE = 5.0
"""Largest sonar range published, m (a Pioneer's sonar reports about 5 m when it hears no echo)."""
BATTERY_EMPTY = 11.0
"""Battery voltage taken as empty, V (the charge estimate is linear between this and BATTERY_FULL)."""
BATTERY_FULL = 13.0
"""Battery voltage taken as full, V."""


class P2osBaseParams(BaseServerParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: where the robot is: a serial device, a pty path or ``socket://host:port`` (an emulator or simulator).
    model: the robot subclass (``p3dx``, ``p3at``, ...); empty to take it from the robot.
    command_timeout: s without a new command after which the robot is stopped.
    """

    rate_hz: Rate = 20.0
    port: str = "socket://127.0.0.1:8101"
    model: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.port:
            raise ValueError("port must name a serial device, a pty or a socket:// URL")


class P2osBase(BaseServer[P2osBaseParams]):
    """The base server of a Pioneer robot (P2OS/ARCOS), or of anything that speaks it."""

    description = "Pioneer base over P2OS: motion, odometry, sonar, bumpers, battery"
    provides = (*BaseServer.provides, names.BASE_STATUS)
    requires = ()
    Params = P2osBaseParams

    driver: P2osDriver

    def open_base(self) -> None:
        p = self.params
        self.driver = P2osDriver(p.port, model=p.model or None, command_timeout=p.command_timeout, clock=time.monotonic)
        self.driver.connect()  # raises P2osConnectError with the reason: the module does not start
        self.status = self.create_publisher(names.BASE_STATUS)
        self._last_sip = -1
        self._failures = 0
        self._last_failure_log = -math.inf

    def close_base(self) -> None:
        driver = getattr(self, "driver", None)
        if driver is not None:
            driver.close()

    def initial_state(self, now: float) -> BaseState | None:
        state = self.driver.wait_for_sip(2.0)
        return None if state is None else self._state_of(state, now)

    def apply_command(self, v: float, omega: float, now: float) -> None:
        try:
            if self.velocity_mode == "direct":
                left, right = self.driver.params.wheel_velocities(v, omega)
                conv = self.driver.params.vel_conv / 1000.0
                self.driver.set_wheel_velocities(left * conv, right * conv)
            else:
                self.driver.set_velocity(v, omega)
        except P2osError as err:
            # The link is down (the driver is reconnecting). The command is dropped, not kept for later: a
            # command must never be replayed after an outage; a live commander sends a new one anyway.
            self._report_failure(err)

    def _report_failure(self, err: Exception) -> None:
        self._failures += 1
        now = time.monotonic()
        if now - self._last_failure_log >= 5.0:
            self._last_failure_log = now
            log.warning("cannot forward the command to the robot (%d times so far): %s", self._failures, err)

    def read_state(self, now: float) -> BaseState | None:
        self.publish_status(now)
        state = self.driver.state
        if state is None or state.sips == self._last_sip or not self.driver.connected:
            return None
        return self._state_of(state, now)

    def publish_status(self, now: float) -> None:
        """Write ``base/status``: the time since the robot last answered, whether the link is up, reconnections."""
        driver = self.driver
        up = driver.connected
        self.status.write(
            msgs.FVectorState(
                stamp=now,
                data=[driver.silence()],
                element=[1 if up else 0, driver.statistics().reconnects],
            )
        )

    def _state_of(self, state: P2osState, now: float) -> BaseState:
        """The base's readings for the driver's ``state``; ``now`` is the module clock's time."""
        self._last_sip = state.sips
        # the SIP's arrival time (driver clock: time.monotonic) on the module clock
        stamp = now - max(0.0, time.monotonic() - state.stamp)
        charge = min(1.0, max(0.0, (state.battery_voltage - BATTERY_EMPTY) / (BATTERY_FULL - BATTERY_EMPTY)))
        poses = self.driver.params.sonar_poses
        ranges = [min(r, SONAR_MAX_RANGE) if math.isfinite(r) else SONAR_MAX_RANGE for r in state.sonar_ranges]
        return BaseState(
            odometry=msgs.Odometry(stamp=stamp, x=state.x, y=state.y, theta=state.theta, v=state.v, omega=state.omega),
            contact=msgs.Contact(stamp=stamp, front=state.front_bumper, rear=state.rear_bumper, stall=state.stalled),
            power=msgs.Power(stamp=stamp, voltage=state.battery_voltage, charge=charge, charging=state.charging),
            sonar=msgs.SonarScan(
                stamp=stamp, ranges=ranges, angles=[p.heading for p in poses], max_range=SONAR_MAX_RANGE
            ),
        )

    # -- services -------------------------------------------------------------------------------------------------

    def geometry(self) -> BaseGeometry:
        params = self.driver.params
        poses = tuple((p.x, p.y, p.heading) for p in params.sonar_poses)
        return BaseGeometry(model=params.subclass, radius=params.radius, sonar_poses=poses)

    def set_motor_power(self, on: bool) -> bool:
        return self.driver.enable_motors(on)

    def reset_odometry(self) -> None:
        self.driver.reset_odometry()

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        self.driver.set_odometry(x, y, theta)

    def set_pid_gains(self, which: str, gains: Mapping[str, float]) -> None:
        config = self.driver.config
        current = ""
        if config is not None:
            kp, kv, ki = (
                (config.trans_kp, config.trans_kv, config.trans_ki)
                if which == "speed"
                else (config.rot_kp, config.rot_kv, config.rot_ki)
            )
            prefix = "Trans" if which == "speed" else "Rot"
            current = f" (the robot reports {prefix}KP={kp}, {prefix}KV={kv}, {prefix}KI={ki})"
        raise ValueError(
            f"setting the {which} PID gains is not supported by P2OS: the protocol has no command for "
            f"it; change them in the robot's flash configuration{current}"
        )

    def set_speed_profile(self, profile: Mapping[str, float]) -> None:
        self.driver.set_speed_profile(**profile)
