"""The player module: a Player 1.5 server (TCP, port 6665) in front of the robot's bus.

Devices: position (4) from ``Base/Drive/State`` with stall from ``Base/Contact``; position3d (30) from
``Localization/Pose``; laser (6) from ``Sick/Scan_mm``; sonar (5) from ``Base/Sonar``. A device opens when the
module behind it runs (base, localization, sick); otherwise the client is granted ``e``.

Commands of clients with write access: a velocity goes to ``drive/command`` (cmd_flags 0; 10 with ``protect``) when
the drive module runs, else straight to ``Base/Drive/Command``, and is held (written again every
``resend_period`` s) until another command, until the last client with write access closes, or until no velocity
command has come for ``command_timeout`` s (1 by default); each of the last two commands zero speed once. So a
client must renew its velocity command within ``command_timeout`` s (libplayerc programs that set the speed in
their read loop do, at every round) or the robot stops: a client that hangs, or whose network goes away without
its connection closing, cannot leave the robot moving. ``command_timeout`` 0 holds a velocity for ever, as the
Player 1.5 server did; that is unsafe (a silent client keeps the robot moving until its connection closes) and
meant only for old clients that set a speed once and then only read. A position command (position: type 1, in
the odometry frame of its data; position3d: after POSITION_MODE 1, in the frame of the localization pose) is a goto
of the avoid module (``avoidance/command``, cmd_flags 10·``goto_avoidance`` + 2), when it runs; a goto ends by
itself and does not lapse.

SET_ODOM and RESET_ODOM declare the robot's current odometry pose, as Player's position interface defines them: the
position device reads back exactly the pose declared, and the robot does not move. The gateway keeps the declared
frame itself (as the 1.5 p2os driver kept offsets): the base's odometry on the bus, which the localization and the
other modules integrate, never jumps. Position commands (type 1) are in the declared frame. The frame is forgotten
when the base goes away or the simulated time restarts (a new odometry starts at 0).

The other configuration requests of position and position3d go to the base's services (``base/geometry``,
``motor_power``, ``velocity_mode``, ``speed_pid``, ``position_pid``, ``speed_profile``): ACK when the base carries
them out, NACK when it refuses or does not answer; the RMP requests get NACK (no Segway here). The laser's
configuration is a view of the scans (field of view, every other beam, range unit). Laser intensities: the
scanners behind Pluto (simulated and SICK alike, on ``Sick/Scan_mm``) measure no reflectivity, so a SET_CONFIG that
asks for intensities is carried out for the rest (field of view, resolution, range unit) and answered with the
configuration in force, whose intensity flag is 0, as GET_CONFIG says afterwards; the data's intensities are 0. A
NACK would make the many clients that ask for intensities by habit lose their field of view too; an echoed 1 would
promise values that never come. The sonar's power cannot be switched (NACK).

Every value a client sends is range-checked with :mod:`pluto.limits` before anything is written to the bus: a
velocity or goal outside what the robot can physically do (or a SET_ODOM pose outside ±1,000 km) is refused: a
request gets NACK, a command is dropped and counted (``ServerStatistics.refused_commands``), and the client stays
connected.

AUTH: the key is never a parameter (parameters travel on command lines, where ``ps`` shows them): it comes from the
file ``key_file`` names (its first line; a file others can read is warned about) or else from the environment
variable ``PLUTO_PLAYER_KEY``. Connections are guarded as :mod:`.server` says (idle timeout, caps per address and in
all, a growing block of addresses that send wrong keys).

Header times: with ``use_sim_time`` the module's clock is the simulated time the data is stamped with. Without it,
when a simulator (or a replay) publishes ``Clock`` and the data is stamped on that time, the headers' ``time`` is
put on that clock too (see :mod:`.frames`), so that both header times of a message come from one clock.

Run it with ``pluto player [--port N]`` or ``pluto run player``; ``host`` is the loopback unless configured.
"""

# Strategy: the module is the shell of principle 1 (docs/design.md): protocol and session logic live in protocol.py,
# structs.py and session.py, the conversions in devices.py, the held command in motion.py, the sockets in
# server.py. The module's step (at ``rate_hz`` on the module clock, so simulated time drives the rounds) reads the
# newest bus values with non-blocking readers, builds each device's payload once when its source changed, and
# hands the payloads and the time to the server's loop; Zenoh callbacks never see the server. Which modules run
# comes from a liveliness watch (no blocking query on the server's thread). Configuration requests run on the
# server's worker threads and may call the base's services; commands only update the held command under a lock,
# and the step writes it. A goto that must first restart the avoid module's control step (a service call) is
# sent from a worker thread of the module's own, so the step never waits on the bus. When the simulated time jumps
# back (a new run, a replay started again), on_clock_jump drops the held commands and the next step drops the old
# run's data and restarts the server's rounds (handed to its loop before that step's tick), so the clients get the
# new run's data at once.

from __future__ import annotations

import concurrent.futures
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec

from pluto import limits, msgs, names
from pluto.errors import ConfigError
from pluto.gateways.player.devices import (
    DeviceKey,
    DeviceSpec,
    Goal,
    Velocity,
    laser_data,
    laser_geometry,
    laser_native_config,
    laser_settings,
    position3d_data,
    position3d_goal,
    position3d_velocity,
    position_data,
    position_geometry,
    position_goal,
    position_velocity,
    sonar_data,
    sonar_geometry,
)
from pluto.gateways.player.frames import OdometryFrame, stamp_clock_offset
from pluto.gateways.player.motion import MotionAction, MotionHold, ReleaseAvoid, SendGoal, WriteVelocity
from pluto.gateways.player.protocol import DeviceCode
from pluto.gateways.player.server import CommandRefused, ConfigRefused, PlayerServer
from pluto.gateways.player.session import Sample
from pluto.gateways.player.structs import (
    AUTH_KEY_SIZE,
    CommandStruct,
    ConfigStruct,
    LaserConfig,
    LaserGeometry,
    LaserRequest,
    MotorPower,
    PidRequest,
    Position3dCommand,
    PositionCommand,
    PositionGeometry,
    PositionMode,
    PositionRequest,
    ResetOdometry,
    RmpConfig,
    SetOdometry,
    SonarGeometry,
    SonarPower,
    SpeedProfile,
    VelocityMode,
)
from pluto.geometry import compose, relative
from pluto.movement.avoid.core import RELEASE, Mode
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import CommandTimeout, Port, Rate, Speed, Timeout, TurnRate, between

__all__ = ["KEY_ENVIRONMENT", "PlayerModule", "PlayerParams", "load_key"]

KEY_ENVIRONMENT = "PLUTO_PLAYER_KEY"
"""The environment variable that holds the AUTH key when no ``key_file`` is given."""

POSITION: DeviceKey = (DeviceCode.POSITION, 0)
POSITION3D: DeviceKey = (DeviceCode.POSITION3D, 0)
LASER: DeviceKey = (DeviceCode.LASER, 0)
SONAR: DeviceKey = (DeviceCode.SONAR, 0)
_MOTION_DEVICES = (POSITION, POSITION3D)


class PlayerParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    host: address to listen on (127.0.0.1: this computer only; 0.0.0.0: every network).
    port: TCP port (6665 is Player's).
    key_file: a file whose first line is the AUTH key clients must send first (at most 32 bytes); empty: the key
        is the environment variable PLUTO_PLAYER_KEY, and without it there is none.
    key: not a parameter any more (parameters show on command lines): setting it is an error that says so.
    max_clients: connections served at once.
    max_per_address: connections served at once from one address.
    idle_timeout: s after which a connection that holds no device and sends nothing is closed.
    auth_backoff, auth_backoff_max: s an address is blocked after a wrong key, doubled at each one up to the max.
    resend_period: s between writes of a held velocity command.
    command_timeout: s without a new velocity command from the clients with write access after which the held
        velocity lapses and the robot is stopped; 0 holds it for ever (Player 1.5's behaviour: unsafe, a client
        that hangs while connected keeps the robot moving).
    protect: velocity commands through the drive module with its sonar protection (cmd_flags 10, not 0).
    goto_avoidance: A of the avoid module's goto (0 none, 1 sonar, 2 laser, 3 both).
    goto_speed, goto_turn_rate: limits of a goto whose command gives none, m/s, rad/s.
    laser_pose: (x m, y m, yaw rad) of the laser on the robot (laser GET_GEOM).
    laser_size: (width m, length m) of the laser.
    service_timeout: s to wait for the base's answer to a configuration request.
    """

    rate_hz: Rate = 50.0
    host: str = "127.0.0.1"
    port: Port = 6665
    key_file: str = ""
    key: str = ""
    max_clients: Annotated[int, between(1, 100000)] = 256
    max_per_address: Annotated[int, between(1, 100000)] = 128
    idle_timeout: Timeout = 60.0
    auth_backoff: Timeout = 1.0
    auth_backoff_max: Timeout = 60.0
    resend_period: Timeout = 0.1
    command_timeout: Annotated[float, between(0.0, 60.0)] = 1.0
    protect: bool = False
    goto_avoidance: Annotated[int, between(0, 3)] = 3
    goto_speed: Speed = 0.5
    goto_turn_rate: TurnRate = 1.0
    laser_pose: list[Annotated[float, between(-5.0, 5.0)]] = msgspec.field(default_factory=lambda: [0.25, 0.0, 0.0])
    laser_size: list[Annotated[float, between(0.0, 5.0)]] = msgspec.field(default_factory=lambda: [0.155, 0.155])
    service_timeout: CommandTimeout = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.key:
            raise ValueError(
                "the AUTH key is not a parameter (parameters show on command lines and in logs): put it in a file "
                f"and give its path as key_file, or set the environment variable {KEY_ENVIRONMENT}"
            )
        if len(self.laser_pose) != 3 or len(self.laser_size) != 2:
            raise ValueError("laser_pose is [x, y, yaw] (m, m, rad) and laser_size [width, length] (m)")


def load_key(key_file: str, environ: Mapping[str, str] = os.environ) -> tuple[bytes, str]:
    """The AUTH key and where it came from: the first line of ``key_file``, else ``PLUTO_PLAYER_KEY``, else none.

    Returns:
        (key, source): the key (b"" for none) and a description of its source for a log line (never the key).

    Raises:
        ConfigError: the file cannot be read, or the key is empty, over 32 bytes or holds a NUL.
    """
    if key_file:
        path = Path(key_file).expanduser()
        try:
            raw = path.read_bytes()
        except OSError as err:
            raise ConfigError(f"player: cannot read the key file {path}: {err.strerror or err}") from err
        key, source = raw.split(b"\n", 1)[0].rstrip(b"\r"), f"the file {path}"
        if not key:
            raise ConfigError(f"player: the key file {path} is empty (the key is its first line)")
    elif KEY_ENVIRONMENT in environ:
        key, source = environ[KEY_ENVIRONMENT].encode(), f"the environment variable {KEY_ENVIRONMENT}"
        if not key:
            raise ConfigError(f"player: {KEY_ENVIRONMENT} is set but empty")
    else:
        return b"", "none"
    if len(key) > AUTH_KEY_SIZE or b"\0" in key:
        raise ConfigError(f"player: the key from {source} must be at most {AUTH_KEY_SIZE} bytes, without NUL")
    return key, source


def _readable_by_others(path: str) -> bool:
    try:
        mode = Path(path).expanduser().stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


class PlayerModule(Module[PlayerParams]):
    """A Player 1.5 server: position, position3d, laser and sonar of the robot over TCP."""

    name: ClassVar[str] = "player"
    description: ClassVar[str] = "Player 1.5 server (TCP 6665): position, position3d, laser, sonar"
    provides: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    Params = PlayerParams

    server: PlayerServer

    def on_configure(self) -> None:
        p = self.params
        key, source = load_key(p.key_file)  # first: a bad key file leaves nothing open
        self.odometry_in = self.create_reader(names.BASE_DRIVE_STATE)
        self.contact_in = self.create_reader(names.BASE_CONTACT)
        self.sonar_in = self.create_reader(names.BASE_SONAR)
        self.scan_in = self.create_reader(names.SICK_SCAN_MM)
        self.pose_in = self.create_reader(names.LOCALIZATION_POSE)
        self.drive_out = self.create_publisher(names.DRIVE_COMMAND)
        self.base_out = self.create_publisher(names.BASE_DRIVE_COMMAND)
        self.avoid_out = self.create_publisher(names.AVOIDANCE_COMMAND)
        self._state_lock = threading.Lock()  # the live modules, the held motion, the clients' settings
        self._live: set[str] = set()
        self.motion = MotionHold(p.resend_period, p.command_timeout)
        self._last_lapse_log = -math.inf
        self.position_mode: dict[DeviceKey, bool] = {POSITION: False, POSITION3D: False}
        self.clock_in = None if p.use_sim_time else self.create_reader(names.CLOCK)
        self.laser_config: LaserConfig | None = None
        self._laser_version = 0
        self.odometry_frame = OdometryFrame()
        self._frame_version = 0
        # The step's samples against a request that rebuilds one; taken before _state_lock, never inside it.
        self._samples_lock = threading.Lock()
        self._geometry: dict[str, Any] | None = None
        self.ignored_commands = 0
        self._last_ignored_log = -math.inf
        self._samples: dict[DeviceKey, Sample] = {}
        self._sources: dict[DeviceKey, tuple[object, ...]] = {}
        self._restarted = False
        self._goals = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="player-goto")
        self._watch = self.bus.watch_modules(self._on_module)
        alive = self.bus.live_modules()  # the watch reports them too, a little later: devices open from the start
        with self._state_lock:
            self._live.update(alive)
        if key:
            self.get_logger().info("player: clients must AUTH with the key from %s", source)
            if p.key_file and _readable_by_others(p.key_file):
                self.get_logger().warning("player: the key file %s can be read by others (chmod 600 it)", p.key_file)
        self.server = PlayerServer(
            self,
            host=p.host,
            port=p.port,
            key=key,
            robot=self.bus.robot,
            max_frequency=p.rate_hz,
            max_clients=p.max_clients,
            max_per_address=p.max_per_address,
            idle_timeout=p.idle_timeout,
            auth_backoff=p.auth_backoff,
            auth_backoff_max=p.auth_backoff_max,
        )
        try:
            self.server.start()
        except OSError as err:
            self._goals.shutdown(wait=False)
            self.bus.release(self._watch)
            raise ConfigError(f"player: cannot listen on {p.host}:{p.port}: {err}") from err

    def on_shutdown(self) -> None:
        server = getattr(self, "server", None)
        if server is None:
            return
        server.close()  # every connection closes: the last writer's release stops the robot
        self._apply(self._motion_step(self.clock.now()), self.clock.now())
        self._goals.shutdown(wait=True)
        self.bus.release(self._watch)

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self.server.port

    def _on_module(self, name: str, alive: bool) -> None:
        with self._state_lock:
            if alive:
                self._live.add(name)
            else:
                self._live.discard(name)
                if name == "base":
                    self._geometry = None
        if name == "base" and not alive:
            self._forget_odometry_frame()  # a returning base starts a new odometry (lock order: after _state_lock)

    def module_running(self, module: str) -> bool:
        """Whether the module named runs on this robot, as this module knows it (by the modules' liveliness tokens):
        the devices it serves through that module answer only then."""
        with self._state_lock:
            return module in self._live

    # -- the step -------------------------------------------------------------------------------------------------

    def on_clock_jump(self, old: float, new: float) -> None:
        # On a bus thread (or another module's step): the held commands go at once, the data at the next step.
        with self._state_lock:
            self.motion.forget()
            self._geometry = None
            self._restarted = True
        self._forget_odometry_frame()
        self.get_logger().info(
            "simulated time restarted (%.3f s -> %.3f s): rounds restart, the old run's data and commands are dropped",
            old,
            new,
        )

    def step(self, now: float) -> None:
        with self._state_lock:
            restarted, self._restarted = self._restarted, False
        if restarted:
            # Only data that comes after the jump is served; the sources stay remembered, so the readers' values of
            # the old run do not count as new.
            self._samples.clear()
            self.server.restart(now)
        self._apply(self._motion_step(now), now)
        with self._samples_lock:
            self._update_samples()
            samples = dict(self._samples)
            self.server.tick(now, samples, self._stamp_offset(now, samples))

    def _stamp_offset(self, now: float, samples: Mapping[DeviceKey, Sample]) -> float:
        """How far the clock the data is stamped with is ahead of the module's, s (0 with use_sim_time)."""
        if self.clock_in is None or not samples:
            return 0.0
        tick = self.clock_in.read()
        newest = max(sample.timestamp for sample in samples.values())
        return stamp_clock_offset(now, tick.stamp if tick is not None else None, newest)

    def _forget_odometry_frame(self) -> None:
        with self._samples_lock:
            if self.odometry_frame != OdometryFrame():
                self.odometry_frame = OdometryFrame()
                self._frame_version += 1

    def _motion_step(self, now: float) -> list[MotionAction]:
        drive = self.module_running("drive")
        with self._state_lock:
            lapses = self.motion.lapses
            actions = self.motion.step(now, drive)
            lapsed = self.motion.lapses
        if lapsed != lapses:
            wall = time.monotonic()
            if wall - self._last_lapse_log >= 5.0:  # a client that renews too slowly would lapse again and again
                self._last_lapse_log = wall
                self.get_logger().warning(
                    "no velocity command from the Player clients for %g s (command_timeout): the robot is stopped "
                    "(lapse %d)",
                    self.params.command_timeout,
                    lapsed,
                )
        return actions

    @property
    def lapsed_commands(self) -> int:
        """Held velocities that lapsed because no new one came for ``command_timeout`` s."""
        with self._state_lock:
            return self.motion.lapses

    def _apply(self, actions: list[MotionAction], now: float) -> None:
        p = self.params
        for action in actions:
            if isinstance(action, WriteVelocity):
                velocity = [action.v, action.omega]
                if action.via_drive:
                    flags = 10 if p.protect else 0
                    self.drive_out.write(msgs.ActuatorState(stamp=now, cmd_flags=flags, velocity=velocity))
                else:
                    self.base_out.write(msgs.ActuatorState(stamp=now, cmd_flags=0, velocity=velocity))
            elif isinstance(action, ReleaseAvoid):
                self.avoid_out.write(msgs.ActuatorState(stamp=now, cmd_flags=RELEASE))
            elif isinstance(action, SendGoal):
                self._goals.submit(self._send_goal, action, now)

    def _send_goal(self, action: SendGoal, now: float) -> None:
        p = self.params
        try:
            if action.restart:
                self.bus.call("avoid/start_activity", None, bool, timeout=p.service_timeout)
        except Exception as err:
            self.get_logger().warning("could not restart the avoid module for a goto: %s", err)
            return
        self.avoid_out.write(self._goto(action.goal, now))

    def _goto(self, goal: Goal, now: float) -> msgs.ActuatorState:
        """The avoid module's goto for ``goal`` (in the frame of ``Localization/Pose``)."""
        p = self.params
        return msgs.ActuatorState(
            stamp=now,
            cmd_flags=10 * p.goto_avoidance + Mode.GOTO,
            position=[goal.x, goal.y],
            velocity=[goal.max_speed or p.goto_speed, goal.max_turn_rate or p.goto_turn_rate],
            force=[1.0],
        )

    def _fresh(self, key: DeviceKey, *sources: object) -> bool:
        """True (and remembered) if the sources of ``key``'s payload are not the ones it was last built from."""
        previous = self._sources.get(key)
        if previous is not None and all(a is b or a == b for a, b in zip(previous, sources, strict=True)):
            return False
        self._sources[key] = sources
        return True

    def _update_samples(self) -> None:
        odometry = self.odometry_in.read()
        contact = self.contact_in.read()
        stall = bool(contact.stall) if contact is not None else False
        if odometry is not None and self._fresh(POSITION, odometry, stall, self._frame_version):
            reported = self.odometry_frame.to_client(odometry)
            self._samples[POSITION] = Sample(odometry.stamp, position_data(reported, stall).pack())
        pose = self.pose_in.read()
        if pose is not None and self._fresh(POSITION3D, pose, stall):
            self._samples[POSITION3D] = Sample(pose.stamp, position3d_data(pose, odometry, stall).pack())
        scan = self.scan_in.read()
        with self._state_lock:
            config, version = self.laser_config, self._laser_version
        if scan is not None and self._fresh(LASER, scan, version):
            self._samples[LASER] = Sample(scan.stamp, laser_data(scan, config).pack())
        sonar = self.sonar_in.read()
        if sonar is not None and self._fresh(SONAR, sonar):
            self._samples[SONAR] = Sample(sonar.stamp, sonar_data(sonar).pack())

    # -- the server's backend -------------------------------------------------------------------------------------

    def available(self, device: DeviceSpec) -> bool:
        """The module behind ``device`` runs (on the server's thread; never blocks)."""
        return self.module_running(device.backend)

    def command(self, client: int, device: DeviceKey, command: CommandStruct) -> None:
        """Take a command (on the server's thread; never blocks).

        Raises:
            CommandRefused: a value out of range (:mod:`pluto.limits`); nothing changes.
        """
        if isinstance(command, PositionCommand):
            if command.type == 1:
                goal = self._checked_goal("position command", position_goal(command))
                self._goal(self._odometry_goal(goal))
            else:
                self._velocity(position_velocity(command))
        elif isinstance(command, Position3dCommand):
            with self._state_lock:
                position_mode = self.position_mode[POSITION3D]
            if position_mode:
                self._goal(self._checked_goal("position3d command", position3d_goal(command)))
            else:
                self._velocity(position3d_velocity(command))

    def _velocity(self, velocity: Velocity) -> None:
        # Checked as what will be written: drive/command or Base/Drive/Command, whichever runs at the next step.
        command = msgs.ActuatorState(stamp=self.clock.now(), velocity=[velocity.v, velocity.omega])
        try:
            for interface in (names.DRIVE_COMMAND, names.BASE_DRIVE_COMMAND):
                limits.check(interface, command)
        except limits.LimitError as err:
            raise CommandRefused(f"velocity command refused: {err}") from err
        with self._state_lock:
            self.motion.set_velocity(velocity)

    @staticmethod
    def _checked_goal(what: str, goal: Goal) -> Goal:
        try:
            limits.check_pose(f"{what} goal", (goal.x, goal.y, goal.theta))
            limits.check_number(f"{what} speed", goal.max_speed)
            limits.check_number(f"{what} turn rate", goal.max_turn_rate)
        except limits.LimitError as err:
            raise CommandRefused(str(err)) from err
        return goal

    def _goal(self, goal: Goal | None) -> None:
        if goal is not None:
            try:
                limits.check(names.AVOIDANCE_COMMAND, self._goto(goal, self.clock.now()))
            except limits.LimitError as err:
                raise CommandRefused(f"position command refused: {err}") from err
        if goal is None or not self.module_running("avoid"):
            self.ignored_commands += 1
            now = time.monotonic()
            if now - self._last_ignored_log >= 5.0:  # clients repeat their commands: one line every 5 s at most
                self._last_ignored_log = now
                why = "no localization pose to place the goal" if goal is None else "the avoid module is not running"
                self.get_logger().warning("ignored position commands (%d so far): %s", self.ignored_commands, why)
            return
        with self._state_lock:
            self.motion.set_goal(goal)

    def _odometry_goal(self, goal: Goal) -> Goal | None:
        """A goal given in the odometry frame the clients declared, in the frame of ``Localization/Pose`` (what the
        avoid module takes)."""
        odometry = self.odometry_in.read()
        pose = self.pose_in.read()
        if odometry is None or pose is None or len(pose.pose) < 4:
            return None
        on_the_base = self.odometry_frame.to_base((goal.x, goal.y, goal.theta))
        offset = relative((odometry.x, odometry.y, odometry.theta), on_the_base)
        x, y, theta = compose((pose.pose[0], pose.pose[1], pose.pose[3]), offset)
        return replace(goal, x=x, y=y, theta=theta)

    def released(self, device: DeviceKey) -> None:
        """The last client with write access to a device closed it (on the server's thread)."""
        if device in _MOTION_DEVICES and not any(self.server.writers(d) for d in _MOTION_DEVICES):
            with self._state_lock:
                self.motion.stop()

    def configure(self, device: DeviceKey, request: ConfigStruct) -> bytes:
        """Carry out a configuration request (on a worker thread) and return the reply's payload.

        Raises:
            ConfigRefused: the request cannot be carried out here (NACK).
            BusTimeout, RemoteError: the base did not answer, or refused (NACK).
        """
        if device in _MOTION_DEVICES:
            return self._configure_position(device, request)
        if device == LASER:
            return self._configure_laser(request)
        if device == SONAR:
            if isinstance(request, SonarGeometry):
                poses = self._base_geometry().get("sonar_poses", [])
                return sonar_geometry(poses, request.subtype).pack()
            if isinstance(request, SonarPower):
                raise ConfigRefused("the sonar of this base cannot be switched off and on")
        raise ConfigRefused(f"no configuration {type(request).__name__} for device {device}")

    def _call(self, service: str, request: Any, reply_type: Any) -> Any:
        p = self.params
        return self.bus.call(f"base/{service}", request, reply_type, timeout=p.service_timeout)

    def _base_geometry(self) -> dict[str, Any]:
        with self._state_lock:
            cached = self._geometry
        if cached is None:
            cached = self._call("geometry", None, dict)
            with self._state_lock:
                self._geometry = cached
        return cached

    def _configure_position(self, device: DeviceKey, request: ConfigStruct) -> bytes:
        actions: dict[type, Callable[[Any], bytes]] = {
            PositionGeometry: self._geometry_reply,
            MotorPower: self._motor_power,
            VelocityMode: self._velocity_mode,
            ResetOdometry: lambda _r: self._declare_odometry((0.0, 0.0, 0.0)),
            PidRequest: self._pid,
            SpeedProfile: self._speed_profile,
            SetOdometry: self._set_odometry,
        }
        if isinstance(request, PositionMode):
            return self._position_mode(device, request)
        if isinstance(request, RmpConfig):
            raise ConfigRefused(f"RMP request {request.subtype}: there is no Segway RMP behind this base")
        action = actions.get(type(request))
        if action is None:
            raise ConfigRefused(f"no {type(request).__name__} for position devices")
        return action(request)

    @staticmethod
    def _done(ok: bool, what: str) -> bytes:
        if not ok:
            raise ConfigRefused(f"the base did not {what}")
        return b""

    def _geometry_reply(self, request: PositionGeometry) -> bytes:
        radius = float(self._base_geometry().get("radius", 0.0))
        return position_geometry(radius, request.subtype).pack()

    def _motor_power(self, request: MotorPower) -> bytes:
        on = request.value != 0
        return self._done(self._call("motor_power", on, bool), f"switch the motors {'on' if on else 'off'}")

    def _velocity_mode(self, request: VelocityMode) -> bytes:
        mode = "direct" if request.value == 0 else "separate"
        self._call("velocity_mode", mode, str)
        return b""

    def _pid(self, request: PidRequest) -> bytes:
        service = "speed_pid" if request.subtype == PositionRequest.SPEED_PID else "position_pid"
        gains = {"kp": float(request.kp), "ki": float(request.ki), "kv": float(request.kd)}
        return self._done(self._call(service, gains, bool), f"set the {service.replace('_', ' ')} gains")

    def _speed_profile(self, request: SpeedProfile) -> bytes:
        if request.speed <= 0 or request.acc <= 0:
            raise ConfigRefused(f"a speed profile needs a speed and an acceleration > 0, got {request}")
        profile = {"max_speed": request.speed / 1000.0, "max_accel": request.acc / 1000.0}
        try:
            limits.command_limits(names.BASE_DRIVE_COMMAND)["velocity"][0].check(
                "SPEED_PROF speed", profile["max_speed"]
            )
        except limits.LimitError as err:
            raise ConfigRefused(str(err)) from err
        return self._done(self._call("speed_profile", profile, bool), "set the speed profile")

    def _set_odometry(self, request: SetOdometry) -> bytes:
        try:
            x, y, theta = limits.check_pose(
                "SET_ODOM pose", (request.x / 1000.0, request.y / 1000.0, math.radians(request.theta))
            )
        except limits.LimitError as err:
            raise ConfigRefused(str(err)) from err
        return self._declare_odometry((x, y, theta))

    def _declare_odometry(self, pose: tuple[float, float, float]) -> bytes:
        """Declare the robot's current odometry pose (SET_ODOM, RESET_ODOM); the robot does not move.

        The position data built from now on, and handed to the server before the ACK, reads ``pose`` exactly.
        """
        odometry = self.odometry_in.read()
        if odometry is None:
            raise ConfigRefused("no odometry from the base yet: nothing to declare a pose of")
        with self._samples_lock:
            self.odometry_frame = OdometryFrame.declaring(pose, (odometry.x, odometry.y, odometry.theta))
            self._frame_version += 1
            self._update_samples()
            self.server.update_samples(dict(self._samples))  # on the server's loop before the reply
        return b""

    def _position_mode(self, device: DeviceKey, request: PositionMode) -> bytes:
        position = request.state != 0
        if position and not self.module_running("avoid"):
            raise ConfigRefused("position mode needs the avoid module (`pluto start avoid`)")
        with self._state_lock:
            self.position_mode[device] = position
        return b""

    def _configure_laser(self, request: ConfigStruct) -> bytes:
        p = self.params
        if isinstance(request, LaserGeometry):
            return laser_geometry(p.laser_pose, p.laser_size, request.subtype).pack()
        if isinstance(request, LaserConfig):
            native = laser_native_config(self.scan_in.read())
            if request.subtype == LaserRequest.SET_CONFIG:
                try:
                    config = laser_settings(request, native)
                except ValueError as err:
                    raise ConfigRefused(f"laser configuration refused: {err}") from err
                with self._state_lock:
                    self.laser_config = config
                    self._laser_version += 1
                return replace(config, subtype=request.subtype).pack()
            with self._state_lock:
                current = self.laser_config
            return replace(current or native, subtype=request.subtype).pack()
        raise ConfigRefused(f"no {type(request).__name__} for the laser")
