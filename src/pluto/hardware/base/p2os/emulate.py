"""Serve a :class:`.robot.P2osRobot` over TCP or a pseudo-terminal, in real time, so P2OS clients can connect; as a
command (``pluto p2os-emulate``, :mod:`.command`) or as the ``p2os-emulator`` module (:class:`P2osEmulatorModule`,
which also publishes the robot's true pose on ``Sim/Truth``).

    with P2osEmulator(P2osRobot("p3dx")) as emulator:          # TCP on 127.0.0.1, a free port
        port = serial.serial_for_url(emulator.url)             # socket://127.0.0.1:PORT
        ...

    with P2osEmulator(transport="pty") as emulator:            # a pseudo-terminal: a serial port to the client
        port = serial.serial_for_url(emulator.pty_path)

:func:`serve_tcp` and :func:`serve_pty` do the same in the calling thread until a stop event is set (the ``pluto
p2os-emulate`` command). :class:`LinkNoise` drops and corrupts bytes in both directions, like a radio modem.

One step of the robot simulates at most :data:`MAX_STEP` of time: a process starved of CPU does not try to catch
up with the wall clock (each late step would take longer and make the next one later); the robot's time slips
behind instead, and the time skipped is counted (:attr:`P2osEmulator.skipped_time`) and logged.
"""

# Strategy: the robot core is sans-I/O (robot.py); this module only moves bytes and time. One loop per emulator:
# select() on the listening socket, the client socket or the pty master with a timeout of one tick (10 ms by
# default), feed what arrived to the core, step the core with time.monotonic() every tick and write what it has to
# send. Echoes go out as soon as the command that caused them is processed, SIPs on the core's own 100 ms cycle.
# The core is stepped with its own time (_RobotClock): the wall clock's, except that one step advances it by at
# most MAX_STEP; the rest of a longer gap is skipped, counted and logged (one line per _LATE_LOG_INTERVAL at most).
# A restarted emulator resumes the robot's time where it stopped: the stopped time is neither simulated nor late.
# The link (pluto.hardware.link, shared by every emulated device) behaves like a serial line, except that TCP tells
# when the client goes: the disconnection ends the client's byte stream (receive_data(b"")), which ends the robot's
# session (it stops, the motors are disabled), so a client program that dies never leaves the robot driving; the
# next client finds it closed. Stopping the emulator is not a disconnection: the robot is not served meanwhile, and
# a restarted emulator serves it as it was (still open, if it was).
# Stopping is prompt whatever the world: the robot's step is asked, between its 10 ms physics steps, whether the
# loop is being stopped, and ends there (the time it did not simulate is not counted as simulated).
# All calls into the core hold ``lock``, which tests may take to read the robot consistently while the loop runs.

from __future__ import annotations

import logging
import math
import select
import threading
import time
from collections.abc import Callable
from typing import Annotated, Final

from pluto import msgs, names
from pluto.hardware.emulate import EmulatorParams
from pluto.hardware.link import EmulatorError, Link, LinkNoise, LinkServer, PtyLink, TcpLink, Transport, open_link
from pluto.runtime.module import Module
from pluto.runtime.ranges import Port, Rate, Timeout, between

from .robot import P2osRobot

__all__ = [
    "DEFAULT_PORT",
    "MAX_STEP",
    "EmulatorError",
    "LinkNoise",
    "P2osEmulator",
    "P2osEmulatorModule",
    "P2osEmulatorParams",
    "serve_pty",
    "serve_tcp",
    "true_pose",
]

DEFAULT_PORT = 8101
"""The TCP port of ``pluto p2os-emulate`` (MobileSim and AMRISim listen on 8101 too)."""
MAX_STEP: Final = 0.1
"""Longest time, s, that one step of the robot simulates (ten of its 10 ms physics steps). When more wall-clock
time than that has passed since the last step (the process was starved of CPU or paused), the rest is skipped: the
robot's time slips behind the wall clock rather than the emulator bursting through the backlog, which would make
every later step later still. The skipped time is counted (:attr:`P2osEmulator.skipped_time`) and logged."""
_LATE_LOG_INTERVAL = 5.0  # s of wall-clock time between two log lines about skipped time, at least

log = logging.getLogger("pluto.p2os")

_TcpLink, _PtyLink = TcpLink, PtyLink  # the names they had here before they moved to pluto.hardware.link

# ------------------------------------------------------------------------------------------------ the loop


def _check_timing(tick: float, max_step: float) -> None:
    if not tick > 0.0:
        raise ValueError(f"tick must be > 0 s, got {tick!r}")
    if not (math.isfinite(max_step) and max_step >= tick):
        raise ValueError(f"max_step must be at least the tick ({tick} s), got {max_step!r}")


class _RobotClock:
    """The robot's time: the wall clock's, except that one step advances it by at most ``max_step``; counts and
    logs (rate-limited) the time skipped."""

    def __init__(self, max_step: float) -> None:
        self.max_step = max_step
        self.skipped_time = 0.0
        self.late_steps = 0
        self._robot_now: float | None = None
        self._last_wall: float | None = None
        self._next_log = -math.inf
        self._logged_skipped = 0.0

    def resume(self) -> None:
        """The next :meth:`advance` only takes its wall time as the new base (the robot was not served)."""
        self._last_wall = None

    def give_back(self, seconds: float) -> None:
        """The last :meth:`advance` was simulated only up to ``seconds`` before its end (the step was cut short)."""
        if self._robot_now is not None:
            self._robot_now -= seconds

    def advance(self, wall: float) -> float:
        """The robot's time at wall-clock time ``wall`` (s, monotonic)."""
        last, self._last_wall = self._last_wall, wall
        if self._robot_now is None:
            self._robot_now = wall
        elif last is not None:
            elapsed = max(0.0, wall - last)
            if elapsed > self.max_step + 1e-9:  # not a rounding error of the clock's sums
                self._skip(wall, elapsed - self.max_step)
                elapsed = self.max_step
            self._robot_now += elapsed
        return self._robot_now

    def _skip(self, wall: float, skipped: float) -> None:
        self.skipped_time += skipped
        self.late_steps += 1
        if wall < self._next_log:
            return
        self._next_log = wall + _LATE_LOG_INTERVAL
        log.warning(
            "p2os emulator fell behind: %.2f s skipped (a step simulates %.2f s at most); the robot's time trails "
            "the wall clock by %.2f s in all after %d late steps (%.2f s since the last such line)",
            skipped,
            self.max_step,
            self.skipped_time,
            self.late_steps,
            self.skipped_time - self._logged_skipped,
        )
        self._logged_skipped = self.skipped_time


class _Loop:
    """Moves bytes between a link and the robot core and steps the core in real time."""

    def __init__(
        self,
        robot: P2osRobot,
        link: Link,
        tick: float,
        lock: threading.RLock,
        noise: LinkNoise | None,
        robot_clock: _RobotClock,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_timing(tick, robot_clock.max_step)
        self.robot = robot
        self.link = link
        self.tick = tick
        self.lock = lock
        self.noise = noise
        self.robot_clock = robot_clock
        self.clock = clock
        self.stepped_at: float | None = None
        """The clock's time of the newest step whose output has been handed to the link (None before one)."""

    def _send(self) -> None:
        with self.lock:
            data = self.robot.data_to_send()
        if data:
            noise = self.noise
            if noise is not None:
                data = noise.apply(data)
            if not self.link.write(data):
                with self.lock:
                    self.robot.receive_data(b"")

    def run(self, stop: threading.Event) -> None:
        link = self.link
        clock = self.clock
        self.robot_clock.resume()
        next_tick = clock()
        while not stop.is_set():
            timeout = max(0.0, next_tick - clock())
            try:
                readable, _, _ = select.select(link.handles(), [], [], timeout)
            except InterruptedError:
                continue
            for handle in readable:
                data = link.on_readable(handle)
                if data is None:
                    continue
                noise = self.noise
                if data and noise is not None:
                    data = noise.apply(data)
                    if not data:
                        continue
                with self.lock:
                    self.robot.receive_data(data)
                self._send()
            now = clock()
            if now >= next_tick:
                robot_now = self.robot_clock.advance(now)
                with self.lock:
                    left = self.robot.step(robot_now, interrupt=stop.is_set)
                if left > 0.0:  # stopped in the middle of the step: resume from where the robot is
                    self.robot_clock.give_back(left)
                    break
                self._send()
                self.stepped_at = now
                next_tick += self.tick
                if next_tick < now:  # fell behind (a paused process): do not try to catch up tick by tick
                    next_tick = now + self.tick


def _serve(
    transport: Transport,
    robot_factory: Callable[[], P2osRobot],
    host: str,
    port: int,
    tick: float,
    max_step: float,
    link_noise: LinkNoise | None,
    stop: threading.Event | None,
    on_ready: Callable[[str], None] | None,
) -> None:
    _check_timing(tick, max_step)
    robot = robot_factory()
    link = open_link(transport, host, port)
    try:
        (on_ready or print)(link.url)
        loop = _Loop(robot, link, tick, threading.RLock(), link_noise, _RobotClock(max_step))
        loop.run(stop or threading.Event())
    finally:
        link.close()


def serve_tcp(
    robot_factory: Callable[[], P2osRobot],
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    tick: float = 0.01,
    max_step: float = MAX_STEP,
    link_noise: LinkNoise | None = None,
    stop: threading.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a robot over TCP in this thread, one client at a time, until ``stop`` is set.

    The robot is made once; a client that disconnects ends its session (the robot stops), so the next one finds
    it closed. Setting ``stop`` ends serving within one 10 ms physics step of the robot, however slow its world.

    Args:
        robot_factory: makes the robot (called once, before listening).
        host: address to listen on (the loopback by default; "0.0.0.0" for every interface).
        port: TCP port; 0 picks a free one.
        tick: s between steps of the robot.
        max_step: s of time one step simulates at most (see :data:`MAX_STEP`); at least ``tick``.
        link_noise: noise applied to the bytes in both directions, or None.
        stop: serving ends when it is set; None serves until the process is interrupted.
        on_ready: called with the URL a client should open (``socket://HOST:PORT``); default: print it.

    Raises:
        EmulatorError: the port cannot be listened on.
        ConfigError: the factory's robot configuration is wrong.
        ValueError: a tick <= 0 or a max_step shorter than the tick.
    """
    _serve("tcp", robot_factory, host, port, tick, max_step, link_noise, stop, on_ready)


def serve_pty(
    robot_factory: Callable[[], P2osRobot],
    *,
    tick: float = 0.01,
    max_step: float = MAX_STEP,
    link_noise: LinkNoise | None = None,
    stop: threading.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a robot on a new pseudo-terminal in this thread until ``stop`` is set.

    A client opens the path with ``serial.serial_for_url(path)`` (any baud rate: a pty ignores it).

    Args:
        robot_factory: makes the robot (called once).
        tick: s between steps of the robot.
        max_step: s of time one step simulates at most (see :data:`MAX_STEP`); at least ``tick``.
        link_noise: noise applied to the bytes in both directions, or None.
        stop: serving ends when it is set; None serves until the process is interrupted.
        on_ready: called with the pty's path (e.g. ``/dev/pts/5``); default: print it.

    Raises:
        EmulatorError: no pseudo-terminal could be created.
        ValueError: a tick <= 0 or a max_step shorter than the tick.
    """
    _serve("pty", robot_factory, "", 0, tick, max_step, link_noise, stop, on_ready)


class P2osEmulator(LinkServer):
    """A robot served in a background thread over TCP or a pseudo-terminal; a context manager.

    Args:
        robot: the robot core; default a p3dx in an empty world.
        transport: "tcp" or "pty".
        host: TCP address to listen on.
        port: TCP port; 0 (the default) picks a free one, see :attr:`port`.
        tick: s between steps of the robot (10 ms by default).
        max_step: s of time one step simulates at most (:data:`MAX_STEP` by default; at least ``tick``); the rest
            of a longer gap is skipped and counted in :attr:`skipped_time`.
        link_noise: noise applied to the bytes in both directions, or None; may be changed while running.
        clock: the wall clock, s (``time.monotonic`` by default; a test's fake clock drives the robot's time).

    Raises:
        ValueError: an unknown transport, a tick <= 0 or a max_step shorter than the tick.
    """

    def __init__(
        self,
        robot: P2osRobot | None = None,
        *,
        transport: Transport = "tcp",
        host: str = "127.0.0.1",
        port: int = 0,
        tick: float = 0.01,
        max_step: float = MAX_STEP,
        link_noise: LinkNoise | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_timing(tick, max_step)
        self._loop: _Loop | None = None
        super().__init__(transport=transport, host=host, port=port, link_noise=link_noise, name="p2os-emulator")
        self.robot = robot if robot is not None else P2osRobot()
        self._tick = tick
        self._clock = clock
        self._robot_clock = _RobotClock(max_step)

    def _on_open(self, link: Link) -> None:
        self._loop = _Loop(self.robot, link, self._tick, self.lock, self._noise, self._robot_clock, self._clock)

    def _serve(self, link: Link, stop: threading.Event) -> None:
        assert self._loop is not None
        self._loop.run(stop)

    @property
    def stepped_at(self) -> float | None:
        """The time, by the emulator's clock (``clock``), of the newest step of the robot whose output has been
        handed to the transport; None before the first. A test that moves a fake clock on waits until this reaches
        it: then every byte the robot sent up to that time has been written."""
        loop = self._loop
        return loop.stepped_at if loop is not None else None

    @property
    def skipped_time(self) -> float:
        """s of wall-clock time not simulated because a step came more than ``max_step`` after the last one; the
        robot's time trails the wall clock by that much."""
        return self._robot_clock.skipped_time

    @property
    def late_steps(self) -> int:
        """Steps that came more than ``max_step`` after the last one (and skipped some time)."""
        return self._robot_clock.late_steps

    @property
    def link_noise(self) -> LinkNoise | None:
        """The noise applied to the bytes in both directions (settable while running; None for a clean link)."""
        return self._noise

    @link_noise.setter
    def link_noise(self, noise: LinkNoise | None) -> None:
        self._noise = noise
        if self._loop is not None:
            self._loop.noise = noise


def true_pose(emulator: P2osEmulator, now: float, clock: Callable[[], float] = time.monotonic) -> msgs.Odometry:
    """The emulated Pioneer's true pose and velocities as a ``Sim/Truth`` value (read under the emulator's lock, so
    never half a physics step), stamped with the time of the robot's step that reached them: ``now`` (the stamp's
    clock, s) less how long ago by ``clock`` (the emulator's) that step was. On a busy computer the emulator's thread
    may wait a while for its turn: a pose stamped with the time it is read would be dated late."""
    with emulator.lock:
        x, y, theta = emulator.robot.truth_pose
        v, omega = emulator.robot.truth_velocity
        stepped = emulator.stepped_at
    age = 0.0 if stepped is None else max(0.0, clock() - stepped)
    return msgs.Odometry(stamp=now - age, x=x, y=y, theta=theta, v=v, omega=omega)


class P2osEmulatorParams(EmulatorParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    rate_hz: rate of ``Sim/Truth``, Hz.
    port: TCP port (8101 by default, as MobileSim's).
    model: the Pioneer model (``p3dx``, ``p3at``, ...).
    world: a shipped world (``office``, ``campus``, ``clutter``) or a map file.
    watchdog: s without a command after which the robot stops by itself (as set in its flash).
    max_step: s of time one step of the robot simulates at most: after a longer wait for the CPU the emulator
        catches up that much and skips the rest (the robot's time then trails the wall clock). A robot does not stop
        while its computer is busy, and the other emulators (the DMU's gyro) measure it as moving all along: it
        catches up a second by default, where ``pluto p2os-emulate`` skips all but 0.1 s.
    """

    rate_hz: Rate = 50.0
    port: Port = 8101
    model: str = "p3dx"
    world: str = "office"
    watchdog: Timeout = 2.0
    max_step: Annotated[float, between(0.01, 10.0)] = 1.0


class P2osEmulatorModule(Module[P2osEmulatorParams]):
    """A Pioneer in a world served over P2OS, its true pose on ``Sim/Truth``."""

    name = "p2os-emulator"
    description = "an emulated Pioneer robot in a world, served over P2OS on TCP; its true pose on Sim/Truth"
    provides = (names.SIM_TRUTH,)
    Params = P2osEmulatorParams

    def on_configure(self) -> None:
        from pluto.sim.world import load_world

        p = self.params
        world = p.site(load_world(p.world)).world
        robot = P2osRobot(p.model, world=world, watchdog=p.watchdog, noise=p.profile(), rng=p.rng("base"))
        self.emulator = P2osEmulator(robot, port=p.port, link_noise=p.line_noise("base"), max_step=p.max_step).start()
        self.truth = self.create_publisher(names.SIM_TRUTH)
        self._last_stamp = -math.inf
        self.get_logger().info("Pioneer %s in world %s on %s", p.model, p.world, self.emulator.url)

    def step(self, now: float) -> None:
        # the true pose is read under the emulator's lock (never half a physics step), stamped with the time of the
        # physics step it comes from: the time now, not this step's (this thread may have waited for its turn
        # since), and each physics step's pose once
        truth = true_pose(self.emulator, self.clock.now())
        if truth.stamp > self._last_stamp:
            self._last_stamp = truth.stamp
            self.truth.write(truth)

    def on_shutdown(self) -> None:
        emulator = getattr(self, "emulator", None)
        if emulator is not None:
            emulator.stop()
