"""A Pioneer robot that speaks P2OS/ARCOS, as a pure core: client bytes in, robot bytes out, time advanced by hand.

    robot = P2osRobot("p3dx", world=load_world("office"))
    robot.receive_data(bytes_from_client)      # SYNC0/1/2 echoes are ready at once
    robot.step(now)                            # motion control, body physics, watchdog, SIP cycle
    transport.write(robot.data_to_send())

The transports (TCP, pseudo-terminal) live in :mod:`.emulator`; this module never touches a socket, a thread or a
clock, so every behaviour is tested by feeding bytes and calling ``step`` with chosen times. This module is the
protocol: the link's transition table, the commands turned from robot units into SI, and the packets the robot
sends; the servos, the body and the sonar they drive are :mod:`.physics`, and the SIP and CONFIGpac built from
them :mod:`.reports`.
"""

# Strategy: the behaviour follows docs/protocols/p2os.md ("The session", "The standard SIP", "Robot
# parameters") and the Pioneer 2 / PeopleBot Operations Manual's Table 4; the codec (packets.py, sip.py, decoder.py,
# models.py) does every byte, so the emulator writes exactly what a client reads. Where the reference is silent the
# choices are those of the established simulators and are listed here so a reader can check them:
#
# * Link state machine (_LINK_TABLE): SYNC0 restarts the handshake from any state but open; a repeated SYNC echoes
#   again (the client lost our echo); an out-of-order SYNC is ignored. Commands 1 and 2 mean SYNC1/SYNC2 during the
#   handshake and OPEN/CLOSE after it; in state sync2 a bare command 2 is a repeated SYNC2 and one with an argument
#   is CLOSE. While open, command 0 is PULSE: a live client's keepalive and a new client's SYNC0 are the same six
#   bytes, so it cannot end the session by itself; the robot answers it with its SIPs only, as the reference says,
#   and echoes SYNC0 only at rest (no session open, no SIP stream): an echo among the SIPs would put a client that
#   reads one packet per SYNC it sends (ARIA) one packet behind for good. A new client on a line its dead
#   predecessor left open (a serial port: nothing tells the robot) gets SIPs, and ARIA closes such a session on a
#   *stopped* SIP (0x32) only: so a SIP says stopped as soon as the motors are disabled (the watchdog, ENABLE 0,
#   the e-stop), while the wheels may still be slowing down, and moving (0x33) only while the motors are enabled
#   and the wheels turn. The new client's CLOSE then ends the session and its next SYNC0 is echoed, as on TCP,
#   where the end of the dead client's connection ends the session at once. A bare command 1 (SYNC1; OPEN always
#   carries an argument) is unambiguous: it ends an open session (the robot stops, the motors are disabled) and the
#   handshake goes on from sync1. The end of the client's byte stream
#   (``receive_data(b"")``: a TCP client went away) ends the session the same way, so a program that dies never
#   leaves the robot driving. A session stays open until CLOSE, a new handshake, the end of the stream or, if
#   ``link_timeout`` is set, that long without any packet (a P2OS robot on a serial line never times out, hence the
#   default None). Only the open state obeys commands.
# * Watchdog: "stops and disables motors after the Watchdog time with no command". Commands (number 3 and up,
#   known or not) renew it, and so does OPEN; PULSE renews it except under a velocity command (VEL, RVEL, VEL2,
#   ROTATE not zero), which would keep the robot moving for ever: an idle client keeps its session with PULSEs
#   alone, a MOVE or a heading (which end by themselves) may take longer than the watchdog time, but a keepalive
#   never keeps an old velocity going (the reference: "a keepalive must never keep an old motion command alive
#   after the commanding program has died"; a new client's repeated SYNC0 is such a keepalive). A live client
#   renews its velocity commands (ARIA repeats them every half second). Handshake packets, garbage and bad
#   checksums never renew it. It trips once per silence.
# * Motors start disabled (a real Pioneer powers up that way); ENABLE 0, CLOSE, the watchdog and the e-stop
#   button disable them and clear the setpoints, so enabling again never resumes an old motion. Motion commands
#   while the motors are disabled are counted as ignored.
# * The e-stop is the physical button (press_estop/release_estop): flags bit 5, motors disabled, ENABLE refused.
#   The E_STOP command is the ARCOS software stop ("overrides deceleration"): the robot stops at the top
#   decelerations, the motors stay enabled.
# * Two independent servos as in ARCOS: translation (VEL velocity, MOVE position) and rotation (RVEL/ROTATE
#   velocity, HEAD/DHEAD/DCHEAD heading). VEL2 sets both velocities. Position and heading moves use a trapezoidal
#   profile (v = min(vmax, sqrt(2 a d))) on the robot's own odometry. DHEAD is relative to the current heading,
#   DCHEAD to the heading setpoint. VEL is capped by SETV's maximum, RVEL by SETRV's, both by the model's top.
# * SETO moves the odometric origin to the robot (the wheels' odometry is kept; an offset is applied), so the SIP
#   position and heading restart at 0 and a heading setpoint keeps its physical direction.
# * Sonar: arrays of 8 transducers (array 1 = sonars 0-7, ...) fire one transducer each every ``sonar_period``
#   (25 Hz per array, as on a Pioneer), in numbering order; a SIP carries the readings new since the last SIP.
#   Ranges are ray cast from each transducer's pose (models.py) over the world, three rays across a cone, and
#   clipped to 5 m. SONAR's argument: bit 0 enables or disables, bits 1-4 name an array (1-4), 0 meaning all.
# * ENCODER and IOREQUEST: 0 stop, 1 once, 2 or more continuous; the packets follow the next SIP (they are part
#   of the SIP cycle). Encoder ticks are wheel travel / DistConvFactor. CONFIG is answered at once.
# * Bumpers: the body's front (rear) contact sets front (rear) switches 1-5; a blocked body sets both stall bits.
#   BUMP_STALL 1/2/3 also stops the robot at once when the front/rear/either bumper is pressed (on the press,
#   so the client can still back away) and sets the stall bits while it stays pressed.
# * Counters: every valid packet is counted; SAY, POLLING, BATTERYINFO, the baud and sound commands are accepted
#   and ignored; commands this emulator has no hardware for (gripper, PTU, aux serial ports, ...) and unknown
#   numbers are counted as unknown and ignored. Nothing the client sends can raise.

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from pluto.errors import ConfigError
from pluto.geometry import wrap_angle
from pluto.hardware.base.sim import BodyParams, BodyState, SimBody
from pluto.sim.noise import IDEAL, NoiseProfile
from pluto.sim.raycast import RayCaster
from pluto.sim.world import World

from .decoder import DecoderStatistics, P2osDecoder
from .models import ROBOT_PARAMS, RobotParams
from .packets import Command, CommandPacket, UnknownPacket, unpack_byte_pair
from .physics import SONAR_ARRAY_SIZE, SONAR_MAX_RANGE, Drivetrain, MotionLimits, SonarArrays
from .reports import config_packet, standard_sip
from .sip import EncoderPacket, IoPacket, SyncReply

__all__ = [
    "MAX_OUTPUT_BUFFER",
    "SONAR_ARRAY_SIZE",
    "SONAR_MAX_RANGE",
    "LinkState",
    "MotionLimits",
    "P2osRobot",
    "RobotCounters",
]

FloatArray = NDArray[np.float64]

LinkState = Literal["closed", "sync0", "sync1", "sync2", "open"]
"""Where the robot is in the connection: no session, handshake step done, or open (SIPs flowing)."""

MAX_OUTPUT_BUFFER: Final = 64 * 1024
"""Bytes kept for the transport at most; older ones are dropped (the link is unacknowledged: old data is useless)."""

_CONTROL_STEP = 0.01  # longest physics and control step, s
_RECENT_COMMANDS = 256


def _wrap_s32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@dataclass(frozen=True, slots=True)
class RobotCounters:
    """What the robot has received and done since it was created.

    Attributes:
        packets: client packets with a valid frame and checksum (every command, known or not).
        ignored: packets understood but without effect: not valid in the current link state, a motion command
            while the motors are disabled, a missing or out-of-range argument, or a command accepted and ignored
            (SAY, POLLING, BATTERYINFO, baud rates, sounds).
        unknown: commands the emulator does not emulate (unknown numbers, accessories it does not have).
        refused_enables: ENABLE 1 refused because the e-stop is engaged.
        watchdog_trips: times the watchdog stopped the robot.
        sips: SIPs sent.
        bad_packets: packets the decoder dropped (bad checksum, impossible length, malformed argument).
        garbage_bytes: bytes skipped while looking for a packet.
        sessions_ended: ends of the client's byte stream (``receive_data(b"")``: a disconnection); each ends the
            session.
        output_dropped: bytes dropped because nobody collected :meth:`P2osRobot.data_to_send`.
    """

    packets: int = 0
    ignored: int = 0
    unknown: int = 0
    refused_enables: int = 0
    watchdog_trips: int = 0
    sips: int = 0
    bad_packets: int = 0
    garbage_bytes: int = 0
    sessions_ended: int = 0
    output_dropped: int = 0


_Action = Literal["echo", "open", "close", "pulse", "restart", "ignore"]

# (state, command number, argument present) -> (next state, action). Commands >= 3 are not in the table: they are
# obeyed while open and ignored otherwise. A key with None matches either way of the argument.
_LINK_TABLE: Mapping[tuple[LinkState, int, bool | None], tuple[LinkState, _Action]] = MappingProxyType(
    {
        ("closed", 0, None): ("sync0", "echo"),
        ("sync0", 0, None): ("sync0", "echo"),
        ("sync1", 0, None): ("sync0", "echo"),
        ("sync2", 0, None): ("sync0", "echo"),
        ("sync0", 1, None): ("sync1", "echo"),
        ("sync1", 1, None): ("sync1", "echo"),
        ("sync1", 2, False): ("sync2", "echo"),
        ("sync2", 2, False): ("sync2", "echo"),
        ("sync0", 2, True): ("closed", "close"),
        ("sync1", 2, True): ("closed", "close"),
        ("sync2", 2, True): ("closed", "close"),
        ("sync2", 1, None): ("open", "open"),
        ("open", 0, None): ("open", "pulse"),
        ("open", 1, False): ("sync1", "restart"),
        ("open", 1, True): ("open", "ignore"),
        ("open", 2, None): ("closed", "close"),
    }
)

# Understood, accepted, without effect in an emulator.
_ACCEPTED_IGNORED = frozenset(
    {
        Command.POLLING,
        Command.SAY,
        Command.BATTERYINFO,
        Command.AUX1BAUD,
        Command.AUX2BAUD,
        Command.SOUND,
        Command.PLAYLIST,
        Command.SOUNDTOG,
    }
)
# Commands obeyed without an argument (the others need an integer).
_NO_ARGUMENT = frozenset({Command.SETO, Command.STOP, Command.E_STOP, Command.CONFIG})
# Commands that move the robot: ignored while the motors are disabled.
_MOTION = frozenset(
    {
        Command.VEL,
        Command.RVEL,
        Command.ROTATE,
        Command.VEL2,
        Command.MOVE,
        Command.HEAD,
        Command.DHEAD,
        Command.DCHEAD,
    }
)


class P2osRobot:
    """A Pioneer robot serving the P2OS/ARCOS protocol, sans I/O.

    Args:
        model: the subclass (``"p3dx"``, ``"p3at"``, ... see :data:`.models.ROBOT_PARAMS`) or its parameters.
        world: the world the body lives in; None for an empty world (a kinematic robot).
        start: true start pose (x m, y m, theta rad) in the world; default the world's start, else the origin.
        name: the robot's name in the SYNC2 echo and the CONFIGpac.
        watchdog: s without a command after which an open robot stops and disables its motors (a PULSE counts
            too, except under a velocity command); 0 turns the watchdog off. Reported in the CONFIGpac (ms).
        sip_cycle: s between SIPs while open (reported in the CONFIGpac, ms).
        link_timeout: s without any client packet after which an open robot closes the session; None: never.
        limits: speed and acceleration configuration; default :meth:`MotionLimits.for_model`.
        noise: errors of the wheels' odometry and of the sonar (ideal by default).
        rng: random generator for the noise.
        sonar_period: s between two firings of one sonar array.

    Raises:
        ConfigError: unknown model, or an argument out of range.
    """

    def __init__(
        self,
        model: str | RobotParams = "p3dx",
        *,
        world: World | None = None,
        start: tuple[float, float, float] | None = None,
        name: str = "Pluto",
        watchdog: float = 2.0,
        sip_cycle: float = 0.1,
        link_timeout: float | None = None,
        limits: MotionLimits | None = None,
        noise: NoiseProfile = IDEAL,
        rng: np.random.Generator | None = None,
        sonar_period: float = 0.04,
    ) -> None:
        if isinstance(model, RobotParams):
            params = model
        else:
            found = ROBOT_PARAMS.get(model.strip().lower())
            if found is None:
                raise ConfigError(f"unknown Pioneer model {model!r} (known: {', '.join(ROBOT_PARAMS)})")
            params = found
        if not (math.isfinite(watchdog) and 0.0 <= watchdog <= 65.535):
            raise ConfigError(f"watchdog must be 0 (off) to 65.535 s, got {watchdog!r}")
        if not (math.isfinite(sip_cycle) and 0.001 <= sip_cycle <= 0.255):
            raise ConfigError(f"sip_cycle must be 0.001 to 0.255 s, got {sip_cycle!r}")
        if link_timeout is not None and not (math.isfinite(link_timeout) and link_timeout > 0.0):
            raise ConfigError(f"link_timeout must be > 0 s or None, got {link_timeout!r}")
        if not (math.isfinite(sonar_period) and sonar_period > 0.0):
            raise ConfigError(f"sonar_period must be > 0 s, got {sonar_period!r}")
        try:
            SyncReply(2, name, params.robot_class, params.subclass)
        except ValueError as err:
            raise ConfigError(f"robot name {name!r}: {err}") from None
        self._params = params
        self._name = name
        self._watchdog = watchdog
        self._sip_cycle = sip_cycle
        self._link_timeout = link_timeout
        self._top = limits or MotionLimits.for_model(params)
        self._rng = rng or np.random.default_rng(0)
        self._noise = noise

        self._world = world
        segments = world.segments() if world is not None else np.zeros((0, 4))
        circles = world.circles if world is not None else np.zeros((0, 3))
        pose = start if start is not None else (world.start if world is not None else (0.0, 0.0, 0.0))
        body_params = BodyParams(
            radius=params.radius,
            max_speed=self._top.trans_vel_top,
            max_turn_rate=self._top.rot_vel_top,
            max_accel=self._top.trans_acc_top,
            max_turn_accel=self._top.rot_acc_top,
            sonar_count=max(1, params.sonar_count),
            sonar_max_range=SONAR_MAX_RANGE,
            battery_wh=252.0,  # three 12 V 7 Ah batteries
        )
        self._body = SimBody(segments, circles, pose, body_params, noise, self._rng)
        self._caster = RayCaster(segments, circles)

        # link
        self._decoder = P2osDecoder(role="robot")
        self._old_decoder_stats = DecoderStatistics()
        self._state: LinkState = "closed"
        self._out = bytearray()
        self._recent: deque[tuple[float, CommandPacket | UnknownPacket]] = deque(maxlen=_RECENT_COMMANDS)
        self._counts: dict[str, int] = dict.fromkeys(RobotCounters.__slots__, 0)

        # time (s since the first step)
        self._origin: float | None = None
        self._t = 0.0
        self._last_packet = 0.0  # any valid packet: the link timeout
        self._last_command = 0.0  # a command, OPEN, or a PULSE without a velocity command: the watchdog
        self._watchdog_armed = False
        self._sip_epoch = 0.0
        self._sip_index = 0

        # the servos and the sonar, SI
        self._drive = Drivetrain(params, self._top, self._body)
        self._sonar = SonarArrays(params, self._caster, noise, self._rng, sonar_period)
        self._estop = False
        self._host_baud = 0
        self._digout = 0

        # requested packets
        self._encoder_mode = 0  # 0 off, 1 once, 2 continuous
        self._io_mode = 0

        self._handlers: dict[Command, Callable[[int], None]] = {
            Command.ENABLE: self._cmd_enable,
            Command.SETA: self._cmd_seta,
            Command.SETV: self._cmd_setv,
            Command.SETO: self._cmd_seto,
            Command.MOVE: self._cmd_move,
            Command.ROTATE: self._cmd_rvel,
            Command.SETRV: self._cmd_setrv,
            Command.VEL: self._cmd_vel,
            Command.HEAD: self._cmd_head,
            Command.DHEAD: self._cmd_dhead,
            Command.DCHEAD: self._cmd_dchead,
            Command.CONFIG: self._cmd_config,
            Command.ENCODER: self._cmd_encoder,
            Command.RVEL: self._cmd_rvel,
            Command.SETRA: self._cmd_setra,
            Command.SONAR: self._cmd_sonar,
            Command.STOP: self._cmd_stop,
            Command.DIGOUT: self._cmd_digout,
            Command.VEL2: self._cmd_vel2,
            Command.IOREQUEST: self._cmd_iorequest,
            Command.BUMP_STALL: self._cmd_bump_stall,
            Command.HOSTBAUD: self._cmd_hostbaud,
            Command.E_STOP: self._cmd_e_stop,
        }

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def params(self) -> RobotParams:
        """The model's parameters."""
        return self._params

    @property
    def name(self) -> str:
        """The robot's name (SYNC2 echo, CONFIGpac)."""
        return self._name

    @property
    def world(self) -> World | None:
        """The world, or None for an empty one."""
        return self._world

    @property
    def state(self) -> LinkState:
        """The link state: 'closed', 'sync0', 'sync1', 'sync2' (handshake done) or 'open' (SIPs flowing)."""
        return self._state

    @property
    def time(self) -> float:
        """Simulated time since the first :meth:`step`, s."""
        return self._t

    @property
    def motors_enabled(self) -> bool:
        """The motors are enabled (SIP flags bit 0)."""
        return self._drive.motors_enabled

    @property
    def estop(self) -> bool:
        """The e-stop button is engaged (SIP flags bit 5; motors disabled, ENABLE refused)."""
        return self._estop

    @property
    def watchdog(self) -> float:
        """The watchdog time, s (0: off)."""
        return self._watchdog

    @property
    def sip_cycle(self) -> float:
        """Time between SIPs, s."""
        return self._sip_cycle

    @property
    def truth_pose(self) -> tuple[float, float, float]:
        """The true pose in the world (x m, y m, theta rad in [-pi, pi)); for tests, not part of the protocol."""
        return self._body.x, self._body.y, wrap_angle(self._body.theta)

    @property
    def truth_velocity(self) -> tuple[float, float]:
        """The true velocities (v m/s, omega rad/s)."""
        return self._body.v, self._body.omega

    @property
    def odometry_pose(self) -> tuple[float, float, float]:
        """The robot's own odometric pose, the one its SIPs report (x m, y m, theta rad in [-pi, pi))."""
        x, y, theta = self._drive.odometry()
        return x, y, wrap_angle(theta)

    @property
    def body_state(self) -> BodyState:
        """The simulated body: truth, wheels' odometry, bumpers, stall, battery."""
        return self._body.state()

    @property
    def body(self) -> SimBody:
        """The simulated body itself (for tests that need to reach into the physics)."""
        return self._body

    @property
    def heading_setpoint(self) -> float:
        """The heading servo's setpoint in the odometric frame, rad (the SIP's control field)."""
        return self._drive.control_heading()

    @property
    def max_speeds(self) -> tuple[float, float]:
        """The maxima set by SETV and SETRV: (m/s, rad/s)."""
        return self._drive.max_speeds

    @property
    def accelerations(self) -> tuple[float, float, float, float]:
        """Set by SETA and SETRA: (trans accel m/s², trans decel m/s², rot accel rad/s², rot decel rad/s²)."""
        return self._drive.accelerations

    @property
    def sonar_arrays_enabled(self) -> tuple[bool, ...]:
        """Which sonar arrays fire (array 1 first)."""
        return self._sonar.enabled

    @property
    def sonar_ranges(self) -> tuple[float, ...]:
        """The latest range of each sonar, m (nan for one that has not fired yet)."""
        return self._sonar.ranges

    @property
    def counters(self) -> RobotCounters:
        """A snapshot of the counters."""
        stats = self.decoder_statistics()
        counts = dict(self._counts)
        counts["bad_packets"] = stats.bad_checksum + stats.bad_length + stats.malformed
        counts["garbage_bytes"] = stats.garbage_bytes
        return RobotCounters(**counts)

    @property
    def recent_commands(self) -> tuple[tuple[float, CommandPacket | UnknownPacket], ...]:
        """The last 256 valid client packets with their arrival time (s, :attr:`time`), oldest first."""
        return tuple(self._recent)

    def decoder_statistics(self) -> DecoderStatistics:
        """The decoder's counters, summed over every session."""
        now, old = self._decoder.statistics(), self._old_decoder_stats
        return DecoderStatistics(**{f.name: getattr(now, f.name) + getattr(old, f.name) for f in fields(now)})

    # ------------------------------------------------------------------------------------------------ the button

    def press_estop(self) -> None:
        """Engage the e-stop button: the motors are disabled and the robot stops; ENABLE is refused."""
        self._estop = True
        self._drive.disable()

    def release_estop(self) -> None:
        """Release the e-stop button; the motors stay disabled until the client sends ENABLE 1."""
        self._estop = False

    # ------------------------------------------------------------------------------------------------ bytes in/out

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the client; ``b""`` means the client's stream ended (a disconnection).

        Commands take effect at once, at the time of the last :meth:`step`. ``b""`` ends the session as CLOSE
        does (the robot stops, its motors are disabled; a handshake in progress is dropped), and the next bytes
        start afresh (a new decoder, pending output dropped): a client that went away without CLOSE never leaves
        the robot driving, and the next one finds it closed.

        Args:
            data: any bytes; garbage, bad checksums and malformed commands are counted and ignored.
        """
        if data:
            self._decoder.receive_data(bytes(data))
        else:
            self._decoder.receive_data(b"")
        for event in self._decoder.events():
            if isinstance(event, CommandPacket | UnknownPacket):  # a robot-role decoder gives nothing else
                self._handle_packet(event)
        if not data:
            self._old_decoder_stats = self.decoder_statistics()
            self._decoder = P2osDecoder(role="robot")
            if self._state != "closed":
                self._close_session()
            self._out.clear()
            self._counts["sessions_ended"] += 1

    def data_to_send(self) -> bytes:
        """The bytes the robot has sent since the last call (echoes, SIPs, CONFIGpac, ...); empty if none."""
        data = bytes(self._out)
        self._out.clear()
        return data

    def step(self, now: float, *, interrupt: Callable[[], bool] | None = None) -> float:
        """Advance the robot to time ``now``: motion control, body physics, sonar, watchdog and the SIP cycle.

        The first call sets the time base; a time earlier than the last one is ignored. Long steps are split so
        that physics and control never step more than 10 ms and every SIP shows the robot at its own time.

        Args:
            now: time, s, from any monotonic clock (the transport's or a test's).
            interrupt: asked before each physics step; when it answers True the step ends there, early (a
                transport that is being stopped need not wait for a slow world's physics).

        Returns:
            The time, s, left to simulate when ``interrupt`` ended the step early; 0.0 otherwise.
        """
        if self._origin is None:
            self._origin = now
        target = now - self._origin
        self._emit_due_packets()
        while self._t < target - 1e-12:
            if interrupt is not None and interrupt():
                return target - self._t
            h = min(_CONTROL_STEP, target - self._t)
            if self._state == "open":
                h = min(h, max(self._next_sip_time() - self._t, 1e-9))
            self._check_link()
            self._drive.step(h, self._movers())
            self._t += h
            if self._state == "open":
                self._sonar.fire(self._t, self._body, self._movers)
            self._emit_due_packets()
        self._check_link()
        return 0.0

    # ------------------------------------------------------------------------------------------------ link

    def _emit(self, packet: bytes) -> None:
        self._out += packet
        excess = len(self._out) - MAX_OUTPUT_BUFFER
        if excess > 0:
            del self._out[:excess]
            self._counts["output_dropped"] += excess

    def _handle_packet(self, packet: CommandPacket | UnknownPacket) -> None:
        self._counts["packets"] += 1
        self._recent.append((self._t, packet))
        self._last_packet = self._t
        if isinstance(packet, CommandPacket) and packet.command <= 2:
            self._handle_link(int(packet.command), packet.argument is not None)
            return
        self._renew_watchdog()  # a command, even one not understood: the client is alive and commanding
        if isinstance(packet, UnknownPacket):
            self._counts["unknown"] += 1
            return
        if self._state != "open":
            self._counts["ignored"] += 1
            return
        self._obey(packet)

    def _renew_watchdog(self) -> None:
        self._last_command = self._t
        self._watchdog_armed = True

    def _handle_link(self, number: int, has_argument: bool) -> None:
        key = (self._state, number)
        entry = _LINK_TABLE.get((*key, has_argument)) or _LINK_TABLE.get((*key, None))
        if entry is None:
            self._counts["ignored"] += 1
            return
        state, action = entry
        if action == "restart":  # a new handshake in an open session (SYNC1): the old session ends first
            self._close_session()
        self._state = state
        if action in ("echo", "restart"):
            self._echo(number)
        elif action == "open":
            self._sip_epoch = self._t
            self._sip_index = 0
            self._sonar.restart(self._t)
            self._renew_watchdog()
        elif action == "close":
            self._close_session()
        elif action == "pulse":
            # Never echoed: while SIPs flow an echo would sit among them, and a client that reads one packet per
            # SYNC (ARIA) would from then on read each answer one packet late.
            if not self._drive.open_ended:
                self._renew_watchdog()
        elif action == "ignore":
            self._counts["ignored"] += 1

    def _echo(self, number: int) -> None:
        if number == 2:
            reply = SyncReply(2, self._name, self._params.robot_class, self._params.subclass)
        else:
            reply = SyncReply(number)
        self._emit(reply.encode())

    def _close_session(self) -> None:
        self._state = "closed"
        self._drive.disable()
        self._encoder_mode = self._io_mode = 0
        self._watchdog_armed = False

    def _check_link(self) -> None:
        """The watchdog and the link timeout, at the current time."""
        if self._state != "open":
            return
        if self._link_timeout is not None and self._t - self._last_packet >= self._link_timeout:
            self._close_session()
            return
        if self._watchdog > 0.0 and self._watchdog_armed and self._t - self._last_command >= self._watchdog:
            self._watchdog_armed = False  # one trip per silence
            self._counts["watchdog_trips"] += 1
            self._drive.disable()

    def _next_sip_time(self) -> float:
        return self._sip_epoch + self._sip_index * self._sip_cycle

    def _emit_due_packets(self) -> None:
        if self._state != "open" or self._t < self._next_sip_time() - 1e-9:
            return
        sip = standard_sip(
            self._params,
            self._drive,
            self._body,
            sonar=self._sonar.take_new(),
            sonar_enabled=self._sonar.enabled,
            estop=self._estop,
            digout=self._digout,
        )
        self._emit(sip.encode())
        self._counts["sips"] += 1
        self._sip_index += 1
        if self._t >= self._next_sip_time():  # fell behind (a long step without sub-steps): do not burst
            self._sip_index = math.floor((self._t - self._sip_epoch) / self._sip_cycle) + 1
        if self._encoder_mode:
            left, right = (_wrap_s32(round(ticks)) for ticks in self._drive.encoders)
            self._emit(EncoderPacket(left, right).encode())
            if self._encoder_mode == 1:
                self._encoder_mode = 0
        if self._io_mode:
            self._emit(IoPacket((0,), (self._digout,), (0,) * 8).encode())
            if self._io_mode == 1:
                self._io_mode = 0

    # ------------------------------------------------------------------------------------------------ commands

    def _obey(self, packet: CommandPacket) -> None:
        command = packet.command
        if command in _ACCEPTED_IGNORED:
            self._counts["ignored"] += 1
            return
        handler = self._handlers.get(command)
        if handler is None:
            self._counts["unknown"] += 1
            return
        argument = packet.argument
        if argument is None and command in _NO_ARGUMENT:
            argument = 0
        if not isinstance(argument, int):
            self._counts["ignored"] += 1
            return
        if command in _MOTION and not self._drive.motors_enabled:
            self._counts["ignored"] += 1
            return
        handler(argument)

    def _ignore(self) -> None:
        self._counts["ignored"] += 1

    def _cmd_enable(self, argument: int) -> None:
        if argument == 0:
            self._drive.disable()
        elif self._estop:
            self._counts["refused_enables"] += 1
        else:
            self._drive.enable()

    def _cmd_vel(self, argument: int) -> None:
        self._drive.set_velocity(argument / 1000.0)

    def _cmd_rvel(self, argument: int) -> None:
        self._drive.set_rot_velocity(math.radians(argument))

    def _cmd_vel2(self, argument: int) -> None:
        left, right = unpack_byte_pair(argument, signed=True)
        left_mm, right_mm = left * self._params.vel2_divisor, right * self._params.vel2_divisor
        self._drive.set_velocity((left_mm + right_mm) / 2000.0)
        self._drive.set_rot_velocity((right_mm - left_mm) / 2.0 * self._params.diff_conv)

    def _cmd_move(self, argument: int) -> None:
        self._drive.move(argument / 1000.0)

    def _cmd_head(self, argument: int) -> None:
        self._drive.head(math.radians(argument))

    def _cmd_dhead(self, argument: int) -> None:
        self._drive.head_by(math.radians(argument))

    def _cmd_dchead(self, argument: int) -> None:
        self._drive.head_setpoint_by(math.radians(argument))

    def _cmd_stop(self, _argument: int) -> None:
        self._drive.stop()

    def _cmd_e_stop(self, _argument: int) -> None:
        self._drive.emergency_stop()

    def _cmd_setv(self, argument: int) -> None:
        if argument < 0:
            self._ignore()
            return
        self._drive.set_max_velocity(argument / 1000.0)

    def _cmd_setrv(self, argument: int) -> None:
        if argument < 0:
            self._ignore()
            return
        self._drive.set_max_rot_velocity(math.radians(argument))

    def _cmd_seta(self, argument: int) -> None:
        if argument == 0:
            self._ignore()
            return
        self._drive.set_acceleration(abs(argument) / 1000.0, decel=argument < 0)

    def _cmd_setra(self, argument: int) -> None:
        if argument == 0:
            self._ignore()
            return
        self._drive.set_rot_acceleration(math.radians(abs(argument)), decel=argument < 0)

    def _cmd_seto(self, _argument: int) -> None:
        self._drive.reset_odometry()

    def _cmd_config(self, _argument: int) -> None:
        config = config_packet(
            self._params,
            self._drive,
            name=self._name,
            sip_cycle=self._sip_cycle,
            host_baud=self._host_baud,
            watchdog=self._watchdog,
        )
        self._emit(config.encode())

    def _cmd_encoder(self, argument: int) -> None:
        if argument < 0:
            self._ignore()
            return
        self._encoder_mode = min(argument, 2)

    def _cmd_iorequest(self, argument: int) -> None:
        if argument < 0:
            self._ignore()
            return
        self._io_mode = min(argument, 2)

    def _cmd_sonar(self, argument: int) -> None:
        if not self._sonar.enable((argument >> 1) & 0x0F, bool(argument & 1)):
            self._ignore()

    def _cmd_bump_stall(self, argument: int) -> None:
        if not 0 <= argument <= 3:
            self._ignore()
            return
        self._drive.bump_stall = argument

    def _cmd_digout(self, argument: int) -> None:
        mask, values = unpack_byte_pair(argument, signed=False)
        self._digout = (self._digout & ~mask & 0xFF) | (values & mask)

    def _cmd_hostbaud(self, argument: int) -> None:
        if not 0 <= argument <= 4:
            self._ignore()
            return
        self._host_baud = argument

    # ------------------------------------------------------------------------------------------------ the world

    def _movers(self) -> FloatArray | None:
        if self._world is None or not self._world.movers:
            return None
        return self._world.mover_circles(self._t)
