"""The robot as the P2OS client sees it: SIPs in, the state in SI out.

    tracker = StateTracker("socket://127.0.0.1:8101", model=None)
    tracker.identify(sync2_reply)          # the model's parameters, from the SYNC2 echo (or the model given)
    tracker.on_sip(sip, now)               # the pose in the client's odometry frame, the sonar, the flags
    tracker.state                          # P2osState, SI

This is the receiving half of the client's codec: robot units (:mod:`.sip`, :mod:`.models`) become SI here, and
nothing here sends, times out or knows the link. :class:`.client.P2osClient` feeds it.
"""

# Strategy: the pose is the OdometryIntegrator's (odometry.py: a continuous pose from the robot's 15-bit counters),
# composed with an offset that set_odometry moves, so the client can declare a pose without telling the robot.
# After SETO the robot's counters restart at 0, but a SIP sent before SETO took effect still shows the old position
# and must not seed the integrator: for SETO_SETTLE s a SIP far from the origin is taken as the origin. A SIP whose
# step was impossible (a damaged packet that passed the checksum, or counters that jumped) is held until the next
# SIP tells (odometry.py), and none of its fields is used meanwhile. Sonar ranges are kept per transducer: a SIP
# carries only the readings new since the last one.

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass, replace

from .models import DEFAULT_SUBCLASS, ROBOT_PARAMS, RobotParams, UnknownRobotWarning, robot_params, signed_15bit
from .odometry import OdometryIntegrator
from .sip import ConfigPacket, Sip, SyncReply

__all__ = ["SETO_SETTLE", "P2osState", "Pose", "StateTracker"]

log = logging.getLogger("pluto.p2os")

SETO_SETTLE = 0.5
"""After SETO, SIPs still showing the old position are ignored for at most this long, s."""

Pose = tuple[float, float, float]
"""x m, y m, theta rad."""
_IDENTITY: Pose = (0.0, 0.0, 0.0)


def _compose(a: Pose, b: Pose) -> Pose:
    """Pose ``b`` given in the frame of pose ``a``, in a's parent frame (headings add, not wrapped)."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], a[2] + b[2]


def _inverse(a: Pose) -> Pose:
    """The pose that composes with ``a`` to the identity."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return -c * a[0] - s * a[1], s * a[0] - c * a[1], -a[2]


def _with_pose(state: P2osState, pose: Pose) -> P2osState:
    return replace(state, x=pose[0], y=pose[1], theta=pose[2])


@dataclass(frozen=True, slots=True)
class P2osState:
    """The robot as its newest SIP shows it, in SI.

    Attributes:
        stamp: when the SIP arrived, s (the ``now`` it was received with).
        x, y: position in the odometry frame, m (continuous; set_odometry and reset_odometry move the frame).
        theta: heading, rad, continuous (not wrapped).
        v, omega: forward and rotational velocity from the wheels, m/s and rad/s.
        left_velocity, right_velocity: wheel velocities, m/s.
        battery_voltage: V.
        charge_state: the ARCOS charge state code (0 not charging, 1 bulk, 2 overcharge, 3 float, 4 balance), or
            None if the robot does not report it.
        motors_enabled: the motors are enabled (SIP flags bit 0).
        estop: the emergency stop is engaged (SIP flags bit 5): the motors will not enable.
        moving: the robot says it is moving (SIP type 0x33; some simulators always say stopped).
        front_bumpers, rear_bumpers: the bumper switches, bit 0 = the first switch.
        left_stall, right_stall: a wheel is stalled.
        sonar_ranges: the newest range of each transducer by sonar number, m; inf until it has reported.
        sips: SIPs received since the client was created.
    """

    stamp: float
    x: float
    y: float
    theta: float
    v: float
    omega: float
    left_velocity: float
    right_velocity: float
    battery_voltage: float
    charge_state: int | None
    motors_enabled: bool
    estop: bool
    moving: bool
    front_bumpers: int
    rear_bumpers: int
    left_stall: bool
    right_stall: bool
    sonar_ranges: tuple[float, ...]
    sips: int

    @property
    def front_bumper(self) -> bool:
        """A front bumper switch is pressed."""
        return self.front_bumpers != 0

    @property
    def rear_bumper(self) -> bool:
        """A rear bumper switch is pressed."""
        return self.rear_bumpers != 0

    @property
    def stalled(self) -> bool:
        """A wheel is stalled."""
        return self.left_stall or self.right_stall

    @property
    def charging(self) -> bool:
        """The robot reports that it is charging (ARCOS charge state 1..4)."""
        return self.charge_state is not None and 1 <= self.charge_state <= 4


class StateTracker:
    """The robot's identity, model, newest state and CONFIGpac, from what it sends.

    Args:
        port_name: where the robot is, for log lines.
        model: the robot subclass whose parameters to use; None to take it from the SYNC2 echo.
    """

    def __init__(self, port_name: str, model: str | None) -> None:
        self._name = port_name
        self._model = model
        self._identity: SyncReply | None = None
        self._params: RobotParams | None = None
        self._integrator: OdometryIntegrator | None = None
        self._offset: Pose = _IDENTITY
        self._seto_until: float | None = None
        self._sonar: list[float] = []
        self._state: P2osState | None = None
        self._config: ConfigPacket | None = None
        self._sips = 0
        self._configs = 0

    @property
    def identity(self) -> SyncReply | None:
        """The SYNC2 echo (None before the first one)."""
        return self._identity

    @property
    def params(self) -> RobotParams | None:
        """The model's parameters (None before the first SYNC2 echo)."""
        return self._params

    @property
    def integrator(self) -> OdometryIntegrator | None:
        """The odometry integrator of the model (None before the first SYNC2 echo)."""
        return self._integrator

    @property
    def state(self) -> P2osState | None:
        """The newest state (None before the first SIP)."""
        return self._state

    @property
    def config(self) -> ConfigPacket | None:
        """The newest CONFIGpac (None if the robot sent none)."""
        return self._config

    @property
    def sips(self) -> int:
        """SIPs taken so far (a held one is not counted)."""
        return self._sips

    @property
    def configs(self) -> int:
        """CONFIGpacs received so far."""
        return self._configs

    def identify(self, reply: SyncReply) -> None:
        """The SYNC2 echo: choose the model's parameters (a new model starts a new integrator and sonar)."""
        params = self._select_params(reply)
        if self._params is None or self._params.subclass != params.subclass:
            self._params = params
            self._integrator = OdometryIntegrator(params)
            self._sonar = [math.inf] * params.sonar_count
        self._identity = reply

    def on_config(self, config: ConfigPacket) -> None:
        """A CONFIGpac arrived."""
        self._config = config
        self._configs += 1

    def reset_odometry(self, now: float) -> None:
        """SETO was sent at ``now`` s: the pose is (0, 0, 0) from here."""
        self._offset = _IDENTITY
        self._seto_until = now + SETO_SETTLE
        if self._state is not None:
            self._state = _with_pose(self._state, _IDENTITY)

    def set_odometry(self, pose: Pose) -> None:
        """Declare the current pose (x m, y m, theta rad; finite): later SIPs move on from it."""
        integrator = self._integrator
        raw = integrator.pose if integrator is not None else None
        self._offset = _compose(pose, _inverse(raw if raw is not None else _IDENTITY))
        if self._state is not None:
            self._state = _with_pose(self._state, pose)

    def _select_params(self, reply: SyncReply) -> RobotParams:
        if self._model is not None:
            wanted, source = self._model, "given"
        else:
            wanted, source = reply.subclass or "", "reported by the robot"
        if wanted.strip().lower() in ROBOT_PARAMS:
            return robot_params(wanted)
        log.warning(
            "unknown robot subclass %r (%s) on %s: using the default (%s) parameters",
            wanted,
            source,
            self._name,
            DEFAULT_SUBCLASS,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnknownRobotWarning)
            params = robot_params(wanted)
        warnings.warn(
            f"unknown robot subclass {wanted!r} on {self._name}: using the default parameters",
            UnknownRobotWarning,
            stacklevel=2,
        )
        return params

    def on_sip(self, sip: Sip, now: float) -> None:
        """A SIP arrived at ``now`` s: the new state (or the SIP is held, see the strategy)."""
        params = self._params
        integrator = self._integrator
        if params is None or integrator is None:  # pragma: no cover - set before OPEN
            return
        pose: Pose | None = None
        if self._seto_until is not None:
            # After SETO the robot's counters restart at 0; a SIP sent before it took effect still shows the old
            # position and must not seed the integrator.
            near = params.position_to_m(abs(signed_15bit(sip.x)) + abs(signed_15bit(sip.y)))
            if near > 0.05 + params.max_velocity * 0.2 and now < self._seto_until:
                pose = _IDENTITY
            else:
                if now >= self._seto_until:
                    log.warning(
                        "the robot on %s did not confirm SETO within %.1f s; odometry reset from here",
                        self._name,
                        SETO_SETTLE,
                    )
                self._seto_until = None
                integrator.reset()
        if pose is None:
            update = integrator.update(sip, now)
            if update.held:
                # its step was impossible: a damaged packet that passed the checksum, or the counters jumped; the
                # next SIP tells, and until then none of this SIP's fields is trusted
                log.warning(
                    "a SIP from %s moved the robot %.2f m since the last one: held until the next SIP confirms it",
                    self._name,
                    update.distance,
                )
                return
            pose = _compose(self._offset, (update.x, update.y, update.theta))
        v, omega = params.twist(sip.left_velocity, sip.right_velocity)
        for reading in sip.sonars:
            if reading.number < len(self._sonar):
                self._sonar[reading.number] = params.range_to_m(reading.range)
        battery = sip.battery_x10 if sip.battery_x10 is not None else sip.battery
        self._sips += 1
        self._state = P2osState(
            stamp=now,
            x=pose[0],
            y=pose[1],
            theta=pose[2],
            v=v,
            omega=omega,
            left_velocity=params.velocity_to_m_s(sip.left_velocity),
            right_velocity=params.velocity_to_m_s(sip.right_velocity),
            battery_voltage=battery / 10.0,
            charge_state=sip.charge_state,
            motors_enabled=sip.motors_enabled,
            estop=sip.estop,
            moving=sip.moving,
            front_bumpers=sip.front_bumpers,
            rear_bumpers=sip.rear_bumpers,
            left_stall=sip.left_stall,
            right_stall=sip.right_stall,
            sonar_ranges=tuple(self._sonar),
            sips=self._sips,
        )
