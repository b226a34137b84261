"""The base server of a Pioneer robot: the P2OS driver on the bus, interchangeable with the simulated base.

Reads velocity commands on ``Base/Drive/Command`` (velocity[0] = v m/s, velocity[1] = ω rad/s) and forwards each
new one to the robot; writes odometry on ``Base/Drive/State``, the sonar ring on ``Base/Sonar``, bumpers and stall on
``Base/Contact`` and the battery on ``Base/Power``, each time the robot sends a SIP; and the link to the robot on
``base/status`` at every step: data = [s since the robot last answered], element = [link up 1/0, reconnects]. A
command not renewed within ``command_timeout`` s stops the robot (the driver's timer, separate from its keepalive),
so a dead commander never leaves it driving.

Run it with ``pluto run base --driver p2os --port socket://127.0.0.1:8101`` (``--port /dev/ttyUSB0`` on a robot;
``pluto p2os-sim`` serves an emulated one), or in a profile with ``driver = "p2os"`` under ``[modules.base]``.

Services (``base/<name>``):
    geometry: -> {model, radius (m), sonar_poses [[x m, y m, heading rad], ...]}.
    motor_power: bool -> bool, the outcome read from the robot's flags (False with the e-stop engaged).
    velocity_mode: 'direct' (wheel velocities, VEL2) or 'separate' (translation and rotation, VEL/RVEL) -> the mode.
    reset_odometry: -> True (SETO; the pose restarts at 0).
    set_odometry: [x, y, theta] -> True (the current pose is declared to be that).
    speed_pid, position_pid: {kp, ki, kv} -> error: P2OS has no command to set them.
    speed_profile: {max_speed, max_accel, max_decel, max_turn_rate, max_turn_accel, max_turn_decel} (SI, any subset)
        -> True (SETV, SETA, SETRV, SETRA).
"""

# Strategy: the module is a thin shell around P2osDriver (principle 1 of DESIGN.md): the driver owns the link,
# the timers and the units; the module maps the driver's state to the bus messages of the simulated base
# (hardware/base/module.py), so either base can stand behind Base/* unchanged. The driver connects in
# on_configure so that a missing robot fails the start with one clear line instead of a module that publishes
# nothing. Stamps are the module clock's time at which the SIP arrived (the driver's arrival time carried over to
# the module clock), not the time of the control step, so that v·Δt computed from two stamps is not blurred by
# the step's phase. While the link is down (the driver reconnects by itself) nothing is published on Base/*: a
# stale value must not look fresh; base/status, written at every step, says whether the link is up and how long
# the robot has been silent. The PID services: /work/shared/reference/p2os.md lists no command that sets the PID
# gains (only the CONFIGpac reports them), so they answer with an error that says so.

from __future__ import annotations

import logging
import math
import time
from typing import Any

from pluto import msgs, names
from pluto.hardware.base.p2os.driver import P2osDriver, P2osError, P2osState
from pluto.runtime.module import Module, ModuleParams

log = logging.getLogger("pluto.p2os")

SONAR_MAX_RANGE = 5.0
"""Largest sonar range published, m (a Pioneer's sonar reports about 5 m when it hears no echo)."""
BATTERY_EMPTY = 11.0
"""Battery voltage taken as empty, V (the charge estimate is linear between this and BATTERY_FULL)."""
BATTERY_FULL = 13.0
"""Battery voltage taken as full, V."""


class P2osBaseParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    port: where the robot is: a serial device, a pty path or ``socket://host:port`` (an emulator or simulator).
    model: the robot subclass (``p3dx``, ``p3at``, ...); empty to take it from the robot.
    command_timeout: s without a new command after which the robot is stopped.
    """

    rate_hz: float = 20.0
    port: str = "socket://127.0.0.1:8101"
    model: str = ""
    command_timeout: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.port:
            raise ValueError("port must name a serial device, a pty or a socket:// URL")
        if not (math.isfinite(self.command_timeout) and self.command_timeout > 0):
            raise ValueError(f"command_timeout must be > 0 s, got {self.command_timeout}")


class P2osBase(Module[P2osBaseParams]):
    """The base server of a Pioneer robot (P2OS/ARCOS), or of anything that speaks it."""

    name = "base"
    description = "Pioneer base over P2OS: motion, odometry, sonar, bumpers, battery"
    provides = (names.BASE_DRIVE_STATE, names.BASE_SONAR, names.BASE_CONTACT, names.BASE_POWER, names.BASE_STATUS)
    requires = ()
    Params = P2osBaseParams

    driver: P2osDriver

    def on_configure(self) -> None:
        p = self.params
        self.driver = P2osDriver(p.port, model=p.model or None, command_timeout=p.command_timeout, clock=time.monotonic)
        self.driver.connect()  # raises P2osConnectError with the reason: the module does not start
        try:
            self._configure_interfaces()
        except BaseException:
            self.driver.close()
            raise

    def _configure_interfaces(self) -> None:
        p = self.params
        self.commands = self.create_reader(names.BASE_DRIVE_COMMAND, max_age=p.command_timeout)
        self.odometry = self.create_publisher(names.BASE_DRIVE_STATE)
        self.sonar_out = self.create_publisher(names.BASE_SONAR)
        self.contact = self.create_publisher(names.BASE_CONTACT)
        self.power = self.create_publisher(names.BASE_POWER)
        self.status = self.create_publisher(names.BASE_STATUS)
        self.mode = "separate"
        self._last_command_seen = self.commands.received
        self._last_sip = -1
        self._failures = 0
        self._last_failure_log = -math.inf
        self.create_service("geometry", self._srv_geometry)
        self.create_service("motor_power", self._srv_motor_power, bool)
        self.create_service("velocity_mode", self._srv_velocity_mode, str)
        self.create_service("reset_odometry", self._srv_reset_odometry)
        self.create_service("set_odometry", self._srv_set_odometry, list[float])
        self.create_service("speed_pid", self._srv_speed_pid, dict[str, float])
        self.create_service("position_pid", self._srv_position_pid, dict[str, float])
        self.create_service("speed_profile", self._srv_speed_profile, dict[str, float])
        state = self.driver.wait_for_sip(2.0)
        if state is not None:
            self.publish(state, self.clock.now())

    def step(self, now: float) -> None:
        self.forward_command()
        self.publish_status(now)
        state = self.driver.state
        if state is None or state.sips == self._last_sip or not self.driver.connected:
            return
        self.publish(state, now)

    def forward_command(self) -> None:
        """Send the newest command to the robot, if a new one arrived since the last step."""
        received = self.commands.received
        if received == self._last_command_seen:
            return
        command = self.commands.read()
        if command is None:
            return
        v = float(command.velocity[0]) if len(command.velocity) > 0 else 0.0
        omega = float(command.velocity[1]) if len(command.velocity) > 1 else 0.0
        if not (math.isfinite(v) and math.isfinite(omega)):
            self._last_command_seen = received
            log.warning("ignored a command with a value that is not finite: %s", command.velocity)
            return
        try:
            if self.mode == "direct":
                left, right = self.driver.params.wheel_velocities(v, omega)
                conv = self.driver.params.vel_conv / 1000.0
                self.driver.set_wheel_velocities(left * conv, right * conv)
            else:
                self.driver.set_velocity(v, omega)
        except P2osError as err:
            # The link is down (the driver is reconnecting). The command is dropped, not kept for later: a
            # command must never be replayed after an outage; a live commander sends a new one anyway.
            self._report_failure(err)
        finally:
            self._last_command_seen = received

    def _report_failure(self, err: Exception) -> None:
        self._failures += 1
        now = time.monotonic()
        if now - self._last_failure_log >= 5.0:
            self._last_failure_log = now
            log.warning("cannot forward the command to the robot (%d times so far): %s", self._failures, err)

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

    def publish(self, state: P2osState, now: float) -> None:
        """Write every interface of the base for the driver's ``state``; ``now`` is the module clock's time."""
        self._last_sip = state.sips
        # the SIP's arrival time (driver clock: time.monotonic) on the module clock
        stamp = now - max(0.0, time.monotonic() - state.stamp)
        self.odometry.write(
            msgs.Odometry(stamp=stamp, x=state.x, y=state.y, theta=state.theta, v=state.v, omega=state.omega)
        )
        self.contact.write(
            msgs.Contact(stamp=stamp, front=state.front_bumper, rear=state.rear_bumper, stall=state.stalled)
        )
        charge = min(1.0, max(0.0, (state.battery_voltage - BATTERY_EMPTY) / (BATTERY_FULL - BATTERY_EMPTY)))
        self.power.write(msgs.Power(stamp=stamp, voltage=state.battery_voltage, charge=charge, charging=state.charging))
        poses = self.driver.params.sonar_poses
        ranges = [min(r, SONAR_MAX_RANGE) if math.isfinite(r) else SONAR_MAX_RANGE for r in state.sonar_ranges]
        self.sonar_out.write(
            msgs.SonarScan(stamp=stamp, ranges=ranges, angles=[p.heading for p in poses], max_range=SONAR_MAX_RANGE)
        )

    def on_shutdown(self) -> None:
        driver = getattr(self, "driver", None)
        if driver is not None:
            driver.close()

    # -- services -----------------------------------------------------------------------------------------------

    def _srv_geometry(self, _request: Any) -> dict[str, Any]:
        params = self.driver.params
        return {
            "model": params.subclass,
            "radius": params.radius,
            "sonar_poses": [[p.x, p.y, p.heading] for p in params.sonar_poses],
        }

    def _srv_motor_power(self, on: bool) -> bool:
        return self.driver.enable_motors(bool(on))

    def _srv_velocity_mode(self, mode: str) -> str:
        if mode not in ("direct", "separate"):
            raise ValueError(f"velocity_mode is 'direct' (wheel velocities) or 'separate' (v, omega), not {mode!r}")
        self.mode = mode
        self._last_command_seen = -1  # send the current command again, in the new mode
        return mode

    def _srv_reset_odometry(self, _request: Any) -> bool:
        self.driver.reset_odometry()
        return True

    def _srv_set_odometry(self, pose: list[float]) -> bool:
        if len(pose) != 3:
            raise ValueError(f"set_odometry takes [x, y, theta] (m, m, rad), got {len(pose)} values")
        self.driver.set_odometry(pose[0], pose[1], pose[2])
        return True

    def _pid_not_supported(self, which: str) -> None:
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

    def _srv_speed_pid(self, _gains: dict[str, float]) -> bool:
        self._pid_not_supported("speed")
        return False  # pragma: no cover - never reached

    def _srv_position_pid(self, _gains: dict[str, float]) -> bool:
        self._pid_not_supported("position")
        return False  # pragma: no cover - never reached

    def _srv_speed_profile(self, profile: dict[str, float]) -> bool:
        known = ("max_speed", "max_accel", "max_decel", "max_turn_rate", "max_turn_accel", "max_turn_decel")
        unknown = sorted(set(profile) - set(known))
        if unknown:
            raise ValueError(f"speed_profile: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")
        self.driver.set_speed_profile(**{name: float(value) for name, value in profile.items()})
        return True
