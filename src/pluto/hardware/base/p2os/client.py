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
:mod:`.models`). This module is the client's state machine: the handshake it runs (the table itself is
:mod:`.handshake`), the timers, the link. The codec's SI side is apart: the robot's state, turned from its SIPs
into SI, is :mod:`.state`, and the commands, turned from SI into robot units within the speed limits, are
:mod:`.commands`; the events, errors and counters the client hands out are :mod:`.events`. What is left (under 900
lines) is one state machine, idle, handshake, connected, back-off, whose transitions share the phase, the output
queue and the events, so it stays in one file.
"""

# Strategy: the connection follows docs/protocols/p2os.md ("The session") and what established clients
# (ARIA, Player's p2os) do. The handshake is one table (handshake.py): SYNC0, SYNC1, SYNC2, each step with its
# own timeout and a few tries; a robot that answers a SYNC with SIPs is still open from an earlier session, so it
# gets CLOSE, what it still sends is dropped until it has been quiet for a while, and the handshake starts again (a
# bounded number of times); on a real serial port the handshake is tried again at each standard baud rate, a
# decision the client announces (BaudRate) and the shell applies to its port. Then OPEN, CONFIG until a CONFIGpac
# arrives (or 1 s), SETV/SETRV to the speed limits (commands.py) and ENABLE 1.
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
from collections import deque
from collections.abc import Iterator
from dataclasses import fields
from typing import Literal, cast

from pluto.codec import NEED_DATA, NeedData

from .commands import DEFAULT_MAX_ROT_VELOCITY, SpeedLimits, check_profile, clamp
from .decoder import DecoderStatistics, Event, P2osDecoder
from .events import (
    BaudRate,
    ClientEvent,
    Connected,
    ConnectFailed,
    LinkLost,
    P2osConnectError,
    P2osError,
    P2osLinkError,
    P2osStatistics,
    P2osTimeout,
    Reconnecting,
)
from .handshake import (
    CONFIG_REPEAT,
    CONFIG_WAIT,
    DRAIN_LIMIT,
    DRAIN_QUIET,
    HANDSHAKE_PHASES,
    MAX_STALE_SESSIONS,
    SERIAL_BAUD_RATES,
    HandshakePhase,
    HandshakeStep,
    Outcome,
    Phase,
    handshake_table,
)
from .models import RobotParams, to_deg, to_mm
from .packets import Command, LocalProtocolError, encode_command
from .sip import ConfigPacket, Sip, SyncReply
from .state import SETO_SETTLE, P2osState, StateTracker

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

RECONNECT_BACKOFF = (0.1, 2.0)
"""First and largest delay before a reconnection attempt, s (doubling after each failed attempt)."""

_READING: frozenset[str] = HANDSHAKE_PHASES | {"connected"}  # the phases in which a port is open
_DECODER_FIELDS = tuple(f.name for f in fields(DecoderStatistics))
_GOODBYE: tuple[tuple[Command, int], ...] = (
    (Command.VEL, 0),
    (Command.RVEL, 0),
    (Command.ENABLE, 0),
    (Command.CLOSE, 1),
)


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
        self._robot = StateTracker(port_name, self._model)
        self._limits = SpeedLimits()

        # timers
        self._last_packet = 0.0
        self._last_write = 0.0
        self._last_command = 0.0
        self._motion_armed = False

        # counters
        self._connects = 0
        self._reconnects = 0
        self._link_losses = 0
        self._stale_sessions = 0
        self._command_timeouts = 0
        self._keepalives = 0
        self._handler_errors = 0

    def __repr__(self) -> str:
        params = self._robot.params
        model = params.subclass if params else "?"
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
        params = self._robot.params
        if params is None:
            raise P2osLinkError(f"the robot model is not known before the first connection to {self._name}")
        return params

    @property
    def robot_name(self) -> str | None:
        """The robot's name from the SYNC2 echo (None before connecting)."""
        identity = self._robot.identity
        return identity.name if identity else None

    @property
    def robot_class(self) -> str | None:
        """The robot class from the SYNC2 echo (None before connecting)."""
        identity = self._robot.identity
        return identity.robot_class if identity else None

    @property
    def robot_subclass(self) -> str | None:
        """The robot subclass from the SYNC2 echo (None before connecting)."""
        identity = self._robot.identity
        return identity.subclass if identity else None

    @property
    def state(self) -> P2osState | None:
        """The newest state (None before the first SIP)."""
        return self._robot.state

    @property
    def sips(self) -> int:
        """SIPs received so far."""
        return self._robot.sips

    @property
    def config(self) -> ConfigPacket | None:
        """The newest CONFIGpac (robot units), or None if the robot sent none."""
        return self._robot.config

    @property
    def max_velocity(self) -> float:
        """The translational speed limit commands are clamped to, m/s: the lower of the model's top speed and the
        robot's CONFIGpac TransVelTop, or less if :meth:`set_speed_profile` set less."""
        return self._limits.max_velocity

    @property
    def max_rot_velocity(self) -> float:
        """The rotational speed limit commands are clamped to, rad/s: the lower of
        :data:`DEFAULT_MAX_ROT_VELOCITY` and the robot's CONFIGpac RotVelTop, or less if :meth:`set_speed_profile`
        set less."""
        return self._limits.max_rot_velocity

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
        integrator = self._robot.integrator
        return P2osStatistics(
            **totals,
            sips=self._robot.sips,
            configs=self._robot.configs,
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
        if phase in HANDSHAKE_PHASES:
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
        if self._phase in HANDSHAKE_PHASES:
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
        commands, moving = self._limits.velocity(v, omega)
        self._command(commands, moving, now)

    def set_wheel_velocities(self, left: float, right: float, now: float) -> None:
        """Drive each wheel (VEL2), clamped to the translational limit.

        Args:
            left, right: wheel velocities, m/s (sent in Vel2Divisor units: 20 mm/s on Pioneers).
            now: s.

        Raises:
            ValueError: a value that is not finite.
            P2osLinkError: not connected.
        """
        left = clamp(left, self._limits.max_velocity, "left")
        right = clamp(right, self._limits.max_velocity, "right")
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
        state = self._robot.state
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
        state = self._robot.state
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
        self._robot.reset_odometry(now)

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        """Declare the current odometry pose (client side: the robot is not told).

        Args:
            x, y: m; theta: rad.

        Raises:
            ValueError: a value that is not finite.
        """
        self._robot.set_odometry((clamp(x, math.inf, "x"), clamp(y, math.inf, "y"), clamp(theta, math.inf, "theta")))

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
        check_profile(values)
        self._require_link()
        for command, argument in self._limits.profile(**values):
            self._emit(command, argument, now)

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
        self._step_sips = self._robot.sips
        self._step_deadline = now + step.limit if step.limit is not None else math.inf
        if phase == "open":
            self._configs_before = self._robot.configs
        elif phase == "config" and self._robot.configs > self._configs_before:
            self._go(step.done, now)  # a CONFIGpac came already (after OPEN)
            return
        self._try(step, now)

    def _try(self, step: HandshakeStep, now: float) -> None:
        self._tries += 1
        self._try_sips = self._robot.sips
        self._try_deadline = now + step.timeout
        for command, argument in step.sends:
            if argument == "max_velocity":
                self._emit(command, to_mm(self._limits.max_velocity), now)
            elif argument == "max_rot_velocity":
                self._emit(command, to_deg(self._limits.max_rot_velocity), now)
            else:
                self._emit(command, argument, now)

    def _awaited(self, step: HandshakeStep, end_of_try: bool) -> bool:
        """What ``step`` awaits has come (the echo is judged per packet, in _handshake_packet)."""
        sips = self._robot.sips
        if step.awaits == "sip":
            return sips > self._step_sips
        if step.awaits == "configpac":
            return self._robot.configs > self._configs_before
        if step.awaits == "motors":
            state = self._robot.state
            # two SIPs: the first may have left before the ENABLE arrived
            settled = end_of_try or sips >= self._try_sips + 2
            return settled and state is not None and (state.motors_enabled or state.estop)
        return step.awaits == "quiet" and end_of_try

    def _handshake_packet(self, event: Event, now: float) -> None:
        phase = self._phase
        step = self._current_step()
        if step.awaits == "echo":
            if isinstance(event, SyncReply):
                if event.sync == int(step.sends[0][0]):
                    if phase == "sync2":
                        self._robot.identify(event)
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
                self._set_limits(self._robot.config if self._robot.configs > self._configs_before else None)
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

    def _set_limits(self, config: ConfigPacket | None) -> None:
        params, limits = self.params, self._limits
        limits.adopt(params, config)
        log.info(
            "speed limits for %s: %.2f m/s, %.0f deg/s (the lower of the %s model's and the robot's CONFIGpac's)",
            self._name,
            limits.top_velocity,
            math.degrees(limits.top_rot_velocity),
            params.subclass,
        )

    def _session_up(self, now: float) -> None:
        self._phase = "connected"
        self._last_packet = now
        self._last_command = now
        self._motion_armed = False
        self._connects += 1
        reply, params, state = self._robot.identity, self.params, self._robot.state
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
                self._robot.on_sip(event, now)
            elif isinstance(event, ConfigPacket):
                self._robot.on_config(event)
            # SYNC echoes arriving late, encoder/IO/gripper packets and unknown types: nothing to do (counted by
            # the decoder where it matters).
        except Exception:
            self._handler_errors += 1
            log.exception("handling %s failed (counted; the client goes on)", type(event).__name__)
