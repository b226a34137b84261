"""A client program dies while the robot drives, and the next one connects: the emulator over TCP, an ARIA-style
client, and a fake clock that drives the robot's time.

ARIA's connection loop (its ArRobot's asynchronous connect handler) sends SYNC0, SYNC1, SYNC2 and reads one packet
after each: the echo it waits for moves it on, a *stopped* SIP (0x32) makes it send CLOSE and start over, anything
else (a *moving* SIP, 0x33) starts it over; after 50 tries it gives up. :class:`AriaStyleClient` does the same. A
robot that keeps driving (and keeps answering with 0x33) therefore cannot be reconnected to: that is the failure
these tests guard against, both when the dead program's connection closes and when it simply falls silent and the
next program talks on the same line: a TCP connection left open, or the emulator's pseudo-terminal (``--pty``, the
serial stand-in), where ARIA also sleeps 80 ms between two tries, so the SIPs of the old session pile up in the
line meanwhile.

Every wait is either for the emulator to act on what was sent (its counters) or for it to step to the fake clock's
time (:attr:`P2osEmulator.stepped_at`); the robot's time is the only time measured.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from pluto.hardware.base.p2os import Command, P2osDecoder, Sip, SyncReply, encode_command
from pluto.hardware.base.p2os.decoder import Event
from pluto.hardware.base.p2os.emulate import P2osEmulator
from pluto.hardware.base.p2os.robot import P2osRobot

DT = 0.05  # s of the robot's time per advance of the fake clock (at most the emulator's MAX_STEP)
TICK = 0.001  # s of wall time between the emulator loop's looks at the fake clock
GUARD = 5.0  # s of wall time the emulator gets to act on one thing (a hang guard, not a measure)
WATCHDOG = 2.0  # s, the robot's watchdog (P2OS's default)
STOP_WITHIN = 2.5  # s of the robot's time after the last command by which it must stand still


class FakeClock:
    """The emulator's clock: it moves only when the test says so."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _wait(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not predicate():
        assert time.monotonic() < deadline, f"the emulator did not {what} within {GUARD} s"
        time.sleep(0.0005)


@dataclass
class Rig:
    """An emulator on a fake clock; samples of the robot's true velocity (robot time, v, omega) at every step."""

    emulator: P2osEmulator
    clock: FakeClock
    samples: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def robot(self) -> P2osRobot:
        return self.emulator.robot

    def advance(self, dt: float = DT) -> None:
        """Move the clock on by ``dt`` (at most the emulator's MAX_STEP) and wait until the emulator has stepped
        there and written what it sent."""
        self.clock.t += dt
        _wait(lambda: self.emulator.stepped_at == self.clock.t, "step")
        with self.emulator.lock:
            v, omega = self.robot.truth_velocity
            self.samples.append((self.robot.time, v, omega))

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / DT)):
            self.advance()

    def packets(self) -> int:
        with self.emulator.lock:
            return self.robot.counters.packets

    def sessions_ended(self) -> int:
        with self.emulator.lock:
            return self.robot.counters.sessions_ended

    def robot_time(self) -> float:
        with self.emulator.lock:
            return self.robot.time

    def stopped_since(self) -> float:
        """The robot's time from which every sample shows it standing still (inf if the last one moves)."""
        since = math.inf
        for t, v, omega in reversed(self.samples):
            if v != 0.0 or omega != 0.0:
                break
            since = t
        return since

    def connect(self) -> socket.socket:
        """A new TCP connection to the emulator, once it has accepted it."""
        before = self.emulator.connections
        sock = socket.create_connection(("127.0.0.1", self.emulator.port), timeout=GUARD)
        _wait(lambda: self.emulator.connections > before, "accept the connection")
        return sock


class PtyLine:
    """The client's end of the emulator's pseudo-terminal, with the calls :class:`AriaStyleClient` makes of a
    socket."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)

    def setblocking(self, flag: bool) -> None:
        os.set_blocking(self.fd, flag)

    def recv(self, size: int) -> bytes:
        return os.read(self.fd, size)  # BlockingIOError when nothing waits, as a socket

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        os.close(self.fd)


class AriaStyleClient:
    """A P2OS client that connects the way ARIA does, over a socket or a serial line, on the rig's clock.

    Args:
        rig: the emulator and its clock.
        sock: the connection (a new one, or one a dead program left behind), or the pseudo-terminal.
        pause: s of the robot's time between two tries (ARIA sleeps 80 ms; 0 answers at once).
    """

    MAX_TRIES = 50
    NO_PACKET_LIMIT = 10
    RECEIVE_TIMEOUT = 1.0  # s of the robot's time ARIA waits for the answer to each SYNC
    CLOSE_DRAIN = 0.5  # s of the robot's time it reads (and drops) packets after sending CLOSE

    def __init__(self, rig: Rig, sock: socket.socket | PtyLine, pause: float = 0.0) -> None:
        self.rig = rig
        self.sock = sock
        self.pause = pause
        self.decoder = P2osDecoder("client")
        self.queue: deque[Event] = deque()
        self.tries = 0
        self.closes = 0
        sock.setblocking(False)
        self._drain()
        self.queue.clear()  # a new program does not see what was sent to the dead one

    def _drain(self) -> None:
        """Decode every byte that has arrived (all the emulator wrote up to its last step)."""
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            if not data:
                raise ConnectionError("the emulator closed the connection")
            self.decoder.receive_data(data)
            self.queue.extend(self.decoder.events())

    def send(self, command: Command | int, argument: int | None = None) -> None:
        """Send one command and wait until the robot has taken it in (its echo, if any, is then on the wire)."""
        before = self.rig.packets()
        self.sock.sendall(encode_command(command, argument))
        _wait(lambda: self.rig.packets() > before, "receive a command")

    def receive(self, timeout: float) -> Event | None:
        """The next packet, waiting up to ``timeout`` s of the robot's time; None if none came."""
        deadline = self.rig.clock.t + timeout
        while True:
            self._drain()
            if self.queue:
                return self.queue.popleft()
            if self.rig.clock.t >= deadline - 1e-9:
                return None
            self.rig.advance()

    def connect(self) -> SyncReply | None:
        """SYNC0, SYNC1, SYNC2 as ARIA does them, then OPEN; the SYNC2 echo once a SIP came, or None (gave up)."""
        state = 0
        no_packet = 0
        while self.tries < self.MAX_TRIES:
            self.tries += 1
            self.send(state)
            packet = self.receive(self.RECEIVE_TIMEOUT)
            if packet is None:
                no_packet += 1
                if no_packet > self.NO_PACKET_LIMIT:
                    return None
                state = 0
            elif isinstance(packet, Sip) and not packet.moving:  # a robot still open from an earlier session
                self._close_and_drain()
                state = 0
            elif isinstance(packet, SyncReply) and packet.sync == state:
                state += 1
                if state == 3:
                    return self._open(packet)
            else:
                state = 0
            if self.pause:
                self.rig.advance(self.pause)
        return None

    def _close_and_drain(self) -> None:
        self.send(Command.CLOSE, 1)
        self.closes += 1
        deadline = self.rig.clock.t + self.CLOSE_DRAIN
        while self.rig.clock.t < deadline - 1e-9:
            packet = self.receive(deadline - self.rig.clock.t)
            if isinstance(packet, Sip) and not packet.moving:
                self.send(Command.CLOSE, 1)
                self.closes += 1

    def _open(self, reply: SyncReply) -> SyncReply | None:
        self.send(Command.OPEN, 1)
        while (packet := self.receive(self.RECEIVE_TIMEOUT)) is not None:
            if isinstance(packet, Sip):
                return reply
        return None

    def drive(self, velocity_mm_s: int, seconds: float, refresh: float = 0.5) -> float:
        """ENABLE, then VEL every ``refresh`` s for ``seconds`` (as ARIA's state reflector repeats its motion
        commands); returns the robot's time of the last VEL."""
        self.send(Command.ENABLE, 1)
        last = -math.inf
        for _ in range(round(seconds / refresh)):
            self.send(Command.VEL, velocity_mm_s)
            last = self.rig.robot_time()
            self.rig.run(refresh)
            self._drain()
        return last


@pytest.fixture
def rig() -> Iterator[Rig]:
    clock = FakeClock()
    with P2osEmulator(P2osRobot("p3dx", watchdog=WATCHDOG), tick=TICK, clock=clock) as emulator:
        rig = Rig(emulator, clock)
        _wait(lambda: emulator.stepped_at == clock.t, "take its first step")
        yield rig


@pytest.mark.parametrize("how", ["crashed", "silent"])
def test_the_next_aria_client_connects_after_one_died_while_driving(rig: Rig, how: str) -> None:
    first_sock = rig.connect()
    try:
        first = AriaStyleClient(rig, first_sock)
        assert first.connect() is not None
        last_command = first.drive(300, 1.0)  # 0.3 m/s
        with rig.emulator.lock:
            assert rig.robot.truth_velocity[0] == pytest.approx(0.3)
            moving_at = rig.robot.truth_pose
        if how == "crashed":
            # The program dies: its connection closes without CLOSE; the next program connects anew.
            ended = rig.sessions_ended()
            first_sock.close()
            _wait(lambda: rig.sessions_ended() > ended, "notice the disconnection")
            sock = rig.connect()
        else:
            # The program hangs (nothing more from it); the next one talks on the same line, as on a serial port.
            sock = first_sock
        second = AriaStyleClient(rig, sock)
        reply = second.connect()
        assert reply is not None, f"the next client gave up after {second.tries} tries"
        assert (reply.name, reply.subclass) == ("Pluto", "p3dx")
        rig.run(0.5)
        with rig.emulator.lock:
            assert rig.robot.state == "open"
            assert not rig.robot.motors_enabled  # the new client has not enabled them
            stopped_at = rig.robot.truth_pose
        # The robot stood still within 2.5 s of the last command, by its own time, and stays so.
        assert rig.stopped_since() - last_command <= STOP_WITHIN
        assert math.dist(moving_at[:2], stopped_at[:2]) <= 0.3 * STOP_WITHIN
        if sock is not first_sock:
            sock.close()
    finally:
        first_sock.close()


@pytest.fixture
def pty_rig() -> Iterator[Rig]:
    clock = FakeClock()
    robot = P2osRobot("p3dx", watchdog=WATCHDOG)
    with P2osEmulator(robot, transport="pty", tick=TICK, clock=clock) as emulator:
        rig = Rig(emulator, clock)
        _wait(lambda: emulator.stepped_at == clock.t, "take its first step")
        yield rig


@pytest.mark.parametrize("delay", [0.0, 0.5, 1.0])
def test_the_next_aria_client_connects_on_the_serial_line_a_dead_one_left_moving(pty_rig: Rig, delay: float) -> None:
    # Nothing tells the robot on a serial line that its client died: the session stays open, the robot moving
    # until the watchdog, and the next program (0 to 1 s later) talks on the same line, pausing between tries as
    # ARIA does. It gets moving SIPs, then stopped ones once the watchdog has disabled the motors, closes the old
    # session and synchronises.
    rig = pty_rig
    line = PtyLine(rig.emulator.pty_path)
    try:
        first = AriaStyleClient(rig, line)
        assert first.connect() is not None
        last_command = first.drive(300, 1.0)  # 0.3 m/s
        for _ in range(round(delay / DT)):
            rig.advance()
        second = AriaStyleClient(rig, line, pause=0.08)
        reply = second.connect()
        assert reply is not None, f"the next client gave up after {second.tries} tries"
        assert (reply.name, reply.subclass) == ("Pluto", "p3dx") and second.closes >= 1
        rig.run(0.5)
        with rig.emulator.lock:
            assert rig.robot.state == "open" and not rig.robot.motors_enabled
            assert rig.robot.counters.watchdog_trips == 1
        assert rig.stopped_since() - last_command <= STOP_WITHIN
    finally:
        line.close()
