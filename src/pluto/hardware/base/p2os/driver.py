"""The P2OS client driver: a Pioneer robot (or an emulator of one) behind a serial port, a TCP socket or a pty.

    with P2osDriver("socket://127.0.0.1:8101") as robot:   # connects: SYNC0/1/2, OPEN, CONFIG, SETV, ENABLE
        robot.set_velocity(0.3, 0.0)                       # m/s, rad/s
        state = robot.wait_for_sip(1.0)                    # the pose and sensors in SI, or None
        print(state.x, state.y, state.theta, state.sonar_ranges)
    # leaving the block sends VEL 0, RVEL 0, ENABLE 0, CLOSE and closes the port

The port is opened with ``serial.serial_for_url``, so ``/dev/ttyUSB0``, ``socket://127.0.0.1:8101``, a pty path,
``loop://`` and ``spy://`` all work with no change. Everything handed out is SI (m, rad, s, m/s, rad/s, V); robot
units stay in the codec (:mod:`.packets`, :mod:`.sip`, :mod:`.models`).
"""

# Strategy: the connection follows /work/shared/reference/p2os.md ("Connection") and what established clients
# (ARIA, Player's p2os) do. connect() runs the handshake in the caller's thread: SYNC0, SYNC1, SYNC2, each step with
# its own timeout and a few retries; a robot that answers SYNC0 with SIPs is still open from an earlier session, so
# it gets CLOSE, the input is drained and the handshake starts again (a bounded number of times); on a real serial
# port the handshake is retried at each standard baud rate. Then OPEN, CONFIG until a CONFIGpac arrives (or 1 s),
# SETV/SETRV to the maxima and ENABLE 1. The maxima, translation and rotation alike, are the lower of the model's
# (the parameter table's top speed; for rotation, which the table does not give, DEFAULT_MAX_ROT_VELOCITY) and the
# robot's own (the CONFIGpac's TransVelTop and RotVelTop): a robot configured slower than its model is respected,
# and a simulator that reports 9999 for both (AMRISim) is not believed. A zero in the CONFIGpac says nothing and is
# ignored. Every command, SETV and SETRV included, is clamped to these limits. Accelerations are not limited by the
# driver (the robot caps SETA and SETRA at its own tops).
#
# Two threads run while the driver is up. The reader owns the input: it decodes packets (the sans-I/O
# P2osDecoder), integrates the odometry (OdometryIntegrator) and keeps the newest state under a condition that
# wait_for_sip() waits on; it never raises (everything is counted and logged) and it owns reconnection: after a
# serial error or `link_timeout` s without a packet it marks the link lost (one log line), and if `reconnect` it
# runs the handshake again with a doubling back-off. The keepalive thread owns time: a PULSE when nothing was
# written for `keepalive` s, and, separately, the command timeout: a velocity command not renewed within
# `command_timeout` s is followed by VEL 0 / RVEL 0, once. The two are kept apart on purpose (the reference: "a
# keepalive must never keep an old motion command alive after the commanding program has died"). Every write goes
# through one lock, and the command-timeout check holds it too, so a fresh command can never be overtaken by a
# stale stop. Shutdown stops the threads first, then says goodbye (VEL 0, RVEL 0, ENABLE 0, CLOSE) on the port,
# then closes it: exactly once.

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from types import TracebackType
from typing import Any, Protocol, cast

import serial  # type: ignore[import-untyped]

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
from .packets import Command, encode_command
from .sip import ConfigPacket, Sip, SyncReply

__all__ = [
    "DEFAULT_MAX_ROT_VELOCITY",
    "SERIAL_BAUD_RATES",
    "P2osConnectError",
    "P2osDriver",
    "P2osError",
    "P2osLinkError",
    "P2osState",
    "P2osStatistics",
    "P2osTimeout",
    "SerialPort",
]

log = logging.getLogger("pluto.p2os")

SERIAL_BAUD_RATES: tuple[int, ...] = (9600, 38400, 19200, 115200, 57600)
"""Baud rates tried, in this order, when a real serial port does not answer (as established clients do)."""
DEFAULT_MAX_ROT_VELOCITY = math.radians(360.0)
"""Rotational speed limit of every model, rad/s (the parameter table gives none); a CONFIGpac's RotVelTop lowers
it."""
READ_TIMEOUT = 0.05
"""Timeout of one port read, s: how often the reader looks at the link timeout and the shutdown flag."""
CONFIG_WAIT = 1.0
"""How long connect() asks for a CONFIGpac before going on without it, s."""
MAX_STALE_SESSIONS = 3
"""CLOSE-and-resync rounds in one handshake before giving up on a robot that keeps sending SIPs."""
RECONNECT_BACKOFF = (0.1, 2.0)
"""First and largest delay between reconnection attempts, s (doubling in between)."""
SETO_SETTLE = 0.5
"""After SETO, SIPs still showing the old position are ignored for at most this long, s."""


# --------------------------------------------------------------------------------------------------- errors


class P2osError(PlutoError):
    """Base of the P2OS driver's errors."""


class P2osConnectError(P2osError):
    """The port could not be opened, or no robot completed the handshake on it."""


class P2osLinkError(P2osError):
    """Not connected to the robot (the link is down or being re-established), or a write to the port failed."""


class P2osTimeout(P2osError, TimeoutError):
    """The robot did not answer within the time allowed."""


# --------------------------------------------------------------------------------------------------- values


class SerialPort(Protocol):
    """What the driver needs of a port (a ``serial.Serial`` from ``serial_for_url``, or a test's fake)."""

    baudrate: int

    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...

    def write(self, data: bytes) -> int | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class P2osState:
    """The robot as its newest SIP shows it, in SI.

    Attributes:
        stamp: when the SIP arrived, s (the driver's clock).
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
        sips: SIPs received since the driver was created.
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
    """What the driver has seen and done since it was created.

    Attributes:
        packets, bytes, bad_checksum, bad_length, garbage_bytes, unknown_type, malformed: the decoder's counters
            (see :class:`.decoder.DecoderStatistics`), summed over every connection.
        sips: SIPs received.
        configs: CONFIGpacs received.
        connects: handshakes completed (the first connection and every reconnection).
        reconnects: reconnections after a link loss.
        link_losses: times the link was found dead (serial error or `link_timeout` without a packet).
        stale_sessions: robots found still open from an earlier session (answered with CLOSE and a new handshake).
        command_timeouts: times the command timeout stopped the robot.
        keepalives: PULSEs sent.
        large_deltas: odometry steps longer than the robot could have travelled (applied all the same).
        handler_errors: packets whose handling failed (a driver bug; logged with a traceback).
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
    handler_errors: int = 0


Pose = tuple[float, float, float]
_IDENTITY: Pose = (0.0, 0.0, 0.0)
_DECODER_FIELDS = tuple(f.name for f in fields(DecoderStatistics))


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


def _is_serial_device(url: str) -> bool:
    """True for a device path (a real serial port or a pty), False for a pyserial URL such as socket:// or loop://."""
    return "://" not in url


class _Stale(Exception):
    """Internal: the robot sent SIPs during the handshake (it is still open from an earlier session)."""


class _Closing(Exception):
    """Internal: shutdown() was called while the handshake ran."""


# --------------------------------------------------------------------------------------------------- the driver


class P2osDriver:
    """A client of a Pioneer robot speaking P2OS/ARCOS (or of an emulator).

    Create it, then :meth:`connect` (or use it as a context manager, which connects); :meth:`shutdown` ends the
    session. Commands take SI units and are clamped to the model's limits; the robot's state is read with
    :attr:`state` or :meth:`wait_for_sip`.

    Args:
        url: the port: a device (``/dev/ttyUSB0``, a pty path) or a pyserial URL (``socket://127.0.0.1:8101``).
        model: the robot subclass whose parameters to use (e.g. ``"p3dx"``); None to take it from the SYNC2 echo.
        baud: the first baud rate tried on a serial device (the others are tried if it does not answer).
        handshake_timeout: time each handshake step waits for the robot's answer, s.
        handshake_retries: attempts of each handshake step before giving up (at one baud rate).
        command_timeout: a velocity command not renewed within this time is followed by VEL 0 / RVEL 0, s.
        keepalive: a PULSE is sent when nothing else was written for this long, s.
        link_timeout: the link is considered dead after this long without a packet, s.
        reconnect: after a link loss, run the handshake again in the background until it succeeds.
        clock: the time source of every timer and stamp, s (monotonic).

    Raises:
        ValueError: a time or retry count that is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        baud: int = 9600,
        handshake_timeout: float = 0.5,
        handshake_retries: int = 3,
        command_timeout: float = 1.0,
        keepalive: float = 0.5,
        link_timeout: float = 3.0,
        reconnect: bool = True,
        clock: Callable[[], float] = time.monotonic,
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
        self._url = url
        self._model = model or None
        self._baud = baud
        self._handshake_timeout = handshake_timeout
        self._handshake_retries = handshake_retries
        self._command_timeout = command_timeout
        self._keepalive = keepalive
        self._link_timeout = link_timeout
        self._reconnect = reconnect
        self._clock = clock

        self._write_lock = threading.RLock()  # every write; also the command-timeout check
        self._state_cond = threading.Condition()  # state, config, odometry frame
        self._closing = threading.Event()
        self._connected = threading.Event()
        self._shut = False
        self._shutdown_lock = threading.Lock()
        self._port: SerialPort | None = None
        self._decoder = P2osDecoder("client")
        self._decoder_totals = dict.fromkeys(_DECODER_FIELDS, 0)
        self._reader: threading.Thread | None = None
        self._keeper: threading.Thread | None = None

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

        self._last_packet = 0.0
        self._last_write = 0.0
        self._last_command = 0.0
        self._motion_armed = False
        self._writer_paused = False

        self._sips = 0
        self._configs = 0
        self._connects = 0
        self._reconnects = 0
        self._link_losses = 0
        self._stale_sessions = 0
        self._command_timeouts = 0
        self._keepalives = 0
        self._handler_errors = 0

    # -- context manager ----------------------------------------------------------------------------------------

    def __enter__(self) -> P2osDriver:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        model = self._params.subclass if self._params else "?"
        return f"<P2osDriver {self._url} model={model} {'connected' if self.connected else 'disconnected'}>"

    # -- properties ---------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The port the driver talks through."""
        return self._url

    @property
    def connected(self) -> bool:
        """The handshake is done and the link is alive."""
        return self._connected.is_set()

    @property
    def params(self) -> RobotParams:
        """The robot model's parameters (conversion factors, radius, sonar poses).

        Raises:
            P2osLinkError: never connected yet, so the model is not known.
        """
        params = self._params
        if params is None:
            raise P2osLinkError(f"the robot model is not known before the first connection to {self._url}")
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
    def config(self) -> ConfigPacket | None:
        """The newest CONFIGpac (robot units), or None if the robot sent none."""
        with self._state_cond:
            return self._config

    @property
    def state(self) -> P2osState | None:
        """The newest state (None before the first SIP)."""
        with self._state_cond:
            return self._state

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

    def silence(self) -> float:
        """Time since the robot last answered (a packet arrived, or the handshake completed), s by the driver's
        clock; inf before the first connection."""
        if self._connects == 0:
            return math.inf
        return max(0.0, self._clock() - self._last_packet)

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
            handler_errors=self._handler_errors,
        )

    # -- connection ---------------------------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the port and run the handshake; start the reader and keepalive threads.

        Does nothing if connected. If a background reconnection is running, waits for it (as long as one
        handshake may take).

        Raises:
            P2osConnectError: the port cannot be opened, or no robot completed the handshake.
            P2osError: the driver was shut down.
        """
        if self._shut:
            raise P2osError(f"the P2OS driver for {self._url} was shut down; create a new one")
        if self.connected:
            return
        reader = self._reader
        if reader is not None and reader.is_alive():
            if not self._connected.wait(self._handshake_budget() + RECONNECT_BACKOFF[1]):
                raise P2osConnectError(f"no robot responding on {self._url} (reconnecting in the background)")
            return
        self._open_and_handshake()
        self._reader = threading.Thread(target=self._run_reader, name=f"p2os-reader:{self._url}", daemon=True)
        self._reader.start()
        if self._keeper is None or not self._keeper.is_alive():  # it outlives a link loss without reconnect
            self._keeper = threading.Thread(target=self._run_keepalive, name=f"p2os-keepalive:{self._url}", daemon=True)
            self._keeper.start()

    def _handshake_budget(self) -> float:
        bauds = len(SERIAL_BAUD_RATES) if _is_serial_device(self._url) else 1
        return bauds * 3 * self._handshake_retries * self._handshake_timeout + CONFIG_WAIT + 1.0

    def _open_and_handshake(self) -> None:
        """Open the port, synchronise, open the session; on success the port becomes the driver's."""
        try:
            port = cast(
                SerialPort,
                serial.serial_for_url(self._url, baudrate=self._baud, timeout=READ_TIMEOUT, write_timeout=1.0),
            )
        except (serial.SerialException, OSError, ValueError) as err:
            reason = str(err).rsplit("] ", 1)[-1]  # pyserial nests "[Errno N]" prefixes: keep the reason
            raise P2osConnectError(f"cannot open {self._url}: {reason}") from err
        decoder = P2osDecoder("client")
        try:
            bauds = [self._baud]
            if _is_serial_device(self._url):
                bauds += [b for b in SERIAL_BAUD_RATES if b != self._baud]
            reply: SyncReply | None = None
            for baud in bauds:
                if port.baudrate != baud:
                    log.info("no answer from %s; trying %d baud", self._url, baud)
                    port.baudrate = baud
                reply = self._synchronise(port, decoder)
                if reply is not None:
                    break
            if reply is None:
                tried = ", ".join(str(b) for b in bauds)
                raise P2osConnectError(
                    f"no robot responding on {self._url}: no answer to SYNC0 within {self._handshake_timeout} s, "
                    f"{self._handshake_retries} tries (baud {tried}); is the robot on and the cable in?"
                )
            self._open_session(port, decoder, reply)
        except _Closing:
            self._close_port(port)
            raise P2osConnectError(f"connection to {self._url} abandoned: the driver is shutting down") from None
        except (serial.SerialException, OSError) as err:
            self._close_port(port)
            raise P2osConnectError(f"handshake with the robot on {self._url} failed: {err}") from err
        except BaseException:
            self._close_port(port)
            raise

    def _synchronise(self, port: SerialPort, decoder: P2osDecoder) -> SyncReply | None:
        """SYNC0, SYNC1, SYNC2; the SYNC2 echo, or None if the robot did not answer."""
        stale = 0
        step = 0
        tries = 0
        while True:
            self._write_on(port, encode_command(step))
            try:
                reply = self._await_sync(port, decoder, step)
            except _Stale:
                stale += 1
                self._stale_sessions += 1
                if stale > MAX_STALE_SESSIONS:
                    raise P2osConnectError(
                        f"the robot on {self._url} keeps sending SIPs although told to CLOSE {MAX_STALE_SESSIONS} "
                        "times; another client may be connected to it"
                    ) from None
                log.info(
                    "the robot on %s is still open from an earlier session: sending CLOSE and synchronising again",
                    self._url,
                )
                self._write_on(port, encode_command(Command.CLOSE, 1))
                self._drain(port, decoder)
                step, tries = 0, 0
                continue
            if reply is not None:
                if step == 2:
                    return reply
                step, tries = step + 1, 0
                continue
            tries += 1
            if tries >= self._handshake_retries:
                if step > 0:
                    log.warning("the robot on %s stopped answering at SYNC%d", self._url, step)
                return None

    def _await_sync(self, port: SerialPort, decoder: P2osDecoder, step: int) -> SyncReply | None:
        """The echo of SYNC``step`` within the step timeout, or None. Raises _Stale on a SIP."""
        deadline = self._clock() + self._handshake_timeout
        while True:
            for event in self._read_events(port, decoder):
                if isinstance(event, SyncReply):
                    if event.sync == step:
                        return event
                    continue  # a late echo of an earlier retry
                if isinstance(event, Sip | ConfigPacket):
                    raise _Stale
            if self._clock() >= deadline:
                return None

    def _drain(self, port: SerialPort, decoder: P2osDecoder) -> None:
        """Read and drop what the robot still sends after CLOSE: until 0.15 s of quiet, at most 1 s."""
        start = quiet = self._clock()
        while self._clock() - start < 1.0 and self._clock() - quiet < 0.15:
            if list(self._read_events(port, decoder)):
                quiet = self._clock()

    def _read_events(self, port: SerialPort, decoder: P2osDecoder) -> Iterator[Event]:
        """One read (at most READ_TIMEOUT s); the packets it completed."""
        if self._closing.is_set():
            raise _Closing
        data = port.read(port.in_waiting or 1)
        if data:
            decoder.receive_data(data)
            yield from decoder.events()

    def _open_session(self, port: SerialPort, decoder: P2osDecoder, reply: SyncReply) -> None:
        """After SYNC2: choose the model, OPEN, wait for SIPs and the CONFIGpac, set the limits, ENABLE."""
        params = self._select_params(reply)
        with self._state_cond:
            if self._params is None or self._params.subclass != params.subclass:
                self._params = params
                self._integrator = OdometryIntegrator(params)
                self._sonar = [math.inf] * params.sonar_count
            self._identity = reply

        # OPEN, until SIPs come.
        configs_before = self._configs
        sips_before = self._sips
        tries = 0
        while self._sips == sips_before:
            if tries >= self._handshake_retries:
                raise P2osConnectError(
                    f"the robot on {self._url} completed SYNC0-2 but sent no SIP after OPEN "
                    f"({tries} tries of {self._handshake_timeout} s)"
                )
            self._write_on(port, encode_command(Command.OPEN, 1))
            tries += 1
            deadline = self._clock() + self._handshake_timeout
            while self._sips == sips_before and self._clock() < deadline:
                for event in self._read_events(port, decoder):
                    self._handle(event, self._clock())

        # CONFIG until a CONFIGpac arrives, or CONFIG_WAIT passes.
        start = self._clock()
        next_request = start
        while self._configs == configs_before and self._clock() - start < CONFIG_WAIT:
            if self._clock() >= next_request:
                self._write_on(port, encode_command(Command.CONFIG, 1))
                next_request = self._clock() + 0.3
            for event in self._read_events(port, decoder):
                self._handle(event, self._clock())
        config = self.config
        if self._configs == configs_before:
            log.info(
                "no CONFIGpac from the robot on %s within %.1f s; using the model's limits", self._url, CONFIG_WAIT
            )
            config = None
        self._top_velocity, self._top_rot_velocity = _speed_limits(params, config)
        self._max_velocity, self._max_rot_velocity = self._top_velocity, self._top_rot_velocity
        log.info(
            "speed limits for %s: %.2f m/s, %.0f deg/s (the lower of the %s model's and the robot's CONFIGpac's)",
            self._url,
            self._top_velocity,
            math.degrees(self._top_rot_velocity),
            params.subclass,
        )

        # SETV, SETRV, ENABLE 1 until a SIP shows the motors enabled (the link may lose a packet: nothing is
        # acknowledged), or the e-stop, or the retries are spent.
        for _ in range(self._handshake_retries):
            self._write_on(port, encode_command(Command.SETV, to_mm(self._max_velocity)))
            self._write_on(port, encode_command(Command.SETRV, to_deg(self._max_rot_velocity)))
            self._write_on(port, encode_command(Command.ENABLE, 1))
            sips_before = self._sips
            deadline = self._clock() + self._handshake_timeout
            state = None
            while self._clock() < deadline:
                for event in self._read_events(port, decoder):
                    self._handle(event, self._clock())
                state = self.state
                # two SIPs: the first may have left before the ENABLE arrived
                if self._sips >= sips_before + 2 and state is not None and (state.motors_enabled or state.estop):
                    break
            if state is not None and (state.motors_enabled or state.estop):
                break
        else:
            log.warning(
                "the motors of the robot on %s did not report enabled after %d ENABLE",
                self._url,
                self._handshake_retries,
            )

        now = self._clock()
        with self._write_lock:
            self._port = port
            self._decoder_totals = {
                name: self._decoder_totals[name] + getattr(self._decoder.statistics(), name) for name in _DECODER_FIELDS
            }
            self._decoder = decoder
            self._last_packet = now
            self._last_command = now
            self._motion_armed = False
            self._connects += 1
            self._connected.set()
        state = self.state
        log.info(
            "connected to %s on %s (%s %s, model %s)%s",
            reply.name or "a robot",
            self._url,
            reply.robot_class or "?",
            reply.subclass or "?",
            params.subclass,
            "; the e-stop is engaged: the motors will not enable" if state and state.estop else "",
        )

    def _select_params(self, reply: SyncReply) -> RobotParams:
        if self._model is not None:
            wanted = self._model
            source = "given"
        else:
            wanted = reply.subclass or ""
            source = "reported by the robot"
        if wanted.strip().lower() in ROBOT_PARAMS:
            return robot_params(wanted)
        log.warning(
            "unknown robot subclass %r (%s) on %s: using the default (%s) parameters",
            wanted,
            source,
            self._url,
            DEFAULT_SUBCLASS,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnknownRobotWarning)
            params = robot_params(wanted)
        warnings.warn(
            f"unknown robot subclass {wanted!r} on {self._url}: using the default parameters",
            UnknownRobotWarning,
            stacklevel=4,
        )
        return params

    def _write_on(self, port: SerialPort, packet: bytes) -> None:
        with self._write_lock:
            if self._writer_paused:
                return
            port.write(packet)
            self._last_write = self._clock()

    @staticmethod
    def _close_port(port: SerialPort) -> None:
        with contextlib.suppress(Exception):
            port.close()

    # -- the reader thread --------------------------------------------------------------------------------------

    def _run_reader(self) -> None:
        try:
            while not self._closing.is_set():
                port = self._port
                if port is None:
                    if not self._reconnect:
                        return
                    self._reconnect_loop()
                    continue
                try:
                    self._read_once(port)
                except _Closing:
                    return
                except Exception as err:  # a serial error, or a port closed under us: the link is gone
                    if self._closing.is_set():
                        return
                    self._lose_link(port, f"read failed: {type(err).__name__}: {err}")
        except Exception:  # pragma: no cover - a driver bug; never let it escape a thread silently
            log.exception("the P2OS reader thread of %s failed", self._url)
            self._connected.clear()

    def _read_once(self, port: SerialPort) -> None:
        for event in self._read_events(port, self._decoder):
            now = self._clock()
            self._last_packet = now
            try:
                self._handle(event, now)
            except Exception:
                self._handler_errors += 1
                log.exception("handling %s failed (counted; the driver goes on)", type(event).__name__)
        silence = self._clock() - self._last_packet
        if silence > self._link_timeout:
            self._lose_link(port, f"no packet for {silence:.1f} s")

    def _lose_link(self, port: SerialPort, reason: str) -> None:
        with self._write_lock:
            if self._port is not port:
                return
            self._port = None
            self._connected.clear()
            self._link_losses += 1
            self._motion_armed = False
        self._close_port(port)
        with self._state_cond:
            self._state_cond.notify_all()
        log.warning(
            "P2OS link to %s lost (%s); %s",
            self._url,
            reason,
            "reconnecting in the background" if self._reconnect else "not reconnecting",
        )

    def _reconnect_loop(self) -> None:
        delay = RECONNECT_BACKOFF[0]
        attempts = 0
        while not self._closing.wait(delay):
            attempts += 1
            try:
                self._open_and_handshake()
            except P2osError as err:
                if attempts == 1 or attempts % 10 == 0:
                    log.info("reconnection to %s failed (attempt %d): %s", self._url, attempts, err)
                delay = min(delay * 2.0, RECONNECT_BACKOFF[1])
                continue
            self._reconnects += 1
            log.info("reconnected to %s after %d attempt(s)", self._url, attempts)
            return

    def _handle(self, event: Event, now: float) -> None:
        if isinstance(event, Sip):
            self._on_sip(event, now)
        elif isinstance(event, ConfigPacket):
            with self._state_cond:
                self._config = event
                self._configs += 1
                self._state_cond.notify_all()
        # SYNC echoes arriving late, encoder/IO/gripper packets and unknown types: nothing to do (counted by the
        # decoder where it matters).

    def _on_sip(self, sip: Sip, now: float) -> None:
        params = self._params
        integrator = self._integrator
        if params is None or integrator is None:  # pragma: no cover - set before OPEN
            return
        with self._state_cond:
            if self._seto_until is not None:
                # After SETO the robot's counters restart at 0; a SIP sent before it took effect still shows the
                # old position and must not seed the integrator.
                near = params.position_to_m(abs(signed_15bit(sip.x)) + abs(signed_15bit(sip.y)))
                if near > 0.05 + params.max_velocity * 0.2 and now < self._seto_until:
                    pose: Pose | None = _IDENTITY
                else:
                    if now >= self._seto_until:
                        log.warning(
                            "the robot on %s did not confirm SETO within %.1f s; odometry reset from here",
                            self._url,
                            SETO_SETTLE,
                        )
                    self._seto_until = None
                    integrator.reset()
                    pose = None
            else:
                pose = None
            update = None
            if pose is None:
                update = integrator.update(sip, now)
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
            self._state_cond.notify_all()

    def wait_for_sip(self, timeout: float | None = None) -> P2osState | None:
        """Wait for the next SIP (one that arrives after this call).

        Args:
            timeout: s to wait at most; None waits as long as it takes.

        Returns:
            The state after that SIP, or None if none came in time (or the driver was shut down).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state_cond:
            seen = self._sips
            while self._sips == seen:
                if self._shut:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._state_cond.wait(left if left is not None else 0.5)
            return self._state

    # -- the keepalive thread -----------------------------------------------------------------------------------

    def _run_keepalive(self) -> None:
        period = min(0.05, max(0.005, min(self._keepalive, self._command_timeout) / 10.0))
        while not self._closing.wait(period):
            if not self.connected:
                continue
            try:
                self._tick()
            except P2osError:
                pass  # the link is down; the reader reconnects
            except Exception:
                log.exception("the P2OS keepalive of %s failed (it goes on)", self._url)

    def _tick(self) -> None:
        with self._write_lock:
            if self._writer_paused:
                return
            now = self._clock()
            if self._motion_armed and now - self._last_command >= self._command_timeout:
                self._motion_armed = False
                self._command_timeouts += 1
                log.warning(
                    "no velocity command for %.2f s: stopping the robot on %s (VEL 0, RVEL 0)",
                    now - self._last_command,
                    self._url,
                )
                self._send(Command.VEL, 0)
                self._send(Command.RVEL, 0)
            elif now - self._last_write >= self._keepalive:
                self._send(Command.PULSE)
                self._keepalives += 1

    # -- commands -----------------------------------------------------------------------------------------------

    def _send(self, command: Command, argument: int | None = None) -> None:
        """Write one command packet to the robot.

        Raises:
            P2osLinkError: not connected, or the write failed (the link is then marked lost).
        """
        packet = encode_command(command, argument)
        with self._write_lock:
            port = self._port
            if port is None:
                raise P2osLinkError(f"not connected to the robot on {self._url}")
            if self._writer_paused:
                return
            try:
                port.write(packet)
            except Exception as err:
                self._lose_link(port, f"write failed: {type(err).__name__}: {err}")
                raise P2osLinkError(f"cannot send {command.name} to {self._url}: {err}") from err
            self._last_write = self._clock()

    def _command(self, commands: list[tuple[Command, int]], moving: bool) -> None:
        with self._write_lock:
            for command, argument in commands:
                self._send(command, argument)
            self._last_command = self._clock()
            self._motion_armed = moving

    def set_velocity(self, v: float, omega: float) -> None:
        """Drive: translation and rotation (VEL and RVEL), clamped to the limits.

        Args:
            v: forward velocity, m/s.
            omega: rotational velocity, rad/s, counter-clockwise positive.

        Raises:
            ValueError: a value that is not finite.
            P2osLinkError: not connected.
        """
        v = _clamp(v, self._max_velocity, "v")
        omega = _clamp(omega, self._max_rot_velocity, "omega")
        self._command([(Command.VEL, to_mm(v)), (Command.RVEL, to_deg(omega))], v != 0.0 or omega != 0.0)

    def set_wheel_velocities(self, left: float, right: float) -> None:
        """Drive each wheel (VEL2), clamped to the translational limit.

        Args:
            left, right: wheel velocities, m/s (sent in Vel2Divisor units: 20 mm/s on Pioneers).

        Raises:
            ValueError: a value that is not finite.
            P2osLinkError: not connected.
        """
        left = _clamp(left, self._max_velocity, "left")
        right = _clamp(right, self._max_velocity, "right")
        argument = self.params.vel2_argument(left, right)
        self._command([(Command.VEL2, argument)], argument != 0)

    def stop(self) -> None:
        """Stop: VEL 0 and RVEL 0.

        Raises:
            P2osLinkError: not connected.
        """
        self._command([(Command.VEL, 0), (Command.RVEL, 0)], False)

    def enable_motors(self, on: bool, timeout: float = 1.0) -> bool:
        """Enable or disable the motors (ENABLE) and report the outcome from the SIP flags.

        Args:
            on: True to enable, False to disable.
            timeout: s to wait for a SIP that shows the new state.

        Returns:
            True if the SIP flags show the motors in the asked state; False if not (e.g. the e-stop is engaged:
            then a log line says so).

        Raises:
            P2osLinkError: not connected.
        """
        state = self.state
        self._send(Command.ENABLE, 1 if on else 0)
        if on and state is not None and state.estop:
            log.warning(
                "cannot enable the motors of the robot on %s: the e-stop is engaged (release it first)", self._url
            )
            return False
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            state = self.wait_for_sip(left)
            if state is None:
                break
            if state.motors_enabled == on:
                return True
            if on and state.estop:
                log.warning(
                    "cannot enable the motors of the robot on %s: the e-stop is engaged (release it first)", self._url
                )
                return False
        log.warning(
            "the robot on %s did not report its motors %s within %.1f s",
            self._url,
            "enabled" if on else "disabled",
            timeout,
        )
        return False

    def reset_odometry(self) -> None:
        """Reset the odometry to (0, 0, 0): SETO on the robot, and the driver's integrator and frame.

        Raises:
            P2osLinkError: not connected.
        """
        self._send(Command.SETO)
        with self._state_cond:
            self._offset = _IDENTITY
            self._seto_until = self._clock() + SETO_SETTLE
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
        with self._state_cond:
            integrator = self._integrator
            raw = integrator.pose if integrator is not None else None
            self._offset = _compose(wanted, _inverse(raw if raw is not None else _IDENTITY))
            if self._state is not None:
                self._state = _with_pose(self._state, wanted)

    def request_config(self, timeout: float = 1.0) -> ConfigPacket | None:
        """Ask for a CONFIGpac (CONFIG) and wait for it.

        Args:
            timeout: s to wait.

        Returns:
            The new CONFIGpac, or None if none came in time.

        Raises:
            P2osLinkError: not connected.
        """
        with self._state_cond:
            seen = self._configs
        self._send(Command.CONFIG, 1)
        deadline = time.monotonic() + timeout
        with self._state_cond:
            while self._configs == seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._state_cond.wait(left)
            return self._config

    def set_speed_profile(
        self,
        *,
        max_speed: float | None = None,
        max_accel: float | None = None,
        max_decel: float | None = None,
        max_turn_rate: float | None = None,
        max_turn_accel: float | None = None,
        max_turn_decel: float | None = None,
    ) -> None:
        """Set the robot's speed and acceleration limits (SETV, SETA, SETRV, SETRA); None leaves one as it is.

        The speed limits also bound the commands the driver sends; they are never set above the robot's limits
        (the lower of the model's and the CONFIGpac's, see :attr:`max_velocity`).

        Args:
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
        commands: list[tuple[Command, int]] = []
        speed = min(max_speed, self._top_velocity) if max_speed is not None else None
        turn_rate = min(max_turn_rate, self._top_rot_velocity) if max_turn_rate is not None else None
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
        with self._write_lock:
            for command, argument in commands:
                self._send(command, argument)
        if speed is not None:
            self._max_velocity = speed
        if turn_rate is not None:
            self._max_rot_velocity = turn_rate

    # -- test hooks ---------------------------------------------------------------------------------------------

    def pause_writer(self) -> None:
        """For tests: write nothing more to the port (no PULSE, no command, no goodbye at shutdown), as if this
        program had hung. Commands still return normally."""
        with self._write_lock:
            self._writer_paused = True

    def resume_writer(self) -> None:
        """For tests: undo :meth:`pause_writer`."""
        with self._write_lock:
            self._writer_paused = False

    # -- shutdown -----------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop the robot and end the session: VEL 0, RVEL 0, ENABLE 0, CLOSE; close the port. Idempotent."""
        with self._shutdown_lock:
            if self._shut:
                return
            self._shut = True
        self._closing.set()
        current = threading.current_thread()
        for thread in (self._keeper, self._reader):
            if thread is not None and thread is not current:
                thread.join(timeout=self._handshake_timeout + 2.0)
        with self._write_lock:
            port, self._port = self._port, None
            was_connected = self._connected.is_set()
            self._connected.clear()
            if port is not None:
                if was_connected and not self._writer_paused:
                    try:
                        for command, argument in (
                            (Command.VEL, 0),
                            (Command.RVEL, 0),
                            (Command.ENABLE, 0),
                            (Command.CLOSE, 1),
                        ):
                            port.write(encode_command(command, argument))
                        flush: Any = getattr(port, "flush", None)
                        if callable(flush):
                            flush()
                    except Exception as err:
                        log.info("could not say goodbye to the robot on %s: %s", self._url, err)
                self._close_port(port)
        with self._state_cond:
            self._state_cond.notify_all()
        log.info("P2OS driver for %s shut down", self._url)


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
