"""The P2OS client as a pure state machine: the robot's bytes and the time in, commands and events out.

    client = P2osClient(port_name="socket://127.0.0.1:8101")
    client.connect(now)                         # the port is open: SYNC0 waits in data_to_send()
    port.write(client.data_to_send())
    client.receive_data(port.read(512), now)    # echoes, SIPs, CONFIGpacs
    client.step(now)                            # handshake timeouts, keepalive, command timeout, link timeout
    while (event := client.next_event()) is not NEED_DATA:
        ...                                     # Connected, LinkLost, ConnectFailed, BaudRate, Reconnecting
    client.set_velocity(0.3, 0.0, now)          # m/s, rad/s: VEL and RVEL wait in data_to_send()

The client never touches a port, a thread or a clock; :class:`.driver.P2osDriver` is the shell that does. Every
value handed out is SI (m, rad, s, m/s, rad/s, V); robot units stay in the codec (:mod:`.packets`, :mod:`.sip`,
:mod:`.models`).
"""

# Strategy: the connection follows docs/protocols/p2os.md ("The session") and what established clients
# (ARIA, Player's p2os) do. The handshake is one table (handshake_table): SYNC0, SYNC1, SYNC2, each step with its
# own timeout and a few tries; a robot that answers a SYNC with SIPs is still open from an earlier session, so it
# gets CLOSE, what it still sends is dropped until it has been quiet for a while, and the handshake starts again (a
# bounded number of times); on a real serial port the handshake is tried again at each standard baud rate, a
# decision the client announces (BaudRate) and the shell applies to its port. Then OPEN, CONFIG until a CONFIGpac
# arrives (or 1 s), SETV/SETRV to the maxima and ENABLE 1. The maxima, translation and rotation alike, are the lower
# of the model's (the parameter table's top speed; for rotation, which the table does not give,
# DEFAULT_MAX_ROT_VELOCITY) and the robot's own (the CONFIGpac's TransVelTop and RotVelTop): a robot configured
# slower than its model is respected, and a simulator that reports 9999 for both (AMRISim) is not believed. A zero
# in the CONFIGpac says nothing and is ignored. Every command, SETV and SETRV included, is clamped to these limits.
# Accelerations are not limited here (the robot caps SETA and SETRA at its own tops).
#
# Once connected, step(now) owns time. The link is lost after `link_timeout` s without a packet (or when the shell
# reports a port error); with `reconnect`, the handshake is run again after a back-off that doubles with every
# failed attempt (Reconnecting asks the shell to open the port again). A PULSE goes out when nothing was written
# for `keepalive` s, and, separately, a velocity command not renewed within `command_timeout` s is followed by
# VEL 0 / RVEL 0, once. The two are kept apart on purpose (the reference: "a keepalive must never keep an old motion
# command alive after the commanding program has died"): a PULSE never renews the command. Nothing the robot sends
# raises: packets the client cannot use are counted.

from __future__ import annotations

import logging
import math
import warnings
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Literal, cast, get_args

from pluto.codec import NEED_DATA, NeedData
from pluto.errors import PlutoError

from .decoder import DecoderStatistics, Event, P2osDecoder
from .models import (
    DEFAULT_SUBCLASS,
    ROBOT_PARAMS,
    RobotParams,
    UnknownRobotWarning,
    robot_params,
    signed_15bit,
    to_deg,
    to_mm,
)
from .odometry import OdometryIntegrator
from .packets import Command, LocalProtocolError, encode_command
from .sip import ConfigPacket, Sip, SyncReply

__all__ = [
    "CONFIG_REPEAT",
    "CONFIG_WAIT",
    "DEFAULT_MAX_ROT_VELOCITY",
    "DRAIN_LIMIT",
    "DRAIN_QUIET",
    "MAX_STALE_SESSIONS",
    "RECONNECT_BACKOFF",
    "SERIAL_BAUD_RATES",
    "SETO_SETTLE",
    "BaudRate",
    "ClientEvent",
    "ConnectFailed",
    "Connected",
    "HandshakePhase",
    "HandshakeStep",
    "LinkLost",
    "P2osClient",
    "P2osConnectError",
    "P2osError",
    "P2osLinkError",
    "P2osState",
    "P2osStatistics",
    "P2osTimeout",
    "Phase",
    "Reconnecting",
    "handshake_table",
]

log = logging.getLogger("pluto.p2os")

SERIAL_BAUD_RATES: tuple[int, ...] = (9600, 38400, 19200, 115200, 57600)
"""Baud rates tried, in this order, when a real serial port does not answer (as established clients do)."""
DEFAULT_MAX_ROT_VELOCITY = math.radians(360.0)
"""Rotational speed limit of every model, rad/s (the parameter table gives none); a CONFIGpac's RotVelTop lowers
it."""
CONFIG_WAIT = 1.0
"""How long the handshake asks for a CONFIGpac before going on without it, s."""
CONFIG_REPEAT = 0.3
"""Time between two CONFIG requests while waiting for the CONFIGpac, s."""
DRAIN_QUIET = 0.15
"""After CLOSE to a stale session: quiet time (no packet) that ends the wait for the robot to stop sending, s."""
DRAIN_LIMIT = 1.0
"""After CLOSE to a stale session: the longest wait for the robot to stop sending, s."""
MAX_STALE_SESSIONS = 3
"""CLOSE-and-resync rounds at one baud rate before giving up on a robot that keeps sending SIPs."""
RECONNECT_BACKOFF = (0.1, 2.0)
"""First and largest delay before a reconnection attempt, s (doubling after each failed attempt)."""
SETO_SETTLE = 0.5
"""After SETO, SIPs still showing the old position are ignored for at most this long, s."""


# --------------------------------------------------------------------------------------------------- errors


class P2osError(PlutoError):
    """Base of the P2OS client's and driver's errors."""


class P2osConnectError(P2osError):
    """The port could not be opened, or no robot completed the handshake on it."""


class P2osLinkError(P2osError):
    """Not connected to the robot (the link is down or being re-established), or a write to the port failed."""


class P2osTimeout(P2osError, TimeoutError):
    """The robot did not answer within the time allowed."""


# --------------------------------------------------------------------------------------------------- values


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


@dataclass(frozen=True, slots=True)
class P2osStatistics:
    """What the client has seen and done since it was created.

    Attributes:
        packets, bytes, bad_checksum, bad_length, garbage_bytes, unknown_type, malformed: the decoder's counters
            (see :class:`.decoder.DecoderStatistics`), summed over every connection attempt.
        sips: SIPs received.
        configs: CONFIGpacs received.
        connects: handshakes completed (the first connection and every reconnection).
        reconnects: reconnections after a link loss.
        link_losses: times the link was found dead (port error or `link_timeout` without a packet).
        stale_sessions: robots found still open from an earlier session (answered with CLOSE and a new handshake).
        command_timeouts: times the command timeout stopped the robot.
        keepalives: PULSEs sent.
        large_deltas: odometry steps longer than the robot could have travelled that the next SIP confirmed
            (applied: the counters did jump).
        dropped_sips: SIPs whose step was impossible and that the next SIP contradicted (damaged packets whose
            checksum happened to match; not used).
        handler_errors: packets whose handling failed (a client bug; logged with a traceback).
    """

    packets: int = 0
    bytes: int = 0
    bad_checksum: int = 0
    bad_length: int = 0
    garbage_bytes: int = 0
    unknown_type: int = 0
    malformed: int = 0
    sips: int = 0
    configs: int = 0
    connects: int = 0
    reconnects: int = 0
    link_losses: int = 0
    stale_sessions: int = 0
    command_timeouts: int = 0
    keepalives: int = 0
    large_deltas: int = 0
    dropped_sips: int = 0
    handler_errors: int = 0


# --------------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Connected:
    """The handshake is done: the link is up.

    Attributes:
        name, robot_class, subclass: what the robot's SYNC2 echo says.
        model: the subclass whose parameters are used.
        reconnection: True when this ends a reconnection after a link loss.
    """

    name: str
    robot_class: str
    subclass: str
    model: str
    reconnection: bool


@dataclass(frozen=True, slots=True)
class LinkLost:
    """The link is down: close the port (queued output was dropped).

    Attributes:
        reason: why, for a log line (``"no packet for 3.1 s"``, ``"read failed: ..."``).
        reconnecting: a :class:`Reconnecting` follows after a back-off.
    """

    reason: str
    reconnecting: bool


@dataclass(frozen=True, slots=True)
class ConnectFailed:
    """The handshake failed: close the port.

    Attributes:
        reason: a sentence for the user (``"no robot responding on ...: ..."``).
        reconnecting: this was a reconnection attempt; another follows after a longer back-off.
    """

    reason: str
    reconnecting: bool


@dataclass(frozen=True, slots=True)
class BaudRate:
    """Set the port to this baud rate before writing :meth:`P2osClient.data_to_send` (the robot did not answer at
    the previous one).

    Attributes:
        baud: bit/s.
    """

    baud: int


@dataclass(frozen=True, slots=True)
class Reconnecting:
    """Time for a reconnection attempt: open the port at ``baud``, then write :meth:`P2osClient.data_to_send` (the
    handshake's SYNC0 waits there); report a port that cannot be opened with :meth:`P2osClient.port_failed`.

    Attributes:
        attempt: 1 for the first attempt after the link loss.
        baud: bit/s to open the port at.
    """

    attempt: int
    baud: int


ClientEvent = Connected | LinkLost | ConnectFailed | BaudRate | Reconnecting
"""What :meth:`P2osClient.next_event` returns besides NEED_DATA."""


# --------------------------------------------------------------------------------------------------- the handshake

HandshakePhase = Literal["sync0", "sync1", "sync2", "drain", "open", "config", "enable"]
"""The steps of the handshake (see :func:`handshake_table`)."""
Phase = Literal[
    "idle", "sync0", "sync1", "sync2", "drain", "open", "config", "enable", "connected", "backoff", "closed"
]
"""Where the client is: idle (no link, nothing under way), a handshake step, connected, backoff (waiting to
reconnect after a link loss or a failed attempt) or closed (for good)."""
Awaited = Literal["echo", "quiet", "sip", "configpac", "motors"]
"""What ends a handshake step: the echo of the SYNC sent (a SIP or CONFIGpac instead means a session still open:
CLOSE and drain), the robot quiet for a try's time (each packet starts the try again), any SIP, a CONFIGpac, or a
SIP (the second of the try or later; at the end of the try the newest one) that shows the motors enabled or the
e-stop engaged."""
Outcome = Literal["sync0", "sync1", "sync2", "drain", "open", "config", "enable", "connected", "next_baud", "fail"]
"""Where a handshake step leads: a step, connected, the next baud rate (or failure after the last one), failure."""
Argument = int | None | Literal["max_velocity", "max_rot_velocity"]
"""A command's argument in the table: a number, none, or the speed limit (mm/s, deg/s) known at that point."""

_HANDSHAKE_PHASES: frozenset[str] = frozenset(get_args(HandshakePhase))
_READING: frozenset[str] = _HANDSHAKE_PHASES | {"connected"}  # the phases in which a port is open


@dataclass(frozen=True, slots=True)
class HandshakeStep:
    """One step of the handshake.

    Attributes:
        sends: the commands sent on entering the step and again on each further try.
        awaits: what ends the step (see :data:`Awaited`).
        timeout: one try, s.
        tries: tries before the step is exhausted.
        limit: the longest the step may last, s, whatever the tries; None for no limit beyond them.
        done: where the step leads when what it awaits came.
        exhausted: where it leads when its tries (or its limit) are spent.
    """

    sends: tuple[tuple[Command, Argument], ...]
    awaits: Awaited
    timeout: float
    tries: int
    limit: float | None
    done: Outcome
    exhausted: Outcome


def handshake_table(timeout: float, tries: int) -> Mapping[HandshakePhase, HandshakeStep]:
    """The handshake as data: each step, what it sends and awaits, for how long, and where it leads.

    Args:
        timeout: time each SYNC, OPEN and ENABLE try waits for the robot's answer, s.
        tries: tries of each of them.

    Returns:
        A read-only mapping from the handshake's steps to their rules.
    """
    sync: Outcome = "next_baud"
    return MappingProxyType(
        {
            "sync0": HandshakeStep(((Command.SYNC0, None),), "echo", timeout, tries, None, "sync1", sync),
            "sync1": HandshakeStep(((Command.SYNC1, None),), "echo", timeout, tries, None, "sync2", sync),
            "sync2": HandshakeStep(((Command.SYNC2, None),), "echo", timeout, tries, None, "open", sync),
            "drain": HandshakeStep(((Command.CLOSE, 1),), "quiet", DRAIN_QUIET, 1, DRAIN_LIMIT, "sync0", "sync0"),
            "open": HandshakeStep(((Command.OPEN, 1),), "sip", timeout, tries, None, "config", "fail"),
            "config": HandshakeStep(
                ((Command.CONFIG, 1),),
                "configpac",
                CONFIG_REPEAT,
                math.ceil(CONFIG_WAIT / CONFIG_REPEAT),
                CONFIG_WAIT,
                "enable",
                "enable",
            ),
            "enable": HandshakeStep(
                ((Command.SETV, "max_velocity"), (Command.SETRV, "max_rot_velocity"), (Command.ENABLE, 1)),
                "motors",
                timeout,
                tries,
                None,
                "connected",
                "connected",
            ),
        }
    )


# --------------------------------------------------------------------------------------------------- helpers

Pose = tuple[float, float, float]
_IDENTITY: Pose = (0.0, 0.0, 0.0)
_DECODER_FIELDS = tuple(f.name for f in fields(DecoderStatistics))
_GOODBYE: tuple[tuple[Command, int], ...] = (
    (Command.VEL, 0),
    (Command.RVEL, 0),
    (Command.ENABLE, 0),
    (Command.CLOSE, 1),
)


def _compose(a: Pose, b: Pose) -> Pose:
    """Pose ``b`` given in the frame of pose ``a``, in a's parent frame (headings add, not wrapped)."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], a[2] + b[2]


def _inverse(a: Pose) -> Pose:
    """The pose that composes with ``a`` to the identity."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return -c * a[0] - s * a[1], s * a[0] - c * a[1], -a[2]


def _clamp(value: float, limit: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return max(-limit, min(limit, value))


def _speed_limits(params: RobotParams, config: ConfigPacket | None) -> tuple[float, float]:
    """The translational and rotational speed limits (m/s, rad/s): the lower of the model's and the CONFIGpac's
    TransVelTop and RotVelTop; a zero there (nothing configured) is ignored, and so is a missing CONFIGpac."""
    speed, turn_rate = params.max_velocity, DEFAULT_MAX_ROT_VELOCITY
    if config is not None:
        if config.trans_vel_top > 0:
            speed = min(speed, config.trans_vel_top / 1000.0)
        if config.rot_vel_top > 0:
            turn_rate = min(turn_rate, math.radians(config.rot_vel_top))
    return speed, turn_rate


def _with_pose(state: P2osState, pose: Pose) -> P2osState:
    return replace(state, x=pose[0], y=pose[1], theta=pose[2])


# --------------------------------------------------------------------------------------------------- the client


class P2osClient:
    """A client of a Pioneer robot speaking P2OS/ARCOS, sans I/O.

    Feed it what the port reads (:meth:`receive_data`), write what it queues (:meth:`data_to_send`), call
    :meth:`step` often (every few tens of ms: its timers are only as exact as that), and act on its events
    (:meth:`next_event`) before writing: they say when to change the baud rate, close the port or open it again.
    Commands take SI units and are clamped to the limits; they raise :class:`P2osLinkError` unless connected.

    Args:
        port_name: where the robot is, for messages and log lines (``"/dev/ttyUSB0"``, a URL).
        model: the robot subclass whose parameters to use (e.g. ``"p3dx"``); None to take it from the SYNC2 echo.
        baud: the first baud rate of each handshake, bit/s.
        serial: the port is a serial line: a handshake that gets no answer is tried at the other standard rates.
        handshake_timeout: time each handshake step waits for the robot's answer, s.
        handshake_retries: tries of each handshake step before giving up (at one baud rate).
        command_timeout: a velocity command not renewed within this time is followed by VEL 0 / RVEL 0, s.
        keepalive: a PULSE is sent when nothing else was written for this long, s.
        link_timeout: the link is considered dead after this long without a packet, s.
        reconnect: after a link loss, run the handshake again (after a back-off) until it succeeds.

    Raises:
        ValueError: a time or retry count that is not positive.
    """

    def __init__(
        self,
        port_name: str = "the port",
        *,
        model: str | None = None,
        baud: int = 9600,
        serial: bool = False,
        handshake_timeout: float = 0.5,
        handshake_retries: int = 3,
        command_timeout: float = 1.0,
        keepalive: float = 0.5,
        link_timeout: float = 3.0,
        reconnect: bool = True,
    ) -> None:
        for name, value in (
            ("handshake_timeout", handshake_timeout),
            ("command_timeout", command_timeout),
            ("keepalive", keepalive),
            ("link_timeout", link_timeout),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if handshake_retries < 1:
            raise ValueError(f"handshake_retries must be >= 1, got {handshake_retries}")
        self._name = port_name
        self._model = model or None
        self._bauds = (baud, *(b for b in SERIAL_BAUD_RATES if b != baud)) if serial else (baud,)
        self._handshake_timeout = handshake_timeout
        self._handshake_retries = handshake_retries
        self._command_timeout = command_timeout
        self._keepalive = keepalive
        self._link_timeout = link_timeout
        self._reconnect = reconnect
        self._table = handshake_table(handshake_timeout, handshake_retries)

        self._phase: Phase = "idle"
        self._out = bytearray()
        self._events: deque[ClientEvent] = deque()
        self._decoder = P2osDecoder("client")
        self._decoder_totals = dict.fromkeys(_DECODER_FIELDS, 0)
        self._paused = False

        # the handshake under way
        self._baud_index = 0
        self._tries = 0
        self._try_deadline = math.inf
        self._step_deadline = math.inf
        self._step_sips = 0  # SIPs when the step began
        self._try_sips = 0  # SIPs when the try began
        self._configs_before = 0  # CONFIGpacs when OPEN was first sent
        self._stale = 0  # stale sessions closed at this baud rate
        self._attempt = 0  # reconnection attempt (0: the first connection)
        self._delay = RECONNECT_BACKOFF[0]
        self._reconnect_at = math.inf

        # the robot
        self._identity: SyncReply | None = None
        self._params: RobotParams | None = None
        self._integrator: OdometryIntegrator | None = None
        self._offset: Pose = _IDENTITY
        self._seto_until: float | None = None
        self._sonar: list[float] = []
        self._state: P2osState | None = None
        self._config: ConfigPacket | None = None
        self._max_velocity = 0.0  # what commands are clamped to (SETV/SETRV through set_speed_profile lower them)
        self._max_rot_velocity = DEFAULT_MAX_ROT_VELOCITY
        self._top_velocity = 0.0  # the limits themselves: the lower of the model's and the CONFIGpac's
        self._top_rot_velocity = DEFAULT_MAX_ROT_VELOCITY

        # timers
        self._last_packet = 0.0
        self._last_write = 0.0
        self._last_command = 0.0
        self._motion_armed = False

        # counters
        self._sips = 0
        self._configs = 0
        self._connects = 0
        self._reconnects = 0
        self._link_losses = 0
        self._stale_sessions = 0
        self._command_timeouts = 0
        self._keepalives = 0
        self._handler_errors = 0

    def __repr__(self) -> str:
        model = self._params.subclass if self._params else "?"
        return f"<P2osClient {self._name} model={model} {self._phase}>"

    # -- properties ---------------------------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """Where the client is: 'idle', a handshake step, 'connected', 'backoff' or 'closed'."""
        return self._phase

    @property
    def connected(self) -> bool:
        """The handshake is done and the link is alive."""
        return self._phase == "connected"

    @property
    def busy(self) -> bool:
        """A port is in use or wanted: a handshake, a session or a reconnection is under way."""
        return self._phase not in ("idle", "closed")

    @property
    def baud(self) -> int:
        """The baud rate the port should run at now, bit/s."""
        return self._bauds[self._baud_index]

    @property
    def handshake_budget(self) -> float:
        """The longest one handshake (every baud rate) may take, s."""
        per_baud = 3 * self._handshake_retries * self._handshake_timeout + MAX_STALE_SESSIONS * DRAIN_LIMIT
        return len(self._bauds) * per_baud + CONFIG_WAIT + 2 * self._handshake_retries * self._handshake_timeout + 1.0

    @property
    def paused(self) -> bool:
        """Output is paused (:meth:`pause_output`)."""
        return self._paused

    @property
    def params(self) -> RobotParams:
        """The robot model's parameters (conversion factors, radius, sonar poses).

        Raises:
            P2osLinkError: never connected yet, so the model is not known.
        """
        params = self._params
        if params is None:
            raise P2osLinkError(f"the robot model is not known before the first connection to {self._name}")
        return params

    @property
    def robot_name(self) -> str | None:
        """The robot's name from the SYNC2 echo (None before connecting)."""
        return self._identity.name if self._identity else None

    @property
    def robot_class(self) -> str | None:
        """The robot class from the SYNC2 echo (None before connecting)."""
        return self._identity.robot_class if self._identity else None

    @property
    def robot_subclass(self) -> str | None:
        """The robot subclass from the SYNC2 echo (None before connecting)."""
        return self._identity.subclass if self._identity else None

    @property
    def state(self) -> P2osState | None:
        """The newest state (None before the first SIP)."""
        return self._state

    @property
    def sips(self) -> int:
        """SIPs received so far."""
        return self._sips

    @property
    def config(self) -> ConfigPacket | None:
        """The newest CONFIGpac (robot units), or None if the robot sent none."""
        return self._config

    @property
    def max_velocity(self) -> float:
        """The translational speed limit commands are clamped to, m/s: the lower of the model's top speed and the
        robot's CONFIGpac TransVelTop, or less if :meth:`set_speed_profile` set less."""
        return self._max_velocity

    @property
    def max_rot_velocity(self) -> float:
        """The rotational speed limit commands are clamped to, rad/s: the lower of
        :data:`DEFAULT_MAX_ROT_VELOCITY` and the robot's CONFIGpac RotVelTop, or less if :meth:`set_speed_profile`
        set less."""
        return self._max_rot_velocity

    @property
    def reconnect_delay(self) -> float | None:
        """The back-off before the next reconnection attempt, s; None unless waiting to reconnect."""
        return self._delay if self._phase == "backoff" else None

    def silence(self, now: float) -> float:
        """Time since the robot last answered (a packet while connected, or the end of the handshake), s; inf
        before the first connection."""
        if self._connects == 0:
            return math.inf
        return max(0.0, now - self._last_packet)

    def statistics(self) -> P2osStatistics:
        """A snapshot of the counters (decoder, link, commands)."""
        decoder = self._decoder.statistics()
        totals = {name: self._decoder_totals[name] + getattr(decoder, name) for name in _DECODER_FIELDS}
        integrator = self._integrator
        return P2osStatistics(
            **totals,
            sips=self._sips,
            configs=self._configs,
            connects=self._connects,
            reconnects=self._reconnects,
            link_losses=self._link_losses,
            stale_sessions=self._stale_sessions,
            command_timeouts=self._command_timeouts,
            keepalives=self._keepalives,
            large_deltas=integrator.large_deltas if integrator else 0,
            dropped_sips=integrator.dropped if integrator else 0,
            handler_errors=self._handler_errors,
        )

    # -- bytes and events ---------------------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed what the port read; ``b""`` means the port's stream ended (as :meth:`port_failed`).

        Args:
            data: any bytes: garbage, partial and corrupted packets are counted and skipped.
            now: when they arrived, s.
        """
        if self._phase not in _READING:
            return  # no port of ours is open: left-overs of one that was closed
        if not data:
            self.port_failed("the stream ended", now)
            return
        decoder = self._decoder
        decoder.receive_data(bytes(data))
        for event in decoder.events():
            if self._decoder is not decoder or self._phase not in _READING:
                return  # the link ended on an earlier packet of this read
            if self._phase == "connected":
                self._last_packet = now
                self._handle(event, now)
            else:
                self._handshake_packet(event, now)

    def data_to_send(self) -> bytes:
        """The bytes queued for the robot since the last call (write them after applying the events)."""
        data = bytes(self._out)
        self._out.clear()
        return data

    def next_event(self) -> ClientEvent | Literal[NeedData.NEED_DATA]:
        """The next event for the shell, or NEED_DATA when none is waiting."""
        if self._events:
            return self._events.popleft()
        return NEED_DATA

    def events(self) -> Iterator[ClientEvent]:
        """Every event waiting now; stops at NEED_DATA."""
        while self._events:
            yield self._events.popleft()

    def step(self, now: float) -> None:
        """Run the timers up to ``now``: handshake steps, link timeout, command timeout, keepalive, back-off.

        Args:
            now: time, s, from the same monotonic clock as every other ``now``.
        """
        phase = self._phase
        if phase in _HANDSHAKE_PHASES:
            self._handshake_timer(now)
        elif phase == "connected":
            silence = now - self._last_packet
            if silence > self._link_timeout:
                self._lose_link(f"no packet for {silence:.1f} s", now)
            elif not self._paused:
                self._keep_alive(now)
        elif phase == "backoff" and now >= self._reconnect_at:
            self._attempt += 1
            self._start_handshake(now)
            self._events.append(Reconnecting(self._attempt, self.baud))

    # -- the shell's reports ------------------------------------------------------------------------------------

    def connect(self, now: float) -> None:
        """Start the handshake: the port is open (at :attr:`baud`). Nothing happens if one is under way or the
        link is up; while waiting to reconnect, the attempt starts at once.

        Raises:
            LocalProtocolError: the client was closed.
        """
        if self._phase == "closed":
            raise LocalProtocolError(f"the P2OS client for {self._name} was closed")
        if self._phase == "backoff":
            self._attempt += 1
        elif self._phase != "idle":
            return
        self._start_handshake(now)

    def port_failed(self, reason: str, now: float) -> None:
        """The port failed (a read or write error, or it could not be opened): the link is lost, or the
        handshake under way has failed. Ignored when no port is in use.

        Args:
            reason: what failed, for messages (``"read failed: SerialException: device disconnected"``).
            now: when, s.
        """
        if self._phase in _HANDSHAKE_PHASES:
            self._fail(f"handshake with the robot on {self._name} failed: {reason}", now)
        elif self._phase == "connected":
            self._lose_link(reason, now)

    def close(self, now: float) -> None:
        """End the session for good: if connected, VEL 0, RVEL 0, ENABLE 0 and CLOSE wait in
        :meth:`data_to_send`; then close the port. Idempotent."""
        if self._phase == "closed":
            return
        connected = self._phase == "connected"
        self._out.clear()
        self._phase = "closed"
        self._motion_armed = False
        if connected:
            for command, argument in _GOODBYE:
                self._emit(command, argument, now)

    def pause_output(self) -> None:
        """For tests: queue nothing more (no PULSE, no command, no goodbye), as if the program had hung. Commands
        still return normally, and the timers that would write are held."""
        self._paused = True

    def resume_output(self) -> None:
        """For tests: undo :meth:`pause_output`."""
        self._paused = False

    # -- the user's wishes --------------------------------------------------------------------------------------

    def set_velocity(self, v: float, omega: float, now: float) -> None:
        """Drive: translation and rotation (VEL and RVEL), clamped to the limits.

        Args:
            v: forward velocity, m/s.
            omega: rotational velocity, rad/s, counter-clockwise positive.
            now: s.

        Raises:
            ValueError: a value that is not finite.
            P2osLinkError: not connected.
        """
        v = _clamp(v, self._max_velocity, "v")
        omega = _clamp(omega, self._max_rot_velocity, "omega")
        self._command(((Command.VEL, to_mm(v)), (Command.RVEL, to_deg(omega))), v != 0.0 or omega != 0.0, now)

    def set_wheel_velocities(self, left: float, right: float, now: float) -> None:
        """Drive each wheel (VEL2), clamped to the translational limit.

        Args:
            left, right: wheel velocities, m/s (sent in Vel2Divisor units: 20 mm/s on Pioneers).
            now: s.

        Raises:
            ValueError: a value that is not finite.
            P2osLinkError: not connected.
        """
        left = _clamp(left, self._max_velocity, "left")
        right = _clamp(right, self._max_velocity, "right")
        self._require_link()
        argument = self.params.vel2_argument(left, right)
        self._command(((Command.VEL2, argument),), argument != 0, now)

    def stop_motion(self, now: float) -> None:
        """Stop: VEL 0 and RVEL 0.

        Raises:
            P2osLinkError: not connected.
        """
        self._command(((Command.VEL, 0), (Command.RVEL, 0)), False, now)

    def enable_motors(self, on: bool, now: float) -> bool | None:
        """Enable or disable the motors (ENABLE).

        Args:
            on: True to enable, False to disable.
            now: s.

        Returns:
            False if the newest SIP shows the e-stop engaged and ``on`` (a log line says so); otherwise None: the
            outcome comes with the next SIPs (:meth:`motors_outcome`).

        Raises:
            P2osLinkError: not connected.
        """
        self._require_link()
        state = self._state
        self._emit(Command.ENABLE, 1 if on else 0, now)
        if on and state is not None and state.estop:
            self._estop_warning()
            return False
        return None

    def motors_outcome(self, on: bool) -> bool | None:
        """What the newest SIP says of an :meth:`enable_motors` request.

        Returns:
            True if the motors are in the asked state, False if they cannot be (the e-stop is engaged: a log line
            says so), None if the SIP does not tell yet.
        """
        state = self._state
        if state is None:
            return None
        if state.motors_enabled == on:
            return True
        if on and state.estop:
            self._estop_warning()
            return False
        return None

    def reset_odometry(self, now: float) -> None:
        """Reset the odometry to (0, 0, 0): SETO on the robot, and the client's integrator and frame.

        Raises:
            P2osLinkError: not connected.
        """
        self._require_link()
        self._emit(Command.SETO, None, now)
        self._offset = _IDENTITY
        self._seto_until = now + SETO_SETTLE
        if self._state is not None:
            self._state = _with_pose(self._state, _IDENTITY)

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        """Declare the current odometry pose (client side: the robot is not told).

        Args:
            x, y: m; theta: rad.

        Raises:
            ValueError: a value that is not finite.
        """
        wanted = (_clamp(x, math.inf, "x"), _clamp(y, math.inf, "y"), _clamp(theta, math.inf, "theta"))
        integrator = self._integrator
        raw = integrator.pose if integrator is not None else None
        self._offset = _compose(wanted, _inverse(raw if raw is not None else _IDENTITY))
        if self._state is not None:
            self._state = _with_pose(self._state, wanted)

    def request_config(self, now: float) -> None:
        """Ask for a CONFIGpac (CONFIG); it shows in :attr:`config` when it arrives.

        Raises:
            P2osLinkError: not connected.
        """
        self._require_link()
        self._emit(Command.CONFIG, 1, now)

    def set_speed_profile(
        self,
        now: float,
        *,
        max_speed: float | None = None,
        max_accel: float | None = None,
        max_decel: float | None = None,
        max_turn_rate: float | None = None,
        max_turn_accel: float | None = None,
        max_turn_decel: float | None = None,
    ) -> None:
        """Set the robot's speed and acceleration limits (SETV, SETA, SETRV, SETRA); None leaves one as it is.

        The speed limits also bound the commands the client sends; they are never set above the robot's limits
        (the lower of the model's and the CONFIGpac's, see :attr:`max_velocity`).

        Args:
            now: s.
            max_speed: m/s. max_accel, max_decel: m/s² (> 0).
            max_turn_rate: rad/s. max_turn_accel, max_turn_decel: rad/s² (> 0).

        Raises:
            ValueError: a value that is not a positive finite number.
            P2osLinkError: not connected.
        """
        values = {
            "max_speed": max_speed,
            "max_accel": max_accel,
            "max_decel": max_decel,
            "max_turn_rate": max_turn_rate,
            "max_turn_accel": max_turn_accel,
            "max_turn_decel": max_turn_decel,
        }
        for name, value in values.items():
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        self._require_link()
        speed = min(max_speed, self._top_velocity) if max_speed is not None else None
        turn_rate = min(max_turn_rate, self._top_rot_velocity) if max_turn_rate is not None else None
        commands: list[tuple[Command, int]] = []
        if speed is not None:
            commands.append((Command.SETV, to_mm(speed)))
        if max_accel is not None:
            commands.append((Command.SETA, to_mm(max_accel)))
        if max_decel is not None:
            commands.append((Command.SETA, -to_mm(max_decel)))
        if turn_rate is not None:
            commands.append((Command.SETRV, to_deg(turn_rate)))
        if max_turn_accel is not None:
            commands.append((Command.SETRA, to_deg(max_turn_accel)))
        if max_turn_decel is not None:
            commands.append((Command.SETRA, -to_deg(max_turn_decel)))
        for command, argument in commands:
            self._emit(command, argument, now)
        if speed is not None:
            self._max_velocity = speed
        if turn_rate is not None:
            self._max_rot_velocity = turn_rate

    # -- output and commands ------------------------------------------------------------------------------------

    def _emit(self, command: Command, argument: int | None, now: float) -> None:
        if self._paused:
            return
        self._out += encode_command(command, argument)
        self._last_write = now

    def _require_link(self) -> None:
        if self._phase != "connected":
            raise P2osLinkError(f"not connected to the robot on {self._name}")

    def _command(self, commands: tuple[tuple[Command, int], ...], moving: bool, now: float) -> None:
        self._require_link()
        for command, argument in commands:
            self._emit(command, argument, now)
        self._last_command = now
        self._motion_armed = moving

    def _keep_alive(self, now: float) -> None:
        if self._motion_armed and now - self._last_command >= self._command_timeout:
            self._motion_armed = False
            self._command_timeouts += 1
            log.warning(
                "no velocity command for %.2f s: stopping the robot on %s (VEL 0, RVEL 0)",
                now - self._last_command,
                self._name,
            )
            self._emit(Command.VEL, 0, now)
            self._emit(Command.RVEL, 0, now)
        elif now - self._last_write >= self._keepalive:
            self._emit(Command.PULSE, None, now)
            self._keepalives += 1

    def _estop_warning(self) -> None:
        log.warning("cannot enable the motors of the robot on %s: the e-stop is engaged (release it first)", self._name)

    # -- the handshake ------------------------------------------------------------------------------------------

    def _start_handshake(self, now: float) -> None:
        """A new attempt on a freshly opened port: a new decoder, the first baud rate, SYNC0."""
        totals = self._decoder.statistics()
        for name in _DECODER_FIELDS:
            self._decoder_totals[name] += getattr(totals, name)
        self._decoder = P2osDecoder("client")
        self._out.clear()
        self._baud_index = 0
        self._stale = 0
        self._enter("sync0", now)

    def _current_step(self) -> HandshakeStep:
        return self._table[cast(HandshakePhase, self._phase)]

    def _enter(self, phase: HandshakePhase, now: float) -> None:
        step = self._table[phase]
        self._phase = phase
        self._tries = 0
        self._step_sips = self._sips
        self._step_deadline = now + step.limit if step.limit is not None else math.inf
        if phase == "open":
            self._configs_before = self._configs
        elif phase == "config" and self._configs > self._configs_before:
            self._go(step.done, now)  # a CONFIGpac came already (after OPEN)
            return
        self._try(step, now)

    def _try(self, step: HandshakeStep, now: float) -> None:
        self._tries += 1
        self._try_sips = self._sips
        self._try_deadline = now + step.timeout
        for command, argument in step.sends:
            if argument == "max_velocity":
                self._emit(command, to_mm(self._max_velocity), now)
            elif argument == "max_rot_velocity":
                self._emit(command, to_deg(self._max_rot_velocity), now)
            else:
                self._emit(command, argument, now)

    def _awaited(self, step: HandshakeStep, end_of_try: bool) -> bool:
        """What ``step`` awaits has come (the echo is judged per packet, in _handshake_packet)."""
        if step.awaits == "sip":
            return self._sips > self._step_sips
        if step.awaits == "configpac":
            return self._configs > self._configs_before
        if step.awaits == "motors":
            state = self._state
            # two SIPs: the first may have left before the ENABLE arrived
            settled = end_of_try or self._sips >= self._try_sips + 2
            return settled and state is not None and (state.motors_enabled or state.estop)
        return step.awaits == "quiet" and end_of_try

    def _handshake_packet(self, event: Event, now: float) -> None:
        phase = self._phase
        step = self._current_step()
        if step.awaits == "echo":
            if isinstance(event, SyncReply):
                if event.sync == int(step.sends[0][0]):
                    if phase == "sync2":
                        self._identify(event)
                    self._go(step.done, now)
                # else: a late echo of an earlier try
            elif isinstance(event, Sip | ConfigPacket):
                self._stale_session(now)
            return
        if step.awaits == "quiet":
            self._try_deadline = now + step.timeout  # not quiet yet
            return
        self._handle(event, now)
        if self._awaited(step, end_of_try=False):
            self._go(step.done, now)

    def _handshake_timer(self, now: float) -> None:
        step = self._current_step()
        if now >= self._step_deadline:
            self._go(step.exhausted, now, exhausted=True)
        elif now >= self._try_deadline:
            if self._awaited(step, end_of_try=True):
                self._go(step.done, now)
            elif self._tries < step.tries:
                self._try(step, now)
            else:
                self._go(step.exhausted, now, exhausted=True)

    def _go(self, outcome: Outcome, now: float, *, exhausted: bool = False) -> None:
        """Leave the current handshake step for ``outcome``."""
        leaving = self._phase
        if exhausted and leaving == "config":
            log.info(
                "no CONFIGpac from the robot on %s within %.1f s; using the model's limits", self._name, CONFIG_WAIT
            )
        elif exhausted and leaving == "enable":
            log.warning(
                "the motors of the robot on %s did not report enabled after %d ENABLE",
                self._name,
                self._handshake_retries,
            )
        if outcome == "connected":
            self._session_up(now)
        elif outcome == "next_baud":
            self._next_baud(now)
        elif outcome == "fail":
            self._fail(
                f"the robot on {self._name} completed SYNC0-2 but sent no SIP after OPEN "
                f"({self._tries} tries of {self._handshake_timeout} s)",
                now,
            )
        else:
            if outcome == "enable":
                self._set_limits(self._config if self._configs > self._configs_before else None)
            self._enter(outcome, now)

    def _stale_session(self, now: float) -> None:
        self._stale += 1
        self._stale_sessions += 1
        if self._stale > MAX_STALE_SESSIONS:
            self._fail(
                f"the robot on {self._name} keeps sending SIPs although told to CLOSE {MAX_STALE_SESSIONS} "
                "times; another client may be connected to it",
                now,
            )
            return
        log.info(
            "the robot on %s is still open from an earlier session: sending CLOSE and synchronising again", self._name
        )
        self._enter("drain", now)

    def _next_baud(self, now: float) -> None:
        if self._phase != "sync0":
            log.warning("the robot on %s stopped answering at %s", self._name, self._phase.upper())
        if self._baud_index + 1 >= len(self._bauds):
            tried = ", ".join(str(b) for b in self._bauds)
            self._fail(
                f"no robot responding on {self._name}: no answer to SYNC0 within {self._handshake_timeout} s, "
                f"{self._handshake_retries} tries (baud {tried}); is the robot on and the cable in?",
                now,
            )
            return
        self._baud_index += 1
        log.info("no answer from %s; trying %d baud", self._name, self.baud)
        self._out.clear()
        self._events.append(BaudRate(self.baud))
        self._stale = 0
        self._enter("sync0", now)

    def _identify(self, reply: SyncReply) -> None:
        """The SYNC2 echo: choose the model's parameters."""
        params = self._select_params(reply)
        if self._params is None or self._params.subclass != params.subclass:
            self._params = params
            self._integrator = OdometryIntegrator(params)
            self._sonar = [math.inf] * params.sonar_count
        self._identity = reply

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

    def _set_limits(self, config: ConfigPacket | None) -> None:
        params = self.params
        self._top_velocity, self._top_rot_velocity = _speed_limits(params, config)
        self._max_velocity, self._max_rot_velocity = self._top_velocity, self._top_rot_velocity
        log.info(
            "speed limits for %s: %.2f m/s, %.0f deg/s (the lower of the %s model's and the robot's CONFIGpac's)",
            self._name,
            self._top_velocity,
            math.degrees(self._top_rot_velocity),
            params.subclass,
        )

    def _session_up(self, now: float) -> None:
        self._phase = "connected"
        self._last_packet = now
        self._last_command = now
        self._motion_armed = False
        self._connects += 1
        reply, params, state = self._identity, self.params, self._state
        assert reply is not None
        log.info(
            "connected to %s on %s (%s %s, model %s)%s",
            reply.name or "a robot",
            self._name,
            reply.robot_class or "?",
            reply.subclass or "?",
            params.subclass,
            "; the e-stop is engaged: the motors will not enable" if state and state.estop else "",
        )
        reconnection = self._attempt > 0
        if reconnection:
            self._reconnects += 1
            log.info("reconnected to %s after %d attempt(s)", self._name, self._attempt)
        self._attempt = 0
        self._events.append(
            Connected(reply.name or "", reply.robot_class or "", reply.subclass or "", params.subclass, reconnection)
        )

    def _fail(self, reason: str, now: float) -> None:
        """The handshake failed: back off and try again if this was a reconnection, else give up."""
        self._out.clear()
        reconnecting = self._attempt > 0
        if reconnecting:
            if self._attempt == 1 or self._attempt % 10 == 0:
                log.info("reconnection to %s failed (attempt %d): %s", self._name, self._attempt, reason)
            self._delay = min(self._delay * 2.0, RECONNECT_BACKOFF[1])
            self._reconnect_at = now + self._delay
            self._phase = "backoff"
        else:
            self._phase = "idle"
        self._baud_index = 0
        self._events.append(ConnectFailed(reason, reconnecting))

    def _lose_link(self, reason: str, now: float) -> None:
        self._out.clear()
        self._baud_index = 0  # a new port starts at the first rate
        self._link_losses += 1
        self._motion_armed = False
        log.warning(
            "P2OS link to %s lost (%s); %s",
            self._name,
            reason,
            "reconnecting in the background" if self._reconnect else "not reconnecting",
        )
        if self._reconnect:
            self._phase = "backoff"
            self._attempt = 0
            self._delay = RECONNECT_BACKOFF[0]
            self._reconnect_at = now + self._delay
        else:
            self._phase = "idle"
        self._events.append(LinkLost(reason, self._reconnect))

    # -- packets ------------------------------------------------------------------------------------------------

    def _handle(self, event: Event, now: float) -> None:
        try:
            if isinstance(event, Sip):
                self._on_sip(event, now)
            elif isinstance(event, ConfigPacket):
                self._config = event
                self._configs += 1
            # SYNC echoes arriving late, encoder/IO/gripper packets and unknown types: nothing to do (counted by
            # the decoder where it matters).
        except Exception:
            self._handler_errors += 1
            log.exception("handling %s failed (counted; the client goes on)", type(event).__name__)

    def _on_sip(self, sip: Sip, now: float) -> None:
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
