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
    calibration: -> {file, distance_scale, heading_gain, heading_bias}: the odometry calibration in force.

Odometry calibration: ``calibration_file`` names a TOML file (``pluto pose calibrate`` writes it) read at start::

    distance_scale = 1.012     # true metres per metre the wheels count
    heading_gain = 0.995       # true radians per radian the wheels count
    heading_bias = 0.0004      # rad the heading turns per metre driven forward that the wheels miss (back: -)

(each optional; ``*_std``, ``samples``, ``rho_rms``, ``gamma_rms`` and ``date`` may come along as notes). The base
then writes corrected odometry on ``Base/Drive/State``: each step's distance scaled, its turn multiplied by the gain
plus the bias times the distance, the velocities likewise. ``set_odometry`` and ``reset_odometry`` declare the
corrected pose.

A base is a subclass that fills the hooks (:meth:`BaseServer.apply_command`, :meth:`BaseServer.read_state`,
:meth:`BaseServer.geometry`, :meth:`BaseServer.set_motor_power`, ...): module.py, the simulated base, and
p2os_module.py, a Pioneer. Bases are installed as drivers of the ``base`` module under the ``pluto.drivers.base``
entry-point group (see :mod:`pluto.runtime.registry`); ``pluto run base --driver p2os`` picks one.
"""

# Strategy: the shell owns the command rule and the service contract (principles 1, 5 and 6 of docs/design.md), as
# python-can's bus base class owns the receive loop and the filters while each backend fills a couple of hooks.
# A base is told only what changes: apply_command is called when a new command arrives, with zeros when the one in
# force expires, and again with the one in force when a service changes how commands are carried out (motor power,
# velocity mode). So a base that forwards commands over a slow serial link sends each one once, and a simulated
# one keeps it as its target between steps. Requests are checked here before any hook sees them, so every base
# refuses the same bad requests with the same words; the hooks get SI floats only. Services run on bus threads,
# the step on the control thread: a base whose hooks share state guards it itself (the shell holds no lock
# around hooks, so a slow robot reply never blocks the step). The odometry calibration is applied here too, once for
# every base, to the increments between two readings of the base's own odometry (the base keeps counting as its
# wheels say); a set_odometry that runs while a reading is taken makes the shell skip that reading and start again
# from the next one, so a jump of the base's frame is never taken for motion.

from __future__ import annotations

import abc
import contextlib
import datetime
import math
import threading
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pluto import msgs, names
from pluto.errors import ConfigError
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.params import Params
from pluto.runtime.ranges import CommandTimeout, between

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

CALIBRATION_FACTORS: Final = ("distance_scale", "heading_gain", "heading_bias")
"""The values of a calibration file the base applies."""
CALIBRATION_NOTES: Final = (
    "distance_scale_std",
    "heading_gain_std",
    "heading_bias_std",
    "samples",
    "rho_rms",
    "gamma_rms",
    "date",
)
"""What else a calibration file may hold: how the values were measured (read, checked, not applied)."""
SCALE_RANGE: Final = (0.5, 2.0)
"""The range of distance_scale and heading_gain."""
MAX_HEADING_BIAS: Final = 0.2
"""rad/m: the largest heading_bias (11°/m: more is a broken wheel, not a calibration)."""

_LOG_EVERY = 5.0
"""s: a fault that repeats is logged at most this often."""


class BaseServerParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Parameters every base has.

    Attributes:
        command_timeout: s without a new command after which the base stops (by default the deadline of
            ``Base/Drive/Command`` in the interface table: four periods of its slowest regular writer).
        calibration_file: TOML file of the odometry calibration (see the module's docstring), read at start; "" for
            none (the base's odometry as it is).
    """

    command_timeout: CommandTimeout = 0.4  # the deadline of Base/Drive/Command (names.stale_after)
    calibration_file: str = ""


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


# -- the odometry calibration --------------------------------------------------------------------------------------


class OdometryCorrection(Params, kw_only=False, forbid_unknown_fields=True):
    """The corrections the base applies to its odometry (identity by default).

    Attributes:
        distance_scale: true distance per metre the wheels count.
        heading_gain: true rotation per radian the wheels count.
        heading_bias: rotation the wheels miss per metre driven forward (negative per metre backward), rad/m.

    Raises:
        ValueError: a value is not finite, a scale or gain is outside :data:`SCALE_RANGE`, or the bias is larger than
            :data:`MAX_HEADING_BIAS` (the message gives the range).
    """

    distance_scale: Annotated[float, between(*SCALE_RANGE)] = 1.0
    heading_gain: Annotated[float, between(*SCALE_RANGE)] = 1.0
    heading_bias: Annotated[float, between(-MAX_HEADING_BIAS, MAX_HEADING_BIAS)] = 0.0

    @property
    def identity(self) -> bool:
        """True if it changes nothing."""
        return self == OdometryCorrection()


def load_odometry_correction(path: str | Path) -> OdometryCorrection:
    """Read an odometry calibration file (``~`` expanded).

    Raises:
        ConfigError: the file cannot be read or is not TOML, has a key that is neither a factor
            (:data:`CALIBRATION_FACTORS`) nor a note (:data:`CALIBRATION_NOTES`), or a value of the wrong kind or out
            of range; the message names the file.
    """
    file = Path(path).expanduser()
    where = f"odometry calibration {file}"
    try:
        with open(file, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{where}: {err}") from None
    unknown = sorted(set(data) - set(CALIBRATION_FACTORS) - set(CALIBRATION_NOTES))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(CALIBRATION_FACTORS + CALIBRATION_NOTES)}"
        )
    for name, value in data.items():
        if name == "date":
            if not isinstance(value, datetime.date | datetime.time | str):
                raise ConfigError(f"{where}: date must be a date or a string, got {value!r}")
        elif name == "samples":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{where}: samples must be a whole number >= 0, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: {name} must be a number, got {value!r}")
    try:
        return OdometryCorrection(**{name: float(data[name]) for name in CALIBRATION_FACTORS if name in data})
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None


class OdometryCorrector:
    """Applies an :class:`OdometryCorrection` to a base's odometry, reading after reading.

    Between two readings of the base's odometry (x, y, θ continuous), the step's chord in the frame of the first
    reading gives the distance driven (its length, its forward part for the bias) and θ's change the turn. The
    corrected turn is ``gain · turn + bias · forward``; the chord, scaled, is laid along the corrected heading (its
    angle to the heading shifted by half the change of the turn, as an arc's chord lies half-way through the turn).
    The first reading, one after :meth:`anchor` and one stamped before the last (a new run) are taken as they are.

    Args:
        correction: what to apply.
    """

    def __init__(self, correction: OdometryCorrection) -> None:
        self.correction = correction
        self._last: msgs.Odometry | None = None
        self._pose = (0.0, 0.0, 0.0)

    def anchor(self) -> None:
        """Take the next reading as it is (the base's frame was declared anew): the corrected pose goes on from it."""
        self._last = None

    def correct(self, raw: msgs.Odometry) -> msgs.Odometry:
        """The corrected odometry for the base's reading ``raw``."""
        c = self.correction
        last = self._last
        if last is None or raw.stamp < last.stamp:
            x, y, theta = raw.x, raw.y, raw.theta
        else:
            x, y, theta = self._pose
            dx, dy = raw.x - last.x, raw.y - last.y
            cos0, sin0 = math.cos(last.theta), math.sin(last.theta)
            forward, left = cos0 * dx + sin0 * dy, -sin0 * dx + cos0 * dy
            turn = raw.theta - last.theta
            true_turn = c.heading_gain * turn + c.heading_bias * forward
            chord = math.hypot(forward, left)
            if chord > 0.0:
                direction = theta + math.atan2(left, forward) + 0.5 * (true_turn - turn)
                x += c.distance_scale * chord * math.cos(direction)
                y += c.distance_scale * chord * math.sin(direction)
            theta += true_turn
        self._last = raw
        self._pose = (x, y, theta)
        return msgs.Odometry(
            stamp=raw.stamp,
            x=x,
            y=y,
            theta=theta,
            v=c.distance_scale * raw.v,
            omega=c.heading_gain * raw.omega + c.heading_bias * raw.v,
        )


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
        self._load_calibration()  # first: a bad file leaves nothing open
        try:
            self.open_base()
            self._create_interfaces()
            state = self.initial_state(self.clock.now())
        except BaseException:
            self.close_base()
            raise
        if state is not None:
            self.publish_state(state)

    def _load_calibration(self) -> None:
        path = self.params.calibration_file
        self.correction = load_odometry_correction(path) if path else OdometryCorrection()
        self._corrector = None if self.correction.identity else OdometryCorrector(self.correction)
        self._odometry_lock = threading.Lock()
        self._odometry_sets = 0  # set_odometry and reset_odometry begun plus ended: odd while one runs
        if path:
            c = self.correction
            self.get_logger().info(
                "odometry calibration from %s: distance_scale %g, heading_gain %g, heading_bias %g rad/m",
                path,
                c.distance_scale,
                c.heading_gain,
                c.heading_bias,
            )

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
        self.create_service("calibration", self._srv_calibration)

    def on_shutdown(self) -> None:
        self.close_base()

    # -- the step -------------------------------------------------------------------------------------------------

    def step(self, now: float) -> None:
        command = self._take_command()
        if command is not None:
            self.apply_command(command[0], command[1], now)
        sets = self._odometry_sets  # before the reading: did a set_odometry run while it was taken?
        state = self.read_state(now)
        if state is not None:
            self._publish(state, sets)

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
        """Write ``state`` on the base's interfaces (the odometry corrected by the calibration)."""
        self._publish(state, self._odometry_sets)

    def _publish(self, state: BaseState, sets: int) -> None:
        """Write ``state``, read when the count of odometry declarations was ``sets``."""
        odometry = self._corrected(state.odometry, sets)
        if odometry is not None:
            self.odometry.write(odometry)
        self.contact.write(state.contact)
        self.power.write(state.power)
        if state.sonar is not None:
            self.sonar_out.write(state.sonar)

    def _corrected(self, odometry: msgs.Odometry, sets: int) -> msgs.Odometry | None:
        """The odometry to write for a reading taken when the count of declarations was ``sets``: the reading itself
        without a calibration; corrected with one; None when a declaration ran meanwhile (the reading may be in the
        old frame or the new one: the next one is taken as it is)."""
        if self._corrector is None:
            return odometry
        with self._odometry_lock:
            if sets % 2 or sets != self._odometry_sets:
                self._corrector.anchor()
                return None
            return self._corrector.correct(odometry)

    @contextlib.contextmanager
    def _declaring_odometry(self) -> Iterator[None]:
        """Around a set_odometry or reset_odometry hook: readings taken meanwhile are not corrected as motion."""
        with self._odometry_lock:
            self._odometry_sets += 1
        try:
            yield
        finally:
            with self._odometry_lock:
                self._odometry_sets += 1
                if self._corrector is not None:
                    self._corrector.anchor()

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
        with self._declaring_odometry():
            self.reset_odometry()
        return True

    def _srv_set_odometry(self, pose: list[float]) -> bool:
        x, y, theta = check_pose(pose)
        with self._declaring_odometry():
            self.set_odometry(x, y, theta)
        return True

    def _srv_pid(self, which: str, gains: dict[str, float]) -> bool:
        self.set_pid_gains(which, check_pid_gains(which, gains))
        return True

    def _srv_speed_profile(self, profile: dict[str, float]) -> bool:
        self.set_speed_profile(check_speed_profile(profile))
        return True

    def _srv_calibration(self, _request: Any) -> dict[str, Any]:
        c = self.correction
        return {
            "file": self.params.calibration_file,
            "distance_scale": c.distance_scale,
            "heading_gain": c.heading_gain,
            "heading_bias": c.heading_bias,
        }
