"""The base server: what every base (simulated, a Pioneer over P2OS, ...) does on the bus, written once.

Reads velocity commands on ``Base/Drive/Command`` (velocity[0] = v m/s, velocity[1] = ω rad/s) and hands them to the
base; writes its odometry on ``Base/Drive/State``, its sonar ring on ``Base/Sonar``, bumpers and stall on
``Base/Contact`` and its battery on ``Base/Power``. A command older than ``command_timeout`` s (by the module's clock)
stops the base, so a dead commander never leaves it driving; a command with a value that is not finite is ignored
(counted in ``bad_commands`` and logged) and the one in force stays until it grows too old.

Services (``base/<name>``), with the same requests, checks and replies whatever the base; a base that cannot do
what one asks answers with an error that says why:
    geometry: -> {model, radius (m), sonar_poses [[x m, y m, heading rad], ...]}.
    motor_power: bool -> bool, whether the motors are now in the asked state (a robot with its e-stop engaged
        answers False). With the motors off, every command is taken as zero speed.
    velocity_mode: 'direct' (wheel velocities) or 'separate' (translation and rotation) -> the mode; the command in
        force is carried out again in the new mode.
    reset_odometry: -> True (the odometry restarts at 0).
    set_odometry: [x, y, theta] (m, m, rad, finite) -> True (the current pose is declared to be that).
    speed_pid, position_pid: {kp, ki, kv} (any subset, finite) -> True.
    speed_profile: {max_speed, max_accel, max_decel, max_turn_rate, max_turn_accel, max_turn_decel} (SI, any subset,
        each finite and > 0) -> True.

A base is a subclass that fills the hooks (:meth:`BaseServer.apply_command`, :meth:`BaseServer.read_state`,
:meth:`BaseServer.geometry`, :meth:`BaseServer.set_motor_power`, ...): module.py, the simulated base, and
p2os_module.py, a Pioneer. Bases are installed as drivers of the ``base`` module under the ``pluto.drivers.base``
entry-point group (see :mod:`pluto.runtime.registry`); ``pluto run base --driver p2os`` picks one.
"""

# Strategy: the shell owns the command rule and the service contract (principles 1, 5 and 6 of DESIGN.md), as
# python-can's bus base class owns the receive loop and the filters while each backend fills a couple of hooks.
# A base is told only what changes: apply_command is called when a new command arrives, with zeros when the one in
# force expires, and again with the one in force when a service changes how commands are carried out (motor power,
# velocity mode). So a base that forwards commands over a slow serial link sends each one once, and a simulated
# one keeps it as its target between steps. Requests are checked here before any hook sees them, so every base
# refuses the same bad requests with the same words; the hooks get SI floats only. Services run on bus threads,
# the step on the control thread: a base whose hooks share state guards it itself (the shell holds no lock
# around hooks, so a slow robot reply never blocks the step).

from __future__ import annotations

import abc
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

from pluto import msgs, names
from pluto.runtime.module import Module, ModuleParams

VELOCITY_MODES: Final = ("direct", "separate")
"""What ``velocity_mode`` takes: wheel velocities, or translation and rotation."""
PID_GAINS: Final = ("kp", "ki", "kv")
"""The gains ``speed_pid`` and ``position_pid`` take."""
SPEED_PROFILE_FIELDS: Final = (
    "max_speed",
    "max_accel",
    "max_decel",
    "max_turn_rate",
    "max_turn_accel",
    "max_turn_decel",
)
"""The limits ``speed_profile`` takes: m/s, m/s², m/s², rad/s, rad/s², rad/s²."""

_LOG_EVERY = 5.0
"""s: a fault that repeats is logged at most this often."""


class BaseServerParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Parameters every base has.

    Attributes:
        command_timeout: s without a new command after which the base stops.
    """

    command_timeout: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.command_timeout) and self.command_timeout > 0):
            raise ValueError(f"command_timeout must be > 0 s, got {self.command_timeout}")


@dataclass(frozen=True)
class BaseGeometry:
    """The shape of a base, as the ``geometry`` service tells it.

    Attributes:
        model: the robot's model (``sim``, ``p3dx``, ...).
        radius: of the circle around the robot, m.
        sonar_poses: (x m, y m, heading rad) of each sonar in the robot's frame.
    """

    model: str
    radius: float
    sonar_poses: tuple[tuple[float, float, float], ...] = ()


@dataclass(frozen=True)
class BaseState:
    """One reading of a base, for its interfaces.

    Attributes:
        odometry: for ``Base/Drive/State``.
        contact: for ``Base/Contact``.
        power: for ``Base/Power``.
        sonar: for ``Base/Sonar``; None when no new ring is due.
    """

    odometry: msgs.Odometry
    contact: msgs.Contact
    power: msgs.Power
    sonar: msgs.SonarScan | None = None


# -- the checks of the service requests ---------------------------------------------------------------------------


def check_velocity_mode(mode: str) -> str:
    """The ``velocity_mode`` request, checked.

    Raises:
        ValueError: not one of :data:`VELOCITY_MODES`.
    """
    if mode not in VELOCITY_MODES:
        raise ValueError(f"velocity_mode is 'direct' (wheel velocities) or 'separate' (v, omega), not {mode!r}")
    return mode


def check_pose(pose: Sequence[float]) -> tuple[float, float, float]:
    """The ``set_odometry`` request, checked: (x m, y m, theta rad).

    Raises:
        ValueError: not three finite numbers.
    """
    if len(pose) != 3 or not all(math.isfinite(value) for value in pose):
        raise ValueError(f"set_odometry takes [x, y, theta] (m, m, rad), finite, got {list(pose)}")
    return float(pose[0]), float(pose[1]), float(pose[2])


def check_pid_gains(which: str, gains: Mapping[str, float]) -> dict[str, float]:
    """A ``speed_pid`` or ``position_pid`` request (``which``: ``speed`` or ``position``), checked.

    Raises:
        ValueError: a gain other than kp, ki, kv, or one that is not finite.
    """
    unknown = sorted(set(gains) - set(PID_GAINS))
    if unknown or not all(math.isfinite(value) for value in gains.values()):
        raise ValueError(f"{which}_pid takes finite kp, ki, kv; got {dict(gains)}")
    return {name: float(value) for name, value in gains.items()}


def check_speed_profile(profile: Mapping[str, float]) -> dict[str, float]:
    """A ``speed_profile`` request, checked: any of :data:`SPEED_PROFILE_FIELDS` (SI).

    Raises:
        ValueError: an unknown field, or a value that is not finite and > 0.
    """
    unknown = sorted(set(profile) - set(SPEED_PROFILE_FIELDS))
    if unknown:
        raise ValueError(
            f"speed_profile: unknown field(s) {', '.join(unknown)}; known: {', '.join(SPEED_PROFILE_FIELDS)}"
        )
    if not all(math.isfinite(value) and value > 0 for value in profile.values()):
        raise ValueError(f"speed_profile values must be finite and > 0, got {dict(profile)}")
    return {name: float(value) for name, value in profile.items()}


def velocity_of(command: msgs.ActuatorState) -> tuple[float, float] | None:
    """(v m/s, ω rad/s) of a base command (a missing element is 0), or None if one is not finite."""
    v = float(command.velocity[0]) if len(command.velocity) > 0 else 0.0
    omega = float(command.velocity[1]) if len(command.velocity) > 1 else 0.0
    if not (math.isfinite(v) and math.isfinite(omega)):
        return None
    return v, omega


# -- the shell ------------------------------------------------------------------------------------------------------

P = TypeVar("P", bound=BaseServerParams)


class BaseServer(Module[P], metaclass=abc.ABCMeta):
    """The shell of every base: interfaces, the command rule, the services and the step; a base fills the hooks.

    Hooks a base must fill: :meth:`apply_command`, :meth:`read_state`, :meth:`geometry`, :meth:`set_motor_power`,
    :meth:`set_odometry`, :meth:`set_pid_gains`, :meth:`set_speed_profile`. It may fill :meth:`open_base`,
    :meth:`close_base`, :meth:`initial_state` and :meth:`reset_odometry`.

    Attributes:
        velocity_mode: how commands are to be carried out: ``direct`` or ``separate`` (see :meth:`apply_command`).
        bad_commands: commands ignored because a value was not finite.
    """

    name = "base"
    provides: ClassVar[tuple[str, ...]] = (
        names.BASE_DRIVE_STATE,
        names.BASE_SONAR,
        names.BASE_CONTACT,
        names.BASE_POWER,
    )
    Params = BaseServerParams

    # -- hooks ----------------------------------------------------------------------------------------------------

    def open_base(self) -> None:
        """Open the base (connect to the robot, load the simulation) and create the interfaces it has beyond the
        common ones. Called first when the module is configured; if the configuration fails after it,
        :meth:`close_base` is called.
        """

    def close_base(self) -> None:
        """Close what :meth:`open_base` opened. Called when the module stops, or when its configuration failed
        (then possibly before :meth:`open_base` finished): it must be safe to call twice."""

    def initial_state(self, now: float) -> BaseState | None:
        """The state to publish as soon as the interfaces exist (``now``: s, module clock), or None to wait for the
        first step."""
        return None

    @abc.abstractmethod
    def apply_command(self, v: float, omega: float, now: float) -> None:
        """Carry out a velocity command from now on, in :attr:`velocity_mode`; called from the step.

        Called when a new command arrives, with zeros when the one in force grows older than ``command_timeout``,
        and again with the one in force after ``motor_power`` or ``velocity_mode``: never twice for nothing.

        Args:
            v: forward speed, m/s (finite).
            omega: turn rate, rad/s, counter-clockwise positive (finite).
            now: s, module clock.
        """

    @abc.abstractmethod
    def read_state(self, now: float) -> BaseState | None:
        """The base's state at this step (``now``: s, module clock), or None if it has nothing new. Called at every
        step after the command; a base with interfaces of its own writes them here."""

    @abc.abstractmethod
    def geometry(self) -> BaseGeometry:
        """The shape of the base (the ``geometry`` service)."""

    @abc.abstractmethod
    def set_motor_power(self, on: bool) -> bool:
        """Turn the motors on or off; return whether they are now in the asked state."""

    @abc.abstractmethod
    def set_odometry(self, x: float, y: float, theta: float) -> None:
        """Declare the current pose of the odometry to be (x m, y m, theta rad)."""

    def reset_odometry(self) -> None:
        """Restart the odometry at 0 (by default: :meth:`set_odometry` to 0, 0, 0)."""
        self.set_odometry(0.0, 0.0, 0.0)

    @abc.abstractmethod
    def set_pid_gains(self, which: str, gains: Mapping[str, float]) -> None:
        """Set the gains of the ``speed`` or ``position`` controller (``which``); ``gains``: any of kp, ki, kv,
        finite. Raise ValueError with the reason if the base cannot."""

    @abc.abstractmethod
    def set_speed_profile(self, profile: Mapping[str, float]) -> None:
        """Set the speed and acceleration limits ``profile`` names (any of :data:`SPEED_PROFILE_FIELDS`, SI, each
        finite and > 0); the others stay."""

    # -- configuration --------------------------------------------------------------------------------------------

    def on_configure(self) -> None:
        try:
            self.open_base()
            self._create_interfaces()
            state = self.initial_state(self.clock.now())
        except BaseException:
            self.close_base()
            raise
        if state is not None:
            self.publish_state(state)

    def _create_interfaces(self) -> None:
        self.velocity_mode = "separate"
        self.bad_commands = 0
        self._last_bad_log = -math.inf
        self._command_lock = threading.Lock()
        self._reapply = False
        self._in_force = False  # a command other than zeros was handed to the base and has not expired yet
        self.commands = self.create_reader(names.BASE_DRIVE_COMMAND, max_age=self.params.command_timeout)
        self._seen = self.commands.received
        self.odometry = self.create_publisher(names.BASE_DRIVE_STATE)
        self.sonar_out = self.create_publisher(names.BASE_SONAR)
        self.contact = self.create_publisher(names.BASE_CONTACT)
        self.power = self.create_publisher(names.BASE_POWER)
        self.create_service("geometry", self._srv_geometry)
        self.create_service("motor_power", self._srv_motor_power, bool)
        self.create_service("velocity_mode", self._srv_velocity_mode, str)
        self.create_service("reset_odometry", self._srv_reset_odometry)
        self.create_service("set_odometry", self._srv_set_odometry, list[float])
        self.create_service("speed_pid", lambda gains: self._srv_pid("speed", gains), dict[str, float])
        self.create_service("position_pid", lambda gains: self._srv_pid("position", gains), dict[str, float])
        self.create_service("speed_profile", self._srv_speed_profile, dict[str, float])

    def on_shutdown(self) -> None:
        self.close_base()

    # -- the step -------------------------------------------------------------------------------------------------

    def step(self, now: float) -> None:
        command = self._take_command()
        if command is not None:
            self.apply_command(command[0], command[1], now)
        state = self.read_state(now)
        if state is not None:
            self.publish_state(state)

    def _take_command(self) -> tuple[float, float] | None:
        """What to hand to :meth:`apply_command` at this step, if anything changed: the newest command when it is
        new (or to be carried out again), zeros when the one in force expired."""
        with self._command_lock:
            reapply, self._reapply = self._reapply, False
        received = self.commands.received
        command = self.commands.read()  # None when there is none, or it is older than command_timeout
        if received != self._seen or reapply:
            self._seen = received
            if command is not None:
                velocity = velocity_of(command)
                if velocity is not None:
                    self._in_force = velocity != (0.0, 0.0)
                    return velocity
                if not reapply:
                    self._count_bad_command(command)
                return None
        if command is None and self._in_force:
            self._in_force = False
            return 0.0, 0.0
        return None

    def _count_bad_command(self, command: msgs.ActuatorState) -> None:
        self.bad_commands += 1
        now = time.monotonic()
        if now - self._last_bad_log >= _LOG_EVERY:
            self._last_bad_log = now
            self.get_logger().warning(
                "ignored a command with a value that is not finite: %s (%d so far)", command.velocity, self.bad_commands
            )

    def _reapply_command(self) -> None:
        """Have the next step hand the command in force to the base again."""
        with self._command_lock:
            self._reapply = True

    def publish_state(self, state: BaseState) -> None:
        """Write ``state`` on the base's interfaces."""
        self.odometry.write(state.odometry)
        self.contact.write(state.contact)
        self.power.write(state.power)
        if state.sonar is not None:
            self.sonar_out.write(state.sonar)

    # -- services -------------------------------------------------------------------------------------------------

    def _srv_geometry(self, _request: Any) -> dict[str, Any]:
        shape = self.geometry()
        return {"model": shape.model, "radius": shape.radius, "sonar_poses": [list(p) for p in shape.sonar_poses]}

    def _srv_motor_power(self, on: bool) -> bool:
        outcome = bool(self.set_motor_power(bool(on)))
        self._reapply_command()
        return outcome

    def _srv_velocity_mode(self, mode: str) -> str:
        self.velocity_mode = check_velocity_mode(mode)
        self._reapply_command()
        return self.velocity_mode

    def _srv_reset_odometry(self, _request: Any) -> bool:
        self.reset_odometry()
        return True

    def _srv_set_odometry(self, pose: list[float]) -> bool:
        self.set_odometry(*check_pose(pose))
        return True

    def _srv_pid(self, which: str, gains: dict[str, float]) -> bool:
        self.set_pid_gains(which, check_pid_gains(which, gains))
        return True

    def _srv_speed_profile(self, profile: dict[str, float]) -> bool:
        self.set_speed_profile(check_speed_profile(profile))
        return True
