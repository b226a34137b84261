"""The simulated base server (the original's dummy base, docs/design.md, made physical).

A :class:`~pluto.hardware.base.server.BaseServer` (its docstring describes the interfaces, the command rule and the
services) on the simulated body: commands move the body; the odometry, sonar ring, bumpers, stall and battery are
the body's. It also writes the true pose on ``Sim/Truth`` (for tests and plots only: no robot module may read it).

How the services are carried out here: geometry's model is ``sim``; with the motors off (motor_power, always
True), every command is taken as zero speed; velocity_mode changes nothing (the body moves the same in both);
speed_pid and position_pid are kept in ``pid_gains`` (the body has no controller to tune); speed_profile sets the
body's limits (it has one acceleration limit each way: a deceleration sets it when no acceleration is given).

A base started again by the supervisor after a crash goes on with the body where it was, odometry and battery
included (:mod:`pluto.runtime.persist`; saved at most every 0.2 s of wall time, with the body's time): the odometry
does not jump back to 0, and the true pose stays with it.

One service of the simulated base only: ``base/place`` [x, y, theta] -> True puts the body there at once (in the
world frame; the odometry does not see it), as when someone carries the robot elsewhere (a kidnapped robot). A
place inside a wall or an obstacle is refused.

A robot of a simulation of several (:mod:`pluto.sim.fleet`) starts where the world file places it and meets the
other robots' bodies as it meets walking people (:mod:`pluto.sim.others`): they block it, press its bumpers and echo
on its sonar. Each collision with another robot is counted, logged and noted in its MOM entry.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from pluto import kernels, msgs, names
from pluto.hardware.base.server import BaseGeometry, BaseServer, BaseServerParams, BaseState
from pluto.hardware.base.sim import BodyParams, BodyState, SimBody
from pluto.runtime.persist import Continuation, clock_run
from pluto.runtime.ranges import Accel, Radius, Rate, Speed, TurnAccel, TurnRate
from pluto.sim.device import SimDevice, SimDeviceParams
from pluto.sim.others import Contacts, OtherRobots


class SimBaseParams(SimDeviceParams, BaseServerParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    command_timeout: s without a new command after which the base stops.
    sonar_hz: rate of the sonar ring, Hz.
    radius, max_speed, max_turn_rate, max_accel, max_turn_accel: the body (m, m/s, rad/s, m/s², rad/s²).
    """

    rate_hz: Rate = 20.0
    sonar_hz: Rate = 10.0
    radius: Radius = 0.4
    max_speed: Speed = 1.5
    max_turn_rate: TurnRate = 2.0
    max_accel: Accel = 1.0
    max_turn_accel: TurnAccel = 3.0


class SimBaseState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted simulated base goes on from: the body, and the time of its last step (s)."""

    stamp: float
    pose: tuple[float, float, float]
    velocity: tuple[float, float, float]  # v, ω, the wheels' v
    odometry: tuple[float, float, float]
    odometry_velocity: tuple[float, float]
    energy_wh: float
    body_time: float
    scale: float
    next_sonar: float
    motors_on: bool
    rng: str  # the random generator's state, JSON (its integers are wider than MessagePack's)


class SimBase(BaseServer[SimBaseParams], SimDevice[SimBaseParams]):
    """The simulated base."""

    description = "the base: simulated (default) or a Pioneer over P2OS (--driver p2os --port URL)"
    provides = (*BaseServer.provides, names.SIM_TRUTH)
    Params = SimBaseParams

    others: OtherRobots | None = None
    """The other robots of a simulation of several (None until configured)."""

    def open_base(self) -> None:
        p = self.params
        self.load_simulation()
        body = BodyParams(
            radius=p.radius,
            max_speed=p.max_speed,
            max_turn_rate=p.max_turn_rate,
            max_accel=p.max_accel,
            max_turn_accel=p.max_turn_accel,
        )
        start = self.settings.start_pose(self.world)
        kernels.warm("body", self.get_logger())  # the body's compiled geometry now, before the first step
        self.body = SimBody(self.world.segments(), self.world.circles, start, body, self.noise, self.rng)
        self.others = OtherRobots(self, self.settings.others())
        self.contacts = Contacts(p.radius)
        own = next((m for m in self.settings.fleet if m.name == self.settings.robot), None)
        if own is not None and abs(own.radius - p.radius) > 1e-9:
            self.get_logger().warning(
                "the body's radius is %g m, and the other robots meet a disc of %g m (the world file's)",
                p.radius,
                own.radius,
            )
        self.truth = self.create_publisher(names.SIM_TRUTH)
        self._body_lock = threading.Lock()  # services change the body between steps
        self._last: float | None = None
        self._next_sonar = 0.0
        self._target = (0.0, 0.0)
        self.motors_on = True
        self.pid_gains: dict[str, dict[str, float]] = {"speed": {}, "position": {}}
        self.create_service("place", self._srv_place, list[float])
        self.continuation = Continuation.of(self, SimBaseState)
        loaded = self.continuation.load(self.clock.now(), clock_run(self.clock))
        if loaded is not None:
            self._restore(loaded[0])

    def _restore(self, state: SimBaseState) -> None:
        body = self.body
        body.x, body.y, body.theta = state.pose
        body.v, body.omega, body.wheel_v = state.velocity
        body.odom = list(state.odometry)
        body.odom_v, body.odom_omega = state.odometry_velocity
        body.energy_wh, body.t, body._scale = state.energy_wh, state.body_time, state.scale
        self._last, self._next_sonar, self.motors_on = state.stamp, state.next_sonar, state.motors_on
        self.rng.bit_generator.state = json.loads(state.rng)
        self.get_logger().warning(
            "restarted: the body goes on from %.3f s at (%.3f, %.3f, %.1f°), odometry (%.3f, %.3f, %.1f°)",
            state.stamp,
            body.x,
            body.y,
            math.degrees(body.theta),
            *state.odometry[:2],
            math.degrees(state.odometry[2]),
        )

    def _state(self) -> SimBaseState:
        body = self.body
        return SimBaseState(
            stamp=self._last if self._last is not None else 0.0,
            pose=(body.x, body.y, body.theta),
            velocity=(body.v, body.omega, body.wheel_v),
            odometry=(body.odom[0], body.odom[1], body.odom[2]),
            odometry_velocity=(body.odom_v, body.odom_omega),
            energy_wh=body.energy_wh,
            body_time=body.t,
            scale=body._scale,
            next_sonar=self._next_sonar,
            motors_on=self.motors_on,
            rng=json.dumps(self.rng.bit_generator.state),
        )

    def close_base(self) -> None:
        continuation = getattr(self, "continuation", None)  # None if the configuration failed before it
        if continuation is not None and self._last is not None:
            with self._body_lock:
                continuation.save(self._state(), self._last, clock_run(self.clock))

    def initial_state(self, now: float) -> BaseState:
        return self._state_of(now, self.body.state())

    def apply_command(self, v: float, omega: float, now: float) -> None:
        self._target = (v, omega) if self.motors_on else (0.0, 0.0)

    def read_state(self, now: float) -> BaseState | None:
        if self._last is None or now < self._last:
            self._last = now
            return None
        dt, self._last = now - self._last, now
        if dt <= 0:
            return None
        v, omega = self._target
        others = self.others
        robots = others.discs(now) if others is not None else None
        with self._body_lock:
            state = self.body.step(v, omega, dt, self._obstacles(now, robots))
            self.continuation.save_due(self._state, now, clock_run(self.clock))
        if others is not None and robots is not None and len(others):
            names_ = [m.name for m in others.members]
            for name in self.contacts.update(now, state.x, state.y, names_, robots):
                self.get_logger().warning(
                    "collided with robot %s at %.2f s at (%.2f, %.2f) m (%d collisions so far)",
                    name,
                    now,
                    state.x,
                    state.y,
                    self.contacts.count,
                )
        return self._state_of(now, state)

    def _obstacles(self, t: float, robots: Any = None) -> Any:
        """``(P, 3)`` what moves at time ``t`` (s) as discs: the world's people, and the other robots."""
        people = self.world.mover_circles(t)
        if self.others is None or not len(self.others):
            return people
        return np.vstack((people, self.others.discs(t) if robots is None else robots))

    def _state_of(self, now: float, s: BodyState) -> BaseState:
        """The base's readings for the body state ``s`` at time ``now``; writes the true pose on the way."""
        self.truth.write(msgs.Odometry(stamp=now, x=s.x, y=s.y, theta=s.theta, v=s.v, omega=s.omega))
        sonar = None
        if now >= self._next_sonar:
            self._next_sonar = now + 1.0 / self.params.sonar_hz
            sonar = msgs.SonarScan(
                stamp=now,
                ranges=self.body.sonar(self._obstacles(now)).tolist(),
                angles=self.body.sonar_angles.tolist(),
                max_range=self.body.params.sonar_max_range,
            )
        return BaseState(
            odometry=msgs.Odometry(
                stamp=now, x=s.odom_x, y=s.odom_y, theta=s.odom_theta, v=s.odom_v, omega=s.odom_omega
            ),
            contact=msgs.Contact(stamp=now, front=s.front_bumper, rear=s.rear_bumper, stall=s.stalled),
            power=msgs.Power(stamp=now, voltage=s.voltage, charge=s.charge),
            sonar=sonar,
        )

    # -- services -------------------------------------------------------------------------------------------------

    def geometry(self) -> BaseGeometry:
        r = self.body.params.radius
        poses = tuple((r * math.cos(a), r * math.sin(a), a) for a in self.body.sonar_angles.tolist())
        return BaseGeometry(model="sim", radius=r, sonar_poses=poses)

    def _srv_place(self, pose: list[float]) -> bool:
        if len(pose) != 3 or not all(math.isfinite(v) and abs(v) <= 1e6 for v in pose):
            raise ValueError(f"place takes [x m, y m, theta rad], finite, got {pose}")
        x, y, theta = pose
        with self._body_lock:
            if self.body.clearance(x, y, self._obstacles(self._last or 0.0)) <= self.body.params.radius:
                raise ValueError(f"({x}, {y}) is inside a wall or an obstacle")
            self.body.x, self.body.y, self.body.theta = float(x), float(y), float(theta)
        self.get_logger().info("placed by hand at (%.2f, %.2f, %.1f°)", x, y, math.degrees(theta))
        return True

    def notes(self) -> list[str]:
        notes = super().notes()
        if self.others is not None and len(self.others):
            last = self.contacts.last
            when = f" (last with {last[0]} at {last[1]:.2f} s)" if last is not None else ""
            notes.append(f"collisions with other robots: {self.contacts.count}{when}")
        return notes

    def set_motor_power(self, on: bool) -> bool:
        self.motors_on = on
        return True

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        with self._body_lock:
            self.body.odom = [x, y, theta]

    def set_pid_gains(self, which: str, gains: Mapping[str, float]) -> None:
        self.pid_gains[which] = {**self.pid_gains[which], **gains}

    def set_speed_profile(self, profile: Mapping[str, float]) -> None:
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
