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

# Strategy: the driver is the thin shell of the sans-I/O P2osClient (client.py), which makes every protocol
# decision: the handshake and its retries, the baud rate to try, the limits, the keepalive, the command timeout,
# the link timeout and when to reconnect. The shell owns the port and one reader thread. The reader feeds the
# client what it reads and calls step(now) after every read; the port's read timeout (a tenth of the shortest
# timer, at most READ_TIMEOUT) is the timer that calls step when no bytes come, and while no port is open (waiting
# to reconnect) a wait of the same length is. After every call into the client the shell applies its events
# (BaudRate: set the port's rate; LinkLost, ConnectFailed: close the port; Reconnecting: open it again, outside
# the lock) and then writes what the client queued. One lock covers each call and the write that follows it, so a
# fresh command can never be overtaken by a stale stop. connect() opens the port, starts the reader and waits for
# the client's Connected or ConnectFailed. close() stops the reader first, then writes the client's goodbye and
# closes the port: exactly once.

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import serial  # type: ignore[import-untyped]

from pluto.codec import NEED_DATA
from pluto.hardware import serial_driver
from pluto.hardware.host_driver import HostDriver

from .client import (
    DEFAULT_MAX_ROT_VELOCITY,
    RECONNECT_BACKOFF,
    SERIAL_BAUD_RATES,
    BaudRate,
    ClientEvent,
    ConnectFailed,
    LinkLost,
    P2osClient,
    P2osConnectError,
    P2osError,
    P2osLinkError,
    P2osState,
    P2osStatistics,
    P2osTimeout,
    Reconnecting,
)
from .models import RobotParams
from .sip import ConfigPacket

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

READ_TIMEOUT = 0.05
"""Longest timeout of one port read, s: how often the reader steps the client's timers when no bytes come."""

T = TypeVar("T")


class SerialPort(serial_driver.SerialPort, Protocol):
    """What the driver needs of a port (a ``serial.Serial`` from ``serial_for_url``, or a test's fake): a serial
    driver's port whose baud rate can be set."""

    baudrate: int


def _is_serial_device(url: str) -> bool:
    """True for a device path (a real serial port or a pty), False for a pyserial URL such as socket:// or loop://."""
    return "://" not in url


def _close_port(port: SerialPort) -> None:
    with contextlib.suppress(Exception):
        port.close()


class P2osDriver(HostDriver):
    """A client of a Pioneer robot speaking P2OS/ARCOS (or of an emulator).

    Create it, then :meth:`connect` (or use it as a context manager, which connects: :class:`.HostDriver`);
    :meth:`close` stops the robot, ends the session (VEL 0, RVEL 0, ENABLE 0, CLOSE) and closes the port, once.
    Commands take SI units and are clamped to the model's limits; the robot's state is read with :attr:`state` or
    :meth:`wait_for_sip`. The properties and commands are those of :class:`.P2osClient`; every
    command raises :class:`P2osLinkError` when not connected or when the write to the port fails.

    Args:
        url: the port: a device (``/dev/ttyUSB0``, a pty path) or a pyserial URL (``socket://127.0.0.1:8101``);
            the standard baud rates are tried on a device that does not answer at ``baud``.
        model, baud, handshake_timeout, handshake_retries, command_timeout, keepalive, link_timeout, reconnect: as
            :class:`.P2osClient` (s, bit/s).
        clock: the time source of every timer and stamp, s (monotonic).

    Raises:
        ValueError: a time or retry count that is not positive.
    """

    error = P2osError

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
        tick = min(READ_TIMEOUT, max(0.005, min(keepalive, command_timeout) / 10.0))
        super().__init__(reader_period=tick)
        self._client = P2osClient(
            url,
            model=model,
            baud=baud,
            serial=_is_serial_device(url),
            handshake_timeout=handshake_timeout,
            handshake_retries=handshake_retries,
            command_timeout=command_timeout,
            keepalive=keepalive,
            link_timeout=link_timeout,
            reconnect=reconnect,
        )
        self._url = url
        self._clock = clock
        self._tick = tick
        self._lock = threading.RLock()  # every call into the client and the write that follows it
        self._changed = threading.Condition(self._lock)  # notified after each of them
        self._port: SerialPort | None = None
        self._reopen: int | None = None  # the baud rate of a port the client wants opened (Reconnecting)
        self._failure: str | None = None  # why the handshake of connect() failed

    def __repr__(self) -> str:
        model = self._client.params.subclass if self._client.robot_subclass is not None else "?"
        return f"<P2osDriver {self._url} model={model} {'connected' if self.connected else 'disconnected'}>"

    # -- properties (the client's; see P2osClient) --------------------------------------------------------------

    @property
    def url(self) -> str:
        """The port the driver talks through."""
        return self._url

    @property
    def connected(self) -> bool:
        """The handshake is done and the link is alive."""
        return self._client.connected

    @property
    def params(self) -> RobotParams:
        """The robot model's parameters. Raises P2osLinkError before the first connection."""
        return self._client.params

    @property
    def robot_name(self) -> str | None:
        """The robot's name from the SYNC2 echo (None before connecting)."""
        return self._client.robot_name

    @property
    def robot_class(self) -> str | None:
        """The robot class from the SYNC2 echo (None before connecting)."""
        return self._client.robot_class

    @property
    def robot_subclass(self) -> str | None:
        """The robot subclass from the SYNC2 echo (None before connecting)."""
        return self._client.robot_subclass

    @property
    def config(self) -> ConfigPacket | None:
        """The newest CONFIGpac (robot units), or None if the robot sent none."""
        return self._client.config

    @property
    def state(self) -> P2osState | None:
        """The newest state (None before the first SIP)."""
        return self._client.state

    @property
    def max_velocity(self) -> float:
        """The translational speed limit commands are clamped to, m/s (:attr:`.P2osClient.max_velocity`)."""
        return self._client.max_velocity

    @property
    def max_rot_velocity(self) -> float:
        """The rotational speed limit commands are clamped to, rad/s (:attr:`.P2osClient.max_rot_velocity`)."""
        return self._client.max_rot_velocity

    def silence(self) -> float:
        """Time since the robot last answered, s by the driver's clock; inf before the first connection."""
        return self._client.silence(self._clock())

    def statistics(self) -> P2osStatistics:
        """A snapshot of the counters (decoder, link, commands)."""
        with self._lock:
            return self._client.statistics()

    # -- the client's calls, its events and its output ----------------------------------------------------------

    def _call(self, action: Callable[[float], T]) -> T:
        """Run ``action(now)`` on the client under the lock, then apply its events and write what it queued.

        Raises:
            P2osLinkError: the write failed (the client has been told: the link is lost).
        """
        with self._lock:
            result = action(self._clock())
            try:
                self._flush()
            finally:
                self._changed.notify_all()
        return result

    def _flush(self) -> None:
        """Apply the client's events, then write its output (the lock is held)."""
        client, failure = self._client, None
        while True:
            while (event := client.next_event()) is not NEED_DATA:
                self._apply(event)
            port = self._port  # None: the output waits for the port the client asked for
            if port is None or failure is not None or not (data := client.data_to_send()):
                break
            try:
                port.write(data)
            except Exception as err:
                failure = err
                client.port_failed(f"write failed: {type(err).__name__}: {err}", self._clock())
        if failure is not None:
            raise P2osLinkError(f"cannot write to the robot on {self._url}: {failure}") from failure

    def _apply(self, event: ClientEvent) -> None:
        port = self._port
        if isinstance(event, BaudRate) and port is not None:
            try:
                port.baudrate = event.baud
            except Exception as err:
                self._client.port_failed(f"cannot set {event.baud} baud: {err}", self._clock())
        elif isinstance(event, LinkLost | ConnectFailed):
            self._port = None
            if port is not None:
                _close_port(port)
            if isinstance(event, ConnectFailed) and not event.reconnecting:
                self._failure = event.reason
        elif isinstance(event, Reconnecting):
            self._reopen = event.baud  # opened by the reader, outside the lock
        # Connected: the waiters are notified after every call

    def _open(self, baud: int) -> SerialPort:
        try:
            return cast(
                SerialPort,
                serial.serial_for_url(self._url, baudrate=baud, timeout=self._tick, write_timeout=1.0),
            )
        except (serial.SerialException, OSError, ValueError) as err:
            reason = str(err).rsplit("] ", 1)[-1]  # pyserial nests "[Errno N]" prefixes: keep the reason
            raise P2osConnectError(f"cannot open {self._url}: {reason}") from err

    # -- connection ---------------------------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the port, run the handshake and start the reader thread.

        Does nothing if connected. If a background reconnection is running, waits for it (as long as one
        handshake may take).

        Raises:
            P2osConnectError: the port cannot be opened, or no robot completed the handshake.
            P2osError: the driver was closed.
        """
        self._check_open(f"the P2OS driver for {self._url}")
        if self.connected:
            return
        budget = self._client.handshake_budget
        reader = self._reader
        if reader is not None and reader.is_alive():
            if not self._wait(lambda: self.connected, budget + RECONNECT_BACKOFF[1]):
                raise P2osConnectError(f"no robot responding on {self._url} (reconnecting in the background)")
            return
        port = self._open(self._client.baud)
        with self._lock:
            self._port = port
            self._failure = None
        try:
            self._call(self._client.connect)
        except P2osLinkError as err:
            raise P2osConnectError(self._failure or str(err)) from err
        reader = self._start_reader(f"p2os-reader:{self._url}")
        if not self._wait(lambda: not self._client.busy or self.connected or self._closing.is_set(), budget):
            with contextlib.suppress(P2osLinkError):  # a guard: the client's own timers end every handshake
                self._call(lambda now: self._client.port_failed(f"no end within {budget:.1f} s", now))
        if self.connected:
            return
        if self._closing.is_set():
            raise P2osConnectError(f"connection to {self._url} abandoned: the driver is closing")
        reader.join(timeout=1.0)
        raise P2osConnectError(self._failure or f"no robot responding on {self._url}")

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate() or self._closed, timeout) and predicate()

    # -- the reader thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closing.is_set():
                if self._reopen is not None:
                    self._reopen_port(self._reopen)
                    continue
                port = self._port
                if port is None:
                    if not self._client.busy:
                        return  # no link and no reconnection under way
                    self._closing.wait(self._tick)
                    self._advance(None, b"")
                    continue
                reason: str | None = None
                try:
                    data = port.read(port.in_waiting or 1)
                except Exception as err:  # a serial error, or a port closed under us: the link is gone
                    data, reason = b"", f"read failed: {type(err).__name__}: {err}"
                if self._closing.is_set():
                    return
                self._advance(port, data, reason)
        except Exception:  # pragma: no cover - a driver bug; never let it escape a thread silently
            log.exception("the P2OS reader thread of %s failed", self._url)

    def _advance(self, port: SerialPort | None, data: bytes, failure: str | None = None) -> None:
        """Feed what ``port`` read (or its failure), step the client's timers, apply and write."""

        def advance(now: float) -> None:
            if port is not None and port is self._port:
                if failure is not None:
                    self._client.port_failed(failure, now)
                elif data:
                    self._client.receive_data(data, now)
            self._client.step(now)

        with contextlib.suppress(P2osLinkError):  # a failed write: the link is lost, the client decides what next
            self._call(advance)

    def _reopen_port(self, baud: int) -> None:
        self._reopen = None
        try:
            port = self._open(baud)
        except P2osConnectError as err:
            reason = str(err)
            with contextlib.suppress(P2osLinkError):
                self._call(lambda now: self._client.port_failed(reason, now))
            return
        with self._lock:
            if self._closing.is_set() or self._client.connected or not self._client.busy:
                _close_port(port)  # no longer wanted
                return
            self._port = port
        with contextlib.suppress(P2osLinkError):
            self._call(lambda now: None)  # the handshake's first bytes

    def wait_for_sip(self, timeout: float | None = None) -> P2osState | None:
        """Wait for the next SIP (one that arrives after this call).

        Args:
            timeout: s to wait at most; None waits as long as it takes.

        Returns:
            The state after that SIP, or None if none came in time (or the driver was closed).
        """
        with self._changed:
            seen = self._client.sips
            if not self._changed.wait_for(lambda: self._client.sips != seen or self._closed, timeout):
                return None
            return None if self._closed else self._client.state

    # -- commands (the client's, under the lock; see P2osClient) ------------------------------------------------

    def set_velocity(self, v: float, omega: float) -> None:
        """Drive: VEL ``v`` (m/s) and RVEL ``omega`` (rad/s, counter-clockwise), clamped to the limits.

        Raises:
            ValueError: a value that is not finite.
        """
        self._call(lambda now: self._client.set_velocity(v, omega, now))

    def set_wheel_velocities(self, left: float, right: float) -> None:
        """Drive each wheel (VEL2), ``left`` and ``right`` in m/s, clamped to the translational limit.

        Raises:
            ValueError: a value that is not finite.
        """
        self._call(lambda now: self._client.set_wheel_velocities(left, right, now))

    def stop_motion(self) -> None:
        """Stop the wheels: VEL 0 and RVEL 0."""
        self._call(self._client.stop_motion)

    def enable_motors(self, on: bool, timeout: float = 1.0) -> bool:
        """Enable or disable the motors (ENABLE) and report the outcome from the SIP flags.

        Args:
            on: True to enable, False to disable.
            timeout: s to wait for a SIP that shows the new state.

        Returns:
            True if the SIP flags show the motors in the asked state; False if not (e.g. the e-stop is engaged:
            then a log line says so).
        """
        outcome = self._call(lambda now: self._client.enable_motors(on, now))
        deadline = time.monotonic() + timeout
        while outcome is None and (left := deadline - time.monotonic()) > 0:
            if self.wait_for_sip(left) is None:
                break
            with self._lock:
                outcome = self._client.motors_outcome(on)
        if outcome is None:
            log.warning(
                "the robot on %s did not report its motors %s within %.1f s",
                self._url,
                "enabled" if on else "disabled",
                timeout,
            )
        return bool(outcome)

    def reset_odometry(self) -> None:
        """Reset the odometry to (0, 0, 0): SETO on the robot, and the client's integrator and frame."""
        self._call(self._client.reset_odometry)

    def set_odometry(self, x: float, y: float, theta: float) -> None:
        """Declare the current odometry pose: ``x``, ``y`` in m, ``theta`` in rad (the robot is not told).

        Raises:
            ValueError: a value that is not finite.
        """
        with self._lock:
            self._client.set_odometry(x, y, theta)

    def request_config(self, timeout: float = 1.0) -> ConfigPacket | None:
        """Ask for a CONFIGpac (CONFIG) and wait for it, at most ``timeout`` s.

        Returns:
            The new CONFIGpac, or None if none came in time.
        """
        with self._lock:
            seen = self._client.config
            self._call(self._client.request_config)
            if not self._changed.wait_for(lambda: self._client.config is not seen, timeout):
                return None
            return self._client.config

    def set_speed_profile(self, **limits: float | None) -> None:
        """Set the robot's speed and acceleration limits (SETV, SETA, SETRV, SETRA); a limit left out stays.

        Args:
            limits: any of max_speed (m/s), max_accel, max_decel (m/s²), max_turn_rate (rad/s), max_turn_accel,
                max_turn_decel (rad/s²), all > 0; the speeds never above the robot's (:attr:`max_velocity`).

        Raises:
            ValueError: a value that is not a positive finite number.
            TypeError: an unknown limit.
        """
        self._call(lambda now: self._client.set_speed_profile(now, **limits))

    # -- test hooks ---------------------------------------------------------------------------------------------

    def pause_writer(self) -> None:
        """For tests: write nothing more to the port (no PULSE, no command, no goodbye at close), as if this
        program had hung. Commands still return normally."""
        with self._lock:
            self._client.pause_output()

    def resume_writer(self) -> None:
        """For tests: undo :meth:`pause_writer`."""
        with self._lock:
            self._client.resume_output()

    # -- close --------------------------------------------------------------------------------------------------

    def _release(self) -> None:
        """close(), once the reader has stopped: stop the robot and end the session (VEL 0, RVEL 0, ENABLE 0,
        CLOSE), then close the port."""
        with self._lock:
            self._client.close(self._clock())
            port, self._port = self._port, None
            if port is not None:
                try:
                    if goodbye := self._client.data_to_send():
                        port.write(goodbye)
                    flush: Any = getattr(port, "flush", None)
                    if callable(flush):
                        flush()
                except Exception as err:
                    log.info("could not say goodbye to the robot on %s: %s", self._url, err)
                _close_port(port)
            self._changed.notify_all()
        log.info("P2OS driver for %s closed", self._url)
