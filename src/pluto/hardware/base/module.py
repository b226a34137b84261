"""The simulated base server (the original's dummy base, made physical).

Reads velocity commands on ``Base/Drive/Command`` (velocity[0] = v m/s, velocity[1] = ω rad/s) and moves the
simulated body; writes odometry on ``Base/Drive/State``, the sonar ring on ``Base/Sonar``, bumpers and stall on
``Base/Contact``, the battery on ``Base/Power``, and the true pose on ``Sim/Truth`` (for tests and plots only: no
robot module may read it). A command older than ``command_timeout`` stops the robot, so a dead commander never
leaves it driving.
"""

from __future__ import annotations

from typing import ClassVar

from pluto import msgs
from pluto.runtime.module import ModuleParams
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


class SimBase(SimDevice):
    """The simulated base."""

    name = "base"
    description = "the base: simulated (default) or a Pioneer over P2OS (--driver p2os --port URL)"
    driver = "sim"
    drivers: ClassVar[dict[str, str]] = {"p2os": "pluto.hardware.base.p2os_module:P2osBase"}
    provides = ("Base/Drive/State", "Base/Sonar", "Base/Contact", "Base/Power", "Sim/Truth")
    Params: ClassVar[type[ModuleParams]] = SimBaseParams

    def on_configure(self) -> None:
        p = self.params
        assert isinstance(p, SimBaseParams)
        self.load_simulation()
        body = BodyParams(
            radius=p.radius,
            max_speed=p.max_speed,
            max_turn_rate=p.max_turn_rate,
            max_accel=p.max_accel,
            max_turn_accel=p.max_turn_accel,
        )
        self.body = SimBody(self.world.segments(), self.world.circles, self.world.start, body, self.noise, self.rng)
        self.commands = self.create_reader("Base/Drive/Command", msgs.ActuatorState)
        self.odometry = self.create_publisher("Base/Drive/State", msgs.Odometry)
        self.sonar_out = self.create_publisher("Base/Sonar", msgs.SonarScan)
        self.contact = self.create_publisher("Base/Contact", msgs.Contact)
        self.power = self.create_publisher("Base/Power", msgs.Power)
        self.truth = self.create_publisher("Sim/Truth", msgs.Odometry)
        self._last: float | None = None
        self._last_command_seen = -1
        self._command_time = 0.0
        self._next_sonar = 0.0
        self.publish(self.clock.now(), self.body.state())

    def command(self, now: float) -> tuple[float, float]:
        """The velocity command in force: the newest one, or (0, 0) if it is too old."""
        assert isinstance(self.params, SimBaseParams)
        cmd = self.commands.read()
        if self.commands.received != self._last_command_seen:
            self._last_command_seen = self.commands.received
            self._command_time = now
        if cmd is None or now - self._command_time > self.params.command_timeout:
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
        assert isinstance(self.params, SimBaseParams)
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
