"""The simulated base server (the original's dummy base, made physical).

Reads velocity commands on ``Base/Drive/Command`` (velocity[0] = v m/s, velocity[1] = ω rad/s) and moves the
simulated body; writes odometry on ``Base/Drive/State``, the sonar ring on ``Base/Sonar``, bumpers and stall on
``Base/Contact``, the battery on ``Base/Power``, and the true pose on ``Sim/Truth`` (for tests and plots only: no
robot module may read it). A command older than ``command_timeout`` stops the robot, so a dead commander never
leaves it driving.

Services (``base/<name>``), with the requests and replies of the P2OS base's (p2os_module.py):
    geometry: -> {model: "sim", radius (m), sonar_poses [[x m, y m, heading rad], ...]}.
    motor_power: bool -> True (with the motors off, every command is taken as zero speed).
    velocity_mode: 'direct' or 'separate' -> the mode (the simulated body moves the same in both).
    reset_odometry: -> True (the odometry restarts at 0).  set_odometry: [x, y, theta] -> True.
    speed_pid, position_pid: {kp, ki, kv} -> True (kept; the simulated body has no controller to tune).
    speed_profile: {max_speed, max_accel, max_decel, max_turn_rate, max_turn_accel, max_turn_decel} -> True: the
        body's limits (it has one acceleration limit each way: a deceleration sets it when no acceleration is given).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Any, ClassVar

from pluto import msgs, names
from pluto.sim.body import BodyParams, BodyState, SimBody
from pluto.sim.device import SimDevice, SimDeviceParams


class SimBaseParams(SimDeviceParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    command_timeout: s without a new command after which the base stops.
    sonar_hz: rate of the sonar ring, Hz.
    radius, max_speed, max_turn_rate, max_accel, max_turn_accel: the body (m, m/s, rad/s, m/s², rad/s²).
    """

    rate_hz: float = 50.0
    command_timeout: float = 1.0
    sonar_hz: float = 10.0
    radius: float = 0.4
    max_speed: float = 1.5
    max_turn_rate: float = 2.0
    max_accel: float = 1.0
    max_turn_accel: float = 3.0


class SimBase(SimDevice[SimBaseParams]):
    """The simulated base."""

    name = "base"
    description = "the base: simulated (default) or a Pioneer over P2OS (--driver p2os --port URL)"
    driver = "sim"
    drivers: ClassVar[dict[str, str]] = {"p2os": "pluto.hardware.base.p2os_module:P2osBase"}
    provides = (names.BASE_DRIVE_STATE, names.BASE_SONAR, names.BASE_CONTACT, names.BASE_POWER, names.SIM_TRUTH)
    Params = SimBaseParams

    def on_configure(self) -> None:
        p = self.params
        self.load_simulation()
        body = BodyParams(
            radius=p.radius,
            max_speed=p.max_speed,
            max_turn_rate=p.max_turn_rate,
            max_accel=p.max_accel,
            max_turn_accel=p.max_turn_accel,
        )
        self.body = SimBody(self.world.segments(), self.world.circles, self.world.start, body, self.noise, self.rng)
        self.commands = self.create_reader(names.BASE_DRIVE_COMMAND, max_age=p.command_timeout)
        self.odometry = self.create_publisher(names.BASE_DRIVE_STATE)
        self.sonar_out = self.create_publisher(names.BASE_SONAR)
        self.contact = self.create_publisher(names.BASE_CONTACT)
        self.power = self.create_publisher(names.BASE_POWER)
        self.truth = self.create_publisher(names.SIM_TRUTH)
        self._last: float | None = None
        self._next_sonar = 0.0
        self._body_lock = threading.Lock()  # services change the body between steps
        self.motors_on = True
        self.velocity_mode = "separate"
        self.pid_gains: dict[str, dict[str, float]] = {"speed": {}, "position": {}}
        self.create_service("geometry", self._srv_geometry)
        self.create_service("motor_power", self._srv_motor_power, bool)
        self.create_service("velocity_mode", self._srv_velocity_mode, str)
        self.create_service("reset_odometry", lambda _request: self._srv_set_odometry([0.0, 0.0, 0.0]))
        self.create_service("set_odometry", self._srv_set_odometry, list[float])
        self.create_service("speed_pid", lambda gains: self._srv_pid("speed", gains), dict[str, float])
        self.create_service("position_pid", lambda gains: self._srv_pid("position", gains), dict[str, float])
        self.create_service("speed_profile", self._srv_speed_profile, dict[str, float])
        self.publish(self.clock.now(), self.body.state())

    def command(self, now: float) -> tuple[float, float]:
        """The velocity command in force: the newest one, or (0, 0) if it is too old (the reader forgets a command
        ``command_timeout`` s after it arrived, by this module's clock)."""
        cmd = self.commands.read()
        if cmd is None or not self.motors_on:
            return 0.0, 0.0
        v = cmd.velocity[0] if len(cmd.velocity) > 0 else 0.0
        w = cmd.velocity[1] if len(cmd.velocity) > 1 else 0.0
        return float(v), float(w)

    def step(self, now: float) -> None:
        if self._last is None or now < self._last:
            self._last = now
            return
        dt, self._last = now - self._last, now
        if dt <= 0:
            return
        v, w = self.command(now)
        with self._body_lock:
            state = self.body.step(v, w, dt, self.world.mover_circles(now))
        self.publish(now, state)

    def publish(self, now: float, s: BodyState) -> None:
        """Write every interface of the base for the body state ``s`` at time ``now``."""
        self.truth.write(msgs.Odometry(stamp=now, x=s.x, y=s.y, theta=s.theta, v=s.v, omega=s.omega))
        self.odometry.write(
            msgs.Odometry(stamp=now, x=s.odom_x, y=s.odom_y, theta=s.odom_theta, v=s.odom_v, omega=s.odom_omega)
        )
        self.contact.write(msgs.Contact(stamp=now, front=s.front_bumper, rear=s.rear_bumper, stall=s.stalled))
        self.power.write(msgs.Power(stamp=now, voltage=s.voltage, charge=s.charge))
        if now >= self._next_sonar:
            self._next_sonar = now + 1.0 / self.params.sonar_hz
            ranges = self.body.sonar(self.world.mover_circles(now))
            self.sonar_out.write(
                msgs.SonarScan(
                    stamp=now,
                    ranges=ranges.tolist(),
                    angles=self.body.sonar_angles.tolist(),
                    max_range=self.body.params.sonar_max_range,
                )
            )

    # -- services (those of the P2OS base) ----------------------------------------------------------------------

    def _srv_geometry(self, _request: Any) -> dict[str, Any]:
        r = self.body.params.radius
        poses = [[r * math.cos(a), r * math.sin(a), a] for a in self.body.sonar_angles.tolist()]
        return {"model": "sim", "radius": r, "sonar_poses": poses}

    def _srv_motor_power(self, on: bool) -> bool:
        self.motors_on = bool(on)
        return True

    def _srv_velocity_mode(self, mode: str) -> str:
        if mode not in ("direct", "separate"):
            raise ValueError(f"velocity_mode is 'direct' (wheel velocities) or 'separate' (v, omega), not {mode!r}")
        self.velocity_mode = mode
        return mode

    def _srv_set_odometry(self, pose: list[float]) -> bool:
        if len(pose) != 3 or not all(math.isfinite(v) for v in pose):
            raise ValueError(f"set_odometry takes [x, y, theta] (m, m, rad), finite, got {pose}")
        with self._body_lock:
            self.body.odom = [float(v) for v in pose]
        return True

    def _srv_pid(self, which: str, gains: dict[str, float]) -> bool:
        unknown = sorted(set(gains) - {"kp", "ki", "kv"})
        if unknown or not all(math.isfinite(v) for v in gains.values()):
            raise ValueError(f"{which}_pid takes finite kp, ki, kv; got {gains}")
        self.pid_gains[which] = {**self.pid_gains[which], **gains}
        return True

    def _srv_speed_profile(self, profile: dict[str, float]) -> bool:
        known = ("max_speed", "max_accel", "max_decel", "max_turn_rate", "max_turn_accel", "max_turn_decel")
        unknown = sorted(set(profile) - set(known))
        if unknown:
            raise ValueError(f"speed_profile: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if not all(math.isfinite(v) and v > 0 for v in profile.values()):
            raise ValueError(f"speed_profile values must be finite and > 0, got {profile}")
        accel = profile.get("max_accel", profile.get("max_decel"))
        turn_accel = profile.get("max_turn_accel", profile.get("max_turn_decel"))
        with self._body_lock:
            old = self.body.params
            self.body.params = dataclasses.replace(
                old,
                max_speed=profile.get("max_speed", old.max_speed),
                max_turn_rate=profile.get("max_turn_rate", old.max_turn_rate),
                max_accel=old.max_accel if accel is None else accel,
                max_turn_accel=old.max_turn_accel if turn_accel is None else turn_accel,
            )
        return True
